//! mcp-budget's layers in front of someone else's MCP service.
//!
//! [`EmbedLayer`] turns a [`Policy`] into a [`tower::Layer`] over any service of JSON-RPC
//! messages: your gateway keeps its routing, its upstream clients and its HTTP front, and the
//! layers rewrite what the host sees — `tools/list` fitted to the budget (levels, or
//! progressive discovery through the meta-tools), byte-stable for provider prompt caches —
//! and, when the policy configures them, authorize, limit, sanitize and audit each call.
//!
//! ```
//! use mcp_budget::embed::{EmbedLayer, Request};
//! use mcp_budget::policy::Policy;
//! use serde_json::{Value, json};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tower::BoxError> {
//! // Your MCP service: JSON-RPC messages in, the answer (none for a notification) out.
//! let yours = service_fn(|req: Request| async move {
//!     let id = req.message["id"].clone();
//!     let result = match req.message["method"].as_str() {
//!         Some("tools/list") => json!({"tools": [
//!             {"name": "echo", "description": "Echo the text", "inputSchema": {"type": "object"}}
//!         ]}),
//!         Some("tools/call") => json!({"content": [{"type": "text", "text": "echoed"}]}),
//!         _ => json!({}),
//!     };
//!     Ok::<_, tower::BoxError>(Some(json!({"jsonrpc": "2.0", "id": id, "result": result})))
//! });
//! let service = ServiceBuilder::new()
//!     .layer(EmbedLayer::new(Policy::default()))
//!     .service(yours);
//! let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
//! let answer = service.oneshot(Request::new(list)).await?.expect("a request is answered");
//! assert_eq!(answer["result"]["tools"][0]["name"], "echo");
//! # Ok(()) }
//! ```
//!
//! # The message type
//!
//! A request is a [`Request`]: the message as a [`serde_json::Value`] and
//! [`http::Extensions`]; the answer is `Option<Value>` (`None` for a notification or a
//! response). `Value` is what every Rust MCP stack can hand over (rmcp's and tower-mcp's
//! message types serialize to it; a gateway that forwards bytes parses them once), so no
//! embedder depends on mcp-budget's internal envelope, which may change. Unknown fields in
//! `params` and `result` pass through in both directions (members of the envelope that
//! JSON-RPC 2.0 does not define are dropped, as the gateway's transports drop them). The price
//! is one conversion into the lossless internal form and one back per message
//! (`docs/embedding.md` has the figures). The service is cloned for each call (it is
//! `Clone + Send + Sync`, as a `tower` service behind a shared router is), and readied before
//! it is called.
//!
//! # Who calls
//!
//! Put a [`Caller`] in the request's extensions ([`Request::with_caller`]): the `[[client]]`
//! of the policy whose scope, model and limits apply, your own id for whoever it is (audit
//! lines carry it), and the host session (promoted tools and search hits are per session).
//! A policy without `[[client]]` needs none; with clients, a request without a known client
//! is refused (`mcp_budget.authentication.invalid`). The extensions go down to your service
//! with each request the layers send it.
//!
//! # The catalog
//!
//! The layers learn the tools, prompts and resources from your service itself: before the
//! first request that needs them they send it `tools/list`, `prompts/list`, `resources/list`
//! and `resources/templates/list` (every page, following `nextCursor`; these requests carry no
//! [`Caller`]), and the lists go through the same guard (sanitizing, pinning) as a gateway
//! upstream's. Your service is one server to the layers, and the host sees its tools under
//! their own names, so your routing stays as it is: an `invoke_tool` goes down as the
//! `tools/call` of the tool it names. When your service tells its host that a list changed,
//! pass the notification to [`EmbedLayer::inner_notification`] first: the lists are learned
//! again, and it says whether to pass the notification on (with the budget on, the layer
//! announces `notifications/tools/list_changed` itself, through [`EmbedLayer::announce_to`],
//! only when the bytes a host lists change).
//!
//! # Policy
//!
//! The same sections as the gateway's: `[budget]`, `[discover]`, `[[client]]`, `[limits]`,
//! `[sanitize]`, `[pin]`, `[audit]`. The service's server id is empty: the globs of a
//! client's `allow` and `deny` name its tools as `*/name` (`allow = ["*/get_*"]`).
//! `[[upstream]]`, `[downstream]` and the other process settings are the embedder's business
//! and not read; `[state]` neither (the limits are this process's).
//!
//! # An in-process server underneath
//!
//! A server of this process that speaks MCP over byte streams (an rmcp server over a
//! [`tokio::io::duplex`]) or as a service of messages becomes the inner service with
//! [`Connected::start`]`(name, InProcess::streams(…))`: the gateway's own upstream client
//! reaches it (handshake, request ids, timeouts, a new connection when the streams end), and
//! its `list_changed` notifications come out of [`Connected::notifications`].
//!
//! # Errors
//!
//! Every request gets exactly one answer: policy outcomes are JSON-RPC errors with their
//! `data.type` ([`crate::error::kind`]), an error of your service is answered as
//! `mcp_budget.upstream.unavailable`, and the service itself never fails.

