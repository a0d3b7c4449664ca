//! The upstream pool: starting every upstream, following what they do, fetching their lists
//! and publishing the catalog built from them; readiness, the startup summary, reconciling
//! with a reloaded policy, and shutdown.
//!
//! Each upstream runs its own supervised lifecycle (see [`crate::upstream`]); the pool hears
//! its events on one channel. When an upstream becomes ready or says `list_changed`, its lists
//! are fetched again (on a task of their own, one refresh at a time per upstream) and, when
//! they changed, a new [`Catalog`] is built and published on a `watch` channel: routing reads
//! the current snapshot, layers subscribe to it.
//!
//! # Ids and members
//!
//! Every upstream the pool starts gets an id ([`Upstream::index`]) that is never reused: at
//! start they are the policy positions, a reload appends. What the gateway keeps for later
//! (tasks, parked calls, server→client requests, calls to cancel) names upstreams by id, so a
//! reload that removes or reorders upstreams never sends those to the wrong one: a removed
//! upstream's id keeps naming it, stopped. The catalog names upstreams by position (policy
//! order); [`Members`] is the catalog published together with the ids of its positions, one
//! value swapped at once, so a name is never routed with one catalog and another id list.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

mod instances;
pub(crate) mod lists;
mod recheck;
mod reconcile;

pub(super) use instances::{FIRST_ID, Serving};

use super::Gateway;
use crate::authz::Kind;
use crate::catalog::{Catalog, Contribution, Given};
use crate::context::McpRequest;
use crate::jsonrpc::Message;
use crate::mcp::method::{Listed, Method};
use crate::policy::{Policy, UpstreamSpec};
use crate::routing::{self, Reach};
use crate::upstream::{Event, Status, Upstream};
use lists::{fetch_all, same_items};

/// The upstreams, and the catalog of what they list.
pub(super) struct Pool {
    /// The catalog and the upstreams it was built from, published together (routing).
    members: watch::Sender<Arc<Members>>,
    /// The same catalog alone, for the layers that subscribe (sent right after `members`).
    catalog: watch::Sender<Arc<Catalog>>,
    /// What new upstreams report on, and what they declare upstream.
    events: mpsc::UnboundedSender<Event>,
    capabilities: Value,
    /// The replica tag of the ids of the server→client requests upstreams send (`[state]`).
    replica: Option<Arc<str>>,
    /// The per-client instances of `share = "per_client"` upstreams.
    instances: instances::Instances,
}

/// One published state of the pool: every upstream ever started, which of them the catalog
/// lists (in policy order), and that catalog.
#[derive(Clone)]
pub(super) struct Members {
    /// Every upstream started, by id; append-only, so that an id kept for later stays valid.
    all: Vec<Arc<Slot>>,
    /// The ids of the catalog's upstreams: `ids[i]` is catalog position `i`.
    ids: Vec<usize>,
    catalog: Arc<Catalog>,
}

impl Members {
    /// The id of the upstream at catalog position `i`.
    fn id(&self, i: usize) -> usize {
        self.ids[i]
    }

    /// The catalog position of upstream `id`, while the catalog lists it.
    fn position(&self, id: usize) -> Option<usize> {
        self.ids.iter().position(|&x| x == id)
    }

    /// The current upstreams, in policy order.
    fn current(&self) -> impl Iterator<Item = &Upstream> {
        self.ids.iter().map(|&id| &self.all[id].upstream)
    }

    /// The current upstreams' names, in policy order (what [`Catalog::build`] namespaces with).
    fn names(&self) -> Vec<String> {
        self.current().map(|u| u.name().to_owned()).collect()
    }
}

/// One upstream and its refresh bookkeeping.
struct Slot {
    upstream: Upstream,
    /// One refresh at a time (they run on tasks of their own).
    refreshing: tokio::sync::Mutex<()>,
    /// How many full refreshes finished (what `wait_ready` waits for).
    refreshed: watch::Sender<u64>,
    /// How many times it became ready (its `Event::Ready`s seen).
    readies: AtomicU64,
    /// The `readies` count the last full refresh started at: equal to `readies` once the
    /// lists of its latest connection are in the catalog.
    listed_at: AtomicU64,
}

