//! Loopback benchmarks of the gateway binary against the `bench_echo` upstream (run by
//! `scripts/bench-gateway.sh`, release build). Everything binds 127.0.0.1 and is stopped at the
//! end.
//!
//! ```text
//! bench_loopback latency    [--calls 2000] [--rounds 5]   tools/call p50/p99: direct vs through,
//!                                                         stdio and HTTP, interleaved rounds
//! bench_loopback throughput [--clients 32] [--secs 5]     tools/call/s over the HTTP downstream
//!                           [--peer python|node]          (to a Python / Node stdio server)
//! bench_loopback startup    [--runs 3]                    time to ready with 4 upstreams that
//!                                                         start in 100/200/300/400 ms
//! bench_loopback startup    --upstreams 10 [--tools 100] [--gateways A,B]
//!                                                         10 x 100 tools: wall clock and gateway
//!                                                         CPU to ready (binaries alternating)
//! bench_loopback profile    [--calls 1000] [--stdio]      N sequential calls through one gateway
//!                                                         (HTTP, or stdio), for a profiler
//! bench_loopback memory     [--upstreams 10] [--tools 100] [--sessions 2000] [--idle S]
//!                           [--pageout]
//!                                                         gateway RSS with 10 x 100 tools and
//!                                                         the first tools/list's time (default
//!                                                         budget, then `mode = "full"`); bytes
//!                                                         per idle session (N, then 2N open)
//! ```
//!
//! `latency` measures, besides direct and through the gateway: the floors of a hop that does
//! nothing, `socat - EXEC:"bench_echo --stdio"` and `haproxy` in TCP mode, and the floor of a
//! hop that ends each HTTP transaction, `haproxy` in HTTP mode with keep-alive both sides (each
//! skipped with a line when not on `PATH`); a gateway pair with an API key and an audit file (`key+audit`);
//! mcp-compressor when installed (`BENCH_COMPRESSOR`, default
//! `/tmp/mcp-compressor-venv/bin/mcp-compressor`). Then per transport what each target adds
//! over direct, and `ratio mcp-budget / relay`: (gateway − direct) / (relay − direct), p50 and
//! p99.
//!
//! `profile` starts the gateway under the command in `BENCH_WRAP` (say `valgrind
//! --tool=callgrind --callgrind-out-file=F`) and stops it with SIGTERM after the calls.
//!
//! `BENCH_JSON_ONLY=1`: HTTP clients send `Accept: application/json` only. `BENCH_MIXED=1` adds
//! the mixed paths to `latency` (stdio client → HTTP upstream, HTTP client → stdio upstream).
//! `BENCH_GW_PREFIX="taskset -c 0"` runs every gateway under that command (placement
//! experiments; `taskset -c 0 scripts/bench-gateway.sh latency` pins everything instead).
//!
//! `BENCH_POLICY_EXTRA`: TOML appended to every policy the bench writes (say a `[[client]]` with
//! `api_key_env` and an `[audit]` section), and `BENCH_BEARER`: the token HTTP clients send as
//! `Authorization: Bearer …` (the key's `api_key_env` variable exported for the gateway), so
//! the per-call cost of an authenticated, audited call can be measured. (The stdio downstream
//! needs `stdio_client` in the policy for the same.)
//!
//! Binaries are found next to this one (`target/release/examples/bench_echo`,
//! `target/release/mcp-budget`); override with `BENCH_ECHO` / `BENCH_GATEWAY`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// What a client calls: a tool and its arguments (JSON).
#[derive(Clone)]
struct Call {
    tool: String,
    args: String,
}

impl Call {
    /// `tool` with `{"message":"hello"}`.
    fn echo(tool: &str) -> Self {
        Self::with(tool, r#"{"message":"hello"}"#)
    }

    fn with(tool: &str, args: &str) -> Self {
        Self {
            tool: tool.to_owned(),
            args: args.to_owned(),
        }
    }

    fn body(&self, id: u64) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{}","arguments":{}}}}}"#,
            self.tool, self.args
        )
    }
}

fn bin(env: &str, rel: &str) -> PathBuf {
    if let Ok(p) = std::env::var(env) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("own path");
    exe.parent().expect("examples dir").join(rel)
}

fn echo() -> PathBuf {
    bin("BENCH_ECHO", "bench_echo")
}

fn gateway_bin() -> PathBuf {
    bin("BENCH_GATEWAY", "../mcp-budget")
}

/// A child stopped when dropped: stdin closed and SIGTERM (the gateway then stops its own
/// children), SIGKILL after 3 s.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` with stderr piped, returns the text after `marker` on the first line holding it
/// (and the stderr lines before it); keeps draining stderr afterwards.
fn start(mut cmd: Command, marker: &'static str) -> (Proc, String, Vec<String>) {
    cmd.stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the process starts");
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut before = Vec::new();
        let mut sent = false;
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if !sent {
                if let Some(at) = line.find(marker) {
                    let _ = tx.send((line[at + marker.len()..].trim().to_owned(), before.clone()));
                    sent = true;
                } else {
                    before.push(line);
                }
            }
        }
    });
    let (rest, before) = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("no {marker:?} on stderr within 30 s"));
    (Proc(child), rest, before)
}

fn write_policy(dir: &Path, name: &str, upstreams: &str) -> PathBuf {
    let path = dir.join(name);
    let extra = std::env::var("BENCH_POLICY_EXTRA").unwrap_or_default();
    std::fs::write(&path, format!("version = 1\n{upstreams}\n{extra}\n")).expect("policy written");
    path
}

fn stdio_upstream(name: &str, delay_ms: u64) -> String {
    format!(
        "[[upstream]]\nname = \"{name}\"\ncommand = {:?}\nargs = [\"--stdio\", \"--delay-ms\", \"{delay_ms}\"]\n",
        echo().display().to_string()
    )
}

fn gateway(policy: &Path, extra: &[&str], stdio: bool) -> Command {
    gateway_at(&gateway_bin(), policy, extra, stdio)
}

