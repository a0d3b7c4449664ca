//! Runtime errors of the gateway and their JSON-RPC form.
//!
//! Every error the gateway answers with has a JSON-RPC code and a stable `error.data.type`
//! that clients and dashboards can match on; the mapping lives in one exhaustive `match`
//! ([`Error::to_error_object`]).
//!
//! ```
//! use mcp_budget::error::Error;
//!
//! let err = Error::UpstreamUnavailable { upstream: "github".into(), reason: "exited with status 1".into() };
//! let obj = err.to_error_object();
//! assert_eq!(obj.kind().as_deref(), Some("mcp_budget.upstream.unavailable"));
//! ```

mod decode;
pub mod kind;

use std::time::Duration;

use serde_json::{Value, json};

use crate::jsonrpc::ErrorObject;
use crate::jsonrpc::code::{
    HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
    MISSING_CAPABILITY, RATE_LIMITED, REQUEST_CANCELLED, RESOURCE_NOT_AVAILABLE, SERVER_ERROR,
    TOO_LARGE, UNSUPPORTED_VERSION,
};
use crate::limits::Which;

/// A runtime error that becomes a JSON-RPC error response.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The upstream is not running or cannot be reached.
    #[error("upstream {upstream:?} is unavailable: {reason}")]
    UpstreamUnavailable {
        /// Server id.
        upstream: String,
        /// Why.
        reason: String,
    },
    /// A lazy upstream (`start = "lazy"`) started for a request could not start: its process
    /// exited, its handshake failed or took longer than its `timeout_secs`.
    #[error(
        "upstream {upstream:?} (start = \"lazy\") could not be started for this request: {reason}"
    )]
    UpstreamStartFailed {
        /// Server id.
        upstream: String,
        /// Why.
        reason: String,
    },
    /// The upstream went silent on a request for longer than its timeout.
    #[error(
        "upstream {upstream:?} did not answer within {}s (no answer, progress or question for the client in that time; timeout_secs)",
        timeout.as_secs_f64()
    )]
    UpstreamTimeout {
        /// Server id.
        upstream: String,
        /// The timeout that passed.
        timeout: Duration,
    },
    /// A call of an upstream that serializes its requests to clients (`server_requests =
    /// "serialize"`) waited longer than its timeout for its turn: another client's call that
    /// can be asked had the upstream, maybe waiting on that client's answer. The server is not
    /// to blame, and was never sent the call.
    #[error(
        "no turn at upstream {upstream:?} within {}s: it serializes its requests to clients ([[upstream]] server_requests = \"serialize\") and another client's call that may be asked has it, maybe waiting on that client's answer (up to server_request_timeout_secs per question); retry, lower server_request_timeout_secs, or give each client its own server (share = \"per_client\")",
        timeout.as_secs_f64()
    )]
    TurnTimeout {
        /// Server id.
        upstream: String,
        /// How long the call waited (its `timeout_secs`).
        timeout: Duration,
    },
    /// The upstream broke the protocol (garbage, a response of the wrong shape).
    #[error("upstream {upstream:?} broke the protocol: {reason}")]
    UpstreamProtocol {
        /// Server id.
        upstream: String,
        /// What it did.
        reason: String,
    },
    /// An HTTP upstream cannot be reached at all (connection refused, unknown host, TLS
    /// handshake failed): not a protocol fault, nothing was said.
    #[error("upstream {upstream:?} is unreachable at {url}: {reason}")]
    UpstreamUnreachable {
        /// Server id.
        upstream: String,
        /// The URL tried.
        url: String,
        /// The operating system's (or TLS's) reason, e.g. `connection refused`.
        reason: String,
    },
    /// A `share = "per_client"` upstream runs its most instances, and the caller has none.
    #[error(
        "upstream {upstream:?} already runs {max} instances, one per client, and this client has none; it is refused until an idle one is stopped (raise the upstream's max_instances, or lower its idle_secs)"
    )]
    InstancesExhausted {
        /// Server id.
        upstream: String,
        /// Its `max_instances`.
        max: usize,
    },
    /// A `share = "per_client"` upstream called by an anonymous caller.
    #[error(
        "upstream {upstream:?} runs one instance per client (share = \"per_client\") and this caller is anonymous: authenticate as one of the policy's [[client]] entries"
    )]
    ClientRequired {
        /// Server id.
        upstream: String,
    },
    /// No upstream has a tool, prompt or resource of that name.
    #[error(
        "unknown {what} {name:?}: it is not in the gateway's catalog (list again to see what exists)"
    )]
    NotFound {
        /// `tool`, `prompt`, `resource`.
        what: &'static str,
        /// The name asked for.
        name: String,
    },
    /// A tool name the catalog does not list but resolves to one tool, answered with that
    /// tool's name (`[aggregate] resolve_names = "strict"`).
    #[error("unknown tool {name:?}; did you mean {tool:?}? call it by that name")]
    Misnamed {
        /// The name asked for.
        name: String,
        /// The exposed name of the tool it resolves to.
        tool: String,
    },
    /// A tool name the catalog does not list that resolves to several tools.
    #[error("unknown tool {name:?}, which could be any of {candidates:?}; call one by its name")]
    AmbiguousName {
        /// The name asked for.
        name: String,
        /// The exposed names it could mean.
        candidates: Vec<String>,
    },
    /// A method the gateway does not serve.
    #[error("method {0:?} is not supported by this gateway")]
    MethodNotFound(String),
    /// Arguments a strict upstream's tool does not declare or accept (`[sanitize] arguments =
    /// "strict"`).
    #[error("arguments of tool {tool:?} do not match its input schema: {reason}")]
    InvalidArguments {
        /// The tool, as the client named it.
        tool: String,
        /// The JSON pointer of the offending value in `arguments` (`/exfil`, `""` for the
        /// whole object).
        property: String,
        /// What is wrong, naming the property.
        reason: String,
    },
    /// Arguments a strict upstream's prompt does not declare or accept (`[sanitize] arguments =
    /// "strict"`).
    #[error("arguments of prompt {prompt:?} do not match its declared arguments: {reason}")]
    InvalidPromptArguments {
        /// The prompt, as the client named it.
        prompt: String,
        /// The JSON pointer of the offending argument (`/exfil`, `""` for the whole object).
        property: String,
        /// What is wrong, naming the argument.
        reason: String,
    },
    /// A call of a strict upstream's tool whose input schema cannot be checked (`[sanitize]
    /// arguments = "strict"`): refused rather than forwarded unchecked.
    #[error(
        "tool {tool:?} is not called: its input schema cannot be checked ([sanitize] arguments = \"strict\"): {reason}"
    )]
    UncheckableArguments {
        /// The tool, as the client named it.
        tool: String,
        /// Why its schema cannot be checked.
        reason: String,
    },
    /// Params of the wrong shape.
    #[error("invalid params for {method}: {reason}")]
    InvalidParams {
        /// The method.
        method: String,
        /// What is wrong.
        reason: String,
    },
    /// A message over the size limit.
    #[error(
        "message of {size} bytes exceeds the limit of {limit} bytes (downstream.max_message_bytes)"
    )]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A request before the session was initialized, or on an unknown session.
    #[error("{0}")]
    Session(String),
    /// An upstream needs input from the client (sampling, elicitation, roots) that the client
    /// cannot give: it did not declare the capability, or it answered with an error.
    #[error("upstream {upstream:?} needs input from the client: {reason}")]
    ClientInput {
        /// Server id.
        upstream: String,
        /// What is missing.
        reason: String,
        /// The capability the client did not declare, if that is the reason.
        missing_capability: Option<String>,
    },
    /// A client's answer to a server→client request that is not waiting for an answer from
    /// that client: none was sent with that id, it was answered already, or it was sent to
    /// another session.
    #[error(
        "no request with id {id:?} is waiting for an answer from this session; the answer was not delivered"
    )]
    UnknownRequest {
        /// The id the answer named.
        id: String,
    },
    /// A client's answer to a server→client request another replica sent (`[state]`), not
    /// forwarded to it: that replica is gone, or the store did not answer.
    #[error("the answer to request {id:?} was not delivered: {reason}")]
    AnswerNotForwarded {
        /// The id the answer named.
        id: String,
        /// Why: the asking replica is gone, or the store did not answer.
        reason: String,
        /// The asking replica is gone (else the store failed).
        gone: bool,
    },
    /// A `read_result` of a result not kept on this replica, when the `[state]` store that
    /// replicas share kept results in does not answer (it may be kept on another replica).
    #[error(
        "result {id:?} is not kept on this replica and the shared state store did not answer \
         ({reason}); try again shortly, or call the tool again"
    )]
    ResultUnavailable {
        /// The result's id.
        id: String,
        /// Why the store did not answer (`timeout`, `store_error`, ...).
        reason: String,
    },
    /// A server→client request of a shared upstream that no client may be asked: no client
    /// has a request in flight to it, or several do and the request names none of them.
    #[error("{method} from upstream {upstream:?} cannot be answered: {reason}")]
    Unroutable {
        /// Server id.
        upstream: String,
        /// The request's method.
        method: String,
        /// Why, with the fix.
        reason: String,
        /// Several clients could own it (else: none).
        ambiguous: bool,
    },
    /// The client's scope does not allow the call ([`crate::layer::authorize`]): its tool,
    /// prompt, resource or arguments. The same answer on every path that reaches the tool.
    #[error(
        "client {client:?} may not call {tool}: {reason} (if it should, the gateway's operator \
         extends this client's [[client]] allow list or rules; audit id {audit_id})"
    )]
    Denied {
        /// The client's name.
        client: String,
        /// The tool (prompt, resource) as the client named it.
        tool: String,
        /// Which rule denied it.
        reason: String,
        /// The id of the audit line that recorded the denial.
        audit_id: String,
    },
    /// A call refused by one of the client's `[limits]` (or, `[state] on_store_error =
    /// "closed"`, because the store that keeps them is unavailable).
    #[error("{}", limited_message(client, *which, upstream.as_deref(), *retry_after_ms))]
    Limited {
        /// The client's name.
        client: String,
        /// The upstream called, when the call names one.
        upstream: Option<String>,
        /// The limit.
        which: Which,
        /// When to try again.
        retry_after_ms: u64,
    },
    /// A request naming an item held back by the pins or the sanitizer.
    #[error("{} {} is quarantined: {}", .0.what, .0.name, .0.why())]
    Quarantined(Box<Quarantine>),
    /// A refusal of the HTTP transport.
    #[error(transparent)]
    Http(#[from] Http),
    /// A 2026-07-28 request whose envelope or headers the gateway cannot serve.
    #[error(transparent)]
    Protocol(#[from] Protocol),
    /// `tools/describe` names that are not in the client's catalog (unknown, or not visible to
    /// it: the two are not told apart).
    #[error(
        "No tool named {} is available to this client; tools/catalog lists the ones that are",
        .names.join(", ")
    )]
    NotAvailable {
        /// The names asked for that are not available.
        names: Vec<String>,
    },
    /// Params of the wrong shape, with a message that says it whole (no method prefix, unlike
    /// [`Error::InvalidParams`]).
    #[error("{0}")]
    Params(String),
    /// The answer an upstream gets to its request for a capability the (2026-07-28) client did
    /// not declare.
    #[error("the client did not declare the {capability:?} capability")]
    CapabilityUndeclared {
        /// The capability.
        capability: String,
    },
    /// The answer an upstream gets when a 2026-07-28 client retried a parked call without
    /// answering its request.
    #[error("the client gave no answer to this request")]
    NoAnswer,
    /// A client did not answer a server→client request (sampling, elicitation, roots) in
    /// time: the upstream gets this as the answer, and the client's call it belongs to fails
    /// with it.
    #[error(
        "the client did not answer {method} from upstream {upstream:?} within {}s ([[upstream]] server_request_timeout_secs)",
        timeout.as_secs_f64()
    )]
    ClientTimeout {
        /// Server id.
        upstream: String,
        /// The server→client request's method.
        method: String,
        /// The deadline that passed.
        timeout: Duration,
    },
    /// The answer an upstream request's waiter gets when the client cancelled it.
    #[error("the request was cancelled by the client: {}", .reason.as_deref().unwrap_or("no reason given"))]
    Cancelled {
        /// The reason the client gave.
        reason: Option<String>,
    },
    /// A modern HTTP upstream refused a request with a 4xx and no JSON-RPC error of its own.
    #[error("the upstream refused the request: HTTP {status}: {text}")]
    UpstreamRefused {
        /// The HTTP status, as `404 Not Found`.
        status: String,
        /// The start of the body.
        text: String,
    },
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// A bug or an unexpected fault inside the gateway.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// [`Error::InvalidParams`] for `method`: what a handler answers when its params do not
    /// have the shape it reads.
    ///
    /// ```
    /// use mcp_budget::error::{kind, Error};
    ///
    /// let err = Error::invalid_params("tools/call", "params.name must be a string");
    /// assert_eq!(err.to_error_object().kind().as_deref(), Some(kind::REQUEST_INVALID_PARAMS));
    /// ```
    #[must_use]
    pub fn invalid_params(method: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidParams {
            method: method.into(),
            reason: reason.into(),
        }
    }

    /// The [`Error::UpstreamUnreachable`] an error object stands for (the answer a request got
    /// when its upstream could not be reached), so that it keeps its kind where it is passed on.
    ///
    /// ```
    /// use mcp_budget::error::Error;
    ///
    /// let err = Error::UpstreamUnreachable {
    ///     upstream: "web".into(),
    ///     url: "http://127.0.0.1:1/mcp".into(),
    ///     reason: "connection refused".into(),
    /// };
    /// let back = Error::unreachable_from(&err.to_error_object());
    /// assert_eq!(back.map(|e| e.to_string()), Some(err.to_string()));
    /// ```
    #[must_use]
    pub fn unreachable_from(obj: &ErrorObject) -> Option<Self> {
        if obj.kind().as_deref() != Some(kind::UPSTREAM_UNREACHABLE) {
            return None;
        }
        let data: serde_json::Value = serde_json::from_str(obj.data.as_ref()?.get()).ok()?;
        let field = |name: &str| data.get(name)?.as_str().map(str::to_owned);
        Some(Self::UpstreamUnreachable {
            upstream: field("upstream")?,
            url: field("url")?,
            reason: field("reason")?,
        })
    }

    /// The JSON-RPC error object for this error, with its stable `data.type`.
    ///
    /// Two exhaustive tables decide it, `code_and_kind` and `data`; a new
    /// variant compiles only once both say what it answers.
    #[must_use]
    pub fn to_error_object(&self) -> ErrorObject {
        let (code, kind) = self.code_and_kind();
        ErrorObject::new(code, self.to_string(), kind, self.data())
    }

    /// The JSON-RPC code and the `data.type` of this error.
    fn code_and_kind(&self) -> (i64, &'static str) {
        match self {
            Self::UpstreamUnavailable { .. } => (SERVER_ERROR, kind::UPSTREAM_UNAVAILABLE),
            Self::UpstreamStartFailed { .. } => (SERVER_ERROR, kind::UPSTREAM_START_FAILED),
            Self::UpstreamTimeout { .. } => (SERVER_ERROR, kind::UPSTREAM_TIMEOUT),
            Self::TurnTimeout { .. } => (SERVER_ERROR, kind::UPSTREAM_TURN_TIMEOUT),
            Self::UpstreamProtocol { .. } => (SERVER_ERROR, kind::UPSTREAM_PROTOCOL),
            Self::UpstreamUnreachable { .. } => (SERVER_ERROR, kind::UPSTREAM_UNREACHABLE),
            Self::InstancesExhausted { .. } => (SERVER_ERROR, kind::UPSTREAM_INSTANCES_EXHAUSTED),
            Self::ClientRequired { .. } => (INVALID_REQUEST, kind::UPSTREAM_CLIENT_REQUIRED),
            Self::UpstreamRefused { .. } => (INVALID_REQUEST, kind::UPSTREAM_PROTOCOL),
            Self::Cancelled { .. } => (REQUEST_CANCELLED, kind::REQUEST_CANCELLED),
            Self::NotFound { .. } => (INVALID_PARAMS, kind::CATALOG_NOT_FOUND),
            Self::Misnamed { .. } => (INVALID_PARAMS, kind::CATALOG_MISNAMED),
            Self::AmbiguousName { .. } => (INVALID_PARAMS, kind::CATALOG_AMBIGUOUS_NAME),
            Self::NotAvailable { .. } => (RESOURCE_NOT_AVAILABLE, kind::CATALOG_NOT_FOUND),
            Self::MethodNotFound(_) => (METHOD_NOT_FOUND, kind::METHOD_NOT_FOUND),
            Self::InvalidArguments { .. } | Self::InvalidPromptArguments { .. } => {
                (INVALID_PARAMS, kind::ARGUMENTS_INVALID)
            }
            Self::UncheckableArguments { .. } => (SERVER_ERROR, kind::ARGUMENTS_UNCHECKABLE),
            Self::InvalidParams { .. } | Self::Params(_) => {
                (INVALID_PARAMS, kind::REQUEST_INVALID_PARAMS)
            }
            Self::TooLarge { .. } => (TOO_LARGE, kind::REQUEST_TOO_LARGE),
            Self::Session(_) => (INVALID_REQUEST, kind::SESSION_INVALID),
            Self::ClientInput {
                missing_capability: Some(_),
                ..
            } => (MISSING_CAPABILITY, kind::CLIENT_MISSING_CAPABILITY),
            Self::ClientInput { .. } => (SERVER_ERROR, kind::CLIENT_INPUT_FAILED),
            Self::CapabilityUndeclared { .. } => {
                (METHOD_NOT_FOUND, kind::CLIENT_MISSING_CAPABILITY)
            }
            Self::NoAnswer => (INVALID_PARAMS, kind::CLIENT_NO_ANSWER),
            Self::ClientTimeout { .. } => (SERVER_ERROR, kind::CLIENT_TIMEOUT),
            Self::UnknownRequest { .. } => (INVALID_REQUEST, kind::ROUTE_UNKNOWN_REQUEST),
            Self::AnswerNotForwarded { gone: true, .. } => {
                (INVALID_REQUEST, kind::ROUTE_ASKER_GONE)
            }
            Self::AnswerNotForwarded { .. } => (INVALID_REQUEST, kind::STATE_UNAVAILABLE),
            Self::ResultUnavailable { .. } => (SERVER_ERROR, kind::STATE_UNAVAILABLE),
            Self::Unroutable {
                ambiguous: true, ..
            } => (METHOD_NOT_FOUND, kind::ROUTE_AMBIGUOUS),
            Self::Unroutable { .. } => (METHOD_NOT_FOUND, kind::ROUTE_NO_CLIENT),
            Self::Denied { .. } => (SERVER_ERROR, kind::AUTHORIZATION_DENIED),
            Self::Limited {
                which: Which::InFlight,
                ..
            } => (RATE_LIMITED, kind::LIMIT_IN_FLIGHT),
            Self::Limited {
                which: Which::StateUnavailable,
                ..
            } => (RATE_LIMITED, kind::STATE_UNAVAILABLE),
            Self::Limited { .. } => (RATE_LIMITED, kind::LIMIT_RATE),
            Self::Quarantined(held) => (SERVER_ERROR, held.kind),
            Self::Http(refusal) => (INVALID_REQUEST, refusal.kind()),
            Self::Protocol(error) => error.code_and_kind(),
            Self::ShuttingDown => (SERVER_ERROR, kind::GATEWAY_SHUTTING_DOWN),
            Self::Internal(_) => (INTERNAL_ERROR, kind::INTERNAL),
        }
    }

    /// What `error.data` carries besides its `type`.
    fn data(&self) -> Option<Value> {
        let data = match self {
            Self::UpstreamUnavailable { upstream, .. }
            | Self::UpstreamProtocol { upstream, .. }
            | Self::ClientRequired { upstream }
            | Self::ClientInput {
                upstream,
                missing_capability: None,
                ..
            }
            | Self::Unroutable { upstream, .. } => json!({ "upstream": upstream }),
            Self::ClientInput {
                upstream,
                missing_capability: Some(capability),
                ..
            } => {
                json!({ "upstream": upstream, "requiredCapabilities": { capability.as_str(): {} } })
            }
            Self::UpstreamStartFailed { upstream, reason } => upstream_reason(upstream, reason),
            Self::UpstreamTimeout { upstream, timeout }
            | Self::TurnTimeout { upstream, timeout } => {
                json!({ "upstream": upstream, "timeout_ms": timeout.as_millis() })
            }
            Self::ClientTimeout { .. }
            | Self::UpstreamUnreachable { .. }
            | Self::InstancesExhausted { .. } => return self.upstream_detail(),
            Self::NotFound { what, name } => not_found(what, name),
            Self::Misnamed { .. } | Self::AmbiguousName { .. } => return self.resolved_data(),
            Self::NotAvailable { names } => json!({ "unknownNames": names }),
            Self::InvalidArguments { tool, property, .. } => {
                json!({ "tool": tool, "property": property })
            }
            Self::InvalidPromptArguments {
                prompt, property, ..
            } => json!({ "prompt": prompt, "property": property }),
            Self::UncheckableArguments { tool, reason } => {
                json!({ "tool": tool, "reason": reason })
            }
            Self::TooLarge { size, limit } => json!({ "size": size, "limit": limit }),
            Self::UnknownRequest { id } | Self::AnswerNotForwarded { id, .. } => {
                json!({ "id": id })
            }
            Self::ResultUnavailable { id, reason } => json!({ "id": id, "reason": reason }),
            Self::Denied {
                tool,
                reason,
                audit_id,
                ..
            } => {
                json!({"tool": tool, "reason": reason, "audit_id": audit_id})
            }
            Self::Limited { .. } => return self.limited_data(),
            Self::Quarantined(held) => held.data(),
            Self::Http(refusal) => return refusal.data(),
            Self::Protocol(error) => return error.data(),
            Self::UpstreamRefused { .. }
            | Self::Cancelled { .. }
            | Self::MethodNotFound(_)
            | Self::InvalidParams { .. }
            | Self::Params(_)
            | Self::Session(_)
            | Self::CapabilityUndeclared { .. }
            | Self::NoAnswer
            | Self::ShuttingDown
            | Self::Internal(_) => return None,
        };
        Some(data)
    }

    /// `error.data` of the errors that name an upstream and more than why.
    fn upstream_detail(&self) -> Option<Value> {
        Some(match self {
            Self::ClientTimeout {
                upstream,
                method,
                timeout,
            } => {
                json!({ "upstream": upstream, "method": method, "timeout_ms": timeout.as_millis() })
            }
            Self::UpstreamUnreachable {
                upstream,
                url,
                reason,
            } => json!({ "upstream": upstream, "url": url, "reason": reason }),
            Self::InstancesExhausted { upstream, max } => {
                json!({ "upstream": upstream, "max_instances": max })
            }
            _ => return None,
        })
    }
}

