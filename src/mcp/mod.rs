//! MCP protocol facts the gateway reads: method names, eras, `_meta` keys, HTTP header rules,
//! and the translation between eras.

pub mod bridge;
pub mod meta;
pub mod method;
pub mod modern;
pub mod pages;
pub mod params;
pub mod view;

/// The log levels of MCP, RFC 5424's severities from the lowest: what `logging/setLevel` and a
/// modern request's `_meta` log level may name.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Why `level` is not a log level MCP knows ([`LOG_LEVELS`]), if it is not one.
#[must_use]
pub fn log_level_problem(level: Option<&serde_json::Value>) -> Option<String> {
    let known = || LOG_LEVELS.join(", ");
    match level {
        Some(serde_json::Value::String(l)) if LOG_LEVELS.contains(&l.as_str()) => None,
        Some(serde_json::Value::String(l)) => Some(format!(
            "log level {l:?} is not one of RFC 5424's: {}",
            known()
        )),
        Some(other) => Some(format!(
            "the log level must be a string, one of {}; got {other}",
            known()
        )),
        None => Some(format!("a log level is required: one of {}", known())),
    }
}

/// The protocol era of a request, a client or an upstream.
///
/// A request's era is what its view says ([`view::RequestView::era`]); an upstream's is
/// `Option<Era>`, `None` until its first handshake tells
/// ([`Upstream::era`](crate::upstream::Upstream::era)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Era {
    /// 2025-11-25 and before (and 2024-11-05): `initialize`, sessions, server→client
    /// requests; a session's `initialize` said what the client is.
    #[default]
    Legacy,
    /// 2026-07-28: stateless, the `_meta` envelope on every request (or the transport said
    /// so), MRTR.
    Modern,
}
