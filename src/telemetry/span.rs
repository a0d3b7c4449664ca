//! The exported spans (while [`super::tracing_on`]): one per client request, named and
//! attributed per the OpenTelemetry MCP semantic conventions, and one per upstream request as
//! its child. Their fields are the conventions' attribute names; `tracing-opentelemetry`
//! reads `otel.name`, `otel.kind` and `otel.status_code` as the span's name, kind and status.

use tracing::Span;
use tracing::field::{Empty, display};

use crate::context::McpRequest;
use crate::jsonrpc::Message;
use crate::mcp::method::Method;

/// Attribute of a request span: the budget rung the listed tools come from.
pub const PLAN_RUNG: &str = "mcp_budget.plan.rung";
/// Attribute of a request span: tokens of the tools listed in a `tools/list` answer.
pub const TOKENS_LISTED: &str = "mcp_budget.tokens.listed";

/// `{mcp.method.name} {target}`, or the method alone when it names no target.
#[must_use]
pub fn name(method: &str, target: Option<&str>) -> String {
    match target {
        Some(t) if !t.is_empty() => format!("{method} {t}"),
        _ => method.to_owned(),
    }
}

/// The server span of a client request, its parent taken from `params._meta` or, failing
/// that, the HTTP request's `traceparent` header.
#[must_use]
pub fn request(req: &McpRequest) -> Span {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let method = req.message.method().unwrap_or("(response)");
    let target = req.view.target_name();
    let tool = req
        .view
        .tool_or_prompt()
        .filter(|_| *req.view.method() == Method::ToolsCall);
    let version = req.view.request_meta().map_or_else(
        || {
            req.caller
                .session
                .state()
                .protocol_version
                .unwrap_or_default()
        },
        |m| m.protocol_version.clone(),
    );
    let span = tracing::info_span!(
        "mcp",
        otel.name = %name(method, target),
        otel.kind = "server",
        otel.status_code = Empty,
        mcp.method.name = %method,
        mcp.session.id = %req.caller.session.id,
        mcp.protocol.version = Empty,
        jsonrpc.request.id = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.operation.name = Empty,
        gen_ai.prompt.name = Empty,
        mcp.resource.uri = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
        user.id = Empty,
        mcp_budget.plan.rung = Empty,
        mcp_budget.tokens.listed = Empty,
    );
    if !version.is_empty() {
        span.record("mcp.protocol.version", display(&version));
    }
    if let Some(id) = &req.message.id {
        span.record("jsonrpc.request.id", display(id_text(id)));
    }
    if let Some(tool) = tool {
        span.record("gen_ai.tool.name", tool);
        span.record("gen_ai.operation.name", "execute_tool");
    }
    if *req.view.method() == Method::PromptsGet {
        if let Some(prompt) = req.view.tool_or_prompt() {
            span.record("gen_ai.prompt.name", prompt);
        }
    }
    if let Some(uri) = req.view.uri() {
        span.record("mcp.resource.uri", uri);
    }
    let principal = &req.caller.principal;
    if principal.via() != crate::identity::Via::Anonymous {
        span.record("user.id", principal.name());
    }
    let parent = req
        .view
        .meta(&req.message)
        .and_then(super::context::from_meta)
        .or_else(super::context::remote_parent);
    if let Some(parent) = parent {
        use opentelemetry::trace::TraceContextExt as _;
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
    }
    span
}

/// Records the answer on a request span: error status and `error.type` (the error's
/// `data.type`, else its code; `tool_error` for a result with `isError: true`).
pub fn answered(span: &Span, answer: Option<&Message>) {
    let Some(msg) = answer else { return };
    if let Some(err) = &msg.error {
        let kind = err.kind().unwrap_or_else(|| err.code.to_string());
        span.record("error.type", display(kind));
        span.record("rpc.response.status_code", display(err.code));
        span.record("otel.status_code", "ERROR");
    } else if msg
        .result
        .as_deref()
        .is_some_and(|r| is_tool_error(r.get()))
    {
        span.record("error.type", super::names::TOOL_ERROR);
        span.record("otel.status_code", "ERROR");
    }
}

/// Records the plan a `tools/list` is answered from on the current (request) span: its rung
/// and the tokens listed. A no-op while spans are not exported.
pub fn record_plan(rung: &dyn std::fmt::Display, tokens_listed: usize) {
    if super::tracing_on() {
        let span = Span::current();
        span.record(PLAN_RUNG, display(rung));
        // An i64: OpenTelemetry has no unsigned integers (a u64 would arrive as a string).
        span.record(
            TOKENS_LISTED,
            i64::try_from(tokens_listed).unwrap_or(i64::MAX),
        );
    }
}

/// The client span of a request to upstream `server` (a child of the current span), for HTTP
/// and stdio upstreams alike; [`answered`] records an error answer on it.
#[must_use]
pub fn upstream(server: &str, msg: &Message) -> Span {
    let method = msg.method().unwrap_or("(response)");
    let view = crate::mcp::view::RequestView::of(msg);
    tracing::info_span!(
        "upstream",
        otel.name = %name(method, view.target_name()),
        otel.kind = "client",
        mcp.method.name = %method,
        server.name = %server,
        jsonrpc.request.id = msg.id.as_ref().map(id_text).unwrap_or_default(),
        otel.status_code = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
    )
}

fn id_text(id: &crate::jsonrpc::Id) -> String {
    match serde_json::to_value(id) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// Whether a `CallToolResult` (raw JSON) says `isError: true`: a key `"isError"` outside any
/// string (inside one its quotes would be escaped) followed by `true`.
#[must_use]
pub fn is_tool_error(result: &str) -> bool {
    let mut rest = result;
    while let Some(at) = rest.find("\"isError\"") {
        let escaped = rest[..at].ends_with('\\');
        rest = &rest[at + "\"isError\"".len()..];
        let value = rest.trim_start().strip_prefix(':').map(str::trim_start);
        if !escaped && value.is_some_and(|v| v.starts_with("true")) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_follow_the_conventions() {
        assert_eq!(
            name("tools/call", Some("get_weather")),
            "tools/call get_weather"
        );
        assert_eq!(name("tools/list", None), "tools/list");
    }

    #[test]
    fn tool_errors_are_found_outside_strings_only() {
        assert!(is_tool_error(r#"{"content":[],"isError": true}"#));
        assert!(!is_tool_error(r#"{"content":[],"isError":false}"#));
        assert!(!is_tool_error(
            r#"{"content":[{"type":"text","text":"{\"isError\":true}"}]}"#
        ));
        assert!(!is_tool_error(r#"{"content":[]}"#));
    }
}
