//! The streamable HTTP downstream (2025-03-26 … 2025-11-25 era).
//!
//! `POST` carries one message: `initialize` opens a session (`Mcp-Session-Id`); a request is
//! answered with JSON, or with an SSE stream when server→client messages (progress, logging,
//! sampling) come before the answer; notifications and responses get 202. `GET` opens the
//! session's stream for messages not tied to a request (`list_changed`); `DELETE` ends the
//! session. `Host` and `Origin` are checked against DNS rebinding: only localhost names and
//! what the policy allows get through.
//!
//! Limits (each a `[downstream]` policy key): a POST's body must arrive within
//! `body_timeout_secs` (408) and be `Content-Type: application/json` (415); `Accept` must list
//! both `application/json` and `text/event-stream` (406; 2024-11-05 clients need only JSON);
//! `initialize` over `max_sessions` or `max_sessions_per_client` gets 503; a session unused
//! for `session_idle_secs` (no request in flight, no open GET stream) expires; a second GET
//! stream for a session gets 409; a stream the client does not read is closed once
//! `max_outbound_messages` wait for it (the session survives). Connections are capped by
//! [`serve_with`].
//!
//! ```no_run
//! # async fn run(gateway: mcp_budget::gateway::Gateway) {
//! use mcp_budget::downstream::http::{router, HttpConfig};
//! let mcp = router(mcp_budget::stack::build(gateway.clone()), gateway, HttpConfig::default());
//! let app: axum::Router = axum::Router::new().nest_service("/mcp", mcp);
//! # let _ = app;
//! # }
//! ```

mod listen;
pub use listen::{serve, serve_with, ListenConfig, HEADER_READ_TIMEOUT, REFUSALS_IN_FLIGHT};

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tower::ServiceExt;

use crate::context::{Caller, McpRequest, RunToEnd, Session};
use crate::error::{kind, Error};
use crate::gateway::Gateway;
use crate::jsonrpc::{ErrorObject, Id, Kind, Message, INVALID_REQUEST};
use crate::mcp::modern;
use crate::policy::Downstream;
use crate::stack::McpService;
use listen::Peer;

const SESSION_HEADER: &str = "mcp-session-id";

/// The one protocol version before streamable HTTP: its clients need not accept SSE.
const HTTP_SSE_ERA: &str = "2024-11-05";

/// Longest wait between two sweeps for idle sessions (shorter for short idle times).
const MAX_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// Settings of the HTTP downstream.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Origins accepted besides localhost ones.
    pub allowed_origins: Vec<String>,
    /// Host names accepted besides localhost ones.
    pub allowed_hosts: Vec<String>,
    /// Largest accepted body.
    pub max_message_bytes: usize,
    /// How long a client may take to send a request's body.
    pub body_timeout: Duration,
    /// Live sessions, all clients together.
    pub max_sessions: NonZeroUsize,
    /// Live sessions opened from one client address (known when served by [`serve`], or by a
    /// server that puts axum's `ConnectInfo<SocketAddr>` in the requests).
    pub max_sessions_per_client: NonZeroUsize,
    /// How long a session may go unused before it expires.
    pub session_idle: Duration,
    /// Messages queued for one client stream the client is not reading.
    pub max_outbound_messages: NonZeroUsize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self::from(&Downstream::default())
    }
}

impl From<&Downstream> for HttpConfig {
    fn from(d: &Downstream) -> Self {
        Self {
            allowed_origins: d.allowed_origins.clone(),
            allowed_hosts: d.allowed_hosts.clone(),
            max_message_bytes: d.max_message_bytes,
            body_timeout: d.body_timeout,
            max_sessions: d.max_sessions,
            max_sessions_per_client: d.max_sessions_per_client,
            session_idle: d.session_idle,
            max_outbound_messages: d.max_outbound_messages,
        }
    }
}

/// A live 2025-era session.
struct Entry {
    session: Arc<Session>,
    link: Arc<Link>,
    /// The address that opened it, counted in [`Sessions::per_client`].
    client: Option<IpAddr>,
    /// The sweeper's view: [`Link::uses`] when it last looked, and since when that has not
    /// changed with the session idle.
    seen_uses: u64,
    idle_since: Instant,
}

/// What a session's handlers, its forwarding task and the sweeper share.
struct Link {
    /// The open GET stream, if any.
    stream: Mutex<Option<GetStream>>,
    /// Requests in flight plus the open GET stream: a busy session does not expire.
    busy: AtomicUsize,
    /// Requests and GET streams ever ended: the sweeper sees use without a clock read per
    /// request.
    uses: AtomicU64,
}

/// The sending side of a session's GET stream.
struct GetStream {
    tx: mpsc::Sender<Message>,
    /// Its connection, closed when the client stops reading.
    peer: Option<Arc<Peer>>,
}

/// The live sessions, and how many each client address opened.
#[derive(Default)]
struct Sessions {
    map: HashMap<String, Entry>,
    per_client: HashMap<IpAddr, usize>,
}

impl Sessions {
    fn remove(&mut self, id: &str) -> Option<Entry> {
        let entry = self.map.remove(id)?;
        if let Some(client) = entry.client {
            if let Some(n) = self.per_client.get_mut(&client) {
                *n -= 1;
                if *n == 0 {
                    self.per_client.remove(&client);
                }
            }
        }
        Some(entry)
    }
}

struct AppState {
    service: McpService,
    gateway: Gateway,
    config: HttpConfig,
    sessions: Mutex<Sessions>,
    /// Whether the sweeper for idle sessions runs (it starts with the first session).
    sweeping: AtomicBool,
    /// Whether the last `initialize` was refused for a session limit.
    refusing_sessions: AtomicBool,
}

