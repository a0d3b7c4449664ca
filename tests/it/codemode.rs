//! Code mode end to end: the Python SDK calls `run_code` through the gateway (HTTP) against
//! server-everything and a saved toolset (github, listed by `tests/peers/saved_server.py`):
//! scripts chain and filter tool results, catch tool errors, read the typed API; the escape and
//! exhaustion suite is contained, each attempt with its limit's message, and the gateway keeps
//! serving; a tool denied to an API-key client is denied inside a script as it is when called
//! directly, with the run's audit id on the audit line; runs are counted on `/metrics` by
//! outcome and limit, with their wall time and tool calls.

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, peer_file, py_script_output, report, root, venv_bin};
use crate::identity::audit_lines;

const DENIED: &str = "mcp_budget.authorization.denied";

/// `[budget]` and `[discover]` turning code mode on with short limits (the suite stays fast).
const CODE_MODE: &str = r#"
[budget]
mode = "progressive"

[discover]
code_mode = true
code_mode_timeout_ms = 3000
code_mode_max_steps = 2000
code_mode_memory_mb = 16
code_mode_stack_kb = 256
code_mode_max_calls = 20
code_mode_max_result_tokens = 2000
"#;

/// The saved github toolset, served by `saved_server.py` (a call answers the tool's name).
fn saved_github() -> Up {
    let file = root().join("tests/fixtures/toolsets/github.json");
    Up::stdio(
        "gh",
        &venv_bin("python"),
        &[&peer_file("saved_server.py"), &file.to_string_lossy()],
    )
}