impl Slot {
    fn new(upstream: Upstream) -> Arc<Self> {
        Arc::new(Self {
            upstream,
            refreshing: tokio::sync::Mutex::new(()),
            refreshed: watch::channel(0).0,
            readies: AtomicU64::new(0),
            listed_at: AtomicU64::new(0),
        })
    }
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
    /// What its `include_tools` got wrong: patterns that match none of its tools, with the
    /// names they may have meant ([`crate::policy::ToolFilter::unmatched`]).
    pub warnings: Vec<String>,
}

impl Pool {
    /// Starts every upstream of `policy` in parallel; their events arrive on the receiver.
    pub(super) fn start(
        policy: &Policy,
        shutdown: &CancellationToken,
        replica: Option<Arc<str>>,
    ) -> (Self, mpsc::UnboundedReceiver<Event>) {
        let (events, events_rx) = mpsc::unbounded_channel();
        // The gateway routes sampling, elicitation and roots requests to its clients, so it
        // declares them upstream: servers vary their tool lists by these capabilities.
        let capabilities = json!({
            "roots": {"listChanged": true},
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
        });
        let names: Vec<String> = policy.upstreams.iter().map(|u| u.name.clone()).collect();
        let empty = vec![Contribution::default(); names.len()];
        let catalog = Arc::new(Catalog::build(empty, &names, &policy.separator, 0));
        let pool = Self {
            members: watch::channel(Arc::new(Members {
                all: Vec::new(),
                ids: Vec::new(),
                catalog: catalog.clone(),
            }))
            .0,
            catalog: watch::channel(catalog.clone()).0,
            events,
            capabilities,
            replica,
            instances: instances::Instances::default(),
        };
        let all: Vec<Arc<Slot>> = (policy.upstreams.iter().enumerate())
            .map(|(id, spec)| Slot::new(pool.start_one(id, spec, shutdown)))
            .collect();
        let ids = (0..all.len()).collect();
        (pool.members).send_replace(Arc::new(Members { all, ids, catalog }));
        (pool, events_rx)
    }

