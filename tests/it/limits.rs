//! The HTTP downstream's limits, against the real binary with small policy values: the time a
//! request body may take, open connections (in all and per client address), sessions (in all
//! and per client, idle expiry) and the messages queued for a client that does not read its
//! stream. Clients are raw sockets and reqwest; "other client addresses" are other loopback
//! addresses (127.0.0.2, …), which reach the gateway's 127.0.0.1 listener as distinct clients.
//! Every test checks that well-behaved clients are served meanwhile.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::harness::{Gateway, Mode, Up, WAIT, http_client_builder, log_shows};

const ACCEPT: &str = "application/json, text/event-stream";

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// A reqwest client whose connections come from `local`.
pub fn client_from(local: &str) -> reqwest::Client {
    http_client_builder()
        .local_address(ip(local))
        .build()
        .unwrap()
}

pub fn addr_of(gw: &Gateway) -> SocketAddr {
    let url = gw.url();
    let hostport = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    hostport.parse().unwrap()
}

/// A TCP connection to the gateway from `local`.
pub async fn connect_from(local: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(ip(local), 0)).unwrap();
    socket.connect(to).await.unwrap()
}

/// Everything the gateway sends on `tcp` until it closes it (or `limit` passes: `None`).
async fn read_all(tcp: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut out = Vec::new();
    let read = tokio::time::timeout(limit, tcp.read_to_end(&mut out)).await;
    match read {
        Ok(_) => Some(String::from_utf8_lossy(&out).into_owned()),
        Err(_) => None,
    }
}

/// The JSON body of a raw HTTP answer.
fn body_of(answer: &str) -> Value {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or(Value::Null)
}

fn init_body(id: u64, version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "it-limits", "version": "0"}}})
    .to_string()
}

/// POSTs `body` (with `session`); status and JSON body (the last SSE event's data if streamed).
async fn post(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: String,
) -> (u16, Option<String>, Value) {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .body(body);
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let resp = req.send().await.expect("the gateway answers");
    let status = resp.status().as_u16();
    let session = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = resp.text().await.unwrap_or_default();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .next_back()
        .unwrap_or(&text)
        .to_owned();
    (
        status,
        session,
        serde_json::from_str(&data).unwrap_or(Value::Null),
    )
}

/// `initialize` + `notifications/initialized`: the session id.
async fn open_session(client: &reqwest::Client, url: &str) -> String {
    let (status, session, body) = post(client, url, None, init_body(0, "2025-06-18")).await;
    assert_eq!(status, 200, "{body}");
    let session = session.expect("a session id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let (status, _, _) = post(client, url, Some(&session), note).await;
    assert_eq!(status, 202);
    session
}

async fn ping(client: &reqwest::Client, url: &str, session: &str) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}).to_string();
    let (status, _, body) = post(client, url, Some(session), body).await;
    (status, body)
}

/// Resident memory of `pid` in MiB.
fn rss_mib(pid: i32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_slower_than_body_timeout_secs_gets_408_and_others_are_served() {
    let gw = Gateway::builder("limits-body", Mode::Http)
        .policy("body_timeout_secs = 1")
        .start(&[])
        .await;
    let addr = addr_of(&gw);
    let client = client_from("127.0.0.1");
    let mut slow = connect_from("127.0.0.1", addr).await;
    slow.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: {ACCEPT}\r\nContent-Length: 400\r\n\r\n{{"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let started = Instant::now();
    // One byte every 200 ms: the whole body would take 80 s.
    let (mut reader, mut writer) = slow.into_split();
    let dribble = tokio::spawn(async move {
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if writer.write_all(b" ").await.is_err() {
                return;
            }
        }
    });

    // Meanwhile a normal client is served at once.
    let session = open_session(&client, gw.url()).await;
    assert_eq!(ping(&client, gw.url(), &session).await.0, 200);
    assert!(started.elapsed() < Duration::from_millis(900));

    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(8), reader.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the slow connection was left open");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let waited = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body = body_of(&answer);
    assert_eq!(
        body["error"]["data"]["type"], "mcp_budget.http.body_timeout",
        "{answer}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("downstream.body_timeout_secs"),
        "{answer}"
    );
    // Well before the dribble ends (10 s): a timer that each byte restarted would fire only
    // after that.
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    dribble.abort();
    assert_eq!(ping(&client, gw.url(), &session).await.0, 200);
    gw.stop_and_check().await;
}

/// Opens `n` connections from `local` that send half a request and wait.
async fn slow_connections(local: &str, to: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::new();
    for _ in 0..n {
        let mut tcp = connect_from(local, to).await;
        tcp.write_all(b"POST /mcp HTTP/1.1\r\n").await.unwrap();
        out.push(tcp);
    }
    out
}

/// A whole ping request (without a session), `Connection: close` or keep-alive.
fn ping_request(to: SocketAddr, close: bool) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let connection = if close { "Connection: close\r\n" } else { "" };
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {to}\r\nContent-Type: application/json\r\nAccept: {ACCEPT}\r\n\
         Content-Length: {}\r\n{connection}\r\n{body}",
        body.len()
    )
}

