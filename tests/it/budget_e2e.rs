//! The budget layer end to end: the Python MCP SDK (a real client) talks to the gateway binary
//! over stdio; behind it, real upstreams (`mcp-server-time` from `PyPI`,
//! `@modelcontextprotocol/server-everything` from npm).
//!
//! - `mode = "host_search"` (the client standing in for a host that searches tools itself):
//!   where a `progressive` plan defers most of the catalog, every real tool is listed, no
//!   meta-tools, and the `initialize` instructions say what each upstream is and how its tools
//!   are named.
//! - `max_result_tokens`: a long `echo` result keeps a head and a note, and `read_result`
//!   reads it all back; a short one passes whole.
//! - `result_format = "toon"`: the memory server's JSON graph comes back as TOON.
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
fn a_short_result_passes_whole_under_its_budget() {
    let budget = "mode = \"full\"\n[budget.tools.\"everything/echo\"]\nmax_result_tokens = 30";
    let r = report(budget, &echo("short"));
    assert_eq!(
        r["calls"][0]["result"]["content"][0]["text"], "Echo: short",
        "{r}"
    );
}

/// The read-back client's report for the gateway under `budget`: `tool` called with `args`
/// (after the `setup` calls), then its whole result read with `read_result`.
fn read_back(budget: &str, setup: &Value, tool: &str, args: &Value) -> Value {
    let (setup, args) = (setup.to_string(), args.to_string());
    let env = [
        ("CALLS", setup.as_str()),
        ("TOOL", tool),
        ("ARGS", args.as_str()),
        ("MCP_BUDGET_LOG", "warn"),
    ];
    python_stdio::run(&["read_result_client.py", "stdio"], budget, "", &env).json
}

/// Issue 54: a result ten times over its budget keeps a head and a note, and the whole of it
/// comes back through `read_result`, page after page, from the real `everything` server.
#[test]
fn a_result_ten_times_over_its_budget_is_read_back_whole() {
    let budget = "mode = \"full\"\n[budget.tools.\"everything/echo\"]\nmax_result_tokens = 300";
    let message: String = (0..1200).map(|i| format!("word{i} ")).collect();
    let r = read_back(
        budget,
        &json!([]),
        "everything__echo",
        &json!({"message": message}),
    );
    let tools = r["tools"].as_array().unwrap_or_else(|| panic!("{r}"));
    assert_eq!(tools.last(), Some(&json!("read_result")), "{r}");
    let first = r["first"].as_array().unwrap();
    let note = first.last().and_then(Value::as_str).unwrap();
    assert!(
        note.contains("The whole result is kept: call read_result"),
        "{note}"
    );
    assert!(note.starts_with("[… ") && note.contains(" of "), "{note}");
    let pages = r["pages"].as_array().unwrap();
    assert!(
        pages.len() >= 8,
        "about ten budgets of text, a page a budget: {r}"
    );
    assert_eq!(
        r["whole"].as_str(),
        Some(format!("Echo: {message}").as_str()),
        "{r}"
    );
}

/// Issue 54: `result_format = "toon"` on the real memory server: its pretty-printed graph comes
/// back in the smallest lossless rendering (here minified JSON: its list of objects with arrays
/// counts more tokens as TOON), the same JSON.
#[test]
fn the_memory_servers_graph_comes_back_in_its_smallest_lossless_form() {
    let memory = python_stdio::peers().join("node_modules/.bin/mcp-server-memory");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.jsonl");
    let budget = format!(
        "mode = \"full\"\n[budget.tools.\"memory/*\"]\nresult_format = \"toon\"\n\n\
         [[upstream]]\nname = \"memory\"\ncommand = \"{}\"\nenv = {{ MEMORY_FILE_PATH = \"{}\" }}\n",
        memory.display(),
        file.display()
    );
    let entities: Vec<Value> = (0..12)
        .map(|i| json!({"name": format!("person {i}"), "entityType": "person", "observations": [format!("born {}", 1900 + i)]}))
        .collect();
    let setup = json!([{"name": "memory__create_entities", "args": {"entities": entities}}]);
    let r = read_back(&budget, &setup, "memory__read_graph", &json!({}));
    let graph = r["first"][0].as_str().unwrap_or_else(|| panic!("{r}"));
    let value: Value = serde_json::from_str(graph).unwrap_or_else(|e| panic!("{e}: {graph}"));
    assert!(!graph.contains('\n'), "minified: {graph}");
    assert_eq!(value["entities"][11]["observations"][0], "born 1911");
}
