//! The live catalog of a policy, for `inspect --policy P` and `render --policy P` without
//! `--tools`: its upstreams started through the same [`Server`] as `serve` (no downstream
//! listener, no stdio), waited for (at most `--ready-timeout-secs`), their catalog taken, and
//! every upstream stopped again (children included) before the command prints.
//!
//! An upstream that is not ready in time fails the command, naming it and why (its last
//! stderr lines for a child that exited), unless `--allow-failed` asks for the listing of the
//! others.

use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::catalog::Catalog;
use crate::gateway::UpstreamSummary;
use crate::policy::Policy;
use crate::server::Server;
use crate::upstream::Status;

/// How `inspect` and `render` treat the upstreams they start.
#[derive(Debug, Clone, clap::Args)]
pub struct LiveArgs {
    /// Seconds the upstreams get to be ready (only without --tools).
    #[arg(long, default_value_t = 30)]
    pub ready_timeout_secs: u64,
    /// Print the listing of the upstreams that started even when others failed, instead of
    /// failing (only without --tools).
    #[arg(long)]
    pub allow_failed: bool,
}

impl Default for LiveArgs {
    fn default() -> Self {
        Self {
            ready_timeout_secs: 30,
            allow_failed: false,
        }
    }
}

/// What the policy's upstreams listed, and how each started.
#[derive(Debug)]
pub struct Live {
    /// The catalog `serve` would have published.
    pub catalog: Catalog,
    /// Each upstream's status, protocol and counts.
    pub upstreams: Vec<UpstreamSummary>,
}

/// Starts `policy`'s upstreams, waits for them, takes the catalog and stops them.
///
/// # Errors
/// The runtime cannot start; an upstream was not ready in time (unless `args.allow_failed`),
/// each named with its reason.
pub fn snapshot(policy: &Policy, args: &LiveArgs) -> anyhow::Result<Live> {
    let mut policy = policy.clone();
    // Only the upstreams: nothing is served.
    policy.downstream.http = None;
    policy.downstream.stdio = false;
    // Every server runs: what is listed is what they list now, not a manifest.
    for up in &mut policy.upstreams {
        up.start = crate::policy::Start::Eager;
    }
    policy
        .resolve_env()
        .context("resolving the upstreams' ${env:…}")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let timeout = Duration::from_secs(args.ready_timeout_secs);
    let live = runtime.block_on(async move {
        let server = Server::start(policy, timeout, CancellationToken::new()).await;
        let live = Live {
            catalog: Catalog::clone(&server.catalog()),
            upstreams: server.upstreams().to_vec(),
        };
        // Waits until every child is gone.
        server.stop().await;
        live
    });
    runtime.shutdown_timeout(Duration::from_millis(100));
    let failed = failures(&live.upstreams, args.ready_timeout_secs);
    if !failed.is_empty() && !args.allow_failed {
        anyhow::bail!(
            "{} of {} upstream(s) did not start:\n{}\n(--allow-failed prints the listing of the \
             others)",
            failed.len(),
            live.upstreams.len(),
            failed.join("\n")
        );
    }
    Ok(live)
}

/// One line per upstream that is not ready: its name and why.
#[must_use]
pub fn failures(upstreams: &[UpstreamSummary], timeout_secs: u64) -> Vec<String> {
    upstreams
        .iter()
        .filter_map(|u| match &u.status {
            Status::Ready | Status::Stopped => None,
            Status::Starting => Some(format!(
                "  {}: not ready after {timeout_secs} s (--ready-timeout-secs)",
                u.name
            )),
            Status::Down(reason) => Some(format!("  {}: {reason}", u.name)),
        })
        .collect()
}
