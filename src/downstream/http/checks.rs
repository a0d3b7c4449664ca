//! The checks of a request's headers, as pure functions: `Host` and `Origin` (DNS
//! rebinding), `Content-Type`, `Accept`, the protocol era and the 2026-07-28 routing and
//! `Mcp-Param-*` headers. Each returns what to answer on failure; none does I/O.

use std::net::Ipv6Addr;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::reply::{NotAcceptable, plain_error};
use super::{HTTP_SSE_ERA, HttpConfig, SESSION_HEADER};
use crate::error::kind;
use crate::jsonrpc::{ErrorObject, Id, Kind, Message};
use crate::mcp::method::Method;
use crate::mcp::modern;
use crate::mcp::params::Marked;
use crate::mcp::view::RequestView;

/// A `Host` value or the authority of an origin, `host[:port]` (an IPv6 address in
/// brackets, the port numeric), split into host and port; `None` for anything else (userinfo,
/// a path, an empty or non-numeric port, an unbracketed IPv6 address, stray characters).
fn parse_authority(text: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        inner.parse::<Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':')?),
        };
        (&text[..inner.len() + 2], port)
    } else {
        let (host, port) = match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        };
        let name_char = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_');
        if host.is_empty() || !host.bytes().all(name_char) {
            return None;
        }
        (host, port)
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse().ok()?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

/// Whether a host (as [`parse_authority`] returns it) names this machine's loopback.
fn is_local_host(host: &str) -> bool {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner
            .parse::<Ipv6Addr>()
            .is_ok_and(|ip| ip == Ipv6Addr::LOCALHOST);
    }
    host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1"
}

/// The parts of an `Origin` header, `scheme://host[:port]` and nothing else; `None` for
/// anything else, `null` included.
fn parse_origin(text: &str) -> Option<(&str, &str, Option<u16>)> {
    let (scheme, authority) = text.split_once("://")?;
    let mut chars = scheme.bytes();
    let scheme_ok = chars.next().is_some_and(|b| b.is_ascii_alphabetic())
        && chars.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return None;
    }
    let (host, port) = parse_authority(authority)?;
    Some((scheme, host, port))
}

/// The one value of header `name`: `Err(count)` when it is missing (0) or repeated.
fn only_header<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> Result<&'a [u8], usize> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (Some(v), None) => Ok(v.as_bytes()),
        (None, _) => Err(0),
        (Some(_), Some(_)) => Err(headers.get_all(name).iter().count()),
    }
}

/// DNS-rebinding protection and HTTP hygiene: exactly one `Host`, an authority only (400
/// `mcp_budget.http.bad_host` otherwise), naming localhost or an allowed host; at most one
/// `Origin`, a real origin, localhost or allowed (403 `mcp_budget.http.forbidden_origin`
/// otherwise, `null` included). A request target in absolute form (`POST http://host/mcp`)
/// has its authority checked as a `Host` too.
pub(super) fn check_origin(
    headers: &HeaderMap,
    uri: &axum::http::Uri,
    config: &HttpConfig,
) -> Result<(), Box<Response>> {
    let host = match only_header(headers, &header::HOST) {
        Ok(host) => host,
        Err(0) => {
            return Err(bad_host(
                "missing Host header: send one naming this server (host[:port])",
            ));
        }
        Err(n) => {
            return Err(bad_host(&format!(
                "{n} Host headers: send exactly one (host[:port])"
            )));
        }
    };
    let Ok(host) = std::str::from_utf8(host) else {
        return Err(bad_host("the Host header is not text"));
    };
    check_host(host, config)?;
    if let Some(authority) = uri.authority() {
        check_host(authority.as_str(), config)?;
    }
    match only_header(headers, &header::ORIGIN) {
        Err(0) => Ok(()),
        Err(n) => Err(forbidden("Origin", &format!("({n} Origin headers)"))),
        Ok(origin) => check_origin_value(&String::from_utf8_lossy(origin), config),
    }
}

