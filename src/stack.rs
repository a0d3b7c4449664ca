//! The one place that orders the layers.
//!
//! Outermost first:
//! - `recover` answers every request exactly once even when something below panics, so it
//!   wraps everything;
//! - `trace` opens the span the rest logs into;
//! - `era` applies the 2026-07-28 rules to modern requests, around everything that answers;
//! - `resolve` turns a `tools/call` of a near name (`get_issue` for `github__get_issue`) into a
//!   call of the tool it means, above everything that reads the name;
//! - `budget` (with `[budget] enabled`) answers `tools/list` from its plan and serves the
//!   meta-tools; an `invoke_tool` goes on down as the `tools/call` it names;
//! - `trace` again, inner (with the budget): the calls an `invoke_tool` or a `run_code`
//!   script makes, spanned and counted under their real server and tool;
//! - `authorize` checks each call against the caller's scope, below the budget so an
//!   `invoke_tool` is checked as the call it becomes, above everything a denied call must not
//!   reach;
//! - `arguments` (with strict arguments) refuses a call whose arguments do not match the
//!   tool's schema, below authorization (a denied call is denied first) and above the limits
//!   (a refused call spends no quota);
//! - `limit` (with `[limits]`) spends the caller's rate and concurrency allowance;
//! - `guard` refuses quarantined tools and prompts and sanitizes every result;
//! - the [`Gateway`] aggregates the upstreams at the bottom and publishes the catalog the
//!   layers read.
//!
//! Each step in [`build_succeeding`] says why it sits where it does.
//!
//! Every message comes with the [`RequestView`](crate::context::RequestView) its downstream
//! read once; the layers read that, not the params.
//!
//! ```no_run
//! # async fn run(policy: mcp_budget::policy::Policy) {
//! use mcp_budget::stack::{self, Gateway};
//! let announce = stack::announce(&policy);
//! let gateway = Gateway::start(policy, announce, tokio_util::sync::CancellationToken::new());
//! let service = stack::build(gateway);
//! # let _ = service;
//! # }
//! ```

use std::convert::Infallible;

use tokio::sync::{mpsc, watch};
use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;

use crate::context::McpRequest;
pub use crate::gateway::Announce;
/// The gateway at the bottom of the stack: it aggregates the upstreams and publishes the
/// catalog the layers read.
pub use crate::gateway::Gateway;
use crate::jsonrpc::Message;
use crate::layer::Inner;
use crate::layer::arguments::ArgumentsLayer;
use crate::layer::authorize::AuthorizeLayer;
use crate::layer::guard::GuardLayer;
use crate::layer::limit::LimitLayer;
use crate::layer::{budget::BudgetLayer, era::EraLayer, recover::RecoverLayer, trace::TraceLayer};

/// Whether what a list shows depends on who asks: then modern list results say
/// `cacheScope: private`, so no shared cache hands one caller's list to another.
fn lists_are_private(policy: &crate::policy::Policy) -> bool {
    let budget = &policy.budget;
    let per_session = policy.discover.promote_on_use || policy.discover.native_disclosure;
    (budget.enabled && per_session) || !policy.clients.is_empty()
}

/// Who announces list changes under `policy`: with the budget on, its layer announces the
/// tools (hosts see its plan, in a canonical order); else the gateway. What
/// [`Gateway::start`] and [`Gateway::reconcile`] take, so that the gateway never reads the
/// budget layer's policy.
#[must_use]
pub fn announce(policy: &crate::policy::Policy) -> Announce {
    if policy.budget.enabled {
        Announce::ByLayer
    } else {
        Announce::ByGateway
    }
}

/// The gateway's message service, as the downstream transports use it.
pub type McpService = BoxCloneSyncService<McpRequest, Option<Message>, Infallible>;

/// Builds the full stack over `gateway`, with the budget layer when the policy enables it.
///
/// # Panics
/// Outside a Tokio runtime: the budget layer starts its `list_changed` task (as
/// [`Gateway::start`] starts its own).
#[must_use]
pub fn build(gateway: Gateway) -> McpService {
    build_with_budget(gateway).0
}

/// [`build`], also returning the budget layer (for its plan summary) when it is in the stack.
///
/// # Panics
/// Outside a Tokio runtime, as [`build`].
#[must_use]
pub fn build_with_budget(gateway: Gateway) -> (McpService, Option<BudgetLayer>) {
    let broadcasts = gateway.broadcasts();
    build_announcing(gateway, broadcasts)
}

/// [`build_with_budget`], with the budget layer's `list_changed` sent to `announce` (a reload
/// relays them only while this stack is the current one, see [`crate::reload::Reloader`]).
///
/// # Panics
/// Outside a Tokio runtime, as [`build`].
#[must_use]
pub fn build_announcing(
    gateway: Gateway,
    announce: mpsc::UnboundedSender<Message>,
) -> (McpService, Option<BudgetLayer>) {
    build_succeeding(gateway, announce, None)
}

