//! The official Rust SDK (`rmcp`) as a client of the gateway, over stdio and streamable HTTP,
//! with real upstreams behind it (`server-everything` from npm, `mcp-server-time` from `PyPI`).
//!
//! Needs `scripts/install-test-deps.sh` (run by `scripts/test.sh`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use tokio::io::{AsyncBufReadExt, BufReader};

fn policy(dir: &Path) -> PathBuf {
    let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
    let path = dir.join("policy.toml");
    std::fs::write(
        &path,
        format!(
            "version = 1\n[budget]\nenabled = false\n\n[[upstream]]\nname = \"everything\"\ncommand = \"{}\"\n\n[[upstream]]\nname = \"time\"\ncommand = \"{}\"\nargs = [\"--local-timezone\", \"UTC\"]\n",
            peers.join("node_modules/.bin/mcp-server-everything").display(),
            peers.join(".venv/bin/mcp-server-time").display(),
        ),
    )
    .unwrap();
    path
}

fn config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("rmcp-test", "0.1.0"),
    )
}

async fn exercise<S: rmcp::service::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, S>,
) {
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"everything__echo".to_owned()), "{names:?}");
    assert!(
        names.contains(&"time__get_current_time".to_owned()),
        "{names:?}"
    );
    let args = serde_json::json!({"message": "hi from rmcp"});
    let res = client
        .call_tool(
            CallToolRequestParams::new("everything__echo")
                .with_arguments(args.as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    let text = serde_json::to_string(&res.content).unwrap();
    assert!(text.contains("Echo: hi from rmcp"), "{text}");
    let args = serde_json::json!({"timezone": "UTC"});
    let res = client
        .call_tool(
            CallToolRequestParams::new("time__get_current_time")
                .with_arguments(args.as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    assert_ne!(res.is_error, Some(true));
}

/// Connects to the streamable HTTP endpoint `url`, runs [`exercise`] and disconnects.
async fn exercise_over_http(url: &str) {
    let client = tokio::time::timeout(
        Duration::from_secs(30),
        config().serve(StreamableHttpClientTransport::from_uri(url)),
    )
    .await
    .unwrap()
    .unwrap();
    tokio::time::timeout(Duration::from_secs(60), exercise(&client))
        .await
        .unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = crate::harness::cli(["serve", "--stdio", "--policy"])
        .arg(policy(dir.path()))
        .tokio();
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let client = tokio::time::timeout(
        Duration::from_secs(60),
        config().serve(TokioChildProcess::new(cmd).unwrap()),
    )
    .await
    .unwrap()
    .unwrap();
    tokio::time::timeout(Duration::from_secs(60), exercise(&client))
        .await
        .unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = crate::harness::cli(["serve", "--http", "127.0.0.1:0", "--policy"])
        .arg(policy(dir.path()))
        .tokio()
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(gateway.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.trim().strip_prefix("listening on ") {
                return rest.to_owned();
            }
        }
        panic!("the gateway exited before listening");
    })
    .await
    .unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    exercise_over_http(&url).await;
    gateway.kill().await.unwrap();
}

/// The library entry: `server::run` on an ephemeral port, in this process, serves the same
/// endpoint as the binary, and returns once shutdown is cancelled (upstreams stopped).
#[tokio::test(flavor = "multi_thread")]
async fn rmcp_over_an_embedded_server_run() {
    let dir = tempfile::tempdir().unwrap();
    let policy = mcp_budget::policy::Policy::load(&policy(dir.path())).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}{}",
        listener.local_addr().unwrap(),
        mcp_budget::server::MCP_PATH
    );
    let shutdown = tokio_util::sync::CancellationToken::new();
    let served = tokio::spawn(mcp_budget::server::run(listener, policy, shutdown.clone()));
    exercise_over_http(&url).await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("server::run returns after shutdown")
        .unwrap();
}