fn gateway_at(bin: &Path, policy: &Path, extra: &[&str], stdio: bool) -> Command {
    // `BENCH_GW_PREFIX="taskset -c 1"`: a command the gateway runs under (placement experiments).
    let prefix = std::env::var("BENCH_GW_PREFIX").unwrap_or_default();
    let mut words = prefix.split_whitespace();
    let mut cmd = match words.next() {
        Some(first) => {
            let mut cmd = Command::new(first);
            cmd.args(words).arg(bin);
            cmd
        }
        None => Command::new(bin),
    };
    cmd.arg("serve").arg("--policy").arg(policy).args(extra);
    cmd.env(
        "MCP_BUDGET_LOG",
        std::env::var("MCP_BUDGET_LOG").unwrap_or("warn".into()),
    );
    if stdio {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    } else {
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
    }
    cmd
}

// ---------------------------------------------------------------------------------------------
// Clients

/// The HTTP `Accept` header: what the spec asks clients to send, or with `BENCH_JSON_ONLY=1`
/// only `application/json` (the gateway then never answers a request with an SSE stream).
fn accept() -> &'static str {
    if std::env::var_os("BENCH_JSON_ONLY").is_some_and(|v| v == "1") {
        "application/json"
    } else {
        "application/json, text/event-stream"
    }
}

trait Client {
    /// Sends one tools/call and waits for its answer.
    fn call(&mut self, id: u64);
    /// (answers, answers that came as SSE) — HTTP only.
    fn sse_share(&self) -> (u64, u64) {
        (0, 0)
    }
}

struct StdioClient {
    call: Call,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl StdioClient {
    fn new(proc: &mut Proc, call: Call) -> Self {
        let stdin = proc.0.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(proc.0.stdout.take().expect("piped stdout"));
        let mut c = Self {
            call,
            stdin,
            stdout,
            line: String::new(),
        };
        c.send(INIT);
        c.recv();
        c.send(INITIALIZED);
        c
    }

    fn send(&mut self, msg: &str) {
        self.stdin.write_all(msg.as_bytes()).expect("write");
        self.stdin.write_all(b"\n").expect("write");
        self.stdin.flush().expect("flush");
    }

    fn recv(&mut self) {
        // Skip notifications (e.g. list_changed) until a response.
        loop {
            self.line.clear();
            let n = self.stdout.read_line(&mut self.line).expect("read");
            assert!(n > 0, "the server closed stdout");
            if self.line.contains("\"id\"") {
                assert!(!self.line.contains("\"error\""), "{}", self.line);
                return;
            }
        }
    }
}

impl Client for StdioClient {
    fn call(&mut self, id: u64) {
        let msg = self.call.body(id);
        self.send(&msg);
        self.recv();
    }
}

/// HTTP/1.1 keep-alive client for JSON answers with Content-Length (what both servers send).
struct HttpClient {
    call: Call,
    host: String,
    /// Sent as `Authorization: Bearer …`.
    bearer: Option<String>,
    stream: BufReader<TcpStream>,
    session: Option<String>,
    buf: Vec<u8>,
    /// Answers received, and how many of them came as an SSE stream instead of JSON.
    answers: u64,
    sse_answers: u64,
}

impl HttpClient {
    /// A client sending `BENCH_BEARER` as its bearer token, if set.
    fn new(url: &str, call: Call) -> Self {
        Self::with_bearer(url, call, std::env::var("BENCH_BEARER").ok())
    }

    fn with_bearer(url: &str, call: Call, bearer: Option<String>) -> Self {
        let host = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        let stream = TcpStream::connect(&host).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let mut c = Self {
            call,
            host,
            bearer,
            stream: BufReader::new(stream),
            session: None,
            buf: Vec::new(),
            answers: 0,
            sse_answers: 0,
        };
        c.post(INIT);
        c.post(INITIALIZED);
        c
    }

    /// POSTs `body`; returns the status.
    fn post(&mut self, body: &str) -> u16 {
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: {}\r\nMCP-Protocol-Version: 2025-06-18\r\n\
             Content-Length: {}\r\n",
            self.host,
            accept(),
            body.len()
        );
        if let Some(s) = &self.session {
            req.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        if let Some(token) = &self.bearer {
            req.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.stream
            .get_mut()
            .write_all(req.as_bytes())
            .expect("write");
        let mut status = 0;
        let mut length = 0;
        let mut chunked = false;
        let mut line = String::new();
        loop {
            line.clear();
            self.stream.read_line(&mut line).expect("read");
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some(rest) = l.strip_prefix("HTTP/1.1 ") {
                status = rest[..3].parse().expect("status");
            } else if let Some((k, v)) = l.split_once(':') {
                let k = k.to_ascii_lowercase();
                if k == "content-length" {
                    length = v.trim().parse().expect("length");
                } else if k == "mcp-session-id" && self.session.is_none() {
                    self.session = Some(v.trim().to_owned());
                } else if k == "transfer-encoding" {
                    chunked = v.trim().eq_ignore_ascii_case("chunked");
                }
            }
        }
        if chunked {
            // An SSE answer (text/event-stream, chunked): read chunks up to the last one.
            self.sse_answers += 1;
            self.buf.clear();
            loop {
                line.clear();
                self.stream.read_line(&mut line).expect("chunk size");
                let size = usize::from_str_radix(line.trim(), 16).expect("chunk size");
                let start = self.buf.len();
                self.buf.resize(start + size + 2, 0);
                self.stream
                    .read_exact(&mut self.buf[start..])
                    .expect("chunk");
                self.buf.truncate(start + size);
                if size == 0 {
                    break;
                }
            }
        } else {
            self.buf.resize(length, 0);
            self.stream.read_exact(&mut self.buf).expect("body");
        }
        self.answers += 1;
        assert!(
            status < 300,
            "HTTP {status}: {}",
            String::from_utf8_lossy(&self.buf)
        );
        status
    }
}

impl Client for HttpClient {
    fn sse_share(&self) -> (u64, u64) {
        (self.answers, self.sse_answers)
    }

