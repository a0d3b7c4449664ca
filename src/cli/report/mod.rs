//! The story of a plan, shared by `inspect` (table, JSON `plan.reason` / `plan.advice`, HTML)
//! and `serve`'s startup summary: which rule decided it (the tool cap, the token budget, pins,
//! a level or mode the policy fixes) and the policy change that would list more tools.
//!
//! ```
//! use mcp_budget::cli::report::{advice, reason, Why};
//!
//! let why = Why {
//!     model: "claude-sonnet-4-5".into(),
//!     tools: 41,
//!     cap: Some(20),
//!     exposed: 17,
//!     rung: "hybrid".into(),
//!     ..Why::fitting(41, 3000, 4000, 200_000)
//! };
//! assert!(reason(&why).starts_with("tool cap: 41 tools > cap 20 for claude-sonnet-4-5"));
//! assert!(advice(&why).unwrap().contains("max_tools = 41"));
//! ```

pub mod html;

use crate::catalog::Catalog;
use crate::layer::budget::PlanSummary;
use crate::plan::{LevelChoice, ModeChoice};
use crate::policy::{BudgetPolicy, Policy};

/// What `[budget]` fixes instead of letting the planner choose (`mode = "progressive"`,
/// `level = "high"`), if anything.
#[must_use]
pub fn fixed_choice(budget: &BudgetPolicy) -> Option<String> {
    match (budget.mode, budget.level) {
        (ModeChoice::Auto, LevelChoice::Auto) => None,
        (ModeChoice::Auto, LevelChoice::Fixed(l)) => Some(format!("level = \"{}\"", l.as_str())),
        (mode, _) => Some(format!("mode = \"{}\"", mode.as_str())),
    }
}

/// The facts of a running gateway's plan (`serve`'s startup summary), for `catalog` under
/// `policy`; the smallest level's total is not known there.
#[must_use]
pub fn from_summary(policy: &Policy, summary: &PlanSummary, catalog: &Catalog) -> Why {
    let budget = &policy.budget;
    let limits = budget.budget();
    let cap = (budget.mode != ModeChoice::HostSearch).then_some(limits.tools);
    let (rung, level) = match summary.rung.split_once(':') {
        Some((rung, level)) => (rung.to_owned(), Some(level.to_owned())),
        None => (
            summary.rung.clone(),
            (summary.rung == "full").then(|| "off".to_owned()),
        ),
    };
    let listed = summary.exposed
        + if matches!(rung.as_str(), "hybrid" | "search") {
            policy.discover.names.count()
        } else {
            0
        };
    let rules = budget.rules(catalog.tools(), catalog.separator(), &policy.discover);
    Why {
        enabled: budget.enabled,
        model: budget.model.clone(),
        context_window: budget.profile.context_window,
        threshold_percent: f64::from(budget.threshold_bp) / 100.0,
        tools: summary.tools,
        cap,
        budget_tokens: summary.budget_tokens,
        tokens_before: summary.tokens_before,
        tokens_smallest: None,
        tokens_after: summary.tokens_after,
        rung,
        level,
        exposed: summary.exposed,
        pinned: rules.pins.iter().filter(|&&pin| pin).count(),
        fits: summary.tokens_after <= summary.budget_tokens && cap.is_none_or(|c| listed <= c),
        fixed: fixed_choice(budget),
        pin_candidates: Vec::new(),
        command_line: false,
    }
}

/// What a plan decided, in plain numbers (from a [`crate::plan::Plan`] or a
/// [`crate::layer::budget::PlanSummary`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Why {
    /// `[budget] enabled`.
    pub enabled: bool,
    /// The host model.
    pub model: String,
    /// Its context window, in tokens.
    pub context_window: usize,
    /// `threshold_percent` the budget is.
    pub threshold_percent: f64,
    /// Tools in the catalog.
    pub tools: usize,
    /// The tool cap (`None`: not capped, as with `mode = "host_search"`).
    pub cap: Option<usize>,
    /// The token budget.
    pub budget_tokens: usize,
    /// Every tool in full.
    pub tokens_before: usize,
    /// Every tool at the smallest level (`extreme`), when known.
    pub tokens_smallest: Option<usize>,
    /// What the plan lists.
    pub tokens_after: usize,
    /// The rung: `full`, `uniform`, `mixed`, `hybrid` or `search`.
    pub rung: String,
    /// The level the listed tools are planned at.
    pub level: Option<String>,
    /// Catalog tools listed directly.
    pub exposed: usize,
    /// Pinned tools (always listed, in full).
    pub pinned: usize,
    /// Whether the plan is within both limits.
    pub fits: bool,
    /// What the policy fixes instead of letting the planner choose (`mode = "progressive"`,
    /// `level = "high"`), if anything.
    pub fixed: Option<String>,
    /// Deferred tools worth pinning (`server/tool`): the next ones the hybrid order would list,
    /// one per server, at most three; empty when the plan's tools are not known (the startup
    /// summary).
    pub pin_candidates: Vec<String>,
    /// The budget comes from the drop-in command line (no policy file): the reason and the
    /// advice name flags (`--budget-percent`, `--mode`, `-c`) where one exists, and a policy
    /// file (`mcp-budget init` writes one) where none does.
    pub command_line: bool,
}

