//! Caps per principal and keep-alive after refusals, against the gateway binary: one client's
//! sessions or connections, or a flood of unauthenticated connections, never lock out
//! another client; behind `trusted_proxies` (a raw `X-Forwarded-For`, and a real `HAProxy`
//! with `option forwardfor`) the forwarded address is the one capped; a kept-alive client sees no reset after a 401, 403, 404 or 415, and a refusal that does close
//! its connection says `Connection: close`.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{Gateway, Mode};
use crate::limits::{addr_of, connect_from};
use crate::proxy_caps::haproxy;

const ALICE: &str = "k-alice-5c1e";
const BOB: &str = "k-bob-a90d";
const KEYS: [(&str, &str); 2] = [("ALICE_KEY", ALICE), ("BOB_KEY", BOB)];

/// `[downstream]` keys, then alice and bob, each with every tool.
fn clients(downstream: &str) -> String {
    format!(
        r#"{downstream}

[[client]]
name = "alice"
api_key_env = "ALICE_KEY"
allow = ["*"]

[[client]]
name = "bob"
api_key_env = "BOB_KEY"
allow = ["*"]
"#
    )
}

fn initialize(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "it-http-caps", "version": "0"}}})
    .to_string()
}

/// One answer read off a raw connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// The head, lower-cased.
    head: String,
    body: String,
}

