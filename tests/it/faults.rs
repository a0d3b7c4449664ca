//! Faults: upstreams that die, hang or babble; clients that send garbage; shutdown with calls
//! in flight. Each test checks that every request id is answered exactly once, that the
//! healthy upstream keeps serving, and that no process survives the gateway.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, WAIT, child_matching, error_type, first_text};

/// The pid of the gateway child whose command line contains `needle`.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_that_exits_at_start_is_unavailable_while_others_serve() {
    let mut gw = Gateway::start(
        "exits-at-start",
        Mode::Stdio,
        &[Up::stdio("dead", "false", &[]), Up::time("time")],
    )
    .await;
    let c = gw.client();
    c.initialize().await;
    let list = c.request("tools/list", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"time__get_current_time"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("dead__")), "{names:?}");

    let dead = c.call_tool("dead__anything", json!({})).await;
    assert_eq!(
        error_type(&dead),
        "mcp_budget.upstream.unavailable",
        "{dead}"
    );
    assert_eq!(dead["error"]["data"]["upstream"], "dead");
    let ok = c
        .call_tool("time__get_current_time", json!({"timezone": "UTC"}))
        .await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    let ids: Vec<Value> = c.seen.iter().filter_map(|m| m.get("id").cloned()).collect();
    c.assert_answered_once(&ids);
    assert!(gw.log().contains("dead"), "{}", gw.log());
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_killed_mid_call_fails_that_call_then_restarts() {
    let mut gw = Gateway::start(
        "killed-mid-call",
        Mode::Stdio,
        &[Up::everything("everything"), Up::time("time")],
    )
    .await;
    gw.client().initialize().await;
    let victim = child_matching(&gw, "server-everything").expect("server-everything runs");

    let slow = gw
        .client()
        .start_request(
            "tools/call",
            json!({"name": "everything__trigger-long-running-operation",
                   "arguments": {"duration": 20, "steps": 2}}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let started = std::time::Instant::now();
    let failed = gw.client().response(&slow, Duration::from_secs(10)).await;
    assert_eq!(
        error_type(&failed),
        "mcp_budget.upstream.unavailable",
        "{failed}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    // The healthy upstream never noticed.
    let ok = gw
        .client()
        .call_tool("time__get_current_time", json!({"timezone": "UTC"}))
        .await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");

    // The dead one comes back (backoff starts at 250 ms) and serves again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let r = gw
            .client()
            .call_tool("everything__echo", json!({"message": "again"}))
            .await;
        if r.get("result").is_some() {
            assert_eq!(first_text(&r), "Echo: again");
            break;
        }
        assert_eq!(error_type(&r), "mcp_budget.upstream.unavailable", "{r}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "never restarted: {}",
            gw.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reborn = child_matching(&gw, "server-everything").expect("restarted");
    assert_ne!(reborn, victim);
    // Ids of answers only: the restarted server may ask this client for its roots (a request
    // with an id of the gateway's, which this raw client does not answer).
    let ids: Vec<Value> = gw
        .client()
        .seen
        .iter()
        .filter(|m| m.get("method").is_none())
        .filter_map(|m| m.get("id").cloned())
        .collect();
    gw.client().assert_answered_once(&ids);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_past_its_timeout_gets_a_timeout_error_and_a_cancel() {
    let mut gw = Gateway::start(
        "timeout",
        Mode::Stdio,
        &[Up::fake("slow", "hang").timeout(1), Up::time("time")],
    )
    .await;
    let c = gw.client();
    c.initialize().await;
    let started = std::time::Instant::now();
    let r = c.call_tool("slow__hang", json!({})).await;
    assert_eq!(error_type(&r), "mcp_budget.upstream.timeout", "{r}");
    assert_eq!(r["error"]["data"]["timeout_ms"], 1000);
    assert!(started.elapsed() < Duration::from_secs(5));
    // The gateway told the server to stop working on it.
    let cancelled = c.call_tool("slow__cancelled", json!({})).await;
    let ids: Vec<i64> = serde_json::from_str(first_text(&cancelled)).unwrap();
    assert_eq!(ids.len(), 1, "{cancelled}");
    let ok = c
        .call_tool("time__get_current_time", json!({"timezone": "UTC"}))
        .await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    c.drain(Duration::from_millis(300)).await;
    let ids: Vec<Value> = c.seen.iter().filter_map(|m| m.get("id").cloned()).collect();
    c.assert_answered_once(&ids);
    gw.stop_and_check().await;
}

/// The upstream timeout is for silence: a real server's long operation that reports progress
/// (server-everything, 5 s with a 2 s timeout) is answered, the same operation without a
/// progress token (so the server says nothing meanwhile) still times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_restarts_the_upstream_timeout() {
    let mut gw = Gateway::start(
        "timeout-progress",
        Mode::Stdio,
        &[Up::everything("everything").timeout(2)],
    )
    .await;
    let c = gw.client();
    c.initialize().await;
    let started = std::time::Instant::now();
    let id = c
        .start_request(
            "tools/call",
            json!({"name": "everything__trigger-long-running-operation",
                   "arguments": {"duration": 5, "steps": 10},
                   "_meta": {"progressToken": "long-1"}}),
        )
        .await;
    let r = c.response(&id, Duration::from_secs(20)).await;
    assert!(
        first_text(&r).contains("Long running operation completed"),
        "{r}"
    );
    assert!(started.elapsed() >= Duration::from_secs(5));
    let progress = c
        .seen
        .iter()
        .filter(|m| m["params"]["progressToken"] == "long-1")
        .count();
    assert_eq!(progress, 10, "{:#?}", c.seen);

    let started = std::time::Instant::now();
    let silent = c
        .call_tool(
            "everything__trigger-long-running-operation",
            json!({"duration": 5, "steps": 10}),
        )
        .await;
    assert_eq!(
        error_type(&silent),
        "mcp_budget.upstream.timeout",
        "{silent}"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
    gw.stop_and_check().await;
}

/// While the server waits on the client (an elicitation a person answers), the upstream
/// timeout does not run: the answer after 3 s (timeout 2 s) completes the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_answer_to_an_elicitation_does_not_time_the_call_out() {
    let mut gw = Gateway::start(
        "timeout-elicit",
        Mode::Stdio,
        &[Up::everything("everything").timeout(2)],
    )
    .await;
    let c = gw.client();
    c.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
               "clientInfo": {"name": "it-raw", "version": "0"}}),
    )
    .await;
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let id = c
        .start_request(
            "tools/call",
            json!({"name": "everything__trigger-elicitation-request", "arguments": {}}),
        )
        .await;
    let asked = loop {
        let m = c.next(WAIT).await.expect("an elicitation/create request");
        if m["method"] == "elicitation/create" {
            break m;
        }
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    c.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
                   "result": {"action": "accept", "content": {"name": "Ada", "check": true}}}))
        .await;
    let r = c.response(&id, Duration::from_secs(10)).await;
    assert!(r.get("result").is_some(), "{r}");
    assert!(
        r["result"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["text"].as_str().is_some_and(|t| t.contains("Ada"))),
        "{r}"
    );
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_lines_from_an_upstream_are_ignored() {
    let mut gw = Gateway::start("garbage-up", Mode::Stdio, &[Up::fake("noisy", "garbage")]).await;
    let c = gw.client();
    c.initialize().await;
    let list = c.request("tools/list", json!({})).await;
    assert_eq!(
        list["result"]["tools"].as_array().unwrap().len(),
        5,
        "{list}"
    );
    for i in 0..3 {
        let r = c
            .call_tool("noisy__echo", json!({"message": format!("m{i}")}))
            .await;
        assert_eq!(first_text(&r), format!("m{i}"));
    }
    c.drain(Duration::from_millis(300)).await;
    let ids: Vec<Value> = c.seen.iter().filter_map(|m| m.get("id").cloned()).collect();
    c.assert_answered_once(&ids);
    assert!(gw.log().contains("Non-JSON-RPC line"), "{}", gw.log());
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_garbage_batch_huge_and_unknown_get_errors_and_the_connection_lives() {
    let mut gw = Gateway::builder("garbage-down", Mode::Stdio)
        .policy("max_message_bytes = 4096")
        .start(&[Up::fake("fake", "hang")])
        .await;
    let c = gw.client();
    c.initialize().await;

    c.send_raw(b"this is not json\n").await;
    let parse = c.next(WAIT).await.unwrap();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");

    c.send_raw(b"[{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\"}]\n")
        .await;
    let batch = c.next(WAIT).await.unwrap();
    assert_eq!(batch["error"]["code"], -32600, "{batch}");

    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":78}\n").await;
    let invalid = c.next(WAIT).await.unwrap();
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");

    let huge = json!({"jsonrpc": "2.0", "id": 79, "method": "tools/call",
        "params": {"name": "fake__echo", "arguments": {"message": "x".repeat(10_000)}}});
    c.send(&huge).await;
    let too_large = c.next(WAIT).await.unwrap();
    assert_eq!(
        error_type(&too_large),
        "mcp_budget.request.too_large",
        "{too_large}"
    );
    // The line was discarded unread, yet the error names the request it answers.
    assert_eq!(too_large["id"], 79, "{too_large}");

    let unknown = c.request("no/such/method", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    // Still serving.
    let ping = c.request("ping", json!({})).await;
    assert_eq!(ping["result"], json!({}), "{ping}");
    let echo = c.call_tool("fake__echo", json!({"message": "alive"})).await;
    assert_eq!(first_text(&echo), "alive");
    c.drain(Duration::from_millis(300)).await;
    let ids: Vec<Value> = c
        .seen
        .iter()
        .filter_map(|m| m.get("id").cloned())
        .filter(|id| !id.is_null())
        .collect();
    c.assert_answered_once(&ids);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_cancel_reaches_the_upstream_and_the_request_is_not_answered() {
    let mut gw = Gateway::start("cancel", Mode::Stdio, &[Up::fake("slow", "hang")]).await;
    let c = gw.client();
    c.initialize().await;
    let id = c
        .start_request("tools/call", json!({"name": "slow__hang", "arguments": {}}))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id, "reason": "user pressed stop"}}),
    )
    .await;
    // The cancel reaches the server (with the server's id for the request).
    let mut seen_by_server = Vec::new();
    for _ in 0..20 {
        let r = c.call_tool("slow__cancelled", json!({})).await;
        seen_by_server = serde_json::from_str::<Vec<i64>>(first_text(&r)).unwrap();
        if !seen_by_server.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen_by_server.len(), 1);
    // MCP: the receiver of a cancel does not answer the cancelled request.
    c.drain(Duration::from_millis(500)).await;
    let answers = c.answer_counts();
    assert_eq!(answers.get(&id.to_string()), None, "{:#?}", c.seen);
    for (k, n) in answers {
        assert_eq!(n, 1, "id {k}");
    }
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_calls_in_flight_exits_promptly_without_leftovers() {
    let mut gw = Gateway::start(
        "sigterm",
        Mode::Stdio,
        &[Up::everything("everything"), Up::fake("slow", "hang")],
    )
    .await;
    gw.client().initialize().await;
    let slow = gw
        .client()
        .start_request(
            "tools/call",
            json!({"name": "everything__trigger-long-running-operation",
                   "arguments": {"duration": 30, "steps": 3}}),
        )
        .await;
    let hang = gw
        .client()
        .start_request("tools/call", json!({"name": "slow__hang", "arguments": {}}))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(gw.children().len() >= 2, "{:?}", gw.children());
    let took = gw.terminate().await;
    assert!(took < Duration::from_secs(5), "exit took {took:?}");
    crate::harness::assert_no_leftovers(&gw.tag).await;
    // Both calls in flight were answered before the exit, once each.
    let c = gw.client();
    c.drain(Duration::from_millis(200)).await;
    for id in [&slow, &hang] {
        let r = c.response(id, Duration::from_millis(10)).await;
        assert_eq!(error_type(&r), "mcp_budget.upstream.unavailable", "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("shutting down"),
            "{r}"
        );
    }
    c.assert_answered_once(&[slow, hang]);
}

