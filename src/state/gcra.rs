//! The shared rate check: which keys a call spends, the Lua script that spends them in one
//! round trip, and what its answer means. Pure (no I/O): the connection is `super::conn`'s.
//!
//! One GCRA (generic cell rate algorithm) per key: the key holds the *theoretical arrival
//! time* (TAT) of the next call in microseconds of the server's clock (`TIME`), so every
//! replica measures time on the same clock. A call at `now` passes a key of emission interval
//! `T` (a second over the rate) and burst `B` when `max(TAT, now) + T - B·T <= now`; then the
//! key's TAT becomes `max(TAT, now) + T`, kept for as long as it matters (`PX`). That is the
//! token bucket of [`crate::limits::Bucket`] (burst `B` after a quiet spell, then one call per
//! `T`) in one number per key. The script checks every key first and writes only when all
//! pass: a call refused by one key spends none. It answers each key's TAT ahead of now too, so
//! that the replica knows what is left of every bucket when the store stops answering.
//!
//! **Paying back**: the calls a replica admitted on its own while the store did not answer
//! (`on_store_error = "local_share"`) are spent in the store when it answers again
//! ([`REPAY`]): `n` calls move a key's TAT to `max(TAT, since) + n·T`, `since` being when the
//! replica began deciding alone (the calls were spread over that time, not all made now), and
//! at least to the TAT of those calls alone at the shared rate (calls bunched at the end of
//! the episode are not spread out). A key's debt past an empty bucket is capped at one burst:
//! a replica cut off from the store for long, while the others kept spending, makes its
//! client wait at most one more burst's refill.

use crate::limits::{ClientLimits, Rate, Refused, Which};

/// The script: `KEYS` the buckets, `ARGV` an emission interval (µs) and a burst per key, then
/// the deadline (µs of the server's clock, 0: none) past which the caller no longer waits.
/// Answers `{1, 0, 0, now, ahead…}` (admitted) or `{0, i, wait_us, now, ahead…}`: refused, `i`
/// the first key (1-based) that refused, `wait_us` until every key would pass; `now` the
/// server's clock (µs); `ahead` each key's TAT ahead of now (µs) after the call, what is left
/// of its bucket ([`remaining`]). Past the deadline it spends nothing and answers `{2, 0, 0,
/// now}`: a call the replica gave up on (and decided without the store) is not spent twice.
pub const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local deadline = tonumber(ARGV[2 * #KEYS + 1] or 0)
if deadline > 0 and now > deadline then return {2, 0, 0, now} end
local tats = {}
local first = 0
local wait = 0
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local at = tat + interval - burst * interval
  if at > now then
    if first == 0 then first = i end
    if at - now > wait then wait = at - now end
  end
  tats[i] = tat + interval
end
if first > 0 then
  local out = {0, first, wait, now}
  for i = 1, #KEYS do out[4 + i] = tats[i] - tonumber(ARGV[2 * i - 1]) - now end
  return out
end
local out = {1, 0, 0, now}
for i, key in ipairs(KEYS) do
  redis.call('SET', key, string.format('%.0f', tats[i]), 'PX', math.floor((tats[i] - now) / 1000) + 1)
  out[4 + i] = tats[i] - now
end
return out
";

/// The paying-back script: `KEYS` the buckets, `ARGV` five numbers per key: the emission
/// interval (µs), the burst, the calls admitted without the store, how long ago (µs) the
/// replica began admitting them, and the TAT of those calls alone at the shared rate, ahead
/// of now (µs, negative when past). Answers each key's TAT ahead of now afterwards.
pub const REPAY: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[5 * i - 4])
  local burst = tonumber(ARGV[5 * i - 3])
  local since = now - tonumber(ARGV[5 * i - 1])
  local tat = tonumber(redis.call('GET', key) or since)
  if tat < since then tat = since end
  tat = tat + tonumber(ARGV[5 * i - 2]) * interval
  local paced = now + tonumber(ARGV[5 * i])
  if tat < paced then tat = paced end
  local cap = now + 2 * burst * interval
  if tat > cap then tat = cap end
  if tat > now then
    redis.call('SET', key, string.format('%.0f', tat), 'PX', math.floor((tat - now) / 1000) + 1)
    out[i] = tat - now
  else
    out[i] = 0
  end
end
return out
";

/// The heartbeat script: `KEYS[1]` the sorted set of replicas, `ARGV` this replica's id and
/// how long (ms) a replica counts after its last beat. Answers how many replicas count.
pub const HEARTBEAT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZCARD', KEYS[1])
";

/// One key a call spends: which limit it is, the key, its emission interval (µs) and burst.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Check {
    /// The limit it is.
    pub which: Which,
    /// The Redis key.
    pub key: String,
    /// Microseconds between calls at the rate (at least 1).
    pub interval_us: u64,
    /// Calls allowed at once.
    pub burst: u32,
}

