//! `server_requests = "serialize"`: turns in a 2025-era upstream, so that each request it
//! sends a client (sampling, elicitation, roots) has exactly one owner.
//!
//! Such a server's requests do not say which call they belong to; the gateway knows it only
//! when one client has calls in flight there ([`super::route`]). Under `serialize` a call of
//! a client that can be asked (it declared sampling or elicitation, or roots the policy does
//! not answer for it) takes the upstream alone: it waits until the calls in flight are done,
//! and the calls after it wait until it is; calls that can be asked take their turns first come,
//! first served. Calls of clients that cannot be asked share the upstream with each other, as
//! without the key. The turn is held by the call's pending entry, so that it ends however the
//! call does (answer, error, cancel, timeout, a lost connection). The gateway's own requests
//! (lists, pings) take no turn: the server's requests during them have no client to go to
//! anyway.
//!
//! While the call that has the upstream alone waits on its client (a request of the server to
//! that client is unanswered: a model thinking, a person filling in a form, or a client that
//! never answers), its turn is *lent* to the calls of clients that cannot be asked: they run
//! meanwhile, so that one slow client does not stall them. A request the server sends while
//! they do has several possible owners and is refused as ambiguous, as it would be without the
//! key (the server is then waiting on the client; a second request of the same call at the same
//! time is rare). When the client answers, the lending ends: new calls wait again, and the
//! answer reaches the server only once the calls that borrowed the turn are done, so that what
//! the server asks next has one owner again ([`Upstream::answer_when_alone`]).
//!
//! A call still waiting for its turn is not in the upstream yet: a client's cancel of it
//! ([`Upstream::cancel_waiting`]) ends the wait, and the call fails as cancelled without
//! ever reaching the server.
//!
//! The cost: while a call that can be asked is in flight and not waiting on its client, the
//! upstream serves no other call; other calls that can be asked wait for it even while it waits
//! on its client (at most `server_request_timeout_secs` per question). A server that handles one
//! request at a time keeps a borrowing call waiting behind the call whose client it waits on,
//! and holds that client's answer until the borrowing call times out.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, oneshot};

use super::Upstream;
use crate::context::SessionState;
use crate::error::Error;
use crate::jsonrpc::Message;
use crate::lock::lock;
use crate::policy::ServerRequests;

/// The turns of one upstream, and the calls waiting for theirs by request id, with the way to
/// cancel each.
#[derive(Debug, Default)]
pub(super) struct Turns {
    held: Arc<Held>,
    /// At most one entry per call waiting (removed when its wait ends, however it ends).
    waiting: Mutex<HashMap<i64, oneshot::Sender<Option<String>>>>,
}

/// Who holds which turn, and a nudge on every change.
#[derive(Debug, Default)]
struct Held {
    state: Mutex<State>,
    changed: Notify,
}

/// Who holds which turn (pure: the rules are its methods).
#[derive(Debug, Default)]
struct State {
    /// Calls that cannot be asked, in flight side by side.
    side_by_side: usize,
    /// The call that has the upstream alone.
    alone: Option<Alone>,
    /// Calls that can be asked waiting for their turn, by ticket, first come first served.
    queue: VecDeque<u64>,
    next_ticket: u64,
}

/// The call that has the upstream alone.
#[derive(Debug)]
struct Alone {
    ticket: u64,
    /// Its client's session: the server's requests to it are this call's.
    session: Option<String>,
    /// It waits on its client: calls that cannot be asked may run meanwhile.
    lending: bool,
}

impl State {
    /// Takes the upstream alone for `ticket` if it is free and `ticket` is first in line.
    fn try_alone(&mut self, ticket: u64, session: Option<&str>) -> bool {
        let free = self.alone.is_none() && self.side_by_side == 0;
        if !free || self.queue.front() != Some(&ticket) {
            return false;
        }
        self.queue.pop_front();
        self.alone = Some(Alone {
            ticket,
            session: session.map(str::to_owned),
            lending: false,
        });
        true
    }

