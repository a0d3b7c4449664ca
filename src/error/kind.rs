//! The stable `error.data.type` strings, one constant each.
//!
//! Clients and dashboards match on these strings, so they never change: a new kind is added,
//! an old one is never renamed. Each is `mcp_budget.<area>.<what>` (the one older exception is
//! [`INTERNAL`]). The doc line of each says when it is sent, with its JSON-RPC code and, where
//! the HTTP downstream sets one, its HTTP status.
//!
//! This module imports nothing, so that every part of the crate (the JSON-RPC envelope
//! included) can use it.
//!
//! ```
//! use mcp_budget::error::{kind, Error};
//!
//! let err = Error::MethodNotFound("tools/frobnicate".into());
//! assert_eq!(err.to_error_object().kind().as_deref(), Some(kind::METHOD_NOT_FOUND));
//! ```

/// An upstream is not running or cannot be reached (`-32000`).
pub const UPSTREAM_UNAVAILABLE: &str = "mcp_budget.upstream.unavailable";
/// A lazy upstream (`start = "lazy"`) that a request started could not start: its process
/// exited, its handshake failed or took longer than its `timeout_secs`; every request waiting
/// for that start gets it, `error.data` has `upstream` and `reason`, and the next request
/// tries again (`-32000`).
pub const UPSTREAM_START_FAILED: &str = "mcp_budget.upstream.start_failed";
/// An upstream went silent on a request for longer than its `timeout_secs` (`-32000`).
pub const UPSTREAM_TIMEOUT: &str = "mcp_budget.upstream.timeout";
/// A call of an upstream with `server_requests = "serialize"` waited longer than its
/// `timeout_secs` for its turn, because another client's call that may be asked held the
/// upstream (maybe waiting on that client's answer, up to `server_request_timeout_secs`); the
/// call never reached the server (`-32000`).
pub const UPSTREAM_TURN_TIMEOUT: &str = "mcp_budget.upstream.turn_timeout";
/// An upstream broke the protocol: garbage, or a response of the wrong shape (`-32000`).
pub const UPSTREAM_PROTOCOL: &str = "mcp_budget.upstream.protocol";
/// An HTTP upstream cannot be reached at all: the connection was refused, the host is unknown
/// or unreachable, or the TLS handshake failed; the message names the URL and the reason
/// (`-32000`).
pub const UPSTREAM_UNREACHABLE: &str = "mcp_budget.upstream.unreachable";
/// A `share = "per_client"` upstream runs `max_instances` instances already, so a client
/// without one is refused until one is stopped after `idle_secs`; `error.data` has
/// `max_instances` (`-32000`).
pub const UPSTREAM_INSTANCES_EXHAUSTED: &str = "mcp_budget.upstream.instances_exhausted";
/// A `share = "per_client"` upstream called by an anonymous caller, whose instance could not
/// be told from another's (`-32600`).
pub const UPSTREAM_CLIENT_REQUIRED: &str = "mcp_budget.upstream.client_required";
/// No upstream has a tool, prompt or resource of the name asked for (`-32602`; `-32002` from
/// `tools/describe`, as the draft SEP asks, with `unknownNames`, for names the client may not
/// see).
pub const CATALOG_NOT_FOUND: &str = "mcp_budget.catalog.not_found";
/// A `tools/call` of a name no upstream lists that resolves to one tool by a near-name rule
/// (another separator or case, or its bare name), with `[aggregate] resolve_names = "strict"`:
/// `error.data` has `name` and `tool`, the one name to call (`-32602`).
pub const CATALOG_MISNAMED: &str = "mcp_budget.catalog.misnamed";
/// A `tools/call` of a name no upstream lists that resolves to two or more tools the client
/// may see: `error.data` has `name` and `candidates`, their names (`-32602`).
pub const CATALOG_AMBIGUOUS_NAME: &str = "mcp_budget.catalog.ambiguous_name";
/// A method the gateway does not serve, or one 2026-07-28 removed (`-32601`; HTTP 404 for a
/// 2026-07-28 request).
pub const METHOD_NOT_FOUND: &str = "mcp_budget.method.not_found";
/// A message that is not JSON (`-32700`; HTTP 400).
pub const REQUEST_PARSE: &str = "mcp_budget.request.parse";
/// JSON that is not a JSON-RPC 2.0 message (`-32600`; HTTP 400).
pub const REQUEST_INVALID: &str = "mcp_budget.request.invalid";
/// A JSON-RPC batch, which MCP does not allow (`-32600`; HTTP 400).
pub const REQUEST_BATCH: &str = "mcp_budget.request.batch";
/// A message nested deeper than `downstream.max_json_depth` (`-32600`; HTTP 400).
pub const REQUEST_TOO_DEEP: &str = "mcp_budget.request.too_deep";
/// A message over `downstream.max_message_bytes` (`-32001`; HTTP 413).
pub const REQUEST_TOO_LARGE: &str = "mcp_budget.request.too_large";
/// Params of the wrong shape for their method (`-32602`).
pub const REQUEST_INVALID_PARAMS: &str = "mcp_budget.request.invalid_params";
/// Under `[sanitize] arguments = "strict"`: a `tools/call` whose arguments do not match the
/// tool's (pinned) input schema, an undeclared property included, or a `prompts/get` whose
/// arguments the prompt does not declare, are not strings or lack a required one; never
/// forwarded (`-32602`). `error.data` has the `tool` (or `prompt`) and the `property`.
pub const ARGUMENTS_INVALID: &str = "mcp_budget.arguments.invalid";
/// Under `[sanitize] arguments = "strict"`: a `tools/call` of a tool whose input schema cannot
/// be checked (it does not compile, not even as draft 2020-12, 7 or 4: say draft 3's
/// `"required": true`, or a `$ref` outside the schema), so its calls are refused rather than
/// forwarded unchecked; `error.data` has the `tool` and the `reason` (`-32000`). `check
/// --live` lists such tools.
pub const ARGUMENTS_UNCHECKABLE: &str = "mcp_budget.arguments.uncheckable";
/// The answer to an upstream request the client cancelled (`-32800`, sent to the upstream's
/// waiter).
pub const REQUEST_CANCELLED: &str = "mcp_budget.request.cancelled";
/// A request before the session was initialized (`-32600`).
pub const SESSION_INVALID: &str = "mcp_budget.session.invalid";
/// A POST, GET or DELETE without `Mcp-Session-Id` where a 2025-era session is needed
/// (`-32600`; HTTP 400).
pub const SESSION_MISSING: &str = "mcp_budget.session.missing";
/// An `Mcp-Session-Id` the gateway does not know, or that expired (`-32600`; HTTP 404).
pub const SESSION_UNKNOWN: &str = "mcp_budget.session.unknown";
/// An `initialize` over `downstream.max_sessions` or `max_sessions_per_client` (`-32600`;
/// HTTP 503).
pub const SESSION_LIMIT: &str = "mcp_budget.session.limit";
/// A second GET stream for a session whose stream is open (`-32600`; HTTP 409).
pub const SESSION_STREAM_CONFLICT: &str = "mcp_budget.session.stream_conflict";
/// An upstream needs a client capability the client did not declare (`-32021`; HTTP 400 for a
/// 2026-07-28 request).
pub const CLIENT_MISSING_CAPABILITY: &str = "mcp_budget.client.missing_capability";
/// The client answered an upstream's question (sampling, elicitation, roots) with an error
/// (`-32000`).
pub const CLIENT_INPUT_FAILED: &str = "mcp_budget.client.input_failed";
/// A 2026-07-28 client retried a parked call without answering one of its questions; the
/// upstream gets this as the answer (`-32602`).
pub const CLIENT_NO_ANSWER: &str = "mcp_budget.client.no_answer";
/// A client did not answer an upstream's question (sampling, elicitation, roots) within the
/// upstream's `server_request_timeout_secs`: the upstream gets it as the answer, and the call
/// that waited on the question fails with it (`-32000`).
pub const CLIENT_TIMEOUT: &str = "mcp_budget.client.timeout";
/// A client's answer to a server→client request that is not waiting for it (`-32600`; HTTP
/// 400).
pub const ROUTE_UNKNOWN_REQUEST: &str = "mcp_budget.route.unknown_request";
/// Sent to an upstream: its server→client request could belong to several clients
/// (`-32601`).
pub const ROUTE_AMBIGUOUS: &str = "mcp_budget.route.ambiguous";
/// Sent to an upstream: no client has a request in flight that its server→client request
/// could belong to (`-32601`).
pub const ROUTE_NO_CLIENT: &str = "mcp_budget.route.no_client";
/// A client's answer to a server→client request that another replica sent (`[state]`), and
/// that replica is gone: its upstream's request went with it, nobody waits for the answer
/// (`-32600`; HTTP 400). The call that asked has failed or will be retried by its client.
pub const ROUTE_ASKER_GONE: &str = "mcp_budget.route.asker_gone";
/// A 2026-07-28 request whose routing headers repeat or differ from its body (`-32020`; HTTP
/// 400).
pub const PROTOCOL_HEADER_MISMATCH: &str = "mcp_budget.protocol.header_mismatch";
/// A 2026-07-28 request whose `_meta` lacks the protocol version or client capabilities
/// (`-32602`; HTTP 400).
pub const PROTOCOL_INVALID_ENVELOPE: &str = "mcp_budget.protocol.invalid_envelope";
/// A protocol version the gateway does not speak (`-32022`; HTTP 400).
pub const PROTOCOL_UNSUPPORTED_VERSION: &str = "mcp_budget.protocol.unsupported_version";
/// A `Host` header missing, repeated or not `host[:port]` (`-32600`; HTTP 400).
pub const HTTP_BAD_HOST: &str = "mcp_budget.http.bad_host";
/// A `Host` or `Origin` that is neither localhost nor allowed by `downstream.allowed_hosts` /
/// `allowed_origins`, against DNS rebinding (`-32600`; HTTP 403).
pub const HTTP_FORBIDDEN_ORIGIN: &str = "mcp_budget.http.forbidden_origin";
/// A POST body that is not `Content-Type: application/json` (`-32600`; HTTP 415).
pub const HTTP_UNSUPPORTED_MEDIA_TYPE: &str = "mcp_budget.http.unsupported_media_type";
/// A request whose `Accept` allows no answer the gateway can give (`-32600`; HTTP 406).
pub const HTTP_NOT_ACCEPTABLE: &str = "mcp_budget.http.not_acceptable";
/// A request body that did not arrive within `downstream.body_timeout_secs` (`-32600`; HTTP
/// 408).
pub const HTTP_BODY_TIMEOUT: &str = "mcp_budget.http.body_timeout";
/// A connection over `downstream.max_connections` or `max_connections_per_client`
/// (`-32600`; HTTP 503, then closed).
pub const HTTP_TOO_MANY_CONNECTIONS: &str = "mcp_budget.http.too_many_connections";
/// A call of a tool held back because its definition differs from its pin (changed since
/// trusted, or not in the lock); `error.data` has `old` and `new` hash and what `changed`
/// (`-32000`).
pub const TOOL_CHANGED: &str = "mcp_budget.tool.changed";
/// A call of a tool held back because its definition tries to steer the model
/// (`[sanitize] steering = "quarantine"`, until `[sanitize] allow` lists it); `error.data`
/// has its `new` hash (`-32000`).
pub const TOOL_FLAGGED: &str = "mcp_budget.tool.flagged";
/// A `prompts/get` of a prompt held back because its definition differs from its pin
/// (changed since trusted, or not in the lock); `error.data` has the `prompt`, `old` and `new`
/// hash and what `changed` (`-32000`).
pub const PROMPT_CHANGED: &str = "mcp_budget.prompt.changed";
/// Clients are configured and the request came without credentials (`-32600`, HTTP 401 with a
/// `WWW-Authenticate` challenge).
pub const AUTHENTICATION_REQUIRED: &str = "mcp_budget.authentication.required";
/// The credentials match no client: an unknown API key, a bad, expired or foreign token
/// (`-32600`, HTTP 401 with `error="invalid_token"`).
pub const AUTHENTICATION_INVALID: &str = "mcp_budget.authentication.invalid";
/// A valid bearer token whose principal and scopes map to no client (`-32600`, HTTP 403 with
/// `error="insufficient_scope"`).
pub const AUTHENTICATION_INSUFFICIENT_SCOPE: &str = "mcp_budget.authentication.insufficient_scope";
/// A request on a 2025-era session that another client opened (`-32600`, HTTP 403): a session
/// id is no credential.
pub const SESSION_FOREIGN: &str = "mcp_budget.session.foreign";
/// The client's scope does not allow this call (its tool, prompt, resource or arguments);
/// `error.data` has `tool`, `reason` and the `audit_id` of the audit line (`-32000`).
pub const AUTHORIZATION_DENIED: &str = "mcp_budget.authorization.denied";
/// Whether `kind` (an `error.data.type`) is a refusal by the gateway's own policy — the
/// client's scope ([`AUTHORIZATION_DENIED`]) or its `[limits]` (`mcp_budget.limit.*`) — rather
/// than an upstream's or the gateway's failure: metrics count it as the `denied` outcome.
#[must_use]
pub fn is_refusal(kind: &str) -> bool {
    kind == AUTHORIZATION_DENIED || kind.starts_with("mcp_budget.limit.")
}

