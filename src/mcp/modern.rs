//! The 2026-07-28 ("modern", stateless) era: no `initialize`, no session; every request carries
//! its protocol version, client info and capabilities in `params._meta`; servers answer
//! `server/discover`; results carry `resultType`, list results `ttlMs` and `cacheScope`; on HTTP
//! the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers mirror the body.
//!
//! Pure functions only: the transports call them.
//!
//! ```
//! use mcp_budget::jsonrpc::Message;
//! use mcp_budget::mcp::modern::{request_meta, MODERN_VERSION};
//!
//! let msg = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#)?;
//! let meta = request_meta(&msg).expect("a modern request");
//! assert_eq!(meta.protocol_version, MODERN_VERSION);
//! # Ok::<(), mcp_budget::jsonrpc::DecodeError>(())
//! ```

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::error::Protocol;
use crate::jsonrpc::code::{HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION};
use crate::jsonrpc::{ErrorObject, INVALID_PARAMS, METHOD_NOT_FOUND, Message, to_raw};
use crate::mcp::meta::{
    META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION,
    META_PROTOCOL_VERSION_ESCAPED, META_SERVER_INFO,
};
use crate::mcp::method::Method;

/// The stateless protocol revision.
pub const MODERN_VERSION: &str = "2026-07-28";
/// Modern versions this gateway speaks.
pub const MODERN_VERSIONS: &[&str] = &[MODERN_VERSION];

/// How long a client may cache a list result (milliseconds).
pub const LIST_TTL_MS: u64 = 60_000;

/// What a modern request says about its client.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestMeta {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub protocol_version: String,
    /// `io.modelcontextprotocol/clientCapabilities` (`{}` when absent).
    pub client_capabilities: Value,
    /// `io.modelcontextprotocol/clientInfo` (`null` when absent).
    pub client_info: Value,
}

/// The modern `_meta` of a request, or `None` for a 2025-era message.
#[must_use]
pub fn request_meta(msg: &Message) -> Option<RequestMeta> {
    let text = msg.params.as_ref()?.get();
    // Cheap test first: most 2025-era traffic never pays for a parse. Encoders that escape `/`
    // (PHP's `json_encode`, some Java ones) write the key as `…protocol\/protocolVersion`. A key
    // spelled with `\u` escapes is not looked for: every params with a `\u` would pay a parse.
    if !text.contains(META_PROTOCOL_VERSION) && !text.contains(META_PROTOCOL_VERSION_ESCAPED) {
        return None;
    }
    let params: Value = serde_json::from_str(text).ok()?;
    meta_of(params.get("_meta")?)
}

/// The modern fields of a request's `_meta` (already parsed), or `None` when it names no
/// protocol version. [`request_meta`] without the test of the params' text.
#[must_use]
pub fn meta_of(meta: &Value) -> Option<RequestMeta> {
    let meta = meta.as_object()?;
    Some(RequestMeta {
        protocol_version: meta.get(META_PROTOCOL_VERSION)?.as_str()?.to_owned(),
        client_capabilities: meta
            .get(META_CLIENT_CAPABILITIES)
            .cloned()
            .unwrap_or_else(|| json!({})),
        client_info: meta.get(META_CLIENT_INFO).cloned().unwrap_or(Value::Null),
    })
}

/// Checks the per-request envelope of a modern request: `params._meta` must be an object that
/// carries `io.modelcontextprotocol/protocolVersion` (a string) and
/// `io.modelcontextprotocol/clientCapabilities`; `clientInfo` is optional (a SHOULD).
///
/// # Errors
/// The `-32602` error naming what is missing.
pub fn check_envelope(msg: &Message) -> Result<(), ErrorObject> {
    let params: Value = msg.params_as().unwrap_or(Value::Null);
    check_meta_envelope(params.get("_meta"))
}

/// [`check_envelope`] of a request's `_meta` (already parsed; `None` when there is none).
///
/// # Errors
/// The `-32602` error naming what is missing.
pub fn check_meta_envelope(meta: Option<&Value>) -> Result<(), ErrorObject> {
    let invalid = |message: String| Err(Protocol::InvalidEnvelope(message).into_object());
    let Some(meta) = meta.and_then(Value::as_object) else {
        return invalid(format!(
            "params._meta must be an object carrying {META_PROTOCOL_VERSION:?} and \
             {META_CLIENT_CAPABILITIES:?}"
        ));
    };
    let missing: Vec<&str> = [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES]
        .into_iter()
        .filter(|k| !meta.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return invalid(format!(
            "params._meta lacks the required key(s) {}",
            missing.join(", ")
        ));
    }
    if !meta[META_PROTOCOL_VERSION].is_string() {
        return invalid(format!("{META_PROTOCOL_VERSION} must be a string"));
    }
    // The opt-in to logs, when there is one, names a level MCP knows.
    let log_level = META_LOG_LEVEL;
    if let Some(problem) = meta
        .get(log_level)
        .and_then(|l| super::log_level_problem(Some(l)))
    {
        return invalid(format!("{log_level}: {problem}"));
    }
    Ok(())
}