/// `error.data` naming an upstream and why.
fn upstream_reason(upstream: &str, reason: &str) -> Value {
    json!({ "upstream": upstream, "reason": reason })
}

impl Error {
    /// `error.data` of [`Error::Misnamed`] and [`Error::AmbiguousName`]: the name sent and the
    /// one tool, or the candidates, it resolves to.
    fn resolved_data(&self) -> Option<Value> {
        match self {
            Self::Misnamed { name, tool } => Some(json!({ "name": name, "tool": tool })),
            Self::AmbiguousName { name, candidates } => {
                Some(json!({ "name": name, "candidates": candidates }))
            }
            _ => None,
        }
    }

    /// `error.data` of [`Error::Limited`]: when to retry, the limit, whose and where.
    fn limited_data(&self) -> Option<Value> {
        let Self::Limited {
            client,
            upstream,
            which,
            retry_after_ms,
        } = self
        else {
            return None;
        };
        Some(json!({
            "retryAfterMs": retry_after_ms,
            "limit": which.key(),
            "client": client,
            "upstream": upstream,
        }))
    }
}

fn not_found(what: &str, name: &str) -> Value {
    let mut data = json!({ "what": what, "name": name });
    if what == "resource" {
        // As servers answer an unknown resource (2026-07-28 SHOULD).
        data["uri"] = json!(name);
    }
    data
}

