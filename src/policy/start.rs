//! When an upstream's server runs: `start = "eager"` (at the gateway's start, until it stops)
//! or `"lazy"` (on the first request that needs it, stopped again after `idle_stop_secs`
//! without one), per `[[upstream]]` with a default for all in `[aggregate]`; and where the
//! manifests that let a lazy upstream be listed without running are kept
//! (`[aggregate] manifest_dir`).
//!
//! ```toml
//! [aggregate]
//! start = "lazy"            # every upstream, unless its own entry says otherwise
//! idle_stop_secs = 300      # stop a lazy server after 5 minutes without requests (0: never)
//!
//! [[upstream]]
//! name = "github"
//! command = "github-mcp"
//! start = "eager"           # this one runs from the start
//! ```

use std::path::PathBuf;
use std::time::Duration;

use super::problems::{At, MAX_SECS};

/// Default `idle_stop_secs`: a lazy server without requests for five minutes is stopped.
pub const DEFAULT_IDLE_STOP: Duration = Duration::from_secs(300);

/// When an upstream's server runs (`start`, `idle_stop_secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Start {
    /// Started with the gateway and kept running (default).
    #[default]
    Eager,
    /// Started by the first request that needs it; listed meanwhile from its manifest.
    Lazy {
        /// How long it may go without requests before it is stopped (`None`: never).
        idle_stop: Option<Duration>,
    },
}

impl Start {
    /// Whether it starts on first use.
    #[must_use]
    pub fn is_lazy(self) -> bool {
        matches!(self, Self::Lazy { .. })
    }

    /// `eager` or `lazy`, as in the policy file.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Eager => "eager",
            Self::Lazy { .. } => "lazy",
        }
    }
}

/// `[aggregate]`'s `start`, `idle_stop_secs` and `manifest_dir`: what every upstream gets
/// unless its own entry says otherwise, and where manifests live.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StartDefaults {
    /// `start = "lazy"`.
    pub lazy: bool,
    /// `idle_stop_secs` (`None`: 0, never).
    pub idle_stop: Option<Duration>,
    /// `manifest_dir` as given (relative to the policy's folder); `None`: the default.
    pub manifest_dir: Option<PathBuf>,
}

/// `start` as given: `Some(true)` for `"lazy"`, `None` when not given.
fn lazy_of(value: Option<&str>, at: &mut At<'_>) -> Option<bool> {
    value.map(|v| at.one_of("start", Some(v), false, &[("eager", false), ("lazy", true)]))
}

/// `idle_stop_secs` as given: `Some(None)` for 0 (never), `None` when not given.
fn idle_of(value: Option<u64>, at: &mut At<'_>) -> Option<Option<Duration>> {
    value.map(|secs| {
        at.bounded("idle_stop_secs", Some(secs), MAX_SECS)
            .filter(|s| *s > 0)
            .map(Duration::from_secs)
    })
}

/// `[aggregate]`'s keys, checked, problems at `at` (`aggregate`).
pub(super) fn defaults(
    start: Option<&str>,
    idle_stop_secs: Option<u64>,
    manifest_dir: Option<PathBuf>,
    at: &mut At<'_>,
) -> StartDefaults {
    StartDefaults {
        lazy: lazy_of(start, at).unwrap_or(false),
        idle_stop: idle_of(idle_stop_secs, at).unwrap_or(Some(DEFAULT_IDLE_STOP)),
        manifest_dir,
    }
}

/// One `[[upstream]]`'s `start` and `idle_stop_secs` on top of `defaults`, problems at `at`
/// (the upstream).
pub(super) fn start(
    start: Option<&str>,
    idle_stop_secs: Option<u64>,
    defaults: &StartDefaults,
    at: &mut At<'_>,
) -> Start {
    let lazy = lazy_of(start, at).unwrap_or(defaults.lazy);
    let idle = idle_of(idle_stop_secs, at);
    if !lazy {
        if idle.is_some() {
            at.push_at(
                "idle_stop_secs",
                "applies to start = \"lazy\" upstreams only",
            );
        }
        return Start::Eager;
    }
    Start::Lazy {
        idle_stop: idle.unwrap_or(defaults.idle_stop),
    }
}

/// Where manifests are kept: `manifest_dir` when given, else
/// `$XDG_CACHE_HOME/mcp-budget/manifests`, else `$HOME/.cache/mcp-budget/manifests`, else none
/// (lazy upstreams start at every gateway start to learn their lists).
#[must_use]
pub fn manifest_dir(given: Option<&PathBuf>) -> Option<PathBuf> {
    given
        .cloned()
        .or_else(|| crate::files::cache_dir("manifests"))
}

#[cfg(test)]
mod tests {
    use crate::policy::{Policy, Start};
    use std::time::Duration;

    fn load(text: &str) -> Result<Policy, String> {
        Policy::from_toml_str(&format!("version = 1\n{text}"), "p").map_err(|e| e.to_string())
    }

    const UP: &str = "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n";

    #[test]
    fn start_is_eager_by_default_and_lazy_takes_the_aggregate_default() {
        let p = load(UP).unwrap();
        assert_eq!(p.upstreams[0].start, Start::Eager);
        let p = load(&format!(
            "[aggregate]\nstart = \"lazy\"\nidle_stop_secs = 9\n{UP}"
        ))
        .unwrap();
        let nine = Some(Duration::from_secs(9));
        assert_eq!(p.upstreams[0].start, Start::Lazy { idle_stop: nine });
        let p = load(&format!(
            "[aggregate]\nstart = \"lazy\"\n{UP}start = \"eager\"\n"
        ))
        .unwrap();
        assert_eq!(p.upstreams[0].start, Start::Eager);
        let p = load(&format!("{UP}start = \"lazy\"\nidle_stop_secs = 0\n")).unwrap();
        assert_eq!(p.upstreams[0].start, Start::Lazy { idle_stop: None });
        let p = load(&format!("{UP}start = \"lazy\"\n")).unwrap();
        let default = Some(super::DEFAULT_IDLE_STOP);
        assert_eq!(p.upstreams[0].start, Start::Lazy { idle_stop: default });
    }

    #[test]
    fn bad_start_values_are_named_with_their_path() {
        let err = load(&format!("{UP}start = \"sometimes\"\n")).unwrap_err();
        assert!(err.contains("upstream[0].start"), "{err}");
        let err = load(&format!("{UP}idle_stop_secs = 5\n")).unwrap_err();
        assert!(err.contains("upstream[0].idle_stop_secs"), "{err}");
        assert!(
            err.contains("start = \\\"lazy\\\"") || err.contains("lazy"),
            "{err}"
        );
        let err = load("[aggregate]\nstart = \"later\"\n").unwrap_err();
        assert!(err.contains("aggregate.start"), "{err}");
    }
}