/// A `Host` (or a request target's authority) is `host[:port]`, naming localhost or an
/// allowed host.
fn check_host(text: &str, config: &HttpConfig) -> Result<(), Box<Response>> {
    let Some((name, _)) = parse_authority(text) else {
        return Err(bad_host(&format!(
            "Host {text:?} is not host[:port] (no userinfo, path or other characters)"
        )));
    };
    let allowed = is_local_host(name)
        || config
            .allowed_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(text) || h.eq_ignore_ascii_case(name));
    if allowed {
        Ok(())
    } else {
        Err(forbidden("Host", text))
    }
}

/// An `Origin` is a real origin, on localhost (`http` or `https`) or allowed.
fn check_origin_value(origin: &str, config: &HttpConfig) -> Result<(), Box<Response>> {
    let Some((scheme, host, _)) = parse_origin(origin) else {
        return Err(forbidden("Origin", origin));
    };
    let local = (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"))
        && is_local_host(host);
    if local
        || config
            .allowed_origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(origin))
    {
        Ok(())
    } else {
        Err(forbidden("Origin", origin))
    }
}

/// 403 `mcp_budget.http.forbidden_origin`: `what` (`Host` or `Origin`) is not allowed.
fn forbidden(what: &str, value: &str) -> Box<Response> {
    Box::new(plain_error(
        StatusCode::FORBIDDEN,
        &format!(
            "{what} {value:?} is not allowed (downstream.allowed_{}s)",
            what.to_lowercase()
        ),
        kind::HTTP_FORBIDDEN_ORIGIN,
    ))
}

/// 400 `mcp_budget.http.bad_host`.
fn bad_host(message: &str) -> Box<Response> {
    Box::new(plain_error(
        StatusCode::BAD_REQUEST,
        message,
        kind::HTTP_BAD_HOST,
    ))
}

/// What an `Accept` header allows of the two media types MCP answers with (wildcards count;
/// a range with `q=0` does not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Accepts {
    pub(super) json: bool,
    pub(super) sse: bool,
    /// Whether there was an `Accept` header at all.
    pub(super) present: bool,
}

pub(super) fn accepts(headers: &HeaderMap) -> Accepts {
    let mut out = Accepts::default();
    // Repeated Accept headers are one list (RFC 9110 §5.3). Read as bytes, in one pass per
    // list item: this runs on every POST.
    for value in &headers.get_all(header::ACCEPT) {
        out.present = true;
        for range in value.as_bytes().split(|&b| b == b',') {
            let mut parts = range.split(|&b| b == b';');
            let media = parts.next().unwrap_or_default().trim_ascii();
            let refused = parts.any(|p| {
                let p = p.trim_ascii();
                p.len() > 2
                    && p[..2].eq_ignore_ascii_case(b"q=")
                    && std::str::from_utf8(&p[2..])
                        .ok()
                        .and_then(|q| q.trim().parse::<f32>().ok())
                        .is_some_and(|q| q <= 0.0)
            });
            if refused {
                continue;
            }
            let is = |m: &[u8]| media.eq_ignore_ascii_case(m);
            if is(b"*/*") {
                out.json = true;
                out.sse = true;
            } else if is(b"application/json") || is(b"application/*") {
                out.json = true;
            } else if is(b"text/event-stream") || is(b"text/*") {
                out.sse = true;
            }
        }
    }
    out
}

/// Whether the request has exactly one `Content-Type`, `application/json` (any case, any
/// parameters such as `charset`).
pub(super) fn is_json_body(headers: &HeaderMap) -> bool {
    only_header(headers, &header::CONTENT_TYPE).is_ok_and(|v| {
        let media = v.split(|&b| b == b';').next().unwrap_or_default();
        media.trim_ascii().eq_ignore_ascii_case(b"application/json")
    })
}

/// How a request may be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// With JSON only: server→client messages of the call go to the session's GET stream.
    Json,
    /// With JSON, or an SSE stream when server→client messages come before the answer.
    JsonOrSse,
    /// With an SSE stream only, even for an answer alone.
    Sse,
}

