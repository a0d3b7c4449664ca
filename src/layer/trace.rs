//! `trace`: one span per message (session, method, id, tool), a log line per answer, and
//! one `info` line per tool call (duration, server, tool, outcome, principal when known; never
//! arguments).
//!
//! Metrics (once [`crate::telemetry::record::enable`]d): `mcp_budget_requests_total` per
//! method and outcome, `mcp_budget_tool_calls_total` and
//! `mcp_budget_tool_call_duration_seconds` per server and tool. While a trace exporter is on
//! ([`crate::telemetry::tracing_on`]), the span is the MCP server span of the OpenTelemetry
//! conventions ([`crate::telemetry::span::request`]).
//!
//! ```
//! use mcp_budget::layer::trace::TraceLayer;
//! use tower::Layer;
//! # use mcp_budget::context::McpRequest;
//! # let inner = tower::service_fn(|_: McpRequest| async { Ok::<Option<mcp_budget::jsonrpc::Message>, std::convert::Infallible>(None) });
//! let service = TraceLayer::default().layer(inner);
//! # let _ = service;
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::watch;
use tokio::time::Instant;
use tower::{Layer, Service};
use tracing::instrument::Instrumented;
use tracing::{Instrument, Span};

use crate::catalog::Catalog;
use crate::context::McpRequest;
use crate::identity::{Principal, Via};
use crate::jsonrpc::Message;
use crate::layer::{Around, Layered};
use crate::mcp::method::Method;
use crate::routing::Reach;
use crate::telemetry::{names, record, span};

/// Layer of [`Trace`]; with a catalog, tool calls are logged and counted by server and tool.
#[derive(Debug, Clone, Default)]
pub struct TraceLayer {
    catalog: Option<watch::Receiver<Arc<Catalog>>>,
    /// The gateway's meta-tools: a call of one is counted as server [`names::GATEWAY_SERVER`].
    meta_tools: Arc<[String]>,
    /// Notes only the calls made through a meta-tool ([`crate::context::Caller::meta`]): the
    /// layer below the budget, where an `invoke_tool` or a `run_code` script's call goes down as
    /// the `tools/call` it makes.
    inner: bool,
}

impl TraceLayer {
    /// A layer that names the server and tool of each `tools/call` from `catalog`.
    #[must_use]
    pub fn new(catalog: watch::Receiver<Arc<Catalog>>) -> Self {
        Self {
            catalog: Some(catalog),
            ..Self::default()
        }
    }

    /// The same, counting calls of these meta-tools (`search_tools`, `invoke_tool`, …) as the
    /// gateway's own.
    #[must_use]
    pub fn with_meta_tools(mut self, names: Vec<String>) -> Self {
        self.meta_tools = names.into();
        self
    }

    /// The layer for below the budget: it notes the calls made through a meta-tool, under
    /// their real server and tool, and lets everything else by.
    #[must_use]
    pub fn inner_calls(catalog: watch::Receiver<Arc<Catalog>>) -> Self {
        Self {
            inner: true,
            ..Self::new(catalog)
        }
    }
}

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;
    fn layer(&self, inner: S) -> Trace<S> {
        Layered::new(self.clone(), inner)
    }
}

/// Wraps each message in a `mcp` span.
pub type Trace<S> = Layered<TraceLayer, S>;

/// A tool call being answered: what its log line and metrics need.
#[derive(Debug)]
struct ToolCall {
    started: Instant,
    server: String,
    tool: String,
    principal: Arc<Principal>,
    /// The meta-tool it was made through.
    via: Option<&'static str>,
}

/// What is noted once the answer is there.
#[derive(Debug)]
struct Pending {
    /// The request's method label, when metrics are recorded.
    method: Option<&'static str>,
    call: Option<ToolCall>,
    /// The span to record the outcome on, when it is exported.
    span: Option<Span>,
}

pin_project_lite::pin_project! {
    /// The future of [`Trace`]: the inner future in the message's span, then the log line and
    /// metrics of its answer.
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: Instrumented<F>,
        pending: Option<Box<Pending>>,
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Option<Message>, E>>,
{
    type Output = Result<Option<Message>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let result = std::task::ready!(this.inner.as_mut().poll(cx));
        let answer = result.as_ref().ok().and_then(Option::as_ref);
        if let Some(msg) = answer {
            // In the message's span as their parent, without entering it: at `info` and
            // above these are off and cost nothing.
            let span = this.inner.span();
            match &msg.error {
                Some(err) => {
                    tracing::debug!(parent: span, code = err.code, kind = ?err.kind(), "Answered with an error");
                }
                None => tracing::trace!(parent: span, "Answered"),
            }
        }
        if let Some(pending) = this.pending.take() {
            note(&pending, this.inner.span(), answer);
        }
        Poll::Ready(result)
    }
}

