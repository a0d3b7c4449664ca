//! `[pin]`: tool, prompt and resource template definitions pinned by `schemaHash` (see
//! [`crate::pin`]).
//!
//! ```toml
//! [pin]
//! lock = "mcp-budget.lock"   # written by `mcp-budget pin`; relative to the policy file
//! on_change = "quarantine"   # a definition that differs from its pin: "quarantine" | "warn"
//! unknown = "quarantine"     # a definition missing from the lock: "quarantine" | "allow"
//! ```
//!
//! Without `lock`, the first definition of each tool, prompt and template is trusted for the
//! gateway's lifetime and `on_change` applies to later ones; `unknown` needs a lock.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::problems::{At, Section};

use crate::pin::{Action, Lock, Rules};

/// `[pin]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawPin {
    /// The lockfile, relative to the policy file. Default: none (trust on first use).
    pub lock: Option<PathBuf>,
    /// `"quarantine"` or `"warn"`. Default: `"quarantine"`.
    pub on_change: Option<String>,
    /// `"quarantine"` or `"allow"`. Default: `"quarantine"`.
    pub unknown: Option<String>,
}

/// `[pin]` validated. The lock itself is read by [`PinPolicy::read_lock`], when the policy is
/// loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PinPolicy {
    /// The lockfile as written in the policy.
    pub lock_path: Option<PathBuf>,
    /// The rules, with the lock once read.
    pub rules: Rules,
}

impl Section for RawPin {
    type Valid = PinPolicy;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> PinPolicy {
        let mut action = |field: &str, value: Option<&str>, other: &str, action: Action| {
            let choices = [("quarantine", Action::Quarantine), (other, action)];
            at.one_of(field, value, Action::Quarantine, &choices)
        };
        let on_change = action("on_change", self.on_change.as_deref(), "warn", Action::Warn);
        let unknown = action("unknown", self.unknown.as_deref(), "allow", Action::Warn);
        PinPolicy {
            lock_path: self.lock,
            rules: Rules {
                lock: None,
                on_change,
                unknown,
            },
        }
    }
}

impl PinPolicy {
    /// Reads the lockfile (a relative path from `base`), when the policy names one.
    ///
    /// # Errors
    /// A message naming the file, when it cannot be read or is not a lockfile.
    pub fn read_lock(&mut self, base: &Path) -> Result<(), String> {
        let Some(path) = &self.lock_path else {
            return Ok(());
        };
        let path = base.join(path);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read lockfile {}: {e}", path.display()))?;
        let lock = Lock::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        self.rules.lock = Some(lock);
        Ok(())
    }
}
