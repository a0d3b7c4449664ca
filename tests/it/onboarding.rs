//! Onboarding end to end: `init` on the host configurations in `tests/fixtures/hosts/` writes a
//! policy `check` accepts, and the host entry it prints starts a gateway a real client (the
//! Python `mcp` SDK, `tests/peers/.venv`) lists the real reference servers through; and
//! `serve --mcp-json` on a host file serves them the same way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::harness::{BIN, cli};

fn hosts(file: &str) -> PathBuf {
    Path::new("tests/fixtures/hosts").join(file)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `mcp-budget init --from FILE --out DIR/policy.toml`: the policy and init's notes. The
/// binary is "installed": its folder is on `PATH` (the entry init prints runs it from there).
fn init(file: &str, dir: &Path) -> (String, String) {
    let out = dir.join("policy.toml");
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let run = cli(["init", "--from"])
        .env("PATH", path)
        .arg(hosts(file))
        .arg("--out")
        .arg(&out)
        .env("ONBOARD_SECRET", "must-not-be-written")
        .ok();
    let policy = std::fs::read_to_string(&out).expect("policy written");
    (policy, run.stderr)
}

fn check(policy: &Path) {
    cli(["check"]).arg(policy).ok();
}

/// The first JSON object after `marker` in init's notes: the host entry.
fn entry_after(notes: &str, marker: &str) -> Value {
    let at = notes
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} not in {notes}"));
    let rest = &notes[at + marker.len()..];
    let start = rest.find('{').expect("a JSON object");
    serde_json::Deserializer::from_str(&rest[start..])
        .into_iter::<Value>()
        .next()
        .expect("one value")
        .expect("valid JSON")
}

/// Runs `tests/peers/py_client.py` as a host runs a server entry: `command` + `args` with only
/// `PATH`, `HOME` and the entry's `env` (resolved by the caller as the host would).
fn client(command: &str, args: &[String], env: &BTreeMap<String, String>, plan: &Value) -> Value {
    let mut cmd = Command::new("timeout");
    cmd.arg("120")
        .arg("tests/peers/.venv/bin/python")
        .arg("tests/peers/py_client.py")
        .arg("stdio")
        .arg(command)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .env("PLAN", plan.to_string())
        .env("MCP_BUDGET_LOG", "warn")
        .envs(env)
        .stdin(Stdio::null());
    let out: Output = cmd.output().expect("the Python client runs");
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "client failed ({}):\n{}\n{stdout}",
        out.status,
        text(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("bad report ({e}): {stdout}"))
}

