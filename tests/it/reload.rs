//! Hot reload of a running `mcp-budget serve`: the policy file edited in place, replaced the
//! way editors save (a temp file renamed over it), or `SIGHUP`. A valid policy is applied
//! without dropping sessions or calls in flight (upstreams added, removed, restarted or left
//! alone); an invalid one is refused with its problems logged and the old one keeps serving.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    Gateway, Mode, RawClient, TagGuard, Up, WAIT, assert_no_leftovers, child_matching,
    drain_stderr, first_text, http_client, log_shows, new_tag, peer_file, policy, tool_names,
    venv_bin,
};

/// `tests/peers/ask_server.py`: its `slow {seconds}` keeps a call in flight.
fn slow(name: &str) -> Up {
    Up::stdio(name, &venv_bin("python"), &[&peer_file("ask_server.py")])
}

/// Rewrites the gateway's policy in place (as `echo … > policy.toml` would).
fn rewrite(gw: &Gateway, extra: &str, ups: &[Up]) -> String {
    let file = gw.policy_file();
    let dir = file.parent().expect("in a directory");
    std::fs::read_to_string(policy(dir, &gw.tag, extra, ups)).expect("written")
}

/// Waits for the `n`-th `reload:` line of the log (the outcome of the `n`-th reload).
async fn reloaded(gw: &Gateway, n: usize) -> String {
    let log = || gw.log();
    let nth = || log().matches("reload: ").count() >= n;
    let deadline = tokio::time::Instant::now() + WAIT;
    while !nth() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reload #{n} in the log:\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = log();
    let line = log.lines().filter(|l| l.contains("reload: ")).nth(n - 1);
    line.expect("counted").to_owned()
}

/// The tool names a `tools/list` of the stdio client returns.
async fn listed(gw: &mut Gateway) -> Vec<String> {
    let list = gw.client().request("tools/list", json!({})).await;
    tool_names(&list["result"])
}

/// Lists until `done` holds for the names (at most [`WAIT`]).
async fn listed_until(gw: &mut Gateway, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let names = listed(gw).await;
        if done(&names) || tokio::time::Instant::now() > deadline {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim()
            .starts_with('Z')
    })
}

/// One streamable HTTP client session (raw JSON-RPC over reqwest).
struct Http {
    client: reqwest::Client,
    url: String,
    session: Option<String>,
}