/// The gateway is shutting down (`-32000`).
pub const GATEWAY_SHUTTING_DOWN: &str = "mcp_budget.gateway.shutting_down";
/// A bug or an unexpected fault inside the gateway: a panic, or a request left unanswered
/// (`-32603`). The one kind without an area, older than the naming rule.
pub const INTERNAL: &str = "mcp_budget.internal";

/// A client over its `[limits]` calls per second (all upstreams, or the one it called):
/// `-32023` with `data.retryAfterMs` (HTTP 429 with `Retry-After` for a 2026-07-28 request).
pub const LIMIT_RATE: &str = "mcp_budget.limit.rate";
/// A client over its `[limits] in_flight`, its queue full or waited `queue_ms`: `-32023` with
/// `data.retryAfterMs` (HTTP 429 with `Retry-After` for a 2026-07-28 request).
pub const LIMIT_IN_FLIGHT: &str = "mcp_budget.limit.in_flight";
/// The shared state store that keeps the `[limits]` rates (`[state] backend = "redis"`) is
/// unavailable and `on_store_error = "closed"` refuses calls until it is back: `-32023` with
/// `data.retryAfterMs` (HTTP 429 with `Retry-After` for a 2026-07-28 request). Also a client's
/// answer to a server→client request another replica sent, when the store does not answer to
/// forward it (`-32600`; HTTP 400). Also a `read_result` of a result not kept on the replica
/// that serves it, when the store that replicas share kept results in does not answer
/// (`-32000`, `data.id` and `data.reason`).
pub const STATE_UNAVAILABLE: &str = "mcp_budget.state.unavailable";

