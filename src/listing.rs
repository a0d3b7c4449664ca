//! The `tools/list` result a host receives, as one pure function of the catalog and the rules.
//!
//! [`list_tools`] is what the budget layer answers `serve`'s `tools/list` with, and what
//! `render` and `inspect` print, so offline output is what a host would receive: the catalog in
//! canonical order ([`Catalog::tools`]), measured, planned ([`crate::plan`]) and applied, with
//! the tools of volatile upstreams after the static prefix. With the budget off, hosts get
//! [`pass_through`]: every tool as its upstream listed it, under its exposed name.
//!
//! ```
//! use mcp_budget::catalog::{Catalog, CatalogTool};
//! use mcp_budget::listing::list_tools;
//! use mcp_budget::policy::Policy;
//! use mcp_budget::tokens::Counter;
//! use serde_json::json;
//!
//! let tool = CatalogTool::new("time", json!({"name": "now", "inputSchema": {"type": "object"}}))?;
//! let catalog = Catalog::from_tools(vec![tool], "__");
//! let policy = Policy::default();
//! let rules = policy.budget.rules(catalog.tools(), catalog.separator(), &policy.discover);
//! let listing = list_tools(&catalog, &rules, &Counter::new(&policy.budget.profile), &[]);
//! assert!(listing.result.get().contains(r#""name":"time__now""#));
//! # Ok::<(), mcp_budget::catalog::CatalogError>(())
//! ```

use std::collections::HashSet;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::catalog::{Catalog, CatalogTool};
use crate::jsonrpc::to_raw;
use crate::plan::{self, Plan, Rules};
use crate::tokens::{Counter, Measured};

/// One server's share of the plan: its tools listed in full before, and what stays listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerTokens {
    /// Server id.
    pub server: String,
    /// Its tools.
    pub tools: usize,
    /// Of them, listed directly.
    pub exposed: usize,
    /// Tokens of its tools listed uncompressed.
    pub before: usize,
    /// Tokens of its tools as listed by the plan (deferred tools cost their share of the
    /// meta-tools, counted in the total only).
    pub after: usize,
}

/// A planned `tools/list`.
#[derive(Debug)]
pub struct Listing {
    /// What each tool costs (in catalog order).
    pub measured: Measured,
    /// The plan.
    pub plan: Plan,
    /// Per server, in listing order.
    pub per_server: Vec<ServerTokens>,
    /// The listed tools (and meta-tools), in listing order.
    pub tools: Vec<Value>,
    /// The whole `tools/list` result, `{"tools": [...]}`, serialized once.
    pub result: Box<RawValue>,
}

impl Listing {
    /// The tools of `catalog` the plan deferred (behind the meta-tools), in catalog order.
    #[must_use]
    pub fn deferred(&self, catalog: &Catalog) -> Vec<CatalogTool> {
        self.deferred_of(catalog.tools())
    }

    /// The tools of `tools` (the ones it was planned for) the plan deferred, in their order.
    #[must_use]
    pub fn deferred_of(&self, tools: &[CatalogTool]) -> Vec<CatalogTool> {
        self.planned_as(tools, false)
    }

    /// The tools of `tools` (the ones it was planned for) the plan lists directly, in their
    /// order.
    #[must_use]
    pub fn listed_of(&self, tools: &[CatalogTool]) -> Vec<CatalogTool> {
        self.planned_as(tools, true)
    }

    /// The tools of `tools` the plan lists (`listed`) or defers, in their order.
    fn planned_as(&self, tools: &[CatalogTool], listed: bool) -> Vec<CatalogTool> {
        tools
            .iter()
            .zip(&self.plan.levels)
            .filter(|(_, level)| level.is_some() == listed)
            .map(|(tool, _)| tool.clone())
            .collect()
    }
}

/// The `tools/list` of `catalog` under `rules` (built for `catalog.tools()`), counted with
/// `counter`; the tools of servers in `volatile` come after the static prefix, so that a change
/// among dynamic tools never touches the bytes before them.
#[must_use]
pub fn list_tools(
    catalog: &Catalog,
    rules: &Rules,
    counter: &Counter,
    volatile: &[String],
) -> Listing {
    list_some(
        catalog.tools(),
        catalog.separator(),
        rules,
        counter,
        volatile,
    )
}

/// [`list_tools`] of some of a catalog's tools (in catalog order, say the ones a client may see:
/// [`crate::authz::Scope::visible`]), under `rules` built for them. Each keeps the exposed name
/// its catalog gave it; `separator` names tools outside a catalog.
#[must_use]
pub fn list_some(
    tools: &[CatalogTool],
    separator: &str,
    rules: &Rules,
    counter: &Counter,
    volatile: &[String],
) -> Listing {
    // Ranked once: the measurement and the plan share the value order.
    let (measured, ranked) = plan::measure_ranked(counter, tools, rules);
    let plan = plan::plan_ranked(tools, &measured, ranked.as_ref(), rules);
    let per_server = per_server(tools, &measured, &plan);
    let listed =
        static_before_dynamic(tools, separator, volatile, plan::apply(&plan, tools, rules));
    let result = to_raw(&json!({ "tools": listed }));
    Listing {
        measured,
        plan,
        per_server,
        tools: listed,
        result,
    }
}

/// The `tools/list` result with the budget off: every tool as its upstream listed it, under
/// its exposed name, in upstream order.
#[must_use]
pub fn pass_through(catalog: &Catalog) -> Box<RawValue> {
    to_raw(&json!({ "tools": catalog.listed_tools() }))
}

fn per_server(tools: &[CatalogTool], measured: &Measured, plan: &Plan) -> Vec<ServerTokens> {
    let mut per_server: Vec<ServerTokens> = Vec::new();
    for ((tool, counts), level) in tools.iter().zip(&measured.tools).zip(&plan.levels) {
        if per_server.last().is_none_or(|s| s.server != tool.server) {
            per_server.push(ServerTokens {
                server: tool.server.clone(),
                ..ServerTokens::default()
            });
        }
        if let Some(entry) = per_server.last_mut() {
            entry.tools += 1;
            entry.before += counts.direct[0];
            if let Some(level) = level {
                entry.exposed += 1;
                entry.after += counts.direct[level.index()];
            }
        }
    }
    per_server
}

/// Static tools (and the meta-tools) first, then the tools of volatile upstreams.
fn static_before_dynamic(
    catalog: &[CatalogTool],
    separator: &str,
    volatile: &[String],
    tools: Vec<Value>,
) -> Vec<Value> {
    if volatile.is_empty() {
        return tools;
    }
    let dynamic: HashSet<String> = catalog
        .iter()
        .filter(|t| volatile.contains(&t.server))
        .map(|t| t.exposed_name(separator).into_owned())
        .collect();
    let (dynamic_tools, mut out): (Vec<Value>, Vec<Value>) = tools.into_iter().partition(|t| {
        t.get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| dynamic.contains(n))
    });
    out.extend(dynamic_tools);
    out
}