impl AppState {
    /// Ends session `id` (DELETE): it is forgotten here and by the gateway, and its GET
    /// stream ends. Whether it existed.
    fn end_session(&self, id: &str) -> bool {
        let Some(entry) = lock(&self.sessions).remove(id) else {
            return false;
        };
        self.forget(id, &entry);
        true
    }

    /// What ending a session takes besides removing its entry.
    fn forget(&self, id: &str, entry: &Entry) {
        lock(&entry.link.stream).take();
        self.gateway.remove_session(id);
    }

    /// Ends the sessions unused for [`HttpConfig::session_idle`] as DELETE does: not busy, and
    /// not used since the sweep that found them idle, that long ago. The scan is bounded by
    /// `max_sessions`.
    fn expire_idle(&self) {
        let now = Instant::now();
        let idle = self.config.session_idle;
        // Found and removed under one lock: a request takes its session under the same lock,
        // so a session cannot be expired while a request starts on it.
        let expired: Vec<(String, Entry)> = {
            let mut sessions = lock(&self.sessions);
            let mut ids = Vec::new();
            for (id, e) in &mut sessions.map {
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
                .filter_map(|id| sessions.remove(&id).map(|e| (id, e)))
                .collect()
        };
        for (id, entry) in expired {
            self.forget(&id, &entry);
            tracing::debug!(session = %id, "Session expired (downstream.session_idle_secs)");
        }
    }
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
struct InUse {
    link: Arc<Link>,
}

impl InUse {
    fn new(link: &Arc<Link>) -> Self {
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The MCP endpoint as an axum router serving `/`: mount it with
/// `Router::nest_service("/mcp", ..)`.
pub fn router(service: McpService, gateway: Gateway, config: HttpConfig) -> Router {
    router_at("/", service, gateway, config)
}

/// The MCP endpoint as an axum router serving `path` (say `/mcp`): for a router of its own (or
/// merged), one step less per request than a nested [`router`], which strips the prefix from
/// every request's URI.
pub fn router_at(path: &str, service: McpService, gateway: Gateway, config: HttpConfig) -> Router {
    let state = Arc::new(AppState {
        service,
        gateway,
        config,
        sessions: Mutex::new(Sessions::default()),
        sweeping: AtomicBool::new(false),
        refusing_sessions: AtomicBool::new(false),
    });
    Router::new()
        .route(
            path,
            post(handle_post).get(handle_get).delete(handle_delete),
        )
        .with_state(state)
}

fn json_error(status: StatusCode, id: Id, err: ErrorObject) -> Response {
    let body = Message::error(id, err).to_bytes();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn plain_error(status: StatusCode, message: &str, kind: &str) -> Response {
    json_error(
        status,
        Id::Null,
        ErrorObject::new(INVALID_REQUEST, message, kind, None),
    )
}

/// A `Host` value or the authority of an origin, `host[:port]` (an IPv6 address in
/// brackets, the port numeric), split into host and port; `None` for anything else (userinfo,
/// a path, an empty or non-numeric port, an unbracketed IPv6 address, stray characters).
fn parse_authority(text: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        inner.parse::<Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':')?),
        };
        (&text[..inner.len() + 2], port)
    } else {
        let (host, port) = match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        };
        let name_char = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_');
        if host.is_empty() || !host.bytes().all(name_char) {
            return None;
        }
        (host, port)
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse().ok()?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

/// Whether a host (as [`parse_authority`] returns it) names this machine's loopback.
fn is_local_host(host: &str) -> bool {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner
            .parse::<Ipv6Addr>()
            .is_ok_and(|ip| ip == Ipv6Addr::LOCALHOST);
    }
    host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1"
}

/// The parts of an `Origin` header, `scheme://host[:port]` and nothing else; `None` for
/// anything else, `null` included.
fn parse_origin(text: &str) -> Option<(&str, &str, Option<u16>)> {
    let (scheme, authority) = text.split_once("://")?;
    let mut chars = scheme.bytes();
    let scheme_ok = chars.next().is_some_and(|b| b.is_ascii_alphabetic())
        && chars.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return None;
    }
    let (host, port) = parse_authority(authority)?;
    Some((scheme, host, port))
}

/// The one value of header `name`: `Err(count)` when it is missing (0) or repeated.
fn only_header<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> Result<&'a [u8], usize> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (Some(v), None) => Ok(v.as_bytes()),
        (None, _) => Err(0),
        (Some(_), Some(_)) => Err(headers.get_all(name).iter().count()),
    }
}

