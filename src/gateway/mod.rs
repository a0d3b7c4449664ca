//! The aggregator: many upstreams behind one MCP server.
//!
//! Tools and prompts of every upstream are listed under namespaced names
//! (`<server><sep><name>`, see [`crate::naming`]); resources keep their URIs (they are already
//! global) and are routed by a URI → upstream map built from the lists, with the resource
//! templates' literal prefixes as fallback. Calls are routed to the right upstream with the
//! upstream's own name restored. The catalog ([`crate::catalog::Catalog`]) is rebuilt when an
//! upstream becomes ready or says `list_changed`, and published: routing reads the current
//! snapshot, and layers subscribe to it ([`Gateway::catalog`]). An upstream that goes down keeps
//! its last known tools (calls to them fail with `mcp_budget.upstream.unavailable`).
//!
//! [`Gateway`] is the innermost [`tower::Service`] of the stack (see [`crate::stack`]): it
//! dispatches each message on the [`Method`] its view parsed once, downstream, in one
//! exhaustive `match`, and keeps the view for what it asks later (the request's era, what it
//! calls).
//!
//! # Rooms
//!
//! - `pool`: starting the upstreams, their events, list refreshes and the published catalog
//!   (with the upstream ids of its positions); readiness, the startup summary, shutdown;
//!   `pool::lists`: fetching an upstream's lists and comparing them; `pool::reconcile`: a
//!   reloaded policy applied to the upstreams ([`Gateway::reconcile`]).
//!   `pool::recheck`: every upstream listed again every `[pin] recheck_secs`.
//!   `pool::instances`: the per-client instances of `share = "per_client"` upstreams (started
//!   on a client's first request, reaped after `idle_secs`, capped by `max_instances`).
//! - `route`: which upstream serves a request (names, URIs, completions), forwarding and
//!   cancellation, clients' answers to server→client requests; `name_span`: the name splice
//!   of the hot path.
//! - `sessions`: the session registry, broadcasts, the handshake (`initialize`,
//!   `server/discover`: capabilities, instructions), log levels.
//! - `bridge`: calls between clients and upstreams of different eras; `parked`: a modern
//!   client's call parked while a 2025-era upstream waits for its answers.
//! - `tasks`: which upstream made which task, for whom; `tasks/*` and `tasks/list`.
//! - `subscriptions`: `resources/subscribe` bookkeeping and `subscriptions/listen` streams.
//! - `pages`: the gateway's own paged lists and their cursors.

mod bridge;
mod health;
mod name_span;
mod pages;
mod parked;
mod pool;
mod route;
mod sessions;
mod subscriptions;
mod tasks;

pub use health::{InstanceState, UpstreamState};
pub use pool::{UpstreamSummary, summary_lines};
pub use sessions::SUPPORTED_VERSIONS;

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::catalog::Catalog;
use crate::context::McpRequest;
use crate::error::Error;
use crate::jsonrpc::{Id, Kind, Message};
use crate::mcp::method::{Method, Notification};
use crate::policy::Policy;

/// The aggregating gateway: upstream pool, catalog and sessions.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("upstreams", &self.inner.pool.current())
            .finish_non_exhaustive()
    }
}

/// What the gateway holds, room by room.
struct Inner {
    /// The policy it runs: replaced as a whole by a reload ([`Gateway::reconcile`]).
    policy: std::sync::Mutex<Arc<Policy>>,
    /// Told each time a reload replaces the policy (the recheck task reads its period again).
    reloaded: tokio::sync::Notify,
    /// The upstreams and the catalog they make.
    pool: pool::Pool,
    /// Messages for every session and listener, sent by layers (the budget layer's
    /// `list_changed`).
    broadcasts: mpsc::UnboundedSender<Message>,
    sessions: sessions::Sessions,
    subscriptions: subscriptions::Subscriptions,
    /// Client requests in flight upstream, for cancellation.
    inflight: route::Inflight,
    /// Calls of modern clients to 2025-era upstreams waiting for the client's retry.
    parked: parked::ParkedCalls,
    /// Server→client requests the gateway sent for a modern upstream.
    shim: bridge::Shim,
    tasks: tasks::Tasks,
    shutdown: CancellationToken,
    /// The audit log's writer, shared by every stack generation and the guard's journal.
    audit: crate::audit::Shared,
    /// Policy keys the last reload changed that apply only at a restart.
    pending_restart: std::sync::Mutex<Vec<&'static str>>,
    /// The `[state]` store (`backend = "redis"`), made once: every stack's `limit` layer
    /// shares it.
    state: Option<crate::state::Store>,
}

