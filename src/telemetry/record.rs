//! One-line recording calls, each with its fixed label set ([`super::names`]). No-ops until
//! [`enable`] (the admin listener installs a Prometheus recorder and calls it).

use std::sync::atomic::{AtomicBool, Ordering};

use super::names;

static METRICS: AtomicBool = AtomicBool::new(false);

/// Whether metrics are recorded.
#[must_use]
pub fn enabled() -> bool {
    METRICS.load(Ordering::Relaxed)
}

/// Starts recording (once a recorder is installed).
pub fn enable() {
    METRICS.store(true, Ordering::Relaxed);
}

/// The `method` label of `method`: the MCP method name, or [`names::OTHER_METHOD`].
#[must_use]
pub fn method_label(method: &str) -> &'static str {
    crate::mcp::method::Method::KNOWN
        .iter()
        .map(crate::mcp::method::Method::as_str)
        .find(|m| *m == method)
        .unwrap_or(names::OTHER_METHOD)
}

/// A request answered, with `outcome` ([`names::OK`] or [`names::ERROR`]).
pub fn request(method: &'static str, outcome: &'static str) {
    if enabled() {
        metrics::counter!(names::REQUESTS, names::METHOD => method, names::OUTCOME => outcome)
            .increment(1);
    }
}

/// A tool call of `server`'s `tool` answered after `seconds`.
pub fn tool_call(server: &str, tool: &str, outcome: &'static str, seconds: f64) {
    if enabled() {
        let (server, tool) = (server.to_owned(), tool.to_owned());
        metrics::counter!(names::TOOL_CALLS, names::SERVER => server.clone(),
            names::TOOL => tool.clone(), names::OUTCOME => outcome)
        .increment(1);
        metrics::histogram!(names::TOOL_CALL_DURATION, names::SERVER => server, names::TOOL => tool)
            .record(seconds);
    }
}

/// A `search_tools` call that found `hits` tools.
pub fn search(hits: usize) {
    if enabled() {
        let outcome = if hits == 0 { "zero" } else { "hit" };
        metrics::counter!(names::SEARCHES, names::OUTCOME => outcome).increment(1);
    }
}

/// The outcome of a meta-tool call, counted when it is a `search_tools` one (`is_search`):
/// how many tools its result names.
pub fn search_outcome(is_search: bool, outcome: &crate::discover::MetaCall<'_>) {
    if let (true, crate::discover::MetaCall::Result(result)) = (is_search && enabled(), outcome) {
        search(
            result["structuredContent"]["tools"]
                .as_array()
                .map_or(0, Vec::len),
        );
    }
}

/// A tool invoked that the session's last search ranked `rank` (1-based).
pub fn search_rank_invoked(rank: usize) {
    if enabled() {
        #[allow(clippy::cast_precision_loss)] // Ranks are small.
        metrics::histogram!(names::SEARCH_RANK_INVOKED).record(rank as f64);
    }
}

/// A `run_code` call answered with `outcome` and `limit` ([`names::CODE_RUNS`]); for a run
/// that started, its wall time in seconds and the tool calls it made.
pub fn code_run(outcome: &'static str, limit: &'static str, ran: Option<(f64, usize)>) {
    if !enabled() {
        return;
    }
    metrics::counter!(names::CODE_RUNS, names::OUTCOME => outcome, names::LIMIT => limit)
        .increment(1);
    if let Some((seconds, calls)) = ran {
        metrics::histogram!(names::CODE_RUN_DURATION).record(seconds);
        #[allow(clippy::cast_precision_loss)] // At most `code_mode_max_calls` (10,000).
        metrics::histogram!(names::CODE_RUN_TOOL_CALLS).record(calls as f64);
    }
}

/// An upstream's `list_changed`, forwarded to hosts or not.
pub fn list_changed(forwarded: bool) {
    if enabled() {
        let outcome = if forwarded { "forwarded" } else { "suppressed" };
        metrics::counter!(names::LIST_CHANGED, names::OUTCOME => outcome).increment(1);
    }
}

/// The static prefix of the listed tools changed.
pub fn static_prefix_changed() {
    if enabled() {
        metrics::counter!(names::STATIC_PREFIX_CHANGES).increment(1);
    }
}

