//! `budget`: fit `tools/list` into the host's token budget, and answer the meta-tools.
//!
//! Effect: a `tools/list` is answered from the plan for the current catalog — tools listed at
//! the compression level the planner chose, deferred tools behind the `search_tools` /
//! `get_tool_schema` / `invoke_tool` meta-tools when even the most compressed list does not
//! fit (see [`crate::plan`], [`crate::compress`], [`crate::discover`]). The plan, its list and
//! the search index are computed once per catalog version, so a warm `tools/list` costs a
//! copy of cached bytes, and the same catalog always gives the same bytes.
//!
//! A `tools/call` of a meta-tool is answered here; `invoke_tool` with valid arguments goes on
//! down the stack as an ordinary `tools/call` of the real tool, so everything below sees what a
//! direct call would, and the upstream's result comes back unchanged. Direct calls of deferred
//! tools by name also pass through. Everything else passes through untouched.
//!
//! The catalog comes as a published value ([`crate::catalog::Catalog`] snapshots on a
//! `watch` channel, [`Gateway::catalog`](crate::gateway::Gateway::catalog)); the list is
//! [`crate::listing::list_tools`], the same function `render` and `inspect` print. The layer
//! owns what hosts see of the tools, so it announces `notifications/tools/list_changed` itself
//! ([`BudgetLayer::announce_to`]), only when the bytes it lists change.
//!
//! Policy: `[budget]` (model, threshold, level, mode, per-tool rules; `enabled = false` leaves
//! the layer out) and `[discover]` (meta-tool names, `never_defer`, search limits).
//! Tracing: each new plan is logged with `rung`, `tokens_before`, `tokens_after`, `tools`.
//!
//! Over a fixed catalog (embedders, tests):
//!
//! ```
//! use mcp_budget::catalog::{Catalog, CatalogTool};
//! use mcp_budget::layer::budget::BudgetLayer;
//! use mcp_budget::policy::Policy;
//! use serde_json::json;
//!
//! let tool = CatalogTool::new("time", json!({"name": "now", "inputSchema": {"type": "object"}}))?;
//! let layer = BudgetLayer::fixed(Catalog::from_tools(vec![tool], "__"), &Policy::default());
//! let summary = layer.summary();
//! assert_eq!((summary.tools, summary.exposed), (1, 1));
//! # Ok::<(), mcp_budget::catalog::CatalogError>(())
//! ```

mod instructions;
mod result_budget;
mod usage;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tower::{Layer, Service};

use tokio::sync::{mpsc, watch};

use crate::catalog::Catalog;
use crate::context::{McpRequest, Session};
use crate::discover::{Discovery, MetaCall};
use crate::jsonrpc::{to_raw, Id, Kind, Message};
pub use crate::listing::ServerTokens;
use crate::listing::{list_tools, Listing};
use crate::plan::Plan;
use crate::policy::{BudgetPolicy, DiscoverPolicy, Policy};
use crate::tokens::Counter;

/// Token totals of the current plan, for the startup summary and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanSummary {
    /// Per server, in listing order.
    pub per_server: Vec<ServerTokens>,
    /// Rung of the ladder (`full`, `uniform:low`, `hybrid`, `search`, …).
    pub rung: String,
    /// Tools in the catalog.
    pub tools: usize,
    /// Tools listed directly.
    pub exposed: usize,
    /// Tokens of the catalog listed in full.
    pub tokens_before: usize,
    /// Tokens of what the host sees.
    pub tokens_after: usize,
    /// The budget in tokens.
    pub budget_tokens: usize,
}

struct Planned {
    version: u64,
    /// Generation of the usage counts it was planned with (0 without a usage file).
    usage_generation: u64,
    per_server: Vec<ServerTokens>,
    plan: Plan,
    tools: usize,
    /// The listed tools (for sessions with promoted tools).
    listed: Vec<Value>,
    /// The whole `tools/list` result, serialized once.
    result: Box<RawValue>,
    discovery: Option<Discovery>,
}

