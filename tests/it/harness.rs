//! What every integration test needs: paths to the real peers, a policy file, the gateway
//! binary under a kill-on-drop guard, a raw JSON-RPC client on its stdio, raw POSTs to its
//! HTTP endpoint, the Python and Inspector clients, and a leftover-process check.
//!
//! Every process a test starts carries the environment variable `MCPB_IT_TAG=<unique>`, so the
//! test can find all of them in `/proc` — the gateway's upstreams and their own children
//! included — and check that none survives. Ordinary children inherit it; the gateway's stdio
//! upstreams get a clean environment, so [`policy`] writes the tag into each one's `env`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// The gateway binary of this build. Tests run it through [`cli`] or [`Gateway`]; the path
/// itself is for what starts it from a command line (a host's config, a client's `command`).
pub const BIN: &str = env!("CARGO_BIN_EXE_mcp-budget");

/// `mcp-budget ARGS…`, to configure further (arguments, environment, directory) and run to its
/// end: [`Cli::ok`] (exit 0), [`Cli::fails`] (a non-zero exit), [`Cli::code`] and
/// [`Cli::run`] (any exit) each panic with the command line, the exit status, stdout and
/// stderr when the binary ends otherwise. Stdin is empty. A server that keeps running is
/// spawned from [`Cli::tokio`] (or [`Gateway`], which waits until it serves).
pub fn cli<I, S>(args: I) -> Cli
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(args).stdin(Stdio::null());
    Cli { cmd }
}

/// A command line of the gateway binary, not started yet ([`cli`]).
#[derive(Debug)]
pub struct Cli {
    cmd: std::process::Command,
}

/// How a [`Cli`] run ended: its exit status and what it wrote.
#[derive(Debug)]
pub struct Ran {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Stdout as one JSON value.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

impl Cli {
    pub fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.arg(arg);
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd.args(args);
        self
    }

    pub fn env(
        mut self,
        key: impl AsRef<std::ffi::OsStr>,
        value: impl AsRef<std::ffi::OsStr>,
    ) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub fn env_remove(mut self, key: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.env_remove(key);
        self
    }

