//! Parked calls: a 2026-07-28 client calling a 2025-era upstream that asks the client
//! something in the middle (sampling, elicitation, roots).
//!
//! The modern client cannot receive a server→client request, so the call runs on a task of
//! its own and the upstream's requests *park* it: the client gets an `input_required` result
//! with a `requestState` of the gateway's, answers in its retry, and the retry resumes the
//! parked call with the answers. A client that never retries has its call cancelled after
//! [`PARK_TTL`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::context::{Caller, Outbound};
use crate::error::Error;
use crate::gateway::forward::{Forward, Inflight};
use crate::gateway::pool::Pool;
use crate::gateway::sessions::string_param;
use crate::jsonrpc::{Id, Kind, Message};
use crate::lock::lock;
use crate::mcp::bridge;
use crate::mcp::method::Method;
use crate::upstream::{Call, Upstream};

/// Prefix of the `requestState` the gateway hands out for calls it parked.
pub(in crate::gateway) const STATE_PREFIX: &str = "mcpb1.";
/// How long a parked call waits for the client's retry.
const PARK_TTL: Duration = Duration::from_secs(300);

/// Calls waiting for the client's retry, by the `requestState` handed out; with the pool their
/// upstreams are in and the requests in flight they are tracked among.
pub(super) struct ParkedCalls {
    calls: Arc<Mutex<HashMap<String, Parked>>>,
    pool: Arc<Pool>,
    inflight: Arc<Inflight>,
    /// The replica the `requestState`s name (`[state]`; `None`: a lone gateway).
    replica: Option<String>,
}

/// A call to a 2025-era upstream, waiting for a modern client to answer what the upstream
/// asked.
struct Parked {
    upstream: usize,
    upstream_id: i64,
    call: tokio::task::JoinHandle<Result<Message, Error>>,
    messages: mpsc::UnboundedReceiver<Message>,
    /// Keys of the server requests the client was asked (their gateway ids).
    asked: Vec<String>,
}

impl ParkedCalls {
    /// No call parked yet, of upstreams of `pool`, tracked in `inflight`, on `replica`.
    pub(super) fn new(pool: Arc<Pool>, inflight: Arc<Inflight>, replica: Option<String>) -> Self {
        Self {
            calls: Arc::default(),
            pool,
            inflight,
            replica,
        }
    }

    /// How many parked calls wait on upstream `id` (a per-client instance is not stopped
    /// while one does).
    pub(super) fn of_upstream(&self, id: usize) -> usize {
        lock(&self.calls)
            .values()
            .filter(|p| p.upstream == id)
            .count()
    }

