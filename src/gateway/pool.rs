//! The upstream pool: starting every upstream, following what they do, fetching their lists
//! and publishing the catalog built from them; readiness, the startup summary and shutdown.
//!
//! Each upstream runs its own supervised lifecycle (see [`crate::upstream`]); the pool hears
//! its events on one channel. When an upstream becomes ready or says `list_changed`, its lists
//! are fetched again (on a task of their own, one refresh at a time per upstream) and, when
//! they changed, a new [`Catalog`] is built and published on a `watch` channel: routing reads
//! the current snapshot, layers subscribe to it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::Gateway;
use crate::catalog::{Catalog, Contribution};
use crate::jsonrpc::{to_raw, Message};
use crate::mcp::method::Method;
use crate::policy::Policy;
use crate::upstream::{Call, Event, Status, Upstream};

/// The upstreams, and the catalog of what they list.
pub(super) struct Pool {
    /// One per `[[upstream]]` of the policy, in policy order (their index is their id).
    pub(super) upstreams: Vec<Upstream>,
    /// The upstreams' names, in the same order (what [`Catalog::build`] namespaces with).
    names: Vec<String>,
    /// The current catalog, published to the layers that subscribe.
    catalog: watch::Sender<Arc<Catalog>>,
    /// Per upstream: one refresh at a time (they run on tasks of their own), and how many
    /// full refreshes finished (what `wait_ready` waits for).
    refreshing: Vec<tokio::sync::Mutex<()>>,
    refreshed: Vec<watch::Sender<u64>>,
}

/// How one upstream looked when the gateway became ready, for the startup summary.
#[derive(Debug, Clone)]
pub struct UpstreamSummary {
    /// Server id.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Health.
    pub status: Status,
    /// Negotiated protocol version.
    pub protocol_version: String,
    /// Tools, prompts, resources listed.
    pub counts: (usize, usize, usize),
}

impl Pool {
    /// Starts every upstream of `policy` in parallel; their events arrive on the receiver.
    pub(super) fn start(
        policy: &Policy,
        shutdown: &CancellationToken,
    ) -> (Self, mpsc::UnboundedReceiver<Event>) {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        // The gateway routes sampling, elicitation and roots requests to its clients, so it
        // declares them upstream: servers vary their tool lists by these capabilities.
        let capabilities = json!({
            "roots": {"listChanged": true},
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
        });
        let upstreams: Vec<Upstream> = (policy.upstreams.iter().enumerate())
            .map(|(i, spec)| {
                Upstream::start(
                    i,
                    spec.clone(),
                    capabilities.clone(),
                    events_tx.clone(),
                    shutdown.child_token(),
                )
            })
            .collect();
        let names: Vec<String> = policy.upstreams.iter().map(|u| u.name.clone()).collect();
        let count = upstreams.len();
        let empty = vec![Contribution::default(); count];
        let catalog = Catalog::build(empty, &names, &policy.separator, 0);
        let pool = Self {
            upstreams,
            names,
            catalog: watch::channel(Arc::new(catalog)).0,
            refreshing: (0..count).map(|_| tokio::sync::Mutex::new(())).collect(),
            refreshed: (0..count).map(|_| watch::channel(0).0).collect(),
        };
        (pool, events_rx)
    }

    /// The current catalog.
    pub(super) fn snapshot(&self) -> Arc<Catalog> {
        self.catalog.borrow().clone()
    }

    /// The catalog's publication: the current snapshot now, each new one after.
    pub(super) fn subscribe(&self) -> watch::Receiver<Arc<Catalog>> {
        self.catalog.subscribe()
    }

