//! The era matrix (issue 3) with the official Rust SDK as the client: rmcp 3.11 in its default
//! lifecycle (`initialize`, proposing 2026-07-28; the gateway answers 2025-11-25) and in
//! `ClientLifecycleMode::Auto` (`server/discover` first, then 2026-07-28), through the gateway to
//! the era fixture (`tests/peers/era_server.py`: modern, legacy, dual), server-everything
//! (legacy only) and `mcp-server-time` (dual). See `tests/it/eras.rs` for the Python client and
//! the groups; tests today's gateway fails are `#[ignore = "issue 3: …"]`.
//!
//! Needs `scripts/install-test-deps.sh` (run by `scripts/test.sh`).

// The integration harness is shared with tests/it; not all of it is used here.
#![allow(unreachable_pub, clippy::unwrap_used, clippy::print_stderr)]
#![allow(
    clippy::disallowed_methods,
    reason = "crate::lock is the library's: a test's std lock unwraps, and a poisoned one fails the test"
)]
// Sampling and roots are deprecated by SEP-2577, but upstreams still use them: the gateway must
// carry them in both eras.
#![allow(deprecated)]

#[allow(dead_code)]
#[path = "it/harness.rs"]
mod harness;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    Implementation, ListRootsResult, ProgressNotificationParam, ProtocolVersion, Root,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;

use harness::{
    EraHttp, Gateway, LEGACY, MODERN, Mode, TagGuard, Transport, Upstream, assert_no_leftovers,
    era_upstream, gateway_stdio_args, log_shows, new_tag, policy,
};

/// How the rmcp client opens the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    /// `ServiceExt::serve`: `initialize` (proposing 2026-07-28).
    Initialize,
    /// `ClientLifecycleMode::Auto`: `server/discover`, falling back to `initialize`.
    Discover,
}

impl Lifecycle {
    /// The version the client must end up speaking with the gateway.
    fn era(self) -> &'static str {
        match self {
            Self::Initialize => LEGACY,
            Self::Discover => MODERN,
        }
    }
}

/// What the client's callbacks saw.
#[derive(Debug, Default)]
struct Seen {
    progress: Vec<ProgressNotificationParam>,
    elicited: Vec<Value>,
    sampled: Vec<Value>,
    roots: usize,
}

/// The rmcp client handler: answers elicitation, sampling and roots; records progress.
#[derive(Debug, Clone, Default)]
struct EraClient {
    seen: Arc<Mutex<Seen>>,
    progressed: Arc<Notify>,
}

impl ClientHandler for EraClient {
    fn get_info(&self) -> ClientConfig {
        let caps: ClientCapabilities = serde_json::from_value(json!({
            "roots": {"listChanged": true}, "sampling": {}, "elicitation": {"form": {}}
        }))
        .unwrap();
        ClientConfig::new(caps, Implementation::new("rmcp-eras", "0.1.0"))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.seen
            .lock()
            .unwrap()
            .sampled
            .push(serde_json::to_value(&params).unwrap());
        Ok(serde_json::from_value(json!({
            "role": "assistant", "content": {"type": "text", "text": "sampled by rmcp"},
            "model": "rmcp-model", "stopReason": "endTurn"
        }))
        .unwrap())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.seen
            .lock()
            .unwrap()
            .elicited
            .push(serde_json::to_value(&request).unwrap());
        Ok(
            serde_json::from_value(json!({"action": "accept", "content": {"answer": "blue"}}))
                .unwrap(),
        )
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.seen.lock().unwrap().roots += 1;
        Ok(ListRootsResult::new(vec![Root::new(
            "file:///tmp/era-root",
        )]))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.seen.lock().unwrap().progress.push(params);
        self.progressed.notify_waiters();
    }
}

type Client = RunningService<RoleClient, EraClient>;

