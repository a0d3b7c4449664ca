//! Every metric name and label key, in one place (`docs/metrics.md` is generated from this file).
//!
//! Label values are bounded: server and tool names come from the catalog (a tool name the
//! catalog does not know is [`UNKNOWN`]), methods from the MCP method list (others are
//! [`OTHER_METHOD`]), outcomes from the constants below. Never ids, never argument values.

/// Requests answered, by `method` and `outcome` ([`OK`] | [`ERROR`] | [`DENIED`]) (counter).
pub const REQUESTS: &str = "mcp_budget_requests_total";
/// Tool calls answered, by `server`, `tool` and `outcome` ([`OK`] | [`TOOL_ERROR`] | [`ERROR`]
/// | [`DENIED`]) (counter). A call made through `invoke_tool` or by a `run_code` script counts under its real
/// server and tool, and the meta-tool call itself under `server="mcp-budget"`.
pub const TOOL_CALLS: &str = "mcp_budget_tool_calls_total";
/// Time from a `tools/call` entering the stack to its answer, by `server` and `tool`
/// (histogram, seconds).
pub const TOOL_CALL_DURATION: &str = "mcp_budget_tool_call_duration_seconds";
/// 1 while the upstream is ready, 0 otherwise, by `server` (gauge, read at scrape).
pub const UPSTREAM_UP: &str = "mcp_budget_upstream_up";
/// Requests sent to the upstream and not answered yet, by `server` (gauge, read at scrape).
pub const UPSTREAM_IN_FLIGHT: &str = "mcp_budget_upstream_in_flight";
/// Running per-client instances of a `share = "per_client"` upstream, by `server` (gauge, read
/// at scrape).
pub const UPSTREAM_INSTANCES: &str = "mcp_budget_upstream_instances";
/// Times a stdio upstream's child was started again, by `server` (counter).
pub const UPSTREAM_RESTARTS: &str = "mcp_budget_upstream_restarts_total";
/// Times an HTTP upstream was connected again after it was ready, by `server` (counter).
pub const UPSTREAM_RECONNECTS: &str = "mcp_budget_upstream_reconnects_total";
/// 1 for the life phase an upstream is in (`configured`, `manifest_known`, `starting`,
/// `started`, `invoked`, `stopped`), 0 for the others, by `server`, `state` and `start`
/// (`eager` | `lazy`) (gauge, read at scrape).
pub const UPSTREAM_STATE: &str = "mcp_budget_upstream_state";
/// Time from the request that started a lazy upstream to its handshake: what the first call
/// after a stop waits for, by `server` (histogram, seconds).
pub const UPSTREAM_FIRST_USE: &str = "mcp_budget_upstream_first_use_seconds";
/// Label: an upstream's life phase.
pub const STATE: &str = "state";
/// Label: an upstream's `start` (`eager` | `lazy`).
pub const START: &str = "start";
/// Tokens of the catalog's tools listed in full, by `server` and `profile` (gauge).
pub const TOKENS_BEFORE: &str = "mcp_budget_tokens_before";
/// Tokens of what hosts are listed under the plan, by `server` and `profile` (gauge).
pub const TOKENS_AFTER: &str = "mcp_budget_tokens_after";
/// `tokens_before - tokens_after`, by `server` and `profile` (gauge).
pub const TOKENS_SAVED: &str = "mcp_budget_tokens_saved";
/// 1 for the plan's current rung, by `profile` and `rung` (gauge).
pub const PLAN_RUNG: &str = "mcp_budget_plan_rung";
/// Tools in the catalog, by `server` (gauge).
pub const TOOLS: &str = "mcp_budget_tools";
/// `search_tools` calls, by `outcome` (`hit` | `zero`) (counter).
pub const SEARCHES: &str = "mcp_budget_searches_total";
/// Rank (1-based) a tool had in the last `search_tools` of its session when it was invoked; calls
/// of tools that search did not return are not observed (histogram).
pub const SEARCH_RANK_INVOKED: &str = "mcp_budget_search_rank_invoked";
/// `run_code` calls answered, by `outcome` ([`OK`] | [`ERROR`]: the script threw, did not
/// compile or was missing | [`STOPPED`]: a limit stopped it | [`ENGINE`]: the sandbox failed)
/// and `limit` (the `[discover]` key of the limit that stopped it, else [`NO_LIMIT`]) (counter).
pub const CODE_RUNS: &str = "mcp_budget_code_runs_total";
/// Wall time of a `run_code` run that started, from its engine's start to its answer
/// (histogram, seconds).
pub const CODE_RUN_DURATION: &str = "mcp_budget_code_run_duration_seconds";
/// `tools.call`s a `run_code` run that started sent down the stack (histogram).
pub const CODE_RUN_TOOL_CALLS: &str = "mcp_budget_code_run_tool_calls";
/// `notifications/tools/list_changed` from upstreams, by `outcome` (`forwarded` |
/// `suppressed`) (counter).
pub const LIST_CHANGED: &str = "mcp_budget_list_changed_total";
/// Times the static prefix of the listed tools (those before the tools of `volatile` upstreams)
/// changed, so host prompt caches were lost; budget on (counter).
pub const STATIC_PREFIX_CHANGES: &str = "mcp_budget_static_prefix_changes_total";
/// Requests refused by authorization, by `client` and `reason` (counter).
pub const AUTHORIZATION_DENIED: &str = "mcp_budget_authorization_denied_total";
/// `tools/call`s of a name no upstream lists that resolved to one tool by a near-name rule
/// (`[aggregate] resolve_names`), by `rule` (`separator` | `case` | `bare`) and `outcome`
/// (`routed` | `refused`: answered with the right name, strict) (counter).
pub const TOOL_NAME_RESOLVED: &str = "mcp_budget_tool_name_resolved_total";
/// Label: the near-name rule that resolved a tool name.
pub const RULE: &str = "rule";
/// Requests refused by a limit, by `client` and `limit` (counter).
pub const LIMITED: &str = "mcp_budget_limited_total";
/// Calls whose rate was decided without the shared state store (`[state] backend = "redis"`
/// unreachable, failing or slower than `timeout_ms`), by `reason` ([`STORE_ERROR`] |
/// [`STORE_TIMEOUT`] | [`STORE_UNCONFIGURED`]) (counter): each was decided by
/// `on_store_error`.
pub const STATE_FALLBACKS: &str = "mcp_budget_state_fallbacks_total";
/// Clients' answers to server→client requests another replica sent, and 2026-07-28 retries
/// of calls another replica parked (`[state]`), by `outcome` (`forwarded` |
/// `resumed_elsewhere` | `owner_gone` | `no_reply` | [`STORE_ERROR`] | [`STORE_TIMEOUT`])
/// (counter).
pub const STATE_ANSWERS: &str = "mcp_budget_state_answers_total";
/// Policy reloads, by `outcome` (`applied` | `refused`) (counter).
pub const RELOADS: &str = "mcp_budget_reloads_total";
/// Client sessions open (gauge, read at scrape).
pub const SESSIONS_ACTIVE: &str = "mcp_budget_sessions_active";
/// Tools held out of the catalog by the guard, by `server` and `reason` (`changed` |
/// `unknown` | `steering`) (gauge, read at scrape).
pub const TOOLS_QUARANTINED: &str = "mcp_budget_tools_quarantined";
/// Prompts held out of the catalog by the guard, by `server` and `reason` (`changed` |
/// `unknown`) (gauge, read at scrape).
pub const PROMPTS_QUARANTINED: &str = "mcp_budget_prompts_quarantined";
/// Resource templates held out of the catalog by the guard, by `server` and `reason`
/// (`changed` | `unknown`) (gauge, read at scrape).
pub const RESOURCE_TEMPLATES_QUARANTINED: &str = "mcp_budget_resource_templates_quarantined";
/// Characters the sanitizer removed, by `server`, `class` (`tag` | `bidi` | `invisible` |
/// `ansi` | `control`) and `part` (`definition` | `result`) (counter). Definitions count
/// once when first listed so, results at each answer.
pub const SANITIZE_REMOVED: &str = "mcp_budget_sanitize_removed_total";
/// Definitions whose steering score reached the threshold, by `server` (counter, once per
/// definition).
pub const SANITIZE_FLAGGED: &str = "mcp_budget_sanitize_flagged_total";
/// Always 1, by `version` (gauge).
pub const BUILD_INFO: &str = "mcp_budget_build_info";

