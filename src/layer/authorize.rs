//! `authorize`: what the caller's principal may call and see.
//!
//! *Call phase*: a `tools/call` (an `invoke_tool` reaches this layer as one), `prompts/get`,
//! `resources/read`, `resources/subscribe` and `completion/complete` are checked against the
//! principal's [`Scope`] with their arguments. The called name is resolved **through the
//! catalog**, exactly as the gateway routes it (exposed name → upstream and its own name), and
//! the scope is checked on that routed identity: a spelling the gateway would not route
//! (another case, separator or a confusable character) goes no further, and one it would route
//! is checked as what it reaches. A tool name no upstream lists is decided on the name and the
//! scope alone, never on which tools exist: in the namespace of an upstream (`server__…`) it is
//! decided as the tool it would be — denied, with the same rule and reason as an existing tool
//! there, when the scope hides that tool; else answered `mcp_budget.catalog.not_found` here,
//! as the gateway answers everyone (a typo of a tool the client may call reads as a typo, and
//! reveals nothing the client may not see). A refusal is the JSON-RPC error
//! `-32000` with `data = { type: "mcp_budget.authorization.denied", tool, reason, audit_id }`;
//! nothing goes upstream.
//!
//! *One answer for a denied tool*: this refusal is the answer on every path to a tool — a
//! direct call, `invoke_tool`, `get_tool_schema` (the budget layer sends both down as the
//! direct call they stand for when the client may not see the tool) and `run_code`'s
//! `tools.call` (sent down as a call; the script's exception has the same `type`), in both
//! eras. Denied rather than "unknown tool": the `data.type` is a stable name outside checks
//! match on, the message says what to change, and a direct call answered it already, so hiding
//! the tool on the other paths only gave one fact two answers. It leaks no more than a direct
//! call: lists, search results and near-name suggestions never show a tool the client cannot
//! see (`docs/security.md`, "A denied tool").
//!
//! *List phase*: `prompts/list`, `resources/list`, `resources/templates/list` — and
//! `tools/list` when the budget layer is off (it plans the tool list within the scope
//! otherwise) — come back holding only what the principal may see.
//!
//! Each decision and each allowed call's outcome is a line of the [`Audit`] log, with the
//! `audit_id` the error carries. The anonymous principal of a policy without `[[client]]`
//! passes with one pointer check when no `[audit]` is configured.
//!
//! Policy: `[[client]]` (allow, deny, rules), `[audit]`.
//!
//! ```
//! use mcp_budget::audit::Audit;
//! use mcp_budget::catalog::Catalog;
//! use mcp_budget::layer::authorize::AuthorizeLayer;
//! use std::sync::Arc;
//! use tower::Layer;
//! # use mcp_budget::context::McpRequest;
//! # let inner = tower::service_fn(|_: McpRequest| async { Ok::<Option<mcp_budget::jsonrpc::Message>, std::convert::Infallible>(None) });
//! let (_tx, catalog) = tokio::sync::watch::channel(Arc::new(Catalog::default()));
//! let service = AuthorizeLayer::new(catalog, Audit::off(), true).layer(inner);
//! # let _ = service;
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::watch;
use tower::Layer;

use crate::audit::call::Outcome;
use crate::audit::{self, Audit};
use crate::authz::{Decision, Kind, Scope, Target};
use crate::catalog::Catalog;
use crate::context::{McpFuture, McpRequest};
use crate::error::Error;
use crate::identity::{Principal, Via};
use crate::jsonrpc::{ErrorObject, Kind as MessageKind, Message, to_raw};
use crate::layer::{Around, Inner, Layered};
use crate::mcp::method::{Listed, Method, Names};
use crate::routing::{self, Reach};

/// Layer of [`Authorize`].
#[derive(Debug, Clone)]
pub struct AuthorizeLayer {
    catalog: watch::Receiver<Arc<Catalog>>,
    audit: Audit,
    filter_tools: bool,
}

