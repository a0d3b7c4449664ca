//! The budget layer's plans: what each caller is listed, computed once per catalog version.
//!
//! An open gateway (no `[[client]]`) has one audience, the anonymous principal, and one plan:
//! [`State::planned`], the path every message of such a gateway takes, as before clients
//! existed. A client gets the plan of its audience ([`Audience`]): the catalog filtered by its
//! scope's list phase ([`crate::authz::Scope::visible`], names and order kept), planned for its
//! own model's profile (`[[client]] model`, else `[budget] model`), and, when it declared the
//! draft SEP's progressive disclosure, every visible tool in full for `tools/catalog` /
//! `tools/describe` ([`super::native`]). Plans are cached by [`PlanKey`] (at most
//! [`MAX_CLIENT_PLANS`]); clients of equal rights and profile share one.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::native::NativeCatalog;
use super::usage;
use crate::authz::{Scope, Target};
use crate::catalog::{Catalog, CatalogTool};
use crate::compress::Level;
use crate::context::{Caller, McpRequest, Session};
use crate::discover::Discovery;
use crate::identity::{Principal, Via};
use crate::jsonrpc::{Message, to_raw};
use crate::listing::{Listing, ServerTokens, list_some};
use crate::mcp::method::Method;
use crate::plan::{LevelChoice, ModeChoice, Plan, UsageCounts, usage_of};
use crate::policy::{BudgetPolicy, DiscoverPolicy};
use crate::tokens::Counter;

/// Most per-client plans kept at once. Audiences are few (each `[[client]]`'s scope and
/// model, with and without native disclosure), so the bound only stops a policy of very many
/// clients from holding a plan per client forever: when it is reached, plans of older
/// catalogs go first, then any one.
pub(super) const MAX_CLIENT_PLANS: usize = 64;

/// What a client's plan depends on besides the catalog: equal keys, equal bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct PlanKey {
    /// [`Scope::key`] of the client's scope.
    scope: Arc<str>,
    /// The client's own model, if it has one.
    model: Option<String>,
    /// Planned for native progressive disclosure (every visible tool, in full).
    native: bool,
}

/// Who a list is for: a plan key and the scope behind it.
#[derive(Debug)]
pub(super) struct Audience<'a> {
    key: PlanKey,
    scope: &'a Scope,
}

impl<'a> Audience<'a> {
    /// The audience of `principal`, or `None` for the whole catalog (the anonymous principal
    /// of an open gateway, without native disclosure): that one plan is as cheap as before.
    pub(super) fn of(principal: &'a Principal, native: bool) -> Option<Self> {
        if principal.via() == Via::Anonymous && !native {
            return None;
        }
        let client = principal.client();
        Some(Self {
            key: PlanKey {
                scope: client.scope().key().clone(),
                model: client.model().map(str::to_owned),
                native,
            },
            scope: client.scope(),
        })
    }

    /// The audience of `[[client]]` `spec` (as listed without native disclosure).
    pub(super) fn of_spec(spec: &'a crate::policy::client::ClientSpec) -> Self {
        Self {
            key: PlanKey {
                scope: spec.scope.key().clone(),
                model: spec.model.clone(),
                native: false,
            },
            scope: &spec.scope,
        }
    }
}

/// One plan and what is derived from it.
pub(super) struct Planned {
    pub(super) version: u64,
    /// Generation of the usage counts it was planned with (0 without a usage file).
    pub(super) usage_generation: u64,
    pub(super) per_server: Vec<ServerTokens>,
    pub(super) plan: Plan,
    pub(super) tools: usize,
    /// The listed tools (for sessions with promoted tools).
    pub(super) listed: Vec<Value>,
    /// The whole `tools/list` result, serialized once.
    pub(super) result: Box<RawValue>,
    /// Equal fingerprints, equal `result` bytes.
    pub(super) fingerprint: u64,
    pub(super) discovery: Option<Discovery>,
    /// Every tool the audience may see, for `run_code` scripts (`tools.search`, `schema`,
    /// `describe` and name resolution); `None` without code mode.
    pub(super) code: Option<Discovery>,
    /// `tools/catalog` and `tools/describe`, for a native-disclosure audience.
    pub(super) native: Option<NativeCatalog>,
    /// The texts of `discovery`'s tools for the semantic reranker (and, once embedded, their
    /// vectors); `None` without `[discover] embedding_model`.
    #[cfg_attr(not(feature = "semantic"), allow(dead_code))]
    pub(super) dense: Option<Arc<super::rerank::Texts>>,
}