/// DNS-rebinding protection and HTTP hygiene: exactly one `Host`, an authority only (400
/// `mcp_budget.http.bad_host` otherwise), naming localhost or an allowed host; at most one
/// `Origin`, a real origin, localhost or allowed (403 `mcp_budget.http.forbidden_origin`
/// otherwise, `null` included). A request target in absolute form (`POST http://host/mcp`)
/// has its authority checked as a `Host` too.
fn check_origin(
    headers: &HeaderMap,
    uri: &axum::http::Uri,
    config: &HttpConfig,
) -> Result<(), Box<Response>> {
    let forbidden = |what: &str, value: &str| {
        Box::new(plain_error(
            StatusCode::FORBIDDEN,
            &format!(
                "{what} {value:?} is not allowed (downstream.allowed_{}s)",
                what.to_lowercase()
            ),
            kind::HTTP_FORBIDDEN_ORIGIN,
        ))
    };
    let bad_host = |message: String| {
        Box::new(plain_error(
            StatusCode::BAD_REQUEST,
            &message,
            kind::HTTP_BAD_HOST,
        ))
    };
    let host = match only_header(headers, &header::HOST) {
        Ok(host) => host,
        Err(0) => {
            return Err(bad_host(
                "missing Host header: send one naming this server (host[:port])".into(),
            ))
        }
        Err(n) => {
            return Err(bad_host(format!(
                "{n} Host headers: send exactly one (host[:port])"
            )))
        }
    };
    let host_ok = |text: &str| -> Result<(), Box<Response>> {
        let Some((name, _)) = parse_authority(text) else {
            return Err(bad_host(format!(
                "Host {text:?} is not host[:port] (no userinfo, path or other characters)"
            )));
        };
        let allowed = is_local_host(name)
            || config
                .allowed_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(text) || h.eq_ignore_ascii_case(name));
        if allowed {
            Ok(())
        } else {
            Err(forbidden("Host", text))
        }
    };
    let Ok(host) = std::str::from_utf8(host) else {
        return Err(bad_host("the Host header is not text".into()));
    };
    host_ok(host)?;
    if let Some(authority) = uri.authority() {
        host_ok(authority.as_str())?;
    }
    match only_header(headers, &header::ORIGIN) {
        Err(0) => Ok(()),
        Err(n) => Err(forbidden("Origin", &format!("({n} Origin headers)"))),
        Ok(origin) => {
            let origin = String::from_utf8_lossy(origin);
            let Some((scheme, host, _)) = parse_origin(&origin) else {
                return Err(forbidden("Origin", &origin));
            };
            let local = (scheme.eq_ignore_ascii_case("http")
                || scheme.eq_ignore_ascii_case("https"))
                && is_local_host(host);
            if local
                || config
                    .allowed_origins
                    .iter()
                    .any(|o| o.eq_ignore_ascii_case(&origin))
            {
                Ok(())
            } else {
                Err(forbidden("Origin", &origin))
            }
        }
    }
}

/// What an `Accept` header allows of the two media types MCP answers with (wildcards count;
/// a range with `q=0` does not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Accepts {
    json: bool,
    sse: bool,
    /// Whether there was an `Accept` header at all.
    present: bool,
}

fn accepts(headers: &HeaderMap) -> Accepts {
    let mut out = Accepts::default();
    // Repeated Accept headers are one list (RFC 9110 §5.3). Read as bytes, in one pass per
    // list item: this runs on every POST.
    for value in &headers.get_all(header::ACCEPT) {
        out.present = true;
        for range in value.as_bytes().split(|&b| b == b',') {
            let mut parts = range.split(|&b| b == b';');
            let media = parts.next().unwrap_or_default().trim_ascii();
            let refused = parts.any(|p| {
                let p = p.trim_ascii();
                p.len() > 2
                    && p[..2].eq_ignore_ascii_case(b"q=")
                    && std::str::from_utf8(&p[2..])
                        .ok()
                        .and_then(|q| q.trim().parse::<f32>().ok())
                        .is_some_and(|q| q <= 0.0)
            });
            if refused {
                continue;
            }
            let is = |m: &[u8]| media.eq_ignore_ascii_case(m);
            if is(b"*/*") {
                out.json = true;
                out.sse = true;
            } else if is(b"application/json") || is(b"application/*") {
                out.json = true;
            } else if is(b"text/event-stream") || is(b"text/*") {
                out.sse = true;
            }
        }
    }
    out
}

/// Whether the request has exactly one `Content-Type`, `application/json` (any case, any
/// parameters such as `charset`).
fn is_json_body(headers: &HeaderMap) -> bool {
    only_header(headers, &header::CONTENT_TYPE).is_ok_and(|v| {
        let media = v.split(|&b| b == b';').next().unwrap_or_default();
        media.trim_ascii().eq_ignore_ascii_case(b"application/json")
    })
}

/// A POST must accept both answers MCP may give (2025-03-26 and later, 2026-07-28 too): JSON
/// and an SSE stream. A 2024-11-05 client (the era before streamable HTTP, whose clients
/// expect JSON answers) needs only JSON, or no `Accept` at all. 406 otherwise.
fn check_accept(
    state: &AppState,
    headers: &HeaderMap,
    message: &Message,
    accepts: Accepts,
) -> Result<(), Box<Response>> {
    if accepts.json && accepts.sse {
        return Ok(());
    }
    if (accepts.json || !accepts.present) && speaks_http_sse_era(state, headers, message) {
        return Ok(());
    }
    let got = headers.get(header::ACCEPT).map_or("none".into(), |v| {
        format!("{:?}", String::from_utf8_lossy(v.as_bytes()))
    });
    Err(Box::new(json_error(
        StatusCode::NOT_ACCEPTABLE,
        message.id.clone().unwrap_or(Id::Null),
        ErrorObject::new(
            INVALID_REQUEST,
            format!(
                "Accept must list both application/json and text/event-stream \
                 (streamable HTTP, MCP 2025-03-26 and later); got {got}"
            ),
            kind::HTTP_NOT_ACCEPTABLE,
            None,
        ),
    )))
}

/// Whether the client speaks 2024-11-05: its `MCP-Protocol-Version` header, the version its
/// `initialize` asks for, or its session's version says so. Only asked of requests that do
/// not accept SSE, so the session lookup is off the common path.
fn speaks_http_sse_era(state: &AppState, headers: &HeaderMap, message: &Message) -> bool {
    if let Some(v) = headers.get("mcp-protocol-version") {
        return v.as_bytes() == HTTP_SSE_ERA.as_bytes();
    }
    if message.method() == Some("initialize") {
        #[derive(serde::Deserialize)]
        struct Init<'a> {
            #[serde(rename = "protocolVersion", borrow)]
            protocol_version: Option<&'a str>,
        }
        return message
            .params_as::<Init<'_>>()
            .is_ok_and(|p| p.protocol_version == Some(HTTP_SSE_ERA));
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let session = lock(&state.sessions).map.get(id).map(|e| e.session.clone());
    session.is_some_and(|s| s.state().protocol_version.as_deref() == Some(HTTP_SSE_ERA))
}

