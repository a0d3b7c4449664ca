//! Serving the HTTP downstream on a listener: HTTP/1.1 with keep-alive and `TCP_NODELAY`, a
//! limit on how long a client may take to send a request's headers, caps on open connections
//! (all clients, and per client address), and a graceful stop.
//!
//! A connection from one of `trusted_proxies` carries many clients' requests, one at a time:
//! it counts against the total, and while it carries a request (until the answer is sent)
//! against the client that request was forwarded for too, under the same per-client cap as a
//! direct connection: one client behind the proxy (slow request bodies, say) cannot take every
//! connection. A request over that cap is answered `503` and its connection closed.
//!
//! `axum::serve` gives hyper no timer, which switches hyper's header-read timeout off: a client
//! that sends its headers a byte at a time (or opens connections and says nothing) holds a
//! connection and a task for as long as it likes. This loop is `axum::serve` with the timer.
//!
//! A connection over a cap is answered `503` with a JSON-RPC error
//! (`mcp_budget.http.too_many_connections`, naming the policy key) and closed, without a task
//! of hyper's: the loop reads what the client sent (briefly), writes the answer and closes.
//! At most [`REFUSALS_IN_FLIGHT`] such answers are under way at once; beyond that, a
//! connection over the cap is closed at once, so that a flood cannot turn refusals into the
//! resource it exhausts.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::Response;
use axum::routing::future::RouteFuture;
use futures::future::{BoxFuture, Either};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use ipnet::IpNet;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use super::owner::{Owner, Tally, client_addr, is_trusted};
use super::reply::json_error;
use crate::error::Http;
use crate::identity::Principal;
use crate::jsonrpc::{Id, Message};
use crate::lock::lock;
use crate::policy::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_CLIENT, Downstream, ForwardedHeader,
};

/// How long a client may take to send the headers of a request, counted from its first byte
/// or, on a kept-alive connection, from the end of the previous answer.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long connections with requests in flight get to finish once `shutdown` fires.
const GRACE: Duration = Duration::from_secs(2);

/// Connections over a cap being answered at once; more are closed without an answer.
pub const REFUSALS_IN_FLIGHT: usize = 64;

/// How long answering one refused connection may take in all (reading its request, writing
/// the 503, waiting for the client to close).
const REFUSAL_TIME: Duration = Duration::from_secs(2);

/// Settings of the accept loop ([`serve_with`]).
#[derive(Debug, Clone)]
pub struct ListenConfig {
    /// See [`HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// Open connections, all clients together (`downstream.max_connections`).
    pub max_connections: NonZeroUsize,
    /// Open connections of one client (`downstream.max_connections_per_client`): of an
    /// authenticated `[[client]]` once a request on the connection authenticated, else of
    /// the connection's address (behind a trusted proxy, of the address the request was
    /// forwarded for, while the connection carries it).
    pub max_connections_per_client: NonZeroUsize,
    /// Proxies (`downstream.trusted_proxies`): their connections carry many clients' requests,
    /// so they count against `max_connections`, and against a client only while they carry
    /// its request.
    pub trusted_proxies: Vec<IpNet>,
    /// The header trusted proxies name the client in (`downstream.forwarded_header`).
    pub forwarded_header: ForwardedHeader,
}

impl Default for ListenConfig {
    fn default() -> Self {
        Self {
            header_read_timeout: HEADER_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
            trusted_proxies: Vec::new(),
            forwarded_header: ForwardedHeader::XForwardedFor,
        }
    }
}

impl From<&Downstream> for ListenConfig {
    fn from(d: &Downstream) -> Self {
        Self {
            max_connections: d.max_connections,
            max_connections_per_client: d.max_connections_per_client,
            trusted_proxies: d.trusted_proxies.clone(),
            forwarded_header: d.forwarded_header,
            ..Self::default()
        }
    }
}

