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
//! 4. **hybrid**: pinned tools in full, the rest deferred behind the search meta-tools, their
//!    catalog lines listed in the search tool's description at the richest level that fits;
//! 5. **search**: the meta-tools only (with catalog lines when they fit).
//!
//! Pinned tools are never compressed; a tool's minimum level is always applied. What the
//! planner is asked for is one plain value, [`Rules`] (the policy builds it once per catalog).
//! [`measure`] counts what the plan needs, [`plan`] is pure and deterministic, and [`apply`]
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
use std::str::FromStr;

use serde_json::Value;

use crate::catalog::CatalogTool;
use crate::compress::{self, Level};
use crate::discover::meta_tool_definitions;
use crate::tokens::{Counter, Measured, Wording};

/// Number of meta-tools listed in progressive modes.
pub const META_TOOLS: usize = 3;

/// The budget of one caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Most tokens the tool definitions may cost.
    pub tokens: usize,
    /// Most tools listed.
    pub tools: usize,
}

/// Level choice: `auto` (the planner decides) or fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LevelChoice {
    /// The least lossy level that fits.
    #[default]
    Auto,
    /// Always this level (for listed tools and catalog lines).
    Fixed(Level),
}

impl FromStr for LevelChoice {
    type Err = compress::UnknownLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            Ok(Self::Auto)
        } else {
            s.parse().map(Self::Fixed)
        }
    }
}

/// Exposure choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModeChoice {
    /// Full when it fits, else progressive.
    #[default]
    Auto,
    /// Every tool listed directly.
    Full,
    /// Meta-tools (plus pinned tools); the rest found by search.
    Progressive,
}

/// A mode name that is not `auto`, `full` or `progressive`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {0:?}; expected auto, full or progressive")]
pub struct UnknownMode(pub String);

impl FromStr for ModeChoice {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "full" => Ok(Self::Full),
            "progressive" => Ok(Self::Progressive),
            other => Err(UnknownMode(other.to_owned())),
        }
    }
}

/// What the planner is asked for one catalog: the budget, the level and mode choices, the
/// per-tool rules, and the wording of the list. A plain value, built once per catalog (from a
/// policy by `BudgetPolicy::rules`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// The budget to fit.
    pub budget: Budget,
    /// Compression level choice.
    pub level: LevelChoice,
    /// Exposure choice.
    pub mode: ModeChoice,
    /// List deferred tools' catalog lines in the search meta-tool's description when they fit.
    pub list_catalog: bool,
    /// Per catalog tool, in catalog order: always listed directly, never compressed. Empty when
    /// no tool is pinned; a tool past the end is not.
    pub pins: Vec<bool>,
    /// Per catalog tool, in catalog order: the least compression applied. Empty when no tool
    /// has one; a tool past the end has none.
    pub min_levels: Vec<Level>,
    /// The exposed names, meta-tool names and replaced descriptions.
    pub wording: Wording,
}

impl Rules {
    /// Rules for `budget` with the defaults: `auto` level and mode, catalog lines listed, no
    /// per-tool rules, and [`Wording::default`].
    #[must_use]
    pub fn new(budget: Budget) -> Self {
        Self {
            budget,
            level: LevelChoice::Auto,
            mode: ModeChoice::Auto,
            list_catalog: true,
            pins: Vec::new(),
            min_levels: Vec::new(),
            wording: Wording::default(),
        }
    }
}

/// The rung of the ladder a plan stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rung {
    /// Every tool listed uncompressed (up to `min_level` rules).
    Full,
    /// Every tool at this level.
    Uniform(Level),
    /// Every tool at this level, some one level richer.
    Mixed(Level),
    /// Pinned tools listed, the rest behind search.
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

fn name_words(name: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() || (c.is_uppercase() && prev_lower) {
            if cur.len() > 2 {
                words.push(std::mem::take(&mut cur));
            }
            cur.clear();
        }
        if c.is_alphanumeric() {
            cur.extend(c.to_lowercase());
        }
        prev_lower = c.is_lowercase();
    }
    if cur.len() > 2 {
        words.push(cur);
    }
    words.sort();
    words.dedup();
    words
}

