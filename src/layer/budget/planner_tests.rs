//! Budget layer tests of the planner's inputs: the usage file and `host_search`.

use std::time::Duration;

use serde_json::{Value, json};
use tower::{Layer, Service};

use super::tests::{echo, fixed, fixtures, names, request};
use crate::jsonrpc::{Id, Message, to_raw};
use crate::policy::Policy;

fn listed(message: &Message) -> Vec<String> {
    names(&message.result_as().unwrap())
}

#[tokio::test(start_paused = true)]
async fn calls_change_the_hybrid_list_at_a_relearn_and_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("usage.json");
    let policy = Policy::from_toml_str(
        &format!(
            "version = 1\n[budget]\nusage_file = {:?}\nrelearn_secs = 60\n",
            file.display().to_string()
        ),
        "t.toml",
    )
    .unwrap();
    let layer = fixed(fixtures(), &policy);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    layer.announce_to(tx);
    let mut svc = layer.layer(echo());
    let list = |svc: &mut super::Budget<_>, id| svc.call(request(id, "tools/list", &json!({})));
    let before = list(&mut svc, 1).await.unwrap().unwrap();
    let names = listed(&before);
    assert!(
        names.contains(&"search_tools".to_owned()),
        "hybrid: {names:?}"
    );
    // A deferred tool of the biggest server: the value model lists it last.
    let target = "github__actions_get";
    assert!(!names.iter().any(|n| n == target), "{names:?}");
    for id in 0..3 {
        let call = json!({"name": target, "arguments": {}});
        svc.call(request(10 + id, "tools/call", &call))
            .await
            .unwrap();
    }
    // Counted, but the list keeps its bytes until the relearn.
    let same = list(&mut svc, 2).await.unwrap().unwrap();
    let bytes = |m: &Message| m.result.as_ref().unwrap().get().to_owned();
    assert!(
        bytes(&same) == bytes(&before),
        "the list changed before a relearn"
    );
    tokio::time::advance(Duration::from_secs(61)).await;
    let note = rx.recv().await.unwrap();
    assert_eq!(note.method(), Some("notifications/tools/list_changed"));
    let after = listed(&list(&mut svc, 3).await.unwrap().unwrap());
    assert!(
        after.iter().any(|n| n == target),
        "used tools first: {after:?}"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        crate::plan::parse_usage(&text)
            .unwrap()
            .get("github/actions_get"),
        Some(&3)
    );
    // A gateway started on that file lists the tool from the start.
    let restarted =
        fixed(fixtures(), &policy)
            .layer(echo())
            .call(request(4, "tools/list", &json!({})));
    let restarted = listed(&restarted.await.unwrap().unwrap());
    assert!(restarted.iter().any(|n| n == target));
}

#[tokio::test]
async fn host_search_lists_real_tools_and_rewrites_the_instructions() {
    let mut policy = Policy::default();
    policy.budget.mode = crate::plan::ModeChoice::HostSearch;
    let tools: Vec<_> = fixtures()
        .into_iter()
        .filter(|t| t.server == "time" || t.server == "github")
        .collect();
    let count = tools.len();
    let layer = fixed(tools, &policy);
    let upstream_init = tower::service_fn(|req: crate::context::McpRequest| async move {
        let id = req.message.id.clone().unwrap();
        let result = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mcp-budget", "version": "0"},
            "instructions": "## time\nClocks\u{200B} and zones.\n\n## github\nIssues and pull requests.",
        });
        Ok::<_, std::convert::Infallible>(Some(Message::response_value(id, &result)))
    });
    let mut svc = layer.layer(upstream_init);
    let names = listed(
        &svc.call(request(1, "tools/list", &json!({})))
            .await
            .unwrap()
            .unwrap(),
    );
    assert_eq!(names.len(), count, "every tool, over the cap: {names:?}");
    assert!(!names.iter().any(|n| n == "search_tools"));
    let init = Message::request(Id::Number(2), "initialize", Some(to_raw(&json!({}))));
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let init = crate::context::McpRequest::new(
        init,
        crate::context::Caller::new(std::sync::Arc::new(crate::context::Session::new("t", tx))),
    );
    let reply = svc.call(init).await.unwrap().unwrap();
    let result: Value = reply.result_as().unwrap();
    let text = result["instructions"].as_str().unwrap();
    assert!(text.contains("`<server>__<tool>`"), "{text}");
    assert!(
        text.contains(
            "## time (2 tools: time__convert_time, time__get_current_time)\nClocks and zones."
        ),
        "{text}"
    );
    assert!(text.contains("## github ("), "{text}");
    assert!(text.contains("Issues and pull requests."), "{text}");
    assert_eq!(
        result["serverInfo"]["name"], "mcp-budget",
        "the rest is kept"
    );
}