/// The message of an [`Error::Limited`].
fn limited_message(client: &str, which: Which, upstream: Option<&str>, retry_ms: u64) -> String {
    if which == Which::StateUnavailable {
        return format!(
            "the shared state store that keeps client {client:?}'s rates is unavailable \
             ([state] on_store_error = \"closed\"); retry in {retry_ms} ms"
        );
    }
    format!(
        "client {client:?} is over its {} ([limits] {}); retry in {retry_ms} ms",
        limit_what(which, upstream),
        which.key()
    )
}

/// What a [`Error::Limited`] client is over, for its message.
fn limit_what(which: Which, upstream: Option<&str>) -> String {
    match which {
        Which::ClientRate => "calls per second".to_owned(),
        Which::UpstreamRate => format!("calls per second to upstream {}", upstream.unwrap_or("?")),
        Which::InFlight => "calls in flight".to_owned(),
        Which::StateUnavailable => "calls per second".to_owned(),
    }
}

/// An item held back ([`Error::Quarantined`]): what the catalog's
/// [`Quarantined`](crate::catalog::Quarantined) says of it, under the name the client used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Quarantine {
    /// `tool`, `prompt` or `template`: the message's noun and the `data` key of the name.
    pub what: &'static str,
    /// The name the request used.
    pub name: String,
    /// Server id.
    pub server: String,
    /// `changed`, `unknown` or `steering`.
    pub reason: &'static str,
    /// Its `data.type` (`mcp_budget.tool.changed`, `.tool.flagged`, `.prompt.changed`).
    pub kind: &'static str,
    /// The pinned hash, when there is one.
    pub old: Option<String>,
    /// The served definition's hash.
    pub new: String,
    /// What changed (empty unless `changed`).
    pub changed: Vec<&'static str>,
}

