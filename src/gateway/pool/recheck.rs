//! `[pin] recheck_secs`: every ready upstream listed again on a timer, so that a definition
//! changed without `list_changed` (a silent rug pull) is caught without a restart.
//!
//! One task per gateway, not per upstream. Each tick refreshes every current upstream that is
//! ready, all its lists, down the one path a `list_changed` takes
//! ([`Gateway::refresh_and_announce`]): fetched, compared with the catalog's, and only when
//! they differ published through the guard ([`crate::pin::admit`]: sanitized, pinned, a
//! changed definition quarantined, the audit line and the metric from the guard's journal)
//! and announced. A tick that finds nothing new publishes and announces nothing, so the lists
//! hosts see stay byte-stable.
//!
//! The cost is bounded: one listing per upstream and kind per tick, the upstreams in
//! parallel, and the next tick waits for the last one to end (a tick never overlaps itself;
//! [`MissedTickBehavior::Delay`]: a slow upstream stretches the period rather than piling
//! ticks up). Upstreams not ready are skipped; per-client instances are not listed (their
//! lists are not the catalog's, as for their `list_changed`). The period is read from the
//! policy the gateway runs, again after each reload ([`Gateway::reconcile`] wakes the task),
//! so a reload turns it on, off or changes it without a restart. Not jittered: one timer per
//! gateway does not synchronise upstreams with each other, and replicas start at different
//! times. The task ends with the gateway's shutdown.

use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::gateway::Gateway;
use crate::upstream::Status;

/// A tick every `period`, the first one `period` from now (the lists were just fetched when
/// the upstreams became ready, or when the policy that turned it on was applied).
fn ticks(period: Duration) -> Interval {
    let mut tick = tokio::time::interval_at(Instant::now() + period, period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick
}

impl Gateway {
    /// The recheck task: until shutdown, every `[pin] recheck_secs` of the current policy, every
    /// ready upstream listed again ([`Gateway::recheck_once`]).
    pub(in crate::gateway) async fn recheck(self) {
        let shutdown = self.inner.shutdown.clone();
        let mut period = None;
        let mut tick = None;
        loop {
            let now = self.policy().pin.recheck;
            if now != period {
                period = now;
                tick = period.map(ticks);
            }
            let reloaded = self.inner.reloaded.notified();
            let due = async {
                match tick.as_mut() {
                    Some(tick) => {
                        tick.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                // The policy was replaced: read the period again.
                () = reloaded => continue,
                () = due => {}
            }
            // A reload between the tick and now may have turned it off.
            if self.policy().pin.recheck.is_some() {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = self.recheck_once() => {}
                }
            }
        }
    }

    /// Lists every current, ready upstream again (all its lists, in parallel) and waits for
    /// them all.
    async fn recheck_once(&self) {
        let ready: Vec<usize> = (self.inner.pool.current().iter())
            .filter(|u| u.status() == Status::Ready)
            .map(crate::upstream::Upstream::index)
            .collect();
        tracing::debug!(
            upstreams = ready.len(),
            "Recheck: listing the upstreams again"
        );
        let refreshes = (ready.iter()).map(|&id| self.refresh_and_announce(id, None));
        futures::future::join_all(refreshes).await;
    }
}
