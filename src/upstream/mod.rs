//! Clients of the MCP servers behind the gateway.
//!
//! An [`Upstream`] owns one server: a supervised stdio child ([`stdio`]) or a streamable HTTP
//! session ([`http`]). Whatever the transport, requests get a fresh upstream-side id (the
//! client's id is restored on the way back), progress tokens are rewritten per upstream channel
//! and mapped back, and server→client messages are routed to the caller that caused them.
//! Anything the server says arrives at `Upstream::incoming`.
//!
//! # Layout
//!
//! - `supervise`: the one lifecycle (connect → handshake → ready → serve → down → backoff),
//!   a pure state machine plus the loop that drives a transport through it.
//! - [`stdio`], [`http`], `in_process` (a server in the gateway's process,
//!   [`crate::policy::InProcess`]): the transports; they connect, send, serve their streams and hand
//!   what the server says back.
//! - `handshake`: `initialize` / `server/discover`, and the era probe.
//! - `call`: the one request door ([`Call`], [`Upstream::request`]); `outgoing`: the pure
//!   rewrite of a request's params for its upstream; `pending`: the requests in flight.
//! - `incoming`: responses, notifications and server→client requests, routed by [`route`].
//! - `listen`: `subscriptions/listen` on a modern upstream.

mod call;
mod handshake;
pub mod http;
mod in_process;
mod incoming;
mod life;
mod listen;
pub mod manifest;
pub mod orphans;
mod outgoing;
mod pending;
pub mod route;
mod sse;
pub mod stdio;
mod supervise;
mod turns;

pub use call::Call;
use handshake::{client_info, handshake};
pub use life::{LifeView, Phase};

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use self::pending::Pending;
use crate::context::Outbound;
use crate::error::Error;
use crate::jsonrpc::{Id, Message};
use crate::lock::lock;
use crate::mcp::Era;
use crate::mcp::method::{Listed, Method};
use crate::policy::{Transport, UpstreamProtocol, UpstreamSpec};

/// The protocol version the gateway asks 2025-era upstreams for.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// An upstream's era as its atomic holds it: `None` (not known yet) is 0.
fn era_from_u8(v: u8) -> Option<Era> {
    match v {
        1 => Some(Era::Legacy),
        2 => Some(Era::Modern),
        _ => None,
    }
}

/// [`era_from_u8`]'s inverse.
fn era_to_u8(era: Option<Era>) -> u8 {
    match era {
        None => 0,
        Some(Era::Legacy) => 1,
        Some(Era::Modern) => 2,
    }
}

/// Something an upstream did that the aggregator must know about.
#[derive(Debug, Clone)]
pub enum Event {
    /// The upstream finished `initialize` and is serving.
    Ready(usize),
    /// The upstream went away (crash, exit, unreachable).
    Down(usize),
    /// `notifications/<kind>/list_changed` (`tools`, `prompts`, `resources`).
    ListChanged(usize, Listed),
    /// A notification for every client that may see it (`notifications/resources/updated`:
    /// the sessions subscribed to the resource).
    Broadcast(usize, Message),
    /// A log message that belongs to no client request (`notifications/message` with no call
    /// in flight): for the sessions that asked for its level (`logging/setLevel`).
    Log(usize, Message),
}

/// Health of an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Starting, not yet initialized.
    Starting,
    /// Initialized and serving.
    Ready,
    /// Not serving, with the reason.
    Down(String),
    /// Not running by design: a lazy upstream (`start = "lazy"`) listed from its manifest or
    /// stopped after `idle_stop_secs`; the next request that needs it starts it.
    Stopped,
}

/// What `initialize` told us about the server.
#[derive(Debug, Clone, Default)]
pub struct ServerInfo {
    /// Negotiated protocol version.
    pub protocol_version: String,
    /// The server's capabilities.
    pub capabilities: Value,
    /// `serverInfo`.
    pub server_info: Value,
    /// `instructions`, if any.
    pub instructions: Option<String>,
}

/// One upstream server, shared by every client of the gateway.
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
}

/// The id the gateway gives a server→client request of upstream `index` (what the client
/// sees and answers): `mcpb-INDEX-RANDOM`, unguessable, so that no other session answers in
/// the asked client's place, and `-REPLICA` after it on a replica of a deployment.
///
/// ```
/// use mcp_budget::upstream::{asked_id, asked_replica};
///
/// let id = asked_id(3, Some("r1"));
/// assert!(id.starts_with("mcpb-3-") && id.ends_with("-r1"));
/// assert_eq!(asked_replica(&id), Some("r1"));
/// assert_eq!(asked_replica(&asked_id(3, None)), None);
/// ```
#[must_use]
pub fn asked_id(index: impl std::fmt::Display, replica: Option<&str>) -> String {
    let random = uuid::Uuid::new_v4().simple();
    match replica {
        Some(replica) => format!("mcpb-{index}-{random}-{replica}"),
        None => format!("mcpb-{index}-{random}"),
    }
}

