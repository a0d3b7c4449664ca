//! The kept results: per session, in memory, bounded three ways (`[budget] result_ttl_secs`,
//! `result_session_bytes`, `result_store_bytes`). A result is kept for its session only and
//! read back by the id its note gives; an expired one is gone, and when a session or the store
//! is over its bytes, the oldest results go first. A result larger than a session may keep is
//! not kept (the caller cuts it instead, as without a store). With `[state]` the budget layer
//! puts each kept result in the shared store too ([`crate::state::results`]), and a result read
//! from there is adopted here ([`ResultStore::adopt`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::spill::Stored;

/// Default `result_ttl_secs`: 30 minutes.
pub const DEFAULT_TTL_SECS: u64 = 1_800;
/// Default `result_session_bytes`: 8 MiB.
pub const DEFAULT_SESSION_BYTES: usize = 8 << 20;
/// Default `result_store_bytes`: 64 MiB.
pub const DEFAULT_STORE_BYTES: usize = 64 << 20;

/// The store's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    /// How long a result is kept.
    pub ttl: Duration,
    /// Most bytes kept for one session.
    pub session_bytes: usize,
    /// Most bytes kept in all.
    pub store_bytes: usize,
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(DEFAULT_TTL_SECS),
            session_bytes: DEFAULT_SESSION_BYTES,
            store_bytes: DEFAULT_STORE_BYTES,
        }
    }
}

struct Entry {
    id: String,
    at: Instant,
    stored: Arc<Stored>,
}

/// Kept results by session (see the module docs).
#[derive(Default)]
pub struct ResultStore {
    limits: StoreLimits,
    sessions: std::sync::Mutex<HashMap<String, Vec<Entry>>>,
    next: AtomicU64,
    /// The ids' suffix (`r1-TAG`): this replica's, when replicas share results (`[state]`),
    /// so that two replicas never give one session's results the same id.
    tag: Option<String>,
}

