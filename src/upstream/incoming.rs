//! What an upstream says: responses to the pending requests, notifications (progress mapped
//! back to the client's token, list changes and broadcasts to the aggregator, the rest to
//! the client whose call they belong to), and server→client requests, forwarded under an
//! unguessable id to the one client they belong to (see [`super::route`]) and answered from
//! that client only.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::{Event, Upstream, route};
use crate::context::Outbound;
use crate::error::Error;
use crate::jsonrpc::{Id, Kind, Message, to_raw};
use crate::lock::lock;
use crate::mcp::method::Method;

impl Upstream {
    /// A message the server sent with an unpaired UTF-16 surrogate escape at byte `at`
    /// (`DecodeError::LoneSurrogate`): never passed on. An answer becomes the
    /// `mcp_budget.upstream.protocol` error of the call waiting for it (which need not wait for
    /// its timeout); a notification or a request of the server is dropped.
    pub(crate) fn invalid_text(&self, msg: Message, at: usize, hint: Option<&Outbound>) {
        tracing::warn!(
            upstream = self.name(),
            method = msg.method(),
            at,
            "Message with an unpaired UTF-16 surrogate from upstream refused"
        );
        if matches!(msg.kind(), Kind::Response | Kind::Error) {
            let refused = Error::UpstreamProtocol {
                upstream: self.name().to_owned(),
                reason: format!(
                    "its answer escapes an unpaired UTF-16 surrogate at byte {at}, which is \
                     not Unicode text"
                ),
            };
            let id = msg.id.unwrap_or(Id::Null);
            self.incoming(Message::error(id, refused.to_error_object()), hint);
        }
    }

    /// Handles one message the server sent. `hint` is where server→client requests go when
    /// the transport tells (the HTTP response stream of a POST).
    pub(crate) fn incoming(&self, msg: Message, hint: Option<&Outbound>) {
        match msg.kind() {
            Kind::Response | Kind::Error => {
                let Some(Id::Number(id)) = msg.id else {
                    tracing::warn!(upstream = self.name(), id = ?msg.id, "Response with an id the gateway never sent; dropped");
                    return;
                };
                let pending = lock(&self.inner.pending).remove(&id);
                match pending {
                    Some(p) => {
                        if let Some(token) = p.progress {
                            lock(&self.inner.progress).remove(&token);
                        }
                        let _ = p.reply.send(msg);
                    }
                    None => {
                        tracing::debug!(upstream = self.name(), id, "Late response dropped");
                    }
                }
            }
            Kind::Notification => self.incoming_notification(msg, hint),
            Kind::Request => self.incoming_request(msg, hint),
        }
    }

    fn incoming_notification(&self, mut msg: Message, hint: Option<&Outbound>) {
        let method = Method::parse(msg.method().unwrap_or_default());
        match method {
            Method::Progress => {
                let Ok(Value::Object(mut params)) = msg.params_as::<Value>() else {
                    return;
                };
                let token = params
                    .get("progressToken")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let route = token.and_then(|t| lock(&self.inner.progress).get(&t).cloned());
                if let Some((theirs, out, id)) = route {
                    if let Some(p) = lock(&self.inner.pending).get_mut(&id) {
                        p.alive = Some(tokio::time::Instant::now());
                    }
                    params.insert("progressToken".into(), theirs);
                    msg.params = Some(to_raw(&Value::Object(params)));
                    let _ = out.send(msg);
                }
            }
            Method::ToolsListChanged
            | Method::PromptsListChanged
            | Method::ResourcesListChanged => {
                if let Some(kind) = method.list_changed() {
                    let _ = self
                        .inner
                        .events
                        .send(Event::ListChanged(self.inner.index, kind));
                }
            }
            Method::ResourcesUpdated => {
                let _ = self
                    .inner
                    .events
                    .send(Event::Broadcast(self.inner.index, msg));
            }
            Method::SubscriptionsAcknowledged => {
                tracing::debug!(upstream = self.name(), "subscriptions/listen acknowledged");
            }
            Method::Cancelled => self.server_cancelled(msg),
            // Logs, and whatever else a server says: to the client whose call it belongs to.
            // A log of no call goes to the sessions that asked for its level; anything else
            // that cannot be attributed reaches nobody.
            _ => match self.owner(&msg, hint) {
                route::Owner::Client(out) => {
                    let _ = out.send(msg);
                }
                route::Owner::Nobody if method == Method::LogMessage => {
                    let _ = self.inner.events.send(Event::Log(self.inner.index, msg));
                }
                owner => {
                    self.inner.unrouted.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(
                        upstream = self.name(),
                        method = method.as_str(),
                        ?owner,
                        "Notification of no certain client dropped"
                    );
                }
            },
        }
    }

