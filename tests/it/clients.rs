//! Real clients through the gateway: Python `mcp` 2.x over stdio and streamable HTTP, and the
//! MCP Inspector CLI over both, in front of server-everything (npm) and `mcp-server-time` (`PyPI`).

use serde_json::{Value, json};

use crate::harness::{
    Gateway, Mode, TagGuard, Up, assert_no_leftovers, gateway_stdio_args, inspector, new_tag,
    policy, python_client, tool_names,
};
use crate::macros::cells;

fn upstreams() -> Vec<Up> {
    vec![Up::everything("everything"), Up::time("time")]
}

fn plan() -> Value {
    json!({"calls": [
        {"name": "everything__echo", "args": {"message": "hello through the gateway"}},
        {"name": "time__get_current_time", "args": {"timezone": "UTC"}},
    ]})
}

/// Both upstreams listed under their namespaces, both called, real results back.
fn check_report(report: &Value, mode: &str) {
    let names = tool_names(report);
    for expected in [
        "everything__echo",
        "everything__get-sum",
        "time__get_current_time",
        "time__convert_time",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    assert_eq!(report["server"]["name"], "mcp-budget");
    // Legacy mode opens a 2025 session; auto mode's `server/discover` probe is answered, so the
    // client speaks 2026-07-28 (stateless) to the gateway, which speaks 2025 to the upstreams.
    let expected = if mode == "auto" {
        "2026-07-28"
    } else {
        "2025-11-25"
    };
    assert_eq!(report["protocol"], expected, "{report}");
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(
        calls[0]["result"]["content"][0]["text"], "Echo: hello through the gateway",
        "{report}"
    );
    let time = &calls[1]["result"];
    assert_eq!(time["isError"], false, "{report}");
    assert_eq!(time["structuredContent"]["timezone"], "UTC", "{report}");
    assert!(
        time["structuredContent"]["datetime"]
            .as_str()
            .is_some_and(|d| d.ends_with("+00:00")),
        "{report}"
    );
}

async fn python_over_stdio(mode: &str) {
    let tag = new_tag(&format!("py-stdio-{mode}"));
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path(), &tag, "", &upstreams());
    let args = gateway_stdio_args(&policy);
    let mut target = vec!["stdio"];
    target.extend(args.iter().map(String::as_str));
    let report = python_client(&tag, mode, &target, &plan()).await;
    check_report(&report, mode);
    // The client closed the gateway's stdin: the gateway and both upstreams are gone.
    assert_no_leftovers(&tag).await;
}

async fn python_over_http(mode: &str) {
    let gw = Gateway::start(&format!("py-http-{mode}"), Mode::Http, &upstreams()).await;
    let report = python_client(&gw.tag, mode, &["http", gw.url()], &plan()).await;
    check_report(&report, mode);
    gw.stop_and_check().await;
}

// The Python client in both modes over both transports, one row per cell.
cells! {
    python_stdio_legacy_lists_and_calls_both_upstreams: python_over_stdio("legacy");
    /// `mode="auto"` probes `server/discover` first; the gateway answers it, and the client uses
    /// the 2026-07-28 era (per-request `_meta`, no session) while the upstreams stay on 2025.
    python_stdio_auto_mode_speaks_2026_07_28:           python_over_stdio("auto");
    python_http_legacy_lists_and_calls_both_upstreams:  python_over_http("legacy");
    python_http_auto_mode_speaks_2026_07_28:            python_over_http("auto");
}

/// A call over `downstream.max_message_bytes` reaches the Python client as an error for that
/// very call (not a timeout: the gateway names the discarded line's id), and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_stdio_oversized_call_gets_its_own_error() {
    let tag = new_tag("py-stdio-huge");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(
        dir.path(),
        &tag,
        "max_message_bytes = 8192",
        &[Up::everything("everything")],
    );
    let args = gateway_stdio_args(&policy);
    let mut target = vec!["stdio"];
    target.extend(args.iter().map(String::as_str));
    let plan = json!({"calls": [
        {"name": "everything__echo", "args": {"message": "x".repeat(20_000)}, "timeout": 20},
        {"name": "everything__echo", "args": {"message": "still here"}},
    ]});
    let report = python_client(&tag, "legacy", &target, &plan).await;
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(
        calls[0]["error"]["data"]["type"], "mcp_budget.request.too_large",
        "{report}"
    );
    assert!(
        calls[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("8192")),
        "{report}"
    );
    assert_eq!(
        calls[1]["result"]["content"][0]["text"], "Echo: still here",
        "{report}"
    );
    assert_no_leftovers(&tag).await;
}

fn inspector_checks(list: &(bool, String, String), call: &(bool, String, String)) {
    assert!(list.0, "tools/list failed: {}\n{}", list.1, list.2);
    let tools: Value = serde_json::from_str(&list.1).unwrap();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"everything__get-sum"), "{names:?}");
    assert!(names.contains(&"time__get_current_time"), "{names:?}");
    assert!(call.0, "tools/call failed: {}\n{}", call.1, call.2);
    let result: Value = serde_json::from_str(&call.1).unwrap();
    assert_eq!(result["content"][0]["text"], "The sum of 2 and 3 is 5.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_cli_over_http_lists_and_calls() {
    let gw = Gateway::start("inspector-http", Mode::Http, &upstreams()).await;
    let list = inspector(&gw.tag, &[gw.url(), "--method", "tools/list"]).await;
    let call = inspector(
        &gw.tag,
        &[
            gw.url(),
            "--method",
            "tools/call",
            "--tool-name",
            "everything__get-sum",
            "--tool-arg",
            "a=2",
            "b=3",
        ],
    )
    .await;
    inspector_checks(&list, &call);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_cli_over_stdio_lists_and_calls() {
    let tag = new_tag("inspector-stdio");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path(), &tag, "", &upstreams());
    let gw = gateway_stdio_args(&policy);
    let gw: Vec<&str> = gw.iter().map(String::as_str).collect();
    let list = inspector(&tag, &[&gw[..], &["--method", "tools/list"]].concat()).await;
    let call = inspector(
        &tag,
        &[
            &gw[..],
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "everything__get-sum",
                "--tool-arg",
                "a=2",
                "b=3",
            ],
        ]
        .concat(),
    )
    .await;
    inspector_checks(&list, &call);
    assert_no_leftovers(&tag).await;
}

/// Two Python clients at once over HTTP, both asking for progress on the same upstream: both
/// pick the same progress token (their request id), the gateway keeps them apart upstream
/// and each client gets exactly its own three notifications.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_http_clients_get_their_own_progress() {
    let gw = Gateway::start("progress-two", Mode::Http, &[Up::everything("everything")]).await;
    let plan = |steps: u64| {
        json!({"calls": [{"name": "everything__trigger-long-running-operation",
                          "args": {"duration": 1, "steps": steps}, "progress": true}]})
    };
    let (plan3, plan4) = (plan(3), plan(4));
    let target = ["http", gw.url()];
    let (a, b) = tokio::join!(
        python_client(&gw.tag, "legacy", &target, &plan3),
        python_client(&gw.tag, "legacy", &target, &plan4),
    );
    for (report, steps) in [(a, 3.0), (b, 4.0)] {
        let call = &report["calls"][0];
        assert_eq!(call["result"]["isError"], false, "{report}");
        let progress = call["progress"].as_array().unwrap();
        assert_eq!(progress.len() as f64, steps, "{report}");
        assert!(progress.iter().all(|p| p["total"] == steps), "{report}");
    }
    gw.stop_and_check().await;
}
