//! Scale-out, for real: 2025-era sessions with sealed ids (`[sessions] seal_key_env`) outlive a
//! gateway restart and move between replicas behind HAProxy (round-robin, no stickiness), with
//! the Python and TypeScript SDKs as clients and `server-everything` as the upstream; and a
//! load run of 200 concurrent sessions through HAProxy with an upstream crash and a replica
//! restart injected, where no call may be lost or answered twice.
//!
//! Loopback only; every process is tagged and killed at the end. The three tests take turns
//! (one lock): each runs three gateways, and together they would crowd a small machine.
//! `scripts/load-scaleout.sh` runs the load test bigger (`SCALEOUT_CLIENTS`, `SCALEOUT_SECS`).
//!
//! Shared limits (`[state] backend = "redis"`, issue 34): three replicas behind HAProxy and one
//! real `redis-server` let a client through at its rate, not three times it (memory, the
//! baseline, does), and when the store is killed mid-run every call is still answered; when it
//! flaps or answers near `timeout_ms`, the client still gets about its rate (`flap`).
//!
//! Kept results (issue 54): a result spilled on one replica is read through another
//! (`results`).
//!
//! Needs `scripts/install-test-deps.sh`: the peers, `haproxy` and `redis-server` (Debian
//! packages).
#![allow(clippy::unwrap_used, clippy::print_stderr, clippy::doc_markdown)] // test helpers; the load figures are printed; HAProxy is a name
#![allow(
    clippy::disallowed_methods,
    reason = "crate::lock is the library's: a test's std lock unwraps, and a poisoned one fails the test"
)]

#[path = "it/harness.rs"]
#[allow(dead_code, unreachable_pub)]
mod harness;

#[path = "scaleout/faults.rs"]
mod faults;
#[path = "scaleout/flap.rs"]
mod flap;
#[path = "scaleout/relay.rs"]
mod relay;
#[path = "scaleout/results.rs"]
mod results;
#[path = "scaleout/usage.rs"]
mod usage;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::{Up, WAIT, free_port, peer_file, venv_bin};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The seal key every replica shares (test only).
const SEAL_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// The tests take turns: each runs three gateways.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The policy every replica serves: `server-everything`, sealed session ids, and the caps an
/// HTTP proxy in front needs (every connection and session comes from its address).
fn write_policy(dir: &Path, tag: &str) -> PathBuf {
    let downstream = "max_sessions_per_client = 100000\nmax_connections = 4096\n\
                      max_connections_per_client = 4096\n\n\
                      [sessions]\nseal_key_env = \"MCP_BUDGET_SEAL_KEY\"\n";
    harness::policy(dir, tag, downstream, &[Up::everything("e")])
}

/// Starts `cmd` with `tag` in its environment (the leftover check finds it by that), killed
/// when dropped; `io` is its stdin, stdout and stderr.
fn spawn_tagged(cmd: &mut Command, tag: &str, io: [Stdio; 3], what: &str) -> Child {
    let [stdin, stdout, stderr] = io;
    cmd.env("MCPB_IT_TAG", tag)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{what} does not start: {e}"))
}

/// One gateway process on a fixed port (a restart comes back on the same one).
struct Replica {
    port: u16,
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Replica {
    async fn start(policy: &Path, port: u16, tag: &str) -> Self {
        Self::start_with(policy, port, tag, &[]).await
    }

    /// [`Replica::start`] with `env` set too (a variable overrides the defaults here).
    async fn start_with(policy: &Path, port: u16, tag: &str, env: &[(&str, String)]) -> Self {
        let mut cmd = harness::cli(["serve", "--policy"]).arg(policy).tokio();
        cmd.arg("--http")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--ready-timeout-secs")
            .arg("20")
            .env("MCP_BUDGET_SEAL_KEY", SEAL_KEY)
            .env("MCP_BUDGET_LOG", "warn")
            .env("NO_COLOR", "1")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        let io = [Stdio::null(), Stdio::null(), Stdio::piped()];
        let mut child = spawn_tagged(&mut cmd, tag, io, "the gateway");
        let (log, mut ready) = harness::drain_stderr(&mut child, "gw", |line| {
            line.trim().strip_prefix("listening on ").map(str::to_owned)
        });
        if !matches!(tokio::time::timeout(WAIT, ready.recv()).await, Ok(Some(_))) {
            panic!("a gateway did not come up:\n{}", log.lock().unwrap());
        }
        Self { port, child, log }
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id().expect("running")).unwrap()
    }

    /// SIGKILL: no goodbye to anyone.
    async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }

    /// SIGTERM, and its exit (bounded): the gateway stops its upstreams itself, which the
    /// leftover check then sees. (A SIGKILLed gateway's children end only when they notice
    /// their stdin closed, which a test cannot time.)
    async fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.pid());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal sent");
        if tokio::time::timeout(WAIT, self.child.wait()).await.is_err() {
            panic!("a gateway did not exit after SIGTERM:\n{}", self.log());
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

/// Pids of the live children of `parent`.
fn children_of(parent: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() != Some(&"Z") && fields.get(1) == Some(&parent.to_string().as_str()) {
            out.push(pid);
        }
    }
    out
}

/// HAProxy in front of `ports`: round-robin per request, no stickiness; a refused connection
/// is tried on the next server (a replica that is down), nothing else is retried.
struct Haproxy {
    port: u16,
    stats_port: u16,
    _child: Child,
    _dir: tempfile::TempDir,
}

impl Haproxy {
    async fn start(ports: &[u16], tag: &str) -> Self {
        Self::start_balanced(ports, tag, "  balance roundrobin\n").await
    }

