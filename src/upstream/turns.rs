//! `server_requests = "serialize"`: turns in a 2025-era upstream, so that each request it
//! sends a client (sampling, elicitation, roots) has exactly one owner.
//!
//! Such a server's requests do not say which call they belong to; the gateway knows it only
//! when one client has calls in flight there ([`super::route`]). Under `serialize` a call of
//! a client that can be asked (it declared sampling or elicitation, or roots the policy does
//! not answer for it) takes the upstream alone: it waits until the calls in flight are done,
//! and the calls after it wait until it is. Calls of clients that cannot be asked share the
//! upstream with each other, as without the key. The turn is held by the call's pending
//! entry, so that it ends however the call does (answer, error, cancel, timeout, a lost
//! connection). The gateway's own requests (lists, pings) take no turn: the server's requests
//! during them have no client to go to anyway.
//!
//! A call still waiting for its turn is not in the upstream yet: a client's cancel of it
//! ([`Upstream::cancel_waiting`]) ends the wait, and the call fails as cancelled without
//! ever reaching the server.
//!
//! The cost: while a call that can be asked is in flight, the upstream serves no other call
//! of any client; a server whose tools sample for seconds serves one such call at a time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock, oneshot};

use super::Upstream;
use crate::context::SessionState;
use crate::error::Error;
use crate::lock::lock;
use crate::policy::ServerRequests;

/// The turns of one upstream: a call that can be asked writes, the others read; and the
/// calls waiting for theirs, by request id, with the way to cancel each.
#[derive(Debug, Default)]
pub(super) struct Turns {
    lock: Arc<RwLock<()>>,
    /// At most one entry per call waiting (removed when its wait ends, however it ends).
    waiting: Mutex<HashMap<i64, oneshot::Sender<Option<String>>>>,
}

/// A call's turn in an upstream, held until its pending entry goes.
#[derive(Debug)]
#[expect(
    dead_code,
    reason = "the guards are held, never read: dropping one ends the turn"
)]
pub(super) enum Turn {
    /// Side by side with other calls that cannot be asked.
    Shared(OwnedRwLockReadGuard<()>),
    /// Alone: the server's requests meanwhile are this call's.
    Alone(OwnedRwLockWriteGuard<()>),
}

/// Whether the server can ask the client of `state` something that needs the client itself:
/// sampling, elicitation, or roots when the policy does not answer them (`roots_declared`).
pub(super) fn can_be_asked(state: &SessionState, roots_declared: bool) -> bool {
    let declared = |name: &str| state.client_capabilities.get(name).is_some();
    declared("sampling") || declared("elicitation") || (!roots_declared && declared("roots"))
}

impl Upstream {
    /// The turn a call of the client of `client` (on behalf of a client when `for_client`)
    /// waits for, or `None` when this upstream takes no turns: not `serialize`, or a request
    /// of the gateway's own. The era is not asked: a stdio server that speaks 2026-07-28 may
    /// still send its requests the 2025 way, outside the call's answer.
    ///
    /// # Errors
    /// [`Error::Cancelled`] when the client cancelled request `id` while it waited.
    pub(super) async fn take_turn(
        &self,
        for_client: bool,
        client: Option<&SessionState>,
        id: Option<i64>,
    ) -> Result<Option<Turn>, Error> {
        let spec = &self.inner.spec;
        if spec.server_requests != ServerRequests::Serialize || !for_client {
            return Ok(None);
        }
        let turns = &self.inner.turns;
        let alone = client.is_some_and(|c| can_be_asked(c, spec.roots.is_some()));
        // Free at once (the common case): nothing to register.
        let now = if alone {
            Arc::clone(&turns.lock)
                .try_write_owned()
                .ok()
                .map(Turn::Alone)
        } else {
            Arc::clone(&turns.lock)
                .try_read_owned()
                .ok()
                .map(Turn::Shared)
        };
        if let Some(turn) = now {
            return Ok(Some(turn));
        }
        let wait = async {
            let lock = Arc::clone(&turns.lock);
            if alone {
                Turn::Alone(lock.write_owned().await)
            } else {
                Turn::Shared(lock.read_owned().await)
            }
        };
        let Some(id) = id else {
            return Ok(Some(wait.await));
        };
        let (tx, rx) = oneshot::channel();
        lock(&turns.waiting).insert(id, tx);
        let _waiting = Waiting { turns, id };
        tokio::select! {
            biased;
            reason = rx => Err(Error::Cancelled { reason: reason.ok().flatten() }),
            turn = wait => Ok(Some(turn)),
        }
    }

    /// Cancels request `id` if it is waiting for its turn (nothing otherwise).
    pub(super) fn cancel_waiting(&self, id: i64, reason: Option<&str>) {
        if let Some(tx) = lock(&self.inner.turns.waiting).remove(&id) {
            let _ = tx.send(reason.map(str::to_owned));
        }
    }
}

/// A call's entry among those waiting for a turn, removed when the wait ends.
struct Waiting<'a> {
    turns: &'a Turns,
    id: i64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.turns.waiting).remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn state(capabilities: serde_json::Value) -> SessionState {
        SessionState {
            client_capabilities: capabilities,
            ..SessionState::default()
        }
    }

    #[test]
    fn clients_that_can_be_asked_are_those_with_sampling_elicitation_or_undeclared_roots() {
        assert!(can_be_asked(&state(json!({"sampling": {}})), false));
        assert!(can_be_asked(&state(json!({"elicitation": {}})), true));
        assert!(can_be_asked(&state(json!({"roots": {}})), false));
        assert!(!can_be_asked(&state(json!({"roots": {}})), true));
        assert!(!can_be_asked(&state(json!({})), false));
        assert!(!can_be_asked(&state(json!(null)), false));
    }

    #[tokio::test]
    async fn a_call_that_can_be_asked_waits_for_the_others_and_they_for_it() {
        let turns = Arc::new(RwLock::new(()));
        let a = Arc::clone(&turns).read_owned().await;
        let b = Arc::clone(&turns).read_owned().await;
        // Shared turns go side by side; an alone turn waits for both.
        assert!(Arc::clone(&turns).try_write_owned().is_err());
        drop(a);
        assert!(Arc::clone(&turns).try_write_owned().is_err());
        drop(b);
        let alone = Arc::clone(&turns).try_write_owned().expect("free");
        assert!(Arc::clone(&turns).try_read_owned().is_err());
        drop(alone);
        assert!(Arc::clone(&turns).try_read_owned().is_ok());
    }
}
