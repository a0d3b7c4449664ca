//! `[pin]`: tool, prompt and resource template definitions pinned by `schemaHash` (see
//! [`crate::pin`]).
//!
//! ```toml
//! [pin]
//! lock = "mcp-budget.lock"   # written by `mcp-budget pin`; relative to the policy file
//! on_change = "quarantine"   # a definition that differs from its pin: "quarantine" | "warn"
//! unknown = "quarantine"     # a definition missing from the lock: "quarantine" | "allow"
//! recheck_secs = 300         # list every upstream again this often; default 0 (off)
//! ```
//!
//! Without `lock`, the first definition of each tool, prompt and template is trusted for the
//! gateway's lifetime and `on_change` applies to later ones; `unknown` needs a lock.
//!
//! An upstream that changes a definition without saying `list_changed` (a silent rug pull) is
//! caught at the next restart, or within `recheck_secs` with it: the gateway lists every ready
//! upstream again that often, down the path a `list_changed` takes, so a changed definition
//! is quarantined (audit line and metric included) as a restart would, and hosts hear of a
//! list only when it changed. Applied by a reload.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::problems::{At, Section};

pub use crate::pin::{Action, Lock, Rules};

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
    /// List every ready upstream again this often, in seconds, to catch a definition changed
    /// without `list_changed` (one listing per upstream and tick, of each list it serves).
    /// Default: 0 (off: definitions are compared when an upstream says `list_changed` or
    /// restarts). At most 604800 (a week).
    pub recheck_secs: Option<u64>,
}

/// The longest `recheck_secs` (a week).
const MAX_RECHECK_SECS: u64 = 7 * 24 * 3600;

/// `[pin]` validated. The lock itself is read by [`PinPolicy::read_lock`], when the policy is
/// loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PinPolicy {
    /// The lockfile as written in the policy.
    pub lock_path: Option<PathBuf>,
    /// The rules, with the lock once read.
    pub rules: Rules,
    /// How often every upstream is listed again (`recheck_secs`); `None`: never.
    pub recheck: Option<Duration>,
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
        let recheck = at.parse("recheck_secs", self.recheck_secs, |secs| match secs {
            0 => Ok(None),
            secs if secs > MAX_RECHECK_SECS => Err(format!(
                "must be at most {MAX_RECHECK_SECS} (a week); 0 turns it off"
            )),
            secs => Ok(Some(Duration::from_secs(secs))),
        });
        PinPolicy {
            lock_path: self.lock,
            recheck: recheck.flatten(),
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
        let text = crate::files::read_text(&path)
            .map_err(|e| format!("cannot read lockfile {}: {e}", path.display()))?;
        let lock = Lock::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        self.rules.lock = Some(lock);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::policy::{ConfigError, Policy};

    fn recheck(pin: &str) -> Result<Option<Duration>, Vec<(String, String)>> {
        let text = format!("version = 1\n[pin]\n{pin}");
        match Policy::from_toml_str(&text, "t.toml") {
            Ok(policy) => Ok(policy.pin.recheck),
            Err(ConfigError::Invalid { problems, .. }) => Err(problems
                .iter()
                .map(|p| (p.path.clone(), p.message.clone()))
                .collect()),
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn recheck_secs_is_off_by_default_and_at_0_and_seconds_up_to_a_week() {
        assert_eq!(recheck(""), Ok(None));
        assert_eq!(recheck("recheck_secs = 0\n"), Ok(None));
        assert_eq!(
            recheck("recheck_secs = 1\n"),
            Ok(Some(Duration::from_secs(1)))
        );
        assert_eq!(
            recheck("recheck_secs = 300\n"),
            Ok(Some(Duration::from_secs(300)))
        );
        assert_eq!(
            recheck("recheck_secs = 604800\n"),
            Ok(Some(Duration::from_secs(604_800)))
        );
        let too_long = recheck("recheck_secs = 604801\n").unwrap_err();
        assert_eq!(too_long.len(), 1, "{too_long:?}");
        assert_eq!(too_long[0].0, "pin.recheck_secs");
        assert!(too_long[0].1.contains("at most 604800"), "{too_long:?}");
        // Not a number of seconds: the TOML does not parse into the section.
        assert!(Policy::from_toml_str("version = 1\n[pin]\nrecheck_secs = -1\n", "t").is_err());
        assert!(Policy::from_toml_str("version = 1\n[pin]\nrecheck_secs = \"5m\"\n", "t").is_err());
    }
}
