//! Routing, the forwarding room ([`Forwarder`]): which upstream serves a request, and the
//! request's way there and back.
//!
//! Tools and prompts are found by their exposed (namespaced) name in the catalog, and sent
//! with the upstream's own name restored; resources by URI (listed URIs, then template
//! prefixes, then the only upstream with resources); completions by the prompt or resource
//! they complete. [`Forwarder::forward`] sends a request and keeps it cancellable; a client's
//! answer to a server→client request goes back to the upstream (or bridge) that asked.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::bridge::{EraBridge, SHIM_PREFIX};
use super::forward::{Forward, Inflight, elsewhere, outcome_of};
use super::name_span::NameSpan;
use super::pool::Pool;
use super::tasks::Tasks;
use crate::authz::Kind;
use crate::context::{Caller, McpRequest};
use crate::error::Error;
use crate::jsonrpc::{Id, Message, to_raw};
use crate::mcp::method::{Method, Names};
use crate::policy::ServerRequests;
use crate::upstream::{Call, asked_replica};

/// Forwarding, a room of the gateway: where a call goes and its way there and back, kept
/// cancellable while it runs ([`Inflight`]); the tasks its replies create are noted
/// ([`Tasks::note`]); the calls between eras cross the [`EraBridge`]; and clients' answers to
/// server→client requests go back to whoever asked.
pub(super) struct Forwarder {
    pool: Arc<Pool>,
    inflight: Arc<Inflight>,
    bridge: Arc<EraBridge>,
    tasks: Arc<Tasks>,
    /// The `[state]` store, to reach the other replicas.
    state: Option<crate::state::Store>,
}

impl Forwarder {
    /// Forwarding over `pool`, sharing `inflight` with `bridge`; noting tasks in `tasks`.
    pub(super) fn new(
        pool: Arc<Pool>,
        inflight: Arc<Inflight>,
        bridge: Arc<EraBridge>,
        tasks: Arc<Tasks>,
        state: Option<crate::state::Store>,
    ) -> Self {
        Self {
            pool,
            inflight,
            bridge,
            tasks,
            state,
        }
    }

    /// `tools/call` (`what` = `tool`) or `prompts/get` (`prompt`): to the upstream that lists
    /// the name, under its own name.
    pub(super) async fn call_named(
        &self,
        req: &McpRequest,
        what: &'static str,
    ) -> Result<Message, Error> {
        let msg = &req.message;
        let not_listed = |name: String| {
            let separator = self.pool.borrow().separator().to_owned();
            self.pool.not_listed(what, name, &separator)
        };
        // Routed as the layers routed it (reused when one did): the name is the view's, the
        // one `NameSpan` and the general path find too (the last `name`, as a `Value` reads
        // it).
        let kind = match req.view.method().names() {
            Some(Names::Tool) => Kind::Tool,
            _ => Kind::Prompt,
        };
        let pool = &self.pool;
        // Hot path: find `name` without building the params' DOM and splice the upstream's
        // name into the raw params; everything else goes out as the client sent it.
        if let Some(fast) = msg.params.as_deref().and_then(NameSpan::find) {
            let target = pool.route_named(req, kind, &fast.name, |own| fast.splice(own));
            return match target {
                Some((i, params)) => self.forward(i, req, Some(params)).await,
                None => Err(not_listed(fast.name.into_owned())),
            };
        }
        let method = req.view.method().as_str();
        let mut params: Map<String, Value> = msg
            .params_as()
            .map_err(|e| Error::invalid_params(method, e.to_string()))?;
        let name = (params.get("name").and_then(Value::as_str))
            .ok_or_else(|| Error::invalid_params(method, "missing string \"name\""))?
            .to_owned();
        let Some((i, original)) = pool.route_named(req, kind, &name, str::to_owned) else {
            return Err(not_listed(name));
        };
        params.insert("name".into(), Value::String(original));
        self.forward(i, req, Some(to_raw(&Value::Object(params))))
            .await
    }