    pub fn envs(mut self, vars: &[(&str, &str)]) -> Self {
        self.cmd.envs(vars.iter().copied());
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// Runs it; it must exit 0.
    pub fn ok(self) -> Ran {
        self.expect("exit 0", |status| status.success())
    }

    /// Runs it; it must fail (a non-zero exit).
    pub fn fails(self) -> Ran {
        self.expect("a non-zero exit", |status| !status.success())
    }

    /// Runs it; it must exit with `code`.
    pub fn code(self, code: i32) -> Ran {
        self.expect(&format!("exit {code}"), |status| {
            status.code() == Some(code)
        })
    }

    /// Runs it, whatever its exit.
    pub fn run(self) -> Ran {
        self.expect("any exit", |_| true)
    }

    /// [`Cli::run`] without blocking the runtime (for a run that talks to a server of the test
    /// itself).
    pub async fn run_async(self) -> Ran {
        self.expect_async("any exit", |_| true).await
    }

    /// [`Cli::ok`] without blocking the runtime.
    pub async fn ok_async(self) -> Ran {
        self.expect_async("exit 0", |status| status.success()).await
    }

    async fn expect_async(
        self,
        wanted: &str,
        pass: impl Fn(std::process::ExitStatus) -> bool,
    ) -> Ran {
        let line = format!("{:?}", self.cmd);
        let out = Command::from(self.cmd)
            .kill_on_drop(true)
            .output()
            .await
            .unwrap_or_else(|e| panic!("{line} did not start: {e}"));
        Ran::checked(&line, &out, wanted, pass)
    }

    /// The command, to spawn a server (under tokio, killed on drop).
    pub fn tokio(self) -> Command {
        let mut cmd = Command::from(self.cmd);
        cmd.kill_on_drop(true);
        cmd
    }

    /// The command, to spawn as the test needs.
    pub fn command(self) -> std::process::Command {
        self.cmd
    }

    fn expect(mut self, wanted: &str, pass: impl Fn(std::process::ExitStatus) -> bool) -> Ran {
        let line = format!("{:?}", self.cmd);
        let out = self
            .cmd
            .output()
            .unwrap_or_else(|e| panic!("{line} did not start: {e}"));
        Ran::checked(&line, &out, wanted, pass)
    }
}

impl Ran {
    /// `out` of the command `line`; panics with all of it unless `pass` says its exit is the
    /// one `wanted`.
    fn checked(
        line: &str,
        out: &std::process::Output,
        wanted: &str,
        pass: impl Fn(std::process::ExitStatus) -> bool,
    ) -> Self {
        let ran = Self {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        assert!(
            pass(ran.status),
            "{line}\nexpected {wanted}, got {}\n--- stdout\n{}\n--- stderr\n{}",
            ran.status,
            ran.stdout,
            ran.stderr
        );
        ran
    }
}

/// Upper bound for any single wait in the tests.
pub const WAIT: Duration = Duration::from_secs(30);

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn peers() -> PathBuf {
    root().join("tests/peers")
}

fn must_exist(path: &Path) -> String {
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-test-deps.sh first",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

/// A binary of the npm peers (`tests/peers/node_modules/.bin`).
pub fn node_bin(name: &str) -> String {
    must_exist(&peers().join("node_modules/.bin").join(name))
}

/// A binary of the Python venv (`tests/peers/.venv/bin`).
pub fn venv_bin(name: &str) -> String {
    must_exist(&peers().join(".venv/bin").join(name))
}

/// A file of `tests/peers` (helper scripts).
pub fn peer_file(name: &str) -> String {
    must_exist(&peers().join(name))
}

/// A port nobody listens on right now (bound then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A unique tag for the processes of one test.
pub fn new_tag(test: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{test}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// TOML string literal.
fn q(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

/// One `[[upstream]]` of a policy.
#[derive(Debug, Clone)]
pub struct Up {
    name: String,
    command: Option<String>,
    url: Option<String>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    inherit_env: bool,
    timeout_secs: u64,
    /// More `key = value` lines of the table, as written.
    keys: Vec<String>,
}

impl Up {
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> Self {
        Self {
            name: name.into(),
            command: Some(command.into()),
            url: None,
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            env: Vec::new(),
            inherit_env: false,
            timeout_secs: 30,
            keys: Vec::new(),
        }
    }

    pub fn http(name: &str, url: &str) -> Self {
        Self {
            name: name.into(),
            command: None,
            url: Some(url.into()),
            args: Vec::new(),
            env: Vec::new(),
            inherit_env: false,
            timeout_secs: 30,
            keys: Vec::new(),
        }
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// `inherit_env = true`: the child gets the gateway's whole environment.
    pub fn inherit_env(mut self) -> Self {
        self.inherit_env = true;
        self
    }

    /// Adds `key = <value as a TOML string>` to the table.
    pub fn key(mut self, key: &str, value: &str) -> Self {
        self.keys.push(format!("{key} = {}", q(value)));
        self
    }

    /// Adds `key = value` to the table, `value` as written (a boolean, a number).
    pub fn raw_key(mut self, key: &str, value: &str) -> Self {
        self.keys.push(format!("{key} = {value}"));
        self
    }

    pub fn timeout(mut self, secs: u64) -> Self {
        self.timeout_secs = secs;
        self
    }

    /// server-everything over stdio.
    pub fn everything(name: &str) -> Self {
        Self::stdio(name, &node_bin("mcp-server-everything"), &[])
    }

    /// `mcp-server-time` (`PyPI`) over stdio.
    pub fn time(name: &str) -> Self {
        Self::stdio(
            name,
            &venv_bin("mcp-server-time"),
            &["--local-timezone", "UTC"],
        )
    }

    /// `tests/peers/fake_server.py` in one of its modes.
    pub fn fake(name: &str, mode: &str) -> Self {
        Self::stdio(
            name,
            &venv_bin("python"),
            &[&peer_file("fake_server.py"), mode],
        )
    }

    /// `tests/peers/era_server.py` over stdio in one era: `modern` (2026-07-28 only),
    /// `legacy` (2025-11-25 only) or `dual`.
    pub fn era_server(name: &str, era: &str) -> Self {
        Self::stdio(
            name,
            &venv_bin("python"),
            &[&peer_file("era_server.py"), "--stdio", "--era", era],
        )
    }

    /// The `[[upstream]]` table; a stdio upstream carries `tag` in its `env`.
    fn toml(&self, tag: &str) -> String {
        let mut s = format!("[[upstream]]\nname = {}\n", q(&self.name));
        if let Some(c) = &self.command {
            s += &format!("command = {}\n", q(c));
        }
        if let Some(u) = &self.url {
            s += &format!("url = {}\n", q(u));
        }
        if !self.args.is_empty() {
            let args: Vec<String> = self.args.iter().map(|a| q(a)).collect();
            s += &format!("args = [{}]\n", args.join(", "));
        }
        s += &format!("timeout_secs = {}\n", self.timeout_secs);
        if self.inherit_env {
            s += "inherit_env = true\n";
        }
        for line in &self.keys {
            s += line;
            s += "\n";
        }
        if self.command.is_some() {
            s += "[upstream.env]\n";
            s += &format!("MCPB_IT_TAG = {}\n", q(tag));
            for (k, v) in &self.env {
                s += &format!("{k} = {}\n", q(v));
            }
        }
        s
    }
}

/// Writes a policy with these upstreams (and `extra` TOML for `[downstream]`) into `dir`, with
/// the budget off. Stdio upstreams get `MCPB_IT_TAG=<tag>` in their `env`: they do not inherit
/// the gateway's environment, and without the tag the leftover checks could not see them.
pub fn policy(dir: &Path, tag: &str, downstream: &str, ups: &[Up]) -> PathBuf {
    // These tests are about the traffic path: lists pass through unplanned (the budget layer
    // has its own tests, tests/it/discovery_e2e.rs among them).
    // A test that wants the budget writes its own `[budget]` section after `[downstream]`'s keys.
    let budget = if downstream.contains("[budget]") {
        ""
    } else {
        "[budget]\nenabled = false\n\n"
    };
    let mut text = format!("version = 1\n\n{budget}[downstream]\n{downstream}\n\n");
    for u in ups {
        text += &u.toml(tag);
        text += "\n";
    }
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).expect("policy written");
    path
}

// ---------------------------------------------------------------------------------------------
// Processes

/// A throwaway `redis-server` on a free loopback port (no persistence), tagged with the test's
/// tag and killed when dropped (`scripts/install-test-deps.sh` installs it).
#[allow(
    dead_code,
    reason = "tests/scaleout.rs uses it; `it` shares the harness"
)]
pub struct RedisServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its TLS port ([`RedisServer::start_tls`]).
    pub tls_port: Option<u16>,
    child: Option<Child>,
}

#[allow(
    dead_code,
    reason = "tests/scaleout.rs uses it; `it` shares the harness"
)]
impl RedisServer {
    /// Starts one on a free port and waits until it answers `PING`.
    pub async fn start(tag: &str) -> Self {
        Self::start_on(free_port(), tag).await
    }