/// Label: the upstream's name.
pub const SERVER: &str = "server";
/// Label: the tool's own name (as its upstream lists it).
pub const TOOL: &str = "tool";
/// Label: the JSON-RPC method.
pub const METHOD: &str = "method";
/// Label: how it ended.
pub const OUTCOME: &str = "outcome";
/// Label: the budget profile: [`DEFAULT_PROFILE`] (the policy's `[budget]` over the whole
/// catalog) and, with `[[client]]`s, each client's name (its scope's tools planned for its
/// `model`): one more than the clients in the policy. `/status` lists the same profiles.
pub const PROFILE: &str = "profile";
/// Label: the plan's rung.
pub const RUNG: &str = "rung";
/// Label: the client (principal) name.
pub const CLIENT: &str = "client";
/// Label: why a request was refused.
pub const REASON: &str = "reason";
/// Label: which limit refused a request; for a `run_code` run, the `[discover]` key of the limit
/// that stopped it.
pub const LIMIT: &str = "limit";
/// [`STATE_FALLBACKS`] reason: the store answered with an error or could not be reached.
pub const STORE_ERROR: &str = "store_error";
/// [`STATE_FALLBACKS`] reason: the store did not answer within `[state] timeout_ms`.
pub const STORE_TIMEOUT: &str = "timeout";
/// [`STATE_FALLBACKS`] reason: no store to ask (its URL unset, or a build without the
/// `redis` feature).
pub const STORE_UNCONFIGURED: &str = "unconfigured";
/// Label: the gateway's version.
pub const VERSION: &str = "version";
/// Label: the class of characters removed ([`crate::sanitize::Counts`]' fields).
pub const CLASS: &str = "class";
/// Label: where text was sanitized, [`DEFINITION`] or [`RESULT`].
pub const PART: &str = "part";

