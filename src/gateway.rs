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
//! [`Gateway`] is the innermost [`tower::Service`] of the stack (see [`crate::stack`]).

mod eras;

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::catalog::{Catalog, Contribution};
use crate::context::{Caller, McpRequest, Session, SessionState};
use crate::error::Error;
use crate::jsonrpc::{to_raw, Id, Kind, Message};
use crate::policy::Policy;
use crate::upstream::{Event, Status, Upstream};

/// Protocol versions the gateway speaks downstream (2025 era), newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Items per page of the gateway's own lists.
const PAGE_SIZE: usize = 500;

/// The aggregating gateway: upstream pool, catalog and sessions.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("upstreams", &self.inner.upstreams)
            .finish_non_exhaustive()
    }
}

struct Inner {
    policy: Policy,
    upstreams: Vec<Upstream>,
    names: Vec<String>,
    /// The current catalog, published to the layers that subscribe.
    catalog: watch::Sender<Arc<Catalog>>,
    /// Messages for every session and listener, sent by layers (the budget layer's
    /// `list_changed`).
    broadcasts: mpsc::UnboundedSender<Message>,
    sessions: Mutex<HashMap<String, Weak<Session>>>,
    /// (session, client request id) → (upstream, upstream request id), for cancellation.
    inflight: Mutex<HashMap<(String, Id), (usize, i64)>>,
    /// Calls of modern clients to 2025-era upstreams waiting for the client's retry, by the
    /// `requestState` handed out.
    parked: Mutex<HashMap<String, eras::Parked>>,
    /// Server→client requests the gateway sent for a modern upstream, by (unguessable) id:
    /// the session asked, and where its answer goes.
    #[allow(clippy::type_complexity)]
    shim: Mutex<HashMap<String, (String, tokio::sync::oneshot::Sender<Message>)>>,
    /// Task id → the upstream that created it, and the 2025-era session whose request did
    /// (`None` for a sessionless modern caller); only that session may see the task.
    tasks: Mutex<HashMap<String, (usize, Option<String>)>>,
    /// Resource URI → the sessions subscribed to it (`resources/subscribe`).
    subscribers: Mutex<HashMap<String, std::collections::BTreeSet<String>>>,
    /// Open `subscriptions/listen` streams of modern clients.
    listeners: Mutex<Vec<eras::Listener>>,
    /// Per upstream: one refresh at a time (they run on tasks of their own), and how many
    /// full refreshes finished (what `wait_ready` waits for).
    refreshing: Vec<tokio::sync::Mutex<()>>,
    refreshed: Vec<watch::Sender<u64>>,
    shutdown: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How one upstream looked when the gateway became ready, for the startup summary.
#[derive(Debug, Clone)]
pub struct UpstreamSummary {
    /// Server id.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Health.
    pub status: Status,
    /// Negotiated protocol version.
    pub protocol_version: String,
    /// Tools, prompts, resources listed.
    pub counts: (usize, usize, usize),
}

impl Gateway {
    /// Starts every upstream of the policy in parallel and returns at once; use
    /// [`Gateway::wait_ready`] to wait for them.
    #[must_use]
    pub fn start(policy: Policy, shutdown: CancellationToken) -> Self {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        // The gateway routes sampling, elicitation and roots requests to its clients, so it
        // declares them upstream: servers vary their tool lists by these capabilities.
        let capabilities = json!({
            "roots": {"listChanged": true},
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
        });
        let upstreams: Vec<Upstream> = policy
            .upstreams
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                Upstream::start(
                    i,
                    spec.clone(),
                    capabilities.clone(),
                    events_tx.clone(),
                    shutdown.child_token(),
                )
            })
            .collect();
        let names: Vec<String> = policy.upstreams.iter().map(|u| u.name.clone()).collect();
        let count = upstreams.len();
        let empty = vec![Contribution::default(); count];
        let catalog = Catalog::build(empty, &names, &policy.separator, 0);
        let (broadcasts, broadcasts_rx) = mpsc::unbounded_channel();
        let gateway = Self {
            inner: Arc::new(Inner {
                policy,
                upstreams,
                names,
                catalog: watch::channel(Arc::new(catalog)).0,
                broadcasts,
                sessions: Mutex::new(HashMap::new()),
                inflight: Mutex::new(HashMap::new()),
                parked: Mutex::new(HashMap::new()),
                shim: Mutex::new(HashMap::new()),
                tasks: Mutex::new(HashMap::new()),
                subscribers: Mutex::new(HashMap::new()),
                listeners: Mutex::new(Vec::new()),
                refreshing: (0..count).map(|_| tokio::sync::Mutex::new(())).collect(),
                refreshed: (0..count).map(|_| watch::channel(0).0).collect(),
                shutdown,
            }),
        };
        tokio::spawn(gateway.clone().watch_events(events_rx, broadcasts_rx));
        gateway
    }

    /// Waits until every upstream is ready or down (at most `limit`) and its lists fetched.
    pub async fn wait_ready(&self, limit: Duration) -> Vec<UpstreamSummary> {
        let started = tokio::time::Instant::now();
        let waits = self.inner.upstreams.iter().map(|u| u.wait_ready(limit));
        futures::future::join_all(waits).await;
        // The lists are fetched once, by the refresh each upstream's readiness starts.
        let fetched = self
            .inner
            .upstreams
            .iter()
            .zip(&self.inner.refreshed)
            .filter(|(u, _)| u.status() == Status::Ready)
            .map(|(_, done)| async move {
                let mut done = done.subscribe();
                let _ = done.wait_for(|n| *n > 0).await;
            });
        let left = limit.saturating_sub(started.elapsed());
        let _ = tokio::time::timeout(left, futures::future::join_all(fetched)).await;
        let catalog = self.snapshot();
        self.inner
            .upstreams
            .iter()
            .zip(catalog.upstreams())
            .map(|(u, c)| UpstreamSummary {
                name: u.name().to_owned(),
                transport: u.spec().transport_name(),
                status: u.status(),
                protocol_version: u.info().protocol_version,
                counts: (c.tools.len(), c.prompts.len(), c.resources.len()),
            })
            .collect()
    }

    /// The policy the gateway runs.
    #[must_use]
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// Registers a session for broadcasts (`list_changed`).
    pub fn register_session(&self, session: &Arc<Session>) {
        let mut sessions = lock(&self.inner.sessions);
        sessions.retain(|_, s| s.strong_count() > 0);
        sessions.insert(session.id.clone(), Arc::downgrade(session));
    }

    /// Forgets a session (and its resource subscriptions).
    pub fn remove_session(&self, id: &str) {
        lock(&self.inner.sessions).remove(id);
        lock(&self.inner.subscribers).retain(|_, sessions| {
            sessions.remove(id);
            !sessions.is_empty()
        });
    }

    /// Stops every upstream (children get SIGTERM, then SIGKILL) and waits until they are gone.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        let stops = self
            .inner
            .upstreams
            .iter()
            .map(|u| u.stop(Duration::from_secs(5)));
        futures::future::join_all(stops).await;
    }

    /// The current catalog.
    #[must_use]
    pub fn snapshot(&self) -> Arc<Catalog> {
        self.inner.catalog.borrow().clone()
    }

    /// The catalog as it is published: the current snapshot now, each new one when an
    /// upstream's lists change.
    #[must_use]
    pub fn catalog(&self) -> watch::Receiver<Arc<Catalog>> {
        self.inner.catalog.subscribe()
    }

    /// Where a layer sends what every initialized session and every `subscriptions/listen`
    /// stream should get, as the gateway's own `list_changed` go (the budget layer's
    /// `notifications/tools/list_changed`).
    #[must_use]
    pub fn broadcasts(&self) -> mpsc::UnboundedSender<Message> {
        self.inner.broadcasts.clone()
    }

    async fn watch_events(
        self,
        mut events: mpsc::UnboundedReceiver<Event>,
        mut broadcasts: mpsc::UnboundedReceiver<Message>,
    ) {
        loop {
            let event = tokio::select! {
                e = events.recv() => e,
                Some(msg) = broadcasts.recv() => {
                    self.broadcast(&msg);
                    self.notify_listeners(&msg);
                    continue;
                }
                () = self.inner.shutdown.cancelled() => None,
            };
            let Some(event) = event else { return };
            match event {
                // Refreshes run on tasks of their own, so that upstreams are fetched in
                // parallel (one at a time per upstream).
                Event::Ready(i) => {
                    let this = self.clone();
                    tokio::spawn(async move {
                        let changed = this.refresh(i, None).await;
                        this.announce(&changed);
                    });
                }
                Event::ListChanged(i, kind) => {
                    let this = self.clone();
                    tokio::spawn(async move {
                        let changed = this.refresh(i, Some(&kind)).await;
                        this.announce(&changed);
                    });
                }
                Event::Down(_) => {}
                Event::Broadcast(_, msg) => {
                    self.resource_updated(&msg);
                    self.notify_listeners(&msg);
                }
                Event::Log(_, msg) => self.log_for_all(&msg),
            }
        }
    }

    fn announce(&self, kinds: &[&'static str]) {
        for kind in kinds {
            // With the budget on, hosts see its plan: the budget layer announces the tools
            // itself, when the bytes it lists change.
            if *kind == "tools" && self.inner.policy.budget.enabled {
                continue;
            }
            let msg = Message::notification(&format!("notifications/{kind}/list_changed"), None);
            self.broadcast(&msg);
            self.notify_listeners(&msg);
        }
    }

    fn broadcast(&self, msg: &Message) {
        self.send_to_sessions(msg, |_, _| true);
    }

    /// Sends `msg` to every initialized session that `wants` it.
    fn send_to_sessions(&self, msg: &Message, wants: impl Fn(&Session, &SessionState) -> bool) {
        let sessions: Vec<Arc<Session>> = lock(&self.inner.sessions)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for s in sessions {
            let state = s.state();
            if state.initialized && wants(&s, &state) {
                let _ = s.notify.send(msg.clone());
            }
        }
    }

    /// A log message of no client's call: to the sessions that asked for its level with
    /// `logging/setLevel` (a session that asked for none gets no upstream-wide logs: they may
    /// tell of other clients' work).
    fn log_for_all(&self, msg: &Message) {
        let level = msg
            .params_as::<Value>()
            .ok()
            .and_then(|p| p.get("level").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        self.send_to_sessions(msg, |_, state| {
            state
                .log_level
                .as_deref()
                .is_some_and(|wanted| crate::mcp::bridge::level_wanted(wanted, &level))
        });
    }

    /// `notifications/resources/updated`: to the sessions subscribed to the resource.
    fn resource_updated(&self, msg: &Message) {
        let uri = msg
            .params_as::<Value>()
            .ok()
            .and_then(|p| p.get("uri").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        let subscribed = lock(&self.inner.subscribers)
            .get(&uri)
            .cloned()
            .unwrap_or_default();
        self.send_to_sessions(msg, |s, _| subscribed.contains(&s.id));
    }

    /// Fetches the lists of upstream `i` (all, or one kind); returns the kinds that changed.
    async fn refresh(&self, i: usize, only: Option<&str>) -> Vec<&'static str> {
        let _one_at_a_time = self.inner.refreshing[i].lock().await;
        let changed = self.fetch_lists(i, only).await;
        if only.is_none() {
            self.inner.refreshed[i].send_modify(|n| *n += 1);
        }
        changed
    }

    async fn fetch_lists(&self, i: usize, only: Option<&str>) -> Vec<&'static str> {
        let upstream = &self.inner.upstreams[i];
        if upstream.status() != Status::Ready {
            return Vec::new();
        }
        let caps = upstream.info().capabilities;
        let wants = |kind: &str| only.is_none_or(|k| k == kind) && caps.get(kind).is_some();
        let mut fresh = self.snapshot().upstreams()[i].clone();
        let mut changed = Vec::new();
        if wants("tools") {
            if let Some(mut tools) = fetch_all(upstream, "tools/list", "tools").await {
                for tool in &mut tools {
                    crate::catalog::repair_tool(upstream.name(), tool);
                }
                upstream.set_param_marks(crate::mcp::params::marked_tools(&tools));
                // With the budget on, hosts see a canonical order: an upstream that only
                // reordered its tools changed nothing they see, so nothing is announced.
                let order_matters = !self.inner.policy.budget.enabled;
                if !same_items(&tools, &fresh.tools, order_matters) {
                    changed.push("tools");
                }
                fresh.tools = tools;
            }
        }
        if wants("prompts") {
            if let Some(prompts) = fetch_all(upstream, "prompts/list", "prompts").await {
                if prompts != fresh.prompts {
                    changed.push("prompts");
                    fresh.prompts = prompts;
                }
            }
        }
        if wants("resources") {
            let resources = fetch_all(upstream, "resources/list", "resources").await;
            let templates =
                fetch_all(upstream, "resources/templates/list", "resourceTemplates").await;
            let mut any = false;
            if let Some(r) = resources {
                any |= r != fresh.resources;
                fresh.resources = r;
            }
            if let Some(t) = templates {
                any |= t != fresh.templates;
                fresh.templates = t;
            }
            if any {
                changed.push("resources");
            }
        }
        if !changed.is_empty() {
            let (names, separator) = (&self.inner.names, &self.inner.policy.separator);
            self.inner.catalog.send_modify(|catalog| {
                let mut per_upstream = catalog.upstreams().to_vec();
                per_upstream[i] = fresh;
                let version = catalog.version() + 1;
                *catalog = Arc::new(Catalog::build(per_upstream, names, separator, version));
            });
        }
        changed
    }

    async fn handle(&self, req: McpRequest) -> Option<Message> {
        let McpRequest {
            message, caller, ..
        } = req;
        match message.kind() {
            Kind::Request => {
                let id = message.id.clone().unwrap_or(Id::Null);
                let result = self.handle_request(&message, &caller).await;
                Some(match result {
                    Ok(mut msg) => {
                        msg.id = Some(id);
                        msg
                    }
                    Err(err) => Message::error(id, err.to_error_object()),
                })
            }
            Kind::Notification => {
                self.handle_notification(&message, &caller);
                None
            }
            Kind::Response | Kind::Error => self.handle_client_response(message, &caller),
        }
    }

    async fn handle_request(&self, msg: &Message, caller: &Caller) -> Result<Message, Error> {
        let method = msg.method().unwrap_or_default();
        let ok = |v: Value| Ok(Message::response_value(Id::Null, &v));
        match method {
            "initialize" => ok(self.initialize(msg, caller)),
            // The 2026-07-28 era's stateless handshake: what `initialize` would say.
            "server/discover" => ok(crate::mcp::modern::discover_result(
                &self.capabilities(),
                &server_info(),
                self.instructions().as_deref(),
            )),
            "ping" => ok(json!({})),
            // With the budget on, its layer answers tools/list; this is the pass-through list.
            "tools/list" => ok(self.list_page(msg, "tools", Catalog::listed_tools)?),
            "prompts/list" => ok(self.list_page(msg, "prompts", Catalog::listed_prompts)?),
            "resources/list" => ok(self.list_page(msg, "resources", Catalog::listed_resources)?),
            "resources/templates/list" => {
                ok(self.list_page(msg, "resourceTemplates", Catalog::listed_templates)?)
            }
            "tools/call" => self.call_named(msg, caller, "tool").await,
            "prompts/get" => self.call_named(msg, caller, "prompt").await,
            "resources/subscribe" | "resources/unsubscribe" => self.subscribe(msg, caller).await,
            "resources/read" => self.call_by_uri(msg, caller).await,
            "completion/complete" => self.complete(msg, caller).await,
            "subscriptions/listen" => self.listen(msg, caller).await,
            "tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/update" => {
                self.route_task(msg, caller).await
            }
            "tasks/list" => self.list_tasks(msg, caller).await,
            "logging/setLevel" => {
                let level = msg
                    .params_as::<Value>()
                    .ok()
                    .and_then(|p| p.get("level").and_then(Value::as_str).map(str::to_owned));
                caller.session.update(|s| s.log_level = level);
                // 2026-07-28 has no session level: each modern request names its own (`_meta`,
                // added from the session's level by `Call::client`).
                for u in self.legacy_upstreams() {
                    if u.status() == Status::Ready && u.info().capabilities.get("logging").is_some()
                    {
                        let call = crate::upstream::Call::new(method).params(msg.params.clone());
                        let _ = u.request(call).await;
                    }
                }
                ok(json!({}))
            }
            other => Err(Error::MethodNotFound(other.to_owned())),
        }
    }

    fn initialize(&self, msg: &Message, caller: &Caller) -> Value {
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let asked = params.get("protocolVersion").and_then(Value::as_str);
        let version = asked
            .filter(|v| SUPPORTED_VERSIONS.contains(v))
            .unwrap_or(SUPPORTED_VERSIONS[0])
            .to_owned();
        caller.session.update(|s| {
            s.client_capabilities = params.get("capabilities").cloned().unwrap_or(json!({}));
            s.client_info = params.get("clientInfo").cloned().unwrap_or(Value::Null);
            s.protocol_version = Some(version.clone());
            // `initialized` waits for `notifications/initialized`: until then the client may
            // not even have this result, and broadcasts (`list_changed`) must not reach it.
            s.initialized = false;
        });
        self.register_session(&caller.session);
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "serverInfo": server_info(),
        });
        if let Some(instructions) = self.instructions() {
            result["instructions"] = Value::String(instructions);
        }
        result
    }

    /// What the gateway offers its clients: its own capabilities, plus the tasks its
    /// upstreams support (task requests are routed to the upstream that created the task).
    fn capabilities(&self) -> Value {
        let mut caps = capabilities();
        let mut tasks = Map::new();
        for u in &self.inner.upstreams {
            if let Some(Value::Object(t)) = u.info().capabilities.get("tasks") {
                merge_objects(&mut tasks, t);
            }
        }
        if !tasks.is_empty() {
            caps["tasks"] = Value::Object(tasks);
        }
        caps
    }

    /// The properties of tool `exposed` that a 2026-07-28 HTTP `tools/call` mirrors in
    /// `Mcp-Param-*` headers (empty for most tools).
    #[must_use]
    pub fn param_marks(&self, exposed: &str) -> Vec<crate::mcp::params::Marked> {
        self.inner.catalog.borrow().param_marks(exposed).to_vec()
    }

    /// The upstreams' instructions, each under its server's name.
    fn instructions(&self) -> Option<String> {
        let mut instructions = String::new();
        for u in &self.inner.upstreams {
            if let Some(text) = u.info().instructions {
                instructions.push_str(&format!("## {}\n{}\n\n", u.name(), text.trim()));
            }
        }
        (!instructions.is_empty()).then(|| instructions.trim_end().to_owned())
    }

    fn list_page(
        &self,
        msg: &Message,
        key: &str,
        items: impl Fn(&Catalog) -> Vec<Value>,
    ) -> Result<Value, Error> {
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let offset = match params.get("cursor").and_then(Value::as_str) {
            None => 0,
            Some(cursor) => decode_cursor(cursor).ok_or_else(|| Error::InvalidParams {
                method: msg.method().unwrap_or_default().to_owned(),
                reason: "unknown cursor; list again from the start".into(),
            })?,
        };
        let items = items(&self.snapshot());
        let end = (offset + PAGE_SIZE).min(items.len());
        let page: Vec<Value> = items
            .get(offset.min(items.len())..end)
            .unwrap_or(&[])
            .to_vec();
        let mut result = Map::new();
        result.insert(key.to_owned(), Value::Array(page));
        if end < items.len() {
            result.insert("nextCursor".into(), Value::String(encode_cursor(end)));
        }
        Ok(Value::Object(result))
    }

    async fn call_named(
        &self,
        msg: &Message,
        caller: &Caller,
        what: &'static str,
    ) -> Result<Message, Error> {
        // Hot path: find `name` without building the params' DOM and splice the upstream's
        // name into the raw params; everything else goes out as the client sent it.
        if let Some(fast) = msg.params.as_deref().and_then(NameSpan::find) {
            let target = {
                let catalog = self.inner.catalog.borrow();
                route_name(&catalog, what, &fast.name).map(|(i, own)| (i, fast.splice(own)))
            };
            return match target {
                Some((i, params)) => self.forward(i, msg, Some(params), caller).await,
                None => {
                    let name = fast.name.into_owned();
                    Err(self
                        .down_owner(&name)
                        .unwrap_or(Error::NotFound { what, name }))
                }
            };
        }
        let mut params: Map<String, Value> = msg.params_as().map_err(|e| Error::InvalidParams {
            method: msg.method().unwrap_or_default().to_owned(),
            reason: e.to_string(),
        })?;
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::InvalidParams {
                method: msg.method().unwrap_or_default().to_owned(),
                reason: "missing string \"name\"".into(),
            })?
            .to_owned();
        let target = {
            let catalog = self.inner.catalog.borrow();
            route_name(&catalog, what, &name).map(|(i, own)| (i, own.to_owned()))
        };
        let Some((i, original)) = target else {
            return Err(self
                .down_owner(&name)
                .unwrap_or(Error::NotFound { what, name }));
        };
        params.insert("name".into(), Value::String(original));
        self.forward(i, msg, Some(to_raw(&Value::Object(params))), caller)
            .await
    }

    /// For a name that is not in the catalog but carries the namespace of an upstream that is
    /// not serving (it never started, or crashed before listing): that upstream is unavailable.
    /// Saying "unknown tool" would send the model looking for another tool when the real
    /// answer is "try again later".
    fn down_owner(&self, name: &str) -> Option<Error> {
        let sep = &self.inner.policy.separator;
        self.inner.upstreams.iter().find_map(|u| {
            let owned = name
                .strip_prefix(u.name())
                .is_some_and(|rest| rest.starts_with(sep.as_str()));
            match u.status() {
                Status::Ready => None,
                Status::Down(reason) if owned => Some(u.down_error(reason)),
                Status::Starting if owned => Some(Error::UpstreamUnavailable {
                    upstream: u.name().to_owned(),
                    reason: "still starting".into(),
                }),
                _ => None,
            }
        })
    }

    async fn call_by_uri(&self, msg: &Message, caller: &Caller) -> Result<Message, Error> {
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let uri =
            params
                .get("uri")
                .and_then(Value::as_str)
                .ok_or_else(|| Error::InvalidParams {
                    method: msg.method().unwrap_or_default().to_owned(),
                    reason: "missing string \"uri\"".into(),
                })?;
        let i = self.route_uri(uri).ok_or_else(|| Error::NotFound {
            what: "resource",
            name: uri.to_owned(),
        })?;
        self.forward(i, msg, msg.params.clone(), caller).await
    }

    fn route_uri(&self, uri: &str) -> Option<usize> {
        // Listed URIs, then the longest literal prefix of a template; then the only upstream
        // with resources.
        if let Some(i) = self.inner.catalog.borrow().resource(uri) {
            return Some(i);
        }
        let with_resources: Vec<usize> = self
            .inner
            .upstreams
            .iter()
            .enumerate()
            .filter(|(_, u)| u.info().capabilities.get("resources").is_some())
            .map(|(i, _)| i)
            .collect();
        (with_resources.len() == 1).then(|| with_resources[0])
    }

    async fn complete(&self, msg: &Message, caller: &Caller) -> Result<Message, Error> {
        let mut params: Map<String, Value> = msg.params_as().map_err(|e| Error::InvalidParams {
            method: "completion/complete".into(),
            reason: e.to_string(),
        })?;
        let reference = params.get("ref").cloned().unwrap_or(Value::Null);
        let i = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let found = self
                    .inner
                    .catalog
                    .borrow()
                    .prompt(name)
                    .map(|(i, own)| (i, own.to_owned()));
                let (i, original) = found.ok_or_else(|| Error::NotFound {
                    what: "prompt",
                    name: name.to_owned(),
                })?;
                if let Some(r) = params.get_mut("ref") {
                    r["name"] = Value::String(original);
                }
                i
            }
            Some("ref/resource") => {
                let uri = reference
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.route_uri(uri).ok_or_else(|| Error::NotFound {
                    what: "resource",
                    name: uri.to_owned(),
                })?
            }
            _ => {
                return Err(Error::InvalidParams {
                    method: "completion/complete".into(),
                    reason: "ref.type must be ref/prompt or ref/resource".into(),
                })
            }
        };
        self.forward(i, msg, Some(to_raw(&Value::Object(params))), caller)
            .await
    }

    async fn forward(
        &self,
        i: usize,
        msg: &Message,
        params: Option<Box<serde_json::value::RawValue>>,
        caller: &Caller,
    ) -> Result<Message, Error> {
        let upstream = &self.inner.upstreams[i];
        let method = msg.method().unwrap_or_default();
        let upstream_id = upstream.next_request_id();
        let key = (
            caller.session.id.clone(),
            msg.id.clone().unwrap_or(Id::Null),
        );
        // Only a request that asked for a task (2025-11-25) or went to a modern upstream can
        // create one.
        let may_create_task = upstream.is_modern()
            || params
                .as_ref()
                .is_some_and(|p| p.get().contains("\"task\""));
        lock(&self.inner.inflight).insert(key.clone(), (i, upstream_id));
        let result = if upstream.is_modern() || caller.session.is_modern() {
            self.forward_across(i, msg, params, caller, upstream_id)
                .await
        } else {
            let call = crate::upstream::Call::new(method)
                .id(upstream_id)
                .params(params)
                .outbound(caller.outbound.clone());
            upstream.request(call).await
        };
        lock(&self.inner.inflight).remove(&key);
        if let (Ok(reply), true) = (&result, may_create_task) {
            self.note_task(i, reply, caller);
        }
        result
    }

    fn handle_notification(&self, msg: &Message, caller: &Caller) {
        match msg.method().unwrap_or_default() {
            "notifications/cancelled" => {
                let params: Value = msg.params_as().unwrap_or(Value::Null);
                let Some(id) = msg.params_id("requestId") else {
                    return;
                };
                let target = lock(&self.inner.inflight).remove(&(caller.session.id.clone(), id));
                if let Some((i, upstream_id)) = target {
                    let reason = params.get("reason").and_then(Value::as_str);
                    self.inner.upstreams[i].cancel(upstream_id, reason);
                }
            }
            "notifications/initialized" => {
                caller.session.update(|s| s.initialized = true);
            }
            "notifications/roots/list_changed" => {
                // Modern upstreams ask for roots within each call (MRTR): nothing to tell.
                for u in self.legacy_upstreams() {
                    let _ = u.notify(msg.clone());
                }
            }
            _ => {}
        }
    }

    fn legacy_upstreams(&self) -> impl Iterator<Item = &Upstream> {
        self.inner.upstreams.iter().filter(|u| !u.is_modern())
    }

    /// A client's answer to a server→client request: delivered only if that request waits for
    /// an answer from this very session; anything else (a guessed id, another session's
    /// request, a second answer) is refused with an error (HTTP answers it with 400) and logged.
    fn handle_client_response(&self, msg: Message, caller: &Caller) -> Option<Message> {
        let session = caller.session.id.as_str();
        let gateway_id = match &msg.id {
            Some(Id::String(id)) => id.clone(),
            other => other.as_ref().map(ToString::to_string).unwrap_or_default(),
        };
        let delivered = if gateway_id.starts_with(eras::SHIM_PREFIX) {
            self.answer_shim(&gateway_id, msg, session)
        } else {
            let index = gateway_id
                .strip_prefix("mcpb-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|i| i.parse::<usize>().ok());
            match index.and_then(|i| self.inner.upstreams.get(i)) {
                Some(upstream) => upstream.answer_from(&gateway_id, msg, session),
                None => Err(Error::UnknownRequest { id: gateway_id }),
            }
        };
        let err = delivered.err()?;
        tracing::warn!(session, error = %err, "Client answer refused");
        Some(Message::error(Id::Null, err.to_error_object()))
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

/// Where the string member `name` of a JSON object's raw text is, so that it can be replaced
/// without parsing the rest into a DOM.
struct NameSpan<'a> {
    raw: &'a str,
    /// The name, unescaped.
    name: std::borrow::Cow<'a, str>,
    /// Byte range of the name's JSON string (quotes included) in `raw`.
    span: std::ops::Range<usize>,
}

impl<'a> NameSpan<'a> {
    /// `None` when the params need the general path: not an object, no string `name`,
    /// duplicate keys (the general path keeps the last), more keys than worth checking, or
    /// line breaks (a stdio upstream needs the message on one line, which only the general
    /// path's re-serialization guarantees).
    fn find(params: &'a serde_json::value::RawValue) -> Option<Self> {
        use serde::de::{Deserializer, MapAccess, Visitor};

        /// A key, borrowed when it has no escapes.
        #[derive(serde::Deserialize)]
        struct Key<'k>(#[serde(borrow)] std::borrow::Cow<'k, str>);

        struct Find<'a> {
            raw: &'a str,
        }
        impl<'de: 'a, 'a> Visitor<'de> for Find<'a> {
            type Value = Option<NameSpan<'a>>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                const MAX_KEYS: usize = 32;
                let mut keys: Vec<std::borrow::Cow<'de, str>> = Vec::new();
                let mut found = None;
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    let value: &'de serde_json::value::RawValue = map.next_value()?;
                    if keys.len() == MAX_KEYS || keys.contains(&key) {
                        return Ok(None);
                    }
                    if key == "name" {
                        let text = value.get();
                        let Ok(Key(name)) = serde_json::from_str::<Key<'de>>(text) else {
                            return Ok(None);
                        };
                        let start = text.as_ptr() as usize - self.raw.as_ptr() as usize;
                        found = Some((name, start..start + text.len()));
                    }
                    keys.push(key);
                }
                Ok(found.map(|(name, span)| NameSpan {
                    raw: self.raw,
                    name,
                    span,
                }))
            }
        }

        let raw = params.get();
        if raw.contains(['\n', '\r']) {
            return None;
        }
        let mut de = serde_json::Deserializer::from_str(raw);
        let found = (&mut de).deserialize_map(Find { raw }).ok()??;
        de.end().ok()?;
        Some(found)
    }

    /// The params with the name replaced by `name`.
    fn splice(&self, name: &str) -> Box<serde_json::value::RawValue> {
        let quoted = serde_json::to_string(name).expect("a string always serializes");
        let mut out = String::with_capacity(self.raw.len() + quoted.len());
        out.push_str(&self.raw[..self.span.start]);
        out.push_str(&quoted);
        out.push_str(&self.raw[self.span.end..]);
        serde_json::value::RawValue::from_string(out).expect("splicing a string keeps JSON valid")
    }
}