/// A whole request from `local` on a new connection: the raw answer.
async fn raw_ping(local: &str, to: SocketAddr) -> String {
    let mut tcp = connect_from(local, to).await;
    tcp.write_all(ping_request(to, true).as_bytes())
        .await
        .unwrap();
    read_all(&mut tcp, Duration::from_secs(10))
        .await
        .expect("answered and closed")
}

/// A whole request from `local` on a new keep-alive connection: the raw answer (its head and
/// `Content-Length` body), and the connection, still open and counted by the gateway.
async fn raw_ping_kept(local: &str, to: SocketAddr) -> (String, TcpStream) {
    let mut tcp = connect_from(local, to).await;
    tcp.write_all(ping_request(to, false).as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    let whole = |answer: &[u8]| {
        let text = String::from_utf8_lossy(answer);
        let (head, body) = text.split_once("\r\n\r\n")?;
        let length: usize = head.lines().find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })?;
        (body.len() >= length).then(|| text.clone().into_owned())
    };
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(text) = whole(&answer) {
                return text;
            }
            let n = tcp.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "closed mid-answer: {}",
                String::from_utf8_lossy(&answer)
            );
            answer.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    (read.expect("answered"), tcp)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_caps_get_503_and_freed_places_are_used_again() {
    let gw = Gateway::builder("limits-conn", Mode::Http)
        .policy("max_connections = 8\nmax_connections_per_client = 4")
        .start(&[])
        .await;
    let addr = addr_of(&gw);
    // The gateway admits connections one by one in the order they were accepted, so a
    // connection opened after these is counted after them: no need to wait.
    let mut idle = slow_connections("127.0.0.2", addr, 4).await;
    // A fifth from the same address is served: the oldest idle one (nothing sent on it has
    // been served) makes room, closed without an answer.
    let (served, _a5) = raw_ping_kept("127.0.0.2", addr).await;
    assert!(served.starts_with("HTTP/1.1 400"), "{served}");
    let closed = read_all(&mut idle[0], Duration::from_secs(5)).await;
    assert_eq!(
        closed.as_deref(),
        Some(""),
        "the oldest idle connection stays open"
    );
    // Connections that were served are never closed for a newcomer: over the cap, the
    // newcomer is refused, with the key to raise.
    let mut kept = Vec::new();
    for _ in 0..4 {
        kept.push(raw_ping_kept("127.0.0.3", addr).await.1);
    }
    let refused = raw_ping("127.0.0.3", addr).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    let body = body_of(&refused);
    assert_eq!(
        body["error"]["data"]["type"], "mcp_budget.http.too_many_connections",
        "{refused}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("downstream.max_connections_per_client = 4"),
        "{refused}"
    );
    // The total: the three idle ones left make room for three served ones, then it is full.
    for _ in 0..3 {
        kept.push(raw_ping_kept("127.0.0.4", addr).await.1);
    }
    let full = raw_ping("127.0.0.1", addr).await;
    assert!(full.starts_with("HTTP/1.1 503"), "{full}");
    assert!(
        body_of(&full)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("downstream.max_connections = 8"),
        "{full}"
    );
    // Once connections close, a normal client is served. Their places are freed as the
    // gateway sees each one close: the client retries while it gets 503, and then keeps its
    // one (pooled) connection, which needs no place again.
    drop((idle, kept));
    let client = client_from("127.0.0.1");
    let deadline = Instant::now() + WAIT;
    let session = loop {
        let (status, session, body) =
            post(&client, gw.url(), None, init_body(0, "2025-06-18")).await;
        if status != 503 {
            assert_eq!(status, 200, "{body}");
            break session.expect("a session id");
        }
        assert!(Instant::now() < deadline, "places never freed: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    assert_eq!(post(&client, gw.url(), Some(&session), note).await.0, 202);
    assert_eq!(ping(&client, gw.url(), &session).await.0, 200);
    gw.stop_and_check().await;
}

/// With the default caps, 600 slow connections from one address: only the newest 128 are
/// kept (each newcomer over the cap closes the oldest idle one), and a client from the same
/// address is served meanwhile (its latency is printed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_from_one_address_does_not_shut_out_others() {
    let gw = Gateway::start("limits-flood", Mode::Http, &[]).await;
    let addr = addr_of(&gw);
    let mut flood = slow_connections("127.0.0.2", addr, 600).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The oldest 472 were closed to make room, without an answer.
    for tcp in &mut flood[..472] {
        let answer = read_all(tcp, Duration::from_secs(5)).await;
        let answer = answer.expect("an idle connection over the cap is closed");
        assert!(answer.is_empty(), "{answer}");
    }
    let mut probe = [0u8; 1];
    let last = flood.last_mut().unwrap();
    let open = tokio::time::timeout(Duration::from_millis(200), last.read(&mut probe)).await;
    assert!(open.is_err(), "the newest connection was closed");
    // The flood's own address: a client that is served is not shut out either.
    let client = client_from("127.0.0.2");
    let started = Instant::now();
    let session = open_session(&client, gw.url()).await;
    let (status, _) = ping(&client, gw.url(), &session).await;
    let took = started.elapsed();
    assert_eq!(status, 200);
    eprintln!(
        "connection flood: 600 slow connections from 127.0.0.2, the oldest 472 closed for \
         newcomers; a client from the same address: initialize + initialized + ping took \
         {took:?}"
    );
    drop(flood);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_capped_in_all_and_per_client_address() {
    let gw = Gateway::builder("limits-sessions", Mode::Http)
        .policy("max_sessions = 3\nmax_sessions_per_client = 2")
        .start(&[])
        .await;
    let url = gw.url();
    let (a, b, c) = (
        client_from("127.0.0.2"),
        client_from("127.0.0.3"),
        client_from("127.0.0.4"),
    );
    let a1 = open_session(&a, url).await;
    let _a2 = open_session(&a, url).await;
    let (status, session, refused) = post(&a, url, None, init_body(41, "2025-06-18")).await;
    assert_eq!((status, session), (503, None), "{refused}");
    assert_eq!(refused["id"], 41);
    assert_eq!(refused["error"]["data"]["type"], "mcp_budget.session.limit");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("downstream.max_sessions_per_client = 2"),
        "{refused}"
    );
    let _b1 = open_session(&b, url).await;
    let (status, _, full) = post(&c, url, None, init_body(42, "2025-06-18")).await;
    assert_eq!(status, 503, "{full}");
    assert!(
        full["error"]["message"]
            .as_str()
            .unwrap()
            .contains("downstream.max_sessions = 3"),
        "{full}"
    );
    // The sessions that exist are served; ending one makes room.
    assert_eq!(ping(&a, url, &a1).await.0, 200);
    let del = a
        .delete(url)
        .header("mcp-session-id", &a1)
        .send()
        .await
        .unwrap();
    assert_eq!(del.status().as_u16(), 200);
    let c1 = open_session(&c, url).await;
    assert_eq!(ping(&c, url, &c1).await.0, 200);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_expire_and_busy_ones_do_not() {
    let gw = Gateway::builder("limits-idle", Mode::Http)
        .policy("session_idle_secs = 1")
        .start(&[Up::fake("fake", "hang").timeout(3)])
        .await;
    let url = gw.url().to_owned();
    let client = client_from("127.0.0.1");
    let idle = open_session(&client, &url).await;
    let streaming = open_session(&client, &url).await;
    let calling = open_session(&client, &url).await;
    // An open GET stream keeps its session.
    let get = client
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &streaming)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 200);
    // So does a request in flight for longer than the idle time (`hang`, cut at 3 s).
    let call = {
        let (client, url, session) = (client.clone(), url.clone(), calling.clone());
        tokio::spawn(async move {
            let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                              "params": {"name": "fake__hang", "arguments": {}}});
            post(&client, &url, Some(&session), body.to_string()).await
        })
    };
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (status, gone) = ping(&client, &url, &idle).await;
    assert_eq!(status, 404, "{gone}");
    assert_eq!(gone["error"]["data"]["type"], "mcp_budget.session.unknown");
    assert_eq!(ping(&client, &url, &streaming).await.0, 200);
    let (status, _, answer) = call.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer["id"], 9, "{answer}");
    assert_eq!(ping(&client, &url, &calling).await.0, 200);
    // Once its stream is closed, that session is idle too.
    drop(get);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(ping(&client, &url, &streaming).await.0, 404);
    gw.stop_and_check().await;
}

