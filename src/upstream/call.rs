//! The one door for requests to an upstream: a [`Call`] says what to send and how to wait,
//! [`Upstream::request`] sends it.
//!
//! A request gets an upstream-side id (fresh, or one taken before so that a cancellation can
//! name it), its params rewritten for the upstream ([`super::outgoing`]), an entry in the
//! pending table, and a timeout that counts silence: progress, or input asked of its client,
//! restarts it.

use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::pending::Pending;
use super::turns::Turn;
use super::{Link, Upstream, outgoing};
use crate::context::{Outbound, RunToEnd, SessionState};
use crate::error::Error;
use crate::jsonrpc::{Id, Message};
use crate::lock::lock;
use crate::mcp::Era;

/// One request to an upstream, built step by step and sent with [`Upstream::request`].
///
/// ```no_run
/// # async fn run(upstream: mcp_budget::upstream::Upstream) -> Result<(), mcp_budget::error::Error> {
/// use mcp_budget::upstream::Call;
///
/// let params = serde_json::value::to_raw_value(&serde_json::json!({"uri": "file:///a"}))
///     .expect("a JSON object");
/// let reply = upstream
///     .request(Call::new("resources/read").params(Some(params)))
///     .await?;
/// # let _ = reply; Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a call does nothing until it is sent with Upstream::request"]
pub struct Call<'a> {
    method: &'a str,
    params: Option<Box<RawValue>>,
    id: Option<i64>,
    outbound: Option<Outbound>,
    client: Option<&'a SessionState>,
    before_ready: bool,
    wait: Wait,
}

/// How long a call waits for its answer.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// The upstream's own timeout.
    Upstream,
    /// As long as it takes.
    Forever,
    /// This long.
    For(Duration),
}

impl<'a> Call<'a> {
    /// A request of `method`, without params, on behalf of no client.
    pub fn new(method: &'a str) -> Self {
        Self {
            method,
            params: None,
            id: None,
            outbound: None,
            client: None,
            before_ready: false,
            wait: Wait::Upstream,
        }
    }

    /// Its params, as the client sent them (rewritten for the upstream on the way).
    pub fn params(mut self, params: Option<Box<RawValue>>) -> Self {
        self.params = params;
        self
    }

    /// Sends it under upstream-side id `id`, taken before from [`Upstream::next_request_id`]
    /// (so that a cancellation can name it while it is in flight); without, it gets a fresh one.
    pub fn id(mut self, id: i64) -> Self {
        self.id = Some(id);
        self
    }

    /// The channel of the client that waits on it: the server's progress and requests about it
    /// go there, and its progress token is remapped so that it never collides with another
    /// client's.
    pub fn outbound(mut self, outbound: Outbound) -> Self {
        self.outbound = Some(outbound);
        self
    }

    /// On behalf of the client whose session is `client`: a modern upstream is told its
    /// declared capabilities (it only asks for input the client can give) and the log level a
    /// 2025-era client set (it has no session to keep it); a 2025-era upstream knows the
    /// gateway's capabilities and level from the session.
    pub fn client(mut self, client: &'a SessionState) -> Self {
        self.client = Some(client);
        self
    }

    /// Sent while the upstream is still connecting (the handshake, its probes and streams):
    /// every other call is refused unless the upstream is ready.
    pub(crate) fn before_ready(mut self) -> Self {
        self.before_ready = true;
        self
    }

    /// Waits `timeout` for the answer (`None`: as long as it takes) instead of the upstream's
    /// timeout.
    pub(crate) fn wait(mut self, timeout: Option<Duration>) -> Self {
        self.wait = timeout.map_or(Wait::Forever, Wait::For);
        self
    }
}

/// What [`Upstream::enter`] gives back.
type Entered = (
    Message,
    Option<Outbound>,
    Option<CancellationToken>,
    oneshot::Receiver<Message>,
);

impl Upstream {
    /// Sends a request and waits for the server's response (result or error). The response's
    /// id is the upstream-side id; callers restore theirs.
    ///
    /// # Errors
    /// [`Error::UpstreamUnavailable`] when the upstream is not connected (or not ready) or goes
    /// away, [`Error::UpstreamTimeout`] when it does not answer in time.
    pub async fn request(&self, call: Call<'_>) -> Result<Message, Error> {
        let timeout = match call.wait {
            Wait::Upstream => Some(self.inner.spec.timeout),
            Wait::Forever => None,
            Wait::For(timeout) => Some(timeout),
        };
        // Counted in the door (what a lazy upstream's idle stop waits for); a lazy upstream
        // that does not run is started, and the request waits for it.
        let for_client = call.outbound.is_some() || call.client.is_some();
        let method = call.method;
        let _door = (!call.before_ready).then(|| self.enter_door(for_client));
        if !call.before_ready {
            self.ensure_running().await?;
        }
        let turn = self.turn_within(&call, timeout).await?;
        let link = self.link(!call.before_ready)?;
        let id = call.id.unwrap_or_else(|| self.next_request_id());
        let (msg, outbound, abort, rx) = self.enter(id, call, &link, turn);
        // A stdio request's client span (none while no spans are exported): its context goes
        // in the message's `_meta`, and it lasts until the answer is in.
        let mut stdio_span = tracing::Span::none();
        // On HTTP the POST is driven by this very future until the answer is in (no task of
        // its own on the way); whatever it still has to do then (the rest of an SSE stream),
        // or after a timeout, it finishes on its own task, as a spawned POST would.
        let post = match link.as_ref() {
            Link::Http(http) => {
                let post = http.post_future(self.clone(), msg, outbound);
                let abort = abort.unwrap_or_default();
                Some(RunToEnd::new(async move {
                    tokio::select! {
                        () = post => {}
                        () = abort.cancelled() => {}
                    }
                }))
            }
            Link::Stdio(_) => {
                if crate::telemetry::tracing_on() {
                    stdio_span = crate::telemetry::span::upstream(self.name(), &msg);
                }
                if let Err(err) = stdio_span.in_scope(|| self.send_on(&link, msg, outbound)) {
                    let _ = self.forget(id);
                    return Err(err);
                }
                None
            }
        };
        let reply = async move {
            let mut rx = rx;
            if let Some(mut post) = post {
                tokio::select! {
                    biased;
                    reply = &mut rx => return reply,
                    () = &mut post => {}
                }
            }
            rx.await
        };
        let answer = self.wait_for(id, reply, timeout).await;
        if let Ok(reply) = &answer {
            crate::telemetry::span::answered(&stdio_span, Some(reply));
            if reply.error.is_none() {
                self.inner.life.subscribed(method);
            }
        }
        answer
    }

