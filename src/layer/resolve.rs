//! `resolve`: a `tools/call` of a name no upstream lists, resolved to the tool it means.
//!
//! Small models name the right tool the wrong way: without its server (`create_directory` for
//! `filesystem__create_directory`), with another separator (`filesystem.create_directory`) or
//! case. A call of a name the catalog does not list is resolved by the rules of
//! [`crate::routing::resolve`]; with `[aggregate] resolve_names = "route"` (the default) a name
//! that resolves to one tool is sent on as a call of that tool (its `name` rewritten), so that
//! everything below — the budget's usage and result budgets, authorization, limits, the guard
//! — sees the tool it reaches: a client denied a tool is denied it by any spelling. With
//! `"strict"` it is answered `mcp_budget.catalog.misnamed` naming the one right name. A name
//! that resolves to several tools is answered `mcp_budget.catalog.ambiguous_name` with those
//! the client may see. A tool the client may not see is never reached nor named this way: the
//! call goes on as sent, answered as any unknown name is. Each resolved name counts in
//! `mcp_budget_tool_name_resolved_total{rule, outcome}`. Everything else passes through.
//!
//! Policy: `[aggregate] resolve_names`.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::watch;
use tower::Layer;

use crate::authz::Target;
use crate::catalog::{Catalog, Item};
use crate::context::{McpFuture, McpRequest};
use crate::error::Error;
use crate::jsonrpc::{Kind, Message, to_raw};
use crate::layer::{Around, Inner, Layered};
use crate::mcp::method::Names;
use crate::policy::ResolveNames;
use crate::routing::resolve::{Resolution, resolve};

/// Layer of [`Resolve`].
#[derive(Debug, Clone)]
pub struct ResolveLayer {
    catalog: watch::Receiver<Arc<Catalog>>,
    mode: ResolveNames,
}

impl ResolveLayer {
    /// Resolves names through the published `catalog` as `mode` says.
    #[must_use]
    pub fn new(catalog: watch::Receiver<Arc<Catalog>>, mode: ResolveNames) -> Self {
        Self { catalog, mode }
    }
}

impl<S> Layer<S> for ResolveLayer {
    type Service = Resolve<S>;
    fn layer(&self, inner: S) -> Resolve<S> {
        Layered::new(self.clone(), inner)
    }
}

/// Resolves unlisted tool names.
pub type Resolve<S> = Layered<ResolveLayer, S>;

impl<S: Inner> Around<S> for ResolveLayer {
    type Future = McpFuture;

    fn around(&self, mut inner: S, req: McpRequest) -> McpFuture {
        let called = (self.mode != ResolveNames::Off
            && req.message.kind() == Kind::Request
            && req.view.method().names() == Some(Names::Tool))
        .then(|| req.view.name())
        .flatten();
        let Some(name) = called else {
            return Box::pin(inner.call(req));
        };
        let catalog = self.catalog.borrow().clone();
        let known = catalog.tool(name).is_some()
            || (catalog.any_quarantined() && catalog.quarantined_as(Item::Tool, name).is_some());
        if known {
            return Box::pin(inner.call(req));
        }
        let scope = req.caller.principal.client().scope().clone();
        let visible = |exposed: &str| {
            catalog.tool(exposed).is_some_and(|(at, own)| {
                let server = catalog.names().get(at).map_or("", String::as_str);
                scope.may_see(Target::tool(server, own))
            })
        };
        let (exposed, rule) = match resolve(&catalog, name) {
            Resolution::None => return Box::pin(inner.call(req)),
            Resolution::One { exposed, rule } => (exposed, rule),
            Resolution::Many { candidates, rule } => {
                let mut seen: Vec<String> = candidates.into_iter().filter(|c| visible(c)).collect();
                match seen.len() {
                    0 => return Box::pin(inner.call(req)),
                    1 => (seen.swap_remove(0), rule),
                    _ => {
                        let error = Error::AmbiguousName {
                            name: name.to_owned(),
                            candidates: seen,
                        };
                        return answered(&req, &error);
                    }
                }
            }
        };
        // A tool the client may not see is never reached nor named through another spelling:
        // the name goes on as sent, unknown as any other (a direct call of the tool's own
        // name is what authorization answers "denied").
        if !visible(&exposed) {
            return Box::pin(inner.call(req));
        }
        if self.mode == ResolveNames::Strict {
            crate::telemetry::record::name_resolved(rule.as_str(), "refused");
            let error = Error::Misnamed {
                name: name.to_owned(),
                tool: exposed,
            };
            return answered(&req, &error);
        }
        let Ok(mut params) = req.message.params_as::<Map<String, Value>>() else {
            return Box::pin(inner.call(req));
        };
        crate::telemetry::record::name_resolved(rule.as_str(), "routed");
        tracing::debug!(name, tool = %exposed, rule = rule.as_str(), "Resolved a tool name");
        params.insert("name".into(), Value::String(exposed));
        let req = req.with_params(to_raw(&Value::Object(params)));
        Box::pin(inner.call(req))
    }
}

/// `req` answered with `error`.
fn answered(req: &McpRequest, error: &Error) -> McpFuture {
    let reply = Message::error(req.message.reply_id(), error.to_error_object());
    Box::pin(async move { Ok(Some(reply)) })
}
