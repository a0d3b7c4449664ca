//! Calls between clients and upstreams of different protocol eras.
//!
//! | client ↓ / upstream → | 2025-11-25 | 2026-07-28 |
//! |---|---|---|
//! | **2025-11-25** | as is | the upstream's `input_required` results are turned into real server→client requests ([`Gateway::ask_client`]), and the call is retried with the answers; modern result fields are removed |
//! | **2026-07-28** | the upstream's server→client requests park the call and become an `input_required` result ([`Gateway::drive`]); the client's retry (`requestState` of the gateway) resumes it | as is (the upstream's own `requestState` passes through) |
//!
//! Also here: `subscriptions/listen` for modern clients ([`Gateway::listen`]) and the routing
//! of task requests to the upstream that created the task.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::{lock, open_cursor, seal_cursor, Gateway};
use crate::context::{Caller, Outbound};
use crate::error::Error;
use crate::jsonrpc::{to_raw, Id, Kind, Message};
use crate::mcp::bridge;
use crate::upstream::Upstream;

/// Prefix of the `requestState` the gateway hands out for calls it parked.
const STATE_PREFIX: &str = "mcpb1.";
/// Prefix of the ids of server→client requests the gateway itself sends (MRTR shim).
pub(super) const SHIM_PREFIX: &str = "mcpb-shim-";
/// Empty upstream pages `tasks/list` reads through before answering an empty page.
const MAX_EMPTY_TASK_PAGES: usize = 32;

/// How long a parked call waits for the client's retry.
const PARK_TTL: Duration = Duration::from_secs(300);
/// Most rounds of `input_required` answered for one 2025-era client call.
const MAX_ROUNDS: usize = 16;
/// `_meta` key naming the `subscriptions/listen` request a notification belongs to.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// A call to a 2025-era upstream, waiting for a modern client to answer what the upstream
/// asked.
pub(super) struct Parked {
    upstream: usize,
    upstream_id: i64,
    call: tokio::task::JoinHandle<Result<Message, Error>>,
    messages: mpsc::UnboundedReceiver<Message>,
    /// Keys of the server requests the client was asked (their gateway ids).
    asked: Vec<String>,
}

/// A modern client's `subscriptions/listen` stream.
pub(super) struct Listener {
    outbound: Outbound,
    subscription: Value,
    kinds: Vec<String>,
    resources: Vec<String>,
}

/// The error (`-32021` to a modern client) when server→client request `method` of `upstream`
/// needs a capability that the client did not declare.
fn undeclared(upstream: &Upstream, method: &str, caller: &Caller) -> Option<Error> {
    let cap = bridge::capability_for(method)?;
    (!caller.session.has_capability(cap)).then(|| Error::ClientInput {
        upstream: upstream.name().to_owned(),
        reason: format!("{method}, and the client did not declare the {cap:?} capability"),
        missing_capability: Some(cap.to_owned()),
    })
}

impl Gateway {
    /// Sends a request of client `caller` to upstream `i` in the upstream's era, and brings
    /// the answer back in the client's.
    pub(super) async fn forward_across(
        &self,
        i: usize,
        msg: &Message,
        params: Option<Box<serde_json::value::RawValue>>,
        caller: &Caller,
        upstream_id: i64,
    ) -> Result<Message, Error> {
        let upstream = &self.inner.upstreams[i];
        let method = msg.method().unwrap_or_default().to_owned();
        let client_modern = caller.session.is_modern();
        if client_modern {
            let value: Option<Value> = params
                .as_ref()
                .and_then(|p| serde_json::from_str(p.get()).ok());
            let (responses, state) = value
                .as_ref()
                .map_or((None, None), |v| bridge::retry_fields(v));
            if let Some(state) = state.filter(|s| s.starts_with(STATE_PREFIX)) {
                let responses = responses.cloned().unwrap_or_default();
                return self.resume(state, responses, msg, caller).await;
            }
            if !upstream.is_modern() {
                return self
                    .park_call(i, &method, params, caller, upstream_id, msg)
                    .await;
            }
        }
        let client = caller.session.state();
        let call = crate::upstream::Call::new(&method)
            .id(upstream_id)
            .params(params.clone())
            .outbound(caller.outbound.clone())
            .client(&client);
        let reply = upstream.request(call).await?;
        if client_modern || !upstream.is_modern() {
            return Ok(reply);
        }
        self.answer_for_legacy(i, msg, params, caller, reply, &client)
            .await
    }

