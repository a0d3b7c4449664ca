//! `on_store_error = "local_share"` (issue 50): while the store does not answer, each replica
//! decides calls with buckets of its own, each holding its share of the shared bucket (the
//! rate and burst divided by the replicas last counted), **started from what the replica last
//! knew was left** of the shared bucket, not from a full burst (nor from more than its own
//! bucket kept at the end of the last episode, refilled since); the calls it admits are owed
//! to the store and paid back when it answers again ([`super::gcra::REPAY`]), so the shared
//! bucket has not refilled unspent meanwhile. A store that flaps therefore costs the client
//! no extra burst per flap. Pure: time is a parameter (µs on the replica's clock).

use std::collections::{HashMap, HashSet};

use super::gcra::{self, Check, Debt};
use crate::limits::{Bucket, ClientLimits, Ledger, Refused, Which};

/// A replica's own buckets and what it knows and owes of the shared ones.
#[derive(Debug, Default)]
pub(super) struct Local {
    /// The buckets of this and earlier episodes.
    ledger: Ledger,
    /// The keys whose bucket was started afresh in this episode.
    started: HashSet<String>,
    /// What the store last said was left of each key's bucket, by key.
    known: HashMap<String, Known>,
    /// Calls admitted without the store, not paid back yet, by key.
    owed: HashMap<String, Owed>,
}

#[derive(Debug, Clone, Copy)]
struct Known {
    tokens: f64,
    at_us: u64,
}

#[derive(Debug, Clone, Copy)]
struct Owed {
    interval_us: u64,
    burst: u32,
    calls: u64,
    /// When the first of them was admitted.
    since_us: u64,
    /// Their TAT alone at the shared rate.
    paced_us: u64,
}

impl Local {
    /// The store answered `aheads` for `checks` at `now_us`: what is left of each bucket.
    pub(super) fn learned(&mut self, checks: &[Check], aheads: &[i64], now_us: u64) {
        for (check, &ahead) in checks.iter().zip(aheads) {
            self.know(&check.key, check.interval_us, check.burst, ahead, now_us);
        }
    }

    /// The store said at `now_us` that `key`'s TAT was `ahead_us` ahead.
    fn know(&mut self, key: &str, interval_us: u64, burst: u32, ahead_us: i64, now_us: u64) {
        let tokens = gcra::remaining(interval_us, burst, ahead_us);
        let known = Known {
            tokens,
            at_us: now_us,
        };
        self.known.insert(key.to_owned(), known);
    }

    /// An episode begins: its buckets start afresh from what is known.
    pub(super) fn begin(&mut self) {
        self.started.clear();
    }

    /// Admits (or refuses) a call of `client` to `upstream` spending `checks` under `limits`,
    /// as one of `replicas` deciding alone, at `now_us`; an admitted call is owed.
    ///
    /// A bucket new to the episode holds this replica's share of what was last known left of
    /// the shared one, less what it still owes, refilled at its share of the rate since then
    /// (of a key never heard of, its share of the burst), and no more than the bucket it had
    /// at the end of the last episode, refilled since.
    pub(super) fn admit(
        &mut self,
        client: &str,
        upstream: Option<&str>,
        checks: &[Check],
        limits: &ClientLimits,
        replicas: u32,
        now_us: u64,
    ) -> Result<(), Refused> {
        let share = limits.share(usize::try_from(replicas).unwrap_or(usize::MAX));
        let now_ms = now_us / 1000;
        for check in checks {
            if !self.started.insert(check.key.clone()) {
                continue;
            }
            let (rate, of) = if check.which == Which::UpstreamRate {
                (share.upstream_calls_per_sec, upstream)
            } else {
                (share.calls_per_sec, None)
            };
            let Some(rate) = rate else { continue };
            let bucket = match self.known.get(&check.key) {
                Some(known) => {
                    let owed = self.owed.get(&check.key).map_or(0, |o| o.calls);
                    #[allow(clippy::cast_precision_loss)] // call counts: far below 2^52
                    let tokens = known.tokens / f64::from(replicas.max(1)) - owed as f64;
                    let at_ms = (known.at_us / 1000).min(now_ms);
                    Bucket::starting_at(rate.per_sec, rate.burst, tokens, at_ms)
                }
                None => Bucket::new(rate.per_sec, rate.burst, now_ms),
            };
            self.ledger.seed(client, of, bucket, now_ms);
        }
        self.ledger.admit_call(client, upstream, &share, now_ms)?;
        for check in checks {
            let owed = self.owed.entry(check.key.clone()).or_insert(Owed {
                interval_us: check.interval_us,
                burst: check.burst,
                calls: 0,
                since_us: now_us,
                paced_us: 0,
            });
            owed.calls += 1;
            owed.paced_us = owed.paced_us.max(now_us) + check.interval_us;
        }
        Ok(())
    }

