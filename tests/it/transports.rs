//! HTTPS upstreams (a test CA made up by the fixture, mutual TLS), the 2024-11-05 HTTP+SSE
//! transport (set, and found by the fallback; a restart of the server), and an upstream that
//! cannot be reached at all — against `tests/peers/transport_server.py` (Python `mcp` SDK).

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::harness::{
    Gateway, Mode, TagGuard, Up, WAIT, drain_stderr, error_type, first_text, free_port, log_shows,
    new_tag, peer_file, venv_bin,
};

/// `transport_server.py` with `args`, running; killed on drop.
struct Fixture {
    child: Child,
    url: String,
    _log: Arc<Mutex<String>>,
}

impl Fixture {
    async fn start(tag: &str, args: &[&str]) -> Self {
        let mut child = Command::new(venv_bin("python"))
            .arg(peer_file("transport_server.py"))
            .args(args)
            .env("MCPB_IT_TAG", tag)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the transport fixture starts");
        let (log, mut ready) = drain_stderr(&mut child, "transport", |line| {
            line.trim().strip_prefix("listening on ").map(str::to_owned)
        });
        let Ok(Some(url)) = tokio::time::timeout(WAIT, ready.recv()).await else {
            panic!(
                "the transport fixture did not come up:\n{}",
                log.lock().unwrap()
            );
        };
        Self {
            child,
            url,
            _log: log,
        }
    }

    /// Over HTTPS on `port`, its certificates in `certs`, asking for a client certificate.
    async fn https(tag: &str, port: u16, certs: &Path) -> Self {
        let port = port.to_string();
        let certs = certs.to_str().expect("a UTF-8 temp path");
        Self::start(
            tag,
            &["--https", &port, "--certs", certs, "--require-client-cert"],
        )
        .await
    }

    async fn sse(tag: &str, port: u16) -> Self {
        Self::start(tag, &["--sse", &port.to_string()]).await
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

fn cert(certs: &Path, file: &str) -> String {
    certs.join(file).to_str().expect("UTF-8").to_owned()
}

/// The fixture's certificates, made before the gateway's policy names them.
async fn make_certs(certs: &Path) -> u16 {
    let status = Command::new(venv_bin("python"))
        .arg(peer_file("transport_server.py"))
        .arg("--make-certs")
        .arg(certs)
        .status()
        .await
        .expect("the transport fixture runs");
    assert!(status.success());
    free_port()
}

/// A real MCP server behind TLS whose certificate chains to a CA made up for the test and that
/// asks for a client certificate: with `ca_file` and the client certificate the gateway lists
/// and calls its tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstream_with_a_test_ca_and_a_client_certificate() {
    let tag = new_tag("https-upstream");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let port = make_certs(&certs).await;
    let server = Fixture::https(&tag, port, &certs).await;
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    let up = Up::http("tls", &server.url)
        .key("ca_file", &cert(&certs, "ca.pem"))
        .key("client_cert_file", &cert(&certs, "client.pem"))
        .key("client_key_file", &cert(&certs, "client-key.pem"));
    let mut gw = Gateway::start("https-upstream", Mode::Stdio, &[up]).await;
    let c = gw.client();
    c.initialize().await;
    let list = c.request("tools/list", json!({})).await;
    assert!(list.to_string().contains("\"tls__echo\""), "{list}");
    let resp = c
        .call_tool("tls__echo", json!({"message": "over tls"}))
        .await;
    assert_eq!(first_text(&resp), "Echo: over tls", "{resp}");
    gw.stop_and_check().await;
    server.stop().await;
}

/// A company CA named by `SSL_CERT_FILE` in the gateway's environment, as `uvx` / `npx`
/// servers read it: an HTTPS upstream whose certificate chains to it is trusted without a
/// `ca_file` (before: `UnknownIssuer`, the built-in roots only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstream_trusts_the_ca_that_ssl_cert_file_names() {
    let tag = new_tag("https-ssl-cert-file");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let port = make_certs(&certs).await;
    let server = Fixture::https(&tag, port, &certs).await;
    let up = Up::http("tls", &server.url)
        .key("client_cert_file", &cert(&certs, "client.pem"))
        .key("client_key_file", &cert(&certs, "client-key.pem"));
    let ca = cert(&certs, "ca.pem");
    let env = [("SSL_CERT_FILE", ca.as_str())];
    let mut gw = Gateway::builder("https-ssl-cert-file", Mode::Stdio)
        .env(&env)
        .start(&[up])
        .await;
    let c = gw.client();
    c.initialize().await;
    let resp = c
        .call_tool("tls__echo", json!({"message": "via SSL_CERT_FILE"}))
        .await;
    assert_eq!(first_text(&resp), "Echo: via SSL_CERT_FILE", "{resp}");
    gw.stop_and_check().await;
    server.stop().await;
}

/// The same server with the wrong CA in `ca_file`: the startup summary and the client's call
/// say the upstream's certificate was not trusted, naming the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstream_with_the_wrong_ca_says_certificate() {
    let tag = new_tag("https-wrong-ca");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let port = make_certs(&certs).await;
    let server = Fixture::https(&tag, port, &certs).await;
    let up = Up::http("tls", &server.url)
        .key("ca_file", &cert(&certs, "other-ca.pem"))
        .key("client_cert_file", &cert(&certs, "client.pem"))
        .key("client_key_file", &cert(&certs, "client-key.pem"));
    let mut gw = Gateway::start("https-wrong-ca", Mode::Stdio, &[up]).await;
    let log = gw.log();
    let line = log
        .lines()
        .find(|l| l.trim_start().starts_with("tls ") && l.contains("DOWN"))
        .unwrap_or_else(|| panic!("no DOWN line for tls in:\n{log}"));
    assert!(line.contains("certificate"), "{line}");
    assert!(line.contains("UnknownIssuer"), "{line}");
    let c = gw.client();
    c.initialize().await;
    let resp = c.call_tool("tls__echo", json!({"message": "x"})).await;
    assert_eq!(
        error_type(&resp),
        "mcp_budget.upstream.unreachable",
        "{resp}"
    );
    let message = resp["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("upstream \"tls\"") && message.contains("certificate"),
        "{message}"
    );
    gw.stop_and_check().await;
    server.stop().await;
}

