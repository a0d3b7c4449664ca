//! State that replicas share (`[state]`, issue 34), in Redis or Valkey: the `[limits]` rates,
//! so that every replica spends the same buckets; the usage counts every replica plans with
//! ([`usage`]); sessions ended by `DELETE` and clients' answers for the replica whose upstream
//! asked ([`relay`]); the results kept for `read_result` ([`results`]).
//!
//! With `backend = "redis"` the `limit` layer asks the [`Store`] instead of its own ledger:
//! one round trip per call (`EVALSHA` of [`gcra::SCRIPT`], every key of the call at once, on
//! the server's clock), bounded by `timeout_ms`. Calls in flight and their queues stay per
//! replica: a slot is held for a call's whole life, and sharing it would cost a round trip at
//! its end too.
//!
//! **When the store fails** (an error, or no answer within `timeout_ms`) an *episode* begins:
//! one warning is logged, calls stop asking the store and are decided by `on_store_error`
//! (`local_share`: each replica enforces its share of every rate, divided by the replicas the
//! heartbeat last counted, starting from its share of what it last knew was left and paying
//! what it admitted back to the store when the store answers again, see `state/local.rs`;
//! `open`: let through; `closed`: refused with `mcp_budget.state.unavailable`), each counted in
//! `mcp_budget_state_fallbacks_total{reason}`. The heartbeat (every 2 s, every 500 ms while
//! the store is down, and at once when a call finds it down) ends the episode when the store
//! answers again within `timeout_ms` and has been paid back, and logs it.
//!
//! **Revocations** (a `DELETE` of a sealed session) are kept by every replica that heard them
//! until their ids expire. One the store did not take is sent again at every heartbeat until
//! it does; and whenever a replica subscribes again (the store restarted, perhaps empty), it
//! puts back in the store every revocation it knows and the store lost. Only when every
//! replica and the store restart together are revocations lost: give the store persistence
//! (`appendonly yes`) for that.
//!
//! The heartbeat also counts replicas: each adds itself to a sorted set scored by the server's
//! clock, and those not seen for 5 s drop out.

pub mod gcra;
// What is learned from and paid back to a shared store needs one (feature `redis`); without
// it only the local buckets are used.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
mod local;
pub mod relay;
pub mod results;
pub mod usage;

#[cfg(feature = "redis")]
mod conn;
#[cfg(feature = "redis")]
mod follow;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::limits::{ClientLimits, Refused, Which};
use crate::policy::state::{OnStoreError, RedisState};
use crate::telemetry::names;

/// How often a replica beats while the store answers.
pub const BEAT_EVERY: Duration = Duration::from_secs(2);
/// How often the heartbeat tries while the store is down.
pub const PROBE_EVERY: Duration = Duration::from_millis(500);
/// How soon the heartbeat tries again while the store is down but answered, too slowly: a
/// store paused for a moment is shared again soon, so that replicas do not decide alone for
/// long (what they admit meanwhile, on the same bucket as the replicas already back, is paid
/// back afterwards, as a wait for the client).
pub const RECHECK_EVERY: Duration = Duration::from_millis(100);
/// How long a replica counts after its last beat.
pub const REPLICA_TTL: Duration = Duration::from_secs(5);
/// The longest a connection to the store may take (or `timeout_ms`, when longer): a TLS
/// handshake to a distant store takes longer than a call may wait, so connecting is the
/// heartbeat's wait, not a call's.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Most revoked sessions a replica reads from the store when it subscribes (the latest to
/// expire), and remembers.
pub const MAX_REVOCATIONS: usize = 65_536;
/// Revocations a slow follower may fall behind by before it misses some (it then reads the
/// whole set again at its next subscription).
const REVOCATIONS_BUFFER: usize = 4_096;
/// The `retryAfterMs` of a call refused because the store is down (`closed`).
const CLOSED_RETRY_MS: u64 = 1_000;

/// The shared store of one gateway process: cheap to clone, shared by every stack generation.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: RedisState,
    #[cfg(feature = "redis")]
    conn: Option<conn::Conn>,
    /// Whether calls ask the store (false during an episode).
    up: AtomicBool,
    /// Why the current episode began (a [`names`] reason).
    reason: Mutex<&'static str>,
    /// Replicas the heartbeat last counted (at least 1).
    replicas: AtomicU64,
    /// When the current episode began (`None`: the store answers).
    down_since: Mutex<Option<std::time::Instant>>,
    /// The local buckets of `local_share`, what is known and what is owed of the shared ones.
    local: Mutex<local::Local>,
    /// Wakes the heartbeat (a call found the store down).
    wake: tokio::sync::Notify,
    /// The server's clock less this replica's `epoch` clock, in µs (`i64::MIN`: not known).
    offset_us: std::sync::atomic::AtomicI64,
    epoch: tokio::time::Instant,
    /// This replica's id: its heartbeat's member, its channel, the tag of the ids of the
    /// server→client requests it sends.
    replica: String,
    /// Where the subscription delivers.
    relayed: Relayed,
    /// Notes other replicas sent here (answers, retries to resume), until the gateway takes
    /// them.
    notes: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<relay::Note>>>,
}

