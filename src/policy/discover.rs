//! `[discover]`: progressive discovery (the meta-tools and search).

use serde::Deserialize;

/// `[discover]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawDiscover {}

/// `[discover]` validated.
#[derive(Debug, Clone, Default)]
pub struct DiscoverPolicy {}

impl RawDiscover {
    /// Validates the section, pushing problems as `(field path, message)`.
    #[allow(clippy::unused_self)] // the section has no fields yet
    pub(crate) fn validate(&self, _problems: &mut Vec<(String, String)>) -> DiscoverPolicy {
        DiscoverPolicy {}
    }
}
