//! server-everything as a streamable HTTP upstream.

use std::time::Duration;

use serde_json::json;

use crate::harness::{
    Gateway, Mode, TagGuard, Up, assert_no_leftovers, everything_http, gateway_stdio_args,
    kill_tagged, new_tag, policy, python_client, tool_names,
};

/// List + call through the gateway to an `url` upstream; a long-running tool's progress
/// notifications (sent on the upstream's POST SSE stream) reach the Python client with its own
/// progress token; the server's `sampling/createMessage` comes back to the client's callback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_upstream_lists_calls_streams_progress_and_routes_sampling() {
    let tag = new_tag("http-upstream");
    let _guard = TagGuard(tag.clone());
    let (server, url) = everything_http(&tag).await;
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(
        dir.path(),
        &tag,
        "",
        &[Up::http("web", &url), Up::time("time")],
    );
    let args = gateway_stdio_args(&policy);
    let mut target = vec!["stdio"];
    target.extend(args.iter().map(String::as_str));
    let plan = json!({"sampling": true, "calls": [
        {"name": "web__echo", "args": {"message": "over http"}},
        {"name": "web__trigger-long-running-operation", "args": {"duration": 1, "steps": 3},
         "progress": true},
        {"name": "web__trigger-sampling-request", "args": {"prompt": "ping", "maxTokens": 5}},
        {"name": "time__get_current_time", "args": {"timezone": "UTC"}},
    ]});
    let report = python_client(&tag, "legacy", &target, &plan).await;
    let names = tool_names(&report);
    assert!(names.iter().any(|n| n == "web__echo"), "{names:?}");
    assert!(names.iter().any(|n| n == "time__convert_time"), "{names:?}");
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(
        calls[0]["result"]["content"][0]["text"], "Echo: over http",
        "{report}"
    );

    let long = &calls[1];
    assert_eq!(long["result"]["isError"], false, "{report}");
    let progress: Vec<f64> = long["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, vec![1.0, 2.0, 3.0], "{report}");
    assert_eq!(long["progress"][0]["total"], 3.0);

    let sampled = &calls[2];
    let text = sampled["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("sampled by py_client"), "{report}");
    assert_eq!(report["sampling"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(calls[3]["result"]["isError"], false, "{report}");

    drop(server);
    assert_no_leftovers(&tag).await;
}

/// What an HTTP server says outside any request travels on the session's GET stream: the
/// gateway holds it, so server-everything's simulated logging (sent every 5 s, tied to no
/// request) reaches the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_upstream_messages_outside_requests_reach_the_client() {
    let tag = new_tag("http-get-stream");
    let (server, url) = everything_http(&tag).await;
    let mut gw = Gateway::start("http-get-stream", Mode::Stdio, &[Up::http("web", &url)]).await;
    let c = gw.client();
    c.initialize().await;
    // The server drops messages below the session's level, and its levels are random.
    let level = c
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    assert!(level.get("result").is_some(), "{level}");
    let r = c
        .call_tool("web__toggle-simulated-logging", json!({}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
    let logs = |c: &crate::harness::RawClient| {
        c.seen
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .count()
    };
    while logs(c) < 2 && tokio::time::Instant::now() < deadline {
        c.next(Duration::from_millis(200)).await;
    }
    assert_eq!(logs(c), 2, "log notifications seen: {:#?}", c.seen);
    gw.stop_and_check().await;
    drop(server);
    kill_tagged(&tag);
}

/// The HTTP server dies during a call: that call fails as unavailable, at once. A new server
/// comes up on the same address (it knows nothing of the old session): the gateway opens a new
/// session by itself and serves again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_upstream_restarted_mid_call_recovers_with_a_new_session() {
    let tag = new_tag("http-restart");
    let port = crate::harness::free_port();
    let (mut server, url) = crate::harness::everything_http_on(&tag, port).await;
    let mut gw = Gateway::start("http-restart", Mode::Stdio, &[Up::http("web", &url)]).await;
    let c = gw.client();
    c.initialize().await;
    let slow = c
        .start_request(
            "tools/call",
            json!({"name": "web__trigger-long-running-operation",
                   "arguments": {"duration": 20, "steps": 2}}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.kill().await.unwrap();
    let failed = c.response(&slow, Duration::from_secs(10)).await;
    assert_eq!(
        crate::harness::error_type(&failed),
        "mcp_budget.upstream.unavailable",
        "{failed}"
    );
    let down = c
        .call_tool("web__echo", json!({"message": "anyone?"}))
        .await;
    // Down (the stream was lost), or, once a reconnection was refused, the more precise
    // "unreachable" with the URL and the OS reason; never a protocol error.
    assert!(
        [
            "mcp_budget.upstream.unavailable",
            "mcp_budget.upstream.unreachable"
        ]
        .contains(&crate::harness::error_type(&down)),
        "{down}"
    );

    // Not "ready" while gone: the gateway notices and says so (instead of failing calls one
    // by one while the upstream looks healthy).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !gw.log().contains("Upstream connection lost") {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let c = gw.client();
    let gone = c.call_tool("web__echo", json!({"message": "gone?"})).await;
    assert!(
        gone["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the connection was lost")),
        "{gone}"
    );

    let (_server, _) = crate::harness::everything_http_on(&tag, port).await;
    // Back once a new handshake works (retried every 2 s).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let back = c.call_tool("web__echo", json!({"message": "back"})).await;
        if back["result"]["content"][0]["text"] == "Echo: back" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{back}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    gw.stop_and_check().await;
    kill_tagged(&tag);
}