/// The `-32601` error for a method that 2026-07-28 removed (see
/// [`Method::removed_in_modern`]): a modern request for one is answered `-32601` (HTTP 404),
/// never served as if a session existed.
#[must_use]
pub fn removed_method(method: &str) -> ErrorObject {
    Protocol::RemovedMethod {
        method: method.to_owned(),
        version: MODERN_VERSION,
    }
    .into_object()
}

/// The HTTP status of a modern JSON-RPC error reply (2026-07-28 transport rules, as the
/// Python SDK's `ERROR_CODE_HTTP_STATUS`): `-32601` is 404; parse, request, params, header,
/// capability and version errors are 400; anything else is 200.
#[must_use]
pub fn http_status(code: i64) -> u16 {
    match code {
        METHOD_NOT_FOUND => 404,
        crate::jsonrpc::PARSE_ERROR
        | crate::jsonrpc::INVALID_REQUEST
        | INVALID_PARAMS
        | HEADER_MISMATCH
        | MISSING_CAPABILITY
        | UNSUPPORTED_VERSION => 400,
        crate::jsonrpc::code::RATE_LIMITED => 429,
        _ => 200,
    }
}

/// The `-32022` error for a version the gateway does not speak.
#[must_use]
pub fn unsupported_version(requested: &str) -> ErrorObject {
    Protocol::UnsupportedVersion {
        requested: requested.to_owned(),
        supported: MODERN_VERSIONS,
    }
    .into_object()
}

/// A `-32020` header error.
#[must_use]
pub fn header_mismatch(message: impl Into<String>) -> ErrorObject {
    Protocol::HeaderMismatch(message.into()).into_object()
}

/// The mirrored headers of a modern HTTP request, as received.
#[derive(Debug, Clone, Copy, Default)]
pub struct MirroredHeaders<'a> {
    /// `MCP-Protocol-Version`.
    pub protocol_version: Option<&'a str>,
    /// `Mcp-Method`.
    pub method: Option<&'a str>,
    /// `Mcp-Name`.
    pub name: Option<&'a str>,
}

/// A header value as sent: as is when plain visible ASCII, else `=?base64?…?=` (what
/// [`decode_header_value`] reads).
#[must_use]
pub fn encode_header_value(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !value.starts_with("=?");
    if plain {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

/// Decodes a header value that may use the `=?base64?…?=` sentinel.
///
/// # Errors
/// A description when the sentinel holds invalid base64 or invalid UTF-8.
pub fn decode_header_value(value: &str) -> Result<String, String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(b64) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("invalid base64 in header value: {e}"))?;
            String::from_utf8(bytes).map_err(|_| "base64 header value is not UTF-8".to_owned())
        }
        None => Ok(value.to_owned()),
    }
}

