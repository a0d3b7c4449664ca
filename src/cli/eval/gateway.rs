//! The gateway an `eval` exposure runs through: the real [`Server`] (every layer, the budget
//! layer's meta-tools, `run_code`) over one simulated in-process upstream per saved server,
//! which answers `tools/list` with the saved tools and any call of a known tool with a neutral
//! success, recording it: the first recorded call of an episode is the one scored, whichever
//! path (a listed tool, `invoke_tool`, a `run_code` script) reached it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::catalog::CatalogTool;
use crate::context::{Caller, McpRequest, Session};
use crate::jsonrpc::{Id, Message, to_raw};
use crate::lock::lock;
use crate::policy::{InProcess, Policy};
use crate::server::Server;
use crate::stack::McpService;

/// A call that reached a simulated upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// `server/tool`.
    pub id: String,
    /// The arguments it received.
    pub arguments: Value,
}

/// Calls recorded by the simulated upstreams, shared with them.
pub type Recorder = Arc<Mutex<Vec<Recorded>>>;

/// What the upstream answers every call of a known tool with.
const NEUTRAL: &str = "Done. The tool ran successfully.";

/// The rig an exposure runs on: a started gateway over simulated upstreams.
#[derive(Debug)]
pub struct Rig {
    server: Server,
    shutdown: CancellationToken,
    /// Calls that reached an upstream, in order.
    pub recorder: Recorder,
    /// Exposed name → `server/tool`, for every tool of the catalog.
    pub id_of: HashMap<String, String>,
    /// `server/tool` → exposed name.
    pub exposed_of: HashMap<String, String>,
    /// `server/tool` → its `inputSchema`.
    schemas: HashMap<String, Value>,
}

impl Rig {
    /// Starts `policy` (its own upstreams removed) over `tools`, one simulated upstream per
    /// server, in the order the tools come.
    ///
    /// # Errors
    /// A server id the policy cannot take (it holds the separator).
    pub async fn start(mut policy: Policy, tools: &[CatalogTool]) -> Result<Self, String> {
        policy.upstreams.clear();
        policy.downstream.http = None;
        policy.downstream.stdio = false;
        let recorder: Recorder = Arc::default();
        let schemas = tools
            .iter()
            .filter_map(|t| Some((t.id(), t.input_schema()?.clone())))
            .collect();
        let mut servers: Vec<(&str, Vec<Value>)> = Vec::new();
        for tool in tools {
            let definition = Value::Object((*tool.definition).clone());
            match servers.iter_mut().find(|(s, _)| *s == tool.server) {
                Some((_, list)) => list.push(definition),
                None => servers.push((&tool.server, vec![definition])),
            }
        }
        for (server, list) in servers {
            let upstream = simulated(server, list, recorder.clone());
            policy
                .add_in_process(server, upstream)
                .map_err(|e| format!("server {server:?}: {e}"))?;
        }
        let shutdown = CancellationToken::new();
        let server = Server::start(policy, Duration::from_secs(30), shutdown.clone()).await;
        let catalog = server.catalog();
        let separator = catalog.separator().to_owned();
        let exposed_of: HashMap<String, String> = catalog
            .tools()
            .iter()
            .map(|t| (t.id(), t.exposed_name(&separator).into_owned()))
            .collect();
        let id_of = exposed_of
            .iter()
            .map(|(id, exposed)| (exposed.clone(), id.clone()))
            .collect();
        Ok(Self {
            server,
            shutdown,
            recorder,
            id_of,
            exposed_of,
            schemas,
        })
    }

    /// A new host session on the gateway, initialized.
    pub async fn host(&self, id: &str) -> Host {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut host = Host {
            service: self.server.service(),
            session: Arc::new(Session::new(id, tx)),
            notifications: rx,
            next_id: 0,
            instructions: None,
        };
        let hello = json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "mcp-budget-eval", "version": env!("CARGO_PKG_VERSION")}});
        if let Ok(result) = host.request("initialize", hello).await {
            host.instructions = result
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        host.notify("notifications/initialized").await;
        host
    }

    /// The `inputSchema` of tool `id` (`server/tool`).
    #[must_use]
    pub fn schema_of(&self, id: &str) -> Option<&Value> {
        self.schemas.get(id)
    }

    /// Takes the calls recorded since the last take.
    pub fn take_calls(&self) -> Vec<Recorded> {
        std::mem::take(&mut *lock(&self.recorder))
    }

    /// Stops the gateway.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.server.stop().await;
    }
}

