//! mcp-budget's layers in front of a gateway of your own.
//!
//! ```text
//! cargo run --example embed_layers
//! ```
//!
//! `Aggregator` stands for your MCP gateway: its own routing over its own upstream clients
//! (here it serves the saved GitHub toolset, 117 tools, and answers each call itself). One
//! `.layer(EmbedLayer::new(policy))` puts budget planning and progressive discovery in front of
//! it: the example prints the `tools/list` a host receives (the meta-tools, with the default
//! policy's budget) and the result of an `invoke_tool` that went down to the aggregator. The
//! integration tests run this file's `run` (`tests/it/embed.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use mcp_budget::embed::{Caller, EmbedLayer, Request};
use mcp_budget::policy::Policy;
use serde_json::{Value, json};
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

/// The saved `tools/list` of GitHub's MCP server (MIT, see `tests/fixtures/toolsets/SOURCES.md`).
const GITHUB_TOOLS: &str = include_str!("../tests/fixtures/toolsets/github.json");

/// Tools per `tools/list` page.
const PAGE: usize = 50;

/// A stand-in for your gateway: an MCP service of JSON-RPC messages with its own routing.
#[derive(Clone, Debug)]
pub struct Aggregator {
    tools: Arc<Vec<Value>>,
    /// Calls that reached it (what the layers sent down).
    pub calls: Arc<AtomicUsize>,
}

impl Aggregator {
    /// The aggregator over the saved GitHub toolset.
    pub fn github() -> Self {
        let file: Value = serde_json::from_str(GITHUB_TOOLS).expect("the fixture is JSON");
        let tools = file["tools"].as_array().cloned().unwrap_or_default();
        Self {
            tools: Arc::new(tools),
            calls: Arc::default(),
        }
    }

    /// Its answer to `message` (none for a notification).
    pub fn answer(&self, message: &Value) -> Option<Value> {
        let id = message.get("id")?.clone();
        let params = &message["params"];
        let result = match message["method"].as_str().unwrap_or_default() {
            "initialize" => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": {"name": "my-aggregator", "version": "1.0.0"}
            }),
            "tools/list" => {
                let from: usize = params["cursor"]
                    .as_str()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                let page: Vec<Value> = self.tools.iter().skip(from).take(PAGE).cloned().collect();
                let mut result = json!({ "tools": page });
                if from + PAGE < self.tools.len() {
                    result["nextCursor"] = json!((from + PAGE).to_string());
                }
                result
            }
            "tools/call" => {
                self.calls.fetch_add(1, Ordering::Relaxed);
                let name = params["name"].as_str().unwrap_or_default();
                let text = format!("my-aggregator ran {name} with {}", params["arguments"]);
                json!({ "content": [{ "type": "text", "text": text }] })
            }
            "ping" => json!({}),
            other => {
                let error = json!({"code": -32601, "message": format!("no method {other}")});
                return Some(json!({"jsonrpc": "2.0", "id": id, "error": error}));
            }
        };
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }
}

impl Service<Request> for Aggregator {
    type Response = Option<Value>;
    type Error = BoxError;
    type Future = std::future::Ready<Result<Option<Value>, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        std::future::ready(Ok(self.answer(&req.message)))
    }
}

/// What the example prints: the host's `tools/list` and one `invoke_tool` result.
///
/// # Errors
/// When the stack does not answer (it always does).
pub async fn run() -> Result<String, BoxError> {
    let aggregator = Aggregator::github();
    let layer = EmbedLayer::new(Policy::default());
    let service = ServiceBuilder::new()
        .layer(layer.clone())
        .service(aggregator.clone());
    // Who calls, as your gateway authenticated them (the default policy has no [[client]],
    // so this only names the session).
    let caller = Caller::default().with_session("host-1");
    let ask = |message: Value| {
        let service = service.clone();
        let req = Request::new(message).with_caller(caller.clone());
        async move {
            let answer = service.oneshot(req).await?;
            answer.ok_or_else(|| BoxError::from("no answer"))
        }
    };

    let list = ask(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await?;
    let mut out = String::new();
    let summary = layer
        .summary()
        .ok_or("the default policy has the budget on")?;
    out += &format!(
        "tools/list: {} tools learned from the aggregator, {} listed ({} -> {} tokens, rung {})\n",
        summary.tools, summary.exposed, summary.tokens_before, summary.tokens_after, summary.rung
    );
    for tool in list["result"]["tools"].as_array().ok_or("no tools")? {
        out += &format!("  {}\n", tool["name"].as_str().unwrap_or_default());
    }

    let invoke = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "invoke_tool",
        "arguments": {"name": "list_issues", "arguments": {"owner": "octo-org", "repo": "hello"}}
    }});
    let answer = ask(invoke).await?;
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    out += &format!("invoke_tool list_issues: {text}\n");
    out += &format!(
        "calls that reached the aggregator: {}\n",
        aggregator.calls.load(Ordering::Relaxed)
    );
    Ok(out)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let out = run().await?;
    #[allow(clippy::print_stdout, reason = "the example's output")]
    {
        print!("{out}");
    }
    Ok(())
}
