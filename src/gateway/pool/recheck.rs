//! `[pin] recheck_secs`: every ready upstream listed again on a timer, so that a definition
//! changed without `list_changed` (a silent rug pull) is caught without a restart.
//!
//! One task per gateway, not per upstream. Each tick refreshes every current upstream that is
//! ready, all its lists, down the one path a `list_changed` takes
//! (`Pool::refresh_and_announce`): fetched, compared with the catalog's, and only when
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
//! policy the gateway runs, again after each reload (`Pool::reconcile` wakes the task),
//! so a reload turns it on, off or changes it without a restart. Not jittered: one timer per
//! gateway does not synchronise upstreams with each other, and replicas start at different
//! times. The task ends with the gateway's shutdown.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// A tick every `period`, the first one `period` from now (the lists were just fetched when
/// the upstreams became ready, or when the policy that turned it on was applied).
fn ticks(period: Duration) -> Interval {
    let mut tick = tokio::time::interval_at(Instant::now() + period, period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick
}

/// The recheck loop: until `shutdown`, every `period()` (read again whenever `reloaded` is
/// told; `None`: off), `once()` lists every ready upstream again and is waited for.
pub(super) async fn run<F: Future<Output = ()>>(
    period: impl Fn() -> Option<Duration>,
    reloaded: &Notify,
    shutdown: &CancellationToken,
    once: impl Fn() -> F,
) {
    let mut current = None;
    let mut tick = None;
    loop {
        let now = period();
        if now != current {
            current = now;
            tick = current.map(ticks);
        }
        let reloaded = reloaded.notified();
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
        if period().is_some() {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = once() => {}
            }
        }
    }
}
