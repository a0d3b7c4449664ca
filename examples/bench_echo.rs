//! A minimal, fast MCP server for the loopback benchmarks (`scripts/bench-gateway.sh`): one tool,
//! `echo`, answered in microseconds, so what a benchmark measures through the gateway is the
//! gateway's own cost.
//!
//! ```text
//! bench_echo --stdio [--delay-ms N]              newline-delimited JSON-RPC on stdin/stdout
//! bench_echo --http 127.0.0.1:0 [--delay-ms N]   streamable HTTP (JSON answers, one session id)
//! ```
//!
//! `--delay-ms N` waits N ms before serving (a slow-starting server, for the startup benchmark).
//! The HTTP variant prints `listening on http://ADDR/mcp` on stderr.
#![allow(clippy::print_stderr)]

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

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
        "tools/list" => json!({"tools": [{
            "name": "echo",
            "description": "Echoes the message back.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        }]}),
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