/// Where the subscription delivers what other replicas tell this one.
#[derive(Debug, Clone)]
struct Relayed {
    revocations: Arc<Revocations>,
    promotions: tokio::sync::broadcast::Sender<relay::Promotion>,
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    notes: tokio::sync::mpsc::UnboundedSender<relay::Note>,
    /// Retries forwarded to other replicas, waiting for their outcome, by `corr`.
    waiting: Arc<Mutex<std::collections::HashMap<String, Waiting>>>,
}

type Waiting = tokio::sync::oneshot::Sender<Box<serde_json::value::RawValue>>;

#[cfg_attr(not(feature = "redis"), allow(dead_code))]
impl Relayed {
    /// The outcome of a retry this replica forwarded: to the call waiting for it.
    fn resumed(&self, outcome: relay::Resumed) {
        if let Some(tx) = crate::lock::lock(&self.waiting).remove(&outcome.corr) {
            let _ = tx.send(outcome.reply);
        }
    }
}

/// The revocations heard so far (until their ids expire, at most [`MAX_REVOCATIONS`]), and
/// their followers: one that starts following later gets those heard before too; and this
/// replica's own that the store has not taken yet.
#[derive(Debug)]
struct Revocations {
    heard: Mutex<std::collections::HashMap<String, u64>>,
    tx: tokio::sync::broadcast::Sender<relay::Revocation>,
    unsent: Mutex<std::collections::HashMap<String, u64>>,
}

#[cfg_attr(not(feature = "redis"), allow(dead_code))]
impl Revocations {
    fn new() -> Self {
        Self {
            heard: Mutex::default(),
            tx: tokio::sync::broadcast::channel(REVOCATIONS_BUFFER).0,
            unsent: Mutex::default(),
        }
    }

    /// `revocations` the store did not take: to be sent again (until their ids expire).
    fn unsent(&self, revocations: Vec<relay::Revocation>) {
        let mut unsent = crate::lock::lock(&self.unsent);
        let now = unix_now();
        unsent.retain(|_, exp| *exp > now);
        for r in revocations {
            if unsent.len() < MAX_REVOCATIONS && r.exp > now {
                unsent.insert(r.sid, r.exp);
            }
        }
    }

    /// Those the store did not take, taken to be sent again.
    fn take_unsent(&self) -> Vec<relay::Revocation> {
        let unsent = std::mem::take(&mut *crate::lock::lock(&self.unsent));
        let now = unix_now();
        (unsent.into_iter())
            .filter(|(_, exp)| *exp > now)
            .map(|(sid, exp)| relay::Revocation { sid, exp })
            .collect()
    }

    /// Those heard (their ids not expired) that `stored`, the store's set, lacks: no longer
    /// unsent, as the caller puts them back.
    fn missing_from(&self, stored: &std::collections::HashSet<String>) -> Vec<relay::Revocation> {
        let now = unix_now();
        crate::lock::lock(&self.unsent).clear();
        let heard = crate::lock::lock(&self.heard);
        (heard.iter())
            .filter(|(sid, exp)| **exp > now && !stored.contains(*sid))
            .map(|(sid, &exp)| relay::Revocation {
                sid: sid.clone(),
                exp,
            })
            .collect()
    }

    /// A revocation heard: kept, and told to every follower.
    fn heard(&self, revocation: relay::Revocation) {
        let mut heard = crate::lock::lock(&self.heard);
        if heard.contains_key(&revocation.sid) {
            return;
        }
        if heard.len() >= MAX_REVOCATIONS {
            let now = unix_now();
            heard.retain(|_, exp| *exp > now);
            if heard.len() >= MAX_REVOCATIONS {
                return;
            }
        }
        heard.insert(revocation.sid.clone(), revocation.exp);
        let _ = self.tx.send(revocation);
    }

    /// Those heard so far, and the ones to come.
    fn follow(
        &self,
    ) -> (
        Vec<relay::Revocation>,
        tokio::sync::broadcast::Receiver<relay::Revocation>,
    ) {
        let heard = crate::lock::lock(&self.heard);
        let so_far = (heard.iter())
            .map(|(sid, &exp)| relay::Revocation {
                sid: sid.clone(),
                exp,
            })
            .collect();
        (so_far, self.tx.subscribe())
    }
}

