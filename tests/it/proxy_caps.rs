//! Behind a real `HAProxy` with `option forwardfor` (what `docs/deploy.md` recommends) and
//! `[downstream] trusted_proxies`, against the gateway binary: a client's own `Forwarded` and
//! `X-Forwarded-For` headers (which `HAProxy` passes through) neither get it past the
//! per-address session cap nor lock out another address, and one client's slow request bodies
//! through the proxy cannot take every connection of the gateway from the others.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{Gateway, Mode};
use crate::limits::{addr_of, client_from, connect_from};

/// `HAProxy` in front of `gateway` (`host:port`), adding `X-Forwarded-For` (`option
/// forwardfor`) and passing everything else through; its port. `extra` lines go into the
/// `defaults` section.
pub async fn haproxy(
    gateway: &str,
    dir: &std::path::Path,
    extra: &str,
) -> (tokio::process::Child, u16) {
    let port = crate::harness::free_port();
    let config = format!(
        "defaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n  \
         timeout server 30s\n  option forwardfor\n{extra}\
         frontend mcp\n  bind 127.0.0.1:{port}\n  default_backend gateway\n\
         backend gateway\n  server g {gateway}\n"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).unwrap();
    let child = tokio::process::Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("haproxy is installed (scripts/install-test-deps.sh)");
    let started = std::time::Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(
            started.elapsed() < crate::harness::WAIT,
            "haproxy did not listen"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, port)
}

fn initialize(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "it-proxy-caps", "version": "0"}}})
    .to_string()
}

/// `initialize` through the proxy at `url` with `headers`: the status and the error message.
async fn init(
    client: &reqwest::Client,
    url: &str,
    id: u64,
    headers: &[(&str, String)],
) -> (u16, String) {
    let mut post = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(initialize(id));
    for (name, value) in headers {
        post = post.header(*name, value);
    }
    let answer = post.send().await.unwrap();
    let status = answer.status().as_u16();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    let message = body["error"]["message"].as_str().unwrap_or_default();
    (status, message.to_owned())
}

/// Address `i` of 300 that are none of the test's.
fn other(i: u64) -> String {
    match i {
        0..250 => format!("198.51.100.{}", i + 1),
        _ => format!("203.0.113.{}", i - 249),
    }
}

/// A spoof: the client's own `Forwarded` and `X-Forwarded-For`, naming addresses `i` and
/// `299 - i` of [`other`].
fn spoof(i: u64) -> Vec<(&'static str, String)> {
    vec![
        ("forwarded", format!("for={}", other(i))),
        ("x-forwarded-for", other(299 - i)),
    ]
}

