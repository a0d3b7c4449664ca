//! What travels through the tower stack: a message plus who sent it.
//!
//! Server→client traffic (progress, logging, sampling / elicitation / roots requests) goes out
//! through the caller's [`Outbound`] channel, never through globals, so it reaches the client
//! that caused it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tokio::sync::mpsc;

/// The kind of item a request calls ([`Routed::kind`]).
pub use crate::authz::Kind;
use crate::catalog::Catalog;
pub use crate::identity::Principal;
use crate::jsonrpc::Message;
pub use crate::mcp::view::RequestView;
/// The protocol era of a request ([`RequestView::era`]) and its method ([`RequestView::method`]).
pub use crate::mcp::{Era, method::Method};
use crate::routing;
pub use crate::routing::Routed;

/// The future every message service of the stack returns (boxed where a layer rewrites).
pub type McpFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Option<Message>, std::convert::Infallible>> + Send>,
>;

/// A message from a client, with its caller and its [`RequestView`] (read once, where it was
/// decoded; layers read the view instead of parsing the params again).
#[derive(Debug, Clone)]
pub struct McpRequest {
    /// The decoded message (request, notification, or a response to a server→client request).
    pub message: Message,
    /// Who sent it.
    pub caller: Caller,
    /// What the stack reads of `message` (shared: cloning a request stays cheap). Whoever
    /// changes `message` builds a new one ([`McpRequest::with_params`]).
    pub view: Arc<RequestView>,
    /// What it calls, once a layer asked ([`McpRequest::routed`]), and the catalog it was
    /// routed through.
    routed: OnceLock<(Arc<Catalog>, Option<Arc<Routed>>)>,
}

impl McpRequest {
    /// `message` from `caller`, with its view ([`RequestView::of`]: the era its `_meta` says).
    #[must_use]
    pub fn new(message: Message, caller: Caller) -> Self {
        let view = Arc::new(RequestView::of(&message));
        Self::with_view(message, caller, view)
    }

    /// `message` from `caller`, with a view the transport made of it (say
    /// [`RequestView::of_modern`]).
    #[must_use]
    pub fn with_view(message: Message, caller: Caller, view: Arc<RequestView>) -> Self {
        Self {
            message,
            caller,
            view,
            routed: OnceLock::new(),
        }
    }

    /// What the request calls, routed through `catalog` ([`routing::routed`]): worked out by
    /// the first layer that asks, and reused by the layers below it while they read the same
    /// catalog. `None` for a method that calls nothing.
    #[must_use]
    pub fn routed(&self, catalog: &Arc<Catalog>) -> Option<Arc<Routed>> {
        let route = || routing::routed(&self.message, &self.view, catalog).map(Arc::new);
        let (through, routed) = self.routed.get_or_init(|| (catalog.clone(), route()));
        if Arc::ptr_eq(through, catalog) {
            routed.clone()
        } else {
            // The catalog changed in between: this layer decides on the one it reads.
            route()
        }
    }

    /// What a layer above found the request calls ([`McpRequest::routed`]), if one routed it
    /// through `catalog`: `None` when none did (nothing is worked out here).
    #[must_use]
    pub fn routed_already(&self, catalog: &Arc<Catalog>) -> Option<Option<&Arc<Routed>>> {
        let (through, routed) = self.routed.get()?;
        Arc::ptr_eq(through, catalog).then_some(routed.as_ref())
    }

    /// The request with `params` instead of its own, and the view of that (same era rules):
    /// what a layer that rewrites a request sends down.
    #[must_use]
    pub fn with_params(self, params: Box<serde_json::value::RawValue>) -> Self {
        let Self {
            mut message,
            caller,
            view,
            ..
        } = self;
        message.params = Some(params);
        let view = Arc::new(view.rebuilt(&message));
        Self::with_view(message, caller, view)
    }
}

/// The sending side of a client connection: messages to the client outside responses, tagged
/// with the session they belong to, so that whatever answers them can be checked against it.
///
/// A channel ([`Outbound::new`]), or a [`Deliver`] that hands each message on at once
/// ([`Outbound::direct`]): an HTTP session's session-wide messages go straight to its open GET
/// stream, so an idle session holds neither a channel's first block (32 messages, ~4.4 KB) nor
/// a task to drain it.
#[derive(Debug, Clone)]
pub struct Outbound {
    sink: Sink,
    session: Arc<str>,
}