    /// HAProxy in front of `ports` with `balance` (the backend's balancing lines).
    async fn start_balanced(ports: &[u16], tag: &str, balance: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (port, stats_port) = (free_port(), free_port());
        let servers: String = ports
            .iter()
            .enumerate()
            .map(|(i, p)| format!("  server g{} 127.0.0.1:{p}\n", i + 1))
            .collect();
        let config = format!(
            "global\n  maxconn 4000\n\
             defaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  \
             timeout server 60s\n  retries 3\n  option redispatch 1\n\
             frontend mcp\n  bind 127.0.0.1:{port}\n  default_backend gateways\n\
             frontend stats\n  bind 127.0.0.1:{stats_port}\n  stats enable\n  stats uri /stats\n\
             backend gateways\n{balance}  \
             default-server check inter 300ms fall 1 rise 1\n{servers}"
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let haproxy =
            which("haproxy").expect("haproxy is installed (scripts/install-test-deps.sh)");
        let mut cmd = Command::new(haproxy);
        cmd.arg("-db").arg("-f").arg(&path);
        let io = [Stdio::null(), Stdio::null(), Stdio::null()];
        let child = spawn_tagged(&mut cmd, tag, io, "haproxy");
        let started = std::time::Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(started.elapsed() < WAIT, "haproxy did not listen");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self {
            port,
            stats_port,
            _child: child,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Each gateway's state as HAProxy's checks see it (`UP`, `DOWN`, ...), by name.
    async fn states(&self) -> Vec<(String, String)> {
        self.server_column("status")
            .await
            .into_iter()
            .map(|(name, state)| (name, state.split(' ').next().unwrap_or("").to_owned()))
            .collect()
    }

    /// Responses each gateway sent through HAProxy (`hrsp_2xx` of its server line), by name.
    async fn answers_per_server(&self) -> Vec<(String, u64)> {
        self.server_column("hrsp_2xx")
            .await
            .into_iter()
            .map(|(name, n)| (name, n.parse().unwrap_or(0)))
            .collect()
    }

    /// One column of the stats page for each gateway's server line, by name.
    async fn server_column(&self, column: &str) -> Vec<(String, String)> {
        let url = format!("http://127.0.0.1:{}/stats;csv", self.stats_port);
        let csv = reqwest::get(url).await.unwrap().text().await.unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines
            .next()
            .unwrap()
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let (px, sv, wanted) = (col("pxname"), col("svname"), col(column));
        lines
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f[px] == "gateways" && f[sv].starts_with('g'))
            .map(|f| (f[sv].to_owned(), f[wanted].to_owned()))
            .collect()
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Three replicas of one policy, each on its own port.
async fn replicas(policy: &Path, tag: &str) -> Vec<Replica> {
    let ports = [free_port(), free_port(), free_port()];
    let started = ports.map(|port| Replica::start(policy, port, tag));
    futures::future::join_all(started).await
}

/// A client script driven over its stdin and stdout: it pauses at `{"op": "pause"}` steps.
struct Scripted {
    name: &'static str,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Scripted {
    fn python(script: &str, url: &str, env: &[(&str, String)], tag: &str) -> Self {
        let mut cmd = Command::new(venv_bin("python"));
        cmd.arg(peer_file(script)).arg(url);
        Self::spawn("python", cmd, env, tag)
    }

    fn node(script: &str, url: &str, env: &[(&str, String)], tag: &str) -> Self {
        // `node` from PATH, as the npm peers' own scripts use it.
        let mut cmd = Command::new("node");
        cmd.arg(peer_file(script)).arg(url);
        Self::spawn("node", cmd, env, tag)
    }

    fn spawn(name: &'static str, mut cmd: Command, env: &[(&str, String)], tag: &str) -> Self {
        cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        let io = [Stdio::piped(), Stdio::piped(), Stdio::inherit()];
        let mut child = spawn_tagged(&mut cmd, tag, io, name);
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            name,
            child,
            stdin,
            lines,
        }
    }

    /// The next JSON line it prints, within `limit`.
    async fn next(&mut self, limit: Duration) -> Value {
        let line = tokio::time::timeout(limit, self.lines.next_line()).await;
        let line = line
            .unwrap_or_else(|_| panic!("{}: nothing printed in {limit:?}", self.name))
            .unwrap()
            .unwrap_or_else(|| panic!("{}: exited without a report", self.name));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{}: {e}: {line}", self.name))
    }

    async fn resume(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn report(mut self, limit: Duration) -> Value {
        let report = self.next(limit).await;
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
        report
    }
}

/// The steps of one session: list, a call, a call with progress over the POST's SSE; a pause
/// (the test restarts or kills gateways); the same again, and more calls so that they land on
/// every replica.
fn session_plan() -> Value {
    let call =
        |a: u32, b: u32| json!({"op": "call", "name": "e__get-sum", "args": {"a": a, "b": b}});
    let progress = json!({"op": "call", "name": "e__trigger-long-running-operation",
                          "args": {"duration": 1, "steps": 3}, "progress": true});
    json!({"steps": [
        {"op": "list_tools"}, call(1, 2), progress.clone(),
        {"op": "pause"},
        {"op": "list_tools"}, call(3, 4), progress, call(5, 6), call(7, 8), call(9, 10),
    ]})
}

/// What every session client must show: all steps answered, one `initialize`, one session id
/// on every request, progress seen, the sums right.
fn assert_one_session(name: &str, report: &Value) {
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 9, "{name}: {report:#}");
    for step in steps {
        assert!(
            step.get("error").is_none(),
            "{name}: a step failed: {step:#}\n{report:#}"
        );
    }
    assert_eq!(
        report["initializes"], 1,
        "{name}: initialized again: {report:#}"
    );
    let sessions: std::collections::BTreeSet<&str> = report["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["session"].as_str())
        .collect();
    assert_eq!(
        sessions.len(),
        1,
        "{name}: more than one session id: {sessions:?}"
    );
    assert!(
        sessions.iter().all(|s| s.starts_with("s1.")),
        "{name}: {sessions:?}"
    );
    let texts: Vec<String> = steps
        .iter()
        .filter(|s| s["op"] == "call")
        .map(|s| {
            s["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    for (at, sum) in [(0, "3"), (2, "7"), (4, "11"), (5, "15"), (6, "19")] {
        assert!(texts[at].contains(sum), "{name}: {texts:?}");
    }
    for at in [1, 3] {
        let progress = steps.iter().filter(|s| s["op"] == "call").nth(at).unwrap();
        assert_eq!(
            progress["progress"].as_array().map(Vec::len),
            Some(3),
            "{name}: progress over the POST's SSE: {progress:#}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_session_outlives_a_gateway_restart() {
    let _turn = TURN.lock().await;
    let tag = harness::new_tag("scaleout-restart");
    let _guard = harness::TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path(), &tag);
    let port = free_port();
    let mut gateway = Replica::start(&policy, port, &tag).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let plan = [("PLAN", session_plan().to_string())];
    let mut client = Scripted::python("session_client.py", &url, &plan, &tag);
    assert_eq!(client.next(WAIT).await, json!({"paused": 1}));

    gateway.kill().await;
    let gateway = Replica::start(&policy, port, &tag).await;
    client.resume("go").await;
    let report = client.report(Duration::from_secs(60)).await;
    assert_one_session("python", &report);
    assert!(
        gateway.log().contains("sessions: sealed ids"),
        "{}",
        gateway.log()
    );
    drop(gateway);
    harness::assert_no_leftovers(&tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_ts_sessions_span_three_replicas_behind_haproxy() {
    let _turn = TURN.lock().await;
    let tag = harness::new_tag("scaleout-haproxy");
    let _guard = harness::TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path(), &tag);
    let mut gateways = replicas(&policy, &tag).await;
    let ports: Vec<u16> = gateways.iter().map(|g| g.port).collect();
    let haproxy = Haproxy::start(&ports, &tag).await;
    let plan = [("PLAN", session_plan().to_string())];
    let mut python = Scripted::python("session_client.py", &haproxy.url(), &plan, &tag);
    let mut ts = Scripted::node("ts_session_client.mjs", &haproxy.url(), &plan, &tag);
    assert_eq!(python.next(WAIT).await, json!({"paused": 1}));
    assert_eq!(ts.next(WAIT).await, json!({"paused": 1}));

    // Mid-run, one replica dies and comes back; the sessions go on on the others meanwhile.
    gateways[1].kill().await;
    python.resume("go").await;
    ts.resume("go").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    gateways[1] = Replica::start(&policy, ports[1], &tag).await;
    let (python, ts) = tokio::join!(
        python.report(Duration::from_secs(60)),
        ts.report(Duration::from_secs(60))
    );
    assert_one_session("python", &python);
    assert_one_session("ts", &ts);
    let answers = haproxy.answers_per_server().await;
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert!(
        answers.iter().all(|(_, n)| *n > 0),
        "every replica served the sessions: {answers:?}"
    );
    for gateway in gateways {
        gateway.stop().await;
    }
    drop(haproxy);
    harness::assert_no_leftovers(&tag).await;
}

/// How many sessions and seconds the load run has (`SCALEOUT_CLIENTS`, `SCALEOUT_SECS`: the
/// script runs it bigger).
fn load_size() -> (usize, u64) {
    fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }
    (env("SCALEOUT_CLIENTS", 200), env("SCALEOUT_SECS", 3))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_run_with_an_upstream_crash_and_a_replica_restart_loses_no_call() {
    let _turn = TURN.lock().await;
    let (clients, phase_secs) = load_size();
    let phase = Duration::from_secs(phase_secs);
    let tag = harness::new_tag("scaleout-load");
    let _guard = harness::TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path(), &tag);
    let mut gateways = replicas(&policy, &tag).await;
    let ports: Vec<u16> = gateways.iter().map(|g| g.port).collect();
    let haproxy = Haproxy::start(&ports, &tag).await;
    let env = [
        ("CLIENTS", clients.to_string()),
        ("MAX_SECS", (phase_secs * 10 + 60).to_string()),
    ];
    let mut load = Scripted::python("load_client.py", &haproxy.url(), &env, &tag);
    // Opening the sessions takes longer the more there are (the script runs thousands).
    let opening = Duration::from_secs(120 + clients as u64 / 4);
    let running = load.next(opening).await;
    assert_eq!(running["sessions"], clients, "{running}");

    // The upstream of replica 1 crashes: the gateway answers its calls in flight with errors
    // and starts it again.
    tokio::time::sleep(phase).await;
    let upstream = children_of(gateways[0].pid());
    assert_eq!(upstream.len(), 1, "{upstream:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(upstream[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // Replica 2 is killed and started again: its sessions go on elsewhere, then on it again.
    tokio::time::sleep(phase).await;
    gateways[1].kill().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    gateways[1] = Replica::start(&policy, ports[1], &tag).await;
    tokio::time::sleep(phase).await;
    load.resume("stop").await;
    let report = load.report(opening).await;
    eprintln!(
        "scaleout load ({clients} sessions, 3 replicas behind HAProxy, an upstream crash and a replica restart): {report}"
    );

    let restarted = children_of(gateways[0].pid());
    assert!(
        restarted.len() == 1 && restarted != upstream,
        "the crashed upstream was started again: {restarted:?}\n{}",
        gateways[0].log()
    );
    let n = |k: &str| report[k].as_u64().unwrap();
    assert_eq!(
        n("lost"),
        0,
        "calls with no answer and no error: {report:#}"
    );
    assert_eq!(n("duplicated"), 0, "calls answered twice: {report:#}");
    assert_eq!(n("wrong"), 0, "answers that are not the sum: {report:#}");
    assert_eq!(n("answered") + n("errored"), n("calls"), "{report:#}");
    assert!(n("answered") > n("errored"), "{report:#}");
    let errors = report["errors"].as_object().unwrap();
    assert!(
        !errors.keys().any(|k| k.contains("session")),
        "every replica served every session: {report:#}"
    );
    for gateway in gateways {
        gateway.stop().await;
    }
    drop(haproxy);
    harness::assert_no_leftovers(&tag).await;
}

/// A raw POST to `url` as the client with API key `key`, on session `session`.
async fn post_as(url: &str, key: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
    let mut request = harness::http_client()
        .post(url)
        .header("x-api-key", key)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    request.send().await.unwrap()
}

async fn error_type_of(resp: reqwest::Response) -> (u16, String) {
    let status = resp.status().as_u16();
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null);
    (
        status,
        body["error"]["data"]["type"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_id_serves_only_its_client_and_delete_ends_it_where_it_was_sent() {
    use sha2::Digest as _;
    let _turn = TURN.lock().await;
    let tag = harness::new_tag("scaleout-owner");
    let _guard = harness::TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path(), &tag);
    let digest = |key: &str| format!("{:x}", sha2::Sha256::digest(key.as_bytes()));
    let clients = format!(
        "\n[[client]]\nname = \"alice\"\napi_key_sha256 = \"{}\"\nallow = [\"*\"]\n\
         \n[[client]]\nname = \"bob\"\napi_key_sha256 = \"{}\"\nallow = [\"*\"]\n",
        digest("key-a"),
        digest("key-b")
    );
    let text = std::fs::read_to_string(&policy).unwrap() + &clients;
    std::fs::write(&policy, text).unwrap();
    let (a, b) = (free_port(), free_port());
    let (_first, _second) = tokio::join!(
        Replica::start(&policy, a, &tag),
        Replica::start(&policy, b, &tag)
    );
    let (url_a, url_b) = (
        format!("http://127.0.0.1:{a}/mcp"),
        format!("http://127.0.0.1:{b}/mcp"),
    );
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let resp = post_as(&url_a, "key-a", None, &init).await;
    assert_eq!(resp.status(), 200);
    let id = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(id.starts_with("s1."), "{id}");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});

    // Replica B never saw the session: bob may not use it, alice may.
    let foreign = error_type_of(post_as(&url_b, "key-b", Some(&id), &list).await).await;
    assert_eq!(foreign, (403, "mcp_budget.session.foreign".into()));
    let resp = post_as(&url_b, "key-a", Some(&id), &list).await;
    assert_eq!(resp.status(), 200);
    let listed: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{listed}"
    );

    // An altered id is nobody's session.
    let mut altered = id.clone().into_bytes();
    let at = altered.len() - 5;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let unknown = error_type_of(post_as(&url_b, "key-a", Some(&altered), &list).await).await;
    assert_eq!(unknown, (404, "mcp_budget.session.unknown".into()));

    // DELETE on B ends it there: B refuses it from now on, even to alice.
    let delete = |url: String, key: &'static str| {
        let id = id.clone();
        async move {
            harness::http_client()
                .delete(url)
                .header("x-api-key", key)
                .header("mcp-session-id", id)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(delete(url_b.clone(), "key-b").await, 403);
    assert_eq!(delete(url_b.clone(), "key-a").await, 200);
    let ended = error_type_of(post_as(&url_b, "key-a", Some(&id), &list).await).await;
    assert_eq!(ended, (404, "mcp_budget.session.unknown".into()));
    assert_eq!(delete(url_b.clone(), "key-a").await, 404);
    drop((_first, _second));
    harness::assert_no_leftovers(&tag).await;
}

// ---------------------------------------------------------------------------------------------
// Shared limits ([state], issue 34)

/// The client's rate in the limits tests: 10 calls a second, bursts of 10.
const RATE: f64 = 10.0;
const BURST: f64 = 10.0;

/// A policy for the limits tests in its own folder of `dir`: `server-everything`, sealed ids,
/// `[limits]` for the anonymous client, then `extra` (`[state]`, `[admin]`).
fn limits_policy(dir: &Path, name: &str, tag: &str, extra: &str) -> PathBuf {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let path = write_policy(&dir, tag);
    let text = std::fs::read_to_string(&path).unwrap()
        + &format!("\n[limits]\ncalls_per_sec = {RATE}\nburst = {BURST}\n{extra}");
    std::fs::write(&path, text).unwrap();
    path
}

/// What the calls of a run got.
#[derive(Debug, Default)]
struct Tally {
    admitted: u64,
    limited: u64,
    /// Other answers (error types) and calls with no answer in time, by what happened.
    other: std::collections::BTreeMap<String, u64>,
}

impl Tally {
    fn add(&mut self, other: Self) {
        self.admitted += other.admitted;
        self.limited += other.limited;
        for (k, n) in other.other {
            *self.other.entry(k).or_default() += n;
        }
    }
}

/// A JSON-RPC POST to `url` on `session`: the answer's message (JSON or one SSE event).
async fn post_mcp(
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> Result<(Value, Option<String>), String> {
    post_mcp_as(url, None, session, body).await
}

/// [`post_mcp`] as the client with API key `key`.
async fn post_mcp_as(
    url: &str,
    key: Option<&str>,
    session: Option<&str>,
    body: &Value,
) -> Result<(Value, Option<String>), String> {
    let mut request = harness::http_client()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .timeout(Duration::from_secs(5))
        .body(body.to_string());
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let resp = request
        .send()
        .await
        .map_err(|e| format!("no answer: {e}"))?;
    let id = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let status = resp.status();
    let text = resp.text().await.map_err(|e| format!("no body: {e}"))?;
    if !status.is_success() {
        return Err(format!("HTTP {status}: {text}"));
    }
    // JSON, or SSE events: the answer is the one with an id and no method (notifications
    // and server requests, such as server-everything's `roots/list`, may come first).
    let message = serde_json::from_str(&text).unwrap_or_else(|_| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id").is_some() && m.get("method").is_none())
            .unwrap_or(Value::Null)
    });
    Ok((message, id))
}

/// A 2025-era session opened through `url` (sealed, so every replica serves it).
async fn open_session(url: &str) -> String {
    open_session_as(url, None).await
}

/// [`open_session`] as the client with API key `key`.
async fn open_session_as(url: &str, key: Option<&str>) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "limits", "version": "0"}}});
    let (_, id) = post_mcp_as(url, key, None, &init).await.unwrap();
    let id = id.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let _ = post_mcp_as(url, key, Some(&id), &initialized).await;
    id
}

/// `workers` callers calling as fast as they can through `url` for `secs`: what they got.
async fn hammer(url: &str, session: &str, workers: usize, secs: Duration) -> Tally {
    let deadline = tokio::time::Instant::now() + secs;
    let one = |w: usize| {
        let (url, session) = (url.to_owned(), session.to_owned());
        async move {
            let mut tally = Tally::default();
            let mut n = 0u64;
            while tokio::time::Instant::now() < deadline {
                n += 1;
                let call = json!({"jsonrpc": "2.0", "id": format!("{w}-{n}"), "method": "tools/call",
                                  "params": {"name": "e__get-sum", "arguments": {"a": 1, "b": 2}}});
                match post_mcp(&url, Some(&session), &call).await {
                    Ok((m, _))
                        if m["result"]["content"][0]["text"]
                            .as_str()
                            .is_some_and(|t| t.contains('3')) =>
                    {
                        tally.admitted += 1;
                    }
                    Ok((m, _)) if m["error"]["data"]["type"] == "mcp_budget.limit.rate" => {
                        assert!(m["error"]["data"]["retryAfterMs"].as_u64().is_some(), "{m}");
                        tally.limited += 1;
                    }
                    Ok((m, _)) => {
                        let what = match m["error"]["data"]["type"].as_str() {
                            Some(kind) => kind.to_owned(),
                            None => format!("unexpected: {m}"),
                        };
                        *tally.other.entry(what).or_default() += 1;
                    }
                    Err(e) => *tally.other.entry(e).or_default() += 1,
                }
            }
            tally
        }
    };
    let mut total = Tally::default();
    for t in futures::future::join_all((0..workers).map(one)).await {
        total.add(t);
    }
    total
}

/// What a client at `RATE`, `BURST` gets through in `secs`, all replicas together.
fn expected(secs: f64) -> f64 {
    BURST + RATE * secs
}

/// The store of `backend` (`redis`: a new `redis-server`; else none), the replicas'
/// environment and the policy's `[state]` section for it.
async fn backend_of(
    backend: &str,
    tag: &str,
) -> (
    Option<harness::RedisServer>,
    Vec<(&'static str, String)>,
    String,
) {
    if backend != "redis" {
        return (None, Vec::new(), String::new());
    }
    let server = harness::RedisServer::start(tag).await;
    let env = vec![("MCP_BUDGET_REDIS_URL", server.url())];
    let state = format!(
        // 250 ms, not the default 25: these tests measure sharing, and a debug build on a busy
        // small machine misses 25 ms now and then (an episode: then each replica its local
        // share, which the store-down test covers).
        "\n[state]\nbackend = \"redis\"\nurl_env = \"MCP_BUDGET_REDIS_URL\"\n\
         key_prefix = \"{tag}:\"\ntimeout_ms = 250\n"
    );
    (Some(server), env, state)
}

/// The sum of metric `name`'s series on the admin listener at `port`, by their labels.
async fn metric(port: u16, name: &str) -> Vec<(String, u64)> {
    let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix('{'))
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once(' ')?;
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let n = value.parse::<f64>().ok()? as u64;
            Some((labels.trim_end_matches('}').to_owned(), n))
        })
        .collect()
}