struct State {
    catalog: watch::Receiver<Arc<Catalog>>,
    budget: BudgetPolicy,
    discover: DiscoverPolicy,
    /// The policy's, for tools outside the catalog (the catalog's own carry their names).
    separator: String,
    counter: Counter,
    current: Mutex<Option<Arc<Planned>>>,
    /// Per session: exposed names of deferred tools it inspected or used, in that order
    /// (`[discover] promote_on_use`).
    /// Session id → (the session, while it lives; the tools it promoted). Entries of sessions
    /// that ended are dropped at the next promotion.
    promoted: Mutex<HashMap<String, Promoted>>,
    /// Servers whose tools are dynamic (`volatile = true` upstreams).
    volatile: Vec<String>,
    /// Call counts and their file (`[budget] usage_file`).
    usage: Option<usage::UsageLog>,
    /// Results cut to their `max_result_tokens` (for metrics).
    results_cut: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("model", &self.budget.model)
            .finish_non_exhaustive()
    }
}

impl State {
    /// Equal fingerprints, equal `tools/list` bytes (for sessions without promoted tools).
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let planned = self.planned();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        planned.result.get().hash(&mut hasher);
        hasher.finish()
    }

    /// The plan for the current catalog, computed at most once per catalog version.
    fn planned(&self) -> Arc<Planned> {
        let catalog = self.catalog.borrow().clone();
        let version = catalog.version();
        let learned = self.usage.as_ref().map(usage::UsageLog::learned);
        let generation = learned.as_ref().map_or(0, |l| l.generation);
        // Held while planning: concurrent lists of a new catalog wait for one computation.
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(p) = current
            .as_ref()
            .filter(|p| p.version == version && p.usage_generation == generation)
        {
            return p.clone();
        }
        let usage = learned.map(|l| crate::plan::usage_of(catalog.tools(), &l.counts));
        let mut planned = self.compute(&catalog, usage.unwrap_or_default());
        planned.usage_generation = generation;
        let planned = Arc::new(planned);
        *current = Some(planned.clone());
        planned
    }

    fn compute(&self, catalog: &Catalog, usage: Vec<u64>) -> Planned {
        let mut rules = self
            .budget
            .rules(catalog.tools(), catalog.separator(), &self.discover);
        rules.usage = usage;
        let listing = list_tools(catalog, &rules, &self.counter, &self.volatile);
        let deferred = listing.deferred(catalog);
        let Listing {
            plan,
            per_server,
            tools,
            result,
            ..
        } = listing;
        let listed = if self.discover.promote_on_use {
            tools
        } else {
            Vec::new()
        };
        let discovery = (plan.meta_tools && !deferred.is_empty()).then(|| {
            Discovery::new(
                deferred,
                catalog.separator(),
                &self.discover.names,
                self.discover.limits,
            )
        });
        tracing::info!(
            rung = %plan.rung,
            tools = catalog.tools().len(),
            exposed = plan.exposed_count(),
            tokens_before = plan.tokens_before,
            tokens_after = plan.tokens_after,
            budget = plan.budget.tokens,
            "Tool list planned"
        );
        Planned {
            version: catalog.version(),
            usage_generation: 0,
            per_server,
            tools: catalog.tools().len(),
            listed,
            plan,
            result,
            discovery,
        }
    }

    /// Counts a call of the tool exposed as `exposed` (with a usage file; unknown names are not
    /// counted).
    fn count_call(&self, exposed: &str) {
        let Some(usage) = &self.usage else { return };
        let catalog = self.catalog.borrow();
        if let Some((i, tool)) = catalog.tool(exposed) {
            if let Some(server) = catalog.names().get(i) {
                usage.record(server, tool);
            }
        }
    }

    /// Writes the usage file when something was counted since the last write.
    async fn flush_usage(&self) {
        if let Some((path, text)) = self.usage.as_ref().and_then(usage::UsageLog::pending_write) {
            let _ = tokio::task::spawn_blocking(move || usage::write_usage(&path, &text)).await;
        }
    }

    /// Makes the counts so far what the plan uses (the next list is planned with them), and
    /// writes them.
    async fn relearn_usage(&self) {
        if let Some(usage) = &self.usage {
            if usage.relearn() {
                tracing::info!("Usage counts relearned; the tool list is planned again");
            }
        }
        self.flush_usage().await;
    }

    /// The `tools/list` result for a session: the plan's list, then the tools this session
    /// promoted (appended, so the static prefix keeps its bytes).
    fn list_for(&self, session: &str) -> Box<RawValue> {
        let planned = self.planned();
        let promoted = self
            .promoted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(session)
            .map(|(_, names)| names.clone())
            .unwrap_or_default();
        let Some(discovery) = planned.discovery.as_ref().filter(|_| !promoted.is_empty()) else {
            return planned.result.clone();
        };
        let mut tools = planned.listed.clone();
        for name in &promoted {
            if let Some((i, tool)) = discovery.find(name) {
                let mut def = tool.definition.clone();
                if let Some(exposed) = discovery.exposed_name(i) {
                    def.insert("name".into(), Value::String(exposed.to_owned()));
                }
                tools.push(crate::canonical::into_canonical_tool(Value::Object(def)));
            }
        }
        to_raw(&json!({ "tools": tools }))
    }

    /// Promotes a deferred tool for a session and tells the session its list changed. Not for
    /// a 2026-07-28 request, whose session ends with it (the next list is another session's).
    fn promote(&self, session: &Arc<Session>, modern: bool, exposed: &str) {
        if modern {
            return;
        }
        let mut promoted = self
            .promoted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        promoted.retain(|_, (alive, _)| alive.strong_count() > 0);
        let (_, list) = promoted
            .entry(session.id.clone())
            .or_insert_with(|| (Arc::downgrade(session), Vec::new()));
        if list.iter().any(|n| n == exposed) {
            return;
        }
        list.push(exposed.to_owned());
        drop(promoted);
        let _ = session.notify.send(Message::notification(
            "notifications/tools/list_changed",
            None,
        ));
    }
}

