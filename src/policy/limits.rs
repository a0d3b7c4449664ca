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

use crate::limits::{ClientLimits, Limits, Rate};

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

impl RawLimits {
    /// Validates the section against the policy's `clients` and `upstreams` names, pushing
    /// problems as `(field path, message)`.
    pub(crate) fn validate(
        self,
        clients: &[&str],
        upstreams: &[&str],
        problems: &mut Vec<(String, String)>,
    ) -> Limits {
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
        let default = own.validate("limits", &base, problems);
        let mut by_client = BTreeMap::new();
        for (name, raw) in self.client {
            let path = format!("limits.client.{name}");
            if !clients.contains(&name.as_str()) {
                problems.push((
                    path.clone(),
                    format!(
                        "{name:?} is no [[client]] of this policy (clients: {})",
                        list(clients)
                    ),
                ));
            }
            let limits = raw.validate(&path, &default, problems);
            by_client.insert(name, limits);
        }
        let mut upstream_in_flight = BTreeMap::new();
        for (name, raw) in self.upstream {
            let path = format!("limits.upstream.{name}");
            if !upstreams.contains(&name.as_str()) {
                problems.push((
                    path.clone(),
                    format!(
                        "{name:?} is no [[upstream]] of this policy (upstreams: {})",
                        list(upstreams)
                    ),
                ));
            }
            match raw.in_flight {
                Some(0) => problems.push((
                    format!("{path}.in_flight"),
                    "must be at least 1 (leave it out for no limit)".into(),
                )),
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

impl RawClientLimits {
    fn validate(
        self,
        path: &str,
        base: &ClientLimits,
        problems: &mut Vec<(String, String)>,
    ) -> ClientLimits {
        let mut positive = |key: &str, ok: bool| {
            if !ok {
                problems.push((
                    format!("{path}.{key}"),
                    "must be greater than 0 (leave it out for no limit)".into(),
                ));
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
            queue_ms: self.queue_ms.filter(|ms| *ms > 0).unwrap_or(base.queue_ms),
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

    fn parse(text: &str) -> RawLimits {
        toml::from_str(text).expect("toml")
    }

    #[test]
    fn defaults_overrides_and_upstreams() {
        let mut problems = Vec::new();
        let limits = parse(
            "in_flight = 8\ncalls_per_sec = 10\n[client.bot]\ncalls_per_sec = 2\n\
             [upstream.github]\nin_flight = 4\n",
        )
        .validate(&["bot", "alice"], &["github"], &mut problems);
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
        let mut problems = Vec::new();
        let _ = parse(
            "in_flight = 0\ncalls_per_sec = -1\nburst = 0\n[client.nobody]\nqueue_ms = 0\n\
             [upstream.gone]\nin_flight = 0\n",
        )
        .validate(&["alice"], &["time"], &mut problems);
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
        let mut problems = Vec::new();
        let limits = RawLimits::default().validate(&[], &[], &mut problems);
        assert!(problems.is_empty() && !limits.is_limited());
    }
}
