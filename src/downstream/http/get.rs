//! `GET` (the session's stream of messages not tied to a request, such as `list_changed`) and
//! `DELETE` (the end of a session).

use std::num::NonZeroUsize;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::checks::{accepts, check_origin, modern_non_post};
use super::listen::Peer;
use super::reply::{Overflow, plain_error, sse_event, sse_response};
use super::sessions::{GetStream, Link};
use super::{AppState, SESSION_HEADER};
use crate::context::{ClientGone, Deliver, Outbound, Session};
use crate::error::kind;
use crate::jsonrpc::Message;
use crate::lock::lock;

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

pub(super) async fn handle_get(
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
    let principal = match super::auth::principal(&state.gate, headers, &parts.uri) {
        Ok(p) => p,
        Err(resp) => return *resp,
    };
    let (_, in_use) = match state.session_of(
        headers,
        &principal,
        super::post::client_ip(&state, headers, &parts.extensions),
    ) {
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

pub(super) async fn handle_delete(
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
    let principal = match super::auth::principal(&state.gate, &headers, &uri) {
        Ok(p) => p,
        Err(resp) => return *resp,
    };
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return plain_error(
            StatusCode::BAD_REQUEST,
            "missing Mcp-Session-Id header",
            kind::SESSION_MISSING,
        );
    };
    match state.end_session(id, &principal) {
        Ok(Some(ended)) => {
            if let (Some((sid, exp)), Some(store)) = (ended.sealed, &state.store) {
                // Every replica ends it now; one that is not listening reads it when it
                // subscribes again; one the store does not take is sent again until it does.
                if let Err(reason) = store.revoke(&sid, exp).await {
                    tracing::warn!(session = %sid, reason, "Session ended on this replica only for now: the shared state store did not take the revocation (sent again until it does)");
                }
            }
            StatusCode::OK.into_response()
        }
        Ok(None) => plain_error(
            StatusCode::NOT_FOUND,
            "unknown or expired session",
            kind::SESSION_UNKNOWN,
        ),
        Err(resp) => *resp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