/// The connection a request came on: the client's address (for per-client limits), its place
/// in the connection counts, and a way to close the connection (for a client that stopped
/// reading a stream: hyper no longer polls that stream's body, so ending the body would not be
/// seen).
#[derive(Debug)]
pub(super) struct Peer {
    /// The client's address.
    pub(super) addr: SocketAddr,
    /// The connection's task.
    task: OnceLock<AbortHandle>,
    /// Its entry in [`Counts::open`].
    id: u64,
    counts: Arc<Mutex<Counts>>,
    /// The cap on one client's connections.
    per_client: NonZeroUsize,
    /// Whether it comes from a trusted proxy: it counts against the client of each request it
    /// carries ([`Peer::carry`]), not against its own address.
    proxied: bool,
    /// Whether a request on it authenticated ([`Peer::claim`], or the gateway has no clients
    /// and it served one), or a trusted proxy's carried one ([`Peer::carry`]): such a
    /// connection is never closed for a newcomer. Written under
    /// the [`Counts`] lock, read without it on every request.
    claimed: AtomicBool,
    /// The last API key a request on it presented, and whose it is
    /// ([`crate::identity::Gate::authenticate_with`]).
    pub(super) keys: crate::identity::KeyMemo,
}

impl Peer {
    /// Drops the connection (the answer being written included).
    pub(super) fn close(&self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }

    /// The connection the current request came on, when [`serve_with`] serves it: hyper polls
    /// a connection's handlers on the connection's task, where this is set. A task-local
    /// rather than a request extension: nothing to allocate per request.
    pub(super) fn current() -> Option<Arc<Self>> {
        PEER.try_with(Arc::clone).ok()
    }

    /// Files the connection under `principal`, which a request on it authenticated as (the
    /// first time only: later requests change nothing): it counts against that client from
    /// now on, not against its address, and is no longer closed to make room for newcomers.
    ///
    /// # Errors
    /// The client has `max_connections_per_client` open already: the request is refused and
    /// the connection closes after the answer.
    pub(super) fn claim(&self, principal: &Principal) -> Result<(), Refusal> {
        if self.proxied {
            return self.claim_request(principal);
        }
        if self.claimed.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut c = lock(&self.counts);
        // Evicted meanwhile, or claimed by a request on another thread of the connection.
        let Some(conn) = c.open.get(&self.id) else {
            return Ok(());
        };
        if self.claimed.load(Ordering::Acquire) {
            return Ok(());
        }
        let from = conn.owner.clone();
        let owner = match (&from, Owner::of(principal, None)) {
            // From a trusted proxy (no owner), or anonymous: it stays where it is counted.
            (None, _) | (_, None | Some(Owner::Addr(_))) => None,
            (Some(_), Some(client)) => Some(client),
        };
        if let Some(owner) = owner {
            if c.per_owner.get(&owner) >= self.per_client.get() {
                return Err(Refusal::per_client(&owner, self.per_client, "reuse them"));
            }
            if let Some(from) = &from {
                c.per_owner.remove(from);
            }
            c.per_owner.add(owner.clone());
            if let Some(conn) = c.open.get_mut(&self.id) {
                conn.owner = Some(owner);
            }
        }
        self.claimed.store(true, Ordering::Release);
        Ok(())
    }

    /// [`Peer::claim`] for a trusted proxy's connection, on every request: the request it
    /// carries counts against `principal` from now on when that is an authenticated client
    /// (against the forwarded address before, [`Peer::carry`]); the connection is not closed
    /// for newcomers any more.
    fn claim_request(&self, principal: &Principal) -> Result<(), Refusal> {
        let mut c = lock(&self.counts);
        let c = &mut *c;
        let client = Owner::of(principal, None);
        let conn = c.open.get_mut(&self.id);
        if let (Some(client), Some(conn)) = (client, conn) {
            if conn.owner.as_ref() != Some(&client) {
                if c.per_owner.get(&client) >= self.per_client.get() {
                    return Err(Refusal::per_client(&client, self.per_client, "reuse them"));
                }
                if let Some(from) = conn.owner.replace(client.clone()) {
                    c.per_owner.remove(&from);
                }
                c.per_owner.add(client);
            }
        }
        self.claimed.store(true, Ordering::Release);
        Ok(())
    }

