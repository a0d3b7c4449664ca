//! Server→client requests through the gateway: server-everything (stdio upstream) asks the
//! client for a sampling (`sampling/createMessage`) and an elicitation (`elicitation/create`)
//! while a tool call is in flight; the Python client's callbacks answer, the tool result comes
//! back. Over stdio and streamable HTTP downstream.

use serde_json::{json, Value};

use crate::harness::{
    assert_no_leftovers, gateway_stdio_args, new_tag, policy, python_client, Gateway, Mode,
    TagGuard, Up,
};

fn plan() -> Value {
    json!({
        "sampling": true,
        "elicit": {"name": "Ada", "check": true},
        "calls": [
            {"name": "everything__trigger-sampling-request",
             "args": {"prompt": "say hi", "maxTokens": 5}},
            {"name": "everything__trigger-elicitation-request", "args": {}},
        ],
    })
}

fn check(report: &Value) {
    let calls = report["calls"].as_array().unwrap();
    let sampled = calls[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(sampled.contains("sampled by py_client"), "{report}");
    assert_eq!(report["sampling"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(
        report["sampling"][0]["messages"][0]["content"]["text"],
        "Resource trigger-sampling-request context: say hi"
    );
    let elicited: Vec<&str> = calls[1]["result"]["content"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["text"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        elicited.iter().any(|t| t.contains("- Name: Ada")),
        "{report}"
    );
    assert_eq!(
        report["elicitation"].as_array().unwrap().len(),
        1,
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_and_elicitation_reach_a_stdio_client() {
    let tag = new_tag("routing-stdio");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path(), "", &[Up::everything("everything")]);
    let args = gateway_stdio_args(&policy);
    let mut target = vec!["stdio"];
    target.extend(args.iter().map(String::as_str));
    let report = python_client(&tag, "legacy", &target, &plan()).await;
    check(&report);
    assert_no_leftovers(&tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_and_elicitation_reach_an_http_client() {
    let gw = Gateway::start("routing-http", Mode::Http, &[Up::everything("everything")]).await;
    let report = python_client(&gw.tag, "legacy", &["http", gw.url()], &plan()).await;
    check(&report);
    gw.stop_and_check().await;
}
