//! The wire format at the doors: every id JSON-RPC allows comes back byte for byte (stdio and
//! HTTP; a cancel naming it cancels it), and messages nested deeper than
//! `[downstream] max_json_depth` are refused with their id and never reach the upstream, a
//! Python server that would die parsing them (`tests/peers/fake_server.py`).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use crate::harness::{
    Gateway, Mode, TagGuard, Up, WAIT, child_matching, error_type, first_text, http_client,
    new_tag, policy,
};

/// Id texts that are valid JSON-RPC; none of the numbers but the first and last is an `i64`.
const IDS: &[&str] = &[
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "-18446744073709551617",
    "123456789012345678901234567890",
    "1.0",
    "1e3",
    "-0",
    "1E400",
    "-2.5E-3",
    r#""s-1""#,
    "-1",
];

/// The start of the answer line to the request with id `text`, as the gateway writes it.
fn answer_prefix(text: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{text},"#)
}

/// The answer to id `text` as a JSON value, its id replaced by 0 (`Value` cannot hold every
/// number: `1E400` is out of an f64's range).
fn without_id(line: &str, text: &str) -> Value {
    let rest = line
        .strip_prefix(&answer_prefix(text))
        .unwrap_or_else(|| panic!("not the answer to {text}: {line}"));
    serde_json::from_str(&format!("{}{rest}", answer_prefix("0"))).unwrap()
}

fn request(id: &str, method: &str, params: &Value) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
}

/// The gateway over stdio, its output kept as raw lines (`serde_json::Value` would turn `1e3`
/// into `1000.0`, hiding what this file tests).
struct RawStdio {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
    tag: String,
    _guard: TagGuard,
    _dir: tempfile::TempDir,
}

impl RawStdio {
    async fn start(test: &str, ups: &[Up]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tag = new_tag(test);
        let policy = policy(dir.path(), &tag, "", ups);
        let mut child = crate::harness::cli(["serve", "--stdio", "--policy"])
            .arg(&policy)
            .env("MCPB_IT_TAG", &tag)
            .tokio()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("IT_LOG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut gw = Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            _guard: TagGuard(tag.clone()),
            tag,
            _dir: dir,
        };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "it-wire", "version": "0"}});
        gw.send(&request("0", "initialize", &init)).await;
        gw.answer("0").await;
        gw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        gw
    }

    async fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The line answering id `text` (exactly that text).
    async fn answer(&mut self, text: &str) -> String {
        let prefix = answer_prefix(text);
        if let Some(line) = self.seen.iter().find(|l| l.starts_with(&prefix)) {
            return line.clone();
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .ok()
                .flatten()
                .unwrap_or_else(|| panic!("no answer to {text}; seen: {:#?}", self.seen));
            self.seen.push(line.clone());
            if line.starts_with(&prefix) {
                return line;
            }
        }
    }

    /// Collects what arrives until `quiet` passes without a line.
    async fn drain(&mut self, quiet: Duration) {
        while let Ok(Some(line)) = tokio::time::timeout(quiet, self.lines.recv()).await {
            self.seen.push(line);
        }
    }

    async fn stop_and_check(mut self) {
        drop(self.stdin);
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the gateway exits when its input closes")
            .unwrap();
        crate::harness::assert_no_leftovers(&self.tag).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_answers_every_id_with_its_own_text_and_cancels_by_it() {
    let mut gw = RawStdio::start("wire-ids-stdio", &[Up::fake("fake", "hang")]).await;
    for &id in IDS {
        // Answered by the gateway itself, then by the upstream through the gateway.
        let pong = gw.answer_after(id, "ping", &json!({})).await;
        assert!(pong.ends_with(r#""result":{}}"#), "{pong}");
        let echo = json!({"name": "fake__echo", "arguments": {"message": format!("echo {id}")}});
        let echoed = gw.answer_after(id, "tools/call", &echo).await;
        let v = without_id(&echoed, id);
        assert_eq!(first_text(&v), format!("echo {id}"), "{echoed}");
    }
    // Not ids: refused, answered with null.
    for bad in ["true", "{}", "[1]"] {
        gw.send(&request(bad, "ping", &json!({}))).await;
        let line = gw.answer("null").await;
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["error"]["code"], -32600, "{line}");
        gw.seen.retain(|l| l != &line);
    }

    // A cancel naming `1e3` (or u64::MAX) cancels that request: it reaches the upstream, and the
    // request is not answered.
    let hang = json!({"name": "fake__hang", "arguments": {}});
    for id in ["1e3", "18446744073709551615"] {
        gw.send(&request(id, "tools/call", &hang)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for id in ["1e3", "18446744073709551615"] {
        gw.send(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"test"}}}}"#
        ))
        .await;
    }
    let mut cancelled = Vec::new();
    for _ in 0..50 {
        let list = gw
            .answer_after("77", "tools/call", &json!({"name": "fake__cancelled"}))
            .await;
        let v: Value = serde_json::from_str(&list).unwrap();
        cancelled = serde_json::from_str::<Vec<Value>>(first_text(&v)).unwrap();
        gw.seen.retain(|l| l != &list);
        if cancelled.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cancelled.len(), 2, "cancels that reached the upstream");
    gw.drain(Duration::from_millis(500)).await;
    for id in ["1e3", "18446744073709551615"] {
        let prefix = answer_prefix(id);
        assert!(
            !gw.seen.iter().any(|l| l.starts_with(&prefix)),
            "a cancelled request was answered: {:#?}",
            gw.seen
        );
    }
    gw.stop_and_check().await;
}

