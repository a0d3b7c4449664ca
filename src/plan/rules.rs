//! What the planner is asked: the budget, the level and mode choices, and the per-tool rules.

use std::str::FromStr;

use crate::compress::{self, Level};
use crate::discover::{MetaToolNames, meta_tool_definitions};
use crate::tokens::Wording;

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
    /// Every tool listed directly, no meta-tools, for a host that searches tools itself (it
    /// loads names first, definitions on demand): the tool cap does not apply, the budget is
    /// the larger `host_search_threshold_percent`, and the least lossy level that fits it is
    /// chosen (`extreme` when none does).
    HostSearch,
}

impl ModeChoice {
    /// `auto`, `full`, `progressive` or `host_search`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Full => "full",
            Self::Progressive => "progressive",
            Self::HostSearch => "host_search",
        }
    }

    /// Whether every tool is listed directly, whatever the budget (`full`, `host_search`).
    #[must_use]
    pub fn lists_all(self) -> bool {
        matches!(self, Self::Full | Self::HostSearch)
    }
}

/// A mode name that is not `auto`, `full`, `progressive` or `host_search`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {0:?}; expected auto, full, progressive or host_search")]
pub struct UnknownMode(pub String);

impl FromStr for ModeChoice {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "full" => Ok(Self::Full),
            "progressive" => Ok(Self::Progressive),
            "host_search" => Ok(Self::HostSearch),
            other => Err(UnknownMode(other.to_owned())),
        }
    }
}

/// Whether the host defers tools itself (Claude Code's tool search keeps a tool loaded when it
/// carries `_meta["anthropic/alwaysLoad"] = true` and defers the others), and so what the
/// gateway lists (`[budget] host_deferral`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostDeferral {
    /// The gateway defers: the plan's tools are listed (marked always-load, as are the
    /// meta-tools, so that a host that defers anyway keeps them), the rest behind the
    /// meta-tools.
    #[default]
    Off,
    /// The host defers, the gateway helps: every tool is listed, the plan's marked always-load,
    /// the rest left to the host's search; the gateway's meta-tools are listed too (marked), so
    /// the model may search either way.
    Cooperate,
    /// The host defers alone: as `cooperate`, without the gateway's meta-tools.
    Host,
}

impl HostDeferral {
    /// `off`, `cooperate` or `host`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Cooperate => "cooperate",
            Self::Host => "host",
        }
    }
}

/// A `host_deferral` that is not `off`, `cooperate` or `host`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown host_deferral {0:?}; expected off, cooperate or host")]
pub struct UnknownHostDeferral(pub String);

impl FromStr for HostDeferral {
    type Err = UnknownHostDeferral;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Self::Off),
            "cooperate" => Ok(Self::Cooperate),
            "host" => Ok(Self::Host),
            other => Err(UnknownHostDeferral(other.to_owned())),
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
    /// The exposed names, meta-tool definitions and replaced descriptions.
    pub wording: Wording,
    /// Per catalog tool, in catalog order: how often the deployment called it (the hybrid rung
    /// lists a server's most-called tools first, and called tools first within a round across
    /// servers). Empty when unknown; a tool past the end has none.
    pub usage: Vec<u64>,
    /// Whether the host defers tools itself (see [`HostDeferral`]).
    pub host_deferral: HostDeferral,
}

impl Rules {
    /// Rules for `budget` with the defaults: `auto` level and mode, catalog lines listed, no
    /// per-tool rules, separator `__`, the default meta-tools, no host deferral.
    #[must_use]
    pub fn new(budget: Budget) -> Self {
        Self {
            budget,
            level: LevelChoice::Auto,
            mode: ModeChoice::Auto,
            list_catalog: true,
            pins: Vec::new(),
            min_levels: Vec::new(),
            wording: Wording::new("__", meta_tool_definitions(&MetaToolNames::default())),
            usage: Vec::new(),
            host_deferral: HostDeferral::Off,
        }
    }
}
