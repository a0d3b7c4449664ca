//! Streamable HTTP upstreams, of both eras.
//!
//! 2025-03-26 … 2025-11-25: `initialize` opens a session (`Mcp-Session-Id`); every message is a POST whose answer is
//! JSON, an SSE stream (server→client requests and progress on it are routed to the caller of
//! that POST), or 202 for notifications and responses. A 404 on a session means it expired:
//! the gateway initializes again, transparently, and resends the message once. Headers from
//! the policy (e.g. `Authorization`) go on every request; a client's own credentials never do.
//! The session's GET stream carries what the server says outside any request.
//!
//! 2026-07-28: no session; each POST carries the mirrored headers (`Mcp-Method`, `Mcp-Name`,
//! the `Mcp-Param-*` a tool marks), and closing its response stream cancels the request.
//!
//! 2024-11-05 HTTP+SSE (`transport = "sse"`, or found when `initialize` is refused): see
//! `legacy_sse`. `https://` URLs go through rustls (feature `tls`, on in the binary).

mod legacy_sse;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};

use super::sse::SseDecoder;
use super::{PROTOCOL_VERSION, Status, Upstream, handshake};
use crate::context::Outbound;
use crate::error::{Error, kind};
use crate::jsonrpc::{DecodeError, Id, Kind, Message};
use crate::lock::lock;
use crate::net::client::{Client, Failure};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// Pause before reopening a GET stream the server closed at once; twice that is how long a
/// `ping` may take before the server counts as gone.
const RETRY: Duration = Duration::from_secs(2);
/// Why an upstream whose server went away is down.
const LOST: &str = "the connection was lost";

/// One streamable HTTP session with an upstream.
#[derive(Debug)]
pub(crate) struct HttpLink {
    /// The endpoint, for errors.
    url: String,
    /// The client for `url`, or why there is none (an invalid or unsupported URL, a TLS file
    /// that cannot be used).
    client: Result<Client, String>,
    headers: HeaderMap,
    /// `headers` plus the fixed headers of a POST, built once.
    post_headers: HeaderMap,
    session: Mutex<Option<String>>,
    /// `session` as a header value, so that each POST clones a refcount, not a string.
    session_header: Mutex<Option<HeaderValue>>,
    protocol: Mutex<String>,
    /// `protocol` as a header value.
    protocol_header: Mutex<Option<HeaderValue>>,
    reinit: tokio::sync::Mutex<()>,
    /// A message could not reach the server at all (refused, reset) while it was ready: the
    /// connection loop checks whether the server is gone.
    suspect: tokio::sync::Notify,
    /// Speaks the 2024-11-05 HTTP+SSE transport (policy, or found by the fallback).
    sse: AtomicBool,
    /// The fallback to HTTP+SSE was logged.
    sse_logged: AtomicBool,
    /// The open HTTP+SSE session, if any.
    sse_session: Mutex<Option<legacy_sse::SseSession>>,
    /// Held while an HTTP+SSE session is opened, so that only one is.
    sse_open: tokio::sync::Mutex<()>,
}