/// The replica an id of [`asked_id`] names, if any.
#[must_use]
pub fn asked_replica(id: &str) -> Option<&str> {
    let mut parts = id.strip_prefix("mcpb-")?.splitn(3, '-');
    let (_, _, replica) = (parts.next()?, parts.next()?, parts.next()?);
    Some(replica)
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.inner.spec.name)
            .finish_non_exhaustive()
    }
}

pub(crate) enum Link {
    Stdio(mpsc::UnboundedSender<Message>),
    Http(Arc<http::HttpLink>),
}

struct Inner {
    index: usize,
    /// The replica tag of the ids of the server→client requests it sends (`[state]`).
    replica: Option<Arc<str>>,
    spec: UpstreamSpec,
    capabilities: Value,
    link: Mutex<Option<Arc<Link>>>,
    /// Hashed with foldhash: the gateway's own ids (a counter), looked up twice a call.
    pending: Mutex<HashMap<i64, Pending, foldhash::fast::RandomState>>,
    /// Progress token the upstream sees → (the client's token, its channel, the request id).
    progress: Mutex<HashMap<String, (Value, Outbound, i64)>>,
    /// Gateway id of a server→client request (unguessable) → the server's id, the client
    /// channel asked (its session is the only one whose answer is taken), and when.
    server_requests: Mutex<HashMap<String, (Id, Outbound, tokio::time::Instant)>>,
    /// `server_requests = "serialize"`: whose turn it is (see [`turns`]).
    turns: turns::Turns,
    /// Server→client messages that reached no client because their owner was ambiguous or
    /// missing (see [`route`]).
    unrouted: AtomicU64,
    next_id: AtomicI64,
    era: AtomicU8,
    status: watch::Sender<Status>,
    info: Mutex<ServerInfo>,
    events: mpsc::UnboundedSender<Event>,
    shutdown: CancellationToken,
    /// The current run's token (a child of `shutdown`): cancelled to stop a lazy server.
    run: Mutex<CancellationToken>,
    /// How it connects: kept for each run.
    transport: Arc<supervise::Transport>,
    /// When its server runs, and where it is in its life.
    life: life::Life,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Tool name → properties its `tools/call` mirrors in `Mcp-Param-*` headers (2026-07-28
    /// HTTP; tools that mark some only).
    param_marks: Mutex<HashMap<String, Vec<crate::mcp::params::Marked>>>,
    /// Its `include_tools` patterns that matched none of its tools at the last listing.
    filter_warnings: Mutex<Vec<String>>,
    /// Resources whose `notifications/resources/updated` the gateway's clients want from a
    /// modern upstream (its `subscriptions/listen` asks for them), and a nudge when they change.
    watched: Mutex<std::collections::BTreeSet<String>>,
    watch_changed: tokio::sync::Notify,
    /// Why the last connection attempt failed, when the server could not be reached at all
    /// (cleared once it is ready): calls while it is down say so.
    unreachable: Mutex<Option<Error>>,
}

impl Upstream {
    /// Starts the upstream in the background: a supervised child or an HTTP session. Readiness
    /// is reported on `events` and by [`Upstream::wait_ready`].
    #[must_use]
    pub fn start(
        index: usize,
        spec: UpstreamSpec,
        capabilities: Value,
        events: mpsc::UnboundedSender<Event>,
        shutdown: CancellationToken,
    ) -> Self {
        Self::start_tagged(index, None, spec, capabilities, events, shutdown, None)
    }

