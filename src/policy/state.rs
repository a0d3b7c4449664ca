//! `[state]`: where the state that replicas share lives (issue 34). With `backend = "redis"`,
//! every replica spends the same `[limits]` token buckets (one GCRA per key in Redis or
//! Valkey), so three replicas let a client through at its rate, not at three times it; plans
//! with the same usage counts (`[budget] usage_file`) and session promotions
//! (`promote_on_use`), so they list the same bytes; ends a session `DELETE`d on any of them;
//! and hands a client's answer to the replica whose upstream asked (see [`crate::state`]).
//!
//! ```toml
//! [state]
//! backend = "redis"                 # "memory" (default: each replica its own) or "redis"
//! url_env = "MCP_BUDGET_REDIS_URL"  # the variable that holds the redis:// or rediss:// URL
//! key_prefix = "mcp-budget:"        # default
//! timeout_ms = 25                   # longest wait for the store on a call (default 25)
//! on_store_error = "local_share"    # or "open", "closed" (default "local_share")
//! # ca_file = "redis-ca.pem"        # rediss://: trust this CA (PEM) instead of the built-in roots
//! # client_cert_file = "client.pem" # rediss:// with client certificates (mTLS), with its key:
//! # client_key_file = "client-key.pem"
//! ```
//!
//! The policy names where the URL is, never the URL (it may carry a password). Calls in flight
//! and their queues stay per replica.
//!
//! ```
//! use mcp_budget::policy::Policy;
//! use mcp_budget::policy::state::{Backend, OnStoreError};
//!
//! let policy = Policy::from_toml_str(
//!     "version = 1\n[state]\nbackend = \"redis\"\nurl_env = \"REDIS_URL\"\n",
//!     "p.toml",
//! )?;
//! let Backend::Redis(redis) = &policy.state.backend else { panic!() };
//! assert_eq!(redis.key_prefix, "mcp-budget:");
//! assert_eq!(redis.timeout.as_millis(), 25);
//! assert_eq!(redis.on_store_error, OnStoreError::LocalShare);
//! # Ok::<(), mcp_budget::policy::ConfigError>(())
//! ```

use std::time::Duration;

use serde::Deserialize;

use super::problems::{At, Section};
use super::{Policy, Problem, lines};

/// Default `[state] key_prefix`.
pub const DEFAULT_KEY_PREFIX: &str = "mcp-budget:";
/// Default `[state] timeout_ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(25);
/// The largest `[state] timeout_ms`: a call never waits longer on the store.
pub const MAX_TIMEOUT_MS: u64 = 5_000;

/// `[state]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawState {
    /// Where shared state lives: `"memory"` (each replica its own, nothing to install) or
    /// `"redis"` (Redis ≥ 6.2 or Valkey, shared by every replica). Default: `"memory"`.
    pub backend: Option<String>,
    /// With `backend = "redis"`: the environment variable that holds the store's
    /// `redis://` or `rediss://` URL (which may carry a password), e.g.
    /// `"MCP_BUDGET_REDIS_URL"`. Required for `redis`.
    pub url_env: Option<String>,
    /// With `backend = "redis"`: the prefix of every key the gateway writes. Default:
    /// `"mcp-budget:"`.
    pub key_prefix: Option<String>,
    /// With `backend = "redis"`: milliseconds a call waits for the store at most (1 to
    /// 5000); past it the call is decided by `on_store_error`. Default: 25.
    pub timeout_ms: Option<u64>,
    /// With `backend = "redis"`: what a call gets while the store fails or is too slow:
    /// `"local_share"` (each replica enforces its share, the limit divided by the replicas
    /// last seen, starting from its share of what it last knew was left and paying what it
    /// admitted back when the store answers again), `"open"` (let through) or `"closed"` (refused,
    /// `mcp_budget.state.unavailable`). Default: `"local_share"`.
    pub on_store_error: Option<String>,
    /// With a `rediss://` URL: the CA certificate(s) (PEM) the store's certificate must chain
    /// to, instead of the built-in roots; relative to the policy file's folder. Default: the
    /// built-in roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// With a `rediss://` URL: a client certificate (PEM) for a store that asks for one
    /// (`tls-auth-clients`); needs `client_key_file`. Relative to the policy file's folder.
    pub client_cert_file: Option<std::path::PathBuf>,
    /// The private key (PEM) of `client_cert_file`.
    pub client_key_file: Option<std::path::PathBuf>,
}

/// What a call gets while the store fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnStoreError {
    /// Each replica enforces its share: the limit divided by the replicas last seen.
    LocalShare,
    /// Calls are let through (no rate limit).
    Open,
    /// Calls are refused (`mcp_budget.state.unavailable`).
    Closed,
}

