//! The one lifecycle of an upstream, whatever its transport:
//! connect → handshake → ready → serve → down → backoff → connect again, until shutdown.
//!
//! The transport only connects, serves (holds its streams, notices a server that is gone) and
//! closes ([`super::stdio`], [`super::http`]); this module decides what happens between, with
//! [`Lifecycle`] as a pure state machine: what each step reports ([`Status`]) and how long to
//! wait before the next attempt.
//!
//! # Backoff
//!
//! The first retry comes [`FIRST_BACKOFF`] after a failure, and each failure in a row doubles
//! the wait, up to [`MAX_BACKOFF`]. A connection that served for [`HEALTHY_RUN`] or longer
//! starts the ladder again, so a server that crashes once a day is back within a quarter
//! second, while one that cannot start is tried only every few seconds.

use std::sync::Arc;
use std::time::Duration;

use super::http::HttpLink;
use super::{Link, ServerInfo, Status, Upstream, handshake, in_process, stdio};

/// First retry delay; doubled after each failure in a row, up to [`MAX_BACKOFF`].
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// Longest retry delay.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A connection that lasted this long resets the backoff.
pub(crate) const HEALTHY_RUN: Duration = Duration::from_secs(10);

/// What happened to one connection attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// The handshake worked: the upstream serves.
    Ready,
    /// Connecting or the handshake failed, with the reason.
    Failed(String),
    /// A connection that was ready ended, with the reason.
    Lost(String),
    /// The gateway is shutting down.
    Shutdown,
}

/// What the supervisor does after a [`Step`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Report [`Status::Ready`] and serve until the connection ends.
    Serve,
    /// Report [`Status::Down`] with this reason, fail what is in flight, and connect again
    /// after `retry_in`.
    Retry {
        /// Why the upstream is down.
        reason: String,
        /// How long to wait before the next attempt.
        retry_in: Duration,
    },
    /// Stop for good (shutdown): nothing more is reported.
    Stop,
}

/// The state of one upstream's lifecycle: the backoff ladder, and the last loss of a ready
/// connection (later failed attempts still say so).
#[derive(Debug, Clone)]
pub(crate) struct Lifecycle {
    backoff: Duration,
    lost: Option<String>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self {
            backoff: FIRST_BACKOFF,
            lost: None,
        }
    }
}

impl Lifecycle {
    /// The action for `step`; `ran` is how long the connection lasted (from connecting to the
    /// step).
    pub(crate) fn on(&mut self, step: Step, ran: Duration) -> Action {
        let reason = match step {
            Step::Ready => {
                self.lost = None;
                return Action::Serve;
            }
            Step::Shutdown => return Action::Stop,
            Step::Lost(reason) => {
                self.lost = Some(reason.clone());
                reason
            }
            Step::Failed(reason) => match &self.lost {
                Some(lost) => format!("{lost}; reconnecting failed: {reason}"),
                None => reason,
            },
        };
        if ran >= HEALTHY_RUN {
            self.backoff = FIRST_BACKOFF;
        }
        let retry_in = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        Action::Retry { reason, retry_in }
    }
}

/// How the supervisor reaches the server.
#[derive(Debug)]
pub(crate) enum Transport {
    /// A child process, spawned anew for each connection.
    Stdio,
    /// An HTTP endpoint, one link for every session.
    Http(Arc<HttpLink>),
    /// A server in the gateway's process, connected anew for each connection.
    InProcess(crate::policy::InProcess),
}

/// One open connection.
enum Connection {
    Stdio(stdio::Process),
    Http(Arc<HttpLink>),
    InProcess(in_process::Connection),
}

/// The end of a connection that ends by itself (a child's output closing), with the reason.
type Ended = Option<tokio::task::JoinHandle<String>>;

impl Transport {
    /// Opens a connection and makes it the upstream's link; `Err` says why it could not.
    fn connect(&self, upstream: &Upstream) -> Result<(Connection, Ended), String> {
        match self {
            Self::Stdio => {
                let (process, link, reader) = stdio::Process::spawn(upstream)?;
                upstream.set_link(Some(link));
                Ok((Connection::Stdio(process), Some(reader)))
            }
            Self::Http(link) => {
                upstream.set_link(Some(Link::Http(link.clone())));
                Ok((Connection::Http(link.clone()), None))
            }
            Self::InProcess(server) => {
                let (connection, link, ended) = in_process::Connection::open(upstream, server);
                upstream.set_link(Some(link));
                Ok((Connection::InProcess(connection), Some(ended)))
            }
        }
    }
}

/// Resolves when the connection ends by itself, with the reason; never for a connection
/// that finds out while serving (HTTP).
async fn ended(ended: &mut Ended) -> String {
    match ended {
        Some(reader) => reader
            .await
            .unwrap_or_else(|e| format!("reader failed: {e}")),
        None => std::future::pending().await,
    }
}

