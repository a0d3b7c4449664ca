//! Each variant routed through the door pins its whole object: code, message and `data`, the
//! bytes its hand-built object had before.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;

/// The object as JSON: `code`, `message` and `data` (with its `type`).
#[allow(clippy::needless_pass_by_value)] // the tests build each error in the call
fn object(err: Error) -> Value {
    serde_json::to_value(err.to_error_object()).expect("an error object serializes")
}

#[test]
fn denied() {
    let err = Error::Denied {
        client: "ci".into(),
        tool: "github__delete_repo".into(),
        reason: "deny \"*delete*\"".into(),
        audit_id: "a1".into(),
    };
    assert_eq!(
        object(err),
        json!({
            "code": -32000,
            "message": "client \"ci\" may not call github__delete_repo: deny \"*delete*\" (if it \
                        should, the gateway's operator extends this client's [[client]] allow \
                        list or rules; audit id a1)",
            "data": {
                "type": "mcp_budget.authorization.denied",
                "tool": "github__delete_repo",
                "reason": "deny \"*delete*\"",
                "audit_id": "a1",
            },
        })
    );
}

#[test]
fn limited() {
    let limited = |which, upstream: Option<&str>| Error::Limited {
        client: "ci".into(),
        upstream: upstream.map(str::to_owned),
        which,
        retry_after_ms: 250,
    };
    assert_eq!(
        object(limited(Which::UpstreamRate, Some("github"))),
        json!({
            "code": -32023,
            "message": "client \"ci\" is over its calls per second to upstream github ([limits] \
                        upstream_calls_per_sec); retry in 250 ms",
            "data": {
                "type": "mcp_budget.limit.rate",
                "retryAfterMs": 250,
                "limit": "upstream_calls_per_sec",
                "client": "ci",
                "upstream": "github",
            },
        })
    );
    let rate = object(limited(Which::ClientRate, None));
    assert_eq!(
        rate["message"],
        "client \"ci\" is over its calls per second ([limits] calls_per_sec); retry in 250 ms"
    );
    assert_eq!(rate["data"]["upstream"], Value::Null);
    let in_flight = object(limited(Which::InFlight, None));
    assert_eq!(in_flight["data"]["type"], "mcp_budget.limit.in_flight");
    assert_eq!(
        in_flight["message"],
        "client \"ci\" is over its calls in flight ([limits] in_flight); retry in 250 ms"
    );
}

#[test]
fn quarantined() {
    let held = |reason, what| {
        Error::Quarantined(Box::new(Quarantine {
            what,
            name: "calc__add".into(),
            server: "calc".into(),
            reason,
            kind: kind::TOOL_CHANGED,
            old: Some("aa".into()),
            new: "bb".into(),
            changed: vec!["description", "schema"],
        }))
    };
    assert_eq!(
        object(held("changed", "tool")),
        json!({
            "code": -32000,
            "message": "tool calc__add is quarantined: its description, schema changed since it \
                        was pinned; review it and update the lock (mcp-budget pin), or restart \
                        the gateway to trust it anew",
            "data": {
                "type": "mcp_budget.tool.changed",
                "tool": "calc__add",
                "server": "calc",
                "reason": "changed",
                "old": "aa",
                "new": "bb",
                "changed": ["description", "schema"],
            },
        })
    );
    let prompt = object(held("unknown", "prompt"));
    assert_eq!(
        prompt["message"],
        "prompt calc__add is quarantined: it is not in the lockfile; review it and update the \
         lock (mcp-budget pin)"
    );
    assert_eq!(prompt["data"]["prompt"], "calc__add");
    assert_eq!(
        object(held("steering", "tool"))["message"],
        "tool calc__add is quarantined: its definition tries to steer the model; review it and \
         add it to [sanitize] allow"
    );
}

