//! What forwarding shares with the era bridge: one client request on its way ([`Forward`]),
//! the requests in flight upstream for cancellation ([`Inflight`]), and the replica a note
//! goes to (`[state]`). A leaf: it names no other room.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::value::RawValue;

use crate::context::Caller;
use crate::jsonrpc::{Id, Message};
use crate::lock::lock;

/// One client request on its way to one upstream.
pub(super) struct Forward<'a> {
    /// The upstream's index.
    pub(super) upstream: usize,
    /// The client's request.
    pub(super) msg: &'a Message,
    /// The params to send (names restored to the upstream's own).
    pub(super) params: Option<Box<RawValue>>,
    /// Who asked.
    pub(super) caller: &'a Caller,
    /// Whether the client's request is modern (its view says).
    pub(super) modern: bool,
    /// The request's id upstream.
    pub(super) id: i64,
}

/// (session, client request id) → (upstream, upstream request id) of the requests in flight,
/// for cancellation.
#[derive(Debug, Default)]
pub(super) struct Inflight(Mutex<HashMap<(String, Id), (usize, i64)>>);

impl Inflight {
    /// Notes that client request `msg` of `caller` is upstream `i`'s request `id` now.
    pub(super) fn track(&self, caller: &Caller, msg: &Message, i: usize, id: i64) {
        lock(&self.0).insert(key(caller, msg), (i, id));
    }

    /// Forgets client request `msg` of `caller`.
    pub(super) fn untrack(&self, caller: &Caller, msg: &Message) {
        lock(&self.0).remove(&key(caller, msg));
    }

    /// How many client requests are in flight to upstream `i` (a removed upstream is stopped
    /// once none is).
    pub(super) fn to_upstream(&self, i: usize) -> usize {
        lock(&self.0).values().filter(|(u, _)| *u == i).count()
    }

    /// Takes the upstream request that client request `id` of `session` is now.
    pub(super) fn take(&self, session: &str, id: Id) -> Option<(usize, i64)> {
        lock(&self.0).remove(&(session.to_owned(), id))
    }
}

fn key(caller: &Caller, msg: &Message) -> (String, Id) {
    let id = msg.reply_id();
    (caller.session.id.clone(), id)
}

/// The replica `owner` names, with the store to reach it, when it is another replica of this
/// deployment (`[state]`, the `store`): what it asked for or parked is forwarded there.
pub(super) fn elsewhere<'a>(
    store: Option<&'a crate::state::Store>,
    owner: Option<&'a str>,
) -> Option<(&'a str, &'a crate::state::Store)> {
    let store = store?;
    owner
        .filter(|owner| *owner != store.replica_id())
        .map(|owner| (owner, store))
}

/// The `mcp_budget_state_answers_total` outcome of a note sent to another replica.
pub(super) fn outcome_of(
    sent: Result<&'static str, crate::state::relay::ForwardError>,
) -> &'static str {
    use crate::state::relay::ForwardError;
    match sent {
        Ok(outcome) => outcome,
        Err(ForwardError::OwnerGone) => "owner_gone",
        Err(ForwardError::NoReply) => "no_reply",
        Err(ForwardError::Store(reason)) => reason,
    }
}