/// Runs `auth_client.py` against the gateway at `url` with `headers`: its report.
async fn py(tag: &str, url: &str, headers: &Value, calls: &Value) -> Value {
    let plan = json!({ "calls": calls });
    let env = [("HEADERS", headers.to_string())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    report(&py_script_output("auth_client.py", tag, "legacy", &["http", url], &plan, &env).await).0
}

fn run(code: &str) -> Value {
    json!({"name": "run_code", "args": {"code": code}})
}

/// The text of a call's result, and whether it is an error result.
fn text_of(call: &Value) -> (String, bool) {
    let result = &call["result"];
    assert!(result.is_object(), "no result: {call}");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (text, result["isError"] == true)
}

/// The JSON a successful run returned.
fn returned(call: &Value) -> Value {
    let (text, is_error) = text_of(call);
    assert!(!is_error, "run failed: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_chain_filter_catch_and_read_the_typed_api() {
    let ups = [Up::everything("e"), saved_github()];
    let gw = Gateway::builder("codemode-basic", Mode::Http)
        .policy(CODE_MODE)
        .start(&ups)
        .await;
    let calls = json!([
        run(r#"
            const sum = tools.call("e__get-sum", {a: 2, b: 3});
            const echoed = tools.call("e__echo", {message: String(sum)});
            return {sum, echoed};
        "#),
        run(r#"
            const found = tools.search("list pull requests").map(t => t.name);
            const schema = tools.schema(found[0]);
            const prs = found.filter(n => n.startsWith("gh__")).map(n => tools.call(n, {owner: "o", repo: "r"}));
            ({found, required: schema.inputSchema.required ?? [], prs})
        "#),
        run(r#"
            let caught;
            try { tools.call("e__no_such_tool", {}); } catch (e) { caught = {message: e.message, type: e.type, tool: e.tool}; }
            return caught;
        "#),
        run(r#"tools.call("e__get-sum", {a: "not a number"})"#),
        run(r#"return tools.describe("echo")"#),
    ]);
    let r = py(&gw.tag, gw.url(), &json!({}), &calls).await;
    assert!(
        r["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "run_code"),
        "run_code is offered with the meta-tools: {}",
        r["tools"]
    );
    let c = &r["calls"];
    let chained = returned(&c[0]);
    assert!(chained["sum"].as_str().unwrap().contains('5'), "{chained}");
    assert!(
        chained["echoed"]
            .as_str()
            .unwrap()
            .contains(chained["sum"].as_str().unwrap()),
        "{chained}"
    );
    let filtered = returned(&c[1]);
    let found: Vec<String> = filtered["found"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().trim_start_matches("gh__").to_owned())
        .collect();
    assert!(
        found.iter().any(|n| n == "list_pull_requests"),
        "{filtered}"
    );
    assert_eq!(
        filtered["prs"],
        json!(found),
        "each found tool called by name: {filtered}"
    );
    let caught = returned(&c[2]);
    assert_eq!(caught["tool"], "e__no_such_tool", "{caught}");
    assert!(
        caught["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("mcp_budget.")),
        "{caught}"
    );
    let (text, is_error) = text_of(&c[3]);
    assert!(
        is_error && text.starts_with("run_code: the script threw"),
        "{text}"
    );
    let api = returned(&c[4]);
    let api = api.as_str().unwrap();
    assert!(
        api.contains("namespace tools {") && api.contains("type e__echo = (_: {"),
        "{api}"
    );
    assert!(!api.contains("gh__"), "only the matching tools: {api}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_escape_and_exhaustion_suite_is_contained() {
    let ups = [Up::everything("e")];
    let gw = Gateway::builder("codemode-escape", Mode::Http)
        .policy(CODE_MODE)
        .start(&ups)
        .await;
    let attempts = [
        ("for (;;) {}", "code_mode_max_steps"),
        (
            "const a = []; for (;;) a.push(new Array(4096).fill(7))",
            "code_mode_memory_mb",
        ),
        (
            "function f(n) { return f(n + 1) + 1 } f(0)",
            "code_mode_stack_kb",
        ),
        ("let s = 'x'; while (true) s += s", "code_mode_memory_mb"),
        (
            "for (let i = 0; i < 1000; i++) tools.call('e__echo', {message: 'x'})",
            "code_mode_max_calls",
        ),
        ("return 'y'.repeat(200000)", "code_mode_max_result_tokens"),
    ];
    let mut calls: Vec<Value> = attempts.iter().map(|(code, _)| run(code)).collect();
    calls.push(run(r#"
        const probes = {};
        for (const name of ["require", "process", "Deno", "fetch", "setTimeout", "console", "performance"]) {
            probes[name] = typeof globalThis[name];
        }
        try { await import("fs"); probes.import = "loaded"; } catch (e) { probes.import = "refused"; }
        try { probes.ctor = (function(){}).constructor("return typeof process")(); } catch (e) { probes.ctor = e.name; }
        probes.global_keys = Object.keys(globalThis);
        Object.prototype.polluted = "yes";
        globalThis.leftover = 1;
        return probes;
    "#));
    calls.push(run("return [({}).polluted ?? 'clean', typeof leftover]"));
    calls.push(json!({"name": "e__echo", "args": {"message": "still serving"}}));
    let r = py(&gw.tag, gw.url(), &json!({}), &json!(calls)).await;
    let c = r["calls"].as_array().unwrap();
    for (i, (code, key)) in attempts.iter().enumerate() {
        let (text, is_error) = text_of(&c[i]);
        assert!(is_error, "{code}: {text}");
        assert!(text.starts_with("run_code stopped: "), "{code}: {text}");
        assert!(
            text.contains(&format!("`[discover] {key}`")),
            "{code} names {key}: {text}"
        );
    }
    let probes = returned(&c[attempts.len()]);
    for name in [
        "require",
        "process",
        "Deno",
        "fetch",
        "setTimeout",
        "console",
        "performance",
    ] {
        assert_eq!(probes[name], "undefined", "{name}: {probes}");
    }
    assert_eq!(
        (probes["import"].as_str(), probes["ctor"].as_str()),
        (Some("refused"), Some("undefined"))
    );
    assert_eq!(probes["global_keys"], json!(["tools"]), "{probes}");
    assert_eq!(
        returned(&c[attempts.len() + 1]),
        json!(["clean", "undefined"])
    );
    let (text, is_error) = text_of(&c[attempts.len() + 2]);
    assert!(!is_error && text.contains("still serving"), "{text}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_tool_is_denied_inside_a_script_as_when_called_directly() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let downstream = format!(
        r#"{CODE_MODE}
[[client]]
name = "alice"
api_key_env = "ALICE_KEY"
allow = ["e/echo", "e/get-sum"]
deny = ["e/get-sum"]

[audit]
path = {audit:?}
"#
    );
    let ups = [Up::everything("e")];
    let env = [("ALICE_KEY", "k-alice-code")];
    let gw = Gateway::builder("codemode-denied", Mode::Http)
        .policy(&downstream)
        .env(&env)
        .start(&ups)
        .await;
    let headers = json!({"authorization": "Bearer k-alice-code"});
    let calls = json!([
        {"name": "e__get-sum", "args": {"a": 1, "b": 2}},
        run(r#"
            const ok = tools.call("e__echo", {message: "mine"});
            try { tools.call("e__get-sum", {a: 1, b: 2}); return {ok, denied: false}; }
            catch (e) { return {ok, type: e.type, message: e.message}; }
        "#),
    ]);
    let r = py(&gw.tag, gw.url(), &headers, &calls).await;
    let direct = &r["calls"][0]["error"];
    assert_eq!(direct["data"]["type"], DENIED, "{direct}");
    let inner = returned(&r["calls"][1]);
    assert_eq!(
        inner["type"], DENIED,
        "the same data.type as the direct call: {inner}"
    );
    assert!(inner["ok"].as_str().unwrap().contains("mine"), "{inner}");
    let run_id = r["calls"][1]["result"]["_meta"]["mcp_budget/run_audit_id"]
        .as_str()
        .expect("the run's audit id")
        .to_owned();
    let mut lines = Vec::new();
    for _ in 0..100 {
        lines = audit_lines(&audit);
        if lines
            .iter()
            .filter(|l| l["run_audit_id"] == run_id.as_str())
            .count()
            >= 3
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let of_run: Vec<&Value> = lines
        .iter()
        .filter(|l| l["run_audit_id"] == run_id.as_str())
        .collect();
    let denials: Vec<&Value> = lines
        .iter()
        .filter(|l| l["decision"] == "deny" && l["tool"] == "e__get-sum")
        .collect();
    assert_eq!(
        denials.len(),
        2,
        "the direct and the script's call: {lines:?}"
    );
    assert_eq!(denials[0]["rule"], denials[1]["rule"], "{denials:?}");
    assert!(
        denials[0].get("run_audit_id").is_none() && denials[1]["run_audit_id"] == run_id.as_str()
    );
    assert!(
        of_run.iter().any(|l| l["tool"] == "e__echo"
            && l["event"] == "outcome"
            && l["principal"] == "alice"),
        "the allowed inner call is audited under the run: {of_run:?}"
    );
    gw.stop_and_check().await;
}

/// The value of the sample `series` (name and labels as exposed) in the exposition `text`.
fn sample(text: &str, series: &str) -> f64 {
    let prefix = format!("{series} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_counted_by_outcome_and_limit_with_their_time_and_calls() {
    let admin_port = crate::harness::free_port();
    let policy = format!("{CODE_MODE}{}", crate::telemetry::admin(admin_port));
    let ups = [Up::everything("e")];
    let mut gw = Gateway::builder("codemode-metrics", Mode::Stdio)
        .policy(&policy)
        .start(&ups)
        .await;
    let client = gw.client();
    client.initialize().await;
    let scripts = [
        ("return 1", false),
        (
            "for (let i = 0; i < 3; i++) tools.call('e__echo', {message: 'n' + i}); return 'done'",
            false,
        ),
        ("throw new Error('boom')", true),
        ("for (;;) {}", true),
    ];
    for (code, fails) in scripts {
        let ran = client.call_tool("run_code", json!({"code": code})).await;
        assert_eq!(ran["result"]["isError"] == true, fails, "{code}: {ran}");
    }
    let args = json!({"name": "e__echo", "arguments": {"message": "via invoke"}});
    let invoked = client.call_tool("invoke_tool", args).await;
    assert!(invoked["result"].is_object(), "{invoked}");
    let (status, text) = crate::telemetry::get(admin_port, "/metrics").await;
    assert_eq!(status, 200);
    // Per tool: the calls a script or invoke_tool made, under their real server and tool
    // (three from the script, one from invoke_tool), and the meta-tool calls as the gateway's.
    let calls = |server: &str, tool: &str| {
        let labels = format!("server=\"{server}\",tool=\"{tool}\",outcome=\"ok\"");
        sample(&text, &format!("mcp_budget_tool_calls_total{{{labels}}}"))
    };
    assert_eq!(calls("e", "echo"), 4.0, "{text}");
    assert_eq!(calls("mcp-budget", "invoke_tool"), 1.0, "{text}");
    assert!(!text.contains("server=\"unknown\""), "{text}");
    let runs = |outcome: &str, limit: &str| {
        sample(
            &text,
            &format!("mcp_budget_code_runs_total{{outcome=\"{outcome}\",limit=\"{limit}\"}}"),
        )
    };
    assert_eq!(runs("ok", "none"), 2.0);
    assert_eq!(runs("error", "none"), 1.0);
    assert_eq!(runs("limit", "code_mode_max_steps"), 1.0);
    assert_eq!(
        sample(&text, "mcp_budget_code_run_duration_seconds_count"),
        4.0
    );
    assert!(sample(&text, "mcp_budget_code_run_duration_seconds_sum") > 0.0);
    assert_eq!(sample(&text, "mcp_budget_code_run_tool_calls_count"), 4.0);
    assert_eq!(sample(&text, "mcp_budget_code_run_tool_calls_sum"), 3.0);
    assert_eq!(
        sample(&text, "mcp_budget_code_run_tool_calls_bucket{le=\"2\"}"),
        3.0,
        "three runs made no call, one made three"
    );
    let dir = tempfile::tempdir().unwrap();
    crate::telemetry::promtool_check(dir.path(), &text).await;
    gw.stop_and_check().await;
}