#[test]
fn http_refusals() {
    let refused = Http::Refused {
        kind: kind::HTTP_NOT_ACCEPTABLE,
        message: "send Accept: application/json".into(),
    };
    assert_eq!(
        object(refused.into()),
        json!({
            "code": -32600,
            "message": "send Accept: application/json",
            "data": {"type": "mcp_budget.http.not_acceptable"},
        })
    );
    assert_eq!(
        object(
            Http::BodyTimeout {
                limit: Duration::from_millis(1500)
            }
            .into()
        ),
        json!({
            "code": -32600,
            "message": "the request body did not arrive within 1.5 s \
                        (downstream.body_timeout_secs): send the whole body without pauses",
            "data": {"type": "mcp_budget.http.body_timeout", "limit_secs": 1.5},
        })
    );
    assert_eq!(
        object(
            Http::TooManyConnections {
                message: "too many".into(),
                limit: 4
            }
            .into()
        ),
        json!({
            "code": -32600,
            "message": "too many",
            "data": {"type": "mcp_budget.http.too_many_connections", "limit": 4},
        })
    );
}

#[test]
fn protocol_errors() {
    assert_eq!(
        object(Protocol::InvalidEnvelope("params._meta lacks x".into()).into()),
        json!({
            "code": -32602,
            "message": "params._meta lacks x",
            "data": {"type": "mcp_budget.protocol.invalid_envelope"},
        })
    );
    let removed = Protocol::RemovedMethod {
        method: "initialize".into(),
        version: "2026-07-28",
    };
    assert_eq!(
        object(removed.into()),
        json!({
            "code": -32601,
            "message": "method \"initialize\" does not exist in protocol version 2026-07-28",
            "data": {"type": "mcp_budget.method.not_found"},
        })
    );
    let unsupported = Protocol::UnsupportedVersion {
        requested: "2099-01-01".into(),
        supported: &["2026-07-28"],
    };
    assert_eq!(
        object(unsupported.into()),
        json!({
            "code": -32022,
            "message": "protocol version \"2099-01-01\" is not supported; supported: 2026-07-28",
            "data": {
                "type": "mcp_budget.protocol.unsupported_version",
                "supported": ["2026-07-28"],
                "requested": "2099-01-01",
            },
        })
    );
    assert_eq!(
        object(Protocol::HeaderMismatch("Mcp-Method differs".into()).into()),
        json!({
            "code": -32020,
            "message": "Mcp-Method differs",
            "data": {"type": "mcp_budget.protocol.header_mismatch"},
        })
    );
}

#[test]
fn catalog_answers_of_tools_describe() {
    assert_eq!(
        object(Error::NotAvailable {
            names: vec!["a".into(), "b".into()]
        }),
        json!({
            "code": -32002,
            "message": "No tool named a, b is available to this client; tools/catalog lists the \
                        ones that are",
            "data": {"type": "mcp_budget.catalog.not_found", "unknownNames": ["a", "b"]},
        })
    );
    assert_eq!(
        object(Error::Params("tools/describe needs \"names\"".into())),
        json!({
            "code": -32602,
            "message": "tools/describe needs \"names\"",
            "data": {"type": "mcp_budget.request.invalid_params"},
        })
    );
}

#[test]
fn answers_to_an_upstream() {
    assert_eq!(
        object(Error::CapabilityUndeclared {
            capability: "sampling".into()
        }),
        json!({
            "code": -32601,
            "message": "the client did not declare the \"sampling\" capability",
            "data": {"type": "mcp_budget.client.missing_capability"},
        })
    );
    assert_eq!(
        object(Error::NoAnswer),
        json!({
            "code": -32602,
            "message": "the client gave no answer to this request",
            "data": {"type": "mcp_budget.client.no_answer"},
        })
    );
    assert_eq!(
        object(Error::Cancelled { reason: None }),
        json!({
            "code": -32800,
            "message": "the request was cancelled by the client: no reason given",
            "data": {"type": "mcp_budget.request.cancelled"},
        })
    );
    assert_eq!(
        object(Error::Cancelled {
            reason: Some("user".into())
        })["message"],
        "the request was cancelled by the client: user"
    );
    assert_eq!(
        object(Error::UpstreamRefused {
            status: "404 Not Found".into(),
            text: "nope".into()
        }),
        json!({
            "code": -32600,
            "message": "the upstream refused the request: HTTP 404 Not Found: nope",
            "data": {"type": "mcp_budget.upstream.protocol"},
        })
    );
}