    /// What is owed at `now_us`, taken to be paid ([`Self::unpaid`] puts back what was not).
    pub(super) fn debts(&mut self, now_us: u64) -> Vec<Debt> {
        let ahead = |at: u64| {
            let signed = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
            signed(at) - signed(now_us)
        };
        (self.owed.drain())
            .map(|(key, o)| Debt {
                key,
                interval_us: o.interval_us,
                burst: o.burst,
                calls: o.calls,
                since_us: now_us.saturating_sub(o.since_us),
                paced_us: ahead(o.paced_us),
            })
            .collect()
    }

    /// `debts` taken at `now_us` were not paid: owed again, with what was owed since.
    pub(super) fn unpaid(&mut self, debts: Vec<Debt>, now_us: u64) {
        for debt in debts {
            let paced_us = now_us.saturating_add_signed(debt.paced_us);
            let since_us = now_us.saturating_sub(debt.since_us);
            let owed = self.owed.entry(debt.key).or_insert(Owed {
                interval_us: debt.interval_us,
                burst: debt.burst,
                calls: 0,
                since_us,
                paced_us,
            });
            owed.calls += debt.calls;
            owed.since_us = owed.since_us.min(since_us);
            owed.paced_us = owed.paced_us.max(paced_us);
        }
    }

    /// `debts` were paid at `now_us`, the store answering `aheads`: what is left of each.
    pub(super) fn paid(&mut self, debts: &[Debt], aheads: &[i64], now_us: u64) {
        for (debt, &ahead) in debts.iter().zip(aheads) {
            self.know(&debt.key, debt.interval_us, debt.burst, ahead, now_us);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Rate;

    const S: u64 = 1_000_000;

    fn limits() -> ClientLimits {
        ClientLimits {
            calls_per_sec: Some(Rate::new(9.0, 9)),
            ..ClientLimits::default()
        }
    }

    fn admitted(local: &mut Local, checks: &[Check], calls: usize, now_us: u64) -> usize {
        (0..calls)
            .filter(|_| (local.admit("a", None, checks, &limits(), 3, now_us)).is_ok())
            .count()
    }

    #[test]
    fn an_episode_starts_from_the_share_last_known_not_a_full_burst() {
        let checks = gcra::checks("p:", "a", None, &limits());
        let mut local = Local::default();
        assert_eq!(
            admitted(&mut local, &checks, 10, 0),
            3,
            "never heard of: a third of 9"
        );
        // The store said 3 tokens were left (TAT 6 intervals ahead), then stopped answering.
        let mut local = Local::default();
        let interval = checks[0].interval_us;
        let ahead = i64::try_from(6 * interval).unwrap();
        local.learned(&checks, &[ahead], 10 * S);
        assert_eq!(admitted(&mut local, &checks, 10, 10 * S), 1, "a third of 3");
        // A second later the share refilled at a third of the rate.
        assert_eq!(admitted(&mut local, &checks, 10, 11 * S), 3);
        let debts = local.debts(11 * S);
        assert_eq!(debts.len(), 1);
        assert_eq!(debts[0].calls, 4);
        assert_eq!(debts[0].since_us, S, "owed since the first");
        assert!(debts[0].paced_us > 0, "bunched: ahead of now");
        assert!(local.debts(11 * S).is_empty(), "taken");
    }

    #[test]
    fn what_is_not_paid_is_owed_again_and_a_new_episode_starts_from_the_payment() {
        let checks = gcra::checks("p:", "a", None, &limits());
        let mut local = Local::default();
        assert_eq!(admitted(&mut local, &checks, 2, 0), 2);
        let debts = local.debts(S);
        local.unpaid(debts, S);
        assert_eq!(admitted(&mut local, &checks, 1, 2 * S), 1);
        let debts = local.debts(2 * S);
        assert_eq!((debts[0].calls, debts[0].since_us), (3, 2 * S));
        // Paid: the store says the bucket is empty; the next episode starts from nothing.
        let empty = i64::try_from(9 * checks[0].interval_us).unwrap();
        local.paid(&debts, &[empty], 2 * S);
        local.begin();
        assert_eq!(admitted(&mut local, &checks, 5, 2 * S), 0);
    }
}