/// A session (while it lives) and the tools it promoted.
type Promoted = (std::sync::Weak<Session>, Vec<String>);

/// Layer of [`Budget`].
#[derive(Debug, Clone)]
pub struct BudgetLayer {
    state: Arc<State>,
}

impl BudgetLayer {
    /// A layer planning the catalog published on `catalog` (each snapshot when it is first
    /// listed) under `policy`'s `[budget]` and `[discover]`.
    #[must_use]
    pub fn new(catalog: watch::Receiver<Arc<Catalog>>, policy: &Policy) -> Self {
        Self {
            state: Arc::new(State {
                catalog,
                counter: Counter::new(&policy.budget.profile),
                budget: policy.budget.clone(),
                discover: policy.discover.clone(),
                separator: policy.separator.clone(),
                current: Mutex::new(None),
                promoted: Mutex::new(HashMap::new()),
                volatile: volatile_servers(policy),
                results_cut: std::sync::atomic::AtomicU64::new(0),
                usage: policy.budget.usage_file.as_ref().map(|path| {
                    usage::UsageLog::open(
                        path,
                        std::time::Duration::from_secs(policy.budget.relearn_secs),
                    )
                }),
            }),
        }
    }

    /// A layer planning one fixed catalog.
    #[must_use]
    pub fn fixed(catalog: Catalog, policy: &Policy) -> Self {
        Self::new(watch::channel(Arc::new(catalog)).1, policy)
    }

    /// A fingerprint of the `tools/list` a session without promoted tools gets now (plans the
    /// current catalog if needed): equal fingerprints, equal bytes.
    #[must_use]
    pub fn fingerprint(&self) -> u64 {
        self.state.fingerprint()
    }

    /// From now on, sends `notifications/tools/list_changed` to `sink` whenever a new catalog
    /// (or, with a usage file, a relearn of the call counts) changes the bytes this layer lists
    /// (a change that leaves them equal is not announced: a quiet list keeps hosts from
    /// listing, and their caches, undisturbed). The same task relearns and writes the usage
    /// file on its schedule. Spawns a task on the current Tokio runtime; it ends with the
    /// layer or the catalog's publisher.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn announce_to(&self, sink: mpsc::UnboundedSender<Message>) {
        let mut catalog = self.state.catalog.clone();
        catalog.borrow_and_update();
        let last = self.state.fingerprint();
        tokio::spawn(announce_changes(
            Arc::downgrade(&self.state),
            catalog,
            last,
            sink,
        ));
    }

    /// How many tool results were cut to their `max_result_tokens` so far.
    #[must_use]
    pub fn results_cut(&self) -> u64 {
        self.state
            .results_cut
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The current plan's totals (plans the current catalog if needed).
    #[must_use]
    pub fn summary(&self) -> PlanSummary {
        let planned = self.state.planned();
        PlanSummary {
            per_server: planned.per_server.clone(),
            rung: planned.plan.rung.to_string(),
            tools: planned.tools,
            exposed: planned.plan.exposed_count(),
            tokens_before: planned.plan.tokens_before,
            tokens_after: planned.plan.tokens_after,
            budget_tokens: planned.plan.budget.tokens,
        }
    }
}

