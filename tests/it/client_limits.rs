//! `[limits]` end to end over stdio: the gateway binary in front of the real
//! `@modelcontextprotocol/server-everything`. A client over its rate gets `-32023`
//! `mcp_budget.limit.rate` with `data.retryAfterMs`, nothing reaches the upstream, lists still
//! work, and after the wait it is served again; a client over its calls in flight (queue 0) is
//! refused while its slow call finishes normally.

use std::time::Duration;

use serde_json::json;

use crate::harness::{Gateway, Mode, Up, error_type};

fn echo(text: &str) -> serde_json::Value {
    json!({"message": text})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_over_its_rate_gets_32023_and_is_served_after_the_wait() {
    let limits = "\n[limits]\ncalls_per_sec = 0.5\nburst = 2\n";
    let mut gw = Gateway::builder("limit-rate", Mode::Stdio)
        .policy(limits)
        .start(&[Up::everything("e")])
        .await;
    let c = gw.client();
    c.initialize().await;
    for i in 0..2 {
        let ok = c.call_tool("e__echo", echo(&format!("ok {i}"))).await;
        assert!(ok["result"]["content"].is_array(), "{ok}");
    }
    let refused = c.call_tool("e__echo", echo("too many")).await;
    assert_eq!(refused["error"]["code"], -32023, "{refused}");
    assert_eq!(error_type(&refused), "mcp_budget.limit.rate");
    let data = &refused["error"]["data"];
    assert_eq!(
        (data["limit"].as_str(), data["client"].as_str()),
        (Some("calls_per_sec"), Some("anonymous"))
    );
    assert_eq!(data["upstream"], "e");
    let wait = data["retryAfterMs"].as_u64().expect("retryAfterMs");
    assert!((1..=2000).contains(&wait), "{wait}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("calls_per_sec") && message.contains("retry in"),
        "{message}"
    );
    // Lists are not calls: still served.
    let list = c.request("tools/list", json!({})).await;
    assert!(list["result"]["tools"].is_array(), "{list}");
    tokio::time::sleep(Duration::from_millis(wait + 50)).await;
    let again = c.call_tool("e__echo", echo("after the wait")).await;
    assert!(again["result"]["content"].is_array(), "{again}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_calls_in_flight_a_client_is_refused_while_its_slow_call_finishes() {
    let limits = "\n[limits]\nin_flight = 1\nqueue = 0\n";
    let mut gw = Gateway::builder("limit-inflight", Mode::Stdio)
        .policy(limits)
        .start(&[Up::everything("e")])
        .await;
    let c = gw.client();
    c.initialize().await;
    let slow = c
        .start_request(
            "tools/call",
            json!({"name": "e__trigger-long-running-operation", "arguments": {"duration": 2, "steps": 2}}),
        )
        .await;
    // Give the slow call time to take the one slot.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = c.call_tool("e__echo", echo("second")).await;
    assert_eq!(refused["error"]["code"], -32023, "{refused}");
    assert_eq!(error_type(&refused), "mcp_budget.limit.in_flight");
    assert!(refused["error"]["data"]["retryAfterMs"].as_u64().is_some());
    let done = c.response(&slow, Duration::from_secs(20)).await;
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Long running operation completed"), "{done}");
    let after = c.call_tool("e__echo", echo("third")).await;
    assert!(after["result"]["content"].is_array(), "{after}");
    gw.stop_and_check().await;
}