impl OnStoreError {
    /// The policy's name of it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::LocalShare => "local_share",
            Self::Open => "open",
            Self::Closed => "closed",
        }
    }
}

/// `[state] backend = "redis"`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisState {
    /// The environment variable that holds the URL.
    pub url_env: String,
    /// The prefix of every key.
    pub key_prefix: String,
    /// The longest wait for the store on a call.
    pub timeout: Duration,
    /// What a call gets while the store fails.
    pub on_store_error: OnStoreError,
    /// The CA (PEM) a `rediss://` store's certificate must chain to (`None`: built-in roots).
    pub ca_file: Option<std::path::PathBuf>,
    /// A client certificate and its key (PEM), for a store that asks for one.
    pub client_cert: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

/// Where shared state lives.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Backend {
    /// In each replica's memory (nothing shared).
    #[default]
    Memory,
    /// In Redis or Valkey.
    Redis(RedisState),
}

/// `[state]`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StatePolicy {
    /// Where shared state lives.
    pub backend: Backend,
}

impl Section for RawState {
    type Valid = StatePolicy;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> StatePolicy {
        let redis = at.one_of(
            "backend",
            self.backend.as_deref(),
            false,
            &[("memory", false), ("redis", true)],
        );
        let on_store_error = at.one_of(
            "on_store_error",
            self.on_store_error.as_deref(),
            OnStoreError::LocalShare,
            &[
                ("local_share", OnStoreError::LocalShare),
                ("open", OnStoreError::Open),
                ("closed", OnStoreError::Closed),
            ],
        );
        let timeout = at.parse("timeout_ms", self.timeout_ms, |ms| {
            if (1..=MAX_TIMEOUT_MS).contains(&ms) {
                Ok(Duration::from_millis(ms))
            } else {
                Err(format!(
                    "must be 1 to {MAX_TIMEOUT_MS} (leave it out for 25)"
                ))
            }
        });
        if let Some(prefix) = &self.key_prefix {
            // A brace in the prefix would move the Redis Cluster hash tag off the principal.
            if prefix.contains(['{', '}']) {
                at.push_at("key_prefix", "must not contain `{` or `}`");
            }
        }
        if !redis {
            for (key, given) in [
                ("url_env", self.url_env.is_some()),
                ("key_prefix", self.key_prefix.is_some()),
                ("timeout_ms", self.timeout_ms.is_some()),
                ("on_store_error", self.on_store_error.is_some()),
                ("ca_file", self.ca_file.is_some()),
                ("client_cert_file", self.client_cert_file.is_some()),
                ("client_key_file", self.client_key_file.is_some()),
            ] {
                if given {
                    at.push_at(key, "applies to backend = \"redis\" only");
                }
            }
            return StatePolicy::default();
        }
        super::http::tls_files(
            &mut at,
            self.ca_file.as_deref(),
            self.client_cert_file.as_deref(),
            self.client_key_file.as_deref(),
        );
        let url_env = url_env(self.url_env, &mut at);
        StatePolicy {
            backend: Backend::Redis(RedisState {
                url_env,
                key_prefix: self
                    .key_prefix
                    .unwrap_or_else(|| DEFAULT_KEY_PREFIX.to_owned()),
                timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
                on_store_error,
                ca_file: self.ca_file,
                client_cert: self.client_cert_file.zip(self.client_key_file),
            }),
        }
    }
}

/// `url_env` as written: required with `redis`, a variable name.
fn url_env(var: Option<String>, at: &mut At<'_>) -> String {
    match var {
        None => {
            at.push_at(
                "url_env",
                "required with backend = \"redis\": the environment variable that holds \
                     the redis:// or rediss:// URL",
            );
            String::new()
        }
        Some(var) => {
            if var.is_empty() || var.contains(['=', '\0']) {
                at.push_at(
                    "url_env",
                    format!("{var:?} is not an environment variable name"),
                );
            }
            var
        }
    }
}

impl StatePolicy {
    /// The store's URL, read from `env` by the variable the policy names; `None` for
    /// `backend = "memory"`. The field path of a problem is `state.url_env`.
    ///
    /// # Errors
    /// A [`Problem`] when the variable is unset or empty, or holds no `redis://` or `rediss://`
    /// URL (the message never shows the value: it may carry a password).
    pub fn url_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<String>, Problem> {
        let Backend::Redis(redis) = &self.backend else {
            return Ok(None);
        };
        let problem = |message: String| Problem {
            path: "state.url_env".to_owned(),
            line: None,
            message,
        };
        let var = &redis.url_env;
        let Some(url) = env(var).filter(|v| !v.trim().is_empty()) else {
            return Err(problem(format!(
                "environment variable {var} is not set (it holds the redis:// or rediss:// URL \
                 of the shared state store)"
            )));
        };
        let url = url.trim().to_owned();
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(problem(format!(
                "environment variable {var} holds no redis:// or rediss:// URL"
            )));
        }
        Ok(Some(url))
    }
}

