//! The planner: catalog + counts + rules → the least lossy exposure that fits.
//!
//! The budget ([`Budget`]) is a share of the model's context window (the policy's `[budget]`,
//! default 2%) **and** the model's tool-count cap. Everything listed counts: the host's fixed
//! overhead, each tool's rendering, the meta-tools' definitions, and catalog lines of deferred
//! tools. The ladder, least lossy first:
//!
//! 1. **full**: every tool, uncompressed;
//! 2. **uniform**: every tool at one level (`low` … `extreme`), the least lossy that fits;
//! 3. **mixed**: that level, with some tools one level richer where it buys most (tools whose
//!    names look alike first, as the model must tell them apart; then the cheapest upgrades);
//! 4. **hybrid**: the most useful tools listed directly, as many as fit the tokens and the tool
//!    cap (less the meta-tools), the rest deferred behind the search meta-tools, their catalog
//!    lines listed in the search tool's description when they fit. What "most useful" means is
//!    the value model below;
//! 5. **search**: the meta-tools only (with catalog lines when they fit).
//!
//! # The value model
//!
//! The hybrid rung lists a prefix of one fixed order: pinned tools, then rounds across servers
//! (every server's best tool, then every server's second best, …), so that any prefix is a
//! max-min fair share of the listed slots over the servers' tool counts ([`fair_shares`]); a
//! server's "best" are the tools the deployment calls most ([`Rules::usage`]) when known, else
//! read-only and common operations first (`readOnlyHint`, get/list/search/read verbs),
//! destructive ones last, cheaper before dearer. The prefix stops at the first tool that does
//! not fit (it never skips one to squeeze in a later one), so more budget never lists fewer
//! tools.
//!
//! How the listed tools and the catalog lines are compressed is chosen among candidates
//! (listed level × line level): the candidate that lists the most tools wins; among equals,
//! catalog lines at a level that keeps them findable (`off` … `high`; `extreme` lines lose
//! 9–16 points of BM25 hit@5) come first, then the richest listed level, then the richest
//! lines. With `mode = "progressive"` only pinned tools are listed (the operator asked for
//! search); a fixed `level` fixes both.
//!
//! Pinned tools are never compressed; a tool's minimum level is always applied. What the
//! planner is asked for is one plain value, [`Rules`] (the policy builds it once per catalog).
//! [`measure`](fn@measure) counts what the plan needs, [`plan`] is pure and deterministic, and [`apply`]
//! turns a plan into the `tools` array a host receives.
//!
//! ```
//! use mcp_budget::catalog::load_saved;
//! use mcp_budget::plan::{apply, measure, plan, Budget, Rules};
//! use mcp_budget::profile::{resolve, ProfileOverrides};
//! use mcp_budget::tokens::Counter;
//!
//! let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets/github.json");
//! let catalog = load_saved(&[dir])?;
//! let haiku = resolve("claude-haiku-4-5", &ProfileOverrides::default())?;
//! // 2% of the context window, and the model's tool cap.
//! let rules = Rules::new(Budget { tokens: haiku.context_window / 50, tools: haiku.max_tools });
//! let measured = measure(&Counter::new(&haiku), &catalog, &rules);
//! let plan = plan(&catalog, &measured, &rules);
//! assert!(plan.fits && plan.tokens_after <= plan.budget.tokens);
//! let tools = apply(&plan, &catalog, &rules);
//! assert_eq!(tools.len(), plan.tools_after);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

use crate::catalog::CatalogTool;
use crate::compress::{self, Level};
use crate::tokens::Measured;

mod measure;
pub(crate) mod result;
mod rules;
mod usage;
mod value;

/// The hybrid rung's order (most useful first), for reports that name what it would list next.
#[cfg(feature = "cli")]
pub(crate) use value::order as value_order;

pub use measure::{Ranked, measure, measure_ranked};
pub use result::{Cut, cut_note, cut_result};
pub use rules::{
    Budget, HostDeferral, LevelChoice, ModeChoice, Rules, UnknownHostDeferral, UnknownMode,
};
pub use usage::{UsageCounts, UsageFileError, parse_usage, render_usage, usage_of};
pub use value::fair_shares;

