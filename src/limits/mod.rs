//! Limits keyed by who calls, not by session: a reconnect does not reset them, and one client's
//! flood spends only its own allowance.
//!
//! Every limit is **per client** (the principal's name; the anonymous principal is one client):
//! calls in flight (then a bounded queue, then refusal), calls per second (a token bucket with a
//! burst), and calls per second to each upstream. Concurrency per upstream, all clients
//! together, is the upstream's own `max_in_flight`. A refusal is `-32023` with
//! `error.data.retryAfterMs` (the rate-limited error of the draft SEP), never forwarded.
//!
//! This module holds the configuration and the rate decisions, pure (time is a parameter); the
//! waiting for in-flight slots is the `limit` layer's.
//!
//! ```
//! use mcp_budget::limits::{ClientLimits, Ledger, Rate};
//!
//! let limits = ClientLimits { calls_per_sec: Some(Rate::new(1.0, 2)), ..ClientLimits::default() };
//! let mut ledger = Ledger::default();
//! assert!(ledger.admit("alice", "github", &limits, 0).is_ok());
//! assert!(ledger.admit("alice", "github", &limits, 0).is_ok());
//! let refused = ledger.admit("alice", "github", &limits, 0).unwrap_err();
//! assert_eq!(refused.retry_after_ms, 1000);
//! assert!(ledger.admit("bob", "github", &limits, 0).is_ok(), "bob's own bucket");
//! ```

pub mod bucket;

use std::collections::{BTreeMap, HashMap};

pub use bucket::Bucket;

/// A rate: calls per second on average, and the burst allowed above it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Average calls per second.
    pub per_sec: f64,
    /// Calls allowed at once after a quiet spell (at least 1).
    pub burst: u32,
}

impl Rate {
    /// `per_sec` a second, bursts of `burst`.
    #[must_use]
    pub fn new(per_sec: f64, burst: u32) -> Self {
        Self {
            per_sec,
            burst: burst.max(1),
        }
    }

    /// This rate's share for one of `replicas` replicas enforcing it each on its own: the rate
    /// divided by `replicas`, and the burst too (rounded up, at least 1). Used while the
    /// shared state store is down (`[state] on_store_error = "local_share"`).
    ///
    /// ```
    /// use mcp_budget::limits::Rate;
    /// assert_eq!(Rate::new(10.0, 10).share(3), Rate::new(10.0 / 3.0, 4));
    /// assert_eq!(Rate::new(10.0, 10).share(0), Rate::new(10.0, 10), "at least one replica");
    /// ```
    #[must_use]
    pub fn share(self, replicas: usize) -> Self {
        let n = u32::try_from(replicas.max(1)).unwrap_or(u32::MAX);
        Self::new(self.per_sec / f64::from(n), self.burst.div_ceil(n))
    }

    /// The default burst for a rate: twice a second's worth, at least 1.
    #[must_use]
    pub fn default_burst(per_sec: f64) -> u32 {
        // Rates are validated positive and far below u32::MAX / 2 by the policy.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let burst = (per_sec * 2.0).ceil() as u32;
        burst.max(1)
    }
}

/// One client's limits (`[limits]` for every client, `[limits.client.NAME]` for one).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientLimits {
    /// Calls in flight at once; `None`: no limit.
    pub in_flight: Option<usize>,
    /// Calls that may wait for an in-flight slot; more are refused at once.
    pub queue: usize,
    /// Longest wait for an in-flight slot, in milliseconds.
    pub queue_ms: u64,
    /// Calls per second, all upstreams together.
    pub calls_per_sec: Option<Rate>,
    /// Calls per second to each upstream.
    pub upstream_calls_per_sec: Option<Rate>,
}

impl ClientLimits {
    /// These limits' rates shared by `replicas` replicas ([`Rate::share`]); in-flight limits
    /// are per replica already and stay as they are.
    #[must_use]
    pub fn share(&self, replicas: usize) -> Self {
        Self {
            calls_per_sec: self.calls_per_sec.map(|r| r.share(replicas)),
            upstream_calls_per_sec: self.upstream_calls_per_sec.map(|r| r.share(replicas)),
            ..self.clone()
        }
    }

