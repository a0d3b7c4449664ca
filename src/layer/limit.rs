//! `limit`: what each client may spend, keyed by principal (see [`crate::limits`]).
//!
//! Effect: a call (`tools/call`, `prompts/get`, `resources/read`, `completion/complete`) of a
//! client over its rate (all upstreams, or the one it calls) is answered `-32023`
//! `mcp_budget.limit.rate` with `error.data.retryAfterMs`; over its calls in flight it waits
//! in its own bounded queue, and past the queue (or `queue_ms`) is answered
//! `mcp_budget.limit.in_flight`. Nothing refused is forwarded. An upstream's `in_flight`
//! caps its calls from all clients together; its waiting line is first come, first served,
//! and because each client holds at most its own `in_flight` places in it, a flooding client
//! delays another by at most that many calls per client, never starves it.
//!
//! The called upstream is the one the catalog routes the name to (as the gateway will). A
//! name the catalog does not know is counted against the client's overall rate only, and goes
//! on down to be refused there. Everything else passes through untouched; without `[limits]`
//! the layer is not in the stack.
//!
//! With `[state] backend = "redis"` the rates are spent in the shared store
//! ([`crate::state::Store`]), so replicas share them; calls in flight and queues stay this
//! replica's.
//!
//! ```
//! use mcp_budget::catalog::Catalog;
//! use mcp_budget::layer::limit::LimitLayer;
//! use mcp_budget::limits::{ClientLimits, Limits};
//! use std::sync::Arc;
//! use tower::Layer;
//! # use mcp_budget::context::McpRequest;
//! # let inner = tower::service_fn(|_: McpRequest| async { Ok::<Option<mcp_budget::jsonrpc::Message>, std::convert::Infallible>(None) });
//! let limits = Limits { default: ClientLimits { in_flight: Some(4), ..ClientLimits::default() }, ..Limits::default() };
//! let (_tx, catalog) = tokio::sync::watch::channel(Arc::new(Catalog::default()));
//! let service = LimitLayer::new(limits, catalog).layer(inner);
//! # let _ = service;
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::Layer;

use crate::catalog::Catalog;
use crate::context::{McpFuture, McpRequest};
use crate::error::Error;
use crate::jsonrpc::{Id, Kind, Message};
use crate::layer::{Around, Inner, Layered};
use crate::limits::{ClientLimits, Ledger, Limits, Refused, Which};
use crate::mcp::method::Method;
use crate::routing::Routed;
use crate::state::Store;

/// Layer of [`Limit`].
#[derive(Debug, Clone)]
pub struct LimitLayer {
    state: Arc<State>,
}

impl LimitLayer {
    /// Limits calls as `limits` says, routing names through the published `catalog`.
    #[must_use]
    pub fn new(limits: Limits, catalog: watch::Receiver<Arc<Catalog>>) -> Self {
        Self::sharing(limits, catalog, None)
    }

    /// [`LimitLayer::new`] keeping the rates in `store` (`[state] backend = "redis"`), shared
    /// by every replica, instead of this layer's own buckets; `None` keeps them here.
    /// In-flight slots and queues stay this replica's either way.
    #[must_use]
    pub(crate) fn sharing(
        limits: Limits,
        catalog: watch::Receiver<Arc<Catalog>>,
        store: Option<Store>,
    ) -> Self {
        let upstreams = limits
            .upstream_in_flight
            .iter()
            .map(|(name, n)| (name.clone(), Arc::new(Semaphore::new(*n))))
            .collect();
        Self {
            state: Arc::new(State {
                limits,
                catalog,
                ledger: Mutex::new(Ledger::default()),
                slots: Mutex::new(HashMap::new()),
                upstreams,
                epoch: tokio::time::Instant::now(),
                store,
            }),
        }
    }
}

impl<S> Layer<S> for LimitLayer {
    type Service = Limit<S>;
    fn layer(&self, inner: S) -> Limit<S> {
        Layered::new(self.clone(), inner)
    }
}

/// Refuses or queues calls over a client's limits.
pub type Limit<S> = Layered<LimitLayer, S>;

/// One client's in-flight slots and how many wait for one.
#[derive(Debug)]
struct Slots {
    free: Arc<Semaphore>,
    waiting: AtomicUsize,
}

#[derive(Debug)]
struct State {
    limits: Limits,
    catalog: watch::Receiver<Arc<Catalog>>,
    ledger: Mutex<Ledger>,
    /// By client name: bounded by the policy's clients (and the anonymous one).
    slots: Mutex<HashMap<String, Arc<Slots>>>,
    /// By upstream name, for upstreams with an `in_flight`.
    upstreams: HashMap<String, Arc<Semaphore>>,
    epoch: tokio::time::Instant,
    /// The shared store of the rates, when `[state]` names one.
    store: Option<Store>,
}

