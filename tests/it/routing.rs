//! Server→client requests through the gateway: server-everything (stdio upstream) asks the
//! client for a sampling (`sampling/createMessage`) and an elicitation (`elicitation/create`)
//! while a tool call is in flight; the Python client's callbacks answer, the tool result comes
//! back. Over stdio and streamable HTTP downstream.

use serde_json::{Value, json};

use crate::harness::{
    Gateway, Mode, TagGuard, Up, assert_no_leftovers, gateway_stdio_args, new_tag, policy,
    python_client,
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
    let policy = policy(dir.path(), &tag, "", &[Up::everything("everything")]);
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

/// Tasks (2025-11-25): server-everything's `simulate-research-query` runs as a task; the
/// gateway offers the upstream's `tasks` capability, and `tasks/get`, `tasks/list` and
/// `tasks/result` reach the upstream that created the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_requests_reach_the_upstream_that_created_the_task() {
    let mut gw = Gateway::start(
        "tasks",
        Mode::Stdio,
        &[Up::time("time"), Up::everything("everything")],
    )
    .await;
    let init = gw.client().initialize().await;
    assert!(
        init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object(),
        "{init}"
    );
    let created = gw
        .client()
        .request(
            "tools/call",
            json!({"name": "everything__simulate-research-query",
                   "arguments": {"topic": "gateways"}, "task": {"ttl": 60000}}),
        )
        .await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task created: {created}"))
        .to_owned();
    let got = gw
        .client()
        .request("tasks/get", json!({"taskId": task}))
        .await;
    assert_eq!(got["result"]["taskId"], task.as_str(), "{got}");
    let listed = gw.client().request("tasks/list", json!({})).await;
    let ids: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert!(ids.contains(&task.as_str()), "{listed}");
    let result = gw
        .client()
        .request("tasks/result", json!({"taskId": task}))
        .await;
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Research Report: gateways"), "{result}");
    let unknown = gw
        .client()
        .request("tasks/get", json!({"taskId": "no-such-task"}))
        .await;
    assert_eq!(
        unknown["error"]["data"]["type"], "mcp_budget.catalog.not_found",
        "{unknown}"
    );
    gw.stop_and_check().await;
}

/// `tasks/list` pages through every upstream that lists tasks (one upstream page per gateway
/// page, the gateway's cursor naming the upstream): two server-everything instances, a task
/// on each, both found by following `nextCursor`; a cursor the gateway did not make is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_list_pages_through_every_upstream() {
    let mut gw = Gateway::start(
        "tasks-pages",
        Mode::Stdio,
        &[Up::everything("one"), Up::everything("two")],
    )
    .await;
    let c = gw.client();
    c.initialize().await;
    let mut created = Vec::new();
    for server in ["one", "two"] {
        let r = c
            .request(
                "tools/call",
                json!({"name": format!("{server}__simulate-research-query"),
                       "arguments": {"topic": server}, "task": {"ttl": 60000}}),
            )
            .await;
        let id = r["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"));
        created.push(id.to_owned());
    }
    let mut seen = Vec::new();
    let mut pages = 0;
    let mut params = json!({});
    loop {
        let page = c.request("tasks/list", params.clone()).await;
        pages += 1;
        let tasks = page["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("{page}"));
        seen.extend(
            tasks
                .iter()
                .filter_map(|t| t["taskId"].as_str().map(str::to_owned)),
        );
        match page["result"]["nextCursor"].as_str() {
            Some(next) => params = json!({"cursor": next}),
            None => break,
        }
        assert!(pages < 10, "{page}");
    }
    for id in &created {
        assert!(seen.contains(id), "{id} not in {seen:?}");
    }
    assert!(pages >= 2, "one page per upstream, got {pages}");
    let bad = c.request("tasks/list", json!({"cursor": "not-ours"})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    gw.stop_and_check().await;
}

/// A 2025-era client's `logging/setLevel` reaches a 2026-07-28 upstream (which has no session
/// level) as the `_meta` log level of each of the client's requests: the tool's log
/// notifications come back; without a level none do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_clients_log_level_reaches_a_modern_upstream() {
    let fixture = crate::harness::peers().join("conformance-next/fixture_server.py");
    let python = crate::harness::venv_bin("python");
    let up = Up::stdio("f", &python, &[fixture.to_str().unwrap(), "--stdio"]);
    let mut gw = Gateway::start("log-level", Mode::Stdio, &[up]).await;
    assert!(gw.log().contains("protocol 2026-07-28"), "{}", gw.log());
    gw.client().initialize().await;
    let logs = |seen: &[Value]| {
        seen.iter()
            .filter(|m| m["method"] == "notifications/message")
            .count()
    };
    let quiet = gw
        .client()
        .call_tool("f__test_tool_with_logging", json!({}))
        .await;
    assert!(quiet["result"].is_object(), "{quiet}");
    assert_eq!(logs(&gw.client().seen), 0, "{:?}", gw.client().seen);
    let set = gw
        .client()
        .request("logging/setLevel", json!({"level": "info"}))
        .await;
    assert!(set["result"].is_object(), "{set}");
    let loud = gw
        .client()
        .call_tool("f__test_tool_with_logging", json!({}))
        .await;
    assert!(loud["result"].is_object(), "{loud}");
    gw.client()
        .drain(std::time::Duration::from_millis(200))
        .await;
    assert_eq!(logs(&gw.client().seen), 3, "{:?}", gw.client().seen);
    gw.stop_and_check().await;
}

/// `resources/subscribe` of a 2025-era client on a 2026-07-28 upstream (which has no such
/// method) becomes part of the gateway's `subscriptions/listen` there; the upstream's
/// `notifications/resources/updated` reaches the client. (Against a 2025 upstream it is
/// forwarded: the conformance suite's `resources-subscribe` scenario covers that.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_subscriptions_reach_a_modern_upstream() {
    for era in ["modern", "dual"] {
        let mut gw = Gateway::start(
            &format!("subscribe-{era}"),
            Mode::Stdio,
            &[Up::era_server("era", era)],
        )
        .await;
        gw.client().initialize().await;
        let sub = gw
            .client()
            .request("resources/subscribe", json!({"uri": "era://static"}))
            .await;
        assert!(sub["result"].is_object(), "{era}: {sub}");
        // The upstream's listen is re-opened with the resource: give it a moment.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let touched = gw
            .client()
            .call_tool("era__touch", json!({"uri": "era://static"}))
            .await;
        assert!(touched["result"].is_object(), "{era}: {touched}");
        gw.client()
            .drain(std::time::Duration::from_millis(500))
            .await;
        let updated = gw.client().seen.iter().any(|m| {
            m["method"] == "notifications/resources/updated" && m["params"]["uri"] == "era://static"
        });
        let log = gw.log();
        assert!(updated, "{era}: {:?}\n{log}", gw.client().seen);
        gw.stop_and_check().await;
    }
}