impl AuthorizeLayer {
    /// Authorizes against the published `catalog`, logging to `audit`; `filter_tools`: the
    /// list phase covers `tools/list` too (when no budget layer plans it).
    #[must_use]
    pub fn new(catalog: watch::Receiver<Arc<Catalog>>, audit: Audit, filter_tools: bool) -> Self {
        Self {
            catalog,
            audit,
            filter_tools,
        }
    }
}

impl<S> Layer<S> for AuthorizeLayer {
    type Service = Authorize<S>;
    fn layer(&self, inner: S) -> Authorize<S> {
        Layered::new(self.clone(), inner)
    }
}

/// Checks calls and filters lists by the caller's scope.
pub type Authorize<S> = Layered<AuthorizeLayer, S>;

impl<S: Inner> Around<S> for AuthorizeLayer {
    type Future = McpFuture;

    fn around(&self, mut inner: S, req: McpRequest) -> McpFuture {
        let anonymous = req.caller.principal.via() == Via::Anonymous;
        // The open gateway's whole cost: one pointer read (and one flag).
        if anonymous && !self.audit.is_on() || req.message.kind() != MessageKind::Request {
            return Box::pin(inner.call(req));
        }
        let method = req.view.method();
        let list = match method.lists() {
            Some(Listed::Tools) if self.filter_tools => Some(Kind::Tool),
            Some(Listed::Prompts) => Some(Kind::Prompt),
            Some(Listed::Resources | Listed::Templates) => Some(Kind::Resource),
            Some(Listed::Tools) | None => None,
        };
        if let Some(list) = list {
            if anonymous {
                return Box::pin(inner.call(req));
            }
            return self.filtered(inner, req, list);
        }
        let catalog = self.catalog.borrow().clone();
        // A tool the catalog lists (nearly every call) is looked up in place; anything else
        // (a prompt, a URI, an unknown or quarantined name) is routed in full, kept in
        // `routed` for the borrows below.
        let (routed, listed, all);
        let mut unknown = None;
        let (kind, exposed, routes): (_, _, &[_]) = match listed_tool(&req, &catalog) {
            Some((exposed, route)) => {
                listed = [route];
                (Kind::Tool, exposed, &listed)
            }
            None => {
                let Some(called) = req.routed(&catalog) else {
                    if req.caller.probe {
                        let name = req.view.name().unwrap_or_default().to_owned();
                        return probe_not_found(&req, name);
                    }
                    return Box::pin(inner.call(req));
                };
                routed = called;
                unknown = unrouted_tool(&routed, &catalog);
                all = routes(&routed.reach, &routed.exposed, &catalog);
                (routed.kind, routed.exposed.as_str(), &all)
            }
        };
        // Parsed only if an argument rule applies to the call or the audit logs arguments.
        let parsed = std::cell::OnceCell::new();
        let takes_arguments = method.takes_arguments();
        let arguments = || {
            takes_arguments.then(|| parsed.get_or_init(|| req.view.arguments_value(&req.message)))
        };
        let decision = decide(&req, kind, exposed, routes, unknown, arguments);
        let audit = self.audit.clone();
        let (rule, reason) = match &decision {
            Decision::Allow if anonymous => ("no clients configured", None),
            Decision::Allow => ("allow", None),
            Decision::Deny { rule, reason } => (rule.as_str(), Some(reason.as_str())),
        };
        let audit_id = &mut [0; audit::ID_LEN];
        let audit_id = audit::new_id_in(audit_id);
        let call = audit_call(&req, audit_id, exposed, routes.first().copied());
        let logged = audit.arguments(|| arguments().cloned().unwrap_or_default());
        let decided = audit::now();
        audit.call_decision(&call, decided, rule, reason, logged.as_ref());
        if let Some(reason) = reason {
            let principal = &req.caller.principal;
            crate::telemetry::record::denied(principal.name(), denial_label(rule));
            let id = req.message.reply_id();
            let error = denied(principal, exposed, reason, audit_id);
            return Box::pin(async move { Ok(Some(Message::error(id, error))) });
        }
        if req.caller.probe || unknown.is_some() {
            // Or an unknown tool name the scope allows ([`unknown_tool`]): nothing goes down.
            if unknown.is_some() {
                let kind = Some(crate::error::kind::CATALOG_NOT_FOUND);
                audit.call_outcome(&call, decided, Outcome::Error, kind, Duration::ZERO);
            }
            return probe_not_found(&req, exposed.to_owned());
        }
        outcome_logged(inner, req, audit, call, decided)
    }
}

