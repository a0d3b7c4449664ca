//! The streamable HTTP downstream (2025-03-26 … 2025-11-25 era).
//!
//! `POST` carries one message: `initialize` opens a session (`Mcp-Session-Id`); a request is
//! answered with JSON, or with an SSE stream when server→client messages (progress, logging,
//! sampling) come before the answer; notifications and responses get 202. `GET` opens the
//! session's stream for messages not tied to a request (`list_changed`); `DELETE` ends the
//! session. `Host` and `Origin` are checked against DNS rebinding: only localhost names and
//! what the policy allows get through.
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
pub use listen::{serve, HEADER_READ_TIMEOUT};

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;
use tower::ServiceExt;

use crate::context::{Caller, McpRequest, RunToEnd, Session};
use crate::error::Error;
use crate::gateway::Gateway;
use crate::jsonrpc::{ErrorObject, Id, Kind, Message, INVALID_REQUEST};
use crate::mcp::modern;
use crate::policy::{Downstream, DEFAULT_MAX_MESSAGE_BYTES};
use crate::stack::McpService;

const SESSION_HEADER: &str = "mcp-session-id";

/// Settings of the HTTP downstream.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Origins accepted besides localhost ones.
    pub allowed_origins: Vec<String>,
    /// Host names accepted besides localhost ones.
    pub allowed_hosts: Vec<String>,
    /// Largest accepted body.
    pub max_message_bytes: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

impl From<&Downstream> for HttpConfig {
    fn from(d: &Downstream) -> Self {
        Self {
            allowed_origins: d.allowed_origins.clone(),
            allowed_hosts: d.allowed_hosts.clone(),
            max_message_bytes: d.max_message_bytes,
        }
    }
}

struct Entry {
    session: Arc<Session>,
    stream: StreamSlot,
}

struct AppState {
    service: McpService,
    gateway: Gateway,
    config: HttpConfig,
    sessions: Mutex<HashMap<String, Entry>>,
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
        sessions: Mutex::new(HashMap::new()),
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

fn is_local_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']')
            .next()
            .map(|h| format!("[{h}]"))
            .unwrap_or_default()
    } else {
        host.split(':').next().unwrap_or_default().to_owned()
    };
    matches!(name.as_str(), "localhost" | "127.0.0.1" | "[::1]")
}

/// DNS-rebinding protection: a foreign `Host` or `Origin` gets 403.
fn check_origin(headers: &HeaderMap, config: &HttpConfig) -> Result<(), Box<Response>> {
    let forbidden = |what: &str, value: &str| {
        plain_error(
            StatusCode::FORBIDDEN,
            &format!(
                "{what} {value:?} is not allowed (downstream.allowed_{}s)",
                what.to_lowercase()
            ),
            "mcp_budget.http.forbidden_origin",
        )
    };
    if let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) {
        let bare = host.split(':').next().unwrap_or_default();
        if !is_local_host(host) && !config.allowed_hosts.iter().any(|h| h == host || h == bare) {
            return Err(Box::new(forbidden("Host", host)));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .unwrap_or("");
        if !is_local_host(host) && !config.allowed_origins.iter().any(|o| o == origin) {
            return Err(Box::new(forbidden("Origin", origin)));
        }
    }
    Ok(())
}

type StreamSlot = Arc<Mutex<Option<mpsc::UnboundedSender<Message>>>>;