    /// Counts this connection of a trusted proxy against `client`, whose request it carries,
    /// until the returned [`Carrying`] drops (with the answer's body, once it is sent).
    ///
    /// # Errors
    /// `client` has `max_connections_per_client` open already (directly or through proxies).
    fn carry(self: &Arc<Self>, client: IpAddr) -> Result<Carrying, Refusal> {
        let owner = Owner::Addr(client);
        let mut c = lock(&self.counts);
        let c = &mut *c;
        if c.per_owner.get(&owner) >= self.per_client.get() {
            return Err(Refusal::per_client(&owner, self.per_client, "retry later"));
        }
        // Evicted meanwhile: it is closing, and counts for nobody.
        let Some(conn) = c.open.get_mut(&self.id) else {
            return Ok(Carrying(self.clone(), 0));
        };
        // One request at a time on HTTP/1.1: a previous one still counted is over.
        if let Some(previous) = conn.owner.replace(owner.clone()) {
            c.per_owner.remove(&previous);
        }
        c.per_owner.add(owner);
        conn.carried += 1;
        // A request in flight is never closed for a newcomer.
        self.claimed.store(true, Ordering::Release);
        Ok(Carrying(self.clone(), conn.carried))
    }
}

/// What to do when a client stream is full: close the connection it is on.
pub(super) struct Overflow {
    pub(super) peer: Option<Arc<Peer>>,
    pub(super) limit: NonZeroUsize,
}

impl Overflow {
    pub(super) fn close(&self, session: &str, request: Option<&Id>) {
        tracing::warn!(
            session = %session,
            request = ?request,
            limit = self.limit.get(),
            "The client is not reading its stream: closing it (downstream.max_outbound_messages)"
        );
        if let Some(peer) = &self.peer {
            peer.close();
        }
    }
}

/// A trusted proxy's connection counted against the client whose request (the connection's
/// how-manieth, [`Conn::carried`]) it carries ([`Peer::carry`]); dropped, it counts for
/// nobody but the total until the next request.
#[derive(Debug)]
struct Carrying(Arc<Peer>, u64);

impl Drop for Carrying {
    fn drop(&mut self) {
        let mut c = lock(&self.0.counts);
        let c = &mut *c;
        let conn = (c.open.get_mut(&self.0.id)).filter(|conn| conn.carried == self.1);
        if let Some(owner) = conn.and_then(|conn| conn.owner.take()) {
            c.per_owner.remove(&owner);
        }
    }
}

/// The service of one connection: the router, and on a trusted proxy's connection each
/// request counted against the client it was forwarded for ([`Peer::carry`]).
#[derive(Clone)]
struct PerConnection {
    app: Router,
    peer: Arc<Peer>,
    config: Arc<ListenConfig>,
}

impl tower::Service<Request<Incoming>> for PerConnection {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<RouteFuture<Infallible>, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        if !self.peer.proxied {
            return Either::Left(self.app.call(request));
        }
        let config = &self.config;
        let proxy = self.peer.addr.ip();
        let client = client_addr(
            proxy,
            request.headers(),
            &config.trusted_proxies,
            config.forwarded_header,
        );
        match self.peer.carry(client) {
            Ok(carrying) => {
                let answer = self.app.call(request);
                Either::Right(Box::pin(async move {
                    let answer = answer.await?;
                    // Counted until the body is sent (or dropped): an SSE stream as long as
                    // it is open.
                    Ok(answer.map(|body| {
                        axum::body::Body::new(body.map_frame(move |frame| {
                            let _ = &carrying;
                            frame
                        }))
                    }))
                }))
            }
            Err(refusal) => {
                tracing::debug!(client = %client, "Refusing a forwarded request: {}", refusal.message);
                Either::Right(Box::pin(std::future::ready(Ok(refusal.into_response()))))
            }
        }
    }
}