/// Number of discovery meta-tools listed in progressive modes (one more with code mode:
/// [`MetaToolNames::count`](crate::discover::MetaToolNames::count)).
pub const META_TOOLS: usize = 3;

/// The rung of the ladder a plan stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rung {
    /// Every tool listed uncompressed (up to `min_level` rules).
    Full,
    /// Every tool at this level.
    Uniform(Level),
    /// Every tool at this level, some one level richer.
    Mixed(Level),
    /// The most useful tools listed (pinned ones first), the rest behind search.
    Hybrid,
    /// Only the meta-tools.
    Search,
}

impl Rung {
    /// `full` or `progressive`.
    #[must_use]
    pub fn mode(self) -> &'static str {
        match self {
            Self::Full | Self::Uniform(_) | Self::Mixed(_) => "full",
            Self::Hybrid | Self::Search => "progressive",
        }
    }

    /// `full`, `uniform`, `mixed`, `hybrid` or `search`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Uniform(_) => "uniform",
            Self::Mixed(_) => "mixed",
            Self::Hybrid => "hybrid",
            Self::Search => "search",
        }
    }
}

impl fmt::Display for Rung {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uniform(l) | Self::Mixed(l) => write!(f, "{}:{l}", self.name()),
            _ => f.write_str(self.name()),
        }
    }
}

/// Which tools a host sees, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The rung chosen.
    pub rung: Rung,
    /// Per catalog tool: `Some(level)` listed directly at that level, `None` deferred.
    pub levels: Vec<Option<Level>>,
    /// Level of the deferred tools' catalog lines in the search tool's description (`None`:
    /// not listed).
    pub catalog_level: Option<Level>,
    /// Level the listed tools were planned at: `off` for `full`, the rung's level for
    /// `uniform` and `mixed` (some tools of a mixed plan one level richer), the level chosen for
    /// the listed tools of a `hybrid` plan, `None` for `search` (nothing listed). Pinned tools
    /// stay `off` and a tool's `min_level` may compress it further, whatever this says.
    pub listed_level: Option<Level>,
    /// Whether the meta-tools are listed.
    pub meta_tools: bool,
    /// The budget planned for.
    pub budget: Budget,
    /// Tokens of the whole catalog listed uncompressed.
    pub tokens_before: usize,
    /// Tokens of this plan's list.
    pub tokens_after: usize,
    /// Tools in this plan's list (meta-tools included).
    pub tools_after: usize,
    /// Whether the plan is within both budgets.
    pub fits: bool,
}

impl Plan {
    /// Counts one more tool of `tokens`, listed after planning (code mode's `run_code` for a
    /// native-disclosure client, listed next to every tool): added to
    /// [`Plan::tokens_after`] and [`Plan::tools_after`], and [`Plan::fits`] checked again
    /// (`capped`: whether the plan's mode caps the number of tools, as all but `host_search`
    /// do).
    pub fn count_added(&mut self, tokens: usize, capped: bool) {
        self.tokens_after += tokens;
        self.tools_after += 1;
        self.fits = self.fits
            && self.tokens_after <= self.budget.tokens
            && (!capped || self.tools_after <= self.budget.tools);
    }

    /// Number of catalog tools listed directly.
    #[must_use]
    pub fn exposed_count(&self) -> usize {
        self.levels.iter().filter(|l| l.is_some()).count()
    }

    /// Number of catalog tools deferred behind search.
    #[must_use]
    pub fn deferred_count(&self) -> usize {
        self.levels.len() - self.exposed_count()
    }
}

/// Per-tool facts the ladder needs.
struct Facts<'a> {
    catalog: &'a [CatalogTool],
    pinned: Vec<bool>,
    min: Vec<Level>,
}