/// Connects `handler` over `transport` in `lifecycle`.
async fn connect<T, E, A>(lifecycle: Lifecycle, transport: T, handler: EraClient) -> Client
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let connect = async {
        match lifecycle {
            Lifecycle::Initialize => rmcp::ServiceExt::serve(handler, transport).await,
            Lifecycle::Discover => handler.serve_with_lifecycle(transport, auto()).await,
        }
    };
    tokio::time::timeout(Duration::from_secs(30), connect)
        .await
        .unwrap()
        .unwrap()
}

fn auto() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    }
}

fn params(name: &str, args: &Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().cloned().unwrap())
}

/// The text blocks of a tool result, or the error.
async fn call(client: &Client, name: &str, args: Value) -> Result<String, String> {
    let res = tokio::time::timeout(
        Duration::from_secs(8),
        client.call_tool(params(name, &args)),
    )
    .await
    .map_err(|_| format!("{name}: no answer in 8 s"))?
    .map_err(|e| format!("{name}: {e}"))?;
    let blocks = serde_json::to_value(&res.content).unwrap();
    let text: Vec<&str> = blocks
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    if res.is_error == Some(true) {
        return Err(format!("{name}: isError: {}", text.join("\n")));
    }
    Ok(text.join("\n"))
}

/// `echo` answers with a text that holds `message`.
async fn assert_echoes(s: &Setup, echo: &str, message: &str) {
    let got = call(&s.client, echo, json!({"message": message})).await;
    assert!(
        got.as_deref().is_ok_and(|t| t.contains(message)),
        "{got:?}\n{}",
        s.log()
    );
}

/// A gateway in front of one upstream, and the rmcp client connected to it.
struct Setup {
    client: Client,
    handler: EraClient,
    /// The gateway's log, fed while the client runs (stdio: its stderr; HTTP: the harness).
    log: Arc<Mutex<String>>,
    gateway: Option<Gateway>,
    fixture: Option<EraHttp>,
    _everything: Option<tokio::process::Child>,
    tag: String,
    _guard: TagGuard,
    _dir: tempfile::TempDir,
}

impl Setup {
    fn log(&self) -> String {
        let mut log = self.log.lock().unwrap().clone();
        if let Some(gw) = &self.gateway {
            log += &gw.log();
        }
        if let Some(f) = &self.fixture {
            log += &f.log();
        }
        log
    }

    async fn finish(self) {
        self.client.cancel().await.unwrap();
        if let Some(gw) = self.gateway {
            gw.stop_and_check().await;
        }
        drop(self.fixture);
        drop(self._everything);
        assert_no_leftovers(&self.tag).await;
    }
}

async fn setup(lifecycle: Lifecycle, up: Upstream, transport: Transport) -> Setup {
    let tag = new_tag(&format!("rmcp-eras-{lifecycle:?}-{up:?}-{transport:?}"));
    let guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let handler = EraClient::default();
    let log = Arc::new(Mutex::new(String::new()));
    let (upstream, fixture, everything) = era_upstream(up, transport, &tag).await;
    let (client, gateway) = match transport {
        Transport::Stdio => {
            let policy = policy(dir.path(), &tag, "", &[upstream]);
            let args = gateway_stdio_args(&policy);
            let mut cmd = tokio::process::Command::new(&args[0]);
            cmd.args(&args[1..])
                .env("MCPB_IT_TAG", &tag)
                .env("MCP_BUDGET_LOG", "info")
                .env("NO_COLOR", "1");
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let sink = log.clone();
            let stderr = stderr.unwrap();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let mut log = sink.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
            });
            (connect(lifecycle, transport, handler.clone()).await, None)
        }
        Transport::Http => {
            // The gateway carries its own tag; the upstream fixture carries ours.
            let gw = Gateway::start(&format!("rmcp-eras-{up:?}"), Mode::Http, &[upstream]).await;
            let transport = StreamableHttpClientTransport::from_uri(gw.url());
            (
                connect(lifecycle, transport, handler.clone()).await,
                Some(gw),
            )
        }
    };
    Setup {
        client,
        handler,
        log,
        gateway,
        fixture,
        _everything: everything,
        tag,
        _guard: guard,
        _dir: dir,
    }
}