impl Why {
    /// A plan that lists all `tools` in full (`tokens` of `budget`, a 2% threshold of
    /// `window`), for building others with `..`.
    #[must_use]
    pub fn fitting(tools: usize, tokens: usize, budget: usize, window: usize) -> Self {
        Self {
            enabled: true,
            model: String::new(),
            context_window: window,
            threshold_percent: 2.0,
            tools,
            cap: None,
            budget_tokens: budget,
            tokens_before: tokens,
            tokens_smallest: None,
            tokens_after: tokens,
            rung: "full".into(),
            level: None,
            exposed: tools,
            pinned: 0,
            fits: true,
            fixed: None,
            pin_candidates: Vec::new(),
            command_line: false,
        }
    }

    /// Catalog tools deferred behind search.
    #[must_use]
    pub fn deferred(&self) -> usize {
        self.tools.saturating_sub(self.exposed)
    }

    fn over_cap(&self) -> bool {
        self.cap.is_some_and(|cap| self.tools > cap)
    }

    fn deferring(&self) -> bool {
        matches!(self.rung.as_str(), "hybrid" | "search")
    }

    /// The rule that decided: `off`, `fits`, `fixed`, `tool_cap`, `token_budget` or `pins`.
    #[must_use]
    pub fn decided_by(&self) -> &'static str {
        if !self.enabled {
            "off"
        } else if !self.fits && self.pinned > 0 {
            "pins"
        } else if self.fixed.is_some() && !(self.deferring() && self.level_fixed_only()) {
            // A fixed level with the tools deferred: the cap or the budget deferred them.
            "fixed"
        } else if self.rung == "full" {
            "fits"
        } else if self.deferring() && self.over_cap() {
            "tool_cap"
        } else {
            "token_budget"
        }
    }

    fn level_fixed_only(&self) -> bool {
        self.fixed
            .as_deref()
            .is_some_and(|f| f.starts_with("level"))
    }

    /// Who fixed a choice: the policy's `[budget]` or the command line.
    fn fixer(&self) -> &'static str {
        if self.command_line {
            "the command line"
        } else {
            "the policy"
        }
    }

    /// How to set the budget's share of the window to `p` percent (`section`: the policy key
    /// with its `[budget]`, when no other key of it was named before).
    fn threshold_to(&self, p: f64, section: bool) -> String {
        match (self.command_line, section) {
            (true, _) => format!("--budget-percent {p}"),
            (false, true) => format!("[budget] threshold_percent = {p}"),
            (false, false) => format!("threshold_percent = {p}"),
        }
    }

    /// How to set the tool cap to `n`: a policy key, which the command line has no flag for.
    fn max_tools_to(&self, n: usize) -> String {
        if self.command_line {
            format!("a policy file with [budget] max_tools = {n} (`mcp-budget init` writes one)")
        } else {
            format!("[budget] max_tools = {n}")
        }
    }

    fn limits(&self) -> String {
        format!(
            "the budget of {} tokens ({}% of {}'s {})",
            self.budget_tokens, self.threshold_percent, self.model, self.context_window
        )
    }

    fn listed(&self) -> String {
        let pins = if self.pinned > 0 {
            format!(" ({} pinned)", self.pinned)
        } else {
            String::new()
        };
        format!(
            "{} listed{pins} + 3 meta-tools, {} deferred behind search ({} tokens)",
            self.exposed,
            self.deferred(),
            self.tokens_after
        )
    }
}

