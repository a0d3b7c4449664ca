//! What the HTTP downstream answers with: JSON bodies and their statuses, SSE framing, and
//! what happens when a client does not read its stream.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio_stream::StreamExt;

use super::SESSION_HEADER;
use crate::error::{Error, Http, kind};
use crate::jsonrpc::{DecodeError, ErrorObject, Id, Message};
use crate::mcp::modern;

pub(super) fn json_error(status: StatusCode, id: Id, err: ErrorObject) -> Response {
    let body = Message::error(id, err).to_bytes();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(super) fn plain_error(status: StatusCode, message: &str, kind: &'static str) -> Response {
    let refused = Http::Refused {
        kind,
        message: message.to_owned(),
    };
    json_error(status, Id::Null, refused.into_object())
}

/// The HTTP status of a modern JSON-RPC error code ([`modern::http_status`]).
pub(super) fn modern_status(code: i64) -> StatusCode {
    StatusCode::from_u16(modern::http_status(code)).unwrap_or(StatusCode::OK)
}

/// A modern JSON-RPC error as its HTTP response.
pub(super) fn modern_error(id: Id, err: ErrorObject) -> Box<Response> {
    Box::new(json_error(modern_status(err.code), id, err))
}

/// Gives `resp` the status of a modern error, and a `429` its `Retry-After` (whole seconds,
/// rounded up, from `error.data.retryAfterMs`).
fn set_modern_status(resp: &mut Response, err: &ErrorObject) {
    let status = modern_status(err.code);
    *resp.status_mut() = status;
    if status != StatusCode::TOO_MANY_REQUESTS {
        return;
    }
    let ms = err
        .data
        .as_ref()
        .and_then(|d| serde_json::from_str::<serde_json::Value>(d.get()).ok())
        .and_then(|d| d.get("retryAfterMs").and_then(serde_json::Value::as_u64));
    if let Some(ms) = ms {
        resp.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(ms.div_ceil(1000).max(1)),
        );
    }
}

pub(super) fn sse_event(msg: &Message) -> Bytes {
    let mut out = b"event: message\ndata: ".to_vec();
    out.extend_from_slice(&msg.to_bytes());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

pub(super) fn sse_response(
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
pub(super) fn answer(reply: &Message, modern: bool) -> Response {
    let mut resp = json_response(reply, None);
    if let (true, Some(err)) = (modern, &reply.error) {
        set_modern_status(&mut resp, err);
    }
    resp
}

/// A request's answer when nothing came before it: JSON ([`answer`]), or for a client that
/// accepts only SSE (`sse`) a stream of that one event, with the same status.
pub(super) fn answer_alone(reply: &Message, modern: bool, sse: bool) -> Response {
    if !sse {
        return answer(reply, modern);
    }
    let event = sse_event(reply);
    let mut resp = sse_response(futures::stream::once(async move { event }), None);
    if let (true, Some(err)) = (modern, &reply.error) {
        set_modern_status(&mut resp, err);
    }
    resp
}

pub(super) fn json_response(msg: &Message, session: Option<&str>) -> Response {
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

/// 408 for a body that did not arrive in time; the connection is closed after it (what is
/// left of the body would be taken for the next request).
pub(super) fn body_timeout(limit: Duration) -> Response {
    let mut resp = json_error(
        StatusCode::REQUEST_TIMEOUT,
        Id::Null,
        Http::BodyTimeout { limit }.into_object(),
    );
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// A POST whose `Accept` allows no answer the gateway gives: 406.
#[derive(Debug)]
pub(super) struct NotAcceptable {
    /// The request's id.
    pub(super) id: Id,
    /// What the client sent and what it must send.
    pub(super) message: String,
}

impl IntoResponse for NotAcceptable {
    fn into_response(self) -> Response {
        json_error(
            StatusCode::NOT_ACCEPTABLE,
            self.id,
            Http::Refused {
                kind: kind::HTTP_NOT_ACCEPTABLE,
                message: self.message,
            }
            .into_object(),
        )
    }
}

/// 415 for a POST whose body is not JSON.
pub(super) fn unsupported_media_type() -> Response {
    plain_error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "a POST carries one JSON-RPC message: send Content-Type: application/json",
        kind::HTTP_UNSUPPORTED_MEDIA_TYPE,
    )
}

/// 413 for a body over `limit` bytes.
pub(super) fn too_large(limit: usize) -> Response {
    let err = Error::TooLarge {
        size: limit + 1,
        limit,
    };
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        Id::Null,
        err.to_error_object(),
    )
}

/// 400 for a body that is not one JSON-RPC message.
pub(super) fn undecodable(err: &DecodeError) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        err.to_response().to_bytes(),
    )
        .into_response()
}

/// 202: a notification or response taken, or a request that has no answer.
pub(super) fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}