impl HttpLink {
    /// The link to the upstream at `url`, with the policy's `headers` on every request and
    /// its TLS files.
    pub(crate) fn new(
        url: &str,
        headers: &BTreeMap<String, String>,
        options: &crate::policy::HttpOptions,
    ) -> Arc<Self> {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            if let (Ok(k), Ok(v)) = (
                HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(v),
            ) {
                map.insert(k, v);
            }
        }
        // Appended, after the policy's own.
        let mut post_headers = map.clone();
        post_headers.append(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        post_headers.append(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Arc::new(Self {
            url: url.to_owned(),
            client: Client::new(url, options),
            headers: map,
            post_headers,
            session: Mutex::new(None),
            session_header: Mutex::new(None),
            protocol: Mutex::new(PROTOCOL_VERSION.to_owned()),
            protocol_header: Mutex::new(HeaderValue::from_str(PROTOCOL_VERSION).ok()),
            reinit: tokio::sync::Mutex::new(()),
            suspect: tokio::sync::Notify::new(),
            sse: AtomicBool::new(options.transport == crate::policy::HttpTransport::Sse),
            sse_logged: AtomicBool::new(false),
            sse_session: Mutex::new(None),
            sse_open: tokio::sync::Mutex::new(()),
        })
    }

    /// Holds a ready server's GET stream (a 2025-era server's: a modern one has none, the
    /// supervisor keeps its `subscriptions/listen` open) until the server is found gone, and
    /// returns why: its stream cannot be reopened, or a message could not reach it and a
    /// `ping` cannot either. Pending at shutdown.
    pub(crate) async fn serve(&self, upstream: &Upstream) -> String {
        let listen = async {
            if self.speaks_sse() {
                // The session lives as long as its stream.
                return self.sse_ended().await;
            }
            if !upstream.is_modern() && self.listen(upstream).await {
                return;
            }
            std::future::pending::<()>().await;
        };
        tokio::pin!(listen);
        loop {
            tokio::select! {
                () = &mut listen => return LOST.to_owned(),
                () = self.suspect.notified() => {
                    if self.gone(upstream).await {
                        return LOST.to_owned();
                    }
                }
            }
        }
    }

    /// Whether the server is unreachable: a `ping` gets no answer at all (any answer, even an
    /// error, means it is there).
    async fn gone(&self, upstream: &Upstream) -> bool {
        let params = serde_json::json!({});
        let ping = upstream.handshake_request(crate::mcp::method::Method::Ping.as_str(), &params);
        match tokio::time::timeout(RETRY * 2, ping).await {
            Ok(Ok(reply)) => reply.error.as_ref().is_some_and(|e| {
                matches!(
                    e.kind().as_deref(),
                    Some(kind::UPSTREAM_UNAVAILABLE | kind::UPSTREAM_UNREACHABLE)
                )
            }),
            Ok(Err(_)) | Err(_) => true,
        }
    }

    /// Sends `msg` in the background; what comes back is fed to `upstream.incoming`.
    pub(crate) fn post(
        self: &Arc<Self>,
        upstream: Upstream,
        msg: Message,
        outbound: Option<Outbound>,
    ) {
        tokio::spawn(self.post_future(upstream, msg, outbound));
    }

    /// What [`HttpLink::post`] runs: sends `msg`; what comes back is fed to `upstream.incoming`.
    pub(crate) fn post_future(
        self: &Arc<Self>,
        upstream: Upstream,
        msg: Message,
        outbound: Option<Outbound>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
        use tracing::Instrument as _;
        let link = self.clone();
        // The upstream request's client span, child of the client request's (its
        // `traceparent` goes in the POST's headers); no span while none is exported.
        let span = if crate::telemetry::tracing_on() && msg.kind() == Kind::Request {
            crate::telemetry::span::upstream(upstream.name(), &msg)
        } else {
            tracing::Span::none()
        };
        async move {
            let request_id = match (&msg.id, msg.kind()) {
                (Some(Id::Number(id)), Kind::Request) => Some(*id),
                _ => None,
            };
            let mut retried = false;
            loop {
                match link.send(&upstream, &msg, outbound.as_ref()).await {
                    Ok(()) => return,
                    Err(SendError::Expired)
                        if !retried
                            && msg.method()
                                != Some(crate::mcp::method::Method::Initialize.as_str()) =>
                    {
                        retried = true;
                        if let Err(err) = link.reinitialize(&upstream).await {
                            if let Some(id) = request_id {
                                upstream.fail_request(id, &err);
                            }
                            return;
                        }
                    }
                    Err(err) => {
                        if let (SendError::Unreachable(_), Status::Ready) =
                            (&err, upstream.status())
                        {
                            link.suspect.notify_one();
                        }
                        if let Some(id) = request_id {
                            upstream.fail_request_with(id, &link.error(&upstream, err));
                        }
                        return;
                    }
                }
            }
        }
        .instrument(span)
    }

    /// Holds the session's GET stream until shutdown: what the server says outside any
    /// request (`list_changed`, `resources/updated`, logging, `roots/list` and other
    /// server→client requests) travels only there, and is lost when nobody listens.
    /// Reopened after it ends (the session may have been renewed meanwhile); a server without
    /// one (405) is left alone.
    async fn listen(&self, upstream: &Upstream) -> bool {
        let stop = upstream.shutdown_token();
        loop {
            let opened = tokio::time::Instant::now();
            let outcome = tokio::select! {
                outcome = self.listen_once(upstream) => outcome,
                () = stop.cancelled() => return false,
            };
            match outcome {
                Ok(()) => {}
                Err(Some(status)) if status == StatusCode::METHOD_NOT_ALLOWED => {
                    tracing::debug!(upstream = upstream.name(), "Upstream has no GET stream");
                    // Nothing to hold; `serve` still notices a server that goes away.
                    stop.cancelled().await;
                    return false;
                }
                Err(Some(status)) => {
                    tracing::debug!(upstream = upstream.name(), %status, "GET stream refused");
                }
                Err(None) => {
                    // Not even a connection: the server is gone.
                    return true;
                }
            }
            // Do not spin on a server that closes the stream at once.
            let pause = if opened.elapsed() < RETRY {
                RETRY
            } else {
                Duration::ZERO
            };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => return false,
            }
        }
    }

