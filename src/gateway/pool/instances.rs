//! Per-client instances of `share = "per_client"` upstreams.
//!
//! The pool's own upstream of a per-client entry (the one the policy position names) is the
//! *catalog instance*: it runs with the upstream's settings alone, lists the tools, prompts
//! and resources every client sees, and serves no call. A client's first request to such an
//! upstream starts its own instance with its `[client.upstream.<name>]` credentials
//! ([`crate::policy::share::instance_spec`]); that client's calls, reads, prompts,
//! completions and cancellations go there only, so the server→client requests of the
//! instance (sampling, elicitation, roots) always belong to that one client. What it says
//! outside a call (resource updates, logs) goes to that client's sessions only
//! (`Pool::hear`).
//!
//! Instances get ids of their own, from [`FIRST_ID`] up and never reused, so the ids the
//! gateway keeps for later (calls to cancel, server→client requests, parked calls) name the
//! instance, never the catalog instance. An instance is stopped once it has been idle for
//! `idle_secs` (no call in use, nothing pending, no parked call, no session of its client
//! subscribed to one of its resources, no listen stream watching it: [`idle_out`]), when a
//! reload changes its upstream or the client's credentials, and at shutdown.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::error::Error;
use crate::gateway::health::InstanceState;
use crate::lock::lock;
use crate::policy::share::{Credentials, Share, instance_spec};
use crate::policy::{Policy, UpstreamSpec};
use crate::upstream::Upstream;

/// How often idle instances are looked for: an instance stops within this long after its
/// `idle_secs`.
pub(super) const REAP_TICK: Duration = Duration::from_secs(1);

/// The first id of a per-client instance: far above any policy position, so that an id says
/// by itself whether it names an instance.
pub(in crate::gateway) const FIRST_ID: usize = 1 << 30;

/// The running per-client instances, by id.
#[derive(Debug, Default)]
pub(in crate::gateway) struct Instances {
    live: Mutex<HashMap<usize, Instance>>,
    /// The next id to give out (offset from [`FIRST_ID`]).
    next: AtomicUsize,
}

/// One client's instance of one upstream.
#[derive(Debug)]
struct Instance {
    upstream: Upstream,
    /// The id of the catalog instance it is an instance of.
    base: usize,
    /// The client it serves.
    client: String,
    /// Requests of the gateway using it now.
    in_use: usize,
    /// When the last of them ended (or it started).
    last_used: Instant,
    /// When it started, for operators (`/status`).
    started: SystemTime,
}

/// A request's hold on an instance: while one is held, the instance is not idle. Released on
/// drop.
#[derive(Debug)]
pub(in crate::gateway) struct InUse<'a> {
    instances: &'a Instances,
    id: usize,
}

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        if let Some(instance) = lock(&self.instances.live).get_mut(&self.id) {
            instance.in_use = instance.in_use.saturating_sub(1);
            instance.last_used = Instant::now();
        }
    }
}

/// Whether an instance that was last used at `last_used` is to be stopped at `now`: nothing
/// uses it (`busy` counts the gateway's requests using it, the requests pending upstream and
/// parked calls) and it has been idle for `idle`.
#[must_use]
pub(in crate::gateway) fn idle_out(
    last_used: Instant,
    busy: usize,
    now: Instant,
    idle: Duration,
) -> bool {
    busy == 0 && now.saturating_duration_since(last_used) >= idle
}

/// Since when an instance last used at `last_used` is idle, on the wall clock (`wall` is
/// `now` on it): `None` while something uses it (`busy`, as for [`idle_out`]).
#[must_use]
pub(in crate::gateway) fn idle_since(
    last_used: Instant,
    busy: usize,
    now: Instant,
    wall: SystemTime,
) -> Option<SystemTime> {
    let ago = now.saturating_duration_since(last_used);
    (busy == 0).then(|| wall.checked_sub(ago).unwrap_or(wall))
}

/// Whether one more instance may start, with `running` instances of the upstream running and
/// at most `max`.
#[must_use]
pub(in crate::gateway) fn room_for_one(running: usize, max: usize) -> bool {
    running < max
}