/// [`build_announcing`] for a reload: the new budget layer succeeds `previous`, the budget
/// layer of the stack it replaces ([`BudgetLayer::succeeding`]: the usage counts go on).
///
/// # Panics
/// Outside a Tokio runtime, as [`build`].
#[must_use]
pub fn build_succeeding(
    gateway: Gateway,
    announce: mpsc::UnboundedSender<Message>,
    previous: Option<&BudgetLayer>,
) -> (McpService, Option<BudgetLayer>) {
    let policy = gateway.policy();
    let budget = policy.budget.enabled.then(|| {
        let layer = BudgetLayer::sharing(
            gateway.catalog(),
            &policy,
            previous,
            gateway.state().as_ref(),
        );
        // Hosts see the plan's list: the layer announces list_changed when its bytes change.
        layer.announce_to(announce);
        layer
    });
    let parts = Parts {
        policy,
        catalog: gateway.catalog(),
        audit: gateway.audit(),
        state: gateway.state(),
    };
    (layered(&parts, budget.as_ref(), gateway), budget)
}

/// What the layers read besides the messages: the policy, the published catalog, the audit
/// log and the `[state]` store. The gateway has them; the embedded stack
/// ([`crate::embed`]) makes its own.
pub(crate) struct Parts {
    pub(crate) policy: std::sync::Arc<crate::policy::Policy>,
    pub(crate) catalog: watch::Receiver<std::sync::Arc<crate::catalog::Catalog>>,
    pub(crate) audit: crate::audit::Audit,
    pub(crate) state: Option<crate::state::Store>,
}

/// The layers over `inner` (the gateway, or an embedder's service), outermost first, with
/// `budget` when the policy enables it: the one place that orders them.
pub(crate) fn layered<S>(parts: &Parts, budget: Option<&BudgetLayer>, inner: S) -> McpService
where
    S: Inner + Sync,
{
    let Parts {
        policy,
        catalog,
        audit,
        state,
    } = parts;
    let service = ServiceBuilder::new()
        // Outermost: whatever fails below, each request id gets exactly one answer.
        .layer(RecoverLayer)
        // Then a span per message, so every layer below logs with session, method and id.
        .layer(TraceLayer::new(catalog.clone()).with_meta_tools(meta_tools(policy)))
        // Modern (2026-07-28) requests: version check and result fields around everything
        // that answers, the budget's lists included. Lists are private (not for shared
        // caches) when they depend on the caller: promoted tools, native disclosure, clients.
        .layer(EraLayer::new(lists_are_private(policy)))
        // A tools/call of a name no upstream lists but one tool's near name becomes a call of
        // that tool here, above everything that reads the name: the budget counts it and cuts
        // its result, authorization decides on the tool it reaches (never on the spelling).
        .layer(crate::layer::resolve::ResolveLayer::new(
            catalog.clone(),
            policy.resolve_names,
        ))
        // The budget answers tools/list from its plan and serves the meta-tools; an
        // invoke_tool goes on down as an ordinary tools/call, so it sits above everything
        // that must see real calls (authorization, isolation: later layers go below it).
        .option_layer(budget.cloned())
        // What an invoke_tool or a run_code script calls is counted, logged and spanned
        // under its real server and tool (above, the meta-tool call is, as the gateway's).
        .option_layer(budget.is_some().then(|| TraceLayer::inner_calls(catalog.clone())))
        // Below the budget, so an invoke_tool is authorized as the tools/call it becomes and
        // the budget plans lists over what the client may see; above the limits (a denied
        // call spends none of the client's quota), the guard and the gateway, so a denied
        // call reaches nothing.
        .layer(AuthorizeLayer::new(
            catalog.clone(),
            audit.clone(),
            !policy.budget.enabled,
        ))
        // `[sanitize] arguments = "strict"`: below the budget and authorization, so an
        // invoke_tool and run_code's calls are checked as direct calls, and a denied call is
        // denied first; above the limits, so a refused call spends no quota. Left out when no
        // upstream is strict.
        .option_layer({
            let layer =
                ArgumentsLayer::new(catalog.clone(), &policy.sanitize).with_audit(audit.clone());
            layer.checks_any().then_some(layer)
        })
        // Below the budget, so an invoke_tool is counted as the call it is; keyed by the
        // caller's principal; its rates in the [state] store, shared by replicas, when there
        // is one. Left out without [limits].
        .option_layer(policy.limits.is_limited().then(|| {
            LimitLayer::sharing(policy.limits.clone(), catalog.clone(), state.clone())
        }))
        // Below the budget, so an invoke_tool (a tools/call by then) of a quarantined tool
        // is refused as a direct call is; above the gateway, so every result a model reads
        // is sanitized whoever asked for it.
        .layer(
            GuardLayer::new(catalog.clone(), policy.sanitize.global.strip).with_audit(audit.clone()),
        )
        .service(inner);
    BoxCloneSyncService::new(service)
}

/// The names of the meta-tools the policy serves (search, schema, invoke, and `run_code` when
/// code mode is on).
fn meta_tools(policy: &crate::policy::Policy) -> Vec<String> {
    policy.discover.names.served().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::lists_are_private;
    use crate::policy::Policy;

    #[test]
    fn lists_that_depend_on_the_caller_are_private() {
        let mut policy = Policy::default();
        assert!(!lists_are_private(&policy), "one list for everyone");
        policy.discover.native_disclosure = true;
        assert!(lists_are_private(&policy));
        policy.discover.native_disclosure = false;
        policy.clients.push(crate::policy::client::ClientSpec {
            name: "alice".into(),
            scope: crate::authz::Scope::everything(),
            model: None,
            key: None,
            token_scopes: Vec::new(),
        });
        assert!(lists_are_private(&policy), "each client its own list");
    }
}
