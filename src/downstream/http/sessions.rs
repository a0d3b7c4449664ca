//! The table of live 2025-era sessions: who opened each (for the per-client cap), whether it
//! is in use, its GET stream, the caps on opening one and the expiry of idle ones. With a seal
//! key, a session this replica does not know is rebuilt from its sealed id (see [`super::sealed`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::listen::{Overflow, Peer};
use super::owner::{Owner, Tally};
use super::reply::plain_error;
use super::sealed::{self, Revoked};
use super::{AppState, SESSION_HEADER};
use crate::context::{ClientGone, Deliver, Outbound, Session};
use crate::error::kind;
use crate::identity::Principal;
use crate::jsonrpc::Message;
use crate::lock::lock;

/// Longest wait between two sweeps for idle sessions (shorter for short idle times).
const MAX_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// A live 2025-era session.
pub(super) struct Entry {
    pub(super) session: Arc<Session>,
    pub(super) link: Arc<Link>,
    /// The client that opened it: the only one that may use it.
    pub(super) principal: Arc<Principal>,
    /// Who it counts against in [`Sessions::per_client`]: its client, or for anonymous
    /// traffic the address that opened it.
    owner: Option<Owner>,
    /// When its sealed id expires (Unix seconds); `None` for an unsealed id.
    expires: Option<u64>,
    /// The sweeper's view: [`Link::uses`] when it last looked, and since when that has not
    /// changed with the session idle.
    seen_uses: u64,
    idle_since: Instant,
}

impl Entry {
    /// A new session's entry, opened by `principal` from `client`.
    pub(super) fn new(
        session: Arc<Session>,
        link: Arc<Link>,
        principal: Arc<Principal>,
        client: Option<IpAddr>,
    ) -> Self {
        Self {
            session,
            link,
            owner: Owner::of(&principal, client),
            principal,
            expires: None,
            seen_uses: 0,
            idle_since: Instant::now(),
        }
    }

    /// The entry of a session whose sealed id expires at `exp` (Unix seconds).
    pub(super) fn expiring(mut self, exp: u64) -> Self {
        self.expires = Some(exp);
        self
    }
}

/// What a session's handlers, its session-wide sink and the sweeper share.
#[derive(Default)]
pub(super) struct Link {
    /// The open GET stream, if any.
    pub(super) stream: Mutex<Option<GetStream>>,
    /// Requests in flight plus the open GET stream: a busy session does not expire.
    busy: AtomicUsize,
    /// Requests and GET streams ever ended: the sweeper sees use without a clock read per
    /// request.
    uses: AtomicU64,
}

/// The sending side of a session's GET stream.
pub(super) struct GetStream {
    pub(super) tx: mpsc::Sender<Message>,
    /// Its connection, closed when the client stops reading.
    pub(super) peer: Option<Arc<Peer>>,
}

/// What a `DELETE` ended.
#[derive(Debug)]
pub(super) struct Ended {
    /// A sealed session's `sid` and its id's `exp`: what the other replicas revoke.
    pub(super) sealed: Option<(String, u64)>,
}

/// The caps on opening sessions.
#[derive(Debug, Clone, Copy)]
pub(super) struct SessionCaps {
    /// Live sessions, all clients together.
    pub(super) max: NonZeroUsize,
    /// Live sessions of one client (or, anonymous, one address).
    pub(super) per_client: NonZeroUsize,
}

/// The live sessions, and how many each client (or anonymous address) opened.
#[derive(Default)]
pub(super) struct Sessions {
    pub(super) map: HashMap<String, Entry>,
    per_client: Tally,
    /// Sealed sessions ended here by `DELETE`, not to be rebuilt from their ids.
    revoked: Revoked,
}

impl Sessions {
    /// Adds session `id`, unless that would pass a cap.
    ///
    /// # Errors
    /// Why the session is refused, naming the policy key.
    pub(super) fn admit(
        &mut self,
        id: String,
        entry: Entry,
        caps: SessionCaps,
    ) -> Result<(), String> {
        if self.map.len() >= caps.max.get() {
            return Err(format!(
                "the gateway has too many open sessions (downstream.max_sessions = {}): \
                 end unused ones with DELETE or retry later",
                caps.max
            ));
        }
        if let Some(owner) = &entry.owner {
            if self.per_client.get(owner) >= caps.per_client.get() {
                return Err(format!(
                    "too many open sessions {} (downstream.max_sessions_per_client = {}): end \
                     unused ones with DELETE",
                    owner.whose(),
                    caps.per_client
                ));
            }
            self.per_client.add(owner.clone());
        }
        self.map.insert(id, entry);
        Ok(())
    }