tokio::task_local! {
    /// The [`Peer`] of the connection whose task this is.
    static PEER: Arc<Peer>;
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then gives open connections
/// two seconds to finish; with the default limits ([`ListenConfig::default`]).
///
/// ```no_run
/// # async fn run(app: axum::Router) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let stop = tokio_util::sync::CancellationToken::new();
/// mcp_budget::downstream::http::serve(listener, app, stop).await;
/// # Ok(())
/// # }
/// ```
pub async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) {
    serve_with(listener, app, shutdown, ListenConfig::default()).await;
}

/// [`serve`] with these limits (`ListenConfig::from(&policy.downstream)` for a policy's).
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    shutdown: CancellationToken,
    config: ListenConfig,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .keep_alive(true);
    let graceful = GracefulShutdown::new();
    let config = Arc::new(config);
    let counts = Arc::new(Mutex::new(Counts::default()));
    let refusing = Arc::new(AtomicUsize::new(0));
    loop {
        let (tcp, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(error = %err, "Accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let peer = match admit(&counts, addr, &config) {
            Ok(peer) => peer,
            Err(refusal) => {
                refuse(tcp, &refusal, &refusing);
                continue;
            }
        };
        // Answers are small writes (SSE events especially): without TCP_NODELAY they wait for
        // delayed ACKs (~40 ms on Linux).
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(PerConnection {
            app: app.clone(),
            peer: peer.clone(),
            config: config.clone(),
        });
        let conn = graceful.watch(http.serve_connection(TokioIo::new(tcp), service));
        let slot = Slot(peer.clone());
        let task = tokio::spawn(PEER.scope(peer.clone(), async move {
            // Dropped with the task, aborted or not.
            let _slot = slot;
            if let Err(err) = conn.await {
                tracing::debug!(error = %err, "HTTP connection ended with an error");
            }
        }));
        let _ = peer.task.set(task.abort_handle());
    }
    drop(listener);
    let _ = tokio::time::timeout(GRACE, graceful.shutdown()).await;
}

/// The open connections: how many in all and per owner, and each one by age.
#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_owner: Tally,
    /// By age (the id grows): the oldest unclaimed one is the first to go for a newcomer.
    open: BTreeMap<u64, Conn>,
    next_id: u64,
    /// Whether the last connection was refused (a flood is logged once, not per connection).
    refusing: bool,
}

/// One open connection.
#[derive(Debug)]
struct Conn {
    /// What it counts against besides the total: its address, its client once claimed; for
    /// a trusted proxy's, the client of the request it carries (`None` between requests).
    owner: Option<Owner>,
    /// Whether it is claimed is the peer's ([`Peer::claimed`]); an entry is removed before
    /// its peer goes (the [`Slot`] holds the peer), so this always upgrades.
    peer: Weak<Peer>,
    /// How many requests a trusted proxy's connection carried: a [`Carrying`] gives back only
    /// its own request's count, whenever its body is dropped.
    carried: u64,
}

impl Conn {
    /// Whether nothing authenticated on it: a newcomer may take its place.
    fn evictable(&self) -> bool {
        (self.peer.upgrade()).is_some_and(|p| !p.claimed.load(Ordering::Acquire))
    }
}

impl Counts {
    /// Forgets connection `id`: whether it was still counted.
    fn release(&mut self, id: u64) -> Option<Weak<Peer>> {
        let conn = self.open.remove(&id)?;
        self.total -= 1;
        if let Some(owner) = &conn.owner {
            self.per_owner.remove(owner);
        }
        Some(conn.peer)
    }

    /// Closes the oldest connection nobody authenticated on (of `owner`, or of anyone), to
    /// make room: whether there was one.
    fn evict_oldest(&mut self, owner: Option<&Owner>) -> bool {
        let victim = (self.open.iter())
            .find(|(_, c)| c.evictable() && owner.is_none_or(|o| c.owner.as_ref() == Some(o)))
            .map(|(id, _)| *id);
        let Some(peer) = victim.and_then(|id| self.release(id)) else {
            return false;
        };
        if let Some(peer) = peer.upgrade() {
            tracing::debug!(client = %peer.addr, "Closing an idle unauthenticated connection to make room");
            peer.close();
        }
        true
    }
}