    /// Starts one on `port` (a restart comes back on the same one) and waits for `PING`.
    pub async fn start_on(port: u16, tag: &str) -> Self {
        Self::start_with(port, tag, &[]).await
    }

    /// Starts one that also takes TLS on a free port (`tls_port`): its certificate
    /// `certs/server.pem` and key `certs/server-key.pem`, clients' certificates checked
    /// against `certs/ca.pem` when `require_client_cert` (as `transport_server.py
    /// --make-certs` writes them). Waits for `PING` on the plain port.
    pub async fn start_tls(tag: &str, certs: &Path, require_client_cert: bool) -> Self {
        let server = certs.join("server.pem").display().to_string();
        let key = certs.join("server-key.pem").display().to_string();
        let ca = certs.join("ca.pem").display().to_string();
        let tls_port = free_port().to_string();
        let auth = if require_client_cert { "yes" } else { "no" };
        let args = [
            "--tls-port",
            &tls_port,
            "--tls-cert-file",
            &server,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            auth,
        ];
        let mut store = Self::start_with(free_port(), tag, &args).await;
        store.tls_port = tls_port.parse().ok();
        store
    }

    async fn start_with(port: u16, tag: &str, extra: &[&str]) -> Self {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra)
            .env("MCPB_IT_TAG", tag)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server is installed (scripts/install-test-deps.sh)");
        let server = Self {
            port,
            tls_port: None,
            child: Some(child),
        };
        let started = std::time::Instant::now();
        while !server.pings().await {
            assert!(started.elapsed() < WAIT, "redis-server did not answer PING");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server
    }

    /// Whether it answers `PING` now.
    async fn pings(&self) -> bool {
        use tokio::io::AsyncReadExt as _;
        let Ok(mut conn) = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await else {
            return false;
        };
        let mut reply = [0u8; 7];
        conn.write_all(b"PING\r\n").await.is_ok()
            && conn.read_exact(&mut reply).await.is_ok()
            && &reply == b"+PONG\r\n"
    }

    /// Its `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Sends one inline command (`CLIENT PAUSE 2000 ALL`) and returns the first line of its
    /// reply (`+OK`).
    pub async fn command(&self, line: &str) -> String {
        use tokio::io::AsyncBufReadExt as _;
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .expect("redis-server listens");
        conn.write_all(format!("{line}\r\n").as_bytes())
            .await
            .expect("sent");
        let mut reply = String::new();
        tokio::io::BufReader::new(conn)
            .read_line(&mut reply)
            .await
            .expect("a reply");
        reply.trim_end().to_owned()
    }

    /// Sends `signal` to it (`SIGSTOP`: a store that hangs without closing its connections).
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = self.child.as_ref().and_then(Child::id).expect("running");
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid fits"));
        nix::sys::signal::kill(pid, signal).expect("signal sent");
    }

    /// SIGKILL, and its exit: the store is gone mid-run.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
    }
}

/// Pids of live (not zombie) processes whose environment holds `MCPB_IT_TAG=<tag>`.
pub fn tagged_pids(tag: &str) -> Vec<i32> {
    pids_with_env(&format!("MCPB_IT_TAG={tag}"))
}