    /// Files the session admitted as `old` under its sealed id `new`, which expires at `exp`
    /// (a sealed id is made once `initialize` is answered, after the session was admitted).
    pub(super) fn rekey(&mut self, old: &str, new: String, exp: u64) {
        if let Some(entry) = self.map.remove(old) {
            self.map.insert(new, entry.expiring(exp));
        }
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<Entry> {
        let entry = self.map.remove(id)?;
        if let Some(owner) = &entry.owner {
            self.per_client.remove(owner);
        }
        Some(entry)
    }

    /// Removes and returns the sessions unused for `idle` at `now`: not busy, and not used
    /// since the sweep that found them idle, that long ago. The scan is bounded by
    /// `max_sessions`.
    fn take_idle(&mut self, now: Instant, idle: Duration) -> Vec<(String, Entry)> {
        let mut ids = Vec::new();
        for (id, e) in &mut self.map {
            // `busy` first: a use that ended is counted in `uses` before `busy` drops.
            let busy = e.link.busy.load(Ordering::Acquire) > 0;
            let uses = e.link.uses.load(Ordering::Acquire);
            if busy || uses != e.seen_uses {
                e.seen_uses = uses;
                e.idle_since = now;
            } else if now.duration_since(e.idle_since) >= idle {
                ids.push(id.clone());
            }
        }
        ids.into_iter()
            .filter_map(|id| self.remove(&id).map(|e| (id, e)))
            .collect()
    }
}

impl AppState {
    /// Ends session `id` (DELETE) of `principal`: it is forgotten here and by the gateway, and
    /// its GET stream ends; a sealed one is not rebuilt here until its id expires. `None` when
    /// it did not exist; a session of another client is not ended. A sealed session's
    /// `(sid, exp)` come back, for the other replicas to end it too (`[state]`).
    pub(super) fn end_session(
        &self,
        id: &str,
        principal: &Principal,
    ) -> Result<Option<Ended>, Box<Response>> {
        let entry = {
            let mut sessions = lock(&self.sessions);
            match sessions.map.get(id) {
                None => None,
                Some(e) if !super::auth::same(&e.principal, principal) => {
                    return Err(super::auth::foreign_session());
                }
                Some(_) => sessions.remove(id).inspect(|entry| {
                    if let Some(exp) = entry.expires {
                        sessions.revoked.insert(&entry.session.id, exp);
                    }
                }),
            }
        };
        if let Some(entry) = entry {
            self.forget(&entry);
            let sealed = (entry.expires).map(|exp| (entry.session.id.clone(), exp));
            return Ok(Some(Ended { sealed }));
        }
        // Not held here: a sealed id this replica never served (or served before a restart)
        // ends here too.
        let Some(claims) = self.open_sealed(id) else {
            return Ok(None);
        };
        if !sealed::belongs_to(&claims, principal) {
            return Err(super::auth::foreign_session());
        }
        let mut sessions = lock(&self.sessions);
        if sessions.revoked.contains(&claims.sid) {
            return Ok(None);
        }
        sessions.revoked.insert(&claims.sid, claims.exp);
        Ok(Some(Ended {
            sealed: Some((claims.sid, claims.exp)),
        }))
    }