/// The token costs [`plan`] needs for `catalog` under `rules`, and no more: when the catalog is
/// over the tool cap (and `mode` is not `full`), no direct listing of every tool can be chosen,
/// so direct costs are counted at `off` only ([`Counter::measure_upper_bound`]). This is the
/// call for a gateway's `tools/list`; use [`Counter::measure`] to report.
#[must_use]
pub fn measure(counter: &Counter, catalog: &[CatalogTool], rules: &Rules) -> Measured {
    if rules.mode == ModeChoice::Full || catalog.len() <= rules.budget.tools {
        counter.measure(catalog, &rules.wording)
    } else {
        counter.measure_upper_bound(catalog, &rules.wording)
    }
}

/// Chooses the exposure of `catalog` under `rules` (its budget, level and mode choices, pins
/// and minimum levels), given the token costs in `measured`. Pure and deterministic.
#[must_use]
pub fn plan(catalog: &[CatalogTool], measured: &Measured, rules: &Rules) -> Plan {
    debug_assert_eq!(catalog.len(), measured.tools.len());
    let facts = Facts::of(catalog, rules);
    let planner = Planner {
        measured,
        facts: &facts,
        budget: rules.budget,
        list_catalog: rules.list_catalog,
    };
    match (rules.mode, rules.level) {
        (ModeChoice::Full, LevelChoice::Fixed(level)) => planner.uniform(level),
        (ModeChoice::Full, LevelChoice::Auto) => planner
            .full_ladder()
            .unwrap_or_else(|| planner.uniform(Level::Extreme)),
        (ModeChoice::Progressive, level) => planner.progressive(level),
        (ModeChoice::Auto, LevelChoice::Fixed(level)) => {
            let full = planner.uniform(level);
            if full.fits {
                full
            } else {
                planner.progressive(LevelChoice::Fixed(level))
            }
        }
        (ModeChoice::Auto, LevelChoice::Auto) => planner
            .full_ladder()
            .unwrap_or_else(|| planner.progressive(LevelChoice::Auto)),
    }
}

struct Planner<'a> {
    measured: &'a Measured,
    facts: &'a Facts<'a>,
    budget: Budget,
    list_catalog: bool,
}

