//! The offline commands: `check` (policies), and `inspect`, `render`, `search` that work on saved
//! `tools/list` results (`inspect` and `render` also on a policy's live upstreams, [`live`]).
//! Built with the default `cli` feature.

use std::path::PathBuf;

use crate::tokens::Rendering;

pub mod calibrate;
pub mod check;
pub mod eval;
pub mod init;
pub mod inspect;
pub mod live;
pub mod pin;
pub mod render;
pub mod report;
pub mod search;

/// What `inspect` and `render` read: saved tool lists, a policy, the host.
#[derive(Debug, clap::Args)]
pub struct CatalogArgs {
    /// Saved tools/list results (a file's stem is the server id: a file named after a
    /// `[[upstream]]` of the policy stands for it), or directories of them. Without them,
    /// `--policy`'s upstreams are started, listed and stopped.
    #[arg(long = "tools", required_unless_present = "policy", num_args = 1..)]
    pub tools: Vec<PathBuf>,
    /// Policy file: its `[budget]`, `[discover]` and separator, and its `[[upstream]]` names
    /// (their order, `volatile`), so that the output is what `serve` on it would list.
    /// Without `--tools`, its upstreams are started, listed and stopped.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Host model (overrides the policy's), e.g. claude-haiku-4-5, gpt-4o.
    #[arg(long)]
    pub model: Option<String>,
    /// Host rendering (overrides the model's): openai, anthropic or raw.
    #[arg(long)]
    pub rendering: Option<Rendering>,
    /// Upstreams started from the policy (no `--tools`): how long they get to be ready.
    #[command(flatten)]
    pub live: live::LiveArgs,
}