/// Pids of live (not zombie) processes whose environment holds `needle` (`NAME=value`).
pub fn pids_with_env(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let tagged = environ.split(|&b| b == 0).any(|kv| kv == needle.as_bytes());
        if tagged && !is_zombie(pid) {
            out.push(pid);
        }
    }
    out
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// The command line of `pid`, NUL-separated args joined with spaces.
pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Waits (up to 10 s) until no tagged process is left; panics listing the survivors.
pub async fn assert_no_leftovers(tag: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = tagged_pids(tag);
        if left.is_empty() {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            let list: Vec<String> = left
                .iter()
                .map(|p| format!("{p}: {}", cmdline(*p)))
                .collect();
            kill_tagged(tag);
            panic!("processes survived the gateway:\n{}", list.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// SIGKILLs every tagged process (cleanup after a failed test).
pub fn kill_tagged(tag: &str) {
    for pid in tagged_pids(tag) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Kills every tagged process when dropped, so that a failing test leaves nothing behind.
#[derive(Debug)]
pub struct TagGuard(pub String);

impl Drop for TagGuard {
    fn drop(&mut self) {
        kill_tagged(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------
// The gateway

/// How the gateway serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Stdio,
    Http,
}

/// The gateway binary, running; killed on drop.
#[derive(Debug)]
pub struct Gateway {
    pub child: Child,
    pub tag: String,
    /// `http://ADDR/mcp` when serving HTTP.
    pub url: Option<String>,
    pub stderr: Arc<Mutex<String>>,
    pub stdio: Option<RawClient>,
    _dir: tempfile::TempDir,
    _guard: TagGuard,
}

/// How to start a [`Gateway`]: [`Gateway::builder`], then what differs from `serve --policy P
/// --stdio` (or `--http 127.0.0.1:0`) over a policy of only upstreams.
#[derive(Debug)]
pub struct GatewayBuilder<'a> {
    test: &'a str,
    mode: Mode,
    downstream: &'a str,
    env: Vec<(&'a str, &'a str)>,
    tag: Option<&'a str>,
}

impl<'a> GatewayBuilder<'a> {
    /// Runs under `tag` (from [`new_tag`]) instead of a new one: the policy written is the
    /// same as [`policy`] writes with that tag (what a test pinned beforehand).
    #[must_use]
    pub fn tag(mut self, tag: &'a str) -> Self {
        self.tag = Some(tag);
        self
    }

    /// TOML written into the policy before the upstreams (`[downstream]`, `[budget]`, ...).
    #[must_use]
    pub fn policy(mut self, downstream: &'a str) -> Self {
        self.downstream = downstream;
        self
    }

    /// Variables added to the gateway's own environment (after the harness's own
    /// `MCP_BUDGET_LOG`, which they may override).
    #[must_use]
    pub fn env(mut self, env: &[(&'a str, &'a str)]) -> Self {
        self.env.extend_from_slice(env);
        self
    }

    /// Starts `mcp-budget serve` with these upstreams and waits for its startup summary.
    pub async fn start(self, ups: &[Up]) -> Gateway {
        Gateway::spawn(self, ups).await
    }
}

impl Gateway {
    /// The one way the tests start the gateway binary as a server and wait until it serves.
    pub fn builder(test: &str, mode: Mode) -> GatewayBuilder<'_> {
        GatewayBuilder {
            test,
            mode,
            downstream: "",
            env: Vec::new(),
            tag: None,
        }
    }

    /// `Gateway::builder(test, mode).start(ups)`: the common case.
    pub async fn start(test: &str, mode: Mode, ups: &[Up]) -> Self {
        Self::builder(test, mode).start(ups).await
    }

    async fn spawn(how: GatewayBuilder<'_>, ups: &[Up]) -> Self {
        let GatewayBuilder {
            test,
            mode,
            downstream,
            env,
            tag,
        } = how;
        let dir = tempfile::tempdir().expect("temp dir");
        let tag = tag.map_or_else(|| new_tag(test), str::to_owned);
        let policy = policy(dir.path(), &tag, downstream, ups);
        let mut cmd = cli(["serve", "--policy"]).arg(&policy).tokio();
        cmd.arg("--ready-timeout-secs")
            .arg("20")
            .env("MCPB_IT_TAG", &tag)
            .env(
                "MCP_BUDGET_LOG",
                std::env::var("IT_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        match mode {
            Mode::Stdio => {
                cmd.arg("--stdio");
            }
            Mode::Http => {
                cmd.arg("--http").arg("127.0.0.1:0");
            }
        }
        let mut child = cmd.spawn().expect("the gateway starts");
        let (stderr, mut ready_rx) = drain_stderr(&mut child, "gw", |line| {
            let line = line.trim();
            match line.strip_prefix("listening on ") {
                Some(rest) => Some(rest.to_owned()),
                None => (line == "serving MCP on stdio").then(String::new),
            }
        });
        let stdio = (mode == Mode::Stdio).then(|| {
            RawClient::new(
                child.stdin.take().expect("piped"),
                child.stdout.take().expect("piped"),
            )
        });
        let ready = tokio::time::timeout(WAIT, ready_rx.recv()).await;
        let url = match ready {
            Ok(Some(url)) => (!url.is_empty()).then_some(url),
            _ => panic!(
                "the gateway did not come up; stderr:\n{}",
                stderr.lock().unwrap()
            ),
        };
        Self {
            child,
            _guard: TagGuard(tag.clone()),
            tag,
            url,
            stderr,
            stdio,
            _dir: dir,
        }
    }

    pub fn url(&self) -> &str {
        self.url.as_deref().expect("serving HTTP")
    }

    /// The policy file it serves (what a reload test edits).
    pub fn policy_file(&self) -> PathBuf {
        self._dir.path().join("policy.toml")
    }

    pub fn client(&mut self) -> &mut RawClient {
        self.stdio.as_mut().expect("serving stdio")
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id().expect("running")).expect("pid fits")
    }

    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Live processes started by the gateway (its upstreams and their children).
    pub fn children(&self) -> Vec<i32> {
        let me = self.child.id().and_then(|p| i32::try_from(p).ok());
        tagged_pids(&self.tag)
            .into_iter()
            .filter(|p| Some(*p) != me)
            .collect()
    }

    /// Sends SIGTERM and waits for the exit; returns how long it took.
    pub async fn terminate(&mut self) -> Duration {
        let started = std::time::Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("signal sent");
        let Ok(waited) = tokio::time::timeout(WAIT, self.child.wait()).await else {
            panic!(
                "the gateway did not exit within {WAIT:?} after SIGTERM; its stderr:\n{}",
                self.log()
            );
        };
        waited.expect("wait works");
        started.elapsed()
    }

    /// Ends the gateway (SIGTERM) and checks that none of its children survived.
    pub async fn stop_and_check(mut self) {
        self.terminate().await;
        assert_no_leftovers(&self.tag).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Raw JSON-RPC client on the gateway's stdio

/// Newline-delimited JSON-RPC over a child's stdin/stdout. Every line received is kept, so a
/// test can check that each request id was answered exactly once.
#[derive(Debug)]
pub struct RawClient {
    stdin: ChildStdin,
    rx: mpsc::UnboundedReceiver<Value>,
    /// Everything received, in order.
    pub seen: Vec<Value>,
    next_id: i64,
}

impl RawClient {
    pub fn new(stdin: ChildStdin, stdout: tokio::process::ChildStdout) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("gateway wrote a non-JSON line ({e}): {line}"));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        Self {
            stdin,
            rx,
            seen: Vec::new(),
            next_id: 1000,
        }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).await.expect("stdin open");
        self.stdin.flush().await.expect("stdin open");
    }

    pub async fn send(&mut self, msg: &Value) {
        let mut line = serde_json::to_vec(msg).expect("serializes");
        line.push(b'\n');
        self.send_raw(&line).await;
    }

    /// Sends a request with a fresh id; returns the id.
    pub async fn start_request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The next message, within `limit`.
    pub async fn next(&mut self, limit: Duration) -> Option<Value> {
        let msg = tokio::time::timeout(limit, self.rx.recv()).await.ok()??;
        self.seen.push(msg.clone());
        Some(msg)
    }

    /// Waits for the answer (result or error) to request `id`.
    pub async fn response(&mut self, id: &Value, limit: Duration) -> Value {
        if let Some(found) = self.seen.iter().find(|m| is_answer_to(m, id)) {
            return found.clone();
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Some(m) if is_answer_to(&m, id) => return m,
                Some(_) => {}
                None => panic!("no answer to {id} within {limit:?}; seen: {:#?}", self.seen),
            }
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params).await;
        self.response(&id, WAIT).await
    }

    pub async fn initialize(&mut self) -> Value {
        let r = self
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "it-raw", "version": "0"}}),
            )
            .await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        r
    }

    pub async fn call_tool(&mut self, name: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": args}))
            .await
    }

    /// Collects everything that arrives within `quiet`.
    pub async fn drain(&mut self, quiet: Duration) {
        while self.next(quiet).await.is_some() {}
    }

    /// How many answers each id got.
    pub fn answer_counts(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for m in &self.seen {
            if m.get("method").is_none() && (m.get("result").is_some() || m.get("error").is_some())
            {
                *counts.entry(m["id"].to_string()).or_insert(0) += 1;
            }
        }
        counts
    }

    /// Asserts that every id in `ids` got exactly one answer and no id got two.
    pub fn assert_answered_once(&self, ids: &[Value]) {
        let counts = self.answer_counts();
        for id in ids {
            assert_eq!(
                counts.get(&id.to_string()).copied().unwrap_or(0),
                1,
                "answers to id {id}; seen: {:#?}",
                self.seen
            );
        }
        // Unreadable messages are answered with id null, one each: only real ids must be unique.
        for (id, n) in counts.iter().filter(|(id, _)| id.as_str() != "null") {
            assert_eq!(*n, 1, "id {id} answered {n} times");
        }
    }
}