/// An audience's plan of one catalog version and usage generation, computed once.
pub(super) struct Slot {
    version: u64,
    generation: u64,
    plan: OnceLock<Arc<Planned>>,
}

/// A model's `[budget]` and its counter.
pub(super) struct Profiled {
    pub(super) budget: BudgetPolicy,
    pub(super) counter: Counter,
}

/// A client session that listed tools, for `list_changed`: what it was given.
pub(super) struct Listener {
    pub(super) session: Weak<Session>,
    pub(super) principal: Arc<Principal>,
    pub(super) native: bool,
    /// Fingerprint of the list it last received.
    pub(super) fingerprint: u64,
}

/// A session (while it lives) and the tools it promoted.
pub(super) type Promoted = (Weak<Session>, Vec<String>);

pub(super) struct State {
    pub(super) catalog: watch::Receiver<Arc<Catalog>>,
    /// `[budget]` and the counter of its model (the anonymous principal's, and every client's
    /// without a model of its own).
    pub(super) base: Arc<Profiled>,
    pub(super) discover: DiscoverPolicy,
    /// The policy's, for tools outside the catalog (the catalog's own carry their names).
    pub(super) separator: String,
    /// No `[[client]]`: everyone is the anonymous principal, and `list_changed` goes to
    /// every session at once.
    pub(super) open: bool,
    pub(super) current: Mutex<Option<Arc<Planned>>>,
    pub(super) clients: Mutex<HashMap<PlanKey, Arc<Slot>>>,
    /// Model → its profile (clients with a `model` of their own).
    pub(super) profiles: Mutex<HashMap<String, Arc<Profiled>>>,
    /// Per session: exposed names of deferred tools it inspected or used, in that order
    /// (`[discover] promote_on_use`).
    /// Session id → (the session, while it lives; the tools it promoted). Entries of sessions
    /// that ended are dropped at the next promotion.
    pub(super) promoted: Mutex<HashMap<String, Promoted>>,
    /// Session id → the client session that listed tools (2025 era; not on an open gateway).
    pub(super) listeners: Mutex<HashMap<String, Listener>>,
    /// Servers whose tools are dynamic (`volatile = true` upstreams).
    pub(super) volatile: Vec<String>,
    /// Call counts and their file (`[budget] usage_file`), handed from generation to
    /// generation while the file stays the same ([`super::BudgetLayer::succeeding`]).
    pub(super) usage: Option<Arc<usage::UsageLog>>,
    /// Time between relearns of the usage counts (`[budget] relearn_secs`).
    pub(super) relearn: std::time::Duration,
    /// The `[state]` store, where `promote_on_use` promotions go so that every replica lists
    /// them, and how long a session's promotions are kept there (`[sessions]
    /// max_lifetime_secs`).
    pub(super) store: Option<(crate::state::Store, std::time::Duration)>,
    /// Results over their `max_result_tokens`, kept or cut (for metrics).
    pub(super) results_cut: AtomicU64,
    /// Results compacted by their `result_format`.
    pub(super) results_compacted: AtomicU64,
    /// Results over their budget, kept per session for `read_result` (when a rule sets
    /// `max_result_tokens`).
    pub(super) results: Option<Arc<crate::results::ResultStore>>,
    /// The `[state]` store, where kept results go too so that every replica reads them (when
    /// results are kept).
    pub(super) shared_results: Option<crate::state::Store>,
    /// Each session's last search (for the rank of the tool it then invokes).
    pub(super) searches: crate::telemetry::rank::Searches,
    /// The policy's `[[client]]`s: each a profile of the token metrics and `/status`.
    pub(super) policy_clients: Vec<crate::policy::client::ClientSpec>,
    /// `run_code` runs at once (`[discover] code_mode_max_runs` permits).
    pub(super) code_runs: Arc<tokio::sync::Semaphore>,
    /// The semantic reranker of `search_tools` (`[discover] embedding_model`).
    #[cfg_attr(not(feature = "semantic"), allow(dead_code))]
    pub(super) reranker: Option<Arc<super::rerank::Reranker>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("model", &self.base.budget.model)
            .finish_non_exhaustive()
    }
}

