//! W3C trace context (`traceparent`, `tracestate`): read from HTTP headers or a request's
//! `params._meta` (as the MCP semantic conventions describe), written to upstream requests.
//! Parsing and formatting are pure; [`remote_parent`] and [`current_headers`] read the task's
//! and the span's state.

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

use crate::jsonrpc::Message;

/// The header (and `_meta` key) of the parent's ids.
pub const TRACEPARENT: &str = "traceparent";
/// The header (and `_meta` key) of vendor trace state.
pub const TRACESTATE: &str = "tracestate";

tokio::task_local! {
    /// The trace context of the HTTP request this task serves (its `traceparent` /
    /// `tracestate` headers), for the request span to take as its parent.
    pub static HTTP_PARENT: Option<SpanContext>;
}

/// The span context a `traceparent` (and `tracestate`) names: `None` unless version `00`
/// with non-zero ids, as the W3C recommendation asks.
///
/// ```
/// use mcp_budget::telemetry::context::{parse, format};
/// let cx = parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None).unwrap();
/// assert_eq!(format(&cx), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
/// assert!(parse("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None).is_none());
/// ```
#[must_use]
pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let mut parts = traceparent.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    if version != "00"
        || parts.next().is_some()
        || !hex(trace, 32)
        || !hex(span, 16)
        || !hex(flags, 2)
    {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return None;
    }
    let state = tracestate
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags & 1),
        true,
        state,
    ))
}

/// The `traceparent` of `cx`.
#[must_use]
pub fn format(cx: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        cx.trace_id(),
        cx.span_id(),
        cx.trace_flags().to_u8()
    )
}

/// The trace context in a request's `_meta` (its raw JSON), if it carries a valid one.
#[must_use]
pub fn from_meta(meta: &str) -> Option<SpanContext> {
    #[derive(serde::Deserialize)]
    struct Meta<'a> {
        #[serde(borrow)]
        traceparent: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        tracestate: Option<std::borrow::Cow<'a, str>>,
    }
    let meta: Meta<'_> = serde_json::from_str(meta).ok()?;
    parse(meta.traceparent.as_deref()?, meta.tracestate.as_deref())
}

/// The trace context of HTTP request headers, if they carry a valid one.
#[must_use]
pub fn from_headers(headers: &http::HeaderMap) -> Option<SpanContext> {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    parse(value(TRACEPARENT)?, value(TRACESTATE))
}

/// The parent the current task's HTTP request named, if any.
#[must_use]
pub fn remote_parent() -> Option<SpanContext> {
    HTTP_PARENT.try_with(Clone::clone).ok().flatten()
}

/// `traceparent` (and `tracestate`) of the current span, for an upstream request; `None`
/// when the span is not exported.
#[must_use]
pub fn current_headers() -> Option<(String, Option<String>)> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let cx = tracing::Span::current().context();
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    let state = sc.trace_state().header();
    Some((format(sc), (!state.is_empty()).then_some(state)))
}

/// `msg` with the current span's trace context in `params._meta` (`traceparent`,
/// `tracestate`), for an upstream that reads no headers (stdio); unchanged unless spans are
/// exported and `msg` is a request with object (or no) params.
#[must_use]
pub fn into_meta(msg: Message) -> Message {
    if !super::tracing_on() || msg.kind() != crate::jsonrpc::Kind::Request {
        return msg;
    }
    match current_headers() {
        Some((parent, state)) => with_meta(msg, &parent, state.as_deref()),
        None => msg,
    }
}

/// `msg` with `traceparent` (and `tracestate`) set in `params._meta`, replacing what was
/// there (the client's context was the gateway's parent, not the upstream's).
#[must_use]
pub fn with_meta(mut msg: Message, traceparent: &str, tracestate: Option<&str>) -> Message {
    use serde_json::{Map, Value};
    let mut params: Map<String, Value> = match msg.params.as_deref() {
        None => Map::new(),
        Some(raw) => match serde_json::from_str(raw.get()) {
            Ok(Value::Object(map)) => map,
            _ => return msg,
        },
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(meta) = meta else {
        return msg;
    };
    meta.insert(TRACEPARENT.into(), traceparent.into());
    match tracestate {
        Some(state) => meta.insert(TRACESTATE.into(), state.into()),
        None => meta.remove(TRACESTATE),
    };
    msg.params = Some(crate::jsonrpc::to_raw(&Value::Object(params)));
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_and_headers_carry_the_same_context() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let meta = from_meta(&format!(r#"{{"traceparent":"{tp}","tracestate":"k=v"}}"#)).unwrap();
        let mut headers = http::HeaderMap::new();
        headers.insert(TRACEPARENT, tp.parse().unwrap());
        headers.insert(TRACESTATE, "k=v".parse().unwrap());
        let from_http = from_headers(&headers).unwrap();
        assert_eq!(meta, from_http);
        assert!(meta.is_remote() && meta.is_sampled());
        assert_eq!(meta.trace_state().header(), "k=v");
    }

    #[test]
    fn the_context_goes_into_meta_keeping_the_rest() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let msg = Message::request(
            crate::jsonrpc::Id::Number(7),
            "tools/call",
            Some(crate::jsonrpc::to_raw(&serde_json::json!(
                {"name": "t", "_meta": {"progressToken": 1, "tracestate": "old=1"}}
            ))),
        );
        let out = with_meta(msg, tp, None);
        let params: serde_json::Value =
            serde_json::from_str(out.params.as_deref().unwrap().get()).unwrap();
        assert_eq!(
            params,
            serde_json::json!({"name": "t", "_meta": {"progressToken": 1, "traceparent": tp}})
        );
        let bare = Message::request(crate::jsonrpc::Id::Number(8), "tools/list", None);
        let out = with_meta(bare, tp, Some("k=v"));
        assert_eq!(
            out.params.as_deref().unwrap().get(),
            format!(r#"{{"_meta":{{"traceparent":"{tp}","tracestate":"k=v"}}}}"#)
        );
    }

    #[test]
    fn malformed_contexts_are_ignored() {
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
        ] {
            assert!(parse(bad, None).is_none(), "{bad}");
        }
        assert!(from_meta(r#"{"progressToken":1}"#).is_none());
    }
}