    /// The client a server→client message belongs to (see [`route`]).
    fn owner(&self, msg: &Message, hint: Option<&Outbound>) -> route::Owner<Outbound> {
        let named = msg
            .params
            .as_ref()
            .filter(|p| p.get().contains("progressToken"))
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .and_then(|p| {
                let token = route::named_token(&p)?;
                lock(&self.inner.progress)
                    .get(token)
                    .map(|(_, out, _)| out.clone())
            });
        let pending = lock(&self.inner.pending);
        let in_flight = pending.iter().filter_map(|(id, p)| {
            let out = p.outbound.as_ref()?;
            Some((*id, out.session(), out))
        });
        route::owner(hint, named.as_ref(), in_flight).map_client(Outbound::clone)
    }

    /// The server gave up on a request it sent a client: the client that holds it is told,
    /// under the id it knows.
    fn server_cancelled(&self, mut msg: Message) {
        let Ok(Value::Object(mut params)) = msg.params_as::<Value>() else {
            return;
        };
        let Some(theirs) = params
            .get("requestId")
            .and_then(|v| serde_json::from_value::<Id>(v.clone()).ok())
        else {
            return;
        };
        let held = {
            let mut asked = lock(&self.inner.server_requests);
            let key = asked
                .iter()
                .find(|(_, (original, _, _))| *original == theirs)
                .map(|(key, _)| key.clone());
            key.and_then(|key| asked.remove(&key).map(|(_, out, _)| (key, out)))
        };
        if let Some((key, out)) = held {
            params.insert("requestId".into(), Value::String(key));
            msg.params = Some(to_raw(&Value::Object(params)));
            let _ = out.send(msg);
        }
    }

    fn incoming_request(&self, mut msg: Message, hint: Option<&Outbound>) {
        let Some(original) = msg.id.clone() else {
            return;
        };
        let method = Method::parse(msg.method().unwrap_or_default());
        // What the gateway answers itself: a liveness check, and roots the policy declares.
        if method == Method::Ping {
            let _ = self.notify(Message::response_value(original, &json!({})));
            return;
        }
        if let (true, Some(roots)) = (method == Method::RootsList, self.inner.spec.roots.as_ref()) {
            let _ = self.notify(Message::response_value(
                original,
                &json!({ "roots": roots }),
            ));
            return;
        }
        let out = match self.owner(&msg, hint) {
            route::Owner::Client(out) => out,
            route::Owner::Nobody if method == Method::RootsList => {
                // No client is calling: no roots is the truthful answer (declared roots would
                // have been given above), and servers handle it better than an error.
                let _ = self.notify(Message::response_value(original, &json!({"roots": []})));
                return;
            }
            owner => {
                self.refuse_unroutable(original, method.as_str(), &owner);
                return;
            }
        };
        // Unguessable, so that no other session can answer in this client's place.
        let gateway_id = super::asked_id(self.inner.index, self.inner.replica.as_deref());
        let gone: Vec<(Id, Outbound)> = {
            let mut asked = lock(&self.inner.server_requests);
            let closed: Vec<String> = (asked.iter())
                .filter(|(_, (_, to, _))| to.is_closed())
                .map(|(key, _)| key.clone())
                .collect();
            let gone = (closed.iter())
                .filter_map(|key| asked.remove(key))
                .map(|(original, to, _)| (original, to))
                .collect();
            let now = tokio::time::Instant::now();
            asked.insert(gateway_id.clone(), (original, out.clone(), now));
            gone
        };
        self.client_gone(gone);
        self.touch_client(&out);
        self.expire_later(gateway_id.clone(), method);
        // Its call now waits on the client: a turn it has alone is lent meanwhile.
        self.lend_turn(out.session());
        msg.id = Some(Id::String(gateway_id));
        let _ = out.send(msg);
    }