    /// A session another replica ended (`[state]`): ended here too, if held, and not rebuilt
    /// from its id until it expires.
    pub(super) fn revoked_elsewhere(&self, sid: &str, exp: u64) {
        let ended: Vec<Entry> = {
            let mut sessions = lock(&self.sessions);
            if sessions.revoked.contains(sid) {
                return;
            }
            sessions.revoked.insert(sid, exp);
            let ids: Vec<String> = (sessions.map.iter())
                .filter(|(_, e)| e.session.id == sid)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        for entry in ended {
            self.forget(&entry);
            tracing::debug!(session = %sid, "Session ended by DELETE on another replica");
        }
    }

    /// What ending a session takes besides removing its entry.
    fn forget(&self, entry: &Entry) {
        lock(&entry.link.stream).take();
        self.sessions_handle.ended(&entry.session.id);
    }

    /// Ends the sessions unused for [`super::HttpConfig::session_idle`] as DELETE does (a
    /// sealed one is rebuilt from its id when it comes back), and forgets the revocations of
    /// ids that have expired.
    fn expire_idle(&self) {
        // Found and removed under one lock: a request takes its session under the same lock,
        // so a session cannot be expired while a request starts on it.
        let expired = {
            let mut sessions = lock(&self.sessions);
            if self.config.sealer.is_some() {
                sessions.revoked.prune(sealed::unix_now());
            }
            sessions.take_idle(Instant::now(), self.config.session_idle)
        };
        for (_, entry) in expired {
            self.forget(&entry);
            let id = &entry.session.id;
            tracing::debug!(session = %id, "Session expired (downstream.session_idle_secs)");
        }
    }

    /// Starts the sweeper for idle sessions, once.
    pub(super) fn start_sweeping(self: &Arc<Self>) {
        if !self.sweeping.swap(true, Ordering::AcqRel) {
            tokio::spawn(sweep(Arc::downgrade(self), self.config.session_idle));
        }
    }

    /// The caps on opening sessions.
    pub(super) fn caps(&self) -> SessionCaps {
        SessionCaps {
            max: self.config.max_sessions,
            per_client: self.config.max_sessions_per_client,
        }
    }

    /// The session a request of `principal` from `client` names, marked in use until the
    /// returned guard is dropped. A session opened by another client is refused; a sealed id
    /// this replica does not hold is rebuilt.
    pub(super) fn session_of(
        self: &Arc<Self>,
        headers: &HeaderMap,
        principal: &Arc<Principal>,
        client: Option<IpAddr>,
    ) -> Result<(Arc<Session>, InUse), Box<Response>> {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return Err(Box::new(plain_error(
                StatusCode::BAD_REQUEST,
                "missing Mcp-Session-Id header: send initialize first",
                kind::SESSION_MISSING,
            )));
        };
        let expired = {
            let mut sessions = lock(&self.sessions);
            match sessions.map.get(id) {
                Some(entry) if !super::auth::same(&entry.principal, principal) => {
                    return Err(super::auth::foreign_session());
                }
                Some(entry) if entry.expires.is_some_and(|exp| sealed::unix_now() >= exp) => {
                    sessions.remove(id)
                }
                Some(entry) => {
                    if entry.expires.is_some() {
                        mark_initialized(&entry.session);
                    }
                    return Ok((entry.session.clone(), InUse::new(&entry.link)));
                }
                None => None,
            }
        };
        if let Some(entry) = expired {
            // Its id is refused everywhere now (`open` checks `exp`).
            self.forget(&entry);
        }
        self.rebuild(id, principal, client)
    }

    /// The session of sealed id `id`, rebuilt here from what the id carries and registered
    /// with the gateway, if the id is ours, not expired, not ended here, and `principal`'s.
    fn rebuild(
        self: &Arc<Self>,
        id: &str,
        principal: &Arc<Principal>,
        client: Option<IpAddr>,
    ) -> Result<(Arc<Session>, InUse), Box<Response>> {
        let Some(claims) = self.open_sealed(id) else {
            return Err(unknown_session());
        };
        if !sealed::belongs_to(&claims, principal) {
            return Err(super::auth::foreign_session());
        }
        let link = Arc::new(Link::default());
        let limit = self.config.max_outbound_messages;
        let session = session(claims.sid.clone(), link.clone(), limit);
        let state = sealed::state_of(&claims);
        session.update(|s| *s = state);
        // Its client is known now, before any request reaches the gateway (one the budget
        // layer answers never does): what the client's instances say outside a call reaches
        // it from the start.
        session.bind_principal(principal);
        let in_use = {
            let mut sessions = lock(&self.sessions);
            if sessions.revoked.contains(&claims.sid) {
                return Err(unknown_session());
            }
            // Another request on the same id rebuilt it meanwhile.
            if let Some(entry) = sessions.map.get(id) {
                return Ok((entry.session.clone(), InUse::new(&entry.link)));
            }
            let entry = Entry::new(session.clone(), link.clone(), principal.clone(), client)
                .expiring(claims.exp);
            if let Err(refusal) = sessions.admit(id.to_owned(), entry, self.caps()) {
                return Err(Box::new(plain_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &refusal,
                    kind::SESSION_LIMIT,
                )));
            }
            // Under the lock: the sweeper cannot take it before it is in use.
            InUse::new(&link)
        };
        self.start_sweeping();
        self.sessions_handle.opened(&session);
        tracing::debug!(session = %claims.sid, principal = %claims.principal, "Session rebuilt from its sealed id");
        Ok((session, in_use))
    }

    /// The claims of `id` if it is a sealed id this gateway can open, not expired.
    fn open_sealed(&self, id: &str) -> Option<crate::seal::Claims> {
        let sealer = self.config.sealer.as_ref()?;
        sealer
            .open(id, sealed::unix_now())
            .inspect_err(|e| tracing::debug!(reason = %e, "Session id refused"))
            .ok()
    }

