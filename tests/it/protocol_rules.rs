//! Protocol rules the gateway holds its clients to, against `mcp-server-time` (`PyPI`) behind
//! it: on stdio, no 2025-era request but `initialize` / `ping` before `initialize` (a
//! 2026-07-28 request needs no handshake); a log level outside RFC 5424's eight refused with
//! `-32602`, in `logging/setLevel` (2025) or a request's `_meta` (2026-07-28), on both
//! downstreams; a message escaping an unpaired UTF-16 surrogate (`\\ud800`) is not Unicode
//! text: refused `-32700` from a client (both downstreams), an error of the call from an upstream
//! (`tests/peers/fake_server.py`, whose Python `json.dumps` writes one).

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, WAIT, error_type, first_text, http_client, post};

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

/// A `tools/call` of the fake server's `echo` with id `id`, its message written as `escaped`
/// (JSON string text, escapes as written).
fn echo_line(id: u64, escaped: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"fake__echo","arguments":{{"message":"{escaped}"}}}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpaired_surrogates_are_not_text_from_a_client_or_an_upstream() {
    let mut gw = Gateway::start("rules-surrogate", Mode::Stdio, &[Up::fake("fake", "hang")]).await;
    let client = gw.client();
    client.initialize().await;
    for (id, escaped) in [(41, r"a\ud800"), (42, r"\udfff"), (43, r"\ud83d\ud83d")] {
        client
            .send_raw(format!("{}\n", echo_line(id, escaped)).as_bytes())
            .await;
        let refused = client.response(&json!(id), WAIT).await;
        assert_eq!(refused["error"]["code"], -32700, "{refused}");
        assert_eq!(
            error_type(&refused),
            "mcp_budget.request.parse",
            "{refused}"
        );
    }
    // A pair, and an escaped backslash before `ud800`, are text.
    for (id, escaped, text) in [
        (44, r"\ud83d\ude00", "\u{1f600}"),
        (45, r"\\ud800", r"\ud800"),
    ] {
        client
            .send_raw(format!("{}\n", echo_line(id, escaped)).as_bytes())
            .await;
        let echoed = client.response(&json!(id), WAIT).await;
        assert_eq!(first_text(&echoed), text, "{echoed}");
    }
    // The upstream answers with `\ud800` alone: the call fails at once, nothing is forwarded.
    let started = std::time::Instant::now();
    let answer = client
        .call_tool("fake__echo", json!({"message": "surrogate?"}))
        .await;
    assert_eq!(
        error_type(&answer),
        "mcp_budget.upstream.protocol",
        "{answer}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "waited for the timeout"
    );
    let sent = client.seen.iter().map(Value::to_string).collect::<String>();
    assert!(!sent.contains("half"), "forwarded: {sent}");
    gw.stop_and_check().await;

    let gw = Gateway::start("rules-surrogate-http", Mode::Http, &[]).await;
    let refused = http_client()
        .post(gw.url())
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .body(
            r#"{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"\ud800","version":"0"}}}"#,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["id"], 9, "{refused}");
    assert_eq!(refused["error"]["code"], -32700, "{refused}");
    gw.stop_and_check().await;
}
