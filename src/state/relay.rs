//! What replicas tell each other through the store (issue 34 item 5): sessions ended by
//! `DELETE`, and clients' answers to server→client requests that reached a replica other than
//! the one whose upstream asked. The keys, channels, scripts and notes here are pure; the
//! subscription (feature `redis`) is in `state/follow.rs`.
//!
//! - **Revocations**: a `DELETE` adds the session's `sid` to a sorted set scored by its id's
//!   `exp` (pruned of expired ids at every add, and expiring with its last id: bounded by what
//!   one session lifetime of `DELETE`s adds) and publishes it on the revocations channel.
//!   Every replica ends the session at once; one that was not subscribed then (starting,
//!   reconnecting) reads the whole set when it subscribes.
//! - **Answers**: each replica listens on a channel of its own. An answer to a request another
//!   replica asked is published there, after a check (in the same script) that the owner's
//!   heartbeat is fresh: an owner that is gone is an immediate error, not a wait.

/// The script that revokes: `KEYS[1]` the sorted set; `ARGV` the channel, then a `sid` and its
/// `exp` (Unix seconds) per revocation. Each one not expired and new to the set is added and
/// published (one the store lost and a replica puts back is new again). Answers how many were
/// new.
pub const REVOKE: &str = r"
local now = tonumber(redis.call('TIME')[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local added = 0
for i = 2, #ARGV, 2 do
  if tonumber(ARGV[i + 1]) > now and redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i]) == 1 then
    added = added + 1
    redis.call('PUBLISH', ARGV[1], ARGV[i] .. ' ' .. ARGV[i + 1])
  end
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then redis.call('EXPIREAT', KEYS[1], math.floor(tonumber(last[2])) + 1) end
return added
";

/// Most revocations one [`REVOKE`] carries (a replica putting back thousands sends several).
pub const REVOKE_CHUNK: usize = 1_000;

/// The script that forwards an answer: `KEYS[1]` the replicas' sorted set (the heartbeat's);
/// `ARGV` the owner, how long (ms) a replica counts after its last beat, the owner's channel,
/// the payload. Answers -1 when the owner's heartbeat is stale, else how many listened (0: its
/// subscription is gone).
pub const FORWARD: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local seen = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not seen or tonumber(seen) < now - tonumber(ARGV[2]) then return -1 end
return redis.call('PUBLISH', ARGV[3], ARGV[4])
";

/// The script that promotes a tool for a session (`[discover] promote_on_use`): `KEYS[1]` the
/// session's list; `ARGV` the tool's exposed name, how long (ms) the list lives, the channel,
/// the session's `sid`. Answers 1 when the tool is new to the list (then published), else 0.
pub const PROMOTE: &str = r"
if redis.call('LPOS', KEYS[1], ARGV[1]) then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4] .. ' ' .. ARGV[1])
return 1
";

/// The list of the tools session `sid` promoted, in promotion order.
#[must_use]
pub fn promoted_key(prefix: &str, sid: &str) -> String {
    format!(
        "{prefix}{{session:{}}}:promoted",
        super::gcra::tag_safe(sid)
    )
}

/// The channel promotions are published on (`SID NAME`).
#[must_use]
pub fn promotions_channel(prefix: &str) -> String {
    format!("{prefix}promotions")
}

/// A tool promoted for a session on some replica: the session's `sid` and the tool's exposed
/// name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Promotion {
    /// The session's `sid`.
    pub sid: String,
    /// The tool's exposed name.
    pub name: String,
}

impl Promotion {
    /// A promotions channel message read: `SID NAME` (a `sid` has no space).
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let (sid, name) = text.split_once(' ')?;
        Some(Self {
            sid: sid.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// The sorted set of revoked session ids.
#[must_use]
pub fn revoked_key(prefix: &str) -> String {
    format!("{prefix}revoked")
}

/// The channel revocations are published on.
#[must_use]
pub fn revoked_channel(prefix: &str) -> String {
    format!("{prefix}revocations")
}

/// The channel replica `id` hears answers on.
#[must_use]
pub fn replica_channel(prefix: &str, id: &str) -> String {
    format!("{prefix}replica:{id}")
}

/// A session ended by `DELETE` somewhere: its `sid` and its id's `exp` (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    /// The session's `sid` (the one every replica knows it by).
    pub sid: String,
    /// When its id expires anyway.
    pub exp: u64,
}

impl Revocation {
    /// A revocations channel message read: `SID EXP`.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let (sid, exp) = text.rsplit_once(' ')?;
        Some(Self {
            sid: sid.to_owned(),
            exp: exp.parse().ok()?,
        })
    }
}

/// A client's answer that another replica took: the session it came on (its `sid`) and the
/// message, for the gateway of the replica whose upstream asked.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Forwarded {
    /// The session's `sid`.
    pub session: String,
    /// The JSON-RPC answer, as the client sent it.
    pub message: Box<serde_json::value::RawValue>,
}

