//! When an upstream's server runs ([`crate::policy::Start`]): an eager one from the gateway's
//! start, a lazy one from the first request that needs it until it has gone
//! `idle_stop_secs` without one; and the lifecycle state `/status` and the metrics show
//! ([`Phase`]).
//!
//! # A lazy start
//!
//! A request to a lazy upstream that is not running starts it ([`Upstream::ensure_running`])
//! and waits, at most the upstream's `timeout_secs`, for its handshake; requests that arrive
//! meanwhile wait for the same start (one process, never one per request). A start that fails
//! (the child exits, the handshake fails or takes too long) is ended (no retries in the
//! background), every waiting request gets [`Error::UpstreamStartFailed`], `/status` shows the
//! upstream down with the reason, and the next request tries again.
//!
//! # Idle stop
//!
//! While a lazy server runs, a watch checks (every quarter of `idle_stop_secs`, at most each
//! second) whether requests are in the door (waiting for a start, or sent and not answered)
//! and when the last one for a client was answered; after `idle_stop_secs` without any, the server is stopped ([`Status::Stopped`])
//! and its lists stay in the catalog.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::manifest::SavedBy;
use super::{Status, Upstream, supervise};
use crate::error::Error;
use crate::lock::lock;
use crate::policy::Start;

/// Where an upstream is in its life, as `/status` and the metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Lazy, nothing known yet: it starts once to be listed.
    Configured,
    /// Lazy, listed from its manifest, never started since the gateway started.
    ManifestKnown,
    /// Its server is starting.
    Starting,
    /// Its server runs; no request of a client reached it in this run yet.
    Started,
    /// Its server runs and has served requests of clients.
    Invoked,
    /// Its server was stopped (idle, a failed start) or is down.
    Stopped,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Self; 6] = [
        Self::Configured,
        Self::ManifestKnown,
        Self::Starting,
        Self::Started,
        Self::Invoked,
        Self::Stopped,
    ];

    /// Its name: `configured`, `manifest_known`, `starting`, `started`, `invoked`, `stopped`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Configured => "configured",
            Self::ManifestKnown => "manifest_known",
            Self::Starting => "starting",
            Self::Started => "started",
            Self::Invoked => "invoked",
            Self::Stopped => "stopped",
        }
    }
}

/// One upstream's life: its `start` settings and where it is.
pub(crate) struct Life {
    start: Start,
    /// One start or stop at a time.
    gate: tokio::sync::Mutex<()>,
    /// Requests in the door (waiting for a start, or sent and not answered).
    active: AtomicUsize,
    state: std::sync::Mutex<State>,
}

struct State {
    phase: Phase,
    /// When the last request of a client arrived (or the current run started).
    last_used: Instant,
    /// How long the last start on a request took, from the request to the handshake.
    first_use: Option<Duration>,
    /// Runs started on a request.
    starts: u64,
    /// Where the manifest it was listed from came from, if it was.
    manifest: Option<SavedBy>,
    /// A request of a client came for the current run (or the one it waits for).
    used: bool,
    /// Resources of the current run subscribed to and not unsubscribed from: a subscribed
    /// server is not stopped when idle (its updates would lapse with it).
    subscriptions: usize,
}

/// What `/status` shows of an upstream's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifeView {
    /// `eager` or `lazy`.
    pub start: &'static str,
    /// Where it is.
    pub phase: Phase,
    /// Who saved the manifest it was listed from (`None`: listed by its server only).
    pub manifest: Option<SavedBy>,
    /// How long the last start on a request took, to the handshake.
    pub first_use: Option<Duration>,
    /// Runs started on a request.
    pub starts: u64,
}

impl LifeView {
    /// An eager upstream in `phase`, no manifest, never started on a request.
    #[must_use]
    pub fn eager(phase: Phase) -> Self {
        Self {
            start: "eager",
            phase,
            manifest: None,
            first_use: None,
            starts: 0,
        }
    }
}

impl Life {
    pub(crate) fn new(start: Start, phase: Phase) -> Self {
        Self {
            start,
            gate: tokio::sync::Mutex::new(()),
            active: AtomicUsize::new(0),
            state: std::sync::Mutex::new(State {
                phase,
                last_used: Instant::now(),
                first_use: None,
                starts: 0,
                manifest: None,
                used: false,
                subscriptions: 0,
            }),
        }
    }

