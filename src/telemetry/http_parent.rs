//! The trace context of an HTTP request (`traceparent` / `tracestate` headers), kept for the
//! task that serves it ([`super::context::HTTP_PARENT`]), so that the request span of each
//! message it carries takes it as parent (when the message's `_meta` names none).

use std::task::{Context, Poll};

use tokio::task::futures::TaskLocalFuture;
use tower::{Layer, Service};

use super::context::{HTTP_PARENT, from_headers};

/// Layer of [`HttpParent`] (add it only while spans are exported: it costs a task-local
/// scope per request).
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpParentLayer;

impl<S> Layer<S> for HttpParentLayer {
    type Service = HttpParent<S>;
    fn layer(&self, inner: S) -> HttpParent<S> {
        HttpParent { inner }
    }
}

/// Serves each request with its headers' trace context in [`HTTP_PARENT`].
#[derive(Debug, Clone)]
pub struct HttpParent<S> {
    inner: S,
}

impl<S, B> Service<http::Request<B>> for HttpParent<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = TaskLocalFuture<Option<opentelemetry::trace::SpanContext>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let parent = from_headers(req.headers());
        HTTP_PARENT.scope(parent, self.inner.call(req))
    }
}
