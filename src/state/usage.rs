//! Shared usage counts (`[budget] usage_file` with `[state] backend = "redis"`): the keys, the
//! Lua script that adds a replica's counts and hands back the counts every replica plans with,
//! and what its answer means. Pure (no I/O): the connection is `super::conn`'s.
//!
//! **One epoch, one set of counts.** Time on the store's clock (`TIME`) is cut into epochs of
//! `relearn_secs`. The first replica to relearn in an epoch copies the running counts into the
//! *learned* hash, stamped with the epoch; every other replica relearning in that epoch reads
//! that copy, whatever it counted since. So every replica plans with the same counts, and
//! lists the same bytes for the same catalog and profile, however the balancer spread the
//! calls. Replicas relearn just after each epoch begins (the script says when the next one
//! does), so they differ at most for the moments between their relearns.
//!
//! A replica's calls reach the store in batches: the counts since its last relearn, added with
//! `HINCRBY` in the same round trip. The usage file a replica started with seeds the running
//! counts once (`HSETNX`: an id the store counts already keeps the store's count), so the first
//! replica of a deployment brings its history and later ones add nothing twice.

use crate::plan::UsageCounts;

/// The script: `KEYS[1]` the running counts, `KEYS[2]` the learned counts; `ARGV[1]` the epoch
/// length (ms), `ARGV[2]` how many (id, count) pairs to add follow, then those pairs, then
/// (id, count) pairs to seed. Answers `{epoch, ms until the next, {id, count, ...}}`: the
/// learned counts of the epoch (the field `epoch` among them).
pub const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local period = tonumber(ARGV[1])
local epoch = math.floor(now / period)
local adds = tonumber(ARGV[2])
local i = 3
for _ = 1, adds do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i < #ARGV do
  redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
local have = tonumber(redis.call('HGET', KEYS[2], 'epoch') or '-1')
if have < epoch then
  redis.call('DEL', KEYS[2])
  local all = redis.call('HGETALL', KEYS[1])
  for j = 1, #all, 2 do
    redis.call('HSET', KEYS[2], all[j], all[j + 1])
  end
  redis.call('HSET', KEYS[2], 'epoch', epoch)
end
return {epoch, period - now % period, redis.call('HGETALL', KEYS[2])}
";

/// The keys of a deployment's usage: the running counts and the learned ones. Both share the
/// hash tag `{usage}`, so the script may touch both on a Redis Cluster.
#[must_use]
pub fn keys(prefix: &str) -> [String; 2] {
    [
        format!("{prefix}{{usage}}:counts"),
        format!("{prefix}{{usage}}:learned"),
    ]
}

/// What the script answered: the epoch, the time until the next one, and the counts every
/// replica plans with during this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learned {
    /// The epoch (the store's time over `relearn_secs`).
    pub epoch: i64,
    /// Until the next epoch begins.
    pub next_in: std::time::Duration,
    /// The counts by `"server/tool"` id.
    pub counts: UsageCounts,
}

/// The script's answer read: `None` when it is not what the script returns.
#[must_use]
pub fn learned(epoch: i64, next_in_ms: i64, fields: &[String]) -> Option<Learned> {
    if fields.len() % 2 != 0 {
        return None;
    }
    let counts = fields
        .chunks_exact(2)
        // Every id holds a `/` (`server/tool`); the stamp does not.
        .filter(|pair| pair[0].contains('/'))
        .map(|pair| Some((pair[0].clone(), pair[1].parse::<u64>().ok()?)))
        .collect::<Option<UsageCounts>>()?;
    Some(Learned {
        epoch,
        next_in: std::time::Duration::from_millis(u64::try_from(next_in_ms).ok()?),
        counts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_the_counts_without_the_stamp() {
        let fields: Vec<String> = ["time/now", "3", "epoch", "17", "git/log", "1"]
            .map(str::to_owned)
            .into();
        let read = learned(17, 250, &fields).unwrap();
        assert_eq!(read.epoch, 17);
        assert_eq!(read.next_in, std::time::Duration::from_millis(250));
        assert_eq!(read.counts.len(), 2);
        assert_eq!(read.counts["time/now"], 3);
        assert!(learned(1, 1, &["a/b".to_owned()]).is_none(), "odd");
        let bad = ["a/b".to_owned(), "x".to_owned()];
        assert!(learned(1, 1, &bad).is_none(), "not a count");
        assert!(learned(1, -1, &[]).is_none());
    }

    #[test]
    fn both_keys_share_one_hash_tag() {
        let [counts, learned] = keys("mcpb:");
        assert_eq!(counts, "mcpb:{usage}:counts");
        assert_eq!(learned, "mcpb:{usage}:learned");
    }
}