/// The client's address: from [`serve`]'s connection, or axum's `ConnectInfo`.
fn client_ip(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    let addr = Peer::current().map(|p| p.addr).or_else(|| {
        extensions
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
            .map(|c| c.0)
    })?;
    Some(addr.ip().to_canonical())
}

/// The session a request names, marked in use until the returned guard is dropped.
fn session_of(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<(Arc<Session>, InUse), Box<Response>> {
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return Err(Box::new(plain_error(
            StatusCode::BAD_REQUEST,
            "missing Mcp-Session-Id header: send initialize first",
            kind::SESSION_MISSING,
        )));
    };
    let sessions = lock(&state.sessions);
    match sessions.map.get(id) {
        Some(entry) => Ok((entry.session.clone(), InUse::new(&entry.link))),
        None => Err(Box::new(plain_error(
            StatusCode::NOT_FOUND,
            "unknown or expired session: initialize again",
            kind::SESSION_UNKNOWN,
        ))),
    }
}

/// Whether the request speaks the 2026-07-28 era on HTTP: no `Mcp-Session-Id`, and its
/// `MCP-Protocol-Version` header names a version no `initialize` handshake negotiates (unknown
/// values included, so that they get a structured rejection), or its `_meta` names a protocol
/// version.
fn is_modern(message: &Message, headers: &HeaderMap) -> bool {
    if headers.contains_key(SESSION_HEADER) {
        return false;
    }
    let by_header = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| !crate::gateway::SUPPORTED_VERSIONS.contains(&v));
    by_header || (message.kind() == Kind::Request && modern::request_meta(message).is_some())
}

/// The HTTP status of a modern JSON-RPC error code ([`modern::http_status`]).
fn modern_status(code: i64) -> StatusCode {
    StatusCode::from_u16(modern::http_status(code)).unwrap_or(StatusCode::OK)
}

/// A modern JSON-RPC error as its HTTP response.
fn modern_error(id: Id, err: ErrorObject) -> Box<Response> {
    Box::new(json_error(modern_status(err.code), id, err))
}

/// A 2026-07-28 request (see [`is_modern`]) is served without a session, after the checks of
/// the modern HTTP transport, first failure wins (the order of the Python SDK's ladder):
/// a routing header sent twice or a header that differs from the body → `-32020`; a `_meta`
/// envelope without protocol version or client capabilities → `-32602`; an unsupported
/// version → `-32022` (all HTTP 400); a method 2026-07-28 removed → `-32601` (HTTP 404).
/// A modern notification is checked for its version only. It gets a session of its own that
/// ends with it.
fn modern_session(
    message: &Message,
    headers: &HeaderMap,
) -> Option<Result<Arc<Session>, Box<Response>>> {
    if !is_modern(message, headers) {
        return None;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let version_header = header("mcp-protocol-version");
    if message.kind() == Kind::Request {
        let id = message.id.clone().unwrap_or(Id::Null);
        if let Err(err) = check_modern_request(message, headers) {
            return Some(Err(modern_error(id, err)));
        }
    } else if let Some(v) = version_header {
        if !modern::MODERN_VERSIONS.contains(&v) {
            return Some(Err(modern_error(Id::Null, modern::unsupported_version(v))));
        }
    }
    // Nothing outlives the request: session-wide messages have nowhere to go.
    let (notify, _) = mpsc::unbounded_channel();
    let id = format!("modern-{}", uuid::Uuid::new_v4().simple());
    Some(Ok(Arc::new(Session::new(id, notify))))
}

/// The checks of [`modern_session`] for a request.
fn check_modern_request(message: &Message, headers: &HeaderMap) -> Result<(), ErrorObject> {
    for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
        if headers.get_all(name).iter().nth(1).is_some() {
            return Err(modern::header_mismatch(format!(
                "{name} header appears more than once"
            )));
        }
    }
    modern::check_envelope(message)?;
    let meta = modern::request_meta(message)
        .ok_or_else(|| modern::header_mismatch("no protocol version in _meta"))?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mirrored = modern::MirroredHeaders {
        protocol_version: header("mcp-protocol-version"),
        method: header("mcp-method"),
        name: header("mcp-name"),
    };
    modern::check_headers(message, &meta, mirrored)?;
    if !modern::MODERN_VERSIONS.contains(&meta.protocol_version.as_str()) {
        return Err(modern::unsupported_version(&meta.protocol_version));
    }
    let method = message.method().unwrap_or_default();
    if modern::REMOVED_METHODS.contains(&method) {
        return Err(modern::removed_method(method));
    }
    Ok(())
}

/// The `Mcp-Param-*` headers of a modern `tools/call` against its arguments, for the tools
/// whose schema marks properties with `x-mcp-header`.
fn check_param_headers(
    gateway: &Gateway,
    message: &Message,
    headers: &HeaderMap,
) -> Result<(), ErrorObject> {
    let params: serde_json::Value = message.params_as().unwrap_or_default();
    let Some(name) = params.get("name").and_then(serde_json::Value::as_str) else {
        return Ok(());
    };
    let marks = gateway.param_marks(name);
    if marks.is_empty() {
        return Ok(());
    }
    let arguments = params.get("arguments").cloned().unwrap_or_default();
    crate::mcp::params::check_param_headers(&marks, &arguments, |header| {
        headers
            .get_all(header)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect()
    })
}