    /// The current catalog, borrowed (no clone of the `Arc`; hold it briefly).
    pub(super) fn borrow(&self) -> watch::Ref<'_, Arc<Catalog>> {
        self.catalog.borrow()
    }

    /// The upstreams that speak the 2025 era (those that keep per-session state upstream).
    pub(super) fn legacy(&self) -> impl Iterator<Item = &Upstream> {
        self.upstreams.iter().filter(|u| !u.is_modern())
    }

    async fn wait_ready(&self, limit: Duration) -> Vec<UpstreamSummary> {
        let started = tokio::time::Instant::now();
        let waits = self.upstreams.iter().map(|u| u.wait_ready(limit));
        futures::future::join_all(waits).await;
        // The lists are fetched once, by the refresh each upstream's readiness starts.
        let fetched = (self.upstreams.iter().zip(&self.refreshed))
            .filter(|(u, _)| u.status() == Status::Ready)
            .map(|(_, done)| async move {
                let mut done = done.subscribe();
                let _ = done.wait_for(|n| *n > 0).await;
            });
        let left = limit.saturating_sub(started.elapsed());
        let _ = tokio::time::timeout(left, futures::future::join_all(fetched)).await;
        let catalog = self.snapshot();
        (self.upstreams.iter().zip(catalog.upstreams()))
            .map(|(u, c)| UpstreamSummary {
                name: u.name().to_owned(),
                transport: u.spec().transport_name(),
                status: u.status(),
                protocol_version: u.info().protocol_version,
                counts: (c.tools.len(), c.prompts.len(), c.resources.len()),
            })
            .collect()
    }

    /// Fetches the lists of upstream `i` (all, or one kind); returns the kinds that changed.
    async fn refresh(&self, i: usize, only: Option<&str>, policy: &Policy) -> Vec<&'static str> {
        let _one_at_a_time = self.refreshing[i].lock().await;
        let changed = self.fetch_lists(i, only, policy).await;
        if only.is_none() {
            self.refreshed[i].send_modify(|n| *n += 1);
        }
        changed
    }

    async fn fetch_lists(
        &self,
        i: usize,
        only: Option<&str>,
        policy: &Policy,
    ) -> Vec<&'static str> {
        let upstream = &self.upstreams[i];
        if upstream.status() != Status::Ready {
            return Vec::new();
        }
        let caps = upstream.info().capabilities;
        let wants = |kind: &str| only.is_none_or(|k| k == kind) && caps.get(kind).is_some();
        let mut fresh = self.snapshot().upstreams()[i].clone();
        let mut changed = Vec::new();
        if wants("tools") {
            if let Some(mut tools) = fetch_all(upstream, &Method::ToolsList, "tools").await {
                for tool in &mut tools {
                    crate::catalog::repair_tool(upstream.name(), tool);
                }
                upstream.set_param_marks(crate::mcp::params::marked_tools(&tools));
                // With the budget on, hosts see a canonical order: an upstream that only
                // reordered its tools changed nothing they see, so nothing is announced.
                let order_matters = !policy.budget.enabled;
                if !same_items(&tools, &fresh.tools, order_matters) {
                    changed.push("tools");
                }
                fresh.tools = tools;
            }
        }
        if wants("prompts") {
            if let Some(prompts) = fetch_all(upstream, &Method::PromptsList, "prompts").await {
                if prompts != fresh.prompts {
                    changed.push("prompts");
                    fresh.prompts = prompts;
                }
            }
        }
        if wants("resources") {
            let resources = fetch_all(upstream, &Method::ResourcesList, "resources").await;
            let templates = fetch_all(
                upstream,
                &Method::ResourcesTemplatesList,
                "resourceTemplates",
            )
            .await;
            let mut any = false;
            if let Some(r) = resources {
                any |= r != fresh.resources;
                fresh.resources = r;
            }
            if let Some(t) = templates {
                any |= t != fresh.templates;
                fresh.templates = t;
            }
            if any {
                changed.push("resources");
            }
        }
        if !changed.is_empty() {
            self.publish(i, fresh, policy);
        }
        changed
    }

    /// Publishes a catalog with upstream `i`'s lists replaced by `fresh`, through the one door
    /// into the catalog: sanitized and pinned ([`crate::pin`]).
    fn publish(&self, i: usize, fresh: Contribution, policy: &Policy) {
        let names = &self.names;
        let (sanitize, pin) = (&policy.sanitize, &policy.pin.rules);
        self.catalog.send_modify(|catalog| {
            let mut per_upstream = catalog.upstreams().to_vec();
            per_upstream[i] = fresh;
            let version = catalog.version() + 1;
            let guard = |i: usize, raw: &Contribution, held: &crate::catalog::Held| {
                crate::pin::admit(&names[i], raw, held, &sanitize.rules_for(&names[i]), pin)
            };
            let guarded = Catalog::build_guarded(
                per_upstream,
                names,
                &policy.separator,
                version,
                catalog,
                guard,
            );
            *catalog = Arc::new(guarded);
        });
    }
}