    /// Takes a turn side by side: when nobody has the upstream alone or waits for it, or the
    /// one who has it lends it.
    fn try_side_by_side(&mut self) -> bool {
        let open = match &self.alone {
            Some(alone) => alone.lending,
            None => self.queue.is_empty(),
        };
        if open {
            self.side_by_side += 1;
        }
        open
    }

    /// The call that has the upstream alone, if its client's session is `session`.
    fn holder(&mut self, session: &str) -> Option<&mut Alone> {
        self.alone
            .as_mut()
            .filter(|a| a.session.as_deref() == Some(session))
    }
}

/// A call's turn in an upstream, held until its pending entry goes.
#[derive(Debug)]
pub(super) struct Turn {
    held: Arc<Held>,
    /// The ticket of a turn alone; `None` for one side by side.
    alone: Option<u64>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        {
            let mut state = lock(&self.held.state);
            match self.alone {
                Some(ticket) => {
                    if state.alone.as_ref().is_some_and(|a| a.ticket == ticket) {
                        state.alone = None;
                    }
                }
                None => state.side_by_side = state.side_by_side.saturating_sub(1),
            }
        }
        self.held.changed.notify_waiters();
    }
}

/// A call's place in the line for a turn alone, left when its wait ends however it ends.
struct InLine<'a> {
    held: &'a Held,
    ticket: u64,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        let left = {
            let mut state = lock(&self.held.state);
            let before = state.queue.len();
            state.queue.retain(|t| *t != self.ticket);
            state.queue.len() != before
        };
        if left {
            self.held.changed.notify_waiters();
        }
    }
}

