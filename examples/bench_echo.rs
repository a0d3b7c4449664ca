//! A minimal, fast MCP server for the loopback benchmarks (`scripts/bench-gateway.sh`): one tool,
//! `echo`, answered in microseconds, so what a benchmark measures through the gateway is the
//! gateway's own cost.
//!
//! ```text
//! bench_echo --stdio [--delay-ms N]              newline-delimited JSON-RPC on stdin/stdout
//! bench_echo --http 127.0.0.1:0 [--delay-ms N]   streamable HTTP (JSON answers, one session id)
//! bench_echo --stdio --tools-from FILE [--tools N]
//! ```
//!
//! `--delay-ms N` waits N ms before serving (a slow-starting server, for the startup benchmark).
//! `--tools-from FILE [--tools N]` serves the tools of a saved toolset (`{"tools": [...]}`, say
//! `tests/fixtures/toolsets/github.json`) instead of `echo`: its first N (default all), cycled
//! with a `_2`, `_3`… suffix when the file has fewer (for the memory benchmark); every tool
//! answers like `echo`.
//! The HTTP variant prints `listening on http://ADDR/mcp` on stderr.
#![allow(clippy::print_stderr)]

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The `tools/list` answer's tools: `echo`, or those of `--tools-from`.
static TOOLS: OnceLock<Value> = OnceLock::new();

fn echo_tools() -> Value {
    json!([{
        "name": "echo",
        "description": "Echoes the message back.",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    }])
}

/// The first `n` tools of the toolset in `path` (all when `None`), cycled with a numbered suffix
/// when it has fewer; names are made unique.
fn tools_from(path: &str, n: Option<usize>) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let set: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let tools = set["tools"].as_array().cloned().unwrap_or_default();
    assert!(!tools.is_empty(), "{path}: no tools");
    let n = n.unwrap_or(tools.len());
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    for (i, tool) in tools.iter().cycle().take(n).enumerate() {
        let mut tool = tool.clone();
        let base = tool["name"].as_str().unwrap_or("tool").to_owned();
        let mut name = if i < tools.len() {
            base.clone()
        } else {
            format!("{base}_{}", i / tools.len() + 1)
        };
        while !seen.insert(name.clone()) {
            name.push('_');
        }
        tool["name"] = Value::String(name);
        out.push(tool);
    }
    Value::Array(out)
}

fn answer(msg: &Value) -> Option<Value> {
    let id = msg.get("id")?.clone();
    let method = msg
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let result = match method {
        "initialize" => json!({
            "protocolVersion": msg["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench-echo", "version": "0"},
        }),
        "tools/list" => json!({"tools": TOOLS.get_or_init(echo_tools)}),
        "tools/call" => {
            let text = msg["params"]["arguments"]["message"]
                .as_str()
                .unwrap_or_default();
            json!({"content": [{"type": "text", "text": text}]})
        }
        "ping" => json!({}),
        other => {
            return Some(json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601, "message": format!("method not found: {other}")}}));
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// stdin/stdout through the event loop when they are pipes (tokio's own stdin/stdout hand every
/// read and write to a blocking thread, which would dominate what the benchmark measures).
fn stdio_streams() -> (
    Box<dyn tokio::io::AsyncRead + Unpin + Send>,
    Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let input = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok());
    let output = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| pipe::Sender::from_owned_fd(fd).ok());
    (
        match input {
            Some(p) => Box::new(p),
            None => Box::new(tokio::io::stdin()),
        },
        match output {
            Some(p) => Box::new(p),
            None => Box::new(tokio::io::stdout()),
        },
    )
}

async fn stdio() {
    let (input, mut out) = stdio_streams();
    let mut lines = BufReader::new(input).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(reply) = answer(&msg) {
            let mut bytes = serde_json::to_vec(&reply).expect("a Value serializes");
            bytes.push(b'\n');
            if out.write_all(&bytes).await.is_err() || out.flush().await.is_err() {
                return;
            }
        }
    }
}

async fn post(body: Bytes) -> Response {
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    match answer(&msg) {
        None => StatusCode::ACCEPTED.into_response(),
        Some(reply) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::HeaderName::from_static("mcp-session-id"), "bench"),
            ],
            serde_json::to_vec(&reply).expect("a Value serializes"),
        )
            .into_response(),
    }
}

async fn http(addr: &str) {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the address binds");
    let local = listener
        .local_addr()
        .expect("a bound socket has an address");
    eprintln!("listening on http://{local}/mcp");
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(post).delete(|| async { StatusCode::OK }),
    );
    axum::serve(listener, app).await.expect("serving works");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let delay = value("--delay-ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let http_addr = value("--http");
    if let Some(path) = value("--tools-from") {
        let n = value("--tools").and_then(|v| v.parse().ok());
        TOOLS.set(tools_from(&path, n)).expect("set once");
    }
    // One worker thread: the server must stay cheap next to the gateway on 2 shared cores.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime starts");
    runtime.block_on(async move {
        tokio::time::sleep(Duration::from_millis(delay)).await;
        match http_addr {
            Some(addr) => http(&addr).await,
            None => stdio().await,
        }
    });
}
