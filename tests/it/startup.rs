//! What a user sees when asking about and starting their own setup: `render --policy P` and
//! `inspect --policy P` without `--tools` start the policy's real upstreams, print what `serve`
//! lists and stop them again; startup problems come with messages that say what to fix (a
//! missing command, a server that exits with a reason on stderr, a port in use, a tool rule
//! that names no tool).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::harness::{
    Gateway, Mode, TagGuard, Up, WAIT, assert_no_leftovers, log_shows, new_tag, policy, run_check,
    served_list, tool_names, venv_bin,
};

/// A stdio server that explains on stderr why it cannot run, then exits 1 (as servers do
/// for a missing token).
fn exits_with_reason(name: &str) -> Up {
    Up::stdio(
        name,
        &venv_bin("python"),
        &[
            "-c",
            "import sys; print('\\x1b[31mError:\\x1b[0m GITHUB_TOKEN is not set', file=sys.stderr); sys.exit(1)",
        ],
    )
}

/// A stdio server that creates the returned marker file once started, then never answers
/// (for 30 s).
fn never_ready(dir: &Path) -> (Up, std::path::PathBuf) {
    let marker = dir.join("started");
    let script = format!(
        "open({:?}, 'w').close(); import time; time.sleep(30)",
        marker.to_string_lossy()
    );
    (
        Up::stdio("slow", &venv_bin("python"), &["-c", &script]),
        marker,
    )
}

