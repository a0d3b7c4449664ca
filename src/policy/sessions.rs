//! `[sessions]`: the key that seals 2025-era HTTP session ids (see [`crate::seal`]), so that a
//! restarted gateway or another replica serves a session without a new `initialize`.
//!
//! ```toml
//! [sessions]
//! seal_key_env = "MCP_BUDGET_SEAL_KEY"   # the variable that holds the key(s); or:
//! # seal_key_file = "/run/secrets/seal-key"
//! max_lifetime_secs = 86400              # how long an id is good after initialize
//! ```
//!
//! The policy names where the key is, never the key. Without either key, session ids are
//! random and known only to the process that issued them (today's behaviour). Idle expiry
//! stays `[downstream] session_idle_secs`.
//!
//! ```
//! use mcp_budget::policy::Policy;
//!
//! let policy = Policy::from_toml_str(
//!     "version = 1\n[sessions]\nseal_key_env = \"MCP_BUDGET_SEAL_KEY\"\n",
//!     "p.toml",
//! )?;
//! assert!(policy.sessions.seal_key.is_some());
//! assert_eq!(policy.sessions.max_lifetime.as_secs(), 86_400);
//! # Ok::<(), mcp_budget::policy::ConfigError>(())
//! ```

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::problems::{At, Section};
use super::{Policy, Problem, lines};
pub use crate::seal::Sealer;

/// Default life of a sealed session id, counted from `initialize`.
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(86_400);

/// `[sessions]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawSessions {
    /// The environment variable that holds the seal key(s), e.g. `"MCP_BUDGET_SEAL_KEY"`.
    /// Default: none (session ids are not sealed).
    pub seal_key_env: Option<String>,
    /// A file that holds the seal key(s) (absolute, or relative to the policy file).
    /// Default: none.
    pub seal_key_file: Option<PathBuf>,
    /// Seconds a sealed session id is accepted after `initialize`, by any replica. Default:
    /// 86400.
    pub max_lifetime_secs: Option<u64>,
}

/// Where the seal keys are.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SealKeySource {
    /// In this environment variable.
    Env(String),
    /// In this file.
    File(PathBuf),
}

/// `[sessions]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionsPolicy {
    /// Where the seal keys are; `None`: session ids are not sealed.
    pub seal_key: Option<SealKeySource>,
    /// How long a sealed id is accepted after `initialize` (`max_lifetime_secs`).
    pub max_lifetime: Duration,
}

impl Default for SessionsPolicy {
    fn default() -> Self {
        Self {
            seal_key: None,
            max_lifetime: DEFAULT_MAX_LIFETIME,
        }
    }
}

impl Section for RawSessions {
    type Valid = SessionsPolicy;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> SessionsPolicy {
        let seal_key = match (self.seal_key_env, self.seal_key_file) {
            (Some(_), Some(_)) => {
                at.push_at(
                    "seal_key_env",
                    "give seal_key_env or seal_key_file, not both",
                );
                None
            }
            (Some(var), None) => {
                if var.is_empty() || var.contains(['=', '\0']) {
                    at.push_at(
                        "seal_key_env",
                        format!("{var:?} is not an environment variable name"),
                    );
                }
                Some(SealKeySource::Env(var))
            }
            (None, Some(path)) => {
                if path.as_os_str().is_empty() {
                    at.push_at("seal_key_file", "must name a file");
                }
                Some(SealKeySource::File(path))
            }
            (None, None) => None,
        };
        let max_lifetime = at.parse(
            "max_lifetime_secs",
            self.max_lifetime_secs,
            |secs| match secs {
                0 => Err("must be at least 1 (leave it out for 86400)".to_owned()),
                secs if secs > super::problems::MAX_SECS => Err(format!(
                    "must be at most {} (a year)",
                    super::problems::MAX_SECS
                )),
                secs => Ok(Duration::from_secs(secs)),
            },
        );
        if self.max_lifetime_secs.is_some() && seal_key.is_none() {
            at.push_at(
                "max_lifetime_secs",
                "applies to sealed session ids only: set seal_key_env or seal_key_file",
            );
        }
        SessionsPolicy {
            seal_key,
            max_lifetime: max_lifetime.unwrap_or(DEFAULT_MAX_LIFETIME),
        }
    }
}

/// What is wrong with the seal key a policy names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SealKeyProblem {
    /// The variable is not set here (`check` warns: it may be set where the gateway runs).
    Unset(Problem),
    /// The variable or file holds no valid key, or the file cannot be read.
    Invalid(Problem),
}

impl SealKeyProblem {
    /// The problem, whichever kind.
    #[must_use]
    pub fn problem(&self) -> &Problem {
        match self {
            Self::Unset(p) | Self::Invalid(p) => p,
        }
    }
}

