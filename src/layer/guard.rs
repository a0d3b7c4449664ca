//! `guard`: refuses calls of quarantined tools and prompts and sanitizes what comes back.
//!
//! The catalog already leaves quarantined tools, prompts and resource templates out of every
//! list and search (they never enter it, see [`crate::pin::admit`]); this layer answers a
//! `tools/call` of a quarantined tool — a host that listed it before, or an `invoke_tool`,
//! which the budget layer above turns into a `tools/call` — with `mcp_budget.tool.changed`
//! (or `mcp_budget.tool.flagged`), and a `prompts/get` of a quarantined prompt with
//! `mcp_budget.prompt.changed`, carrying the old and new `schemaHash` and what changed. On
//! the way up it strips invisible and control text ([`crate::sanitize::result`]) from
//! `tools/call`, `prompts/get` and `resources/read` results and from `initialize` /
//! `server/discover` instructions, when `[sanitize] strip` is on. Results with nothing to strip pass through without being parsed. Everything else
//! passes through untouched.
//!
//! Policy: `[sanitize]` and `[pin]`.
//!
//! ```
//! use mcp_budget::catalog::Catalog;
//! use mcp_budget::layer::guard::GuardLayer;
//! use std::sync::Arc;
//! use tower::Layer;
//! # use mcp_budget::context::McpRequest;
//! # let inner = tower::service_fn(|_: McpRequest| async { Ok::<Option<mcp_budget::jsonrpc::Message>, std::convert::Infallible>(None) });
//! let (_tx, catalog) = tokio::sync::watch::channel(Arc::new(Catalog::default()));
//! let service = GuardLayer::new(catalog, true).layer(inner);
//! # let _ = service;
//! ```

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;
use tower::Layer;

use crate::audit::{self, Audit};
use crate::catalog::Item;
use crate::catalog::{Catalog, Quarantined};
use crate::context::{McpFuture, McpRequest};
use crate::error::{Error, Quarantine};
use crate::jsonrpc::{ErrorObject, Kind, Message};
use crate::layer::{Around, Inner, Layered};
use crate::mcp::method::{Method, Names};
use crate::sanitize::{self, strip};

/// Layer of [`Guard`].
#[derive(Debug, Clone)]
pub struct GuardLayer {
    catalog: watch::Receiver<Arc<Catalog>>,
    strip: bool,
    audit: Audit,
}

impl GuardLayer {
    /// Guards against quarantined tools of the published `catalog`; `strip`: sanitize results
    /// (`[sanitize] strip`).
    #[must_use]
    pub fn new(catalog: watch::Receiver<Arc<Catalog>>, strip: bool) -> Self {
        Self {
            catalog,
            strip,
            audit: Audit::off(),
        }
    }

    /// Writes a line to `audit` for each refused call and each result stripped.
    #[must_use]
    pub fn with_audit(mut self, audit: Audit) -> Self {
        self.audit = audit;
        self
    }
}

impl<S> Layer<S> for GuardLayer {
    type Service = Guard<S>;
    fn layer(&self, inner: S) -> Guard<S> {
        Layered::new(self.clone(), inner)
    }
}

/// Refuses quarantined tools; sanitizes results.
pub type Guard<S> = Layered<GuardLayer, S>;

impl<S: Inner> Around<S> for GuardLayer {
    type Future = McpFuture;

    fn around(&self, mut inner: S, req: McpRequest) -> McpFuture {
        if req.message.kind() != Kind::Request {
            return Box::pin(inner.call(req));
        }
        let method = req.view.method();
        let held = match method.names() {
            Some(Names::Tool) => Some(Item::Tool),
            // A completion of a held prompt's argument is refused as its get is.
            Some(Names::Prompt | Names::Completed) => Some(Item::Prompt),
            Some(Names::Uri) | None => None,
        };
        if let Some(kind) = held {
            if let Some(refusal) = self.refusal(kind, method, &req) {
                return Box::pin(async move { Ok(Some(refusal)) });
            }
        }
        // What a model reads is sanitized.
        if !(self.strip && method.result_reaches_model()) {
            return Box::pin(inner.call(req));
        }
        let stripped = Stripped {
            audit: self.audit.clone(),
            catalog: self.catalog.clone(),
            // Every method a model reads is a known one: the clone allocates nothing.
            method: method.clone(),
            name: req.view.name().map(str::to_owned),
            principal: req.caller.principal.clone(),
            session: req.caller.session.id.clone(),
        };
        Box::pin(async move {
            let mut reply = inner.call(req).await?;
            if let Some(msg) = reply.as_mut() {
                if let Some(counts) = sanitize_reply(msg) {
                    stripped.report(&counts);
                }
            }
            Ok(reply)
        })
    }
}