/// One run of the limits test: three replicas of `backend` behind HAProxy, one caller pool.
async fn limits_run(backend: &str) -> (Tally, f64) {
    let tag = harness::new_tag(&format!("scaleout-limits-{backend}"));
    let _guard = harness::TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let (redis, env, state) = backend_of(backend, &tag).await;
    let policy = limits_policy(dir.path(), "p", &tag, &state);
    let ports = [free_port(), free_port(), free_port()];
    let gateways =
        futures::future::join_all(ports.map(|p| Replica::start_with(&policy, p, &tag, &env))).await;
    let haproxy = Haproxy::start(&ports, &tag).await;
    let session = open_session(&haproxy.url()).await;
    let secs = Duration::from_secs(3);
    let started = std::time::Instant::now();
    let tally = hammer(&haproxy.url(), &session, 6, secs).await;
    let elapsed = started.elapsed().as_secs_f64();
    for (i, gateway) in gateways.iter().enumerate() {
        let episodes = gateway.log().matches("State store unavailable").count();
        if episodes > 0 {
            eprintln!(
                "replica {i}: {episodes} store episode(s):\n{}",
                gateway.log()
            );
        }
    }
    drop(haproxy);
    stop_all(gateways, redis, &tag).await;
    (tally, elapsed)
}

