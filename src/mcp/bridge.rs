//! Translation between the protocol eras, as pure functions on JSON values.
//!
//! The gateway speaks to each upstream in the era it detected (2026-07-28 first, else
//! 2025-11-25) and to each client in the client's era. What changes between them, for a
//! request in flight:
//!
//! - **Envelope.** A modern request carries protocol version, client info and client
//!   capabilities in `params._meta` ([`with_envelope`]); a 2025-era request carries none of it
//!   ([`without_envelope`]).
//! - **Server→client input.** A 2025 server sends `sampling/createMessage`,
//!   `elicitation/create` or `roots/list` as requests in the middle of a call; a modern server
//!   answers the call with an [`InputRequired`] result instead, and the client retries the call
//!   with `inputResponses` and the echoed `requestState` ([`with_input_responses`]).
//! - **Result fields.** Modern results carry `resultType` (and lists `ttlMs` / `cacheScope`),
//!   which a 2025 client must not see (`modern::strip_modern_fields`).
//!
//! ```
//! use mcp_budget::mcp::bridge::{input_required, InputRequired};
//! use serde_json::json;
//!
//! let result = json!({
//!     "resultType": "input_required",
//!     "inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "Sure?"}}},
//!     "requestState": "abc",
//! });
//! let asked: InputRequired = input_required(&result).unwrap();
//! assert_eq!(asked.requests[0].0, "q");
//! assert_eq!(asked.request_state.as_deref(), Some("abc"));
//! ```

use serde_json::{Map, Value, json};

use super::meta::{
    META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION,
    META_SERVER_INFO,
};

/// Prefix of the modern envelope keys in `_meta`.
pub const ENVELOPE_PREFIX: &str = "io.modelcontextprotocol/";

/// `resultType` of a result that asks the client for input first.
pub const INPUT_REQUIRED: &str = "input_required";

/// `params` with the modern envelope in `_meta` (replacing the protocol version, client info
/// and client capabilities already there; other `_meta` keys, such as `progressToken` or the
/// log level, stay).
#[must_use]
pub fn with_envelope(
    params: Option<&Value>,
    protocol_version: &str,
    client_info: &Value,
    client_capabilities: &Value,
) -> Value {
    let mut obj = match params {
        Some(Value::Object(obj)) => obj.clone(),
        _ => Map::new(),
    };
    // Other modern keys (the log level a request opts in to) stay.
    set_meta(&mut obj, META_PROTOCOL_VERSION, json!(protocol_version));
    set_meta(&mut obj, META_CLIENT_INFO, client_info.clone());
    set_meta(
        &mut obj,
        META_CLIENT_CAPABILITIES,
        client_capabilities.clone(),
    );
    Value::Object(obj)
}

/// Sets `_meta[key]` of request or notification params `obj` (making `_meta` an object first).
pub fn set_meta(obj: &mut Map<String, Value>, key: &str, value: Value) {
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Value::Object(meta) = meta {
        meta.insert(key.to_owned(), value);
    }
}

/// `params` without the modern envelope keys (and without `_meta` if nothing else was in it).
/// `None` when there was nothing to remove.
#[must_use]
pub fn without_envelope(params: &Value) -> Option<Value> {
    let mut obj = params.as_object()?.clone();
    let Some(Value::Object(meta)) = obj.get_mut("_meta") else {
        return None;
    };
    let before = meta.len();
    meta.retain(|k, _| !k.starts_with(ENVELOPE_PREFIX));
    if meta.len() == before {
        return None;
    }
    if meta.is_empty() {
        obj.shift_remove("_meta");
    }
    Some(Value::Object(obj))
}

/// What an `input_required` result asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequired {
    /// `(key, method, params)` of each embedded server→client request, in the server's order.
    pub requests: Vec<(String, String, Value)>,
    /// The opaque state to echo on the retry.
    pub request_state: Option<String>,
}