impl Instances {
    /// Instance `id`, while it runs.
    pub(in crate::gateway) fn get(&self, id: usize) -> Option<Upstream> {
        (lock(&self.live).get(&id)).map(|i| i.upstream.clone())
    }

    /// Whether no instance runs.
    pub(in crate::gateway) fn none(&self) -> bool {
        lock(&self.live).is_empty()
    }

    /// Every running instance.
    pub(in crate::gateway) fn all(&self) -> Vec<Upstream> {
        (lock(&self.live).values())
            .map(|i| i.upstream.clone())
            .collect()
    }

    /// The running instances of `client`.
    pub(in crate::gateway) fn of_client(&self, client: &str) -> Vec<Upstream> {
        (lock(&self.live).values())
            .filter(|i| i.client == client)
            .map(|i| i.upstream.clone())
            .collect()
    }

    /// `client`'s running instance of upstream `base`, if it has one.
    pub(in crate::gateway) fn running(&self, base: usize, client: &str) -> Option<Upstream> {
        (lock(&self.live).values())
            .find(|i| i.base == base && i.client == client)
            .map(|i| i.upstream.clone())
    }

    /// The client instance `id` serves, while it runs.
    pub(in crate::gateway) fn client_of(&self, id: usize) -> Option<String> {
        (lock(&self.live).get(&id)).map(|i| i.client.clone())
    }

    /// The running instances of upstream `base` as they are now, by client name; `held`
    /// counts what else holds an instance, as for [`Instances::take_idle`].
    pub(in crate::gateway) fn states_of(
        &self,
        base: usize,
        held: impl Fn(usize, usize, &str) -> usize,
    ) -> Vec<InstanceState> {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let mut states: Vec<InstanceState> = (lock(&self.live).iter())
            .filter(|(_, i)| i.base == base)
            .map(|(id, i)| {
                let in_flight = i.upstream.in_flight();
                let mut state = InstanceState::new(&i.client, i.upstream.status(), i.started);
                state.in_flight = in_flight;
                let busy = i.in_use + in_flight + held(*id, i.base, &i.client);
                state.idle_since = idle_since(i.last_used, busy, now, wall);
                state
            })
            .collect();
        states.sort_by(|a, b| a.client.cmp(&b.client));
        states
    }

    /// Takes out the instances `retired` says (given the id of the upstream each is an
    /// instance of, its client and itself), for the caller to stop.
    pub(in crate::gateway) fn take(
        &self,
        mut retired: impl FnMut(usize, &str, &Upstream) -> bool,
    ) -> Vec<Upstream> {
        self.take_where(|_, i| retired(i.base, &i.client, &i.upstream))
    }

    /// Takes out the instances idle for their `idle_secs` at `now`; `held` counts what else
    /// holds an instance (given its id, the id of the upstream it is an instance of, and its
    /// client): parked calls, subscriptions.
    pub(in crate::gateway) fn take_idle(
        &self,
        now: Instant,
        held: impl Fn(usize, usize, &str) -> usize,
    ) -> Vec<Upstream> {
        self.take_where(|id, i| {
            let Share::PerClient(share) = i.upstream.spec().share else {
                return false;
            };
            let busy = i.in_use + i.upstream.in_flight() + held(id, i.base, &i.client);
            idle_out(i.last_used, busy, now, share.idle)
        })
    }

    /// Takes out the instances `due` says, by id.
    fn take_where(&self, mut due: impl FnMut(usize, &Instance) -> bool) -> Vec<Upstream> {
        let mut live = lock(&self.live);
        let ids: Vec<usize> = (live.iter())
            .filter(|(id, i)| due(**id, i))
            .map(|(id, _)| *id)
            .collect();
        (ids.iter())
            .filter_map(|id| live.remove(id))
            .map(|i| i.upstream)
            .collect()
    }
}

