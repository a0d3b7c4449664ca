//! `arguments`: under `[sanitize] arguments = "strict"` (globally or for an upstream), a
//! `tools/call` whose arguments do not match the tool's pinned input schema, or a
//! `prompts/get` whose arguments the prompt does not declare (or are not strings, or lack a
//! required one), is answered `-32602` `mcp_budget.arguments.invalid`, naming the property,
//! and never forwarded (see [`crate::sanitize::arguments`] and
//! [`crate::sanitize::prompt_arguments`] for what strict accepts). It sits below the budget
//! layer, so an `invoke_tool` and a `run_code` script's calls (which go down as `tools/call`s)
//! are checked as direct calls are, and below authorization, so a denied call is denied first.
//!
//! What is forwarded is what was checked: the params are read once (the last of repeated keys,
//! as a `serde_json::Value` reads them), checked, and sent on re-serialised, so a repeated key
//! cannot carry a value past the check; members the protocol does not define for the method
//! are dropped ([`arguments::strict_params`]); `_meta` is kept (it is the client's protocol
//! data, not the model's), when it is an object.
//!
//! Each tool's schema is compiled once per catalog, on its first checked call, and kept until
//! the catalog changes; a tool whose schema does not compile (not even as draft 2020-12, 7 or
//! 4) cannot be checked, so its calls are refused with `-32000`
//! `mcp_budget.arguments.uncheckable` (logged once per catalog; `check --live` lists such
//! tools).
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

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::watch;
use tower::Layer;

use crate::audit::{self, Audit};
use crate::authz::Kind;
use crate::catalog::Catalog;
use crate::context::{McpFuture, McpRequest};
use crate::error::Error;
use crate::jsonrpc::{Kind as MessageKind, Message, to_raw};
use crate::layer::{Around, Inner, Layered};
use crate::lock::lock;
use crate::mcp::method::Method;
use crate::policy::SanitizePolicy;
use crate::routing::Reach;
use crate::sanitize::arguments::{
    self, Arguments, Compiled, Invalid, PROMPTS_GET_PARAMS, TOOLS_CALL_PARAMS,
};
use crate::sanitize::prompt_arguments;

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

/// The schemas compiled for one catalog version, by exposed tool name (`Err`: why the tool's
/// schema cannot be checked).
#[derive(Debug, Default)]
struct Schemas {
    version: Option<u64>,
    tools: HashMap<String, Result<Arc<Compiled>, Arc<str>>>,
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
    /// not needed it yet; `Err` says why the tool's calls cannot be checked.
    fn schema(&self, catalog: &Catalog, exposed: &str) -> Result<Arc<Compiled>, Arc<str>> {
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
        let schema = tool.and_then(|t| t.input_schema());
        let compiled = schema
            .ok_or_else(|| "the tool lists no input schema".to_owned())
            .and_then(Compiled::new)
            .map(Arc::new)
            .map_err(|why| {
                tracing::warn!(tool = exposed, reason = %why,
                    "Input schema cannot be checked: its calls are refused ([sanitize] arguments = \"strict\")");
                Arc::<str>::from(why)
            });
        cache.tools.insert(exposed.to_owned(), compiled.clone());
        compiled
    }