impl Quarantine {
    /// Why it is held, with the fix.
    fn why(&self) -> String {
        match self.reason {
            "steering" => {
                "its definition tries to steer the model; review it and add it to [sanitize] allow"
                    .to_owned()
            }
            "unknown" => {
                "it is not in the lockfile; review it and update the lock (mcp-budget pin)"
                    .to_owned()
            }
            _ => format!(
                "its {} changed since it was pinned; review it and update the lock (mcp-budget \
                 pin), or restart the gateway to trust it anew",
                self.changed.join(", ")
            ),
        }
    }

    fn data(&self) -> Value {
        json!({
            self.what: self.name,
            "server": self.server,
            "reason": self.reason,
            "old": self.old,
            "new": self.new,
            "changed": self.changed,
        })
    }
}

/// A refusal of the HTTP transport (`-32600`); the HTTP downstream gives each its status.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Http {
    /// A request refused for its headers, its session or its credentials, without `data`.
    #[error("{message}")]
    Refused {
        /// Its `data.type`: one of the `http`, `session` and `authentication` kinds.
        kind: &'static str,
        /// What is wrong, with the fix.
        message: String,
    },
    /// A request body that did not arrive within `downstream.body_timeout_secs`.
    #[error(
        "the request body did not arrive within {} s (downstream.body_timeout_secs): send the \
         whole body without pauses",
        .limit.as_secs_f64()
    )]
    BodyTimeout {
        /// The timeout.
        limit: Duration,
    },
    /// A connection over `downstream.max_connections` or `max_connections_per_client`.
    #[error("{message}")]
    TooManyConnections {
        /// Which limit, with the fix.
        message: String,
        /// The limit.
        limit: usize,
    },
}

