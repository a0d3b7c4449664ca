//! Calls between clients and upstreams of different protocol eras.
//!
//! | client ↓ / upstream → | 2025-11-25 | 2026-07-28 |
//! |---|---|---|
//! | **2025-11-25** | as is | the upstream's `input_required` results are turned into real server→client requests ([`ask_client`]), and the call is retried with the answers; modern result fields are removed |
//! | **2026-07-28** | the upstream's server→client requests park the call and become an `input_required` result (see [`parked`]); the client's retry (`requestState` of the gateway) resumes it | as is (the upstream's own `requestState` passes through) |
//!
//! The facts of each era (field names, the shape of `input_required`) live in
//! [`crate::mcp::bridge`]; this room, the [`EraBridge`], holds the translation's state and
//! I/O: the shim's server→client requests (ids [`SHIM_PREFIX`]) and the parked calls
//! ([`parked`], `requestState`s [`parked::STATE_PREFIX`]).

mod parked;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::context::{Caller, SessionState};
use crate::error::Error;
use crate::gateway::forward::{Forward, Inflight, elsewhere, outcome_of};
use crate::gateway::pool::Pool;
use crate::jsonrpc::{Id, Message, to_raw};
use crate::lock::lock;
use crate::mcp::bridge;
use crate::upstream::{Call, Upstream};
use parked::{ParkedCalls, STATE_PREFIX, parked_by, undeclared, unknown_state};

/// The calls between eras: a room of the gateway, over the pool, sharing the requests in
/// flight with forwarding.
pub(super) struct EraBridge {
    pool: Arc<Pool>,
    inflight: Arc<Inflight>,
    /// Server→client requests the gateway sent for a modern upstream.
    shim: Shim,
    /// Calls of modern clients to 2025-era upstreams waiting for the client's retry.
    parked: ParkedCalls,
    /// The `[state]` store, to reach the replica that parked a call.
    state: Option<crate::state::Store>,
}

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

impl EraBridge {
    /// The bridge over `pool`, sharing `inflight` with forwarding; on a replica of a
    /// deployment, `state` is the store its ids name.
    pub(super) fn new(
        pool: Arc<Pool>,
        inflight: Arc<Inflight>,
        state: Option<crate::state::Store>,
    ) -> Self {
        let replica = state.as_ref().map(|s| s.replica_id().to_owned());
        Self {
            parked: ParkedCalls::new(pool.clone(), inflight.clone(), replica.clone()),
            pool,
            inflight,
            shim: Shim::new(replica),
            state,
        }
    }

    /// A client's answer to a request of the shim, taken only from the session that was
    /// asked, once.
    pub(super) fn shim_answer(&self, id: &str, msg: Message, session: &str) -> Result<(), Error> {
        self.shim.answer(id, msg, session)
    }

    /// How many parked calls wait on upstream `id` (a per-client instance is not stopped
    /// while one does).
    pub(super) fn parked_on(&self, id: usize) -> usize {
        self.parked.of_upstream(id)
    }

    /// Sends a request of a client to an upstream in the upstream's era, and brings the
    /// answer back in the client's.
    pub(super) async fn forward_across(&self, forward: Forward<'_>) -> Result<Message, Error> {
        let upstream = &self.pool.upstream(forward.upstream);
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
                if let Some((owner, _)) = elsewhere(self.state.as_ref(), parked_by(state)) {
                    // The parked call's own timeout, and a little for the round trips.
                    let wait = upstream.spec().timeout + RESUME_MARGIN;
                    return self.resume_at(owner, msg, caller, wait).await;
                }
                let responses = responses.cloned().unwrap_or_default();
                return self.parked.resume(state, responses, msg, caller).await;
            }
            if !upstream.is_modern() {
                return self.parked.park_call(forward, &method).await;
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

    /// A modern client's retry of a call another replica parked (`[state]`, its
    /// `requestState` names `owner`): forwarded there, and that replica's outcome is the
    /// answer; `wait` bounds the wait for it.
    async fn resume_at(
        &self,
        owner: &str,
        msg: &Message,
        caller: &Caller,
        wait: Duration,
    ) -> Result<Message, Error> {
        use crate::state::relay::ForwardError;
        let Some(store) = &self.state else {
            return Err(unknown_state(msg));
        };
        let request = msg.to_raw_value();
        let capabilities = caller.session.state().client_capabilities;
        let outcome = store.resume_at(owner, capabilities, request, wait).await;
        let sent = outcome
            .as_ref()
            .map(|_| "resumed_elsewhere")
            .map_err(|e| *e);
        crate::telemetry::record::state_answer(outcome_of(sent));
        match outcome {
            Ok(reply) => Message::parse(reply.get().as_bytes()).map_err(|e| {
                Error::Internal(format!("an unreadable outcome of a resumed call: {e}"))
            }),
            Err(ForwardError::OwnerGone) => Err(Error::invalid_params(
                msg.method().unwrap_or_default(),
                "the gateway replica that parked this call is gone, and the call with it; call again without requestState",
            )),
            Err(ForwardError::NoReply) => Err(Error::invalid_params(
                msg.method().unwrap_or_default(),
                "the gateway replica that parked this call did not answer the retry in time; call again without requestState",
            )),
            Err(ForwardError::Store(_)) => Err(Error::invalid_params(
                msg.method().unwrap_or_default(),
                "another gateway replica parked this call and the shared state store is unavailable; retry, or call again without requestState",
            )),
        }
    }

    /// A retry another replica forwarded here (`[state]`): resumed as if its client had sent
    /// it here, and the outcome sent back.
    pub(super) async fn resume_here(self: Arc<Self>, resume: crate::state::relay::Resume) {
        let Some(store) = self.state.clone() else {
            return;
        };
        let msg = match Message::parse(resume.request.get().as_bytes()) {
            Ok(msg) => msg,
            Err(e) => {
                tracing::debug!(error = %e, "Unreadable retry from another replica");
                return;
            }
        };
        let id = msg.id.clone().unwrap_or(Id::Null);
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let (responses, state) = bridge::retry_fields(&params);
        let responses = responses.cloned().unwrap_or_default();
        let state = state.unwrap_or_default().to_owned();
        // The client's session lives on the other replica: its notifications stay here.
        let (notify, _) = mpsc::unbounded_channel();
        let session = crate::context::Session::new(format!("resumed-{}", resume.corr), notify);
        session.update(|s| s.client_capabilities = resume.client_capabilities.clone());
        let caller = Caller::new(Arc::new(session));
        let reply = match self.parked.resume(&state, responses, &msg, &caller).await {
            Ok(mut reply) => {
                reply.id = Some(id);
                reply
            }
            Err(err) => Message::error(id, err.to_error_object()),
        };
        store
            .reply_resumed(&resume.reply_to, resume.corr, reply.to_raw_value())
            .await;
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
        let upstream = &self.pool.upstream(i);
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
                let shim = &self.shim;
                let answer =
                    ask_client(shim, upstream, caller, &input_method, input_params).await?;
                responses.insert(key, answer);
            }
            let retry =
                bridge::with_input_responses(&original, responses, asked.request_state.as_deref());
            let id = upstream.next_request_id();
            self.inflight.track(caller, msg, i, id);
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
