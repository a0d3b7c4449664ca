//! The one-word switch from mcp-compressor: a host entry `mcp-compressor -c medium
//! --include-tools … -- COMMAND ARGS…` with the gateway binary in place of `mcp-compressor`,
//! started over stdio by the real Python and TypeScript SDKs as a host starts it; the command
//! line's clear refusals (nothing to serve, flags with no equivalent); and the startup summary
//! showing what the configured stdio client will see, not only the default profile.

use serde_json::{Value, json};

use crate::harness::{
    Gateway, Mode, TagGuard, Up, assert_no_leftovers, new_tag, python_client, venv_bin,
};

use crate::harness::BIN as GATEWAY;

/// An mcp-compressor host entry's arguments, for mcp-server-time.
fn compressor_args(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["-c", "medium"].iter().map(|s| (*s).to_owned()).collect();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.push("--".into());
    args.push(venv_bin("mcp-server-time"));
    args.extend(["--local-timezone".to_owned(), "UTC".to_owned()]);
    args
}

/// What `-c LEVEL` without `--mode` lists: the meta-tools, as mcp-compressor its wrappers.
const META: [&str; 3] = ["search_tools", "get_tool_schema", "invoke_tool"];

fn plan() -> Value {
    json!({"calls": [{"name": "time__get_current_time", "args": {"timezone": "UTC"}}]})
}