    fn call(&mut self, id: u64) {
        let msg = self.call.body(id);
        self.post(&msg);
        assert!(
            !self.buf.windows(8).any(|w| w == b"\"error\":"),
            "{}",
            String::from_utf8_lossy(&self.buf)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Benchmarks

fn percentile(sorted: &[f64], p: f64) -> f64 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn arg(args: &[String], flag: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The text after `flag` in `args`, if any.
fn value(args: &[String], flag: &str) -> Option<String> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).cloned()
}

/// `name` on `PATH`, if there.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A port free on 127.0.0.1 a moment ago (bound, then closed).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a loopback port binds")
        .port()
}

/// `cmd` with stdin/stdout piped (a stdio MCP peer) and stderr dropped.
fn spawn_stdio(mut cmd: Command) -> Proc {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    Proc(cmd.spawn().expect("the process starts"))
}

/// `haproxy` in TCP mode in front of `backend` (`http://HOST:PORT/mcp`): the child and its URL.
fn haproxy(dir: &Path, bin: &Path, backend: &str) -> (Proc, String) {
    haproxy_in(dir, bin, backend, "tcp")
}

/// `haproxy` in `mode` (`tcp`: copies bytes; `http`: ends each HTTP transaction and starts
/// another, with keep-alive to the client and connections to `backend` reused, as a
/// terminating gateway must) in front of `backend`: the child and its URL.
fn haproxy_in(dir: &Path, bin: &Path, backend: &str, mode: &str) -> (Proc, String) {
    let server = backend
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let port = free_port();
    let cfg = dir.join(format!("haproxy-{mode}.cfg"));
    let http = if mode == "http" {
        "    option http-keep-alive\n    http-reuse always\n    timeout http-keep-alive 300s\n"
    } else {
        ""
    };
    std::fs::write(
        &cfg,
        format!(
            "global\n    maxconn 1024\ndefaults\n    mode {mode}\n{http}    timeout connect 5s\n    \
             timeout client 300s\n    timeout server 300s\nfrontend bench\n    bind 127.0.0.1:{port}\n    \
             default_backend echo\nbackend echo\n    server echo {server}\n"
        ),
    )
    .expect("haproxy config written");
    let mut cmd = Command::new(bin);
    cmd.arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let proc = Proc(cmd.spawn().expect("haproxy starts"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "haproxy did not listen within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

/// mcp-compressor: `BENCH_COMPRESSOR`, else the default venv path.
fn compressor() -> PathBuf {
    std::env::var_os("BENCH_COMPRESSOR").map_or_else(
        || PathBuf::from("/tmp/mcp-compressor-venv/bin/mcp-compressor"),
        PathBuf::from,
    )
}

/// The targets of `latency`, each a labelled client, and the processes behind them.
#[derive(Default)]
struct Targets {
    clients: Vec<(String, Box<dyn Client>)>,
    procs: Vec<Proc>,
}

impl Targets {
    fn stdio(&mut self, label: &str, mut proc: Proc, call: Call) {
        let client = StdioClient::new(&mut proc, call);
        self.clients.push((label.to_owned(), Box::new(client)));
        self.procs.push(proc);
    }

    fn http(&mut self, label: &str, url: &str, call: Call, bearer: Option<String>) {
        let client = HttpClient::with_bearer(url, call, bearer);
        self.clients.push((label.to_owned(), Box::new(client)));
    }

    /// A gateway serving stdio and one serving HTTP (`labels`), both exposing `echo__echo`.
    fn gateways(
        &mut self,
        labels: [&str; 2],
        stdio: Command,
        http: Command,
        bearer: Option<String>,
    ) {
        let (gw_stdio, _, _) = start(stdio, "serving MCP on stdio");
        let (gw_http, url, _) = start(http, "listening on ");
        self.stdio(labels[0], gw_stdio, Call::echo("echo__echo"));
        self.http(labels[1], &url, Call::echo("echo__echo"), bearer);
        self.procs.push(gw_http);
    }

    fn at(&self, label: &str) -> Option<usize> {
        self.clients.iter().position(|(n, _)| n == label)
    }
}

/// The relays (`socat`, `haproxy`) and mcp-compressor, when installed.
fn other_targets(t: &mut Targets, dir: &Path, echo_url: &str) {
    match on_path("socat") {
        Some(socat) => {
            let mut cmd = Command::new(socat);
            cmd.arg("-")
                .arg(format!("EXEC:{} --stdio", echo().display()));
            t.stdio("stdio relay (socat)", spawn_stdio(cmd), Call::echo("echo"));
        }
        None => println!("skipped: no socat"),
    }
    match on_path("haproxy") {
        Some(bin) => {
            let (proc, url) = haproxy(dir, &bin, echo_url);
            t.http("http relay (haproxy)", &url, Call::echo("echo"), None);
            t.procs.push(proc);
            // The floor of a gateway that terminates HTTP: HAProxy ending each transaction.
            let (proc, url) = haproxy_in(dir, &bin, echo_url, "http");
            t.http("http relay (haproxy http)", &url, Call::echo("echo"), None);
            t.procs.push(proc);
        }
        None => println!("skipped: no haproxy"),
    }
    let bin = compressor();
    if !bin.is_file() {
        println!(
            "skipped: no mcp-compressor at {} (set BENCH_COMPRESSOR)",
            bin.display()
        );
        return;
    }
    // Its tools wrap the upstream's: `echo_invoke_tool` calls `echo` with `tool_input`.
    let call = Call::with(
        "echo_invoke_tool",
        r#"{"tool_name":"echo","tool_input":{"message":"hello"}}"#,
    );
    let mut cmd = Command::new(&bin);
    cmd.args(["-n", "echo", "--"]).arg(echo()).arg("--stdio");
    t.stdio("stdio via compressor", spawn_stdio(cmd), call.clone());
    let server = [echo().display().to_string(), "--stdio".into()];
    let (proc, url) = compressor_http(&bin, "echo", &server);
    t.http("http via compressor", &url, call, None);
    t.procs.push(proc);
}

/// mcp-compressor (`bin`) over streamable HTTP in front of stdio server `server` (command and
/// arguments) named `name`: the child and its URL.
fn compressor_http(bin: &Path, name: &str, server: &[String]) -> (Proc, String) {
    let mut cmd = Command::new(bin);
    cmd.args([
        "--transport",
        "streamable-http",
        "--port",
        "0",
        "-n",
        name,
        "--",
    ])
    .args(server)
    .stdin(Stdio::null())
    .stdout(Stdio::null());
    // It prints a banner on stderr, then `Streamable HTTP MCP server listening on URL`.
    let (proc, url, _) = start(cmd, "listening on ");
    (proc, url)
}

/// The policy of the key + audit gateways: an API-key client (`BENCH_KEY`, also the stdio
/// client) and an audit file; without `BENCH_POLICY_EXTRA`.
fn key_audit_policy(dir: &Path, name: &str, upstreams: &str) -> PathBuf {
    let path = dir.join(name);
    let audit = dir.join(format!("{name}.audit.log"));
    std::fs::write(
        &path,
        format!(
            "version = 1\n{upstreams}\n[downstream]\nstdio_client = \"bench\"\n[[client]]\n\
             name = \"bench\"\napi_key_env = \"BENCH_KEY\"\nallow = [\"*\"]\n[audit]\npath = {:?}\n",
            audit.display().to_string()
        ),
    )
    .expect("policy written");
    path
}

/// The key + audit pair of gateway binary `bin`: `… via {what} (key+audit)`.
fn key_gateways(t: &mut Targets, bin: &Path, policies: [&Path; 2], what: &str) {
    let mut stdio = gateway_at(bin, policies[0], &["--stdio"], true);
    let mut http = gateway_at(bin, policies[1], &["--http", "127.0.0.1:0"], false);
    stdio.env("BENCH_KEY", "k");
    http.env("BENCH_KEY", "k");
    t.gateways(
        [
            &format!("stdio via {what} (key+audit)"),
            &format!("http via {what} (key+audit)"),
        ],
        stdio,
        http,
        Some("k".into()),
    );
}

fn latency(args: &[String], dir: &Path) {
    let calls = arg(args, "--calls", 2000);
    let rounds = arg(args, "--rounds", 5);

    let mut echo_stdio = Command::new(echo());
    echo_stdio.arg("--stdio");
    let echo_stdio = spawn_stdio(echo_stdio);
    let mut echo_http = Command::new(echo());
    echo_http
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null());
    let (_echo_http, echo_url, _) = start(echo_http, "listening on ");

    let stdio_up = stdio_upstream("echo", 0);
    let http_up = format!("[[upstream]]\nname = \"echo\"\nurl = \"{echo_url}\"\n");
    let stdio_policy = write_policy(dir, "stdio.toml", &stdio_up);
    let http_policy = write_policy(dir, "http.toml", &http_up);

    let mut t = Targets::default();
    t.stdio("stdio direct", echo_stdio, Call::echo("echo"));
    t.http(
        "http direct",
        &echo_url,
        Call::echo("echo"),
        std::env::var("BENCH_BEARER").ok(),
    );
    let bearer = std::env::var("BENCH_BEARER").ok();
    t.gateways(
        ["stdio via gateway", "http via gateway"],
        gateway(&stdio_policy, &["--stdio"], true),
        gateway(&http_policy, &["--http", "127.0.0.1:0"], false),
        bearer.clone(),
    );
    // An API key and an audit file (`BENCH_KEY=k`, `Authorization: Bearer k`).
    let key_stdio = key_audit_policy(dir, "key-stdio.toml", &stdio_up);
    let key_http = key_audit_policy(dir, "key-http.toml", &http_up);
    let gw = gateway_bin();
    key_gateways(&mut t, &gw, [&key_stdio, &key_http], "gateway");
    other_targets(&mut t, dir, &echo_url);
    // `BENCH_GATEWAY_BASE=path`: a second gateway binary (say, the build before a change),
    // measured in the same interleaved rounds, default and key + audit.
    if let Some(base) = std::env::var_os("BENCH_GATEWAY_BASE").map(PathBuf::from) {
        t.gateways(
            ["stdio via base", "http via base"],
            gateway_at(&base, &stdio_policy, &["--stdio"], true),
            gateway_at(&base, &http_policy, &["--http", "127.0.0.1:0"], false),
            bearer.clone(),
        );
        // Their own audit files.
        let key_stdio = key_audit_policy(dir, "base-key-stdio.toml", &stdio_up);
        let key_http = key_audit_policy(dir, "base-key-http.toml", &http_up);
        key_gateways(&mut t, &base, [&key_stdio, &key_http], "base");
    }
    // `BENCH_MIXED=1`: the two mixed paths (stdio client → HTTP upstream, HTTP client → stdio
    // upstream), to tell which side of an HTTP hop costs what.
    if std::env::var_os("BENCH_MIXED").is_some_and(|v| v == "1") {
        t.gateways(
            ["stdio→http upstream", "http→stdio upstream"],
            gateway(&http_policy, &["--stdio"], true),
            gateway(&stdio_policy, &["--http", "127.0.0.1:0"], false),
            bearer,
        );
    }
    let stats = measure(&mut t, calls, rounds);
    report_added(&t, &stats);
}

/// Warm-up, then interleaved rounds so that noise on the shared cores hits every target; prints
/// the table and returns (p50, p99) per target.
fn measure(t: &mut Targets, calls: u64, rounds: u64) -> Vec<(f64, f64)> {
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); t.clients.len()];
    let mut id = 1;
    for (_, c) in &mut t.clients {
        for _ in 0..200 {
            c.call(id);
            id += 1;
        }
    }
    // A slow target (mcp-compressor over HTTP answers in ~40 ms here) gets at most 5 s a round.
    let cap = Duration::from_secs(5);
    for _ in 0..rounds {
        for (i, (_, c)) in t.clients.iter_mut().enumerate() {
            let round = Instant::now();
            for _ in 0..calls {
                let at = Instant::now();
                c.call(id);
                samples[i].push(at.elapsed().as_secs_f64() * 1e3);
                id += 1;
                if round.elapsed() > cap {
                    break;
                }
            }
        }
    }
    println!(
        "tools/call latency, {rounds} rounds x {calls} sequential calls per target, at most 5 s \
         a round (ms)"
    );
    println!("{:<32} {:>8} {:>8} {:>8}", "target", "p50", "p90", "p99");
    let mut stats = Vec::new();
    for (i, (name, c)) in t.clients.iter().enumerate() {
        let s = &mut samples[i];
        s.sort_by(f64::total_cmp);
        let (p50, p90, p99) = (percentile(s, 0.5), percentile(s, 0.9), percentile(s, 0.99));
        let (answers, sse) = c.sse_share();
        let mut note = if sse > 0 {
            format!("  ({sse} of {answers} answers came as SSE streams)")
        } else {
            String::new()
        };
        if (s.len() as u64) < calls * rounds {
            note.push_str(&format!("  ({} calls: 5 s a round)", s.len()));
        }
        println!("{name:<32} {p50:>8.4} {p90:>8.4} {p99:>8.4}{note}");
        stats.push((p50, p99));
    }
    stats
}

/// Per transport: what each target adds over the direct call, and the gateway's added latency
/// as a multiple of the relay's (the floor: a hop that does nothing).
fn report_added(t: &Targets, stats: &[(f64, f64)]) {
    for (transport, relay) in [
        ("stdio", "stdio relay (socat)"),
        ("http", "http relay (haproxy)"),
    ] {
        let Some(d) = t.at(&format!("{transport} direct")) else {
            continue;
        };
        println!("added over direct ({transport}):");
        let prefix = format!("{transport} ");
        for (i, (name, _)) in t.clients.iter().enumerate() {
            if i != d && name.starts_with(&prefix) {
                println!(
                    "  {name:<32} p50 {:+.4} ms, p99 {:+.4} ms",
                    stats[i].0 - stats[d].0,
                    stats[i].1 - stats[d].1
                );
            }
        }
        let Some(r) = t.at(relay) else { continue };
        print_ratios(t, stats, (d, r), transport);
        // HTTP: also against the floor of a terminating gateway (HAProxy in HTTP mode).
        if let Some(r) = t.at(&format!("{transport} relay (haproxy http)")) {
            print_ratios(t, stats, (d, r), &format!("{transport}, haproxy http mode"));
        }
    }
}

/// `ratio mcp-budget / relay (what)` and `ratio mcp-compressor / relay (what)`, p50 and p99:
/// each target's added latency over direct (`d`) as a multiple of the relay's (`r`).
fn print_ratios(t: &Targets, stats: &[(f64, f64)], (d, r): (usize, usize), what: &str) {
    let transport = what.split(',').next().unwrap_or(what);
    let added = |i: usize, q: usize| {
        let pick = |s: (f64, f64)| if q == 0 { s.0 } else { s.1 };
        pick(stats[i]) - pick(stats[d])
    };
    let mut lines: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for (q, qname) in [(0, "p50"), (1, "p99")] {
        let floor = added(r, q);
        let ratios = |names: &[(&str, &str)]| -> Vec<String> {
            names
                .iter()
                .filter_map(|(suffix, label)| {
                    let i = t.at(&format!("{transport} via {suffix}"))?;
                    Some(if floor > 0.0 {
                        format!("{:.2} ({label})", added(i, q) / floor)
                    } else {
                        format!("n/a ({label}: the relay added nothing)")
                    })
                })
                .collect()
        };
        let ours = ratios(&[
            ("gateway", "default"),
            ("gateway (key+audit)", "key+audit"),
            ("base", "base default"),
            ("base (key+audit)", "base key+audit"),
        ]);
        lines[0].push(format!(
            "ratio mcp-budget / relay ({what}): {qname} {}",
            ours.join(", ")
        ));
        let theirs = ratios(&[("compressor", "default")]);
        if !theirs.is_empty() {
            lines[1].push(format!(
                "ratio mcp-compressor / relay ({what}): {qname} {}",
                theirs.join(", ")
            ));
        }
    }
    for line in lines.iter().flatten() {
        println!("{line}");
    }
}

// ---------------------------------------------------------------------------------------------
// Memory

/// `VmRSS` and `VmHWM` of `pid`, in kB.
fn rss_kb(pid: u32) -> (u64, u64) {
    (status_kb(pid, "VmRSS:"), status_kb(pid, "VmHWM:"))
}

/// Field `key` (`VmRSS:`, `RssAnon:`, …) of `pid`'s `/proc` status, in kB (0 when missing).
fn status_kb(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The JSON-RPC message of an answer (a JSON body, or the last `data:` of an SSE stream).
fn answer_json(buf: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(buf);
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(&text).expect("a JSON answer");
    }
    text.lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .find_map(|d| serde_json::from_str(d.trim()).ok())
        .expect("an SSE answer with a JSON-RPC message")
}

impl HttpClient {
    /// Every page of tools/list: how many tools.
    fn list_tools(&mut self, id: u64) -> usize {
        let mut n = 0;
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor.map_or(String::new(), |c| {
                format!(r#","params":{{"cursor":{c:?}}}"#)
            });
            self.post(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"{params}}}"#
            ));
            let answer = answer_json(&self.buf);
            let result = &answer["result"];
            n += result["tools"].as_array().map_or(0, Vec::len);
            match result["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return n,
            }
        }
    }