    /// Moves to `phase` (a run a client's request came for is `Invoked` once started).
    pub(crate) fn set_phase(&self, phase: Phase) {
        let mut state = lock(&self.state);
        state.phase = match phase {
            Phase::Started if state.used => Phase::Invoked,
            other => other,
        };
    }

    /// The current run is over: the next one is not used until a request comes for it.
    fn end(&self) {
        let mut state = lock(&self.state);
        state.used = false;
        state.subscriptions = 0;
        state.phase = Phase::Stopped;
    }

    /// Counts the subscription `method` (answered without error) made or ended.
    /// (Any other method takes no lock: this runs on every answer.)
    pub(crate) fn subscribed(&self, method: &str) {
        match method {
            "resources/subscribe" => lock(&self.state).subscriptions += 1,
            "resources/unsubscribe" => {
                let mut state = lock(&self.state);
                state.subscriptions = state.subscriptions.saturating_sub(1);
            }
            _ => {}
        }
    }

    pub(crate) fn set_manifest(&self, by: SavedBy) {
        lock(&self.state).manifest = Some(by);
    }

    pub(crate) fn view(&self) -> LifeView {
        let state = lock(&self.state);
        LifeView {
            start: self.start.name(),
            phase: state.phase,
            manifest: state.manifest,
            first_use: state.first_use,
            starts: state.starts,
        }
    }

    fn is_lazy(&self) -> bool {
        self.start.is_lazy()
    }
}

/// A request in the door of its upstream: counted until it is dropped (a client's request
/// is a use when it leaves too: idle time counts from its answer).
pub(crate) struct InDoor<'a> {
    life: &'a Life,
    for_client: bool,
}