/// A host may SIGTERM the gateway and keep its end of stdin open: the gateway stops reading
/// and exits at once, rather than after its 2 s stop grace spent waiting for the input to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_at_once_while_the_host_keeps_stdin_open() {
    let mut gw = Gateway::start("sigterm-stdin-open", Mode::Stdio, &[]).await;
    gw.client().initialize().await;
    let took = gw.terminate().await;
    assert!(
        took < Duration::from_millis(1500),
        "exit took {took:?}\n{}",
        gw.log()
    );
    assert!(gw.log().contains("SIGTERM received"), "{}", gw.log());
    crate::harness::assert_no_leftovers(&gw.tag).await;
}

/// `list_changed` goes only to sessions that finished the handshake (sent
/// `notifications/initialized`): never before the client has the `initialize` result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_waits_for_notifications_initialized() {
    let mut gw = Gateway::start("list-changed", Mode::Stdio, &[Up::fake("fake", "hang")]).await;
    let c = gw.client();
    c.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "it-raw", "version": "0"}}),
    )
    .await;
    let is_list_changed = |m: &Value| m["method"] == "notifications/tools/list_changed";
    c.call_tool("fake__grow", json!({})).await;
    c.drain(Duration::from_millis(500)).await;
    assert!(!c.seen.iter().any(is_list_changed), "{:#?}", c.seen);

    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    c.call_tool("fake__grow", json!({})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !c.seen.iter().any(is_list_changed) && tokio::time::Instant::now() < deadline {
        c.next(Duration::from_millis(100)).await;
    }
    assert!(c.seen.iter().any(is_list_changed), "{:#?}", c.seen);
    let list = c.request("tools/list", json!({})).await;
    assert_eq!(
        list["result"]["tools"].as_array().unwrap().len(),
        7,
        "{list}"
    );
    gw.stop_and_check().await;
}

/// A stdio upstream whose command starts a descendant in a session of its own (`setsid`), out
/// of reach of the group kill: the gateway adopted it (child subreaper) and ends it on stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_grandchild_does_not_outlive_the_gateway() {
    let server = format!(
        "/usr/bin/setsid /bin/sleep 1000 & exec {} --local-timezone UTC",
        crate::harness::venv_bin("mcp-server-time")
    );
    let up = Up::stdio("time", "/bin/sh", &["-c", &server]);
    let mut gw = Gateway::start("faults-setsid", Mode::Stdio, &[up]).await;
    gw.client().initialize().await;
    let listed = gw.client().request("tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let sleeper = child_matching(&gw, "sleep 1000").expect("the grandchild runs");
    let session = |pid: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<String> = stat[stat.rfind(')').unwrap() + 2..]
            .split(' ')
            .map(str::to_owned)
            .collect();
        fields[3].clone()
    };
    assert_ne!(
        session(sleeper),
        session(gw.pid()),
        "the grandchild left the gateway's session"
    );
    // Stopped (SIGTERM), the gateway leaves no process of the tag behind, the sleep included.
    gw.stop_and_check().await;
}
