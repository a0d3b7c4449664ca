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

use serde_json::json;

use crate::jsonrpc::ErrorObject;
use crate::jsonrpc::code::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, MISSING_CAPABILITY,
};

// The codes moved to `crate::jsonrpc::code`; these old paths are kept for the other branches
// of issue 30, whose use sites are renamed after they merge.
/// JSON-RPC code for a call refused by a gateway limit.
pub use crate::jsonrpc::code::RATE_LIMITED;
/// JSON-RPC code for errors of an upstream: [`crate::jsonrpc::code::SERVER_ERROR`].
pub use crate::jsonrpc::code::SERVER_ERROR as UPSTREAM_ERROR;
/// JSON-RPC code for a request refused because it is too large.
pub use crate::jsonrpc::code::TOO_LARGE;

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
    /// A method the gateway does not serve.
    #[error("method {0:?} is not supported by this gateway")]
    MethodNotFound(String),
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
    #[must_use]
    pub fn to_error_object(&self) -> ErrorObject {
        let message = self.to_string();
        let (code, kind, extra) = match self {
            Self::UpstreamUnavailable { upstream, .. } => (
                UPSTREAM_ERROR,
                kind::UPSTREAM_UNAVAILABLE,
                Some(json!({ "upstream": upstream })),
            ),
            Self::UpstreamTimeout { upstream, timeout } => (
                UPSTREAM_ERROR,
                kind::UPSTREAM_TIMEOUT,
                Some(json!({ "upstream": upstream, "timeout_ms": timeout.as_millis() })),
            ),
            Self::UpstreamProtocol { upstream, .. } => (
                UPSTREAM_ERROR,
                kind::UPSTREAM_PROTOCOL,
                Some(json!({ "upstream": upstream })),
            ),
            Self::UpstreamUnreachable {
                upstream,
                url,
                reason,
            } => (
                UPSTREAM_ERROR,
                kind::UPSTREAM_UNREACHABLE,
                Some(json!({ "upstream": upstream, "url": url, "reason": reason })),
            ),
            Self::InstancesExhausted { upstream, max } => (
                UPSTREAM_ERROR,
                kind::UPSTREAM_INSTANCES_EXHAUSTED,
                Some(json!({ "upstream": upstream, "max_instances": max })),
            ),
            Self::ClientRequired { upstream } => (
                INVALID_REQUEST,
                kind::UPSTREAM_CLIENT_REQUIRED,
                Some(json!({ "upstream": upstream })),
            ),
            Self::NotFound { what, name } => {
                let mut data = json!({ "what": what, "name": name });
                if *what == "resource" {
                    // As servers answer an unknown resource (2026-07-28 SHOULD).
                    data["uri"] = json!(name);
                }
                (INVALID_PARAMS, kind::CATALOG_NOT_FOUND, Some(data))
            }
            Self::MethodNotFound(_) => (METHOD_NOT_FOUND, kind::METHOD_NOT_FOUND, None),
            Self::InvalidParams { .. } => (INVALID_PARAMS, kind::REQUEST_INVALID_PARAMS, None),
            Self::TooLarge { size, limit } => (
                TOO_LARGE,
                kind::REQUEST_TOO_LARGE,
                Some(json!({ "size": size, "limit": limit })),
            ),
            Self::Session(_) => (INVALID_REQUEST, kind::SESSION_INVALID, None),
            Self::ClientInput {
                upstream,
                missing_capability: Some(capability),
                ..
            } => (
                MISSING_CAPABILITY,
                kind::CLIENT_MISSING_CAPABILITY,
                Some(
                    json!({ "upstream": upstream, "requiredCapabilities": { capability.as_str(): {} } }),
                ),
            ),
            Self::ClientInput { upstream, .. } => (
                UPSTREAM_ERROR,
                kind::CLIENT_INPUT_FAILED,
                Some(json!({ "upstream": upstream })),
            ),
            Self::UnknownRequest { id } => (
                INVALID_REQUEST,
                kind::ROUTE_UNKNOWN_REQUEST,
                Some(json!({ "id": id })),
            ),
            Self::Unroutable {
                upstream,
                ambiguous,
                ..
            } => (
                METHOD_NOT_FOUND,
                if *ambiguous {
                    kind::ROUTE_AMBIGUOUS
                } else {
                    kind::ROUTE_NO_CLIENT
                },
                Some(json!({ "upstream": upstream })),
            ),
            Self::ShuttingDown => (UPSTREAM_ERROR, kind::GATEWAY_SHUTTING_DOWN, None),
            Self::Internal(_) => (INTERNAL_ERROR, kind::INTERNAL, None),
        };
        ErrorObject::new(code, message, kind, extra)
    }
}