/// Fetches a whole list, following `nextCursor`. `None` when the upstream failed.
async fn fetch_all(upstream: &Upstream, method: &str, key: &str) -> Option<Vec<Value>> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    // Bounded: a server that keeps returning cursors must not hang the refresh.
    for _ in 0..1000 {
        let params = cursor.as_ref().map(|c| to_raw(&json!({ "cursor": c })));
        let call = crate::upstream::Call::new(method).params(params);
        let reply = match upstream.request(call).await {
            Ok(reply) => reply,
            Err(err) => {
                tracing::warn!(upstream = upstream.name(), method, error = %err, "Listing failed");
                return None;
            }
        };
        if let Some(err) = &reply.error {
            tracing::warn!(upstream = upstream.name(), method, code = err.code, message = %err.message, "Listing failed");
            return None;
        }
        let mut result: Map<String, Value> = reply.result_as().ok()?;
        if let Some(Value::Array(page)) = result.remove(key) {
            items.extend(page.into_iter().filter(Value::is_object));
        }
        cursor = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            return Some(items);
        }
    }
    Some(items)
}

/// What the gateway offers its clients.
fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": true},
        "logging": {},
        "completions": {},
    })
}

fn server_info() -> Value {
    json!({"name": "mcp-budget", "version": env!("CARGO_PKG_VERSION")})
}