/// An upstream URL on a closed port: "connection refused" with the URL in the summary, and a
/// call gets `mcp_budget.upstream.unreachable` (not "broke the protocol").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_unreachable_not_a_protocol_error() {
    let url = format!("http://127.0.0.1:{}/mcp", free_port());
    let mut gw = Gateway::start("refused", Mode::Stdio, &[Up::http("web", &url)]).await;
    let log = gw.log();
    let line = log
        .lines()
        .find(|l| l.trim_start().starts_with("web ") && l.contains("DOWN"))
        .unwrap_or_else(|| panic!("no DOWN line for web in:\n{log}"));
    assert!(line.contains("connection refused"), "{line}");
    assert!(line.contains(&url), "{line}");
    assert!(!line.contains("broke the protocol"), "{line}");
    let c = gw.client();
    c.initialize().await;
    let resp = c.call_tool("web__echo", json!({"message": "x"})).await;
    assert_eq!(
        error_type(&resp),
        "mcp_budget.upstream.unreachable",
        "{resp}"
    );
    assert_eq!(resp["error"]["data"]["url"], url.as_str(), "{resp}");
    let message = resp["error"]["message"].as_str().unwrap();
    assert!(message.contains("connection refused"), "{message}");
    gw.stop_and_check().await;
}

/// Calls `sse__slow` with a progress token and `sse__shout` (a log notification during the
/// call): both notifications reach the client, and `sse__echo` answers.
async fn list_call_progress_and_log(gw: &mut Gateway) {
    let c = gw.client();
    let list = c.request("tools/list", json!({})).await;
    assert!(list.to_string().contains("\"sse__slow\""), "{list}");
    let resp = c
        .call_tool("sse__echo", json!({"message": "over sse"}))
        .await;
    assert_eq!(first_text(&resp), "Echo: over sse", "{resp}");
    let slow = c
        .request(
            "tools/call",
            json!({"name": "sse__slow", "arguments": {"seconds": 0.6, "steps": 3},
                   "_meta": {"progressToken": "p-sse"}}),
        )
        .await;
    assert_eq!(first_text(&slow), "slept 0.6s in 3 steps", "{slow}");
    let shout = c
        .call_tool("sse__shout", json!({"message": "hello log"}))
        .await;
    assert_eq!(first_text(&shout), "shouted hello log", "{shout}");
    c.drain(Duration::from_millis(300)).await;
    let of = |method: &str| -> Vec<Value> {
        c.seen
            .iter()
            .filter(|m| m["method"] == method)
            .cloned()
            .collect()
    };
    let progress = of("notifications/progress");
    let ours: Vec<_> = progress
        .iter()
        .filter(|p| p["params"]["progressToken"] == "p-sse")
        .map(|p| p["params"]["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(ours, [1.0, 2.0, 3.0], "{progress:?}");
    let logs = of("notifications/message");
    assert!(
        logs.iter().any(|m| m["params"]["data"] == "hello log"),
        "{logs:?}"
    );
}

/// `transport = "sse"`: the gateway GETs the stream, POSTs to the endpoint it names, and gets
/// every answer and notification on the stream; after the server restarts (same port) it
/// reconnects by itself and serves again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_upstream_serves_and_reconnects_after_a_restart() {
    let tag = new_tag("sse-upstream");
    let _guard = TagGuard(tag.clone());
    let port = free_port();
    let server = Fixture::sse(&tag, port).await;
    let up = Up::http("sse", &server.url).key("transport", "sse");
    let mut gw = Gateway::start("sse-upstream", Mode::Stdio, &[up]).await;
    gw.client().initialize().await;
    list_call_progress_and_log(&mut gw).await;
    assert!(
        !gw.log().contains("refused streamable HTTP"),
        "{}",
        gw.log()
    );

    server.stop().await;
    assert!(
        log_shows(|| gw.log(), "Upstream connection lost", WAIT).await,
        "{}",
        gw.log()
    );
    let server = Fixture::sse(&tag, port).await;
    let ready = || gw.log().matches("Upstream ready").count();
    let deadline = tokio::time::Instant::now() + WAIT;
    while ready() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let resp = gw
        .client()
        .call_tool("sse__echo", json!({"message": "again"}))
        .await;
    assert_eq!(first_text(&resp), "Echo: again", "{resp}");
    gw.stop_and_check().await;
    server.stop().await;
}

/// No `transport` key: the streamable POST is refused (405 on the SSE URL), and the gateway
/// falls back to HTTP+SSE as the spec's backwards-compatibility section says, saying so once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_upstream_is_found_by_the_fallback() {
    let tag = new_tag("sse-fallback");
    let _guard = TagGuard(tag.clone());
    let server = Fixture::sse(&tag, free_port()).await;
    let mut gw = Gateway::start("sse-fallback", Mode::Stdio, &[Up::http("sse", &server.url)]).await;
    gw.client().initialize().await;
    list_call_progress_and_log(&mut gw).await;
    let log = gw.log();
    assert_eq!(log.matches("refused streamable HTTP").count(), 1, "{log}");
    gw.stop_and_check().await;
    server.stop().await;
}