/// Spoofs naming `victim`: in `Forwarded` (quoted, with a port, as RFC 7239 allows), in
/// `X-Forwarded-For`, in both.
fn naming(i: u64, victim: &str) -> Vec<(&'static str, String)> {
    match i % 3 {
        0 => vec![("forwarded", format!("for=\"{victim}:4711\";proto=https"))],
        1 => vec![("x-forwarded-for", victim.to_owned())],
        _ => vec![
            ("forwarded", format!("for={victim}")),
            ("x-forwarded-for", format!("198.51.100.1, {victim}")),
        ],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoofed_forwarding_headers_through_haproxy_neither_bypass_the_cap_nor_lock_out_a_victim() {
    let downstream = "max_sessions_per_client = 2\ntrusted_proxies = [\"127.0.0.1\"]";
    let gw = Gateway::builder("proxy-spoof", Mode::Http)
        .policy(downstream)
        .start(&[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let (mut proxy, port) = haproxy(&addr_of(&gw).to_string(), dir.path(), "").await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    // The attacker on 127.0.0.2, the victim on 127.0.0.3; HAProxy connects from 127.0.0.1.
    let (attacker, victim) = (client_from("127.0.0.2"), client_from("127.0.0.3"));
    for id in 0..2 {
        assert_eq!(init(&attacker, &url, id, &[]).await.0, 200);
    }
    // At its cap, the attacker tries 300 more sessions, each naming another address; then
    // 30 naming the victim's.
    let (mut bypassed, mut elsewhere) = ([0, 0], Vec::new());
    let spoofs = (0..300)
        .map(spoof)
        .chain((0..30).map(|i| naming(i, "127.0.0.3")));
    for (i, headers) in (0..).zip(spoofs) {
        let (status, message) = init(&attacker, &url, 10 + i, &headers).await;
        if status == 200 {
            bypassed[usize::from(i >= 300)] += 1;
        } else if !(status == 503 && message.contains("from 127.0.0.2")) {
            // Refused, but counted against another address.
            elsewhere.push(format!("{status} {message}"));
        }
    }
    eprintln!(
        "spoofed Forwarded / X-Forwarded-For: {} of 300 bypass the session cap; of 30 naming \
         the victim, {} bypass; {} refused as another address's",
        bypassed[0],
        bypassed[1],
        elsewhere.len()
    );
    // The victim opens its own sessions.
    for id in 0..2 {
        let (status, message) = init(&victim, &url, 500 + id, &[]).await;
        assert_eq!(status, 200, "the victim is locked out: {message}");
    }
    assert_eq!(
        bypassed,
        [0, 0],
        "spoofed headers bypassed the per-address cap"
    );
    assert_eq!(elsewhere, Vec::<String>::new(), "spoofs counted elsewhere");
    proxy.kill().await.unwrap();
    gw.stop_and_check().await;
}

/// A POST through the proxy from `local` that sends its head and a little of its body, then
/// stalls: the gateway waits for the rest (`body_timeout_secs`).
async fn slow_body(local: &str, proxy: std::net::SocketAddr) -> TcpStream {
    let mut tcp = connect_from(local, proxy).await;
    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                Accept: application/json\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\"";
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp
}

/// What the gateway answered on `tcp` within `limit`, if anything.
async fn answered(tcp: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(limit, tcp.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        _ => None,
    }
}

/// `n` slow bodies from `local` through the proxy at `to`; how many of them were answered
/// within a few seconds with a 503 over `local`'s `max_connections_per_client` of 4.
async fn slow_bodies(n: usize, local: &str, to: std::net::SocketAddr) -> (Vec<TcpStream>, usize) {
    let mut slow = Vec::new();
    for _ in 0..n {
        slow.push(slow_body(local, to).await);
    }
    let answers = slow
        .iter_mut()
        .map(|tcp| answered(tcp, Duration::from_secs(3)));
    let over_its_cap = (futures::future::join_all(answers)
        .await
        .into_iter()
        .flatten())
    .filter(|answer| {
        answer.starts_with("HTTP/1.1 503")
            && answer.contains(&format!("from {local}"))
            && answer.contains("downstream.max_connections_per_client = 4")
    })
    .count();
    (slow, over_its_cap)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_of_one_client_behind_haproxy_cannot_take_every_connection() {
    let downstream = "max_connections = 12\nmax_connections_per_client = 4\n\
                      trusted_proxies = [\"127.0.0.1\"]";
    let gw = Gateway::builder("proxy-slow-body", Mode::Http)
        .policy(downstream)
        .start(&[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let (mut proxy, port) = haproxy(&addr_of(&gw).to_string(), dir.path(), "").await;
    let to = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    // Ten slow bodies from 127.0.0.2: the gateway holds four (its cap), refuses the others.
    let (mut slow, over_its_cap) = slow_bodies(10, "127.0.0.2", to).await;
    // Ten more: the gateway has twelve connections in all.
    slow.extend(slow_bodies(10, "127.0.0.2", to).await.0);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let other = client_from("127.0.0.3");
    let mut served = 0;
    for id in 0..3 {
        let (status, message) = init(&other, &url, id, &[]).await;
        eprintln!("another client behind the proxy: {status} {message}");
        served += usize::from(status == 200);
    }
    eprintln!(
        "20 slow bodies from one client: {over_its_cap} of the first 10 refused over its cap, \
         another client served {served} of 3"
    );
    assert_eq!(served, 3, "one client's slow bodies starved another");
    assert_eq!(
        over_its_cap,
        10 - 4,
        "the slow client holds more than its cap"
    );
    drop(slow);
    proxy.kill().await.unwrap();
    gw.stop_and_check().await;
}
