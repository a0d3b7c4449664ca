//! Issue 50, finding 6 and the Lows of finding 7 that concern what the binary prints and
//! reads: credentials in upstream URLs never printed (logs, `/status`, `check --live`), `--url`
//! naming a server by its host, durations bounded by `check`, devices refused as policy files,
//! UTF-8 errors with their offset, JSONC and BOM host files, lockfile errors with their line,
//! the `[limits.upstream]` starvation warning, stdin's end honoured during the readiness wait,
//! and the descriptor-limit warning.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;

use crate::harness::{BIN as GATEWAY, TagGuard, WAIT, cli, drain_stderr, free_port, new_tag};

const PASSWORD: &str = "s3cretPW";
const QUERY_TOKEN: &str = "qtok0123";

/// `mcp-budget ARGS` under a 2 GB address-space cap (a binary that reads a device until
/// memory runs out dies instead of taking the machine with it), stdout and stderr together.
fn run(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2000000; exec \"$0\" \"$@\" 2>&1")
        .arg(GATEWAY)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// `command` (a `serve --http`) started with the processes' `tag`, its stderr piped.
fn serve_http(command: &mut Command, tag: &str) -> tokio::process::Child {
    command
        .env("MCPB_IT_TAG", tag)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// A GET of the admin listener at `port`, the body.
async fn admin_get(port: u16, path: &str) -> String {
    let url = format!("http://127.0.0.1:{port}{path}");
    let client = reqwest::Client::new();
    let answer = client.get(&url).send().await.expect("the admin answers");
    answer.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_password_or_query_token_of_an_upstream_url_is_printed_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let tag = new_tag("secrets");
    let _guard = TagGuard(tag.clone());
    let admin = free_port();
    // Nobody listens there: the gateway reconnects, logging each attempt.
    let url = format!(
        "http://alice:{PASSWORD}@127.0.0.1:{}/mcp?token={QUERY_TOKEN}&x=1",
        free_port()
    );
    let policy = write(
        dir.path(),
        "p.toml",
        format!(
            "version = 1\n[admin]\nhttp = \"127.0.0.1:{admin}\"\n[[upstream]]\nname = \"web\"\n\
             url = \"{url}\"\nrequired = false\n"
        ),
    );
    // The same URL once more on the command line: named by its host, not by the user.
    let mut child = serve_http(
        &mut cli(["serve", "--http", "127.0.0.1:0", "--policy", &policy])
            .args(["--ready-timeout-secs", "2", "--url", &url])
            .env("MCP_BUDGET_LOG", "debug")
            .tokio(),
        &tag,
    );
    let (stderr, mut ready) = drain_stderr(&mut child, "gw", |line| {
        line.trim().strip_prefix("listening on ").map(str::to_owned)
    });
    tokio::time::timeout(WAIT, ready.recv())
        .await
        .unwrap_or_else(|_| panic!("not up:\n{}", stderr.lock().unwrap()));
    let status = admin_get(admin, "/status").await;
    let metrics = admin_get(admin, "/metrics").await;
    // A few reconnect lines.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status_json: serde_json::Value = serde_json::from_str(&status).unwrap();
    let names: Vec<&str> = status_json["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web", "127-0-0-1"], "{status}");
    let reason = status_json["upstreams"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("http://***@127.0.0.1:") && reason.contains("/mcp?token=***&x=***"),
        "the URL is shown, redacted: {reason}"
    );
    child.kill().await.unwrap();
    let log = stderr.lock().unwrap().clone();
    assert!(log.contains("Upstream is down"), "{log}");
    // `check --live` names the upstream that did not start, and why.
    let (_, live) = run(&["check", "--live", "--ready-timeout-secs", "2", &policy]);
    assert!(
        live.contains("web: upstream \"web\" is unreachable at http://***@127.0.0.1:"),
        "{live}"
    );
    let (ok, bad) = run(&[
        "check",
        &write(
            dir.path(),
            "bad.toml",
            format!(
                "version = 1\n[[upstream]]\nname = \"web\"\nurl = \"ftp://u:{PASSWORD}@h/?t={QUERY_TOKEN}\"\n"
            ),
        ),
    ]);
    assert!(!ok && bad.contains("is not an http(s) URL"), "{bad}");
    for (what, text) in [
        ("stderr", &log),
        ("/status", &status),
        ("/metrics", &metrics),
        ("check --live", &live),
        ("check", &bad),
    ] {
        for secret in [PASSWORD, QUERY_TOKEN, "alice"] {
            assert!(!text.contains(secret), "{what} shows {secret:?}:\n{text}");
        }
    }
}

