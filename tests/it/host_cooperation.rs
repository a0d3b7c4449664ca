//! Host cooperation on the wire (issue 55): the gateway binary over stdio, behind it GitHub's
//! reference toolset (26 tools, each with an upstream `_meta` key) and `time`, listed by
//! `saved_server.py`. The tools the plan lists and the meta-tools carry
//! `_meta["anthropic/alwaysLoad"] = true` beside the upstream's keys; `[budget] host_deferral`
//! decides whether the deferred tools are listed for the host's own search and whether the
//! meta-tools stay; the listed bytes do not change between calls.

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, peer_file, root, venv_bin};

const ALWAYS_LOAD: &str = "anthropic/alwaysLoad";

/// A saved toolset of `tests/fixtures/desktop`, every tool given an upstream `_meta` key,
/// written into `dir` and served by `saved_server.py`.
fn saved(dir: &std::path::Path, server: &str) -> Up {
    let file = root().join(format!("tests/fixtures/desktop/{server}.json"));
    let mut tools: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    for tool in tools["tools"].as_array_mut().unwrap() {
        tool["_meta"] = json!({"io.example/owner": server});
    }
    let path = dir.join(format!("{server}.json"));
    std::fs::write(&path, tools.to_string()).unwrap();
    Up::stdio(
        server,
        &venv_bin("python"),
        &[&peer_file("saved_server.py"), &path.to_string_lossy()],
    )
}

/// `tools/list` twice from a gateway with these `[budget]` lines (28 tools, a cap of 8):
/// the tools, after checking that both answers are the same bytes.
async fn listed(test: &str, budget: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let ups = [saved(dir.path(), "github"), saved(dir.path(), "time")];
    let policy = format!("[budget]\nmax_tools = 8\n{budget}");
    let mut gw = Gateway::builder(test, Mode::Stdio)
        .policy(&policy)
        .start(&ups)
        .await;
    let client = gw.client();
    client.initialize().await;
    let first = client.request("tools/list", json!({})).await;
    let again = client.request("tools/list", json!({})).await;
    assert_eq!(
        first["result"].to_string(),
        again["result"].to_string(),
        "the listed bytes churned between calls"
    );
    // A listed tool is called as any host calls it.
    let tools = first["result"]["tools"].as_array().unwrap().clone();
    let called = client.call_tool("time__get_current_time", json!({})).await;
    assert!(called.get("result").is_some(), "{called}");
    gw.stop_and_check().await;
    tools
}

fn name(tool: &Value) -> &str {
    tool["name"].as_str().unwrap()
}

fn marked(tool: &Value) -> bool {
    tool["_meta"][ALWAYS_LOAD] == true
}

const META: [&str; 3] = ["search_tools", "get_tool_schema", "invoke_tool"];

/// Every real tool keeps its upstream `_meta` key, marked or not.
fn upstream_meta_kept(tools: &[Value]) {
    for tool in tools.iter().filter(|t| !META.contains(&name(t))) {
        let owner = tool["_meta"]["io.example/owner"].as_str();
        assert_eq!(owner, name(tool).split("__").next(), "{tool}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_plans_tools_and_the_meta_tools_carry_always_load() {
    let tools = listed("always_load_off", "").await;
    let names: Vec<&str> = tools.iter().map(name).collect();
    assert_eq!(names.len(), 8, "{names:?}");
    assert!(META.iter().all(|m| names.contains(m)), "{names:?}");
    assert!(
        tools.iter().all(marked),
        "every listed tool marked: {tools:#?}"
    );
    upstream_meta_kept(&tools);
    // Rounds across servers: both servers have tools listed.
    assert!(names.contains(&"time__get_current_time"), "{names:?}");
    assert!(names.iter().filter(|n| n.starts_with("github__")).count() >= 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cooperating_host_gets_every_tool_the_plans_marked() {
    let tools = listed("always_load_cooperate", "host_deferral = \"cooperate\"\n").await;
    let names: Vec<&str> = tools.iter().map(name).collect();
    assert_eq!(
        names.len(),
        28 + 3,
        "every tool and the meta-tools: {names:?}"
    );
    let marked_names: Vec<&str> = tools.iter().filter(|t| marked(t)).map(name).collect();
    // The plan's 5 (the cap of 8 less 3 meta-tools) and the meta-tools.
    assert_eq!(marked_names.len(), 8, "{marked_names:?}");
    assert!(
        META.iter().all(|m| marked_names.contains(m)),
        "{marked_names:?}"
    );
    upstream_meta_kept(&tools);
    // The deferred ones are listed whole (for the host's search), without catalog lines.
    let search = tools.iter().find(|t| name(t) == "search_tools").unwrap();
    let description = search["description"].as_str().unwrap();
    assert!(!description.contains("\n- github__"), "{description}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_that_searches_alone_gets_no_meta_tools() {
    let tools = listed("always_load_host", "host_deferral = \"host\"\n").await;
    let names: Vec<&str> = tools.iter().map(name).collect();
    assert_eq!(names.len(), 28, "{names:?}");
    assert!(!names.iter().any(|n| META.contains(n)), "{names:?}");
    let marked_names: Vec<&str> = tools.iter().filter(|t| marked(t)).map(name).collect();
    // No meta-tools: all 8 slots go to tools.
    assert_eq!(marked_names.len(), 8, "{marked_names:?}");
    upstream_meta_kept(&tools);
}