#[derive(Debug, Clone)]
enum Sink {
    Channel(mpsc::UnboundedSender<Message>),
    Direct(Arc<dyn Deliver>),
}

/// What an [`Outbound::direct`] hands its messages to: it must not wait (it is called from
/// the gateway's side, under no lock of the caller's but on its task).
pub trait Deliver: std::fmt::Debug + Send + Sync + 'static {
    /// Hands `msg` on to the client, or drops it when the client is not listening now.
    ///
    /// # Errors
    /// [`ClientGone`] when the client is gone for good (the message is dropped).
    fn deliver(&self, msg: Message) -> Result<(), ClientGone>;

    /// Whether the client is gone for good (nothing delivered will reach it).
    fn is_closed(&self) -> bool {
        false
    }
}

/// A [`Deliver`] with no client behind it: every message is dropped, and the channel is
/// closed from the start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nowhere;

impl Deliver for Nowhere {
    fn deliver(&self, _msg: Message) -> Result<(), ClientGone> {
        Err(ClientGone)
    }

    fn is_closed(&self) -> bool {
        true
    }
}

/// The client of an [`Outbound`] channel is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the client is gone")]
pub struct ClientGone;

impl Outbound {
    /// A channel to a client of session `session`.
    #[must_use]
    pub fn new(session: impl Into<Arc<str>>, tx: mpsc::UnboundedSender<Message>) -> Self {
        Self {
            sink: Sink::Channel(tx),
            session: session.into(),
        }
    }

    /// Messages to a client of session `session`, handed to `to` as they are sent.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mcp_budget::context::{Nowhere, Outbound};
    /// use mcp_budget::jsonrpc::Message;
    ///
    /// let outbound = Outbound::direct("s1", Arc::new(Nowhere));
    /// assert!(outbound.is_closed());
    /// assert!(outbound.send(Message::notification("notifications/message", None)).is_err());
    /// ```
    #[must_use]
    pub fn direct(session: impl Into<Arc<str>>, to: Arc<dyn Deliver>) -> Self {
        Self {
            sink: Sink::Direct(to),
            session: session.into(),
        }
    }

    /// A new channel to a client of session `session`, and its receiving end.
    #[must_use]
    pub fn channel(session: impl Into<Arc<str>>) -> (Self, mpsc::UnboundedReceiver<Message>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self::new(session, tx), rx)
    }

    /// Sends `msg` to the client.
    ///
    /// # Errors
    /// [`ClientGone`] when the client is gone (the message is dropped).
    pub fn send(&self, msg: Message) -> Result<(), ClientGone> {
        match &self.sink {
            Sink::Channel(tx) => tx.send(msg).map_err(|_| ClientGone),
            Sink::Direct(to) => to.deliver(msg),
        }
    }

    /// Whether the client is gone.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        match &self.sink {
            Sink::Channel(tx) => tx.is_closed(),
            Sink::Direct(to) => to.is_closed(),
        }
    }

    /// Completes when the client is gone (a direct sink's client is gone only if it is
    /// closed from the start: it lives as long as its session).
    pub async fn closed(&self) {
        match &self.sink {
            Sink::Channel(tx) => tx.closed().await,
            Sink::Direct(to) if to.is_closed() => {}
            Sink::Direct(_) => std::future::pending().await,
        }
    }

    /// Whether both send to the same channel.
    #[must_use]
    pub fn same_channel(&self, other: &Self) -> bool {
        match (&self.sink, &other.sink) {
            (Sink::Channel(a), Sink::Channel(b)) => a.same_channel(b),
            (Sink::Direct(a), Sink::Direct(b)) => std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b)),
            _ => false,
        }
    }

    /// The session whose client this channel reaches.
    #[must_use]
    pub fn session(&self) -> &str {
        &self.session
    }
}