fn is_answer_to(m: &Value, id: &Value) -> bool {
    m.get("method").is_none() && m.get("id") == Some(id)
}

/// `error.data.type` of an error response.
pub fn error_type(resp: &Value) -> &str {
    resp["error"]["data"]["type"].as_str().unwrap_or_else(|| {
        panic!("not an error with data.type: {resp}");
    })
}

/// Text of the first content block of a tools/call result.
/// The pid of the gateway's child whose command line contains `needle`.
pub fn child_matching(gw: &Gateway, needle: &str) -> Option<i32> {
    gw.children()
        .into_iter()
        .find(|p| cmdline(*p).contains(needle))
}

pub fn first_text(resp: &Value) -> &str {
    resp["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {resp}"))
}

/// Keeps `child`'s (piped) stderr in the returned log, echoed as `[name] line` when `IT_LOG` is
/// set, and sends what `ready` makes of a line, when it makes something, on the returned channel.
pub fn drain_stderr(
    child: &mut Child,
    name: &'static str,
    ready: fn(&str) -> Option<String>,
) -> (Arc<Mutex<String>>, mpsc::UnboundedReceiver<String>) {
    let stderr = Arc::new(Mutex::new(String::new()));
    let (ready_tx, ready_rx) = mpsc::unbounded_channel::<String>();
    let err = child.stderr.take().expect("piped");
    let log = stderr.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(err).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if std::env::var_os("IT_LOG").is_some() {
                eprintln!("[{name}] {line}");
            }
            if let Some(rest) = ready(&line) {
                let _ = ready_tx.send(rest);
            }
            let mut log = log.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
    (stderr, ready_rx)
}

