//! The policy: what the gateway fronts and how it shapes what hosts see.
//!
//! A policy is a TOML file (`version = 1` on top) read into [`raw::RawPolicy`] (unknown keys are
//! errors) and validated into a [`Policy`] before anything starts; every problem is reported
//! with its field path and line. Claude Desktop / Claude Code `mcpServers` JSON can be imported
//! as upstreams with [`Policy::add_mcp_json`] (written in [`crate::import`]).
//!
//! ```
//! use mcp_budget::policy::{Policy, Transport};
//!
//! let policy = Policy::from_toml_str(r#"
//! version = 1
//! [[upstream]]
//! name = "time"
//! command = "mcp-server-time"
//! args = ["--local-timezone", "UTC"]
//! "#, "inline.toml")?;
//! assert_eq!(policy.upstreams[0].name, "time");
//! assert!(matches!(policy.upstreams[0].transport, Transport::Stdio { .. }));
//! # Ok::<(), mcp_budget::policy::ConfigError>(())
//! ```

pub mod aggregate;
pub mod audit;
pub mod budget;
pub mod client;
mod diff;
pub mod discover;
pub mod downstream;
pub mod expand;
pub(crate) mod http;
pub(crate) mod in_process;
pub mod limits;
mod lines;
pub mod llm_api;
mod parse;
pub mod pin;
mod problems;
pub mod raw;
#[cfg(test)]
mod reference;
pub mod sanitize;
pub mod sessions;
pub mod share;
pub mod start;
pub mod state;
pub mod telemetry;
pub mod upstream;
mod validate;
mod warnings;

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

pub use aggregate::{ResolveNames, UnknownResolveNames};
pub use audit::AuditPolicy;
pub use budget::BudgetPolicy;
pub use diff::Reconcile;
pub use discover::{CodeMode, DEFAULT_USAGE_PRIOR, DiscoverPolicy, read_vocabulary};
pub use downstream::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    DEFAULT_MAX_JSON_DEPTH, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_OUTBOUND_MESSAGES,
    DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_CLIENT, DEFAULT_SESSION_IDLE, Downstream,
    ForwardedHeader,
};
pub use http::{HttpOptions, HttpTransport};
pub use in_process::{InProcess, MessageService, Pipes};
#[cfg(feature = "cli")]
pub(crate) use lines::bare_key;
pub(crate) use lines::path_key;
pub use pin::PinPolicy;
use problems::{At, Problems};
pub use sanitize::SanitizePolicy;
pub use start::Start;
pub use telemetry::{AdminPolicy, LogFormat, TelemetryPolicy};
pub use upstream::{
    DEFAULT_SERVER_REQUEST_TIMEOUT, DEFAULT_TIMEOUT, ServerRequests, ToolFilter, Transport,
    UpstreamProtocol, UpstreamSpec,
};

/// A `NonZeroUsize` constant.
pub(crate) const fn nonzero(n: usize) -> NonZeroUsize {
    match NonZeroUsize::new(n) {
        Some(n) => n,
        None => panic!("a default limit is not zero"),
    }
}

/// A validated policy.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Policy {
    /// How hosts reach the gateway.
    pub downstream: Downstream,
    /// Separator between server id and tool name (default `__`).
    pub separator: String,
    /// `[aggregate] manifest_dir` as given (see [`start::manifest_dir`] for the default).
    pub manifest_dir: Option<std::path::PathBuf>,
    /// Whether every upstream's manifest is saved when its lists are fetched (`pin`), not
    /// only a lazy upstream's.
    pub save_manifests: bool,
    /// What becomes of a `tools/call` of a name that resolves to a listed tool
    /// (`[aggregate] resolve_names`).
    pub resolve_names: ResolveNames,
    /// The upstream servers, in policy order.
    pub upstreams: Vec<UpstreamSpec>,
    /// `[budget]`.
    pub budget: BudgetPolicy,
    /// `[discover]`.
    pub discover: DiscoverPolicy,
    /// `[[client]]`, in policy order (none: one anonymous principal with every right).
    pub clients: Vec<client::ClientSpec>,
    /// `[auth]`.
    pub auth: client::AuthSpec,
    /// `[audit]`, when set (clients without it log to stderr).
    pub audit: Option<AuditPolicy>,
    /// `[sanitize]`.
    pub sanitize: SanitizePolicy,
    /// `[pin]` (with the lock read, once loaded).
    pub pin: PinPolicy,
    /// `[limits]`.
    pub limits: crate::limits::Limits,
    /// `[telemetry]`.
    pub telemetry: TelemetryPolicy,
    /// `[admin]`.
    pub admin: AdminPolicy,
    /// `[llm_api]`.
    pub llm_api: llm_api::LlmApiPolicy,
    /// `[sessions]`.
    pub sessions: sessions::SessionsPolicy,
    /// `[state]`.
    pub state: state::StatePolicy,
    /// `[client.upstream.<name>]`: what each client's instance of a `share = "per_client"`
    /// upstream gets on top of the upstream's settings, by (client, upstream).
    pub credentials: share::ClientCredentials,
    /// The policy file's text, so that warnings can name lines.
    source: Source,
    /// What importing host configs found worth a warning (renamed, skipped, ignored keys).
    pub(crate) import_warnings: Vec<Problem>,
}