mod connected;
mod inner;
mod learn;
#[cfg(test)]
mod tests;

pub use connected::Connected;

use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Layer, Service, ServiceExt};

use crate::catalog::Catalog;
use crate::context::{Caller as StackCaller, McpRequest, Session};
use crate::error::{Error, Http, kind};
use crate::identity::Directory;
use crate::jsonrpc::{Kind, Message};
use crate::layer::budget::{BudgetLayer, PlanSummary};
use crate::lock::lock;
use crate::mcp::method::{Listed, Method};
use crate::policy::Policy;
use crate::stack::{McpService, Parts};

pub use learn::INNER;

/// One message for an MCP service, and what travels with it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Request {
    /// The JSON-RPC message (request, notification, or a response to a server→client
    /// request).
    pub message: Value,
    /// What the embedder attaches: a [`Caller`] for the layers, anything else for its own
    /// service below them.
    pub extensions: http::Extensions,
}

impl Request {
    /// `message`, with no extensions.
    #[must_use]
    pub fn new(message: Value) -> Self {
        Self {
            message,
            extensions: http::Extensions::new(),
        }
    }

    /// The same request from `caller`.
    #[must_use]
    pub fn with_caller(mut self, caller: Caller) -> Self {
        self.extensions.insert(caller);
        self
    }
}

impl From<Value> for Request {
    fn from(message: Value) -> Self {
        Self::new(message)
    }
}

/// Who sends a [`Request`], as the embedding gateway knows it: put it in the request's
/// extensions ([`Request::with_caller`]).
///
/// ```
/// use mcp_budget::embed::{Caller, Request};
///
/// let caller = Caller::new("ci-bot").with_principal("user-4711").with_session("s-1");
/// let req = Request::new(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
///     .with_caller(caller);
/// assert_eq!(req.extensions.get::<Caller>().and_then(Caller::client), Some("ci-bot"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Caller {
    client: Option<String>,
    principal: Option<String>,
    session: Option<String>,
}

impl Caller {
    /// A caller that is the policy's `[[client]]` `client` (its scope, model and limits).
    #[must_use]
    pub fn new(client: impl Into<String>) -> Self {
        Self {
            client: Some(client.into()),
            ..Self::default()
        }
    }

    /// The same caller, with the embedder's own id for it (a user, a token subject): audit
    /// lines and traces carry it beside the client name.
    #[must_use]
    pub fn with_principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// The same caller, in host session `id` (tools promoted on use and search hits are kept
    /// per session; without one, every request of the client shares one).
    #[must_use]
    pub fn with_session(mut self, id: impl Into<String>) -> Self {
        self.session = Some(id.into());
        self
    }

    /// The `[[client]]` name.
    #[must_use]
    pub fn client(&self) -> Option<&str> {
        self.client.as_deref()
    }

    /// The embedder's id for the caller.
    #[must_use]
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// The host session.
    #[must_use]
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }
}

/// The session of requests whose [`Caller`] names none.
const DEFAULT_SESSION: &str = "embedded";

/// Sessions idle this long are forgotten (with their promoted tools).
const SESSION_IDLE: Duration = Duration::from_secs(3600);

/// The layer: mcp-budget's stack in front of an MCP service of [`Request`]s (see the
/// [module docs](self)).
#[derive(Debug, Clone)]
pub struct EmbedLayer {
    shared: Arc<Shared>,
}

