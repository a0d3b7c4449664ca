//! Applying a reloaded policy to a running gateway: the upstreams reconciled, the stack
//! rebuilt over the same gateway and swapped in, hosts told when what they see changed.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Reconcile, Swap};
use crate::gateway::Gateway;
use crate::jsonrpc::Message;
use crate::layer::budget::BudgetLayer;
use crate::mcp::method::Method;
use crate::policy::Policy;
use crate::stack::{self, McpService};

/// What a reload applies, as one value: everything swapped at once goes in here (a later
/// field, the clients' directory say, is applied in [`Reloader::apply`] beside the policy).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Reloaded {
    /// The new policy, validated.
    pub policy: Policy,
}

impl Reloaded {
    /// A reload of `policy`.
    #[must_use]
    pub fn new(policy: Policy) -> Self {
        Self { policy }
    }
}

/// The stack of a running gateway, rebuilt on each reload (the gateway itself stays).
///
/// Each build is a *generation*: its budget layer (plan cache, usage counts, its
/// `list_changed` task) belongs to it. A generation's announcements reach hosts only while it
/// is current; the one replaced goes quiet before the new policy touches the catalog, and the
/// new one is compared with it, so hosts get `notifications/tools/list_changed` exactly when
/// the bytes they would list change. Requests already inside the old stack finish there.
#[derive(Debug, Clone)]
pub struct Reloader {
    gateway: Gateway,
    swap: Swap,
    current: Arc<Mutex<Generation>>,
}

/// One build of the stack.
#[derive(Debug)]
struct Generation {
    budget: Option<BudgetLayer>,
    /// Cancelled when the generation is replaced: its announcements stop reaching hosts.
    retired: CancellationToken,
}

impl Reloader {
    /// Builds the first stack over `gateway` (from its policy).
    ///
    /// # Panics
    /// Outside a Tokio runtime (the budget layer and the announcement relay are tasks).
    #[must_use]
    pub fn new(gateway: Gateway) -> Self {
        let (service, generation) = build(&gateway, None);
        Self {
            gateway,
            swap: Swap::new(service),
            current: Arc::new(Mutex::new(generation)),
        }
    }

    /// The service the downstreams serve (each request goes to the current stack).
    #[must_use]
    pub fn service(&self) -> McpService {
        self.swap.service()
    }

    /// The gateway below every generation.
    #[must_use]
    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// The current stack's budget layer (`None` with `[budget]` off).
    #[must_use]
    pub fn budget(&self) -> Option<BudgetLayer> {
        crate::lock::lock(&self.current).budget.clone()
    }

    /// Applies `reloaded`: upstreams reconciled ([`Gateway::reconcile`]), then the stack
    /// rebuilt with the new `[budget]`, `[discover]` and `[sanitize]` and swapped in for the
    /// next request. Returns what changed upstream.
    pub fn apply(&self, reloaded: Reloaded) -> Reconcile {
        let Reloaded { policy } = reloaded;
        let mut current = crate::lock::lock(&self.current);
        // What hosts were shown, before anything changes; from here the old generation is
        // quiet, so the catalog changes below are announced once, by the new one or here.
        let seen = current.budget.as_ref().map(BudgetLayer::fingerprint);
        current.retired.cancel();
        let announce = stack::announce(&policy);
        let plan = self.gateway.reconcile(policy, announce);
        // The new budget layer takes the usage counts over (or the old one writes them).
        let (service, generation) = build(&self.gateway, current.budget.as_ref());
        let shown = generation.budget.as_ref().map(BudgetLayer::fingerprint);
        self.swap.replace(service);
        *current = generation;
        drop(current);
        // With the budget off before and after, the gateway announced its own lists.
        if tools_changed(seen, shown) {
            let note = Message::notification(Method::ToolsListChanged.as_str(), None);
            let _ = self.gateway.broadcasts().send(note);
        }
        plan
    }
}

/// Whether hosts must hear that the tools changed, from the budget's fingerprints before and
/// after (`None`: the budget off, the gateway's pass-through list, which it announces itself).
fn tools_changed(seen: Option<u64>, shown: Option<u64>) -> bool {
    match (seen, shown) {
        (None, None) => false,
        (Some(a), Some(b)) => a != b,
        // Turned on or off: a list of another shape.
        _ => true,
    }
}

/// A generation over `gateway`, succeeding the one whose budget layer is `previous`: its
/// stack, and the budget layer's announcements relayed to every session until the generation
/// is retired.
fn build(gateway: &Gateway, previous: Option<&BudgetLayer>) -> (McpService, Generation) {
    let retired = CancellationToken::new();
    let (sink, mut rx) = mpsc::unbounded_channel::<Message>();
    let broadcasts = gateway.broadcasts();
    let stop = retired.clone();
    tokio::spawn(async move {
        loop {
            let msg = tokio::select! {
                biased;
                () = stop.cancelled() => return,
                msg = rx.recv() => msg,
            };
            let Some(msg) = msg else { return };
            if broadcasts.send(msg).is_err() {
                return;
            }
        }
    });
    let (service, budget) = stack::build_succeeding(gateway.clone(), sink, previous);
    (service, Generation { budget, retired })
}

#[cfg(test)]
mod tests {
    use super::tools_changed;

    #[test]
    fn tools_are_announced_when_the_listed_bytes_or_their_shape_change() {
        assert!(!tools_changed(None, None));
        assert!(!tools_changed(Some(7), Some(7)));
        assert!(tools_changed(Some(7), Some(8)));
        assert!(tools_changed(None, Some(8)));
        assert!(tools_changed(Some(7), None));
    }
}
