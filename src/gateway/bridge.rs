//! Calls between clients and upstreams of different protocol eras.
//!
//! | client ↓ / upstream → | 2025-11-25 | 2026-07-28 |
//! |---|---|---|
//! | **2025-11-25** | as is | the upstream's `input_required` results are turned into real server→client requests ([`ask_client`]), and the call is retried with the answers; modern result fields are removed |
//! | **2026-07-28** | the upstream's server→client requests park the call and become an `input_required` result (see [`super::parked`]); the client's retry (`requestState` of the gateway) resumes it | as is (the upstream's own `requestState` passes through) |
//!
//! The facts of each era (field names, the shape of `input_required`) live in
//! [`crate::mcp::bridge`]; this room holds the translation's state and I/O.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use super::Gateway;
use super::parked::STATE_PREFIX;
use super::route::Forward;
use crate::context::{Caller, SessionState};
use crate::error::Error;
use crate::jsonrpc::{Id, Message, to_raw};
use crate::lock::lock;
use crate::mcp::bridge;
use crate::upstream::{Call, Upstream};

/// Prefix of the ids of server→client requests the gateway itself sends (MRTR shim).
pub(super) const SHIM_PREFIX: &str = "mcpb-shim-";
/// How much longer than the upstream's timeout a retry forwarded to the replica that parked
/// the call waits for the outcome.
const RESUME_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);
/// Most rounds of `input_required` answered for one 2025-era client call.
const MAX_ROUNDS: usize = 16;

/// Server→client requests the gateway sent for a modern upstream, by (unguessable) id: the
/// session asked, and where its answer goes.
#[derive(Debug, Default)]
pub(super) struct Shim {
    asked: Mutex<HashMap<String, (String, oneshot::Sender<Message>)>>,
    /// The replica tag of the ids (`[state]`), as upstreams' ids carry it.
    replica: Option<String>,
}

impl Shim {
    /// The requests of replica `replica` (`[state]`; `None`: a lone gateway).
    pub(super) fn new(replica: Option<String>) -> Self {
        Self {
            asked: Mutex::default(),
            replica,
        }
    }

    /// A new request id: unguessable, so that no other session can answer in the asked
    /// client's place.
    fn new_id(&self) -> String {
        crate::upstream::asked_id("shim", self.replica.as_deref())
    }

    /// Waits for session `session`'s answer to request `id`.
    fn ask(&self, id: &str, session: &str) -> oneshot::Receiver<Message> {
        let (tx, rx) = oneshot::channel();
        lock(&self.asked).insert(id.to_owned(), (session.to_owned(), tx));
        rx
    }

    /// Stops waiting for an answer to `id`.
    fn forget(&self, id: &str) {
        lock(&self.asked).remove(id);
    }

    /// A client's answer to a request of [`ask_client`], taken only from the session that
    /// was asked, once.
    pub(super) fn answer(&self, id: &str, msg: Message, session: &str) -> Result<(), Error> {
        match self.answer_of(id, session).map(|tx| tx.send(msg).is_ok()) {
            Some(true) => Ok(()),
            _ => Err(Error::UnknownRequest { id: id.to_owned() }),
        }
    }

    /// Where the answer to `id` goes, if `session` is the one asked (taken: once only).
    fn answer_of(&self, id: &str, session: &str) -> Option<oneshot::Sender<Message>> {
        let mut shim = lock(&self.asked);
        match shim.get(id) {
            Some((asked, _)) if asked == session => shim.remove(id).map(|(_, tx)| tx),
            _ => None,
        }
    }
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

impl Gateway {
    /// Sends a request of a client to an upstream in the upstream's era, and brings the
    /// answer back in the client's.
    pub(super) async fn forward_across(&self, forward: Forward<'_>) -> Result<Message, Error> {
        let upstream = &self.inner.pool.upstream(forward.upstream);
        let (msg, caller) = (forward.msg, forward.caller);
        let method = msg.method().unwrap_or_default().to_owned();
        let client_modern = forward.modern;
        if client_modern {
            let value: Option<Value> =
                (forward.params.as_ref()).and_then(|p| serde_json::from_str(p.get()).ok());
            let (responses, state) = value
                .as_ref()
                .map_or((None, None), |v| bridge::retry_fields(v));
            if let Some(state) = state.filter(|s| s.starts_with(STATE_PREFIX)) {
                if let Some((owner, _)) = self.elsewhere(super::parked::parked_by(state)) {
                    // The parked call's own timeout, and a little for the round trips.
                    let wait = upstream.spec().timeout + RESUME_MARGIN;
                    return self.resume_at(owner, msg, caller, wait).await;
                }
                let responses = responses.cloned().unwrap_or_default();
                return self.resume(state, responses, msg, caller).await;
            }
            if !upstream.is_modern() {
                return self.park_call(forward, &method).await;
            }
        }
        let client = caller.session.state();
        let call = Call::new(&method)
            .id(forward.id)
            .params(forward.params.clone())
            .outbound(caller.outbound.clone())
            .client(&client);
        let reply = upstream.request(call).await?;
        if client_modern || !upstream.is_modern() {
            return Ok(reply);
        }
        self.answer_for_legacy(forward, reply, &client).await
    }