impl Instances {
    /// The instance `client`'s requests to upstream `base` (a catalog instance) go to, held
    /// in use: its running one, or one `start`ed now (given its id and spec) with
    /// `credentials` on top of the upstream's settings.
    ///
    /// # Errors
    /// [`Error::InstancesExhausted`] when the upstream runs its `max_instances` already.
    pub(in crate::gateway) fn instance(
        &self,
        base: &Upstream,
        client: &str,
        credentials: Option<&Credentials>,
        start: impl FnOnce(usize, UpstreamSpec) -> Upstream,
    ) -> Result<Serving<'_>, Error> {
        let Share::PerClient(share) = base.spec().share else {
            return Err(Error::Internal(format!(
                "{} is shared by every client",
                base.name()
            )));
        };
        let instances = self;
        let mut live = lock(&instances.live);
        let found = (live.iter_mut()).find(|(_, i)| i.base == base.index() && i.client == client);
        let id = match found {
            Some((id, instance)) => {
                instance.in_use += 1;
                *id
            }
            None => {
                let running = (live.values()).filter(|i| i.base == base.index()).count();
                if !room_for_one(running, share.max_instances.get()) {
                    return Err(Error::InstancesExhausted {
                        upstream: base.name().to_owned(),
                        max: share.max_instances.get(),
                    });
                }
                let id = FIRST_ID + instances.next.fetch_add(1, Ordering::Relaxed);
                let spec = instance_spec(base.spec(), credentials);
                let upstream = start(id, spec);
                tracing::info!(
                    upstream = base.name(),
                    client,
                    running = running + 1,
                    "Per-client instance started"
                );
                let instance = Instance {
                    upstream,
                    base: base.index(),
                    client: client.to_owned(),
                    in_use: 1,
                    last_used: Instant::now(),
                    started: SystemTime::now(),
                };
                live.insert(id, instance);
                id
            }
        };
        let upstream = live[&id].upstream.clone();
        drop(live);
        Ok(Serving {
            id,
            upstream,
            _in_use: Some(InUse { instances, id }),
        })
    }
}

/// Where one request goes: the upstream it names, or the caller's instance of it, held in
/// use until the request ends.
pub(in crate::gateway) struct Serving<'a> {
    /// The id of the upstream or instance serving it (what cancellations and parked calls
    /// name).
    pub(in crate::gateway) id: usize,
    /// That upstream or instance.
    pub(in crate::gateway) upstream: Upstream,
    _in_use: Option<InUse<'a>>,
}

impl Serving<'_> {
    /// Upstream `id` serving a request itself (a shared upstream, or a named instance): no
    /// hold.
    pub(in crate::gateway) fn shared(id: usize) -> impl Fn(Upstream) -> Self {
        move |upstream| Serving {
            id,
            upstream,
            _in_use: None,
        }
    }
}

/// `client`'s `[client.upstream.<upstream>]`, if it has one.
pub(super) fn credentials_of<'p>(
    policy: &'p Policy,
    client: &str,
    upstream: &str,
) -> Option<&'p Credentials> {
    (policy.credentials.iter())
        .find(|((c, u), _)| c == client && u == upstream)
        .map(|(_, credentials)| credentials)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_idles_out_only_unused_and_after_idle_secs() {
        let start = Instant::now();
        let idle = Duration::from_secs(600);
        let later = |secs| start + Duration::from_secs(secs);
        assert!(!idle_out(start, 0, later(599), idle));
        assert!(idle_out(start, 0, later(600), idle));
        assert!(!idle_out(start, 1, later(6000), idle), "a call in use");
        // A clock that went back (an `Instant` taken before `last_used`) never reaps.
        assert!(!idle_out(later(10), 0, start, idle));
    }

    #[test]
    fn an_instance_is_idle_since_its_last_use_only_while_unused() {
        let start = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let now = start + Duration::from_secs(30);
        assert_eq!(
            idle_since(start, 0, now, wall),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(970))
        );
        assert_eq!(idle_since(start, 2, now, wall), None, "in use");
        // A clock that went back: idle since now.
        assert_eq!(idle_since(now, 0, start, wall), Some(wall));
    }

    #[test]
    fn the_cap_counts_running_instances() {
        assert!(room_for_one(0, 1));
        assert!(!room_for_one(1, 1));
        assert!(room_for_one(31, 32));
        assert!(!room_for_one(32, 32));
    }
}