/// `GET` and `DELETE` have no meaning without a session: for modern (2026-07-28) traffic they
/// get 405 with `Allow: POST`, as in the Python SDK. 2025-era sessions keep both.
fn modern_non_post(headers: &HeaderMap) -> Option<Response> {
    let version = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())?;
    if headers.contains_key(SESSION_HEADER) || crate::gateway::SUPPORTED_VERSIONS.contains(&version)
    {
        return None;
    }
    Some((StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response())
}

fn sse_event(msg: &Message) -> Bytes {
    let mut out = b"event: message\ndata: ".to_vec();
    out.extend_from_slice(&msg.to_bytes());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

fn sse_response(
    stream: impl futures::Stream<Item = Bytes> + Send + 'static,
    session: Option<&str>,
) -> Response {
    let body = Body::from_stream(stream.map(Ok::<_, Infallible>));
    let mut resp = Response::new(body);
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(id) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        headers.insert(SESSION_HEADER, id);
    }
    resp
}

/// The JSON answer to a request: for a 2026-07-28 request an error has the HTTP status the
/// modern transport gives its code (404 for `-32601`, 400 for request errors).
fn answer(reply: &Message, modern: bool) -> Response {
    let mut resp = json_response(reply, None);
    if let (true, Some(err)) = (modern, &reply.error) {
        *resp.status_mut() = modern_status(err.code);
    }
    resp
}

fn json_response(msg: &Message, session: Option<&str>) -> Response {
    let mut resp = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        msg.to_bytes(),
    )
        .into_response();
    if let Some(id) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        resp.headers_mut().insert(SESSION_HEADER, id);
    }
    resp
}

/// `future`, given `limit` to finish. A future that is ready at once (a body that came with
/// its headers) is not timed: no timer is set up on the common path.
async fn within<F: std::future::Future>(
    limit: Duration,
    future: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    let mut future = std::pin::pin!(future);
    if let Poll::Ready(out) = futures::poll!(future.as_mut()) {
        return Ok(out);
    }
    // Boxed: the timer's state stays out of every request's future.
    Box::pin(tokio::time::timeout(limit, future)).await
}

async fn handle_post(
    State(state): State<Arc<AppState>>,
    request: axum::extract::Request,
) -> Response {
    // The request taken apart rather than a `HeaderMap` extractor, which clones the headers.
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    if let Err(resp) = check_origin(&headers, &parts.uri, &state.config) {
        return *resp;
    }
    if !is_json_body(&headers) {
        return plain_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a POST carries one JSON-RPC message: send Content-Type: application/json",
            kind::HTTP_UNSUPPORTED_MEDIA_TYPE,
        );
    }
    let limit = state.config.max_message_bytes;
    let bytes = match within(state.config.body_timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            let err = Error::TooLarge {
                size: limit + 1,
                limit,
            };
            return json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                Id::Null,
                err.to_error_object(),
            );
        }
        Err(_) => return body_timeout(state.config.body_timeout),
    };
    let message = match Message::parse_with_max_depth(
        &bytes,
        state.gateway.policy().downstream.max_json_depth,
    ) {
        Ok(m) => m,
        Err(err) => {
            let resp = err.to_response();
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                resp.to_bytes(),
            )
                .into_response();
        }
    };
    let accepts = accepts(&headers);
    if let Err(resp) = check_accept(&state, &headers, &message, accepts) {
        return *resp;
    }
    let accepts_sse = accepts.sse;

    // A modern request is checked first: a 2026-07-28 `initialize` is a removed method (404),
    // not a new 2025 session.
    let modern = match modern_session(&message, &headers) {
        Some(Err(resp)) => return *resp,
        other => other.and_then(Result::ok),
    };
    if modern.is_none() && message.method() == Some("initialize") && message.kind() == Kind::Request
    {
        // Boxed: a future of its own keeps every other request's future small.
        return Box::pin(initialize(&state, message, client_ip(&parts.extensions))).await;
    }

    if modern.is_some() && message.method() == Some("tools/call") {
        if let Err(err) = check_param_headers(&state.gateway, &message, &headers) {
            let id = message.id.clone().unwrap_or(Id::Null);
            return *modern_error(id, err);
        }
    }
    let is_modern = modern.is_some();
    // The session is in use (it does not expire) until `in_use` is dropped.
    let (session, in_use) = match modern {
        Some(session) => (session, None),
        None => match session_of(&state, &headers) {
            Ok((session, in_use)) => (session, Some(in_use)),
            Err(resp) => return *resp,
        },
    };
    if message.kind() != Kind::Request {
        let request = McpRequest {
            message,
            caller: Caller::new(session),
        };
        // A refused client answer (to no request waiting for this session) comes back as an
        // error without id: the spec's "cannot accept the input" is a 4xx with it.
        return match state.service.clone().oneshot(request).await {
            Ok(Some(refusal)) => {
                let mut resp = json_response(&refusal, None);
                *resp.status_mut() = StatusCode::BAD_REQUEST;
                resp
            }
            _ => StatusCode::ACCEPTED.into_response(),
        };
    }

    // A request: answer with JSON, unless the server talks to the client before the answer
    // is ready; then switch to an SSE stream that ends with the answer.
    let mut cancel_on_close = CancelOnClose::new(&state.service, &session, &message, is_modern);
    if !accepts_sse {
        // JSON only: server→client messages go to the session's stream, the answer here.
        let outbound = session.notify.clone();
        let request = McpRequest {
            message,
            caller: Caller { session, outbound },
        };
        // Run to its end even if this handler is dropped first.
        let reply = RunToEnd::new(state.service.clone().oneshot(request)).await;
        cancel_on_close.disarm();
        return match reply {
            Ok(Some(reply)) => answer(&reply, is_modern),
            _ => StatusCode::ACCEPTED.into_response(),
        };
    }
    let (caller, mut out_rx) = Caller::with_channel(session);
    let request = McpRequest { message, caller };
    // Driven right here (no task of its own on the way to a JSON answer); if this handler is
    // dropped first, the call still runs to its end.
    let mut call = RunToEnd::new(state.service.clone().oneshot(request));
    // Server→client messages first: a request that sent some before its answer gets them all,
    // on an SSE stream that ends with the answer.
    let first = tokio::select! {
        biased;
        first = out_rx.recv() => first,
        reply = &mut call => {
            cancel_on_close.disarm();
            return match reply {
                Ok(Some(reply)) => answer(&reply, is_modern),
                _ => StatusCode::ACCEPTED.into_response(),
            };
        },
    };
    // The channel closes when the request is done without a server→client message: then the
    // answer is plain JSON.
    let Some(first) = first else {
        let reply = call.await;
        cancel_on_close.disarm();
        return match reply {
            Ok(Some(reply)) => answer(&reply, is_modern),
            _ => StatusCode::ACCEPTED.into_response(),
        };
    };
    // The stream holds at most `max_outbound_messages` the client has not read; `out_rx` (what
    // the gateway sends) is drained into it at once, so the gateway never waits on a client.
    let (sse_tx, sse_rx) = mpsc::channel::<Bytes>(state.config.max_outbound_messages.get());
    let _ = sse_tx.try_send(sse_event(&first));
    let overflow = Overflow {
        peer: Peer::current(),
        limit: state.config.max_outbound_messages,
    };
    // For the log only (taken here, off the path of plain JSON answers).
    let (session, request_id) = (cancel_on_close.session.clone(), cancel_on_close.id.clone());
    tokio::spawn(async move {
        let _in_use = in_use;
        let push = |msg: &Message| match sse_tx.try_send(sse_event(msg)) {
            Err(mpsc::error::TrySendError::Full(_)) => {
                overflow.close(&session.id, Some(&request_id));
                false
            }
            // Closed: the client went away; the `closed()` arm below ends the loop.
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => true,
        };
        loop {
            tokio::select! {
                biased;
                msg = out_rx.recv() => match msg {
                    Some(msg) => if !push(&msg) { return },
                    None => {
                        if let Ok(Some(reply)) = call.await { push(&reply); }
                        cancel_on_close.disarm();
                        return;
                    }
                },
                reply = &mut call => {
                    // Flush what came just before the answer, then the answer, then close.
                    while let Ok(msg) = out_rx.try_recv() {
                        if !push(&msg) { return }
                    }
                    if let Ok(Some(reply)) = reply { push(&reply); }
                    cancel_on_close.disarm();
                    return;
                }
                // The client closed the stream: the call goes on (2025 era: disconnecting is not
                // cancelling) or is cancelled (2026-07-28), and messages for it go nowhere.
                () = sse_tx.closed() => return,
            }
        }
    });
    sse_response(ReceiverStream::new(sse_rx), None)
}