/// `req` called below, its outcome line logged when it answers. Called here, not in the
/// future: the future then holds the call's future, not the whole request.
fn outcome_logged<S: Inner>(
    mut inner: S,
    req: McpRequest,
    audit: Audit,
    call: audit::call::Call,
    decided: std::time::Duration,
) -> McpFuture {
    let started = std::time::Instant::now();
    let reply = inner.call(req);
    Box::pin(async move {
        let reply = reply.await?;
        let took = started.elapsed();
        let (outcome, error_type) = outcome_of(reply.as_ref());
        audit.call_outcome(&call, decided, outcome, error_type.as_deref(), took);
        Ok(reply)
    })
}

impl AuthorizeLayer {
    /// `req`, a list of `list`s, answered with what the caller may not see left out.
    fn filtered<S: Inner>(&self, mut inner: S, req: McpRequest, list: Kind) -> McpFuture {
        let principal = req.caller.principal.clone();
        let catalog = self.catalog.clone();
        Box::pin(async move {
            let mut reply = inner.call(req).await?;
            if let Some(msg) = reply.as_mut() {
                let catalog = catalog.borrow().clone();
                filter_list(msg, list, &catalog, principal.client().scope());
            }
            Ok(reply)
        })
    }
}

/// What the audit lines of `req`, a call of `exposed` (routed to `upstream`), say of it.
fn audit_call(
    req: &McpRequest,
    audit_id: &str,
    exposed: &str,
    upstream: Option<(&str, &str)>,
) -> audit::call::Call {
    let principal = &req.caller.principal;
    audit::call::Call::new(&audit::call::Called {
        audit_id,
        principal: principal.name(),
        subject: principal.subject(),
        session: &req.caller.session.id,
        method: req.view.method().as_str(),
        tool: exposed,
        upstream,
        run: req.caller.run.as_deref(),
    })
}

/// The answer to a probe ([`crate::context::Caller::probe`]) that is not denied: the tool
/// `name` was hidden from the caller when the budget layer looked and is not now (the catalog
/// changed in between), so the schema lookup is answered "not found", and nothing is called.
fn probe_not_found(req: &McpRequest, name: String) -> McpFuture {
    let id = req.message.reply_id();
    let error = Error::NotFound { what: "tool", name }.to_error_object();
    Box::pin(async move { Ok(Some(Message::error(id, error))) })
}

/// The decision on `exposed` (a `kind`), which may reach `routes`, for the request's principal
/// (every routed identity must be allowed). `unknown`: for a tool name the catalog does not
/// route, the (server, own name) its namespace says it would be ([`unknown_tool`]).
/// `arguments` gives the call's arguments (`None` for a method without them); it is called
/// only when an argument rule applies.
fn decide<'a>(
    req: &McpRequest,
    kind: Kind,
    exposed: &str,
    routes: &[(&str, &str)],
    unknown: Option<Option<(&str, &str)>>,
    arguments: impl Fn() -> Option<&'a Value>,
) -> Decision {
    let principal = &req.caller.principal;
    if principal.via() == Via::Anonymous {
        return Decision::Allow;
    }
    // A repeated `name`, `arguments` or `_meta` could be read one way here and another way
    // by whoever reads the message next: refused, not guessed.
    if req.view.name().is_some() && req.view.typed_name().is_none() {
        return Decision::Deny {
            reason: "the params repeat name, arguments or _meta".into(),
            rule: "malformed".into(),
        };
    }
    if let (true, Some(namespace)) = (routes.is_empty(), unknown) {
        return unknown_tool(principal.client().scope(), namespace);
    }
    if routes.is_empty() {
        return Decision::Deny {
            reason: format!(
                "{} {:?} is not on this gateway (names must be spelled as listed)",
                noun(kind),
                exposed
            ),
            rule: "unknown name".into(),
        };
    }
    let scope = principal.client().scope();
    let arguments = || {
        arguments()
            .and_then(Value::as_object)
            .or(empty_arguments(kind))
    };
    for &(server, name) in routes {
        let target = Target::new(kind, server, name);
        let decision = match req.view.method() {
            // Completing a prompt's or template's arguments needs only the right to see it.
            Method::CompletionComplete if scope.may_see(target) => Decision::Allow,
            _ => scope.check_with(target, arguments),
        };
        if decision != Decision::Allow {
            return decision;
        }
    }
    Decision::Allow
}