    /// Starts upstream `spec` under `id`.
    fn start_one(&self, id: usize, spec: &UpstreamSpec, shutdown: &CancellationToken) -> Upstream {
        Upstream::start_tagged(
            id,
            self.replica.clone(),
            spec.clone(),
            self.capabilities.clone(),
            self.events.clone(),
            shutdown.child_token(),
        )
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

    /// What `find` finds in the current catalog, with the catalog position it returns turned
    /// into the upstream's id, both read from one published state.
    pub(super) fn route<T>(
        &self,
        find: impl FnOnce(&Catalog) -> Option<(usize, T)>,
    ) -> Option<(usize, T)> {
        let members = self.members.borrow();
        find(&members.catalog).map(|(i, found)| (members.id(i), found))
    }

    /// Where the current catalog routes the tool (`kind`) or prompt `req` calls, exposed as
    /// `exposed` (the name its view read): the upstream's id and what `then` makes of the
    /// upstream's own name; `None` when no upstream lists it. Read from one published state,
    /// as [`Pool::route`]. A layer above that routed the call through the same catalog did
    /// the work already ([`McpRequest::routed`]); else the same rule
    /// ([`routing::named`]) is asked here, without the allocations of a [`routing::Routed`].
    pub(super) fn route_named<T>(
        &self,
        req: &McpRequest,
        kind: Kind,
        exposed: &str,
        then: impl FnOnce(&str) -> T,
    ) -> Option<(usize, T)> {
        let members = self.members.borrow();
        let (at, own) = match req.routed_already(&members.catalog) {
            Some(routed) => match &routed?.reach {
                Reach::Upstream { at, own, .. } => (*at, own.as_str()),
                _ => return None,
            },
            None => routing::named(&members.catalog, kind, exposed)?,
        };
        Some((members.id(at), then(own)))
    }

    /// Upstream `id`, if the pool ever started one under it (ids from clients are checked),
    /// or per-client instance `id` while it runs.
    pub(super) fn get(&self, id: usize) -> Option<Upstream> {
        if id >= FIRST_ID {
            return self.instances.get(id);
        }
        (self.members.borrow().all.get(id)).map(|slot| slot.upstream.clone())
    }

    /// Upstream `id`, an id the gateway got from the pool (an instance's while something
    /// uses it: it is stopped only once nothing does).
    pub(super) fn upstream(&self, id: usize) -> Upstream {
        self.get(id)
            .expect("upstream ids are never removed, instances not while in use")
    }

    /// Whether upstream `id` is one the catalog lists now (not removed or replaced by a
    /// reload).
    pub(super) fn is_current(&self, id: usize) -> bool {
        self.members.borrow().position(id).is_some()
    }

    /// The current upstreams, in policy order.
    pub(super) fn current(&self) -> Vec<Upstream> {
        self.members.borrow().current().cloned().collect()
    }

    /// The current upstreams that speak the 2025 era (those that keep per-session state
    /// upstream).
    pub(super) fn legacy(&self) -> Vec<Upstream> {
        let members = self.members.borrow();
        members
            .current()
            .filter(|u| !u.is_modern())
            .cloned()
            .collect()
    }

    /// Every upstream ever started, the removed ones (already stopped) included, and the
    /// running per-client instances.
    pub(super) fn all(&self) -> Vec<Upstream> {
        let members = self.members.borrow();
        let mut all: Vec<Upstream> = (members.all.iter())
            .map(|slot| slot.upstream.clone())
            .collect();
        all.extend(self.instances.all());
        all
    }

    fn slot(&self, id: usize) -> Arc<Slot> {
        self.members.borrow().all[id].clone()
    }

    /// The current upstreams in policy order, with the catalog they make (the admin
    /// listener's view, `super::health`).
    pub(super) fn current_with_catalog(&self) -> (Vec<Upstream>, Arc<Catalog>) {
        let members = self.members.borrow();
        (
            members.current().cloned().collect(),
            members.catalog.clone(),
        )
    }

    async fn wait_ready(
        &self,
        limit: Duration,
        shutdown: &CancellationToken,
    ) -> Vec<UpstreamSummary> {
        let started = tokio::time::Instant::now();
        let slots: Vec<Arc<Slot>> = {
            let members = self.members.borrow();
            members
                .ids
                .iter()
                .map(|&id| members.all[id].clone())
                .collect()
        };
        let waits = slots.iter().map(|s| s.upstream.wait_ready(limit));
        // A shutdown while they start ends the wait: nothing will be served.
        tokio::select! {
            _ = futures::future::join_all(waits) => {}
            () = shutdown.cancelled() => {}
            () = progress(&slots, started, limit) => {}
        }
        // The lists are fetched once, by the refresh each upstream's readiness starts.
        let fetched = (slots.iter())
            .filter(|s| s.upstream.status() == Status::Ready)
            .map(|s| async move {
                let mut done = s.refreshed.subscribe();
                let _ = done.wait_for(|n| *n > 0).await;
            });
        let left = limit.saturating_sub(started.elapsed());
        tokio::select! {
            _ = tokio::time::timeout(left, futures::future::join_all(fetched)) => {}
            () = shutdown.cancelled() => {}
        }
        let members = self.members.borrow().clone();
        (members.current().zip(members.catalog.upstreams()))
            .map(|(u, c)| UpstreamSummary {
                name: u.name().to_owned(),
                transport: u.spec().transport_name(),
                status: u.status(),
                protocol_version: u.info().protocol_version,
                counts: (c.counts().tools, c.counts().prompts, c.counts().resources),
                warnings: u.filter_warnings(),
            })
            .collect()
    }

    /// Fetches the lists of upstream `id` (all, or one kind); returns the kinds that changed.
    async fn refresh(&self, id: usize, only: Option<Listed>, policy: &Policy) -> Vec<Listed> {
        let slot = self.slot(id);
        let _one_at_a_time = slot.refreshing.lock().await;
        let readies = slot.readies.load(Ordering::Acquire);
        let changed = self.fetch_lists(&slot.upstream, only, policy).await;
        if only.is_none() {
            slot.listed_at.fetch_max(readies, Ordering::AcqRel);
            slot.refreshed.send_modify(|n| *n += 1);
        }
        changed
    }

    /// Upstream `id` became ready: its lists are not the catalog's until the refresh that
    /// follows finishes ([`Pool::listed`]).
    fn note_ready(&self, id: usize) {
        self.slot(id).readies.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether upstream `id`'s lists are in the catalog for its latest connection (what
    /// `/readyz` waits for after the handshake).
    pub(super) fn listed(&self, id: usize) -> bool {
        let slot = self.slot(id);
        slot.listed_at.load(Ordering::Acquire) >= slot.readies.load(Ordering::Acquire)
    }

    /// The lists upstream `id` contributes to the current catalog, while it lists them.
    fn contribution(&self, id: usize) -> Option<Contribution> {
        // Read back after letting go of the members (a publish waits for readers).
        let given = {
            let members = self.members.borrow();
            let i = members.position(id)?;
            members.catalog.upstreams()[i].clone()
        };
        Some(given.lists())
    }
    async fn fetch_lists(
        &self,
        upstream: &Upstream,
        only: Option<Listed>,
        policy: &Policy,
    ) -> Vec<Listed> {
        if upstream.status() != Status::Ready {
            return Vec::new();
        }
        // An upstream a reload removed lists nothing any more.
        let Some(mut fresh) = self.contribution(upstream.index()) else {
            return Vec::new();
        };
        let caps = upstream.info().capabilities;
        let wants =
            |kind: Listed| only.is_none_or(|k| k == kind) && caps.get(kind.capability()).is_some();
        let mut changed = Vec::new();
        if wants(Listed::Tools) {
            if let Some(mut tools) = fetch_all(upstream, &Method::ToolsList, "tools").await {
                // `include_tools` / `exclude_tools`: the others never reach the catalog, so
                // they are not listed, searched, or routed (a call is "not found").
                let filter = &upstream.spec().tools;
                let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
                let unmatched = filter.unmatched(&names);
                for warning in &unmatched {
                    tracing::warn!(upstream = upstream.name(), "{warning}");
                }
                upstream.set_filter_warnings(unmatched);
                if !filter.is_all() {
                    tools.retain(|t| t["name"].as_str().is_some_and(|n| filter.keeps(n)));
                }
                for tool in &mut tools {
                    crate::catalog::repair_tool(upstream.name(), tool);
                }
                upstream.set_param_marks(crate::mcp::params::marked_tools(&tools));
                // With the budget on, hosts see a canonical order: an upstream that only
                // reordered its tools changed nothing they see, so nothing is announced.
                let order_matters = !policy.budget.enabled;
                if !same_items(&tools, &fresh.tools, order_matters) {
                    changed.push(Listed::Tools);
                }
                fresh.tools = tools;
            }
        }
        if wants(Listed::Prompts) {
            if let Some(prompts) = fetch_all(upstream, &Method::PromptsList, "prompts").await {
                if prompts != fresh.prompts {
                    changed.push(Listed::Prompts);
                    fresh.prompts = prompts;
                }
            }
        }
        if wants(Listed::Resources) {
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
                changed.push(Listed::Resources);
            }
        }
        if !changed.is_empty() {
            self.publish(upstream.index(), &fresh, policy);
        }
        changed
    }

    /// Publishes a catalog with upstream `id`'s lists replaced by `fresh` (nothing, once a
    /// reload removed it), through the one door into the catalog: sanitized and pinned
    /// ([`crate::pin`]).
    fn publish(&self, id: usize, fresh: &Contribution, policy: &Policy) {
        self.members.send_if_modified(|members| {
            let Some(i) = members.position(id) else {
                return false;
            };
            let mut raw = members.catalog.upstreams().to_vec();
            raw[i] = Arc::new(Given::new(fresh));
            let version = members.catalog.version() + 1;
            let catalog = guarded(raw, &members.names(), policy, version, &members.catalog);
            self.replace(members, members.all.clone(), members.ids.clone(), catalog);
            true
        });
    }

    /// Publishes a new state: to routing and, right after, to the layers.
    fn replace(
        &self,
        members: &mut Arc<Members>,
        all: Vec<Arc<Slot>>,
        ids: Vec<usize>,
        catalog: Catalog,
    ) {
        let catalog = Arc::new(catalog);
        *members = Arc::new(Members {
            all,
            ids,
            catalog: catalog.clone(),
        });
        self.catalog.send_replace(catalog);
    }
}

impl Gateway {
    /// Starts every upstream of the policy in parallel and returns at once; use
    /// [`Gateway::wait_ready`] to wait for them.
    #[must_use]
    pub fn start(policy: Policy, shutdown: CancellationToken) -> Self {
        let state = super::store(&policy, &shutdown);
        let replica = state.as_ref().map(|s| Arc::from(s.replica_id()));
        let (pool, events) = Pool::start(&policy, &shutdown, replica);
        let (broadcasts, broadcasts_rx) = mpsc::unbounded_channel();
        let gateway = Self::new(policy, pool, broadcasts, shutdown, state);
        tokio::spawn(gateway.clone().watch_events(events, broadcasts_rx));
        tokio::spawn(gateway.clone().reap_instances());
        tokio::spawn(gateway.clone().recheck());
        if let Some(store) = gateway.state() {
            if let Some(notes) = store.take_notes() {
                tokio::spawn(gateway.clone().take_notes(notes));
            }
            tokio::spawn(gateway.clone().announce_promotions(store.promotions()));
        }
        gateway
    }