impl std::fmt::Debug for ResultStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultStore")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ResultStore {
    /// An empty store with `limits`.
    #[must_use]
    pub fn new(limits: StoreLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// The store with its ids ending in `-TAG` (a replica's tag, when replicas share results).
    #[must_use]
    pub fn tagged(mut self, tag: &str) -> Self {
        self.tag = Some(tag.to_owned());
        self
    }

    /// Its limits.
    #[must_use]
    pub fn limits(&self) -> StoreLimits {
        self.limits
    }

    /// Its ids' tag.
    #[must_use]
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// Keeps `stored` for `session` at `now`; its id, or `None` when it is larger than a
    /// session may keep.
    pub fn put(&self, session: &str, stored: Stored, now: Instant) -> Option<String> {
        let bytes = stored.bytes();
        if bytes > self.limits.session_bytes || bytes > self.limits.store_bytes {
            return None;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = match &self.tag {
            Some(tag) => format!("r{n}-{tag}"),
            None => format!("r{n}"),
        };
        self.keep(session, &id, Arc::new(stored), now);
        Some(id)
    }

    /// Keeps `stored` under the `id` another replica gave it, as kept at `at` (a result read
    /// from the shared store: read again here without asking the store again). Nothing when
    /// it is larger than a session may keep.
    pub fn adopt(&self, session: &str, id: &str, stored: Arc<Stored>, at: Instant) {
        let bytes = stored.bytes();
        if bytes <= self.limits.session_bytes && bytes <= self.limits.store_bytes {
            self.keep(session, id, stored, at);
        }
    }

    /// Keeps `stored` (within a session's bytes) as `id` at `now`, the oldest going first.
    fn keep(&self, session: &str, id: &str, stored: Arc<Stored>, now: Instant) {
        let bytes = stored.bytes();
        let mut sessions = crate::lock::lock(&self.sessions);
        self.expire(&mut sessions, now);
        let entries = sessions.entry(session.to_owned()).or_default();
        entries.retain(|e| e.id != id);
        let mut held: usize = entries.iter().map(|e| e.stored.bytes()).sum();
        while held + bytes > self.limits.session_bytes && !entries.is_empty() {
            held -= entries.remove(0).stored.bytes();
        }
        entries.push(Entry {
            id: id.to_owned(),
            at: now,
            stored,
        });
        self.shrink(&mut sessions);
    }

    /// The result `id` kept for `session`, if it is still there at `now`.
    pub fn get(&self, session: &str, id: &str, now: Instant) -> Option<Arc<Stored>> {
        let mut sessions = crate::lock::lock(&self.sessions);
        self.expire(&mut sessions, now);
        let entries = sessions.get(session)?;
        entries
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.stored.clone())
    }

    /// Bytes kept now (all sessions).
    #[must_use]
    pub fn bytes(&self) -> usize {
        let sessions = crate::lock::lock(&self.sessions);
        sessions.values().flatten().map(|e| e.stored.bytes()).sum()
    }

    /// Drops what is older than the TTL at `now`, and sessions left empty.
    fn expire(&self, sessions: &mut HashMap<String, Vec<Entry>>, now: Instant) {
        let ttl = self.limits.ttl;
        for entries in sessions.values_mut() {
            entries.retain(|e| now.saturating_duration_since(e.at) < ttl);
        }
        sessions.retain(|_, entries| !entries.is_empty());
    }

    /// Drops the oldest results, whatever their session, until the store is within its bytes.
    fn shrink(&self, sessions: &mut HashMap<String, Vec<Entry>>) {
        let mut total: usize = sessions.values().flatten().map(|e| e.stored.bytes()).sum();
        while total > self.limits.store_bytes {
            let oldest = sessions
                .iter()
                .filter_map(|(s, entries)| entries.first().map(|e| (e.at, s.clone())))
                .min();
            let Some((_, session)) = oldest else { break };
            if let Some(entries) = sessions.get_mut(&session) {
                total -= entries.remove(0).stored.bytes();
                if entries.is_empty() {
                    sessions.remove(&session);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{ResultFormat, Spill};

    fn kept(text: &str) -> Stored {
        let spill = Spill {
            text: text.to_owned(),
            json: None,
            total: 1,
        };
        Stored::new("t", spill, 10, ResultFormat::Off)
    }

    #[test]
    fn results_are_kept_per_session_until_they_expire() {
        let store = ResultStore::new(StoreLimits {
            ttl: Duration::from_secs(60),
            ..StoreLimits::default()
        });
        let t0 = Instant::now();
        let id = store.put("a", kept("hello"), t0).unwrap();
        assert_eq!(store.get("a", &id, t0).unwrap().text, "hello");
        assert!(
            store.get("b", &id, t0).is_none(),
            "another session's id reads nothing"
        );
        assert!(store.get("a", &id, t0 + Duration::from_secs(61)).is_none());
        assert_eq!(store.bytes(), 0);
    }

    #[test]
    fn bytes_are_bounded_per_session_and_in_all_oldest_first() {
        let store = ResultStore::new(StoreLimits {
            ttl: Duration::from_secs(60),
            session_bytes: 30,
            store_bytes: 50,
        });
        let t = Instant::now();
        assert_eq!(
            store.put("a", kept(&"x".repeat(40)), t),
            None,
            "larger than a session"
        );
        let a1 = store.put("a", kept(&"1".repeat(19)), t).unwrap();
        let a2 = store.put("a", kept(&"2".repeat(19)), t).unwrap();
        assert!(store.get("a", &a1, t).is_none() && store.get("a", &a2, t).is_some());
        let b1 = store
            .put("b", kept(&"3".repeat(19)), t + Duration::from_secs(1))
            .unwrap();
        let b2 = store
            .put("b", kept(&"4".repeat(9)), t + Duration::from_secs(2))
            .unwrap();
        // 20 + 20 + 10 = 50: within; one more and a's (the oldest) goes.
        assert_eq!(store.bytes(), 50);
        let c1 = store.put("c", kept("5"), t + Duration::from_secs(3));
        assert!(store.get("a", &a2, t).is_none());
        assert!(
            c1.is_some() && store.get("b", &b1, t).is_some() && store.get("b", &b2, t).is_some()
        );
        assert!(store.bytes() <= 50);
    }

    #[test]
    fn a_tagged_store_names_its_ids_after_the_replica_and_adopts_anothers() {
        let store = ResultStore::new(StoreLimits {
            ttl: Duration::from_secs(60),
            ..StoreLimits::default()
        })
        .tagged("ab12cd");
        let t0 = Instant::now();
        assert_eq!(store.put("a", kept("x"), t0).as_deref(), Some("r1-ab12cd"));
        // Read from the shared store, kept 50 s ago on another replica: 10 s left here.
        let then = t0.checked_sub(Duration::from_secs(50)).unwrap();
        store.adopt("a", "r1-ef34ab", Arc::new(kept("theirs")), then);
        assert_eq!(store.get("a", "r1-ef34ab", t0).unwrap().text, "theirs");
        assert!(
            store
                .get("a", "r1-ef34ab", t0 + Duration::from_secs(11))
                .is_none()
        );
        assert_eq!(store.get("a", "r1-ab12cd", t0).unwrap().text, "x");
    }
}