/// Who is calling: the principal, the session, and where its server→client messages go.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The session this message belongs to.
    pub session: Arc<Session>,
    /// Where server→client messages caused by this message go (on HTTP, the POST's stream).
    pub outbound: Outbound,
    /// Who the downstream found the message is from ([`Principal::anonymous`] until a
    /// downstream authenticates it, and always on a policy without `[[client]]`).
    pub principal: Arc<Principal>,
    /// The audit id of the `run_code` run this message was made by (a script's tool call),
    /// `None` for what the client sent itself: audit lines carry it as `run_audit_id`.
    pub run: Option<Arc<str>>,
    /// The request only asks whether the caller may make this call, and must never reach an
    /// upstream: a `get_tool_schema` of a tool the caller's plan hides goes down as the direct
    /// call it names, so that the authorize layer answers it as it answers that call. Should the
    /// authorize layer allow it (the catalog changed between the two layers' reads), it
    /// answers "not found" instead of calling the tool.
    pub probe: bool,
    /// The meta-tool this `tools/call` was made through, by kind (`"invoke_tool"`,
    /// `"run_code"`, whatever the policy names them); `None` for a call the client sent
    /// itself. Metrics and log lines of the inner call carry it.
    pub meta: Option<&'static str>,
    /// What an embedding gateway attached to the request ([`crate::embed::Request`]): the
    /// embedded stack hands it down to the embedder's service with the call. `None`
    /// elsewhere.
    pub(crate) extensions: Option<Arc<std::panic::AssertUnwindSafe<http::Extensions>>>,
}

/// One downstream client session.
#[derive(Debug)]
pub struct Session {
    /// Opaque id (`Mcp-Session-Id` on HTTP, `stdio` for the stdio client).
    pub id: String,
    /// Session-wide channel to the client (stdio writer, or the HTTP GET stream).
    pub notify: Outbound,
    state: Mutex<SessionState>,
    /// The `[[client]]` the session's messages came from first ([`Session::bind_client`]).
    client: OnceLock<Box<str>>,
    /// Whether a message came from another `[[client]]` than `client` since: the session
    /// then belongs to none.
    mixed: AtomicBool,
}

/// Told when a downstream session starts and ends, beside its messages: the aggregator keeps
/// its session registry (broadcasts, resource subscriptions) with it. It sits beside
/// [`Session`] rather than in `downstream`, so that the gateway implements it without
/// importing the downstreams (which import the stack, which imports the gateway).
pub trait Sessions: std::fmt::Debug + Send + Sync + 'static {
    /// `session` started without an `initialize` through the stack (the stdio client's one
    /// session); it gets broadcasts from now on.
    fn opened(&self, session: &Arc<Session>);
    /// Session `id` ended (stdio input closed, HTTP `DELETE` or idle expiry).
    fn ended(&self, id: &str);
}

/// What the gateway learned about a session at `initialize`.
#[derive(Debug, Clone, Default)]
pub struct SessionState {
    /// The client's declared capabilities.
    pub client_capabilities: Value,
    /// The client's `clientInfo`.
    pub client_info: Value,
    /// Negotiated protocol version.
    pub protocol_version: Option<String>,
    /// Whether `initialize` was answered.
    pub initialized: bool,
    /// The log level a 2025-era client set (`logging/setLevel`); modern upstreams get it with
    /// each request instead.
    pub log_level: Option<String>,
}

impl Session {
    /// A new session whose session-wide messages go to `notify`.
    #[must_use]
    pub fn new(id: impl Into<String>, notify: mpsc::UnboundedSender<Message>) -> Self {
        let id = id.into();
        let notify = Outbound::new(id.as_str(), notify);
        Self::with_outbound(id, notify)
    }

    /// A new session whose session-wide messages go to `notify` (say an
    /// [`Outbound::direct`]).
    #[must_use]
    pub fn with_outbound(id: impl Into<String>, notify: Outbound) -> Self {
        let id = id.into();
        Self {
            notify,
            id,
            state: Mutex::new(SessionState::default()),
            client: OnceLock::new(),
            mixed: AtomicBool::new(false),
        }
    }

    /// Notes that a message of the session came from `[[client]]` `name`. The first one names
    /// the session's client; one from another client makes the session belong to none (the
    /// HTTP downstream refuses a session's messages from another client anyway; stdio's
    /// client can change with a reload), so that what belongs to one client never reaches a
    /// session another one uses.
    pub fn bind_client(&self, name: &str) {
        let first = self.client.get_or_init(|| name.into());
        if **first != *name {
            self.mixed.store(true, Ordering::Relaxed);
        }
    }

    /// [`Session::bind_client`] for a message of `principal`, when it is a `[[client]]` (an
    /// anonymous one names none).
    pub fn bind_principal(&self, principal: &Principal) {
        if principal.via() != crate::identity::Via::Anonymous {
            self.bind_client(principal.name());
        }
    }