fn protocol(client: &Client) -> String {
    client
        .peer_info()
        .map(|i| i.protocol_version.to_string())
        .unwrap_or_default()
}

/// Namespaced list, a call, a call with progress, a cancelled call (the upstream sees the cancel)
/// and a call after it.
async fn core(lifecycle: Lifecycle, up: Upstream, transport: Transport) {
    let s = setup(lifecycle, up, transport).await;
    let c = &s.client;
    assert_eq!(protocol(c), lifecycle.era(), "{}", s.log());
    let tools = tokio::time::timeout(Duration::from_secs(8), c.list_all_tools())
        .await
        .unwrap()
        .unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    let (expected, echo, slow, slow_args, cancel_args): (&[&str], _, _, _, _) = match up {
        Upstream::Time => {
            for name in ["time__get_current_time", "time__convert_time"] {
                assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
            }
            let now = call(c, "time__get_current_time", json!({"timezone": "UTC"})).await;
            assert!(now.unwrap().contains("\"timezone\": \"UTC\""));
            s.finish().await;
            return;
        }
        Upstream::Everything => (
            &[
                "everything__echo",
                "everything__trigger-long-running-operation",
            ],
            "everything__echo",
            "everything__trigger-long-running-operation",
            json!({"duration": 0.6, "steps": 3}),
            json!({"duration": 10, "steps": 20}),
        ),
        _ => (
            &["era__echo", "era__add", "era__slow", "era__ask_user"],
            "era__echo",
            "era__slow",
            json!({"seconds": 0.3, "steps": 3}),
            json!({"seconds": 5, "steps": 10}),
        ),
    };
    for name in expected {
        assert!(
            names.iter().any(|n| n == name),
            "{name} in {names:?}\n{}",
            s.log()
        );
    }
    assert_echoes(&s, echo, "hi from rmcp").await;

    // Progress: every notification, with the total, reaches the handler.
    s.handler.seen.lock().unwrap().progress.clear();
    let done = call(c, slow, slow_args).await;
    assert!(done.is_ok(), "{done:?}\n{}", s.log());
    // rmcp hands notifications to the handler on their own tasks: the last one may land just
    // after the result.
    let progress = || -> Vec<(f64, Option<f64>)> {
        let seen = s.handler.seen.lock().unwrap();
        seen.progress
            .iter()
            .map(|p| (p.progress, p.total))
            .collect()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while progress().len() < 3 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        progress(),
        vec![(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))],
        "{}",
        s.log()
    );

    // Cancel after the first progress notification; the gateway keeps serving.
    s.handler.seen.lock().unwrap().progress.clear();
    let progressed = s.handler.progressed.notified();
    let handle = c
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params(slow, &cancel_args))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), progressed)
        .await
        .unwrap_or_else(|_| panic!("no progress before the cancel\n{}", s.log()));
    handle.cancel(Some("rmcp-eras".into())).await.unwrap();
    if up != Upstream::Everything {
        let log = || s.log();
        assert!(
            log_shows(log, "era_server: cancelled slow", Duration::from_secs(3)).await,
            "the upstream never saw the cancel:\n{}",
            s.log()
        );
    }
    assert_echoes(&s, echo, "after cancel").await;
    s.finish().await;
}

