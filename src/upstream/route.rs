//! Who a server→client message of a shared upstream belongs to (pure).
//!
//! An upstream is shared by every client of the gateway, and a server's requests to "its
//! client" (`sampling/createMessage`, `elicitation/create`, `roots/list`) and its logs carry
//! client data: a prompt, a form, a user's directories. They go to exactly the client they
//! belong to, or to nobody:
//!
//! 1. the transport says it: a message on the response stream of a client's POST (streamable
//!    HTTP) belongs to that client;
//! 2. the message names it: its `_meta.progressToken` is a token the gateway gave one of its
//!    requests to this upstream;
//! 3. exactly one client session has requests in flight to this upstream: that client (its most
//!    recent request's channel);
//! 4. no client has a request in flight: nobody ([`Owner::Nobody`]);
//! 5. several do: nobody either, and the server is told why ([`Owner::Ambiguous`]): guessing
//!    would hand one client's prompt to another.
//!
//! ```
//! use mcp_budget::upstream::route::{owner, Owner};
//! // Two sessions have calls in flight and the message names neither: nobody gets it.
//! let in_flight = [(1, "alice", 'a'), (2, "bob", 'b')];
//! assert_eq!(owner(None, None, in_flight), Owner::Ambiguous(2));
//! // One session, two requests: its latest request's channel.
//! assert_eq!(owner(None, None, [(1, "alice", 'a'), (5, "alice", 'c')]), Owner::Client('c'));
//! ```

use serde_json::Value;

/// Where a server→client message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner<T> {
    /// To this client channel.
    Client(T),
    /// No client has a request in flight to the upstream.
    Nobody,
    /// This many client sessions have requests in flight, and the message names none of them.
    Ambiguous(usize),
}

/// The owner of a server→client message: `hint` is the channel the transport delivered it on
/// (an HTTP response stream), `named` the channel of the request its progress token names,
/// `in_flight` the client requests in flight to the upstream as (upstream id, session, channel).
pub fn owner<'a, T: 'a>(
    hint: Option<T>,
    named: Option<T>,
    in_flight: impl IntoIterator<Item = (i64, &'a str, T)>,
) -> Owner<T> {
    if let Some(to) = hint.or(named) {
        return Owner::Client(to);
    }
    let mut sessions: Vec<&str> = Vec::new();
    let mut latest: Option<(i64, T)> = None;
    for (id, session, to) in in_flight {
        if !sessions.contains(&session) {
            sessions.push(session);
        }
        if latest.as_ref().is_none_or(|(at, _)| id > *at) {
            latest = Some((id, to));
        }
    }
    match (sessions.len(), latest) {
        (1, Some((_, to))) => Owner::Client(to),
        (0, _) | (_, None) => Owner::Nobody,
        (n, _) => Owner::Ambiguous(n),
    }
}

impl<T> Owner<T> {
    /// The same decision with the client's channel mapped by `f`.
    pub fn map_client<U>(self, f: impl FnOnce(T) -> U) -> Owner<U> {
        match self {
            Self::Client(to) => Owner::Client(f(to)),
            Self::Nobody => Owner::Nobody,
            Self::Ambiguous(n) => Owner::Ambiguous(n),
        }
    }
}

/// The `_meta.progressToken` a server→client message names, if it is a string (the gateway's
/// own tokens always are).
#[must_use]
pub fn named_token(params: &Value) -> Option<&str> {
    params.get("_meta")?.get("progressToken")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn transport_and_token_win_over_the_count() {
        let many = [(1, "a", 1), (2, "b", 2)];
        assert_eq!(owner(Some(9), None, many), Owner::Client(9));
        assert_eq!(owner(None, Some(8), many), Owner::Client(8));
        assert_eq!(owner(Some(9), Some(8), many), Owner::Client(9));
    }

    #[test]
    fn nobody_without_calls_in_flight() {
        assert_eq!(owner::<u8>(None, None, []), Owner::Nobody);
    }

    #[test]
    fn tokens_are_read_from_meta_only() {
        assert_eq!(
            named_token(&json!({"_meta": {"progressToken": "mcpb-0-1"}})),
            Some("mcpb-0-1")
        );
        assert_eq!(named_token(&json!({"progressToken": "x"})), None);
        assert_eq!(named_token(&json!({"_meta": {"progressToken": 3}})), None);
    }

    #[test]
    fn levels_compare_by_severity() {
        use crate::mcp::bridge::level_wanted;
        assert!(level_wanted("info", "info"));
        assert!(level_wanted("info", "error"));
        assert!(!level_wanted("warning", "info"));
        assert!(level_wanted("info", "chatty"));
        assert!(!level_wanted("chatty", "error"));
    }

    proptest! {
        /// Whatever the order of the requests in flight: one session → its latest channel;
        /// several → ambiguous, never one of them.
        #[test]
        fn one_session_or_nobody(calls in proptest::collection::vec((0i64..1000, 0usize..3), 0..12)) {
            let names = ["a", "b", "c"];
            let in_flight: Vec<(i64, &str, i64)> =
                calls.iter().map(|&(id, s)| (id, names[s], id)).collect();
            let mut sessions: Vec<&str> = in_flight.iter().map(|c| c.1).collect();
            sessions.sort_unstable();
            sessions.dedup();
            let got = owner(None, None, in_flight.clone());
            match sessions.len() {
                0 => prop_assert_eq!(got, Owner::Nobody),
                1 => {
                    let latest = in_flight.iter().map(|c| c.0).max().unwrap();
                    prop_assert_eq!(got, Owner::Client(latest));
                }
                n => prop_assert_eq!(got, Owner::Ambiguous(n)),
            }
        }
    }
}