    /// The `[[client]]` the session belongs to: the one all its messages came from; `None`
    /// while none came from a client, or when they came from more than one.
    #[must_use]
    pub fn client(&self) -> Option<&str> {
        let client = self.client.get()?;
        (!self.mixed.load(Ordering::Relaxed)).then_some(&**client)
    }

    /// A copy of the session state.
    #[must_use]
    pub fn state(&self) -> SessionState {
        self.lock().clone()
    }

    /// Updates the session state.
    pub fn update(&self, f: impl FnOnce(&mut SessionState)) {
        f(&mut self.lock());
    }

    /// Reads the session state in place (no copy of it, unlike [`Session::state`]).
    pub fn with_state<R>(&self, f: impl FnOnce(&SessionState) -> R) -> R {
        f(&self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SessionState> {
        // A panic while holding this lock cannot leave the state torn: every update is a
        // plain field assignment.
        crate::lock::lock(&self.state)
    }

    /// Whether the client declared capability `name` (e.g. `sampling`).
    #[must_use]
    pub fn has_capability(&self, name: &str) -> bool {
        self.lock().client_capabilities.get(name).is_some()
    }
}

impl Caller {
    /// A caller for `session` whose messages go to the session-wide channel.
    #[must_use]
    pub fn new(session: Arc<Session>) -> Self {
        let outbound = session.notify.clone();
        Self::on(session, outbound)
    }

    /// A caller for `session` whose messages go to `outbound`, anonymous until
    /// [`Caller::with_principal`].
    #[must_use]
    pub fn on(session: Arc<Session>, outbound: Outbound) -> Self {
        Self {
            session,
            outbound,
            principal: Principal::anonymous(),
            run: None,
            probe: false,
            meta: None,
            extensions: None,
        }
    }

    /// The same caller, with what an embedding gateway attached to its request.
    #[must_use]
    pub(crate) fn with_extensions(mut self, extensions: http::Extensions) -> Self {
        // Unwind-safe as the rest of the caller: the stack catches panics per request.
        self.extensions = Some(Arc::new(std::panic::AssertUnwindSafe(extensions)));
        self
    }

    /// The same caller, from `principal`.
    #[must_use]
    pub fn with_principal(mut self, principal: Arc<Principal>) -> Self {
        self.principal = principal;
        self
    }

    /// A caller for `session` whose messages go to a channel of their own (on HTTP, the
    /// response stream of one POST), and that channel's receiving end.
    #[must_use]
    pub fn with_channel(session: Arc<Session>) -> (Self, mpsc::UnboundedReceiver<Message>) {
        let (outbound, rx) = Outbound::channel(session.id.as_str());
        (Self::on(session, outbound), rx)
    }
}

/// A future that is finished even when whoever awaits it stops: dropped before completion, it
/// moves to a task of its own. Lets a caller drive work inline (no spawn, no task switch on the
/// hot path) without ever abandoning it halfway.
pub(crate) struct RunToEnd<F: std::future::Future + Send + 'static>(Option<std::pin::Pin<Box<F>>>);

impl<F: std::future::Future + Send + 'static> RunToEnd<F> {
    /// Wraps `future`.
    pub(crate) fn new(future: F) -> Self {
        Self(Some(Box::pin(future)))
    }
}

impl<F: std::future::Future + Send + 'static> std::future::Future for RunToEnd<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let Some(future) = self.0.as_mut() else {
            panic!("RunToEnd polled after completion");
        };
        let out = std::task::ready!(future.as_mut().poll(cx));
        self.0 = None;
        std::task::Poll::Ready(out)
    }
}

impl<F: std::future::Future + Send + 'static> Drop for RunToEnd<F> {
    fn drop(&mut self) {
        if let Some(future) = self.0.take() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = future.await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_belongs_to_its_one_client_or_to_none() {
        let session = |id| Session::new(id, mpsc::unbounded_channel().0);
        let s = session("s1");
        assert_eq!(s.client(), None, "no client's message yet");
        s.bind_client("alice");
        s.bind_client("alice");
        assert_eq!(s.client(), Some("alice"));
        // Another client on the same session: it belongs to neither from then on.
        s.bind_client("bob");
        assert_eq!(s.client(), None);
        s.bind_client("alice");
        assert_eq!(s.client(), None);
    }
}