impl Connection {
    /// Serves a ready connection (holds its streams) until the server is found gone, with the
    /// reason; never returns for stdio, whose end [`ended`] tells.
    async fn serve(&self, upstream: &Upstream) -> String {
        match self {
            Self::Stdio(_) | Self::InProcess(_) => std::future::pending().await,
            Self::Http(link) => link.serve(upstream).await,
        }
    }

    /// Learns what the handshake agreed on.
    fn handshaken(&self, info: &ServerInfo) {
        if let Self::Http(link) = self {
            // Repeated in a header on every later POST.
            link.set_protocol(&info.protocol_version);
        }
    }

    /// Closes the connection; returns `reason` completed with what closing found (the
    /// child's exit status).
    async fn close(self, ended: Ended, upstream: &Upstream, reason: String) -> String {
        match self {
            Self::Stdio(process) => {
                let shutdown = upstream.shutdown_token().is_cancelled();
                process.close(ended, shutdown, reason).await
            }
            Self::Http(link) => {
                // A 2025 server gets a new session at the next handshake.
                link.set_session(None);
                link.end_sse();
                reason
            }
            Self::InProcess(connection) => {
                connection.close(ended);
                reason
            }
        }
    }
}

/// Keeps the upstream connected until shutdown.
pub(crate) async fn supervise(upstream: Upstream, transport: Arc<Transport>) {
    let mut life = Lifecycle::default();
    loop {
        let started = tokio::time::Instant::now();
        let step = attempt(&upstream, &transport, &mut life).await;
        upstream.set_link(None);
        let step = if upstream.shutdown_token().is_cancelled() {
            Step::Shutdown
        } else {
            step
        };
        let lost = matches!(step, Step::Lost(_));
        let Action::Retry { reason, retry_in } = life.on(step, started.elapsed()) else {
            upstream.fail_pending("the gateway is shutting down");
            return;
        };
        // Down before its calls fail, so that no new call takes the place of the failed ones.
        upstream.set_status(Status::Down(reason.clone()));
        upstream.fail_pending(&reason);
        if lost {
            tracing::warn!(upstream = upstream.name(), "Upstream connection lost");
        }
        tracing::warn!(upstream = upstream.name(), reason = %reason, retry_in_ms = retry_in.as_millis(), "Upstream is down");
        let stop = upstream.shutdown_token();
        tokio::select! {
            () = tokio::time::sleep(retry_in) => {}
            () = stop.cancelled() => return,
        }
        crate::telemetry::record::upstream_retry(
            upstream.name(),
            matches!(*transport, Transport::Stdio),
        );
    }
}

/// One connection, from connecting to its end: the step that ended it.
async fn attempt(upstream: &Upstream, transport: &Transport, life: &mut Lifecycle) -> Step {
    let (conn, mut end) = match transport.connect(upstream) {
        Ok(opened) => opened,
        Err(reason) => return Step::Failed(reason),
    };
    let stop = upstream.shutdown_token();
    let step = tokio::select! {
        step = serve(upstream, &conn, life) => step,
        reason = ended(&mut end) => {
            // Set in this attempt only: it starts before the handshake, as Starting or Down.
            if upstream.status() == Status::Ready {
                Step::Lost(reason)
            } else {
                Step::Failed(reason)
            }
        }
        () = stop.cancelled() => Step::Shutdown,
    };
    match step {
        Step::Failed(reason) => Step::Failed(conn.close(end, upstream, reason).await),
        Step::Lost(reason) => Step::Lost(conn.close(end, upstream, reason).await),
        step => {
            let _ = conn.close(end, upstream, String::new()).await;
            step
        }
    }
}

/// Handshakes on a fresh connection, reports it ready, and serves it: the step that ended it
/// (a failed handshake, or a server found gone).
async fn serve(upstream: &Upstream, conn: &Connection, life: &mut Lifecycle) -> Step {
    let started = tokio::time::Instant::now();
    let info = match handshake(upstream).await {
        Ok(info) => info,
        Err(err) => {
            let unreachable = matches!(err, crate::error::Error::UpstreamUnreachable { .. });
            upstream.set_unreachable(unreachable.then(|| err.clone()));
            // Nothing was said, so no handshake failed: the error alone says what to fix.
            return Step::Failed(if unreachable {
                err.to_string()
            } else {
                format!("initialize failed: {err}")
            });
        }
    };
    upstream.set_unreachable(None);
    tracing::info!(upstream = upstream.name(), protocol = %info.protocol_version, ready_ms = started.elapsed().as_millis(), "Upstream ready");
    conn.handshaken(&info);
    upstream.set_info(info);
    if life.on(Step::Ready, started.elapsed()) == Action::Serve {
        upstream.set_status(Status::Ready);
    }
    let listen = async {
        if upstream.is_modern() {
            // A modern server sends its notifications on `subscriptions/listen` only.
            upstream.listen_modern().await;
        }
        std::future::pending::<Step>().await
    };
    tokio::select! {
        reason = conn.serve(upstream) => Step::Lost(reason),
        step = listen => step,
    }
}

#[cfg(test)]
mod tests;