/// The key of a principal's bucket: `{prefix}{client:NAME}:SUFFIX`. Every key of a client
/// shares the hash tag `{client:NAME}`, so one script may touch them all on a Redis Cluster.
#[must_use]
pub fn key(prefix: &str, client: &str, suffix: &str) -> String {
    format!("{prefix}{{client:{}}}:{suffix}", tag_safe(client))
}

/// `name` fit for the inside of a Redis Cluster hash tag: braces, which would end the tag
/// early, become parentheses.
#[must_use]
pub fn tag_safe(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '{' => '(',
            '}' => ')',
            c => c,
        })
        .collect()
}

/// The key of the sorted set that counts replicas.
#[must_use]
pub fn replicas_key(prefix: &str) -> String {
    format!("{prefix}replicas")
}

/// Microseconds between calls at `rate` (at least 1).
#[must_use]
pub fn interval_us(rate: Rate) -> u64 {
    if rate.per_sec <= 0.0 {
        return u64::MAX / 4;
    }
    // Positive and finite (validated: at most 1e6 a second): at least 1 µs.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let us = (1e6 / rate.per_sec).round() as u64;
    us.max(1)
}

/// The keys a call of `client` to `upstream` spends under `limits`, the narrower first (as the
/// in-memory ledger checks them); empty when no rate is set.
#[must_use]
pub fn checks(
    prefix: &str,
    client: &str,
    upstream: Option<&str>,
    limits: &ClientLimits,
) -> Vec<Check> {
    let mut out = Vec::new();
    if let (Some(rate), Some(upstream)) = (limits.upstream_calls_per_sec, upstream) {
        out.push(Check {
            which: Which::UpstreamRate,
            key: key(prefix, client, &format!("up:{upstream}")),
            interval_us: interval_us(rate),
            burst: rate.burst,
        });
    }
    if let Some(rate) = limits.calls_per_sec {
        out.push(Check {
            which: Which::ClientRate,
            key: key(prefix, client, "rate"),
            interval_us: interval_us(rate),
            burst: rate.burst,
        });
    }
    out
}

/// What the script's answer means for `checks`.
///
/// # Errors
/// The [`Refused`] of the first key that refused, with the wait until every key passes;
/// `Err(None)` for an answer the script cannot give.
pub fn verdict(checks: &[Check], answer: &[i64]) -> Result<(), Option<Refused>> {
    match *answer {
        [1, ..] => Ok(()),
        [0, first, wait_us, ..] => {
            let which = usize::try_from(first)
                .ok()
                .and_then(|i| checks.get(i.checked_sub(1)?))
                .ok_or(None)?;
            let wait_ms = u64::try_from(wait_us).unwrap_or(0).div_ceil(1000).max(1);
            Err(Some(Refused {
                which: which.which,
                retry_after_ms: wait_ms,
            }))
        }
        _ => Err(None),
    }
}

/// The tokens left in a bucket of `interval_us` and `burst` whose TAT is `ahead_us` ahead of
/// now (0 to the burst; fractions count).
#[must_use]
pub fn remaining(interval_us: u64, burst: u32, ahead_us: i64) -> f64 {
    #[allow(clippy::cast_precision_loss)] // microseconds: far below 2^52
    let used = ahead_us.max(0) as f64 / interval_us.max(1) as f64;
    let burst = f64::from(burst);
    (burst - used).clamp(0.0, burst)
}

/// Each key's TAT ahead of now in a [`SCRIPT`] answer, in the order of its checks (empty for
/// an answer without them).
#[must_use]
pub fn aheads(answer: &[i64]) -> &[i64] {
    answer.get(4..).unwrap_or_default()
}

/// The server's clock (µs) in a [`SCRIPT`] answer.
#[must_use]
pub fn server_now(answer: &[i64]) -> Option<i64> {
    answer.get(3).copied()
}