/// An admitted connection's place in [`Counts`], given back when dropped (unless it was
/// given back already, the connection evicted).
#[derive(Debug)]
struct Slot(Arc<Peer>);

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.0.counts).release(self.0.id);
    }
}

/// Why a connection (or a request on it) was refused: the policy key and its value.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) message: String,
    pub(super) limit: usize,
}

impl Refusal {
    /// `owner` has `cap` connections open (`max_connections_per_client`); `advice` ends the
    /// message (`retry later`).
    fn per_client(owner: &Owner, cap: NonZeroUsize, advice: &str) -> Self {
        Self {
            message: format!(
                "too many open connections {} (downstream.max_connections_per_client = {cap}): \
                 close idle ones or {advice}",
                owner.whose(),
            ),
            limit: cap.get(),
        }
    }

    /// The error it answers with.
    pub(super) fn into_error(self) -> Http {
        Http::TooManyConnections {
            message: self.message,
            limit: self.limit,
        }
    }

    /// `503` with the error, for a request refused on a connection that was admitted; the
    /// connection closes after it.
    pub(super) fn into_response(self) -> Response {
        let mut resp = json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Id::Null,
            self.into_error().into_object(),
        );
        let headers = resp.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        resp
    }
}

/// A place for a connection from `addr`, or why there is none. At a cap, the oldest
/// connection nobody authenticated on makes room (from the same address for the per-address
/// cap, from anyone for the total): a flood of idle connections never locks out a client that
/// authenticates; only when every connection counted is claimed is the newcomer refused.
fn admit(
    counts: &Arc<Mutex<Counts>>,
    addr: SocketAddr,
    config: &ListenConfig,
) -> Result<Arc<Peer>, Refusal> {
    // An IPv4 client on an IPv6 socket is the same client as on an IPv4 one.
    let ip = addr.ip().to_canonical();
    let proxied = is_trusted(ip, &config.trusted_proxies);
    let owner = (!proxied).then_some(Owner::Addr(ip));
    let mut c = lock(counts);
    let per_addr = config.max_connections_per_client.get();
    let refusal = if let Some(owner) = owner
        .as_ref()
        .filter(|o| c.per_owner.get(o) >= per_addr && !c.evict_oldest(Some(o)))
    {
        Some(Refusal::per_client(
            owner,
            config.max_connections_per_client,
            "retry later",
        ))
    } else if c.total >= config.max_connections.get() && !c.evict_oldest(None) {
        Some(Refusal {
            message: format!(
                "the gateway has too many open connections (downstream.max_connections = {}): \
                 retry later",
                config.max_connections
            ),
            limit: config.max_connections.get(),
        })
    } else {
        None
    };
    if let Some(refusal) = refusal {
        if !c.refusing {
            c.refusing = true;
            tracing::warn!(client = %ip, open = c.total, "Refusing connections: {}", refusal.message);
        }
        return Err(refusal);
    }
    c.refusing = false;
    c.total += 1;
    if let Some(owner) = &owner {
        c.per_owner.add(owner.clone());
    }
    let id = c.next_id;
    c.next_id += 1;
    let peer = Arc::new(Peer {
        addr,
        task: OnceLock::new(),
        id,
        counts: counts.clone(),
        per_client: config.max_connections_per_client,
        proxied,
        claimed: AtomicBool::new(false),
        keys: crate::identity::KeyMemo::default(),
    });
    let conn = Conn {
        owner,
        peer: Arc::downgrade(&peer),
        carried: 0,
    };
    c.open.insert(id, conn);
    Ok(peer)
}