/// The [`InputRequired`] of a result, or `None` when the result is final.
#[must_use]
pub fn input_required(result: &Value) -> Option<InputRequired> {
    if result.get("resultType").and_then(Value::as_str) != Some(INPUT_REQUIRED) {
        return None;
    }
    let requests = result
        .get("inputRequests")
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(key, req)| {
                    let method = req
                        .get("method")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    let params = req.get("params").cloned().unwrap_or_else(|| json!({}));
                    (key.clone(), method, params)
                })
                .collect()
        })
        .unwrap_or_default();
    Some(InputRequired {
        requests,
        request_state: result
            .get("requestState")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// The `input_required` result asking a modern client for `requests` (`(key, method,
/// params)`), to be retried with `request_state`.
#[must_use]
pub fn input_required_result(requests: &[(String, String, Value)], request_state: &str) -> Value {
    let mut asked = Map::new();
    for (key, method, params) in requests {
        asked.insert(key.clone(), json!({"method": method, "params": params}));
    }
    json!({
        "resultType": INPUT_REQUIRED,
        "inputRequests": asked,
        "requestState": request_state,
    })
}

/// The retry of a request: its params plus the client's `inputResponses` and the echoed
/// `requestState` (previous ones replaced).
#[must_use]
pub fn with_input_responses(
    params: &Value,
    responses: Map<String, Value>,
    request_state: Option<&str>,
) -> Value {
    let mut obj = params.as_object().cloned().unwrap_or_default();
    obj.insert("inputResponses".into(), Value::Object(responses));
    match request_state {
        Some(state) => obj.insert("requestState".into(), json!(state)),
        None => obj.shift_remove("requestState"),
    };
    Value::Object(obj)
}

/// The retry fields of a modern request: `(inputResponses, requestState)`.
#[must_use]
pub fn retry_fields(params: &Value) -> (Option<&Map<String, Value>>, Option<&str>) {
    (
        params.get("inputResponses").and_then(Value::as_object),
        params.get("requestState").and_then(Value::as_str),
    )
}

/// Whether a `notifications/message` of level `level` goes to a modern request whose params
/// are `params`: only when it asked for logs (`_meta` log level) at that level or below.
#[must_use]
pub fn wants_log(params: &Value, level: &str) -> bool {
    params
        .get("_meta")
        .and_then(|m| m.get(META_LOG_LEVEL))
        .and_then(Value::as_str)
        .is_some_and(|asked| level_wanted(asked, level))
}

/// Whether a client that asked for logs at level `wanted` (`logging/setLevel`, or a modern
/// request's `_meta` log level) gets a message at `level`: RFC 5424 severities, `debug`
/// lowest. A message of an unknown level is shown; asking for an unknown level asks for nothing.
#[must_use]
pub fn level_wanted(wanted: &str, level: &str) -> bool {
    let rank = |l: &str| super::LOG_LEVELS.iter().position(|x| *x == l);
    match (rank(wanted), rank(level)) {
        (Some(min), Some(level)) => level >= min,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The client capability a server→client request needs (`sampling`, `elicitation`, `roots`).
#[must_use]
pub fn capability_for(method: &str) -> Option<&'static str> {
    crate::mcp::method::Method::known(method)?.needs_capability()
}

/// The task id a result names, if it started a task: the 2025-11-25 `CreateTaskResult`
/// (`task.taskId`) or the tasks extension's `resultType: "task"` (`taskId`, or `task.taskId`).
#[must_use]
pub fn created_task_id(result: &Value) -> Option<String> {
    let nested = result
        .get("task")
        .and_then(|t| t.get("taskId"))
        .and_then(Value::as_str);
    let flat = (result.get("resultType").and_then(Value::as_str) == Some("task"))
        .then(|| result.get("taskId").and_then(Value::as_str))
        .flatten();
    nested.or(flat).map(str::to_owned)
}

/// What the `server/discover` result of an upstream says: `(capabilities, serverInfo,
/// instructions)`, or `None` when the server does not speak `version`.
#[must_use]
pub fn parse_discover(result: &Value, version: &str) -> Option<(Value, Value, Option<String>)> {
    let speaks = result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(|v| v.as_str() == Some(version)));
    if !speaks {
        return None;
    }
    let server_info = result
        .get("_meta")
        .and_then(|m| m.get(META_SERVER_INFO))
        .or_else(|| result.get("serverInfo"))
        .cloned()
        .unwrap_or(Value::Null);
    Some((
        result
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({})),
        server_info,
        result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned),
    ))
}