impl Drop for InDoor<'_> {
    fn drop(&mut self) {
        if self.for_client {
            lock(&self.life.state).last_used = Instant::now();
        }
        self.life.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Upstream {
    /// Counts a request in its door; one `for_client` also counts as a use (what idle stop
    /// waits for) and makes the run an invoked one.
    pub(crate) fn enter_door(&self, for_client: bool) -> InDoor<'_> {
        let life = &self.inner.life;
        life.active.fetch_add(1, Ordering::SeqCst);
        if for_client {
            let mut state = lock(&life.state);
            state.last_used = Instant::now();
            state.used = true;
            if state.phase == Phase::Started {
                state.phase = Phase::Invoked;
            }
        }
        InDoor { life, for_client }
    }

    /// Where it is in its life, for `/status`.
    #[must_use]
    pub fn life(&self) -> LifeView {
        self.inner.life.view()
    }

    /// Notes that it was listed from a manifest saved by `by`.
    pub(crate) fn listed_from(&self, by: SavedBy) {
        self.inner.life.set_manifest(by);
    }

    /// Whether its server's supervisor runs.
    fn running(&self) -> bool {
        lock(&self.inner.task)
            .as_ref()
            .is_some_and(|t| !t.is_finished())
    }

    /// Starts a run of its server: a fresh run token, the supervisor, and for a lazy
    /// upstream with `idle_stop_secs` the idle watch.
    pub(crate) fn spawn_run(&self) {
        let run = self.inner.shutdown.child_token();
        *lock(&self.inner.run) = run.clone();
        self.inner.status.send_replace(Status::Starting);
        self.inner.life.set_phase(Phase::Starting);
        lock(&self.inner.life.state).last_used = Instant::now();
        let transport = self.inner.transport.clone();
        let task = tokio::spawn(supervise::supervise(self.clone(), transport));
        *lock(&self.inner.task) = Some(task);
        if let Start::Lazy {
            idle_stop: Some(idle),
        } = self.inner.life.start
        {
            tokio::spawn(self.clone().watch_idle(idle, run));
        }
    }

    /// For a lazy upstream: starts its server when it does not run and waits (at most its
    /// `timeout_secs`) until it is ready; requests that come meanwhile share the start.
    ///
    /// # Errors
    /// [`Error::UpstreamStartFailed`] when the start failed or took too long (the start is
    /// ended); [`Error::ShuttingDown`] when the gateway stops.
    pub(crate) async fn ensure_running(&self) -> Result<(), Error> {
        let life = &self.inner.life;
        if !life.is_lazy() || self.status() == Status::Ready {
            return Ok(());
        }
        // `started`: this request started the run; `joined`: it waits for a start (its own
        // or one in progress), so a server going down meanwhile is a failed start.
        let (started, joined) = {
            let _gate = life.gate.lock().await;
            if self.inner.shutdown.is_cancelled() {
                return Err(Error::ShuttingDown);
            }
            match self.status() {
                Status::Ready => return Ok(()),
                Status::Starting if self.running() => (None, true),
                // A running server that went down (it restarts as an eager one does).
                Status::Down(_) if self.running() => (None, false),
                _ => {
                    tracing::info!(
                        upstream = self.name(),
                        "Starting lazy upstream on first use"
                    );
                    lock(&life.state).starts += 1;
                    self.spawn_run();
                    (Some(Instant::now()), true)
                }
            }
        };
        let limit = self.inner.spec.timeout;
        match self.wait_ready(limit).await {
            Status::Ready => {
                if let Some(at) = started {
                    let took = at.elapsed();
                    lock(&life.state).first_use = Some(took);
                    crate::telemetry::record::upstream_first_use(self.name(), took);
                }
                Ok(())
            }
            Status::Down(reason) if !joined && self.running() => {
                // It went down after a start someone else waited for: as an eager one.
                Err(self.down_error(reason))
            }
            other => {
                let reason = match other {
                    Status::Down(reason) => reason,
                    _ => format!("not ready within {} s (timeout_secs)", limit.as_secs()),
                };
                if started.is_some() {
                    self.end_run(Status::Down(reason.clone())).await;
                    tracing::warn!(upstream = self.name(), reason = %reason, "Lazy upstream failed to start");
                }
                Err(Error::UpstreamStartFailed {
                    upstream: self.name().to_owned(),
                    reason,
                })
            }
        }
    }

    /// Ends the current run (its child stopped, what is in flight failed) and reports
    /// `status`.
    async fn end_run(&self, status: Status) {
        lock(&self.inner.run).cancel();
        let task = lock(&self.inner.task).take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
        self.fail_pending("the upstream was stopped");
        self.set_link(None);
        self.inner.life.end();
        self.inner.status.send_replace(status);
    }

    /// Stops the server of a lazy upstream that nothing uses (no request in the door since
    /// `idle` ago, none in flight, no resource subscribed to) while `run` is its current run; `true` when it did.
    pub(crate) async fn stop_if_idle(&self, idle: Duration, run: &CancellationToken) -> bool {
        let life = &self.inner.life;
        let _gate = life.gate.lock().await;
        // Requests sent before it was ready (a modern server's `subscriptions/listen`) are
        // not in the door: they last as long as the connection.
        let unused = life.active.load(Ordering::SeqCst) == 0 && {
            let state = lock(&life.state);
            state.subscriptions == 0 && state.last_used.elapsed() >= idle
        };
        // A server still starting is waited for (a request may be on its way).
        if !unused || run.is_cancelled() || self.status() == Status::Starting {
            return false;
        }
        // Stopped before it is checked again: a request that comes in now either is counted
        // here (the stop is called off) or sees it stopped and waits at the gate for a start.
        let was = self.inner.status.send_replace(Status::Stopped);
        if life.active.load(Ordering::SeqCst) != 0 {
            self.inner.status.send_replace(was);
            return false;
        }
        self.end_run(Status::Stopped).await;
        true
    }

    /// After its lists were learned: stops the server of a lazy upstream that started only
    /// to be listed (no request of a client reached it).
    pub(crate) async fn stop_if_only_listed(&self) {
        let life = &self.inner.life;
        if !life.is_lazy() || lock(&life.state).used {
            return;
        }
        let run = lock(&self.inner.run).clone();
        if self.stop_if_idle(Duration::ZERO, &run).await {
            tracing::info!(
                upstream = self.name(),
                "Lazy upstream stopped: its manifest is saved, the next request starts it"
            );
        }
    }

    /// Stops the run `run` once it has gone `idle` without requests.
    async fn watch_idle(self, idle: Duration, run: CancellationToken) {
        let tick = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        loop {
            tokio::select! {
                () = tokio::time::sleep(tick) => {}
                () = run.cancelled() => return,
            }
            if self.stop_if_idle(idle, &run).await {
                tracing::info!(
                    upstream = self.name(),
                    idle_stop_secs = idle.as_secs(),
                    "Lazy upstream stopped after idle_stop_secs without requests"
                );
                return;
            }
        }
    }
}