/// A policy's file text (shown by length only in `Debug`).
#[derive(Clone, Default)]
struct Source(Option<std::sync::Arc<str>>);

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(text) => write!(f, "Source({} bytes)", text.len()),
            None => f.write_str("Source(none)"),
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            downstream: Downstream::default(),
            separator: "__".to_owned(),
            manifest_dir: None,
            save_manifests: false,
            resolve_names: ResolveNames::Route,
            upstreams: Vec::new(),
            budget: BudgetPolicy::default(),
            discover: DiscoverPolicy::default(),
            clients: Vec::new(),
            auth: client::AuthSpec::default(),
            audit: None,
            sanitize: SanitizePolicy::default(),
            pin: PinPolicy::default(),
            limits: crate::limits::Limits::default(),
            telemetry: TelemetryPolicy::default(),
            admin: AdminPolicy::default(),
            llm_api: llm_api::LlmApiPolicy::default(),
            sessions: sessions::SessionsPolicy::default(),
            state: state::StatePolicy::default(),
            credentials: share::ClientCredentials::new(),
            source: Source::default(),
            import_warnings: Vec::new(),
        }
    }
}

/// One problem found while validating a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    /// Field path, e.g. `upstream[1].command`.
    pub path: String,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    /// What is wrong, and what to do.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}: {}", self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys or wrong types.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The TOML error, with line and column.
        message: String,
    },
    /// The file parsed but has problems.
    #[error("{path}: {} problem(s):\n{}", problems.len(), problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The file.
        path: String,
        /// Every problem found.
        problems: Vec<Problem>,
    },
}

