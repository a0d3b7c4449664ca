//! The aggregator: many upstreams behind one MCP server.
//!
//! Tools and prompts of every upstream are listed under namespaced names
//! (`<server><sep><name>`, see [`crate::naming`]); resources keep their URIs (they are already
//! global) and are routed by a URI → upstream map built from the lists, with the resource
//! templates' literal prefixes as fallback. Calls are routed to the right upstream with the
//! upstream's own name restored; results come back untouched. The catalog is refreshed when an
//! upstream becomes ready or says `list_changed`; an upstream that goes down keeps its last
//! known tools (calls to them fail with `mcp_budget.upstream.unavailable`).
//!
//! [`Gateway`] is the innermost [`tower::Service`] of the stack (see [`crate::stack`]).

mod eras;

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::context::{Caller, McpRequest, Session, SessionState};
use crate::error::Error;
use crate::jsonrpc::{to_raw, Id, Kind, Message};
use crate::naming::exposed_name;
use crate::policy::Policy;
use crate::upstream::{Event, Status, Upstream};

/// Protocol versions the gateway speaks downstream (2025 era), newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Items per page of the gateway's own lists.
const PAGE_SIZE: usize = 500;

/// What one upstream contributes to the catalog.
#[derive(Debug, Clone, Default)]
struct Contribution {
    tools: Vec<Value>,
    /// Tool name → its properties mirrored in `Mcp-Param-*` headers (tools marking some).
    param_marks: HashMap<String, Vec<crate::mcp::params::Marked>>,
    prompts: Vec<Value>,
    resources: Vec<Value>,
    templates: Vec<Value>,
}

#[derive(Debug, Default)]
struct Catalog {
    /// Bumped on every change, so that derived views (plans, search indexes) know when to
    /// rebuild.
    version: u64,
    per_upstream: Vec<Contribution>,
    /// Exposed tool name → (upstream, upstream's name).
    tools: HashMap<String, (usize, String)>,
    prompts: HashMap<String, (usize, String)>,
    resources: HashMap<String, usize>,
    /// Exposed tool name → its properties mirrored in `Mcp-Param-*` headers (tools that
    /// mark some only).
    param_marks: HashMap<String, Vec<crate::mcp::params::Marked>>,
}