/// How a POST may be answered, from its `Accept`; `None`: 406.
///
/// The spec asks clients to accept both answers MCP may give (2025-03-26 and later,
/// 2026-07-28 too): JSON and an SSE stream. Real hosts do not all do so (some proxies send
/// only `text/event-stream`, some CLIs only `application/json`, some nothing), and each of
/// them can still be served: so by default a POST that accepts either is answered in a shape it
/// accepts (JSON when it did not accept SSE, SSE when it did not accept JSON), and one without
/// `Accept` (which RFC 9110 reads as "anything") gets plain JSON, the shape every client reads.
/// Only an `Accept` that names neither is refused.
///
/// With `strict` (`[downstream] strict_accept`) the spec's rule holds: both, except that a
/// 2024-11-05 client (the era before streamable HTTP, whose clients expect JSON answers) needs
/// only JSON or no `Accept` at all; `http_sse_era` says whether the client speaks it, asked
/// only then.
pub(super) fn reply_shape(
    accepts: Accepts,
    strict: bool,
    http_sse_era: impl FnOnce() -> bool,
) -> Option<Shape> {
    if accepts.json && accepts.sse {
        return Some(Shape::JsonOrSse);
    }
    if strict {
        return ((accepts.json || !accepts.present) && http_sse_era()).then_some(Shape::Json);
    }
    if accepts.json || !accepts.present {
        Some(Shape::Json)
    } else if accepts.sse {
        Some(Shape::Sse)
    } else {
        None
    }
}

/// Whether the request itself says it speaks 2024-11-05: its `MCP-Protocol-Version` header or
/// the version its `initialize` asks for. `None` when neither says: then its session's
/// version does.
pub(super) fn http_sse_era_of(headers: &HeaderMap, message: &Message) -> Option<bool> {
    if let Some(v) = headers.get("mcp-protocol-version") {
        return Some(v.as_bytes() == HTTP_SSE_ERA.as_bytes());
    }
    if message.method() == Some(Method::Initialize.as_str()) {
        #[derive(serde::Deserialize)]
        struct Init<'a> {
            #[serde(rename = "protocolVersion", borrow)]
            protocol_version: Option<&'a str>,
        }
        return Some(
            message
                .params_as::<Init<'_>>()
                .is_ok_and(|p| p.protocol_version == Some(HTTP_SSE_ERA)),
        );
    }
    None
}

/// The refusal of a POST whose `Accept` allows no answer ([`reply_shape`] said `None`).
pub(super) fn not_acceptable(
    headers: &HeaderMap,
    message: &Message,
    strict: bool,
) -> NotAcceptable {
    let got = headers.get(header::ACCEPT).map_or("none".into(), |v| {
        format!("{:?}", String::from_utf8_lossy(v.as_bytes()))
    });
    let message_text = if strict {
        format!(
            "Accept must list both application/json and text/event-stream \
             (streamable HTTP, MCP 2025-03-26 and later; downstream.strict_accept); got {got}"
        )
    } else {
        format!("Accept must list application/json or text/event-stream (or */*); got {got}")
    };
    NotAcceptable {
        id: message.reply_id(),
        message: message_text,
    }
}

/// What a POST is, by era: the protocol era is decided here, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PostEra {
    /// A 2026-07-28 message (see [`is_modern`]), served without a session.
    Modern,
    /// A 2025-era `initialize` request: it opens a session.
    Initialize,
    /// Any other message of a 2025-era session (`Mcp-Session-Id`).
    Session,
}

/// The view of a POST's message: modern by its `_meta`, or by its headers ([`modern_by_header`]).
pub(super) fn view_of(message: &Message, headers: &HeaderMap) -> RequestView {
    if modern_by_header(headers) {
        RequestView::of_modern(message)
    } else {
        RequestView::of(message)
    }
}

