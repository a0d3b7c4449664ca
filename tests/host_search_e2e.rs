//! `mode = "host_search"` end to end: the Python MCP SDK (a real client, standing in for a host
//! that searches tools itself) talks to the gateway binary over stdio; behind it, real
//! upstreams (`mcp-server-time` from `PyPI`, `@modelcontextprotocol/server-everything` from
//! npm). The budget of a `progressive` plan would defer most of the catalog; `host_search`
//! lists every real tool, no meta-tools, and the `initialize` instructions say what each
//! upstream is and how its tools are named.
//!
//! Needs `scripts/install-test-deps.sh` (run by `scripts/test.sh`).
#![allow(clippy::unwrap_used)] // test helpers

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// The Python client's report for the gateway serving `mode` (with a tiny tool cap).
fn report(mode: &str) -> Value {
    let peers = peers();
    let python = peers.join(".venv/bin/python");
    assert!(python.exists(), "run scripts/install-test-deps.sh first");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            r#"version = 1

[budget]
model = "claude-haiku-4-5"
mode = "{mode}"
# A cap no catalog here fits: only a host-search plan lists every tool.
max_tools = 4

[[upstream]]
name = "time"
command = "{time}"
args = ["--local-timezone", "UTC"]

[[upstream]]
name = "everything"
command = "{everything}"
"#,
            time = peers.join(".venv/bin/mcp-server-time").display(),
            everything = peers
                .join("node_modules/.bin/mcp-server-everything")
                .display(),
        ),
    )
    .unwrap();
    let plan = json!({"calls": [{"name": "everything__echo", "args": {"message": "hi"}}]});
    let output = Command::new("timeout")
        .arg("120")
        .arg(&python)
        .arg(peers.join("py_client.py"))
        .arg("stdio")
        .arg(env!("CARGO_BIN_EXE_mcp-budget"))
        .args(["serve", "--stdio", "--policy"])
        .arg(&policy)
        .env("PLAN", plan.to_string())
        .env("MCP_BUDGET_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "client failed:\n{stdout}\n{stderr}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("bad report ({e}): {stdout}\n{stderr}"))
}

fn names(report: &Value) -> Vec<&str> {
    report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

#[test]
fn a_searching_host_gets_every_real_tool_and_instructions_that_name_them() {
    let r = report("host_search");
    let names = names(&r);
    assert!(!names.contains(&"search_tools"), "{names:?}");
    assert!(!names.contains(&"invoke_tool"), "{names:?}");
    assert!(names.contains(&"time__get_current_time"), "{names:?}");
    assert!(names.contains(&"time__convert_time"), "{names:?}");
    assert!(names.contains(&"everything__echo"), "{names:?}");
    // Far over the cap of 4: the cap is the host's business here.
    assert!(names.len() > 8, "{names:?}");
    // Canonical order: servers in policy order, each one's tools by name.
    let time: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| n.starts_with("time__"))
        .collect();
    assert_eq!(time, ["time__convert_time", "time__get_current_time"]);
    assert!(names[0].starts_with("time__"), "{names:?}");
    let instructions = r["instructions"].as_str().unwrap_or_else(|| panic!("{r}"));
    assert!(
        instructions.contains("`<server>__<tool>`"),
        "{instructions}"
    );
    assert!(
        instructions.contains("## time (2 tools: time__convert_time, time__get_current_time)"),
        "{instructions}"
    );
    assert!(instructions.contains("## everything ("), "{instructions}");
    // A real tool is called directly, as any host calls it.
    let echoed = r["calls"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(echoed.contains("hi"), "{r}");
}

#[test]
fn the_same_gateway_in_progressive_mode_defers_behind_meta_tools() {
    // The contrast: same upstreams and cap, the meta-tools stand in for the catalog.
    let r = report("progressive");
    let names = names(&r);
    assert!(names.contains(&"search_tools"), "{names:?}");
    assert!(!names.contains(&"everything__echo"), "{names:?}");
    let instructions = r["instructions"].as_str().unwrap_or_default();
    assert!(
        !instructions.contains("`<server>__<tool>`"),
        "{instructions}"
    );
}
