//! The upstream pool, a room of the gateway: starting every upstream, following what they do,
//! fetching their lists and publishing the catalog built from them; the policy it runs (and
//! who announces list changes, an [`Announce`] the stack decides); readiness, the startup
//! summary, reconciling with a reloaded policy, the per-client instances, and shutdown. It
//! answers where a request goes ([`Pool::route`], [`Pool::serving`]) and what is listed
//! ([`Pool::snapshot`]).
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

mod instances;
mod lists;
mod manifests;
mod recheck;
mod reconcile;

pub(super) use instances::{FIRST_ID, Serving};

use super::announce::Announce;
use super::forward::Inflight;
use super::health::UpstreamState;
use crate::authz::Kind;
use crate::catalog::{Catalog, Contribution, Given};
use crate::context::{Caller, McpRequest};
use crate::error::Error;
use crate::identity::Via;
use crate::jsonrpc::Message;
use crate::lock::lock;
use crate::mcp::Era;
use crate::mcp::method::{Listed, Method};
use crate::policy::share::Share;
use crate::policy::{Policy, Reconcile, UpstreamSpec};
use crate::routing::{self, Reach};
use crate::upstream::manifest::SavedBy;
use crate::upstream::{Event, Status, Upstream};
use instances::{Instances, credentials_of};
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
    instances: Instances,
    /// The policy it runs and who announces list changes under it: replaced as a whole by a
    /// reload ([`Pool::reconcile`]).
    running: Mutex<(Arc<Policy>, Announce)>,
    /// Told each time a reload replaces the policy (the recheck task reads its period again).
    reloaded: Notify,
    /// Policy keys the last reload changed that apply only at a restart.
    pending_restart: Mutex<Vec<&'static str>>,
    /// Where list changes are announced: every session and listen stream (the gateway's
    /// broadcasts).
    broadcasts: mpsc::UnboundedSender<Message>,
    shutdown: CancellationToken,
}

/// What the pool made of an upstream's event: done with it, or something it said outside a
/// call, for the sessions of `client` (`None`: of every client).
pub(super) enum Heard {
    /// Handled (a readiness, a `list_changed`), or for nobody any more.
    Done,
    /// A resource update or a log line outside a call.
    Outside {
        /// The client whose per-client instance said it; `None` for a shared upstream.
        client: Option<String>,
    },
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
    /// Its manifest as last read or saved (lazy upstreams; every one under `pin`).
    manifest: Mutex<Option<crate::upstream::manifest::Manifest>>,
}

impl Slot {
    fn new(launched: Launched) -> Arc<Self> {
        Arc::new(Self {
            upstream: launched.upstream,
            refreshing: tokio::sync::Mutex::new(()),
            refreshed: watch::channel(0).0,
            readies: AtomicU64::new(0),
            listed_at: AtomicU64::new(0),
            manifest: Mutex::new(launched.manifest),
        })
    }
}

/// An upstream the pool started (or, lazy with a manifest, did not): the upstream, the
/// manifest it was listed from and what that lists.
struct Launched {
    upstream: Upstream,
    manifest: Option<crate::upstream::manifest::Manifest>,
    listed: Option<Contribution>,
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
    /// `eager` or `lazy`, and for a lazy one who saved the manifest it was listed from
    /// (`None`: it started to be listed).
    pub start: (&'static str, Option<&'static str>),
}