/// 408 for a body that did not arrive in time; the connection is closed after it (what is
/// left of the body would be taken for the next request).
fn body_timeout(limit: Duration) -> Response {
    let mut resp = json_error(
        StatusCode::REQUEST_TIMEOUT,
        Id::Null,
        ErrorObject::new(
            INVALID_REQUEST,
            format!(
                "the request body did not arrive within {} s (downstream.body_timeout_secs): \
                 send the whole body without pauses",
                limit.as_secs_f64()
            ),
            kind::HTTP_BODY_TIMEOUT,
            Some(serde_json::json!({ "limit_secs": limit.as_secs_f64() })),
        ),
    );
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// `initialize` (2025 era) opens a session, unless that would pass `max_sessions` or, for the
/// client's address, `max_sessions_per_client` (503 `mcp_budget.session.limit`).
async fn initialize(state: &Arc<AppState>, message: Message, client: Option<IpAddr>) -> Response {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (notify_tx, notify_rx) = mpsc::unbounded_channel();
    let session = Arc::new(Session::new(id.clone(), notify_tx));
    let link = Arc::new(Link {
        stream: Mutex::new(None),
        busy: AtomicUsize::new(0),
        uses: AtomicU64::new(0),
    });
    let refused = {
        let mut sessions = lock(&state.sessions);
        let from_client = client.map_or(0, |c| sessions.per_client.get(&c).copied().unwrap_or(0));
        if sessions.map.len() >= state.config.max_sessions.get() {
            Some(format!(
                "the gateway has too many open sessions (downstream.max_sessions = {}): \
                 end unused ones with DELETE or retry later",
                state.config.max_sessions
            ))
        } else if client.is_some() && from_client >= state.config.max_sessions_per_client.get() {
            Some(format!(
                "too many open sessions from {} (downstream.max_sessions_per_client = {}): \
                 end unused ones with DELETE",
                client.map_or_else(String::new, |c| c.to_string()),
                state.config.max_sessions_per_client
            ))
        } else {
            sessions.map.insert(
                id.clone(),
                Entry {
                    session: session.clone(),
                    link: link.clone(),
                    client,
                    seen_uses: 0,
                    idle_since: Instant::now(),
                },
            );
            if let Some(client) = client {
                *sessions.per_client.entry(client).or_insert(0) += 1;
            }
            None
        }
    };
    // A flood is logged once, when refusals start, not once per refusal.
    let was_refusing = state
        .refusing_sessions
        .swap(refused.is_some(), Ordering::Relaxed);
    if let Some(refusal) = refused {
        if !was_refusing {
            tracing::warn!(client = ?client, "Refusing sessions: {refusal}");
        }
        return json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            message.id.unwrap_or(Id::Null),
            ErrorObject::new(INVALID_REQUEST, refusal, kind::SESSION_LIMIT, None),
        );
    }
    if !state.sweeping.swap(true, Ordering::AcqRel) {
        tokio::spawn(sweep(Arc::downgrade(state), state.config.session_idle));
    }
    tokio::spawn(forward_session(
        notify_rx,
        link.clone(),
        id.clone(),
        state.config.max_outbound_messages,
    ));
    let _in_use = InUse::new(&link);
    let request = McpRequest {
        message,
        caller: Caller::new(session),
    };
    match state.service.clone().oneshot(request).await {
        Ok(Some(reply)) => json_response(&reply, Some(&id)),
        _ => StatusCode::ACCEPTED.into_response(),
    }
}