/// Runs the binary with `args`, tagged, to its end (at most [`WAIT`]).
async fn run(tag: &str, args: &[&str], policy: &Path) -> std::process::Output {
    let mut cmd = crate::harness::cli(args)
        .arg("--policy")
        .arg(policy)
        .env("MCPB_IT_TAG", tag)
        .tokio();
    tokio::time::timeout(WAIT, cmd.output())
        .await
        .expect("the command ends in time")
        .expect("the command runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_on_a_policy_prints_what_serve_lists_and_leaves_no_process() {
    let tag = new_tag("live-render");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    // The budget on, with a budget small enough that the plan compresses.
    let budget = "[budget]\nenabled = true\nmodel = \"claude-sonnet-4-5\"\nthreshold_percent = 1\n";
    let ups = [Up::everything("everything"), Up::time("time")];
    let policy = policy(dir.path(), &tag, budget, &ups);

    let out = run(&tag, &["render"], &policy).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every upstream was stopped with render (a leaked child would stay).
    assert_no_leftovers(&tag).await;
    let rendered: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = tool_names(&rendered);
    assert!(
        names.iter().any(|n| n == "time__get_current_time"),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("everything__")),
        "{names:?}"
    );

    let live = served_list(&policy).await;
    assert_eq!(live, rendered.to_string(), "serve and render differ");
    assert_no_leftovers(&tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_on_a_policy_names_the_upstream_that_failed_and_why() {
    let tag = new_tag("live-inspect");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let ups = [Up::time("time"), exits_with_reason("github")];
    let policy = policy(dir.path(), &tag, "[budget]\nenabled = true\n", &ups);

    let out = run(&tag, &["inspect", "--format", "json"], &policy).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a failed upstream fails inspect");
    assert!(out.stdout.is_empty(), "nothing printed on failure");
    assert!(
        stderr.contains("1 of 2 upstream(s) did not start"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "  github: the process closed its output (exit status: 1); its stderr ended with: \
             Error: GITHUB_TOKEN is not set"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-failed"), "{stderr}");
    assert_no_leftovers(&tag).await;

    let out = run(
        &tag,
        &["inspect", "--format", "json", "--allow-failed"],
        &policy,
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ups = report["upstreams"].as_array().unwrap();
    assert_eq!(ups[0]["name"], "time");
    assert_eq!(ups[0]["status"], "ready", "{report:#}");
    assert_eq!(ups[0]["tools"], 2);
    assert_eq!(ups[1]["status"], "down");
    assert!(
        ups[1]["reason"]
            .as_str()
            .unwrap()
            .ends_with("its stderr ended with: Error: GITHUB_TOKEN is not set"),
        "{report:#}"
    );
    assert_eq!(report["servers"][0]["server"], "time");
    assert!(report["plan"]["rung"].is_string(), "{report:#}");
    let reason = report["plan"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("every tool in full ("), "{reason}");
    assert_no_leftovers(&tag).await;

    let out = run(&tag, &["inspect", "--allow-failed"], &policy).await;
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("upstream time                 stdio ready protocol "),
        "{table}"
    );
    assert!(
        table.contains("upstream github               stdio DOWN ("),
        "{table}"
    );
    assert_no_leftovers(&tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_at_startup_shows_its_stderr_in_the_summary() {
    let ups = [Up::time("time"), exits_with_reason("github")];
    let gw = Gateway::start("exit-reason", Mode::Http, &ups).await;
    let log = gw.log();
    let line = log
        .lines()
        .find(|l| l.trim_start().starts_with("github "))
        .unwrap_or_else(|| panic!("no summary line for github:\n{log}"));
    assert!(
        line.ends_with(
            "DOWN (the process closed its output (exit status: 1); its stderr ended with: \
             Error: GITHUB_TOKEN is not set) protocol - — 0 tools, 0 prompts, 0 resources"
        ),
        "{line}"
    );
    assert!(!log.contains("exit status exit status"), "{log}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_command_is_named_with_where_it_was_looked_for_and_the_fix() {
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().to_string_lossy().into_owned();
    let ups = [
        Up::time("time"),
        Up::stdio("fetch", "uvx", &["mcp-server-fetch"]).env("PATH", &path),
    ];
    let gw = Gateway::start("missing-command", Mode::Http, &ups).await;
    let log = gw.log();
    let expected = format!(
        "DOWN (cannot start \"uvx\": command not found in the one directory of its PATH \
         ({path}); install uv (uvx comes with it: \
         https://docs.astral.sh/uv/getting-started/installation/), or give its full path as the \
         upstream's command (`command -v uvx` in a shell prints it))"
    );
    assert!(log.contains(&expected), "{log}");
    assert!(!log.contains("os error 2"), "{log}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_fails_at_once_naming_it_before_any_upstream_starts() {
    let tag = new_tag("port-in-use");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let (slow, marker) = never_ready(dir.path());
    let policy = policy(dir.path(), &tag, "", &[slow]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();

    let started = std::time::Instant::now();
    let out = run(&tag, &["serve", "--http", &addr], &policy).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot listen on {addr} ([downstream] http / --http): the address is in use"
        )),
        "{stderr}"
    );
    assert!(
        !stderr.contains("upstream(s) in"),
        "no startup summary: {stderr}"
    );
    assert!(!marker.exists(), "an upstream was started");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_no_leftovers(&tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigterm_while_upstreams_start_stops_the_gateway_and_its_children_at_once() {
    use std::os::unix::process::ExitStatusExt;
    let tag = new_tag("sigterm-at-start");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    // The gateway waits for a server that never answers `initialize`.
    let (slow, marker) = never_ready(dir.path());
    let policy = policy(dir.path(), &tag, "", &[slow]);
    let mut child = crate::harness::cli(["serve", "--http", "127.0.0.1:0", "--policy"])
        .arg(&policy)
        .env("MCPB_IT_TAG", &tag)
        .tokio()
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !marker.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upstream never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let started = std::time::Instant::now();
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("the gateway exits after SIGTERM")
        .unwrap();
    // Stopped by its own handler (exit 0), not killed by the signal's default action, which
    // would leave the upstream's process group running.
    assert_eq!(status.signal(), None, "{status:?}");
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_no_leftovers(&tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_rule_naming_no_tool_is_warned_once_at_serve_time() {
    let rules = "[budget.tools.\"time/get_curent_time\"]\npin = true\n\
                 [budget.tools.\"time/convert_time\"]\npin = true\n";
    let gw = Gateway::builder("unknown-rule", Mode::Http)
        .policy(rules)
        .start(&[Up::time("time")])
        .await;
    let needle = "budget.tools.\"time/get_curent_time\": `time/get_curent_time` matches none of \
                  the upstream's tools";
    assert!(log_shows(|| gw.log(), needle, WAIT).await, "{}", gw.log());
    // Later catalog versions do not repeat it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = gw.log();
    assert_eq!(log.matches(needle).count(), 1, "{log}");
    assert!(
        !log.contains("time/convert_time`"),
        "a rule that matches: {log}"
    );
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_live_judges_tool_rules_against_what_the_upstreams_list() {
    let tag = new_tag("check-live");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let rules = "[budget.tools.\"time/get_curent_time\"]\npin = true\n";
    let policy = policy(dir.path(), &tag, rules, &[Up::time("time")]);
    let (code, stderr) = run_check(&policy, &tag, &["--live", "--strict"], &[]).await;
    assert_eq!(code, Some(65), "{stderr}");
    assert!(
        stderr.contains(
            "budget.tools.\"time/get_curent_time\": `time/get_curent_time` matches none of the \
             upstream's tools"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 warning(s): errors under --strict"),
        "{stderr}"
    );
    assert_no_leftovers(&tag).await;
}

/// `check --live` of `policy` with `STATE_URL` set to `url`: its exit code and stderr.
async fn check_live(policy: &Path, url: String, tag: &str) -> (Option<i32>, String) {
    run_check(policy, tag, &["--live"], &[("STATE_URL", &url)]).await
}

/// `check --live` with `[state] backend = "redis"` asks the store itself: a real
/// `redis-server` answers with its version and takes the scripts; with nothing on the port the
/// check fails naming the store (and never its URL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_live_asks_the_state_store() {
    let tag = new_tag("check-live-state");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let section = "[state]\nbackend = \"redis\"\nurl_env = \"STATE_URL\"\n";
    let policy = policy(dir.path(), &tag, section, &[]);
    let check = |url: String| check_live(&policy, url, &tag);
    let mut store = crate::harness::RedisServer::start(&tag).await;
    let port = store.port;
    let (code, stderr) = check(format!("redis://:s3cret@127.0.0.1:{port}")).await;
    // The test store has no password: AUTH with one is refused, which the check reports.
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("state: the store refused"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "the URL's password: {stderr}");
    let (code, stderr) = check(store.url()).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("state: redis "), "{stderr}");
    assert!(stderr.contains("answers; the scripts load"), "{stderr}");
    store.kill().await;
    let (code, stderr) = check(format!("redis://127.0.0.1:{port}")).await;
    assert_ne!(code, Some(0), "nothing on the port: {stderr}");
    assert!(stderr.contains("state: "), "{stderr}");
    assert_no_leftovers(&tag).await;
}

/// `rediss://` with `[state] ca_file` and a client certificate: a real `redis-server` taking
/// TLS only with a client certificate of the test CA. The check passes with both; without the
/// CA the store's certificate is refused; without the client certificate the store refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_live_reaches_a_tls_store_with_its_ca_and_a_client_certificate() {
    let tag = new_tag("check-live-state-tls");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let status = Command::new(crate::harness::venv_bin("python"))
        .arg(crate::harness::peer_file("transport_server.py"))
        .arg("--make-certs")
        .arg(&certs)
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let mut store = crate::harness::RedisServer::start_tls(&tag, &certs, true).await;
    let url = format!("rediss://127.0.0.1:{}", store.tls_port.unwrap());
    let check = |section: String| {
        let policy = policy(dir.path(), &tag, &section, &[]);
        let (url, tag) = (url.clone(), tag.clone());
        async move { check_live(&policy, url, &tag).await }
    };
    let file = |name: &str| format!("{:?}", certs.join(name).display().to_string());
    let base = "[state]\nbackend = \"redis\"\nurl_env = \"STATE_URL\"\n";
    let client = format!(
        "client_cert_file = {}\nclient_key_file = {}\n",
        file("client.pem"),
        file("client-key.pem")
    );
    let full = format!("{base}ca_file = {}\n{client}", file("ca.pem"));
    let (code, stderr) = check(full).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("answers; the scripts load"), "{stderr}");
    let (code, stderr) = check(format!("{base}{client}")).await;
    assert_ne!(
        code,
        Some(0),
        "the test CA is not a built-in root: {stderr}"
    );
    assert!(stderr.contains("certificate"), "{stderr}");
    let (code, stderr) = check(format!("{base}ca_file = {}\n", file("ca.pem"))).await;
    assert_ne!(code, Some(0), "no client certificate: {stderr}");
    assert!(stderr.contains("state: "), "{stderr}");
    store.kill().await;
    assert_no_leftovers(&tag).await;
}
