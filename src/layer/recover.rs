//! `recover`: every request id is answered exactly once.
//!
//! The outermost layer. A request whose inner service panicked, or returned no response,
//! is answered with an internal error (`mcp_budget.internal`); notifications and client
//! responses pass through. Nothing here inspects or changes a normal response.
//!
//! ```
//! use mcp_budget::layer::recover::RecoverLayer;
//! use tower::Layer;
//! # use mcp_budget::context::McpRequest;
//! # let inner = tower::service_fn(|_: McpRequest| async { Ok::<Option<mcp_budget::jsonrpc::Message>, std::convert::Infallible>(None) });
//! let service = RecoverLayer.layer(inner);
//! # let _ = service;
//! ```

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tower::Layer;

use crate::context::{McpFuture, McpRequest};
use crate::error::Error;
use crate::jsonrpc::{Kind, Message};
use crate::layer::{Around, Inner, Layered};

/// Layer of [`Recover`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RecoverLayer;

impl<S> Layer<S> for RecoverLayer {
    type Service = Recover<S>;
    fn layer(&self, inner: S) -> Recover<S> {
        Layered::new(*self, inner)
    }
}

/// Answers every request exactly once, whatever the inner service does.
pub type Recover<S> = Layered<RecoverLayer, S>;

impl<S: Inner> Around<S> for RecoverLayer {
    type Future = McpFuture;

    fn around(&self, mut inner: S, req: McpRequest) -> McpFuture {
        let request_id = (req.message.kind() == Kind::Request).then(|| req.message.reply_id());
        let method = req.message.method().unwrap_or_default().to_owned();
        Box::pin(async move {
            // `call` itself inside the caught future: a layer that panics before it returns its
            // future (deciding synchronously) is caught too.
            let outcome = AssertUnwindSafe(async move { inner.call(req).await })
                .catch_unwind()
                .await;
            let Some(id) = request_id else {
                return Ok(outcome.ok().and_then(Result::ok).flatten());
            };
            let fault = match outcome {
                Ok(Ok(Some(mut response))) => {
                    response.id = Some(id);
                    return Ok(Some(response));
                }
                Ok(Ok(None)) => format!("{method} produced no response"),
                Ok(Err(never)) => match never {},
                Err(_) => format!("{method} failed unexpectedly"),
            };
            tracing::error!(method = %method, fault = %fault, "Internal fault answered with an error");
            Ok(Some(Message::error(
                id,
                Error::Internal(fault).to_error_object(),
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Caller, Session};
    use crate::jsonrpc::Id;
    use std::convert::Infallible;
    use std::sync::Arc;
    use tower::Service;

    fn request(method: &str) -> McpRequest {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        McpRequest::new(
            Message::request(Id::Number(9), method, None),
            Caller::new(Arc::new(Session::new("s", tx))),
        )
    }

    /// `boom` (which panics in `inner`) and `silent` (which it answers with nothing) each get
    /// one internal error.
    async fn assert_answered_with_internal_errors(inner: impl Inner) {
        let mut svc = RecoverLayer.layer(inner);
        for method in ["boom", "silent"] {
            let resp = svc.call(request(method)).await.unwrap().unwrap();
            assert_eq!(resp.id, Some(Id::Number(9)));
            assert_eq!(
                resp.error.unwrap().kind().as_deref(),
                Some("mcp_budget.internal")
            );
        }
    }

    #[tokio::test]
    async fn panics_and_silence_become_one_error() {
        let panicking = tower::service_fn(|req: McpRequest| async move {
            if req.message.method() == Some("boom") {
                panic!("boom");
            }
            Ok::<_, Infallible>(None)
        });
        assert_answered_with_internal_errors(panicking).await;
    }

    /// A service that panics in `call` itself, before it returns a future (as a layer that
    /// decides synchronously would), is answered too.
    #[tokio::test]
    async fn a_panic_before_the_future_becomes_one_error() {
        let panicking = tower::service_fn(|req: McpRequest| {
            assert!(req.message.method() != Some("boom"), "boom");
            async { Ok::<_, Infallible>(None) }
        });
        assert_answered_with_internal_errors(panicking).await;
    }
}
