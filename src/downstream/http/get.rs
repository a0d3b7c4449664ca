//! `GET` (the session's stream of messages not tied to a request, such as `list_changed`) and
//! `DELETE` (the end of a session).

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
use super::reply::{plain_error, sse_event, sse_response};
use super::sessions::GetStream;
use super::{AppState, SESSION_HEADER};
use crate::error::kind;
use crate::lock::lock;

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
        super::auth::client_ip(&state, headers, &parts.extensions),
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