/// What one key owes the store: the calls a replica admitted on its own ([`REPAY`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Debt {
    /// The Redis key.
    pub key: String,
    /// Microseconds between calls at the rate.
    pub interval_us: u64,
    /// The key's burst.
    pub burst: u32,
    /// Calls admitted without the store.
    pub calls: u64,
    /// How long ago (µs) the replica began admitting them.
    pub since_us: u64,
    /// The TAT of those calls alone at the shared rate, ahead of now (µs; negative: past).
    pub paced_us: i64,
}

/// The hash tag of `key` (`{client:NAME}`): the keys one script may touch together on a Redis
/// Cluster; the whole key when it has none.
#[must_use]
pub fn slot_of(key: &str) -> &str {
    key.find('{')
        .and_then(|open| {
            let close = open + key[open..].find('}')?;
            key.get(open..=close)
        })
        .unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_principals_hash_tag() {
        assert_eq!(
            key("mcp-budget:", "alice", "rate"),
            "mcp-budget:{client:alice}:rate"
        );
        assert_eq!(key("p:", "a{b}", "up:git"), "p:{client:a(b)}:up:git");
        assert_eq!(replicas_key("p:"), "p:replicas");
    }

    #[test]
    fn a_call_spends_the_upstream_key_then_the_clients() {
        let limits = ClientLimits {
            calls_per_sec: Some(Rate::new(10.0, 10)),
            upstream_calls_per_sec: Some(Rate::new(3.0, 1)),
            ..ClientLimits::default()
        };
        let found = checks("p:", "bob", Some("git"), &limits);
        assert_eq!(
            found,
            [
                Check {
                    which: Which::UpstreamRate,
                    key: "p:{client:bob}:up:git".into(),
                    interval_us: 333_333,
                    burst: 1
                },
                Check {
                    which: Which::ClientRate,
                    key: "p:{client:bob}:rate".into(),
                    interval_us: 100_000,
                    burst: 10
                }
            ]
        );
        assert_eq!(
            checks("p:", "bob", None, &limits).len(),
            1,
            "no upstream: overall only"
        );
        assert!(checks("p:", "bob", Some("git"), &ClientLimits::default()).is_empty());
        assert_eq!(interval_us(Rate::new(1e6, 1)), 1);
    }

    #[test]
    fn an_answer_tells_what_is_left_and_the_servers_clock() {
        let answer = [1, 0, 0, 1_700_000_000_000_000, 250_000, 0];
        assert_eq!(server_now(&answer), Some(1_700_000_000_000_000));
        assert_eq!(aheads(&answer), [250_000, 0]);
        assert!(aheads(&[1, 0, 0]).is_empty(), "an answer without them");
        assert!((remaining(100_000, 10, 250_000) - 7.5).abs() < 1e-9);
        assert!(
            (remaining(100_000, 10, -5) - 10.0).abs() < 1e-9,
            "past: full"
        );
        assert!(
            remaining(100_000, 10, 5_000_000).abs() < 1e-9,
            "in debt: empty"
        );
        assert_eq!(slot_of("p:{client:a}:up:git"), "{client:a}");
        assert_eq!(slot_of("p:plain"), "p:plain");
        let c = checks(
            "p:",
            "bob",
            None,
            &ClientLimits {
                calls_per_sec: Some(Rate::new(10.0, 10)),
                ..ClientLimits::default()
            },
        );
        assert_eq!(verdict(&c, &[1, 0, 0, 5, 0]), Ok(()));
        assert_eq!(
            verdict(&c, &[2, 0, 0, 5]),
            Err(None),
            "too late: no verdict"
        );
    }

    #[test]
    fn answers_become_verdicts() {
        let limits = ClientLimits {
            calls_per_sec: Some(Rate::new(10.0, 10)),
            upstream_calls_per_sec: Some(Rate::new(3.0, 1)),
            ..ClientLimits::default()
        };
        let c = checks("p:", "bob", Some("git"), &limits);
        assert_eq!(verdict(&c, &[1, 0, 0]), Ok(()));
        assert_eq!(
            verdict(&c, &[0, 2, 99_001]),
            Err(Some(Refused {
                which: Which::ClientRate,
                retry_after_ms: 100
            }))
        );
        assert_eq!(
            verdict(&c, &[0, 1, 1]).unwrap_err().unwrap().retry_after_ms,
            1,
            "at least 1 ms"
        );
        assert_eq!(verdict(&c, &[0, 3, 5]), Err(None));
        assert_eq!(verdict(&c, &[]), Err(None));
    }
}
