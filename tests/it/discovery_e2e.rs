//! Progressive discovery end to end: the Python MCP SDK (a real client) talks to the gateway
//! binary over stdio; behind it, real upstreams (`mcp-server-time` from `PyPI`,
//! `@modelcontextprotocol/server-everything` from npm, and a small Python-SDK server whose
//! tool list shrinks). The budget is too small for the catalog, so the client must find,
//! inspect and invoke tools through the meta-tools.
//!
//! Needs `scripts/install-test-deps.sh` (run by `scripts/test.sh`).

use crate::python_stdio;

use std::time::Duration;

use serde_json::Value;

#[test]
fn client_finds_inspects_and_invokes_deferred_tools() {
    let budget = "\
# Too small for the catalog: every tool goes behind the meta-tools.
mode = \"progressive\"
list_catalog = false";
    let shrink = format!(
        r#"
[[upstream]]
name = "shrink"
command = "{python}"
args = ["{shrink}"]
"#,
        python = python_stdio::python().display(),
        shrink = python_stdio::peers()
            .join("scripts/shrinking_server.py")
            .display(),
    );
    // The gateway inherits the client's stderr: its debug log shows what it announced.
    let env = [(
        "MCP_BUDGET_LOG",
        "info,mcp_budget::gateway=debug,mcp_budget::layer::budget=debug",
    )];
    let report = python_stdio::run(&["scripts/discovery_client.py"], budget, &shrink, &env);
    let (seen, stderr): (Value, String) = (report.json, report.stderr);

    let listed: Vec<&str> = seen["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(listed, ["search_tools", "get_tool_schema", "invoke_tool"]);

    let search = seen["search"].as_str().unwrap();
    assert!(search.contains("shrink__forecast_weather"), "{search}");
    assert_eq!(
        seen["search"], seen["search_again"],
        "identical requests, identical results"
    );

    let schema = seen["schema"].as_str().unwrap();
    assert!(
        schema.contains("\"city\"") && schema.contains("inputSchema"),
        "{schema}"
    );

    assert_eq!(seen["invoke"]["is_error"], false, "{}", seen["invoke"]);
    assert!(
        seen["invoke"]["text"]
            .as_str()
            .unwrap()
            .contains("forecast for Paris: sunny for 2 day(s)"),
        "{}",
        seen["invoke"]
    );

    assert_eq!(seen["invalid"]["is_error"], true, "{}", seen["invalid"]);
    let invalid = seen["invalid"]["text"].as_str().unwrap();
    assert!(
        invalid.contains("city"),
        "names the missing argument: {invalid}"
    );
    // The concrete problem and the whole input schema, inline.
    assert!(
        invalid.contains("- arguments.days: expected integer, got string \"two\""),
        "{invalid}"
    );
    assert!(
        invalid.contains("Input schema of shrink__forecast_weather: {"),
        "{invalid}"
    );
    let structured = &seen["invalid"]["structured"];
    assert_eq!(structured["type"], "mcp_budget.discover.invalid_arguments");
    assert_eq!(
        structured["inputSchema"]["required"],
        serde_json::json!(["city"])
    );

    // invoke_tool recovers: empty or misplaced arguments say which fields are required, and
    // the retry built from the answer alone goes through.
    let recovery = &seen["recovery"];
    for (case, kind) in [
        ("empty", "missing_arguments"),
        ("top_level", "misplaced_arguments"),
        ("alias", "misplaced_arguments"),
    ] {
        let r = &recovery[case];
        assert_eq!(r["is_error"], true, "{case}: {r}");
        assert_eq!(
            r["structured"]["type"],
            format!("mcp_budget.discover.{kind}"),
            "{case}: {r}"
        );
        let text = r["text"].as_str().unwrap();
        assert!(text.contains("Required: city (string)."), "{case}: {text}");
    }
    let top = recovery["top_level"]["text"].as_str().unwrap();
    assert!(top.contains("found city, days at the top level"), "{top}");
    let alias = recovery["alias"]["text"].as_str().unwrap();
    assert!(alias.contains("not \"tool_input\""), "{alias}");
    assert_eq!(
        recovery["retry"]["is_error"], false,
        "{}",
        recovery["retry"]
    );
    assert!(
        recovery["retry"]["text"]
            .as_str()
            .unwrap()
            .contains("forecast for Paris")
    );

    assert!(
        seen["converter_before"]
            .as_str()
            .unwrap()
            .contains("shrink__convert_currency")
    );
    assert!(
        !seen["converter_after"]
            .as_str()
            .unwrap()
            .contains("shrink__convert_currency"),
        "a tool removed upstream is no longer found: {}",
        seen["converter_after"]
    );
    // Only the meta-tools are listed, so a deferred tool leaving changed nothing the host
    // sees: no list_changed reached it (quiet lists keep its prompt cache).
    assert!(
        stderr.contains("not what hosts see; not announced"),
        "{stderr}"
    );
    // The gateway exited with its client: nothing it started is left behind.
    std::thread::sleep(Duration::from_millis(200));
}
