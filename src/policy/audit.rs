//! `[audit]`: where the audit log goes and what it shows of arguments.

use std::path::PathBuf;

use serde::Deserialize;

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

impl RawAudit {
    /// Validates; problems as (path, message).
    pub(crate) fn validate(&self, problems: &mut Vec<(String, String)>) -> crate::audit::Config {
        if self.path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            problems.push((
                "audit.path".into(),
                "must name a file (leave it out for stderr)".into(),
            ));
        }
        for (i, key) in self.redact.iter().enumerate() {
            if key.trim().is_empty() {
                problems.push((format!("audit.redact[{i}]"), "must name a member".into()));
            }
        }
        if !self.redact.is_empty() && !self.log_arguments {
            problems.push((
                "audit.redact".into(),
                "redacts nothing: arguments are not logged unless log_arguments = true".into(),
            ));
        }
        crate::audit::Config {
            path: self.path.clone(),
            log_arguments: self.log_arguments,
            redact: self.redact.clone(),
        }
    }
}