/// The Unix time in seconds (0 before 1970).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Store {
    /// The store of `settings` at `url` (`Err`: why there is none, logged, and every call is
    /// decided by `on_store_error`), with its heartbeat running until `shutdown`.
    ///
    /// # Panics
    /// Outside a Tokio runtime (the heartbeat is a task).
    #[must_use]
    pub fn start(
        settings: RedisState,
        url: Result<String, String>,
        shutdown: CancellationToken,
    ) -> Self {
        let conn = url.and_then(|url| connect(&url, &settings));
        let unavailable = conn.as_ref().err().cloned();
        let (notes_tx, notes_rx) = tokio::sync::mpsc::unbounded_channel();
        let relayed = Relayed {
            revocations: Arc::new(Revocations::new()),
            promotions: tokio::sync::broadcast::channel(REVOCATIONS_BUFFER).0,
            notes: notes_tx,
            waiting: Arc::default(),
        };
        let mut replica = uuid::Uuid::new_v4().simple().to_string();
        replica.truncate(16);
        let store = Self {
            inner: Arc::new(Inner {
                #[cfg(feature = "redis")]
                conn: conn.ok(),
                up: AtomicBool::new(unavailable.is_none()),
                reason: Mutex::new(names::STORE_UNCONFIGURED),
                replicas: AtomicU64::new(1),
                down_since: Mutex::new(unavailable.is_some().then(std::time::Instant::now)),
                local: Mutex::default(),
                wake: tokio::sync::Notify::new(),
                offset_us: std::sync::atomic::AtomicI64::new(i64::MIN),
                epoch: tokio::time::Instant::now(),
                replica,
                relayed,
                notes: Mutex::new(Some(notes_rx)),
                settings,
            }),
        };
        match unavailable {
            Some(why) => tracing::error!(
                on_store_error = store.inner.settings.on_store_error.name(),
                "{why}; [state] limits are not shared: every call is decided by on_store_error"
            ),
            None => {
                tokio::spawn(store.clone().heartbeat(shutdown.clone()));
                store.follow(shutdown);
            }
        }
        store
    }

    /// This replica's id (random, per process): the tag of the server→client request ids it
    /// sends, so that another replica taking the answer knows whom to forward it to.
    #[must_use]
    pub fn replica_id(&self) -> &str {
        &self.inner.replica
    }

    /// Sessions ended by `DELETE` on any replica (this one's included): those heard so far
    /// (whose ids have not expired), and the ones to come.
    #[must_use]
    pub fn revocations(
        &self,
    ) -> (
        Vec<relay::Revocation>,
        tokio::sync::broadcast::Receiver<relay::Revocation>,
    ) {
        self.inner.relayed.revocations.follow()
    }

    /// Tools promoted for sessions on any replica (`[discover] promote_on_use`), as they are.
    #[must_use]
    pub fn promotions(&self) -> tokio::sync::broadcast::Receiver<relay::Promotion> {
        self.inner.relayed.promotions.subscribe()
    }

    /// Adds `name` to the tools session `sid` promoted (kept for `ttl`, the session's
    /// lifetime), and tells every replica when it is new.
    ///
    /// # Errors
    /// Why the store did not take it (a [`names`] reason).
    pub async fn promote(&self, sid: &str, name: &str, ttl: Duration) -> Result<(), &'static str> {
        #[cfg(feature = "redis")]
        {
            let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
            self.ask(self.request_wait(), |conn, prefix| async move {
                conn.promote(prefix, sid, name, ttl_ms).await.map(drop)
            })
            .await
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = (sid, name, ttl);
            Err(names::STORE_UNCONFIGURED)
        }
    }

    /// The tools session `sid` promoted on any replica, in promotion order.
    ///
    /// # Errors
    /// Why the store did not answer (a [`names`] reason).
    pub async fn promoted(&self, sid: &str) -> Result<Vec<String>, &'static str> {
        #[cfg(feature = "redis")]
        {
            self.ask(self.request_wait(), |conn, prefix| {
                conn.promoted(prefix, sid)
            })
            .await
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = sid;
            Err(names::STORE_UNCONFIGURED)
        }
    }

    /// Keeps result `id` of session `sid` (`stored`, its text) for every replica, for `ttl`
    /// within `cap` bytes a session ([`results::PUT`]). Not asked during an episode; else
    /// bounded by `timeout_ms` or the connect timeout, whichever is longer (a result may be
    /// megabytes).
    ///
    /// # Errors
    /// Why the store did not take it (a [`names`] reason). `Ok(false)`: `stored` is larger than
    /// `cap`.
    pub async fn keep_result(
        &self,
        (sid, id): (&str, &str),
        stored: &str,
        ttl: Duration,
        cap: usize,
    ) -> Result<bool, &'static str> {
        self.while_up()?;
        #[cfg(feature = "redis")]
        {
            let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
            self.ask(self.background_wait(), |conn, prefix| {
                conn.keep_result(prefix, (sid, id), stored, ttl_ms, cap)
            })
            .await
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = (sid, id, stored, ttl, cap);
            Err(names::STORE_UNCONFIGURED)
        }
    }

    /// Result `id` of session `sid` kept by any replica less than `ttl` ago: its text and its
    /// age, if it is kept ([`results::GET`]). Not asked during an episode; else bounded as
    /// [`Store::keep_result`] is.
    ///
    /// # Errors
    /// Why the store did not answer (a [`names`] reason).
    pub async fn kept_result(
        &self,
        sid: &str,
        id: &str,
        ttl: Duration,
    ) -> Result<Option<(String, Duration)>, &'static str> {
        self.while_up()?;
        #[cfg(feature = "redis")]
        {
            let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
            let kept = self
                .ask(self.background_wait(), |conn, prefix| {
                    conn.kept_result(prefix, (sid, id), ttl_ms)
                })
                .await?;
            Ok(kept.map(|(text, age_ms)| (text, Duration::from_millis(age_ms))))
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = (sid, id, ttl);
            Err(names::STORE_UNCONFIGURED)
        }
    }

    /// `Ok` while the store answers; during an episode, why it does not (a [`names`] reason),
    /// at once: what a call would wait for is known not to come.
    fn while_up(&self) -> Result<(), &'static str> {
        if self.is_up() {
            Ok(())
        } else {
            Err(*crate::lock::lock(&self.inner.reason))
        }
    }

    /// Runs `call` on the connection within `bound` ([`Store::request_wait`] on a request's
    /// path, [`Store::background_wait`] off it): its answer, or why there is none (a
    /// [`names`] reason).
    #[cfg(feature = "redis")]
    async fn ask<'a, T, F, Fut>(&'a self, bound: Duration, call: F) -> Result<T, &'static str>
    where
        F: FnOnce(&'a conn::Conn, &'a str) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let Some(conn) = &self.inner.conn else {
            return Err(names::STORE_UNCONFIGURED);
        };
        match tokio::time::timeout(bound, call(conn, &self.inner.settings.key_prefix)).await {
            Err(_) => Err(names::STORE_TIMEOUT),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "State store call failed");
                Err(names::STORE_ERROR)
            }
            Ok(Ok(answer)) => Ok(answer),
        }
    }

    /// How long a call on a request's path waits for the store: `timeout_ms`.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    fn request_wait(&self) -> Duration {
        self.inner.settings.timeout
    }

    /// How long work off the request path waits for the store: `timeout_ms`, or the connect
    /// timeout when longer (it may wait for a new connection).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    fn background_wait(&self) -> Duration {
        self.inner.settings.timeout.max(CONNECT_TIMEOUT)
    }

    /// The notes other replicas send here: answers to this replica's server→client requests,
    /// retries of the calls it parked (once: the gateway takes them).
    #[must_use]
    pub fn take_notes(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<relay::Note>> {
        crate::lock::lock(&self.inner.notes).take()
    }

    /// Tells every replica that session `sid`, whose id expires at `exp` (Unix seconds),
    /// ended. Bounded by `timeout_ms` or the connect timeout, whichever is longer.
    ///
    /// # Errors
    /// Why the store did not take it (a [`names`] reason): only this replica knows then, and
    /// sends it again at every heartbeat until the store takes it.
    pub async fn revoke(&self, sid: &str, exp: u64) -> Result<(), &'static str> {
        let revocation = relay::Revocation {
            sid: sid.to_owned(),
            exp,
        };
        let revocations = &self.inner.relayed.revocations;
        // Known here, so that it is put back should the store lose it.
        revocations.heard(revocation.clone());
        let sent = self
            .send_revocations(std::slice::from_ref(&revocation))
            .await;
        if sent.is_err() {
            revocations.unsent(vec![revocation]);
        }
        sent
    }

    /// Adds `revocations` to the store's set, publishing those new to it.
    async fn send_revocations(
        &self,
        revocations: &[relay::Revocation],
    ) -> Result<(), &'static str> {
        #[cfg(feature = "redis")]
        {
            self.ask(self.background_wait(), |conn, prefix| async move {
                conn.revoke(prefix, revocations).await.map(drop)
            })
            .await
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = revocations;
            Err(names::STORE_UNCONFIGURED)
        }
    }

    /// Forwards `answer` to replica `owner`, whose upstream asked: delivered to its channel
    /// when its heartbeat is fresh and it listens.
    ///
    /// # Errors
    /// [`relay::ForwardError::OwnerGone`] when it is not (an answer nobody waits for any
    /// more), [`relay::ForwardError::Store`] when the store did not answer.
    pub async fn forward(
        &self,
        owner: &str,
        answer: relay::Forwarded,
    ) -> Result<(), relay::ForwardError> {
        self.send_note(owner, &relay::Note::Answer(answer)).await
    }

    /// Forwards a retry to replica `owner`, which parked the call, and waits up to `wait` for
    /// the outcome: the JSON-RPC answer to the retry.
    ///
    /// # Errors
    /// [`relay::ForwardError`]: `owner` is gone, the store did not answer, or no outcome came
    /// back within `wait`.
    pub async fn resume_at(
        &self,
        owner: &str,
        client_capabilities: serde_json::Value,
        request: Box<serde_json::value::RawValue>,
        wait: Duration,
    ) -> Result<Box<serde_json::value::RawValue>, relay::ForwardError> {
        let corr = uuid::Uuid::new_v4().simple().to_string();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let waiting = &self.inner.relayed.waiting;
        crate::lock::lock(waiting).insert(corr.clone(), tx);
        let note = relay::Note::Resume(relay::Resume {
            corr: corr.clone(),
            reply_to: self.inner.replica.clone(),
            client_capabilities,
            request,
        });
        let outcome = match self.send_note(owner, &note).await {
            Ok(()) => match tokio::time::timeout(wait, rx).await {
                Ok(Ok(reply)) => Ok(reply),
                _ => Err(relay::ForwardError::NoReply),
            },
            Err(e) => Err(e),
        };
        crate::lock::lock(waiting).remove(&corr);
        outcome
    }

    /// Sends the outcome of a retry another replica forwarded back to it.
    pub async fn reply_resumed(
        &self,
        to: &str,
        corr: String,
        reply: Box<serde_json::value::RawValue>,
    ) {
        let note = relay::Note::Resumed(relay::Resumed { corr, reply });
        if let Err(e) = self.send_note(to, &note).await {
            tracing::warn!(replica = to, error = ?e, "The outcome of a resumed call did not reach the replica that forwarded it");
        }
    }

    /// Sends `note` to replica `to`'s channel, if its heartbeat is fresh and it listens.
    async fn send_note(&self, to: &str, note: &relay::Note) -> Result<(), relay::ForwardError> {
        #[cfg(feature = "redis")]
        {
            let payload = serde_json::to_string(note).unwrap_or_default();
            let ttl_ms = u64::try_from(REPLICA_TTL.as_millis()).unwrap_or(u64::MAX);
            let heard = self.ask(self.background_wait(), |conn, prefix| {
                conn.forward(prefix, to, ttl_ms, &payload)
            });
            match heard.await {
                Err(reason) => Err(relay::ForwardError::Store(reason)),
                Ok(heard) if heard > 0 => Ok(()),
                Ok(_) => Err(relay::ForwardError::OwnerGone),
            }
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = (to, note);
            Err(relay::ForwardError::Store(names::STORE_UNCONFIGURED))
        }
    }

    /// Starts following what other replicas publish (feature `redis`).
    #[cfg_attr(
        not(feature = "redis"),
        allow(clippy::unused_self, clippy::needless_pass_by_value)
    )]
    fn follow(&self, shutdown: CancellationToken) {
        #[cfg(feature = "redis")]
        if let Some(conn) = &self.inner.conn {
            tokio::spawn(follow::follow(
                conn.clone(),
                self.inner.settings.key_prefix.clone(),
                self.inner.replica.clone(),
                self.inner.relayed.clone(),
                shutdown,
            ));
        }
        #[cfg(not(feature = "redis"))]
        let _ = shutdown;
    }

    /// Replicas the heartbeat last counted (at least 1).
    #[must_use]
    pub fn replicas(&self) -> u64 {
        self.inner.replicas.load(Ordering::Relaxed).max(1)
    }

    /// Whether calls ask the store now (no episode).
    #[must_use]
    pub fn is_up(&self) -> bool {
        self.inner.up.load(Ordering::Acquire)
    }

    /// What `/status` shows of the store: `backend`, `up`, `on_store_error`, `replicas` (the
    /// heartbeat's last count), `replica` (this one's id) and, during an episode, its `reason` and `down_secs`.
    #[must_use]
    pub fn status(&self) -> serde_json::Value {
        let up = self.is_up();
        let mut doc = serde_json::json!({
            "backend": "redis",
            "up": up,
            "on_store_error": self.inner.settings.on_store_error.name(),
            "replicas": self.replicas(),
            "replica": self.inner.replica,
        });
        if !up {
            doc["reason"] = (*crate::lock::lock(&self.inner.reason)).into();
            if let Some(since) = *crate::lock::lock(&self.inner.down_since) {
                doc["down_secs"] = since.elapsed().as_secs().into();
            }
        }
        doc
    }

    /// How much `on_store_error` it runs on now, one word for the probes: `shared` (the store
    /// answers), else the mode (`local_share`, `open`, `closed`).
    #[must_use]
    pub fn mode(&self) -> &'static str {
        if self.is_up() {
            "shared"
        } else {
            self.inner.settings.on_store_error.name()
        }
    }

    /// Admits (or refuses) a call of `client` to `upstream` under `limits`' rates: in the store
    /// when it answers within `timeout_ms`, else as `on_store_error` says.
    ///
    /// # Errors
    /// [`Refused`] with the limit and the wait.
    pub async fn admit(
        &self,
        client: &str,
        upstream: Option<&str>,
        limits: &ClientLimits,
    ) -> Result<(), Refused> {
        let prefix = &self.inner.settings.key_prefix;
        let checks = gcra::checks(prefix, client, upstream, limits);
        if checks.is_empty() {
            return Ok(());
        }
        if self.is_up() {
            match self.spend(&checks).await {
                Ok(verdict) => return verdict,
                Err(reason) => self.went_down(reason),
            }
        }
        self.fallback(client, upstream, &checks, limits)
    }

    /// When, on the server's clock (µs), a call asking now gives up waiting: 0 while the
    /// server's clock is not known yet.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    fn deadline(&self) -> u64 {
        let offset = self.inner.offset_us.load(Ordering::Relaxed);
        if offset == i64::MIN {
            return 0;
        }
        let timeout = u64::try_from(self.request_wait().as_micros()).unwrap_or(u64::MAX);
        let now = self.now_us().saturating_add(timeout);
        now.saturating_add_signed(offset)
    }

    /// The server's clock read `server_us` before this replica's clock read `local_us`: each
    /// reading bounds the offset between them from below, so the largest is kept (lowered by
    /// 1 ms a reading, to follow a server clock that is set back).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    fn clock_seen(&self, server_us: i64, local_us: u64) {
        let seen = server_us.saturating_sub(i64::try_from(local_us).unwrap_or(i64::MAX));
        let _ = (self.inner.offset_us).fetch_update(Ordering::Relaxed, Ordering::Relaxed, |was| {
            Some(if was == i64::MIN {
                seen
            } else {
                seen.max(was.saturating_sub(1_000))
            })
        });
    }

    /// Microseconds since this store began, the clock of `local`.
    fn now_us(&self) -> u64 {
        u64::try_from(self.inner.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// One round trip, bounded by `timeout_ms`: the verdict, or why there is none.
    #[cfg(feature = "redis")]
    async fn spend(&self, checks: &[gcra::Check]) -> Result<Result<(), Refused>, &'static str> {
        let deadline = self.deadline();
        let answer = self
            .ask(self.request_wait(), |conn, _| conn.spend(checks, deadline))
            .await?;
        let now_us = self.now_us();
        if let Some(server) = gcra::server_now(&answer) {
            self.clock_seen(server, now_us);
        }
        if answer.first() == Some(&2) {
            // Past its deadline: this call was given up on (its answer came too late).
            return Err(names::STORE_TIMEOUT);
        }
        crate::lock::lock(&self.inner.local).learned(checks, gcra::aheads(&answer), now_us);
        match gcra::verdict(checks, &answer) {
            Ok(()) => Ok(Ok(())),
            Err(Some(refused)) => Ok(Err(refused)),
            Err(None) => Err(names::STORE_ERROR),
        }
    }

    #[cfg(not(feature = "redis"))]
    #[allow(clippy::unused_async)]
    async fn spend(&self, _: &[gcra::Check]) -> Result<Result<(), Refused>, &'static str> {
        Err(names::STORE_UNCONFIGURED)
    }

    /// Adds `adds` (call counts since the last time) and `seeds` (a usage file's counts, for
    /// ids the store does not count yet) to the shared counts, and answers the counts every
    /// replica plans with in the current epoch of `period` (see [`usage`]). Off the request
    /// path: bounded by `timeout_ms` or the connect timeout, whichever is longer.
    ///
    /// # Errors
    /// Why the store did not answer (a [`names`] reason); nothing was added then.
    pub async fn learn_usage(
        &self,
        period: Duration,
        adds: &crate::plan::UsageCounts,
        seeds: &crate::plan::UsageCounts,
    ) -> Result<usage::Learned, &'static str> {
        #[cfg(feature = "redis")]
        {
            let period_ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(1);
            let (epoch, next_in, fields) = self
                .ask(self.background_wait(), |conn, prefix| {
                    conn.learn_usage(prefix, period_ms, adds, seeds)
                })
                .await?;
            usage::learned(epoch, next_in, &fields).ok_or(names::STORE_ERROR)
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = (period, adds, seeds);
            Err(names::STORE_UNCONFIGURED)
        }
    }

    /// Begins an episode (once: the first failing call logs it).
    fn went_down(&self, reason: &'static str) {
        *crate::lock::lock(&self.inner.reason) = reason;
        if self.inner.up.swap(false, Ordering::AcqRel) {
            *crate::lock::lock(&self.inner.down_since) = Some(std::time::Instant::now());
            crate::lock::lock(&self.inner.local).begin();
            self.inner.wake.notify_one();
            tracing::warn!(
                reason,
                on_store_error = self.inner.settings.on_store_error.name(),
                replicas = self.replicas(),
                "State store unavailable; rate limits are decided by on_store_error until it \
                 answers again"
            );
        }
    }

    /// Ends an episode (logged once).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    fn came_back(&self) {
        if !self.inner.up.swap(true, Ordering::AcqRel) {
            *crate::lock::lock(&self.inner.down_since) = None;
            tracing::info!(
                replicas = self.replicas(),
                "State store answers again; rate limits are shared"
            );
        }
    }

    /// A call decided without the store, as `on_store_error` says.
    fn fallback(
        &self,
        client: &str,
        upstream: Option<&str>,
        checks: &[gcra::Check],
        limits: &ClientLimits,
    ) -> Result<(), Refused> {
        let reason = *crate::lock::lock(&self.inner.reason);
        crate::telemetry::record::state_fallback(reason);
        match self.inner.settings.on_store_error {
            OnStoreError::Open => Ok(()),
            OnStoreError::Closed => Err(Refused {
                which: Which::StateUnavailable,
                retry_after_ms: CLOSED_RETRY_MS,
            }),
            OnStoreError::LocalShare => {
                let replicas = u32::try_from(self.replicas()).unwrap_or(u32::MAX);
                let now_us = self.now_us();
                let mut local = crate::lock::lock(&self.inner.local);
                local.admit(client, upstream, checks, limits, replicas, now_us)
            }
        }
    }

    /// Beats until `shutdown`: counts replicas, ends episodes, and begins one when the store
    /// stops answering between calls.
    #[cfg(feature = "redis")]
    async fn heartbeat(self, shutdown: CancellationToken) {
        let Some(conn) = self.inner.conn.clone() else {
            return;
        };
        let id = self.inner.replica.clone();
        let key = gcra::replicas_key(&self.inner.settings.key_prefix);
        let ttl_ms = u64::try_from(REPLICA_TTL.as_millis()).unwrap_or(u64::MAX);
        // Off the request path: a beat may wait longer than a call, long enough to connect.
        let bound = self.background_wait();
        let mut loaded = false;
        loop {
            let sent = tokio::time::Instant::now();
            let beat = tokio::time::timeout(bound, async {
                let n = conn.beat(&key, &id, ttl_ms).await?;
                if !loaded {
                    conn.load().await?;
                }
                Ok::<u64, redis::RedisError>(n)
            })
            .await;
            let answered = beat.as_ref().is_ok_and(Result::is_ok);
            match beat {
                Ok(Ok(n)) => {
                    loaded = true;
                    self.inner.replicas.store(n.max(1), Ordering::Relaxed);
                    // Back only once it answers as fast as calls need (a probe that connects
                    // again may take longer): a slow store does not flap up and down; and
                    // once what was admitted meanwhile is paid (calls admitted between the
                    // payment and the return are paid right after).
                    if sent.elapsed() <= self.inner.settings.timeout && self.repay().await {
                        self.came_back();
                        self.repay().await;
                    }
                    self.resend_revocations().await;
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "State store heartbeat failed");
                    loaded = false;
                    self.went_down(names::STORE_ERROR);
                }
                Err(_) => {
                    loaded = false;
                    self.went_down(names::STORE_TIMEOUT);
                }
            }
            let every = match (self.is_up(), answered) {
                (true, _) => BEAT_EVERY,
                (false, true) => RECHECK_EVERY,
                (false, false) => PROBE_EVERY,
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(every) => {}
                () = self.inner.wake.notified() => {}
            }
        }
    }

    /// Pays the store what this replica admitted without it: whether all was paid (what was
    /// not stays owed).
    #[cfg(feature = "redis")]
    async fn repay(&self) -> bool {
        let taken_at = self.now_us();
        let mut debts = crate::lock::lock(&self.inner.local).debts(taken_at);
        // One script per hash tag: a Redis Cluster runs a script on one slot's keys.
        debts.sort_by(|a, b| gcra::slot_of(&a.key).cmp(gcra::slot_of(&b.key)));
        let mut rest = debts.as_slice();
        while let Some(first) = rest.first() {
            let slot = gcra::slot_of(&first.key);
            let n = rest.partition_point(|d| gcra::slot_of(&d.key) == slot);
            let (group, after) = rest.split_at(n);
            let paid = self
                .ask(self.background_wait(), |conn, _| conn.repay(group))
                .await;
            let mut local = crate::lock::lock(&self.inner.local);
            match paid {
                Ok(aheads) => local.paid(group, &aheads, self.now_us()),
                Err(reason) => {
                    tracing::debug!(reason, "State store not paid back yet");
                    local.unpaid(rest.to_vec(), taken_at);
                    return false;
                }
            }
            rest = after;
        }
        true
    }

    /// Sends the revocations the store did not take again.
    #[cfg(feature = "redis")]
    async fn resend_revocations(&self) {
        let revocations = &self.inner.relayed.revocations;
        let unsent = revocations.take_unsent();
        if unsent.is_empty() {
            return;
        }
        match self.send_revocations(&unsent).await {
            Ok(()) => tracing::info!(
                revocations = unsent.len(),
                "Revocations the state store did not take earlier were sent"
            ),
            Err(_) => revocations.unsent(unsent),
        }
    }

    #[cfg(not(feature = "redis"))]
    #[allow(clippy::unused_async)]
    async fn heartbeat(self, _: CancellationToken) {}
}

