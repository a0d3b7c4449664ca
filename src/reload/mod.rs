//! Hot reload: the policy's files are read again on change (watched) and on `SIGHUP`; a new
//! policy that validates replaces the old one atomically and the running gateway is reconciled
//! with it, one that does not is refused with every problem logged and the old one kept.
//!
//! The pieces: [`Source`] remembers how `serve` built its policy (the TOML file, the host
//! configs it imported, the command-line overrides) and builds it again the same way;
//! [`Reconcile`] is the pure decision of what a new policy changes; [`triggers`] turns file
//! events and signals into reload requests; [`Reloader`] applies a new policy to a running
//! gateway (upstreams reconciled, the stack rebuilt and swapped in through a [`Swap`]);
//! [`watch`](fn@watch) is the loop of all that, with its outcome logged.

mod apply;
mod swap;
mod trigger;
mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;

pub use crate::policy::Reconcile;
pub use apply::{Reloaded, Reloader};
pub use swap::Swap;
pub use trigger::{QUIET, Trigger, Triggers, triggers};
pub use watch::{Outcome, problem_lines, watch};

use crate::policy::{ConfigError, Policy};

/// How a policy was built, so that a reload builds it the same way.
///
/// ```
/// use mcp_budget::reload::Source;
///
/// let dir = std::env::temp_dir().join(format!("mcp-budget-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let file = dir.join("policy.toml");
/// std::fs::write(&file, "version = 1\n[[upstream]]\nname = \"a\"\ncommand = \"a\"\n").unwrap();
/// let source = Source { policy: Some(file.clone()), ..Source::default() };
/// assert_eq!(source.load().unwrap().upstreams.len(), 1);
/// assert_eq!(source.files(), [file]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// The policy file (`--policy`), if any.
    pub policy: Option<PathBuf>,
    /// Host configs whose servers become upstreams (`--mcp-json`), in order.
    pub mcp_json: Vec<PathBuf>,
    /// `--stdio`: serve on stdio whatever the policy says.
    pub stdio: bool,
    /// `--http ADDR`: overrides the policy's listen address.
    pub http: Option<SocketAddr>,
    /// The server and budget flags of the command line (`-- COMMAND`, `--url`, `--level`…),
    /// merged last.
    pub inline: crate::import::inline::Inline,
}

impl Source {
    /// Reads and validates the policy: the file, then each host config, then `${env:…}`
    /// references, then the command-line overrides.
    ///
    /// # Errors
    /// [`ConfigError`] with every problem of the first file that has some.
    pub fn load(&self) -> Result<Policy, ConfigError> {
        let mut policy = match &self.policy {
            Some(path) => Policy::load(path)?,
            None => Policy::default(),
        };
        for file in &self.mcp_json {
            policy.add_mcp_json(file)?;
        }
        policy.add_inline(&self.inline)?;
        if self.policy.is_none() {
            policy.shape_like_compressor(&self.inline, self.lone_server());
        }
        policy.resolve_env()?;
        if self.stdio {
            policy.downstream.stdio = true;
        }
        if self.http.is_some() {
            policy.downstream.http = self.http;
        }
        Ok(policy)
    }

    /// What the command line's mcp-compressor flags changed in the exposure
    /// ([`Policy::shape_like_compressor`]), for the startup summary; `None` with a policy file.
    #[must_use]
    pub fn dropin_note(&self) -> Option<String> {
        if self.policy.is_some() {
            return None;
        }
        Policy::default().shape_like_compressor(&self.inline, self.lone_server())
    }

    /// Whether the command line's one server (`-- COMMAND` or `--url`) is the whole
    /// configuration: no `--policy`, no `--mcp-json`.
    #[must_use]
    pub fn lone_server(&self) -> bool {
        self.policy.is_none() && self.mcp_json.is_empty() && self.inline.has_server()
    }

    /// The files a reload reads: the ones worth watching.
    #[must_use]
    pub fn files(&self) -> Vec<PathBuf> {
        self.policy.iter().chain(&self.mcp_json).cloned().collect()
    }
}
