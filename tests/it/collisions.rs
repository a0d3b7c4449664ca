//! Colliding namespaced names: server `a` with tool `b__c` and server `a__b` with tool `c` both
//! join to `a__b__c`. Two real servers (Python `mcp` SDK) whose tools collide: both are listed
//! under distinct names, the same whatever the policy order and with the budget on or off, the
//! startup summary reports the collision, and a call of each name reaches its own server.

use serde_json::Value;

use crate::harness::{Gateway, Mode, Up, peer_file, venv_bin};

fn named(name: &str, label: &str, tools: &[&str]) -> Up {
    let server = peer_file("named_server.py");
    let mut args = vec![server.as_str(), label];
    args.extend_from_slice(tools);
    Up::stdio(name, &venv_bin("python"), &args)
}

fn text(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

async fn told_apart(test: &str, budget: &str, ups: &[Up]) -> Vec<String> {
    let mut gw = Gateway::builder(test, Mode::Stdio)
        .policy(budget)
        .start(ups)
        .await;
    let c = gw.client();
    c.initialize().await;
    let list = c.request("tools/list", serde_json::json!({})).await;
    let names: Vec<String> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    let other = names
        .iter()
        .find(|n| n.starts_with("a__b__c_"))
        .unwrap_or_else(|| panic!("a second name: {names:?}"))
        .clone();
    assert!(names.iter().any(|n| n == "a__b__c"), "{names:?}");
    let kept = c.call_tool("a__b__c", serde_json::json!({})).await;
    assert_eq!(text(&kept), "A:b__c", "{kept}");
    let moved = c.call_tool(&other, serde_json::json!({})).await;
    assert_eq!(text(&moved), "AB:c", "{moved}");
    let log = gw.log();
    let line =
        format!("collision: tool name a__b__c claimed by a/b__c (keeps it), a__b/c (as {other})");
    assert!(log.contains(&line), "{log}");
    gw.stop_and_check().await;
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colliding_names_are_told_apart_and_each_reaches_its_own_server() {
    let a = || named("a", "A", &["b__c"]);
    let ab = || named("a__b", "AB", &["c"]);
    let mut passed = told_apart("collide-ab", "", &[a(), ab()]).await;
    let mut turned = told_apart("collide-ba", "", &[ab(), a()]).await;
    passed.sort();
    turned.sort();
    assert_eq!(passed, turned, "same names whatever the policy order");
    let mut planned = told_apart(
        "collide-budget",
        "[budget]\nmode = \"full\"\n",
        &[ab(), a()],
    )
    .await;
    planned.sort();
    assert_eq!(passed, planned, "the budget layer lists the same names");
}