/// The connection to `url` with `settings`' TLS files, or why there is none.
#[cfg(feature = "redis")]
fn connect(url: &str, settings: &RedisState) -> Result<conn::Conn, String> {
    conn::Conn::lazy(url, settings, settings.timeout.max(CONNECT_TIMEOUT))
}

#[cfg(not(feature = "redis"))]
fn connect(_: &str, _: &RedisState) -> Result<(), String> {
    Err("this mcp-budget was built without the `redis` feature".to_owned())
}

/// Checks the store at `url` as `check --live` does: it answers within `settings.timeout_ms`
/// (or the connect timeout, when longer), it is Redis 6.2 or later or Valkey, and both scripts
/// load. `Ok`: what answered, e.g. `redis 7.0.15`.
///
/// # Errors
/// Why the store cannot serve `[state]`: unreachable, too old, or refusing the scripts.
#[cfg(feature = "redis")]
pub async fn probe(settings: &RedisState, url: &str) -> Result<String, String> {
    let bound = settings.timeout.max(CONNECT_TIMEOUT);
    let conn = connect(url, settings)?;
    let info = match tokio::time::timeout(bound, conn.probe()).await {
        Err(_) => return Err(format!("the store did not answer within {bound:?}")),
        Ok(Err(e)) => return Err(format!("the store refused: {e}")),
        Ok(Ok(info)) => info,
    };
    server_version(&info)
}