    /// Whether any limit is set.
    #[must_use]
    pub fn is_limited(&self) -> bool {
        self.in_flight.is_some()
            || self.calls_per_sec.is_some()
            || self.upstream_calls_per_sec.is_some()
    }
}

/// The policy's limits: the default per client, overrides by client name, and the concurrency
/// of each upstream.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Limits {
    /// Every client's, unless overridden.
    pub default: ClientLimits,
    /// By client name.
    pub clients: BTreeMap<String, ClientLimits>,
    /// Calls in flight to each upstream (by name), all clients together.
    pub upstream_in_flight: BTreeMap<String, usize>,
}

impl Limits {
    /// Whether anything is limited (else the layer stays out of the stack).
    #[must_use]
    pub fn is_limited(&self) -> bool {
        self.default.is_limited()
            || self.clients.values().any(ClientLimits::is_limited)
            || !self.upstream_in_flight.is_empty()
    }

    /// The limits of client `name`.
    #[must_use]
    pub fn of(&self, name: &str) -> &ClientLimits {
        self.clients.get(name).unwrap_or(&self.default)
    }
}

/// Which limit refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The client's calls per second.
    ClientRate,
    /// The client's calls per second to this upstream.
    UpstreamRate,
    /// The client's calls in flight (queue full or waited too long).
    InFlight,
    /// The shared state store that keeps the rates is unavailable and `[state]
    /// on_store_error = "closed"` refuses calls meanwhile.
    StateUnavailable,
}

impl Which {
    /// The policy key that set it (for the error and the audit line).
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Self::ClientRate => "calls_per_sec",
            Self::UpstreamRate => "upstream_calls_per_sec",
            Self::InFlight => "in_flight",
            Self::StateUnavailable => "state",
        }
    }
}

/// A refused call: which limit, and when to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The limit.
    pub which: Which,
    /// Milliseconds until the call would be admitted.
    pub retry_after_ms: u64,
}

/// The token buckets of every client, and of every (client, upstream).
///
/// Bounded by the policy: clients are `[[client]]` names (or the anonymous one), upstreams
/// the policy's.
#[derive(Debug, Default)]
pub struct Ledger {
    clients: HashMap<String, Bucket>,
    upstreams: HashMap<(String, String), Bucket>,
}

impl Ledger {
    /// [`Self::admit`] for a call whose upstream may be unknown: a name the catalog does not
    /// route (`None`) is counted against the client's overall rate only.
    ///
    /// # Errors
    /// [`Refused`] with the limit and the wait.
    pub fn admit_call(
        &mut self,
        client: &str,
        upstream: Option<&str>,
        limits: &ClientLimits,
        now_ms: u64,
    ) -> Result<(), Refused> {
        match upstream {
            Some(u) => self.admit(client, u, limits, now_ms),
            None => {
                let overall = ClientLimits {
                    upstream_calls_per_sec: None,
                    ..limits.clone()
                };
                self.admit(client, "", &overall, now_ms)
            }
        }
    }

    /// Puts `bucket` as `client`'s overall bucket (`upstream` `None`) or its bucket for
    /// `upstream`; when it has one already, that one keeps at most what `bucket` holds at
    /// `now_ms`.
    pub fn seed(&mut self, client: &str, upstream: Option<&str>, bucket: Bucket, now_ms: u64) {
        let entry = match upstream {
            Some(u) => (self.upstreams).entry((client.to_owned(), u.to_owned())),
            None => return Self::seed_in(self.clients.entry(client.to_owned()), bucket, now_ms),
        };
        Self::seed_in(entry, bucket, now_ms);
    }

    fn seed_in<K>(
        entry: std::collections::hash_map::Entry<'_, K, Bucket>,
        bucket: Bucket,
        now_ms: u64,
    ) {
        use std::collections::hash_map::Entry;
        match entry {
            Entry::Occupied(mut held) => held.get_mut().at_most(&bucket, now_ms),
            Entry::Vacant(slot) => {
                slot.insert(bucket);
            }
        }
    }