    /// Ends server→client request `gateway_id` if its client has not answered it within
    /// `server_request_timeout_secs` (see [`Upstream::expire`]). The timer holds no strong
    /// reference to the upstream and stops when the upstream does.
    fn expire_later(&self, gateway_id: String, method: Method) {
        let inner = std::sync::Arc::downgrade(&self.inner);
        let limit = self.inner.spec.server_request_timeout;
        let shutdown = self.inner.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(limit) => {}
                () = shutdown.cancelled() => return,
            }
            if let Some(inner) = inner.upgrade() {
                Self { inner }.expire(&gateway_id, &method, limit);
            }
        });
    }

    /// A server→client request its client left unanswered for `limit`: the client is told to
    /// drop it, the upstream gets [`Error::ClientTimeout`] as the answer, and the client's call
    /// it belongs to (when one call of that client on this upstream is certainly it) fails
    /// with the same error and is cancelled upstream, so that nothing waits on it any more.
    fn expire(&self, gateway_id: &str, method: &Method, limit: std::time::Duration) {
        let Some((original, out, asked)) = lock(&self.inner.server_requests).remove(gateway_id)
        else {
            return;
        };
        let err = Error::ClientTimeout {
            upstream: self.name().to_owned(),
            method: method.as_str().to_owned(),
            timeout: limit,
        };
        tracing::warn!(upstream = self.name(), method = method.as_str(), error = %err, "Server request expired");
        let reason = err.to_string();
        let cancelled = json!({ "requestId": gateway_id, "reason": reason });
        let _ = out.send(Message::notification(
            Method::Cancelled.as_str(),
            Some(to_raw(&cancelled)),
        ));
        let calls: Vec<i64> = lock(&self.inner.pending)
            .iter()
            .filter(|(_, p)| {
                p.sent <= asked && p.outbound.as_ref().is_some_and(|o| o.same_channel(&out))
            })
            .map(|(id, _)| *id)
            .collect();
        if let [call] = calls[..]
            && let Some(p) = self.forget(call)
        {
            let _ = p
                .reply
                .send(Message::error(Id::Number(call), err.to_error_object()));
            self.stop_request(call, p.abort, Some(&reason));
        }
        let _ = self.answer_when_alone(
            out.session(),
            Message::error(original, err.to_error_object()),
        );
    }

    /// Requests whose client has gone (the stream they were sent on closed: the call was given
    /// up, or the session ended) will never be answered: each gets an error answer now, so that
    /// every request of the server gets exactly one.
    fn client_gone(&self, gone: Vec<(Id, Outbound)>) {
        for (original, to) in gone {
            let err = Error::Cancelled {
                reason: Some("the client that was asked has gone".to_owned()),
            };
            tracing::debug!(
                upstream = self.name(),
                session = to.session(),
                "Server request of a gone client answered"
            );
            let _ = self.answer_when_alone(
                to.session(),
                Message::error(original, err.to_error_object()),
            );
        }
    }

    /// Answers a server→client request that no client may be asked with an error that says
    /// why and what fixes it; logged and counted.
    fn refuse_unroutable(&self, original: Id, method: &str, owner: &route::Owner<Outbound>) {
        self.inner.unrouted.fetch_add(1, Ordering::Relaxed);
        let (reason, ambiguous) = match owner {
            route::Owner::Ambiguous(n) => (
                format!(
                    "{n} clients have requests in flight to this shared server and the request \
                     names none of them (no progress token of theirs), so the gateway does not \
                     guess whose it is; declare the server's roots in the policy \
                     ([[upstream]] roots) or give each client its own server \
                     ([[upstream]] share = \"per_client\")"
                ),
                true,
            ),
            _ => (
                "no client of the gateway has a request in flight to this server".to_owned(),
                false,
            ),
        };
        let err = Error::Unroutable {
            upstream: self.name().to_owned(),
            method: method.to_owned(),
            reason,
            ambiguous,
        };
        tracing::warn!(upstream = self.name(), method, error = %err, "Server request refused");
        let _ = self.notify(Message::error(original, err.to_error_object()));
    }

    /// Delivers the gateway's own answer to a server→client request it forwarded
    /// (`gateway_id` is the id the client saw), whichever client was asked.
    ///
    /// # Errors
    /// [`Error::NotFound`] when no such request is waiting.
    pub fn answer_server_request(&self, gateway_id: &str, msg: Message) -> Result<(), Error> {
        self.answer(gateway_id, msg, None)
    }

    /// Delivers a client's response to a server→client request the gateway forwarded: taken
    /// only from the session the request was sent to, and only once.
    ///
    /// # Errors
    /// [`Error::UnknownRequest`] when no request with that id waits for an answer from
    /// `session` (none was sent, it was answered already, or it was sent to another session).
    pub fn answer_from(&self, gateway_id: &str, msg: Message, session: &str) -> Result<(), Error> {
        self.answer(gateway_id, msg, Some(session))
    }

    fn answer(&self, gateway_id: &str, mut msg: Message, from: Option<&str>) -> Result<(), Error> {
        let taken = {
            let mut asked = lock(&self.inner.server_requests);
            let ours = asked
                .get(gateway_id)
                .is_some_and(|(_, to, _)| from.is_none_or(|s| to.session() == s));
            if ours { asked.remove(gateway_id) } else { None }
        };
        let Some((original, asked, _)) = taken else {
            return Err(Error::UnknownRequest {
                id: gateway_id.to_owned(),
            });
        };
        self.touch_client(&asked);
        msg.id = Some(original);
        self.answer_when_alone(asked.session(), msg)
    }

    /// How many server→client messages reached no client so far (owner ambiguous or
    /// missing): requests were refused, notifications dropped.
    #[must_use]
    pub fn unrouted(&self) -> u64 {
        self.inner.unrouted.load(Ordering::Relaxed)
    }
}