/// The HTTP headers a modern request mirrors from its body (`MCP-Protocol-Version`,
/// `Mcp-Method`, and `Mcp-Name` for the methods that name a target), as `(name, value)`;
/// `None` for a message without the modern envelope. Values that are not plain visible ASCII
/// are sent base64-encoded (`=?base64?…?=`).
#[must_use]
pub fn http_headers(msg: &crate::jsonrpc::Message) -> Option<Vec<(&'static str, String)>> {
    let meta = super::modern::request_meta(msg)?;
    let method = msg.method()?;
    let mut headers = vec![
        ("mcp-protocol-version", meta.protocol_version),
        ("mcp-method", super::modern::encode_header_value(method)),
    ];
    let params: Value = msg.params_as().unwrap_or(Value::Null);
    if let Some(name) = super::modern::target_name(method, &params) {
        headers.push(("mcp-name", super::modern::encode_header_value(&name)));
    }
    Some(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_replaces_old_keys_and_keeps_the_rest() {
        let params = json!({"name": "x", "_meta": {
            "progressToken": 7,
            "io.modelcontextprotocol/logLevel": "info",
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "client"},
        }});
        let out = with_envelope(
            Some(&params),
            "2026-07-28",
            &json!({"name": "gw"}),
            &json!({"sampling": {}}),
        );
        assert_eq!(out["name"], "x");
        assert_eq!(out["_meta"]["progressToken"], 7);
        assert_eq!(out["_meta"][META_LOG_LEVEL], "info");
        assert_eq!(out["_meta"][META_CLIENT_INFO]["name"], "gw");
        assert_eq!(
            out["_meta"][META_CLIENT_CAPABILITIES],
            json!({"sampling": {}})
        );
        let bare = with_envelope(None, "2026-07-28", &Value::Null, &json!({}));
        assert_eq!(bare["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
    }

    #[test]
    fn stripping_the_envelope_drops_an_emptied_meta_only() {
        let params = json!({"a": 1, "_meta": {"io.modelcontextprotocol/protocolVersion": "v"}});
        assert_eq!(without_envelope(&params), Some(json!({"a": 1})));
        let params = json!({"_meta": {"progressToken": 1, "io.modelcontextprotocol/x": 2}});
        assert_eq!(
            without_envelope(&params),
            Some(json!({"_meta": {"progressToken": 1}}))
        );
        assert_eq!(
            without_envelope(&json!({"_meta": {"progressToken": 1}})),
            None
        );
        assert_eq!(without_envelope(&json!({"a": 1})), None);
    }

    #[test]
    fn input_required_round_trips() {
        let requests = vec![
            (
                "a".to_owned(),
                "sampling/createMessage".to_owned(),
                json!({"maxTokens": 5}),
            ),
            ("b".to_owned(), "roots/list".to_owned(), json!({})),
        ];
        let result = input_required_result(&requests, "state-1");
        let parsed = input_required(&result).unwrap();
        assert_eq!(parsed.requests, requests);
        assert_eq!(parsed.request_state.as_deref(), Some("state-1"));
        assert!(input_required(&json!({"resultType": "complete"})).is_none());
        assert!(input_required(&json!({"content": []})).is_none());
    }

    #[test]
    fn retry_carries_responses_and_state() {
        let mut responses = Map::new();
        responses.insert("a".into(), json!({"action": "accept"}));
        let retry = with_input_responses(
            &json!({"name": "t", "requestState": "old"}),
            responses,
            Some("new"),
        );
        assert_eq!(retry["requestState"], "new");
        assert_eq!(retry["inputResponses"]["a"]["action"], "accept");
        let (resp, state) = retry_fields(&retry);
        assert!(resp.is_some_and(|r| r.contains_key("a")));
        assert_eq!(state, Some("new"));
        let retry = with_input_responses(&json!({"requestState": "old"}), Map::new(), None);
        assert!(retry.get("requestState").is_none());
    }

    #[test]
    fn logs_need_an_opt_in_at_a_level() {
        let asked = json!({"_meta": {META_LOG_LEVEL: "warning"}});
        assert!(wants_log(&asked, "error"));
        assert!(wants_log(&asked, "warning"));
        assert!(!wants_log(&asked, "info"));
        assert!(!wants_log(&json!({}), "emergency"));
    }

    #[test]
    fn task_ids_are_found_in_both_shapes() {
        assert_eq!(
            created_task_id(&json!({"task": {"taskId": "t1", "status": "working"}})),
            Some("t1".into())
        );
        assert_eq!(
            created_task_id(&json!({"resultType": "task", "taskId": "t2"})),
            Some("t2".into())
        );
        assert_eq!(created_task_id(&json!({"taskId": "t3"})), None);
    }

    #[test]
    fn modern_requests_mirror_their_headers() {
        use crate::jsonrpc::{Id, Message, to_raw};
        let params = with_envelope(
            Some(&json!({"name": "héllo"})),
            "2026-07-28",
            &Value::Null,
            &json!({}),
        );
        let msg = Message::request(Id::Number(1), "tools/call", Some(to_raw(&params)));
        let headers = http_headers(&msg).unwrap();
        assert_eq!(headers[0], ("mcp-protocol-version", "2026-07-28".into()));
        assert_eq!(headers[1], ("mcp-method", "tools/call".into()));
        assert_eq!(headers[2].0, "mcp-name");
        let decoded = crate::mcp::modern::decode_header_value(&headers[2].1).unwrap();
        assert_eq!(decoded, "héllo");
        let legacy = Message::request(Id::Number(1), "tools/list", None);
        assert!(http_headers(&legacy).is_none());
    }

    #[test]
    fn discover_needs_the_version() {
        let result = json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s"}},
        });
        let (caps, info, instructions) = parse_discover(&result, "2026-07-28").unwrap();
        assert_eq!(caps, json!({"tools": {}}));
        assert_eq!(info["name"], "s");
        assert!(instructions.is_none());
        assert!(parse_discover(&result, "2099-01-01").is_none());
        assert!(parse_discover(&json!({}), "2026-07-28").is_none());
    }
}
