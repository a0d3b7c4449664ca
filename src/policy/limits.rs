//! `[limits]`: what each client may spend (see [`crate::limits`]).
//!
//! ```toml
//! [limits]                        # every client's, each on its own
//! in_flight = 8                   # calls at once (default: no limit)
//! queue = 64                      # calls waiting for a slot, more are refused (default 64)
//! queue_ms = 10000                # longest wait for a slot (default 10000)
//! calls_per_sec = 20              # token bucket, all upstreams (default: no limit)
//! burst = 40                      # default: twice calls_per_sec
//! upstream_calls_per_sec = 5      # per (client, upstream) (default: no limit)
//! upstream_burst = 10             # default: twice upstream_calls_per_sec
//!
//! [limits.client.batch-bot]       # one client's own (keys not given: [limits]'s)
//! calls_per_sec = 2
//!
//! [limits.upstream.github]        # one upstream, all clients together
//! in_flight = 4
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use super::problems::{At, Section};
/// The `[limits]` section as the limit layer applies it ([`crate::layer::limit`]).
pub use crate::limits::{ClientLimits, Limits, Rate};

/// Default `[limits] queue`.
pub const DEFAULT_QUEUE: usize = 64;
/// Default `[limits] queue_ms`.
pub const DEFAULT_QUEUE_MS: u64 = 10_000;

/// One client's keys as written (`[limits]` and `[limits.client.NAME]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawClientLimits {
    /// Calls in flight at once. Default: no limit.
    pub in_flight: Option<usize>,
    /// Calls waiting for an in-flight slot. Default: 64.
    pub queue: Option<usize>,
    /// Longest wait for a slot, milliseconds. Default: 10000.
    pub queue_ms: Option<u64>,
    /// Calls per second, all upstreams together. Default: no limit.
    pub calls_per_sec: Option<f64>,
    /// Burst above `calls_per_sec`. Default: twice it.
    pub burst: Option<u32>,
    /// Calls per second to each upstream. Default: no limit.
    pub upstream_calls_per_sec: Option<f64>,
    /// Burst above `upstream_calls_per_sec`. Default: twice it.
    pub upstream_burst: Option<u32>,
}

/// `[limits.upstream.NAME]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawUpstreamLimits {
    /// Calls in flight to this upstream, all clients together.
    pub in_flight: Option<usize>,
}

/// `[limits]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawLimits {
    /// See [`RawClientLimits::in_flight`].
    pub in_flight: Option<usize>,
    /// See [`RawClientLimits::queue`].
    pub queue: Option<usize>,
    /// See [`RawClientLimits::queue_ms`].
    pub queue_ms: Option<u64>,
    /// See [`RawClientLimits::calls_per_sec`].
    pub calls_per_sec: Option<f64>,
    /// See [`RawClientLimits::burst`].
    pub burst: Option<u32>,
    /// See [`RawClientLimits::upstream_calls_per_sec`].
    pub upstream_calls_per_sec: Option<f64>,
    /// See [`RawClientLimits::upstream_burst`].
    pub upstream_burst: Option<u32>,
    /// One client's overrides, by `[[client]]` name.
    #[serde(default)]
    pub client: BTreeMap<String, RawClientLimits>,
    /// One upstream's concurrency, by upstream name.
    #[serde(default)]
    pub upstream: BTreeMap<String, RawUpstreamLimits>,
}

/// The names `[limits]` tables may be written under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Names<'a> {
    /// The `[[client]]` names (`anonymous` when there are none).
    pub(crate) clients: &'a [&'a str],
    /// The `[[upstream]]` names.
    pub(crate) upstreams: &'a [&'a str],
}

impl Section for RawLimits {
    type Valid = Limits;
    type Context<'c> = Names<'c>;

    fn validate(self, names: Names<'_>, mut at: At<'_>) -> Limits {
        let own = RawClientLimits {
            in_flight: self.in_flight,
            queue: self.queue,
            queue_ms: self.queue_ms,
            calls_per_sec: self.calls_per_sec,
            burst: self.burst,
            upstream_calls_per_sec: self.upstream_calls_per_sec,
            upstream_burst: self.upstream_burst,
        };
        let base = ClientLimits {
            queue: DEFAULT_QUEUE,
            queue_ms: DEFAULT_QUEUE_MS,
            ..ClientLimits::default()
        };
        let default = own.validate(&base, at.reborrow());
        let mut by_client = BTreeMap::new();
        let mut in_clients = at.at("client");
        for (name, raw) in self.client {
            let mut at = in_clients.at(&name);
            if !names.clients.contains(&name.as_str()) {
                at.push(format!(
                    "{name:?} is no [[client]] of this policy (clients: {})",
                    list(names.clients)
                ));
            }
            let limits = raw.validate(&default, at);
            by_client.insert(name, limits);
        }
        let mut upstream_in_flight = BTreeMap::new();
        let mut in_upstreams = at.at("upstream");
        for (name, raw) in self.upstream {
            let mut at = in_upstreams.at(&name);
            if !names.upstreams.contains(&name.as_str()) {
                at.push(format!(
                    "{name:?} is no [[upstream]] of this policy (upstreams: {})",
                    list(names.upstreams)
                ));
            }
            match raw.in_flight {
                Some(0) => at.push_at(
                    "in_flight",
                    "must be at least 1 (leave it out for no limit)",
                ),
                Some(n) => {
                    upstream_in_flight.insert(name, n);
                }
                None => {}
            }
        }
        Limits {
            default,
            clients: by_client,
            upstream_in_flight,
        }
    }
}