    /// Whether the request names a live session that negotiated protocol `version`.
    pub(super) fn session_speaks(&self, headers: &HeaderMap, version: &str) -> bool {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let session = lock(&self.sessions).map.get(id).map(|e| e.session.clone());
        match session {
            Some(s) => s.state().protocol_version.as_deref() == Some(version),
            None => self
                .open_sealed(id)
                .is_some_and(|c| c.protocol_version == version),
        }
    }
}

/// Marks a sealed session initialized once its client uses it after `initialize`: its
/// `notifications/initialized` may have gone to another replica, and without the mark this one
/// would never send it broadcasts (`list_changed`) on a GET stream opened here.
fn mark_initialized(session: &Session) {
    if !session.with_state(|s| s.initialized) {
        session.update(|s| s.initialized = true);
    }
}

/// The refusal of an id this gateway does not know (or no longer knows).
fn unknown_session() -> Box<Response> {
    Box::new(plain_error(
        StatusCode::NOT_FOUND,
        "unknown or expired session: initialize again",
        kind::SESSION_UNKNOWN,
    ))
}

/// Looks for idle sessions every quarter of the idle time (at most every minute) until the
/// router is gone.
async fn sweep(state: Weak<AppState>, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_millis(100), MAX_SWEEP_INTERVAL);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(state) = state.upgrade() else {
            return;
        };
        state.expire_idle();
    }
}

/// A session in use (a request in flight, an open GET stream): it does not expire while this
/// lives, and counts as used at the next sweep.
pub(super) struct InUse {
    pub(super) link: Arc<Link>,
}

impl InUse {
    pub(super) fn new(link: &Arc<Link>) -> Self {
        link.busy.fetch_add(1, Ordering::AcqRel);
        Self { link: link.clone() }
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        // Counted before `busy` drops, so that the next sweep sees the use and starts the
        // session's idle time then.
        self.link.uses.fetch_add(1, Ordering::Release);
        self.link.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Ends here the sessions other replicas end (`[state]`), until the endpoint is dropped.
pub(super) async fn follow_revocations(
    state: std::sync::Weak<AppState>,
    store: crate::state::Store,
) {
    use tokio::sync::broadcast::error::RecvError;
    let (so_far, mut revocations) = store.revocations();
    drop(store);
    if let Some(state) = state.upgrade() {
        for revoked in so_far {
            state.revoked_elsewhere(&revoked.sid, revoked.exp);
        }
    }
    loop {
        match revocations.recv().await {
            Ok(revoked) => {
                let Some(state) = state.upgrade() else { return };
                state.revoked_elsewhere(&revoked.sid, revoked.exp);
            }
            Err(RecvError::Lagged(missed)) => tracing::warn!(
                missed,
                "Missed revocations of other replicas: this replica may serve those sessions until their ids expire"
            ),
            Err(RecvError::Closed) => return,
        }
    }
}

/// A session whose session-wide messages (`list_changed`, server→client requests outside a
/// call) go to `link`'s open GET stream, if any, as they are sent: no channel and no task per
/// session, so an idle one costs a few hundred bytes.
pub(super) fn session(id: String, link: Arc<Link>, limit: NonZeroUsize) -> Arc<Session> {
    let sid: Arc<str> = id.as_str().into();
    let to = ToGetStream {
        link,
        session: sid.clone(),
        limit,
    };
    Arc::new(Session::with_outbound(
        id,
        Outbound::direct(sid, Arc::new(to)),
    ))
}

/// Hands session-wide messages to the open GET stream, if any, at once: the gateway's side
/// never waits. A stream whose client lets `limit` messages pile up is closed (the session
/// lives on and may open another); without a stream the message is dropped, as the transport
/// allows.
struct ToGetStream {
    link: Arc<Link>,
    session: Arc<str>,
    limit: NonZeroUsize,
}

impl std::fmt::Debug for ToGetStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToGetStream")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Deliver for ToGetStream {
    fn deliver(&self, msg: Message) -> Result<(), ClientGone> {
        let mut current = lock(&self.link.stream);
        let Some(stream) = current.as_ref() else {
            return Ok(());
        };
        match stream.tx.try_send(msg) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Closed(_)) => *current = None,
            Err(mpsc::error::TrySendError::Full(_)) => {
                let overflow = Overflow {
                    peer: stream.peer.clone(),
                    limit: self.limit,
                };
                *current = None;
                overflow.close(&self.session, None);
            }
        }
        Ok(())
    }
}

