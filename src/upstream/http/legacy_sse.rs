//! The 2024-11-05 HTTP+SSE transport, for servers that never moved to streamable HTTP.
//!
//! The client GETs the policy's URL and holds the event stream; its first event, `endpoint`,
//! names the URL (usually relative, with a session id in its query) that every message is
//! `POST`ed to. POSTs are answered `202 Accepted`: responses, notifications and server→client
//! requests all arrive on the stream, as `message` events. When the stream ends the session is
//! gone: [`HttpLink::serve`] reports the connection lost, and the supervisor reconnects (a new
//! stream, a new `initialize`).
//!
//! Chosen by `transport = "sse"`, or found by the spec's backwards-compatibility procedure: an
//! `initialize` POST refused with a 4xx that is no JSON-RPC answer (a 404 or 405 page) means
//! the URL is an HTTP+SSE endpoint.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{Method, StatusCode, Uri};
use tokio_util::sync::CancellationToken;

use super::{HttpLink, SendError, is_sse};
use crate::jsonrpc::Message;
use crate::lock::lock;
use crate::net::client::Body;
use crate::upstream::Upstream;
use crate::upstream::sse::SseDecoder;

/// How long the server may take to name its endpoint after the stream opened.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(10);

/// One open HTTP+SSE session.
#[derive(Debug, Clone)]
pub(super) struct SseSession {
    /// Where messages are sent (path and query on the server of the URL).
    endpoint: Uri,
    /// Cancelled when the stream ended (or the session was dropped).
    ended: CancellationToken,
}

impl HttpLink {
    /// Whether this link speaks HTTP+SSE.
    pub(super) fn speaks_sse(&self) -> bool {
        self.sse.load(Ordering::Relaxed)
    }

