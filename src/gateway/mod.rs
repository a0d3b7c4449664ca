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
//! [`Gateway`] is a thin service over rooms, each a type with its own methods in its own
//! file; only this file reaches into the gateway's fields.
//!
//! - `pool` (`Pool`): starting the upstreams, their events, list refreshes and the published
//!   catalog (with the upstream ids of its positions); the policy it runs, and who announces
//!   list changes under it (an `Announce` the stack decides, `announce`); where a request
//!   goes (`route`, `serving`: a per-client upstream's instance); readiness, the startup
//!   summary, shutdown. `pool::lists`: fetching an upstream's lists and comparing them;
//!   `pool::reconcile`: what a reload announces ([`Gateway::reconcile`]); `pool::recheck`:
//!   every upstream listed again every `[pin] recheck_secs`; `pool::instances`: the per-client
//!   instances of `share = "per_client"` upstreams (started on a client's first request, reaped
//!   after `idle_secs`, capped by `max_instances`).
//! - `route` (`Forwarder`): forwarding by name, URI or completion, cancellation, clients'
//!   answers to server→client requests; `forward`: what forwarding shares with the bridge (the
//!   request on its way, the requests in flight); `name_span`: the name splice of the hot
//!   path.
//! - `bridge` (`EraBridge`): calls between clients and upstreams of different eras;
//!   `bridge::parked`: a modern client's call parked while a 2025-era upstream waits for its
//!   answers.
//! - `sessions` (`Sessions`): the session registry, broadcasts, the handshake (`initialize`,
//!   `server/discover`: capabilities, instructions), log levels.
//! - `tasks` (`Tasks`): which upstream made which task, for whom; `tasks/*` and `tasks/list`.
//! - `subscriptions` (`Subscriptions`): `resources/subscribe` bookkeeping and
//!   `subscriptions/listen` streams.
//! - `pages`: the gateway's own paged lists and their cursors; `health`: what the admin
//!   listener reads.

mod announce;
mod bridge;
mod forward;
mod health;
mod name_span;
mod pages;
mod pool;
mod route;
mod sessions;
mod subscriptions;
mod tasks;

pub use announce::Announce;
pub use health::{InstanceState, UpstreamState};
pub use pool::{UpstreamSummary, summary_lines};
pub use sessions::SUPPORTED_VERSIONS;

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::catalog::Catalog;
use crate::context::{McpRequest, Session};
use crate::error::Error;
use crate::jsonrpc::{Id, Kind, Message};
use crate::mcp::method::{Method, Notification};
use crate::policy::{Policy, Reconcile};
use crate::upstream::Event;
use bridge::EraBridge;
use forward::Inflight;
use pool::{Heard, Pool};
use route::Forwarder;
use sessions::Sessions;
use subscriptions::Subscriptions;
use tasks::Tasks;

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

/// The gateway's rooms, and what it hands the layers.
struct Inner {
    /// The upstreams, the policy they run under and the catalog they make.
    pool: Arc<Pool>,
    /// Forwarding and cancellation.
    forwarder: Arc<Forwarder>,
    /// Client requests in flight upstream (forwarding's and the bridge's), for cancellation
    /// and for stopping a removed upstream once none is.
    inflight: Arc<Inflight>,
    /// Calls between eras: the shim and the parked calls.
    bridge: Arc<EraBridge>,
    sessions: Arc<Sessions>,
    subscriptions: Arc<Subscriptions>,
    tasks: Arc<Tasks>,
    /// Messages for every session and listener, sent by layers (the budget layer's
    /// `list_changed`) and by the pool.
    broadcasts: mpsc::UnboundedSender<Message>,
    shutdown: CancellationToken,
    /// The audit log's writer, shared by every stack generation and the guard's journal.
    audit: crate::audit::Shared,
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
    /// Starts every upstream of the policy in parallel and returns at once; use
    /// [`Gateway::wait_ready`] to wait for them. `announce` says who announces list changes
    /// under `policy` ([`crate::stack::announce`]).
    #[must_use]
    pub fn start(policy: Policy, announce: Announce, shutdown: CancellationToken) -> Self {
        let state = store(&policy, &shutdown);
        let replica = state.as_ref().map(|s| Arc::from(s.replica_id()));
        let (broadcasts, broadcasts_rx) = mpsc::unbounded_channel();
        let policy = Arc::new(policy);
        let (pool, events) = Pool::start(policy, announce, &shutdown, replica, broadcasts.clone());
        let gateway = Self::new(pool, broadcasts, shutdown, state);
        let inner = &gateway.inner;
        tokio::spawn(gateway.clone().watch_events(events, broadcasts_rx));
        let g = gateway.clone();
        tokio::spawn(
            inner
                .pool
                .clone()
                .reap_instances(move || g.instance_holds()),
        );
        tokio::spawn(inner.pool.clone().recheck());
        if let Some(store) = gateway.state() {
            if let Some(notes) = store.take_notes() {
                let forwarder = inner.forwarder.clone();
                tokio::spawn(forwarder.take_notes(notes, inner.shutdown.clone()));
            }
            let promotions = store.promotions();
            let sessions = inner.sessions.clone();
            tokio::spawn(sessions.announce_promotions(promotions, inner.shutdown.clone()));
        }
        gateway
    }

