//! `[pin] recheck_secs` against a real server (Python `mcp` SDK,
//! `tests/peers/poisoned_server.py rugprompt 1 silent`) that changes a tool, a prompt and a
//! resource template without saying `list_changed`: with `recheck_secs = 1` all three are
//! quarantined within seconds, as a restart would (audit lines, metrics, refusals); nothing is
//! announced while nothing changed; without it they are served as changed.

use std::time::Duration;

use serde_json::{Value, json};

use crate::guard::poisoned;
use crate::harness::{Gateway, Mode, RawClient, WAIT, error_type, free_port};
use crate::telemetry::{admin, get};

async fn names(c: &mut RawClient, method: &str, key: &str, field: &str) -> Vec<String> {
    let list = c.request(method, json!({})).await;
    let mut names: Vec<String> = (list["result"][key].as_array())
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t[field].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// Tools, prompts and templates listed now.
async fn lists(c: &mut RawClient) -> (Vec<String>, Vec<String>, Vec<String>) {
    (
        names(c, "tools/list", "tools", "name").await,
        names(c, "prompts/list", "prompts", "name").await,
        names(
            c,
            "resources/templates/list",
            "resourceTemplates",
            "uriTemplate",
        )
        .await,
    )
}

fn list_changed(c: &RawClient) -> usize {
    (c.seen.iter())
        .filter(|m| {
            m["method"]
                .as_str()
                .is_some_and(|m| m.ends_with("list_changed"))
        })
        .count()
}

fn silent() -> crate::harness::Up {
    poisoned("rp", &["rugprompt", "1", "silent"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_rug_pull_is_quarantined_within_recheck_secs() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let admin_port = free_port();
    let extra = format!(
        "\n[pin]\nrecheck_secs = 1\n[audit]\npath = {audit:?}\n{}",
        admin(admin_port)
    );
    let mut gw = Gateway::builder("recheck-silent", Mode::Stdio)
        .policy(&extra)
        .start(&[silent()])
        .await;
    let c = gw.client();
    c.initialize().await;
    let before = c.request("tools/list", json!({})).await["result"].clone();
    // Ticks that find nothing new announce nothing, and the list stays byte-stable.
    c.drain(Duration::from_millis(2500)).await;
    assert_eq!(list_changed(c), 0, "{:#?}", c.seen);
    assert_eq!(c.request("tools/list", json!({})).await["result"], before);
    let (tools, prompts, templates) = lists(c).await;
    assert_eq!(tools, ["rp__fact", "rp__flip"]);
    assert_eq!(prompts, ["rp__greet", "rp__summary"]);
    assert_eq!(templates, ["notes://{id}"]);
    let flipped = c.call_tool("rp__flip", json!({})).await;
    assert_eq!(
        flipped["result"]["content"][0]["text"], "flipped",
        "{flipped}"
    );
    let flipped_at = tokio::time::Instant::now();
    let held = (
        vec!["rp__flip".to_owned()],
        vec!["rp__summary".to_owned()],
        Vec::<String>::new(),
    );
    while lists(c).await != held && flipped_at.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let caught = flipped_at.elapsed();
    assert_eq!(lists(c).await, held, "not caught within {caught:?}");
    eprintln!("silent rug pull caught {caught:?} after the change (recheck_secs = 1)");
    assert!(caught < Duration::from_secs(10), "{caught:?}");
    let refused = c
        .call_tool("rp__fact", json!({"topic": "x", "exfil": "k"}))
        .await;
    assert_eq!(error_type(&refused), "mcp_budget.tool.changed", "{refused}");
    assert_eq!(
        refused["error"]["data"]["changed"],
        json!(["description", "schema"])
    );
    let refused = c.request("prompts/get", json!({"name": "rp__greet"})).await;
    assert_eq!(
        error_type(&refused),
        "mcp_budget.prompt.changed",
        "{refused}"
    );
    let log = gw.log();
    for line in [
        "Tool quarantined",
        "Prompt quarantined",
        "Resource template quarantined",
    ] {
        assert!(log.contains(line), "{line} missing from:\n{log}");
    }
    // The audit lines and metrics, as for a change announced with list_changed.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let text = std::fs::read_to_string(&audit).unwrap_or_default();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let quarantine = |method: &str| -> Vec<&Value> {
        (lines.iter())
            .filter(|l| l["event"] == "quarantine" && l["method"] == method)
            .collect()
    };
    for (method, name) in [
        ("tools/list", "rp__fact"),
        ("prompts/list", "rp__greet"),
        ("resources/templates/list", "notes://{id}"),
    ] {
        let found = quarantine(method);
        assert_eq!(found.len(), 1, "{method}: {lines:#?}");
        assert_eq!(found[0]["tool"], name);
        assert_eq!(found[0]["reason"], "changed");
    }
    let (_, metrics) = get(admin_port, "/metrics").await;
    for line in [
        "mcp_budget_tools_quarantined{server=\"rp\",reason=\"changed\"} 1",
        "mcp_budget_prompts_quarantined{server=\"rp\",reason=\"changed\"} 1",
        "mcp_budget_resource_templates_quarantined{server=\"rp\",reason=\"changed\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_recheck_a_silent_rug_pull_is_served_until_a_restart() {
    let mut gw = Gateway::start("recheck-off", Mode::Stdio, &[silent()]).await;
    let c = gw.client();
    c.initialize().await;
    let honest = lists(c).await;
    assert_eq!(honest.0, ["rp__fact", "rp__flip"]);
    let flipped = c.call_tool("rp__flip", json!({})).await;
    assert_eq!(
        flipped["result"]["content"][0]["text"], "flipped",
        "{flipped}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(lists(c).await, honest, "nothing told the gateway");
    let served = c
        .call_tool("rp__fact", json!({"topic": "x", "exfil": "k"}))
        .await;
    assert_eq!(
        served["result"]["content"][0]["text"], "fact about x",
        "{served}"
    );
    gw.stop_and_check().await;
}