/// The servers whose tools are dynamic (`volatile = true` upstreams): listed after the rest.
pub(crate) fn volatile_servers(policy: &Policy) -> Vec<String> {
    policy
        .upstreams
        .iter()
        .filter(|u| u.volatile)
        .map(|u| u.name.clone())
        .collect()
}

/// The loop of [`BudgetLayer::announce_to`].
async fn announce_changes(
    state: std::sync::Weak<State>,
    mut catalog: watch::Receiver<Arc<Catalog>>,
    mut last: u64,
    sink: mpsc::UnboundedSender<Message>,
) {
    let relearn_every = state
        .upgrade()
        .and_then(|s| s.usage.as_ref().map(|u| u.relearn));
    let mut relearn = relearn_every.map(every);
    let mut flush = relearn_every.map(|r| every(r.min(usage::FLUSH_EVERY)));
    // A fixed catalog (its publisher gone) changes no more, but usage still relearns.
    let mut published = true;
    loop {
        tokio::select! {
            changed = catalog.changed(), if published => {
                if changed.is_err() {
                    if relearn.is_none() {
                        return;
                    }
                    published = false;
                    continue;
                }
            }
            () = tick(relearn.as_mut()) => {
                let Some(state) = state.upgrade() else { return };
                state.relearn_usage().await;
            }
            () = tick(flush.as_mut()) => {
                let Some(state) = state.upgrade() else { return };
                state.flush_usage().await;
                continue;
            }
        }
        let Some(state) = state.upgrade() else { return };
        let now = state.fingerprint();
        if now == last {
            tracing::debug!("Upstream tools changed, but not what hosts see; not announced");
            continue;
        }
        last = now;
        let note = Message::notification("notifications/tools/list_changed", None);
        if sink.send(note).is_err() {
            return;
        }
    }
}

/// An interval whose first tick is one `period` from now.
fn every(period: std::time::Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}

/// The next tick of `interval`, or never.
async fn tick(interval: Option<&mut tokio::time::Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

impl<S> Layer<S> for BudgetLayer {
    type Service = Budget<S>;
    fn layer(&self, inner: S) -> Budget<S> {
        Budget {
            inner,
            state: self.state.clone(),
        }
    }
}

/// Applies the budget plan to `tools/list` and serves the meta-tools.
#[derive(Debug, Clone)]
pub struct Budget<S> {
    inner: S,
    state: Arc<State>,
}

impl<S> Budget<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

type BoxFuture = crate::context::McpFuture;

impl<S> Service<McpRequest> for Budget<S>
where
    S: Service<McpRequest, Response = Option<Message>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Option<Message>;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: McpRequest) -> BoxFuture {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if req.message.kind() != Kind::Request {
            return Box::pin(inner.call(req));
        }
        let id = req.message.id.clone().unwrap_or(Id::Null);
        match req.message.method() {
            Some("tools/list") => {
                let reply = Message::response(id, self.state.list_for(&req.caller.session.id));
                Box::pin(async move { Ok(Some(reply)) })
            }
            Some("initialize" | "server/discover")
                if self.state.budget.mode == crate::plan::ModeChoice::HostSearch =>
            {
                let state = self.state.clone();
                Box::pin(async move {
                    let mut reply = inner.call(req).await?;
                    if let Some(message) = reply.as_mut() {
                        let catalog = state.catalog.borrow().clone();
                        instructions::rewrite(message, &catalog);
                    }
                    Ok(reply)
                })
            }
            Some("tools/call") => {
                let Some(rewritten) = self.meta_call(&req) else {
                    let limit = self.result_budget(&req);
                    return self.limited(limit, Box::pin(inner.call(req)));
                };
                match rewritten {
                    Outcome::Answer(result) => {
                        let reply = Message::response_value(id, &result);
                        Box::pin(async move { Ok(Some(reply)) })
                    }
                    // The real call, with its own view, as if the client had sent it.
                    Outcome::Forward(params) => {
                        let req = req.with_params(params);
                        let limit = self.result_budget(&req);
                        self.limited(limit, Box::pin(inner.call(req)))
                    }
                }
            }
            _ => Box::pin(inner.call(req)),
        }
    }
}