impl Catalog {
    fn rebuild_maps(&mut self, separator: &str, names: &[String]) {
        self.tools.clear();
        self.prompts.clear();
        self.resources.clear();
        self.param_marks.clear();
        for (i, c) in self.per_upstream.iter().enumerate() {
            for t in &c.tools {
                if let Some(n) = t.get("name").and_then(Value::as_str) {
                    let exposed = exposed_name(&names[i], n, separator);
                    if let Some(marks) = c.param_marks.get(n) {
                        self.param_marks.insert(exposed.clone(), marks.clone());
                    }
                    self.tools.insert(exposed, (i, n.to_owned()));
                }
            }
            for p in &c.prompts {
                if let Some(n) = p.get("name").and_then(Value::as_str) {
                    self.prompts
                        .insert(exposed_name(&names[i], n, separator), (i, n.to_owned()));
                }
            }
            for r in &c.resources {
                if let Some(uri) = r.get("uri").and_then(Value::as_str) {
                    self.resources.entry(uri.to_owned()).or_insert(i);
                }
            }
        }
    }
}

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
    catalog: RwLock<Catalog>,
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
    refreshed: Vec<tokio::sync::watch::Sender<u64>>,
    /// What hosts see of the tools (set by the budget layer) and its last fingerprint.
    #[allow(clippy::type_complexity)]
    tools_view: Mutex<Option<(Arc<dyn Fn() -> u64 + Send + Sync>, u64)>>,
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
        let names = policy.upstreams.iter().map(|u| u.name.clone()).collect();
        let count = upstreams.len();
        let catalog = Catalog {
            per_upstream: vec![Contribution::default(); upstreams.len()],
            ..Catalog::default()
        };
        let gateway = Self {
            inner: Arc::new(Inner {
                policy,
                upstreams,
                names,
                catalog: RwLock::new(catalog),
                sessions: Mutex::new(HashMap::new()),
                inflight: Mutex::new(HashMap::new()),
                parked: Mutex::new(HashMap::new()),
                shim: Mutex::new(HashMap::new()),
                tasks: Mutex::new(HashMap::new()),
                subscribers: Mutex::new(HashMap::new()),
                listeners: Mutex::new(Vec::new()),
                refreshing: (0..count).map(|_| tokio::sync::Mutex::new(())).collect(),
                refreshed: (0..count)
                    .map(|_| tokio::sync::watch::channel(0).0)
                    .collect(),
                tools_view: Mutex::new(None),
                shutdown,
            }),
        };
        tokio::spawn(gateway.clone().watch_events(events_rx));
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
        let catalog = self.read_catalog();
        self.inner
            .upstreams
            .iter()
            .zip(&catalog.per_upstream)
            .map(|(u, c)| UpstreamSummary {
                name: u.name().to_owned(),
                transport: u.spec().transport_name(),
                status: u.status(),
                protocol_version: u.info().protocol_version,
                counts: (c.tools.len(), c.prompts.len(), c.resources.len()),
            })
            .collect()
    }

    /// The upstreams, in policy order.
    #[must_use]
    pub fn upstreams(&self) -> &[Upstream] {
        &self.inner.upstreams
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

    fn read_catalog(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        self.inner
            .catalog
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_catalog(&self) -> std::sync::RwLockWriteGuard<'_, Catalog> {
        self.inner
            .catalog
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn watch_events(self, mut events: mpsc::UnboundedReceiver<Event>) {
        loop {
            let event = tokio::select! {
                e = events.recv() => e,
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

    /// Lets a layer that rewrites `tools/list` say what hosts see: `view` returns a fingerprint
    /// of the list it would answer now, and a tools change that leaves it equal is not
    /// announced (a quiet list keeps hosts from listing, and their caches, undisturbed).
    pub fn set_tools_view(&self, view: Arc<dyn Fn() -> u64 + Send + Sync>) {
        let fingerprint = view();
        *lock(&self.inner.tools_view) = Some((view, fingerprint));
    }

    /// Whether what hosts see of the tools changed since the last check (always true without a
    /// view).
    fn tools_view_changed(&self) -> bool {
        let mut guard = lock(&self.inner.tools_view);
        let Some((view, last)) = guard.as_mut() else {
            return true;
        };
        let now = view();
        let changed = now != *last;
        *last = now;
        changed
    }

    fn announce(&self, kinds: &[&'static str]) {
        for kind in kinds {
            if *kind == "tools" && !self.tools_view_changed() {
                tracing::debug!("Upstream tools changed, but not what hosts see; not announced");
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
        let mut fresh = self.read_catalog().per_upstream[i].clone();
        let mut changed = Vec::new();
        if wants("tools") {
            if let Some(mut tools) = fetch_all(upstream, "tools/list", "tools").await {
                for tool in &mut tools {
                    repair_tool(upstream.name(), tool);
                }
                let marks = crate::mcp::params::marked_tools(&tools);
                upstream.set_param_marks(marks.clone());
                fresh.param_marks = marks;
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
            let mut catalog = self.write_catalog();
            catalog.per_upstream[i] = fresh;
            catalog.version += 1;
            catalog.rebuild_maps(&self.inner.policy.separator, &self.inner.names);
        }
        changed
    }

    /// Every tool of the catalog with its namespaced name, in policy then upstream order.
    #[must_use]
    pub fn tools(&self) -> Vec<Value> {
        let catalog = self.read_catalog();
        let sep = &self.inner.policy.separator;
        let mut out = Vec::new();
        for (i, c) in catalog.per_upstream.iter().enumerate() {
            for t in &c.tools {
                out.push(rename(t, &self.inner.names[i], sep));
            }
        }
        out
    }

    /// The catalog's version: changes whenever any upstream's lists change.
    #[must_use]
    pub fn catalog_version(&self) -> u64 {
        self.read_catalog().version
    }

    /// The catalog as [`crate::catalog::CatalogTool`]s (upstream names, server ids).
    #[must_use]
    pub fn catalog_tools(&self) -> Vec<crate::catalog::CatalogTool> {
        let catalog = self.read_catalog();
        let mut out = Vec::new();
        for (i, c) in catalog.per_upstream.iter().enumerate() {
            for t in &c.tools {
                if let Ok(tool) = crate::catalog::CatalogTool::new(&self.inner.names[i], t.clone())
                {
                    out.push(tool);
                }
            }
        }
        out
    }

    async fn handle(&self, req: McpRequest) -> Option<Message> {
        let McpRequest { message, caller } = req;
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
            "tools/list" => {
                ok(self.list_page(msg, "tools", |c, i| &c.per_upstream[i].tools, true)?)
            }
            "prompts/list" => {
                ok(self.list_page(msg, "prompts", |c, i| &c.per_upstream[i].prompts, true)?)
            }
            "resources/list" => {
                ok(self.list_page(msg, "resources", |c, i| &c.per_upstream[i].resources, false)?)
            }
            "resources/templates/list" => ok(self.list_page(
                msg,
                "resourceTemplates",
                |c, i| &c.per_upstream[i].templates,
                false,
            )?),
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
        self.read_catalog()
            .param_marks
            .get(exposed)
            .cloned()
            .unwrap_or_default()
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
        pick: impl Fn(&Catalog, usize) -> &Vec<Value>,
        namespaced: bool,
    ) -> Result<Value, Error> {
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let offset = match params.get("cursor").and_then(Value::as_str) {
            None => 0,
            Some(cursor) => decode_cursor(cursor).ok_or_else(|| Error::InvalidParams {
                method: msg.method().unwrap_or_default().to_owned(),
                reason: "unknown cursor; list again from the start".into(),
            })?,
        };
        let catalog = self.read_catalog();
        let sep = &self.inner.policy.separator;
        let mut items = Vec::new();
        for i in 0..catalog.per_upstream.len() {
            for item in pick(&catalog, i) {
                items.push(if namespaced {
                    rename(item, &self.inner.names[i], sep)
                } else {
                    item.clone()
                });
            }
        }
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
                let catalog = self.read_catalog();
                let map = if what == "tool" {
                    &catalog.tools
                } else {
                    &catalog.prompts
                };
                map.get(fast.name.as_ref())
                    .map(|(i, original)| (*i, fast.splice(original)))
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
            let catalog = self.read_catalog();
            let map = if what == "tool" {
                &catalog.tools
            } else {
                &catalog.prompts
            };
            map.get(&name).cloned()
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
                Status::Down(reason) if owned => Some(Error::UpstreamUnavailable {
                    upstream: u.name().to_owned(),
                    reason,
                }),
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
        let catalog = self.read_catalog();
        if let Some(&i) = catalog.resources.get(uri) {
            return Some(i);
        }
        // Longest literal prefix of a template wins; then the only upstream with resources.
        let mut best: Option<(usize, usize)> = None;
        for (i, c) in catalog.per_upstream.iter().enumerate() {
            for t in &c.templates {
                let Some(template) = t.get("uriTemplate").and_then(Value::as_str) else {
                    continue;
                };
                let prefix = template.split('{').next().unwrap_or(template);
                if uri.starts_with(prefix) && best.is_none_or(|(len, _)| prefix.len() > len) {
                    best = Some((prefix.len(), i));
                }
            }
        }
        if let Some((_, i)) = best {
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
                let (i, original) =
                    self.read_catalog()
                        .prompts
                        .get(name)
                        .cloned()
                        .ok_or_else(|| Error::NotFound {
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

/// Makes a tool callable by strict clients: MCP requires `inputSchema` to be an object schema
/// with `"type": "object"`, and one tool without it makes some clients (the Python SDK) reject
/// the whole list. Nothing else is touched.
fn repair_tool(upstream: &str, tool: &mut Value) {
    let Some(obj) = tool.as_object_mut() else {
        return;
    };
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match obj.get_mut("inputSchema") {
        Some(Value::Object(schema)) => {
            if schema.get("type").is_none() {
                tracing::warn!(upstream, tool = %name, "inputSchema without \"type\"; adding \"type\": \"object\"");
                schema.insert("type".into(), Value::String("object".into()));
            }
        }
        _ => {
            tracing::warn!(upstream, tool = %name, "Tool without an object inputSchema; using an empty object schema");
            obj.insert("inputSchema".into(), json!({"type": "object"}));
        }
    }
}

fn rename(item: &Value, server: &str, separator: &str) -> Value {
    let mut item = item.clone();
    if let Some(name) = item.get("name").and_then(Value::as_str) {
        let exposed = exposed_name(server, name, separator);
        item["name"] = Value::String(exposed);
    }
    item
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

    #[test]
    fn repair_adds_missing_object_type_only() {
        let mut tool = json!({"name": "t", "inputSchema": {"$schema": "x", "properties": {}}});
        repair_tool("u", &mut tool);
        assert_eq!(tool["inputSchema"]["type"], "object");
        assert_eq!(tool["inputSchema"]["$schema"], "x");
    }
}