    /// Waits until every upstream is ready or down (at most `limit`) and its lists fetched.
    pub async fn wait_ready(&self, limit: Duration) -> Vec<UpstreamSummary> {
        self.inner
            .pool
            .wait_ready(limit, &self.inner.shutdown)
            .await
    }

    /// Stops every upstream (children get SIGTERM, then SIGKILL) and waits until they are gone.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        let all = self.inner.pool.all();
        let stops = all.iter().map(|u| u.stop(Duration::from_secs(5)));
        futures::future::join_all(stops).await;
    }

    /// The policy the gateway runs (the one [`Gateway::reconcile`] applied last).
    #[must_use]
    pub fn policy(&self) -> Arc<Policy> {
        crate::lock::lock(&self.inner.policy).clone()
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
            if self.instance_event(&event) {
                continue;
            }
            match event {
                // Refreshes run on tasks of their own, so that upstreams are fetched in
                // parallel (one at a time per upstream).
                Event::Ready(i) => {
                    self.inner.pool.note_ready(i);
                    self.spawn_refresh(i, None);
                }
                Event::ListChanged(i, kind) => self.spawn_refresh(i, Some(kind)),
                // An upstream that goes down keeps its last lists (calls to it fail).
                Event::Down(_) => {}
                Event::Broadcast(..) | Event::Log(..) => self.outside_a_call(&event, None),
            }
        }
    }

    /// What an upstream said outside a call: a resource update to the sessions subscribed to
    /// the resource and the listen streams that asked for it, a log line to the sessions that
    /// want its level ([`super::sessions::Sessions::log`]); of a per-client instance
    /// (`client` names its client), to that client's only.
    pub(super) fn outside_a_call(&self, event: &Event, client: Option<&str>) {
        match event {
            Event::Broadcast(_, msg) => {
                let subscriptions = &self.inner.subscriptions;
                subscriptions.resource_updated(msg, &self.inner.sessions, client);
                subscriptions.notify_listeners(msg, client);
            }
            Event::Log(_, msg) => self.inner.sessions.log(msg, client),
            Event::Ready(_) | Event::Down(_) | Event::ListChanged(..) => {}
        }
    }

    /// Refreshes upstream `id`'s lists (all, or one kind) on a task of its own, then announces
    /// what changed.
    fn spawn_refresh(&self, id: usize, only: Option<Listed>) {
        let this = self.clone();
        tokio::spawn(async move { this.refresh_and_announce(id, only).await });
    }

    /// Fetches upstream `id`'s lists (all, or one kind) with the current policy, publishes
    /// the catalog through the guard when they changed and announces what changed: what a
    /// `list_changed`, a readiness and a recheck tick ([`recheck`]) all go through.
    async fn refresh_and_announce(&self, id: usize, only: Option<Listed>) {
        let policy = self.policy();
        let changed = self.inner.pool.refresh(id, only, &policy).await;
        self.announce(&changed);
    }

    /// Tells every session and listener that the lists of `kinds` changed.
    fn announce(&self, kinds: &[Listed]) {
        let budget = self.policy().budget.enabled;
        for kind in kinds {
            // With the budget on, hosts see its plan: the budget layer announces the tools
            // itself, when the bytes it lists change.
            if *kind == Listed::Tools && budget {
                continue;
            }
            let msg = Message::notification(kind.changed().as_str(), None);
            self.tell_everyone(&msg);
        }
    }

    /// Sends `msg` to every initialized session and every listen stream that asked for it.
    fn tell_everyone(&self, msg: &Message) {
        self.inner.sessions.broadcast(msg);
        self.inner.subscriptions.notify_listeners(msg, None);
    }
}