/// The `structuredContent.type` of `invoke_tool`'s recovery results: not error objects but
/// tool results with `isError`, which tell the model how to call the tool again. Kept out of
/// [`ALL`] (the error kinds), in this table so that every `type` string lives here.
pub mod discover {
    /// `invoke_tool` without the arguments its tool requires.
    pub const MISSING_ARGUMENTS: &str = "mcp_budget.discover.missing_arguments";
    /// `invoke_tool` with the arguments beside `arguments` (an alias key, or at the top level).
    pub const MISPLACED_ARGUMENTS: &str = "mcp_budget.discover.misplaced_arguments";
    /// `invoke_tool` with arguments its tool's input schema rejects.
    pub const INVALID_ARGUMENTS: &str = "mcp_budget.discover.invalid_arguments";
}

/// Every kind above, for tests and for tools that list them.
pub const ALL: &[&str] = &[
    UPSTREAM_UNAVAILABLE,
    UPSTREAM_START_FAILED,
    UPSTREAM_TIMEOUT,
    UPSTREAM_TURN_TIMEOUT,
    UPSTREAM_PROTOCOL,
    UPSTREAM_UNREACHABLE,
    UPSTREAM_INSTANCES_EXHAUSTED,
    UPSTREAM_CLIENT_REQUIRED,
    CATALOG_NOT_FOUND,
    CATALOG_MISNAMED,
    CATALOG_AMBIGUOUS_NAME,
    METHOD_NOT_FOUND,
    REQUEST_PARSE,
    REQUEST_INVALID,
    REQUEST_BATCH,
    REQUEST_TOO_DEEP,
    REQUEST_TOO_LARGE,
    REQUEST_INVALID_PARAMS,
    ARGUMENTS_INVALID,
    ARGUMENTS_UNCHECKABLE,
    REQUEST_CANCELLED,
    SESSION_INVALID,
    SESSION_MISSING,
    SESSION_UNKNOWN,
    SESSION_LIMIT,
    SESSION_STREAM_CONFLICT,
    CLIENT_MISSING_CAPABILITY,
    CLIENT_INPUT_FAILED,
    CLIENT_NO_ANSWER,
    CLIENT_TIMEOUT,
    ROUTE_UNKNOWN_REQUEST,
    ROUTE_AMBIGUOUS,
    ROUTE_NO_CLIENT,
    ROUTE_ASKER_GONE,
    PROTOCOL_HEADER_MISMATCH,
    PROTOCOL_INVALID_ENVELOPE,
    PROTOCOL_UNSUPPORTED_VERSION,
    HTTP_BAD_HOST,
    HTTP_FORBIDDEN_ORIGIN,
    HTTP_UNSUPPORTED_MEDIA_TYPE,
    HTTP_NOT_ACCEPTABLE,
    HTTP_BODY_TIMEOUT,
    HTTP_TOO_MANY_CONNECTIONS,
    TOOL_CHANGED,
    TOOL_FLAGGED,
    PROMPT_CHANGED,
    LIMIT_RATE,
    LIMIT_IN_FLIGHT,
    STATE_UNAVAILABLE,
    AUTHENTICATION_REQUIRED,
    AUTHENTICATION_INVALID,
    AUTHENTICATION_INSUFFICIENT_SCOPE,
    SESSION_FOREIGN,
    AUTHORIZATION_DENIED,
    GATEWAY_SHUTTING_DOWN,
    INTERNAL,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// `mcp_budget.<area>.<what>`, both parts `[a-z_]+`.
    fn well_formed(kind: &str) -> bool {
        let part =
            |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        let mut parts = kind.split('.');
        parts.next() == Some("mcp_budget")
            && parts.next().is_some_and(part)
            && parts.next().is_some_and(part)
            && parts.next().is_none()
    }

    #[test]
    fn kinds_are_unique_and_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for kind in ALL {
            assert!(seen.insert(kind), "{kind} twice");
            assert!(well_formed(kind) || *kind == INTERNAL, "{kind}");
        }
        assert!(!well_formed("mcp_budget.internal"));
        assert!(!well_formed("mcp_budget.Http.x"));
        assert!(!well_formed("mcp_budget.http.x.y"));
    }

    #[test]
    fn every_kind_is_in_the_error_table() {
        let page = include_str!("../../docs/errors.md");
        for kind in ALL {
            assert!(
                page.contains(&format!("| `{kind}` |")),
                "{kind} missing from docs/errors.md's table"
            );
        }
    }

    /// `ALL` lists every constant of this file: a new one cannot be left out of it.
    #[test]
    fn all_lists_every_constant() {
        let source = include_str!("kind.rs");
        let declared = source
            .lines()
            .filter(|l| l.starts_with("pub const ") && l.contains(": &str ="))
            .count();
        assert_eq!(declared, ALL.len());
    }
}