/// The decision on a tool name no upstream lists (a mistyped one, most often), decided on the
/// name and the scope alone, never on which tools exist: a name in the namespace of an
/// upstream (`namespace`: that upstream and the rest of the name) is decided as the tool it
/// would be — denied, with the same rule and reason, when the scope does not let the client
/// see that tool (a hidden tool and a name that does not exist answer alike there), else
/// allowed, to be answered `mcp_budget.catalog.not_found` as everyone is answered. A name in
/// no upstream's namespace cannot be any tool, hidden or not: allowed, so answered "not found"
/// too.
fn unknown_tool(scope: &Scope, namespace: Option<(&str, &str)>) -> Decision {
    match namespace {
        Some((server, own)) if !scope.may_see(Target::tool(server, own)) => {
            scope.check_with(Target::tool(server, own), || empty_arguments(Kind::Tool))
        }
        _ => Decision::Allow,
    }
}

/// For a call of a tool name the catalog does not route (not a quarantined one): the namespace
/// it is in ([`namespace_of`]), if any. `None` for anything else.
fn unrouted_tool<'a>(
    routed: &'a routing::Routed,
    catalog: &'a Catalog,
) -> Option<Option<(&'a str, &'a str)>> {
    (routed.kind == Kind::Tool && matches!(routed.reach, Reach::Nowhere))
        .then(|| namespace_of(catalog, &routed.exposed))
}

/// The upstream whose namespace (`<server><separator>`) `exposed` is in (the longest such
/// id), and the rest of the name.
fn namespace_of<'a>(catalog: &'a Catalog, exposed: &'a str) -> Option<(&'a str, &'a str)> {
    let separator = catalog.separator();
    catalog
        .names()
        .iter()
        .filter_map(|server| {
            let own = exposed
                .strip_prefix(server.as_str())?
                .strip_prefix(separator)?;
            Some((server.as_str(), own))
        })
        .max_by_key(|(server, _)| server.len())
}

/// Tool and prompt calls without `arguments` are checked as calls with none (`{}`); resources
/// have no arguments.
fn empty_arguments(kind: Kind) -> Option<&'static Map<String, Value>> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    (kind != Kind::Resource).then(|| EMPTY.get_or_init(Map::new))
}

fn noun(kind: Kind) -> &'static str {
    match kind {
        Kind::Tool => "tool",
        Kind::Prompt => "prompt",
        Kind::Resource => "resource",
    }
}

/// The name a `tools/call` (or a probe of one) calls and the (server, own name) it is routed
/// to, when the catalog lists that tool: found in place ([`routing::placed`]), with none of
/// the copies a [`Routed`](crate::routing::Routed) holds (three strings and an `Arc` per call,
/// on the keyed path of every call). `None` for anything else, which [`McpRequest::routed`]
/// routes in full.
fn listed_tool<'a>(
    req: &'a McpRequest,
    catalog: &'a Catalog,
) -> Option<(&'a str, (&'a str, &'a str))> {
    if req.view.method().names() != Some(Names::Tool) {
        return None;
    }
    let exposed = req.view.name()?;
    let (_, server, own) = routing::placed(catalog, Kind::Tool, exposed)?;
    Some((exposed, (server, own)))
}