    /// A new session on this connection (initialize + initialized): its id.
    fn open_session(&mut self) -> String {
        self.session = None;
        self.post(INIT);
        let id = self.session.clone().expect("an Mcp-Session-Id");
        self.post(INITIALIZED);
        id
    }
}

/// The `n` toolsets with the most tools (name order among equals), from `BENCH_TOOLSETS` or
/// `tests/fixtures/toolsets`.
fn toolsets(n: usize) -> Vec<(PathBuf, usize)> {
    let dir = std::env::var_os("BENCH_TOOLSETS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets"),
        PathBuf::from,
    );
    let mut sets: Vec<(PathBuf, usize)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| {
            let path = e.ok()?.path();
            if path.extension()? != "json" {
                return None;
            }
            let set: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?;
            Some((path, set["tools"].as_array()?.len()))
        })
        .collect();
    sets.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    sets.truncate(n);
    sets
}

fn memory(args: &[String], dir: &Path) {
    let upstreams = usize::try_from(arg(args, "--upstreams", 10)).unwrap_or(10);
    let per = arg(args, "--tools", 100);
    let sessions = arg(args, "--sessions", 2000);
    // Seconds to leave each gateway idle after its lists before reading its RSS again (0:
    // not): the tokenizer is let go after 30-60 s, and the allocator returns pages ~10 s later.
    let idle = arg(args, "--idle", 0);
    // After the idle reading: the binary's pages paged out (`scripts/pageout.py`, what memory
    // pressure does to clean file pages), then a new session, 200 calls and a list, and the
    // RSS again: the working set, without the pages only startup touched.
    let pageout = args.iter().any(|a| a == "--pageout");

    // (a) 10 stdio upstreams x 100 tools, HTTP downstream.
    let sets = toolsets(upstreams);
    let policy: String = sets
        .iter()
        .enumerate()
        .map(|(i, (path, _))| {
            format!(
                "[[upstream]]\nname = \"t{i}\"\ncommand = {:?}\nargs = [\"--stdio\", \"--tools-from\", {:?}, \"--tools\", \"{per}\"]\n",
                echo().display().to_string(),
                path.display().to_string()
            )
        })
        .collect();
    let names: Vec<String> = sets
        .iter()
        .map(|(p, n)| {
            let stem = p.file_stem().unwrap_or_default().to_string_lossy();
            format!("{stem} ({n})")
        })
        .collect();
    println!(
        "{} stdio upstreams x {per} tools (toolsets, their own tool count, cycled up to {per}): {}",
        sets.len(),
        names.join(", ")
    );
    // The default budget (auto: over its threshold, search meta-tools and pinned tools are
    // listed) and `mode = "full"` (every tool listed).
    for (label, budget) in [
        ("default budget", ""),
        ("[budget] mode = \"full\"", "[budget]\nmode = \"full\"\n"),
    ] {
        let path = dir.join("tools.toml");
        std::fs::write(&path, format!("version = 1\n{policy}{budget}")).expect("policy written");
        let (gw, url, _) = start(
            gateway(&path, &["--http", "127.0.0.1:0"], false),
            "listening on ",
        );
        let (rss0, _) = rss_kb(gw.0.id());
        let mut c = HttpClient::with_bearer(&url, Call::echo("t0__x"), None);
        let t = Instant::now();
        let n = c.list_tools(1);
        let cold = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let n2 = c.list_tools(2);
        let warm = t.elapsed().as_secs_f64() * 1e3;
        let (rss, hwm) = rss_kb(gw.0.id());
        println!("{label}:");
        println!(
            "  cold first tools/list of {n} tools: {cold:.1} ms; warm second ({n2} tools): {warm:.1} ms"
        );
        println!(
            "  gateway VmRSS {rss} kB, VmHWM {hwm} kB after initialize + tools/list (VmRSS {rss0} kB when ready)"
        );
        if idle > 0 {
            std::thread::sleep(Duration::from_secs(idle));
            let pid = gw.0.id();
            println!("  after {idle} s idle: {}", rss_parts(pid));
            if pageout {
                working_set(pid, &url);
            }
        }
    }

    memory_sessions(dir, sessions);
}