    /// One GET stream: `Err(Some(status))` when refused, `Err(None)` when the server cannot
    /// be reached.
    async fn listen_once(&self, upstream: &Upstream) -> Result<(), Option<StatusCode>> {
        let client = self
            .client
            .as_ref()
            .map_err(|_| Some(StatusCode::SERVICE_UNAVAILABLE))?;
        let mut headers = self.headers.clone();
        headers.append(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(version) = lock(&self.protocol_header).clone() {
            headers.append(HeaderName::from_static(VERSION_HEADER), version);
        }
        if let Some(session) = lock(&self.session_header).clone() {
            headers.append(HeaderName::from_static(SESSION_HEADER), session);
        }
        let mut resp = client
            .send(Method::GET, headers, Bytes::new())
            .await
            .map_err(|_| None)?;
        if !resp.status.is_success() || !is_sse(&resp.headers) {
            return Err(Some(resp.status));
        }
        tracing::debug!(upstream = upstream.name(), "GET stream open");
        let mut decoder = SseDecoder::default();
        while let Some(chunk) = resp.body.chunk().await {
            let Ok(chunk) = chunk else { break };
            for data in decoder.feed(&chunk) {
                tracing::debug!(upstream = upstream.name(), "GET stream event");
                Self::deliver(upstream, &data, None);
            }
        }
        tracing::debug!(upstream = upstream.name(), "GET stream closed");
        Ok(())
    }

    /// The error a request that failed with `err` is answered with: a connection that could
    /// not be made is "unreachable" (with the URL and the reason), anything else "unavailable".
    fn error(&self, upstream: &Upstream, err: SendError) -> Error {
        match err {
            SendError::Unreachable(Failure::Connect(reason)) => Error::UpstreamUnreachable {
                upstream: upstream.name().to_owned(),
                url: crate::redact::url(&self.url),
                reason,
            },
            err => upstream.unavailable(&err.to_string()),
        }
    }

    async fn reinitialize(&self, upstream: &Upstream) -> Result<(), String> {
        let expired = lock(&self.session).clone();
        let _guard = self.reinit.lock().await;
        if *lock(&self.session) != expired {
            return Ok(()); // Someone else already opened a new session.
        }
        self.set_session(None);
        tracing::info!(
            upstream = upstream.name(),
            "Upstream session expired; initializing again"
        );
        let info = handshake(upstream).await.map_err(|e| e.to_string())?;
        upstream.set_info(info);
        Ok(())
    }

    /// Sets (or forgets) the session id sent with every request.
    pub(crate) fn set_session(&self, session: Option<&str>) {
        let mut current = lock(&self.session);
        if current.as_deref() != session {
            *current = session.map(str::to_owned);
            *lock(&self.session_header) = session.and_then(|s| HeaderValue::from_str(s).ok());
        }
    }

    /// Sets the protocol version sent with every request.
    pub(crate) fn set_protocol(&self, version: &str) {
        version.clone_into(&mut lock(&self.protocol));
        *lock(&self.protocol_header) = HeaderValue::from_str(version).ok();
    }

    /// The headers of the POST carrying `msg`: built once (policy headers, `Accept`,
    /// `Content-Type`) plus the session and version header values.
    fn post_headers(&self, msg: &Message) -> Result<HeaderMap, SendError> {
        let mut headers = self.post_headers.clone();
        trace_context(&mut headers);
        if lock(&self.session).is_some() {
            let session = lock(&self.session_header).clone().ok_or_else(|| {
                SendError::Other("request failed: the session id is not a valid header".into())
            })?;
            headers.append(HeaderName::from_static(SESSION_HEADER), session);
        }
        if msg.method() != Some(crate::mcp::method::Method::Initialize.as_str()) {
            let version = lock(&self.protocol_header).clone().ok_or_else(|| {
                SendError::Other(
                    "request failed: the protocol version is not a valid header".into(),
                )
            })?;
            headers.append(HeaderName::from_static(VERSION_HEADER), version);
        }
        Ok(headers)
    }

    /// The headers of the POST of a 2026-07-28 request: no session, the mirrored headers
    /// instead (method, target, and the arguments the tool marks for `Mcp-Param-*`).
    fn modern_headers(&self, msg: &Message, upstream: &Upstream) -> Result<HeaderMap, SendError> {
        let mut headers = self.post_headers.clone();
        trace_context(&mut headers);
        let mirrored = crate::mcp::bridge::http_headers(msg).unwrap_or_default();
        let mirrored = mirrored.into_iter().map(|(n, v)| (n.to_owned(), v));
        for (name, value) in mirrored.chain(upstream.param_headers(msg)) {
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(&value),
            ) else {
                return Err(SendError::Other(format!(
                    "request failed: {name} is not a valid header"
                )));
            };
            headers.append(name, value);
        }
        Ok(headers)
    }