/// A request of `client` refused by authorization for `reason` (a fixed word, say
/// `not_allowed`).
pub fn denied(client: &str, reason: &'static str) {
    if enabled() {
        metrics::counter!(names::AUTHORIZATION_DENIED, names::CLIENT => client.to_owned(),
            names::REASON => reason)
        .increment(1);
    }
}

/// A tool name resolved by `rule` to one tool, then `outcome` (`routed` or `refused`).
pub fn name_resolved(rule: &'static str, outcome: &'static str) {
    if enabled() {
        metrics::counter!(names::TOOL_NAME_RESOLVED, names::RULE => rule, names::OUTCOME => outcome)
            .increment(1);
    }
}

/// A request of `client` refused by `limit` (a fixed word, say `rate`).
pub fn limited(client: &str, limit: &'static str) {
    if enabled() {
        metrics::counter!(names::LIMITED, names::CLIENT => client.to_owned(), names::LIMIT => limit)
            .increment(1);
    }
}

/// A call's rate decided without the shared state store, for `reason` (a fixed word:
/// [`names::STORE_ERROR`], [`names::STORE_TIMEOUT`], [`names::STORE_UNCONFIGURED`]).
pub fn state_fallback(reason: &'static str) {
    if enabled() {
        metrics::counter!(names::STATE_FALLBACKS, names::REASON => reason).increment(1);
    }
}

/// A client's answer to another replica's server→client request: `forwarded`, `owner_gone`
/// or why the store did not take it ([`names::STATE_ANSWERS`]).
pub fn state_answer(outcome: &'static str) {
    if enabled() {
        metrics::counter!(names::STATE_ANSWERS, names::OUTCOME => outcome).increment(1);
    }
}

/// A policy reload, `applied` or `refused` ([`crate::reload::Outcome::as_str`]).
pub fn reload(outcome: &'static str) {
    if enabled() {
        metrics::counter!(names::RELOADS, names::OUTCOME => outcome).increment(1);
    }
}

/// `server` is connected again after it was down: a restart of a stdio child, else a
/// reconnect.
pub fn upstream_retry(server: &str, stdio: bool) {
    if stdio {
        upstream_restart(server);
    } else {
        upstream_reconnect(server);
    }
}

/// Lazy upstream `server` was started by a request and took `took` to its handshake.
pub fn upstream_first_use(server: &str, took: std::time::Duration) {
    if enabled() {
        metrics::histogram!(names::UPSTREAM_FIRST_USE, names::SERVER => server.to_owned())
            .record(took.as_secs_f64());
    }
}

/// `server`'s child was started again.
pub fn upstream_restart(server: &str) {
    if enabled() {
        metrics::counter!(names::UPSTREAM_RESTARTS, names::SERVER => server.to_owned())
            .increment(1);
    }
}

/// `server` was connected again after it had been ready.
pub fn upstream_reconnect(server: &str) {
    if enabled() {
        metrics::counter!(names::UPSTREAM_RECONNECTS, names::SERVER => server.to_owned())
            .increment(1);
    }
}

pub use names::{DEFINITION, RESULT};

/// Characters removed from `server`'s text (`part`: [`DEFINITION`] or [`RESULT`]), by class.
pub fn sanitized(server: &str, part: &'static str, removed: &crate::sanitize::Counts) {
    if !enabled() || removed.total() == 0 {
        return;
    }
    let classes = [
        ("tag", removed.tag),
        ("bidi", removed.bidi),
        ("invisible", removed.invisible),
        ("ansi", removed.ansi),
        ("control", removed.control),
    ];
    for (class, n) in classes.into_iter().filter(|(_, n)| *n > 0) {
        metrics::counter!(names::SANITIZE_REMOVED, names::SERVER => server.to_owned(),
            names::CLASS => class, names::PART => part)
        .increment(n as u64);
    }
}

/// A definition of `server` flagged as steering the model.
pub fn flagged(server: &str) {
    if enabled() {
        metrics::counter!(names::SANITIZE_FLAGGED, names::SERVER => server.to_owned()).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_outside_the_list_share_one_label() {
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("tools/frobnicate-1234"), names::OTHER_METHOD);
    }
}