    /// A modern upstream's reply, for a 2025-era client: `input_required` rounds are answered
    /// by asking the client with real requests, then retried; modern fields go.
    async fn answer_for_legacy(
        &self,
        i: usize,
        msg: &Message,
        params: Option<Box<serde_json::value::RawValue>>,
        caller: &Caller,
        mut reply: Message,
        client: &crate::context::SessionState,
    ) -> Result<Message, Error> {
        let upstream = &self.inner.upstreams[i];
        let method = msg.method().unwrap_or_default().to_owned();
        let original: Value = params
            .as_ref()
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_else(|| json!({}));
        for _ in 0..MAX_ROUNDS {
            let asked = reply
                .result
                .as_ref()
                .filter(|r| r.get().contains(bridge::INPUT_REQUIRED))
                .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
                .and_then(|r| bridge::input_required(&r));
            let Some(asked) = asked else {
                if let Some(result) = reply.result.take() {
                    reply.result = Some(crate::mcp::modern::strip_modern_fields(&result));
                }
                return Ok(reply);
            };
            let mut responses = Map::new();
            for (key, input_method, input_params) in asked.requests {
                let answer = self
                    .ask_client(upstream, caller, &input_method, input_params)
                    .await?;
                responses.insert(key, answer);
            }
            let retry =
                bridge::with_input_responses(&original, responses, asked.request_state.as_deref());
            let id = upstream.next_request_id();
            self.track(caller, msg, i, id);
            let call = crate::upstream::Call::new(&method)
                .id(id)
                .params(Some(to_raw(&retry)))
                .outbound(caller.outbound.clone())
                .client(client);
            reply = upstream.request(call).await?;
        }
        Err(Error::UpstreamProtocol {
            upstream: upstream.name().to_owned(),
            reason: format!("asked for client input more than {MAX_ROUNDS} times in one call"),
        })
    }

    /// Asks a 2025-era client what a modern upstream wants to know, with a real
    /// server→client request on the caller's stream; returns the client's result.
    async fn ask_client(
        &self,
        upstream: &Upstream,
        caller: &Caller,
        method: &str,
        params: Value,
    ) -> Result<Value, Error> {
        let input_error = |reason: String, missing: Option<&str>| Error::ClientInput {
            upstream: upstream.name().to_owned(),
            reason,
            missing_capability: missing.map(str::to_owned),
        };
        if let Some(err) = undeclared(upstream, method, caller) {
            return Err(err);
        }
        if bridge::capability_for(method).is_none() {
            return Err(input_error(
                format!("{method}, which the gateway cannot relay"),
                None,
            ));
        }
        // Unguessable, so that no other session can answer in this client's place.
        let id = format!("{SHIM_PREFIX}{}", uuid::Uuid::new_v4().simple());
        let (tx, rx) = oneshot::channel();
        lock(&self.inner.shim).insert(id.clone(), (caller.session.id.clone(), tx));
        let request = Message::request(Id::String(id.clone()), method, Some(to_raw(&params)));
        if caller.outbound.send(request).is_err() {
            lock(&self.inner.shim).remove(&id);
            return Err(input_error("the client is gone".into(), None));
        }
        let answer = tokio::time::timeout(upstream.spec().timeout, rx).await;
        lock(&self.inner.shim).remove(&id);
        match answer {
            Ok(Ok(reply)) => match (reply.result, reply.error) {
                (Some(result), _) => serde_json::from_str(result.get()).map_err(|e| {
                    input_error(format!("the client's answer is not JSON: {e}"), None)
                }),
                (None, Some(err)) => Err(input_error(
                    format!(
                        "the client refused {method}: {} ({})",
                        err.message, err.code
                    ),
                    None,
                )),
                (None, None) => Err(input_error("the client's answer is empty".into(), None)),
            },
            Ok(Err(_)) => Err(input_error("the client is gone".into(), None)),
            Err(_) => Err(input_error(
                format!("the client did not answer {method} in time"),
                None,
            )),
        }
    }