    /// A modern upstream's reply, for a 2025-era client: `input_required` rounds are answered
    /// by asking the client with real requests, then retried; modern fields go.
    async fn answer_for_legacy(
        &self,
        forward: Forward<'_>,
        mut reply: Message,
        client: &SessionState,
    ) -> Result<Message, Error> {
        let (i, msg, caller) = (forward.upstream, forward.msg, forward.caller);
        let upstream = &self.inner.pool.upstream(i);
        let method = msg.method().unwrap_or_default().to_owned();
        let original: Value = (forward.params.as_ref())
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
                let shim = &self.inner.shim;
                let answer =
                    ask_client(shim, upstream, caller, &input_method, input_params).await?;
                responses.insert(key, answer);
            }
            let retry =
                bridge::with_input_responses(&original, responses, asked.request_state.as_deref());
            let id = upstream.next_request_id();
            self.inner.inflight.track(caller, msg, i, id);
            let call = Call::new(&method)
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
}

/// Asks a 2025-era client what a modern upstream wants to know, with a real
/// server→client request on the caller's stream; returns the client's result.
async fn ask_client(
    shim: &Shim,
    upstream: &Upstream,
    caller: &Caller,
    method: &str,
    params: Value,
) -> Result<Value, Error> {
    let input_error = |reason: String| Error::ClientInput {
        upstream: upstream.name().to_owned(),
        reason,
        missing_capability: None,
    };
    if let Some(err) = undeclared(upstream, method, caller) {
        return Err(err);
    }
    if bridge::capability_for(method).is_none() {
        return Err(input_error(format!(
            "{method}, which the gateway cannot relay"
        )));
    }
    let id = shim.new_id();
    let rx = shim.ask(&id, &caller.session.id);
    let request = Message::request(Id::String(id.clone()), method, Some(to_raw(&params)));
    if caller.outbound.send(request).is_err() {
        shim.forget(&id);
        return Err(input_error("the client is gone".into()));
    }
    let answer = tokio::time::timeout(upstream.spec().timeout, rx).await;
    shim.forget(&id);
    match answer {
        Ok(Ok(reply)) => client_result(method, reply).map_err(input_error),
        Ok(Err(_)) => Err(input_error("the client is gone".into())),
        Err(_) => Err(input_error(format!(
            "the client did not answer {method} in time"
        ))),
    }
}

/// The result a client's answer to server→client request `method` carries, or why there is
/// none.
fn client_result(method: &str, reply: Message) -> Result<Value, String> {
    match (reply.result, reply.error) {
        (Some(result), _) => serde_json::from_str(result.get())
            .map_err(|e| format!("the client's answer is not JSON: {e}")),
        (None, Some(err)) => Err(format!(
            "the client refused {method}: {} ({})",
            err.message, err.code
        )),
        (None, None) => Err("the client's answer is empty".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::ErrorObject;

    #[test]
    fn only_the_session_asked_answers_and_only_once() {
        let shim = Shim::default();
        let mut rx = shim.ask("mcpb-shim-1", "s1");
        assert!(shim.answer_of("mcpb-shim-1", "s2").is_none());
        assert!(shim.answer_of("mcpb-shim-2", "s1").is_none());
        let tx = shim.answer_of("mcpb-shim-1", "s1").expect("s1 was asked");
        assert!(
            shim.answer_of("mcpb-shim-1", "s1").is_none(),
            "a second answer"
        );
        tx.send(Message::response_value(Id::Null, &json!({})))
            .unwrap();
        assert!(rx.try_recv().is_ok());
        // Forgotten requests take no answer.
        let _rx = shim.ask("mcpb-shim-3", "s1");
        shim.forget("mcpb-shim-3");
        assert!(shim.answer_of("mcpb-shim-3", "s1").is_none());
    }

    #[test]
    fn a_client_answer_is_its_result_or_a_reason() {
        let ok = Message::response_value(Id::Null, &json!({"action": "accept"}));
        assert_eq!(
            client_result("elicitation/create", ok),
            Ok(json!({"action": "accept"}))
        );
        let refused = Message::error(Id::Null, ErrorObject::new(-1, "no", "x.y.z", None));
        assert_eq!(
            client_result("sampling/createMessage", refused),
            Err("the client refused sampling/createMessage: no (-1)".into())
        );
        let mut empty = Message::response_value(Id::Null, &json!({}));
        empty.result = None;
        assert_eq!(
            client_result("roots/list", empty),
            Err("the client's answer is empty".into())
        );
    }
}