// ---------------------------------------------------------------------------------------------
// Raw POSTs to the gateway's HTTP endpoint

/// `Accept` of a client that takes either answer shape.
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// The HTTP client a test keeps for all its POSTs, as real clients do (the Python SDK's httpx
/// client, the TS SDK's fetch). One per test, not one per process: its pooled connections
/// belong to the test's runtime, which ends with the test. Cheap to build (see
/// [`http_client_builder`]), so a helper that needs a fresh connection may build its own.
pub fn http_client() -> reqwest::Client {
    http_client_builder().build().expect("an HTTP client")
}

/// The builder of [`http_client`], for a test that sets more (a local address). Its TLS
/// connector is built once per process and shared: reqwest builds one for every client, even
/// for plain HTTP, and that costs 100–300 ms here (`OpenSSL` 3 parses the system CA bundle).
pub fn http_client_builder() -> reqwest::ClientBuilder {
    static TLS: LazyLock<native_tls::TlsConnector> =
        LazyLock::new(|| native_tls::TlsConnector::new().expect("a TLS connector"));
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .tls_backend_preconfigured(TLS.clone())
}

/// An answer to [`post`].
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Answer {
    /// A header's value, `""` when it is absent.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map_or("", |v| v.to_str().expect("a text header"))
    }

    /// The `Mcp-Session-Id` the gateway gave.
    pub fn session(&self) -> Option<String> {
        self.headers
            .get("mcp-session-id")
            .map(|v| v.to_str().expect("a text session id").to_owned())
    }

    /// The body as JSON; for an SSE stream, its last `data:` line; `Null` when neither.
    pub fn json(&self) -> Value {
        let last_event = self
            .text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .next_back();
        match last_event {
            Some(data) => serde_json::from_str(data.trim()),
            None => serde_json::from_str(&self.text),
        }
        .unwrap_or_default()
    }
}

/// POSTs `body` as JSON to `url` with `accept` and `headers` on `client`.
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    accept: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> Answer {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("the gateway answers");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("a whole body");
    Answer {
        status,
        headers,
        text,
    }
}

// ---------------------------------------------------------------------------------------------
// Real clients

/// Runs `tests/peers/py_client.py` (Python `mcp` 2.x) and returns its JSON report.
pub async fn python_client(tag: &str, mode: &str, target: &[&str], plan: &Value) -> Value {
    report(&python_client_output(tag, mode, target, plan).await).0
}