/// Outcome: answered with a result.
pub const OK: &str = "ok";
/// Outcome: answered with a JSON-RPC error.
pub const ERROR: &str = "error";
/// Outcome of a tool call: a result with `isError: true`.
pub const TOOL_ERROR: &str = "tool_error";
/// Outcome: refused by the gateway's own policy before any upstream saw it (the client's scope,
/// `mcp_budget.authorization.denied`, or its `[limits]`, `mcp_budget.limit.*`), not an
/// upstream's error.
pub const DENIED: &str = "denied";
/// Outcome of a `run_code` run: a limit stopped it (its key is the `limit` label).
pub const STOPPED: &str = "limit";
/// Outcome of a `run_code` run: the sandbox could not be set up or its result not read.
pub const ENGINE: &str = "engine";
/// `limit` label of a `run_code` run no limit stopped.
pub const NO_LIMIT: &str = "none";
/// Label value of a tool name the catalog does not know.
pub const UNKNOWN: &str = "unknown";
/// `server` label of a call of one of the gateway's own meta-tools (`tool`: its name): the
/// call it makes is counted too, under its real server and tool.
pub const GATEWAY_SERVER: &str = "mcp-budget";
/// [`crate::context::Caller::meta`] of a call made through `invoke_tool`.
pub const VIA_INVOKE_TOOL: &str = "invoke_tool";
/// [`crate::context::Caller::meta`] of a call made by a `run_code` script.
pub const VIA_RUN_CODE: &str = "run_code";
/// Label value of a method outside the MCP method list.
pub const OTHER_METHOD: &str = "other";
/// Part: a tool, prompt, resource or template definition.
pub const DEFINITION: &str = "definition";
/// Part: a result (tool, prompt, resource) or server instructions.
pub const RESULT: &str = "result";
/// The profile of the policy's own `[budget]`.
pub const DEFAULT_PROFILE: &str = "default";