/// What to do when a client stream is full: close the connection it is on.
struct Overflow {
    peer: Option<Arc<Peer>>,
    limit: NonZeroUsize,
}

impl Overflow {
    fn close(&self, session: &str, request: Option<&Id>) {
        tracing::warn!(
            session = %session,
            request = ?request,
            limit = self.limit.get(),
            "The client is not reading its stream: closing it (downstream.max_outbound_messages)"
        );
        if let Some(peer) = &self.peer {
            peer.close();
        }
    }
}

/// For a 2026-07-28 request, where closing the response stream is how a client cancels:
/// dropped before [`CancelOnClose::disarm`], it tells the gateway the request was cancelled.
struct CancelOnClose {
    service: Option<McpService>,
    session: Arc<Session>,
    id: Id,
}

impl CancelOnClose {
    fn new(service: &McpService, session: &Arc<Session>, message: &Message, modern: bool) -> Self {
        Self {
            service: modern.then(|| service.clone()),
            session: session.clone(),
            id: message.id.clone().unwrap_or(Id::Null),
        }
    }

    fn disarm(&mut self) {
        self.service = None;
    }
}

impl Drop for CancelOnClose {
    fn drop(&mut self) {
        let Some(service) = self.service.take() else {
            return;
        };
        let params = serde_json::json!({
            "requestId": self.id,
            "reason": "the client closed the response stream",
        });
        let request = McpRequest {
            message: Message::notification(
                "notifications/cancelled",
                Some(crate::jsonrpc::to_raw(&params)),
            ),
            caller: Caller::new(self.session.clone()),
        };
        tokio::spawn(service.oneshot(request));
    }
}

/// Moves session-wide messages to the open GET stream, if any, at once: the gateway's side
/// never waits. A stream whose client lets `limit` messages pile up is closed (the session
/// lives on and may open another).
async fn forward_session(
    mut notify: mpsc::UnboundedReceiver<Message>,
    link: Arc<Link>,
    session_id: String,
    limit: NonZeroUsize,
) {
    while let Some(msg) = notify.recv().await {
        let mut current = lock(&link.stream);
        let Some(stream) = current.as_ref() else {
            continue;
        };
        match stream.tx.try_send(msg) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Closed(_)) => *current = None,
            Err(mpsc::error::TrySendError::Full(_)) => {
                let overflow = Overflow {
                    peer: stream.peer.clone(),
                    limit,
                };
                *current = None;
                overflow.close(&session_id, None);
            }
        }
    }
    lock(&link.stream).take();
}

async fn handle_get(
    State(state): State<Arc<AppState>>,
    request: axum::extract::Request,
) -> Response {
    let (parts, _) = request.into_parts();
    let headers = &parts.headers;
    if let Err(resp) = check_origin(headers, &parts.uri, &state.config) {
        return *resp;
    }
    if let Some(resp) = modern_non_post(headers) {
        return resp;
    }
    if !accepts(headers).sse {
        return plain_error(
            StatusCode::NOT_ACCEPTABLE,
            "GET opens an SSE stream: send Accept: text/event-stream",
            kind::HTTP_NOT_ACCEPTABLE,
        );
    }
    let (_, in_use) = match session_of(&state, headers) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    let (tx, rx) = mpsc::channel(state.config.max_outbound_messages.get());
    {
        let mut current = lock(&in_use.link.stream);
        // One GET stream per session: a second one would take the first one's messages.
        if current.as_ref().is_some_and(|s| !s.tx.is_closed()) {
            return plain_error(
                StatusCode::CONFLICT,
                "this session's GET stream is already open: close it before opening another",
                kind::SESSION_STREAM_CONFLICT,
            );
        }
        *current = Some(GetStream {
            tx,
            peer: Peer::current(),
        });
    }
    // The stream keeps the session in use while it is open.
    let events = ReceiverStream::new(rx).map(move |m| {
        let _ = &in_use;
        sse_event(&m)
    });
    // A comment line first, so clients see the stream open at once.
    let events =
        futures::stream::once(async { Bytes::from_static(b": stream open\n\n") }).chain(events);
    sse_response(events, None)
}

