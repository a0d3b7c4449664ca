//! Protocol rules the gateway holds its clients to, against `mcp-server-time` (`PyPI`) behind
//! it: on stdio, no 2025-era request but `initialize` / `ping` before `initialize` (a
//! 2026-07-28 request needs no handshake).

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, error_type};

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