/// Why the plan is what it is, in one sentence that starts with the deciding rule.
#[must_use]
pub fn reason(w: &Why) -> String {
    let (tools, before) = (w.tools, w.tokens_before);
    let level = w.level.as_deref().unwrap_or("extreme");
    let core = match w.decided_by() {
        "off" => {
            return "the budget is off ([budget] enabled = false): serve lists every tool as its \
                    upstream does"
                .into();
        }
        "fits" => {
            let cap = w
                .cap
                .map(|c| format!(" and the cap of {c} tools"))
                .unwrap_or_default();
            return format!(
                "every tool in full ({tools} tools, {before} tokens) fits {}{cap}",
                w.limits()
            );
        }
        // Progressive lists no tool itself: say what it lists instead of "0 tools at -".
        "fixed" if w.deferring() && w.exposed == w.pinned => format!(
            "{} fixes {}: {}",
            w.fixer(),
            w.fixed.as_deref().unwrap_or(""),
            w.listed()
        ),
        "fixed" => format!(
            "{} fixes {}: {} tools listed at {}",
            w.fixer(),
            w.fixed.as_deref().unwrap_or(""),
            w.exposed,
            w.level.as_deref().unwrap_or("-")
        ),
        "tool_cap" | "pins" if w.deferring() && w.over_cap() => format!(
            "tool cap: {tools} tools > cap {} for {}; {}",
            w.cap.unwrap_or(0),
            w.model,
            w.listed()
        ),
        _ if w.deferring() => {
            let smallest = w
                .tokens_smallest
                .map_or_else(|| "exceed".to_owned(), |t| format!("take {t} tokens >"));
            format!(
                "token budget: even compressed to extreme all {tools} tools {smallest} {}; {}",
                w.limits(),
                w.listed()
            )
        }
        _ => format!(
            "token budget: all {tools} tools in full take {before} tokens > {}; compressed to \
             {level} they take {}",
            w.limits(),
            w.tokens_after
        ),
    };
    if w.fits {
        core
    } else if w.pinned > 0 {
        format!(
            "pins: {core}; still {} tokens > {}: the {} pinned tools are always listed in full",
            w.tokens_after, w.budget_tokens, w.pinned
        )
    } else {
        format!(
            "{core}; the smallest plan still takes {} tokens > {}",
            w.tokens_after, w.budget_tokens
        )
    }
}

/// The smallest `threshold_percent` (one decimal) whose budget holds `tokens`, if the policy
/// allows it (at most 5).
fn threshold_for(tokens: usize, window: usize) -> Option<f64> {
    if window == 0 {
        return None;
    }
    let tenths = (tokens * 1000).div_ceil(window).max(10);
    // Display only: a percentage in tenths, far below 2^52.
    #[allow(clippy::cast_precision_loss)]
    let percent = tenths as f64 / 10.0;
    (percent <= 5.0).then_some(percent)
}

/// The concrete policy change that would list more tools (`None`: every tool is listed).
#[must_use]
pub fn advice(w: &Why) -> Option<String> {
    let named = match w.pin_candidates.as_slice() {
        [] => "[budget.tools.\"server/tool\"] pin = true".to_owned(),
        tools => format!(
            "[budget.tools.\"server/tool\"] pin = true, e.g. {}",
            (tools.iter())
                .map(|t| format!("\"{t}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let pin = format!("pin the tools you use most so they are always listed ({named})");
    match w.decided_by() {
        "off" | "fits" => None,
        "fixed" if w.deferred() == 0 => None,
        "fixed" if w.command_line => Some(if w.level_fixed_only() {
            "leave -c out (or -c auto) to let the planner choose the level".to_owned()
        } else {
            "--mode auto lists the tools directly when they fit".to_owned()
        }),
        "fixed" => Some(format!(
            "remove [budget] {} to let the planner list more tools",
            w.fixed.as_deref().unwrap_or("")
        )),
        "pins" => Some(format!(
            "pin fewer tools: the {} pinned tools alone do not fit {} tokens",
            w.pinned, w.budget_tokens
        )),
        "tool_cap" => Some(cap_advice(w, &pin)),
        _ if w.deferring() => Some(
            match w
                .tokens_smallest
                .and_then(|t| threshold_for(t, w.context_window).map(|p| (t, p)))
            {
                Some((t, p)) => format!(
                    "{} lists all {} tools compressed ({t} tokens); or {pin}",
                    w.threshold_to(p, true),
                    w.tools
                ),
                None => format!(
                    "{pin}; no threshold_percent up to 5 lists all {} tools",
                    w.tools
                ),
            },
        ),
        _ => Some(match threshold_for(w.tokens_before, w.context_window) {
            Some(p) => format!(
                "{} lists every tool in full ({} tokens)",
                w.threshold_to(p, true),
                w.tokens_before
            ),
            None => format!(
                "no threshold_percent up to 5 holds every tool in full ({} tokens); pin the \
                 tools that must keep their whole description",
                w.tokens_before
            ),
        }),
    }
}

/// The advice when the tool cap deferred tools: a larger cap (and budget, if the tools need
/// it), or pins (`pin`, the pin advice).
fn cap_advice(w: &Why, pin: &str) -> String {
    let smallest = w.tokens_smallest.unwrap_or(0);
    let tokens = if w.tokens_smallest.is_none() {
        " (if their tokens fit the budget)".to_owned()
    } else if smallest <= w.budget_tokens {
        String::new()
    } else if let Some(p) = threshold_for(smallest, w.context_window) {
        format!(
            " and {} (compressed they take {smallest} tokens)",
            w.threshold_to(p, false)
        )
    } else {
        return format!(
            "{pin}: no max_tools lists all {} tools, since even compressed they take \
             {smallest} tokens, more than threshold_percent = 5 allows",
            w.tools
        );
    };
    format!(
        "{}{tokens} lists every tool (models choose worse past the \
         {}-tool cap of {}); or {pin}",
        w.max_tools_to(w.tools),
        w.cap.unwrap_or(0),
        w.model
    )
}

#[cfg(test)]
mod tests;