    async fn send(
        &self,
        upstream: &Upstream,
        msg: &Message,
        outbound: Option<&Outbound>,
    ) -> Result<(), SendError> {
        if self.speaks_sse() {
            return self.send_sse(upstream, msg).await;
        }
        let client = self
            .client
            .as_ref()
            .map_err(|e| SendError::Other(e.clone()))?;
        let modern = crate::mcp::modern::request_meta(msg).is_some();
        let session = if modern {
            None
        } else {
            lock(&self.session).clone()
        };
        let headers = if modern {
            self.modern_headers(msg, upstream)?
        } else {
            self.post_headers(msg)?
        };
        let mut resp = client
            .send(Method::POST, headers, Bytes::from(msg.to_bytes()))
            .await
            .map_err(SendError::Unreachable)?;
        let status = resp.status;
        if status == StatusCode::NOT_FOUND && session.is_some() {
            return Err(SendError::Expired);
        }
        if status == StatusCode::BAD_REQUEST && session.is_some() {
            let bytes = resp.body.bytes().await.unwrap_or_default();
            return Self::bad_request(upstream, &bytes, outbound);
        }
        if modern && status.is_client_error() {
            let bytes = resp.body.bytes().await.unwrap_or_default();
            upstream.incoming(modern_refusal(msg, status, &bytes), outbound);
            return Ok(());
        }
        if let Some(sid) = resp
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            self.set_session(Some(sid));
        }
        if is_sse(&resp.headers) && status != StatusCode::ACCEPTED {
            let mut decoder = SseDecoder::default();
            while let Some(chunk) = resp.body.chunk().await {
                let chunk = chunk.map_err(|e| SendError::Other(format!("stream broke: {e}")))?;
                for data in decoder.feed(&chunk) {
                    Self::deliver(upstream, &data, outbound);
                }
            }
            return Ok(());
        }
        // Read to its end even when empty (202), so that the connection can carry the next one.
        let bytes = resp
            .body
            .bytes()
            .await
            .map_err(|e| SendError::Other(format!("reading the answer failed: {e}")))?;
        self.answered(upstream, msg, status, &bytes, outbound).await
    }

    /// A JSON answer read whole (or none, with 202) is delivered. A failed status without a
    /// JSON-RPC body is an error, or a retry over the older SSE transport for a server that
    /// only speaks that.
    async fn answered(
        &self,
        upstream: &Upstream,
        msg: &Message,
        status: StatusCode,
        bytes: &[u8],
        outbound: Option<&Outbound>,
    ) -> Result<(), SendError> {
        if status == StatusCode::ACCEPTED {
            return Ok(());
        }
        if !status.is_success() && Message::parse(bytes).is_err() {
            if self.falls_back_to_sse(upstream, msg, status, bytes) {
                return self.try_sse(upstream, msg, status).await;
            }
            return Err(SendError::Other(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            )));
        }
        if !bytes.trim_ascii().is_empty() {
            Self::deliver(upstream, bytes, outbound);
        }
        Ok(())
    }

    /// A 400 on a request of a session: an answer when it names one of our requests, else
    /// an expired session (the TypeScript SDK's example servers, server-everything among
    /// them, answer an unknown session with 400 "No valid session ID provided" instead of 404:
    /// after a server restart that is an expired session too).
    fn bad_request(
        upstream: &Upstream,
        bytes: &[u8],
        outbound: Option<&Outbound>,
    ) -> Result<(), SendError> {
        let reply = Message::parse(bytes).ok();
        if let Some(reply) = reply.filter(|r| matches!(r.id, Some(Id::Number(_)))) {
            upstream.incoming(reply, outbound);
            return Ok(());
        }
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(500)]);
        if text.to_ascii_lowercase().contains("session") {
            return Err(SendError::Expired);
        }
        Err(SendError::Other(format!(
            "HTTP {}: {text}",
            StatusCode::BAD_REQUEST
        )))
    }

    fn deliver(upstream: &Upstream, data: &[u8], outbound: Option<&Outbound>) {
        match Message::parse(data) {
            Ok(msg) => upstream.incoming(msg, outbound),
            Err(DecodeError::LoneSurrogate { at, message }) => {
                upstream.invalid_text(*message, at, outbound);
            }
            Err(err) => {
                tracing::warn!(upstream = upstream.name(), error = %err, "Unreadable message from upstream ignored");
            }
        }
    }
}

