//! The policy file's shape, as written in TOML. Validated into [`super::Policy`] by
//! `validate`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_spanned::Spanned;

/// The whole policy file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawPolicy {
    /// Schema version; must be `1`.
    pub version: Option<u32>,
    /// How hosts reach the gateway.
    #[serde(default)]
    pub downstream: RawDownstream,
    /// How upstream names are joined to tool names.
    #[serde(default)]
    pub aggregate: RawAggregate,
    /// The MCP servers behind the gateway.
    #[serde(default)]
    pub upstream: Vec<Spanned<RawUpstream>>,
    /// Token budget: model, threshold, compression.
    #[serde(default)]
    pub budget: super::budget::RawBudget,
    /// Progressive discovery: meta-tools and search.
    #[serde(default)]
    pub discover: super::discover::RawDiscover,
    /// Who may call the gateway (`[[client]]`). Default: nobody configured (one anonymous
    /// principal with every right).
    #[serde(default)]
    pub client: Vec<super::client::RawClient>,
    /// How callers authenticate beyond API keys (`[auth]`, `[auth.jwt]`).
    #[serde(default)]
    pub auth: super::client::RawAuth,
    /// The audit log (`[audit]`). Default: none (stderr once clients are configured).
    pub audit: Option<super::audit::RawAudit>,
    /// What is removed from and flagged in upstream text.
    #[serde(default)]
    pub sanitize: super::sanitize::RawSanitize,
    /// Tool definitions pinned by hash.
    #[serde(default)]
    pub pin: super::pin::RawPin,
    /// What each client may spend: calls in flight, calls per second.
    #[serde(default)]
    pub limits: super::limits::RawLimits,
    /// Log format and OTLP trace export.
    #[serde(default)]
    pub telemetry: super::telemetry::RawTelemetry,
    /// The admin listener: metrics and health.
    #[serde(default)]
    pub admin: super::telemetry::RawAdmin,
    /// The LLM API listener: tools of Anthropic / `OpenAI` requests rewritten and preselected
    /// (`[llm_api]`). Default: off.
    #[serde(default)]
    pub llm_api: super::llm_api::RawLlmApi,
    /// Sealed session ids: where the seal key is (`[sessions]`).
    #[serde(default)]
    pub sessions: super::sessions::RawSessions,
    /// State shared by replicas: where the `[limits]` rates live (`[state]`). Default: each
    /// replica's own memory.
    #[serde(default)]
    pub state: super::state::RawState,
}

impl RawPolicy {
    /// Every relative file path of the policy (`[pin] lock`, `[auth.jwt] jwks_file`, `[audit]
    /// path`, `[budget] usage_file`, `[discover] vocabulary_file`, `embedding_model` and
    /// `embedding_cache_dir`, `[sessions] seal_key_file`, an upstream's `cwd`, `ca_file`, `client_cert_file`,
    /// `client_key_file`) made relative to `base`, the policy file's folder, instead of the
    /// working directory: the policy means the same wherever the gateway is started.
    pub(crate) fn rebase(&mut self, base: &std::path::Path) {
        let rebase = |path: &mut Option<PathBuf>| {
            if let Some(p) = path.as_mut().filter(|p| p.is_relative()) {
                *p = base.join(&*p);
            }
        };
        rebase(&mut self.pin.lock);
        rebase(&mut self.budget.usage_file);
        rebase(&mut self.discover.vocabulary_file);
        rebase(&mut self.discover.embedding_model);
        rebase(&mut self.discover.embedding_cache_dir);
        rebase(&mut self.aggregate.manifest_dir);
        rebase(&mut self.sessions.seal_key_file);
        rebase(&mut self.state.ca_file);
        rebase(&mut self.state.client_cert_file);
        rebase(&mut self.state.client_key_file);
        if let Some(jwt) = self.auth.jwt.as_mut() {
            rebase(&mut jwt.jwks_file);
        }
        if let Some(audit) = self.audit.as_mut() {
            rebase(&mut audit.path);
        }
        for up in &mut self.upstream {
            let up = up.get_mut();
            for path in [
                &mut up.cwd,
                &mut up.ca_file,
                &mut up.client_cert_file,
                &mut up.client_key_file,
            ] {
                rebase(path);
            }
        }
    }
}