impl RawStdio {
    /// Sends a request with id `text` and waits for its answer, which it removes from what was
    /// seen (so the id can be used again).
    async fn answer_after(&mut self, text: &str, method: &str, params: &Value) -> String {
        self.send(&request(text, method, params)).await;
        let line = self.answer(text).await;
        self.seen.retain(|l| l != &line);
        line
    }
}

/// A 2025-era HTTP session, bodies and answers as raw text.
struct Http {
    client: reqwest::Client,
    url: String,
    session: String,
}

impl Http {
    async fn open(url: &str) -> Self {
        let mut http = Self {
            client: http_client(),
            url: url.to_owned(),
            session: String::new(),
        };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "it-wire", "version": "0"}});
        let resp = http
            .client
            .post(&http.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(request("0", "initialize", &init))
            .send()
            .await
            .unwrap();
        http.session = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let (status, _) = http
            .post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into())
            .await;
        assert_eq!(status, 202);
        http
    }

    /// Status and body; for an SSE answer, the data of its last event.
    async fn post(&self, body: String) -> (u16, String) {
        let resp = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("mcp-session-id", &self.session)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let sse = resp.headers().get("content-type").is_some_and(|v| {
            v.to_str()
                .unwrap_or_default()
                .starts_with("text/event-stream")
        });
        let text = resp.text().await.unwrap();
        if sse {
            let last = text
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .next_back();
            (status, last.unwrap_or_default().to_owned())
        } else {
            (status, text)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_answers_every_id_with_its_own_text() {
    let gw = Gateway::start("wire-ids-http", Mode::Http, &[Up::fake("fake", "hang")]).await;
    let http = Http::open(gw.url()).await;
    for &id in IDS {
        let (status, pong) = http.post(request(id, "ping", &json!({}))).await;
        assert_eq!(status, 200, "{pong}");
        assert_eq!(pong, format!(r#"{}"result":{{}}}}"#, answer_prefix(id)));
        let echo = json!({"name": "fake__echo", "arguments": {"message": format!("echo {id}")}});
        let (status, echoed) = http.post(request(id, "tools/call", &echo)).await;
        assert_eq!(status, 200, "{echoed}");
        assert!(echoed.starts_with(&answer_prefix(id)), "{id}: {echoed}");
        let v = without_id(&echoed, id);
        assert_eq!(first_text(&v), format!("echo {id}"), "{echoed}");
    }
    for bad in ["true", "{}"] {
        let (status, body) = http.post(request(bad, "ping", &json!({}))).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.starts_with(&answer_prefix("null")), "{body}");
    }
    gw.stop_and_check().await;
}

/// A `tools/call` of `fake__echo` whose message nests `levels` deep in all: the message object
/// is level 1, `params` 2, `arguments` 3, then `levels - 3` arrays.
fn deep_call(id: &str, levels: usize) -> String {
    let inner = levels - 3;
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"fake__echo","arguments":{{"message":"deep","x":{}0{}}}}}}}"#,
        "[".repeat(inner),
        "]".repeat(inner)
    )
}