#[test]
fn check_refuses_a_duration_longer_than_a_year() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "p.toml",
        "version = 1\n[downstream]\nsession_idle_secs = 31536001\n[[upstream]]\nname = \"a\"\n\
         command = \"x\"\ntimeout_secs = 9223372036854775807\n[limits]\nqueue_ms = 18446744073709551615\n",
    );
    let (ok, out) = run(&["check", &policy]);
    assert!(!ok, "{out}");
    for line in [
        "line 3: downstream.session_idle_secs: must be at most 31536000 (a year)",
        "line 7: upstream[0].timeout_secs: must be at most 31536000 (a year)",
        "line 9: limits.queue_ms: must be at most 31536000000 (a year)",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
}

#[test]
fn devices_are_refused_as_policy_files_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (ok, out) = run(&["check", "/dev/zero"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("cannot read /dev/zero: not a regular file (a device, FIFO or socket)"),
        "{out}"
    );
    let (ok, out) = run(&["check", "--mcp-json", "/dev/zero"]);
    assert!(!ok && out.contains("not a regular file"), "{out}");
    let locked = write(
        dir.path(),
        "p.toml",
        "version = 1\n[pin]\nlock = \"/dev/zero\"\n",
    );
    let (ok, out) = run(&["check", &locked]);
    assert!(
        !ok && out.contains("/dev/zero: not a regular file"),
        "{out}"
    );
    let (ok, out) = run(&["serve", "--stdio", "--policy", "/dev/zero"]);
    assert!(!ok && out.contains("not a regular file"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn invalid_utf8_is_reported_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "p.toml", b"version = 1\n# caf\xc3\xa9 \xff\n");
    let (ok, out) = run(&["check", &policy]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("not UTF-8: invalid byte at offset 20 (line 2, column 8)"),
        "{out}"
    );
}

#[test]
fn vs_code_jsonc_with_a_bom_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let vscode = dir.path().join(".vscode");
    std::fs::create_dir(&vscode).unwrap();
    let file = write(
        &vscode,
        "mcp.json",
        "\u{feff}{\n  // Servers of this workspace\n  \"servers\": {\n    /* the clock */\n    \
         \"time\": { \"command\": \"uvx\", \"args\": [\"mcp-server-time\"], },\n  },\n}\n",
    );
    let (ok, out) = run(&["check", "--mcp-json", &file]);
    assert!(ok, "{out}");
    let (ok, out) = run(&["init", "--from", &file, "--model", "claude-sonnet-4-5"]);
    assert!(ok && out.contains("name = \"time\""), "{out}");
}

#[test]
fn lockfile_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let lock = write(dir.path(), "mcp-budget.lock", "# pinned\nversion = 3\n");
    let policy = write(
        dir.path(),
        "p.toml",
        "version = 1\n[pin]\nlock = \"mcp-budget.lock\"\n",
    );
    let (ok, out) = run(&["check", &policy]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!("{lock}: line 2: unsupported lockfile version 3")),
        "{out}"
    );
}