/// Stops `gateways` (SIGTERM, each), kills `redis`, and checks that nothing tagged `tag` is
/// left.
async fn stop_all(gateways: Vec<Replica>, redis: Option<harness::RedisServer>, tag: &str) {
    for gateway in gateways {
        gateway.stop().await;
    }
    if let Some(mut redis) = redis {
        redis.kill().await;
    }
    harness::assert_no_leftovers(tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_a_clients_rate_through_redis_and_memory_lets_three_times_through() {
    let _turn = TURN.lock().await;
    let (redis, secs) = limits_run("redis").await;
    let want = expected(secs);
    #[allow(clippy::cast_precision_loss)]
    let got = redis.admitted as f64;
    eprintln!(
        "shared limits, redis: {} admitted of {} in {secs:.2} s (configured {want:.0}: {:+.1} %), {} refused, other {:?}",
        redis.admitted,
        redis.admitted + redis.limited,
        (got / want - 1.0) * 100.0,
        redis.limited,
        redis.other
    );
    assert!(
        redis.other.is_empty(),
        "every call answered, admitted or limited: {redis:?}"
    );
    assert!(
        redis.limited > redis.admitted,
        "the callers went over the rate: {redis:?}"
    );
    assert!(
        (got - want).abs() <= want * 0.2,
        "redis: {got} admitted, {want:.0} configured"
    );

    let (memory, secs) = limits_run("memory").await;
    let want = expected(secs);
    #[allow(clippy::cast_precision_loss)]
    let got = memory.admitted as f64;
    eprintln!(
        "shared limits, memory (baseline): {} admitted of {} in {secs:.2} s (configured {want:.0}: {:.2}x), other {:?}",
        memory.admitted,
        memory.admitted + memory.limited,
        got / want,
        memory.other
    );
    assert!(memory.other.is_empty(), "{memory:?}");
    assert!(
        got >= want * 2.4,
        "each replica its own buckets: about three times the rate, got {got} of {want:.0}"
    );
}

/// `mcp_budget_state_fallbacks_total`, all reasons together, on the admin listener at `port`.
async fn fallbacks(port: u16) -> u64 {
    let series = metric(port, "mcp_budget_state_fallbacks_total").await;
    series.iter().map(|(_, n)| n).sum()
}

/// What a store-down run does to the store.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL: connections close at once.
    Kill,
    /// SIGSTOP for 2 s, then SIGCONT: a store that hangs with its connections open.
    Stop,
    /// `CLIENT PAUSE 2000 ALL`: the store holds every client's commands for 2 s.
    Pause,
    /// SIGKILL and a new empty store on the same port (no persistence: every key lost).
    RestartEmpty,
}

/// Three replicas of `[state] backend = "redis"` with `on_store_error = mode` (each with its
/// admin listener) behind HAProxy, and their store.
struct StoreDown {
    tag: String,
    _guard: harness::TagGuard,
    _dir: tempfile::TempDir,
    redis: harness::RedisServer,
    gateways: Vec<Replica>,
    admin: [u16; 3],
    haproxy: Haproxy,
    session: String,
}

impl StoreDown {
    async fn start(mode: &str) -> Self {
        let tag = harness::new_tag(&format!("scaleout-store-down-{mode}"));
        let guard = harness::TagGuard(tag.clone());
        let dir = tempfile::tempdir().unwrap();
        let redis = harness::RedisServer::start(&tag).await;
        let env = [
            ("MCP_BUDGET_REDIS_URL", redis.url()),
            ("MCP_BUDGET_LOG", "warn,mcp_budget::state=info".to_owned()),
        ];
        let ports = [free_port(), free_port(), free_port()];
        let admin = [free_port(), free_port(), free_port()];
        let mut gateways = Vec::new();
        for (i, (port, admin)) in ports.iter().zip(admin).enumerate() {
            let state = format!(
                "\n[state]\nbackend = \"redis\"\nurl_env = \"MCP_BUDGET_REDIS_URL\"\n\
                 on_store_error = \"{mode}\"\n\n[admin]\nhttp = \"127.0.0.1:{admin}\"\n"
            );
            let policy = limits_policy(dir.path(), &format!("p{i}"), &tag, &state);
            gateways.push(Replica::start_with(&policy, *port, &tag, &env).await);
        }
        let haproxy = Haproxy::start(&ports, &tag).await;
        let session = open_session(&haproxy.url()).await;
        // The heartbeat has counted the three replicas (it beats every 2 s).
        tokio::time::sleep(Duration::from_millis(2500)).await;
        Self {
            tag,
            _guard: guard,
            _dir: dir,
            redis,
            gateways,
            admin,
            haproxy,
            session,
        }
    }

    /// Calls for 4 s, the store killed after 1.5 s: what they got, the seconds they took, and
    /// the fallbacks the replicas counted.
    async fn run(&mut self) -> (Tally, f64, u64) {
        self.run_with(Fault::Kill).await
    }

    /// Calls for 4 s, `fault` done to the store after 1.5 s (and undone after 3.5 s, when it
    /// can be): what they got, the seconds they took, and the fallbacks the replicas counted.
    async fn run_with(&mut self, fault: Fault) -> (Tally, f64, u64) {
        use nix::sys::signal::Signal;
        let (url, session) = (self.haproxy.url(), self.session.clone());
        let started = std::time::Instant::now();
        let run = Duration::from_secs(4);
        let calls = tokio::spawn(async move { hammer(&url, &session, 6, run).await });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        match fault {
            Fault::Kill => self.redis.kill().await,
            Fault::Stop => {
                self.redis.signal(Signal::SIGSTOP);
                tokio::time::sleep(Duration::from_secs(2)).await;
                self.redis.signal(Signal::SIGCONT);
            }
            Fault::Pause => {
                let reply = self.redis.command("CLIENT PAUSE 2000 ALL").await;
                assert_eq!(reply, "+OK");
            }
            Fault::RestartEmpty => {
                let port = self.redis.port;
                self.redis.kill().await;
                self.redis = harness::RedisServer::start_on(port, &self.tag).await;
            }
        }
        let tally = calls.await.unwrap();
        let secs = started.elapsed().as_secs_f64();
        let mut counted = 0;
        for port in self.admin {
            counted += fallbacks(port).await;
        }
        (tally, secs, counted)
    }

    async fn stop(self) {
        for gateway in self.gateways {
            gateway.stop().await;
        }
        drop((self.haproxy, self.redis));
        harness::assert_no_leftovers(&self.tag).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_killed_mid_run_loses_no_call_and_each_replica_enforces_its_share() {
    let _turn = TURN.lock().await;
    let mut run = StoreDown::start("local_share").await;
    let (tally, secs, counted) = run.run().await;
    eprintln!(
        "store down mid-run (local_share): {} admitted, {} refused in {secs:.2} s, other {:?}; {counted} fallbacks counted",
        tally.admitted, tally.limited, tally.other
    );
    assert!(
        tally.other.is_empty(),
        "every call answered, none lost or hanging: {tally:?}"
    );
    assert!(tally.limited > 0 && tally.admitted > 0, "{tally:?}");
    // Shared before, shares after: at most the rate, plus each replica's local burst (a third
    // of the client's, rounded up) when the store went, plus a fifth.
    let ceiling = (expected(secs) + 3.0 * (BURST / 3.0).ceil()) * 1.2;
    #[allow(clippy::cast_precision_loss)]
    let got = tally.admitted as f64;
    assert!(
        got <= ceiling,
        "{got} admitted, at most {ceiling:.0}: {tally:?}"
    );
    assert!(counted > 0, "fallbacks are counted");
    assert!(
        run.gateways
            .iter()
            .all(|g| g.log().contains("State store unavailable")),
        "each replica logs the episode"
    );

    // The store comes back on the same port: the episode ends by itself.
    run.redis = harness::RedisServer::start_on(run.redis.port, &run.tag).await;
    let back = std::time::Instant::now();
    while !run
        .gateways
        .iter()
        .all(|g| g.log().contains("State store answers again"))
    {
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "{}",
            run.gateways[0].log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_killed_mid_run_closed_refuses_and_open_lets_through() {
    let _turn = TURN.lock().await;
    let mut closed = StoreDown::start("closed").await;
    let (tally, secs, counted) = closed.run().await;
    closed.stop().await;
    eprintln!(
        "store down mid-run (closed): {} admitted, {} refused in {secs:.2} s, other {:?}; {counted} fallbacks counted",
        tally.admitted, tally.limited, tally.other
    );
    let unavailable = tally
        .other
        .get("mcp_budget.state.unavailable")
        .copied()
        .unwrap_or(0);
    assert!(unavailable > 0, "{tally:?}");
    assert_eq!(
        tally.other.len(),
        1,
        "nothing else, none lost or hanging: {tally:?}"
    );
    let before = expected(1.5) * 1.2;
    #[allow(clippy::cast_precision_loss)]
    let admitted = tally.admitted as f64;
    assert!(
        admitted <= before,
        "nothing passes once the store is gone: {tally:?}"
    );
    assert!(
        counted >= unavailable,
        "{counted} counted, {unavailable} refused"
    );

    let mut open = StoreDown::start("open").await;
    let (tally, secs, counted) = open.run().await;
    open.stop().await;
    eprintln!(
        "store down mid-run (open): {} admitted, {} refused in {secs:.2} s, other {:?}; {counted} fallbacks counted",
        tally.admitted, tally.limited, tally.other
    );
    assert!(tally.other.is_empty(), "{tally:?}");
    #[allow(clippy::cast_precision_loss)]
    let admitted = tally.admitted as f64;
    assert!(
        admitted > expected(secs) * 3.0,
        "no limit while the store is down: {tally:?}"
    );
    assert!(counted > 0);
}

/// One gateway of `backend` for the latency measurement (a limit far above what one caller
/// reaches, so every call is admitted), with its open session.
struct LatencyRig {
    tag: String,
    _guard: harness::TagGuard,
    _dir: tempfile::TempDir,
    redis: Option<harness::RedisServer>,
    gateway: Replica,
    url: String,
    session: String,
}

impl LatencyRig {
    async fn start(backend: &str) -> Self {
        let tag = harness::new_tag(&format!("scaleout-latency-{backend}"));
        let guard = harness::TagGuard(tag.clone());
        let dir = tempfile::tempdir().unwrap();
        let (mut redis, mut env, mut extra) = (None, Vec::new(), String::new());
        if backend == "redis" {
            let server = harness::RedisServer::start(&tag).await;
            env.push(("MCP_BUDGET_REDIS_URL", server.url()));
            redis = Some(server);
            extra = "\n[state]\nbackend = \"redis\"\nurl_env = \"MCP_BUDGET_REDIS_URL\"\n".into();
        }
        let policy = limits_policy(dir.path(), "p", &tag, &extra);
        let text = std::fs::read_to_string(&policy).unwrap().replace(
            &format!("calls_per_sec = {RATE}\nburst = {BURST}"),
            "calls_per_sec = 100000\nburst = 100000",
        );
        std::fs::write(&policy, text).unwrap();
        let port = free_port();
        let gateway = Replica::start_with(&policy, port, &tag, &env).await;
        let url = format!("http://127.0.0.1:{port}/mcp");
        let session = open_session(&url).await;
        Self {
            tag,
            _guard: guard,
            _dir: dir,
            redis,
            gateway,
            url,
            session,
        }
    }

    /// One call: how long it took.
    async fn call(&self, n: usize) -> Duration {
        let call = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                          "params": {"name": "e__get-sum", "arguments": {"a": 1, "b": 2}}});
        let sent = std::time::Instant::now();
        let (answer, _) = post_mcp(&self.url, Some(&self.session), &call)
            .await
            .unwrap();
        assert!(answer.get("result").is_some(), "{answer}");
        sent.elapsed()
    }

    async fn stop(self) {
        self.gateway.stop().await;
        if let Some(mut redis) = self.redis {
            redis.kill().await;
        }
        harness::assert_no_leftovers(&self.tag).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn measure_the_latency_redis_adds_to_a_call() {
    let _turn = TURN.lock().await;
    let at = |t: &[Duration], q: f64| {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let i = ((t.len() - 1) as f64 * q) as usize;
        t[i].as_secs_f64() * 1000.0
    };
    // Both gateways at once, their calls interleaved one by one: the machine's noise falls on
    // both alike.
    let rigs = [
        LatencyRig::start("memory").await,
        LatencyRig::start("redis").await,
    ];
    let mut times = [Vec::new(), Vec::new()];
    for n in 0..2000 + 50 {
        for (rig, times) in rigs.iter().zip(&mut times) {
            let took = rig.call(n).await;
            if n >= 50 {
                times.push(took);
            }
        }
    }
    for (backend, t) in ["memory", "redis"].iter().zip(&mut times) {
        t.sort();
        eprintln!(
            "latency {backend}: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms ({} sequential calls, interleaved with the other backend's, loopback)",
            at(t, 0.5),
            at(t, 0.9),
            at(t, 0.99),
            t.len()
        );
    }
    for rig in rigs {
        rig.stop().await;
    }
}

/// The backend lines of `deploy/haproxy/haproxy.cfg` between its affinity markers: the
/// documented configuration, run here as written.
fn affinity_lines() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/haproxy/haproxy.cfg");
    let text = std::fs::read_to_string(path).unwrap();
    let begin = text.find("# --- principal affinity (begin) ---").unwrap();
    let end = text.find("# --- principal affinity (end) ---").unwrap();
    let lines = text[begin..end].lines().skip(1);
    lines.map(|l| format!("{l}\n")).collect()
}

/// `n` `initialize` POSTs through `url` as the client with API key `key`, each answered 200.
async fn initializes(url: &str, key: &str, n: usize) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "affinity", "version": "0"}}});
    for _ in 0..n {
        assert_eq!(post_as(url, key, None, &init).await.status(), 200);
    }
}