/// What every service of one layer shares.
struct Shared {
    parts: Parts,
    budget: Option<BudgetLayer>,
    /// Publishes the learned catalog the layers read.
    publish: Arc<watch::Sender<Arc<Catalog>>>,
    directory: Directory,
    sessions: moka::sync::Cache<String, Arc<Session>>,
    /// Where sessions' messages go (the budget layer's per-client `list_changed`).
    notify: Mutex<mpsc::UnboundedSender<Message>>,
    /// The learner of the first service made ([`EmbedLayer::inner_notification`] asks it).
    learner: OnceLock<Arc<learn::Learner>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("budget", &self.budget.is_some())
            .field("catalog_version", &self.parts.catalog.borrow().version())
            .finish_non_exhaustive()
    }
}

impl EmbedLayer {
    /// The layers `policy` configures (its `[[upstream]]`s and process knobs are not used:
    /// the service below is the one server).
    #[must_use]
    pub fn new(policy: Policy) -> Self {
        let mut policy = policy;
        // The host sees the inner service's own names: nothing is namespaced.
        policy.separator = String::new();
        let (publish, catalog) = watch::channel(Arc::new(Catalog::default()));
        let budget = policy
            .budget
            .enabled
            .then(|| BudgetLayer::new(catalog.clone(), &policy));
        let directory = Directory::new(
            policy
                .clients
                .iter()
                .map(crate::identity::client_of)
                .collect(),
        );
        let audit = crate::audit::Shared::default().get(crate::audit::config(&policy).as_ref());
        // Until `announce_to`, sessions' messages have nowhere to go.
        let (notify, _) = mpsc::unbounded_channel();
        Self {
            shared: Arc::new(Shared {
                parts: Parts {
                    policy: Arc::new(policy),
                    catalog,
                    audit,
                    state: None,
                },
                budget,
                publish: Arc::new(publish),
                directory,
                sessions: moka::sync::Cache::builder()
                    .time_to_idle(SESSION_IDLE)
                    .build(),
                notify: Mutex::new(notify),
                learner: OnceLock::new(),
            }),
        }
    }

    /// From now on, sends what the layers tell hosts outside answers to `sink`:
    /// `notifications/tools/list_changed` when the bytes of the list a host gets change
    /// (with `[[client]]`s, once per client session whose list changed). Call it before
    /// serving: sessions made earlier keep the old destination.
    ///
    /// # Panics
    /// Outside a Tokio runtime (it spawns the tasks that watch the catalog).
    #[must_use]
    pub fn announce_to(self, sink: mpsc::UnboundedSender<Value>) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(message) = rx.recv().await {
                if sink.send(message.to_value()).is_err() {
                    return;
                }
            }
        });
        if let Some(budget) = &self.shared.budget {
            budget.announce_to(tx.clone());
        }
        *lock(&self.shared.notify) = tx;
        self
    }

    /// Tells the layers about a notification the inner service sent toward its host; returns
    /// whether to pass it on. A `notifications/{tools,prompts,resources}/list_changed` has the
    /// lists learned again (on a task of its own); the tools' one is not passed on while the
    /// budget is on (the layers announce their own list's changes, [`EmbedLayer::announce_to`]).
    /// Everything else is passed on.
    ///
    /// # Panics
    /// Outside a Tokio runtime, for a `list_changed` once a service was made.
    #[must_use]
    pub fn inner_notification(&self, message: &Value) -> bool {
        let method = message.get("method").and_then(Value::as_str);
        let Some(listed) = method.and_then(|m| Method::parse(m).list_changed()) else {
            return true;
        };
        if let Some(learner) = self.shared.learner.get() {
            learner.stale();
            let learner = learner.clone();
            tokio::spawn(async move { learner.ensure().await });
        }
        !(listed == Listed::Tools && self.shared.budget.is_some())
    }

    /// The current plan's totals (learned tools, listed tools, tokens before and after);
    /// `None` with the budget off.
    #[must_use]
    pub fn summary(&self) -> Option<PlanSummary> {
        self.shared.budget.as_ref().map(BudgetLayer::summary)
    }

    /// The catalog learned so far.
    #[must_use]
    pub fn catalog(&self) -> Arc<Catalog> {
        self.shared.parts.catalog.borrow().clone()
    }
}

