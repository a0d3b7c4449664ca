//! `budget`: fit `tools/list` into the host's token budget, and answer the meta-tools.
//!
//! Effect: a `tools/list` is answered from the plan for the current catalog — tools listed at
//! the compression level the planner chose, deferred tools behind the `search_tools` /
//! `get_tool_schema` / `invoke_tool` meta-tools when even the most compressed list does not
//! fit (see [`crate::plan`], [`crate::compress`], [`crate::discover`]). The plan, its list and
//! the search index are computed once per catalog version, so a warm `tools/list` costs a
//! copy of cached bytes, and the same catalog always gives the same bytes.
//!
//! Each client (the request's [`Principal`](crate::identity::Principal)) gets the plan of
//! what its scope lets it see, for its own model (`budget/state.rs`): a tool it may not see is
//! absent from its list, search, catalog lines and near names, as a missing one; an
//! `invoke_tool` or `get_tool_schema` of it goes down as the direct call it stands for and is
//! denied as that is (`budget/denied.rs`). The
//! anonymous principal of a policy without clients has the one plan of the whole catalog.
//! With `[discover] native_disclosure`, a client that declares the draft SEP's
//! `tools.progressiveDisclosure` is served `tools/catalog` and `tools/describe` instead of
//! meta-tools (`budget/native.rs`; `docs/budget.md` has the shapes).
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
//! the layer out), `[discover]` (meta-tool names, `never_defer`, search limits,
//! `native_disclosure`) and each `[[client]]`'s scope and `model`.
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

mod announce;
mod code_mode;
mod denied;
mod instructions;
mod native;
mod rerank;
mod result_budget;
mod state;
mod usage;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tower::Layer;

use crate::layer::{Around, Inner, Layered};

use tokio::sync::{mpsc, watch};

use crate::catalog::Catalog;
use crate::context::McpRequest;
use crate::discover::{MetaCall, MetaTool};
use crate::jsonrpc::{Id, Kind, Message, to_raw};
pub use crate::listing::ServerTokens;
use crate::mcp::method::Method;
use crate::plan::ModeChoice;
use crate::policy::Policy;
use crate::tokens::Counter;
use state::{Audience, Profiled, State};