impl State {
    /// Whether `req` is from a client served natively: the policy enables it and the client
    /// declared it (a modern request in its own `_meta`, a 2025-era one at `initialize`).
    /// Costs nothing while the policy leaves it off.
    pub(super) fn is_native(&self, req: &McpRequest) -> bool {
        if !self.discover.native_disclosure {
            return false;
        }
        if let Some(meta) = req.view.request_meta() {
            return super::native::declares(&meta.client_capabilities);
        }
        req.caller
            .session
            .with_state(|s| super::native::declares(&s.client_capabilities))
    }

    /// Whether a `search_tools` call with `arguments` on `planned` is to be reranked
    /// ([`super::rerank::applies`]).
    pub(super) fn reranks(&self, planned: &Planned, arguments: &Value) -> bool {
        super::rerank::applies(self.reranker.as_ref(), planned.dense.as_ref(), arguments)
    }

    /// Whether handshake results are rewritten (`host_search` instructions, the native
    /// capability).
    pub(super) fn rewrites_handshake(&self) -> bool {
        self.base.budget.mode == ModeChoice::HostSearch || self.discover.native_disclosure
    }
}

pub(super) use crate::lock::lock;

fn fingerprint_of(result: &RawValue) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    result.get().hash(&mut hasher);
    hasher.finish()
}

impl State {
    /// Equal fingerprints, equal `tools/list` bytes (for sessions without promoted tools).
    pub(super) fn fingerprint(&self) -> u64 {
        self.planned().fingerprint
    }

    /// The plan for the current catalog, computed at most once per catalog version.
    pub(super) fn planned(&self) -> Arc<Planned> {
        let catalog = self.catalog.borrow().clone();
        let version = catalog.version();
        let learned = self.usage.as_deref().map(usage::UsageLog::learned);
        let generation = learned.as_ref().map_or(0, |l| l.generation);
        // Held while planning: concurrent lists of a new catalog wait for one computation.
        let mut current = lock(&self.current);
        if let Some(p) = current
            .as_ref()
            .filter(|p| p.version == version && p.usage_generation == generation)
        {
            return p.clone();
        }
        let counts = learned.as_ref().map(|l| &*l.counts);
        let mut planned = self.compute(catalog.tools(), &catalog, &self.base, counts, false);
        planned.usage_generation = generation;
        let planned = Arc::new(planned);
        *current = Some(planned.clone());
        planned
    }

    /// The plan of `audience` (the whole catalog's for `None`).
    pub(super) fn planned_for(&self, audience: Option<&Audience<'_>>) -> Arc<Planned> {
        let Some(audience) = audience else {
            return self.planned();
        };
        let catalog = self.catalog.borrow().clone();
        let version = catalog.version();
        let learned = self.usage.as_deref().map(usage::UsageLog::learned);
        let generation = learned.as_ref().map_or(0, |l| l.generation);
        // The map is held only to find or make the audience's slot; the plan is computed in
        // the slot, so one audience's new plan never holds up another's list.
        let slot = {
            let fresh = |s: &Arc<Slot>| s.version == version && s.generation == generation;
            let mut clients = lock(&self.clients);
            match clients.get(&audience.key).filter(|s| fresh(s)) {
                Some(slot) => slot.clone(),
                None => {
                    if clients.len() >= MAX_CLIENT_PLANS {
                        clients.retain(|_, s| fresh(s));
                    }
                    if clients.len() >= MAX_CLIENT_PLANS {
                        if let Some(any) = clients.keys().next().cloned() {
                            clients.remove(&any);
                        }
                    }
                    let slot = Arc::new(Slot {
                        version,
                        generation,
                        plan: OnceLock::new(),
                    });
                    clients.insert(audience.key.clone(), slot.clone());
                    slot
                }
            }
        };
        // Concurrent lists of the same audience wait for one computation.
        slot.plan
            .get_or_init(|| {
                let visible = audience.scope.visible(catalog.tools());
                let profile = self.profile(audience.key.model.as_deref());
                let mut planned = self.compute(
                    &visible,
                    &catalog,
                    &profile,
                    learned.as_ref().map(|l| &*l.counts),
                    audience.key.native,
                );
                planned.usage_generation = generation;
                Arc::new(planned)
            })
            .clone()
    }