    /// Starts a modern client's call on a 2025-era upstream on a task of its own, so that it
    /// can wait (parked) while the client answers what the upstream asks in the middle.
    pub(super) async fn park_call(
        &self,
        forward: Forward<'_>,
        method: &str,
    ) -> Result<Message, Error> {
        let Forward {
            upstream: i,
            msg,
            params,
            caller,
            id: upstream_id,
            ..
        } = forward;
        let upstream = self.pool.upstream(i);
        let (tx, rx) = Outbound::channel(caller.session.id.as_str());
        let method = method.to_owned();
        let call = tokio::spawn(async move {
            let call = Call::new(&method)
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
        (self.inflight).track(caller, msg, parked.upstream, parked.upstream_id);
        // Modern clients get log notifications only when the request asked for them.
        let request: Value = msg.params_as().unwrap_or(Value::Null);
        let relay = |m: Message| {
            if m.method() == Some(Method::LogMessage.as_str()) {
                let level = string_param(&m, "level").unwrap_or_default();
                if !bridge::wants_log(&request, &level) {
                    return;
                }
            }
            let _ = caller.outbound.send(m);
        };
        let upstream = &self.pool.upstream(parked.upstream);
        let upstream_name = upstream.name().to_owned();
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
                        if no_roots(upstream, &m, caller) {
                            continue;
                        }
                        if let Some(err) = refuse_unanswerable(upstream, &parked, &m, caller) {
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

    /// Keeps `parked` for the client's retry; the `input_required` result asking `asked`.
    fn park(&self, mut parked: Parked, asked: Vec<Message>) -> Message {
        let requests = asked_requests(asked);
        parked.asked = requests.iter().map(|(k, _, _)| k.clone()).collect();
        let state = parked_state(self.replica.as_deref());
        lock(&self.calls).insert(state.clone(), parked);
        // A client that never retries: the call is cancelled upstream after the TTL.
        let (calls, pool) = (Arc::downgrade(&self.calls), Arc::downgrade(&self.pool));
        let key = state.clone();
        tokio::spawn(async move {
            tokio::time::sleep(PARK_TTL).await;
            let (Some(calls), Some(pool)) = (calls.upgrade(), pool.upgrade()) else {
                return;
            };
            let expired = lock(&calls).remove(&key);
            if let Some(p) = expired {
                // A per-client instance may be stopped once no parked call waits on it.
                if let Some(upstream) = pool.get(p.upstream) {
                    tracing::debug!(upstream = upstream.name(), "Parked call expired");
                    upstream.cancel(p.upstream_id, Some("the client never retried"));
                }
                p.call.abort();
            }
        });
        Message::response_value(Id::Null, &bridge::input_required_result(&requests, &state))
    }

    /// A modern client's retry of a parked call: the answers go to the upstream, and the call
    /// goes on.
    pub(super) async fn resume(
        &self,
        state: &str,
        responses: Map<String, Value>,
        msg: &Message,
        caller: &Caller,
    ) -> Result<Message, Error> {
        let parked = lock(&self.calls).remove(state);
        let Some(parked) = parked else {
            return Err(unknown_state(msg));
        };
        let upstream = &self.pool.upstream(parked.upstream);
        for key in &parked.asked {
            let answer = answer_for(key, responses.get(key));
            if let Err(err) = upstream.answer_server_request(key, answer) {
                tracing::debug!(error = %err, "Answer to a parked call not delivered");
            }
        }
        self.drive(parked, caller, msg).await
    }
}

/// The error for a retry whose `requestState` names no parked call.
pub(super) fn unknown_state(msg: &Message) -> Error {
    Error::invalid_params(
        msg.method().unwrap_or_default(),
        "requestState is unknown or expired; call again without it",
    )
}

/// A new `requestState` for a parked call: [`STATE_PREFIX`], unguessable, and on a replica of
/// a deployment (`[state]`) `.REPLICA`, so that another replica taking the retry forwards it.
fn parked_state(replica: Option<&str>) -> String {
    let random = uuid::Uuid::new_v4().simple();
    match replica {
        Some(replica) => format!("{STATE_PREFIX}{random}.{replica}"),
        None => format!("{STATE_PREFIX}{random}"),
    }
}

/// The replica a `requestState` of [`parked_state`] names, if any.
pub(super) fn parked_by(state: &str) -> Option<&str> {
    state
        .strip_prefix(STATE_PREFIX)?
        .split_once('.')
        .map(|(_, r)| r)
}

/// The error (`-32021` to a modern client) when server→client request `method` of `upstream`
/// needs a capability that the client did not declare.
pub(super) fn undeclared(upstream: &Upstream, method: &str, caller: &Caller) -> Option<Error> {
    let cap = bridge::capability_for(method)?;
    (!caller.session.has_capability(cap)).then(|| Error::ClientInput {
        upstream: upstream.name().to_owned(),
        reason: format!("{method}, and the client did not declare the {cap:?} capability"),
        missing_capability: Some(cap.to_owned()),
    })
}

/// A `roots/list` for a client without roots: answered "no roots" on the spot (servers
/// also ask it outside any call, and the call must not fail for that). True when handled.
fn no_roots(upstream: &Upstream, asked: &Message, caller: &Caller) -> bool {
    if asked.method() != Some(Method::RootsList.as_str()) || caller.session.has_capability("roots")
    {
        return false;
    }
    if let Some(Id::String(key)) = &asked.id {
        let none = Message::response_value(Id::String(key.clone()), &json!({"roots": []}));
        let _ = upstream.answer_server_request(key, none);
    }
    true
}

/// A server→client request the modern client cannot answer (it did not declare the
/// capability): the upstream gets an error for it and the call is cancelled; the client
/// gets `-32021`, as a modern server would answer.
fn refuse_unanswerable(
    upstream: &Upstream,
    parked: &Parked,
    asked: &Message,
    caller: &Caller,
) -> Option<Error> {
    let method = asked.method().unwrap_or_default();
    let err = undeclared(upstream, method, caller)?;
    if let (Some(Id::String(key)), Some(cap)) = (&asked.id, bridge::capability_for(method)) {
        let refusal = Error::CapabilityUndeclared {
            capability: cap.to_owned(),
        }
        .to_error_object();
        let _ =
            upstream.answer_server_request(key, Message::error(Id::String(key.clone()), refusal));
    }
    upstream.cancel(
        parked.upstream_id,
        Some("the client cannot answer what the call needs"),
    );
    parked.call.abort();
    Some(err)
}

/// The server→client requests `asked` as (gateway id, method, params), the shape of an
/// `input_required` result; requests without a string id (not the gateway's) are left out.
fn asked_requests(asked: Vec<Message>) -> Vec<(String, String, Value)> {
    asked
        .into_iter()
        .filter_map(|m| {
            let Some(Id::String(key)) = m.id.clone() else {
                return None;
            };
            let params: Value = m.params_as().unwrap_or_else(|_| json!({}));
            Some((key, m.method().unwrap_or_default().to_owned(), params))
        })
        .collect()
}

/// What the upstream gets for its request `key` from a client's retry: the client's result,
/// or an error when the retry did not answer it.
fn answer_for(key: &str, result: Option<&Value>) -> Message {
    let id = Id::String(key.to_owned());
    match result {
        Some(result) => Message::response_value(id, result),
        None => Message::error(id, Error::NoAnswer.to_error_object()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_state_names_its_replica_only_on_a_deployment() {
        let tagged = parked_state(Some("r1"));
        assert!(tagged.starts_with(STATE_PREFIX), "{tagged}");
        assert_eq!(parked_by(&tagged), Some("r1"));
        assert_eq!(parked_by(&parked_state(None)), None);
        assert_eq!(parked_by("someone-else's-state"), None);
    }
    use crate::error::kind;
    use crate::jsonrpc::{INVALID_PARAMS, to_raw};

    #[test]
    fn asked_requests_keep_the_gateways_ids_only() {
        let params = Some(to_raw(&json!({"messages": []})));
        let asked = vec![
            Message::request(
                Id::String("mcpb-0-a".into()),
                "sampling/createMessage",
                params,
            ),
            Message::request(Id::Number(7), "roots/list", None),
            Message::request(Id::String("mcpb-0-b".into()), "roots/list", None),
        ];
        assert_eq!(
            asked_requests(asked),
            [
                (
                    "mcpb-0-a".to_owned(),
                    "sampling/createMessage".to_owned(),
                    json!({"messages": []})
                ),
                // No params: `null`, as the upstream sent them.
                ("mcpb-0-b".to_owned(), "roots/list".to_owned(), Value::Null),
            ]
        );
    }

    #[test]
    fn an_unanswered_request_gets_an_error_upstream() {
        let answered = answer_for("k", Some(&json!({"roots": []})));
        assert_eq!(answered.id, Some(Id::String("k".into())));
        assert!(answered.error.is_none());
        let unanswered = answer_for("k", None);
        let error = unanswered.error.expect("an error");
        assert_eq!(error.code, INVALID_PARAMS);
        assert_eq!(error.kind().as_deref(), Some(kind::CLIENT_NO_ANSWER));
    }
}