impl<S> Budget<S> {
    /// The result budget of tools/call `req`, and the tool's exposed name:
    /// `Some` when the tool has a `max_result_tokens`.
    fn result_budget(&self, req: &McpRequest) -> Option<(usize, String)> {
        // Most policies set none: then nothing is looked up per call. The name is the
        // request view's (parsed once, downstream).
        if !self.state.budget.has_result_budgets() {
            return None;
        }
        let name = req.view.typed_name()?;
        let max = self.state.result_limit(name)?;
        Some((max, name.to_owned()))
    }

    /// `future`, with its result cut to the budget in `limit` when there is one.
    fn limited(&self, limit: Option<(usize, String)>, future: BoxFuture) -> BoxFuture {
        match limit {
            Some((max, exposed)) => {
                result_budget::cut_on_return(self.state.clone(), exposed, max, future)
            }
            None => future,
        }
    }
}

enum Outcome {
    Answer(Value),
    Forward(Box<RawValue>),
}

/// A `tools/call` of a meta-tool, as the request's view gives it.
struct MetaRequest<'a> {
    name: &'a str,
    /// `null` when absent.
    arguments: Value,
    meta: Option<Value>,
}

impl<S> Budget<S> {
    /// `Some` when the call is of a meta-tool: its answer, or the real call to forward.
    fn meta_call(&self, req: &McpRequest) -> Option<Outcome> {
        let names = &self.state.discover.names;
        let is_meta =
            |name: &str| name == names.search || name == names.schema || name == names.invoke;
        // Most calls are of real tools: their name alone says so, without building the
        // arguments as a `Value`.
        let name = req.view.typed_name()?;
        if !is_meta(name) {
            self.state.count_call(name);
            return None;
        }
        let call = MetaRequest {
            name,
            arguments: req.view.arguments_value(&req.message),
            meta: req
                .view
                .meta(&req.message)
                .and_then(|text| serde_json::from_str::<Option<Value>>(text).ok().flatten()),
        };
        let planned = self.state.planned();
        let discovery = planned.discovery.as_ref()?;
        let outcome = discovery.call(call.name, &call.arguments)?;
        if self.state.discover.promote_on_use {
            let inspected = matches!(&outcome, MetaCall::Result(r) if call.name == names.schema && r.get("isError").is_none());
            let used = matches!(&outcome, MetaCall::Invoke { .. });
            let name = call.arguments.get("name").and_then(Value::as_str);
            if let (true, Some((i, _))) = (inspected || used, name.and_then(|n| discovery.find(n)))
            {
                if let Some(exposed) = discovery.exposed_name(i) {
                    self.state
                        .promote(&req.caller.session, req.view.is_modern(), exposed);
                }
            }
        }
        match outcome {
            MetaCall::Result(result) => Some(Outcome::Answer(result)),
            MetaCall::Invoke { tool, arguments } => {
                let exposed = tool.exposed_name(&self.state.separator).into_owned();
                self.state.count_call(&exposed);
                let mut params = Map::new();
                params.insert("name".into(), Value::String(exposed));
                params.insert("arguments".into(), arguments);
                if let Some(meta) = call.meta {
                    params.insert("_meta".into(), meta);
                }
                Some(Outcome::Forward(to_raw(&Value::Object(params))))
            }
        }
    }
}