    /// The profile of `model` (the policy's own for `None`, and for a model that has no
    /// profile, which `check` refuses).
    fn profile(&self, model: Option<&str>) -> Arc<Profiled> {
        let Some(model) = model.filter(|m| *m != self.base.budget.model) else {
            return self.base.clone();
        };
        let mut profiles = lock(&self.profiles);
        if let Some(p) = profiles.get(model) {
            return p.clone();
        }
        let profiled = match self.base.budget.with_model(model) {
            Ok(budget) => Arc::new(Profiled {
                counter: Counter::new(&budget.profile),
                budget,
            }),
            Err(e) => {
                tracing::warn!(model, error = %e, "Client model has no profile; planning with [budget] model");
                self.base.clone()
            }
        };
        profiles.insert(model.to_owned(), profiled.clone());
        profiled
    }

    /// The plan of `tools` (all of `catalog`'s, or those a client may see) under `profile`.
    fn compute(
        &self,
        tools: &[CatalogTool],
        catalog: &Catalog,
        profile: &Profiled,
        counts: Option<&UsageCounts>,
        native: bool,
    ) -> Planned {
        let separator = catalog.separator();
        let mut rules = profile.budget.rules(tools, separator, &self.discover);
        rules.usage = counts.map(|c| usage_of(tools, c)).unwrap_or_default();
        if native {
            // The host keeps the catalog and describes tools itself: every tool, in full.
            rules.mode = ModeChoice::Full;
            rules.level = LevelChoice::Fixed(Level::Off);
        }
        let listing = list_some(tools, separator, &rules, &profile.counter, &self.volatile);
        let deferred = listing.deferred_of(tools);
        let shown = listing.listed_of(tools);
        let Listing {
            mut plan,
            per_server,
            tools: mut listed,
            mut result,
            ..
        } = listing;
        let code_tool = self.discover.names.code.as_deref().filter(|_| native);
        if let Some(code) = code_tool {
            listed = self.with_code_tool(listed, code, catalog);
            result = to_raw(&json!({ "tools": listed }));
            // Planned without it (the plan lists no meta-tools here): what the client is sent
            // includes it, so the plan must count it too.
            let definition = crate::codemode::definition(code);
            let tokens = definition
                .as_object()
                .map_or(0, |d| profile.counter.count_tool(code, d));
            plan.count_added(tokens, rules.mode != ModeChoice::HostSearch);
        }
        if self.results.is_some() && !native {
            // `read_result`, listed last whatever the mode: a result over its budget names it.
            let definition = crate::results::read_definition(crate::results::READ_RESULT);
            let tokens = (definition.as_object()).map_or(0, |d| {
                profile.counter.count_tool(crate::results::READ_RESULT, d)
            });
            listed.push(crate::canonical::into_canonical_tool(definition));
            result = to_raw(&json!({ "tools": listed }));
            plan.count_added(tokens, rules.mode != ModeChoice::HostSearch);
        }
        let native = native.then(|| NativeCatalog::new(tools, separator, &listed, code_tool));
        let listed = if self.discover.promote_on_use {
            listed
        } else {
            Vec::new()
        };
        let discovery = (plan.meta_tools && !deferred.is_empty()).then(|| {
            self.discovery(deferred, separator, counts)
                .with_listed(shown, separator)
        });
        let code = (self.discover.code_mode.as_ref())
            .map(|_| self.discovery(tools.to_vec(), separator, counts));
        log_planned(&plan, profile, tools.len(), catalog);
        let dense = super::rerank::prepare(self.reranker.as_ref(), discovery.as_ref());
        Planned {
            version: catalog.version(),
            usage_generation: 0,
            per_server,
            tools: tools.len(),
            listed,
            plan,
            fingerprint: fingerprint_of(&result),
            result,
            discovery,
            code,
            native,
            dense,
        }
    }

