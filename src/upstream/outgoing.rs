//! What a request looks like on its way to one upstream: the JSON surgery on its params, as
//! pure functions.
//!
//! A request from a client is rewritten before an upstream sees it:
//! - a 2025-era upstream does not see a modern client's envelope keys
//!   (`io.modelcontextprotocol/*` in `_meta`): an upstream that knows both eras refuses them on
//!   its 2025 connection;
//! - the client's progress token is replaced by one of the gateway's ([`progress_token`]), so
//!   that two clients' tokens never collide on a shared upstream; notifications map back to
//!   the client's own token;
//! - a 2026-07-28 upstream gets the gateway's envelope in `_meta` (protocol version, client
//!   info, the capabilities declared for the caller, and the log level a 2025-era client set).
//!
//! Everything else in the params (unknown fields included) passes unchanged, and params that
//! need none of it are not even parsed.

use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::jsonrpc::to_raw;
use crate::mcp::Era;
use crate::mcp::bridge;
use crate::mcp::modern::MODERN_VERSION;

/// How to rewrite one request's params for its upstream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rewrite<'a> {
    /// The era the upstream speaks (`None`: not known yet).
    pub(crate) era: Option<Era>,
    /// The upstream's index and the request's id, when a client waits on the request: its
    /// progress token is then replaced by [`progress_token`] (`None`: no client to map progress
    /// back to, tokens stay as they are).
    pub(crate) progress: Option<(usize, i64)>,
    /// The capabilities to declare to a modern upstream.
    pub(crate) capabilities: &'a Value,
    /// The log level to ask a modern upstream for.
    pub(crate) log_level: Option<&'a str>,
}

/// Rewritten params.
#[derive(Debug, Default)]
pub(crate) struct Outgoing {
    /// The params to send.
    pub(crate) params: Option<Box<RawValue>>,
    /// The gateway's progress token and the client's it replaced, when [`Rewrite::progress`]
    /// asked for it and the params had one.
    pub(crate) progress: Option<(String, Value)>,
}

/// The upstream-side progress token of request `id` on upstream `index`: unique per upstream
/// (ids are), and recognisable as the gateway's.
#[must_use]
pub(crate) fn progress_token(index: usize, id: i64) -> String {
    format!("mcpb-{index}-{id}")
}

/// The capabilities to declare to a modern upstream for a caller: the client's own when it is
/// known (an object on the wire, even when the client declared none), else the gateway's.
#[must_use]
pub(crate) fn declared_capabilities<'a>(
    client: Option<&'a Value>,
    gateway: &'a Value,
    empty: &'a Value,
) -> &'a Value {
    match client {
        Some(caps) if caps.is_object() => caps,
        Some(_) => empty,
        None => gateway,
    }
}

/// Rewrites `params` for the upstream as `how` says (see the module docs).
#[must_use]
pub(crate) fn rewrite(params: Option<Box<RawValue>>, how: &Rewrite<'_>) -> Outgoing {
    // The first two rewrites only touch `_meta`: params that cannot name it (no `_meta`, and no
    // escape that could spell it) skip both scans.
    let maybe_meta = params
        .as_ref()
        .is_some_and(|p| p.get().contains('\\') || p.get().contains("_meta"));
    let strip = maybe_meta
        && how.era == Some(Era::Legacy)
        && params
            .as_ref()
            .is_some_and(|p| p.get().contains(bridge::ENVELOPE_PREFIX));
    let remap = maybe_meta
        && how.progress.is_some()
        && params
            .as_ref()
            .is_some_and(|p| p.get().contains("progressToken"));
    let modern = how.era == Some(Era::Modern);
    if !(strip || remap || modern) {
        return Outgoing {
            params,
            progress: None,
        };
    }
    let mut value: Option<Value> = params
        .as_ref()
        .and_then(|p| serde_json::from_str(p.get()).ok());
    let mut changed = false;
    if strip {
        if let Some(stripped) = value.as_ref().and_then(bridge::without_envelope) {
            value = Some(stripped);
            changed = true;
        }
    }
    let mut progress = None;
    if let (true, Some((index, id)), Some(value)) = (remap, how.progress, value.as_mut()) {
        let ours = progress_token(index, id);
        progress = replace_progress_token(value, &ours).map(|theirs| (ours, theirs));
        changed |= progress.is_some();
    }
    if modern {
        value = Some(envelope(value.as_ref(), how.capabilities, how.log_level));
        changed = true;
    }
    let params = match value {
        Some(value) if changed => Some(to_raw(&value)),
        _ => params,
    };
    Outgoing { params, progress }
}

/// Puts `ours` in place of the progress token in `params._meta`; returns the token it replaced.
fn replace_progress_token(params: &mut Value, ours: &str) -> Option<Value> {
    let token = params
        .as_object_mut()?
        .get_mut("_meta")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.get_mut("progressToken"))?;
    Some(std::mem::replace(token, Value::String(ours.to_owned())))
}

/// `params` with the gateway's modern envelope (and the log level, when one is asked for).
fn envelope(params: Option<&Value>, capabilities: &Value, log_level: Option<&str>) -> Value {
    let mut enveloped =
        bridge::with_envelope(params, MODERN_VERSION, &super::client_info(), capabilities);
    if let (Some(level), Value::Object(obj)) = (log_level, &mut enveloped) {
        bridge::set_meta(obj, crate::mcp::meta::META_LOG_LEVEL, json!(level));
    }
    enveloped
}

#[cfg(test)]
mod tests;
