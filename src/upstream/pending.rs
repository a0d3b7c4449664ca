//! The table of requests in flight to an upstream: who waits for each answer, how it is
//! failed when the connection goes, cancelled by its client, or timed out.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::Upstream;
use crate::context::Outbound;
use crate::error::Error;
use crate::jsonrpc::{Id, Message, to_raw};
use crate::lock::lock;
use crate::mcp::method::Method;

/// A request in flight.
pub(super) struct Pending {
    pub(super) reply: oneshot::Sender<Message>,
    pub(super) outbound: Option<Outbound>,
    pub(super) progress: Option<String>,
    /// When it was sent.
    pub(super) sent: tokio::time::Instant,
    /// The last sign that the request is being worked on (a progress notification for it, a
    /// server→client request to its client, that client's answer): the timeout counts from it.
    pub(super) alive: Option<tokio::time::Instant>,
    /// Ends the request's HTTP exchange: on a modern HTTP upstream, closing the response
    /// stream is how a request is cancelled.
    pub(super) abort: Option<CancellationToken>,
    /// Its turn in the upstream (`server_requests = "serialize"`), given back when it goes.
    #[expect(
        dead_code,
        reason = "held, never read: dropping it gives the turn back"
    )]
    pub(super) turn: Option<super::turns::Turn>,
}

impl Upstream {
    /// Fails every request in flight (the connection is gone).
    pub(crate) fn fail_pending(&self, reason: &str) {
        let drained: Vec<(i64, Pending)> = lock(&self.inner.pending).drain().collect();
        for (id, pending) in drained {
            let err = Error::UpstreamUnavailable {
                upstream: self.name().to_owned(),
                reason: reason.to_owned(),
            };
            let _ = pending
                .reply
                .send(Message::error(Id::Number(id), err.to_error_object()));
        }
        lock(&self.inner.progress).clear();
        // What the old connection asked of clients cannot be answered on a new one.
        lock(&self.inner.server_requests).clear();
    }

    /// When request `id`, silent for `timeout`, may still be waited for: the new deadline if
    /// its client has a server→client request of this upstream to answer that came after the
    /// request (the server waits on the client, maybe on a person), or if it showed signs of
    /// work since.
    pub(super) fn still_working(&self, id: i64, timeout: Duration) -> Option<tokio::time::Instant> {
        let now = tokio::time::Instant::now();
        let pending = lock(&self.inner.pending);
        let p = pending.get(&id)?;
        if let Some(out) = &p.outbound {
            let asked = lock(&self.inner.server_requests)
                .values()
                .any(|(_, to, at)| *at >= p.sent && to.same_channel(out) && !to.is_closed());
            if asked {
                return Some(now + timeout);
            }
        }
        p.alive.map(|t| t + timeout).filter(|&d| d > now)
    }

    /// Notes a sign of work for the requests of the client on `out`.
    pub(super) fn touch_client(&self, out: &Outbound) {
        let now = tokio::time::Instant::now();
        for p in lock(&self.inner.pending).values_mut() {
            if p.outbound.as_ref().is_some_and(|o| o.same_channel(out)) {
                p.alive = Some(now);
            }
        }
    }

    /// Forwards a client's `notifications/cancelled` for upstream request `id`; the caller
    /// waiting on it gets a `mcp_budget.request.cancelled` error (the stdio downstream drops
    /// it; on HTTP it ends the request's stream).
    pub fn cancel(&self, upstream_id: i64, reason: Option<&str>) {
        if let Some(p) = self.forget(upstream_id) {
            let err = Error::Cancelled {
                reason: reason.map(str::to_owned),
            }
            .to_error_object();
            let _ = p.reply.send(Message::error(Id::Number(upstream_id), err));
            self.stop_request(upstream_id, p.abort, reason);
        } else {
            // Not sent yet: waiting for its turn (`server_requests = "serialize"`).
            self.cancel_waiting(upstream_id, reason);
        }
    }

    /// Tells the server to stop working on request `id`: closes its response stream when it
    /// has one to close (modern HTTP: that is the cancellation), else `notifications/cancelled`.
    pub(super) fn stop_request(
        &self,
        id: i64,
        abort: Option<CancellationToken>,
        reason: Option<&str>,
    ) {
        if let Some(abort) = abort {
            abort.cancel();
            return;
        }
        let mut params = json!({ "requestId": id });
        if let Some(reason) = reason {
            params["reason"] = Value::String(reason.to_owned());
        }
        let _ = self.notify(Message::notification(
            Method::Cancelled.as_str(),
            Some(to_raw(&params)),
        ));
    }

    /// Removes request `id` (and its progress route) from the pending tables.
    pub(super) fn forget(&self, id: i64) -> Option<Pending> {
        let removed = lock(&self.inner.pending).remove(&id)?;
        if let Some(token) = &removed.progress {
            lock(&self.inner.progress).remove(token);
        }
        Some(removed)
    }

    /// Fails one request in flight with `reason`.
    pub(crate) fn fail_request(&self, id: i64, reason: &str) {
        self.fail_request_with(id, &self.unavailable(reason));
    }

    /// Fails one request in flight with `err`.
    pub(crate) fn fail_request_with(&self, id: i64, err: &Error) {
        let pending = lock(&self.inner.pending).remove(&id);
        if let Some(p) = pending {
            let _ = p
                .reply
                .send(Message::error(Id::Number(id), err.to_error_object()));
        }
    }
}