    /// A client's answer to a request of [`Gateway::ask_client`], taken only from the session
    /// that was asked, once.
    pub(super) fn answer_shim(&self, id: &str, msg: Message, session: &str) -> Result<(), Error> {
        let waiting = {
            let mut shim = lock(&self.inner.shim);
            match shim.get(id) {
                Some((asked, _)) if asked == session => shim.remove(id),
                _ => None,
            }
        };
        match waiting.map(|(_, tx)| tx.send(msg).is_ok()) {
            Some(true) => Ok(()),
            _ => Err(Error::UnknownRequest { id: id.to_owned() }),
        }
    }

    /// Starts a modern client's call on a 2025-era upstream on a task of its own, so that it
    /// can wait (parked) while the client answers what the upstream asks in the middle.
    async fn park_call(
        &self,
        i: usize,
        method: &str,
        params: Option<Box<serde_json::value::RawValue>>,
        caller: &Caller,
        upstream_id: i64,
        msg: &Message,
    ) -> Result<Message, Error> {
        let upstream = self.inner.upstreams[i].clone();
        let (tx, rx) = Outbound::channel(caller.session.id.as_str());
        let method = method.to_owned();
        let call = tokio::spawn(async move {
            let call = crate::upstream::Call::new(&method)
                .id(upstream_id)
                .params(params)
                .outbound(tx);
            upstream.request(call).await
        });
        let parked = Parked {
            upstream: i,
            upstream_id,
            call,
            messages: rx,
            asked: Vec::new(),
        };
        self.drive(parked, caller, msg).await
    }