/// The text of call `i` of a client's report.
fn call_text(report: &Value, i: usize) -> String {
    report["calls"][i]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_compressor_host_entry_works_with_the_one_word_changed() {
    let tag = new_tag("dropin-python");
    let guard = TagGuard(tag.clone());
    let args = compressor_args(&["--exclude-tools", "convert_time"]);
    let mut target = vec!["stdio", GATEWAY];
    target.extend(args.iter().map(String::as_str));
    let report = python_client(&tag, "legacy", &target, &plan()).await;
    let tools: Vec<&str> = (report["tools"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    // `-c medium` without `--mode`: mcp-compressor's shape, the tools behind meta-tools whose
    // search lists the one kept tool's line.
    assert_eq!(tools, META, "{report}");
    let catalog = report["tools"][0]["description"].as_str().unwrap();
    assert!(
        catalog.contains("- time__get_current_time(") && !catalog.contains("convert_time"),
        "{catalog}"
    );
    let text = call_text(&report, 0);
    assert!(
        text.contains("\"timezone\": \"UTC\"") || text.contains("UTC"),
        "{report}"
    );
    assert_no_leftovers(&tag).await;
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_starts_the_same_entry() {
    let tag = new_tag("dropin-ts");
    let guard = TagGuard(tag.clone());
    let args = compressor_args(&["--include-tools", "get_*,nothing_else"]);
    let mut argv = vec![GATEWAY];
    argv.extend(args.iter().map(String::as_str));
    let plan = plan().to_string();
    let env = [
        ("PLAN", plan.as_str()),
        ("MCPB_IT_TAG", tag.as_str()),
        ("MCP_BUDGET_LOG", "warn"),
    ];
    let report = crate::harness::ts_client("ts_stdio_client.mjs", &argv, &env).await;
    assert_eq!(report["tools"], json!(META), "{report}");
    assert!(call_text(&report, 0).contains("UTC"), "{report}");
    assert_no_leftovers(&tag).await;
    drop(guard);
}

/// Issue 54: `mcp-budget --toonify -c medium -- COMMAND`, as an mcp-compressor user writes it:
/// the meta-tools of `-c medium`, and the real time server's JSON result as TOON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toonify_with_compression_serves_json_results_as_toon() {
    let tag = new_tag("dropin-toonify");
    let guard = TagGuard(tag.clone());
    let args = compressor_args(&["--toonify"]);
    let mut target = vec!["stdio", GATEWAY];
    target.extend(args.iter().map(String::as_str));
    let plan = json!({"calls": [
        {"name": "invoke_tool", "args": {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}},
    ]});
    let report = python_client(&tag, "legacy", &target, &plan).await;
    let tools: Vec<&str> = (report["tools"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, META, "{report}");
    // The server's pretty JSON (`{\n  "timezone": "UTC", …`), as TOON.
    let text = call_text(&report, 0);
    assert!(text.starts_with("timezone: UTC\ndatetime: \""), "{report}");
    assert!(
        text.contains("\nday_of_week: ") && !text.contains('{'),
        "{text}"
    );
    assert_no_leftovers(&tag).await;
    drop(guard);
}

#[test]
fn a_bad_shrinkfit_names_its_flag() {
    let (code, stderr) = run(&["--shrinkfit=lots", "--", "true"]);
    assert_eq!(code, Some(65), "{stderr}");
    assert!(stderr.contains("--shrinkfit=lots"), "{stderr}");
}

/// Runs the gateway with `args`; its exit code and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = crate::harness::cli(args).run();
    (out.status.code(), out.stderr)
}

#[test]
fn serve_with_nothing_to_serve_says_how_to_name_a_server() {
    let (code, stderr) = run(&["serve", "--stdio"]);
    assert_eq!(code, Some(65), "{stderr}");
    for way in ["--policy", "--mcp-json", "after `--`", "--url"] {
        assert!(stderr.contains(way), "{way}: {stderr}");
    }
}

#[test]
fn mcp_compressor_flags_without_an_equivalent_are_refused_with_what_to_do() {
    for (flag, hint) in [
        ("--cli-mode", "--mode progressive"),
        ("--transform-mode=just-bash", "compressed-tools"),
    ] {
        let (code, stderr) = run(&[flag, "--", "true"]);
        assert_eq!(code, Some(65), "{flag}: {stderr}");
        assert!(
            stderr.contains("no equivalent") && stderr.contains(hint),
            "{flag}: {stderr}"
        );
    }
    // A bad value names its flag.
    let (code, stderr) = run(&["-c", "tiny", "--", "true"]);
    assert_eq!(code, Some(65), "{stderr}");
    assert!(stderr.contains("--level"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_startup_summary_shows_the_stdio_clients_own_plan() {
    let policy = r#"stdio_client = "alice"

[budget]
enabled = true

[[client]]
name = "alice"
api_key_env = "ALICE_KEY"
allow = ["time/get_current_time"]
model = "claude-haiku-4-5"
"#;
    let gw = Gateway::builder("dropin-summary", Mode::Stdio)
        .policy(policy)
        .env(&[("ALICE_KEY", "k-alice-summary")])
        .start(&[Up::time("time")])
        .await;
    let log = gw.log();
    let line = (log.lines())
        .find(|l| l.contains("stdio client \"alice\": tools: 1 → 1 listed"))
        .unwrap_or_else(|| panic!("no line for the stdio client:\n{log}"));
    assert!(line.contains("claude-haiku-4-5"), "{line}");
    gw.stop_and_check().await;
}

/// `invoke_tool` (under the name `meta`) calling server-everything's `get-env`: the report's
/// text is the server's environment as JSON.
fn get_env_plan(meta: &str) -> Value {
    json!({"calls": [{"name": meta, "args": {"name": "everything__get-env", "arguments": {}}}]})
}

/// A host entry `mcp-budget -c medium -n NAME -- SERVER` with `env` holding a secret, as the
/// Python SDK starts it (the client passes its own environment as the entry's `env`).
/// The report and the client's stderr (where the SDK passes the gateway's).
async fn python_entry(
    tag: &str,
    args: &[&str],
    plan: &Value,
    env: &[(&str, &str)],
) -> (Value, String) {
    let mut target = vec!["stdio", GATEWAY];
    target.extend(args);
    let mut env = env.to_vec();
    env.push(("MCP_BUDGET_LOG", "warn"));
    let out =
        crate::harness::py_script_output("py_client.py", tag, "legacy", &target, plan, &env).await;
    crate::harness::report(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_entrys_env_reaches_the_server_after_the_double_dash() {
    let tag = new_tag("dropin-env");
    let guard = TagGuard(tag.clone());
    let everything = crate::harness::node_bin("mcp-server-everything");
    let secret = ("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_dropin_secret_4711");
    // Python SDK: the entry's env is the client's environment.
    let args = ["-c", "medium", "--", everything.as_str()];
    let (report, _) = python_entry(&tag, &args, &get_env_plan("invoke_tool"), &[secret]).await;
    assert!(call_text(&report, 0).contains(secret.1), "{report}");
    // TypeScript SDK, the same entry.
    let plan = get_env_plan("invoke_tool").to_string();
    let mut argv = vec![GATEWAY];
    argv.extend(args);
    let env = [
        ("PLAN", plan.as_str()),
        ("MCPB_IT_TAG", tag.as_str()),
        ("MCP_BUDGET_LOG", "warn"),
        secret,
    ];
    let report = crate::harness::ts_client("ts_stdio_client.mjs", &argv, &env).await;
    assert!(
        report["calls"][0].to_string().contains(secret.1),
        "{report}"
    );
    assert_no_leftovers(&tag).await;
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dash_c_without_mode_is_mcp_compressors_shape_and_dash_n_names_its_meta_tools() {
    let tag = new_tag("dropin-shape");
    let guard = TagGuard(tag.clone());
    let args = compressor_args(&["-n", "clock"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let plan = json!({"calls": [{"name": "clock_invoke_tool",
        "args": {"name": "clock__get_current_time", "arguments": {"timezone": "UTC"}}}]});
    let (report, stderr) = python_entry(&tag, &args, &plan, &[]).await;
    let tools: Vec<&str> = (report["tools"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        tools,
        [
            "clock_search_tools",
            "clock_get_tool_schema",
            "clock_invoke_tool"
        ],
        "{report}"
    );
    assert!(call_text(&report, 0).contains("UTC"), "{report}");
    // The startup summary says what the flags did, in the command line's words.
    assert!(
        stderr.contains("drop-in: -c medium without --mode")
            && stderr.contains("-n clock: meta-tools clock_search_tools")
            && stderr.contains("the command line fixes mode")
            && stderr.contains("to list more: --mode auto")
            && !stderr.contains("[budget]"),
        "{stderr}"
    );
    assert_no_leftovers(&tag).await;
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_alone_is_served_on_stdio() {
    let tag = new_tag("dropin-config");
    let guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp.json");
    let servers = json!({"mcpServers": {"time": {
        "command": venv_bin("mcp-server-time"), "args": ["--local-timezone", "UTC"]}}});
    std::fs::write(&file, servers.to_string()).unwrap();
    let file = file.to_string_lossy().into_owned();
    let (report, _) = python_entry(&tag, &["--config", &file], &plan(), &[]).await;
    assert!(call_text(&report, 0).contains("UTC"), "{report}");
    assert_no_leftovers(&tag).await;
    drop(guard);
}

#[test]
fn a_lone_server_that_cannot_start_exits_non_zero_with_its_message() {
    // Stdin stays open, as a host keeps it: the exit is the gateway's own decision.
    let mut child = crate::harness::cli(["-c", "medium", "--", "mcpb-no-such-command-4711"])
        .command()
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("still serving 60 s after its only server failed to start");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let code = status.code();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("could not start") && stderr.contains("mcpb-no-such-command-4711"),
        "{stderr}"
    );
}

#[test]
fn init_imports_compressor_url_and_multi_server_entries_as_their_servers() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("claude_desktop_config.json");
    let servers = json!({"mcpServers": {
        "remote": {"command": "uvx", "args": ["mcp-compressor", "-c", "high", "--",
            "https://api.githubcopilot.com/mcp/"]},
        "pair": {"command": "mcp-compressor", "args": [
            "--multi-server", "time=uvx mcp-server-time",
            "--multi-server", "mem=npx -y @modelcontextprotocol/server-memory"]}
    }});
    std::fs::write(&from, servers.to_string()).unwrap();
    let out = dir.path().join("policy.toml");
    crate::harness::cli(["init", "--from"])
        .arg(&from)
        .arg("--out")
        .arg(&out)
        .ok();
    let policy = std::fs::read_to_string(&out).unwrap();
    for line in [
        "name = \"time\"\ncommand = \"uvx\"\nargs = [\"mcp-server-time\"]",
        "name = \"mem\"\ncommand = \"npx\"",
        "name = \"remote\"\nurl = \"https://api.githubcopilot.com/mcp/\"",
    ] {
        assert!(policy.contains(line), "{line}:\n{policy}");
    }
    assert!(!policy.contains("mcp-compressor\""), "{policy}");
}
