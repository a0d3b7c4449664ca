//! The one place that orders the layers.
//!
//! Outermost first: `recover` answers every request exactly once even when something below
//! panics, so it wraps everything; `trace` opens the span the rest logs into; the
//! [`Gateway`](crate::gateway::Gateway) aggregates upstreams at the bottom. Budget, compression
//! and discovery layers slot in between `trace` and the gateway.
//!
//! ```no_run
//! # async fn run(policy: mcp_budget::policy::Policy) {
//! use mcp_budget::{gateway::Gateway, stack};
//! let gateway = Gateway::start(policy, tokio_util::sync::CancellationToken::new());
//! let service = stack::build(gateway);
//! # let _ = service;
//! # }
//! ```

use std::convert::Infallible;

use tower::util::BoxCloneSyncService;
use tower::ServiceBuilder;

use crate::context::McpRequest;
use crate::gateway::Gateway;
use crate::jsonrpc::Message;
use crate::layer::{recover::RecoverLayer, trace::TraceLayer};

/// The gateway's message service, as the downstream transports use it.
pub type McpService = BoxCloneSyncService<McpRequest, Option<Message>, Infallible>;

/// Builds the full stack over `gateway`.
#[must_use]
pub fn build(gateway: Gateway) -> McpService {
    let service = ServiceBuilder::new()
        // Outermost: whatever fails below, each request id gets exactly one answer.
        .layer(RecoverLayer)
        // Then a span per message, so every layer below logs with session, method and id.
        .layer(TraceLayer)
        .service(gateway);
    BoxCloneSyncService::new(service)
}