/// `[downstream]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawDownstream {
    /// Serve MCP over stdin/stdout. Default: false (the `--stdio` flag also turns it on).
    #[serde(default)]
    pub stdio: bool,
    /// Address for streamable HTTP, e.g. `"127.0.0.1:8931"`. Default: none (the `--http` flag
    /// also sets it).
    pub http: Option<String>,
    /// Origins accepted on HTTP besides localhost ones, e.g. `"https://app.example.com"`.
    /// Default: none.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Host names accepted in the `Host` header besides `localhost`, `127.0.0.1` and `[::1]`.
    /// Default: none.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Largest accepted message in bytes. Default: 4 MiB.
    pub max_message_bytes: Option<usize>,
    /// Deepest nesting of objects and arrays accepted in a client message (stdio and HTTP); the
    /// message object itself is level 1. Default: 128.
    pub max_json_depth: Option<usize>,
    /// Seconds an HTTP client may take to send a request's body, counted from the end of its
    /// headers. Default: 30.
    pub body_timeout_secs: Option<u64>,
    /// Open HTTP connections, all clients together. Default: 512.
    pub max_connections: Option<usize>,
    /// Open HTTP connections of one client: an authenticated `[[client]]` once a request on the
    /// connection names it, else the connection's address. Default: 128.
    pub max_connections_per_client: Option<usize>,
    /// Live 2025-era HTTP sessions, all clients together. Default: 4096.
    pub max_sessions: Option<usize>,
    /// Live 2025-era HTTP sessions of one client: an authenticated `[[client]]` (per token
    /// subject), else the address that opened them. Default: 256.
    pub max_sessions_per_client: Option<usize>,
    /// Seconds an HTTP session may go unused (no request in flight, no open GET stream) before
    /// it expires. Default: 1800.
    pub session_idle_secs: Option<u64>,
    /// Messages queued for one client that it is not reading: on HTTP one more closes that
    /// stream (a session's GET stream, a POST's SSE answer); on stdio, stdin is not read while
    /// that many wait, and at most that many requests are in flight. Default: 1024.
    pub max_outbound_messages: Option<usize>,
    /// Refuse (406) a POST whose `Accept` does not list both `application/json` and
    /// `text/event-stream`, as the streamable HTTP spec asks of clients (2024-11-05 clients
    /// still need only JSON). Default: false: a POST that accepts either is answered in a shape
    /// it accepts.
    #[serde(default)]
    pub strict_accept: bool,
    /// The `[[client]]` that stdio messages come from. Default: none (with clients configured,
    /// stdio then needs a client named after the local user, `$USER`, or `anonymous`).
    pub stdio_client: Option<String>,
    /// Serve a non-loopback HTTP address with no client authentication. Default: false.
    #[serde(default)]
    pub allow_anonymous: bool,
    /// Proxies (addresses or CIDRs, e.g. `"10.0.0.0/8"`) whose `forwarded_header` names the
    /// client: for a request from one of them, the client's address (per-address session and
    /// connection caps, logs) is the right-most address of that header that is not itself a
    /// trusted proxy. Default: none (the connection's own address).
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// The header `trusted_proxies` set to name the client: `"x-forwarded-for"` (`HAProxy`
    /// `option forwardfor`, nginx `$proxy_add_x_forwarded_for`) or `"forwarded"` (RFC 7239
    /// `for=`, `HAProxy` `option forwarded`); the other one is ignored, whatever it says.
    /// Case-insensitive. Default: `"x-forwarded-for"`.
    pub forwarded_header: Option<String>,
}

/// `[aggregate]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawAggregate {
    /// Separator between server id and tool name. Default: `"__"`.
    pub separator: Option<String>,
    /// When every upstream's server runs, unless its own `start` says otherwise: `"eager"`
    /// (default: started with the gateway) or `"lazy"` (started by the first request that
    /// needs it, listed meanwhile from its manifest).
    pub start: Option<String>,
    /// Seconds a lazy server may go without requests before it is stopped (the next request
    /// starts it again); 0: never. Default: 300.
    pub idle_stop_secs: Option<u64>,
    /// Where each upstream's manifest (what it lists, its capabilities, keyed by what starts
    /// it) is kept, relative to the policy file's folder; lazy upstreams are listed from it
    /// without running, `pin` writes it. Default: `$XDG_CACHE_HOME/mcp-budget/manifests`, else
    /// `~/.cache/mcp-budget/manifests`.
    pub manifest_dir: Option<PathBuf>,
    /// A `tools/call` of a name no upstream lists that resolves to one tool (another
    /// separator, `github.get_issue`; another case; the bare name, `get_issue`): `route` calls
    /// that tool, `strict` answers `mcp_budget.catalog.misnamed` naming it, `off` answers
    /// `mcp_budget.catalog.not_found`. A name that resolves to several tools is answered
    /// `mcp_budget.catalog.ambiguous_name` with them (not with `off`). Authorization applies to
    /// the tool resolved. Default: `"route"`.
    pub resolve_names: Option<String>,
}