/// A client that asks for a flood of progress on a POST's SSE stream and never reads it: the
/// gateway closes that stream once `max_outbound_messages` wait, its memory stays bounded, and
/// the session and other clients are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_stream_the_client_does_not_read_is_closed_and_memory_stays_bounded() {
    let gw = Gateway::builder("limits-outbound", Mode::Http)
        .policy("max_outbound_messages = 64")
        .start(&[Up::fake("fake", "flood")])
        .await;
    let addr = addr_of(&gw);
    let client = client_from("127.0.0.1");
    let session = open_session(&client, gw.url()).await;
    let before = rss_mib(gw.pid());

    let mut stuck = connect_from("127.0.0.1", addr).await;
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "fake__flood", "arguments": {"count": 20000, "size": 4000},
        "_meta": {"progressToken": "p"}}})
    .to_string();
    stuck
        .write_all(
            format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                 Accept: {ACCEPT}\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // Never read: the kernel buffers fill, then the gateway's queue.
    assert!(
        log_shows(
            || gw.log(),
            "The client is not reading its stream",
            Duration::from_secs(15)
        )
        .await,
        "{}",
        gw.log()
    );
    assert!(gw.log().contains(&session), "{}", gw.log());
    // Let the rest of the flood arrive (it goes nowhere now).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_mib(gw.pid());
    eprintln!(
        "unread POST stream, 20000 progress notifications of 4 kB: gateway RSS {before:.1} -> \
         {after:.1} MiB"
    );
    assert!(after - before < 40.0, "RSS {before:.1} -> {after:.1} MiB");
    // The stream was closed: what the client reads now ends without the answer.
    let rest = read_all(&mut stuck, Duration::from_secs(10))
        .await
        .unwrap_or_default();
    assert!(!rest.contains("\"flooded\""), "the answer came after all");
    // The session lives on, and so does everyone else.
    assert_eq!(ping(&client, gw.url(), &session).await.0, 200);
    let other = open_session(&client_from("127.0.0.2"), gw.url()).await;
    assert_eq!(ping(&client, gw.url(), &other).await.0, 200);
    gw.stop_and_check().await;
}