/// Every metric: name, type, help text (the `# HELP` line of the exposition).
pub const METRICS: &[(&str, MetricType, &str)] = &[
    (
        REQUESTS,
        MetricType::Counter,
        "Requests answered, by method and outcome.",
    ),
    (
        TOOL_CALLS,
        MetricType::Counter,
        "Tool calls answered, by server, tool and outcome.",
    ),
    (
        TOOL_CALL_DURATION,
        MetricType::Histogram,
        "Seconds from a tools/call to its answer.",
    ),
    (
        UPSTREAM_UP,
        MetricType::Gauge,
        "1 while the upstream is ready, else 0.",
    ),
    (
        UPSTREAM_IN_FLIGHT,
        MetricType::Gauge,
        "Requests sent to the upstream, not answered yet.",
    ),
    (
        UPSTREAM_INSTANCES,
        MetricType::Gauge,
        "Running per-client instances of a share = \"per_client\" upstream.",
    ),
    (
        UPSTREAM_RESTARTS,
        MetricType::Counter,
        "Restarts of a stdio upstream's child.",
    ),
    (
        UPSTREAM_RECONNECTS,
        MetricType::Counter,
        "Reconnections of an HTTP upstream.",
    ),
    (
        UPSTREAM_STATE,
        MetricType::Gauge,
        "1 for the life phase the upstream is in (configured, manifest_known, starting, started, invoked, stopped), else 0.",
    ),
    (
        UPSTREAM_FIRST_USE,
        MetricType::Histogram,
        "Seconds from the request that started a lazy upstream to its handshake.",
    ),
    (
        TOKENS_BEFORE,
        MetricType::Gauge,
        "Tokens of the upstream's tools listed in full.",
    ),
    (
        TOKENS_AFTER,
        MetricType::Gauge,
        "Tokens of the upstream's tools as the plan lists them.",
    ),
    (
        TOKENS_SAVED,
        MetricType::Gauge,
        "Tokens the plan saves on the upstream's tools.",
    ),
    (
        PLAN_RUNG,
        MetricType::Gauge,
        "1 for the rung the profile's plan is on.",
    ),
    (
        TOOLS,
        MetricType::Gauge,
        "Tools the upstream lists in the catalog.",
    ),
    (
        SEARCHES,
        MetricType::Counter,
        "search_tools calls, by outcome (hit, zero).",
    ),
    (
        SEARCH_RANK_INVOKED,
        MetricType::Histogram,
        "Search rank of tools then invoked.",
    ),
    (
        CODE_RUNS,
        MetricType::Counter,
        "run_code calls answered, by outcome and the limit that stopped the run.",
    ),
    (
        CODE_RUN_DURATION,
        MetricType::Histogram,
        "Seconds a run_code run took, engine start to answer.",
    ),
    (
        CODE_RUN_TOOL_CALLS,
        MetricType::Histogram,
        "Tool calls a run_code run made.",
    ),
    (
        LIST_CHANGED,
        MetricType::Counter,
        "Upstream list_changed, forwarded or suppressed.",
    ),
    (
        STATIC_PREFIX_CHANGES,
        MetricType::Counter,
        "Changes of the listed tools' static prefix.",
    ),
    (
        AUTHORIZATION_DENIED,
        MetricType::Counter,
        "Requests denied, by client and reason.",
    ),
    (
        TOOL_NAME_RESOLVED,
        MetricType::Counter,
        "Tool names resolved by a near-name rule, by rule and outcome.",
    ),
    (
        LIMITED,
        MetricType::Counter,
        "Requests refused by a limit, by client and limit.",
    ),
    (
        STATE_FALLBACKS,
        MetricType::Counter,
        "Calls decided without the shared state store, by reason.",
    ),
    (
        STATE_ANSWERS,
        MetricType::Counter,
        "Client answers and retries for another replica, by outcome.",
    ),
    (RELOADS, MetricType::Counter, "Policy reloads, by outcome."),
    (SESSIONS_ACTIVE, MetricType::Gauge, "Client sessions open."),
    (
        TOOLS_QUARANTINED,
        MetricType::Gauge,
        "Tools held out of the catalog, by server and reason.",
    ),
    (
        PROMPTS_QUARANTINED,
        MetricType::Gauge,
        "Prompts held out of the catalog, by server and reason.",
    ),
    (
        RESOURCE_TEMPLATES_QUARANTINED,
        MetricType::Gauge,
        "Resource templates held out of the catalog, by server and reason.",
    ),
    (
        SANITIZE_REMOVED,
        MetricType::Counter,
        "Characters removed from upstream text, by server, class and part.",
    ),
    (
        SANITIZE_FLAGGED,
        MetricType::Counter,
        "Definitions flagged as steering the model, by server.",
    ),
    (
        BUILD_INFO,
        MetricType::Gauge,
        "Always 1, labelled with the gateway's version.",
    ),
];

/// The type of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    /// Only goes up.
    Counter,
    /// A value now.
    Gauge,
    /// Observations in buckets.
    Histogram,
}
