//! Routing: which upstream serves a request, and the request's way there and back.
//!
//! Tools and prompts are found by their exposed (namespaced) name in the catalog, and sent
//! with the upstream's own name restored; resources by URI (listed URIs, then template
//! prefixes, then the only upstream with resources); completions by the prompt or resource
//! they complete. [`Gateway::forward`] sends a request and keeps it cancellable; a client's
//! answer to a server→client request goes back to the upstream (or bridge) that asked.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::name_span::NameSpan;
use super::pool::Pool;
use super::{Gateway, bridge};
use crate::authz::Kind;
use crate::context::{Caller, McpRequest};
use crate::error::Error;
use crate::jsonrpc::{Id, Message, to_raw};
use crate::lock::lock;
use crate::mcp::method::{Method, Names};
use crate::policy::ServerRequests;
use crate::upstream::{Call, Status, Upstream, asked_replica};

/// One client request on its way to one upstream.
pub(super) struct Forward<'a> {
    /// The upstream's index.
    pub(super) upstream: usize,
    /// The client's request.
    pub(super) msg: &'a Message,
    /// The params to send (names restored to the upstream's own).
    pub(super) params: Option<Box<RawValue>>,
    /// Who asked.
    pub(super) caller: &'a Caller,
    /// Whether the client's request is modern (its view says).
    pub(super) modern: bool,
    /// The request's id upstream.
    pub(super) id: i64,
}

/// (session, client request id) → (upstream, upstream request id) of the requests in flight,
/// for cancellation.
#[derive(Debug, Default)]
pub(super) struct Inflight(Mutex<HashMap<(String, Id), (usize, i64)>>);

impl Inflight {
    /// Notes that client request `msg` of `caller` is upstream `i`'s request `id` now.
    pub(super) fn track(&self, caller: &Caller, msg: &Message, i: usize, id: i64) {
        lock(&self.0).insert(key(caller, msg), (i, id));
    }

    /// Forgets client request `msg` of `caller`.
    fn untrack(&self, caller: &Caller, msg: &Message) {
        lock(&self.0).remove(&key(caller, msg));
    }

    /// How many client requests are in flight to upstream `i` (a removed upstream is stopped
    /// once none is).
    pub(super) fn to_upstream(&self, i: usize) -> usize {
        lock(&self.0).values().filter(|(u, _)| *u == i).count()
    }

    /// Takes the upstream request that client request `id` of `session` is now.
    fn take(&self, session: &str, id: Id) -> Option<(usize, i64)> {
        lock(&self.0).remove(&(session.to_owned(), id))
    }
}

fn key(caller: &Caller, msg: &Message) -> (String, Id) {
    let id = msg.reply_id();
    (caller.session.id.clone(), id)
}