/// The catalog of upstreams `names` from their lists as given (`raw`), through the guard
/// ([`crate::pin::guarded`]) with `policy`'s sanitizing and pins.
pub(crate) fn guarded<C: Into<Arc<Given>>>(
    raw: Vec<C>,
    names: &[String],
    policy: &Policy,
    version: u64,
    previous: &Catalog,
) -> Catalog {
    let sanitize = |name: &str| policy.sanitize.rules_for(name);
    let (separator, rules) = (&policy.separator, &policy.pin.rules);
    crate::pin::guarded(raw, names, separator, version, previous, sanitize, rules)
}

/// When the first "waiting for upstream" line is logged, and how often the next ones are.
const PROGRESS_FIRST: Duration = Duration::from_secs(2);
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Logs which of `slots` are still starting, 2 s after `started` and every 5 s after that, so
/// that a slow server (an `npx` that downloads its package) is not a silent wait. Never
/// resolves: the wait it runs beside ends it.
async fn progress(slots: &[Arc<Slot>], started: tokio::time::Instant, limit: Duration) {
    let mut at = PROGRESS_FIRST;
    loop {
        tokio::time::sleep_until(started + at).await;
        for slot in slots
            .iter()
            .filter(|s| s.upstream.status() == Status::Starting)
        {
            let name = slot.upstream.name();
            tracing::info!(
                upstream = name,
                waited_secs = at.as_secs(),
                "Waiting for upstream {name} to start ({} s so far, at most {} s)",
                at.as_secs(),
                limit.as_secs()
            );
        }
        at += PROGRESS_EVERY;
    }
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
    fn summary_lines_say_health_protocol_and_counts() {
        let summary = |name: &str, status, version: &str| UpstreamSummary {
            name: name.into(),
            transport: "stdio",
            status,
            protocol_version: version.into(),
            counts: (3, 1, 0),
            warnings: Vec::new(),
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
