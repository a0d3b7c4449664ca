//! The results kept for `read_result` (issue 54 item 2), shared by the replicas of a
//! deployment: a result spilled on one replica is read through any other. The keys and scripts
//! here are pure; [`super::Store::keep_result`] and [`super::Store::kept_result`] run them.
//!
//! Per session, three keys sharing the hash tag `{session:SID}` (so that one script touches
//! them all on a Redis Cluster), each living as long as the session's newest result:
//!
//! - `…:results`, a hash: result id → the stored result (its text, JSON, tool, page budget and
//!   format, as [`crate::results::Stored::to_shared`] writes it);
//! - `…:results:at`, a sorted set: result id → when it was kept (ms, the server's clock);
//! - `…:results:bytes`, the bytes the hash holds for the session.
//!
//! [`PUT`] keeps one result bounded as the memory store is (`[budget] result_ttl_secs` and
//! `result_session_bytes`, checked and enforced in the one script, so replicas putting at once
//! cannot pass the cap): expired results are dropped, then the oldest until the new one fits.
//! [`GET`] reads one back if it is younger than the TTL. `result_store_bytes`, the cap of all
//! results, stays per replica: the store's own memory is bounded by `result_session_bytes` per
//! session that spilled within the TTL (give the store a `maxmemory` for the rest).

/// The script that keeps a result: `KEYS` the session's hash, sorted set and byte count;
/// `ARGV` the result's id, its stored text, the TTL (ms) and the session's byte cap. Answers 1
/// when it was kept, 0 when it is larger than the cap.
pub const PUT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
local cap = tonumber(ARGV[4])
local size = string.len(ARGV[2])
if size > cap then return 0 end
local held = redis.call('GET', KEYS[3])
if held then
  held = tonumber(held)
else
  held = 0
  for _, id in ipairs(redis.call('HKEYS', KEYS[1])) do
    held = held + redis.call('HSTRLEN', KEYS[1], id)
  end
end
local function drop(id)
  held = held - redis.call('HSTRLEN', KEYS[1], id)
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - ttl)) do drop(id) end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then drop(ARGV[1]) end
while held + size > cap do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not oldest then
    redis.call('DEL', KEYS[1])
    held = 0
    break
  end
  drop(oldest)
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('SET', KEYS[3], held + size, 'PX', ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
";

/// The script that reads a result: `KEYS` the session's hash and sorted set; `ARGV` the id and
/// the TTL (ms). Answers the stored text and its age (ms), or nothing when it is not kept (never,
/// expired or evicted).
pub const GET: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not at or tonumber(at) <= now - tonumber(ARGV[2]) then return false end
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then return false end
return {stored, now - tonumber(at)}
";

/// The keys of session `sid`'s kept results: its hash, sorted set and byte count.
#[must_use]
pub fn keys(prefix: &str, sid: &str) -> [String; 3] {
    let base = format!("{prefix}{{session:{}}}:results", super::gcra::tag_safe(sid));
    [base.clone(), format!("{base}:at"), format!("{base}:bytes")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_result_keys_share_its_hash_tag() {
        let [hash, at, bytes] = keys("p:", "s{1}");
        assert_eq!(hash, "p:{session:s(1)}:results");
        assert_eq!(at, "p:{session:s(1)}:results:at");
        assert_eq!(bytes, "p:{session:s(1)}:results:bytes");
        for key in [&hash, &at, &bytes] {
            assert_eq!(super::super::gcra::slot_of(key), "{session:s(1)}");
        }
    }
}
