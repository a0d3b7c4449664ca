//! `pin`: connect to a policy's upstreams, as `serve` does, and write the lockfile of their
//! tools, prompts and resource templates ([`crate::pin::Lock`]); [`live_lock`] is also what
//! `check --lock` compares with.

use std::path::PathBuf;
use std::time::Duration;

use crate::catalog::Item;
use crate::pin::Lock;
use crate::policy::Policy;

/// Arguments of `pin`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy file whose upstreams are pinned.
    #[arg(long)]
    pub policy: PathBuf,
    /// Where the lockfile goes (default: stdout).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seconds to wait for the upstreams.
    #[arg(long, default_value_t = 30)]
    pub ready_timeout_secs: u64,
}

/// Runs `pin`, writing the lock to `--out` or `out`.
///
/// # Errors
/// When the policy does not load, an upstream is not ready in time, or the lock cannot be
/// written.
pub fn run(args: &Args, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    // `live_lock` resolves `${env:…}` as it starts the upstreams (once: a resolved value may
    // itself hold `${`).
    let policy = Policy::load(&args.policy)?;
    let lock = live_lock(&policy, Duration::from_secs(args.ready_timeout_secs))?;
    let text = lock.to_toml();
    match &args.out {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
        None => out.write_all(text.as_bytes())?,
    }
    Ok(())
}

/// The lock of what `policy`'s upstreams serve now: each is started as `serve` starts it
/// ([`super::live::snapshot`]), and its tools, prompts and resource templates, as it gives
/// them (before sanitizing), are hashed.
///
/// # Errors
/// When an upstream is not ready within `ready_timeout` (a lock without its tools would
/// quarantine them all).
pub fn live_lock(policy: &Policy, ready_timeout: Duration) -> anyhow::Result<Lock> {
    let options = super::live::LiveArgs {
        ready_timeout_secs: ready_timeout.as_secs(),
        allow_failed: false,
    };
    // Each upstream's manifest is saved as its lists are fetched (what lazy upstreams are
    // listed from).
    let mut policy = policy.clone();
    policy.save_manifests = true;
    let live = super::live::snapshot(&policy, &options)?;
    let catalog = &live.catalog;
    let lists: Vec<_> = catalog
        .upstreams()
        .iter()
        .map(|given| given.lists())
        .collect();
    let definitions = catalog.names().iter().zip(&lists).flat_map(|(server, c)| {
        [
            (Item::Tool, &c.tools),
            (Item::Prompt, &c.prompts),
            (Item::Template, &c.templates),
        ]
        .into_iter()
        .flat_map(move |(kind, list)| list.iter().map(move |d| (kind, server.as_str(), d)))
    });
    Ok(Lock::of_items(definitions))
}