fn tool_names(report: &Value) -> Vec<String> {
    report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The text `everything__get-env` answered: the environment of the server's process.
fn child_env(report: &Value) -> String {
    report["calls"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no get-env result: {report}"))
        .to_owned()
}

const GET_ENV: &str = r#"{"calls": [{"name": "everything__get-env", "args": {}}]}"#;

/// Starts the host entry `entry` (env already resolved) with a real client: both reference
/// servers are listed through the gateway and the secret reached the server's process.
fn serve_entry(entry: &Value, env: &BTreeMap<String, String>, time_tool: &str, secret: &str) {
    let command = entry["command"].as_str().expect("command");
    let args: Vec<String> = entry["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect();
    let plan: Value = serde_json::from_str(GET_ENV).expect("plan");
    let report = client(command, &args, env, &plan);
    let names = tool_names(&report);
    assert!(
        names.iter().any(|n| n == time_tool),
        "{time_tool} not in {names:?}"
    );
    assert!(names.iter().any(|n| n == "everything__echo"), "{names:?}");
    let seen = child_env(&report);
    assert!(
        seen.contains(secret),
        "{secret} not in the child's env: {seen}"
    );
}

fn entry_env(entry: &Value) -> BTreeMap<String, String> {
    entry["env"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().expect("a string").to_owned()))
        .collect()
}

/// Every fixture host file (the odd names, disabled entries, sse, references and inputs of
/// `policies.rs`) gives a policy `check` accepts, with no value of the file's `env` in it.
#[test]
fn init_writes_a_policy_check_accepts_for_every_host_file() {
    for file in [
        "claude_desktop_config.json",
        "project/.mcp.json",
        "app/.vscode/mcp.json",
        "inputs/.vscode/mcp.json",
        "runnable/claude_desktop_config.json",
        "runnable/.mcp.json",
        "runnable/.vscode/mcp.json",
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let (policy, notes) = init(file, dir.path());
        check(&dir.path().join("policy.toml"));
        assert!(notes.contains("In the host, replace"), "{file}: {notes}");
        for secret in ["s3cr3t-from-desktop", "must-not-be-written", "input:"] {
            assert!(!policy.contains(secret), "{file}: {secret} in\n{policy}");
        }
    }
}

#[test]
fn init_refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("policy.toml");
    std::fs::write(&out, "keep me").expect("written");
    let run = |force: bool| {
        cli(["init", "--from"])
            .arg(hosts("runnable/.mcp.json"))
            .arg("--out")
            .arg(&out)
            .args(force.then_some("--force"))
    };
    let refused = run(false).fails();
    assert!(
        refused
            .stderr
            .contains("exists: not overwritten (pass --force"),
        "{}",
        refused.stderr
    );
    assert_eq!(std::fs::read_to_string(&out).expect("read"), "keep me");
    run(true).ok();
    assert!(
        std::fs::read_to_string(&out)
            .expect("read")
            .starts_with("# mcp-budget policy")
    );
}

/// Claude Desktop: the secret the file wrote out goes in the gateway's entry (a placeholder on
/// the terminal, which the user fills in from the old entry); the host passes it to the
/// gateway, the policy's `${env:…}` hands it to the server.
#[test]
fn init_from_claude_desktop_serves_its_servers_to_a_real_client() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (policy, notes) = init("runnable/claude_desktop_config.json", dir.path());
    assert!(policy.contains("name = \"time_utc\""), "{policy}");
    let entry =
        entry_after(&notes, "claude_desktop_config.json:")["mcpServers"]["mcp-budget"].clone();
    let mut env = entry_env(&entry);
    assert_eq!(
        env["ONBOARD_SECRET"], "<value of ONBOARD_SECRET>",
        "{notes}"
    );
    assert!(!notes.contains("s3cr3t-from-desktop"), "{notes}");
    assert!(
        notes.contains("not printed, as they may be secrets: the values of ONBOARD_SECRET"),
        "{notes}"
    );
    // What the user writes in place of the placeholder.
    env.insert("ONBOARD_SECRET".into(), "s3cr3t-from-desktop".into());
    serve_entry(
        &entry,
        &env,
        "time_utc__get_current_time",
        "s3cr3t-from-desktop",
    );
}

/// Claude Code: `${VAR}` stays a reference the host resolves when it starts the gateway.
#[test]
fn init_from_claude_code_serves_its_servers_to_a_real_client() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (policy, notes) = init("runnable/.mcp.json", dir.path());
    assert!(
        policy.contains("ONBOARD_SECRET = \"${env:ONBOARD_SECRET}\""),
        "{policy}"
    );
    assert!(
        notes.contains("claude mcp add --scope project mcp-budget -e ")
            && notes.contains(" -e 'ONBOARD_SECRET=${ONBOARD_SECRET}' ")
            && notes.contains(" -e 'ONBOARD_TZ=${ONBOARD_TZ:-UTC}' -- "),
        "{notes}"
    );
    // An args reference stays one too: the gateway fills it when it starts the child.
    assert!(
        policy.contains("args = [\"--local-timezone\", \"${env:ONBOARD_TZ:-UTC}\"]"),
        "{policy}"
    );
    let entry = entry_after(&notes, "in .mcp.json:")["mcpServers"]["mcp-budget"].clone();
    // Claude Code resolves the entry's references from its own environment.
    let mut env = entry_env(&entry);
    assert_eq!(env["ONBOARD_SECRET"], "${ONBOARD_SECRET}");
    env.insert("ONBOARD_SECRET".into(), "s3cr3t-from-claude-code".into());
    env.remove("ONBOARD_GREETING"); // unset: the default applies in the gateway
    env.remove("ONBOARD_TZ"); // unset: the child's args take the default (UTC)
    serve_entry(
        &entry,
        &env,
        "time__get_current_time",
        "s3cr3t-from-claude-code",
    );
}

