//! Loopback benchmarks of the gateway binary against the `bench_echo` upstream (run by
//! `scripts/bench-gateway.sh`, release build). Everything binds 127.0.0.1 and is stopped at the
//! end.
//!
//! ```text
//! bench_loopback latency    [--calls 2000] [--rounds 5]   tools/call p50/p99: direct vs through,
//!                                                         stdio and HTTP, interleaved rounds
//! bench_loopback throughput [--clients 32] [--secs 5]     tools/call/s over the HTTP downstream
//! bench_loopback startup    [--runs 3]                    time to ready with 4 upstreams that
//!                                                         start in 100/200/300/400 ms
//! bench_loopback profile    [--calls 1000] [--stdio]      N sequential calls through one gateway
//!                                                         (HTTP, or stdio), for a profiler
//! ```
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

fn call(id: u64, tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"message":"hello"}}}}}}"#
    )
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
    tool: &'static str,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl StdioClient {
    fn new(proc: &mut Proc, tool: &'static str) -> Self {
        let stdin = proc.0.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(proc.0.stdout.take().expect("piped stdout"));
        let mut c = Self {
            tool,
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
        let msg = call(id, self.tool);
        self.send(&msg);
        self.recv();
    }
}

/// HTTP/1.1 keep-alive client for JSON answers with Content-Length (what both servers send).
struct HttpClient {
    tool: &'static str,
    host: String,
    stream: BufReader<TcpStream>,
    session: Option<String>,
    buf: Vec<u8>,
    /// Answers received, and how many of them came as an SSE stream instead of JSON.
    answers: u64,
    sse_answers: u64,
}