impl<'a> Facts<'a> {
    fn of(catalog: &'a [CatalogTool], rules: &Rules) -> Self {
        let n = catalog.len();
        Self {
            catalog,
            pinned: (0..n)
                .map(|i| rules.pins.get(i).copied().unwrap_or(false))
                .collect(),
            min: (0..n)
                .map(|i| rules.min_levels.get(i).copied().unwrap_or(Level::Off))
                .collect(),
        }
    }

    /// The level tool `i` gets when `level` is asked for.
    fn effective(&self, i: usize, level: Level) -> Level {
        if self.pinned[i] {
            Level::Off
        } else {
            level.max(self.min[i])
        }
    }
}

/// How many other tools share a name word with each tool (tools that look alike need richer
/// descriptions to be told apart).
fn likeness(catalog: &[CatalogTool]) -> Vec<usize> {
    let words: Vec<Vec<String>> = catalog.iter().map(|t| name_words(&t.name)).collect();
    let mut freq: HashMap<&str, usize> = HashMap::new();
    for ws in &words {
        for w in ws {
            *freq.entry(w.as_str()).or_default() += 1;
        }
    }
    words
        .iter()
        .map(|ws| {
            ws.iter()
                .map(|w| freq.get(w.as_str()).copied().unwrap_or(1) - 1)
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// The distinct words of more than two bytes of a tool's name.
fn name_words(name: &str) -> Vec<String> {
    let mut words = crate::naming::words(name);
    words.retain(|w| w.len() > 2);
    words.sort();
    words.dedup();
    words
}

/// Chooses the exposure of `catalog` under `rules` (its budget, level and mode choices, pins
/// and minimum levels), given the token costs in `measured`. Pure and deterministic.
#[must_use]
pub fn plan(catalog: &[CatalogTool], measured: &Measured, rules: &Rules) -> Plan {
    plan_ranked(catalog, measured, None, rules)
}

/// [`plan`] with the value order already computed (by [`measure_ranked`] for the same catalog
/// and rules); `None` computes it when a deferring rung needs it.
#[must_use]
pub fn plan_ranked(
    catalog: &[CatalogTool],
    measured: &Measured,
    ranked: Option<&Ranked>,
    rules: &Rules,
) -> Plan {
    debug_assert_eq!(catalog.len(), measured.tools.len());
    let facts = Facts::of(catalog, rules);
    let planner = Planner {
        measured,
        facts: &facts,
        budget: rules.budget,
        meta_count: rules.wording.meta.len(),
        list_catalog: rules.list_catalog,
        // A host that searches itself loads definitions on demand: no tool cap.
        capped: rules.mode != ModeChoice::HostSearch,
    };
    let order = || match ranked {
        Some(r) => std::borrow::Cow::Borrowed(r.order()),
        None => std::borrow::Cow::Owned(Ranked::of(catalog, measured, rules).into_order()),
    };
    match (rules.mode, rules.level) {
        (ModeChoice::Full | ModeChoice::HostSearch, LevelChoice::Fixed(level)) => {
            planner.uniform(level)
        }
        (ModeChoice::Full | ModeChoice::HostSearch, LevelChoice::Auto) => planner
            .full_ladder()
            .unwrap_or_else(|| planner.uniform(Level::Extreme)),
        (ModeChoice::Progressive, level) => planner.progressive(level, &order()),
        (ModeChoice::Auto, LevelChoice::Fixed(level)) => {
            let full = planner.uniform(level);
            if full.fits {
                full
            } else {
                planner.progressive(LevelChoice::Fixed(level), &order())
            }
        }
        (ModeChoice::Auto, LevelChoice::Auto) => planner
            .full_ladder()
            .unwrap_or_else(|| planner.progressive(LevelChoice::Auto, &order())),
    }
}

struct Planner<'a> {
    measured: &'a Measured,
    facts: &'a Facts<'a>,
    budget: Budget,
    /// Meta-tools listed with the progressive rungs.
    meta_count: usize,
    list_catalog: bool,
    /// Whether the tool cap applies (not for `host_search`).
    capped: bool,
}

impl Planner<'_> {
    fn n(&self) -> usize {
        self.measured.tools.len()
    }

    fn direct(&self, i: usize, level: Level) -> usize {
        self.measured.tools[i].direct[level.index()]
    }

    fn finish(&self, rung: Rung, levels: Vec<Option<Level>>, catalog_level: Option<Level>) -> Plan {
        self.finish_at(rung, None, levels, catalog_level)
    }

    fn finish_at(
        &self,
        rung: Rung,
        hybrid_level: Option<Level>,
        levels: Vec<Option<Level>>,
        catalog_level: Option<Level>,
    ) -> Plan {
        let listed_level = match rung {
            Rung::Full => Some(Level::Off),
            Rung::Uniform(l) | Rung::Mixed(l) => Some(l),
            Rung::Hybrid => hybrid_level,
            Rung::Search => None,
        };
        let meta_tools = matches!(rung, Rung::Hybrid | Rung::Search);
        let (tokens, tools) = self.cost(&levels, meta_tools, catalog_level);
        Plan {
            rung,
            levels,
            catalog_level,
            listed_level,
            meta_tools,
            budget: self.budget,
            tokens_before: if self.n() == 0 {
                0
            } else {
                self.measured.total_at(Level::Off)
            },
            tokens_after: tokens,
            tools_after: tools,
            fits: tokens <= self.budget.tokens && (!self.capped || tools <= self.budget.tools),
        }
    }

    fn cost(
        &self,
        levels: &[Option<Level>],
        meta_tools: bool,
        catalog_level: Option<Level>,
    ) -> (usize, usize) {
        let mut tokens = 0;
        let mut tools = 0;
        for (i, level) in levels.iter().enumerate() {
            match level {
                Some(l) => {
                    tokens += self.direct(i, *l);
                    tools += 1;
                }
                None => {
                    if let Some(c) = catalog_level {
                        tokens += self.measured.tools[i].line[c.index()];
                    }
                }
            }
        }
        if meta_tools {
            tokens += self.measured.meta;
            tools += self.meta_count;
            if catalog_level.is_some() && levels.iter().any(Option::is_none) {
                tokens += self.measured.listing_header;
            }
        }
        if tools > 0 {
            tokens += self.measured.overhead;
        }
        (tokens, tools)
    }

    fn uniform_levels(&self, level: Level) -> Vec<Option<Level>> {
        (0..self.n())
            .map(|i| Some(self.facts.effective(i, level)))
            .collect()
    }

    fn uniform(&self, level: Level) -> Plan {
        let rung = if level == Level::Off {
            Rung::Full
        } else {
            Rung::Uniform(level)
        };
        self.finish(rung, self.uniform_levels(level), None)
    }

    /// Rungs 1–3, or `None` when no full listing fits.
    fn full_ladder(&self) -> Option<Plan> {
        if self.capped && self.n() > self.budget.tools {
            return None;
        }
        let level = Level::ALL.into_iter().find(|&level| {
            let (tokens, _) = self.cost(&self.uniform_levels(level), false, None);
            tokens <= self.budget.tokens
        })?;
        if level == Level::Off {
            return Some(self.uniform(level));
        }
        // Rung 3: upgrade tools one level, in order of value, while the whole still fits. The
        // upgrades are a prefix of a fixed order, so a bigger budget never upgrades fewer.
        let richer = Level::from_index(level.index() - 1);
        let mut levels = self.uniform_levels(level);
        let (mut tokens, _) = self.cost(&levels, false, None);
        let mut order: Vec<(usize, usize)> = (0..self.n())
            .filter_map(|i| {
                let from = levels[i]?;
                let to = self.facts.effective(i, richer);
                (to < from).then(|| (i, self.direct(i, to) - self.direct(i, from)))
            })
            .collect();
        // Only this rung needs name likeness; large catalogs never reach it.
        let likeness = likeness(self.facts.catalog);
        // Ties by tool id, never by arrival order.
        let catalog = self.facts.catalog;
        order.sort_by_cached_key(|&(i, delta)| {
            (std::cmp::Reverse(likeness[i]), delta, catalog[i].id())
        });
        let mut upgraded = false;
        for (i, delta) in order {
            if tokens + delta > self.budget.tokens {
                break;
            }
            tokens += delta;
            levels[i] = Some(self.facts.effective(i, richer));
            upgraded = true;
        }
        let rung = if upgraded {
            Rung::Mixed(level)
        } else {
            Rung::Uniform(level)
        };
        Some(self.finish(rung, levels, None))
    }

    /// Rungs 4–5: a prefix of `order` listed, the rest deferred (see the module doc).
    fn progressive(&self, level: LevelChoice, order: &[usize]) -> Plan {
        let lines = |c: Level| self.list_catalog.then_some(c);
        // Every tool's catalog line per level, summed once for all candidates.
        let mut totals = [0; 5];
        for counts in &self.measured.tools {
            for (total, line) in totals.iter_mut().zip(counts.line) {
                *total += line;
            }
        }
        let chosen = match level {
            LevelChoice::Fixed(l) => {
                // A fixed level is kept even when its lines do not fit (as a `full` listing at a
                // fixed level is): the operator chose it.
                let count = self
                    .listed_count(order, l, lines(l), &totals)
                    .or_else(|| self.listed_count(order, l, None, &totals))
                    .unwrap_or(0);
                (count, l, lines(l))
            }
            LevelChoice::Auto => {
                let mut best: Option<(usize, Level, Option<Level>)> = None;
                for (listed, catalog) in candidates(self.list_catalog) {
                    if let Some(count) = self.listed_count(order, listed, catalog, &totals) {
                        // Candidates come in order of preference: only more tools beat one.
                        if best.is_none_or(|(c, _, _)| count > c) {
                            best = Some((count, listed, catalog));
                        }
                    }
                }
                best.unwrap_or((0, Level::Off, None))
            }
        };
        let (count, listed, catalog_level) = chosen;
        let mut levels: Vec<Option<Level>> = vec![None; self.n()];
        for &i in &order[..count] {
            levels[i] = Some(self.facts.effective(i, listed));
        }
        let deferred = levels.iter().any(Option::is_none);
        let catalog_level = catalog_level.filter(|_| deferred);
        let rung = if count > 0 {
            Rung::Hybrid
        } else {
            Rung::Search
        };
        self.finish_at(rung, Some(listed), levels, catalog_level)
    }

    /// How long a prefix of `order` can be listed at `listed` (pins at `off`) with the other
    /// tools' catalog lines at `catalog` (`line_totals`: every tool's lines, per level): the
    /// prefix stops at the first tool that does not fit
    /// the tokens or the tool cap. `None` when even the bare meta-tools do not fit.
    fn listed_count(
        &self,
        order: &[usize],
        listed: Level,
        catalog: Option<Level>,
        line_totals: &[usize; 5],
    ) -> Option<usize> {
        let line = |i: usize| catalog.map_or(0, |c| self.measured.tools[i].line[c.index()]);
        let n = self.n();
        let mut tokens = self.measured.overhead + self.measured.meta;
        if let Some(c) = catalog.filter(|_| n > 0) {
            tokens += self.measured.listing_header + line_totals[c.index()];
        }
        if tokens > self.budget.tokens || self.meta_count > self.budget.tools {
            return None;
        }
        let slots = self.budget.tools - self.meta_count;
        let mut count = 0;
        for &i in order.iter().take(slots) {
            let mut next = tokens + self.direct(i, self.facts.effective(i, listed)) - line(i);
            if count + 1 == n && catalog.is_some() {
                // Nothing left deferred: no heading.
                next -= self.measured.listing_header;
            }
            if next > self.budget.tokens {
                break;
            }
            tokens = next;
            count += 1;
        }
        Some(count)
    }
}

/// The (listed level, catalog line level) pairs the hybrid rung weighs, most preferred first:
/// lines at a findable level (`off` … `high`), then at `extreme`, then none; within each,
/// the richest listed level, then the richest lines.
fn candidates(list_catalog: bool) -> Vec<(Level, Option<Level>)> {
    let mut out = Vec::with_capacity(Level::ALL.len() * (Level::ALL.len() + 1));
    if list_catalog {
        for listed in Level::ALL {
            for catalog in Level::ALL.into_iter().filter(|&c| c < Level::Extreme) {
                out.push((listed, Some(catalog)));
            }
        }
        out.extend(Level::ALL.map(|listed| (listed, Some(Level::Extreme))));
    }
    out.extend(Level::ALL.map(|listed| (listed, None)));
    out
}

/// The `_meta` key that keeps a tool loaded in a host that defers tools itself (Claude Code's
/// tool search): the tools the plan lists, and the meta-tools, carry it set to `true`.
pub use crate::tokens::ALWAYS_LOAD;

/// Sets `_meta[ALWAYS_LOAD] = true` in a tool definition, keeping every other `_meta` key (a
/// `_meta` that is not an object, which MCP does not allow, is left as the upstream sent it).
pub fn mark_always_load(def: &mut serde_json::Map<String, Value>) {
    let meta = def
        .entry("_meta")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(ALWAYS_LOAD.into(), Value::Bool(true));
    }
}

