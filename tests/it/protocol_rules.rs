//! Protocol rules the gateway holds its clients to, against `mcp-server-time` (`PyPI`) behind
//! it: on stdio, no 2025-era request but `initialize` / `ping` before `initialize` (a
//! 2026-07-28 request needs no handshake); a log level outside RFC 5424's eight refused with
//! `-32602`, in `logging/setLevel` (2025) or a request's `_meta` (2026-07-28), on both
//! downstreams.

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, error_type, http_client, post};

const ACCEPT: &str = "application/json, text/event-stream";
const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// A 2026-07-28 request's `params`: `params` with the modern `_meta` envelope.
fn modern(mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    params
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_refuses_a_2025_request_before_initialize_but_not_a_2026_one() {
    let mut gw = Gateway::start("rules-before-init", Mode::Stdio, &[Up::time("time")]).await;
    let client = gw.client();
    let early = client.request("tools/list", json!({})).await;
    assert_eq!(early["error"]["code"], -32600, "{early}");
    assert_eq!(error_type(&early), "mcp_budget.session.invalid", "{early}");
    let message = early["error"]["message"].as_str().unwrap();
    assert!(message.contains("send initialize first"), "{message}");
    let call = client
        .call_tool("time__get_current_time", json!({"timezone": "UTC"}))
        .await;
    assert_eq!(error_type(&call), "mcp_budget.session.invalid", "{call}");

    let pong = client.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    // A 2026-07-28 client has no `initialize`: its requests are served.
    let listed = client.request("tools/list", modern(json!({}))).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");

    client.initialize().await;
    let listed = client.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().expect("tools listed");
    assert!(
        tools.iter().any(|t| t["name"] == "time__get_current_time"),
        "{listed}"
    );
    gw.stop_and_check().await;
}

/// `{"level": level}`, and a 2026-07-28 `tools/list` whose `_meta` asks for logs at `level`.
fn level_requests(level: &str) -> (Value, Value) {
    let mut listed = modern(json!({}));
    listed["_meta"][LOG_LEVEL] = json!(level);
    (json!({ "level": level }), listed)
}

fn assert_level_refused(answer: &Value, kind: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(error_type(answer), kind, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"nonsense\"") && message.contains("emergency"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_refuses_a_log_level_rfc_5424_does_not_name() {
    let mut gw = Gateway::start("rules-level-stdio", Mode::Stdio, &[Up::time("time")]).await;
    let client = gw.client();
    client.initialize().await;
    let (set, listed) = level_requests("nonsense");
    let refused = client.request("logging/setLevel", set).await;
    assert_level_refused(&refused, "mcp_budget.request.invalid_params");
    let refused = client.request("tools/list", listed).await;
    assert_level_refused(&refused, "mcp_budget.protocol.invalid_envelope");
    for level in ["debug", "warning", "emergency"] {
        let (set, listed) = level_requests(level);
        let done = client.request("logging/setLevel", set).await;
        assert_eq!(done["result"], json!({}), "{done}");
        let done = client.request("tools/list", listed).await;
        assert!(done["result"]["tools"].is_array(), "{done}");
    }
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refuses_a_log_level_rfc_5424_does_not_name() {
    let gw = Gateway::start("rules-level-http", Mode::Http, &[Up::time("time")]).await;
    let http = http_client();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "it-rules", "version": "0"}}});
    let opened = post(&http, gw.url(), ACCEPT, &[], &init).await;
    let session = opened.session().expect("a session");
    let in_session = [("mcp-session-id", session.as_str())];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(&http, gw.url(), ACCEPT, &in_session, &initialized).await;
    let modern_headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    for (level, ok) in [("nonsense", false), ("notice", true)] {
        let (set, listed) = level_requests(level);
        let set = json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": set});
        let legacy = post(&http, gw.url(), ACCEPT, &in_session, &set)
            .await
            .json();
        let listed = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": listed});
        let modern = post(&http, gw.url(), ACCEPT, &modern_headers, &listed).await;
        if ok {
            assert_eq!(legacy["result"], json!({}), "{legacy}");
            assert_eq!(modern.status, 200, "{}", modern.text);
            assert!(
                modern.json()["result"]["tools"].is_array(),
                "{}",
                modern.text
            );
        } else {
            assert_level_refused(&legacy, "mcp_budget.request.invalid_params");
            assert_eq!(modern.status, 400, "{}", modern.text);
            assert_level_refused(&modern.json(), "mcp_budget.protocol.invalid_envelope");
        }
    }
    gw.stop_and_check().await;
}
