//! Sanitize and pin against real servers (Python `mcp` SDK, `tests/peers/poisoned_server.py`):
//! poisoned metadata reaches a real client (Python SDK) clean and every finding is reported;
//! a rug pull (a tool that changes its description and schema after a call and announces
//! `list_changed`) is quarantined with trust on first use and with a lock, `check --lock`
//! fails on it, and approving (re-pinning, restarting) restores the tool.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    Gateway, Mode, TagGuard, Up, WAIT, error_type, gateway_stdio_args, new_tag, peer_file, policy,
    python_client_output, venv_bin,
};

pub(crate) fn poisoned(name: &str, args: &[&str]) -> Up {
    let server = peer_file("poisoned_server.py");
    let mut all = vec![server.as_str()];
    all.extend_from_slice(args);
    Up::stdio(name, &venv_bin("python"), &all)
}

/// Whether `s` holds a character the sanitizer removes.
fn dirty(s: &str) -> bool {
    s.chars().any(|c| {
        matches!(c, '\u{E0000}'..='\u{E007F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
            | '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{1b}')
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisoned_metadata_reaches_the_python_client_clean_and_is_reported() {
    let tag = new_tag("guard-poisoned");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path(), &tag, "", &[poisoned("evil", &["poisoned"])]);
    let args = gateway_stdio_args(&policy);
    let mut target = vec!["stdio"];
    target.extend(args.iter().map(String::as_str));
    let plan = json!({"calls": [{"name": "evil__add", "args": {"a": 1, "b": 2}}]});
    let out = python_client_output(&tag, "legacy", &target, &plan).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let tools = report["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3, "{report}");
    for tool in tools {
        for field in ["title", "description"] {
            let s = tool[field].as_str().unwrap_or("");
            assert!(!dirty(s), "{field} of {tool}");
        }
        let schema = tool["inputSchema"].to_string();
        assert!(!dirty(&schema) && !schema.contains("\\u00"), "{schema}");
        let hash = tool["meta"]["mcp-budget/schemaHash"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(hash.len(), 64, "{tool}");
    }
    let add = tools.iter().find(|t| t["name"] == "evil__add").unwrap();
    assert_eq!(add["title"], "Add numbers");
    assert_eq!(add["description"], "Adds two numbers.");
    assert_eq!(
        add["inputSchema"]["properties"]["a"]["description"],
        "first number red"
    );
    let call = &report["calls"][0]["result"];
    assert_eq!(call["content"][0]["text"], "3", "{report}");
    assert_eq!(call["structuredContent"]["result"], "3", "{report}");
    // The startup summary (the gateway's stderr reaches the client's) names each finding.
    for line in [
        "guard: evil/add: removed 30 tag, 1 bidi, 4 invisible, 2 ansi",
        "guard: evil/notes: steering score",
        "hidden_block, conceal, secrets, other_tools, exfiltration",
        "guard: evil/weather: steering score",
        "guard: warning: evil/weather: steering text flagged (hidden_block, other_tools)",
    ] {
        assert!(stderr.contains(line), "{line} missing from:\n{stderr}");
    }
}

/// Waits for the gateway to drop `name` from its list (after the upstream's `list_changed`).
pub(crate) async fn gone(c: &mut crate::harness::RawClient, name: &str) -> bool {
    let until = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < until {
        let list = c.request("tools/list", json!({})).await;
        let listed = list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == name);
        if !listed {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

fn listed(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rug_pull_is_quarantined_on_trust_on_first_use() {
    let mut gw = Gateway::start(
        "guard-tofu",
        Mode::Stdio,
        &[poisoned("rug", &["rugpull", "1"])],
    )
    .await;
    let c = gw.client();
    c.initialize().await;
    assert_eq!(
        listed(&c.request("tools/list", json!({})).await),
        ["rug__fact"]
    );
    let first = c.call_tool("rug__fact", json!({"topic": "x"})).await;
    assert_eq!(
        first["result"]["content"][0]["text"], "fact about x",
        "{first}"
    );
    assert!(
        gone(c, "rug__fact").await,
        "the changed tool is still listed"
    );
    let refused = c
        .call_tool("rug__fact", json!({"topic": "x", "exfil": "k"}))
        .await;
    assert_eq!(error_type(&refused), "mcp_budget.tool.changed", "{refused}");
    let data = &refused["error"]["data"];
    assert_eq!(
        data["changed"],
        json!(["description", "schema"]),
        "{refused}"
    );
    assert_ne!(data["old"], data["new"]);
    assert_eq!(data["new"].as_str().unwrap().len(), 64);
    let log = gw.log();
    assert!(log.contains("Tool quarantined"), "{log}");
    gw.stop_and_check().await;
}

fn run_cli(args: &[&str]) -> std::process::Output {
    crate::harness::cli(args)
        .env("MCP_BUDGET_LOG", "warn")
        .command()
        .output()
        .expect("mcp-budget runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rug_pull_against_a_lock_fails_check_and_approving_restores_it() {
    let tag = new_tag("guard-lock");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("mcp-budget.lock");
    let lock_str = lock.to_string_lossy().into_owned();
    // Pin the honest version.
    let honest = policy(dir.path(), &tag, "", &[poisoned("rug", &["rugpull", "5"])]);
    let text = pin_lock(&honest, &lock);
    assert!(
        text.contains("server = \"rug\"\ntool = \"fact\"\n"),
        "{text}"
    );
    assert!(
        text.contains("description = \"Tells a fact about a topic.\""),
        "{text}"
    );
    let honest_str = honest.to_string_lossy().into_owned();
    let ok = run_cli(&["check", "--policy", &honest_str, "--lock", &lock_str]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // The server now starts changed (`rugpull 0`): CI fails, naming what changed.
    let changed_dir = tempfile::tempdir().unwrap();
    let pin = format!("\n[pin]\nlock = {lock_str:?}\n");
    let changed = policy(
        changed_dir.path(),
        &tag,
        &pin,
        &[poisoned("rug", &["rugpull", "0"])],
    );
    let changed_str = changed.to_string_lossy().into_owned();
    let failed = run_cli(&["check", "--policy", &changed_str, "--lock", &lock_str]);
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{err}");
    assert!(
        err.contains("~ rug/fact: description, schema changed"),
        "{err}"
    );
    // Served with the lock: held back and refused.
    let ups = [poisoned("rug", &["rugpull", "0"])];
    let mut gw = Gateway::builder("guard-lock-serve", Mode::Stdio)
        .policy(&pin)
        .start(&ups)
        .await;
    let c = gw.client();
    c.initialize().await;
    assert!(listed(&c.request("tools/list", json!({})).await).is_empty());
    let refused = c.call_tool("rug__fact", json!({"topic": "x"})).await;
    assert_eq!(error_type(&refused), "mcp_budget.tool.changed", "{refused}");
    assert!(
        gw.log()
            .contains("rug/fact: QUARANTINED: description, schema changed"),
        "{}",
        gw.log()
    );
    gw.stop_and_check().await;
    // Approve: re-pin the new version, restart.
    pin_lock(&changed, &lock);
    let ok = run_cli(&["check", "--policy", &changed_str, "--lock", &lock_str]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let mut gw = Gateway::builder("guard-lock-approved", Mode::Stdio)
        .policy(&pin)
        .start(&ups)
        .await;
    let c = gw.client();
    c.initialize().await;
    assert_eq!(
        listed(&c.request("tools/list", json!({})).await),
        ["rug__fact"]
    );
    let served = c.call_tool("rug__fact", json!({"topic": "x"})).await;
    assert_eq!(
        served["result"]["content"][0]["text"], "fact about x",
        "{served}"
    );
    gw.stop_and_check().await;
}

/// The names (a template's `uriTemplate`) of a `prompts/list` or `resources/templates/list`.
fn listed_as(list: &Value, key: &str, name: &str) -> Vec<String> {
    let mut names: Vec<String> = list["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t[name].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

async fn prompts(c: &mut crate::harness::RawClient) -> Vec<String> {
    listed_as(
        &c.request("prompts/list", json!({})).await,
        "prompts",
        "name",
    )
}

async fn templates(c: &mut crate::harness::RawClient) -> Vec<String> {
    let list = c.request("resources/templates/list", json!({})).await;
    listed_as(&list, "resourceTemplates", "uriTemplate")
}

fn rugprompt(version: &str) -> Up {
    poisoned("rp", &["rugprompt", version])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_and_template_changed_in_flight_are_held_back_on_trust_on_first_use() {
    let mut gw = Gateway::start("guard-prompt-tofu", Mode::Stdio, &[rugprompt("1")]).await;
    let c = gw.client();
    c.initialize().await;
    assert_eq!(prompts(c).await, ["rp__greet", "rp__summary"]);
    assert_eq!(templates(c).await, ["notes://{id}"]);
    let flipped = c.call_tool("rp__flip", json!({})).await;
    assert_eq!(
        flipped["result"]["content"][0]["text"], "flipped",
        "{flipped}"
    );
    // The server announces its prompts and its templates separately, and each list is
    // refreshed on its own: wait for both.
    let until = tokio::time::Instant::now() + WAIT;
    while (prompts(c).await.len() == 2 || !templates(c).await.is_empty())
        && tokio::time::Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        prompts(c).await,
        ["rp__summary"],
        "the changed prompt is held back"
    );
    assert!(
        templates(c).await.is_empty(),
        "the changed template is held back"
    );
    let refused = c
        .request(
            "prompts/get",
            json!({"name": "rp__greet", "arguments": {"who": "x"}}),
        )
        .await;
    assert_eq!(
        error_type(&refused),
        "mcp_budget.prompt.changed",
        "{refused}"
    );
    let data = &refused["error"]["data"];
    assert_eq!(data["prompt"], "rp__greet", "{refused}");
    assert_eq!(
        data["changed"],
        json!(["description", "arguments"]),
        "{refused}"
    );
    assert_ne!(data["old"], data["new"]);
    let served = c
        .request(
            "prompts/get",
            json!({"name": "rp__summary", "arguments": {"text": "t"}}),
        )
        .await;
    let text = &served["result"]["messages"][0]["content"]["text"];
    assert_eq!(text, "Summarize: t", "{served}");
    let log = gw.log();
    assert!(log.contains("Prompt quarantined"), "{log}");
    assert!(log.contains("Resource template quarantined"), "{log}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_and_templates_against_a_lock_fail_check_and_an_old_lock_keeps_them() {
    let tag = new_tag("guard-prompt-lock");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("mcp-budget.lock");
    let lock_str = lock.to_string_lossy().into_owned();
    let honest = policy(dir.path(), &tag, "", &[rugprompt("1")]);
    let text = pin_lock(&honest, &lock);
    for entry in [
        "\nversion = 2\n",
        "[[prompt]]\nserver = \"rp\"\nprompt = \"greet\"\n",
        "[[prompt]]\nserver = \"rp\"\nprompt = \"summary\"\n",
        "[[resource_template]]\nserver = \"rp\"\nuri_template = \"notes://{id}\"\n",
        "description = \"Greets someone.\"",
    ] {
        assert!(text.contains(entry), "{entry} missing from:\n{text}");
    }
    // The server now starts changed: CI fails (65), naming the prompt and the template.
    let changed_dir = tempfile::tempdir().unwrap();
    let pin = format!("\n[pin]\nlock = {lock_str:?}\n");
    let changed = policy(changed_dir.path(), &tag, &pin, &[rugprompt("2")]);
    let changed_str = changed.to_string_lossy().into_owned();
    let failed = run_cli(&["check", "--policy", &changed_str, "--lock", &lock_str]);
    let err = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(65), "{err}");
    assert!(
        err.contains("~ rp prompt greet: description, arguments changed"),
        "{err}"
    );
    assert!(
        err.contains("~ rp template notes://{id}: description changed"),
        "{err}"
    );
    assert!(!err.contains("summary"), "{err}");
    // Served with the lock: held back, refused; the unchanged prompt still served.
    let ups = [rugprompt("2")];
    let mut gw = Gateway::builder("guard-prompt-lock-serve", Mode::Stdio)
        .policy(&pin)
        .start(&ups)
        .await;
    let c = gw.client();
    c.initialize().await;
    assert_eq!(prompts(c).await, ["rp__summary"]);
    assert!(templates(c).await.is_empty());
    let refused = c.request("prompts/get", json!({"name": "rp__greet"})).await;
    assert_eq!(
        error_type(&refused),
        "mcp_budget.prompt.changed",
        "{refused}"
    );
    let log = gw.log();
    for line in [
        "guard: rp prompt greet: QUARANTINED: description, arguments changed since pinned",
        "guard: rp template notes://{id}: QUARANTINED: description changed since pinned",
    ] {
        assert!(log.contains(line), "{line} missing from:\n{log}");
    }
    gw.stop_and_check().await;
    // A lock written before prompts were pinned (`[[tool]]` only): nothing is lost, and
    // the gateway says so.
    let tools_only: String = text
        .split("\n[[")
        .filter(|t| !t.starts_with("prompt]]") && !t.starts_with("resource_template]]"))
        .collect::<Vec<_>>()
        .join("\n[[")
        .lines()
        .filter(|l| !l.starts_with("prompt =") && !l.starts_with("resource_template ="))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replace("\nversion = 2\n", "\nversion = 1\n");
    assert!(!tools_only.contains("greet"), "{tools_only}");
    std::fs::write(&lock, tools_only).unwrap();
    let ok = run_cli(&["check", "--policy", &changed_str, "--lock", &lock_str]);
    let err = String::from_utf8_lossy(&ok.stderr);
    assert!(ok.status.success(), "{err}");
    assert!(
        err.contains("warning: the lock pins no prompts (2 served, not compared)"),
        "{err}"
    );
    let mut gw = Gateway::builder("guard-prompt-old-lock", Mode::Stdio)
        .policy(&pin)
        .start(&ups)
        .await;
    let c = gw.client();
    c.initialize().await;
    assert_eq!(prompts(c).await, ["rp__greet", "rp__summary"]);
    assert_eq!(templates(c).await, ["notes://{id}"]);
    let log = gw.log();
    assert!(
        log.contains("rp: the lock pins no prompts (written before prompts were pinned)"),
        "{log}"
    );
    gw.stop_and_check().await;
}

/// `mcp-budget pin --policy POLICY --out LOCK`, which must succeed: the lock's text.
fn pin_lock(policy: &std::path::Path, lock: &std::path::Path) -> String {
    let (policy, out) = (policy.to_string_lossy(), lock.to_string_lossy());
    let done = run_cli(&["pin", "--policy", &policy, "--out", &out]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    std::fs::read_to_string(lock).unwrap()
}
