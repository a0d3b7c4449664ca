//! `[aggregate]`'s choices beyond the separator: what becomes of a `tools/call` of a near name
//! of a tool ([`crate::routing::resolve`]).

use std::str::FromStr;

/// What the gateway does with a `tools/call` of a name that resolves (`[aggregate]
/// resolve_names`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResolveNames {
    /// Route a name that resolves to one tool to it; answer an ambiguous one with its
    /// candidates.
    #[default]
    Route,
    /// Answer a name that resolves to one tool with that tool's name
    /// (`mcp_budget.catalog.misnamed`), an ambiguous one with its candidates.
    Strict,
    /// Resolve nothing: an unlisted name is unknown.
    Off,
}

/// A `resolve_names` that is not `route`, `strict` or `off`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown resolve_names {0:?}; expected route, strict or off")]
pub struct UnknownResolveNames(pub String);

impl FromStr for ResolveNames {
    type Err = UnknownResolveNames;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "route" => Ok(Self::Route),
            "strict" => Ok(Self::Strict),
            "off" => Ok(Self::Off),
            other => Err(UnknownResolveNames(other.to_owned())),
        }
    }
}