/// The store `policy`'s `[state]` names, its URL read from the environment now.
fn store(policy: &Policy, shutdown: &CancellationToken) -> Option<crate::state::Store> {
    let crate::policy::state::Backend::Redis(settings) = &policy.state.backend else {
        return None;
    };
    let url = match policy.state_url() {
        Ok(Some(url)) => Ok(url),
        Ok(None) => Err("no store URL".to_owned()),
        Err(problem) => Err(problem.to_string()),
    };
    Some(crate::state::Store::start(
        settings.clone(),
        url,
        shutdown.clone(),
    ))
}

impl Gateway {
    fn new(
        policy: Policy,
        pool: pool::Pool,
        broadcasts: mpsc::UnboundedSender<Message>,
        shutdown: CancellationToken,
        state: Option<crate::state::Store>,
    ) -> Self {
        let inner = Inner {
            policy: std::sync::Mutex::new(Arc::new(policy)),
            reloaded: tokio::sync::Notify::new(),
            pool,
            broadcasts,
            sessions: sessions::Sessions::default(),
            subscriptions: subscriptions::Subscriptions::default(),
            inflight: route::Inflight::default(),
            parked: parked::ParkedCalls::default(),
            shim: bridge::Shim::new(state.as_ref().map(|s| s.replica_id().to_owned())),
            tasks: tasks::Tasks::default(),
            shutdown,
            audit: crate::audit::Shared::default(),
            pending_restart: std::sync::Mutex::default(),
            state,
        };
        let gateway = Self {
            inner: Arc::new(inner),
        };
        // What the guard quarantines or sanitizes goes to the audit log as it happens.
        let (g, shutdown) = (gateway.clone(), gateway.inner.shutdown.clone());
        let catalog = gateway.inner.pool.subscribe();
        tokio::spawn(crate::audit::guard::journal(
            catalog,
            move || g.audit(),
            shutdown,
        ));
        gateway
    }

    /// The shared state store of `[state] backend = "redis"`, made when the gateway started
    /// (a reload that changes `[state]` applies at the next restart); `None` for `memory`.
    #[must_use]
    pub fn state(&self) -> Option<crate::state::Store> {
        self.inner.state.clone()
    }

    /// The audit log of the policy it runs: `[audit]`, or stderr once clients are configured;
    /// none without either. One writer per configuration: the stacks' authorize and guard
    /// layers and the guard's journal share it.
    #[must_use]
    pub fn audit(&self) -> crate::audit::Audit {
        self.inner
            .audit
            .get(crate::audit::config(&self.policy()).as_ref())
    }

    async fn handle(&self, req: McpRequest) -> Option<Message> {
        // The session registry learns whose session it is: what a client's per-client
        // instances say outside a call goes to that client's sessions only.
        req.caller.session.bind_principal(&req.caller.principal);
        match req.message.kind() {
            Kind::Request => {
                let id = req.message.reply_id();
                let result = self.handle_request(&req).await;
                Some(match result {
                    Ok(mut msg) => {
                        msg.id = Some(id);
                        msg
                    }
                    Err(err) => Message::error(id, err.to_error_object()),
                })
            }
            Kind::Notification => {
                self.handle_notification(&req);
                None
            }
            Kind::Response | Kind::Error => {
                let McpRequest {
                    message, caller, ..
                } = req;
                self.handle_client_response(message, &caller).await
            }
        }
    }