    /// `listed` with the code-mode tool `code`, for a host that keeps the catalog.
    fn with_code_tool(&self, listed: Vec<Value>, code: &str, catalog: &Catalog) -> Vec<Value> {
        super::native::with_code_tool(listed, code, |name| {
            catalog
                .tool(name)
                .and_then(|(i, _)| catalog.names().get(i))
                .is_some_and(|server| self.volatile.contains(server))
        })
    }

    /// The search over `tools` (the deferred ones, or every one for code mode), with the usage
    /// prior when calls were counted.
    fn discovery(
        &self,
        tools: Vec<CatalogTool>,
        separator: &str,
        counts: Option<&UsageCounts>,
    ) -> Discovery {
        let usage = counts.map(|c| usage_of(&tools, c)).unwrap_or_default();
        let discovery =
            Discovery::new(tools, separator, &self.discover.names, self.discover.limits)
                .with_usage(&usage, self.discover.usage_prior);
        match &self.discover.vocabulary {
            Some(vocabulary) => discovery.with_vocabulary(vocabulary),
            None => discovery,
        }
    }

    /// Whether `req` (a `tools/call`) calls `read_result`, served while results are kept.
    pub(super) fn reads_results(&self, req: &McpRequest) -> bool {
        self.results.is_some() && req.view.typed_name() == Some(crate::results::READ_RESULT)
    }

    /// Counts a call of the tool exposed as `exposed` by `principal` (with a usage file;
    /// unknown names, and tools the principal may not see, whose calls are refused below, are
    /// not counted: a client cannot move other clients' plans with calls it may not make).
    pub(super) fn count_call(&self, exposed: &str, principal: &Principal) {
        let Some(usage) = &self.usage else { return };
        let catalog = self.catalog.borrow();
        if let Some((i, tool)) = catalog.tool(exposed) {
            if let Some(server) = catalog.names().get(i) {
                let anonymous = principal.via() == Via::Anonymous;
                if anonymous
                    || principal
                        .client()
                        .scope()
                        .may_see(Target::tool(server, tool))
                {
                    usage.record(server, tool);
                }
            }
        }
    }

    /// Writes the usage file when something was counted since the last write.
    pub(super) async fn flush_usage(&self) {
        if let Some((path, text)) = self
            .usage
            .as_deref()
            .and_then(usage::UsageLog::pending_write)
        {
            let _ = tokio::task::spawn_blocking(move || usage::write_usage(&path, &text)).await;
        }
    }

    /// Makes the counts so far what the plan uses (the next list is planned with them), and
    /// writes them. With a store, the counts every replica plans with: when to relearn next
    /// (the next epoch), or `None` when the store did not answer (try again soon).
    pub(super) async fn relearn_usage(&self) -> Option<std::time::Duration> {
        let mut next = Some(self.relearn);
        if let Some(usage) = &self.usage {
            let relearned = if usage.is_shared() {
                match usage.relearn_shared().await {
                    Ok((changed, next_in)) => {
                        next = Some(next_in);
                        changed
                    }
                    Err(reason) => {
                        tracing::debug!(
                            reason,
                            "Usage counts not relearned: the store did not answer"
                        );
                        next = None;
                        false
                    }
                }
            } else {
                usage.relearn()
            };
            if relearned {
                tracing::info!("Usage counts relearned; the tool list is planned again");
            }
        }
        self.flush_usage().await;
        next
    }