/// The servers whose answer count grew from `before` to `after`, with how much.
fn grown(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    after
        .iter()
        .filter_map(|(name, n)| {
            let was = before
                .iter()
                .find(|(b, _)| b == name)
                .map_or(0, |(_, n)| *n);
            (*n > was).then(|| (name.clone(), n - was))
        })
        .collect()
}

/// `deploy/haproxy/haproxy.cfg`'s principal affinity (consistent hashing on the API key or a
/// JWT's subject), with three real gateways: each client's requests all reach one replica
/// (what `share = "per_client"` upstreams need); when that replica dies, its client moves to
/// exactly one other, and a client on another replica stays where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_requests_stay_on_one_replica_and_only_its_clients_move_when_it_dies() {
    use sha2::Digest as _;
    let _turn = TURN.lock().await;
    let tag = harness::new_tag("scaleout-affinity");
    let _guard = harness::TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path(), &tag);
    let digest = |key: &str| format!("{:x}", sha2::Sha256::digest(key.as_bytes()));
    let clients: String = ["alice", "bob", "carol", "dave"]
        .iter()
        .map(|name| {
            format!(
                "\n[[client]]\nname = \"{name}\"\napi_key_sha256 = \"{}\"\nallow = [\"*\"]\n",
                digest(&format!("key-{name}"))
            )
        })
        .collect();
    let text = std::fs::read_to_string(&policy).unwrap() + &clients;
    std::fs::write(&policy, text).unwrap();
    let mut gateways = replicas(&policy, &tag).await;
    let ports: Vec<u16> = gateways.iter().map(|g| g.port).collect();
    let haproxy = Haproxy::start_balanced(&ports, &tag, &affinity_lines()).await;
    let url = haproxy.url();

    // Each client's 6 requests land on one replica.
    let mut home = Vec::new();
    for name in ["alice", "bob", "carol", "dave"] {
        let before = haproxy.answers_per_server().await;
        initializes(&url, &format!("key-{name}"), 6).await;
        let grew = grown(&before, &haproxy.answers_per_server().await);
        assert_eq!(grew.len(), 1, "{name}'s requests were spread: {grew:?}");
        assert_eq!(grew[0].1, 6, "{name}: {grew:?}");
        home.push((name, grew[0].0.clone()));
    }

    // Alice's replica dies: once HAProxy sees it down, alice moves to one other replica, and
    // every client that lived elsewhere stays where it was.
    let (_, alice_home) = home[0].clone();
    let index: usize = alice_home.trim_start_matches('g').parse::<usize>().unwrap() - 1;
    gateways[index].kill().await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while !haproxy
        .states()
        .await
        .iter()
        .any(|(name, state)| *name == alice_home && state == "DOWN")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "HAProxy never saw it down"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (name, was) in &home {
        let before = haproxy.answers_per_server().await;
        initializes(&url, &format!("key-{name}"), 6).await;
        let grew = grown(&before, &haproxy.answers_per_server().await);
        assert_eq!(grew.len(), 1, "{name}'s requests were spread: {grew:?}");
        if *was == alice_home {
            assert_ne!(grew[0].0, alice_home, "{name} still sent to a dead replica");
        } else {
            assert_eq!(
                grew[0].0, *was,
                "{name} moved though its replica lives: {grew:?}"
            );
        }
    }
    drop(haproxy);
    for g in gateways.drain(..).filter(|g| g.port != ports[index]) {
        g.stop().await;
    }
    harness::assert_no_leftovers(&tag).await;
}