impl Held {
    /// Waits until `take` says yes (it is asked again on every change).
    async fn until(&self, mut take: impl FnMut(&mut State) -> bool) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if take(&mut lock(&self.state)) {
                return;
            }
            changed.await;
        }
    }

    /// A turn alone for the client of `session`, first come first served.
    async fn alone(self: &Arc<Self>, session: Option<&str>) -> Turn {
        let ticket = {
            let mut state = lock(&self.state);
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            state.queue.push_back(ticket);
            ticket
        };
        let _in_line = InLine { held: self, ticket };
        self.until(|state| state.try_alone(ticket, session)).await;
        Turn {
            held: Arc::clone(self),
            alone: Some(ticket),
        }
    }

    /// A turn side by side.
    async fn side_by_side(self: &Arc<Self>) -> Turn {
        self.until(State::try_side_by_side).await;
        Turn {
            held: Arc::clone(self),
            alone: None,
        }
    }
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
        client: Option<(&SessionState, &str)>,
        id: Option<i64>,
    ) -> Result<Option<Turn>, Error> {
        let spec = &self.inner.spec;
        if spec.server_requests != ServerRequests::Serialize || !for_client {
            return Ok(None);
        }
        let held = &self.inner.turns.held;
        let alone = client
            .filter(|(c, _)| can_be_asked(c, spec.roots.is_some()))
            .map(|(_, session)| session);
        let wait = async {
            match alone {
                Some(session) => held.alone(Some(session)).await,
                None => held.side_by_side().await,
            }
        };
        let Some(id) = id else {
            return Ok(Some(wait.await));
        };
        let turns = &self.inner.turns;
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

    /// The server asked the client of `session` something: if that client's call has the
    /// upstream alone, it now waits on its client and lends its turn.
    pub(super) fn lend_turn(&self, session: &str) {
        let held = &self.inner.turns.held;
        let lent = lock(&held.state)
            .holder(session)
            .map(|alone| alone.lending = true)
            .is_some();
        if lent {
            held.changed.notify_waiters();
        }
    }

    /// Sends the server `answer` to its request to the client of `session`. When that
    /// client's call has the upstream alone, the lending ends, and the answer waits until the
    /// calls that borrowed the turn are done (or the holder's call is), so that what the server
    /// asks next has one owner.
    ///
    /// # Errors
    /// As [`Upstream::notify`], when the answer goes at once.
    pub(super) fn answer_when_alone(&self, session: &str, answer: Message) -> Result<(), Error> {
        let held = &self.inner.turns.held;
        let later = {
            let mut state = lock(&held.state);
            let borrowed = state.side_by_side > 0;
            state.holder(session).and_then(|alone| {
                alone.lending = false;
                borrowed.then_some(alone.ticket)
            })
        };
        let Some(ticket) = later else {
            return self.notify(answer);
        };
        // On the connection the server asked on: a new one never sent that request.
        let link = self.link(false)?;
        let upstream = self.clone();
        let held = Arc::clone(held);
        tokio::spawn(async move {
            let alone = held.until(|state| {
                state.side_by_side == 0 || state.alone.as_ref().is_none_or(|a| a.ticket != ticket)
            });
            tokio::select! {
                () = alone => {
                    let _ = upstream.send_on(&link, answer, None);
                }
                () = upstream.inner.shutdown.cancelled() => {}
            }
        });
        Ok(())
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
    use std::time::Duration;

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

    /// Whether `turn` is ready within a moment (paused time: nothing else can free it).
    async fn ready<T>(turn: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::time::timeout(Duration::from_millis(10), turn)
            .await
            .ok()
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_can_be_asked_waits_for_the_others_and_they_for_it() {
        let held = Arc::new(Held::default());
        let a = ready(held.side_by_side()).await.expect("free");
        let b = ready(held.side_by_side()).await.expect("side by side");
        // A turn alone waits for both; meanwhile new side-by-side calls wait behind it.
        let alone = tokio::spawn({
            let held = Arc::clone(&held);
            async move { held.alone(Some("s")).await }
        });
        tokio::task::yield_now().await;
        assert!(ready(held.side_by_side()).await.is_none());
        drop(a);
        drop(b);
        let alone = alone.await.expect("the turn alone comes");
        assert!(ready(held.side_by_side()).await.is_none());
        assert!(ready(held.alone(Some("t"))).await.is_none());
        drop(alone);
        assert!(ready(held.side_by_side()).await.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_alone_is_lent_while_its_client_is_asked_and_taken_back_on_the_answer() {
        let held = Arc::new(Held::default());
        let alone = ready(held.alone(Some("s"))).await.expect("free");
        assert!(lock(&held.state).holder("other").is_none());
        lock(&held.state).holder("s").expect("its holder").lending = true;
        // Lent: calls side by side go; another call that can be asked still waits.
        let borrowed = ready(held.side_by_side()).await.expect("lent");
        assert!(ready(held.alone(Some("t"))).await.is_none());
        // Taken back: no new borrower; the next turn alone waits for the borrower too.
        lock(&held.state).holder("s").expect("its holder").lending = false;
        assert!(ready(held.side_by_side()).await.is_none());
        drop(alone);
        assert!(ready(held.alone(Some("t"))).await.is_none());
        drop(borrowed);
        assert!(ready(held.alone(Some("t"))).await.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn calls_that_can_be_asked_go_first_come_first_served_and_a_gone_waiter_leaves_the_line()
    {
        let held = Arc::new(Held::default());
        let first = ready(held.alone(Some("a"))).await.expect("free");
        let second = tokio::spawn({
            let held = Arc::clone(&held);
            async move { held.alone(Some("b")).await }
        });
        tokio::task::yield_now().await;
        // A third that gives up leaves the line without blocking the second.
        assert!(ready(held.alone(Some("c"))).await.is_none());
        assert_eq!(lock(&held.state).queue.len(), 1);
        drop(first);
        let second = second.await.expect("the second comes next");
        assert_eq!(second.alone, Some(1));
    }
}