#[test]
fn check_warns_when_an_upstream_cap_lets_one_client_starve_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "p.toml",
        "version = 1\n[[upstream]]\nname = \"db\"\ncommand = \"x\"\n[limits.upstream.db]\nin_flight = 4\n",
    );
    let (ok, out) = run(&["check", "--strict", &policy]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("line 6: limits.upstream.db.in_flight: caps calls to `db` at 4"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_closed_during_the_readiness_wait_stops_the_gateway_at_once() {
    stdin_closed_while_starting(false).await;
}

/// The same with stdin a Unix socket, as Node hosts (Claude Desktop) hand their servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_socket_stdin_during_the_readiness_wait_stops_the_gateway_at_once() {
    stdin_closed_while_starting(true).await;
}

/// The gateway on stdio (a pipe, or one end of a socket pair) waits for an upstream that
/// never answers; the host closes stdin; the gateway must be gone within 5 s, not 30.
async fn stdin_closed_while_starting(socket: bool) {
    let dir = tempfile::tempdir().unwrap();
    let tag = new_tag("eof");
    let _guard = TagGuard(tag.clone());
    let marker = dir.path().join("started");
    // An upstream that starts and never answers: the gateway waits up to 30 s for it.
    let script = format!(
        "open({:?}, 'w').close(); import time; time.sleep(60)",
        marker.to_string_lossy()
    );
    let policy = write(
        dir.path(),
        "p.toml",
        format!(
            "version = 1\n[[upstream]]\nname = \"slow\"\ncommand = {:?}\nargs = [\"-c\", {:?}]\n\
             env = {{ MCPB_IT_TAG = {:?} }}\n",
            crate::harness::venv_bin("python"),
            script,
            tag
        ),
    );
    let mut command = cli([
        "serve",
        "--stdio",
        "--policy",
        &policy,
        "--ready-timeout-secs",
        "30",
    ])
    .tokio();
    command.env("MCPB_IT_TAG", &tag).env("NO_COLOR", "1");
    let (host_end, gateway_end) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut host_end = Some(host_end);
    if socket {
        command.stdin(Stdio::from(std::os::fd::OwnedFd::from(gateway_end)));
    } else {
        drop(gateway_end);
        command.stdin(Stdio::piped());
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (stderr, _) = drain_stderr(&mut child, "gw", |_| None);
    let waited = Instant::now();
    while !marker.exists() {
        assert!(waited.elapsed() < WAIT, "the upstream did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(child.stdin.take());
    drop(host_end.take());
    let closed = Instant::now();
    let exit = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
    let took = closed.elapsed();
    assert!(
        exit.is_ok() && took < Duration::from_secs(5),
        "exited {took:?} after stdin closed (ready timeout 30 s):\n{}",
        stderr.lock().unwrap()
    );
    crate::harness::assert_no_leftovers(&tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_descriptors_for_the_upstreams_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let tag = new_tag("fds");
    let _guard = TagGuard(tag.clone());
    // 300 stdio servers whose command does not exist (nothing is started) and 512 client
    // connections need 1,776 descriptors; the limit is 256, soft and hard.
    let servers: Vec<String> = (0..300)
        .map(|i| format!("\"s{i}\": {{\"command\": \"/nonexistent/mcp-{i}\"}}"))
        .collect();
    let json = write(
        dir.path(),
        "claude_desktop_config.json",
        format!("{{\"mcpServers\": {{{}}}}}", servers.join(", ")),
    );
    let mut child = serve_http(
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -n 256; exec \"$0\" \"$@\"")
            .arg(GATEWAY)
            .args(["serve", "--http", "127.0.0.1:0", "--mcp-json", &json])
            .args(["--ready-timeout-secs", "1"]),
        &tag,
    );
    let (stderr, mut warned) = drain_stderr(&mut child, "gw", |line| {
        line.contains("Too few file descriptors")
            .then(|| line.to_owned())
    });
    let line = tokio::time::timeout(WAIT, warned.recv()).await;
    child.kill().await.unwrap();
    let line = line
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no warning:\n{}", stderr.lock().unwrap()));
    assert!(
        line.contains("needed=1776") && line.contains("limit=256"),
        "{line}"
    );
}