/// The store stopped (SIGSTOP) or paused (`CLIENT PAUSE`) for 2 s mid-run, or restarted empty:
/// every call is answered (a hanging store costs a call `timeout_ms`, never more), the hang is
/// counted as fallbacks, and each replica shares its limits again within a few seconds of the
/// store answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_hangs_pauses_or_restarts_empty_loses_no_call_and_is_shared_again() {
    let _turn = TURN.lock().await;
    for fault in [Fault::Stop, Fault::Pause, Fault::RestartEmpty] {
        let mut run = StoreDown::start("local_share").await;
        let (tally, secs, counted) = run.run_with(fault).await;
        eprintln!(
            "store {fault:?} mid-run (local_share): {} admitted, {} refused in {secs:.2} s, other {:?}; {counted} fallbacks counted",
            tally.admitted, tally.limited, tally.other
        );
        assert!(
            tally.other.is_empty(),
            "{fault:?}: every call answered, none lost or hanging: {tally:?}"
        );
        assert!(
            tally.limited > 0 && tally.admitted > 0,
            "{fault:?}: {tally:?}"
        );
        // The run's 4 s held: calls waited `timeout_ms` at most, not the 2 s hang.
        assert!(secs < 6.0, "{fault:?}: the run took {secs:.2} s");
        if !matches!(fault, Fault::RestartEmpty) {
            assert!(counted > 0, "{fault:?}: the hang is counted as fallbacks");
        }
        // Shared again: the next calls ask the store, so none is counted as a fallback.
        let back = std::time::Instant::now();
        loop {
            let before = fallbacks_of(&run).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (url, session) = (run.haproxy.url(), run.session.clone());
            hammer(&url, &session, 2, Duration::from_millis(300)).await;
            if fallbacks_of(&run).await == before {
                break;
            }
            assert!(
                back.elapsed() < Duration::from_secs(10),
                "{fault:?}: still deciding calls locally\n{}",
                run.gateways[0].log()
            );
        }
        run.stop().await;
    }
}

/// The fallbacks the three replicas of `run` counted so far.
async fn fallbacks_of(run: &StoreDown) -> u64 {
    let mut counted = 0;
    for port in run.admin {
        counted += fallbacks(port).await;
    }
    counted
}