impl<S> Layer<S> for EmbedLayer
where
    S: Service<Request, Response = Option<Value>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Service = Embed<S>;

    fn layer(&self, inner: S) -> Embed<S> {
        let inner: learn::InnerService = BoxCloneSyncService::new(inner.map_err(Into::into));
        let learner = Arc::new(learn::Learner::new(
            inner.clone(),
            self.shared.publish.clone(),
            self.shared.parts.policy.clone(),
        ));
        let _ = self.shared.learner.set(learner.clone());
        let bottom = inner::ToInner::new(inner, self.shared.parts.catalog.clone());
        let stack = crate::stack::layered(&self.shared.parts, self.shared.budget.as_ref(), bottom);
        Embed {
            shared: self.shared.clone(),
            learner,
            stack,
            _inner: PhantomData,
        }
    }
}

/// mcp-budget's stack over an MCP service `S` ([`EmbedLayer`]).
pub struct Embed<S> {
    shared: Arc<Shared>,
    learner: Arc<learn::Learner>,
    stack: McpService,
    _inner: PhantomData<fn(S)>,
}

impl<S> Clone for Embed<S> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            learner: self.learner.clone(),
            stack: self.stack.clone(),
            _inner: PhantomData,
        }
    }
}

impl<S> std::fmt::Debug for Embed<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embed")
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

impl<S> Service<Request> for Embed<S>
where
    S: Service<Request>,
{
    type Response = Option<Value>;
    /// Never returned: the inner service's errors are answered as JSON-RPC errors.
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Option<Value>, S::Error>> + Send>,
    >;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        // The stack readies its own clone of the inner service for each call.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let (shared, learner, stack) = (
            self.shared.clone(),
            self.learner.clone(),
            self.stack.clone(),
        );
        Box::pin(async move { Ok(handle(&shared, &learner, stack, req).await) })
    }
}

/// One request through the stack: decoded, its caller found, the catalog learned when it
/// needs it.
async fn handle(
    shared: &Shared,
    learner: &learn::Learner,
    stack: McpService,
    req: Request,
) -> Option<Value> {
    let Request {
        message,
        extensions,
    } = req;
    let message = match decode(&message) {
        Ok(message) => message,
        Err(reply) => return reply,
    };
    let is_request = message.kind() == Kind::Request;
    let caller = match shared.caller(extensions.get::<Caller>()) {
        Ok(caller) => caller,
        Err(err) => {
            let reply = Message::error(message.reply_id(), err.to_error_object());
            return is_request.then(|| reply.to_value());
        }
    };
    let method = message.method().map(Method::parse);
    if is_request && method != Some(Method::Initialize) {
        learner.ensure().await;
    }
    let caller = caller.with_extensions(extensions);
    let answer = match stack.oneshot(McpRequest::new(message, caller)).await {
        Ok(answer) => answer,
        Err(never) => match never {},
    };
    answer.as_ref().map(Message::to_value)
}

impl Shared {
    /// The stack's caller for the embedder's `caller`: its principal and its session.
    fn caller(&self, caller: Option<&Caller>) -> Result<StackCaller, Error> {
        let (client, principal) = caller.map_or((None, None), |c| (c.client(), c.principal()));
        let principal = self
            .directory
            .embedded(client, principal)
            .map_err(|refusal| {
                Error::Http(Http::Refused {
                    kind: kind::AUTHENTICATION_INVALID,
                    message: refusal.to_string(),
                })
            })?;
        let id = caller
            .and_then(Caller::session)
            .unwrap_or(DEFAULT_SESSION)
            .to_owned();
        let session = self.sessions.get_with(id.clone(), || {
            Arc::new(Session::new(id, lock(&self.notify).clone()))
        });
        Ok(StackCaller::new(session).with_principal(Arc::new(principal)))
    }
}

/// `value` as a message, or the error answer the stdio downstream gives a line that is not
/// one.
fn decode(value: &Value) -> Result<Message, Option<Value>> {
    Message::from_value(value).map_err(|err| Some(err.to_response().to_value()))
}