/// The answer to a modern request the server refused with a 4xx: its JSON-RPC error (400/404
/// bodies carry one), or one made from the status (a 2025-era server's error page), so that
/// the era probe falls back to `initialize` instead of waiting.
fn modern_refusal(msg: &Message, status: StatusCode, bytes: &[u8]) -> Message {
    let id = msg.reply_id();
    match Message::parse(bytes) {
        Ok(mut reply) if reply.error.is_some() => {
            reply.id = Some(id);
            reply
        }
        _ => {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]);
            Message::error(
                id,
                crate::error::Error::UpstreamRefused {
                    status: status.to_string(),
                    text: text.into_owned(),
                }
                .to_error_object(),
            )
        }
    }
}

fn is_sse(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

#[derive(Debug, thiserror::Error)]
enum SendError {
    #[error("the upstream session expired")]
    Expired,
    /// The message did not reach the server (connection refused or reset).
    #[error("{0}")]
    Unreachable(Failure),
    #[error("{0}")]
    Other(String),
}
/// The current span's W3C trace context, as `traceparent` / `tracestate` headers (while spans
/// are exported).
fn trace_context(headers: &mut HeaderMap) {
    use crate::telemetry::context::{TRACEPARENT, TRACESTATE, current_headers};
    if !crate::telemetry::tracing_on() {
        return;
    }
    if let Some((parent, state)) = current_headers() {
        if let Ok(v) = HeaderValue::from_str(&parent) {
            headers.insert(HeaderName::from_static(TRACEPARENT), v);
        }
        if let Some(v) = state.and_then(|s| HeaderValue::from_str(&s).ok()) {
            headers.insert(HeaderName::from_static(TRACESTATE), v);
        }
    }
}
