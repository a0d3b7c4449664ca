//! Mount mcp-budget inside an existing axum application.
//!
//! ```text
//! cargo run --example embed_axum -- policies/default.toml
//! curl -s localhost:3000/healthz
//! ```
//! The MCP endpoint is then `http://127.0.0.1:3000/mcp`, next to the app's own routes. (To
//! serve MCP alone, `mcp_budget::server::run(listener, policy, shutdown)` is the one call.)

use std::path::PathBuf;

use axum::Router;
use axum::routing::get;
use mcp_budget::policy::Policy;
use mcp_budget::server::{ListenConfig, MCP_PATH, READY_TIMEOUT, Server, serve_with};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let path: PathBuf = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "policies/default.toml".into())
        .into();
    let policy = Policy::load(&path)?;
    let limits = ListenConfig::from(&policy.downstream);
    let shutdown = CancellationToken::new();
    let server = Server::start(policy, READY_TIMEOUT, shutdown.clone()).await;

    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .merge(server.router(MCP_PATH));

    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::signal::ctrl_c().await.unwrap_or(());
        stop.cancel();
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    // The gateway's listener: connection caps and header timeouts of `[downstream]`.
    serve_with(listener, app, shutdown, limits).await;
    server.stop().await;
    Ok(())
}