/// The era of a POST. A modern request is checked first: a 2026-07-28 `initialize` is a
/// removed method (404), not a new 2025 session. A 2026-07-28 request passes the checks of
/// the modern HTTP transport, first failure wins (the order of the Python SDK's ladder): a
/// routing header sent twice or a header that differs from the body → `-32020`; a `_meta`
/// envelope without protocol version or client capabilities → `-32602`; an unsupported
/// version → `-32022` (all HTTP 400); a method 2026-07-28 removed → `-32601` (HTTP 404). A
/// modern notification is checked for its version only. The envelope, version and method
/// rules are the era's ([`RequestView::refusal`], which the `era` layer applies on every
/// transport); this ladder puts the header checks between them and answers in JSON.
///
/// # Errors
/// The id to answer and the modern error, for a 2026-07-28 message that fails a check.
pub(super) fn post_era(
    message: &Message,
    view: &RequestView,
    headers: &HeaderMap,
) -> Result<PostEra, (Id, ErrorObject)> {
    if is_modern(view, headers) {
        if message.kind() == Kind::Request {
            let id = message.reply_id();
            check_modern_request(view, headers).map_err(|err| (id, err))?;
        } else if let Some(v) = headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
        {
            if !modern::MODERN_VERSIONS.contains(&v) {
                return Err((Id::Null, modern::unsupported_version(v)));
            }
        }
        return Ok(PostEra::Modern);
    }
    if message.method() == Some(Method::Initialize.as_str()) && message.kind() == Kind::Request {
        return Ok(PostEra::Initialize);
    }
    Ok(PostEra::Session)
}

/// Whether the headers say 2026-07-28: no `Mcp-Session-Id`, and an `MCP-Protocol-Version`
/// that names a version no `initialize` handshake negotiates (unknown values included, so
/// that they get a structured rejection).
fn modern_by_header(headers: &HeaderMap) -> bool {
    !headers.contains_key(SESSION_HEADER)
        && headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| !crate::gateway::SUPPORTED_VERSIONS.contains(&v))
}

/// Whether the request speaks the 2026-07-28 era on HTTP: no `Mcp-Session-Id`, and its
/// headers say so ([`modern_by_header`]) or its `_meta` names a protocol version.
fn is_modern(view: &RequestView, headers: &HeaderMap) -> bool {
    modern_by_header(headers)
        || (!headers.contains_key(SESSION_HEADER) && view.request_meta().is_some())
}

/// The checks of [`post_era`] for a 2026-07-28 request.
fn check_modern_request(view: &RequestView, headers: &HeaderMap) -> Result<(), ErrorObject> {
    for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
        if headers.get_all(name).iter().nth(1).is_some() {
            return Err(modern::header_mismatch(format!(
                "{name} header appears more than once"
            )));
        }
    }
    if let Some(err) = view.envelope_error() {
        return Err(err.clone());
    }
    let meta = view
        .request_meta()
        .ok_or_else(|| modern::header_mismatch("no protocol version in _meta"))?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mirrored = modern::MirroredHeaders {
        protocol_version: header("mcp-protocol-version"),
        method: header("mcp-method"),
        name: header("mcp-name"),
    };
    let method = view.method().as_str();
    modern::check_mirrored(method, view.target_name(), meta, mirrored)?;
    view.version_error().map_or(Ok(()), Err)
}

/// The `Mcp-Param-*` headers of a modern `tools/call` against its arguments, for the tools
/// whose schema marks properties with `x-mcp-header` (`marks_of` gives a tool's marks).
///
/// # Errors
/// The `-32020` error for a header that is missing or differs from its argument.
pub(super) fn check_param_headers(
    message: &Message,
    view: &RequestView,
    headers: &HeaderMap,
    marks_of: impl FnOnce(&str) -> Vec<Marked>,
) -> Result<(), ErrorObject> {
    let Some(name) = view.name() else {
        return Ok(());
    };
    let marks = marks_of(name);
    if marks.is_empty() {
        return Ok(());
    }
    let arguments = view.arguments_value(message);
    crate::mcp::params::check_param_headers(&marks, &arguments, |header| {
        headers
            .get_all(header)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect()
    })
}

/// `GET` and `DELETE` have no meaning without a session: for modern (2026-07-28) traffic they
/// get 405 with `Allow: POST`, as in the Python SDK. 2025-era sessions keep both.
pub(super) fn modern_non_post(headers: &HeaderMap) -> Option<Response> {
    let version = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())?;
    if headers.contains_key(SESSION_HEADER) || crate::gateway::SUPPORTED_VERSIONS.contains(&version)
    {
        return None;
    }
    Some((StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response())
}

#[cfg(test)]
mod tests;