    /// `resources/read` (and a 2025 upstream's `resources/subscribe`): to the upstream of the
    /// URI.
    pub(super) async fn call_by_uri(&self, req: &McpRequest) -> Result<Message, Error> {
        let msg = &req.message;
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let uri = params.get("uri").and_then(Value::as_str).ok_or_else(|| {
            Error::invalid_params(req.view.method().as_str(), "missing string \"uri\"")
        })?;
        let i = (self.pool).route_uri(uri).ok_or_else(|| Error::NotFound {
            what: "resource",
            name: uri.to_owned(),
        })?;
        self.forward(i, req, msg.params.clone()).await
    }

    /// `completion/complete`: to the upstream of the prompt (under its own name) or resource
    /// it completes.
    pub(super) async fn complete(&self, req: &McpRequest) -> Result<Message, Error> {
        let msg = &req.message;
        let method = Method::CompletionComplete.as_str();
        let mut params: Map<String, Value> = msg
            .params_as()
            .map_err(|e| Error::invalid_params(method, e.to_string()))?;
        let reference = params.get("ref").cloned().unwrap_or(Value::Null);
        let i = match completing(&reference)? {
            Completing::Prompt(name) => {
                let found = (self.pool)
                    .route(|catalog| catalog.prompt(name).map(|(i, own)| (i, own.to_owned())));
                let (i, original) = found.ok_or_else(|| Error::NotFound {
                    what: "prompt",
                    name: name.to_owned(),
                })?;
                if let Some(r) = params.get_mut("ref") {
                    r["name"] = Value::String(original);
                }
                i
            }
            Completing::Resource(uri) => {
                (self.pool).route_uri(uri).ok_or_else(|| Error::NotFound {
                    what: "resource",
                    name: uri.to_owned(),
                })?
            }
        };
        self.forward(i, req, Some(to_raw(&Value::Object(params))))
            .await
    }

    /// Sends client request `req` with `params` to upstream `i`, in the upstream's era, and
    /// keeps it cancellable while it runs; notes the task the reply creates, if any.
    pub(super) async fn forward(
        &self,
        i: usize,
        req: &McpRequest,
        params: Option<Box<RawValue>>,
    ) -> Result<Message, Error> {
        let (msg, caller) = (&req.message, &req.caller);
        // The client's era is what its request says (the view), not what its session last
        // heard.
        let modern = req.view.is_modern();
        // A per-client upstream serves the caller through its own instance (tasks stay noted
        // under the upstream, `base`, and find the caller's instance again).
        let base = i;
        let serving = self.pool.serving(i, caller).await?;
        let (i, upstream) = (serving.id, &serving.upstream);
        let id = upstream.next_request_id();
        // Only a request that asked for a task (2025-11-25) or went to a modern upstream can
        // create one.
        let may_create_task =
            upstream.is_modern() || (params.as_ref()).is_some_and(|p| p.get().contains("\"task\""));
        self.inflight.track(caller, msg, i, id);
        let result = if upstream.is_modern() || modern {
            let forward = Forward {
                upstream: i,
                msg,
                params,
                caller,
                modern,
                id,
            };
            self.bridge.forward_across(forward).await
        } else {
            // A 2025-era upstream needs no client state, but one that serializes its requests
            // to clients gives a turn by what the caller declared (`server_requests`).
            let serializes = upstream.spec().server_requests == ServerRequests::Serialize;
            let state = serializes.then(|| caller.session.state());
            let mut call = Call::new(req.view.method().as_str())
                .id(id)
                .params(params)
                .outbound(caller.outbound.clone());
            if let Some(state) = &state {
                call = call.client(state);
            }
            upstream.request(call).await
        };
        self.inflight.untrack(caller, msg);
        if let (Ok(reply), true) = (&result, may_create_task) {
            self.tasks.note(base, reply, caller, modern);
        }
        result
    }

    /// `notifications/cancelled` of a client: the upstream request its request is now gets
    /// cancelled.
    pub(super) fn cancel(&self, msg: &Message, caller: &Caller) {
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let Some(id) = msg.params_id("requestId") else {
            return;
        };
        if let Some((i, upstream_id)) = self.inflight.take(&caller.session.id, id) {
            let reason = params.get("reason").and_then(Value::as_str);
            if let Some(upstream) = self.pool.get(i) {
                upstream.cancel(upstream_id, reason);
            }
        }
    }