/// The log line and metrics of an answer.
fn note(pending: &Pending, in_span: &Span, answer: Option<&Message>) {
    if let Some(span) = &pending.span {
        span::answered(span, answer);
    }
    let error = answer.and_then(|m| m.error.as_ref());
    let failed = error.map(|e| {
        let kind = e.kind().unwrap_or_default();
        if crate::error::kind::is_refusal(&kind) {
            names::DENIED
        } else {
            names::ERROR
        }
    });
    if let Some(method) = pending.method {
        record::request(method, failed.unwrap_or(names::OK));
    }
    let Some(call) = &pending.call else { return };
    let outcome = match (failed, answer) {
        (Some(failed), _) => failed,
        (None, Some(m))
            if m.result
                .as_deref()
                .is_some_and(|r| span::is_tool_error(r.get())) =>
        {
            names::TOOL_ERROR
        }
        _ => names::OK,
    };
    let elapsed = call.started.elapsed();
    record::tool_call(&call.server, &call.tool, outcome, elapsed.as_secs_f64());
    let duration_ms = elapsed.as_secs_f64() * 1000.0;
    // The message's span is the line's parent (its fields prefix the line), not entered: one
    // enter and exit fewer per call.
    // An anonymous caller's line has no `principal` field at all (`None` records nothing).
    let principal = (call.principal.via() != Via::Anonymous)
        .then(|| tracing::field::display(call.principal.name()));
    tracing::info!(
        parent: in_span,
        duration_ms,
        server = %call.server,
        tool = %call.tool,
        outcome,
        principal,
        via = call.via,
        "Tool call"
    );
}

impl TraceLayer {
    /// [`Around::around`] below the budget: a call made through a meta-tool gets its metrics,
    /// its log line and (while exported) a span of its own, a child of the meta-tool call's;
    /// anything else goes by untouched.
    fn around_inner<S>(&self, mut inner: S, req: McpRequest) -> ResponseFuture<S::Future>
    where
        S: Service<McpRequest, Response = Option<Message>>,
    {
        let via = req
            .caller
            .meta
            .filter(|_| *req.view.method() == Method::ToolsCall);
        let noted = record::enabled() || tracing::enabled!(tracing::Level::INFO);
        let Some(via) = via.filter(|_| noted || crate::telemetry::tracing_on()) else {
            return ResponseFuture {
                inner: inner.call(req).instrument(Span::none()),
                pending: None,
            };
        };
        let exported = crate::telemetry::tracing_on();
        // Not exported: the meta-tool call's span (current here) is the log line's parent.
        let span = if exported {
            span::request(&req)
        } else {
            Span::current()
        };
        let call = self.tool_call(&req, Some(via));
        let pending = Box::new(Pending {
            method: None,
            call: Some(call),
            span: exported.then(|| span.clone()),
        });
        let future = inner.call(req);
        ResponseFuture {
            inner: future.instrument(span),
            pending: Some(pending),
        }
    }
}

impl TraceLayer {
    /// The tool call `req` (a `tools/call`, made through meta-tool `via` if any) starting now.
    fn tool_call(&self, req: &McpRequest, via: Option<&'static str>) -> ToolCall {
        let (server, tool) = self.server_and_tool(req);
        ToolCall {
            started: Instant::now(),
            server,
            tool,
            principal: req.caller.principal.clone(),
            via,
        }
    }

    /// The server and own name of the tool a `tools/call` calls, routed or quarantined (both
    /// [`names::UNKNOWN`] for a name the catalog does not know: labels stay bounded). The
    /// route is kept with the request: the layers below that route it again reuse it.
    fn server_and_tool(&self, req: &McpRequest) -> (String, String) {
        // The name as the downstream read it: a repeated one names nothing.
        let catalog = req.view.typed_name().and(self.catalog.as_ref());
        let routed = catalog.and_then(|c| req.routed(&c.borrow().clone()));
        match routed.as_deref().map(|r| &r.reach) {
            // A refused call of a quarantined tool is counted as that tool's.
            Some(Reach::Upstream { server, own, .. } | Reach::Quarantined { server, own }) => {
                (server.clone(), own.clone())
            }
            _ => match req.view.typed_name() {
                Some(name) if self.meta_tools.iter().any(|m| m == name) => {
                    (names::GATEWAY_SERVER.to_owned(), name.to_owned())
                }
                _ => (names::UNKNOWN.to_owned(), names::UNKNOWN.to_owned()),
            },
        }
    }
}

impl<S> Around<S> for TraceLayer
where
    S: Service<McpRequest, Response = Option<Message>>,
{
    type Future = ResponseFuture<S::Future>;

    fn around(&self, mut inner: S, req: McpRequest) -> Self::Future {
        if self.inner {
            return self.around_inner(inner, req);
        }
        let method = req.message.method().unwrap_or("(response)");
        let exported = crate::telemetry::tracing_on();
        let span = if exported {
            span::request(&req)
        } else {
            // The tool or prompt name, as the downstream read it: a field of the span from
            // the start (recording it afterwards formats the span's fields twice).
            let name = req.view.tool_or_prompt().unwrap_or_default();
            tracing::info_span!(
                "mcp",
                session = %req.caller.session.id,
                method = %method,
                id = ?req.message.id,
                name = %name,
            )
        };
        let is_request = req.message.id.is_some() && req.message.method().is_some();
        let metrics = record::enabled() && is_request;
        // Nothing to note when neither the call's log line nor its metrics are wanted (say
        // `MCP_BUDGET_LOG=warn` without an admin listener): no catalog lookup, no clock.
        let noted = metrics || tracing::enabled!(tracing::Level::INFO);
        let call = (noted && is_request && *req.view.method() == Method::ToolsCall)
            .then(|| self.tool_call(&req, None));
        let pending = (metrics || call.is_some() || exported).then(|| {
            Box::new(Pending {
                method: metrics.then(|| record::method_label(method)),
                call,
                span: exported.then(|| span.clone()),
            })
        });
        // What layers below record while building their future (the budget layer's plan)
        // lands on the exported span too.
        let entered = exported.then(|| span.enter());
        let future = inner.call(req);
        drop(entered);
        ResponseFuture {
            inner: future.instrument(span),
            pending,
        }
    }
}