/// The name a request targets (`params.name` of `tools/call` / `prompts/get`, `params.uri` of
/// `resources/read`), which `Mcp-Name` must mirror.
#[must_use]
pub fn target_name(method: &str, params: &Value) -> Option<String> {
    let key = Method::known(method)?.mirrored_field()?;
    params.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Checks the mirrored headers of a modern request against its body: `MCP-Protocol-Version`
/// must be present and equal the envelope's version, `Mcp-Method` the body's method, and for
/// the methods of [`Method::mirrored_field`] `Mcp-Name` (plain or `=?base64?…?=`) the named field.
///
/// # Errors
/// The `-32020` error object naming what is missing or differs.
pub fn check_headers(
    msg: &Message,
    meta: &RequestMeta,
    headers: MirroredHeaders<'_>,
) -> Result<(), ErrorObject> {
    let params: Value = msg.params_as().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or_default();
    let target = target_name(method, &params);
    check_mirrored(method, target.as_deref(), meta, headers)
}

/// [`check_headers`] of a request already read: its `method` and the `target` of a
/// name-bearing method ([`target_name`]).
///
/// # Errors
/// The `-32020` error object naming what is missing or differs.
pub fn check_mirrored(
    method: &str,
    target: Option<&str>,
    meta: &RequestMeta,
    headers: MirroredHeaders<'_>,
) -> Result<(), ErrorObject> {
    match headers.protocol_version {
        None => return Err(header_mismatch("missing MCP-Protocol-Version header")),
        Some(v) if v != meta.protocol_version => {
            return Err(header_mismatch(format!(
                "MCP-Protocol-Version header {v:?} differs from _meta protocolVersion {:?}",
                meta.protocol_version
            )));
        }
        Some(_) => {}
    }
    match headers.method {
        None => return Err(header_mismatch("missing Mcp-Method header")),
        Some(h) if h != method => {
            return Err(header_mismatch(format!(
                "Mcp-Method header {h:?} differs from the body's method {method:?}"
            )));
        }
        Some(_) => {}
    }
    if let Some(target) = target {
        let Some(raw) = headers.name else {
            return Err(header_mismatch(format!(
                "missing Mcp-Name header (the body names {target:?})"
            )));
        };
        let name = decode_header_value(raw).map_err(header_mismatch)?;
        if name != target {
            return Err(header_mismatch(format!(
                "Mcp-Name header {name:?} differs from the body's {target:?}"
            )));
        }
    }
    Ok(())
}

/// Adds the modern result fields: `resultType` (unless the result has one), and for cacheable
/// results ([`Method::result_is_cacheable`]) `ttlMs` and `cacheScope` (`private` when what the caller sees
/// depends on who it is). An `input_required` result is interim and gets no cache hints.
#[must_use]
pub fn decorate_result(
    method: &Method,
    result: &serde_json::value::RawValue,
    private: bool,
) -> Box<serde_json::value::RawValue> {
    let Ok(Value::Object(mut obj)) = serde_json::from_str::<Value>(result.get()) else {
        return result.to_owned();
    };
    let result_type = obj
        .entry("resultType")
        .or_insert_with(|| Value::String("complete".into()));
    if method.result_is_cacheable() && result_type == "complete" {
        obj.entry("ttlMs").or_insert_with(|| json!(LIST_TTL_MS));
        obj.entry("cacheScope")
            .or_insert_with(|| Value::String(if private { "private" } else { "public" }.into()));
    }
    to_raw(&Value::Object(obj))
}

/// Removes the modern-only fields from a result for a 2025-era client.
#[must_use]
pub fn strip_modern_fields(
    result: &serde_json::value::RawValue,
) -> Box<serde_json::value::RawValue> {
    if !result.get().contains("resultType") {
        return result.to_owned();
    }
    let Ok(Value::Object(mut obj)) = serde_json::from_str::<Value>(result.get()) else {
        return result.to_owned();
    };
    for key in ["resultType", "ttlMs", "cacheScope"] {
        obj.shift_remove(key);
    }
    to_raw(&Value::Object(obj))
}

/// The `server/discover` result.
#[must_use]
pub fn discover_result(
    capabilities: &Value,
    server_info: &Value,
    instructions: Option<&str>,
) -> Value {
    let mut result = Map::new();
    result.insert("resultType".into(), json!("complete"));
    result.insert("supportedVersions".into(), json!(MODERN_VERSIONS));
    result.insert("capabilities".into(), capabilities.clone());
    result.insert("serverInfo".into(), server_info.clone());
    if let Some(text) = instructions {
        result.insert("instructions".into(), json!(text));
    }
    // A cacheable result (2026-07-28): what the gateway offers changes only with its
    // upstreams, and is the same for every caller.
    result.insert("ttlMs".into(), json!(LIST_TTL_MS));
    result.insert("cacheScope".into(), json!("public"));
    result.insert("_meta".into(), json!({ META_SERVER_INFO: server_info }));
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modern(method: &str, params: &Value) -> (Message, RequestMeta) {
        let mut params = params.clone();
        params["_meta"] = json!({META_PROTOCOL_VERSION: MODERN_VERSION});
        let msg = Message::request(crate::jsonrpc::Id::Number(1), method, Some(to_raw(&params)));
        let meta = request_meta(&msg).unwrap();
        (msg, meta)
    }

    #[test]
    fn headers_must_mirror_the_body() {
        let (msg, meta) = modern("tools/call", &json!({"name": "café"}));
        let ok = MirroredHeaders {
            protocol_version: Some(MODERN_VERSION),
            method: Some("tools/call"),
            name: Some("=?base64?Y2Fmw6k=?="),
        };
        assert!(check_headers(&msg, &meta, ok).is_ok());
        for bad in [
            MirroredHeaders { method: None, ..ok },
            MirroredHeaders {
                method: Some("tools/list"),
                ..ok
            },
            MirroredHeaders { name: None, ..ok },
            MirroredHeaders {
                name: Some("cafe"),
                ..ok
            },
            MirroredHeaders {
                name: Some("=?base64?!!?="),
                ..ok
            },
            MirroredHeaders {
                protocol_version: Some("2025-11-25"),
                ..ok
            },
            MirroredHeaders {
                protocol_version: None,
                ..ok
            },
        ] {
            assert_eq!(
                check_headers(&msg, &meta, bad).unwrap_err().code,
                HEADER_MISMATCH
            );
        }
    }

    #[test]
    fn the_envelope_needs_version_and_capabilities_but_not_client_info() {
        let request = |params: Value| {
            Message::request(
                crate::jsonrpc::Id::Number(1),
                "tools/list",
                Some(to_raw(&params)),
            )
        };
        let full = json!({"_meta": {
            META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_CAPABILITIES: {},
        }});
        assert!(check_envelope(&request(full)).is_ok());
        for bad in [
            json!({}),
            json!({"_meta": {META_CLIENT_CAPABILITIES: {}}}),
            json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION}}),
            json!({"_meta": {META_PROTOCOL_VERSION: 7, META_CLIENT_CAPABILITIES: {}}}),
        ] {
            assert_eq!(
                check_envelope(&request(bad)).unwrap_err().code,
                INVALID_PARAMS
            );
        }
    }

    #[test]
    fn error_codes_map_to_the_transport_statuses() {
        assert_eq!(http_status(METHOD_NOT_FOUND), 404);
        for code in [
            HEADER_MISMATCH,
            MISSING_CAPABILITY,
            UNSUPPORTED_VERSION,
            INVALID_PARAMS,
        ] {
            assert_eq!(http_status(code), 400);
        }
        assert_eq!(http_status(-32603), 200);
        assert_eq!(removed_method("ping").code, METHOD_NOT_FOUND);
    }

    #[test]
    fn resource_reads_are_cacheable_and_input_required_results_are_not() {
        let read = decorate_result(
            &Method::ResourcesRead,
            &to_raw(&json!({"contents": []})),
            false,
        );
        assert!(read.get().contains("\"ttlMs\""));
        let interim = to_raw(&json!({"resultType": "input_required", "inputRequests": {}}));
        let interim = decorate_result(&Method::ResourcesRead, &interim, false);
        assert!(!interim.get().contains("ttlMs"));
    }

    /// Found by the `modern` fuzz check (`tests/fixtures/fuzz/modern/`): a valid envelope whose
    /// key was written `io.modelcontextprotocol\/protocolVersion` was taken for a 2025-era
    /// request (HTTP: `-32020` "no protocol version in _meta").
    #[test]
    fn an_envelope_key_with_an_escaped_slash_is_still_modern() {
        let params = format!(
            r#"{{"_meta":{{"io.modelcontextprotocol\/protocolVersion":"2026-07-28","{META_CLIENT_CAPABILITIES}":{{}}}}}}"#
        );
        let raw = serde_json::value::RawValue::from_string(params).unwrap();
        let msg = Message::request(crate::jsonrpc::Id::Number(1), "tools/list", Some(raw));
        assert!(check_envelope(&msg).is_ok());
        assert_eq!(request_meta(&msg).unwrap().protocol_version, MODERN_VERSION);
    }

    #[test]
    fn legacy_messages_have_no_modern_meta() {
        let msg = Message::request(
            crate::jsonrpc::Id::Number(1),
            "tools/list",
            Some(to_raw(&json!({"_meta": {"progressToken": 1}}))),
        );
        assert!(request_meta(&msg).is_none());
    }

    #[test]
    fn list_results_get_cache_hints_and_lose_them_for_legacy() {
        let raw = to_raw(&json!({"tools": []}));
        let modern = decorate_result(&Method::ToolsList, &raw, true);
        let v: Value = serde_json::from_str(modern.get()).unwrap();
        assert_eq!(v["resultType"], "complete");
        assert_eq!(v["cacheScope"], "private");
        assert_eq!(v["ttlMs"], LIST_TTL_MS);
        assert_eq!(strip_modern_fields(&modern).get(), r#"{"tools":[]}"#);
        let call = decorate_result(&Method::ToolsCall, &to_raw(&json!({"content": []})), false);
        assert!(!call.get().contains("ttlMs"));
    }

    #[test]
    fn unsupported_version_lists_what_is_supported() {
        let err = unsupported_version("2099-01-01");
        assert_eq!(err.code, UNSUPPORTED_VERSION);
        let data: Value = serde_json::from_str(err.data.unwrap().get()).unwrap();
        assert_eq!(data["supported"], json!([MODERN_VERSION]));
        assert_eq!(data["requested"], "2099-01-01");
    }
}