/// Checks the store as `check --live` does; this build has no `redis` feature, so there is
/// no store to ask.
///
/// # Errors
/// Always: this build cannot talk to a store.
#[cfg(not(feature = "redis"))]
#[allow(clippy::unused_async)]
pub async fn probe(_: &RedisState, _: &str) -> Result<String, String> {
    Err("this mcp-budget was built without the `redis` feature".to_owned())
}

/// The server `INFO server` describes, when it can serve `[state]`: Valkey (any release: its
/// first was 7.2), or Redis 6.2 or later, the floor the docs state (the scripts read `TIME`
/// before they write, which needs script effects replication, the default since Redis 5).
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
fn server_version(info: &str) -> Result<String, String> {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .map(str::to_owned)
    };
    if let Some(version) = field("valkey_version") {
        return Ok(format!("valkey {version}"));
    }
    let Some(version) = field("redis_version") else {
        return Err("the store's INFO names no redis_version".to_owned());
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) < (6, 2) {
        return Err(format!(
            "redis {version} is too old: [state] needs Redis 6.2 or later"
        ));
    }
    Ok(format!("redis {version}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Rate;

    fn settings(on_store_error: OnStoreError) -> RedisState {
        let text = format!(
            "version = 1\n[state]\nbackend = \"redis\"\nurl_env = \"U\"\non_store_error = \"{}\"\n",
            on_store_error.name()
        );
        let policy = crate::policy::Policy::from_toml_str(&text, "p.toml").unwrap();
        match policy.state.backend {
            crate::policy::state::Backend::Redis(r) => r,
            crate::policy::state::Backend::Memory => unreachable!("redis"),
        }
    }

    fn limits() -> ClientLimits {
        ClientLimits {
            calls_per_sec: Some(Rate::new(1.0, 3)),
            ..ClientLimits::default()
        }
    }

    /// A store with no URL: down from the start, every call decided by `on_store_error`.
    fn unconfigured(on_store_error: OnStoreError) -> Store {
        let no_url = Err("environment variable U is not set".to_owned());
        Store::start(settings(on_store_error), no_url, CancellationToken::new())
    }

    #[tokio::test]
    async fn without_a_store_open_lets_through_and_closed_refuses() {
        let open = unconfigured(OnStoreError::Open);
        assert!(!open.is_up());
        for _ in 0..10 {
            assert_eq!(open.admit("a", Some("git"), &limits()).await, Ok(()));
        }
        let closed = unconfigured(OnStoreError::Closed);
        let refused = closed.admit("a", None, &limits()).await.unwrap_err();
        assert_eq!(refused.which, Which::StateUnavailable);
        assert_eq!(refused.retry_after_ms, CLOSED_RETRY_MS);
        let unlimited = ClientLimits::default();
        assert_eq!(
            closed.admit("a", None, &unlimited).await,
            Ok(()),
            "no rate, no store"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn local_share_divides_the_rate_by_the_replicas_last_seen() {
        let store = unconfigured(OnStoreError::LocalShare);
        assert_eq!(store.replicas(), 1, "at least one");
        let admitted = |store: Store| async move {
            let mut n = 0;
            for _ in 0..10 {
                if store.admit("a", Some("git"), &limits()).await.is_ok() {
                    n += 1;
                }
            }
            n
        };
        assert_eq!(
            admitted(store.clone()).await,
            3,
            "the whole burst: one replica"
        );
        let shared = unconfigured(OnStoreError::LocalShare);
        shared.inner.replicas.store(3, Ordering::Relaxed);
        assert_eq!(
            admitted(shared.clone()).await,
            1,
            "a third of the burst, rounded up"
        );
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(admitted(shared).await, 1, "a third of the rate: one in 3 s");
    }

    #[test]
    fn a_failure_begins_one_episode_and_a_beat_ends_it() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in = rt.enter();
        let store = Store::start(
            settings(OnStoreError::Open),
            Err("none".into()),
            CancellationToken::new(),
        );
        store.came_back();
        assert!(store.is_up());
        store.went_down(names::STORE_TIMEOUT);
        store.went_down(names::STORE_ERROR);
        assert!(!store.is_up());
        assert_eq!(*crate::lock::lock(&store.inner.reason), names::STORE_ERROR);
        store.came_back();
        assert!(store.is_up());
    }

    #[test]
    fn the_store_must_be_redis_6_2_or_later_or_valkey() {
        let info = |fields: &str| format!("# Server\r\n{fields}\r\nos:Linux\r\n");
        assert_eq!(
            server_version(&info("redis_version:7.0.15")),
            Ok("redis 7.0.15".to_owned())
        );
        assert_eq!(
            server_version(&info("redis_version:6.2.0")),
            Ok("redis 6.2.0".to_owned())
        );
        assert_eq!(
            server_version(&info("redis_version:7.2.4\r\nvalkey_version:8.0.1")),
            Ok("valkey 8.0.1".to_owned())
        );
        let old = server_version(&info("redis_version:6.0.16")).unwrap_err();
        assert!(old.contains("6.2 or later"), "{old}");
        assert!(server_version("# Server\r\n").is_err());
    }
}