/// `--pageout`: the gateway's file-backed pages paged out, then a new session, 200 calls and a
/// list: its RSS then (what serving touches again).
fn working_set(pid: u32, url: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pageout.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(pid.to_string())
        .output();
    if !out.as_ref().is_ok_and(|o| o.status.success()) {
        let why = out.map_or_else(
            |e| e.to_string(),
            |o| String::from_utf8_lossy(&o.stderr).trim().to_owned(),
        );
        println!(
            "  --pageout skipped: {} failed ({why}); it needs Linux >= 5.10 and CAP_SYS_NICE",
            script.display()
        );
        return;
    }
    let left = status_kb(pid, "RssFile:");
    let mut c = HttpClient::with_bearer(url, Call::echo("t0__x"), None);
    let n = c.list_tools(9);
    // A listed tool that needs no argument (the echo upstream answers any).
    let listed = answer_json(&c.buf);
    let free = (listed["result"]["tools"].as_array().into_iter().flatten())
        .find(|t| (t["inputSchema"]["required"].as_array()).is_none_or(Vec::is_empty));
    let Some(name) = free.and_then(|t| t["name"].as_str()) else {
        println!("  --pageout: no listed tool without required arguments to call; skipped");
        return;
    };
    c.call = Call::with(name, "{}");
    for id in 0..200 {
        c.call(10 + id);
    }
    println!(
        "  binary paged out ({left} kB file-backed left), then a session, 200 calls and a list of {n}: {}",
        rss_parts(pid)
    );
}