/// Token totals of the current plan, for the startup summary and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
        Self::succeeding(catalog, policy, None)
    }

    /// [`BudgetLayer::new`] for a reloaded policy, succeeding `previous` (the layer of the
    /// stack it replaces): with the same `[budget] usage_file`, the call counts go on in one
    /// log (none counted since the last write is lost, and calls still finishing in the old
    /// stack count too); with another file or none, the previous counts are written to their
    /// file now. Writing spawns a task on the current Tokio runtime.
    ///
    /// # Panics
    /// Outside a Tokio runtime, when `previous` has counts to write.
    #[must_use]
    pub fn succeeding(
        catalog: watch::Receiver<Arc<Catalog>>,
        policy: &Policy,
        previous: Option<&Self>,
    ) -> Self {
        Self::sharing(catalog, policy, previous, None)
    }

    /// [`BudgetLayer::succeeding`] for a gateway with a `[state]` store: the usage counts go
    /// to `store`, and every replica plans with the counts it hands them (see
    /// [`crate::state::usage`]), so replicas list the same bytes.
    ///
    /// # Panics
    /// Outside a Tokio runtime, when `previous` has counts to write.
    #[must_use]
    pub(crate) fn sharing(
        catalog: watch::Receiver<Arc<Catalog>>,
        policy: &Policy,
        previous: Option<&Self>,
        store: Option<&crate::state::Store>,
    ) -> Self {
        let file = policy.budget.usage_file.as_deref();
        let relearn = std::time::Duration::from_secs(policy.budget.relearn_secs);
        let store_for_promotions = store.filter(|_| policy.discover.promote_on_use).cloned();
        let before = previous.and_then(|p| p.state.usage.clone());
        let usage = match before {
            Some(log) if usage::handover(&log, file, relearn) == usage::Handover::Keep => Some(log),
            before => {
                if let (Some(_), Some(previous)) = (before, previous) {
                    let state = previous.state.clone();
                    tokio::spawn(async move { state.flush_usage().await });
                }
                let shared = store.map(|store| (store.clone(), relearn));
                file.map(|path| Arc::new(usage::UsageLog::open(path, shared)))
            }
        };
        Self {
            state: Arc::new(State {
                catalog,
                base: Arc::new(Profiled {
                    counter: Counter::new(&policy.budget.profile),
                    budget: policy.budget.clone(),
                }),
                discover: policy.discover.clone(),
                separator: policy.separator.clone(),
                open: policy.clients.is_empty(),
                current: Mutex::new(None),
                clients: Mutex::new(HashMap::new()),
                profiles: Mutex::new(HashMap::new()),
                promoted: Mutex::new(HashMap::new()),
                listeners: Mutex::new(HashMap::new()),
                volatile: volatile_servers(policy),
                searches: crate::telemetry::rank::Searches::default(),
                policy_clients: policy.clients.clone(),
                results_cut: std::sync::atomic::AtomicU64::new(0),
                results_compacted: std::sync::atomic::AtomicU64::new(0),
                results: result_store(policy, previous, store),
                shared_results: store
                    .filter(|_| policy.budget.has_result_budgets())
                    .cloned(),
                code_runs: code_mode::runs_gate(policy.discover.code_mode.as_ref()),
                reranker: rerank::reranker_of(&policy.discover),
                usage,
                relearn,
                store: store_for_promotions.map(|s| (s, policy.sessions.max_lifetime)),
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
    /// listing, and their caches, undisturbed). With `[[client]]`s, each client session that
    /// listed tools is told instead, through its own channel, when its own list changed, and
    /// `sink` gets nothing. The same task relearns and writes the usage
    /// file on its schedule. Spawns a task on the current Tokio runtime; it ends with the
    /// layer or the catalog's publisher.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn announce_to(&self, sink: mpsc::UnboundedSender<Message>) {
        let mut catalog = self.state.catalog.clone();
        catalog.borrow_and_update();
        let last = self.state.open_fingerprint();
        tokio::spawn(announce::announce_changes(
            Arc::downgrade(&self.state),
            catalog,
            last,
            sink,
        ));
    }

    /// How many tool results were compacted (`result_format`) so far.
    #[must_use]
    pub fn results_compacted(&self) -> u64 {
        self.state
            .results_compacted
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many tool results were over their `max_result_tokens` (kept or cut) so far.
    #[must_use]
    pub fn results_cut(&self) -> u64 {
        self.state
            .results_cut
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Writes the `[budget] usage_file` counts not written yet (nothing without a usage file
    /// or when nothing was counted since the last write). The gateway calls it when it stops.
    pub async fn flush_usage(&self) {
        self.state.flush_usage().await;
    }

    /// The current plan's totals (plans the current catalog if needed).
    #[must_use]
    pub fn summary(&self) -> PlanSummary {
        summary_of(&self.state.planned())
    }

    /// The plan's totals for `[[client]]` `name` (its scope's tools, its model); `None` for a
    /// name no client has.
    #[must_use]
    pub fn client_summary(&self, name: &str) -> Option<PlanSummary> {
        let spec = self.state.policy_clients.iter().find(|s| s.name == name)?;
        Some(self.summary_for(spec))
    }

    /// The plan's totals for the client `spec` describes.
    fn summary_for(&self, spec: &crate::policy::client::ClientSpec) -> PlanSummary {
        summary_of(&self.state.planned_for(Some(&Audience::of_spec(spec))))
    }

    /// The plan's totals per profile: [`names::DEFAULT_PROFILE`] (the policy's `[budget]`
    /// over the whole catalog, [`BudgetLayer::summary`]), then each `[[client]]` by name (its
    /// scope's tools, its model). As many as the policy has clients, plus one.
    ///
    /// [`names::DEFAULT_PROFILE`]: crate::telemetry::names::DEFAULT_PROFILE
    #[must_use]
    pub fn profile_summaries(&self) -> Vec<(String, PlanSummary)> {
        let default = crate::telemetry::names::DEFAULT_PROFILE.to_owned();
        let mut out = vec![(default, self.summary())];
        for spec in &self.state.policy_clients {
            out.push((spec.name.clone(), self.summary_for(spec)));
        }
        out
    }
}

fn summary_of(planned: &state::Planned) -> PlanSummary {
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

/// The store of results over their budget (`read_result`), when a rule sets
/// `max_result_tokens`: the previous generation's when its bounds are the same (a reload keeps
/// what sessions may still read). With a `[state]` store its ids carry this replica's tag (the
/// first 6 characters of its id), so that replicas sharing results never give one session's
/// results the same id.
fn result_store(
    policy: &Policy,
    previous: Option<&BudgetLayer>,
    shared: Option<&crate::state::Store>,
) -> Option<Arc<crate::results::ResultStore>> {
    if !policy.budget.has_result_budgets() {
        return None;
    }
    let limits = policy.budget.results;
    let tag = shared.map(|s| s.replica_id().chars().take(6).collect::<String>());
    let kept = previous.and_then(|p| p.state.results.clone());
    Some(
        kept.filter(|s| s.limits() == limits && s.tag() == tag.as_deref())
            .unwrap_or_else(|| {
                let store = crate::results::ResultStore::new(limits);
                Arc::new(match &tag {
                    Some(tag) => store.tagged(tag),
                    None => store,
                })
            }),
    )
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

impl<S> Layer<S> for BudgetLayer {
    type Service = Budget<S>;
    fn layer(&self, inner: S) -> Budget<S> {
        Layered::new(self.clone(), inner)
    }
}

/// Applies the budget plan to `tools/list` and serves the meta-tools.
pub type Budget<S> = Layered<BudgetLayer, S>;

type BoxFuture = crate::context::McpFuture;

impl<S: Inner> Around<S> for BudgetLayer {
    type Future = BoxFuture;

    fn around(&self, mut inner: S, req: McpRequest) -> BoxFuture {
        if req.message.kind() != Kind::Request {
            return Box::pin(inner.call(req));
        }
        let id = req.message.reply_id();
        // A known method clones without allocating (and the view keeps it).
        match req.view.method().clone() {
            Method::ToolsList => {
                let native = self.state.is_native(&req);
                let modern = req.view.is_modern();
                if self.state.shares_promotions(modern) {
                    // What the session promoted on other replicas first (one round trip).
                    let state = self.state.clone();
                    return Box::pin(async move {
                        if let Some((store, _)) = &state.store {
                            if let Ok(shared) = store.promoted(&req.caller.session.id).await {
                                state.adopt_promoted(&req.caller.session, shared);
                            }
                        }
                        let result = state.list_for(&req.caller, native, modern);
                        Ok(Some(Message::response(id, result)))
                    });
                }
                let reply = Message::response(id, self.state.list_for(&req.caller, native, modern));
                Box::pin(async move { Ok(Some(reply)) })
            }
            method @ (Method::ToolsCatalog | Method::ToolsDescribe)
                if self.state.is_native(&req) =>
            {
                let audience = Audience::of(&req.caller.principal, true);
                let planned = self.state.planned_for(audience.as_ref());
                let describe = method == Method::ToolsDescribe;
                let Some(catalog) = planned.native.as_ref() else {
                    // Cannot happen: a native audience's plan has its catalog.
                    return Box::pin(inner.call(req));
                };
                let reply = catalog.answer(&req, id, describe);
                Box::pin(async move { Ok(Some(reply)) })
            }
            Method::Initialize | Method::Discover if self.state.rewrites_handshake() => {
                let state = self.state.clone();
                let advertise =
                    state.discover.native_disclosure && native::declared_at_handshake(&req);
                let principal = req.caller.principal.clone();
                Box::pin(async move {
                    let mut reply = inner.call(req).await?;
                    if let Some(message) = reply.as_mut() {
                        if state.base.budget.mode == ModeChoice::HostSearch {
                            let catalog = state.catalog.borrow().clone();
                            let visible = (principal.via() != crate::identity::Via::Anonymous)
                                .then(|| principal.client().scope().visible(catalog.tools()));
                            instructions::rewrite(message, &catalog, visible.as_deref());
                        }
                        if advertise {
                            native::advertise(message);
                        }
                    }
                    Ok(reply)
                })
            }
            Method::ToolsCall => {
                if self.state.reads_results(&req) {
                    let state = self.state.clone();
                    return Box::pin(async move {
                        Ok(Some(match state.read_result(&req).await {
                            Ok(page) => Message::response_value(id, &page),
                            Err(e) => Message::error(id, e.to_error_object()),
                        }))
                    });
                }
                let Some(rewritten) = self.meta_call(&req) else {
                    let limit = self.result_budget(&req);
                    return self.limited(limit, Box::pin(inner.call(req)));
                };
                self.answer_meta(inner, req, id, rewritten)
            }
            _ => Box::pin(inner.call(req)),
        }
    }
}

impl BudgetLayer {
    /// What a meta-tool call `req` answers, as [`BudgetLayer::meta_call`] decided.
    fn answer_meta<S: Inner>(
        &self,
        mut inner: S,
        req: McpRequest,
        id: Id,
        outcome: Outcome,
    ) -> BoxFuture {
        match outcome {
            Outcome::Answer(result) => {
                let reply = Message::response_value(id, &result);
                Box::pin(async move { Ok(Some(reply)) })
            }
            // A script whose tool calls go down the stack from here.
            Outcome::Run(arguments, planned) => {
                let state = self.state.clone();
                Box::pin(async move {
                    let result = code_mode::run_code(state, inner, req, arguments, planned).await;
                    Ok(Some(Message::response_value(id, &result)))
                })
            }
            // The query is embedded off the runtime's workers.
            Outcome::Rerank(arguments, planned) => {
                let state = self.state.clone();
                Box::pin(async move {
                    let (reranker, dense) = (state.reranker.clone(), planned.dense.clone());
                    let discovery = planned.discovery.as_ref();
                    let result = rerank::search(reranker, dense, discovery, &arguments).await;
                    // A small value (a few hits): cloned for the metric's view of it.
                    let outcome = MetaCall::Result(result.clone());
                    crate::telemetry::record::search_outcome(true, &outcome);
                    state.searches.searched(&req.caller.session, &result);
                    Ok(Some(Message::response_value(id, &result)))
                })
            }
            // A schema lookup of a hidden tool: for the authorize layer to answer, never sent on.
            Outcome::Probe(params) => {
                let mut req = req.with_params(params);
                req.caller.probe = true;
                Box::pin(inner.call(req))
            }
            // The real call, with its own view, as if the client had sent it.
            Outcome::Forward(params) => {
                let mut req = req.with_params(params);
                req.caller.meta = Some(crate::telemetry::names::VIA_INVOKE_TOOL);
                let limit = self.result_budget(&req);
                self.limited(limit, Box::pin(inner.call(req)))
            }
        }
    }

    /// The result rule of tools/call `req`: `Some` when the tool has a `max_result_tokens`
    /// or a `result_format`.
    fn result_budget(&self, req: &McpRequest) -> Option<result_budget::ResultRule> {
        // Most policies set none: then nothing is looked up per call. The name is the
        // request view's (parsed once, downstream).
        if !self.state.base.budget.has_result_rules() {
            return None;
        }
        let name = req.view.typed_name()?;
        self.state.result_rule(name, &req.caller.session.id)
    }

    /// `future`, with its result shaped by `limit` when there is one.
    fn limited(&self, limit: Option<result_budget::ResultRule>, future: BoxFuture) -> BoxFuture {
        match limit {
            Some(rule) => result_budget::shape_on_return(self.state.clone(), rule, future),
            None => future,
        }
    }
}

enum Outcome {
    Answer(Value),
    Forward(Box<RawValue>),
    /// A `get_tool_schema` of a tool the caller may not see, as the direct call it names: sent
    /// down for the authorize layer to refuse, never to an upstream ([`Caller::probe`]).
    Probe(Box<RawValue>),
    /// `run_code`: its arguments, and the caller's plan its script sees the tools of.
    Run(Value, Arc<state::Planned>),
    /// `search_tools` with the semantic reranker: its arguments and the caller's plan.
    Rerank(Value, Arc<state::Planned>),
}

/// A `tools/call` of a meta-tool, as the request's view gives it.
struct MetaRequest {
    /// `null` when absent.
    arguments: Value,
    meta: Option<Value>,
}

impl MetaRequest {
    fn of(req: &McpRequest) -> Self {
        Self {
            arguments: req.view.arguments_value(&req.message),
            meta: req
                .view
                .meta(&req.message)
                .and_then(|text| serde_json::from_str::<Option<Value>>(text).ok().flatten()),
        }
    }
}

impl BudgetLayer {
    /// `Some` when the call is of a meta-tool: its answer, or the real call to forward.
    fn meta_call(&self, req: &McpRequest) -> Option<Outcome> {
        // Most calls are of real tools: their name alone says so, without building the
        // arguments as a `Value`.
        let name = req.view.typed_name()?;
        let Some(tool) = self.state.discover.names.which(name) else {
            self.state.count_call(name, &req.caller.principal);
            self.state.searches.invoked(&req.caller.session, name);
            return None;
        };
        let call = MetaRequest::of(req);
        let native = self.state.is_native(req);
        let planned = self
            .state
            .planned_for(Audience::of(&req.caller.principal, native).as_ref());
        match tool {
            MetaTool::Code => return Some(Outcome::Run(call.arguments, planned)),
            MetaTool::Invoke | MetaTool::Schema => {
                let catalog = self.state.catalog.borrow().clone();
                let (arguments, meta) = (&call.arguments, call.meta.as_ref());
                let invoke = tool == MetaTool::Invoke;
                if let Some(params) = denied::as_direct_call(req, &catalog, arguments, meta, invoke)
                {
                    return Some(if invoke {
                        Outcome::Forward(params)
                    } else {
                        Outcome::Probe(params)
                    });
                }
            }
            MetaTool::Search if self.state.reranks(&planned, &call.arguments) => {
                return Some(Outcome::Rerank(call.arguments, planned));
            }
            MetaTool::Search => {}
        }
        let discovery = planned.discovery.as_ref()?;
        let outcome = discovery.call(tool, &call.arguments)?;
        let search = tool == MetaTool::Search;
        crate::telemetry::record::search_outcome(search, &outcome);
        if let (true, MetaCall::Result(found)) = (search, &outcome) {
            self.state.searches.searched(&req.caller.session, found);
        }
        self.promote_on_use(req, discovery, tool, &call, &outcome);
        Some(self.answer(req, call, outcome))
    }

    /// `[discover] promote_on_use`: a deferred tool whose schema was read, or that was
    /// invoked, is listed for the session from now on.
    fn promote_on_use(
        &self,
        req: &McpRequest,
        discovery: &crate::discover::Discovery,
        tool: MetaTool,
        call: &MetaRequest,
        outcome: &MetaCall<'_>,
    ) {
        if !self.state.discover.promote_on_use {
            return;
        }
        let inspected = matches!(outcome, MetaCall::Result(r) if tool == MetaTool::Schema && r.get("isError").is_none());
        let used = matches!(outcome, MetaCall::Invoke { .. });
        let name = call.arguments.get("name").and_then(Value::as_str);
        let found = name.and_then(|n| discovery.find_deferred(n));
        if let (true, Some((i, _))) = (inspected || used, found) {
            if let Some(exposed) = discovery.exposed_name(i) {
                self.state
                    .promote(&req.caller.session, req.view.is_modern(), exposed);
            }
        }
    }

    /// What the layer does with a meta-tool's `outcome`: answer it, or forward the real call
    /// an `invoke_tool` names (counted under that tool).
    fn answer(&self, req: &McpRequest, call: MetaRequest, outcome: MetaCall<'_>) -> Outcome {
        match outcome {
            MetaCall::Result(result) => Outcome::Answer(result),
            MetaCall::Invoke { tool, arguments } => {
                let exposed = tool.exposed_name(&self.state.separator).into_owned();
                self.state.count_call(&exposed, &req.caller.principal);
                self.state.searches.invoked(&req.caller.session, &exposed);
                let mut params = Map::new();
                params.insert("name".into(), Value::String(exposed));
                params.insert("arguments".into(), arguments);
                if let Some(meta) = call.meta {
                    params.insert("_meta".into(), meta);
                }
                Outcome::Forward(to_raw(&Value::Object(params)))
            }
        }
    }
}

#[cfg(test)]
mod client_tests;
#[cfg(test)]
mod code_mode_tests;
#[cfg(test)]
mod native_tests;
#[cfg(test)]
mod planner_tests;
#[cfg(test)]
mod result_tests;
#[cfg(test)]
mod tests;