impl Http {
    /// [`Error::to_error_object`] of this refusal.
    #[must_use]
    pub fn into_object(self) -> ErrorObject {
        Error::Http(self).to_error_object()
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Refused { kind, .. } => kind,
            Self::BodyTimeout { .. } => kind::HTTP_BODY_TIMEOUT,
            Self::TooManyConnections { .. } => kind::HTTP_TOO_MANY_CONNECTIONS,
        }
    }

    fn data(&self) -> Option<Value> {
        match self {
            Self::Refused { .. } => None,
            Self::BodyTimeout { limit } => Some(json!({ "limit_secs": limit.as_secs_f64() })),
            Self::TooManyConnections { limit, .. } => Some(json!({ "limit": limit })),
        }
    }
}

/// A 2026-07-28 request the gateway cannot serve as sent.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Protocol {
    /// `params._meta` without the protocol version or the client capabilities (`-32602`).
    #[error("{0}")]
    InvalidEnvelope(String),
    /// A method that 2026-07-28 removed (`-32601`).
    #[error("method {method:?} does not exist in protocol version {version}")]
    RemovedMethod {
        /// The method.
        method: String,
        /// The version that has no such method.
        version: &'static str,
    },
    /// A protocol version the gateway does not speak (`-32022`).
    #[error(
        "protocol version {requested:?} is not supported; supported: {}",
        .supported.join(", ")
    )]
    UnsupportedVersion {
        /// The version asked for.
        requested: String,
        /// The versions the gateway speaks.
        supported: &'static [&'static str],
    },
    /// Routing headers that repeat or differ from the body (`-32020`).
    #[error("{0}")]
    HeaderMismatch(String),
}

impl Protocol {
    /// [`Error::to_error_object`] of this error.
    #[must_use]
    pub fn into_object(self) -> ErrorObject {
        Error::Protocol(self).to_error_object()
    }

    fn code_and_kind(&self) -> (i64, &'static str) {
        match self {
            Self::InvalidEnvelope(_) => (INVALID_PARAMS, kind::PROTOCOL_INVALID_ENVELOPE),
            Self::RemovedMethod { .. } => (METHOD_NOT_FOUND, kind::METHOD_NOT_FOUND),
            Self::UnsupportedVersion { .. } => {
                (UNSUPPORTED_VERSION, kind::PROTOCOL_UNSUPPORTED_VERSION)
            }
            Self::HeaderMismatch(_) => (HEADER_MISMATCH, kind::PROTOCOL_HEADER_MISMATCH),
        }
    }

    fn data(&self) -> Option<Value> {
        match self {
            Self::UnsupportedVersion {
                requested,
                supported,
            } => Some(json!({"supported": supported, "requested": requested})),
            Self::InvalidEnvelope(_) | Self::RemovedMethod { .. } | Self::HeaderMismatch(_) => None,
        }
    }
}

#[cfg(test)]
mod tests;