    /// [`Upstream::start`] on a replica of a deployment (`[state]`): the ids of the
    /// server→client requests it sends carry `replica` (see [`asked_id`]), so that a replica
    /// taking the answer forwards it here. A lazy upstream with a `manifest` is not started
    /// but listed from it: the first request that needs it starts it ([`Status::Stopped`]
    /// until then).
    #[must_use]
    pub fn start_tagged(
        index: usize,
        replica: Option<Arc<str>>,
        spec: UpstreamSpec,
        capabilities: Value,
        events: mpsc::UnboundedSender<Event>,
        shutdown: CancellationToken,
        manifest: Option<&manifest::Manifest>,
    ) -> Self {
        let manifest = manifest.filter(|_| spec.start.is_lazy());
        let phase = match (manifest, spec.start.is_lazy()) {
            (Some(_), _) => Phase::ManifestKnown,
            (None, true) => Phase::Configured,
            (None, false) => Phase::Starting,
        };
        let (status, _) = watch::channel(Status::Starting);
        let era = match spec.protocol {
            UpstreamProtocol::Modern => Some(Era::Modern),
            UpstreamProtocol::Legacy => Some(Era::Legacy),
            // HTTP+SSE servers are 2024-11-05: no `server/discover` probe.
            _ if spec.http.transport == crate::policy::HttpTransport::Sse => Some(Era::Legacy),
            _ => None,
        };
        let transport = Arc::new(match &spec.transport {
            Transport::Stdio { .. } => supervise::Transport::Stdio,
            Transport::Http { url, headers } => {
                supervise::Transport::Http(http::HttpLink::new(url, headers, &spec.http))
            }
            Transport::InProcess(server) => supervise::Transport::InProcess(server.clone()),
        });
        let upstream = Self {
            inner: Arc::new(Inner {
                index,
                replica,
                life: life::Life::new(spec.start, phase),
                spec,
                capabilities,
                link: Mutex::new(None),
                pending: Mutex::new(HashMap::default()),
                progress: Mutex::new(HashMap::new()),
                server_requests: Mutex::new(HashMap::new()),
                turns: turns::Turns::default(),
                unrouted: AtomicU64::new(0),
                next_id: AtomicI64::new(1),
                era: AtomicU8::new(era_to_u8(era)),
                status,
                info: Mutex::new(ServerInfo::default()),
                events,
                run: Mutex::new(shutdown.child_token()),
                shutdown,
                transport,
                task: Mutex::new(None),
                param_marks: Mutex::new(HashMap::new()),
                filter_warnings: Mutex::new(Vec::new()),
                watched: Mutex::new(std::collections::BTreeSet::new()),
                watch_changed: tokio::sync::Notify::new(),
                unreachable: Mutex::new(None),
            }),
        };
        let Some(manifest) = manifest else {
            upstream.spawn_run();
            return upstream;
        };
        upstream.inner.status.send_replace(Status::Stopped);
        upstream.set_info(manifest.info());
        if let Some(era) = manifest.era() {
            upstream.set_era(era);
        }
        upstream.listed_from(manifest.saved_by);
        upstream
    }

    /// Stops the upstream and waits (at most `limit`) until its child is gone.
    pub async fn stop(&self, limit: Duration) {
        self.inner.shutdown.cancel();
        let task = lock(&self.inner.task).take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(limit, task).await;
        }
        self.fail_pending("the gateway is shutting down");
    }