/// A policy counting calls into `file` (or not at all), with `extra` `[budget]` lines.
fn usage_policy(file: Option<&std::path::Path>, extra: &str) -> Policy {
    let usage = file.map_or(String::new(), |f| {
        format!("usage_file = {:?}\n", f.display().to_string())
    });
    Policy::from_toml_str(
        &format!("version = 1\n[budget]\n{usage}relearn_secs = 3600\n{extra}"),
        "t.toml",
    )
    .unwrap()
}

/// `n` calls of a catalog tool through `layer`.
async fn call_times(layer: &super::BudgetLayer, n: i64) {
    let mut svc = layer.layer(echo());
    for id in 0..n {
        let call = json!({"name": "time__get_current_time", "arguments": {}});
        svc.call(request(id, "tools/call", &call)).await.unwrap();
    }
}

/// The count of `time/get_current_time` in `file` (0 while it is not written).
fn counted(file: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(file).unwrap_or_else(|_| "{}".into());
    let counts = crate::plan::parse_usage(&text).unwrap();
    counts.get("time/get_current_time").copied().unwrap_or(0)
}

/// A reloaded layer succeeding `previous` over the same tools.
fn reloaded(policy: &Policy, previous: &super::BudgetLayer) -> super::BudgetLayer {
    let catalog = crate::catalog::Catalog::from_tools(fixtures(), &policy.separator);
    let (_publisher, catalog) = tokio::sync::watch::channel(std::sync::Arc::new(catalog));
    super::BudgetLayer::succeeding(catalog, policy, Some(previous))
}

#[tokio::test]
async fn a_reload_with_the_same_usage_file_keeps_the_counts_not_yet_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("usage.json");
    let old = fixed(fixtures(), &usage_policy(Some(&file), ""));
    call_times(&old, 2).await;
    // Another threshold, the same file: the counts go on in the new layer.
    let new = reloaded(&usage_policy(Some(&file), "threshold_percent = 4\n"), &old);
    drop(old);
    call_times(&new, 3).await;
    assert_eq!(counted(&file), 0, "nothing written before the relearn");
    new.state.relearn_usage().await;
    assert_eq!(counted(&file), 5, "the calls before and after the reload");
}

#[tokio::test]
async fn a_reload_to_another_usage_file_or_none_writes_the_old_counts() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let old = fixed(fixtures(), &usage_policy(Some(&first), ""));
    call_times(&old, 2).await;
    let moved = reloaded(&usage_policy(Some(&second), ""), &old);
    drop(old);
    call_times(&moved, 1).await;
    let written = |file: &std::path::Path, n| {
        let file = file.to_owned();
        async move {
            for _ in 0..100 {
                if counted(&file) == n {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            false
        }
    };
    assert!(
        written(&first, 2).await,
        "the old file holds the old counts"
    );
    // Usage switched off: the last counts are written too.
    let off = reloaded(&usage_policy(None, ""), &moved);
    assert!(off.state.usage.is_none());
    assert!(
        written(&second, 1).await,
        "written when usage is switched off"
    );
}