impl Policy {
    /// Reads and validates a policy file.
    ///
    /// # Errors
    /// [`ConfigError`] with every problem found.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = crate::files::read_text(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        // Relative paths in it are relative to its folder (the lockfile read from there too).
        let base = path.parent().unwrap_or_else(|| Path::new(""));
        Self::from_toml_str_at(&text, &path.display().to_string(), Some(base))
    }

    /// Reads the `[pin] lock` file, relative to `base`.
    fn read_lock(&mut self, base: &Path, origin: &str) -> Result<(), ConfigError> {
        let read = self.pin.read_lock(base);
        let mut problems = Problems::new();
        if let Err(message) = read {
            problems.root().at("pin").push_at("lock", message);
        }
        self.problems_or(problems, origin)
    }

    /// `Ok` when nothing was found, else every problem found, with its line in the file.
    fn problems_or(&self, problems: Problems, origin: &str) -> Result<(), ConfigError> {
        if problems.is_empty() {
            return Ok(());
        }
        Err(ConfigError::Invalid {
            path: origin.to_owned(),
            problems: problems.into_problems(self.source.0.as_deref().unwrap_or("")),
        })
    }

    /// Parses and validates policy text; `origin` names it in errors.
    ///
    /// # Errors
    /// [`ConfigError`] with every problem found.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, ConfigError> {
        // A lock named here is relative to the working directory.
        Self::from_toml_str_at(text, origin, Some(Path::new("")))
    }

    fn from_toml_str_at(
        text: &str,
        origin: &str,
        lock_base: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let invalid = |problems| ConfigError::Invalid {
            path: origin.to_owned(),
            problems,
        };
        let mut raw = parse::raw(text).map_err(invalid)?;
        if let Some(base) = lock_base {
            raw.rebase(base);
        }
        let mut policy = validate::validate(raw, text).map_err(invalid)?;
        if let Some(base) = lock_base {
            policy.read_lock(base, origin)?;
        }
        Ok(policy)
    }

    /// Adds upstream `name`, a server in the gateway's process ([`InProcess`]), after the
    /// policy's own upstreams: a library feature (a policy file cannot name a Rust value).
    /// Serve the policy as any other ([`crate::server::run`]); a policy file read again does
    /// not know it (serve a policy with in-process upstreams without reloads).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] when an upstream has that name already, or the name is no
    /// valid server id.
    pub fn add_in_process(&mut self, name: &str, server: InProcess) -> Result<(), ConfigError> {
        let taken = self.upstreams.iter().any(|u| u.name == name);
        let invalid = name.is_empty()
            || (!self.separator.is_empty() && name.contains(self.separator.as_str()));
        if taken || invalid {
            let message = if taken {
                format!("an upstream named {name:?} exists already")
            } else {
                format!("{name:?} is no valid server id (empty, or holding the separator)")
            };
            return Err(ConfigError::Invalid {
                path: "in-process upstreams".to_owned(),
                problems: vec![Problem {
                    path: "upstream.name".to_owned(),
                    line: None,
                    message,
                }],
            });
        }
        self.upstreams.push(UpstreamSpec::in_process(name, server));
        Ok(())
    }

    /// Resolves `${env:VAR}` / `${env:VAR:-default}` in HTTP upstreams' `url` and `headers`
    /// from the environment; a command's `env` values are left as written, for the child's
    /// start to expand (where `${VAR}` works too). `serve` calls it after loading; `check`
    /// does not, so a policy can be checked where its secrets are not set.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming every reference that is not set and has no default.
    pub fn resolve_env(&mut self) -> Result<(), ConfigError> {
        self.resolve_env_with(&|name| std::env::var(name).ok())
    }

    fn resolve_env_with(
        &mut self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        use expand::{Syntax, expand};
        let mut problems = Problems::new();
        let mut root = problems.root();
        let resolve = |value: &mut String, mut at: At<'_>| match expand(value, &Syntax::Policy, env)
        {
            Ok(v) => *value = v,
            Err(message) => at.push(message),
        };
        let mut in_upstream = root.at("upstream");
        for (i, up) in self.upstreams.iter_mut().enumerate() {
            let mut at = in_upstream.index(i);
            // A command's `env` is expanded when the child starts (`Syntax::ChildEnv`, which
            // reads `${env:VAR}` as well as `${VAR}`).
            if let Transport::Http { url, headers } = &mut up.transport {
                resolve(url, at.at("url"));
                let mut in_headers = at.at("headers");
                for (name, value) in headers.iter_mut() {
                    resolve(value, in_headers.at(name));
                }
            }
        }
        for ((client, upstream), own) in &mut self.credentials {
            // Shown as `client "alice" upstream.github.headers.X`: a client's tables are
            // named by the client, not by its index.
            let mut in_client = root.at(&format!("client {client:?} upstream"));
            let mut at = in_client.at(upstream);
            let mut in_headers = at.at("headers");
            for (name, value) in &mut own.headers {
                resolve(value, in_headers.at(name));
            }
            // `own.env`, as an upstream's own `env`, is expanded when the child starts.
        }
        self.problems_or(problems, "environment")
    }
}

#[cfg(test)]
mod env_tests {
    use super::*;

    #[test]
    fn env_references_resolve_in_url_and_headers_and_pass_to_stdio_env() {
        let text = "version = 1\n[[upstream]]\nname = \"web\"\nurl = \"https://${env:HOST:-api.example.com}/mcp\"\nheaders = { Authorization = \"Bearer ${env:TOKEN}\" }\n[[upstream]]\nname = \"gh\"\ncommand = \"x\"\nenv = { T = \"${env:TOKEN}\" }\n";
        let mut p = Policy::from_toml_str(text, "t.toml").unwrap();
        let env = |n: &str| (n == "TOKEN").then(|| "s3cret".to_owned());
        p.resolve_env_with(&env).unwrap();
        let Transport::Http { url, headers } = &p.upstreams[0].transport else {
            panic!()
        };
        assert_eq!(url, "https://api.example.com/mcp");
        assert_eq!(headers["Authorization"], "Bearer s3cret");
        let Transport::Stdio { env: vars, .. } = &p.upstreams[1].transport else {
            panic!()
        };
        assert_eq!(vars["T"], "${env:TOKEN}", "resolved when the child starts");
        let child = expand::expand(&vars["T"], &expand::Syntax::ChildEnv, &env).unwrap();
        assert_eq!(child, "s3cret");

        let mut p = Policy::from_toml_str(text, "t.toml").unwrap();
        let err = p.resolve_env_with(&|_| None).unwrap_err().to_string();
        assert!(
            err.contains("line 5: upstream[0].headers.Authorization: TOKEN is not set"),
            "{err}"
        );
    }
}