    /// Waits for a parked call: its answer, or the next server→client requests, which park
    /// it again and become an `input_required` result. Notifications go to the caller.
    async fn drive(
        &self,
        mut parked: Parked,
        caller: &Caller,
        msg: &Message,
    ) -> Result<Message, Error> {
        self.track(caller, msg, parked.upstream, parked.upstream_id);
        // Modern clients get log notifications only when the request asked for them.
        let request: Value = msg.params_as().unwrap_or(Value::Null);
        let relay = |m: Message| {
            if m.method() == Some("notifications/message") {
                let level = m
                    .params_as::<Value>()
                    .ok()
                    .and_then(|p| p.get("level").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default();
                if !bridge::wants_log(&request, &level) {
                    return;
                }
            }
            let _ = caller.outbound.send(m);
        };
        let upstream_name = self.inner.upstreams[parked.upstream].name().to_owned();
        let finished = |joined: Result<Result<Message, Error>, tokio::task::JoinError>| {
            joined.unwrap_or_else(|e| {
                Err(Error::Internal(format!(
                    "a call to {upstream_name} failed: {e}"
                )))
            })
        };
        loop {
            tokio::select! {
                biased;
                incoming = parked.messages.recv() => match incoming {
                    Some(m) if m.kind() == Kind::Request => {
                        if self.no_roots(&parked, &m, caller) {
                            continue;
                        }
                        if let Some(err) = self.refuse_unanswerable(&parked, &m, caller) {
                            return Err(err);
                        }
                        let mut asked = vec![m];
                        while let Ok(m) = parked.messages.try_recv() {
                            if m.kind() == Kind::Request {
                                asked.push(m);
                            } else {
                                relay(m);
                            }
                        }
                        return Ok(self.park(parked, asked));
                    }
                    Some(m) => relay(m),
                    None => return finished((&mut parked.call).await),
                },
                joined = &mut parked.call => return finished(joined),
            }
        }
    }

    /// A `roots/list` for a client without roots: answered "no roots" on the spot (servers
    /// also ask it outside any call, and the call must not fail for that). True when handled.
    fn no_roots(&self, parked: &Parked, asked: &Message, caller: &Caller) -> bool {
        if asked.method() != Some("roots/list") || caller.session.has_capability("roots") {
            return false;
        }
        if let Some(Id::String(key)) = &asked.id {
            let none = Message::response_value(Id::String(key.clone()), &json!({"roots": []}));
            let _ = self.inner.upstreams[parked.upstream].answer_server_request(key, none);
        }
        true
    }

    /// A server→client request the modern client cannot answer (it did not declare the
    /// capability): the upstream gets an error for it and the call is cancelled; the client
    /// gets `-32021`, as a modern server would answer.
    fn refuse_unanswerable(
        &self,
        parked: &Parked,
        asked: &Message,
        caller: &Caller,
    ) -> Option<Error> {
        let method = asked.method().unwrap_or_default();
        let upstream = &self.inner.upstreams[parked.upstream];
        let err = undeclared(upstream, method, caller)?;
        if let (Some(Id::String(key)), Some(cap)) = (&asked.id, bridge::capability_for(method)) {
            let refusal = crate::jsonrpc::ErrorObject::new(
                crate::jsonrpc::METHOD_NOT_FOUND,
                format!("the client did not declare the {cap:?} capability"),
                "mcp_budget.client.missing_capability",
                None,
            );
            let _ = upstream
                .answer_server_request(key, Message::error(Id::String(key.clone()), refusal));
        }
        upstream.cancel(
            parked.upstream_id,
            Some("the client cannot answer what the call needs"),
        );
        parked.call.abort();
        Some(err)
    }

    /// Keeps `parked` for the client's retry; the `input_required` result asking `asked`.
    fn park(&self, mut parked: Parked, asked: Vec<Message>) -> Message {
        let requests: Vec<(String, String, Value)> = asked
            .into_iter()
            .filter_map(|m| {
                let Some(Id::String(key)) = m.id.clone() else {
                    return None;
                };
                let params: Value = m.params_as().unwrap_or_else(|_| json!({}));
                Some((key, m.method().unwrap_or_default().to_owned(), params))
            })
            .collect();
        parked.asked = requests.iter().map(|(k, _, _)| k.clone()).collect();
        let state = format!("{STATE_PREFIX}{}", uuid::Uuid::new_v4().simple());
        lock(&self.inner.parked).insert(state.clone(), parked);
        // A client that never retries: the call is cancelled upstream after the TTL.
        let gateway = Arc::downgrade(&self.inner);
        let key = state.clone();
        tokio::spawn(async move {
            tokio::time::sleep(PARK_TTL).await;
            let Some(inner) = gateway.upgrade() else {
                return;
            };
            let expired = lock(&inner.parked).remove(&key);
            if let Some(p) = expired {
                tracing::debug!(
                    upstream = inner.upstreams[p.upstream].name(),
                    "Parked call expired"
                );
                inner.upstreams[p.upstream].cancel(p.upstream_id, Some("the client never retried"));
                p.call.abort();
            }
        });
        Message::response_value(Id::Null, &bridge::input_required_result(&requests, &state))
    }

    /// A modern client's retry of a parked call: the answers go to the upstream, and the call
    /// goes on.
    async fn resume(
        &self,
        state: &str,
        responses: Map<String, Value>,
        msg: &Message,
        caller: &Caller,
    ) -> Result<Message, Error> {
        let parked = lock(&self.inner.parked).remove(state);
        let Some(parked) = parked else {
            return Err(Error::InvalidParams {
                method: msg.method().unwrap_or_default().to_owned(),
                reason: "requestState is unknown or expired; call again without it".into(),
            });
        };
        let upstream = &self.inner.upstreams[parked.upstream];
        for key in &parked.asked {
            let answer = match responses.get(key) {
                Some(result) => Message::response_value(Id::String(key.clone()), result),
                None => Message::error(
                    Id::String(key.clone()),
                    crate::jsonrpc::ErrorObject::new(
                        crate::jsonrpc::INVALID_PARAMS,
                        "the client gave no answer to this request",
                        "mcp_budget.client.no_answer",
                        None,
                    ),
                ),
            };
            if let Err(err) = upstream.answer_server_request(key, answer) {
                tracing::debug!(error = %err, "Answer to a parked call not delivered");
            }
        }
        self.drive(parked, caller, msg).await
    }

    /// Notes that client request `msg` of `caller` is upstream `i`'s request `id` now (for
    /// cancellation).
    fn track(&self, caller: &Caller, msg: &Message, i: usize, id: i64) {
        let key = (
            caller.session.id.clone(),
            msg.id.clone().unwrap_or(Id::Null),
        );
        lock(&self.inner.inflight).insert(key, (i, id));
    }

    /// `subscriptions/listen` of a modern client: acknowledged at once, then the stream
    /// carries the `list_changed` (and `resources/updated`) notifications it asked for,
    /// until the client closes it or the gateway shuts down.
    pub(super) async fn listen(&self, msg: &Message, caller: &Caller) -> Result<Message, Error> {
        let params: Value = msg.params_as().unwrap_or_else(|_| json!({}));
        let asked = params
            .get("notifications")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let mut honoured = Map::new();
        let mut kinds = Vec::new();
        for (key, kind) in [
            ("toolsListChanged", "tools"),
            ("promptsListChanged", "prompts"),
            ("resourcesListChanged", "resources"),
        ] {
            if asked.get(key).and_then(Value::as_bool) == Some(true) {
                honoured.insert(key.into(), json!(true));
                kinds.push(kind.to_owned());
            }
        }
        let resources: Vec<String> = asked
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if !resources.is_empty() {
            honoured.insert("resourceSubscriptions".into(), json!(resources));
        }
        self.watch_for_listener(&resources);
        let subscription =
            serde_json::to_value(msg.id.clone().unwrap_or(Id::Null)).unwrap_or(Value::Null);
        let ack = Message::notification(
            "notifications/subscriptions/acknowledged",
            Some(to_raw(&json!({
                "notifications": honoured,
                "_meta": { SUBSCRIPTION_ID: subscription },
            }))),
        );
        let _ = caller.outbound.send(ack);
        lock(&self.inner.listeners).push(Listener {
            outbound: caller.outbound.clone(),
            subscription: subscription.clone(),
            kinds,
            resources,
        });
        tokio::select! {
            () = caller.outbound.closed() => {}
            () = self.inner.shutdown.cancelled() => {}
        }
        lock(&self.inner.listeners).retain(|l| !l.outbound.is_closed());
        Ok(Message::response_value(
            Id::Null,
            &json!({ "_meta": { SUBSCRIPTION_ID: subscription } }),
        ))
    }

    /// Sends `msg` (a `list_changed` or `resources/updated` notification) to the listen
    /// streams that asked for it, tagged with their subscription.
    pub(super) fn notify_listeners(&self, msg: &Message) {
        let method = msg.method().unwrap_or_default();
        let kind = method
            .strip_prefix("notifications/")
            .and_then(|m| m.strip_suffix("/list_changed"));
        let uri = (method == "notifications/resources/updated")
            .then(|| msg.params_as::<Value>().ok())
            .flatten()
            .and_then(|p| p.get("uri").and_then(Value::as_str).map(str::to_owned));
        let mut listeners = lock(&self.inner.listeners);
        listeners.retain(|l| !l.outbound.is_closed());
        for l in listeners.iter() {
            let wanted = match (&kind, &uri) {
                (Some(kind), _) => l.kinds.iter().any(|k| k == kind),
                (None, Some(uri)) => l.resources.iter().any(|r| r == uri),
                (None, None) => false,
            };
            if !wanted {
                continue;
            }
            let mut params: Map<String, Value> = msg.params_as().unwrap_or_default();
            bridge::set_meta(&mut params, SUBSCRIPTION_ID, l.subscription.clone());
            let _ = l.outbound.send(Message::notification(
                method,
                Some(to_raw(&Value::Object(params))),
            ));
        }
    }

    /// Remembers which upstream created the task a result names, for which caller.
    pub(super) fn note_task(&self, i: usize, reply: &Message, caller: &Caller) {
        let Some(result) = reply.result.as_ref().filter(|r| r.get().contains("taskId")) else {
            return;
        };
        let Ok(value) = serde_json::from_str::<Value>(result.get()) else {
            return;
        };
        if let Some(task) = bridge::created_task_id(&value) {
            lock(&self.inner.tasks).insert(task, (i, task_owner(caller)));
        }
    }

    /// `tasks/*` requests go to the upstream that created the task.
    pub(super) async fn route_task(
        &self,
        msg: &Message,
        caller: &Caller,
    ) -> Result<Message, Error> {
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let task = params
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::InvalidParams {
                method: msg.method().unwrap_or_default().to_owned(),
                reason: "missing string \"taskId\"".into(),
            })?;
        // Another caller's task is as unknown as a task that never was.
        let owner = task_owner(caller);
        let i = lock(&self.inner.tasks)
            .get(task)
            .filter(|(_, of)| *of == owner)
            .map(|(i, _)| *i)
            .ok_or_else(|| Error::NotFound {
                what: "task",
                name: task.to_owned(),
            })?;
        self.forward(i, msg, msg.params.clone(), caller).await
    }