impl Section for RawClientLimits {
    type Valid = ClientLimits;
    /// What is not written is taken from here (`[limits]` for a client's own table).
    type Context<'c> = &'c ClientLimits;

    fn validate(self, base: &ClientLimits, mut at: At<'_>) -> ClientLimits {
        let mut positive = |key: &str, ok: bool| {
            if !ok {
                at.push_at(key, "must be greater than 0 (leave it out for no limit)");
            }
        };
        if let Some(n) = self.in_flight {
            positive("in_flight", n > 0);
        }
        if let Some(ms) = self.queue_ms {
            positive("queue_ms", ms > 0);
        }
        for (key, rate) in [
            ("calls_per_sec", self.calls_per_sec),
            ("upstream_calls_per_sec", self.upstream_calls_per_sec),
        ] {
            if let Some(r) = rate {
                positive(key, r.is_finite() && r > 0.0 && r <= 1e6);
            }
        }
        for (key, burst) in [
            ("burst", self.burst),
            ("upstream_burst", self.upstream_burst),
        ] {
            if let Some(b) = burst {
                positive(key, b > 0);
            }
        }
        let queue_ms = at.bounded("queue_ms", self.queue_ms, super::problems::MAX_MS);
        let rate = |per_sec: Option<f64>, burst: Option<u32>, base: Option<Rate>| match per_sec {
            Some(r) => Some(Rate::new(
                r,
                burst.unwrap_or_else(|| Rate::default_burst(r)),
            )),
            None => base.map(|b| Rate::new(b.per_sec, burst.unwrap_or(b.burst))),
        };
        ClientLimits {
            in_flight: self.in_flight.filter(|n| *n > 0).or(base.in_flight),
            queue: self.queue.unwrap_or(base.queue),
            queue_ms: queue_ms.filter(|ms| *ms > 0).unwrap_or(base.queue_ms),
            calls_per_sec: rate(self.calls_per_sec, self.burst, base.calls_per_sec),
            upstream_calls_per_sec: rate(
                self.upstream_calls_per_sec,
                self.upstream_burst,
                base.upstream_calls_per_sec,
            ),
        }
    }
}

fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::problems::Problems;

    fn names<'a>(clients: &'a [&'a str], upstreams: &'a [&'a str]) -> Names<'a> {
        Names { clients, upstreams }
    }

    fn parse(text: &str) -> RawLimits {
        toml::from_str(text).expect("toml")
    }

    #[test]
    fn defaults_overrides_and_upstreams() {
        let mut problems = Problems::new();
        let limits = parse(
            "in_flight = 8\ncalls_per_sec = 10\n[client.bot]\ncalls_per_sec = 2\n\
             [upstream.github]\nin_flight = 4\n",
        )
        .validate(
            names(&["bot", "alice"], &["github"]),
            problems.root().at("limits"),
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(limits.default.in_flight, Some(8));
        assert_eq!(limits.default.calls_per_sec, Some(Rate::new(10.0, 20)));
        assert_eq!(limits.default.queue, DEFAULT_QUEUE);
        let bot = limits.of("bot");
        assert_eq!(bot.calls_per_sec, Some(Rate::new(2.0, 4)));
        assert_eq!(bot.in_flight, Some(8), "inherited from [limits]");
        assert_eq!(limits.upstream_in_flight.get("github"), Some(&4));
        assert!(limits.is_limited());
    }

    #[test]
    fn every_problem_is_named() {
        let mut found = Problems::new();
        let _ = parse(
            "in_flight = 0\ncalls_per_sec = -1\nburst = 0\n[client.nobody]\nqueue_ms = 0\n\
             [upstream.gone]\nin_flight = 0\n",
        )
        .validate(names(&["alice"], &["time"]), found.root().at("limits"));
        let problems = found.pairs();
        let paths: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "limits.in_flight",
                "limits.calls_per_sec",
                "limits.burst",
                "limits.client.nobody",
                "limits.client.nobody.queue_ms",
                "limits.upstream.gone",
                "limits.upstream.gone.in_flight",
            ]
        );
        assert!(problems[3].1.contains("clients: alice"), "{problems:?}");
    }

    #[test]
    fn nothing_written_limits_nothing() {
        let mut problems = Problems::new();
        let limits = RawLimits::default().validate(names(&[], &[]), problems.root());
        assert!(problems.is_empty() && !limits.is_limited());
    }
}