impl Gateway {
    /// Starts every upstream of the policy in parallel and returns at once; use
    /// [`Gateway::wait_ready`] to wait for them.
    #[must_use]
    pub fn start(policy: Policy, shutdown: CancellationToken) -> Self {
        let (pool, events) = Pool::start(&policy, &shutdown);
        let (broadcasts, broadcasts_rx) = mpsc::unbounded_channel();
        let gateway = Self::new(policy, pool, broadcasts, shutdown);
        tokio::spawn(gateway.clone().watch_events(events, broadcasts_rx));
        gateway
    }

    /// Waits until every upstream is ready or down (at most `limit`) and its lists fetched.
    pub async fn wait_ready(&self, limit: Duration) -> Vec<UpstreamSummary> {
        self.inner.pool.wait_ready(limit).await
    }

    /// Stops every upstream (children get SIGTERM, then SIGKILL) and waits until they are gone.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        let stops = (self.inner.pool.upstreams.iter()).map(|u| u.stop(Duration::from_secs(5)));
        futures::future::join_all(stops).await;
    }

    /// The policy the gateway runs.
    #[must_use]
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// The current catalog.
    #[must_use]
    pub fn snapshot(&self) -> Arc<Catalog> {
        self.inner.pool.snapshot()
    }

    /// The catalog as it is published: the current snapshot now, each new one when an
    /// upstream's lists change.
    #[must_use]
    pub fn catalog(&self) -> watch::Receiver<Arc<Catalog>> {
        self.inner.pool.subscribe()
    }

    /// Where a layer sends what every initialized session and every `subscriptions/listen`
    /// stream should get, as the gateway's own `list_changed` go (the budget layer's
    /// `notifications/tools/list_changed`).
    #[must_use]
    pub fn broadcasts(&self) -> mpsc::UnboundedSender<Message> {
        self.inner.broadcasts.clone()
    }

    /// The pool's event loop: upstream events, and the broadcasts layers send.
    async fn watch_events(
        self,
        mut events: mpsc::UnboundedReceiver<Event>,
        mut broadcasts: mpsc::UnboundedReceiver<Message>,
    ) {
        loop {
            let event = tokio::select! {
                e = events.recv() => e,
                Some(msg) = broadcasts.recv() => {
                    self.tell_everyone(&msg);
                    continue;
                }
                () = self.inner.shutdown.cancelled() => None,
            };
            let Some(event) = event else { return };
            match event {
                // Refreshes run on tasks of their own, so that upstreams are fetched in
                // parallel (one at a time per upstream).
                Event::Ready(i) => self.spawn_refresh(i, None),
                Event::ListChanged(i, kind) => self.spawn_refresh(i, Some(kind)),
                // An upstream that goes down keeps its last lists (calls to it fail).
                Event::Down(_) => {}
                Event::Broadcast(_, msg) => {
                    let subscriptions = &self.inner.subscriptions;
                    subscriptions.resource_updated(&msg, &self.inner.sessions);
                    subscriptions.notify_listeners(&msg);
                }
                Event::Log(_, msg) => self.inner.sessions.log(&msg),
            }
        }
    }

    /// Refreshes upstream `i`'s lists (all, or one kind) on a task of its own, then announces
    /// what changed.
    fn spawn_refresh(&self, i: usize, only: Option<String>) {
        let this = self.clone();
        tokio::spawn(async move {
            let inner = &this.inner;
            let changed = inner.pool.refresh(i, only.as_deref(), &inner.policy).await;
            this.announce(&changed);
        });
    }

    /// Tells every session and listener that the lists of `kinds` changed.
    fn announce(&self, kinds: &[&'static str]) {
        for kind in kinds {
            // With the budget on, hosts see its plan: the budget layer announces the tools
            // itself, when the bytes it lists change.
            if *kind == "tools" && self.inner.policy.budget.enabled {
                continue;
            }
            let msg = Message::notification(&format!("notifications/{kind}/list_changed"), None);
            self.tell_everyone(&msg);
        }
    }

    /// Sends `msg` to every initialized session and every listen stream that asked for it.
    fn tell_everyone(&self, msg: &Message) {
        self.inner.sessions.broadcast(msg);
        self.inner.subscriptions.notify_listeners(msg);
    }
}