/// `pid`'s `VmRSS` and its anonymous and file-backed parts (the latter: the binary's pages),
/// as the memory lines print them.
fn rss_parts(pid: u32) -> String {
    format!(
        "VmRSS {} kB ({} kB anonymous, {} kB file-backed)",
        status_kb(pid, "VmRSS:"),
        status_kb(pid, "RssAnon:"),
        status_kb(pid, "RssFile:")
    )
}

/// Bytes per idle 2025-era session (initialize + initialized, then nothing): `sessions`, then
/// as many more.
fn memory_sessions(dir: &Path, sessions: u64) {
    let mut echo_http = Command::new(echo());
    echo_http
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null());
    let (_echo_http, echo_url, _) = start(echo_http, "listening on ");
    let path = dir.join("sessions.toml");
    std::fs::write(
        &path,
        format!(
            "version = 1\n[[upstream]]\nname = \"echo\"\nurl = \"{echo_url}\"\n[downstream]\n\
             max_sessions = 10000\nmax_sessions_per_client = 10000\n"
        ),
    )
    .expect("policy written");
    let (gw, url, _) = start(
        gateway(&path, &["--http", "127.0.0.1:0"], false),
        "listening on ",
    );
    let pid = gw.0.id();
    // A few keep-alive connections, each with its first session open (warm allocator).
    let mut conns: Vec<HttpClient> = (0..4)
        .map(|_| HttpClient::with_bearer(&url, Call::echo("echo__echo"), None))
        .collect();
    let (before, _) = rss_kb(pid);
    let mut open = |count: u64| {
        let t = Instant::now();
        for i in 0..count {
            let k = usize::try_from(i).unwrap_or(0) % conns.len();
            conns[k].open_session();
        }
        t.elapsed().as_secs_f64()
    };
    let secs1 = open(sessions);
    let (after1, _) = rss_kb(pid);
    let secs2 = open(sessions);
    let (after2, hwm) = rss_kb(pid);
    #[allow(clippy::cast_precision_loss)]
    let per_kb = |kb: u64, n: u64| kb as f64 * 1024.0 / n as f64;
    let per_session = |kb: u64, n: u64| per_kb(kb.saturating_sub(before), n);
    println!(
        "idle sessions: VmRSS {before} kB before, {after1} kB after {sessions} ({secs1:.1} s), \
         {after2} kB after {} ({secs2:.1} s more), VmHWM {hwm} kB",
        2 * sessions
    );
    println!(
        "bytes per idle session: {:.0} (first {sessions}), {:.0} (all {}), {:.0} (second {sessions} alone)",
        per_session(after1, sessions),
        per_session(after2, 2 * sessions),
        2 * sessions,
        per_kb(after2.saturating_sub(after1), sessions)
    );
}