impl Policy {
    /// The shared state store's URL, read from the environment now; `None` for `backend =
    /// "memory"`. Problems carry their line.
    ///
    /// # Errors
    /// The problem, when the variable is unset or holds no Redis URL.
    pub fn state_url(&self) -> Result<Option<String>, Problem> {
        self.state_url_with(&|name| std::env::var(name).ok())
    }

    fn state_url_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<String>, Problem> {
        let text = self.source.0.as_deref().unwrap_or("");
        self.state.url_with(env).map_err(|mut p| {
            p.line = lines::line_of(text, &p.path);
            p
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(section: &str) -> Result<Policy, String> {
        Policy::from_toml_str(&format!("version = 1\n[state]\n{section}"), "p.toml")
            .map_err(|e| e.to_string())
    }

    #[test]
    fn memory_is_the_default_and_reads_no_variable() {
        let p = policy("").unwrap();
        assert_eq!(p.state, StatePolicy::default());
        assert_eq!(p.state.backend, Backend::Memory);
        assert_eq!(p.state_url_with(&|_| panic!("not read")), Ok(None));
        let p = policy("backend = \"memory\"\n").unwrap();
        assert_eq!(p.state.backend, Backend::Memory);
    }

    #[test]
    fn redis_keys_and_their_defaults() {
        let p = policy(
            "backend = \"redis\"\nurl_env = \"R\"\nkey_prefix = \"gw:\"\ntimeout_ms = 5000\n\
             on_store_error = \"closed\"\n",
        )
        .unwrap();
        let Backend::Redis(r) = &p.state.backend else {
            panic!("{:?}", p.state)
        };
        assert_eq!(r.url_env, "R");
        assert_eq!(r.key_prefix, "gw:");
        assert_eq!(r.timeout, Duration::from_secs(5));
        assert_eq!(r.on_store_error, OnStoreError::Closed);
        assert_eq!(OnStoreError::Open.name(), "open");
    }

    #[test]
    fn the_url_comes_from_the_variable_and_a_missing_one_is_a_problem() {
        let p = policy("backend = \"redis\"\nurl_env = \"MCP_BUDGET_REDIS_URL\"\n").unwrap();
        let env = |n: &str| (n == "MCP_BUDGET_REDIS_URL").then(|| "redis://127.0.0.1:6379".into());
        assert_eq!(
            p.state_url_with(&env),
            Ok(Some("redis://127.0.0.1:6379".to_owned()))
        );
        let unset = p.state_url_with(&|_| None).unwrap_err();
        assert_eq!(
            unset.to_string(),
            "line 4: state.url_env: environment variable MCP_BUDGET_REDIS_URL is not set (it \
             holds the redis:// or rediss:// URL of the shared state store)"
        );
        let secret = "http://user:hunter2@host";
        let wrong = p.state_url_with(&|_| Some(secret.into())).unwrap_err();
        assert!(wrong.message.contains("no redis://"), "{wrong}");
        assert!(
            !wrong.message.contains("hunter2"),
            "the value is never shown"
        );
    }

    #[test]
    fn every_problem_of_the_section_is_reported() {
        let err = policy(
            "backend = \"redis\"\ntimeout_ms = 0\non_store_error = \"maybe\"\nkey_prefix = \"{x}\"\n",
        )
        .unwrap_err();
        for expected in [
            "state.url_env: required with backend = \"redis\"",
            "state.timeout_ms: must be 1 to 5000",
            "state.on_store_error: \"maybe\" is not one of \"local_share\", \"open\", \"closed\"",
            "state.key_prefix: must not contain",
        ] {
            assert!(err.contains(expected), "{expected} in {err}");
        }
        let err = policy("backend = \"disk\"\n").unwrap_err();
        assert!(
            err.contains("state.backend: \"disk\" is not one of \"memory\", \"redis\""),
            "{err}"
        );
        let err = policy("url_env = \"R\"\ntimeout_ms = 30\n").unwrap_err();
        assert!(
            err.contains("state.url_env: applies to backend = \"redis\" only")
                && err.contains("state.timeout_ms: applies to backend = \"redis\" only"),
            "{err}"
        );
        let err =
            policy("backend = \"redis\"\nurl_env = \"A=B\"\ntimeout_ms = 5001\n").unwrap_err();
        assert!(err.contains("is not an environment variable name"), "{err}");
        assert!(err.contains("state.timeout_ms: must be 1 to 5000"), "{err}");
    }
}
