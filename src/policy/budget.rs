//! `[budget]`: the model the host runs and the share of its context window tools may use.

use serde::Deserialize;

/// `[budget]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawBudget {}

/// `[budget]` validated.
#[derive(Debug, Clone, Default)]
pub struct BudgetPolicy {}

impl RawBudget {
    /// Validates the section, pushing problems as `(field path, message)`.
    #[allow(clippy::unused_self)] // the section has no fields yet
    pub(crate) fn validate(&self, _problems: &mut Vec<(String, String)>) -> BudgetPolicy {
        BudgetPolicy {}
    }
}