    /// Admits (or refuses) a call of `client` to `upstream` at `now_ms` under `limits`. A
    /// refused call takes no token from either bucket.
    ///
    /// # Errors
    /// [`Refused`] with the limit and the wait.
    pub fn admit(
        &mut self,
        client: &str,
        upstream: &str,
        limits: &ClientLimits,
        now_ms: u64,
    ) -> Result<(), Refused> {
        let Self { clients, upstreams } = self;
        // The narrower bucket first, without taking: a call refused by the client's overall
        // rate must not spend the upstream's allowance (and the other way round).
        let upstream_bucket = limits.upstream_calls_per_sec.map(|rate| {
            upstreams
                .entry((client.to_owned(), upstream.to_owned()))
                .or_insert_with(|| Bucket::new(rate.per_sec, rate.burst, now_ms))
        });
        if let Some(bucket) = &upstream_bucket {
            let mut probe = Bucket::clone(bucket);
            probe.take(now_ms).map_err(|wait| Refused {
                which: Which::UpstreamRate,
                retry_after_ms: wait,
            })?;
        }
        if let Some(rate) = limits.calls_per_sec {
            let bucket = clients
                .entry(client.to_owned())
                .or_insert_with(|| Bucket::new(rate.per_sec, rate.burst, now_ms));
            bucket.take(now_ms).map_err(|wait| Refused {
                which: Which::ClientRate,
                retry_after_ms: wait,
            })?;
        }
        if let Some(bucket) = upstream_bucket {
            // Probed above at the same instant: there is a token.
            let _ = bucket.take(now_ms);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(client: Option<Rate>, upstream: Option<Rate>) -> ClientLimits {
        ClientLimits {
            calls_per_sec: client,
            upstream_calls_per_sec: upstream,
            ..ClientLimits::default()
        }
    }

    #[test]
    fn each_client_and_each_upstream_has_its_own_bucket() {
        let l = limited(None, Some(Rate::new(1.0, 1)));
        let mut ledger = Ledger::default();
        assert!(ledger.admit("a", "git", &l, 0).is_ok());
        assert_eq!(
            ledger.admit("a", "git", &l, 0),
            Err(Refused {
                which: Which::UpstreamRate,
                retry_after_ms: 1000
            })
        );
        assert!(ledger.admit("a", "time", &l, 0).is_ok(), "another upstream");
        assert!(ledger.admit("b", "git", &l, 0).is_ok(), "another client");
    }

    #[test]
    fn a_call_refused_by_one_bucket_spends_nothing_of_the_other() {
        // The upstream bucket barely refills: two calls in all.
        let l = limited(Some(Rate::new(1.0, 1)), Some(Rate::new(0.001, 2)));
        let mut ledger = Ledger::default();
        assert!(ledger.admit("a", "git", &l, 0).is_ok());
        assert_eq!(
            ledger.admit("a", "git", &l, 0).unwrap_err().which,
            Which::ClientRate
        );
        // Had the refused call spent the upstream's second token, this would be refused.
        assert!(ledger.admit("a", "git", &l, 1000).is_ok());
        assert_eq!(
            ledger.admit("a", "git", &l, 2000).unwrap_err().which,
            Which::UpstreamRate
        );
    }

    #[test]
    fn overrides_by_name_and_nothing_limited_by_default() {
        let mut limits = Limits::default();
        assert!(!limits.is_limited());
        limits
            .clients
            .insert("bot".into(), limited(Some(Rate::new(5.0, 5)), None));
        assert!(limits.is_limited());
        assert_eq!(limits.of("bot").calls_per_sec, Some(Rate::new(5.0, 5)));
        assert_eq!(limits.of("alice").calls_per_sec, None);
        assert_eq!(Rate::default_burst(0.2), 1);
        assert_eq!(Rate::default_burst(10.0), 20);
    }

    #[test]
    fn a_share_divides_rates_and_bursts_and_keeps_in_flight() {
        let l = ClientLimits {
            in_flight: Some(4),
            calls_per_sec: Some(Rate::new(9.0, 10)),
            upstream_calls_per_sec: Some(Rate::new(3.0, 1)),
            ..ClientLimits::default()
        };
        let third = l.share(3);
        assert_eq!(third.in_flight, Some(4));
        assert_eq!(third.calls_per_sec, Some(Rate::new(3.0, 4)));
        assert_eq!(third.upstream_calls_per_sec, Some(Rate::new(1.0, 1)));
        assert_eq!(l.share(1), l);
    }
}
