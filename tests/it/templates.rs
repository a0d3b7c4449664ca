//! Resource templates: a change in `resources/templates/list` alone is a change of the
//! resources hosts see, announced with `notifications/resources/list_changed`, whether the
//! upstream changed its templates (and said so) or a reload changed which upstreams list them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    Gateway, Mode, TagGuard, Up, WAIT, era_client, gateway_stdio_args, new_tag, peer_file, policy,
    venv_bin,
};

/// `tests/peers/templates_server.py` as upstream `name` (`args`: `--templates-only`).
fn templates(name: &str, args: &[&str]) -> Up {
    let mut all = vec![peer_file("templates_server.py")];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    Up::stdio(name, &venv_bin("python"), &all)
}

/// An upstream that adds a template (its resources unchanged) and says so: the Python SDK
/// client behind the gateway is told, and lists the new template.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_added_upstream_reaches_the_python_client_as_list_changed() {
    let tag = new_tag("templates-upstream");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path(), &tag, "", &[templates("tpl", &[])]);
    let args = gateway_stdio_args(&policy);
    let mut target = vec!["stdio"];
    target.extend(args.iter().map(String::as_str));
    let plan = json!({"steps": [
        {"op": "list_templates"},
        {"op": "notified", "name": "tpl__add_template", "args": {"name": "extra"},
         "method": "notifications/resources/list_changed"},
        {"op": "list_templates"},
    ]});
    let (report, log) = era_client(&tag, "legacy", &target, &plan).await;
    let steps = &report["steps"];
    assert_eq!(
        steps[0]["templates"],
        json!(["tpl://item/{id}"]),
        "{report}"
    );
    assert_eq!(steps[1]["notified"], true, "{report}\n{log}");
    assert_eq!(
        steps[2]["templates"],
        json!(["tpl://item/{id}", "tpl://extra/{id}"]),
        "{report}"
    );
}

/// The `notifications/resources/list_changed` the stdio client got so far.
fn resources_changed(gw: &mut Gateway) -> usize {
    (gw.client().seen.iter())
        .filter(|m| m["method"] == "notifications/resources/list_changed")
        .count()
}

/// The `uriTemplate`s a `resources/templates/list` returns.
async fn listed_templates(gw: &mut Gateway) -> Vec<Value> {
    let list = gw
        .client()
        .request("resources/templates/list", json!({}))
        .await;
    let templates = list["result"]["resourceTemplates"].as_array().cloned();
    (templates.unwrap_or_default().iter())
        .map(|t| t["uriTemplate"].clone())
        .collect()
}

/// A reload that removes the one upstream listing templates (and no resources): the
/// resources hosts see changed, and they are told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_removes_only_templates_announces_resources_list_changed() {
    let ups = [templates("tpl", &["--templates-only"]), Up::time("time")];
    let mut gw = Gateway::builder("templates-reload", Mode::Stdio)
        .start(&ups)
        .await;
    gw.client().initialize().await;
    assert_eq!(listed_templates(&mut gw).await, [json!("tpl://item/{id}")]);
    gw.client().drain(Duration::from_millis(500)).await;
    let before = resources_changed(&mut gw);
    let file = gw.policy_file();
    let dir = file.parent().expect("in a directory").to_owned();
    policy(&dir, &gw.tag, "", &ups[1..]);
    let deadline = tokio::time::Instant::now() + WAIT;
    while !gw.log().contains("reload: ") {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    gw.client().drain(Duration::from_secs(1)).await;
    assert_eq!(resources_changed(&mut gw), before + 1, "{}", gw.log());
    assert!(listed_templates(&mut gw).await.is_empty());
    gw.stop_and_check().await;
}