    /// The rooms over `pool`, and the guard's journal.
    fn new(
        pool: Arc<Pool>,
        broadcasts: mpsc::UnboundedSender<Message>,
        shutdown: CancellationToken,
        state: Option<crate::state::Store>,
    ) -> Self {
        let inflight = Arc::new(Inflight::default());
        let bridge = Arc::new(EraBridge::new(
            pool.clone(),
            inflight.clone(),
            state.clone(),
        ));
        let tasks = Arc::new(Tasks::default());
        let forwarder = Forwarder::new(
            pool.clone(),
            inflight.clone(),
            bridge.clone(),
            tasks.clone(),
            state.clone(),
        );
        let inner = Inner {
            forwarder: Arc::new(forwarder),
            inflight,
            pool,
            bridge,
            sessions: Arc::default(),
            subscriptions: Arc::default(),
            tasks,
            broadcasts,
            shutdown,
            audit: crate::audit::Shared::default(),
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
    pub(crate) fn state(&self) -> Option<crate::state::Store> {
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

    /// Waits until every upstream is ready or down (at most `limit`) and its lists fetched.
    pub async fn wait_ready(&self, limit: Duration) -> Vec<UpstreamSummary> {
        self.inner.pool.wait_ready(limit).await
    }

    /// Stops every upstream (children get SIGTERM, then SIGKILL) and waits until they are gone.
    pub async fn shutdown(&self) {
        self.inner.pool.shutdown().await;
    }

    /// The policy the gateway runs (the one [`Gateway::reconcile`] applied last).
    #[must_use]
    pub fn policy(&self) -> Arc<Policy> {
        self.inner.pool.policy()
    }

    /// The current catalog.
    #[must_use]
    pub fn snapshot(&self) -> Arc<Catalog> {
        self.inner.pool.snapshot()
    }

    /// The catalog as it is published: the current snapshot now, each new one when an
    /// upstream's lists change.
    #[must_use]
    pub fn catalog(&self) -> watch::Receiver<Arc<Catalog>> {
        self.inner.pool.subscribe()
    }

    /// Where a layer sends what every initialized session and every `subscriptions/listen`
    /// stream should get, as the gateway's own `list_changed` go (the budget layer's
    /// `notifications/tools/list_changed`).
    #[must_use]
    pub fn broadcasts(&self) -> mpsc::UnboundedSender<Message> {
        self.inner.broadcasts.clone()
    }

    /// Runs `policy` from now on, with `announce` saying who announces list changes under it
    /// ([`crate::stack::announce`]): upstreams are started, stopped (once their calls in
    /// flight end; new calls to them are refused as to a name no upstream lists), restarted
    /// or left untouched as [`Reconcile::between`] the current policy and `policy` says; the
    /// catalog is rebuilt with the new names, sanitizing and pins; sessions and listeners get
    /// `list_changed` for each list whose pass-through view changed (tools only when the
    /// gateway announces them: with the budget on, the budget layer announces what hosts
    /// see). Settings only a restart applies (`Reconcile::needs_restart`) are kept as they
    /// were, and named by [`Gateway::pending_restart`] until the next reload.
    ///
    /// The layers above read their policy when the stack is built: rebuild it over this
    /// gateway ([`crate::stack::build`]) to apply `[budget]`, `[discover]` and `[sanitize]`
    /// there (as [`crate::reload::Reloader`] does).
    pub fn reconcile(&self, policy: Policy, announce: Announce) -> Reconcile {
        (self.inner.pool).reconcile(policy, announce, &self.inner.inflight)
    }

    /// The properties of tool `exposed` that a 2026-07-28 HTTP `tools/call` mirrors in
    /// `Mcp-Param-*` headers (empty for most tools).
    #[doc(hidden)]
    #[must_use]
    pub fn param_marks(&self, exposed: &str) -> Vec<crate::mcp::params::Marked> {
        self.inner.pool.borrow().param_marks(exposed).to_vec()
    }

    /// Every upstream as it is now, in policy order.
    #[must_use]
    pub(crate) fn upstream_states(&self) -> Vec<UpstreamState> {
        self.inner.pool.states(self.instance_holds())
    }

    /// The policy keys the last reload changed that only a restart applies (empty when the
    /// running settings are the file's), as named in the policy file.
    #[must_use]
    pub fn pending_restart(&self) -> Vec<&'static str> {
        self.inner.pool.pending_restart()
    }

    /// Client sessions open now.
    #[must_use]
    pub fn sessions_active(&self) -> usize {
        self.inner.sessions.active()
    }

    /// Registers a session for broadcasts (`list_changed`).
    pub fn register_session(&self, session: &Arc<Session>) {
        self.inner.sessions.register(session);
    }

    /// Forgets a session (and its resource subscriptions).
    pub fn remove_session(&self, id: &str) {
        self.inner.sessions.remove(id);
        self.inner.subscriptions.remove_session(id);
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
                self.inner.forwarder.answer(message, &caller).await
            }
        }
    }