/// One host session: requests through the whole stack, as a transport would send them.
pub struct Host {
    service: McpService,
    session: Arc<Session>,
    notifications: mpsc::UnboundedReceiver<Message>,
    next_id: i64,
    /// The gateway's `instructions`, which hosts put in the system prompt.
    pub instructions: Option<String>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("session", &self.session.id)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Sends `method` with `params`: the result, or the error object.
    ///
    /// # Errors
    /// The JSON-RPC error the gateway answered with.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let message = Message::request(Id::Number(self.next_id), method, Some(to_raw(&params)));
        let caller = Caller::new(self.session.clone());
        let answer = self
            .service
            .clone()
            .oneshot(McpRequest::new(message, caller))
            .await;
        let Ok(Some(answer)) = answer else {
            return Err(json!({"code": -32603, "message": "no answer"}));
        };
        let mut value = answer.to_value();
        match value.get_mut("result") {
            Some(result) => Ok(result.take()),
            None => Err(value.get_mut("error").map(Value::take).unwrap_or_default()),
        }
    }

    async fn notify(&mut self, method: &str) {
        let caller = Caller::new(self.session.clone());
        let message = Message::notification(method, None);
        let _ = self
            .service
            .clone()
            .oneshot(McpRequest::new(message, caller))
            .await;
    }

    /// Every tool listed, following `nextCursor`.
    pub async fn list_tools(&mut self) -> Vec<Value> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..1000 {
            let params = cursor.map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let Ok(mut page) = self.request("tools/list", params).await else {
                break;
            };
            if let Some(Value::Array(list)) = page.get_mut("tools").map(Value::take) {
                tools.extend(list);
            }
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        tools
    }

    /// Whether the gateway said the tool list changed since the last look.
    pub fn list_changed(&mut self) -> bool {
        let mut changed = false;
        while let Ok(message) = self.notifications.try_recv() {
            changed |= message.method() == Some("notifications/tools/list_changed");
        }
        changed
    }
}

/// The text a host hands the model for a `tools/call` answer: the text contents joined, or
/// the error's message.
#[must_use]
pub fn result_text(answer: &Result<Value, Value>) -> String {
    match answer {
        Ok(result) => {
            let texts: Vec<&str> = result
                .get("content")
                .and_then(Value::as_array)
                .map(|c| c.iter().filter_map(|p| p.get("text")?.as_str()).collect())
                .unwrap_or_default();
            let text = if texts.is_empty() {
                result.to_string()
            } else {
                texts.join("\n")
            };
            if result.get("isError").and_then(Value::as_bool) == Some(true) {
                format!("Error: {text}")
            } else {
                text
            }
        }
        Err(error) => format!(
            "Error: {}",
            error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("failed")
        ),
    }
}

/// A server of `tools` that records each call of one of them.
fn simulated(server: &str, tools: Vec<Value>, recorder: Recorder) -> InProcess {
    let server = server.to_owned();
    let tools = Arc::new(tools);
    InProcess::service(tower::service_fn(move |message: Value| {
        let (server, tools, recorder) = (server.clone(), tools.clone(), recorder.clone());
        async move {
            let Some(id) = message.get("id").cloned() else {
                return Ok::<_, tower::BoxError>(None);
            };
            let params = message.get("params").cloned().unwrap_or_default();
            let answer = match message.get("method").and_then(Value::as_str) {
                Some("initialize") => Ok(json!({"protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": server, "version": "eval"}})),
                Some("tools/list") => Ok(json!({"tools": *tools})),
                Some("ping") => Ok(json!({})),
                Some("tools/call") => call(&server, &tools, &params, &recorder),
                _ => Err(json!({"code": -32601, "message": "method not found"})),
            };
            Ok(Some(match answer {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
            }))
        }
    }))
}

fn call(
    server: &str,
    tools: &[Value],
    params: &Value,
    recorder: &Recorder,
) -> Result<Value, Value> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !tools
        .iter()
        .any(|t| t.get("name").and_then(Value::as_str) == Some(name))
    {
        return Err(json!({"code": -32602, "message": format!("unknown tool {name:?}")}));
    }
    lock(recorder).push(Recorded {
        id: format!("{server}/{name}"),
        arguments: params
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| json!({})),
    });
    Ok(json!({"content": [{"type": "text", "text": NEUTRAL}]}))
}