async fn handle_delete(
    State(state): State<Arc<AppState>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(resp) = check_origin(&headers, &uri, &state.config) {
        return *resp;
    }
    if let Some(resp) = modern_non_post(&headers) {
        return resp;
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return plain_error(
            StatusCode::BAD_REQUEST,
            "missing Mcp-Session-Id header",
            kind::SESSION_MISSING,
        );
    };
    if state.end_session(id) {
        StatusCode::OK.into_response()
    } else {
        plain_error(
            StatusCode::NOT_FOUND,
            "unknown or expired session",
            kind::SESSION_UNKNOWN,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `text` as a `Host` header names localhost.
    fn local(text: &str) -> bool {
        parse_authority(text).is_some_and(|(host, _)| is_local_host(host))
    }

    #[test]
    fn local_hosts_pass_and_foreign_ones_do_not() {
        for h in [
            "localhost",
            "LocalHost:8931",
            "127.0.0.1:1",
            "[::1]:80",
            "[::1]",
            "[0:0:0:0:0:0:0:1]:8931",
        ] {
            assert!(local(h), "{h}");
        }
        for h in [
            "evil.example.com",
            "localhost.evil.com:80",
            "127.0.0.2",
            "[::2]",
        ] {
            assert!(!local(h), "{h}");
        }
    }

    #[test]
    fn a_host_is_an_authority_and_nothing_else() {
        assert_eq!(parse_authority("localhost"), Some(("localhost", None)));
        assert_eq!(
            parse_authority("a.b-c_d:65535"),
            Some(("a.b-c_d", Some(65535)))
        );
        assert_eq!(parse_authority("[::1]:8931"), Some(("[::1]", Some(8931))));
        for bad in [
            "",
            "127.0.0.1:80@evil.example",
            "user@localhost",
            "localhost:",
            "localhost:http",
            "localhost:65536",
            "localhost:123456",
            "localhost/mcp",
            "localhost:80/",
            "local host",
            "::1",
            "[::1",
            "[::1]x",
            "[::1]:",
            "[evil.example]",
            "localhost:80:81",
            "localhost?x",
            "localhost#x",
            "[::1]@evil",
        ] {
            assert_eq!(parse_authority(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_origin_is_scheme_host_port_and_nothing_else() {
        assert_eq!(
            parse_origin("http://localhost:3000"),
            Some(("http", "localhost", Some(3000)))
        );
        assert_eq!(
            parse_origin("https://[::1]"),
            Some(("https", "[::1]", None))
        );
        assert_eq!(
            parse_origin("vscode-webview://abc"),
            Some(("vscode-webview", "abc", None))
        );
        for bad in [
            "null",
            "",
            "localhost",
            "http://",
            "http://localhost/",
            "http://localhost:3000/x",
            "http://user@localhost",
            "http://127.0.0.1:80@evil.example",
            "1http://localhost",
            "http:/localhost",
        ] {
            assert_eq!(parse_origin(bad), None, "{bad:?}");
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn status(result: Result<(), Box<Response>>) -> u16 {
        result.map_or_else(|r| r.status().as_u16(), |()| 200)
    }

    #[test]
    fn host_and_origin_checks_give_400_for_malformed_and_403_for_foreign() {
        let config = HttpConfig {
            allowed_hosts: vec!["mcp.example.com".into()],
            allowed_origins: vec!["https://app.example.com".into()],
            ..HttpConfig::default()
        };
        let uri = axum::http::Uri::from_static("/mcp");
        let check =
            |pairs: &[(&'static str, &str)]| status(check_origin(&headers(pairs), &uri, &config));
        assert_eq!(check(&[("host", "localhost:8931")]), 200);
        assert_eq!(check(&[("host", "MCP.example.com:443")]), 200);
        assert_eq!(check(&[]), 400);
        assert_eq!(
            check(&[("host", "localhost"), ("host", "evil.example")]),
            400
        );
        assert_eq!(check(&[("host", "127.0.0.1:80@evil.example")]), 400);
        assert_eq!(check(&[("host", "evil.example")]), 403);
        let with_origin = |origin: &str| check(&[("host", "localhost"), ("origin", origin)]);
        assert_eq!(with_origin("http://localhost:5173"), 200);
        assert_eq!(with_origin("https://app.example.com"), 200);
        assert_eq!(with_origin("null"), 403);
        assert_eq!(with_origin("http://localhost.evil.com"), 403);
        assert_eq!(with_origin("http://localhost@evil.com"), 403);
        assert_eq!(with_origin("ftp://localhost"), 403);
        assert_eq!(
            check(&[
                ("host", "localhost"),
                ("origin", "http://localhost"),
                ("origin", "http://evil")
            ]),
            403
        );
        // An absolute-form request target names a host too.
        let absolute = axum::http::Uri::from_static("http://evil.example/mcp");
        assert_eq!(
            status(check_origin(
                &headers(&[("host", "localhost")]),
                &absolute,
                &config
            )),
            403
        );
    }

    #[test]
    fn accept_lists_are_read_with_wildcards_and_q_zero() {
        let of = |v: &str| {
            let a = accepts(&headers(&[("accept", v)]));
            (a.json, a.sse)
        };
        assert_eq!(of("application/json, text/event-stream"), (true, true));
        assert_eq!(
            of("text/event-stream;q=0.9, Application/JSON"),
            (true, true)
        );
        assert_eq!(of("*/*"), (true, true));
        assert_eq!(of("application/*, text/*"), (true, true));
        assert_eq!(of("application/json"), (true, false));
        assert_eq!(of("text/event-stream"), (false, true));
        assert_eq!(
            of("application/json, text/event-stream; q=0"),
            (true, false)
        );
        assert_eq!(of("text/html"), (false, false));
        let two = accepts(&headers(&[
            ("accept", "application/json"),
            ("accept", "text/event-stream"),
        ]));
        assert!(two.json && two.sse);
        assert!(!accepts(&HeaderMap::new()).present);
    }

    #[test]
    fn a_json_body_is_application_json_with_any_parameters() {
        let ok = |v: &str| is_json_body(&headers(&[("content-type", v)]));
        assert!(ok("application/json"));
        assert!(ok("Application/JSON; charset=utf-8"));
        assert!(ok(" application/json ;charset=UTF-8"));
        assert!(!ok("text/plain"));
        assert!(!ok("application/json-seq"));
        assert!(!ok("application/x-www-form-urlencoded"));
        assert!(!is_json_body(&HeaderMap::new()));
        assert!(!is_json_body(&headers(&[
            ("content-type", "application/json"),
            ("content-type", "text/plain"),
        ])));
    }
}