fn assert_too_deep(answer: &Value, id: &Value) {
    assert_eq!(&answer["id"], id, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(
        error_type(answer),
        "mcp_budget.request.too_deep",
        "{answer}"
    );
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("128") && message.contains("downstream.max_json_depth"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_refuses_too_deep_messages_and_the_upstream_lives() {
    let mut gw = Gateway::start("wire-deep-stdio", Mode::Stdio, &[Up::fake("fake", "hang")]).await;
    gw.client().initialize().await;
    let upstream = child_matching(&gw, "fake_server.py").expect("the fake server runs");
    // At the limit: served.
    gw.client().send_raw(deep_call("1", 128).as_bytes()).await;
    gw.client().send_raw(b"\n").await;
    let ok = gw.client().response(&json!(1), WAIT).await;
    assert_eq!(first_text(&ok), "deep", "{ok}");
    for (id, levels) in [(json!(2), 129), (json!(3), 10_000), (json!("m"), 1_000_000)] {
        let line = deep_call(&id.to_string(), levels);
        gw.client().send_raw(line.as_bytes()).await;
        gw.client().send_raw(b"\n").await;
        let answer = gw.client().response(&id, WAIT).await;
        assert_too_deep(&answer, &id);
    }
    let echo = gw
        .client()
        .call_tool("fake__echo", json!({"message": "still here"}))
        .await;
    assert_eq!(first_text(&echo), "still here", "{echo}");
    assert_eq!(
        child_matching(&gw, "fake_server.py"),
        Some(upstream),
        "the upstream was not restarted (it never saw the deep messages)"
    );
    let ids: Vec<Value> = gw
        .client()
        .seen
        .iter()
        .filter_map(|m| m.get("id").cloned())
        .collect();
    gw.client().assert_answered_once(&ids);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refuses_too_deep_messages_and_the_upstream_lives() {
    let gw = Gateway::start("wire-deep-http", Mode::Http, &[Up::fake("fake", "hang")]).await;
    let http = Http::open(gw.url()).await;
    let upstream = child_matching(&gw, "fake_server.py").expect("the fake server runs");
    let (status, ok) = http.post(deep_call("1", 128)).await;
    assert_eq!(status, 200, "{ok}");
    let ok: Value = serde_json::from_str(&ok).unwrap();
    assert_eq!(first_text(&ok), "deep", "{ok}");
    for (id, levels) in [(json!(2), 129), (json!(3), 10_000), (json!("m"), 1_000_000)] {
        let (status, body) = http.post(deep_call(&id.to_string(), levels)).await;
        assert_eq!(status, 400, "{body}");
        assert_too_deep(&serde_json::from_str(&body).unwrap(), &id);
    }
    let echo = json!({"name": "fake__echo", "arguments": {"message": "still here"}});
    let (status, body) = http.post(request("4", "tools/call", &echo)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        first_text(&serde_json::from_str(&body).unwrap()),
        "still here"
    );
    assert_eq!(
        child_matching(&gw, "fake_server.py"),
        Some(upstream),
        "the upstream was not restarted (it never saw the deep messages)"
    );
    gw.stop_and_check().await;
}

/// A 2026-07-28 client cancels by closing its response stream: the cancellation the gateway
/// makes of it names the request by the id's exact text (`1e3`, not `1000.0`), so it finds
/// the request and reaches the upstream. Raw sockets: the client's bytes are exactly these.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_modern_stream_close_cancels_by_the_exact_id() {
    use tokio::io::AsyncReadExt;
    let gw = Gateway::start("wire-ids-close", Mode::Http, &[Up::fake("fake", "hang")]).await;
    let addr = gw
        .url()
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let modern_call = |id: &str, tool: &str| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        );
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    for id in ["1e3", "18446744073709551615"] {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(modern_call(id, "fake__hang").as_bytes())
            .await
            .unwrap();
        // In flight upstream, then the client goes away.
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(tcp);
    }
    let mut cancelled = Vec::new();
    for _ in 0..50 {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let request = modern_call("77", "fake__cancelled")
            .replace("Content-Length", "Connection: close\r\nContent-Length");
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.unwrap();
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        let json = body
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or(body);
        let v: Value = serde_json::from_str(json).unwrap_or_else(|_| panic!("{answer}"));
        cancelled = serde_json::from_str::<Vec<Value>>(first_text(&v)).unwrap();
        if cancelled.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cancelled.len(), 2, "cancels that reached the upstream");
    gw.stop_and_check().await;
}
