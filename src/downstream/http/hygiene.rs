//! Keep-alive after refusals. Hyper closes a connection whose request body was not read to
//! its end when the answer is written (the unread bytes would be taken for the next request),
//! and says nothing: a kept-alive client then sends its next request into a closed socket
//! and sees a reset. So:
//! - every answer to a request whose body was not read to the end says `Connection: close`
//!   ([`CloseUnreadLayer`], around the whole router: refusals of every kind, 404 and 405
//!   included), so that the client opens a new connection rather than reuse this one;
//! - the cheap refusals (origin, content type, credentials, unknown path) first read what is
//!   left of a small body ([`drain`]: at most [`DRAIN_BYTES`] within [`DRAIN_TIME`]), so that
//!   the connection stays open for the next request.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tower::{Layer, Service};

/// The most of an unwanted request body [`drain`] reads to keep the connection open.
pub(super) const DRAIN_BYTES: usize = 64 * 1024;

/// How long [`drain`] waits for the rest of an unwanted body.
pub(super) const DRAIN_TIME: Duration = Duration::from_secs(1);

/// Layer of [`CloseUnread`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CloseUnreadLayer;

impl<S> Layer<S> for CloseUnreadLayer {
    type Service = CloseUnread<S>;
    fn layer(&self, inner: S) -> CloseUnread<S> {
        CloseUnread { inner }
    }
}

/// Marks `Connection: close` on the answer to a request whose body was not read to its end.
/// A request without a body (GET, DELETE, `Content-Length: 0`) costs nothing.
#[derive(Debug, Clone)]
pub(super) struct CloseUnread<S> {
    inner: S,
}

impl<S> Service<Request<Body>> for CloseUnread<S>
where
    S: Service<Request<Body>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Closing<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        if req.body().is_end_stream() {
            return Closing {
                inner: self.inner.call(req),
                read: None,
            };
        }
        let read = Arc::new(AtomicBool::new(false));
        let req = req.map(|body| {
            Body::new(Tracked {
                inner: body,
                read: read.clone(),
            })
        });
        Closing {
            inner: self.inner.call(req),
            read: Some(read),
        }
    }
}

pin_project_lite::pin_project! {
    /// [`CloseUnread`]'s answer: the inner one, marked when the body was left unread.
    pub(super) struct Closing<F> {
        #[pin]
        inner: F,
        read: Option<Arc<AtomicBool>>,
    }
}

impl<F, E> std::future::Future for Closing<F>
where
    F: std::future::Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut resp = std::task::ready!(this.inner.poll(cx))?;
        if this
            .read
            .as_ref()
            .is_some_and(|r| !r.load(Ordering::Acquire))
        {
            (resp.headers_mut()).insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        Poll::Ready(Ok(resp))
    }
}

/// A request body that says when it was read to its end.
struct Tracked {
    inner: Body,
    read: Arc<AtomicBool>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        let frame = std::task::ready!(std::pin::Pin::new(&mut self.inner).poll_frame(cx));
        if frame.is_none() || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Reads and drops what is left of an unwanted request body, so that the connection can
/// serve the next request: at most [`DRAIN_BYTES`] within [`DRAIN_TIME`] (a body announced
/// larger is not read at all). A body left unread closes the connection after the answer
/// (see [`CloseUnread`]).
pub(super) async fn drain(body: Body) {
    if body.size_hint().lower() > DRAIN_BYTES as u64 {
        return;
    }
    let limited = http_body_util::Limited::new(body, DRAIN_BYTES);
    let _ = tokio::time::timeout(DRAIN_TIME, limited.collect()).await;
}

/// `404` for a path the gateway does not serve, after reading a small body (see [`drain`]).
pub(super) async fn not_found(request: Request<Body>) -> Response {
    drain(request.into_body()).await;
    StatusCode::NOT_FOUND.into_response()
}