fn throughput(args: &[String], dir: &Path) {
    let clients = arg(args, "--clients", 32);
    let secs = arg(args, "--secs", 5);
    if let Some(peer) = value(args, "--peer") {
        return throughput_peer(&peer, dir, clients, secs);
    }
    let mut echo_http = Command::new(echo());
    echo_http
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null());
    let (echo_http, echo_url, _) = start(echo_http, "listening on ");
    let http_policy = write_policy(
        dir,
        "http.toml",
        &format!("[[upstream]]\nname = \"echo\"\nurl = \"{echo_url}\"\n"),
    );
    let (gw_http, gw_url, _) = start(
        gateway(&http_policy, &["--http", "127.0.0.1:0"], false),
        "listening on ",
    );
    // (label, url, tool, the serving process whose peak memory is reported)
    let mut targets = vec![
        ("http direct", echo_url.clone(), "echo", echo_http.0.id()),
        ("http via gateway", gw_url, "echo__echo", gw_http.0.id()),
    ];
    // `BENCH_GATEWAY_BASE=path`: a second gateway binary, measured after the first.
    let mut base_procs = Vec::new();
    if let Some(base) = std::env::var_os("BENCH_GATEWAY_BASE").map(PathBuf::from) {
        let (gw, url, _) = start(
            gateway_at(&base, &http_policy, &["--http", "127.0.0.1:0"], false),
            "listening on ",
        );
        targets.push(("http via base", url, "echo__echo", gw.0.id()));
        base_procs.push(gw);
    }
    // The floors: HAProxy copying bytes (TCP mode) and ending each HTTP transaction (HTTP mode,
    // keep-alive both sides), as in `latency`.
    if let Some(bin) = on_path("haproxy") {
        for (label, mode) in [
            ("http relay (haproxy)", "tcp"),
            ("http relay (haproxy http)", "http"),
        ] {
            let (proc, url) = haproxy_in(dir, &bin, &echo_url, mode);
            targets.push((label, url, "echo", proc.0.id()));
            base_procs.push(proc);
        }
    }
    let mut rates: Vec<(&str, f64)> = Vec::new();
    println!("tools/call throughput over HTTP, {clients} keep-alive clients, {secs} s each");
    for (name, url, tool, pid) in &targets {
        let rate = load(url, &Call::echo(tool), clients, secs);
        println!(
            "{name:<20} {rate:>10.0} calls/s   peak RSS {}",
            peak_rss(*pid)
        );
        rates.push((name, rate));
    }
    let rate = |label: &str| rates.iter().find(|(n, _)| *n == label).map(|(_, r)| *r);
    for relay in ["http relay (haproxy)", "http relay (haproxy http)"] {
        let Some(floor) = rate(relay).filter(|r| *r > 0.0) else {
            continue;
        };
        let ours: Vec<String> = [("http via gateway", "default"), ("http via base", "base")]
            .iter()
            .filter_map(|(label, what)| Some(format!("{:.2} ({what})", rate(label)? / floor)))
            .collect();
        println!("throughput mcp-budget / {relay}: {}", ours.join(", "));
    }
}