    /// A client's answer to a server→client request: delivered only if that request waits for
    /// an answer from this very session; anything else (a guessed id, another session's
    /// request, a second answer) is refused with an error (HTTP answers it with 400) and logged.
    ///
    /// On a replica of a deployment (`[state]`), an answer to a request another replica sent
    /// (its id names the replica) is forwarded to that replica, which delivers it as its own;
    /// the answer is refused at once when that replica is gone.
    pub(super) async fn answer(&self, msg: Message, caller: &Caller) -> Option<Message> {
        let session = caller.session.id.as_str();
        let gateway_id = answered_id(&msg);
        let owner = asked_replica(&gateway_id);
        let delivered = if let Some((owner, store)) = elsewhere(self.state.as_ref(), owner) {
            forward_answer(store, owner, &gateway_id, &msg, session).await
        } else {
            self.deliver_answer(&gateway_id, msg, session)
        };
        let err = delivered.err()?;
        tracing::warn!(session, error = %err, "Client answer refused");
        Some(Message::error(Id::Null, err.to_error_object()))
    }

    /// Takes the notes other replicas send here (`[state]`) until shutdown: answers are
    /// delivered, retries of parked calls resumed (each on a task of its own).
    pub(super) async fn take_notes(
        self: Arc<Self>,
        mut notes: tokio::sync::mpsc::UnboundedReceiver<crate::state::relay::Note>,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        use crate::state::relay::Note;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                note = notes.recv() => match note {
                    Some(Note::Answer(answer)) => self.take_forwarded(&answer),
                    Some(Note::Resume(resume)) => {
                        tokio::spawn(self.bridge.clone().resume_here(resume));
                    }
                    Some(Note::Resumed(_)) | None => return,
                },
            }
        }
    }

    /// An answer another replica forwarded here (`[state]`): delivered as if its client had
    /// sent it here, on its session.
    fn take_forwarded(&self, forwarded: &crate::state::relay::Forwarded) {
        let Ok(msg) = Message::parse(forwarded.message.get().as_bytes()) else {
            return;
        };
        let gateway_id = answered_id(&msg);
        if let Err(err) = self.deliver_answer(&gateway_id, msg, &forwarded.session) {
            let session = forwarded.session.as_str();
            tracing::warn!(session, error = %err, "Forwarded client answer refused");
        }
    }

    /// Delivers a client's answer to a request this replica sent.
    fn deliver_answer(&self, gateway_id: &str, msg: Message, session: &str) -> Result<(), Error> {
        if gateway_id.starts_with(SHIM_PREFIX) {
            self.bridge.shim_answer(gateway_id, msg, session)
        } else {
            match asking_upstream(gateway_id).and_then(|i| self.pool.get(i)) {
                Some(upstream) => upstream.answer_from(gateway_id, msg, session),
                None => Err(Error::UnknownRequest {
                    id: gateway_id.to_owned(),
                }),
            }
        }
    }
}

/// What a `completion/complete` completes, by its `ref`.
#[derive(Debug, PartialEq)]
enum Completing<'a> {
    /// A prompt's argument, by the prompt's exposed name.
    Prompt(&'a str),
    /// A resource template's argument, by its URI.
    Resource(&'a str),
}

fn completing(reference: &Value) -> Result<Completing<'_>, Error> {
    let text = |key: &str| {
        reference
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => Ok(Completing::Prompt(text("name"))),
        Some("ref/resource") => Ok(Completing::Resource(text("uri"))),
        _ => Err(Error::invalid_params(
            Method::CompletionComplete.as_str(),
            "ref.type must be ref/prompt or ref/resource",
        )),
    }
}

/// The id a client's answer names, as the gateway's ids are written (its own are strings).
fn answered_id(msg: &Message) -> String {
    match &msg.id {
        Some(Id::String(id)) => id.clone(),
        other => other.as_ref().map(ToString::to_string).unwrap_or_default(),
    }
}