    /// A client's request, dispatched on its method (`req`'s view parsed it).
    async fn handle_request(&self, req: &McpRequest) -> Result<Message, Error> {
        let (method, msg, caller) = (req.view.method(), &req.message, &req.caller);
        let ok = |v: Value| Ok(Message::response_value(Id::Null, &v));
        match method {
            Method::Initialize => ok(self.initialize(msg, caller)),
            Method::Discover => ok(self.discover()),
            Method::Ping => ok(json!({})),
            // With the budget on, its layer answers tools/list; this is the pass-through list.
            Method::ToolsList => ok(self.list_page(msg, "tools", Catalog::listed_tools)?),
            Method::PromptsList => ok(self.list_page(msg, "prompts", Catalog::listed_prompts)?),
            Method::ResourcesList => {
                ok(self.list_page(msg, "resources", Catalog::listed_resources)?)
            }
            Method::ResourcesTemplatesList => {
                ok(self.list_page(msg, "resourceTemplates", Catalog::listed_templates)?)
            }
            Method::ToolsCall => self.call_named(req, "tool").await,
            Method::PromptsGet => self.call_named(req, "prompt").await,
            Method::ResourcesRead => self.call_by_uri(req).await,
            Method::ResourcesSubscribe => self.subscribe(req, true).await,
            Method::ResourcesUnsubscribe => self.subscribe(req, false).await,
            Method::CompletionComplete => self.complete(req).await,
            Method::SubscriptionsListen => self.listen(msg, caller).await,
            Method::TasksGet | Method::TasksResult | Method::TasksCancel | Method::TasksUpdate => {
                self.route_task(req).await
            }
            Method::TasksList => self.list_tasks(req).await,
            Method::LoggingSetLevel => {
                self.set_log_level(msg, caller).await?;
                ok(json!({}))
            }
            // Notifications sent as requests, server→client methods, and the unknown.
            Method::Initialized
            | Method::Cancelled
            | Method::Progress
            | Method::ToolsListChanged
            | Method::PromptsListChanged
            | Method::ResourcesListChanged
            | Method::ResourcesUpdated
            | Method::LogMessage
            | Method::SubscriptionsAcknowledged
            | Method::TasksStatus
            | Method::SamplingCreateMessage
            | Method::ElicitationCreate
            | Method::ElicitationComplete
            | Method::RootsList
            | Method::RootsListChanged
            // The budget layer serves these to the clients it offered them to.
            | Method::ToolsCatalog | Method::ToolsDescribe
            | Method::Other(_) => Err(Error::MethodNotFound(method.as_str().to_owned())),
        }
    }

    /// A client's notification: the few the gateway acts on, by name (exhaustive over the
    /// notifications, so that a new one is decided here).
    fn handle_notification(&self, req: &McpRequest) {
        let (msg, caller) = (&req.message, &req.caller);
        let Some(notification) = req.view.method().notification() else {
            // A request's method sent as a notification, or a name the gateway does not know.
            return;
        };
        match notification {
            Notification::Cancelled => self.cancel(msg, caller),
            Notification::Initialized => caller.session.update(|s| s.initialized = true),
            Notification::RootsListChanged => {
                // Modern upstreams ask for roots within each call (MRTR): nothing to tell.
                for u in self.inner.pool.legacy() {
                    let _ = u.notify(msg.clone());
                }
                // The caller's own per-client instances: no other client's hears of its roots.
                let instances = self
                    .inner
                    .pool
                    .instances()
                    .of_client(caller.principal.name());
                for u in instances.iter().filter(|u| !u.is_modern()) {
                    let _ = u.notify(msg.clone());
                }
            }
            // Nothing for the gateway to do: progress, logs, list changes and task statuses
            // flow the other way (server to client).
            Notification::Progress
            | Notification::ToolsListChanged
            | Notification::PromptsListChanged
            | Notification::ResourcesListChanged
            | Notification::ResourcesUpdated
            | Notification::LogMessage
            | Notification::SubscriptionsAcknowledged
            | Notification::TasksStatus
            | Notification::ElicitationComplete => {}
        }
    }
}

impl tower::Service<McpRequest> for Gateway {
    type Response = Option<Message>;
    type Error = Infallible;
    type Future = crate::context::McpFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: McpRequest) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.handle(req).await) })
    }
}