    /// `tasks/list`: the tasks of every upstream that lists them, one upstream page per page
    /// of the gateway's; the gateway's cursor names the upstream and its cursor. An upstream
    /// that fails is skipped (logged), the others still list.
    pub(super) async fn list_tasks(
        &self,
        msg: &Message,
        caller: &Caller,
    ) -> Result<Message, Error> {
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let (mut at, mut cursor) = match params.get("cursor").and_then(Value::as_str) {
            None => (0, None),
            Some(c) => decode_task_cursor(c).ok_or_else(|| Error::InvalidParams {
                method: "tasks/list".into(),
                reason: "unknown cursor; list again from the start".into(),
            })?,
        };
        let listing: Vec<usize> = (self.inner.upstreams.iter().enumerate())
            .filter(|(_, u)| {
                u.status() == crate::upstream::Status::Ready
                    && u.info()
                        .capabilities
                        .get("tasks")
                        .and_then(|t| t.get("list"))
                        .is_some()
            })
            .map(|(i, _)| i)
            .collect();
        // Bounded: upstreams that keep answering empty pages with cursors must not spin.
        for _ in 0..MAX_EMPTY_TASK_PAGES {
            let Some(&i) = listing.iter().find(|&&i| i >= at) else {
                break;
            };
            if i != at {
                cursor = None;
            }
            let mut asked = params.as_object().cloned().unwrap_or_default();
            asked.remove("cursor");
            if let Some(c) = cursor.take() {
                asked.insert("cursor".into(), Value::String(c));
            }
            let page = self
                .forward(i, msg, Some(to_raw(&Value::Object(asked))), caller)
                .await
                .map_err(|e| e.to_string())
                .and_then(|reply| match reply.kind() {
                    Kind::Response => reply.result_as::<Value>().map_err(|e| e.to_string()),
                    _ => Err(String::from_utf8_lossy(&reply.to_bytes()).into_owned()),
                });
            let (tasks, next) = match page {
                Ok(result) => {
                    let tasks = result.get("tasks").and_then(Value::as_array).cloned();
                    let next = result
                        .get("nextCursor")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    (tasks.unwrap_or_default(), next)
                }
                Err(err) => {
                    let name = self.inner.upstreams[i].name();
                    tracing::warn!(upstream = name, error = %err, "tasks/list failed; its tasks are left out");
                    (Vec::new(), None)
                }
            };
            // A shared upstream lists every client's tasks: only the caller's own are shown.
            let owner = task_owner(caller);
            let tasks: Vec<Value> = {
                let known = lock(&self.inner.tasks);
                tasks
                    .into_iter()
                    .filter(|task| {
                        task.get("taskId")
                            .and_then(Value::as_str)
                            .and_then(|id| known.get(id))
                            .is_some_and(|(at, of)| *at == i && *of == owner)
                    })
                    .collect()
            };
            // Where the next page starts: this upstream's next page, or the next upstream.
            let (next_at, next_cursor) = match next {
                Some(c) => (i, Some(c)),
                None => (i + 1, None),
            };
            let more = next_cursor.is_some() || listing.iter().any(|&j| j > i);
            if tasks.is_empty() && more {
                (at, cursor) = (next_at, next_cursor);
                continue;
            }
            let mut result = json!({ "tasks": tasks });
            if more {
                result["nextCursor"] = json!(encode_task_cursor(next_at, next_cursor.as_deref()));
            }
            return Ok(Message::response_value(Id::Null, &result));
        }
        Ok(Message::response_value(Id::Null, &json!({ "tasks": [] })))
    }