/// Forwards a client's answer on `session` to replica `owner`, whose request it answers.
async fn forward_answer(
    store: &crate::state::Store,
    owner: &str,
    gateway_id: &str,
    msg: &Message,
    session: &str,
) -> Result<(), Error> {
    use crate::state::relay::{ForwardError, Forwarded};
    let forwarded = Forwarded {
        session: session.to_owned(),
        message: msg.to_raw_value(),
    };
    let refused = |reason: String, gone: bool| Error::AnswerNotForwarded {
        id: gateway_id.to_owned(),
        reason,
        gone,
    };
    let sent = store.forward(owner, forwarded).await;
    crate::telemetry::record::state_answer(outcome_of(sent.map(|()| "forwarded")));
    match sent {
        Ok(()) => Ok(()),
        Err(ForwardError::OwnerGone | ForwardError::NoReply) => Err(refused(
            "the gateway replica that sent the request is gone, and its request with it".into(),
            true,
        )),
        Err(ForwardError::Store(reason)) => Err(refused(
            format!(
                "it was sent by another gateway replica, and the shared state store is unavailable ({reason}); send the answer again"
            ),
            false,
        )),
    }
}

/// The upstream whose server→client request has gateway id `id` (`mcpb-<index>-…`).
fn asking_upstream(id: &str) -> Option<usize> {
    let rest = id.strip_prefix("mcpb-")?;
    rest.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::{Catalog, Contribution};
    use crate::routing::named;

    fn catalog() -> Catalog {
        let a = Contribution {
            tools: vec![json!({"name": "b__c", "inputSchema": {"type": "object"}})],
            prompts: vec![json!({"name": "greet"})],
            ..Contribution::default()
        };
        let b = Contribution {
            tools: vec![json!({"name": "d", "inputSchema": {"type": "object"}})],
            ..Contribution::default()
        };
        Catalog::build(vec![a, b], &["a".into(), "x".into()], "__", 1)
    }

    #[test]
    fn names_route_to_their_upstream_under_its_own_name() {
        let catalog = catalog();
        assert_eq!(named(&catalog, Kind::Tool, "a__b__c"), Some((0, "b__c")));
        assert_eq!(named(&catalog, Kind::Tool, "x__d"), Some((1, "d")));
        assert_eq!(
            named(&catalog, Kind::Prompt, "a__greet"),
            Some((0, "greet"))
        );
        // Tools and prompts are separate name spaces.
        assert_eq!(named(&catalog, Kind::Prompt, "x__d"), None);
        assert_eq!(named(&catalog, Kind::Tool, "a__greet"), None);
    }

    #[test]
    fn completions_name_a_prompt_or_a_resource() {
        let prompt = json!({"type": "ref/prompt", "name": "a__greet"});
        assert_eq!(
            completing(&prompt).ok(),
            Some(Completing::Prompt("a__greet"))
        );
        let resource = json!({"type": "ref/resource", "uri": "file:///{x}"});
        let target = completing(&resource).ok();
        assert_eq!(target, Some(Completing::Resource("file:///{x}")));
        let nameless = json!({"type": "ref/prompt"});
        assert_eq!(completing(&nameless).ok(), Some(Completing::Prompt("")));
        for wrong in [json!({"type": "ref/tool"}), Value::Null] {
            let err = completing(&wrong).err().map(|e| e.to_error_object().kind());
            let invalid = crate::error::kind::REQUEST_INVALID_PARAMS.to_owned();
            assert_eq!(err, Some(Some(invalid)), "{wrong}");
        }
    }

    #[test]
    fn client_answers_name_the_upstream_that_asked() {
        assert_eq!(asking_upstream("mcpb-3-9f2c"), Some(3));
        assert_eq!(asking_upstream("mcpb-12"), Some(12));
        assert_eq!(asking_upstream("mcpb-x-1"), None);
        assert_eq!(asking_upstream("7"), None);
        assert_eq!(asking_upstream("mcpb-shim-abc"), None);
    }
}