impl Drop for ToGetStream {
    /// The session is gone: so is its GET stream.
    fn drop(&mut self) {
        lock(&self.link.stream).take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(client: Option<IpAddr>) -> Entry {
        let (notify, _) = mpsc::unbounded_channel();
        let session = Arc::new(Session::new("s", notify));
        Entry::new(session, Arc::default(), Principal::anonymous(), client)
    }

    fn caps(max: usize, per_client: usize) -> SessionCaps {
        SessionCaps {
            max: NonZeroUsize::new(max).unwrap(),
            per_client: NonZeroUsize::new(per_client).unwrap(),
        }
    }

    #[test]
    fn sessions_are_capped_in_all_and_per_client() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let mut sessions = Sessions::default();
        let caps = caps(3, 2);
        assert!(sessions.admit("1".into(), entry(Some(a)), caps).is_ok());
        assert!(sessions.admit("2".into(), entry(Some(a)), caps).is_ok());
        let refused = sessions
            .admit("3".into(), entry(Some(a)), caps)
            .unwrap_err();
        assert!(refused.contains("max_sessions_per_client = 2"), "{refused}");
        assert!(sessions.admit("3".into(), entry(Some(b)), caps).is_ok());
        let refused = sessions.admit("4".into(), entry(None), caps).unwrap_err();
        assert!(refused.contains("max_sessions = 3"), "{refused}");
        // Ending one frees its client's place.
        assert!(sessions.remove("1").is_some());
        assert!(sessions.admit("4".into(), entry(Some(a)), caps).is_ok());
        assert_eq!(sessions.map.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn only_sessions_unused_for_the_idle_time_expire() {
        let idle = Duration::from_secs(10);
        let mut sessions = Sessions::default();
        let caps = caps(10, 10);
        for id in ["quiet", "used", "busy"] {
            sessions.admit(id.into(), entry(None), caps).unwrap();
        }
        let start = Instant::now();
        let link = |s: &Sessions, id: &str| s.map[id].link.clone();
        let busy = InUse::new(&link(&sessions, "busy"));
        assert!(sessions.take_idle(start + idle / 2, idle).is_empty());
        // "used" serves a request: its idle time starts again at the next sweep.
        drop(InUse::new(&link(&sessions, "used")));
        let gone = sessions.take_idle(start + idle, idle);
        assert_eq!(
            gone.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
            ["quiet"]
        );
        assert!(sessions.take_idle(start + idle + idle / 2, idle).is_empty());
        let gone = sessions.take_idle(start + idle * 2, idle);
        assert_eq!(
            gone.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
            ["used"]
        );
        drop(busy);
        assert_eq!(sessions.map.len(), 1);
    }

    fn note(n: u64) -> Message {
        Message::notification(
            "notifications/message",
            Some(crate::jsonrpc::to_raw(&serde_json::json!({ "n": n }))),
        )
    }

    #[test]
    fn session_wide_messages_go_to_the_open_get_stream_or_nowhere() {
        let link = Arc::new(Link::default());
        let limit = NonZeroUsize::new(2).unwrap();
        let session = session("s1".into(), link.clone(), limit);
        // No stream open: dropped, and the session is not gone.
        assert!(session.notify.send(note(0)).is_ok());
        assert!(!session.notify.is_closed());
        let (tx, mut rx) = mpsc::channel(limit.get());
        *lock(&link.stream) = Some(GetStream { tx, peer: None });
        session.notify.send(note(1)).unwrap();
        session.notify.send(note(2)).unwrap();
        assert_eq!(
            rx.try_recv()
                .unwrap()
                .params_as::<serde_json::Value>()
                .unwrap()["n"],
            1
        );
        // The client reads no more: the third of a limit of two closes its stream.
        session.notify.send(note(3)).unwrap();
        session.notify.send(note(4)).unwrap();
        assert!(lock(&link.stream).is_none());
        let n = |m: Message| m.params_as::<serde_json::Value>().unwrap()["n"].as_u64();
        assert_eq!(n(rx.try_recv().unwrap()), Some(2));
        assert_eq!(n(rx.try_recv().unwrap()), Some(3));
        assert!(matches!(
            rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        // A stream opened again is fed; the session's end closes it.
        let (tx, mut rx) = mpsc::channel(limit.get());
        *lock(&link.stream) = Some(GetStream { tx, peer: None });
        session.notify.send(note(5)).unwrap();
        drop(session);
        assert!(lock(&link.stream).is_none());
        assert!(rx.try_recv().is_ok());
        assert!(matches!(
            rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }
}