impl Http {
    /// POSTs `body`; the status and the answer (the last SSE event's data, or the JSON body).
    async fn post(&self, body: &Value) -> (u16, Option<String>, Value) {
        let mut req = (self.client.post(&self.url))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string());
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s);
        }
        let resp = req.send().await.expect("the gateway answers");
        let status = resp.status().as_u16();
        let session = (resp.headers().get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = resp.text().await.unwrap_or_default();
        let data = (text.lines().filter_map(|l| l.strip_prefix("data: "))).next_back();
        let answer = serde_json::from_str(data.unwrap_or(&text)).unwrap_or(Value::Null);
        (status, session, answer)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_change_keeps_the_http_session_and_the_call_in_flight() {
    let budget = "[budget]\nenabled = true\nmodel = \"claude-sonnet-4-5\"\nthreshold_percent = 5\n";
    let ups = [slow("slow"), Up::time("time")];
    let gw = Gateway::builder("reload-valid", Mode::Http)
        .policy(budget)
        .start(&ups)
        .await;
    let mut http = Http {
        client: http_client(),
        url: gw.url().to_owned(),
        session: None,
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "it-reload", "version": "0"}}});
    let (status, session, _) = http.post(&init).await;
    assert_eq!(status, 200);
    http.session = Some(session.expect("a session id"));
    let (status, _, _) = http
        .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    assert_eq!(status, 202);

    // A call that takes 3 s, in flight while the policy changes under it.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "slow__slow", "arguments": {"seconds": 3}}});
    let in_flight = {
        let http = Http {
            client: http.client.clone(),
            url: http.url.clone(),
            session: http.session.clone(),
        };
        tokio::spawn(async move { http.post(&call).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rule =
        "[budget.tools.\"time/get_current_time\"]\ndescription = \"Reloaded: the time now\"\n";
    rewrite(&gw, &format!("{budget}{rule}"), &ups);
    let outcome = reloaded(&gw, 1).await;
    assert!(outcome.contains("reload: kept 2"), "{outcome}");

    let (status, _, answer) = in_flight.await.unwrap();
    assert_eq!(status, 200);
    assert!(answer["error"].is_null(), "{answer}");
    assert!(!first_text(&answer).is_empty(), "{answer}");
    // The same session goes on, and lists under the new rule.
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (status, _, answer) = http.post(&list).await;
    assert_eq!(status, 200, "{answer}");
    let time = (answer["result"]["tools"].as_array().expect("tools").iter())
        .find(|t| t["name"] == "time__get_current_time")
        .cloned()
        .expect("listed");
    assert_eq!(time["description"], "Reloaded: the time now", "{time}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_edit_keeps_the_old_policy_and_logs_the_line() {
    let ups = [Up::time("time")];
    let mut gw = Gateway::start("reload-invalid", Mode::Stdio, &ups).await;
    gw.client().initialize().await;
    let text = rewrite(
        &gw,
        "[budget]\nenabled = true\nthreshold_percent = 900\n",
        &[Up::time("time"), Up::fake("more", "hang")],
    );
    let line = 1
        + (text.lines())
            .position(|l| l.starts_with("threshold_percent"))
            .expect("written");
    let refused = format!("line {line}: budget.threshold_percent");
    assert!(
        log_shows(|| gw.log(), &refused, WAIT).await,
        "no refusal naming {refused:?}:\n{}",
        gw.log()
    );
    assert!(
        gw.log()
            .contains("Reload refused; the running policy stays")
    );
    assert!(!gw.log().contains("reload: "), "{}", gw.log());
    // The old policy serves on: budget off, one upstream.
    let names = listed(&mut gw).await;
    assert!(
        names.contains(&"time__get_current_time".to_owned()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.starts_with("more__")), "{names:?}");
    let reply = gw
        .client()
        .call_tool("time__get_current_time", json!({"timezone": "UTC"}))
        .await;
    assert!(reply["error"].is_null(), "{reply}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_are_added_removed_restarted_and_kept() {
    let before = [Up::time("time"), slow("gone"), Up::fake("changed", "hang")];
    let mut gw = Gateway::start("reload-upstreams", Mode::Stdio, &before).await;
    gw.client().initialize().await;
    let pid = |gw: &Gateway, needle: &str| child_matching(gw, needle).expect(needle);
    let time_pid = pid(&gw, "mcp-server-time");
    let gone_pid = pid(&gw, "ask_server.py");
    let changed_pid = pid(&gw, "fake_server.py hang");

    // A call to the upstream about to be removed, in flight during the reload.
    let call = json!({"name": "gone__slow", "arguments": {"seconds": 3}});
    let in_flight = gw.client().start_request("tools/call", call).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = [
        Up::time("time"),
        Up::fake("changed", "hang").env("RELOADED", "1"),
        Up::fake("added", "flood"),
    ];
    rewrite(&gw, "", &after);
    let outcome = reloaded(&gw, 1).await;
    assert!(
        outcome.contains("reload: started [added], stopped [gone], restarted [changed], kept 1"),
        "{outcome}"
    );

    // The call in flight finished on the removed upstream.
    let reply = gw.client().response(&in_flight, WAIT).await;
    assert!(reply["error"].is_null(), "{reply}");
    // Hosts were told, and see the new set.
    let names = listed_until(&mut gw, |n| n.iter().any(|n| n == "added__flood")).await;
    assert!(names.contains(&"added__flood".to_owned()), "{names:?}");
    assert!(names.contains(&"changed__echo".to_owned()), "{names:?}");
    assert!(
        names.contains(&"time__get_current_time".to_owned()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.starts_with("gone__")), "{names:?}");
    let told = (gw.client().seen.iter()).any(|m| m["method"] == "notifications/tools/list_changed");
    assert!(told, "no tools/list_changed");
    let refused = gw
        .client()
        .call_tool("gone__slow", json!({"seconds": 0}))
        .await;
    assert!(!refused["error"].is_null(), "{refused}");

    // Unchanged: the same process. Changed: a new one. Removed: gone once its call ended.
    assert!(alive(time_pid));
    assert_eq!(pid(&gw, "mcp-server-time"), time_pid);
    let restarted = pid(&gw, "fake_server.py hang");
    assert_ne!(restarted, changed_pid);
    let reply = (gw.client())
        .call_tool("changed__echo", json!({"message": "hi"}))
        .await;
    assert!(reply["error"].is_null(), "{reply}");
    let deadline = tokio::time::Instant::now() + WAIT;
    while (alive(gone_pid) || alive(changed_pid)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(gone_pid), "the removed upstream still runs");
    assert!(
        !alive(changed_pid),
        "the restarted upstream's old process still runs"
    );
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_and_the_gateway_stays_up() {
    let mut gw = Gateway::start("reload-sighup", Mode::Stdio, &[Up::time("time")]).await;
    gw.client().initialize().await;
    let time_pid = child_matching(&gw, "mcp-server-time").expect("time runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gw.pid()),
        nix::sys::signal::Signal::SIGHUP,
    )
    .expect("signal sent");
    let outcome = reloaded(&gw, 1).await;
    assert!(outcome.contains("reload: kept 1"), "{outcome}");
    assert!(outcome.contains("SIGHUP"), "{outcome}");
    assert!(gw.child.try_wait().expect("wait works").is_none(), "exited");
    let reply = gw
        .client()
        .call_tool("time__get_current_time", json!({"timezone": "UTC"}))
        .await;
    assert!(reply["error"].is_null(), "{reply}");
    assert_eq!(child_matching(&gw, "mcp-server-time"), Some(time_pid));
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_replaced_the_way_editors_save_is_reloaded() {
    let mut gw = Gateway::start("reload-rename", Mode::Stdio, &[Up::time("time")]).await;
    gw.client().initialize().await;
    // The new text is written next to the policy, then renamed over it.
    let scratch = tempfile::tempdir().unwrap();
    let ups = [Up::time("time"), Up::fake("added", "hang")];
    let text = std::fs::read_to_string(policy(scratch.path(), &gw.tag, "", &ups)).unwrap();
    let file = gw.policy_file();
    let temp = file.with_file_name(".policy.toml.swp");
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(&temp, &file).unwrap();
    let outcome = reloaded(&gw, 1).await;
    assert!(
        outcome.contains("reload: started [added], kept 1"),
        "{outcome}"
    );
    let names = listed_until(&mut gw, |n| n.iter().any(|n| n == "added__echo")).await;
    assert!(names.contains(&"added__echo".to_owned()), "{names:?}");
    assert!(Path::new(&file).exists());
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_budget_on_hosts_hear_list_changed_only_when_their_list_changes() {
    let budget = "[budget]\nenabled = true\nmodel = \"claude-sonnet-4-5\"\nthreshold_percent = 5\n";
    let ups = [Up::time("time")];
    let mut gw = Gateway::builder("reload-announce", Mode::Stdio)
        .policy(budget)
        .start(&ups)
        .await;
    gw.client().initialize().await;
    listed(&mut gw).await;
    let told = |gw: &mut Gateway| {
        (gw.client().seen.iter())
            .filter(|m| m["method"] == "notifications/tools/list_changed")
            .count()
    };
    // A reload that changes nothing hosts see (the same file, SIGHUP) says nothing.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gw.pid()),
        nix::sys::signal::Signal::SIGHUP,
    )
    .expect("signal sent");
    reloaded(&gw, 1).await;
    gw.client().drain(Duration::from_secs(1)).await;
    assert_eq!(told(&mut gw), 0);
    // A rule that rewrites a listed description: one announcement, and the new list.
    let rule =
        "[budget.tools.\"time/get_current_time\"]\ndescription = \"Reloaded: the time now\"\n";
    rewrite(&gw, &format!("{budget}{rule}"), &ups);
    reloaded(&gw, 2).await;
    gw.client().drain(Duration::from_secs(1)).await;
    assert_eq!(told(&mut gw), 1);
    let list = gw.client().request("tools/list", json!({})).await;
    let text = list.to_string();
    assert!(text.contains("Reloaded: the time now"), "{text}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_config_given_with_mcp_json_is_watched_too() {
    let tag = new_tag("reload-mcp-json");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("claude_desktop_config.json");
    let server = |command: String, args: Vec<String>| json!({"command": command, "args": args, "env": {"MCPB_IT_TAG": tag}});
    let time = server(
        venv_bin("mcp-server-time"),
        vec!["--local-timezone".into(), "UTC".into()],
    );
    let fake = server(
        venv_bin("python"),
        vec![peer_file("fake_server.py"), "hang".into()],
    );
    let write = |servers: Value| {
        std::fs::write(&file, json!({"mcpServers": servers}).to_string()).unwrap();
    };
    write(json!({"time": time}));
    let mut child = crate::harness::cli(["serve", "--stdio", "--mcp-json"])
        .arg(&file)
        .env("MCPB_IT_TAG", &tag)
        .env("MCP_BUDGET_LOG", "info")
        .tokio()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the gateway starts");
    let (log, mut ready) = drain_stderr(&mut child, "gw", |l| {
        (l.trim() == "serving MCP on stdio").then(String::new)
    });
    let stdin = child.stdin.take().expect("piped");
    let mut client = RawClient::new(stdin, child.stdout.take().expect("piped"));
    tokio::time::timeout(WAIT, ready.recv())
        .await
        .expect("the gateway comes up");
    client.initialize().await;

    write(json!({"time": time, "added": fake}));
    let logged = || log.lock().unwrap().clone();
    assert!(
        log_shows(logged, "reload: started [added], kept 1", WAIT).await,
        "{}",
        logged()
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut names = Vec::new();
    while !names.iter().any(|n| n == "added__echo") && tokio::time::Instant::now() < deadline {
        let list = client.request("tools/list", json!({})).await;
        names = tool_names(&list["result"]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(names.contains(&"added__echo".to_owned()), "{names:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_no_leftovers(&tag).await;
}

/// `tests/peers/poisoned_server.py` in one of its modes.
fn poisoned(name: &str, args: &[&str]) -> Up {
    let server = peer_file("poisoned_server.py");
    let mut all = vec![server.as_str()];
    all.extend_from_slice(args);
    Up::stdio(name, &venv_bin("python"), &all)
}

fn pin(policy: &Path, lock: &Path) {
    crate::harness::cli(["pin", "--policy"])
        .arg(policy)
        .arg("--out")
        .arg(lock)
        .env("MCP_BUDGET_LOG", "warn")
        .ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_approved_in_the_rewritten_lock_leaves_quarantine_without_a_restart() {
    let scratch = tempfile::tempdir().unwrap();
    let lock = scratch.path().join("mcp-budget.lock");
    let pinned = format!("\n[pin]\nlock = {:?}\n", lock.to_string_lossy());
    // The lock pins the honest version; the server then starts changed.
    let honest = policy(
        scratch.path(),
        "reload-pin",
        "",
        &[poisoned("rug", &["rugpull", "5"])],
    );
    pin(&honest, &lock);
    let ups = [poisoned("rug", &["rugpull", "0"])];
    let mut gw = Gateway::builder("reload-pin", Mode::Stdio)
        .policy(&pinned)
        .start(&ups)
        .await;
    gw.client().initialize().await;
    assert!(listed(&mut gw).await.is_empty());

    // Approving the new version (writing the lock again) applies without a restart.
    pin(&gw.policy_file(), &lock);
    let outcome = reloaded(&gw, 1).await;
    assert!(outcome.contains("reload: kept 1"), "{outcome}");
    assert_eq!(listed(&mut gw).await, ["rug__fact"]);
    let served = gw
        .client()
        .call_tool("rug__fact", json!({"topic": "x"}))
        .await;
    assert_eq!(first_text(&served), "fact about x", "{served}");
    gw.stop_and_check().await;
}

/// The count of `time/get_current_time` in usage file `file` (0 while it is not written).
fn counted(file: &Path) -> u64 {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let counts: Value = serde_json::from_str(&text).unwrap_or_default();
    counts["time/get_current_time"].as_u64().unwrap_or(0)
}

/// One call of the time server's tool, answered.
async fn call(gw: &mut Gateway) {
    let args = json!({"timezone": "Europe/Paris"});
    let answer = gw.client().call_tool("time__get_current_time", args).await;
    assert!(answer["result"].is_object(), "{answer}");
}

/// Calls made before a reload are counted with those made after it: a reload that keeps the
/// usage file hands its counts, not yet written, to the new budget; a reload that moves the
/// file writes them to the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counts_survive_a_reload_and_are_written_when_the_file_moves() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("usage.json"), dir.path().join("moved.json"));
    let budget = |file: &Path, extra: &str| {
        format!(
            "[budget]\nenabled = true\nusage_file = {:?}\nrelearn_secs = 3600\n{extra}",
            file.display().to_string()
        )
    };
    let ups = [Up::time("time")];
    let mut gw = Gateway::builder("reload-usage", Mode::Stdio)
        .policy(&budget(&first, ""))
        .start(&ups)
        .await;
    gw.client().initialize().await;
    for _ in 0..2 {
        call(&mut gw).await;
    }
    // The same file, another rule: the counts go on in the new budget.
    let rule = "[budget.tools.\"time/get_current_time\"]\ndescription = \"The time now\"\n";
    rewrite(&gw, &budget(&first, rule), &ups);
    reloaded(&gw, 1).await;
    for _ in 0..3 {
        call(&mut gw).await;
    }
    assert_eq!(counted(&first), 0, "nothing written yet (relearn_secs)");
    // The file moves: what was counted is written to the old one.
    rewrite(&gw, &budget(&second, rule), &ups);
    reloaded(&gw, 2).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while counted(&first) != 5 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        counted(&first),
        5,
        "every call, before and after the reload"
    );
    gw.stop_and_check().await;
}

/// A gateway that stops writes the usage counts it has not written yet: a relearn an hour away
/// and the five-minute flush would otherwise lose the calls of a short session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counts_are_written_when_the_gateway_stops() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("usage.json");
    let policy = format!(
        "[budget]\nenabled = true\nusage_file = {:?}\nrelearn_secs = 3600\n",
        file.display().to_string()
    );
    let ups = [Up::time("time")];
    let mut gw = Gateway::builder("stop-usage", Mode::Stdio)
        .policy(&policy)
        .start(&ups)
        .await;
    gw.client().initialize().await;
    for _ in 0..3 {
        call(&mut gw).await;
    }
    assert_eq!(counted(&file), 0, "nothing written yet (relearn_secs)");
    gw.stop_and_check().await;
    assert_eq!(counted(&file), 3, "every call, written at the stop");
}