impl SessionsPolicy {
    /// The sealer of the keys this policy names, read from `env` or the file; `None` when the
    /// policy names no key. The field path of a problem is `sessions.<key>`.
    ///
    /// # Errors
    /// [`SealKeyProblem::Unset`] for an unset or empty variable, [`SealKeyProblem::Invalid`]
    /// for a file that cannot be read or keys that do not decode.
    pub fn sealer_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Sealer>, SealKeyProblem> {
        let problem = |field: &str, message: String| Problem {
            path: format!("sessions.{field}"),
            line: None,
            message,
        };
        let (field, text) = match &self.seal_key {
            None => return Ok(None),
            Some(SealKeySource::Env(var)) => match env(var).filter(|v| !v.trim().is_empty()) {
                Some(text) => ("seal_key_env", text),
                None => {
                    return Err(SealKeyProblem::Unset(problem(
                        "seal_key_env",
                        format!(
                            "environment variable {var} is not set (it holds the session seal \
                             key: `openssl rand -base64 32`)"
                        ),
                    )));
                }
            },
            Some(SealKeySource::File(path)) => match crate::files::read_text(path) {
                Ok(text) => ("seal_key_file", text),
                Err(e) => {
                    return Err(SealKeyProblem::Invalid(problem(
                        "seal_key_file",
                        format!("cannot read {}: {e}", path.display()),
                    )));
                }
            },
        };
        Sealer::from_text(&text)
            .map(Some)
            .map_err(|e| SealKeyProblem::Invalid(problem(field, e.to_string())))
    }
}

impl Policy {
    /// The sealer of `[sessions]`, its keys read from the environment or the key file now;
    /// `None` when the policy names no key. Problems carry their line.
    ///
    /// # Errors
    /// The [`SealKeyProblem`], when the key is unset, unreadable or does not decode.
    pub fn sealer(&self) -> Result<Option<Sealer>, SealKeyProblem> {
        self.sealer_with(&|name| std::env::var(name).ok())
    }

    fn sealer_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Sealer>, SealKeyProblem> {
        let text = self.source.0.as_deref().unwrap_or("");
        let with_line = |mut p: Problem| {
            p.line = lines::line_of(text, &p.path);
            p
        };
        self.sessions.sealer_with(env).map_err(|e| match e {
            SealKeyProblem::Unset(p) => SealKeyProblem::Unset(with_line(p)),
            SealKeyProblem::Invalid(p) => SealKeyProblem::Invalid(with_line(p)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    fn policy(section: &str) -> Result<Policy, String> {
        Policy::from_toml_str(&format!("version = 1\n[sessions]\n{section}"), "p.toml")
            .map_err(|e| e.to_string())
    }

    #[test]
    fn no_key_means_unsealed_ids() {
        let p = policy("").unwrap();
        assert_eq!(p.sessions, SessionsPolicy::default());
        assert!(p.sealer_with(&|_| None).unwrap().is_none());
    }

    #[test]
    fn the_key_comes_from_the_variable_the_policy_names() {
        let p = policy("seal_key_env = \"MCP_BUDGET_SEAL_KEY\"\nmax_lifetime_secs = 60\n").unwrap();
        assert_eq!(p.sessions.max_lifetime, Duration::from_secs(60));
        let env = |n: &str| (n == "MCP_BUDGET_SEAL_KEY").then(|| KEY.to_owned());
        assert!(p.sealer_with(&env).unwrap().is_some());
        let unset = p.sealer_with(&|_| None).unwrap_err();
        let SealKeyProblem::Unset(problem) = &unset else {
            panic!("{unset:?}")
        };
        assert_eq!(
            problem.to_string(),
            "line 3: sessions.seal_key_env: environment variable MCP_BUDGET_SEAL_KEY is not set \
             (it holds the session seal key: `openssl rand -base64 32`)"
        );
        let bad = p.sealer_with(&|_| Some("short".into())).unwrap_err();
        assert!(matches!(bad, SealKeyProblem::Invalid(_)), "{bad:?}");
        assert!(bad.problem().message.contains("seal key 1"), "{bad:?}");
    }

    #[test]
    fn a_key_file_is_read_when_the_sealer_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seal");
        let p = policy(&format!(
            "seal_key_file = {:?}\n",
            path.display().to_string()
        ))
        .unwrap();
        let missing = p.sealer_with(&|_| None).unwrap_err();
        assert!(matches!(missing, SealKeyProblem::Invalid(_)), "{missing:?}");
        assert!(missing.problem().message.starts_with("cannot read"));
        std::fs::write(&path, format!("{KEY}\n")).unwrap();
        assert!(p.sealer_with(&|_| None).unwrap().is_some());
    }

    #[test]
    fn every_problem_of_the_section_is_reported() {
        let err = policy("seal_key_env = \"A\"\nseal_key_file = \"f\"\nmax_lifetime_secs = 0\n")
            .unwrap_err();
        assert!(
            err.contains("sessions.seal_key_env: give seal_key_env or seal_key_file, not both"),
            "{err}"
        );
        assert!(
            err.contains("sessions.max_lifetime_secs: must be at least 1"),
            "{err}"
        );
        let err = policy("max_lifetime_secs = 5\n").unwrap_err();
        assert!(err.contains("applies to sealed session ids only"), "{err}");
        let err = policy("seal_key_env = \"\"\n").unwrap_err();
        assert!(err.contains("is not an environment variable name"), "{err}");
    }
}
