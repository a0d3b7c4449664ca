//! Mount mcp-budget inside an existing axum application.
//!
//! ```text
//! cargo run --example embed_axum -- policies/default.toml
//! curl -s localhost:3000/healthz
//! ```
//! The MCP endpoint is then `http://127.0.0.1:3000/mcp`, next to the app's own routes.

use std::path::PathBuf;

use axum::routing::get;
use axum::Router;
use mcp_budget::downstream::http::{router, HttpConfig};
use mcp_budget::gateway::Gateway;
use mcp_budget::policy::Policy;
use mcp_budget::stack;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let path: PathBuf = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "policies/default.toml".into())
        .into();
    let policy = Policy::load(&path)?;
    let shutdown = CancellationToken::new();
    let gateway = Gateway::start(policy.clone(), shutdown.clone());
    gateway.wait_ready(std::time::Duration::from_secs(30)).await;

    let mcp = router(
        stack::build(gateway.clone()),
        gateway.clone(),
        HttpConfig::from(&policy.downstream),
    );
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .nest_service("/mcp", mcp);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async { tokio::signal::ctrl_c().await.unwrap_or(()) })
        .await?;
    gateway.shutdown().await;
    Ok(())
}
