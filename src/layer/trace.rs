//! `trace`: one span per message (session, method, id, tool) and a log line per answer.
//!
//! ```
//! use mcp_budget::layer::trace::TraceLayer;
//! use tower::Layer;
//! # use mcp_budget::context::McpRequest;
//! # let inner = tower::service_fn(|_: McpRequest| async { Ok::<Option<mcp_budget::jsonrpc::Message>, std::convert::Infallible>(None) });
//! let service = TraceLayer.layer(inner);
//! # let _ = service;
//! ```

use std::task::{Context, Poll};

use tower::{Layer, Service};
use tracing::Instrument;

use crate::context::McpRequest;
use crate::jsonrpc::Message;

/// Layer of [`Trace`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceLayer;

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;
    fn layer(&self, inner: S) -> Trace<S> {
        Trace { inner }
    }
}

/// Wraps each message in a `mcp` span.
#[derive(Debug, Clone)]
pub struct Trace<S> {
    inner: S,
}

impl<S> Service<McpRequest> for Trace<S>
where
    S: Service<McpRequest, Response = Option<Message>> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Option<Message>;
    type Error = S::Error;
    type Future = tracing::instrument::Instrumented<
        futures::future::Inspect<S::Future, fn(&Result<Option<Message>, S::Error>)>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: McpRequest) -> Self::Future {
        use futures::FutureExt;
        let method = req.message.method().unwrap_or("(response)");
        let span = tracing::info_span!(
            "mcp",
            session = %req.caller.session.id,
            method = %method,
            id = ?req.message.id,
            name = tracing::field::Empty,
        );
        // The tool or prompt name, as the downstream read it.
        let name = req.view.tool_or_prompt().unwrap_or_default();
        span.record("name", tracing::field::display(name));
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let log: fn(&Result<Option<Message>, S::Error>) = |result| {
            if let Ok(Some(msg)) = result {
                match &msg.error {
                    Some(err) => {
                        tracing::debug!(code = err.code, kind = ?err.kind(), "Answered with an error");
                    }
                    None => tracing::trace!("Answered"),
                }
            }
        };
        inner.call(req).inspect(log).instrument(span)
    }
}