    /// The message of `call` under `id`, rewritten for this upstream, with its pending entry
    /// (and progress route) in place: the message, the client's channel, the token that aborts
    /// its HTTP exchange when it has one (modern HTTP: closing the response stream is how a
    /// request is cancelled), and where its answer arrives.
    fn enter(&self, id: i64, call: Call<'_>, link: &Link, turn: Option<Turn>) -> Entered {
        let era = self.era();
        let empty = json!({});
        let how = outgoing::Rewrite {
            era,
            progress: call.outbound.as_ref().map(|_| (self.inner.index, id)),
            capabilities: outgoing::declared_capabilities(
                call.client.map(|c| &c.client_capabilities),
                &self.inner.capabilities,
                &empty,
            ),
            log_level: call.client.and_then(|c| c.log_level.as_deref()),
        };
        let rewritten = outgoing::rewrite(call.params, &how);
        let progress = match (rewritten.progress, &call.outbound) {
            (Some((ours, theirs)), Some(out)) => {
                lock(&self.inner.progress).insert(ours.clone(), (theirs, out.clone(), id));
                Some(ours)
            }
            _ => None,
        };
        let abort = (era == Some(Era::Modern) && matches!(link, Link::Http(_)))
            .then(CancellationToken::new);
        let (tx, rx) = oneshot::channel();
        lock(&self.inner.pending).insert(
            id,
            Pending {
                reply: tx,
                outbound: call.outbound.clone(),
                progress,
                sent: tokio::time::Instant::now(),
                alive: None,
                abort: abort.clone(),
                turn,
            },
        );
        let msg = Message::request(Id::Number(id), call.method, rewritten.params);
        (msg, call.outbound, abort, rx)
    }

    /// The call's turn in the upstream (see [`super::turns`]), waited for at most `timeout`:
    /// a call that cannot have its turn in that time fails with [`Error::TurnTimeout`] (another
    /// client's call held the upstream; the server is not to blame).
    async fn turn_within(
        &self,
        call: &Call<'_>,
        timeout: Option<Duration>,
    ) -> Result<Option<Turn>, Error> {
        let session = call.outbound.as_ref().map(Outbound::session);
        let take = self.take_turn(call.outbound.is_some(), call.client.zip(session), call.id);
        match timeout {
            None => take.await,
            Some(timeout) => {
                tokio::time::timeout(timeout, take)
                    .await
                    .map_err(|_| Error::TurnTimeout {
                        upstream: self.name().to_owned(),
                        timeout,
                    })?
            }
        }
    }

    /// Waits for the answer to request `id`. The timeout is for silence: progress or input
    /// asked of the client restart it.
    async fn wait_for(
        &self,
        id: i64,
        reply: impl std::future::Future<Output = Result<Message, oneshot::error::RecvError>>,
        timeout: Option<Duration>,
    ) -> Result<Message, Error> {
        let Some(timeout) = timeout else {
            return reply
                .await
                .map_err(|_| self.unavailable("the connection closed"));
        };
        let mut reply = std::pin::pin!(reply);
        let mut deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, &mut reply).await {
                Ok(Ok(reply)) => return Ok(reply),
                Ok(Err(_)) => return Err(self.unavailable("the connection closed")),
                Err(_) => {
                    if let Some(later) = self.still_working(id, timeout) {
                        deadline = later;
                        continue;
                    }
                    let abort = self.forget(id).and_then(|p| p.abort);
                    self.stop_request(id, abort, Some("timed out in the gateway"));
                    return Err(Error::UpstreamTimeout {
                        upstream: self.name().to_owned(),
                        timeout,
                    });
                }
            }
        }
    }

    /// A request of the handshake (or of a connection check): does not need the upstream to
    /// be ready.
    pub(crate) async fn handshake_request(
        &self,
        method: &str,
        params: &Value,
    ) -> Result<Message, Error> {
        let params = Some(crate::jsonrpc::to_raw(params));
        self.request(Call::new(method).params(params).before_ready())
            .await
    }
}
