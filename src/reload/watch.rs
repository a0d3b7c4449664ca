//! The reload loop: each trigger reads the policy again; a valid one is applied, an invalid
//! one is refused with every problem logged and the old one kept.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::{Reloaded, Reloader, Source, Trigger, triggers};
use crate::policy::{ConfigError, Policy};

/// Reloads `source` into `reloader` on every change of its files (and of the `[pin] lock`
/// the current policy names) and on `SIGHUP`, until `shutdown`. `accept` may refuse a valid
/// policy this process cannot serve (what `serve` refuses at start); the reason is logged and
/// the old policy kept.
///
/// The files and the signal are watched from this call on (so nothing between it and the
/// first poll of the loop is missed); the returned future is the loop. Every outcome is one
/// log line: `reload: started [c], stopped [a], kept 2` at INFO, or each problem (file, line,
/// field path) at WARN after `Reload refused; the running policy stays:`.
///
/// # Errors
/// The file watch or the signal handler could not be set up (nothing is reloaded then).
///
/// # Panics
/// Outside a Tokio runtime (the signal is a Tokio stream).
pub fn watch(
    source: Source,
    reloader: Reloader,
    accept: impl Fn(&Policy) -> Result<(), String> + Send + 'static,
    shutdown: CancellationToken,
) -> Result<impl std::future::Future<Output = ()> + Send, String> {
    let lock = lock_file(&source, &reloader.gateway().policy());
    let files: Vec<PathBuf> = source.files().into_iter().chain(lock).collect();
    let mut triggers = triggers(&files)?;
    Ok(async move {
        loop {
            let trigger = tokio::select! {
                t = triggers.next() => t,
                () = shutdown.cancelled() => None,
            };
            let Some(trigger) = trigger else { return };
            // The outcome is what a reload counter counts (telemetry adds it).
            let outcome = reload_once(&source, &reloader, &accept, &trigger);
            crate::telemetry::record::reload(outcome.as_str());
        }
    })
}

/// How a reload ended (the label of a reload counter: `applied`, `refused`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The new policy runs.
    Applied,
    /// The old policy stays (invalid, or not servable by this process).
    Refused,
}

impl Outcome {
    /// `applied` or `refused`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Refused => "refused",
        }
    }
}

/// One reload, logged.
fn reload_once(
    source: &Source,
    reloader: &Reloader,
    accept: &impl Fn(&Policy) -> Result<(), String>,
    trigger: &Trigger,
) -> Outcome {
    let cause = match trigger {
        Trigger::File(path) => path.display().to_string(),
        Trigger::Signal => "SIGHUP".to_owned(),
    };
    let policy = match source.load() {
        Ok(policy) => policy,
        Err(err) => {
            for line in problem_lines(&err) {
                tracing::warn!(cause, "Reload refused; the running policy stays: {line}");
            }
            return Outcome::Refused;
        }
    };
    if let Err(reason) = accept(&policy) {
        tracing::warn!(cause, "Reload refused; the running policy stays: {reason}");
        return Outcome::Refused;
    }
    for warning in policy.warnings() {
        tracing::warn!("policy: {warning}");
    }
    let plan = reloader.apply(Reloaded::new(policy));
    tracing::info!(cause, "reload: {}", plan.summary());
    if let Some(warning) = plan.restart_warning() {
        tracing::warn!(cause, "{warning}");
    }
    Outcome::Applied
}

/// One line per problem of `err`, each naming the file (and, when known, the line and the
/// field path).
#[must_use]
pub fn problem_lines(err: &ConfigError) -> Vec<String> {
    match err {
        ConfigError::Invalid { path, problems } => {
            problems.iter().map(|p| format!("{path}: {p}")).collect()
        }
        ConfigError::Read { path, source } => {
            vec![format!("cannot read {}: {source}", path.display())]
        }
        other => vec![other.to_string()],
    }
}

/// The lock file the policy pins against, as a path from the working directory (a relative
/// `[pin] lock` is relative to the policy file).
fn lock_file(source: &Source, policy: &Policy) -> Option<PathBuf> {
    let lock = policy.pin.lock_path.as_ref()?;
    let base = source.policy.as_ref().and_then(|p| p.parent());
    Some(match base {
        Some(dir) if lock.is_relative() => dir.join(lock),
        _ => lock.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_gets_a_line_with_its_file_and_line() {
        let err = Policy::from_toml_str(
            "version = 1\n[budget]\nthreshold_percent = 900\n[[upstream]]\nname = \"\"\ncommand = \"x\"\n",
            "p.toml",
        )
        .unwrap_err();
        let lines = problem_lines(&err);
        assert!(lines.len() >= 2, "{lines:?}");
        assert!(
            lines.iter().all(|l| l.starts_with("p.toml: line ")),
            "{lines:?}"
        );
    }
}