impl Gateway {
    /// `tools/call` (`what` = `tool`) or `prompts/get` (`prompt`): to the upstream that lists
    /// the name, under its own name.
    pub(super) async fn call_named(
        &self,
        req: &McpRequest,
        what: &'static str,
    ) -> Result<Message, Error> {
        let msg = &req.message;
        let not_listed = |name: String| {
            let separator = self.inner.pool.borrow().separator().to_owned();
            self.inner.pool.not_listed(what, name, &separator)
        };
        // Routed as the layers routed it (reused when one did): the name is the view's, the
        // one `NameSpan` and the general path find too (the last `name`, as a `Value` reads
        // it).
        let kind = match req.view.method().names() {
            Some(Names::Tool) => Kind::Tool,
            _ => Kind::Prompt,
        };
        let pool = &self.inner.pool;
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
        let i = self
            .inner
            .pool
            .route_uri(uri)
            .ok_or_else(|| Error::NotFound {
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
                let found = (self.inner.pool)
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
                self.inner
                    .pool
                    .route_uri(uri)
                    .ok_or_else(|| Error::NotFound {
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
        let serving = self.serving(i, caller).await?;
        let (i, upstream) = (serving.id, &serving.upstream);
        let id = upstream.next_request_id();
        // Only a request that asked for a task (2025-11-25) or went to a modern upstream can
        // create one.
        let may_create_task =
            upstream.is_modern() || (params.as_ref()).is_some_and(|p| p.get().contains("\"task\""));
        self.inner.inflight.track(caller, msg, i, id);
        let result = if upstream.is_modern() || modern {
            let forward = Forward {
                upstream: i,
                msg,
                params,
                caller,
                modern,
                id,
            };
            self.forward_across(forward).await
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
        self.inner.inflight.untrack(caller, msg);
        if let (Ok(reply), true) = (&result, may_create_task) {
            self.inner.tasks.note(base, reply, caller, modern);
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
        if let Some((i, upstream_id)) = self.inner.inflight.take(&caller.session.id, id) {
            let reason = params.get("reason").and_then(Value::as_str);
            if let Some(upstream) = self.inner.pool.get(i) {
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
    pub(super) async fn handle_client_response(
        &self,
        msg: Message,
        caller: &Caller,
    ) -> Option<Message> {
        let session = caller.session.id.as_str();
        let gateway_id = answered_id(&msg);
        let delivered = if let Some((owner, store)) = self.elsewhere(asked_replica(&gateway_id)) {
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
        self,
        mut notes: tokio::sync::mpsc::UnboundedReceiver<crate::state::relay::Note>,
    ) {
        use crate::state::relay::Note;
        loop {
            tokio::select! {
                () = self.inner.shutdown.cancelled() => return,
                note = notes.recv() => match note {
                    Some(Note::Answer(answer)) => self.take_forwarded(&answer),
                    Some(Note::Resume(resume)) => {
                        tokio::spawn(self.clone().resume_here(resume));
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
        if gateway_id.starts_with(bridge::SHIM_PREFIX) {
            self.inner.shim.answer(gateway_id, msg, session)
        } else {
            match asking_upstream(gateway_id).and_then(|i| self.inner.pool.get(i)) {
                Some(upstream) => upstream.answer_from(gateway_id, msg, session),
                None => Err(Error::UnknownRequest {
                    id: gateway_id.to_owned(),
                }),
            }
        }
    }

    /// The properties of tool `exposed` that a 2026-07-28 HTTP `tools/call` mirrors in
    /// `Mcp-Param-*` headers (empty for most tools).
    #[must_use]
    pub fn param_marks(&self, exposed: &str) -> Vec<crate::mcp::params::Marked> {
        self.inner.pool.borrow().param_marks(exposed).to_vec()
    }
}

impl Pool {
    /// The error for a `what` called `name` that no upstream lists: "unavailable" when the
    /// name carries the namespace of an upstream that is not serving (it never started, or
    /// crashed before listing), else "not found". Saying "unknown tool" would send the model
    /// looking for another tool when the real answer is "try again later".
    fn not_listed(&self, what: &'static str, name: String, separator: &str) -> Error {
        let current = self.current();
        let upstreams = (current.iter()).map(|u| (u.name(), u.status()));
        match unavailable_owner(&name, separator, upstreams) {
            // A server that is down because it cannot be reached says so (URL, OS reason).
            Some(Error::UpstreamUnavailable { upstream, reason }) => {
                let down = (current.iter())
                    .find(|u| u.name() == upstream && matches!(u.status(), Status::Down(_)));
                match down {
                    Some(u) => u.down_error(reason),
                    None => Error::UpstreamUnavailable { upstream, reason },
                }
            }
            Some(other) => other,
            None => Error::NotFound { what, name },
        }
    }

    /// The upstream of resource `uri`: the one that lists it, then the one with the longest
    /// literal prefix of a template; then the only upstream with resources.
    pub(super) fn route_uri(&self, uri: &str) -> Option<usize> {
        if let Some((id, ())) = self.route(|catalog| catalog.resource(uri).map(|i| (i, ()))) {
            return Some(id);
        }
        let current = self.current();
        let mut with_resources = (current.iter())
            .filter(|u| u.info().capabilities.get("resources").is_some())
            .map(Upstream::index);
        match (with_resources.next(), with_resources.next()) {
            (Some(i), None) => Some(i),
            _ => None,
        }
    }
}

/// For a name no upstream lists: the error of the first upstream that is not serving and
/// whose namespace (`<name><separator>`) the name carries.
fn unavailable_owner<'a>(
    name: &str,
    separator: &str,
    upstreams: impl Iterator<Item = (&'a str, Status)>,
) -> Option<Error> {
    upstreams
        .filter(|(upstream, _)| {
            (name.strip_prefix(upstream)).is_some_and(|rest| rest.starts_with(separator))
        })
        .find_map(|(upstream, status)| {
            let reason = match status {
                Status::Ready => return None,
                Status::Down(reason) => reason,
                Status::Starting => "still starting".into(),
            };
            Some(Error::UpstreamUnavailable {
                upstream: upstream.to_owned(),
                reason,
            })
        })
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

/// The upstream whose server→client request has gateway id `id` (`mcpb-<index>-…`).
impl Gateway {
    /// The replica `owner` names, with the store to reach it, when it is another replica of
    /// this deployment (`[state]`): what it asked for or parked is forwarded there.
    pub(super) fn elsewhere<'a>(
        &'a self,
        owner: Option<&'a str>,
    ) -> Option<(&'a str, &'a crate::state::Store)> {
        let store = self.inner.state.as_ref()?;
        owner
            .filter(|owner| *owner != store.replica_id())
            .map(|owner| (owner, store))
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

/// The `mcp_budget_state_answers_total` outcome of a note sent to another replica.
pub(super) fn outcome_of(
    sent: Result<&'static str, crate::state::relay::ForwardError>,
) -> &'static str {
    use crate::state::relay::ForwardError;
    match sent {
        Ok(outcome) => outcome,
        Err(ForwardError::OwnerGone) => "owner_gone",
        Err(ForwardError::NoReply) => "no_reply",
        Err(ForwardError::Store(reason)) => reason,
    }
}

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
    fn an_unlisted_name_blames_its_upstream_only_when_that_one_is_not_serving() {
        let kind = |name: &str, upstreams: &[(&str, Status)]| {
            unavailable_owner(name, "__", upstreams.iter().cloned())
                .map(|e| e.to_error_object().kind())
        };
        let down = Status::Down("exited".into());
        let unavailable = Some(Some(crate::error::kind::UPSTREAM_UNAVAILABLE.to_owned()));
        assert_eq!(kind("a__t", &[("a", down.clone())]), unavailable);
        assert_eq!(kind("a__t", &[("a", Status::Starting)]), unavailable);
        assert_eq!(kind("a__t", &[("a", Status::Ready)]), None);
        // The namespace is the name and the separator, not a prefix of the name.
        assert_eq!(kind("ab__t", &[("a", down.clone())]), None);
        assert_eq!(kind("a_t", &[("a", down.clone())]), None);
        // The first owner that is not serving answers; a ready one does not hide it.
        assert_eq!(
            kind("a__b__t", &[("a", Status::Ready), ("a__b", down)]),
            unavailable
        );
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