impl HttpClient {
    fn new(url: &str, tool: &'static str) -> Self {
        let host = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        let stream = TcpStream::connect(&host).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let mut c = Self {
            tool,
            host,
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
        if let Ok(token) = std::env::var("BENCH_BEARER") {
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
        let msg = call(id, self.tool);
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

fn latency(args: &[String], dir: &Path) {
    let calls = arg(args, "--calls", 2000);
    let rounds = arg(args, "--rounds", 5);

    let mut echo_stdio = Command::new(echo());
    echo_stdio
        .arg("--stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut echo_stdio = Proc(echo_stdio.spawn().expect("echo starts"));
    let mut echo_http = Command::new(echo());
    echo_http
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null());
    let (_echo_http, echo_url, _) = start(echo_http, "listening on ");

    let stdio_policy = write_policy(dir, "stdio.toml", &stdio_upstream("echo", 0));
    let http_policy = write_policy(
        dir,
        "http.toml",
        &format!("[[upstream]]\nname = \"echo\"\nurl = \"{echo_url}\"\n"),
    );
    let (mut gw_stdio, _, _) = start(
        gateway(&stdio_policy, &["--stdio"], true),
        "serving MCP on stdio",
    );
    let (_gw_http, gw_url, _) = start(
        gateway(&http_policy, &["--http", "127.0.0.1:0"], false),
        "listening on ",
    );

    let mut clients: Vec<(&str, Box<dyn Client>)> = vec![
        (
            "stdio direct",
            Box::new(StdioClient::new(&mut echo_stdio, "echo")),
        ),
        (
            "stdio via gateway",
            Box::new(StdioClient::new(&mut gw_stdio, "echo__echo")),
        ),
        ("http direct", Box::new(HttpClient::new(&echo_url, "echo"))),
        (
            "http via gateway",
            Box::new(HttpClient::new(&gw_url, "echo__echo")),
        ),
    ];
    // A gateway serving stdio and one serving HTTP, with their clients, under these labels.
    let mut procs = Vec::new();
    let mut add_pair = |labels: [&'static str; 2], stdio: Command, http: Command| {
        let (mut gw_stdio, _, _) = start(stdio, "serving MCP on stdio");
        let (gw_http, url, _) = start(http, "listening on ");
        clients.push((
            labels[0],
            Box::new(StdioClient::new(&mut gw_stdio, "echo__echo")),
        ));
        clients.push((labels[1], Box::new(HttpClient::new(&url, "echo__echo"))));
        procs.push(gw_stdio);
        procs.push(gw_http);
    };
    // `BENCH_GATEWAY_BASE=path`: a second gateway binary (say, the build before a change),
    // measured in the same interleaved rounds.
    if let Some(base) = std::env::var_os("BENCH_GATEWAY_BASE").map(PathBuf::from) {
        add_pair(
            ["stdio via base", "http via base"],
            gateway_at(&base, &stdio_policy, &["--stdio"], true),
            gateway_at(&base, &http_policy, &["--http", "127.0.0.1:0"], false),
        );
    }
    // `BENCH_MIXED=1`: the two mixed paths (stdio client → HTTP upstream, HTTP client → stdio
    // upstream), to tell which side of an HTTP hop costs what.
    if std::env::var_os("BENCH_MIXED").is_some_and(|v| v == "1") {
        add_pair(
            ["stdio→http upstream", "http→stdio upstream"],
            gateway(&http_policy, &["--stdio"], true),
            gateway(&stdio_policy, &["--http", "127.0.0.1:0"], false),
        );
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); clients.len()];
    let mut id = 1;
    // Warm-up, then interleaved rounds so that noise on the shared cores hits every target.
    for (_, c) in &mut clients {
        for _ in 0..200 {
            c.call(id);
            id += 1;
        }
    }
    for _ in 0..rounds {
        for (i, (_, c)) in clients.iter_mut().enumerate() {
            for _ in 0..calls {
                let t = Instant::now();
                c.call(id);
                samples[i].push(t.elapsed().as_secs_f64() * 1e3);
                id += 1;
            }
        }
    }
    println!("tools/call latency, {rounds} rounds x {calls} sequential calls per target (ms)");
    println!("{:<20} {:>8} {:>8} {:>8}", "target", "p50", "p90", "p99");
    let mut stats = Vec::new();
    for (i, (name, _)) in clients.iter().enumerate() {
        let s = &mut samples[i];
        s.sort_by(f64::total_cmp);
        let (p50, p90, p99) = (percentile(s, 0.5), percentile(s, 0.9), percentile(s, 0.99));
        let (answers, sse) = clients[i].1.sse_share();
        let note = if sse > 0 {
            format!("  ({sse} of {answers} answers came as SSE streams)")
        } else {
            String::new()
        };
        println!("{name:<20} {p50:>8.4} {p90:>8.4} {p99:>8.4}{note}");
        stats.push((p50, p99));
    }
    let at = |name: &str| clients.iter().position(|(n, _)| *n == name);
    let pairs = [
        ("stdio", "stdio direct", "stdio via gateway"),
        ("http", "http direct", "http via gateway"),
        ("stdio, base", "stdio direct", "stdio via base"),
        ("http, base", "http direct", "http via base"),
    ];
    for (label, d, v) in pairs {
        let (Some(d), Some(v)) = (at(d), at(v)) else {
            continue;
        };
        println!(
            "added by the gateway ({label}): p50 {:+.4} ms, p99 {:+.4} ms",
            stats[v].0 - stats[d].0,
            stats[v].1 - stats[d].1
        );
    }
}

fn throughput(args: &[String], dir: &Path) {
    let clients = arg(args, "--clients", 32);
    let secs = arg(args, "--secs", 5);
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
        ("http direct", echo_url, "echo", echo_http.0.id()),
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
    println!("tools/call throughput over HTTP, {clients} keep-alive clients, {secs} s each");
    for (name, url, tool, pid) in &targets {
        let tool: &'static str = tool;
        let done = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..clients)
            .map(|_| {
                let (done, stop, url) = (done.clone(), stop.clone(), url.clone());
                std::thread::spawn(move || {
                    let mut c = HttpClient::new(&url, tool);
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
        println!(
            "{name:<20} {rate:>10.0} calls/s   peak RSS {}",
            peak_rss(*pid)
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
        let client = StdioClient::new(&mut gw, "echo__echo");
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
        (gw, Box::new(HttpClient::new(&url, "echo__echo")))
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
        _ => eprintln!("usage: bench_loopback latency|throughput|startup|profile [options]"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