impl Planner<'_> {
    fn n(&self) -> usize {
        self.measured.tools.len()
    }

    fn direct(&self, i: usize, level: Level) -> usize {
        self.measured.tools[i].direct[level.index()]
    }

    fn finish(&self, rung: Rung, levels: Vec<Option<Level>>, catalog_level: Option<Level>) -> Plan {
        let meta_tools = matches!(rung, Rung::Hybrid | Rung::Search);
        let (tokens, tools) = self.cost(&levels, meta_tools, catalog_level);
        Plan {
            rung,
            levels,
            catalog_level,
            meta_tools,
            budget: self.budget,
            tokens_before: if self.n() == 0 {
                0
            } else {
                self.measured.total_at(Level::Off)
            },
            tokens_after: tokens,
            tools_after: tools,
            fits: tokens <= self.budget.tokens && tools <= self.budget.tools,
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
            tools += META_TOOLS;
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
        if self.n() > self.budget.tools {
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
        order.sort_by_key(|&(i, delta)| (std::cmp::Reverse(likeness[i]), delta, i));
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

    /// Rungs 4–5: pinned tools listed (a prefix that fits), the rest deferred.
    fn progressive(&self, level: LevelChoice) -> Plan {
        let mut levels: Vec<Option<Level>> = vec![None; self.n()];
        let base = self.measured.overhead + self.measured.meta;
        let mut tokens = base;
        let pinned = (0..self.n()).filter(|&i| self.facts.pinned[i]);
        for (listed, i) in pinned.enumerate() {
            let cost = self.direct(i, Level::Off);
            if tokens + cost > self.budget.tokens || META_TOOLS + listed + 1 > self.budget.tools {
                break;
            }
            tokens += cost;
            levels[i] = Some(Level::Off);
        }
        let deferred = levels.iter().any(Option::is_none);
        let catalog_level = match level {
            _ if !self.list_catalog || !deferred => None,
            LevelChoice::Fixed(l) => Some(l),
            LevelChoice::Auto => Level::ALL
                .into_iter()
                .find(|&l| self.cost(&levels, true, Some(l)).0 <= self.budget.tokens),
        };
        let rung = if levels.iter().any(Option::is_some) {
            Rung::Hybrid
        } else {
            Rung::Search
        };
        self.finish(rung, levels, catalog_level)
    }
}

/// The `tools` array a host receives under `plan`: listed tools in catalog order with their
/// exposed names and compressed definitions (worded by `rules`), then the meta-tools when the
/// plan lists them, the deferred tools' catalog lines appended to the search tool's
/// description when the plan lists them.
#[must_use]
pub fn apply(plan: &Plan, catalog: &[CatalogTool], rules: &Rules) -> Vec<Value> {
    let wording = &rules.wording;
    let mut out = Vec::with_capacity(plan.tools_after);
    let mut lines = String::new();
    for (i, (tool, level)) in catalog.iter().zip(&plan.levels).enumerate() {
        if level.is_none() && plan.catalog_level.is_none() {
            // Deferred and not listed: nothing of it is shown.
            continue;
        }
        let description = wording.description(i);
        let name = tool.exposed_name(&wording.separator).into_owned();
        match (level, plan.catalog_level) {
            (Some(level), _) => {
                let mut def = compress::compress_with(&tool.definition, *level, description);
                def.insert("name".into(), Value::String(name));
                // Same values, same bytes: provider prompt caches depend on it.
                out.push(crate::canonical::canonical_tool(&Value::Object(def)));
            }
            (None, Some(c)) => {
                lines.push_str("\n- ");
                lines.push_str(&compress::catalog_line_memo(
                    &name,
                    &tool.definition,
                    c,
                    description,
                    &mut compress::Memo::default(),
                ));
            }
            (None, None) => {}
        }
    }
    if plan.meta_tools {
        let mut defs = meta_tool_definitions(&wording.meta);
        if !lines.is_empty() {
            if let Some(Value::String(d)) = defs.first_mut().and_then(|s| s.get_mut("description"))
            {
                d.push_str(crate::tokens::LISTING_HEADER_TEXT);
                d.push_str(&lines);
            }
        }
        out.extend(defs);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::ToolCounts;
    use proptest::prelude::*;
    use serde_json::json;

    fn catalog(n: usize) -> Vec<CatalogTool> {
        (0..n)
            .map(|i| {
                CatalogTool::new(
                    "s",
                    json!({"name": format!("tool_{}_{}", ["get", "list", "make"][i % 3], i), "inputSchema": {"type": "object"}}),
                )
                .unwrap()
            })
            .collect()
    }

    fn measured(direct: &[[usize; 5]]) -> Measured {
        Measured {
            tools: direct
                .iter()
                .map(|d| ToolCounts {
                    direct: *d,
                    line: [d[0] / 4 + 3, d[1] / 5 + 3, d[2] / 6 + 3, 6, 4],
                })
                .collect(),
            overhead: 20,
            meta: 150,
            listing_header: 6,
            exact: true,
        }
    }

    /// Rules for a 100k context window: `bp` hundredths of a percent of it, `cap` tools.
    fn rules(bp: u32, cap: usize) -> Rules {
        Rules::new(Budget {
            tokens: 100_000 * bp as usize / 10_000,
            tools: cap,
        })
    }

    /// Loss of a plan: lower is better. Full rungs first by summed level, then progressive
    /// ones by listed count and catalog level.
    fn loss(p: &Plan) -> (u8, usize, usize) {
        match p.rung {
            Rung::Full | Rung::Uniform(_) | Rung::Mixed(_) => (
                0,
                p.levels.iter().map(|l| l.map_or(5, Level::index)).sum(),
                0,
            ),
            Rung::Hybrid | Rung::Search => (
                1,
                p.levels.len() - p.exposed_count(),
                p.catalog_level.map_or(5, Level::index),
            ),
        }
    }

    #[test]
    fn climbs_the_ladder() {
        let cat = catalog(4);
        let m = measured(&[[400, 300, 200, 100, 50]; 4]);
        // 100k × bp / 10k tokens.
        let at = |bp| plan(&cat, &m, &rules(bp, 20));
        assert_eq!(at(500).rung, Rung::Full);
        assert_eq!(at(135).rung, Rung::Mixed(Level::Low));
        assert_eq!(at(122).rung, Rung::Uniform(Level::Low));
        assert_eq!(at(100).rung, Rung::Mixed(Level::Medium));
        assert_eq!(at(82).rung, Rung::Uniform(Level::Medium));
        assert_eq!(at(20).rung, Rung::Search);
        assert_eq!(at(20).catalog_level, Some(Level::High));
        let p = plan(
            &catalog(30),
            &measured(&[[40, 30, 20, 10, 5]; 30]),
            &rules(500, 20),
        );
        assert_eq!(p.rung, Rung::Search);
        assert!(p.fits);
    }

    #[test]
    fn pinned_tools_stay_listed_in_full() {
        let cat = catalog(30);
        let m = measured(&[[40, 30, 20, 10, 5]; 30]);
        let mut pol = rules(500, 20);
        pol.pins = vec![false; 30];
        // tool_get_0
        pol.pins[0] = true;
        let p = plan(&cat, &m, &pol);
        assert_eq!(p.rung, Rung::Hybrid);
        assert_eq!(p.levels[0], Some(Level::Off));
        assert_eq!(p.exposed_count(), 1);
        let tools = apply(&p, &cat, &pol);
        assert_eq!(tools.len(), 4);
        assert_eq!(tools[0]["name"], "s__tool_get_0");
        let search = tools[1]["description"].as_str().unwrap();
        assert!(search.contains("\n- s__tool_list_1"), "{search}");
    }

    fn arb_case() -> impl Strategy<Value = (Vec<[usize; 5]>, u32, usize, Vec<bool>)> {
        (1usize..25).prop_flat_map(|n| {
            (
                prop::collection::vec(
                    (
                        10usize..400,
                        0usize..100,
                        0usize..100,
                        0usize..100,
                        0usize..100,
                    )
                        .prop_map(|(a, b, c, d, e)| {
                            let l1 = a - a * b / 200;
                            let l2 = l1 - l1 * c / 200;
                            let l3 = l2 - l2 * d / 200;
                            [a, l1, l2, l3, l3 - l3 * e / 200]
                        }),
                    n,
                ),
                10u32..500,
                1usize..30,
                prop::collection::vec(prop::bool::weighted(0.1), n),
            )
        })
    }

    proptest! {
        #[test]
        fn plan_properties((direct, bp, cap, pins) in arb_case()) {
            let cat = catalog(direct.len());
            let m = measured(&direct);
            let mut pol = rules(bp, cap);
            pol.pins = pins;
            let p = plan(&cat, &m, &pol);
            // Same input, same plan.
            prop_assert_eq!(&p, &plan(&cat, &m, &pol));
            // Never over budget when a fitting plan exists.
            let planner = Planner { measured: &m, facts: &Facts::of(&cat, &pol), budget: pol.budget, list_catalog: true };
            let cheapest_full = planner.uniform(Level::Extreme);
            let bare_search = planner.finish(Rung::Search, vec![None; cat.len()], None);
            if cheapest_full.fits || bare_search.fits {
                prop_assert!(p.fits, "{:?}", p);
            }
            prop_assert_eq!(p.fits, p.tokens_after <= p.budget.tokens && p.tools_after <= p.budget.tools);
            // A bigger budget never yields a poorer plan.
            let bigger = plan(&cat, &m, &rules_with(&pol, bp + 37));
            prop_assert!(loss(&bigger) <= loss(&p), "{:?} vs {:?}", bigger, p);
            let more_tools = plan(&cat, &m, &rules_cap(&pol, cap + 5));
            prop_assert!(loss(&more_tools) <= loss(&p), "{:?} vs {:?}", more_tools, p);
            // The applied list has the planned size.
            prop_assert_eq!(apply(&p, &cat, &pol).len(), p.tools_after);
        }
    }

    fn rules_with(r: &Rules, bp: u32) -> Rules {
        Rules {
            budget: rules(bp, r.budget.tools).budget,
            ..r.clone()
        }
    }

    fn rules_cap(r: &Rules, cap: usize) -> Rules {
        let mut r = r.clone();
        r.budget.tools = cap;
        r
    }
}

#[cfg(test)]
mod accounting {
    use super::*;
    use crate::profile::{resolve, ProfileOverrides, DEFAULT_MODEL};
    use crate::tokens::{Counter, Rendering};

    /// The plan's token total is what the applied list really costs, re-counted tool by tool.
    #[test]
    fn planned_tokens_match_the_applied_list() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
        let catalog =
            crate::catalog::load_saved(&[dir.join("github.json"), dir.join("time.json")]).unwrap();
        for rendering in [Rendering::OpenAi, Rendering::Anthropic, Rendering::Raw] {
            for (mode, level) in [
                (ModeChoice::Progressive, LevelChoice::Fixed(Level::Medium)),
                (ModeChoice::Full, LevelChoice::Fixed(Level::High)),
                (ModeChoice::Auto, LevelChoice::Auto),
            ] {
                let profile = resolve(
                    DEFAULT_MODEL,
                    &ProfileOverrides {
                        rendering: Some(rendering),
                        ..ProfileOverrides::default()
                    },
                )
                .unwrap();
                // The default share: 2% of the context window.
                let mut rules = Rules::new(Budget {
                    tokens: profile.context_window / 50,
                    tools: profile.max_tools,
                });
                rules.mode = mode;
                rules.level = level;
                let counter = Counter::new(&profile);
                let measured = counter.measure(&catalog, &rules.wording);
                let p = plan(&catalog, &measured, &rules);
                let tools = apply(&p, &catalog, &rules);
                let recount: usize = measured.overhead
                    + tools
                        .iter()
                        .map(|t| {
                            let t = t.as_object().unwrap();
                            counter.count_tool(t["name"].as_str().unwrap(), t)
                        })
                        .sum::<usize>();
                // Full listings are counted exactly. Catalog lines are counted one by one, so a
                // listing may be over-counted by a token per line (never under-counted).
                let planned = p.tokens_after;
                if p.catalog_level.is_none() {
                    assert_eq!(planned, recount, "{rendering} {mode:?}");
                } else {
                    assert!(
                        recount <= planned && planned * 100 <= recount * 106,
                        "{rendering} {mode:?}: planned {planned} vs {recount}"
                    );
                }
            }
        }
    }

    #[test]
    fn plan_measure_is_enough_for_the_plan_and_upgrades_to_exact() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/toolsets/github.json");
        let catalog = crate::catalog::load_saved(&[dir]).unwrap();
        let profile = resolve("claude-haiku-4-5", &ProfileOverrides::default()).unwrap();
        let rules = Rules::new(Budget {
            tokens: profile.context_window / 50,
            tools: profile.max_tools,
        });
        let reference = Counter::new(&profile).measure(&catalog, &rules.wording);
        let counter = Counter::new(&profile);
        let partial = measure(&counter, &catalog, &rules);
        assert!(!partial.exact && reference.exact);
        assert_eq!(
            plan(&catalog, &partial, &rules),
            plan(&catalog, &reference, &rules)
        );
        // Upper bounds, never under-counts.
        for (p, r) in partial.tools.iter().zip(&reference.tools) {
            assert!(p.direct.iter().zip(&r.direct).all(|(p, r)| p >= r));
            assert_eq!(p.line, r.line);
        }
        // A later complete measure recounts what the partial one skipped.
        assert_eq!(counter.measure(&catalog, &rules.wording), reference);
    }
}