/// Adds what `from` has to `into`, recursively for objects on both sides.
fn merge_objects(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => merge_objects(a, b),
            (Some(_), _) => {}
            (None, v) => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Whether two lists hold the same items (in the same order when `order_matters`). Object key
/// order never matters (`serde_json` maps compare as maps).
fn same_items(a: &[Value], b: &[Value], order_matters: bool) -> bool {
    if order_matters || a.len() != b.len() {
        return a == b;
    }
    let key = |v: &Value| v.get("name").map(ToString::to_string).unwrap_or_default();
    let mut a: Vec<&Value> = a.iter().collect();
    let mut b: Vec<&Value> = b.iter().collect();
    a.sort_by_key(|v| key(v));
    b.sort_by_key(|v| key(v));
    a == b
}

/// The upstream and its own name of the tool (`what` = `tool`) or prompt exposed as `name`.
fn route_name<'c>(catalog: &'c Catalog, what: &str, name: &str) -> Option<(usize, &'c str)> {
    if what == "tool" {
        catalog.tool(name)
    } else {
        catalog.prompt(name)
    }
}

/// An opaque cursor carrying `text` (each kind of list tags its own).
fn seal_cursor(text: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

/// The text a cursor of [`seal_cursor`] carries; `None` for one the gateway did not make.
fn open_cursor(cursor: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    String::from_utf8(bytes).ok()
}

fn encode_cursor(offset: usize) -> String {
    seal_cursor(&format!("mcpb:{offset}"))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    open_cursor(cursor)?.strip_prefix("mcpb:")?.parse().ok()
}

/// Summary lines for the startup log.
#[must_use]
pub fn summary_lines(summaries: &[UpstreamSummary]) -> BTreeMap<String, String> {
    summaries
        .iter()
        .map(|s| {
            let status = match &s.status {
                Status::Ready => "ready".to_owned(),
                Status::Starting => "starting".to_owned(),
                Status::Down(reason) => format!("DOWN ({reason})"),
            };
            (
                s.name.clone(),
                format!(
                    "{} {} protocol {} — {} tools, {} prompts, {} resources",
                    s.transport,
                    status,
                    if s.protocol_version.is_empty() {
                        "-"
                    } else {
                        &s.protocol_version
                    },
                    s.counts.0,
                    s.counts.1,
                    s.counts.2
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorders_are_quiet_only_when_order_is_not_shown() {
        let a = vec![json!({"name": "x", "d": 1}), json!({"name": "y"})];
        let b = vec![json!({"name": "y"}), json!({"d": 1, "name": "x"})];
        assert!(same_items(&a, &b, false));
        assert!(!same_items(&a, &b, true));
        assert!(!same_items(
            &a,
            &[json!({"name": "x", "d": 2}), json!({"name": "y"})],
            false
        ));
    }

    #[test]
    fn name_splice_keeps_every_other_byte_and_falls_back_when_unsure() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_owned()).unwrap();
        let params = raw(
            r#"{"_meta":{"name":"x"},"name":"a\u00e9__b","arguments":{"n":1.50,"big":123456789012345678901234567890}}"#,
        );
        let found = NameSpan::find(&params).unwrap();
        assert_eq!(found.name, "a\u{e9}__b");
        assert_eq!(
            found.splice("b\"q").get(),
            r#"{"_meta":{"name":"x"},"name":"b\"q","arguments":{"n":1.50,"big":123456789012345678901234567890}}"#
        );
        for fallback in [
            r#"{"name":"a","name":"b"}"#,
            "{\"name\":\n\"a\"}",
            r#"{"name":1}"#,
            r#"{"arguments":{}}"#,
            r#"["name"]"#,
        ] {
            assert!(NameSpan::find(&raw(fallback)).is_none(), "{fallback}");
        }
    }

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        assert_eq!(decode_cursor(&encode_cursor(500)), Some(500));
        assert_eq!(decode_cursor("nope"), None);
    }
}