    /// Whether the answer to a streamable POST of `msg` says the URL may be an HTTP+SSE
    /// endpoint (the spec's backwards-compatibility test): `initialize` refused with 400, 404
    /// or 405 and a body that is no JSON-RPC message (401, 403 and the like are about
    /// credentials, not the transport). Switches the link to HTTP+SSE, and says so once.
    pub(super) fn falls_back_to_sse(
        &self,
        upstream: &Upstream,
        msg: &Message,
        status: StatusCode,
        body: &[u8],
    ) -> bool {
        if !refuses_streamable(msg.method(), status, body) {
            return false;
        }
        self.sse.store(true, Ordering::Relaxed);
        if !self.sse_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(upstream = upstream.name(), %status, "Upstream refused streamable HTTP; speaking the 2024-11-05 HTTP+SSE transport (set transport = \"sse\" to skip the attempt)");
        }
        true
    }

    /// Sends `msg` over HTTP+SSE after the streamable POST got `status`; when the URL has no
    /// event stream either, the link goes back to streamable HTTP and the error says both.
    pub(super) async fn try_sse(
        &self,
        upstream: &Upstream,
        msg: &Message,
        status: StatusCode,
    ) -> Result<(), SendError> {
        match self.send_sse(upstream, msg).await {
            Err(SendError::Other(err)) => {
                self.sse.store(false, Ordering::Relaxed);
                Err(SendError::Other(format!(
                    "HTTP {status} to the initialize POST, and no HTTP+SSE transport either ({err})"
                )))
            }
            outcome => outcome,
        }
    }

    /// POSTs `msg` to the session's endpoint (opening the session first when there is none);
    /// the answer comes on the stream.
    pub(super) async fn send_sse(
        &self,
        upstream: &Upstream,
        msg: &Message,
    ) -> Result<(), SendError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| SendError::Other(e.clone()))?;
        let session = self.sse_session(upstream).await?;
        let mut headers = self.headers.clone();
        headers.append(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let mut resp = client
            .send_to(
                &session.endpoint,
                Method::POST,
                headers,
                Bytes::from(msg.to_bytes()),
            )
            .await
            .map_err(SendError::Unreachable)?;
        let status = resp.status;
        let bytes = resp.body.bytes().await.unwrap_or_default();
        if status.is_success() {
            return Ok(());
        }
        if status == StatusCode::NOT_FOUND {
            // The server forgot the session (restarted behind the same stream?): a new one.
            session.ended.cancel();
        }
        Err(SendError::Other(format!(
            "HTTP+SSE endpoint answered HTTP {status}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        )))
    }

    /// Resolves when the session's stream has ended (at once when there is none).
    pub(super) async fn sse_ended(&self) {
        let session = lock(&self.sse_session).clone();
        if let Some(session) = session {
            session.ended.cancelled().await;
        }
    }

    /// Drops the session: its stream closes, the next message opens a new one.
    pub(crate) fn end_sse(&self) {
        if let Some(session) = lock(&self.sse_session).take() {
            session.ended.cancel();
        }
    }

    /// The open session, or a new one: GET the stream, wait for its `endpoint` event.
    async fn sse_session(&self, upstream: &Upstream) -> Result<SseSession, SendError> {
        let _opening = self.sse_open.lock().await;
        let open = lock(&self.sse_session)
            .clone()
            .filter(|s| !s.ended.is_cancelled());
        if let Some(session) = open {
            return Ok(session);
        }
        let client = self
            .client
            .as_ref()
            .map_err(|e| SendError::Other(e.clone()))?;
        let mut headers = self.headers.clone();
        headers.append(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let resp = client
            .send(Method::GET, headers, Bytes::new())
            .await
            .map_err(SendError::Unreachable)?;
        if !resp.status.is_success() || !is_sse(&resp.headers) {
            return Err(SendError::Other(format!(
                "HTTP+SSE: GET {} answered HTTP {} without an event stream",
                crate::redact::Url(&self.url),
                resp.status
            )));
        }
        let ended = CancellationToken::new();
        let (named, endpoint) = tokio::sync::oneshot::channel();
        tokio::spawn(read_stream(
            upstream.clone(),
            resp.body,
            named,
            ended.clone(),
        ));
        let Ok(Ok(endpoint)) = tokio::time::timeout(ENDPOINT_TIMEOUT, endpoint).await else {
            ended.cancel();
            return Err(SendError::Other(format!(
                "HTTP+SSE: the stream of {} named no endpoint (no `endpoint` event within {}s)",
                crate::redact::Url(&self.url),
                ENDPOINT_TIMEOUT.as_secs()
            )));
        };
        let endpoint = resolve_endpoint(&self.url, &endpoint).map_err(|e| {
            ended.cancel();
            SendError::Other(format!("HTTP+SSE: {e}"))
        })?;
        tracing::debug!(
            upstream = upstream.name(),
            endpoint = %crate::redact::Url(&endpoint.to_string()),
            "HTTP+SSE session open"
        );
        let session = SseSession { endpoint, ended };
        *lock(&self.sse_session) = Some(session.clone());
        Ok(session)
    }
}

/// Reads the session's stream until it ends (or the session is dropped): the first `endpoint`
/// event goes to `named`, every message to `upstream.incoming`.
async fn read_stream(
    upstream: Upstream,
    mut body: Body,
    named: tokio::sync::oneshot::Sender<String>,
    ended: CancellationToken,
) {
    let mut named = Some(named);
    let mut decoder = SseDecoder::default();
    let stop = upstream.shutdown_token();
    loop {
        let chunk = tokio::select! {
            chunk = body.chunk() => chunk,
            () = ended.cancelled() => break,
            () = stop.cancelled() => break,
        };
        let Some(Ok(chunk)) = chunk else { break };
        for event in decoder.feed_events(&chunk) {
            match event.name.as_deref() {
                Some("endpoint") => {
                    if let Some(named) = named.take() {
                        let _ = named.send(String::from_utf8_lossy(&event.data).trim().to_owned());
                    }
                }
                None => HttpLink::deliver(&upstream, &event.data, None),
                Some(other) => {
                    tracing::debug!(
                        upstream = upstream.name(),
                        event = other,
                        "HTTP+SSE event ignored"
                    );
                }
            }
        }
    }
    tracing::debug!(upstream = upstream.name(), "HTTP+SSE stream closed");
    ended.cancel();
}

/// Whether `status` and `body` answering a POST of `method` refuse streamable HTTP itself (see
/// [`HttpLink::falls_back_to_sse`]).
fn refuses_streamable(method: Option<&str>, status: StatusCode, body: &[u8]) -> bool {
    method == Some(crate::mcp::method::Method::Initialize.as_str())
        && matches!(
            status,
            StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
        )
        && Message::parse(body).is_err()
}

/// The request target (path and query) that the `endpoint` event names, resolved against the
/// stream's URL `base`: an absolute path, a path relative to the URL's directory, or a full
/// URL, which must be on the same server (the policy's headers, credentials among them, go
/// with every POST).
fn resolve_endpoint(base: &str, endpoint: &str) -> Result<Uri, String> {
    // Both shown redacted: the base may hold credentials, the endpoint a session token.
    let (shown_base, shown) = (crate::redact::Url(base), crate::redact::Url(endpoint));
    let base: Uri = base
        .parse()
        .map_err(|e| format!("invalid URL \"{shown_base}\": {e}"))?;
    let target = if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
        let uri: Uri = endpoint
            .parse()
            .map_err(|e| format!("endpoint \"{shown}\" is not a URL: {e}"))?;
        if uri.scheme() != base.scheme() || uri.authority() != base.authority() {
            return Err(format!(
                "endpoint \"{shown}\" is on another server than {shown_base}; not followed"
            ));
        }
        uri.path_and_query()
            .map_or("/", http::uri::PathAndQuery::as_str)
            .to_owned()
    } else if endpoint.starts_with('/') {
        endpoint.to_owned()
    } else {
        let dir = base.path().rsplit_once('/').map_or("", |(dir, _)| dir);
        format!("{dir}/{endpoint}")
    };
    target
        .parse()
        .map_err(|e| format!("endpoint \"{shown}\" is not a URL path: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refused_initialize_page_means_http_sse() {
        let page = b"Method Not Allowed";
        let init = Some("initialize");
        assert!(refuses_streamable(
            init,
            StatusCode::METHOD_NOT_ALLOWED,
            page
        ));
        assert!(refuses_streamable(
            init,
            StatusCode::NOT_FOUND,
            b"<html>404</html>"
        ));
        // Credentials, not the transport.
        assert!(!refuses_streamable(init, StatusCode::UNAUTHORIZED, page));
        // A JSON-RPC answer is the streamable server speaking.
        let answer = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"bad"}}"#;
        assert!(!refuses_streamable(init, StatusCode::BAD_REQUEST, answer));
        assert!(!refuses_streamable(
            Some("tools/list"),
            StatusCode::NOT_FOUND,
            page
        ));
    }

    #[test]
    fn endpoints_resolve_against_the_stream_url() {
        let base = "http://127.0.0.1:8000/mcp/sse";
        let at = |e: &str| resolve_endpoint(base, e).map(|u| u.to_string());
        assert_eq!(
            at("/messages/?session_id=ab").unwrap(),
            "/messages/?session_id=ab"
        );
        assert_eq!(at("messages?s=1").unwrap(), "/mcp/messages?s=1");
        assert_eq!(at("http://127.0.0.1:8000/m?s=2").unwrap(), "/m?s=2");
        assert!(
            at("http://evil.example/m")
                .unwrap_err()
                .contains("another server")
        );
        assert!(at("https://127.0.0.1:8000/m").is_err());
    }
}