/// The JSON report a Python client printed last, and its stderr; panics when the client failed.
pub fn report(out: &std::process::Output) -> (Value, String) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "python client failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    let report = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("bad report ({e}): {stdout}\n{stderr}"));
    (report, stderr)
}

/// Runs `tests/peers/py_client.py` and returns what it printed, whether it succeeded or not.
pub async fn python_client_output(
    tag: &str,
    mode: &str,
    target: &[&str],
    plan: &Value,
) -> std::process::Output {
    let env = [("MCP_BUDGET_LOG", "warn")];
    py_script_output("py_client.py", tag, mode, target, plan, &env).await
}

/// Runs the Python client `script` (in `tests/peers`) with `MODE`, `PLAN`, the tag and `env`;
/// what it printed, whether it succeeded or not.
pub async fn py_script_output(
    script: &str,
    tag: &str,
    mode: &str,
    target: &[&str],
    plan: &Value,
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(peer_file(script))
        .args(target)
        .env("MODE", mode)
        .env("PLAN", plan.to_string())
        .env("MCPB_IT_TAG", tag)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the Python client finishes in time")
        .expect("the Python client runs")
}

/// Runs the TypeScript SDK client `script` (in `tests/peers`) with `args` and `env` added to
/// the test's environment; the JSON report it printed last (panics when it failed).
pub async fn ts_client(script: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new("node");
    cmd.arg(peer_file(script))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the TypeScript client finishes in time")
        .expect("node runs");
    report(&out).0
}

/// Runs the MCP Inspector CLI (v1) with these arguments; returns (success, stdout, stderr).
pub async fn inspector(tag: &str, args: &[&str]) -> (bool, String, String) {
    // It reads "../package.json" relative to its working directory (TEST-EQUIPMENT §3.1).
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("package.json"), "{}").expect("written");
    let run = dir.path().join("run");
    std::fs::create_dir(&run).expect("created");
    let mut cmd = Command::new("node");
    cmd.arg(peer_file(
        "node_modules/@modelcontextprotocol/inspector-cli/build/index.js",
    ))
    .args(args)
    .current_dir(&run)
    .env("MCPB_IT_TAG", tag)
    .env("MCP_BUDGET_LOG", "warn")
    .stdin(Stdio::null())
    .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the inspector finishes in time")
        .expect("the inspector runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `tools/list` result `serve --stdio` answers on `policy` (one request, then stdin
/// closed), as JSON text.
pub async fn served_list(policy: &Path) -> String {
    // A free port for the policy's HTTP listener, if it has one.
    let mut child = cli(["serve", "--stdio", "--http", "127.0.0.1:0", "--policy"])
        .arg(policy)
        .tokio()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut client = RawClient::new(child.stdin.take().unwrap(), child.stdout.take().unwrap());
    client.initialize().await;
    let list = client.request("tools/list", json!({})).await;
    assert!(list["result"]["tools"].is_array(), "{list}");
    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    list["result"].to_string()
}

/// Runs `mcp-budget check POLICY ARGS...` under `tag` with `env` added: its exit code and
/// stderr.
pub async fn run_check(
    policy: &Path,
    tag: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let out = cli(["check"])
        .arg(policy)
        .args(args)
        .env("MCPB_IT_TAG", tag)
        .envs(env)
        .run_async();
    let out = tokio::time::timeout(WAIT, out)
        .await
        .expect("check ends in time");
    (out.status.code(), out.stderr)
}

/// The gateway command line for a client that starts it over stdio.
pub fn gateway_stdio_args(policy: &Path) -> Vec<String> {
    vec![
        BIN.to_owned(),
        "serve".into(),
        "--policy".into(),
        policy.to_string_lossy().into_owned(),
        "--stdio".into(),
    ]
}

/// Tool names of a Python client report.
pub fn tool_names(report: &Value) -> Vec<String> {
    report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect()
}

/// Starts server-everything in streamable HTTP mode on a free localhost port; killed on drop.
pub async fn everything_http(tag: &str) -> (Child, String) {
    everything_http_on(tag, free_port()).await
}

/// server-everything in streamable HTTP mode on `port`; killed on drop.
pub async fn everything_http_on(tag: &str, port: u16) -> (Child, String) {
    let mut cmd = Command::new(node_bin("mcp-server-everything"));
    cmd.arg("streamableHttp")
        .env("PORT", port.to_string())
        .env(
            "NODE_OPTIONS",
            format!("--require {}", peer_file("bind-localhost.cjs")),
        )
        .env("MCPB_IT_TAG", tag)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let child = cmd.spawn().expect("server-everything starts");
    let ready = tokio::time::timeout(WAIT, async {
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(ready.is_ok(), "server-everything HTTP did not start");
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

// ---------------------------------------------------------------------------------------------
// The era fixture and its client (tests/it/eras.rs)

/// `tests/peers/era_server.py --http` on a free localhost port, with its stderr kept (it logs
/// the era of every request); killed on drop.
#[derive(Debug)]
pub struct EraHttp {
    /// Killed on drop.
    _child: Child,
    pub url: String,
    pub stderr: Arc<Mutex<String>>,
}

impl EraHttp {
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

/// Starts the era fixture over streamable HTTP in `era` and waits until it listens.
pub async fn era_server_http(tag: &str, era: &str) -> EraHttp {
    let port = free_port();
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(peer_file("era_server.py"))
        .args(["--http", &port.to_string(), "--era", era])
        .env("MCPB_IT_TAG", tag)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("the era fixture starts");
    let (stderr, mut ready_rx) = drain_stderr(&mut child, "era", |line| {
        line.trim().strip_prefix("listening on ").map(str::to_owned)
    });
    let Ok(Some(url)) = tokio::time::timeout(WAIT, ready_rx.recv()).await else {
        panic!(
            "the era fixture did not come up; stderr:\n{}",
            stderr.lock().unwrap()
        );
    };
    EraHttp {
        _child: child,
        url,
        stderr,
    }
}

// ---------------------------------------------------------------------------------------------
// The era matrix (tests/it/eras.rs, tests/it/rmcp_eras.rs)

/// The protocol era of `server/discover` and per-request `_meta`.
pub const MODERN: &str = "2026-07-28";
/// The era of the `initialize` handshake.
pub const LEGACY: &str = "2025-11-25";

/// The upstream behind the gateway in one cell of the era matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upstream {
    /// `era_server.py --era modern`
    Modern,
    /// `era_server.py --era legacy`
    Legacy,
    /// `era_server.py --era dual`
    Dual,
    /// server-everything (legacy only)
    Everything,
    /// mcp-server-time (dual)
    Time,
}

impl Upstream {
    /// The upstream's name in the policy (tools are `<name>__<tool>`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Modern | Self::Legacy | Self::Dual => "era",
            Self::Everything => "everything",
            Self::Time => "time",
        }
    }

    pub fn era_flag(self) -> &'static str {
        match self {
            Self::Modern => "modern",
            Self::Legacy => "legacy",
            Self::Dual => "dual",
            Self::Everything | Self::Time => unreachable!("not the era fixture"),
        }
    }

    pub fn is_fixture(self) -> bool {
        matches!(self, Self::Modern | Self::Legacy | Self::Dual)
    }
}

/// Client → gateway and gateway → upstream, in one cell of the era matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
}