    /// `resources/subscribe` / `unsubscribe` of a 2025-era client: forwarded to a 2025
    /// upstream; for a modern upstream (which has no such method) the resource joins or leaves
    /// the gateway's `subscriptions/listen` on it.
    pub(super) async fn subscribe(&self, msg: &Message, caller: &Caller) -> Result<Message, Error> {
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let on = msg.method() == Some("resources/subscribe");
        let session = caller.session.id.clone();
        // The upstream is shared: it stops sending updates only when no session wants them.
        let others_left = {
            let subscribers = lock(&self.inner.subscribers);
            subscribers
                .get(&uri)
                .is_some_and(|s| s.iter().any(|other| *other != session))
        };
        let done = Message::response_value(Id::Null, &json!({}));
        let reply = match self.route_uri(&uri) {
            _ if !on && others_left => done,
            Some(i) if self.inner.upstreams[i].is_modern() => {
                self.inner.upstreams[i].watch_resource(&uri, on);
                done
            }
            _ => self.call_by_uri(msg, caller).await?,
        };
        if reply.error.is_none() {
            let mut subscribers = lock(&self.inner.subscribers);
            if on {
                subscribers.entry(uri).or_default().insert(session);
            } else if let Some(sessions) = subscribers.get_mut(&uri) {
                sessions.remove(&session);
                if sessions.is_empty() {
                    subscribers.remove(&uri);
                }
            }
        }
        Ok(reply)
    }