    /// The `tools/list` result for `caller` (native disclosure or not): its audience's list,
    /// then the tools its session promoted (appended, so the static prefix keeps its bytes).
    /// A client's 2025-era session is remembered, so that it hears when its own list changes.
    pub(super) fn list_for(&self, caller: &Caller, native: bool, modern: bool) -> Box<RawValue> {
        let audience = Audience::of(&caller.principal, native);
        let planned = self.planned_for(audience.as_ref());
        crate::telemetry::span::record_plan(&planned.plan.rung, planned.plan.tokens_after);
        if audience.is_some() && !modern && !self.open {
            self.listen(caller, native, planned.fingerprint);
        }
        let session = &caller.session.id;
        let promoted = lock(&self.promoted)
            .get(session)
            .map(|(_, names)| names.clone())
            .unwrap_or_default();
        let Some(discovery) = planned.discovery.as_ref().filter(|_| !promoted.is_empty()) else {
            return planned.result.clone();
        };
        let mut tools = planned.listed.clone();
        for name in &promoted {
            if let Some((i, tool)) = discovery.find(name) {
                let mut def = (*tool.definition).clone();
                if let Some(exposed) = discovery.exposed_name(i) {
                    def.insert("name".into(), Value::String(exposed.to_owned()));
                }
                tools.push(crate::canonical::into_canonical_tool(Value::Object(def)));
            }
        }
        to_raw(&json!({ "tools": tools }))
    }

    /// Remembers that `caller`'s session was listed the bytes of `fingerprint`.
    fn listen(&self, caller: &Caller, native: bool, fingerprint: u64) {
        let mut listeners = lock(&self.listeners);
        if let Some(l) = listeners.get_mut(&caller.session.id) {
            if l.fingerprint == fingerprint
                && l.native == native
                && Arc::ptr_eq(&l.principal, &caller.principal)
            {
                return;
            }
        }
        listeners.retain(|_, l| l.session.strong_count() > 0);
        listeners.insert(
            caller.session.id.clone(),
            Listener {
                session: Arc::downgrade(&caller.session),
                principal: caller.principal.clone(),
                native,
                fingerprint,
            },
        );
    }

    /// Promotes a deferred tool for a session and tells the session its list changed. Not for
    /// a 2026-07-28 request, whose session ends with it (the next list is another session's).
    pub(super) fn promote(&self, session: &Arc<Session>, modern: bool, exposed: &str) {
        if modern {
            return;
        }
        let mut promoted = lock(&self.promoted);
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
            Method::ToolsListChanged.as_str(),
            None,
        ));
        // Every replica lists it for the session from now on (and the one holding the
        // session's stream tells it).
        if let Some((store, ttl)) = self.store.clone() {
            let (sid, name) = (session.id.clone(), exposed.to_owned());
            tokio::spawn(async move {
                if let Err(reason) = store.promote(&sid, &name, ttl).await {
                    tracing::debug!(reason, session = %sid, "Promotion not shared: the store did not take it");
                }
            });
        }
    }

    /// Whether a `tools/list` of `caller` reads the session's promotions from the store first
    /// (`promote_on_use` on a replica of a deployment, a 2025-era session).
    pub(super) fn shares_promotions(&self, modern: bool) -> bool {
        self.discover.promote_on_use && self.store.is_some() && !modern
    }

    /// Makes the tools `session` promoted on any replica (`shared`, in promotion order) its
    /// promotions here too, in that order (what only this replica knows yet, after them): so
    /// every replica lists the same bytes for the session.
    pub(super) fn adopt_promoted(&self, session: &Arc<Session>, shared: Vec<String>) {
        if shared.is_empty() {
            return;
        }
        let mut promoted = lock(&self.promoted);
        let (_, list) = promoted
            .entry(session.id.clone())
            .or_insert_with(|| (Arc::downgrade(session), Vec::new()));
        let local: Vec<String> = list.drain(..).filter(|n| !shared.contains(n)).collect();
        list.extend(shared);
        list.extend(local);
    }
}

/// Says what was planned: the rung, the tools exposed of those planned, and their tokens.
fn log_planned(plan: &Plan, profile: &Profiled, tools: usize, catalog: &Catalog) {
    tracing::info!(
        rung = %plan.rung,
        model = %profile.budget.model,
        tools,
        catalog_tools = catalog.tools().len(),
        exposed = plan.exposed_count(),
        tokens_before = plan.tokens_before,
        tokens_after = plan.tokens_after,
        budget = plan.budget.tokens,
        "Tool list planned"
    );
}
