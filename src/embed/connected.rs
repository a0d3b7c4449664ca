//! An in-process server as the embedded stack's inner service: [`Connected`] reaches an
//! [`InProcess`] server (a service, or byte streams such as an rmcp server over a duplex)
//! through the gateway's own upstream client — the handshake, request ids, timeouts and a new
//! connection when the streams end — so that an embedder puts it straight under
//! [`super::EmbedLayer`] without a client of its own.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tower::Service;

use super::Request;
use crate::jsonrpc::{Id, Kind, Message};
use crate::policy::{InProcess, UpstreamSpec};
use crate::upstream::{Call, Event, Status, Upstream};

/// An in-process server reached through the gateway's upstream client, as a service of
/// JSON-RPC messages ([`Request`] in, the answer out): the inner service of an
/// [`super::EmbedLayer`]. Cheap to clone; the connection ends when the last clone is dropped.
///
/// Its `notifications/*/list_changed` come out of [`Connected::notifications`], for the
/// embedder to hand to [`super::EmbedLayer::inner_notification`]. Server→client requests
/// (sampling, elicitation) are refused: no host is behind it to ask.
#[derive(Clone)]
pub struct Connected {
    inner: Arc<Inner>,
}

struct Inner {
    upstream: Upstream,
    notifications: Mutex<Option<mpsc::UnboundedReceiver<Value>>>,
    shutdown: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl std::fmt::Debug for Connected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connected")
            .field("upstream", &self.inner.upstream)
            .finish_non_exhaustive()
    }
}

/// The capabilities the embedded stack declares to the server: none that would have it ask a
/// client something.
fn capabilities() -> Value {
    json!({})
}

impl Connected {
    /// Connects to `server` (named `name` in logs and errors) in the background; calls wait
    /// for the handshake.
    ///
    /// # Panics
    /// Outside a Tokio runtime (the connection runs on tasks).
    #[must_use]
    pub fn start(name: &str, server: InProcess) -> Self {
        let (events, mut events_rx) = mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let spec = UpstreamSpec::in_process(name, server);
        let upstream = Upstream::start(0, spec, capabilities(), events, shutdown.child_token());
        let (tx, rx) = mpsc::unbounded_channel();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    () = stop.cancelled() => return,
                    event = events_rx.recv() => event,
                };
                match event {
                    Some(Event::ListChanged(_, listed)) => {
                        let note = json!({"jsonrpc": "2.0", "method": listed.changed().as_str()});
                        let _ = tx.send(note);
                    }
                    Some(_) => {}
                    None => return,
                }
            }
        });
        Self {
            inner: Arc::new(Inner {
                upstream,
                notifications: Mutex::new(Some(rx)),
                shutdown,
            }),
        }
    }

    /// Waits until the server answered the handshake (or `limit` passed): whether it serves.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        self.inner.upstream.wait_ready(limit).await == Status::Ready
    }

    /// The server's `notifications/*/list_changed`, as JSON-RPC messages (once: the first
    /// caller takes them).
    #[must_use]
    pub fn notifications(&self) -> Option<mpsc::UnboundedReceiver<Value>> {
        crate::lock::lock(&self.inner.notifications).take()
    }
}

impl Service<Request> for Connected {
    type Response = Option<Value>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Option<Value>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { Ok(answer(&inner.upstream, &req.message).await) })
    }
}

/// What the server answers `message`: its answer to a request (an error answer when there is
/// none), nothing for a notification or anything else.
async fn answer(upstream: &Upstream, message: &Value) -> Option<Value> {
    let msg = match Message::from_value(message) {
        Ok(msg) => msg,
        Err(e) => {
            let err = crate::error::Error::invalid_params("message", e.to_string());
            return Some(Message::error(Id::Null, err.to_error_object()).to_value());
        }
    };
    match msg.kind() {
        Kind::Request => {
            let id = msg.reply_id();
            let method = msg.method().unwrap_or_default();
            let call = Call::new(method).params(msg.params.clone());
            let mut reply = match upstream.request(call).await {
                Ok(reply) => reply,
                Err(err) => Message::error(id.clone(), err.to_error_object()),
            };
            reply.id = Some(id);
            Some(reply.to_value())
        }
        Kind::Notification => {
            let _ = upstream.notify(msg);
            None
        }
        Kind::Response | Kind::Error => None,
    }
}