/// A 2026-07-28 client's retry of a call another replica parked (its `requestState` names
/// that replica), for that replica to resume; the outcome comes back as [`Resumed`].
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Resume {
    /// What the outcome is matched by.
    pub corr: String,
    /// The replica the outcome goes to.
    pub reply_to: String,
    /// The capabilities the client declared in the retry.
    pub client_capabilities: serde_json::Value,
    /// The retry, as the client sent it.
    pub request: Box<serde_json::value::RawValue>,
}

/// The outcome of a [`Resume`]: the JSON-RPC answer to the retry (a result, or an error).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Resumed {
    /// The [`Resume::corr`] it answers.
    pub corr: String,
    /// The answer.
    pub reply: Box<serde_json::value::RawValue>,
}

/// What one replica sends another on its channel.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Note {
    /// A client's answer to a server→client request the receiver sent.
    Answer(Forwarded),
    /// A retry of a call the receiver parked.
    Resume(Resume),
    /// The outcome of a retry the receiver forwarded.
    Resumed(Resumed),
}

/// Why a note was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardError {
    /// The replica it is for is gone (no fresh heartbeat, or no one listens on its channel).
    OwnerGone,
    /// The store did not answer (a [`crate::telemetry::names`] reason).
    Store(&'static str),
    /// A retry was forwarded, and no outcome came back in time.
    NoReply,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revocation_reads_back_and_a_forwarded_answer_keeps_its_bytes() {
        assert_eq!(
            Revocation::parse("a b 17"),
            Some(Revocation {
                sid: "a b".into(),
                exp: 17
            })
        );
        assert_eq!(Revocation::parse("nospace"), None);
        assert_eq!(Revocation::parse("s x"), None);
        let text =
            r#"{"session":"s1","message":{"jsonrpc":"2.0","id":"mcpb-0-x","result":{ "a" :1}}}"#;
        let forwarded: Forwarded = serde_json::from_str(text).unwrap();
        assert_eq!(forwarded.session, "s1");
        assert!(
            forwarded.message.get().contains(r#"{ "a" :1}"#),
            "raw bytes"
        );
    }

    #[test]
    fn notes_read_back_whatever_their_kind() {
        let raw = |t: &str| serde_json::value::RawValue::from_string(t.to_owned()).unwrap();
        let notes = [
            Note::Answer(Forwarded {
                session: "s".into(),
                message: raw(r#"{"jsonrpc":"2.0","id":"x","result":{}}"#),
            }),
            Note::Resume(Resume {
                corr: "c".into(),
                reply_to: "r2".into(),
                client_capabilities: serde_json::json!({"sampling": {}}),
                request: raw(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#),
            }),
            Note::Resumed(Resumed {
                corr: "c".into(),
                reply: raw(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            }),
        ];
        for note in notes {
            let text = serde_json::to_string(&note).unwrap();
            let back: Note = serde_json::from_str(&text).unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), text);
        }
    }

    #[test]
    fn a_promotion_reads_back_and_its_key_keeps_one_hash_tag() {
        assert_eq!(
            Promotion::parse("s1 github__create_issue"),
            Some(Promotion {
                sid: "s1".into(),
                name: "github__create_issue".into()
            })
        );
        assert_eq!(Promotion::parse("nospace"), None);
        assert_eq!(promoted_key("p:", "a}b"), "p:{session:a)b}:promoted");
    }

    #[test]
    fn channels_and_keys_carry_the_prefix() {
        assert_eq!(revoked_key("p:"), "p:revoked");
        assert_eq!(revoked_channel("p:"), "p:revocations");
        assert_eq!(replica_channel("p:", "r1"), "p:replica:r1");
    }
}
