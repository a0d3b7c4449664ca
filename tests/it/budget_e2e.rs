//! The budget layer end to end: the Python MCP SDK (a real client) talks to the gateway binary
//! over stdio; behind it, real upstreams (`mcp-server-time` from `PyPI`,
//! `@modelcontextprotocol/server-everything` from npm).
//!
//! - `mode = "host_search"` (the client standing in for a host that searches tools itself):
//!   where a `progressive` plan defers most of the catalog, every real tool is listed, no
//!   meta-tools, and the `initialize` instructions say what each upstream is and how its tools
//!   are named.
//! - `max_result_tokens`: a long `echo` result is cut with a note, a short one passes whole.
//!
//! Needs `scripts/install-test-deps.sh` (run by `scripts/test.sh`).

use crate::python_stdio;

use serde_json::{Value, json};

/// The Python client's report for the gateway under `budget` (the `[budget]` section's keys,
/// and any sections after it), making the calls of `plan`.
fn report(budget: &str, plan: &Value) -> Value {
    let plan = plan.to_string();
    let env = [("PLAN", plan.as_str()), ("MCP_BUDGET_LOG", "warn")];
    python_stdio::run(&["py_client.py", "stdio"], budget, "", &env).json
}

/// A cap no catalog here fits: only a host-search plan lists every tool.
const HOST_SEARCH: &str = "mode = \"host_search\"\nmax_tools = 4";

/// A plan of one `echo` call.
fn echo(message: &str) -> Value {
    json!({"calls": [{"name": "everything__echo", "args": {"message": message}}]})
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
    let r = report(HOST_SEARCH, &echo("hi"));
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
    let r = report(
        &HOST_SEARCH.replace("host_search", "progressive"),
        &echo("hi"),
    );
    let names = names(&r);
    assert!(names.contains(&"search_tools"), "{names:?}");
    assert!(!names.contains(&"everything__echo"), "{names:?}");
    let instructions = r["instructions"].as_str().unwrap_or_default();
    assert!(
        !instructions.contains("`<server>__<tool>`"),
        "{instructions}"
    );
}

#[test]
fn a_long_result_is_cut_to_its_budget_with_a_note_and_a_short_one_passes() {
    let budget = "mode = \"full\"\n[budget.tools.\"everything/echo\"]\nmax_result_tokens = 30";
    let long = "lorem ipsum dolor sit amet ".repeat(200);
    let plan = json!({"calls": [
        {"name": "everything__echo", "args": {"message": long}},
        {"name": "everything__echo", "args": {"message": "short"}},
    ]});
    let r = report(budget, &plan);
    let texts = |i: usize| -> Vec<String> {
        r["calls"][i]["result"]["content"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .filter_map(|b| b["text"].as_str().map(str::to_owned))
            .collect()
    };
    let cut = texts(0);
    assert_eq!(cut.len(), 2, "{cut:?}");
    assert!(cut[0].starts_with("Echo: lorem ipsum"), "{cut:?}");
    assert!(cut[0].len() < 200, "cut to about 30 tokens: {cut:?}");
    assert!(
        cut[1].starts_with("[… cut: ") && cut[1].ends_with(" tokens shown; ask for less]"),
        "{cut:?}"
    );
    assert_eq!(texts(1), ["Echo: short"]);
}