/// One `[[upstream]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawUpstream {
    /// Server id: used as the namespace of its tools.
    pub name: String,
    /// Command of a stdio server.
    pub command: Option<String>,
    /// Arguments, passed intact (flags included), except that `${env:VAR}` (or
    /// `${env:VAR:-default}`) in one is filled from the gateway's environment when the child
    /// starts. Default: none.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for the child, on top of what it inherits. Default: none.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Give the child the gateway's whole environment (`env` on top). Default: false: the child
    /// gets only a small base (`PATH`, `HOME`, locale, ...; see `upstream::stdio`) plus `env`.
    #[serde(default)]
    pub inherit_env: bool,
    /// Working directory of the child. Default: the gateway's.
    pub cwd: Option<PathBuf>,
    /// URL of a streamable HTTP server.
    pub url: Option<String>,
    /// Headers sent to an HTTP server (e.g. `Authorization`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// HTTP transport of a `url` upstream: `"streamable"` (default; falls back to HTTP+SSE
    /// when the server refuses the first POST with a 4xx) or `"sse"` (2024-11-05 HTTP+SSE).
    pub transport: Option<String>,
    /// PEM file of the CA certificates an HTTPS server's certificate must chain to (replacing
    /// the built-in roots for this upstream). Default: the built-in (Mozilla) roots.
    pub ca_file: Option<PathBuf>,
    /// PEM file of a client certificate for mutual TLS (with `client_key_file`). Default: none.
    pub client_cert_file: Option<PathBuf>,
    /// PEM file of the private key of `client_cert_file`. Default: none.
    pub client_key_file: Option<PathBuf>,
    /// Seconds to wait for an answer to one request. Default: 60.
    pub timeout_secs: Option<u64>,
    /// Tools of this upstream change often (per session); they are listed after the static
    /// ones so caches of the static prefix survive. Default: false.
    #[serde(default)]
    pub volatile: bool,
    /// Protocol era spoken to it: `auto` (default: probe 2026-07-28 first, fall back to
    /// `initialize`), `2026-07-28` or `2025-11-25`.
    pub protocol: Option<String>,
    /// Roots the gateway answers `roots/list` with for this upstream itself: `file://` URIs, as
    /// strings or `{ uri = "...", name = "..." }` tables. Kept as TOML values so that validation
    /// can name the exact entry and field of each problem. Default: not declared.
    pub roots: Option<Vec<toml::Value>>,
    /// `[sanitize]` keys overridden for this upstream. Default: none (`[sanitize]` applies).
    pub sanitize: Option<super::sanitize::RawSanitize>,
    /// `/readyz` on the admin listener waits for this upstream. Default: true.
    pub required: Option<bool>,
    /// Who shares one running instance: `"global"` (default: every client) or `"per_client"`
    /// (each client its own, started on its first call with its `[client.upstream.<name>]`).
    pub share: Option<String>,
    /// Seconds a per-client instance may go without calls before it is stopped. Default: 600.
    pub idle_secs: Option<u64>,
    /// When its server runs: `"eager"` (started with the gateway) or `"lazy"` (started by the
    /// first request that needs it: a call, `resources/read`, `prompts/get`, a subscription,
    /// a completion; listed meanwhile from its manifest). Default: `[aggregate] start`.
    pub start: Option<String>,
    /// Seconds a lazy server may go without requests before it is stopped; 0: never.
    /// Default: `[aggregate] idle_stop_secs`.
    pub idle_stop_secs: Option<u64>,
    /// Per-client instances of this upstream running at once. Default: 32.
    pub max_instances: Option<usize>,
    /// What a 2025-era server's requests to clients (sampling, elicitation, roots) get while
    /// several clients have calls in flight to it: `"refuse_ambiguous"` (default: refused as
    /// ambiguous, the server gets an error) or `"serialize"` (a call of a client that declared
    /// sampling, elicitation or roots has the upstream to itself, so each request has exactly
    /// one owner; other calls wait meanwhile, except that while it waits on its client's
    /// answer, calls of clients that declared none of them run).
    pub server_requests: Option<String>,
    /// Seconds a server→client request may wait for its client's answer before the upstream
    /// gets an error answer and the call it belongs to fails. Under `server_requests =
    /// "serialize"` it is also how long one question of a slow or silent client can keep the
    /// calls of other clients that may be asked waiting. Default: 30.
    pub server_request_timeout_secs: Option<u64>,
    /// Only the server's tools whose own names match one of these globs are served (e.g.
    /// `["get_*", "search_*"]`); the others are not listed, searched or callable. Default: all.
    #[serde(default)]
    pub include_tools: Vec<String>,
    /// The server's tools whose own names match one of these globs are not served (applied
    /// after `include_tools`). Default: none.
    #[serde(default)]
    pub exclude_tools: Vec<String>,
}