impl GuardLayer {
    /// The error answering `method`, a call of a quarantined tool (or a get or completion of
    /// a quarantined prompt: `kind`), if this is one.
    fn refusal(&self, kind: Item, method: &Method, req: &McpRequest) -> Option<Message> {
        // The common case costs one atomic read: no quarantine. The name comes from the
        // request's view (parsed once, downstream; a repeated key resolves as a `Value` would).
        if !self.catalog.borrow().any_quarantined() {
            return None;
        }
        let completed;
        let name = if *method == Method::CompletionComplete {
            completed = completed_prompt(&req.message)?;
            completed.as_str()
        } else {
            req.view.name()?
        };
        let catalog = self.catalog.borrow().clone();
        let q = catalog.quarantined_as(kind, name)?;
        let (principal, session) = (req.caller.principal.name(), &req.caller.session.id);
        audit::guard::refusal(&self.audit, q, method.as_str(), name, principal, session);
        let id = req.message.reply_id();
        Some(Message::error(id, refusal_error(name, q)))
    }
}

/// The prompt whose argument a `completion/complete` completes (`params.ref` of type
/// `ref/prompt`), if it is one.
fn completed_prompt(message: &Message) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Params {
        r#ref: Reference,
    }
    #[derive(serde::Deserialize)]
    struct Reference {
        r#type: String,
        name: Option<String>,
    }
    let params: Params = message.params_as().ok()?;
    (params.r#ref.r#type == "ref/prompt")
        .then_some(params.r#ref.name)
        .flatten()
}

/// Who asked for a result that was stripped: its metric and audit line.
struct Stripped {
    audit: Audit,
    catalog: watch::Receiver<Arc<Catalog>>,
    method: Method,
    name: Option<String>,
    principal: Arc<crate::identity::Principal>,
    session: String,
}

impl Stripped {
    fn report(&self, counts: &sanitize::Counts) {
        let catalog = self.catalog.borrow().clone();
        let routed = (self.method == Method::ToolsCall)
            .then_some(self.name.as_deref())
            .flatten()
            .and_then(|name| catalog.tool(name));
        let server = routed.and_then(|(i, _)| catalog.names().get(i));
        let server = server.map_or(crate::telemetry::names::UNKNOWN, String::as_str);
        crate::telemetry::record::sanitized(server, crate::telemetry::record::RESULT, counts);
        if self.audit.is_on() {
            let id = audit::new_id();
            self.audit.event(&audit::Entry {
                event: "sanitize",
                audit_id: &id,
                principal: self.principal.name(),
                session: &self.session,
                method: self.method.as_str(),
                tool: self.name.as_deref(),
                upstream: routed.map(|(_, own)| format!("{server}/{own}")),
                reason: Some("result"),
                removed: Some(*counts),
                ..audit::Entry::default()
            });
        }
    }
}

/// The `mcp_budget.tool.changed` / `.flagged` error for a call of `q` (exposed as `name`), or
/// the `mcp_budget.prompt.changed` error for a get of quarantined prompt `q` (its `data` has
/// `prompt` for `tool`).
#[must_use]
pub fn refusal_error(name: &str, q: &Quarantined) -> ErrorObject {
    Error::Quarantined(Box::new(Quarantine {
        what: q.kind.label(),
        name: name.to_owned(),
        server: q.server.clone(),
        reason: q.reason,
        kind: q.error_type(),
        old: q.old.clone(),
        new: q.new.clone(),
        changed: q.changed.clone(),
    }))
    .to_error_object()
}

/// Strips a reply's result in place, parsing it only when its text may need it; what it
/// removed, if anything.
fn sanitize_reply(msg: &mut Message) -> Option<sanitize::Counts> {
    let raw = msg.result.as_ref()?;
    if !strip::may_need(raw.get().as_bytes()) {
        return None;
    }
    let mut result = serde_json::from_str::<Value>(raw.get()).ok()?;
    let counts = sanitize::result(&mut result);
    if counts.total() == 0 {
        return None;
    }
    tracing::info!(removed = %counts, "Stripped invisible or control text from a result");
    msg.result = Some(crate::jsonrpc::to_raw(&result));
    Some(counts)
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use serde_json::json;

    use crate::error::kind;

    use tower::Service;

    use super::*;
    use crate::catalog::{Contribution, Held};
    use crate::context::{Caller, Session};
    use crate::jsonrpc::{Id, to_raw};

    fn call(method: &str, params: &Value) -> McpRequest {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        McpRequest::new(
            Message::request(Id::Number(7), method, Some(to_raw(params))),
            Caller::new(Arc::new(Session::new("s", tx))),
        )
    }

    fn catalog() -> watch::Receiver<Arc<Catalog>> {
        let names = ["calc".to_owned()];
        let raw = Contribution {
            tools: vec![json!({"name": "add", "inputSchema": {"type": "object"}})],
            ..Contribution::default()
        };
        let guard = |_: usize, raw: &Contribution, _: &Held| {
            let q = Quarantined::changed_description("calc", "add");
            let held = Held {
                quarantined: vec![q],
                ..Held::default()
            };
            (
                Contribution {
                    tools: vec![],
                    ..raw.clone()
                },
                held,
            )
        };
        let c = Catalog::build_guarded(vec![raw], &names, "__", 1, &Catalog::default(), guard);
        watch::channel(Arc::new(c)).1
    }

    #[tokio::test]
    async fn quarantined_tool_call_is_refused_with_both_hashes() {
        let inner = tower::service_fn(|_: McpRequest| async { panic!("must not be called") });
        let mut svc = GuardLayer::new(catalog(), true).layer(inner);
        let reply = svc
            .call(call(
                "tools/call",
                &json!({"name": "calc__add", "arguments": {}}),
            ))
            .await
            .unwrap()
            .unwrap();
        let error = reply.error.unwrap();
        assert_eq!(error.kind().as_deref(), Some(kind::TOOL_CHANGED));
        let data: Value = serde_json::from_str(error.data.unwrap().get()).unwrap();
        assert_eq!(data["old"], "a".repeat(64));
        assert_eq!(data["new"], "b".repeat(64));
        assert_eq!(data["changed"], json!(["description"]));
        assert_eq!(reply.id, Some(Id::Number(7)));
    }

    #[tokio::test]
    async fn quarantined_prompt_get_is_refused_and_a_tool_of_its_name_is_not() {
        let names = ["calc".to_owned()];
        let guard = |_: usize, raw: &Contribution, _: &Held| {
            let q = Quarantined {
                kind: Item::Prompt,
                ..Quarantined::changed_description("calc", "add")
            };
            let held = Held {
                quarantined: vec![q],
                ..Held::default()
            };
            (raw.clone(), held)
        };
        let raw = Contribution {
            tools: vec![json!({"name": "add", "inputSchema": {"type": "object"}})],
            ..Contribution::default()
        };
        let c = Catalog::build_guarded(vec![raw], &names, "__", 1, &Catalog::default(), guard);
        let inner = tower::service_fn(|req: McpRequest| async move {
            assert_eq!(
                req.message.method(),
                Some("tools/call"),
                "only the tool is served"
            );
            Ok::<_, Infallible>(Some(Message::response_value(Id::Number(7), &json!({}))))
        });
        let mut svc = GuardLayer::new(watch::channel(Arc::new(c)).1, true).layer(inner);
        let reply = svc
            .call(call("prompts/get", &json!({"name": "calc__add"})))
            .await
            .unwrap()
            .unwrap();
        let error = reply.error.unwrap();
        assert_eq!(error.kind().as_deref(), Some(kind::PROMPT_CHANGED));
        assert!(
            error
                .message
                .starts_with("prompt calc__add is quarantined: its description changed")
        );
        let data: Value = serde_json::from_str(error.data.unwrap().get()).unwrap();
        assert_eq!(data["prompt"], "calc__add");
        assert_eq!(
            (&data["old"], &data["new"]),
            (&json!("a".repeat(64)), &json!("b".repeat(64)))
        );
        assert_eq!(reply.id, Some(Id::Number(7)));
        let served = svc
            .call(call("tools/call", &json!({"name": "calc__add"})))
            .await
            .unwrap()
            .unwrap();
        assert!(served.error.is_none(), "{served:?}");
        // Completing one of its arguments is refused the same way.
        let complete = |reference: Value| {
            call(
                "completion/complete",
                &json!({"ref": reference, "argument": {"name": "a", "value": ""}}),
            )
        };
        let refused = svc
            .call(complete(json!({"type": "ref/prompt", "name": "calc__add"})))
            .await
            .unwrap()
            .unwrap();
        let kind = refused.error.and_then(|e| e.kind());
        assert_eq!(kind.as_deref(), Some(kind::PROMPT_CHANGED));
    }

    #[tokio::test]
    async fn results_are_stripped_and_clean_ones_left_as_bytes() {
        let inner = tower::service_fn(|req: McpRequest| async move {
            let name = req.message.params_as::<Value>().unwrap()["name"].clone();
            let text = if name == "dirty" {
                "ok\u{200b}\u{1b}[2J"
            } else {
                "ok \"—\""
            };
            let result = json!({"content": [{"type": "text", "text": text}]});
            Ok::<_, Infallible>(Some(Message::response_value(Id::Number(1), &result)))
        });
        let mut svc = GuardLayer::new(catalog(), true).layer(inner);
        let reply = svc
            .call(call("tools/call", &json!({"name": "dirty"})))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            reply.result.unwrap().get(),
            r#"{"content":[{"type":"text","text":"ok"}]}"#
        );
        let reply = svc
            .call(call("tools/call", &json!({"name": "clean"})))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            reply.result.unwrap().get(),
            r#"{"content":[{"type":"text","text":"ok \"—\""}]}"#
        );
    }
}
