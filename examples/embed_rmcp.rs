//! An rmcp server in the gateway's process, behind mcp-budget's layers, served over
//! streamable HTTP by this example.
//!
//! ```text
//! cargo run --example embed_rmcp -- --port 3001
//! ```
//!
//! The server (`Notes`, an rmcp `ServerHandler`) runs on a task of this process and talks to
//! the gateway over an in-memory `tokio::io::duplex`: no child process. The gateway aggregates
//! it as upstream `notes` (`Policy::add_in_process`), with the same catalog, plan, limits and
//! supervision as a stdio or HTTP upstream, and serves MCP at `http://127.0.0.1:PORT/mcp`. The
//! integration tests run this file's `serve` and drive it with rmcp's streamable HTTP client
//! (`tests/it/embed.rs`).

use std::sync::Arc;

use mcp_budget::policy::{InProcess, Policy};
use mcp_budget::server::{READY_TIMEOUT, Server};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A small rmcp server: two text tools.
#[derive(Debug, Clone, Copy)]
pub struct Notes;

impl Notes {
    fn tools() -> Vec<Tool> {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text"}},
            "required": ["text"]
        });
        let schema = Arc::new(schema.as_object().cloned().unwrap_or_default());
        vec![
            Tool::new("word_count", "Count the words of a text", schema.clone()),
            Tool::new("shout", "The text in capitals", schema),
        ]
    }
}

impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(Self::tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("text"))
            .and_then(|t| t.as_str())
            .unwrap_or_default();
        let answer = match request.name.as_ref() {
            "word_count" => format!("{} words", text.split_whitespace().count()),
            "shout" => text.to_uppercase(),
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(answer)]).into())
    }
}

/// `Notes` as an in-process upstream: each connection is a fresh duplex, the server served
/// on one end by rmcp, the gateway on the other.
pub fn notes_in_process() -> InProcess {
    InProcess::streams(|| {
        let (gateway_end, server_end) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            match Notes.serve(server_end).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(err) => tracing::warn!(error = %err, "the rmcp server did not start"),
            }
        });
        tokio::io::split(gateway_end)
    })
}

/// Serves the gateway with `Notes` in process on `listener` (at `/mcp`) until `shutdown`.
///
/// # Errors
/// When the policy does not take the upstream (it always does).
pub async fn serve(listener: TcpListener, shutdown: CancellationToken) -> anyhow::Result<()> {
    let mut policy = Policy::default();
    policy.add_in_process("notes", notes_in_process())?;
    let server = Server::start(policy, READY_TIMEOUT, shutdown).await;
    server.serve(Some(listener), None).await;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut port = 3001;
    while let Some(arg) = args.next() {
        if arg == "--port" {
            port = args.next().unwrap_or_default().parse()?;
        }
    }
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    #[allow(clippy::print_stdout, reason = "the example's output")]
    {
        println!("MCP endpoint: http://{}/mcp", listener.local_addr()?);
    }
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::signal::ctrl_c().await.unwrap_or(());
        stop.cancel();
    });
    serve(listener, shutdown).await
}
