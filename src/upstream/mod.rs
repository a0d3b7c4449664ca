//! Clients of the MCP servers behind the gateway.
//!
//! An [`Upstream`] owns one server: a supervised stdio child ([`stdio`]) or a streamable HTTP
//! session ([`http`]). Whatever the transport, requests get a fresh upstream-side id (the
//! client's id is restored on the way back), progress tokens are rewritten per upstream channel
//! and mapped back, and server→client messages are routed to the caller that caused them.
//! Anything the server says arrives at [`Upstream::incoming`].

mod call;
pub mod http;
mod outgoing;
mod pending;
pub mod route;
mod sse;
pub mod stdio;
mod supervise;

pub use call::Call;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use self::pending::Pending;
use crate::context::Outbound;
use crate::error::Error;
use crate::jsonrpc::{to_raw, Id, Kind, Message, METHOD_NOT_FOUND};
use crate::lock::lock;
use crate::mcp::bridge;
use crate::mcp::modern::MODERN_VERSION;
use crate::policy::{Transport, UpstreamProtocol, UpstreamSpec};

/// JSON-RPC code of the answer to a request the client cancelled (as LSP's
/// `RequestCancelled`; MCP defines none because it expects no answer at all).
pub const REQUEST_CANCELLED: i64 = -32800;

/// The protocol version the gateway asks 2025-era upstreams for.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// Shortest wait for the answer to the `server/discover` probe of a server of unknown era (the
/// upstream's own timeout when longer): a server that says nothing in that time is asked
/// `initialize` instead. Generous, since a server that is slow to start answers late.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// The protocol era an upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Not known yet (before the first handshake).
    Unknown,
    /// 2025-11-25 and before: `initialize`, sessions, server→client requests.
    Legacy,
    /// 2026-07-28: stateless, `_meta` envelope on every request, MRTR.
    Modern,
}