    /// What a modern client's `subscriptions/listen` asks about resources, arranged upstream:
    /// `resources/subscribe` on a 2025 upstream, the listen filter of a modern one.
    fn watch_for_listener(&self, uris: &[String]) {
        for uri in uris {
            let Some(i) = self.route_uri(uri) else {
                continue;
            };
            let upstream = self.inner.upstreams[i].clone();
            if upstream.is_modern() {
                upstream.watch_resource(uri, true);
                continue;
            }
            let params = to_raw(&json!({ "uri": uri }));
            tokio::spawn(async move {
                let call = crate::upstream::Call::new("resources/subscribe").params(Some(params));
                if let Err(err) = upstream.request(call).await {
                    tracing::debug!(error = %err, "resources/subscribe for a listener failed");
                }
            });
        }
    }
}

/// Whose tasks `caller` may see: its 2025-era session's, or (a sessionless modern caller)
/// those of no session.
fn task_owner(caller: &Caller) -> Option<String> {
    (!caller.session.is_modern()).then(|| caller.session.id.clone())
}

/// The gateway's `tasks/list` cursor: upstream `at`, and that upstream's own cursor if any.
fn encode_task_cursor(at: usize, cursor: Option<&str>) -> String {
    seal_cursor(&format!("mcpb-tasks:{at}:{}", cursor.unwrap_or_default()))
}

fn decode_task_cursor(cursor: &str) -> Option<(usize, Option<String>)> {
    let text = open_cursor(cursor)?;
    let (at, theirs) = text.strip_prefix("mcpb-tasks:")?.split_once(':')?;
    let theirs = (!theirs.is_empty()).then(|| theirs.to_owned());
    Some((at.parse().ok()?, theirs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_cursors_round_trip_and_reject_garbage() {
        let c = encode_task_cursor(3, Some("their:cursor"));
        assert_eq!(
            decode_task_cursor(&c),
            Some((3, Some("their:cursor".into())))
        );
        assert_eq!(
            decode_task_cursor(&encode_task_cursor(1, None)),
            Some((1, None))
        );
        assert_eq!(decode_task_cursor("not-ours"), None);
        // The other lists' cursors are not task cursors.
        assert_eq!(decode_task_cursor(&super::super::encode_cursor(40)), None);
    }
}
