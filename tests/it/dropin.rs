//! The one-word switch from mcp-compressor: a host entry `mcp-compressor -c medium
//! --include-tools … -- COMMAND ARGS…` with the gateway binary in place of `mcp-compressor`,
//! started over stdio by the real Python and TypeScript SDKs as a host starts it; the command
//! line's clear refusals (nothing to serve, flags with no equivalent); and the startup summary
//! showing what the configured stdio client will see, not only the default profile.

use serde_json::{Value, json};

use crate::harness::{
    Gateway, Mode, TagGuard, Up, assert_no_leftovers, new_tag, python_client, venv_bin,
};

const GATEWAY: &str = env!("CARGO_BIN_EXE_mcp-budget");

/// An mcp-compressor host entry's arguments, for mcp-server-time.
fn compressor_args(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["-c", "medium"].iter().map(|s| (*s).to_owned()).collect();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.push("--".into());
    args.push(venv_bin("mcp-server-time"));
    args.extend(["--local-timezone".to_owned(), "UTC".to_owned()]);
    args
}

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
    assert_eq!(tools, ["time__get_current_time"], "{report}");
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
    assert_eq!(
        report["tools"],
        json!(["time__get_current_time"]),
        "{report}"
    );
    assert!(call_text(&report, 0).contains("UTC"), "{report}");
    assert_no_leftovers(&tag).await;
    drop(guard);
}

/// Runs the gateway with `args`; its exit code and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(GATEWAY)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
        ("--toonify", "drop it"),
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
    let gw = Gateway::start_with_env(
        "dropin-summary",
        Mode::Stdio,
        policy,
        &[Up::time("time")],
        &[("ALICE_KEY", "k-alice-summary")],
    )
    .await;
    let log = gw.log();
    let line = (log.lines())
        .find(|l| l.contains("stdio client \"alice\": tools: 1 → 1 listed"))
        .unwrap_or_else(|| panic!("no line for the stdio client:\n{log}"));
    assert!(line.contains("claude-haiku-4-5"), "{line}");
    gw.stop_and_check().await;
}