/// The `tools` array a host receives under `plan`: listed tools in catalog order with their
/// exposed names and compressed definitions (worded by `rules`), marked [`ALWAYS_LOAD`] (but
/// with `mode = "host_search"`, where the host loads every tool on demand), then the meta-tools
/// (marked) when the plan lists them, the deferred tools' catalog lines appended to the search
/// tool's description when the plan lists them. With a host that defers itself
/// ([`HostDeferral::Cooperate`], [`HostDeferral::Host`]) the deferred tools are listed too, in
/// full and unmarked, for the host's own search; the meta-tools only with `Cooperate`.
#[must_use]
pub fn apply(plan: &Plan, catalog: &[CatalogTool], rules: &Rules) -> Vec<Value> {
    let wording = &rules.wording;
    let facts = Facts::of(catalog, rules);
    let mark = rules.mode != ModeChoice::HostSearch;
    let host_defers = rules.host_deferral != HostDeferral::Off;
    let mut out = Vec::with_capacity(plan.tools_after);
    let mut lines = String::new();
    for (i, (tool, level)) in catalog.iter().zip(&plan.levels).enumerate() {
        let description = wording.description(i);
        let name = tool.exposed_name(&wording.separator).into_owned();
        let listed = match (level, host_defers) {
            (Some(level), _) => Some((*level, mark)),
            (None, true) => Some((facts.effective(i, Level::Off), false)),
            (None, false) => None,
        };
        if let Some((level, marked)) = listed {
            let mut def = compress::compress_with(&tool.definition, level, description);
            def.insert("name".into(), Value::String(name));
            if marked {
                mark_always_load(&mut def);
            }
            // Same values, same bytes: provider prompt caches depend on it.
            out.push(crate::canonical::canonical_tool(&Value::Object(def)));
        } else if let Some(c) = plan.catalog_level {
            lines.push_str("\n- ");
            lines.push_str(&compress::catalog_line_memo(
                &tool.server,
                &name,
                &tool.definition,
                c,
                description,
                &mut compress::Memo::default(),
            ));
        }
    }
    if plan.meta_tools && rules.host_deferral != HostDeferral::Host {
        let mut defs = wording.meta.clone();
        if !lines.is_empty() {
            if let Some(Value::String(d)) = defs.first_mut().and_then(|s| s.get_mut("description"))
            {
                d.push_str(crate::tokens::LISTING_HEADER_TEXT);
                d.push_str(&lines);
            }
        }
        for def in &mut defs {
            if let Some(def) = def.as_object_mut() {
                mark_always_load(def);
            }
        }
        out.extend(defs);
    }
    out
}

#[cfg(test)]
mod tests;