#[cfg(test)]
mod planner_tests;
#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CatalogTool;
    use crate::context::{Caller, Session};
    use std::path::Path;

    pub(super) fn fixed(tools: Vec<CatalogTool>, policy: &Policy) -> BudgetLayer {
        BudgetLayer::fixed(Catalog::from_tools(tools, &policy.separator), policy)
    }

    pub(super) fn fixtures() -> Vec<CatalogTool> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
        crate::catalog::load_saved(&[dir]).unwrap()
    }

    pub(super) fn request(id: i64, method: &str, params: &Value) -> McpRequest {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        McpRequest::new(
            Message::request(Id::Number(id), method, Some(to_raw(params))),
            Caller::new(Arc::new(Session::new("t", tx))),
        )
    }

    /// The inner service echoes the tools/call it receives.
    pub(super) fn echo() -> impl Service<
        McpRequest,
        Response = Option<Message>,
        Error = Infallible,
        Future = impl std::future::Future<Output = Result<Option<Message>, Infallible>> + Send,
    > + Clone
           + Send
           + 'static {
        tower::service_fn(|req: McpRequest| async move {
            let params: Value = req.message.params_as().unwrap();
            // What comes down is read as what it is (a rewritten call has a new view).
            assert_eq!(req.view.name(), params.get("name").and_then(Value::as_str));
            let id = req.message.id.clone().unwrap();
            Ok(Some(Message::response_value(
                id,
                &json!({"content": [{"type": "text", "text": params.to_string()}]}),
            )))
        })
    }

    #[tokio::test]
    async fn large_catalog_goes_behind_search_and_invoke_reaches_the_real_tool() {
        let mut policy = Policy::default();
        // Everything behind search (`auto` would list small servers' tools, time's among them).
        policy.budget.mode = crate::plan::ModeChoice::Progressive;
        let layer = fixed(fixtures(), &policy);
        let mut svc = layer.layer(echo());
        let list = svc
            .call(request(1, "tools/list", &json!({})))
            .await
            .unwrap()
            .unwrap();
        let tools: Value = list.result_as().unwrap();
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"search_tools"), "{names:?}");
        assert!(names.len() < 20, "{names:?}");

        let found = svc
            .call(request(2, "tools/call", &json!({"name": "search_tools", "arguments": {"query": "current time in a timezone"}})))
            .await
            .unwrap()
            .unwrap();
        let text = found.result.unwrap().get().to_owned();
        assert!(text.contains("time__get_current_time"), "{text}");

        let invoked = svc
            .call(request(3, "tools/call", &json!({"name": "invoke_tool", "arguments": {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}})))
            .await
            .unwrap()
            .unwrap();
        let text = invoked.result.unwrap().get().to_owned();
        assert!(
            text.contains(r#"\"name\":\"time__get_current_time\""#),
            "{text}"
        );

        let bad = svc
            .call(request(4, "tools/call", &json!({"name": "invoke_tool", "arguments": {"name": "time__get_current_time", "arguments": {"timezone": 3}}})))
            .await
            .unwrap()
            .unwrap();
        let result: Value = bad.result_as().unwrap();
        assert_eq!(result["isError"], true, "{result}");
    }

    #[tokio::test]
    async fn tools_of_volatile_upstreams_come_after_the_static_prefix() {
        let mut policy = Policy::from_toml_str(
            "version = 1\n[[upstream]]\nname = \"github\"\ncommand = \"x\"\nvolatile = true\n",
            "t.toml",
        )
        .unwrap();
        policy.budget.mode = crate::plan::ModeChoice::Full;
        let tools: Vec<CatalogTool> = fixtures()
            .into_iter()
            .filter(|t| t.server == "github" || t.server == "time")
            .collect();
        let layer = fixed(tools, &policy);
        let list = layer
            .layer(echo())
            .call(request(1, "tools/list", &json!({})))
            .await
            .unwrap()
            .unwrap();
        let list: Value = list.result_as().unwrap();
        let names: Vec<&str> = list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        // github sorts before time, but it is volatile: time's tools come first.
        assert!(names[0].starts_with("time__"), "{names:?}");
        assert!(names.last().unwrap().starts_with("github__"), "{names:?}");
    }

    #[tokio::test]
    async fn promoted_tools_are_appended_for_that_session_only() {
        let mut policy = Policy::default();
        policy.discover.promote_on_use = true;
        policy.budget.mode = crate::plan::ModeChoice::Progressive;
        let layer = fixed(fixtures(), &policy);
        let mut svc = layer.layer(echo());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let session = Arc::new(Session::new("promoting", tx));
        let call = |id, method: &str, params: &Value| {
            McpRequest::new(
                Message::request(Id::Number(id), method, Some(to_raw(params))),
                Caller::new(session.clone()),
            )
        };
        let before = svc
            .call(call(1, "tools/list", &json!({})))
            .await
            .unwrap()
            .unwrap();
        let before = before.result.unwrap().get().to_owned();
        svc.call(call(2, "tools/call", &json!({"name": "invoke_tool", "arguments": {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}})))
            .await
            .unwrap();
        let note = rx.try_recv().unwrap();
        assert_eq!(note.method(), Some("notifications/tools/list_changed"));
        let after = svc
            .call(call(3, "tools/list", &json!({})))
            .await
            .unwrap()
            .unwrap();
        let after = after.result.unwrap().get().to_owned();
        // The static prefix is byte-identical; the promoted tool comes after it.
        let prefix = before.trim_end_matches("]}");
        assert!(after.starts_with(prefix), "static prefix changed");
        assert!(after[prefix.len()..].contains("time__get_current_time"));
        // Another session still sees the plain list.
        let other = svc
            .call(request(4, "tools/list", &json!({})))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(other.result.unwrap().get(), before);
    }

    #[tokio::test]
    async fn promotions_of_ended_sessions_are_forgotten_and_modern_requests_promote_nothing() {
        let mut policy = Policy::default();
        policy.discover.promote_on_use = true;
        policy.budget.mode = crate::plan::ModeChoice::Progressive;
        let layer = fixed(fixtures(), &policy);
        let mut svc = layer.layer(echo());
        let invoke = json!({"name": "invoke_tool", "arguments": {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}});
        for n in 0..3 {
            let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
            let session = Arc::new(Session::new(format!("s{n}"), tx));
            let req = McpRequest::new(
                Message::request(Id::Number(n), "tools/call", Some(to_raw(&invoke))),
                Caller::new(session),
            );
            svc.call(req).await.unwrap();
        }
        // Each promotion dropped the entries of the sessions that ended before it.
        assert_eq!(layer.state.promoted.lock().unwrap().len(), 1);
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let modern = Arc::new(Session::new("modern", tx));
        // The era is the request's own (its `_meta`), whatever the session's state says.
        let mut modern_invoke = invoke.clone();
        modern_invoke["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        });
        let req = McpRequest::new(
            Message::request(Id::Number(9), "tools/call", Some(to_raw(&modern_invoke))),
            Caller::new(modern.clone()),
        );
        let reply = svc.call(req).await.unwrap().unwrap();
        // Forwarded as the real call, `_meta` and all, with the view of what went down.
        let result: Value = reply.result_as().unwrap();
        let text = result["content"][0]["text"].as_str().unwrap();
        let forwarded: Value = serde_json::from_str(text).unwrap();
        assert_eq!(forwarded["name"], "time__get_current_time");
        assert_eq!(
            forwarded["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert!(!layer.state.promoted.lock().unwrap().contains_key("modern"));
    }

    #[tokio::test]
    async fn same_catalog_same_bytes_whatever_the_upstream_order() {
        // Every tool listed, so that order shows in the bytes.
        let mut policy = Policy::default();
        policy.budget.mode = crate::plan::ModeChoice::Full;
        let a = fixed(fixtures(), &policy);
        let mut shuffled = fixtures();
        // Each server's tools in reverse: a different upstream answer order.
        shuffled.reverse();
        shuffled.sort_by(|x, y| x.server.cmp(&y.server));
        assert_ne!(shuffled, fixtures());
        let b = fixed(shuffled, &policy);
        let la = a
            .layer(echo())
            .call(request(1, "tools/list", &json!({})))
            .await
            .unwrap()
            .unwrap();
        let lb = b
            .layer(echo())
            .call(request(1, "tools/list", &json!({})))
            .await
            .unwrap()
            .unwrap();
        assert!(la.to_bytes().len() > 100_000, "every tool is listed");
        assert_eq!(la.to_bytes(), lb.to_bytes());
    }

    #[tokio::test]
    async fn never_deferred_tools_are_listed_in_full_with_their_rules() {
        let policy = Policy::from_toml_str(
            "version = 1\n[budget.tools.\"time/*\"]\nmin_level = \"extreme\"\n\
             [budget.tools.\"time/get_current_time\"]\ndescription = \"Now, in a time zone.\"\n\
             [discover]\nnever_defer = [\"time__get_*\"]\n",
            "t.toml",
        )
        .unwrap();
        let layer = fixed(fixtures(), &policy);
        let list = layer
            .layer(echo())
            .call(request(1, "tools/list", &json!({})))
            .await
            .unwrap()
            .unwrap();
        let list: Value = list.result_as().unwrap();
        let tools = list["tools"].as_array().unwrap();
        // The large catalog goes behind search, but the never-deferred tool stays listed: pinned,
        // so uncompressed despite time's min_level, and with its own rule's description.
        let now = tools
            .iter()
            .find(|t| t["name"] == "time__get_current_time")
            .unwrap_or_else(|| panic!("not listed: {list}"));
        assert_eq!(now["description"], "Now, in a time zone.");
        let upstream = fixtures()
            .into_iter()
            .find(|t| t.id() == "time/get_current_time")
            .unwrap();
        assert_eq!(now["inputSchema"], upstream.definition["inputSchema"]);
        assert!(tools.iter().all(|t| t["name"] != "time__convert_time"));
        assert!(tools.iter().any(|t| t["name"] == "search_tools"));
    }
}