impl Answer {
    fn closes(&self) -> bool {
        self.head.contains("\r\nconnection: close")
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// A POST of `body` to `path`, head and body written apart (as a client streaming its body
/// does: the gateway sees the head before the body).
fn request(to: SocketAddr, path: &str, headers: &[(&str, &str)], body: &str) -> (String, String) {
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {to}\r\nAccept: application/json\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += "\r\n";
    (head, body.to_owned())
}

/// Sends `request` on `tcp` (head, a pause, body) and reads one answer (`Content-Length`
/// framed); `None` when the connection fails or closes before a whole answer.
async fn exchange(tcp: &mut TcpStream, request: &(String, String)) -> Option<Answer> {
    tcp.write_all(request.0.as_bytes()).await.ok()?;
    tokio::time::sleep(Duration::from_millis(2)).await;
    tcp.write_all(request.1.as_bytes()).await.ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let read = async {
        loop {
            if let Some(answer) = whole(&got) {
                return Some(answer);
            }
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()
        .flatten()
}

/// The answer in `got`, once it is whole.
fn whole(got: &[u8]) -> Option<Answer> {
    let text = String::from_utf8_lossy(got);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let head = head.to_ascii_lowercase();
    let length: usize = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        (name == "content-length").then(|| value.trim().parse().ok())?
    })?;
    if body.len() < length {
        return None;
    }
    let status = head.get(9..12)?.parse().ok()?;
    Some(Answer {
        status,
        head,
        body: body[..length].to_owned(),
    })
}

/// Whether the gateway closed `tcp` (within a second).
async fn closed(tcp: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(1), tcp.read(&mut buf)).await;
    matches!(read, Ok(Ok(0) | Err(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_alive_clients_see_no_resets_after_refusals() {
    let gw = Gateway::builder("caps-keepalive", Mode::Http)
        .policy(&clients(""))
        .env(&KEYS)
        .start(&[])
        .await;
    let to = addr_of(&gw);
    let init = initialize(1);
    let key = ("X-Api-Key", ALICE);
    let json = ("Content-Type", "application/json");
    let requests = [
        (401, request(to, "/mcp", &[json], &init)),
        (
            401,
            request(to, "/mcp", &[json, ("X-Api-Key", "wrong")], &init),
        ),
        (200, request(to, "/mcp", &[json, key], &init)),
        (404, request(to, "/nowhere", &[json, key], &init)),
        (
            415,
            request(to, "/mcp", &[("Content-Type", "text/plain"), key], &init),
        ),
        (
            403,
            request(
                to,
                "/mcp",
                &[json, key, ("Origin", "http://evil.example")],
                &init,
            ),
        ),
    ];
    // 300 requests on one kept-alive connection: every one answered, none closes it.
    let mut tcp = connect_from("127.0.0.1", to).await;
    for i in 0..300 {
        let (status, req) = &requests[i % requests.len()];
        let answer = exchange(&mut tcp, req).await;
        let answer = answer.unwrap_or_else(|| panic!("request {i} got no answer (a reset)"));
        assert_eq!(answer.status, *status, "request {i}: {answer:?}");
        assert!(
            !answer.closes(),
            "request {i} closed the connection: {answer:?}"
        );
    }
    // A body too large to read for an unauthenticated client: refused without reading it,
    // and the answer says the connection closes.
    let big = "x".repeat(100 * 1024);
    let answer = exchange(&mut tcp, &request(to, "/mcp", &[json], &big)).await;
    let answer = answer.expect("answered");
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(answer.closes(), "{answer:?}");
    assert!(closed(&mut tcp).await);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_sessions_never_lock_out_another() {
    let gw = Gateway::builder("caps-sessions", Mode::Http)
        .policy(&clients("max_sessions_per_client = 3"))
        .env(&KEYS)
        .start(&[])
        .await;
    let to = addr_of(&gw);
    let json = ("Content-Type", "application/json");
    let mut tcp = connect_from("127.0.0.1", to).await;
    let open =
        |key: &str, id: u64| request(to, "/mcp", &[json, ("X-Api-Key", key)], &initialize(id));
    for id in 0..3 {
        let answer = exchange(&mut tcp, &open(BOB, id)).await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    // Bob's fourth is over his cap ...
    let refused = exchange(&mut tcp, &open(BOB, 9)).await.unwrap();
    assert_eq!(refused.status, 503, "{refused:?}");
    let err = &refused.json()["error"];
    assert_eq!(
        err["data"]["type"], "mcp_budget.session.limit",
        "{refused:?}"
    );
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("client \"bob\"") && message.contains("max_sessions_per_client = 3"),
        "{message}"
    );
    // ... and alice, from the same address, opens hers.
    for id in 10..13 {
        let answer = exchange(&mut tcp, &open(ALICE, id)).await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_one_clients_connections_never_lock_out_another() {
    let gw = Gateway::builder("caps-connections", Mode::Http)
        .policy(&clients("max_connections_per_client = 8"))
        .env(&KEYS)
        .start(&[])
        .await;
    let to = addr_of(&gw);
    let json = ("Content-Type", "application/json");
    // 40 idle unauthenticated connections from the clients' own address ...
    let mut idle = Vec::new();
    for _ in 0..40 {
        let mut tcp = connect_from("127.0.0.1", to).await;
        tcp.write_all(b"POST /mcp HTTP/1.1\r\n").await.unwrap();
        idle.push(tcp);
    }
    // ... and bob's eight served connections, kept alive.
    let bob = request(to, "/mcp", &[json, ("X-Api-Key", BOB)], &initialize(1));
    let mut bobs = Vec::new();
    for _ in 0..8 {
        let mut tcp = connect_from("127.0.0.1", to).await;
        let answer = exchange(&mut tcp, &bob).await.expect("bob is served");
        assert_eq!(answer.status, 200, "{answer:?}");
        bobs.push(tcp);
    }
    // Bob's ninth is over his cap: refused, and closed with a word.
    let mut ninth = connect_from("127.0.0.1", to).await;
    let refused = exchange(&mut ninth, &bob).await.expect("answered");
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.closes(), "{refused:?}");
    let err = &refused.json()["error"];
    assert_eq!(err["data"]["type"], "mcp_budget.http.too_many_connections");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("client \"bob\"") && message.contains("max_connections_per_client = 8"),
        "{message}"
    );
    // Alice, same address, is served on each of eight new connections.
    let alice = request(to, "/mcp", &[json, ("X-Api-Key", ALICE)], &initialize(2));
    let mut alices = Vec::new();
    for i in 0..8 {
        let mut tcp = connect_from("127.0.0.1", to).await;
        let answer = exchange(&mut tcp, &alice).await;
        let answer = answer.unwrap_or_else(|| panic!("alice's connection {i} was not served"));
        assert_eq!(answer.status, 200, "{answer:?}");
        alices.push(tcp);
    }
    // Bob's connections were kept; the idle ones made room.
    for tcp in &mut bobs {
        let answer = exchange(tcp, &bob).await.expect("bob's connection kept");
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    drop(idle);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_forwarded_address_is_capped() {
    let json = ("Content-Type", "application/json");
    for trusted in [true, false] {
        let downstream = if trusted {
            "max_sessions_per_client = 2\ntrusted_proxies = [\"127.0.0.1/32\", \"10.0.0.0/8\"]"
        } else {
            "max_sessions_per_client = 2"
        };
        let gw = Gateway::builder("caps-proxy", Mode::Http)
            .policy(downstream)
            .start(&[])
            .await;
        let to = addr_of(&gw);
        let mut tcp = connect_from("127.0.0.1", to).await;
        // What a chain of proxies writes: the client, then an inner trusted proxy.
        let from = |client: &str, id: u64| {
            let chain = format!("{client}, 10.1.2.3");
            let headers = [json, ("X-Forwarded-For", chain.as_str())];
            request(to, "/mcp", &headers, &initialize(id))
        };
        for id in 0..2 {
            let answer = exchange(&mut tcp, &from("203.0.113.1", id)).await.unwrap();
            assert_eq!(answer.status, 200, "{answer:?}");
        }
        let refused = exchange(&mut tcp, &from("203.0.113.1", 5)).await.unwrap();
        assert_eq!(refused.status, 503, "{refused:?}");
        let message = refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        let other = exchange(&mut tcp, &from("203.0.113.2", 6)).await.unwrap();
        if trusted {
            assert!(message.contains("from 203.0.113.1"), "{message}");
            assert_eq!(other.status, 200, "{other:?}");
        } else {
            // Without trusted proxies the header names nobody: the connection's address.
            assert!(message.contains("from 127.0.0.1"), "{message}");
            assert_eq!(other.status, 503, "{other:?}");
        }
        gw.stop_and_check().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_haproxy_each_forwarded_client_has_its_own_session_cap() {
    let downstream = "max_sessions_per_client = 2\ntrusted_proxies = [\"127.0.0.1\"]";
    let gw = Gateway::builder("caps-haproxy", Mode::Http)
        .policy(downstream)
        .start(&[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let (mut proxy, port) = haproxy(&addr_of(&gw).to_string(), dir.path(), "").await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let init = |client: &reqwest::Client, id: u64| {
        client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(initialize(id))
            .send()
    };
    // Two clients on addresses of their own; HAProxy connects to the gateway from 127.0.0.1.
    let (a, b) = (
        crate::limits::client_from("127.0.0.2"),
        crate::limits::client_from("127.0.0.3"),
    );
    for id in 0..2 {
        assert_eq!(init(&a, id).await.unwrap().status().as_u16(), 200);
    }
    let refused = init(&a, 2).await.unwrap();
    assert_eq!(refused.status().as_u16(), 503);
    let refused: Value = refused.json().await.unwrap();
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("from 127.0.0.2"), "{message}");
    for id in 3..5 {
        let answer = init(&b, id).await.unwrap();
        assert_eq!(
            answer.status().as_u16(),
            200,
            "the other client is locked out"
        );
    }
    proxy.kill().await.unwrap();
    gw.stop_and_check().await;
}