/// Calls per second that `clients` keep-alive clients calling `call` at `url` get, counted
/// over `secs` after half a second of warm-up.
fn load(url: &str, call: &Call, clients: u64, secs: u64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (done, stop, url, call) =
                (done.clone(), stop.clone(), url.to_owned(), call.clone());
            std::thread::spawn(move || {
                let mut c = HttpClient::new(&url, call);
                let mut id = 1;
                while !stop.load(Ordering::Relaxed) {
                    c.call(id);
                    id += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Let every client connect and warm up, then count.
    std::thread::sleep(Duration::from_millis(500));
    let (n0, t0) = (done.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(Duration::from_secs(secs));
    let (n1, t1) = (done.load(Ordering::Relaxed), t0.elapsed());
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("client thread");
    }
    #[allow(clippy::cast_precision_loss)]
    let rate = (n1 - n0) as f64 / t1.as_secs_f64();
    rate
}

/// `throughput --peer python|node`: the HTTP downstream in front of a realistic stdio server
/// (`tests/peers/saved_server.py` with the GitHub toolset, or server-everything), through
/// mcp-budget and through mcp-compressor (when installed), `clients` keep-alive clients.
fn throughput_peer(peer: &str, dir: &Path, clients: u64, secs: u64) {
    let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
    let (server, tool, args): (Vec<String>, &str, &str) = match peer {
        "python" => (
            vec![
                "python3".into(),
                peers.join("saved_server.py").display().to_string(),
                (peers.join("../fixtures/toolsets/github.json"))
                    .display()
                    .to_string(),
            ],
            "issue_read",
            r#"{"method":"get","owner":"octo","repo":"hello","issue_number":7}"#,
        ),
        _ => (
            vec![
                "node".into(),
                (peers.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
                    .display()
                    .to_string(),
                "stdio".into(),
            ],
            "echo",
            r#"{"message":"hello"}"#,
        ),
    };
    let policy = write_policy(
        dir,
        &format!("peer-{peer}.toml"),
        &format!(
            "[[upstream]]\nname = \"p\"\ncommand = {:?}\nargs = {:?}\n",
            server[0],
            &server[1..]
        ),
    );
    let (gw, url, _) = start(
        gateway(&policy, &["--http", "127.0.0.1:0"], false),
        "listening on ",
    );
    println!(
        "tools/call throughput over HTTP to a {peer} stdio server, {clients} keep-alive clients, \
         {secs} s each"
    );
    let ours = load(
        &url,
        &Call::with(&format!("p__{tool}"), args),
        clients,
        secs,
    );
    println!(
        "http via gateway     {ours:>10.0} calls/s   peak RSS {}",
        peak_rss(gw.0.id())
    );
    drop(gw);
    let bin = compressor();
    if !bin.is_file() {
        println!("skipped: no mcp-compressor at {}", bin.display());
        return;
    }
    let (proc, url) = compressor_http(&bin, "p", &server);
    let call = Call::with(
        "p_invoke_tool",
        &format!(r#"{{"tool_name":"{tool}","tool_input":{args}}}"#),
    );
    let theirs = load(&url, &call, clients, secs);
    println!(
        "http via compressor  {theirs:>10.0} calls/s   peak RSS {}",
        peak_rss(proc.0.id())
    );
    if theirs > 0.0 {
        println!(
            "throughput mcp-budget / mcp-compressor ({peer}): {:.2}",
            ours / theirs
        );
    }
}

/// `VmHWM` (peak resident memory) of process `pid`, as /proc tells it.
fn peak_rss(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_owned()))
        })
        .unwrap_or_else(|| "?".into())
}

fn startup(args: &[String], dir: &Path) {
    let runs = arg(args, "--runs", 3);
    if args.iter().any(|a| a == "--upstreams") {
        return startup_many(args, dir, runs);
    }
    let delays = [100, 200, 300, 400];
    let upstreams: String = delays
        .iter()
        .enumerate()
        .map(|(i, d)| stdio_upstream(&format!("u{i}"), *d))
        .collect();
    let policy = write_policy(dir, "four.toml", &upstreams);
    println!(
        "startup with 4 stdio upstreams that start in {delays:?} ms (sum {} ms, slowest {} ms)",
        delays.iter().sum::<u64>(),
        delays.iter().max().unwrap_or(&0)
    );
    for run in 1..=runs {
        let t = Instant::now();
        let (gw, _, before) = start(
            gateway(&policy, &["--http", "127.0.0.1:0"], false),
            "listening on ",
        );
        let wall = t.elapsed().as_millis();
        let summary = before
            .iter()
            .find(|l| l.contains("upstream(s) in"))
            .cloned()
            .unwrap_or_default();
        println!("run {run}: ready after {wall} ms wall clock; summary: {summary}");
        drop(gw);
    }
}

/// `startup --upstreams N [--tools T] [--gateways A,B]`: N stdio upstreams of T tools each
/// (the largest saved toolsets, as `memory`), upstream i ready after 30 x i ms (each one's
/// lists publish a catalog of their own); per run the wall clock to ready and the CPU time the
/// gateway process spent until then (user + system: what publishing costs, less noisy than
/// the wall clock on a shared machine). With `--gateways`, runs alternate between the gateway
/// binaries given (before/after comparisons in one interleaved run).
fn startup_many(args: &[String], dir: &Path, runs: u64) {
    let n = usize::try_from(arg(args, "--upstreams", 10)).unwrap_or(10);
    let per = arg(args, "--tools", 100);
    let sets = toolsets(n);
    let policy: String = (sets.iter().enumerate())
        .map(|(i, (path, _))| {
            format!(
                "[[upstream]]\nname = \"t{i}\"\ncommand = {:?}\nargs = [\"--stdio\", \"--tools-from\", {:?}, \"--tools\", \"{per}\", \"--delay-ms\", \"{}\"]\n",
                echo().display().to_string(),
                path.display().to_string(),
                30 * i
            )
        })
        .collect();
    let policy = write_policy(dir, "many.toml", &policy);
    let gateways: Vec<PathBuf> = value(args, "--gateways").map_or_else(
        || vec![gateway_bin()],
        |list| list.split(',').map(PathBuf::from).collect(),
    );
    println!(
        "startup with {} stdio upstreams x {per} tools, ready after 0, 30, ... ms",
        sets.len()
    );
    let mut cpu: Vec<Vec<u64>> = vec![Vec::new(); gateways.len()];
    for run in 1..=runs {
        for (g, bin) in gateways.iter().enumerate() {
            let t = Instant::now();
            let cmd = gateway_at(bin, &policy, &["--http", "127.0.0.1:0"], false);
            let (gw, _, _) = start(cmd, "listening on ");
            let wall = t.elapsed().as_millis();
            let ms = cpu_ms(gw.0.id());
            cpu[g].push(ms);
            println!(
                "run {run} {}: ready after {wall} ms wall clock, gateway CPU {ms} ms",
                bin.display()
            );
            drop(gw);
        }
    }
    for (g, bin) in gateways.iter().enumerate() {
        cpu[g].sort_unstable();
        let median = cpu[g].get(cpu[g].len() / 2).copied().unwrap_or(0);
        println!("median gateway CPU to ready {}: {median} ms", bin.display());
    }
}

/// User + system CPU time of process `pid` so far, in ms (0 when unreadable).
fn cpu_ms(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (in parentheses): utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<u64> = (rest.split_whitespace())
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    // Clock ticks of 10 ms (USER_HZ is 100 on Linux).
    fields.iter().sum::<u64>() * 10
}

/// N calls through one gateway started under `BENCH_WRAP`, then a clean stop (profilers write
/// their output at exit).
fn profile(args: &[String], dir: &Path) {
    let calls = arg(args, "--calls", 1000);
    let stdio = args.iter().any(|a| a == "--stdio");
    let wrap = std::env::var("BENCH_WRAP").unwrap_or_default();
    let words: Vec<&str> = wrap.split_whitespace().collect();
    let with_wrapper = |gw: Command| -> Command {
        let Some((first, rest)) = words.split_first() else {
            return gw;
        };
        let mut cmd = Command::new(first);
        cmd.args(rest).arg(gw.get_program()).args(gw.get_args());
        for (k, v) in gw.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        cmd
    };
    let mut echo_http = Command::new(echo());
    echo_http
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null());
    let (_echo_http, echo_url, _) = start(echo_http, "listening on ");
    let (mut gw, mut client): (Proc, Box<dyn Client>) = if stdio {
        let policy = write_policy(dir, "stdio.toml", &stdio_upstream("echo", 0));
        let mut cmd = with_wrapper(gateway(&policy, &["--stdio"], true));
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let (mut gw, _, _) = start(cmd, "serving MCP on stdio");
        let client = StdioClient::new(&mut gw, Call::echo("echo__echo"));
        (gw, Box::new(client))
    } else {
        let policy = write_policy(
            dir,
            "http.toml",
            &format!("[[upstream]]\nname = \"echo\"\nurl = \"{echo_url}\"\n"),
        );
        let mut cmd = with_wrapper(gateway(&policy, &["--http", "127.0.0.1:0"], false));
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        let (gw, url, _) = start(cmd, "listening on ");
        (
            gw,
            Box::new(HttpClient::new(&url, Call::echo("echo__echo"))),
        )
    };
    let t = Instant::now();
    for id in 1..=calls {
        client.call(id);
    }
    println!("{calls} calls in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    drop(client);
    if let Ok(pid) = i32::try_from(gw.0.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let _ = gw.0.wait();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = std::env::temp_dir().join(format!("mcp-budget-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    match args.first().map(String::as_str) {
        Some("latency") => latency(&args, &dir),
        Some("throughput") => throughput(&args, &dir),
        Some("startup") => startup(&args, &dir),
        Some("profile") => profile(&args, &dir),
        Some("memory") => memory(&args, &dir),
        _ => eprintln!("usage: bench_loopback latency|throughput|startup|profile|memory [options]"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