    /// A client's request, dispatched on its method (`req`'s view parsed it) to the room
    /// that answers it.
    async fn handle_request(&self, req: &McpRequest) -> Result<Message, Error> {
        let (method, msg, caller) = (req.view.method(), &req.message, &req.caller);
        let Inner {
            pool,
            forwarder,
            sessions,
            subscriptions,
            tasks,
            shutdown,
            ..
        } = &*self.inner;
        let ok = |v: Value| Ok(Message::response_value(Id::Null, &v));
        let list = |key, items: fn(&Catalog) -> Vec<Value>| {
            pages::list_page(msg, key, &items(&pool.snapshot())).and_then(ok)
        };
        let reach = || subscriptions::Reach {
            pool,
            sessions,
            forwarder,
        };
        match method {
            Method::Initialize => ok(sessions.initialize(msg, caller, &pool.current())),
            Method::Discover => ok(Sessions::discover(&pool.current())),
            Method::Ping => ok(json!({})),
            // With the budget on, its layer answers tools/list; this is the pass-through list.
            Method::ToolsList => list("tools", Catalog::listed_tools),
            Method::PromptsList => list("prompts", Catalog::listed_prompts),
            Method::ResourcesList => list("resources", Catalog::listed_resources),
            Method::ResourcesTemplatesList => list("resourceTemplates", Catalog::listed_templates),
            Method::ToolsCall => forwarder.call_named(req, "tool").await,
            Method::PromptsGet => forwarder.call_named(req, "prompt").await,
            Method::ResourcesRead => forwarder.call_by_uri(req).await,
            Method::ResourcesSubscribe => subscriptions.subscribe(req, true, reach()).await,
            Method::ResourcesUnsubscribe => subscriptions.subscribe(req, false, reach()).await,
            Method::CompletionComplete => forwarder.complete(req).await,
            Method::SubscriptionsListen => subscriptions.listen(msg, caller, pool, shutdown).await,
            Method::TasksGet | Method::TasksResult | Method::TasksCancel | Method::TasksUpdate => {
                forwarder.forward(tasks.route(req)?, req, msg.params.clone()).await
            }
            Method::TasksList => {
                let page = |i, params| forwarder.forward(i, req, Some(params));
                tasks.list(req, pool, page).await
            }
            Method::LoggingSetLevel => {
                let upstreams = || pool.legacy_of(caller.principal.name());
                Sessions::set_log_level(msg, caller, upstreams).await?;
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
            Notification::Cancelled => self.inner.forwarder.cancel(msg, caller),
            Notification::Initialized => caller.session.update(|s| s.initialized = true),
            Notification::RootsListChanged => {
                // Modern upstreams ask for roots within each call (MRTR): nothing to tell. The
                // caller's own per-client instances hear of it, no other client's.
                for u in self.inner.pool.legacy_of(caller.principal.name()) {
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

    /// The event loop: upstream events to the pool (and what they say outside a call to the
    /// sessions and listen streams it is for), and the broadcasts to everyone.
    async fn watch_events(
        self,
        mut events: mpsc::UnboundedReceiver<Event>,
        mut broadcasts: mpsc::UnboundedReceiver<Message>,
    ) {
        loop {
            let event = tokio::select! {
                e = events.recv() => e,
                Some(msg) = broadcasts.recv() => {
                    self.tell_everyone(&msg);
                    continue;
                }
                () = self.inner.shutdown.cancelled() => None,
            };
            let Some(event) = event else { return };
            if let Heard::Outside { client } = self.inner.pool.hear(&event) {
                self.outside_a_call(&event, client.as_deref());
            }
        }
    }

    /// What an upstream said outside a call: a resource update to the sessions subscribed to
    /// the resource and the listen streams that asked for it, a log line to the sessions that
    /// want its level (`Sessions::log`); of a per-client instance (`client` names its client),
    /// to that client's only.
    fn outside_a_call(&self, event: &Event, client: Option<&str>) {
        let (sessions, subscriptions) = (&self.inner.sessions, &self.inner.subscriptions);
        match event {
            Event::Broadcast(_, msg) => {
                subscriptions.resource_updated(msg, sessions, client);
                subscriptions.notify_listeners(msg, client);
            }
            Event::Log(_, msg) => sessions.log(msg, client),
            Event::Ready(_) | Event::Down(_) | Event::ListChanged(..) => {}
        }
    }

    /// Sends `msg` to every initialized session and every listen stream that asked for it.
    fn tell_everyone(&self, msg: &Message) {
        self.inner.sessions.broadcast(msg);
        self.inner.subscriptions.notify_listeners(msg, None);
    }

    /// What holds a per-client instance besides the gateway's requests using it and its own
    /// requests pending (given its id, the id of the upstream it is an instance of, and its
    /// client): its parked calls, and whether a session of its client is subscribed to one of
    /// its resources (a new instance would know nothing of the subscription, and the client
    /// would silently get no more updates).
    fn instance_holds(&self) -> impl Fn(usize, usize, &str) -> usize + use<> {
        let subscribed = self.subscribed_instances();
        let bridge = self.inner.bridge.clone();
        move |id, base, client| {
            let subscribed = subscribed.contains(&(base, client.to_owned()));
            bridge.parked_on(id) + usize::from(subscribed)
        }
    }

    /// The instances (as the id of the upstream each is an instance of, and its client) that
    /// sessions' `resources/subscribe` hold: of each subscribed resource, the instance of each
    /// subscribed session's client of the upstream the resource routes to.
    fn subscribed_instances(&self) -> HashSet<(usize, String)> {
        let (pool, sessions) = (&self.inner.pool, &self.inner.sessions);
        let mut held = HashSet::new();
        // Without a running instance nothing is held (`/status` asks at every read).
        if pool.no_instances() {
            return held;
        }
        for (uri, subscribed) in self.inner.subscriptions.subscribed() {
            let Some(base) = pool.route_uri(&uri) else {
                continue;
            };
            let clients = subscribed.iter().filter_map(|s| sessions.client_of(s));
            held.extend(clients.map(|client| (base, client)));
        }
        held
    }
}

/// The downstreams tell the gateway's session registry when a session starts and ends.
impl crate::context::Sessions for Gateway {
    fn opened(&self, session: &Arc<Session>) {
        self.register_session(session);
    }

    fn ended(&self, id: &str) {
        self.remove_session(id);
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
