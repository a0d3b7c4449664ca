//! `[audit]`: where the audit log goes and what it shows of arguments.

use std::path::PathBuf;

use serde::Deserialize;

use super::problems::{At, Section};

/// `[audit]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawAudit {
    /// File the lines are appended to. Default: stderr.
    pub path: Option<PathBuf>,
    /// Log call arguments. Default: false.
    #[serde(default)]
    pub log_arguments: bool,
    /// Argument members never logged (with `log_arguments`). Default: none.
    #[serde(default)]
    pub redact: Vec<String>,
}

/// `[audit]`, validated: what the audit log (`crate::audit`) is started with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditPolicy {
    /// Where lines are appended (`None`: stderr).
    pub path: Option<PathBuf>,
    /// Log the call's arguments.
    pub log_arguments: bool,
    /// Argument members whose values are never logged.
    pub redact: Vec<String>,
}

impl Section for RawAudit {
    type Valid = AuditPolicy;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> AuditPolicy {
        if self.path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            at.push_at("path", "must name a file (leave it out for stderr)");
        }
        for (i, key) in self.redact.iter().enumerate() {
            if key.trim().is_empty() {
                (at.at("redact").index(i)).push("must name a member");
            }
        }
        if !self.redact.is_empty() && !self.log_arguments {
            at.push_at(
                "redact",
                "redacts nothing: arguments are not logged unless log_arguments = true",
            );
        }
        AuditPolicy {
            path: self.path,
            log_arguments: self.log_arguments,
            redact: self.redact,
        }
    }
}