impl<S: Inner> Around<S> for LimitLayer {
    type Future = McpFuture;

    fn around(&self, mut inner: S, req: McpRequest) -> McpFuture {
        // Calls reach an upstream's tool, prompt, resource or completion.
        let is_call = req.message.kind() == Kind::Request && req.view.method().is_call();
        if !is_call {
            return Box::pin(inner.call(req));
        }
        let state = self.state.clone();
        Box::pin(async move {
            let client = req.caller.principal.name();
            let routed = state.routed(&req);
            let upstream = routed.as_deref().and_then(Routed::upstream);
            let limits = state.limits.of(client);
            let refused = |refused| {
                let id = req.message.reply_id();
                Ok(Some(refusal(id, client, upstream, refused)))
            };
            let rate = match &state.store {
                Some(store) => store.admit(client, upstream, limits).await,
                None => state.admit_rate(client, upstream, limits),
            };
            if let Err(why) = rate {
                return refused(why);
            }
            let _client_slot = match state.client_slot(client, limits).await {
                Ok(permit) => permit,
                Err(why) => return refused(why),
            };
            let _upstream_slot = match upstream.and_then(|u| state.upstreams.get(u)) {
                // Closed never: the semaphore lives as long as the layer.
                Some(line) => line.clone().acquire_owned().await.ok(),
                None => None,
            };
            inner.call(req).await
        })
    }
}

impl State {
    /// What this call is routed to (as a layer above routed it, or now), if it counts
    /// against an upstream: a completion counts against the overall rate only.
    fn routed(&self, req: &McpRequest) -> Option<Arc<Routed>> {
        if *req.view.method() == Method::CompletionComplete {
            return None;
        }
        let catalog = self.catalog.borrow().clone();
        req.routed(&catalog)
    }

    fn admit_rate(
        &self,
        client: &str,
        upstream: Option<&str>,
        limits: &ClientLimits,
    ) -> Result<(), Refused> {
        if limits.calls_per_sec.is_none() && limits.upstream_calls_per_sec.is_none() {
            return Ok(());
        }
        let now = self.now_ms();
        crate::lock::lock(&self.ledger).admit_call(client, upstream, limits, now)
    }

    /// One of the client's in-flight slots, waiting in its queue if it must.
    async fn client_slot(
        &self,
        client: &str,
        limits: &ClientLimits,
    ) -> Result<Option<OwnedSemaphorePermit>, Refused> {
        let Some(n) = limits.in_flight else {
            return Ok(None);
        };
        let slots = {
            let mut by_client = crate::lock::lock(&self.slots);
            // Looked up by `&str`: the name is copied only for the client's first call.
            match by_client.get(client) {
                Some(slots) => slots.clone(),
                None => by_client
                    .entry(client.to_owned())
                    .or_insert_with(|| {
                        Arc::new(Slots {
                            free: Arc::new(Semaphore::new(n)),
                            waiting: AtomicUsize::new(0),
                        })
                    })
                    .clone(),
            }
        };
        if let Ok(permit) = slots.free.clone().try_acquire_owned() {
            return Ok(Some(permit));
        }
        let full = Refused {
            which: Which::InFlight,
            // A slot frees when one of its calls ends; a tenth of the queue wait is a fair
            // guess that does not make a client hammer.
            retry_after_ms: (limits.queue_ms / 10).max(100),
        };
        if slots.waiting.fetch_add(1, Ordering::AcqRel) >= limits.queue {
            slots.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(full);
        }
        let waited = tokio::time::timeout(
            Duration::from_millis(limits.queue_ms),
            slots.free.clone().acquire_owned(),
        )
        .await;
        slots.waiting.fetch_sub(1, Ordering::AcqRel);
        match waited {
            Ok(Ok(permit)) => Ok(Some(permit)),
            _ => Err(full),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// The `-32023` answer to a refused call.
fn refusal(id: Id, client: &str, upstream: Option<&str>, refused: Refused) -> Message {
    crate::telemetry::record::limited(client, refused.which.key());
    tracing::info!(
        client,
        upstream = upstream.unwrap_or(""),
        limit = refused.which.key(),
        retry_after_ms = refused.retry_after_ms,
        "Call refused by a limit"
    );
    let limited = Error::Limited {
        client: client.to_owned(),
        upstream: upstream.map(str::to_owned),
        which: refused.which,
        retry_after_ms: refused.retry_after_ms,
    };
    Message::error(id, limited.to_error_object())
}

#[cfg(test)]
mod tests;