impl Era {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Legacy,
            2 => Self::Modern,
            _ => Self::Unknown,
        }
    }
    fn to_u8(self) -> u8 {
        match self {
            Self::Unknown => 0,
            Self::Legacy => 1,
            Self::Modern => 2,
        }
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
    ListChanged(usize, String),
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
    spec: UpstreamSpec,
    capabilities: Value,
    link: Mutex<Option<Arc<Link>>>,
    pending: Mutex<HashMap<i64, Pending>>,
    /// Progress token the upstream sees → (the client's token, its channel, the request id).
    progress: Mutex<HashMap<String, (Value, Outbound, i64)>>,
    /// Gateway id of a server→client request (unguessable) → the server's id, the client
    /// channel asked (its session is the only one whose answer is taken), and when.
    server_requests: Mutex<HashMap<String, (Id, Outbound, tokio::time::Instant)>>,
    /// Server→client messages that reached no client because their owner was ambiguous or
    /// missing (see [`route`]).
    unrouted: AtomicU64,
    next_id: AtomicI64,
    era: AtomicU8,
    status: watch::Sender<Status>,
    info: Mutex<ServerInfo>,
    events: mpsc::UnboundedSender<Event>,
    shutdown: CancellationToken,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Tool name → properties its `tools/call` mirrors in `Mcp-Param-*` headers (2026-07-28
    /// HTTP; tools that mark some only).
    param_marks: Mutex<HashMap<String, Vec<crate::mcp::params::Marked>>>,
    /// Resources whose `notifications/resources/updated` the gateway's clients want from a
    /// modern upstream (its `subscriptions/listen` asks for them), and a nudge when they change.
    watched: Mutex<std::collections::BTreeSet<String>>,
    watch_changed: tokio::sync::Notify,
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
        let (status, _) = watch::channel(Status::Starting);
        let era = match spec.protocol {
            UpstreamProtocol::Modern => Era::Modern,
            UpstreamProtocol::Legacy => Era::Legacy,
            _ => Era::Unknown,
        };
        let upstream = Self {
            inner: Arc::new(Inner {
                index,
                spec,
                capabilities,
                link: Mutex::new(None),
                pending: Mutex::new(HashMap::new()),
                progress: Mutex::new(HashMap::new()),
                server_requests: Mutex::new(HashMap::new()),
                unrouted: AtomicU64::new(0),
                next_id: AtomicI64::new(1),
                era: AtomicU8::new(era.to_u8()),
                status,
                info: Mutex::new(ServerInfo::default()),
                events,
                shutdown,
                task: Mutex::new(None),
                param_marks: Mutex::new(HashMap::new()),
                watched: Mutex::new(std::collections::BTreeSet::new()),
                watch_changed: tokio::sync::Notify::new(),
            }),
        };
        let transport = match &upstream.inner.spec.transport {
            Transport::Stdio { .. } => supervise::Transport::Stdio,
            Transport::Http { url, headers } => {
                supervise::Transport::Http(http::HttpLink::new(url, headers))
            }
        };
        let task = tokio::spawn(supervise::supervise(upstream.clone(), transport));
        *lock(&upstream.inner.task) = Some(task);
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

    /// The protocol era it speaks ([`Era::Unknown`] until the first handshake).
    #[must_use]
    pub fn era(&self) -> Era {
        Era::from_u8(self.inner.era.load(Ordering::Relaxed))
    }

    /// Whether it speaks 2026-07-28.
    #[must_use]
    pub fn is_modern(&self) -> bool {
        self.era() == Era::Modern
    }

    fn set_era(&self, era: Era) {
        self.inner.era.store(era.to_u8(), Ordering::Relaxed);
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

    pub(crate) fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    pub(crate) fn set_link(&self, link: Option<Link>) {
        *lock(&self.inner.link) = link.map(Arc::new);
    }

    pub(crate) fn set_status(&self, status: Status) {
        let event = match &status {
            Status::Ready => Some(Event::Ready(self.inner.index)),
            Status::Down(_) => Some(Event::Down(self.inner.index)),
            Status::Starting => None,
        };
        self.inner.status.send_replace(status);
        if let Some(event) = event {
            let _ = self.inner.events.send(event);
        }
    }

    pub(crate) fn set_info(&self, info: ServerInfo) {
        *lock(&self.inner.info) = info;
    }

    /// The `initialize` params the gateway sends upstream.
    pub(crate) fn initialize_params(&self) -> Value {
        json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": self.inner.capabilities,
            "clientInfo": client_info(),
        })
    }

    /// A fresh upstream-side request id.
    #[must_use]
    pub fn next_request_id(&self) -> i64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Starts or stops watching resource `uri` of a modern upstream (`resources/subscribe`
    /// of the 2025 era becomes part of the gateway's `subscriptions/listen`).
    pub(crate) fn watch_resource(&self, uri: &str, on: bool) {
        let changed = {
            let mut watched = lock(&self.inner.watched);
            if on {
                watched.insert(uri.to_owned())
            } else {
                watched.remove(uri)
            }
        };
        if changed {
            self.inner.watch_changed.notify_one();
        }
    }

    /// Keeps a `subscriptions/listen` request open on a modern upstream, so that its
    /// `list_changed` notifications (and `resources/updated` of the watched resources) reach
    /// the gateway (a modern server sends them nowhere else). Re-opened when it ends, and when
    /// the watched resources change; after a gap the catalog is refreshed, since changes may
    /// have been missed. Returns at shutdown, or when the server has no `subscriptions/listen`.
    pub(crate) async fn listen_modern(&self) {
        let caps = self.info().capabilities;
        let changes = |kind: &str| {
            caps.get(kind)
                .and_then(|c| c.get("listChanged"))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let lists = ["tools", "prompts", "resources"].iter().any(|k| changes(k));
        let stop = self.inner.shutdown.clone();
        let mut gap = false;
        loop {
            let resources: Vec<String> = lock(&self.inner.watched).iter().cloned().collect();
            if !lists && resources.is_empty() {
                // Nothing to listen for until a client watches a resource.
                tokio::select! {
                    () = self.inner.watch_changed.notified() => continue,
                    () = stop.cancelled() => return,
                }
            }
            if gap {
                for kind in ["tools", "prompts", "resources"] {
                    let _ = self
                        .inner
                        .events
                        .send(Event::ListChanged(self.inner.index, kind.to_owned()));
                }
            }
            let mut notifications = json!({
                "toolsListChanged": changes("tools"),
                "promptsListChanged": changes("prompts"),
                "resourcesListChanged": changes("resources"),
            });
            if !resources.is_empty() {
                notifications["resourceSubscriptions"] = json!(resources);
            }
            let opened = tokio::time::Instant::now();
            let id = self.next_request_id();
            let params = to_raw(&json!({ "notifications": notifications }));
            let call = Call::new("subscriptions/listen")
                .id(id)
                .params(Some(params))
                .before_ready()
                .wait(None);
            let listen = self.request(call);
            let outcome = tokio::select! {
                outcome = listen => Some(outcome),
                () = self.inner.watch_changed.notified() => None,
                () = stop.cancelled() => return,
            };
            let Some(outcome) = outcome else {
                // The watched resources changed: the same stream with the new set.
                self.cancel(id, Some("listening again with other resources"));
                gap = false;
                continue;
            };
            gap = true;
            match outcome {
                Ok(reply)
                    if reply
                        .error
                        .as_ref()
                        .is_some_and(|e| e.code == METHOD_NOT_FOUND) =>
                {
                    tracing::debug!(
                        upstream = self.name(),
                        "Upstream has no subscriptions/listen"
                    );
                    return;
                }
                Ok(_) => tracing::debug!(upstream = self.name(), "subscriptions/listen ended"),
                Err(err) => {
                    tracing::debug!(upstream = self.name(), error = %err, "subscriptions/listen failed");
                }
            }
            // Do not spin on a server that ends the stream at once.
            let pause = Duration::from_secs(2).saturating_sub(opened.elapsed());
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    /// Sends a notification (or a response) upstream.
    ///
    /// # Errors
    /// [`Error::UpstreamUnavailable`] when the upstream is not connected.
    pub fn notify(&self, msg: Message) -> Result<(), Error> {
        let link = self.link(false)?;
        self.send_on(&link, msg, None)
    }

    /// Delivers the gateway's own answer to a server→client request it forwarded
    /// (`gateway_id` is the id the client saw), whichever client was asked.
    ///
    /// # Errors
    /// [`Error::NotFound`] when no such request is waiting.
    pub fn answer_server_request(&self, gateway_id: &str, msg: Message) -> Result<(), Error> {
        self.answer(gateway_id, msg, None)
    }

    /// Delivers a client's response to a server→client request the gateway forwarded: taken
    /// only from the session the request was sent to, and only once.
    ///
    /// # Errors
    /// [`Error::UnknownRequest`] when no request with that id waits for an answer from
    /// `session` (none was sent, it was answered already, or it was sent to another session).
    pub fn answer_from(&self, gateway_id: &str, msg: Message, session: &str) -> Result<(), Error> {
        self.answer(gateway_id, msg, Some(session))
    }

    fn answer(&self, gateway_id: &str, mut msg: Message, from: Option<&str>) -> Result<(), Error> {
        let taken = {
            let mut asked = lock(&self.inner.server_requests);
            let ours = asked
                .get(gateway_id)
                .is_some_and(|(_, to, _)| from.is_none_or(|s| to.session() == s));
            if ours {
                asked.remove(gateway_id)
            } else {
                None
            }
        };
        let Some((original, asked, _)) = taken else {
            return Err(Error::UnknownRequest {
                id: gateway_id.to_owned(),
            });
        };
        self.touch_client(&asked);
        msg.id = Some(original);
        self.notify(msg)
    }

    /// How many server→client messages reached no client so far (owner ambiguous or
    /// missing): requests were refused, notifications dropped.
    #[must_use]
    pub fn unrouted(&self) -> u64 {
        self.inner.unrouted.load(Ordering::Relaxed)
    }

    fn unavailable(&self, reason: &str) -> Error {
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
                .send(msg)
                .map_err(|_| self.unavailable("the process is gone")),
            Link::Http(http) => {
                http.post(self.clone(), msg, outbound);
                Ok(())
            }
        }
    }

    /// Handles one message the server sent. `hint` is where server→client requests go when
    /// the transport tells (the HTTP response stream of a POST).
    pub(crate) fn incoming(&self, msg: Message, hint: Option<&Outbound>) {
        match msg.kind() {
            Kind::Response | Kind::Error => {
                let Some(Id::Number(id)) = msg.id else {
                    tracing::warn!(upstream = self.name(), id = ?msg.id, "Response with an id the gateway never sent; dropped");
                    return;
                };
                let pending = lock(&self.inner.pending).remove(&id);
                match pending {
                    Some(p) => {
                        if let Some(token) = p.progress {
                            lock(&self.inner.progress).remove(&token);
                        }
                        let _ = p.reply.send(msg);
                    }
                    None => {
                        tracing::debug!(upstream = self.name(), id, "Late response dropped");
                    }
                }
            }
            Kind::Notification => self.incoming_notification(msg, hint),
            Kind::Request => self.incoming_request(msg, hint),
        }
    }

    fn incoming_notification(&self, mut msg: Message, hint: Option<&Outbound>) {
        let method = msg.method().unwrap_or_default().to_owned();
        match method.as_str() {
            "notifications/progress" => {
                let Ok(Value::Object(mut params)) = msg.params_as::<Value>() else {
                    return;
                };
                let token = params
                    .get("progressToken")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let route = token.and_then(|t| lock(&self.inner.progress).get(&t).cloned());
                if let Some((theirs, out, id)) = route {
                    if let Some(p) = lock(&self.inner.pending).get_mut(&id) {
                        p.alive = Some(tokio::time::Instant::now());
                    }
                    params.insert("progressToken".into(), theirs);
                    msg.params = Some(to_raw(&Value::Object(params)));
                    let _ = out.send(msg);
                }
            }
            "notifications/tools/list_changed"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed" => {
                let kind = method
                    .trim_start_matches("notifications/")
                    .trim_end_matches("/list_changed")
                    .to_owned();
                let _ = self
                    .inner
                    .events
                    .send(Event::ListChanged(self.inner.index, kind));
            }
            "notifications/resources/updated" => {
                let _ = self
                    .inner
                    .events
                    .send(Event::Broadcast(self.inner.index, msg));
            }
            "notifications/subscriptions/acknowledged" => {
                tracing::debug!(upstream = self.name(), "subscriptions/listen acknowledged");
            }
            "notifications/cancelled" => self.server_cancelled(msg),
            // Logs, and whatever else a server says: to the client whose call it belongs to.
            // A log of no call goes to the sessions that asked for its level; anything else
            // that cannot be attributed reaches nobody.
            _ => match self.owner(&msg, hint) {
                route::Owner::Client(out) => {
                    let _ = out.send(msg);
                }
                route::Owner::Nobody if method == "notifications/message" => {
                    let _ = self.inner.events.send(Event::Log(self.inner.index, msg));
                }
                owner => {
                    self.inner.unrouted.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(
                        upstream = self.name(),
                        method,
                        ?owner,
                        "Notification of no certain client dropped"
                    );
                }
            },
        }
    }

    /// The client a server→client message belongs to (see [`route`]).
    fn owner(&self, msg: &Message, hint: Option<&Outbound>) -> route::Owner<Outbound> {
        let named = msg
            .params
            .as_ref()
            .filter(|p| p.get().contains("progressToken"))
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .and_then(|p| {
                let token = route::named_token(&p)?;
                lock(&self.inner.progress)
                    .get(token)
                    .map(|(_, out, _)| out.clone())
            });
        let pending = lock(&self.inner.pending);
        let in_flight = pending.iter().filter_map(|(id, p)| {
            let out = p.outbound.as_ref()?;
            Some((*id, out.session(), out))
        });
        route::owner(hint, named.as_ref(), in_flight).map_client(Outbound::clone)
    }

    /// The server gave up on a request it sent a client: the client that holds it is told,
    /// under the id it knows.
    fn server_cancelled(&self, mut msg: Message) {
        let Ok(Value::Object(mut params)) = msg.params_as::<Value>() else {
            return;
        };
        let Some(theirs) = params
            .get("requestId")
            .and_then(|v| serde_json::from_value::<Id>(v.clone()).ok())
        else {
            return;
        };
        let held = {
            let mut asked = lock(&self.inner.server_requests);
            let key = asked
                .iter()
                .find(|(_, (original, _, _))| *original == theirs)
                .map(|(key, _)| key.clone());
            key.and_then(|key| asked.remove(&key).map(|(_, out, _)| (key, out)))
        };
        if let Some((key, out)) = held {
            params.insert("requestId".into(), Value::String(key));
            msg.params = Some(to_raw(&Value::Object(params)));
            let _ = out.send(msg);
        }
    }

    fn incoming_request(&self, mut msg: Message, hint: Option<&Outbound>) {
        let Some(original) = msg.id.clone() else {
            return;
        };
        let method = msg.method().unwrap_or_default().to_owned();
        // What the gateway answers itself: a liveness check, and roots the policy declares.
        if method == "ping" {
            let _ = self.notify(Message::response_value(original, &json!({})));
            return;
        }
        if let (true, Some(roots)) = (method == "roots/list", self.inner.spec.roots.as_ref()) {
            let _ = self.notify(Message::response_value(
                original,
                &json!({ "roots": roots }),
            ));
            return;
        }
        let out = match self.owner(&msg, hint) {
            route::Owner::Client(out) => out,
            route::Owner::Nobody if method == "roots/list" => {
                // No client is calling: no roots is the truthful answer (declared roots would
                // have been given above), and servers handle it better than an error.
                let _ = self.notify(Message::response_value(original, &json!({"roots": []})));
                return;
            }
            owner => {
                self.refuse_unroutable(original, &method, &owner);
                return;
            }
        };
        // Unguessable, so that no other session can answer in this client's place.
        let gateway_id = format!(
            "mcpb-{}-{}",
            self.inner.index,
            uuid::Uuid::new_v4().simple()
        );
        {
            let mut asked = lock(&self.inner.server_requests);
            // Requests to clients that have gone will never be answered.
            asked.retain(|_, (_, to, _)| !to.is_closed());
            let now = tokio::time::Instant::now();
            asked.insert(gateway_id.clone(), (original, out.clone(), now));
        }
        self.touch_client(&out);
        msg.id = Some(Id::String(gateway_id));
        let _ = out.send(msg);
    }

    /// Answers a server→client request that no client may be asked with an error that says
    /// why and what fixes it; logged and counted.
    fn refuse_unroutable(&self, original: Id, method: &str, owner: &route::Owner<Outbound>) {
        self.inner.unrouted.fetch_add(1, Ordering::Relaxed);
        let (reason, ambiguous) = match owner {
            route::Owner::Ambiguous(n) => (
                format!(
                    "{n} clients have requests in flight to this shared server and the request \
                     names none of them (no progress token of theirs), so the gateway does not \
                     guess whose it is; declare the server's roots in the policy \
                     ([[upstream]] roots) or give each client its own server"
                ),
                true,
            ),
            _ => (
                "no client of the gateway has a request in flight to this server".to_owned(),
                false,
            ),
        };
        let err = Error::Unroutable {
            upstream: self.name().to_owned(),
            method: method.to_owned(),
            reason,
            ambiguous,
        };
        tracing::warn!(upstream = self.name(), method, error = %err, "Server request refused");
        let _ = self.notify(Message::error(original, err.to_error_object()));
    }

    /// Notes which properties of its tools are mirrored in headers (see
    /// [`crate::mcp::params::marked_tools`]).
    pub(crate) fn set_param_marks(&self, marks: HashMap<String, Vec<crate::mcp::params::Marked>>) {
        *lock(&self.inner.param_marks) = marks;
    }

    /// The `Mcp-Param-*` headers of a `tools/call` to this upstream (none for other methods,
    /// or tools that mark no property).
    pub(crate) fn param_headers(&self, msg: &Message) -> Vec<(String, String)> {
        if msg.method() != Some("tools/call") {
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

/// Parses the `initialize` result into [`ServerInfo`].
pub(crate) fn parse_initialize(name: &str, reply: &Message) -> Result<ServerInfo, Error> {
    if let Some(err) = &reply.error {
        return Err(Error::UpstreamProtocol {
            upstream: name.to_owned(),
            reason: format!("initialize failed: {} ({})", err.message, err.code),
        });
    }
    let result: Map<String, Value> = reply.result_as().map_err(|e| Error::UpstreamProtocol {
        upstream: name.to_owned(),
        reason: format!("initialize result is not an object: {e}"),
    })?;
    Ok(ServerInfo {
        protocol_version: result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        capabilities: result.get("capabilities").cloned().unwrap_or(json!({})),
        server_info: result.get("serverInfo").cloned().unwrap_or(Value::Null),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// The gateway as an MCP client.
fn client_info() -> Value {
    json!({"name": "mcp-budget", "version": env!("CARGO_PKG_VERSION")})
}

/// Opens a fresh connection in the upstream's era: `server/discover` for a modern server,
/// `initialize` + `notifications/initialized` for a 2025-era one. An upstream of unknown era
/// is probed with `server/discover` first; a JSON-RPC error (or a non-modern answer, or
/// silence for [`PROBE_TIMEOUT`]) means 2025 era — a transport failure means neither, and the
/// connection fails as it would have. The era found is kept for reconnections.
pub(crate) async fn handshake(upstream: &Upstream) -> Result<ServerInfo, Error> {
    match upstream.era() {
        Era::Legacy => return initialize(upstream).await,
        Era::Modern => return discover(upstream).await,
        Era::Unknown => {}
    }
    let probe = bridge::with_envelope(
        None,
        MODERN_VERSION,
        &client_info(),
        &upstream.inner.capabilities,
    );
    let call = Call::new("server/discover")
        .params(Some(to_raw(&probe)))
        .before_ready()
        .wait(Some(PROBE_TIMEOUT.max(upstream.spec().timeout)));
    let outcome = upstream.request(call).await;
    match outcome {
        Ok(reply) => {
            if let Some(info) = parse_discover(upstream.name(), &reply) {
                upstream.set_era(Era::Modern);
                return Ok(info);
            }
            tracing::debug!(
                upstream = upstream.name(),
                "server/discover refused; speaking 2025-11-25"
            );
        }
        Err(Error::UpstreamTimeout { .. }) => {
            tracing::warn!(
                upstream = upstream.name(),
                "No answer to server/discover; trying initialize"
            );
        }
        Err(err) => return Err(err),
    }
    let info = initialize(upstream).await?;
    // Kept only once it worked: a connection that failed says nothing about the server.
    if upstream.era() == Era::Unknown {
        upstream.set_era(Era::Legacy);
    }
    Ok(info)
}

async fn discover(upstream: &Upstream) -> Result<ServerInfo, Error> {
    let reply = upstream
        .handshake_request("server/discover", &json!({}))
        .await?;
    parse_discover(upstream.name(), &reply).ok_or_else(|| Error::UpstreamProtocol {
        upstream: upstream.name().to_owned(),
        reason: format!("server/discover did not offer {MODERN_VERSION}"),
    })
}

async fn initialize(upstream: &Upstream) -> Result<ServerInfo, Error> {
    let reply = upstream
        .handshake_request("initialize", &upstream.initialize_params())
        .await?;
    // A server that refuses `initialize` for 2026-07-28 (a late answer to the probe may have
    // put its connection in that era) is modern after all.
    let modern_only = reply.error.as_ref().is_some_and(|e| {
        e.code == crate::mcp::modern::UNSUPPORTED_VERSION
            && e.data.as_ref().is_some_and(|d| {
                serde_json::from_str::<Value>(d.get())
                    .ok()
                    .as_ref()
                    .and_then(|d| d.get("supported"))
                    .and_then(Value::as_array)
                    .is_some_and(|v| v.iter().any(|v| v.as_str() == Some(MODERN_VERSION)))
            })
    });
    if modern_only && upstream.spec().protocol != UpstreamProtocol::Legacy {
        tracing::info!(
            upstream = upstream.name(),
            "initialize refused for {MODERN_VERSION}; speaking {MODERN_VERSION}"
        );
        upstream.set_era(Era::Modern);
        return discover(upstream).await;
    }
    let info = parse_initialize(upstream.name(), &reply)?;
    upstream.notify(Message::notification("notifications/initialized", None))?;
    Ok(info)
}

/// [`ServerInfo`] from a `server/discover` reply, when it speaks 2026-07-28.
fn parse_discover(name: &str, reply: &Message) -> Option<ServerInfo> {
    let result: Value = reply.result_as().ok()?;
    let (capabilities, server_info, instructions) =
        bridge::parse_discover(&result, MODERN_VERSION)?;
    tracing::debug!(upstream = name, "server/discover: speaks {MODERN_VERSION}");
    Some(ServerInfo {
        protocol_version: MODERN_VERSION.to_owned(),
        capabilities,
        server_info,
        instructions,
    })
}
