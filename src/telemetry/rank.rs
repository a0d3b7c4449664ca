//! The rank a tool had in its caller's last `search_tools` when it is invoked
//! ([`super::names::SEARCH_RANK_INVOKED`]): how good search is at putting the right tool
//! first.
//!
//! Per session, the names the last search returned, in order. Bounded: at most
//! [`MAX_RANKED`] names per session and [`MAX_SESSIONS`] sessions (ended sessions are dropped
//! first, then any). Kept only while metrics are recorded.
//!
//! ```
//! use mcp_budget::context::Session;
//! use mcp_budget::telemetry::rank::Searches;
//! use std::sync::Arc;
//!
//! let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
//! let session = Arc::new(Session::new("s1", tx));
//! let searches = Searches::default();
//! searches.remember(&session, vec!["a__x".into(), "b__y".into()]);
//! assert_eq!(searches.rank(&session, "b__y"), Some(2));
//! assert_eq!(searches.rank(&session, "c__z"), None);
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::context::Session;
use crate::lock::lock;

/// Names kept of one search (a search returns far fewer).
pub const MAX_RANKED: usize = 50;
/// Sessions whose last search is kept.
pub const MAX_SESSIONS: usize = 4096;

/// A session (while it lives) and the names its last search returned.
type Last = (Weak<Session>, Vec<String>);

/// Each session's last search results.
#[derive(Debug, Default)]
pub struct Searches {
    last: Mutex<HashMap<String, Last>>,
}

impl Searches {
    /// `names` (in rank order) are what `session`'s last search returned.
    pub fn remember(&self, session: &Arc<Session>, mut names: Vec<String>) {
        names.truncate(MAX_RANKED);
        let mut last = lock(&self.last);
        if last.len() >= MAX_SESSIONS && !last.contains_key(&session.id) {
            last.retain(|_, (alive, _)| alive.strong_count() > 0);
            if last.len() >= MAX_SESSIONS {
                if let Some(any) = last.keys().next().cloned() {
                    last.remove(&any);
                }
            }
        }
        last.insert(session.id.clone(), (Arc::downgrade(session), names));
    }

    /// The rank (1-based) `exposed` had in `session`'s last search, if it was in it.
    #[must_use]
    pub fn rank(&self, session: &Session, exposed: &str) -> Option<usize> {
        let last = lock(&self.last);
        let (_, names) = last.get(&session.id)?;
        names.iter().position(|n| n == exposed).map(|i| i + 1)
    }

    /// Remembers the tools a `search_tools` result names, while metrics are recorded.
    pub fn searched(&self, session: &Arc<Session>, result: &serde_json::Value) {
        if !super::record::enabled() {
            return;
        }
        let names = result["structuredContent"]["tools"]
            .as_array()
            .map(|tools| {
                (tools.iter().take(MAX_RANKED))
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        self.remember(session, names);
    }

    /// Records the rank of `exposed`, invoked by `session`, when its last search had it.
    pub fn invoked(&self, session: &Session, exposed: &str) {
        if !super::record::enabled() {
            return;
        }
        if let Some(rank) = self.rank(session, exposed) {
            super::record::search_rank_invoked(rank);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str) -> Arc<Session> {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        Arc::new(Session::new(id, tx))
    }

    #[test]
    fn ended_sessions_make_room_and_the_count_stays_bounded() {
        let searches = Searches::default();
        let keep = session("keep");
        searches.remember(&keep, vec!["t".into()]);
        for i in 0..MAX_SESSIONS + 10 {
            searches.remember(&session(&format!("s{i}")), vec!["t".into(); MAX_RANKED + 5]);
        }
        let last = lock(&searches.last);
        assert!(last.len() <= MAX_SESSIONS);
        assert!(last.values().all(|(_, names)| names.len() <= MAX_RANKED));
        assert!(
            last.contains_key("keep"),
            "a live session is kept over ended ones"
        );
    }

    #[test]
    fn a_new_search_replaces_the_last_one() {
        let (searches, s) = (Searches::default(), session("s"));
        searches.remember(&s, vec!["a".into(), "b".into()]);
        searches.remember(&s, vec!["b".into()]);
        assert_eq!(searches.rank(&s, "b"), Some(1));
        assert_eq!(searches.rank(&s, "a"), None);
    }
}