/// Answers a refused connection with a 503 and closes it, on a task of its own, unless
/// [`REFUSALS_IN_FLIGHT`] are under way already: then it is closed at once.
fn refuse(tcp: TcpStream, refusal: &Refusal, refusing: &Arc<AtomicUsize>) {
    if refusing.fetch_add(1, Ordering::Relaxed) >= REFUSALS_IN_FLIGHT {
        refusing.fetch_sub(1, Ordering::Relaxed);
        tracing::debug!("Closing a connection over the limit without an answer");
        return;
    }
    let answer = refusal_bytes(refusal);
    let refusing = refusing.clone();
    tokio::spawn(async move {
        let _ = tokio::time::timeout(REFUSAL_TIME, answer_and_close(tcp, &answer)).await;
        refusing.fetch_sub(1, Ordering::Relaxed);
    });
}

/// The whole HTTP answer to a refused connection.
fn refusal_bytes(refusal: &Refusal) -> Vec<u8> {
    let err = Http::TooManyConnections {
        message: refusal.message.clone(),
        limit: refusal.limit,
    }
    .into_object();
    let body = Message::error(Id::Null, err).to_bytes();
    let mut out = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

/// Reads the request's head (so that the client is not answered before it has sent one,
/// which HTTP clients take for a broken connection), writes `answer`, and reads on until the
/// client closes: closing with unread data would reset the connection and could lose the
/// answer on the way.
async fn answer_and_close(mut tcp: TcpStream, answer: &[u8]) {
    let mut buf = [0u8; 2048];
    let mut tail = [0u8; 4];
    let head = async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    if ends_head(&mut tail, &buf[..n]) {
                        return true;
                    }
                }
            }
        }
    };
    // A client that sends nothing is answered after a second anyway.
    if matches!(
        tokio::time::timeout(REFUSAL_TIME / 2, head).await,
        Ok(false)
    ) {
        return;
    }
    if tcp.write_all(answer).await.is_err() {
        return;
    }
    let _ = tcp.shutdown().await;
    while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {}
}