/// Fetches a whole list, following `nextCursor`. `None` when the upstream failed.
async fn fetch_all(upstream: &Upstream, method: &Method, key: &str) -> Option<Vec<Value>> {
    let method = method.as_str();
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    // Bounded: a server that keeps returning cursors must not hang the refresh.
    for _ in 0..1000 {
        let params = cursor.as_ref().map(|c| to_raw(&json!({ "cursor": c })));
        let reply = match upstream.request(Call::new(method).params(params)).await {
            Ok(reply) => reply,
            Err(err) => {
                tracing::warn!(upstream = upstream.name(), method, error = %err, "Listing failed");
                return None;
            }
        };
        if let Some(err) = &reply.error {
            tracing::warn!(upstream = upstream.name(), method, code = err.code, message = %err.message, "Listing failed");
            return None;
        }
        let mut result: Map<String, Value> = reply.result_as().ok()?;
        if let Some(Value::Array(page)) = result.remove(key) {
            items.extend(page.into_iter().filter(Value::is_object));
        }
        cursor = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            return Some(items);
        }
    }
    Some(items)
}

/// Whether two lists hold the same items (in the same order when `order_matters`). Object key
/// order never matters (`serde_json` maps compare as maps).
fn same_items(a: &[Value], b: &[Value], order_matters: bool) -> bool {
    if order_matters || a.len() != b.len() {
        return a == b;
    }
    let key = |v: &Value| v.get("name").map(ToString::to_string).unwrap_or_default();
    let mut a: Vec<&Value> = a.iter().collect();
    let mut b: Vec<&Value> = b.iter().collect();
    a.sort_by_key(|v| key(v));
    b.sort_by_key(|v| key(v));
    a == b
}

/// Summary lines for the startup log.
#[must_use]
pub fn summary_lines(summaries: &[UpstreamSummary]) -> BTreeMap<String, String> {
    summaries
        .iter()
        .map(|s| {
            let status = match &s.status {
                Status::Ready => "ready".to_owned(),
                Status::Starting => "starting".to_owned(),
                Status::Down(reason) => format!("DOWN ({reason})"),
            };
            (
                s.name.clone(),
                format!(
                    "{} {} protocol {} — {} tools, {} prompts, {} resources",
                    s.transport,
                    status,
                    if s.protocol_version.is_empty() {
                        "-"
                    } else {
                        &s.protocol_version
                    },
                    s.counts.0,
                    s.counts.1,
                    s.counts.2
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorders_are_quiet_only_when_order_is_not_shown() {
        let a = vec![json!({"name": "x", "d": 1}), json!({"name": "y"})];
        let b = vec![json!({"name": "y"}), json!({"d": 1, "name": "x"})];
        assert!(same_items(&a, &b, false));
        assert!(!same_items(&a, &b, true));
        assert!(!same_items(
            &a,
            &[json!({"name": "x", "d": 2}), json!({"name": "y"})],
            false
        ));
    }

    #[test]
    fn summary_lines_say_health_protocol_and_counts() {
        let summary = |name: &str, status, version: &str| UpstreamSummary {
            name: name.into(),
            transport: "stdio",
            status,
            protocol_version: version.into(),
            counts: (3, 1, 0),
        };
        let lines = summary_lines(&[
            summary("b", Status::Down("exited".into()), ""),
            summary("a", Status::Ready, "2025-11-25"),
        ]);
        assert_eq!(
            lines.into_iter().collect::<Vec<_>>(),
            [
                (
                    "a".to_owned(),
                    "stdio ready protocol 2025-11-25 — 3 tools, 1 prompts, 0 resources".to_owned()
                ),
                (
                    "b".to_owned(),
                    "stdio DOWN (exited) protocol - — 3 tools, 1 prompts, 0 resources".to_owned()
                ),
            ]
        );
    }
}
