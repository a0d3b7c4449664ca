//! server-everything as a streamable HTTP upstream.

use serde_json::json;

use crate::harness::{
    assert_no_leftovers, everything_http, gateway_stdio_args, new_tag, policy, python_client,
    tool_names, TagGuard, Up,
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
    let policy = policy(dir.path(), "", &[Up::http("web", &url), Up::time("time")]);
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