impl Pool {
    /// Starts every upstream of `policy` in parallel; their events arrive on the receiver.
    /// `announce` says who announces list changes under `policy`; the pool's own
    /// announcements go to `broadcasts`.
    pub(super) fn start(
        policy: Arc<Policy>,
        announce: Announce,
        shutdown: &CancellationToken,
        replica: Option<Arc<str>>,
        broadcasts: mpsc::UnboundedSender<Message>,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Event>) {
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
            instances: Instances::default(),
            running: Mutex::new((policy, announce)),
            reloaded: Notify::new(),
            pending_restart: Mutex::default(),
            broadcasts,
            shutdown: shutdown.clone(),
        };
        let policy = pool.policy();
        let mut listed = Vec::new();
        let all: Vec<Arc<Slot>> = (policy.upstreams.iter().enumerate())
            .map(|(id, spec)| {
                let launched = pool.launch(id, spec.clone(), &policy);
                listed.push(launched.listed.clone().unwrap_or_default());
                Slot::new(launched)
            })
            .collect();
        let ids = (0..all.len()).collect();
        // Lazy upstreams listed from their manifests are in the first catalog, through the
        // guard as fetched lists are.
        let catalog = if listed.iter().any(|c| *c != Contribution::default()) {
            let catalog = guarded(listed, &names, &policy, 1, &catalog);
            let catalog = Arc::new(catalog);
            pool.catalog.send_replace(catalog.clone());
            catalog
        } else {
            catalog
        };
        (pool.members).send_replace(Arc::new(Members { all, ids, catalog }));
        (Arc::new(pool), events_rx)
    }

    /// Starts upstream `spec` under `id`; a lazy one with a manifest for its key under
    /// `policy` is not started but listed from it.
    fn launch(&self, id: usize, spec: UpstreamSpec, policy: &Policy) -> Launched {
        let manifest = manifests::load(policy, &spec);
        let upstream = self.start_one(id, spec, manifest.as_ref());
        let listed = (manifest.as_ref()).map(|m| manifests::contribution(&upstream, m));
        Launched {
            upstream,
            manifest,
            listed,
        }
    }

    /// Starts upstream (or per-client instance) `spec` under `id` (a lazy one with a
    /// `manifest` is listed from it, not started).
    fn start_one(
        &self,
        id: usize,
        spec: UpstreamSpec,
        manifest: Option<&crate::upstream::manifest::Manifest>,
    ) -> Upstream {
        Upstream::start_tagged(
            id,
            self.replica.clone(),
            spec,
            self.capabilities.clone(),
            self.events.clone(),
            self.shutdown.child_token(),
            manifest,
        )
    }

    /// The policy the pool runs (the one [`Pool::reconcile`] applied last).
    pub(super) fn policy(&self) -> Arc<Policy> {
        lock(&self.running).0.clone()
    }

    /// Who announces list changes under the policy the pool runs.
    fn announcer(&self) -> Announce {
        lock(&self.running).1
    }

    /// The policy keys the last reload changed that only a restart applies.
    pub(super) fn pending_restart(&self) -> Vec<&'static str> {
        lock(&self.pending_restart).clone()
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

    /// The 2025-era upstreams that serve `client` outside a call: the current shared ones,
    /// and its own per-client instances (never another client's).
    pub(super) fn legacy_of(&self, client: &str) -> Vec<Upstream> {
        let own = self.instances.of_client(client);
        let own = own.into_iter().filter(|u| !u.is_modern());
        self.legacy().into_iter().chain(own).collect()
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

    /// Every upstream as it is now, in policy order (the admin listener's view); `held`
    /// counts what else holds a per-client instance, as for [`Instances::take_idle`].
    pub(super) fn states(&self, held: impl Fn(usize, usize, &str) -> usize) -> Vec<UpstreamState> {
        let (upstreams, catalog) = {
            let members = self.members.borrow();
            let upstreams: Vec<Upstream> = members.current().cloned().collect();
            (upstreams, members.catalog.clone())
        };
        (upstreams.iter().zip(catalog.upstreams()))
            .map(|(u, c)| UpstreamState {
                name: u.name().to_owned(),
                transport: u.spec().transport_name(),
                status: u.status(),
                era: match u.era() {
                    None => "unknown",
                    Some(Era::Legacy) => "2025",
                    Some(Era::Modern) => "2026-07-28",
                },
                protocol_version: u.info().protocol_version,
                counts: (c.counts().tools, c.counts().prompts, c.counts().resources),
                in_flight: u.in_flight(),
                listed: self.listed(u.index()),
                required: u.spec().required,
                per_client: matches!(u.spec().share, Share::PerClient(_)),
                instances: self.instances.states_of(u.index(), &held),
                life: u.life(),
            })
            .collect()
    }

    /// Waits until every upstream is ready or down (at most `limit`) and its lists fetched.
    pub(super) async fn wait_ready(&self, limit: Duration) -> Vec<UpstreamSummary> {
        let shutdown = &self.shutdown;
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
                start: {
                    let life = u.life();
                    (life.start, life.manifest.map(SavedBy::name))
                },
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
        let mut fetched = manifests::Fetched::default();
        if wants(Listed::Tools) {
            if let Some(tools) = fetch_all(upstream, &Method::ToolsList, "tools").await {
                fetched.tools = Some(tools.clone());
                let tools = manifests::shape_tools(upstream, tools);
                // Announced by a layer (the budget's plan), hosts see a canonical order: an
                // upstream that only reordered its tools changed nothing they see, so nothing
                // is announced.
                let order_matters = self.announcer().order_matters();
                if !same_items(&tools, &fresh.tools, order_matters) {
                    changed.push(Listed::Tools);
                }
                fresh.tools = tools;
            }
        }
        if wants(Listed::Prompts) {
            if let Some(prompts) = fetch_all(upstream, &Method::PromptsList, "prompts").await {
                fetched.prompts = Some(prompts.clone());
                if prompts != fresh.prompts {
                    changed.push(Listed::Prompts);
                    fresh.prompts = prompts;
                }
            }
        }
        if wants(Listed::Resources)
            && self
                .fetch_resources(upstream, &mut fresh, &mut fetched)
                .await
        {
            changed.push(Listed::Resources);
        }
        if !changed.is_empty() {
            self.publish(upstream.index(), &fresh, policy);
        }
        let slot = self.slot(upstream.index());
        if manifests::keep(upstream, &slot.manifest, only, fetched, policy) && only.is_none() {
            upstream.stop_if_only_listed().await;
        }
        changed
    }

    /// Fetches `upstream`'s resources and resource templates into `fresh` (and `fetched`);
    /// whether either changed.
    async fn fetch_resources(
        &self,
        upstream: &Upstream,
        fresh: &mut Contribution,
        fetched: &mut manifests::Fetched,
    ) -> bool {
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
            fetched.resources = Some(r.clone());
            fresh.resources = r;
        }
        if let Some(t) = templates {
            any |= t != fresh.templates;
            fetched.templates = Some(t.clone());
            fresh.templates = t;
        }
        any
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
            // Only this upstream's lists changed: the others are not guarded again.
            let sanitize = |name: &str| policy.sanitize.rules_for(name);
            let (previous, rules) = (&members.catalog, &policy.pin.rules);
            let catalog = crate::pin::guarded_changed(raw, version, previous, sanitize, rules);
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

impl Pool {
    /// Stops every upstream (children get SIGTERM, then SIGKILL) and waits until they are gone.
    pub(super) async fn shutdown(&self) {
        self.shutdown.cancel();
        let all = self.all();
        let stops = all.iter().map(|u| u.stop(Duration::from_secs(5)));
        futures::future::join_all(stops).await;
    }

    /// Takes upstream `event`: a readiness or a `list_changed` refreshes the upstream's lists
    /// (on a task of their own, so that upstreams are fetched in parallel, one at a time
    /// each); what an upstream says outside a call is handed back, with the client it belongs
    /// to. A per-client instance's readiness and `list_changed` change nothing (the catalog
    /// comes from the catalog instance), and what it says outside a call belongs to its one
    /// client; an instance already taken out (stopping after a reload or `idle_secs`) belongs
    /// to nobody any more.
    pub(super) fn hear(self: &Arc<Self>, event: &Event) -> Heard {
        let id = match event {
            Event::Ready(i) | Event::Down(i) | Event::ListChanged(i, _) => *i,
            Event::Broadcast(i, _) | Event::Log(i, _) => *i,
        };
        let outside = matches!(event, Event::Broadcast(..) | Event::Log(..));
        if id >= FIRST_ID {
            if !outside {
                return Heard::Done;
            }
            return match self.instances.client_of(id) {
                Some(client) => Heard::Outside {
                    client: Some(client),
                },
                None => {
                    dropped(id);
                    Heard::Done
                }
            };
        }
        match event {
            Event::Ready(i) => {
                self.note_ready(*i);
                self.spawn_refresh(*i, None);
            }
            Event::ListChanged(i, kind) => self.spawn_refresh(*i, Some(*kind)),
            // An upstream that goes down keeps its last lists (calls to it fail).
            Event::Down(_) => {}
            Event::Broadcast(..) | Event::Log(..) => return Heard::Outside { client: None },
        }
        Heard::Done
    }

    /// Refreshes upstream `id`'s lists (all, or one kind) on a task of its own, then announces
    /// what changed.
    fn spawn_refresh(self: &Arc<Self>, id: usize, only: Option<Listed>) {
        let this = self.clone();
        tokio::spawn(async move { this.refresh_and_announce(id, only).await });
    }

    /// Fetches upstream `id`'s lists (all, or one kind) with the current policy, publishes
    /// the catalog through the guard when they changed and announces what changed: what a
    /// `list_changed`, a readiness and a recheck tick ([`recheck`]) all go through.
    async fn refresh_and_announce(&self, id: usize, only: Option<Listed>) {
        let policy = self.policy();
        let changed = self.refresh(id, only, &policy).await;
        self.announce(&changed);
    }

    /// Tells every session and listener that the lists of `kinds` changed (through the
    /// gateway's broadcasts), those the gateway announces ([`Announce::by_gateway`]).
    fn announce(&self, kinds: &[Listed]) {
        let announce = self.announcer();
        for kind in kinds.iter().filter(|k| announce.by_gateway(**k)) {
            let msg = Message::notification(kind.changed().as_str(), None);
            let _ = self.broadcasts.send(msg);
        }
    }

    /// The recheck task ([`recheck`]): until shutdown, every `[pin] recheck_secs` of the
    /// current policy, every ready upstream listed again.
    pub(super) async fn recheck(self: Arc<Self>) {
        let period = || self.policy().pin.recheck;
        recheck::run(period, &self.reloaded, &self.shutdown, || {
            self.recheck_once()
        })
        .await;
    }

    /// Lists every current, ready upstream again (all its lists, in parallel) and waits for
    /// them all.
    async fn recheck_once(&self) {
        let ready: Vec<usize> = (self.current().iter())
            .filter(|u| u.status() == Status::Ready)
            .map(Upstream::index)
            .collect();
        tracing::debug!(
            upstreams = ready.len(),
            "Recheck: listing the upstreams again"
        );
        let refreshes = (ready.iter()).map(|&id| self.refresh_and_announce(id, None));
        futures::future::join_all(refreshes).await;
    }
}

impl Pool {
    /// Where `caller`'s request to upstream `id` goes: a shared upstream serves it itself; a
    /// per-client upstream's catalog instance hands it to the caller's instance, started now
    /// (and waited for, at most the upstream's `timeout_secs`) if it has none. An instance id
    /// (a parked call's retry) names that instance.
    ///
    /// # Errors
    /// [`Error::ClientRequired`] for an anonymous caller of a per-client upstream,
    /// [`Error::InstancesExhausted`] past its `max_instances`, [`Error::UpstreamUnavailable`]
    /// for an instance that was stopped.
    pub(super) async fn serving(&self, id: usize, caller: &Caller) -> Result<Serving<'_>, Error> {
        let shared = Serving::shared(id);
        if id >= FIRST_ID {
            let gone = || Error::UpstreamUnavailable {
                upstream: format!("per-client instance {id}"),
                reason: "it was stopped (idle_secs, or a reload); call again".into(),
            };
            return self.get(id).map(shared).ok_or_else(gone);
        }
        let base = self.upstream(id);
        if matches!(base.spec().share, Share::Global) {
            return Ok(shared(base));
        }
        if caller.principal.via() == Via::Anonymous {
            return Err(Error::ClientRequired {
                upstream: base.name().to_owned(),
            });
        }
        let client = caller.principal.name();
        let policy = self.policy();
        let credentials = credentials_of(&policy, client, base.name());
        let start = |id, spec| self.start_one(id, spec, None);
        let serving = (self.instances).instance(&base, client, credentials, start)?;
        let upstream = &serving.upstream;
        if upstream.status() == Status::Starting {
            upstream.wait_ready(upstream.spec().timeout).await;
        }
        Ok(serving)
    }

    /// Stops the per-client instances that have been idle for their `idle_secs`, every
    /// [`instances::REAP_TICK`], until shutdown; `holds` says, at each tick, what else holds
    /// an instance (given its id, the id of the upstream it is an instance of, and its
    /// client): parked calls, subscriptions.
    pub(super) async fn reap_instances<H>(self: Arc<Self>, holds: impl Fn() -> H)
    where
        H: Fn(usize, usize, &str) -> usize,
    {
        let mut tick = tokio::time::interval(instances::REAP_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = self.shutdown.cancelled() => return,
            }
            if self.instances.none() {
                continue;
            }
            let idle = (self.instances).take_idle(tokio::time::Instant::now(), holds());
            for upstream in idle {
                tracing::info!(
                    upstream = upstream.name(),
                    "Per-client instance stopped (idle_secs)"
                );
                tokio::spawn(async move { upstream.stop(Duration::from_secs(5)).await });
            }
        }
    }

    /// Whether no per-client instance runs.
    pub(super) fn no_instances(&self) -> bool {
        self.instances.none()
    }

    /// `client`'s running instance of upstream `base`, if it has one.
    pub(super) fn running_instance(&self, base: usize, client: &str) -> Option<Upstream> {
        self.instances.running(base, client)
    }

    /// Runs `policy` from now on, with `announce` saying who announces list changes under
    /// it: upstreams are started, stopped (once their calls in flight, by `inflight`, end;
    /// new calls to them are refused as to a name no upstream lists), restarted or left
    /// untouched as [`Reconcile::between`] the current policy and `policy` says; the catalog
    /// is rebuilt with the new names, sanitizing and pins; sessions and listeners get
    /// `list_changed` for each list whose pass-through view changed (tools only when the
    /// gateway announced them before and does now). Settings only a restart applies
    /// (`Reconcile::needs_restart`) are kept as they were, and named by
    /// [`Pool::pending_restart`] until the next reload.
    pub(super) fn reconcile(
        &self,
        mut policy: Policy,
        announce: Announce,
        inflight: &Arc<Inflight>,
    ) -> Reconcile {
        let (old, old_announce) = lock(&self.running).clone();
        let plan = Reconcile::between(&old, &policy);
        // The transports read `[downstream]` and `[sessions]` once, when they start: the
        // sections stay as served, and what differs is pending until a restart.
        policy.downstream = old.downstream.clone();
        policy.sessions = old.sessions.clone();
        (*lock(&self.pending_restart)).clone_from(&plan.needs_restart);
        let before = self.snapshot();
        let policy = Arc::new(policy);
        *lock(&self.running) = (policy.clone(), announce);
        self.reloaded.notify_one();
        for upstream in self.rebuild(&plan, &policy) {
            tokio::spawn(retire(upstream, inflight.clone()));
        }
        self.retire_instances(&policy, inflight);
        let after = self.snapshot();
        // Tools listed by a layer before: the reloader compares what it showed.
        let by_layer = !old_announce.order_matters();
        let changed = reconcile::changed_lists(&before, &after, by_layer);
        self.announce(&changed);
        plan
    }

    /// Reconciles the upstreams with `policy` as `plan` says: kept ones stay as they are
    /// (same process or session, same id, same lists); started and restarted ones get new
    /// ids (a restarted one keeps listing its last lists until its new instance lists its
    /// own); the catalog is rebuilt in the new policy's order with its separator, sanitizing
    /// and pins. Returns the upstreams it no longer lists (removed, or replaced by their
    /// restart), for the caller to stop once their calls in flight end.
    fn rebuild(&self, plan: &Reconcile, policy: &Policy) -> Vec<Upstream> {
        let mut retired = Vec::new();
        self.members.send_modify(|members| {
            let old_names = members.names();
            let old_raw = members.catalog.upstreams();
            let mut all = members.all.clone();
            let (mut ids, mut raw) = (Vec::new(), Vec::new());
            for spec in &policy.upstreams {
                let old = old_names.iter().position(|n| *n == spec.name);
                let mut listed = None;
                let id = match old.filter(|_| plan.keep.contains(&spec.name)) {
                    Some(i) => members.id(i),
                    None => {
                        let launched = self.launch(all.len(), spec.clone(), policy);
                        listed = launched.listed.clone().map(|c| Arc::new(Given::new(&c)));
                        all.push(Slot::new(launched));
                        all.len() - 1
                    }
                };
                ids.push(id);
                raw.push(
                    listed
                        .or_else(|| old.map(|i| old_raw[i].clone()))
                        .unwrap_or_default(),
                );
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

    /// After a reload: the instances of upstreams it removed or restarted, and those whose
    /// client's credentials changed, stop once their calls in flight end (the next request
    /// starts a new one).
    fn retire_instances(&self, policy: &Policy, inflight: &Arc<Inflight>) {
        let stale = self.instances.take(|base, client, instance| {
            if !self.is_current(base) {
                return true;
            }
            let base = self.upstream(base);
            let credentials = credentials_of(policy, client, base.name());
            crate::policy::share::instance_spec(base.spec(), credentials) != *instance.spec()
        });
        for upstream in stale {
            tokio::spawn(retire(upstream, inflight.clone()));
        }
    }
}

/// Stops `upstream`, removed from the catalog, once the calls the gateway forwarded to it
/// have ended (by `inflight`; at most its `timeout_secs`, as a call waits that long anyway).
async fn retire(upstream: Upstream, inflight: Arc<Inflight>) {
    let limit = tokio::time::Instant::now() + upstream.spec().timeout;
    while inflight.to_upstream(upstream.index()) > 0 && tokio::time::Instant::now() < limit {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    upstream.stop(Duration::from_secs(5)).await;
    tracing::info!(upstream = upstream.name(), "Upstream stopped (reload)");
}

/// Notes that what instance `id` said outside a call reached nobody: it stopped serving its
/// client.
fn dropped(id: usize) {
    tracing::debug!(
        instance = id,
        "A stopping per-client instance's notification outside a call is dropped"
    );
}

impl Pool {
    /// The error for a `what` called `name` that no upstream lists: "unavailable" when the
    /// name carries the namespace of an upstream that is not serving (it never started, or
    /// crashed before listing), else "not found". Saying "unknown tool" would send the model
    /// looking for another tool when the real answer is "try again later".
    pub(super) fn not_listed(&self, what: &'static str, name: String, separator: &str) -> Error {
        let current = self.current();
        let upstreams = (current.iter()).map(|u| (u.name(), u.status()));
        match unavailable_owner(&name, separator, upstreams) {
            // A server that is down because it cannot be reached says so (URL, OS reason).
            Some(Error::UpstreamUnavailable { upstream, reason }) => {
                let down = (current.iter())
                    .find(|u| u.name() == upstream && matches!(u.status(), Status::Down(_)));
                match down {
                    Some(u) => u.down_error(reason),
                    None => Error::UpstreamUnavailable { upstream, reason },
                }
            }
            Some(other) => other,
            None => Error::NotFound { what, name },
        }
    }

    /// The upstream of resource `uri`: the one that lists it, then the one with the longest
    /// literal prefix of a template; then the only upstream with resources.
    pub(super) fn route_uri(&self, uri: &str) -> Option<usize> {
        if let Some((id, ())) = self.route(|catalog| catalog.resource(uri).map(|i| (i, ()))) {
            return Some(id);
        }
        let current = self.current();
        let mut with_resources = (current.iter())
            .filter(|u| u.info().capabilities.get("resources").is_some())
            .map(Upstream::index);
        match (with_resources.next(), with_resources.next()) {
            (Some(i), None) => Some(i),
            _ => None,
        }
    }
}

/// For a name no upstream lists: the error of the first upstream that is not serving and
/// whose namespace (`<name><separator>`) the name carries.
fn unavailable_owner<'a>(
    name: &str,
    separator: &str,
    upstreams: impl Iterator<Item = (&'a str, Status)>,
) -> Option<Error> {
    upstreams
        .filter(|(upstream, _)| {
            (name.strip_prefix(upstream)).is_some_and(|rest| rest.starts_with(separator))
        })
        .find_map(|(upstream, status)| {
            let reason = match status {
                Status::Ready | Status::Stopped => return None,
                Status::Down(reason) => reason,
                Status::Starting => "still starting".into(),
            };
            Some(Error::UpstreamUnavailable {
                upstream: upstream.to_owned(),
                reason,
            })
        })
}

/// The catalog of upstreams `names` from their lists as given (`raw`), through the guard
/// ([`crate::pin::guarded`]) with `policy`'s sanitizing and pins.
fn guarded<C: Into<Arc<Given>>>(
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
                Status::Stopped => "not running".to_owned(),
            };
            let lazy = match s.start {
                ("lazy", Some(by)) => format!(" — lazy, listed from the manifest saved by {by}"),
                ("lazy", None) => " — lazy, no manifest: started once to be listed".to_owned(),
                _ => String::new(),
            };
            (
                s.name.clone(),
                format!(
                    "{} {} protocol {} — {} tools, {} prompts, {} resources{lazy}",
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
    fn an_unlisted_name_blames_its_upstream_only_when_that_one_is_not_serving() {
        let kind = |name: &str, upstreams: &[(&str, Status)]| {
            unavailable_owner(name, "__", upstreams.iter().cloned())
                .map(|e| e.to_error_object().kind())
        };
        let down = Status::Down("exited".into());
        let unavailable = Some(Some(crate::error::kind::UPSTREAM_UNAVAILABLE.to_owned()));
        assert_eq!(kind("a__t", &[("a", down.clone())]), unavailable);
        assert_eq!(kind("a__t", &[("a", Status::Starting)]), unavailable);
        assert_eq!(kind("a__t", &[("a", Status::Ready)]), None);
        // The namespace is the name and the separator, not a prefix of the name.
        assert_eq!(kind("ab__t", &[("a", down.clone())]), None);
        assert_eq!(kind("a_t", &[("a", down.clone())]), None);
        // The first owner that is not serving answers; a ready one does not hide it.
        assert_eq!(
            kind("a__b__t", &[("a", Status::Ready), ("a__b", down)]),
            unavailable
        );
    }

    #[test]
    fn summary_lines_say_which_upstreams_are_lazy_and_where_their_lists_came_from() {
        let lazy = |name: &str, by| UpstreamSummary {
            name: name.into(),
            transport: "stdio",
            status: Status::Stopped,
            protocol_version: "2025-11-25".into(),
            counts: (2, 0, 0),
            warnings: Vec::new(),
            start: ("lazy", by),
        };
        let lines = summary_lines(&[lazy("a", Some("pin")), lazy("b", None)]);
        assert_eq!(
            lines["a"],
            "stdio not running protocol 2025-11-25 — 2 tools, 0 prompts, 0 resources — lazy, listed from the manifest saved by pin"
        );
        assert!(lines["b"].ends_with("— lazy, no manifest: started once to be listed"));
    }

    #[test]
    fn summary_lines_say_health_protocol_and_counts() {
        let summary = |name: &str, status, version: &str| UpstreamSummary {
            name: name.into(),
            transport: "stdio",
            status,
            protocol_version: version.into(),
            counts: (3, 1, 0),
            warnings: Vec::new(),
            start: ("eager", None),
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
