//! The handshake that opens a connection, in the upstream's era: `server/discover` for a
//! 2026-07-28 server, `initialize` + `notifications/initialized` for a 2025-era one, and the
//! probe that finds out which when the policy does not say.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{Call, PROTOCOL_VERSION, ServerInfo, Upstream};
use crate::error::Error;
use crate::jsonrpc::{Message, to_raw};
use crate::mcp::Era;
use crate::mcp::bridge;
use crate::mcp::method::Method;
use crate::mcp::modern::MODERN_VERSION;
use crate::policy::UpstreamProtocol;

/// Shortest wait for the answer to the `server/discover` probe of a server of unknown era (the
/// upstream's own timeout when longer): a server that says nothing in that time is asked
/// `initialize` instead. Generous, since a server that is slow to start answers late.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

impl Upstream {
    /// The `initialize` params the gateway sends upstream.
    pub(crate) fn initialize_params(&self) -> Value {
        json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": self.inner.capabilities,
            "clientInfo": client_info(),
        })
    }
}

/// Parses the `initialize` result into [`ServerInfo`].
pub(crate) fn parse_initialize(name: &str, reply: &Message) -> Result<ServerInfo, Error> {
    if let Some(err) = &reply.error {
        return Err(Error::UpstreamProtocol {
            upstream: name.to_owned(),
            reason: format!("initialize failed: {} ({})", err.message, err.code),
        });
    }
    let result: Map<String, Value> = reply.result_as().map_err(|e| Error::UpstreamProtocol {
        upstream: name.to_owned(),
        reason: format!("initialize result is not an object: {e}"),
    })?;
    Ok(ServerInfo {
        protocol_version: result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        capabilities: result.get("capabilities").cloned().unwrap_or(json!({})),
        server_info: result.get("serverInfo").cloned().unwrap_or(Value::Null),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// The gateway as an MCP client.
pub(super) fn client_info() -> Value {
    json!({"name": "mcp-budget", "version": env!("CARGO_PKG_VERSION")})
}

/// Opens a fresh connection in the upstream's era: `server/discover` for a modern server,
/// `initialize` + `notifications/initialized` for a 2025-era one. An upstream of unknown era
/// is probed with `server/discover` first; a JSON-RPC error (or a non-modern answer, or
/// silence for [`PROBE_TIMEOUT`]) means 2025 era — a transport failure means neither, and the
/// connection fails as it would have. The era found is kept for reconnections.
pub(crate) async fn handshake(upstream: &Upstream) -> Result<ServerInfo, Error> {
    match upstream.era() {
        Some(Era::Legacy) => return initialize(upstream).await,
        Some(Era::Modern) => return discover(upstream).await,
        None => {}
    }
    let probe = bridge::with_envelope(
        None,
        MODERN_VERSION,
        &client_info(),
        &upstream.inner.capabilities,
    );
    let call = Call::new("server/discover")
        .params(Some(to_raw(&probe)))
        .before_ready()
        .wait(Some(PROBE_TIMEOUT.max(upstream.spec().timeout)));
    let outcome = upstream.request(call).await.and_then(reached);
    match outcome {
        Ok(reply) => {
            if let Some(info) = parse_discover(upstream.name(), &reply) {
                upstream.set_era(Era::Modern);
                return Ok(info);
            }
            tracing::debug!(
                upstream = upstream.name(),
                "server/discover refused; speaking 2025-11-25"
            );
        }
        Err(Error::UpstreamTimeout { .. }) => {
            tracing::warn!(
                upstream = upstream.name(),
                "No answer to server/discover; trying initialize"
            );
        }
        Err(err) => return Err(err),
    }
    let info = initialize(upstream).await?;
    // Kept only once it worked: a connection that failed says nothing about the server.
    if upstream.era().is_none() {
        upstream.set_era(Era::Legacy);
    }
    Ok(info)
}

async fn discover(upstream: &Upstream) -> Result<ServerInfo, Error> {
    let reply = upstream
        .handshake_request(Method::Discover.as_str(), &json!({}))
        .await
        .and_then(reached)?;
    parse_discover(upstream.name(), &reply).ok_or_else(|| Error::UpstreamProtocol {
        upstream: upstream.name().to_owned(),
        reason: format!("server/discover did not offer {MODERN_VERSION}"),
    })
}

async fn initialize(upstream: &Upstream) -> Result<ServerInfo, Error> {
    let reply = upstream
        .handshake_request(Method::Initialize.as_str(), &upstream.initialize_params())
        .await
        .and_then(reached)?;
    // A server that refuses `initialize` for 2026-07-28 (a late answer to the probe may have
    // put its connection in that era) is modern after all.
    let modern_only = reply.error.as_ref().is_some_and(|e| {
        e.code == crate::jsonrpc::code::UNSUPPORTED_VERSION
            && e.data.as_ref().is_some_and(|d| {
                serde_json::from_str::<Value>(d.get())
                    .ok()
                    .as_ref()
                    .and_then(|d| d.get("supported"))
                    .and_then(Value::as_array)
                    .is_some_and(|v| v.iter().any(|v| v.as_str() == Some(MODERN_VERSION)))
            })
    });
    if modern_only && upstream.spec().protocol != UpstreamProtocol::Legacy {
        tracing::info!(
            upstream = upstream.name(),
            "initialize refused for {MODERN_VERSION}; speaking {MODERN_VERSION}"
        );
        upstream.set_era(Era::Modern);
        return discover(upstream).await;
    }
    let info = parse_initialize(upstream.name(), &reply)?;
    upstream.notify(Message::notification(Method::Initialized.as_str(), None))?;
    Ok(info)
}

/// The reply, unless it says that the server could not be reached at all: then that error as
/// it is (a refused connection is neither a refusal of the method nor a protocol fault).
fn reached(reply: Message) -> Result<Message, Error> {
    match reply.error.as_ref().and_then(Error::unreachable_from) {
        Some(err) => Err(err),
        None => Ok(reply),
    }
}

/// [`ServerInfo`] from a `server/discover` reply, when it speaks 2026-07-28.
fn parse_discover(name: &str, reply: &Message) -> Option<ServerInfo> {
    let result: Value = reply.result_as().ok()?;
    let (capabilities, server_info, instructions) =
        bridge::parse_discover(&result, MODERN_VERSION)?;
    tracing::debug!(upstream = name, "server/discover: speaks {MODERN_VERSION}");
    Some(ServerInfo {
        protocol_version: MODERN_VERSION.to_owned(),
        capabilities,
        server_info,
        instructions,
    })
}