/// `up` as the gateway's upstream (timeout 10 s) over `transport`, and the HTTP server it needs,
/// started under `tag`: the era fixture or server-everything, both killed on drop
/// (mcp-server-time always runs over stdio).
pub async fn era_upstream(
    up: Upstream,
    transport: Transport,
    tag: &str,
) -> (Up, Option<EraHttp>, Option<Child>) {
    let (mut fixture, mut everything) = (None, None);
    let upstream = match (up, transport) {
        (Upstream::Time, _) => Up::time("time"),
        (Upstream::Everything, Transport::Stdio) => Up::everything("everything"),
        (Upstream::Everything, Transport::Http) => {
            let (child, url) = everything_http(tag).await;
            everything = Some(child);
            Up::http("everything", &url)
        }
        (_, Transport::Stdio) => Up::era_server("era", up.era_flag()),
        (_, Transport::Http) => {
            let f = era_server_http(tag, up.era_flag()).await;
            let u = Up::http("era", &f.url);
            fixture = Some(f);
            u
        }
    };
    (upstream.timeout(10), fixture, everything)
}

/// Waits (up to `limit`) until `log()` contains `needle`.
pub async fn log_shows(log: impl Fn() -> String, needle: &str, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if log().contains(needle) {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The protocol version the gateway's startup summary reports for upstream `name`
/// (`  <name>  <transport> ready protocol <version> — …`).
pub fn summary_protocol(log: &str, name: &str) -> Option<String> {
    log.lines().find_map(|line| {
        let rest = line.trim().strip_prefix(name)?;
        if !rest.starts_with(char::is_whitespace) {
            return None;
        }
        let version = rest.split(" ready protocol ").nth(1)?;
        version.split_whitespace().next().map(str::to_owned)
    })
}

/// Runs `tests/peers/era_client.py` (Python `mcp` 2.x) in `mode` (`auto` = the SDK default,
/// 2026-07-28 when offered; `legacy`); returns its JSON report and its stderr (which holds the
/// gateway's log when the client started the gateway over stdio).
pub async fn era_client(tag: &str, mode: &str, target: &[&str], plan: &Value) -> (Value, String) {
    let env = [("MCP_BUDGET_LOG", "info"), ("NO_COLOR", "1")];
    report(&py_script_output("era_client.py", tag, mode, target, plan, &env).await)
}
