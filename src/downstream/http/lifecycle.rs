//! The HTTP downstream's only contact with the gateway beside the stack: a session's end, and
//! the `Mcp-Param-*` marks of a tool. Everything else goes through the stack; when sessions
//! and the catalog are handles of their own, this module is what changes.

use crate::gateway::Gateway;
use crate::mcp::params::Marked;

/// What the HTTP downstream tells and asks the gateway directly.
pub(super) struct GatewayLink {
    gateway: Gateway,
}

impl GatewayLink {
    pub(super) fn new(gateway: Gateway) -> Self {
        Self { gateway }
    }

    /// Session `id` ended (DELETE or expiry): the gateway forgets it.
    pub(super) fn session_ended(&self, id: &str) {
        self.gateway.remove_session(id);
    }

    /// The `x-mcp-header` marks of tool `name` (as listed), for the `Mcp-Param-*` check.
    pub(super) fn param_marks(&self, name: &str) -> Vec<Marked> {
        self.gateway.param_marks(name)
    }
}