/// Elicitation, sampling and roots that the upstream needs answered reach the handler once each,
/// and the answers come back in the tool results.
async fn asks(lifecycle: Lifecycle, up: Upstream, transport: Transport) {
    let s = setup(lifecycle, up, transport).await;
    let c = &s.client;
    assert_eq!(protocol(c), lifecycle.era(), "{}", s.log());
    let user = call(c, "era__ask_user", json!({"question": "Favourite colour?"})).await;
    assert_eq!(user.as_deref(), Ok("user answered: blue"), "{}", s.log());
    let model = call(c, "era__ask_model", json!({"prompt": "say hi"})).await;
    assert_eq!(
        model.as_deref(),
        Ok("model said: sampled by rmcp"),
        "{}",
        s.log()
    );
    let roots = call(c, "era__list_roots", json!({})).await;
    assert_eq!(
        roots.as_deref(),
        Ok("roots: file:///tmp/era-root"),
        "{}",
        s.log()
    );
    {
        let seen = s.handler.seen.lock().unwrap();
        assert_eq!(seen.elicited.len(), 1, "{seen:?}");
        assert_eq!(seen.elicited[0]["message"], "Favourite colour?", "{seen:?}");
        assert_eq!(seen.sampled.len(), 1, "{seen:?}");
        assert_eq!(
            seen.sampled[0]["messages"][0]["content"]["text"], "say hi",
            "{seen:?}"
        );
        assert_eq!(seen.roots, 1, "{seen:?}");
    }
    s.finish().await;
}

// ---------------------------------------------------------------------------------------------
// rmcp default lifecycle (`initialize`) over stdio

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_stdio_modern_core() {
    core(Lifecycle::Initialize, Upstream::Modern, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_stdio_legacy_core() {
    core(Lifecycle::Initialize, Upstream::Legacy, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_stdio_dual_core() {
    core(Lifecycle::Initialize, Upstream::Dual, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_stdio_everything_core() {
    core(
        Lifecycle::Initialize,
        Upstream::Everything,
        Transport::Stdio,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_stdio_time_core() {
    core(Lifecycle::Initialize, Upstream::Time, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_stdio_modern_asks() {
    asks(Lifecycle::Initialize, Upstream::Modern, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_stdio_legacy_asks() {
    asks(Lifecycle::Initialize, Upstream::Legacy, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_stdio_dual_asks() {
    asks(Lifecycle::Initialize, Upstream::Dual, Transport::Stdio).await;
}

// ---------------------------------------------------------------------------------------------
// rmcp `ClientLifecycleMode::Auto` (`server/discover`, 2026-07-28) over stdio

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_stdio_modern_core() {
    core(Lifecycle::Discover, Upstream::Modern, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_stdio_legacy_core() {
    core(Lifecycle::Discover, Upstream::Legacy, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_stdio_dual_core() {
    core(Lifecycle::Discover, Upstream::Dual, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_stdio_everything_core() {
    core(Lifecycle::Discover, Upstream::Everything, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_stdio_time_core() {
    core(Lifecycle::Discover, Upstream::Time, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_stdio_modern_asks() {
    asks(Lifecycle::Discover, Upstream::Modern, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_stdio_legacy_asks() {
    asks(Lifecycle::Discover, Upstream::Legacy, Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_stdio_dual_asks() {
    asks(Lifecycle::Discover, Upstream::Dual, Transport::Stdio).await;
}

// ---------------------------------------------------------------------------------------------
// Both lifecycles over HTTP (client → gateway HTTP → upstream HTTP)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_http_modern_core() {
    core(Lifecycle::Initialize, Upstream::Modern, Transport::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_http_legacy_core() {
    core(Lifecycle::Initialize, Upstream::Legacy, Transport::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_init_http_dual_core() {
    core(Lifecycle::Initialize, Upstream::Dual, Transport::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_http_modern_core() {
    core(Lifecycle::Discover, Upstream::Modern, Transport::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_http_legacy_core() {
    core(Lifecycle::Discover, Upstream::Legacy, Transport::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_http_dual_core() {
    core(Lifecycle::Discover, Upstream::Dual, Transport::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_auto_http_dual_asks() {
    asks(Lifecycle::Discover, Upstream::Dual, Transport::Http).await;
}