/// The (server, own name) pairs a call of `exposed` that reaches `reach` may land on: the one
/// the catalog routes it to; for a resource URI it places with no upstream (the gateway falls
/// back to the only upstream with resources), every upstream, so that the client must be
/// allowed the URI wherever it lands; none for a name it does not route (unknown, or
/// quarantined).
fn routes<'a>(reach: &'a Reach, exposed: &'a str, catalog: &'a Catalog) -> Vec<(&'a str, &'a str)> {
    match reach {
        Reach::Upstream { server, own, .. } => vec![(server.as_str(), own.as_str())],
        Reach::AnyUpstream => catalog
            .names()
            .iter()
            .map(|s| (s.as_str(), exposed))
            .collect(),
        Reach::Quarantined { .. } | Reach::Nowhere => Vec::new(),
    }
}

/// The bounded metric label of a denial's rule (`deny "…"`, `not in allow`, `rule N`).
fn denial_label(rule: &str) -> &'static str {
    if rule.starts_with("deny") {
        "deny"
    } else if rule.starts_with("rule") {
        "argument"
    } else {
        "not_allowed"
    }
}

/// The `mcp_budget.authorization.denied` error.
fn denied(principal: &Principal, exposed: &str, reason: &str, audit_id: &str) -> ErrorObject {
    Error::Denied {
        client: principal.name().to_owned(),
        tool: exposed.to_owned(),
        reason: reason.to_owned(),
        audit_id: audit_id.to_owned(),
    }
    .to_error_object()
}

/// `ok`, `is_error`, `error` (with its type) or `none`.
fn outcome_of(reply: Option<&Message>) -> (Outcome, Option<String>) {
    let Some(reply) = reply else {
        return (Outcome::None, None);
    };
    if let Some(error) = &reply.error {
        let kind = error.kind().unwrap_or_else(|| error.code.to_string());
        return (Outcome::Error, Some(kind));
    }
    #[derive(serde::Deserialize)]
    struct Flag {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    // Most results are not errors: a result whose text holds neither `isError` nor an escape
    // (`\u…` could spell the key) has no such flag, and is not parsed again. One vectorized
    // pass (memchr) over the bytes for the two that can start either, as this runs on every
    // audited call.
    let may_flag = |raw: &str| {
        let raw = raw.as_bytes();
        memchr::memchr2_iter(b'E', b'\\', raw).any(|i| {
            if raw[i] == b'E' {
                raw[..i].ends_with(b"is") && raw[i..].starts_with(b"Error")
            } else {
                raw.get(i + 1) == Some(&b'u')
            }
        })
    };
    let is_error = reply
        .result
        .as_deref()
        .filter(|r| may_flag(r.get()))
        .and_then(|r| serde_json::from_str::<Flag>(r.get()).ok())
        .is_some_and(|f| f.is_error);
    (
        if is_error {
            Outcome::IsError
        } else {
            Outcome::Ok
        },
        None,
    )
}

/// Keeps in a list result only the items `scope` may see.
fn filter_list(msg: &mut Message, kind: Kind, catalog: &Catalog, scope: &Scope) {
    let Some(raw) = msg.result.as_deref() else {
        return;
    };
    let Ok(mut result) = serde_json::from_str::<Map<String, Value>>(raw.get()) else {
        return;
    };
    let names = catalog.names();
    for (key, field) in [
        ("tools", "name"),
        ("prompts", "name"),
        ("resources", "uri"),
        ("resourceTemplates", "uriTemplate"),
    ] {
        let Some(Value::Array(items)) = result.get_mut(key) else {
            continue;
        };
        items.retain(|item| {
            let name = item.get(field).and_then(Value::as_str).unwrap_or_default();
            let visible = |server: &str, own: &str| scope.may_see(Target::new(kind, server, own));
            match kind {
                Kind::Tool => catalog
                    .tool(name)
                    .is_some_and(|(i, own)| names.get(i).is_some_and(|s| visible(s, own))),
                Kind::Prompt => catalog
                    .prompt(name)
                    .is_some_and(|(i, own)| names.get(i).is_some_and(|s| visible(s, own))),
                Kind::Resource => {
                    let reach = routing::resource(catalog, name);
                    let routes = routes(&reach, name, catalog);
                    !routes.is_empty() && routes.iter().all(|(s, uri)| visible(s, uri))
                }
            }
        });
    }
    msg.result = Some(to_raw(&Value::Object(result)));
}

#[cfg(test)]
mod tests;
