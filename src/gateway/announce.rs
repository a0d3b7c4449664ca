//! Who tells hosts that the lists changed: a value the stack decides
//! ([`crate::stack::announce`]) and the pool follows, so that the gateway never reads the
//! budget layer's policy. A leaf.

use crate::mcp::method::Listed;

/// Who announces `notifications/tools/list_changed`, and so whether the order of an
/// upstream's tools is something hosts see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announce {
    /// The gateway: hosts see its pass-through list, in the upstreams' own order.
    ByGateway,
    /// A layer above (the budget layer's plan): it announces the tools itself, when the bytes
    /// it lists change, and hosts see them in a canonical order.
    ByLayer,
}

impl Announce {
    /// Whether an upstream that only reordered its tools changed what hosts see.
    #[must_use]
    pub fn order_matters(self) -> bool {
        self == Self::ByGateway
    }

    /// Whether the gateway itself announces a change of the `kind` lists.
    #[must_use]
    pub(crate) fn by_gateway(self, kind: Listed) -> bool {
        kind != Listed::Tools || self == Self::ByGateway
    }
}
