//! `arguments`: under `[sanitize] arguments = "strict"` (globally or for an upstream), a
//! `tools/call` whose arguments do not match the tool's pinned input schema is answered
//! `-32602` `mcp_budget.arguments.invalid`, naming the property, and never forwarded (see
//! [`crate::sanitize::arguments`] for what strict accepts). It sits below the budget layer, so
//! an `invoke_tool` and a `run_code` script's calls (which go down as `tools/call`s) are
//! checked as direct calls are, and below authorization, so a denied call is denied first.
//!
//! Each tool's schema is compiled once per catalog, on its first checked call, and kept until
//! the catalog changes; a schema that does not compile is logged once and its tool's calls
//! pass unchecked (the server still checks them, as without the key).
//!
//! ```
//! use mcp_budget::catalog::Catalog;
//! use mcp_budget::layer::arguments::ArgumentsLayer;
//! use mcp_budget::policy::SanitizePolicy;
//! use std::sync::Arc;
//! use tower::Layer;
//! # use mcp_budget::context::McpRequest;
//! # let inner = tower::service_fn(|_: McpRequest| async { Ok::<Option<mcp_budget::jsonrpc::Message>, std::convert::Infallible>(None) });
//! let (_tx, catalog) = tokio::sync::watch::channel(Arc::new(Catalog::default()));
//! let layer = ArgumentsLayer::new(catalog, &SanitizePolicy::default());
//! assert!(!layer.checks_any());
//! let service = layer.layer(inner);
//! # let _ = service;
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::watch;
use tower::Layer;

use crate::audit::{self, Audit};
use crate::catalog::Catalog;
use crate::context::{McpFuture, McpRequest};
use crate::error::Error;
use crate::jsonrpc::{Kind, Message};
use crate::layer::{Around, Inner, Layered};
use crate::lock::lock;
use crate::mcp::method::Method;
use crate::policy::SanitizePolicy;
use crate::routing::Reach;
use crate::sanitize::arguments::{self, Arguments, Compiled};

/// Layer of [`CheckArguments`].
#[derive(Debug, Clone)]
pub struct ArgumentsLayer {
    catalog: watch::Receiver<Arc<Catalog>>,
    /// `[sanitize] arguments`.
    global: Arguments,
    /// Upstreams whose own `sanitize` says otherwise.
    upstreams: Arc<HashMap<String, Arguments>>,
    schemas: Arc<Mutex<Schemas>>,
    audit: Audit,
}

/// The schemas compiled for one catalog version, by exposed tool name (`None`: does not
/// compile, or the tool has no schema).
#[derive(Debug, Default)]
struct Schemas {
    version: Option<u64>,
    tools: HashMap<String, Option<Arc<Compiled>>>,
}

impl ArgumentsLayer {
    /// Checks the calls of the published `catalog`'s tools as `sanitize` says.
    #[must_use]
    pub fn new(catalog: watch::Receiver<Arc<Catalog>>, sanitize: &SanitizePolicy) -> Self {
        let upstreams = (sanitize.upstreams.iter())
            .filter(|(_, rules)| rules.arguments != sanitize.global.arguments)
            .map(|(name, rules)| (name.clone(), rules.arguments))
            .collect();
        Self {
            catalog,
            global: sanitize.global.arguments,
            upstreams: Arc::new(upstreams),
            schemas: Arc::default(),
            audit: Audit::off(),
        }
    }

    /// Writes a line to `audit` for each refused call.
    #[must_use]
    pub fn with_audit(mut self, audit: Audit) -> Self {
        self.audit = audit;
        self
    }

    /// Whether any upstream's calls are checked (the stack leaves the layer out otherwise).
    #[must_use]
    pub fn checks_any(&self) -> bool {
        self.global == Arguments::Strict || !self.upstreams.is_empty()
    }

    /// What `server`'s calls get.
    fn mode(&self, server: &str) -> Arguments {
        self.upstreams.get(server).copied().unwrap_or(self.global)
    }

    /// The compiled schema of tool `exposed` in `catalog`, compiled now if this catalog has
    /// not needed it yet.
    fn schema(&self, catalog: &Catalog, exposed: &str) -> Option<Arc<Compiled>> {
        let mut cache = lock(&self.schemas);
        if cache.version != Some(catalog.version()) {
            cache.version = Some(catalog.version());
            cache.tools.clear();
        }
        if let Some(known) = cache.tools.get(exposed) {
            return known.clone();
        }
        let separator = catalog.separator();
        let tool = (catalog.tools().iter()).find(|t| t.exposed_name(separator) == exposed);
        let compiled = tool.and_then(|t| t.input_schema()).and_then(|schema| {
            Compiled::new(schema)
                .map_err(|why| {
                    tracing::warn!(tool = exposed, reason = %why,
                        "Input schema does not compile: its calls are not checked ([sanitize] arguments = \"strict\")");
                })
                .ok()
                .map(Arc::new)
        });
        cache.tools.insert(exposed.to_owned(), compiled.clone());
        compiled
    }

    /// The refusal of `req`, a `tools/call`, when its upstream is strict and its arguments do
    /// not match.
    fn refusal(&self, req: &McpRequest) -> Option<Message> {
        let catalog = self.catalog.borrow().clone();
        let routed = req.routed(&catalog)?;
        let Reach::Upstream { server, own, .. } = &routed.reach else {
            return None;
        };
        if self.mode(server) != Arguments::Strict {
            return None;
        }
        let exposed = routed.exposed.as_str();
        let compiled = self.schema(&catalog, exposed)?;
        let given = req.view.arguments_value(&req.message);
        let given = if given.is_null() {
            Value::Object(serde_json::Map::new())
        } else {
            given
        };
        let invalid = arguments::check(&compiled, &given).err()?;
        if self.audit.is_on() {
            let id = audit::new_id();
            self.audit.event(&audit::Entry {
                event: "arguments",
                audit_id: &id,
                principal: req.caller.principal.name(),
                session: &req.caller.session.id,
                method: Method::ToolsCall.as_str(),
                tool: Some(exposed),
                upstream: Some(format!("{server}/{own}")),
                reason: Some(invalid.reason.as_str()),
                ..audit::Entry::default()
            });
        }
        tracing::info!(tool = exposed, property = %invalid.property, "Call refused: {}", invalid.reason);
        let err = Error::InvalidArguments {
            tool: exposed.to_owned(),
            property: invalid.property,
            reason: invalid.reason,
        };
        Some(Message::error(
            req.message.reply_id(),
            err.to_error_object(),
        ))
    }
}

impl<S> Layer<S> for ArgumentsLayer {
    type Service = CheckArguments<S>;
    fn layer(&self, inner: S) -> CheckArguments<S> {
        Layered::new(self.clone(), inner)
    }
}

/// Refuses calls whose arguments a strict upstream's tool does not accept.
pub type CheckArguments<S> = Layered<ArgumentsLayer, S>;

impl<S: Inner> Around<S> for ArgumentsLayer {
    type Future = McpFuture;

    fn around(&self, mut inner: S, req: McpRequest) -> McpFuture {
        let checked = req.message.kind() == Kind::Request
            && *req.view.method() == Method::ToolsCall
            && !req.caller.probe;
        if let Some(refusal) = checked.then(|| self.refusal(&req)).flatten() {
            return Box::pin(async move { Ok(Some(refusal)) });
        }
        Box::pin(inner.call(req))
    }
}
