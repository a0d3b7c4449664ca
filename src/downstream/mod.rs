//! How hosts reach the gateway: stdio and streamable HTTP, both at once if asked.
//!
//! A downstream talks only to what it serves, an [`Endpoint`]: the stack for every message,
//! a [`Sessions`] handle for when a session starts and ends, and the published catalog for the
//! one check a transport makes against it (HTTP's `Mcp-Param-*` headers).

pub mod http;
pub mod stdio;

use std::sync::Arc;

use tokio::sync::watch;

use crate::catalog::Catalog;
pub use crate::context::Sessions;
use crate::identity::Gate;
use crate::stack::McpService;

/// What a downstream serves.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The stack every message goes through.
    pub service: McpService,
    /// Where session starts and ends are told.
    pub sessions: Arc<dyn Sessions>,
    /// The catalog as published (each new snapshot when an upstream's lists change).
    pub catalog: watch::Receiver<Arc<Catalog>>,
    /// Who may call: every message gets its principal here (open unless
    /// [`Endpoint::with_gate`]).
    pub gate: Gate,
    /// The `[state]` store replicas share (`None`: a lone gateway), for sessions ended by
    /// `DELETE` on any replica ([`Endpoint::with_store`]).
    pub store: Option<crate::state::Store>,
}

impl Endpoint {
    /// An endpoint serving `service`, telling `sessions`, reading `catalog`.
    #[must_use]
    pub fn new(
        service: McpService,
        sessions: Arc<dyn Sessions>,
        catalog: watch::Receiver<Arc<Catalog>>,
    ) -> Self {
        Self {
            service,
            sessions,
            catalog,
            gate: Gate::open(),
            store: None,
        }
    }

    /// The same endpoint on a replica sharing `store` (`[state]`): a sealed session ended by
    /// `DELETE` here ends on every replica, and one ended elsewhere ends here.
    #[must_use]
    pub fn with_store(mut self, store: Option<crate::state::Store>) -> Self {
        self.store = store;
        self
    }

    /// The same endpoint, authenticating its callers at `gate`.
    #[must_use]
    pub fn with_gate(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self
    }
}