    /// What becomes of `req`, a `tools/call` or `prompts/get`, when its upstream is strict: a
    /// refusal, or the params to forward (what was checked); `None` when its upstream is not
    /// strict or the catalog places it nowhere (the gateway answers that).
    fn verdict(&self, req: &McpRequest) -> Option<Result<Box<RawValue>, Message>> {
        let catalog = self.catalog.borrow().clone();
        let routed = req.routed(&catalog)?;
        let Reach::Upstream { server, own, .. } = &routed.reach else {
            return None;
        };
        if self.mode(server) != Arguments::Strict {
            return None;
        }
        let exposed = routed.exposed.as_str();
        let params: Map<String, Value> = req.message.params_as().unwrap_or_default();
        let empty = Value::Object(Map::new());
        let given = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(given) => given,
        };
        let (checked, kept) = if routed.kind == Kind::Prompt {
            (check_prompt(&catalog, exposed, given), PROMPTS_GET_PARAMS)
        } else {
            (self.check_tool(&catalog, exposed, given), TOOLS_CALL_PARAMS)
        };
        if let Err((err, reason)) = checked {
            self.audit_refusal(
                req,
                routed.kind,
                exposed,
                &format!("{server}/{own}"),
                &reason,
            );
            let refusal = Message::error(req.message.reply_id(), err.to_error_object());
            return Some(Err(refusal));
        }
        let (params, dropped) = arguments::strict_params(params, kept);
        if !dropped.is_empty() {
            tracing::debug!(
                name = exposed,
                ?dropped,
                "Params members not forwarded ([sanitize] arguments = \"strict\")"
            );
        }
        Some(Ok(to_raw(&Value::Object(params))))
    }

    /// Checks the arguments `given` of tool `exposed`: the refusal and its reason when they do
    /// not match its schema, or the schema cannot be checked.
    fn check_tool(&self, catalog: &Catalog, exposed: &str, given: &Value) -> Result<(), Refusal> {
        let compiled = self.schema(catalog, exposed).map_err(|why| {
            let err = Error::UncheckableArguments {
                tool: exposed.to_owned(),
                reason: why.to_string(),
            };
            (err, format!("input schema cannot be checked: {why}"))
        })?;
        arguments::check(&compiled, given).map_err(|invalid| {
            refused("tool", exposed, invalid, |property, reason| {
                Error::InvalidArguments {
                    tool: exposed.to_owned(),
                    property,
                    reason,
                }
            })
        })
    }

    /// Writes the refusal of `req` to the audit log, when there is one.
    fn audit_refusal(
        &self,
        req: &McpRequest,
        kind: Kind,
        name: &str,
        upstream: &str,
        reason: &str,
    ) {
        if !self.audit.is_on() {
            return;
        }
        let id = audit::new_id();
        let method = if kind == Kind::Prompt {
            Method::PromptsGet
        } else {
            Method::ToolsCall
        };
        self.audit.event(&audit::Entry {
            event: "arguments",
            audit_id: &id,
            principal: req.caller.principal.name(),
            session: &req.caller.session.id,
            method: method.as_str(),
            tool: Some(name),
            upstream: Some(upstream.to_owned()),
            reason: Some(reason),
            ..audit::Entry::default()
        });
    }
}

/// A refusal: the error answered, and the reason audited.
type Refusal = (Error, String);

/// Checks the arguments `given` of prompt `exposed` against what it declares.
fn check_prompt(catalog: &Catalog, exposed: &str, given: &Value) -> Result<(), Refusal> {
    let empty = Value::Null;
    let prompt = catalog.prompt_definition(exposed).unwrap_or(&empty);
    prompt_arguments::check(prompt, given).map_err(|invalid| {
        refused("prompt", exposed, invalid, |property, reason| {
            Error::InvalidPromptArguments {
                prompt: exposed.to_owned(),
                property,
                reason,
            }
        })
    })
}

/// The refusal of the arguments `invalid` of `what` (`tool`, `prompt`) `name`, logged:
/// `error` makes the error answered of the property and the reason.
fn refused(
    what: &'static str,
    name: &str,
    invalid: Invalid,
    error: impl FnOnce(String, String) -> Error,
) -> Refusal {
    tracing::info!(what, name, property = %invalid.property, "Arguments refused: {}", invalid.reason);
    let reason = invalid.reason.clone();
    (error(invalid.property, invalid.reason), reason)
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
        let checked = req.message.kind() == MessageKind::Request
            && req.view.method().takes_arguments()
            && !req.caller.probe;
        match checked.then(|| self.verdict(&req)).flatten() {
            Some(Err(refusal)) => Box::pin(async move { Ok(Some(refusal)) }),
            Some(Ok(params)) => Box::pin(inner.call(req.with_params(params))),
            None => Box::pin(inner.call(req)),
        }
    }
}

#[cfg(test)]
mod tests;