    /// Server id.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.inner.spec.name
    }

    /// Position in the policy.
    #[must_use]
    pub fn index(&self) -> usize {
        self.inner.index
    }

    /// Its policy entry.
    #[must_use]
    pub fn spec(&self) -> &UpstreamSpec {
        &self.inner.spec
    }

    /// Current health.
    #[must_use]
    pub fn status(&self) -> Status {
        self.inner.status.borrow().clone()
    }

    /// The protocol era it speaks (`None` until the first handshake tells).
    #[must_use]
    pub fn era(&self) -> Option<Era> {
        era_from_u8(self.inner.era.load(Ordering::Relaxed))
    }

    /// Requests sent to it and not answered yet.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        lock(&self.inner.pending).len()
    }

    /// Whether it speaks 2026-07-28.
    #[must_use]
    pub fn is_modern(&self) -> bool {
        self.era() == Some(Era::Modern)
    }

    fn set_era(&self, era: Era) {
        self.inner
            .era
            .store(era_to_u8(Some(era)), Ordering::Relaxed);
    }

    /// What the handshake (`initialize` or `server/discover`) said.
    #[must_use]
    pub fn info(&self) -> ServerInfo {
        lock(&self.inner.info).clone()
    }

    /// Waits until the upstream is ready or down (first start), at most `limit`.
    pub async fn wait_ready(&self, limit: Duration) -> Status {
        let mut rx = self.inner.status.subscribe();
        let wait = async {
            rx.wait_for(|s| *s != Status::Starting)
                .await
                .map(|s| s.clone())
        };
        match tokio::time::timeout(limit, wait).await {
            Ok(Ok(status)) => status,
            _ => self.status(),
        }
    }

    /// The current run's token: cancelled at shutdown, or when a lazy server is stopped.
    pub(crate) fn shutdown_token(&self) -> CancellationToken {
        lock(&self.inner.run).clone()
    }

    pub(crate) fn set_link(&self, link: Option<Link>) {
        *lock(&self.inner.link) = link.map(Arc::new);
    }

    pub(crate) fn set_status(&self, status: Status) {
        let event = match &status {
            Status::Ready => Some(Event::Ready(self.inner.index)),
            Status::Down(_) => Some(Event::Down(self.inner.index)),
            Status::Starting | Status::Stopped => None,
        };
        let phase = match &status {
            Status::Ready => Phase::Started,
            Status::Starting => Phase::Starting,
            Status::Down(_) | Status::Stopped => Phase::Stopped,
        };
        self.inner.life.set_phase(phase);
        self.inner.status.send_replace(status);
        if let Some(event) = event {
            let _ = self.inner.events.send(event);
        }
    }

    pub(crate) fn set_info(&self, info: ServerInfo) {
        *lock(&self.inner.info) = info;
    }

    /// A fresh upstream-side request id.
    #[must_use]
    pub fn next_request_id(&self) -> i64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a notification (or a response) upstream.
    ///
    /// # Errors
    /// [`Error::UpstreamUnavailable`] when the upstream is not connected.
    pub fn notify(&self, msg: Message) -> Result<(), Error> {
        let link = self.link(false)?;
        self.send_on(&link, msg, None)
    }

    /// The error for a call while the upstream is down with `reason`:
    /// [`Error::UpstreamUnreachable`] when its last attempt could not connect at all, else
    /// [`Error::UpstreamUnavailable`].
    #[must_use]
    pub fn down_error(&self, reason: String) -> Error {
        lock(&self.inner.unreachable)
            .clone()
            .unwrap_or(Error::UpstreamUnavailable {
                upstream: self.name().to_owned(),
                reason,
            })
    }

    /// Notes (or forgets) that the server could not be reached.
    pub(crate) fn set_unreachable(&self, err: Option<Error>) {
        *lock(&self.inner.unreachable) = err;
    }

    pub(crate) fn unavailable(&self, reason: &str) -> Error {
        Error::UpstreamUnavailable {
            upstream: self.name().to_owned(),
            reason: reason.to_owned(),
        }
    }

    fn link(&self, need_ready: bool) -> Result<Arc<Link>, Error> {
        if need_ready {
            if let Status::Down(reason) = self.status() {
                return Err(self.unavailable(&reason));
            }
            if self.status() == Status::Starting {
                return Err(self.unavailable("still starting"));
            }
        }
        lock(&self.inner.link)
            .clone()
            .ok_or_else(|| self.unavailable("not connected"))
    }

    fn send_on(
        &self,
        link: &Arc<Link>,
        msg: Message,
        outbound: Option<Outbound>,
    ) -> Result<(), Error> {
        match link.as_ref() {
            Link::Stdio(writer) => writer
                .send(crate::telemetry::context::into_meta(msg))
                .map_err(|_| self.unavailable("the process is gone")),
            Link::Http(http) => {
                http.post(self.clone(), msg, outbound);
                Ok(())
            }
        }
    }

    /// Remembers the warnings of its tool filter at the last listing.
    pub(crate) fn set_filter_warnings(&self, warnings: Vec<String>) {
        *lock(&self.inner.filter_warnings) = warnings;
    }

    /// The warnings of its tool filter at the last listing.
    pub(crate) fn filter_warnings(&self) -> Vec<String> {
        lock(&self.inner.filter_warnings).clone()
    }

    /// Notes which properties of its tools are mirrored in headers (see
    /// [`crate::mcp::params::marked_tools`]).
    pub(crate) fn set_param_marks(&self, marks: HashMap<String, Vec<crate::mcp::params::Marked>>) {
        *lock(&self.inner.param_marks) = marks;
    }

    /// The `Mcp-Param-*` headers of a `tools/call` to this upstream (none for other methods,
    /// or tools that mark no property).
    pub(crate) fn param_headers(&self, msg: &Message) -> Vec<(String, String)> {
        if msg.method().and_then(Method::known) != Some(Method::ToolsCall) {
            return Vec::new();
        }
        let marks = lock(&self.inner.param_marks);
        if marks.is_empty() {
            return Vec::new();
        }
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let Some(found) = params
            .get("name")
            .and_then(Value::as_str)
            .and_then(|n| marks.get(n))
        else {
            return Vec::new();
        };
        let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
        crate::mcp::params::param_headers(found, &arguments)
    }
}