/// The same for a session's GET stream: a 2024-11-05 client accepts JSON only, so the
/// progress of its call goes to its GET stream, which it does not read. The stream is closed,
/// the call is answered, and the session may open a new stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_stream_the_client_does_not_read_is_closed_and_the_session_may_open_another() {
    let gw = Gateway::builder("limits-get", Mode::Http)
        .policy("max_outbound_messages = 64")
        .start(&[Up::fake("fake", "flood")])
        .await;
    let addr = addr_of(&gw);
    let client = client_from("127.0.0.1");
    let init = client
        .post(gw.url())
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(init_body(0, "2024-11-05"))
        .send()
        .await
        .unwrap();
    assert_eq!(init.status().as_u16(), 200);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let before = rss_mib(gw.pid());
    let mut stuck = connect_from("127.0.0.1", addr).await;
    stuck
        .write_all(
            format!(
                "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\
                 Mcp-Session-Id: {session}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "fake__flood", "arguments": {"count": 20000, "size": 4000},
        "_meta": {"progressToken": "p"}}});
    let answer = client
        .post(gw.url())
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-session-id", &session)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(
        answer["result"]["content"][0]["text"], "flooded",
        "{answer}"
    );
    let after = rss_mib(gw.pid());
    eprintln!(
        "unread GET stream, 20000 progress notifications of 4 kB: gateway RSS {before:.1} -> \
         {after:.1} MiB"
    );
    assert!(after - before < 40.0, "RSS {before:.1} -> {after:.1} MiB");
    assert!(
        gw.log().contains("The client is not reading its stream"),
        "{}",
        gw.log()
    );
    // Closed by the gateway: reading ends.
    assert!(
        read_all(&mut stuck, Duration::from_secs(10))
            .await
            .is_some(),
        "the unread GET stream was left open"
    );
    let again = client
        .get(gw.url())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 200);
    gw.stop_and_check().await;
}