fn session_of(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<(Arc<Session>, StreamSlot), Box<Response>> {
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return Err(Box::new(plain_error(
            StatusCode::BAD_REQUEST,
            "missing Mcp-Session-Id header: send initialize first",
            "mcp_budget.session.missing",
        )));
    };
    let sessions = lock(&state.sessions);
    match sessions.get(id) {
        Some(entry) => Ok((entry.session.clone(), entry.stream.clone())),
        None => Err(Box::new(plain_error(
            StatusCode::NOT_FOUND,
            "unknown or expired session: initialize again",
            "mcp_budget.session.unknown",
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

async fn handle_post(
    State(state): State<Arc<AppState>>,
    request: axum::extract::Request,
) -> Response {
    // The request taken apart rather than a `HeaderMap` extractor, which clones the headers.
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    if let Err(resp) = check_origin(&headers, &state.config) {
        return *resp;
    }
    let limit = state.config.max_message_bytes;
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        let err = Error::TooLarge {
            size: limit + 1,
            limit,
        };
        return json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            Id::Null,
            err.to_error_object(),
        );
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
    let accepts_sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));

    // A modern request is checked first: a 2026-07-28 `initialize` is a removed method (404),
    // not a new 2025 session.
    let modern = match modern_session(&message, &headers) {
        Some(Err(resp)) => return *resp,
        other => other.and_then(Result::ok),
    };
    if modern.is_none() && message.method() == Some("initialize") && message.kind() == Kind::Request
    {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (notify_tx, notify_rx) = mpsc::unbounded_channel();
        let session = Arc::new(Session::new(id.clone(), notify_tx));
        let stream = Arc::new(Mutex::new(None));
        tokio::spawn(forward_session(notify_rx, stream.clone()));
        lock(&state.sessions).insert(
            id.clone(),
            Entry {
                session: session.clone(),
                stream,
            },
        );
        let request = McpRequest {
            message,
            caller: Caller::new(session),
        };
        return match state.service.clone().oneshot(request).await {
            Ok(Some(reply)) => json_response(&reply, Some(&id)),
            _ => StatusCode::ACCEPTED.into_response(),
        };
    }

    if modern.is_some() && message.method() == Some("tools/call") {
        if let Err(err) = check_param_headers(&state.gateway, &message, &headers) {
            let id = message.id.clone().unwrap_or(Id::Null);
            return *modern_error(id, err);
        }
    }
    let is_modern = modern.is_some();
    let session = match modern {
        Some(session) => session,
        None => match session_of(&state, &headers) {
            Ok((session, _)) => session,
            Err(resp) => return *resp,
        },
    };
    if message.kind() != Kind::Request {
        let request = McpRequest {
            message,
            caller: Caller::new(session),
        };
        let _ = state.service.clone().oneshot(request).await;
        return StatusCode::ACCEPTED.into_response();
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
    let (outbound, mut out_rx) = mpsc::unbounded_channel();
    let request = McpRequest {
        message,
        caller: Caller { session, outbound },
    };
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
    let (sse_tx, sse_rx) = mpsc::unbounded_channel::<Bytes>();
    let _ = sse_tx.send(sse_event(&first));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                msg = out_rx.recv() => match msg {
                    Some(msg) => { let _ = sse_tx.send(sse_event(&msg)); }
                    None => {
                        if let Ok(Some(reply)) = call.await { let _ = sse_tx.send(sse_event(&reply)); }
                        cancel_on_close.disarm();
                        return;
                    }
                },
                reply = &mut call => {
                    // Flush what came just before the answer, then the answer, then close.
                    while let Ok(msg) = out_rx.try_recv() { let _ = sse_tx.send(sse_event(&msg)); }
                    if let Ok(Some(reply)) = reply { let _ = sse_tx.send(sse_event(&reply)); }
                    cancel_on_close.disarm();
                    return;
                }
                // The client closed the stream: the call goes on (2025 era: disconnecting is not
                // cancelling) or is cancelled (2026-07-28), and messages for it go nowhere.
                () = sse_tx.closed() => return,
            }
        }
    });
    sse_response(UnboundedReceiverStream::new(sse_rx), None)
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

/// Moves session-wide messages to the open GET stream, if any.
async fn forward_session(mut notify: mpsc::UnboundedReceiver<Message>, stream: StreamSlot) {
    while let Some(msg) = notify.recv().await {
        let mut current = lock(&stream);
        if let Some(tx) = current.as_ref() {
            if tx.send(msg).is_err() {
                *current = None;
            }
        }
    }
}

async fn handle_get(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(resp) = check_origin(&headers, &state.config) {
        return *resp;
    }
    if let Some(resp) = modern_non_post(&headers) {
        return resp;
    }
    let accepts_sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if !accepts_sse {
        return plain_error(
            StatusCode::NOT_ACCEPTABLE,
            "GET opens an SSE stream: send Accept: text/event-stream",
            "mcp_budget.http.not_acceptable",
        );
    }
    let (_, stream) = match session_of(&state, &headers) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    let (tx, rx) = mpsc::unbounded_channel();
    *lock(&stream) = Some(tx);
    let events = UnboundedReceiverStream::new(rx).map(|m| sse_event(&m));
    // A comment line first, so clients see the stream open at once.
    let events =
        futures::stream::once(async { Bytes::from_static(b": stream open\n\n") }).chain(events);
    sse_response(events, None)
}

async fn handle_delete(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(resp) = check_origin(&headers, &state.config) {
        return *resp;
    }
    if let Some(resp) = modern_non_post(&headers) {
        return resp;
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return plain_error(
            StatusCode::BAD_REQUEST,
            "missing Mcp-Session-Id header",
            "mcp_budget.session.missing",
        );
    };
    let removed = lock(&state.sessions).remove(id);
    match removed {
        Some(_) => {
            state.gateway.remove_session(id);
            StatusCode::OK.into_response()
        }
        None => plain_error(
            StatusCode::NOT_FOUND,
            "unknown or expired session",
            "mcp_budget.session.unknown",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_hosts_pass_and_foreign_ones_do_not() {
        for h in [
            "localhost",
            "localhost:8931",
            "127.0.0.1:1",
            "[::1]:80",
            "[::1]",
        ] {
            assert!(is_local_host(h), "{h}");
        }
        for h in ["evil.example.com", "localhost.evil.com:80", "127.0.0.2"] {
            assert!(!is_local_host(h), "{h}");
        }
    }
}
