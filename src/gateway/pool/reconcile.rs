//! Reconciling a running gateway with a reloaded policy: which upstreams stay, start, restart
//! or stop (the decision is [`Reconcile::between`]), the catalog rebuilt in the new order, and
//! removed upstreams stopped once the calls in flight to them end.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Pool, Slot, guarded};
use crate::catalog::Catalog;
use crate::gateway::Gateway;
use crate::mcp::method::Listed;
use crate::policy::Policy;
use crate::policy::Reconcile;
use crate::upstream::Upstream;

impl Pool {
    /// Reconciles the upstreams with `policy` as `plan` says: kept ones stay as they are
    /// (same process or session, same id, same lists); started and restarted ones get new
    /// ids (a restarted one keeps listing its last lists until its new instance lists its
    /// own); the catalog is rebuilt in the new policy's order with its separator, sanitizing
    /// and pins. Returns the upstreams it no longer lists (removed, or replaced by their
    /// restart), for the caller to stop once their calls in flight end.
    pub(super) fn reconcile(
        &self,
        plan: &Reconcile,
        policy: &Policy,
        shutdown: &CancellationToken,
    ) -> Vec<Upstream> {
        let mut retired = Vec::new();
        self.members.send_modify(|members| {
            let old_names = members.names();
            let old_raw = members.catalog.upstreams();
            let mut all = members.all.clone();
            let (mut ids, mut raw) = (Vec::new(), Vec::new());
            for spec in &policy.upstreams {
                let old = old_names.iter().position(|n| *n == spec.name);
                let id = match old.filter(|_| plan.keep.contains(&spec.name)) {
                    Some(i) => members.id(i),
                    None => {
                        all.push(Slot::new(self.start_one(all.len(), spec, shutdown)));
                        all.len() - 1
                    }
                };
                ids.push(id);
                raw.push(old.map(|i| old_raw[i].clone()).unwrap_or_default());
            }
            retired = (members.current())
                .filter(|u| !ids.contains(&u.index()))
                .cloned()
                .collect();
            let names: Vec<String> = policy.upstreams.iter().map(|u| u.name.clone()).collect();
            let version = members.catalog.version() + 1;
            let catalog = guarded(raw, &names, policy, version, &members.catalog);
            self.replace(members, all, ids, catalog);
        });
        retired
    }
}

/// The kinds of lists (`tools`, `prompts`, `resources`) whose pass-through view differs from
/// `before` to `after`, each once; `tools` left out when `budgeted` (the budget layer lists
/// them). Resource templates count as `resources`: hosts hear of both through
/// `notifications/resources/list_changed`, MCP has no notification of templates alone.
fn changed_lists(before: &Catalog, after: &Catalog, budgeted: bool) -> Vec<Listed> {
    let lists = [
        (
            Listed::Tools,
            Catalog::listed_tools as fn(&Catalog) -> Vec<Value>,
        ),
        (Listed::Prompts, Catalog::listed_prompts),
        (Listed::Resources, Catalog::listed_resources),
        (Listed::Resources, Catalog::listed_templates),
    ];
    let mut changed: Vec<Listed> = (lists.into_iter())
        .filter(|(kind, _)| *kind != Listed::Tools || !budgeted)
        .filter(|(_, listed)| listed(before) != listed(after))
        .map(|(kind, _)| kind)
        .collect();
    changed.dedup();
    changed
}

impl Gateway {
    /// Runs `policy` from now on: upstreams are started, stopped (once their calls in flight
    /// end; new calls to them are refused as to a name no upstream lists), restarted or left
    /// untouched as [`Reconcile::between`] the current policy and `policy` says; the catalog is
    /// rebuilt with the new names, sanitizing and pins; sessions and listeners get
    /// `list_changed` for each list whose pass-through view changed (tools only with the
    /// budget off: with it on, the budget layer announces what hosts see). Settings only a
    /// restart applies (`Reconcile::needs_restart`) are kept as they were, and named by
    /// [`Gateway::pending_restart`] until the next reload.
    ///
    /// The layers above read their policy when the stack is built: rebuild it over this
    /// gateway ([`crate::stack::build`]) to apply `[budget]`, `[discover]` and `[sanitize]`
    /// there (as [`crate::reload::Reloader`] does).
    pub fn reconcile(&self, mut policy: Policy) -> Reconcile {
        let old = self.policy();
        let plan = Reconcile::between(&old, &policy);
        // The transports read `[downstream]` and `[sessions]` once, when they start: the
        // sections stay as served, and what differs is pending until a restart.
        policy.downstream = old.downstream.clone();
        policy.sessions = old.sessions.clone();
        (*crate::lock::lock(&self.inner.pending_restart)).clone_from(&plan.needs_restart);
        let before = self.snapshot();
        let policy = Arc::new(policy);
        *crate::lock::lock(&self.inner.policy) = policy.clone();
        self.inner.reloaded.notify_one();
        let retired = (self.inner.pool).reconcile(&plan, &policy, &self.inner.shutdown);
        for upstream in retired {
            tokio::spawn(self.clone().retire(upstream));
        }
        self.retire_instances(&policy);
        let after = self.snapshot();
        // Tools listed through the budget before: the reloader compares what it showed.
        let changed = changed_lists(&before, &after, old.budget.enabled);
        self.announce(&changed);
        plan
    }

    /// Stops `upstream`, removed from the catalog, once the calls the gateway forwarded to it
    /// have ended (at most its `timeout_secs`, as a call waits that long anyway).
    pub(super) async fn retire(self, upstream: Upstream) {
        let limit = tokio::time::Instant::now() + upstream.spec().timeout;
        while self.inner.inflight.to_upstream(upstream.index()) > 0
            && tokio::time::Instant::now() < limit
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        upstream.stop(Duration::from_secs(5)).await;
        tracing::info!(upstream = upstream.name(), "Upstream stopped (reload)");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::Contribution;

    fn catalog(tools: usize, resources: usize, templates: usize) -> Catalog {
        let item = |i| {
            json!({"name": format!("n{i}"), "uri": format!("u://{i}"),
                               "uriTemplate": format!("u://{i}/{{id}}"), "inputSchema": {"type": "object"}})
        };
        let lists = Contribution {
            tools: (0..tools).map(item).collect(),
            resources: (0..resources).map(item).collect(),
            templates: (0..templates).map(item).collect(),
            prompts: Vec::new(),
        };
        Catalog::build(vec![lists], &["a".to_owned()], "__", 1)
    }

    #[test]
    fn a_change_of_templates_alone_is_a_change_of_resources() {
        let base = catalog(1, 1, 1);
        assert!(changed_lists(&base, &catalog(1, 1, 1), false).is_empty());
        assert_eq!(
            changed_lists(&base, &catalog(1, 1, 0), false),
            [Listed::Resources]
        );
        assert_eq!(
            changed_lists(&base, &catalog(1, 0, 2), false),
            [Listed::Resources],
            "once"
        );
        assert_eq!(
            changed_lists(&base, &catalog(2, 1, 1), false),
            [Listed::Tools]
        );
        assert!(
            changed_lists(&base, &catalog(2, 1, 1), true).is_empty(),
            "budgeted"
        );
    }
}