/// Whether `chunk` completes a request head (`\r\n\r\n`), given the last four bytes before
/// it in `tail` (updated).
fn ends_head(tail: &mut [u8; 4], chunk: &[u8]) -> bool {
    for &b in chunk {
        tail.rotate_left(1);
        tail[3] = b;
        if tail == b"\r\n\r\n" {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;

    async fn start(config: ListenConfig) -> (SocketAddr, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let app = Router::new().route("/", get(|| async { "ok" }));
        tokio::spawn(serve_with(listener, app, stop.clone(), config));
        (addr, stop)
    }

    fn timeout(header_read_timeout: Duration) -> ListenConfig {
        ListenConfig {
            header_read_timeout,
            ..ListenConfig::default()
        }
    }

    /// A connection to `addr` from the local address `local` (`127.0.0.x`: one client each).
    async fn connect_from(local: &str, addr: SocketAddr) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{local}:0").parse().unwrap()).unwrap();
        socket.connect(addr).await.unwrap()
    }

    async fn get_from(local: &str, addr: SocketAddr) -> String {
        let mut tcp = connect_from(local, addr).await;
        tcp.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        let _ = tcp.read_to_string(&mut answer).await;
        answer
    }

    #[tokio::test]
    async fn a_client_slow_with_its_headers_is_cut_off_and_others_are_served() {
        let (addr, stop) = start(timeout(Duration::from_millis(300))).await;
        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let answer = get_from("127.0.0.1", addr).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // The slow one is answered 408 or closed once its headers are overdue, not left open.
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "the slow connection was left open");
        let text = String::from_utf8_lossy(&rest);
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 408"),
            "{text}"
        );
        stop.cancel();
    }

    /// A connection that sent half a request, waiting for the rest.
    async fn half_open(local: &str, addr: SocketAddr) -> TcpStream {
        let mut tcp = connect_from(local, addr).await;
        tcp.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        tcp
    }

    /// A kept-alive connection that was claimed (as a request that authenticated claims it).
    async fn claimed(local: &str, addr: SocketAddr) -> TcpStream {
        let mut tcp = connect_from(local, addr).await;
        tcp.write_all(b"GET /claim HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 512];
        let n = tcp.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        tcp
    }

    async fn is_closed(tcp: &mut TcpStream) -> bool {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(2), tcp.read(&mut buf)).await;
        matches!(read, Ok(Ok(0) | Err(_)))
    }

    #[tokio::test]
    async fn idle_unclaimed_connections_make_room_and_claimed_ones_are_capped() {
        let config = ListenConfig {
            max_connections: NonZeroUsize::new(3).unwrap(),
            max_connections_per_client: NonZeroUsize::new(2).unwrap(),
            ..ListenConfig::default()
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let claim = || async {
            Peer::current()
                .unwrap()
                .claim(&Principal::anonymous())
                .unwrap();
            "ok"
        };
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .route("/claim", get(claim));
        tokio::spawn(serve_with(listener, app, stop.clone(), config));
        let settle = || tokio::time::sleep(Duration::from_millis(100));
        // Two idle connections from one address: a third from it closes the oldest.
        let mut a1 = half_open("127.0.0.2", addr).await;
        let _a2 = half_open("127.0.0.2", addr).await;
        settle().await;
        let served = get_from("127.0.0.2", addr).await;
        assert!(served.starts_with("HTTP/1.1 200"), "{served}");
        assert!(
            is_closed(&mut a1).await,
            "the oldest idle connection was kept"
        );
        // Claimed connections are not closed for a newcomer: over the cap, it gets 503.
        let _c1 = claimed("127.0.0.3", addr).await;
        let _c2 = claimed("127.0.0.3", addr).await;
        let per_client = get_from("127.0.0.3", addr).await;
        assert!(per_client.starts_with("HTTP/1.1 503"), "{per_client}");
        assert!(
            per_client.contains("mcp_budget.http.too_many_connections")
                && per_client.contains("downstream.max_connections_per_client = 2"),
            "{per_client}"
        );
        // The total: a2 (idle) makes room once, then three claimed connections fill it.
        let c3 = claimed("127.0.0.4", addr).await;
        settle().await;
        let total = get_from("127.0.0.5", addr).await;
        assert!(total.contains("downstream.max_connections = 3"), "{total}");
        // A closed connection gives its place back.
        drop(c3);
        settle().await;
        let served = get_from("127.0.0.5", addr).await;
        assert!(served.starts_with("HTTP/1.1 200"), "{served}");
        stop.cancel();
    }

    /// A request on `tcp` as a trusted proxy forwards it for `client`.
    async fn forwarded(tcp: &mut TcpStream, path: &str, client: &str) {
        let head =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: {client}\r\n\r\n");
        tcp.write_all(head.as_bytes()).await.unwrap();
    }

    async fn answer(tcp: &mut TcpStream) -> String {
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(2), tcp.read(&mut buf)).await;
        String::from_utf8_lossy(&buf[..n.unwrap().unwrap()]).into_owned()
    }

    /// `app` served with a cap of 2 connections per client, behind a proxy on 127.0.0.1.
    async fn behind_a_proxy(app: Router) -> (SocketAddr, CancellationToken) {
        let config = ListenConfig {
            max_connections_per_client: NonZeroUsize::new(2).unwrap(),
            trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
            ..ListenConfig::default()
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        tokio::spawn(serve_with(listener, app, stop.clone(), config));
        (addr, stop)
    }

    #[tokio::test]
    async fn a_proxys_connection_counts_against_the_client_of_the_request_it_carries() {
        let hold = || tokio::time::sleep(Duration::from_secs(30));
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .route("/hold", get(hold));
        let (addr, stop) = behind_a_proxy(app).await;
        // Requests answered: their kept-alive connections count for nobody but the total.
        let mut idle = Vec::new();
        for _ in 0..3 {
            let mut tcp = connect_from("127.0.0.1", addr).await;
            forwarded(&mut tcp, "/", "203.0.113.1").await;
            assert!(answer(&mut tcp).await.starts_with("HTTP/1.1 200"));
            idle.push(tcp);
        }
        // Two requests in flight for one client: a third is refused, and its connection closed.
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut tcp = connect_from("127.0.0.1", addr).await;
            forwarded(&mut tcp, "/hold", "203.0.113.1").await;
            held.push(tcp);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let third = &mut idle[0];
        forwarded(third, "/", "203.0.113.1").await;
        let refused = answer(third).await;
        assert!(
            refused.starts_with("HTTP/1.1 503")
                && refused.contains("connection: close")
                && refused.contains("too many open connections from 203.0.113.1")
                && refused.contains("downstream.max_connections_per_client = 2"),
            "{refused}"
        );
        assert!(is_closed(third).await);
        // Another client on the same proxy connections is served; the first one is, once one
        // of its requests ends.
        forwarded(&mut idle[1], "/", "203.0.113.2").await;
        assert!(answer(&mut idle[1]).await.starts_with("HTTP/1.1 200"));
        drop(held.pop());
        tokio::time::sleep(Duration::from_millis(100)).await;
        forwarded(&mut idle[2], "/", "203.0.113.1").await;
        assert!(answer(&mut idle[2]).await.starts_with("HTTP/1.1 200"));
        stop.cancel();
    }

    #[tokio::test]
    async fn behind_a_proxy_an_authenticated_request_counts_against_its_client() {
        use crate::authz::{Glob, Scope};
        use crate::identity::{Client, Credential, Directory, Gate, Protected, api_key};
        let alice = Client::new("alice", Scope::new(vec![Glob::new("*")], vec![], vec![]))
            .with_key(api_key::digest("ka"));
        let gate = Arc::new(Gate::new(Directory::new(vec![alice]), Protected::default()));
        let as_alice = move || async move {
            let alice = gate.authenticate(Credential::from_headers(None, Some("ka")));
            match Peer::current().unwrap().claim(&alice.unwrap()) {
                Ok(()) => tokio::time::sleep(Duration::from_secs(30)).await,
                Err(refusal) => return refusal.into_response(),
            }
            axum::response::IntoResponse::into_response("ok")
        };
        let hold = || tokio::time::sleep(Duration::from_secs(30));
        let app = Router::new()
            .route("/alice", get(as_alice))
            .route("/hold", get(hold));
        let (addr, stop) = behind_a_proxy(app).await;
        // Alice's two requests, forwarded for two addresses, count against her.
        let mut held = Vec::new();
        for client in ["203.0.113.1", "203.0.113.2"] {
            let mut tcp = connect_from("127.0.0.1", addr).await;
            forwarded(&mut tcp, "/alice", client).await;
            held.push(tcp);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut third = connect_from("127.0.0.1", addr).await;
        forwarded(&mut third, "/alice", "203.0.113.3").await;
        let refused = answer(&mut third).await;
        assert!(
            refused.starts_with("HTTP/1.1 503")
                && refused.contains(r#"too many open connections of client \"alice\""#),
            "{refused}"
        );
        // Not against the addresses: 203.0.113.1 still has its two.
        for _ in 0..2 {
            let mut tcp = connect_from("127.0.0.1", addr).await;
            forwarded(&mut tcp, "/hold", "203.0.113.1").await;
            held.push(tcp);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        for tcp in &mut held {
            let mut buf = [0u8; 64];
            let read = tokio::time::timeout(Duration::from_millis(100), tcp.read(&mut buf)).await;
            assert!(
                read.is_err(),
                "a request within the caps was answered or closed"
            );
        }
        stop.cancel();
    }

    #[test]
    fn a_request_head_ends_with_an_empty_line_even_across_reads() {
        let mut tail = [0u8; 4];
        assert!(!ends_head(&mut tail, b"GET / HTTP/1.1\r\nHost: x\r"));
        assert!(!ends_head(&mut tail, b"\n"));
        assert!(ends_head(&mut tail, b"\r\n"));
    }

    #[tokio::test]
    async fn shutdown_stops_accepting() {
        let (addr, stop) = start(ListenConfig::default()).await;
        stop.cancel();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }
}