/// VS Code: an input becomes a variable the host fills from its `inputs`.
#[test]
fn init_from_vscode_serves_its_servers_to_a_real_client() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_, notes) = init("runnable/.vscode/mcp.json", dir.path());
    assert!(
        notes.contains("keep the \"inputs\" onboard-secret"),
        "{notes}"
    );
    let entry = entry_after(&notes, ".vscode/mcp.json:")["servers"]["mcp-budget"].clone();
    assert_eq!(entry["type"], "stdio");
    let mut env = entry_env(&entry);
    assert_eq!(env["ONBOARD_SECRET"], "${input:onboard-secret}");
    env.insert("ONBOARD_SECRET".into(), "s3cr3t-from-an-input".into());
    serve_entry(
        &entry,
        &env,
        "time__get_current_time",
        "s3cr3t-from-an-input",
    );
}

/// `serve --mcp-json` on a Claude Code file: the references are resolved from the gateway's
/// environment (a default where unset), and a real client lists and calls the real servers.
#[test]
fn serve_mcp_json_serves_a_host_file_to_a_real_client() {
    let env = BTreeMap::from([("ONBOARD_SECRET".to_owned(), "s3cr3t-mcp-json".to_owned())]);
    let args: Vec<String> = [
        "serve",
        "--stdio",
        "--mcp-json",
        "tests/fixtures/hosts/runnable/.mcp.json",
    ]
    .map(str::to_owned)
    .to_vec();
    let plan = json!({"calls": [
        {"name": "everything__get-env", "args": {}},
        {"name": "time__get_current_time", "args": {"timezone": "UTC"}},
    ]});
    let report = client(BIN, &args, &env, &plan);
    let names = tool_names(&report);
    assert!(names.iter().any(|n| n == "time__convert_time"), "{names:?}");
    let seen = child_env(&report);
    assert!(seen.contains("s3cr3t-mcp-json"), "{seen}");
    assert!(seen.contains("hello from the default"), "{seen}");
    let time = report["calls"][1]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(time.contains("\"timezone\": \"UTC\""), "{report}");
}

/// Headless Chromium (Debian's `chromium`, from `scripts/install-test-deps.sh`) on `page` with
/// `args`; its stdout.
fn chromium(page: &Path, dir: &Path, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs (install it with scripts/install-test-deps.sh)");
    assert!(out.status.success(), "chromium: {}", text(&out.stderr));
    text(&out.stdout)
}

/// The report of six real servers (a hybrid plan: over the tool cap) renders in a browser: the
/// DOM has a stacked bar per server, costliest first, and the budget lines; the screenshot has
/// the bars' and the budget line's pixels. Nothing is fetched: no scripts, links or `src`.
#[test]
fn the_html_report_renders_its_chart_in_headless_chromium() {
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("report.html");
    let sets = [
        "github",
        "filesystem",
        "playwright",
        "time",
        "memory",
        "git",
    ];
    cli(["inspect", "--format", "html", "--out"])
        .arg(&page)
        .arg("--tools")
        .args(sets.map(|s| format!("tests/fixtures/toolsets/{s}.json")))
        .ok();
    let html = std::fs::read_to_string(&page).expect("report written");
    for fetch in ["<script", "<link", " src=", "url(", "@import"] {
        assert!(!html.contains(fetch), "{fetch} in the report");
    }
    assert!(html.contains("tool cap: 185 tools &gt; cap 20"), "{html}");

    let dom = chromium(&page, dir.path(), &["--dump-dom"]);
    let servers: Vec<&str> = dom
        .split("data-server=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    let mut distinct = servers.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), sets.len(), "{servers:?}");
    assert_eq!(distinct[0], "github", "costliest first: {distinct:?}");
    assert_eq!(dom.matches("class=\"budget\"").count(), 2, "{dom}");

    let shot = dir.path().join("report.png");
    chromium(
        &page,
        dir.path(),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,1400",
            "--hide-scrollbars",
        ],
    );
    let out = Command::new("tests/peers/.venv/bin/python")
        .args(["tests/peers/png_colours.py"])
        .arg(&shot)
        .args(["4e79a7", "bab0ac", "e15759", "59a14f"])
        .output()
        .expect("python runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let counts: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // Listed (blue) and deferred (grey) bar segments, the budget line and the over-budget
    // levels (red), the plan's bar under the budget (green).
    for (colour, least) in [
        ("4e79a7", 200),
        ("bab0ac", 5000),
        ("e15759", 2000),
        ("59a14f", 500),
    ] {
        assert!(
            counts[colour].as_u64().unwrap_or(0) >= least,
            "#{colour}: fewer than {least} pixels: {counts}"
        );
    }
}
