//! `notifications/tools/list_changed`, sent only when what a host is listed changes: on an open
//! gateway, to every session at once when the one plan's bytes change; on a gateway with
//! clients, to each client session whose own list (its audience's plan) changed.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::state::{Audience, State, lock};
use super::usage;
use crate::catalog::Catalog;
use crate::jsonrpc::Message;
use crate::mcp::method::Method;

impl State {
    /// What an open gateway's `list_changed` follows: the one plan's bytes and, with native
    /// disclosure, the bytes the anonymous declaring client is listed (every tool in full, which
    /// can change while the plan's bytes do not, e.g. a deferred tool's description).
    pub(super) fn open_fingerprint(&self) -> u64 {
        let plain = self.fingerprint();
        if !self.discover.native_disclosure {
            return plain;
        }
        let anonymous = crate::identity::Principal::anonymous();
        let native = self.planned_for(Audience::of(&anonymous, true).as_ref());
        plain.rotate_left(1) ^ native.fingerprint
    }

    /// Equal fingerprints, equal bytes of the static prefix of the listed tools: every listed
    /// tool but those of `volatile = true` upstreams (listed after the rest, see
    /// [`crate::listing::list_tools`]) — what a host's prompt cache keeps across a change.
    pub(super) fn prefix_fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let planned = self.planned();
        let catalog = self.catalog.borrow().clone();
        let volatile = |tool: &&serde_json::Value| {
            let name = tool.get("name").and_then(serde_json::Value::as_str);
            let server = name
                .and_then(|n| catalog.tool(n))
                .and_then(|(i, _)| catalog.names().get(i));
            server.is_some_and(|s| self.volatile.contains(s))
        };
        // The list as hosts get it (`listed` is kept only for sessions that promote tools).
        let result: serde_json::Value =
            serde_json::from_str(planned.result.get()).unwrap_or_default();
        let tools = result["tools"].as_array().map_or(&[][..], Vec::as_slice);
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for tool in tools.iter().filter(|t| !volatile(t)) {
            tool.to_string().hash(&mut hasher);
        }
        hasher.finish()
    }

    /// Tells each client session that listed tools, and whose list is no longer what it was
    /// given, that its list changed (2025-era sessions: a modern request lists afresh each
    /// time, its session ends with it).
    pub(super) fn announce_to_clients(&self) {
        let listeners: Vec<_> = {
            let mut listeners = lock(&self.listeners);
            listeners.retain(|_, l| l.session.strong_count() > 0);
            listeners
                .iter()
                .map(|(id, l)| (id.clone(), l.principal.clone(), l.native, l.fingerprint))
                .collect()
        };
        for (id, principal, native, given) in listeners {
            let now = self
                .planned_for(Audience::of(&principal, native).as_ref())
                .fingerprint;
            if now == given {
                continue;
            }
            let mut listeners = lock(&self.listeners);
            let Some(listener) = listeners.get_mut(&id) else {
                continue;
            };
            listener.fingerprint = now;
            if let Some(session) = listener.session.upgrade() {
                let note = Message::notification(Method::ToolsListChanged.as_str(), None);
                let _ = session.notify.send(note);
            }
        }
    }
}

/// The loop of [`BudgetLayer::announce_to`].
pub(super) async fn announce_changes(
    state: std::sync::Weak<State>,
    mut catalog: watch::Receiver<Arc<Catalog>>,
    mut last: u64,
    sink: mpsc::UnboundedSender<Message>,
) {
    let relearn_every = state
        .upgrade()
        .and_then(|s| s.usage.as_ref().map(|_| s.relearn));
    // With a store, relearns follow its epochs: the first now (the counts every replica plans
    // with), each next one just after the next epoch begins.
    let shared = state
        .upgrade()
        .is_some_and(|s| s.usage.as_ref().is_some_and(|u| u.is_shared()));
    let mut relearn = relearn_every.map(|r| {
        let mut interval = every(r);
        if shared {
            interval.reset_immediately();
        }
        interval
    });
    let mut flush = relearn_every.map(|r| every(r.min(usage::FLUSH_EVERY)));
    // A fixed catalog (its publisher gone) changes no more, but usage still relearns.
    let mut published = true;
    // Followed only while metrics are recorded (it is their only reader).
    let metrics = crate::telemetry::record::enabled();
    let mut prefix = state
        .upgrade()
        .filter(|_| metrics)
        .map(|s| s.prefix_fingerprint());
    loop {
        tokio::select! {
            changed = catalog.changed(), if published => {
                if changed.is_err() {
                    if relearn.is_none() {
                        return;
                    }
                    published = false;
                    continue;
                }
            }
            () = tick(relearn.as_mut()) => {
                let Some(state) = state.upgrade() else { return };
                let next = state.relearn_usage().await;
                if let (true, Some(interval)) = (shared, relearn.as_mut()) {
                    interval.reset_after(next.map_or(SHARED_RETRY, |n| n + EPOCH_MARGIN));
                }
            }
            () = tick(flush.as_mut()) => {
                let Some(state) = state.upgrade() else { return };
                state.flush_usage().await;
                continue;
            }
        }
        let Some(state) = state.upgrade() else { return };
        let now = metrics.then(|| state.prefix_fingerprint());
        if now != prefix {
            prefix = now;
            crate::telemetry::record::static_prefix_changed();
        }
        state.announce_to_clients();
        if !state.open {
            // Every session is a client's: each heard of its own list above.
            continue;
        }
        let now = state.open_fingerprint();
        if now == last {
            tracing::debug!("Upstream tools changed, but not what hosts see; not announced");
            crate::telemetry::record::list_changed(false);
            continue;
        }
        last = now;
        crate::telemetry::record::list_changed(true);
        let note = Message::notification(Method::ToolsListChanged.as_str(), None);
        if sink.send(note).is_err() {
            return;
        }
    }
}

/// How soon a relearn the store did not answer is tried again.
const SHARED_RETRY: std::time::Duration = std::time::Duration::from_secs(2);
/// How long after an epoch begins (on the store's clock) a replica relearns: past the
/// boundary even when this replica's timer runs a little ahead of the store's clock.
const EPOCH_MARGIN: std::time::Duration = std::time::Duration::from_millis(100);

/// An interval whose first tick is one `period` from now.
fn every(period: std::time::Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}

/// The next tick of `interval`, or never.
async fn tick(interval: Option<&mut tokio::time::Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}
