//! `POST`: one JSON-RPC message. The decisions (headers, era, reply shape) are the pure
//! functions of [`super::checks`]; this file reads the body, finds the session and runs the
//! message through the stack, answering with JSON or an SSE stream.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tower::ServiceExt;
use tower::util::Oneshot;

use super::AppState;
use super::checks::{self, PostEra, Shape};
use super::listen::{Overflow, Peer};
use super::reply::{self, json_error, json_response, sse_event, sse_response};
use super::sealed;
use super::sessions::{Entry, InUse, Link};
use crate::context::{Caller, McpRequest, Nowhere, Outbound, RunToEnd, Session};
use crate::error::{Http, kind};
use crate::identity::Principal;
use crate::jsonrpc::{Id, Kind, Message};
use crate::lock::lock;
use crate::mcp::method::Method;
use crate::mcp::view::RequestView;
use crate::stack::McpService;

pub(super) async fn handle_post(
    State(state): State<Arc<AppState>>,
    request: axum::extract::Request,
) -> Response {
    // The request taken apart rather than a `HeaderMap` extractor, which clones the headers.
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let (principal, message) = match admit(&state, &headers, &parts.uri, body).await {
        Ok(admitted) => admitted,
        Err(resp) => return resp,
    };
    // Read once: the era, the name, the `_meta`; every check and layer below reads this.
    let view = Arc::new(checks::view_of(&message, &headers));
    let strict = state.config.strict_accept;
    let shape = checks::reply_shape(checks::accepts(&headers), strict, || {
        checks::http_sse_era_of(&headers, &message)
            .unwrap_or_else(|| state.session_speaks(&headers, super::HTTP_SSE_ERA))
    });
    let Some(shape) = shape else {
        return checks::not_acceptable(&headers, &message, strict).into_response();
    };
    let era = match checks::post_era(&message, &view, &headers) {
        Ok(era) => era,
        Err((id, err)) => return *reply::modern_error(id, err),
    };
    // The session is in use (it does not expire) until `in_use` is dropped.
    let (session, in_use) = match era {
        PostEra::Initialize => {
            // Boxed: a future of its own keeps every other request's future small.
            let client = super::auth::client_ip(&state, &headers, &parts.extensions);
            return Box::pin(initialize(&state, message, view, client, principal)).await;
        }
        PostEra::Modern => {
            if let Err(resp) = check_param_headers(&state, &message, &view, &headers) {
                return *resp;
            }
            (modern_session(), None)
        }
        PostEra::Session => {
            match state.session_of(
                &headers,
                &principal,
                super::auth::client_ip(&state, &headers, &parts.extensions),
            ) {
                Ok((session, in_use)) => (session, Some(in_use)),
                Err(resp) => return *resp,
            }
        }
    };
    let is_modern = era == PostEra::Modern;
    if message.kind() != Kind::Request {
        let caller = Caller::new(session).with_principal(principal);
        return not_a_request(&state.service, message, view, caller).await;
    }
    let call = Call {
        service: &state.service,
        cancel_on_close: CancelOnClose::new(&state.service, &session, &message, is_modern),
        message,
        view,
        session,
        principal,
        in_use,
        modern: is_modern,
    };
    match shape {
        Shape::Json => json_only(call).await,
        Shape::JsonOrSse | Shape::Sse => {
            let sse_only = shape == Shape::Sse;
            json_or_sse(call, state.config.max_outbound_messages, sse_only).await
        }
    }
}

/// Who sends the message, and the message: the origin and content type are checked, then the
/// credentials, and only then is the body read (a client without credentials costs no more
/// than its headers and a small body, read so that its connection stays open: see
/// [`super::hygiene`]).
async fn admit(
    state: &AppState,
    headers: &HeaderMap,
    uri: &Uri,
    body: Body,
) -> Result<(Arc<Principal>, Message), Response> {
    let principal = match caller_before_body(state, headers, uri) {
        Ok(principal) => principal,
        Err(resp) => {
            super::hygiene::drain(body).await;
            return Err(*resp);
        }
    };
    let message = read_message(state, body).await?;
    Ok((principal, message))
}

/// The principal of a POST, or why it is refused before its body is read.
fn caller_before_body(
    state: &AppState,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<Arc<Principal>, Box<Response>> {
    checks::check_origin(headers, uri, &state.config)?;
    if !checks::is_json_body(headers) {
        return Err(Box::new(reply::unsupported_media_type()));
    }
    super::auth::principal(&state.gate, headers, uri)
}

/// A 2026-07-28 `tools/call`'s `Mcp-Param-*` headers agree with its arguments.
fn check_param_headers(
    state: &AppState,
    message: &Message,
    view: &RequestView,
    headers: &HeaderMap,
) -> Result<(), Box<Response>> {
    if *view.method() != Method::ToolsCall {
        return Ok(());
    }
    let marks = |name: &str| state.catalog.borrow().param_marks(name).to_vec();
    checks::check_param_headers(message, view, headers, marks).map_err(|err| {
        let id = message.reply_id();
        reply::modern_error(id, err)
    })
}

/// The body, read within `body_timeout` and `max_message_bytes`, as one message.
async fn read_message(state: &AppState, body: Body) -> Result<Message, Response> {
    let limit = state.config.max_message_bytes;
    let bytes = match within(state.config.body_timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => return Err(reply::too_large(limit)),
        Err(_) => return Err(reply::body_timeout(state.config.body_timeout)),
    };
    Message::parse_with_max_depth(&bytes, state.config.max_json_depth)
        .map_err(|err| reply::undecodable(&err))
}

/// `future`, given `limit` to finish. A future that is ready at once (a body that came with
/// its headers) is not timed: no timer is set up on the common path.
async fn within<F: std::future::Future>(
    limit: Duration,
    future: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    let mut future = std::pin::pin!(future);
    if let Poll::Ready(out) = futures::poll!(future.as_mut()) {
        return Ok(out);
    }
    // Boxed: the timer's state stays out of every request's future.
    Box::pin(tokio::time::timeout(limit, future)).await
}

/// The session of a 2026-07-28 request: its own, ending with it. Nothing outlives the
/// request, so session-wide messages have nowhere to go.
fn modern_session() -> Arc<Session> {
    let id = format!("modern-{}", uuid::Uuid::new_v4().simple());
    let nowhere = Outbound::direct(id.as_str(), Arc::new(Nowhere));
    Arc::new(Session::with_outbound(id, nowhere))
}

/// A notification or a client's answer: 202. A refused client answer (to no request waiting
/// for this session) comes back as an error without id: the spec's "cannot accept the input"
/// is a 4xx with it.
async fn not_a_request(
    service: &McpService,
    message: Message,
    view: Arc<RequestView>,
    caller: Caller,
) -> Response {
    let request = McpRequest::with_view(message, caller, view);
    match service.clone().oneshot(request).await {
        Ok(Some(refusal)) => {
            let mut resp = json_response(&refusal, None);
            *resp.status_mut() = StatusCode::BAD_REQUEST;
            resp
        }
        _ => reply::accepted(),
    }
}

/// A request of a client that accepts JSON only: server→client messages go to the session's
/// stream, the answer here.
async fn json_only(call: Call<'_>) -> Response {
    let Call {
        service,
        message,
        view,
        session,
        principal,
        in_use: _in_use,
        mut cancel_on_close,
        modern,
    } = call;
    let outbound = session.notify.clone();
    let caller = Caller::on(session, outbound).with_principal(principal);
    let request = McpRequest::with_view(message, caller, view);
    // Run to its end even if this handler is dropped first.
    let reply = RunToEnd::new(service.clone().oneshot(request)).await;
    alone(reply, &mut cancel_on_close, modern, false)
}

/// A request on its way through the stack, with what keeps its session alive.
struct Call<'a> {
    service: &'a McpService,
    message: Message,
    view: Arc<RequestView>,
    session: Arc<Session>,
    principal: Arc<Principal>,
    in_use: Option<InUse>,
    cancel_on_close: CancelOnClose,
    /// A 2026-07-28 request: errors get the status of their code.
    modern: bool,
}

/// A request through the stack, driven by whoever awaits it and finished even if they stop.
type Running = RunToEnd<Oneshot<McpService, McpRequest>>;

/// The answer of a finished call, alone: JSON (with `sse_only`, a stream of that one event),
/// or 202 when there is none.
fn alone(
    reply: Result<Option<Message>, Infallible>,
    cancel_on_close: &mut CancelOnClose,
    modern: bool,
    sse_only: bool,
) -> Response {
    cancel_on_close.disarm();
    match reply {
        Ok(Some(reply)) => reply::answer_alone(&reply, modern, sse_only),
        _ => reply::accepted(),
    }
}

/// A request answered with JSON (with `sse_only`, a stream of the answer alone), unless the
/// server talks to the client before the answer is ready; then with an SSE stream that ends
/// with the answer. The stream holds at most `max_outbound` messages the client has not read.
async fn json_or_sse(
    call: Call<'_>,
    max_outbound: std::num::NonZeroUsize,
    sse_only: bool,
) -> Response {
    let Call {
        service,
        message,
        view,
        session,
        principal,
        in_use,
        mut cancel_on_close,
        modern,
    } = call;
    let (caller, mut out_rx) = Caller::with_channel(session);
    let caller = caller.with_principal(principal);
    let request = McpRequest::with_view(message, caller, view);
    // Driven right here (no task of its own on the way to a JSON answer); if this handler is
    // dropped first, the call still runs to its end.
    let mut call = RunToEnd::new(service.clone().oneshot(request));
    // Server→client messages first: a request that sent some before its answer gets them all,
    // on an SSE stream that ends with the answer.
    let first = tokio::select! {
        biased;
        first = out_rx.recv() => first,
        reply = &mut call => return alone(reply, &mut cancel_on_close, modern, sse_only),
    };
    // The channel closes when the request is done without a server→client message: then the
    // answer comes alone.
    let Some(first) = first else {
        return alone(call.await, &mut cancel_on_close, modern, sse_only);
    };
    let streamed = Streamed {
        call,
        out_rx,
        in_use,
        cancel_on_close,
    };
    streamed.stream(&first, max_outbound)
}

/// A call that sent server→client messages before its answer, answered with an SSE stream.
struct Streamed {
    call: Running,
    /// What the gateway sends the client on the call's behalf.
    out_rx: mpsc::UnboundedReceiver<Message>,
    in_use: Option<InUse>,
    cancel_on_close: CancelOnClose,
}

impl Streamed {
    /// The stream: `first`, the messages that follow it, then the answer. `out_rx` is drained
    /// into the stream at once, so the gateway never waits on a client; a client that leaves
    /// `max_outbound` messages unread has its stream closed.
    fn stream(self, first: &Message, max_outbound: std::num::NonZeroUsize) -> Response {
        let Self {
            mut call,
            mut out_rx,
            in_use,
            mut cancel_on_close,
        } = self;
        let (sse_tx, sse_rx) = mpsc::channel::<Bytes>(max_outbound.get());
        let _ = sse_tx.try_send(sse_event(first));
        let overflow = Overflow {
            peer: Peer::current(),
            limit: max_outbound,
        };
        tokio::spawn(async move {
            let _in_use = in_use;
            // For the log only.
            let (session, request_id) = (&cancel_on_close.session, &cancel_on_close.id);
            let push = |msg: &Message| match sse_tx.try_send(sse_event(msg)) {
                Err(mpsc::error::TrySendError::Full(_)) => {
                    overflow.close(&session.id, Some(request_id));
                    false
                }
                // Closed: the client went away; the `closed()` arm below ends the loop.
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => true,
            };
            loop {
                tokio::select! {
                    biased;
                    msg = out_rx.recv() => match msg {
                        Some(msg) => if !push(&msg) { return },
                        None => {
                            if let Ok(Some(reply)) = call.await { push(&reply); }
                            break;
                        }
                    },
                    reply = &mut call => {
                        // Flush what came just before the answer, then the answer, then close.
                        while let Ok(msg) = out_rx.try_recv() {
                            if !push(&msg) { return }
                        }
                        if let Ok(Some(reply)) = reply { push(&reply); }
                        break;
                    }
                    // The client closed the stream: the call goes on (2025 era: disconnecting is
                    // not cancelling) or is cancelled (2026-07-28), and messages for it go
                    // nowhere.
                    () = sse_tx.closed() => return,
                }
            }
            cancel_on_close.disarm();
        });
        sse_response(ReceiverStream::new(sse_rx), None)
    }
}

/// `initialize` (2025 era) opens a session, unless that would pass `max_sessions` or, for the
/// client's address, `max_sessions_per_client` (503 `mcp_budget.session.limit`).
async fn initialize(
    state: &Arc<AppState>,
    message: Message,
    view: Arc<RequestView>,
    client: Option<IpAddr>,
    principal: Arc<Principal>,
) -> Response {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let link = Arc::new(Link::default());
    let session =
        super::sessions::session(id.clone(), link.clone(), state.config.max_outbound_messages);
    let entry = Entry::new(session.clone(), link.clone(), principal.clone(), client);
    let refused = lock(&state.sessions)
        .admit(id.clone(), entry, state.caps())
        .err();
    // A flood is logged once, when refusals start, not once per refusal.
    let was_refusing = state
        .refusing_sessions
        .swap(refused.is_some(), std::sync::atomic::Ordering::Relaxed);
    if let Some(refusal) = refused {
        if !was_refusing {
            tracing::warn!(client = ?client, "Refusing sessions: {refusal}");
        }
        return json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            message.id.unwrap_or(Id::Null),
            Http::Refused {
                kind: kind::SESSION_LIMIT,
                message: refusal,
            }
            .into_object(),
        );
    }
    state.start_sweeping();
    let _in_use = InUse::new(&link);
    let caller = Caller::new(session.clone()).with_principal(principal.clone());
    let request = McpRequest::with_view(message, caller, view);
    let reply = state.service.clone().oneshot(request).await;
    // Sealed once answered: the id carries what `initialize` agreed.
    let id = seal(state, &session, &principal).unwrap_or(id);
    match reply {
        Ok(Some(reply)) => json_response(&reply, Some(&id)),
        _ => reply::accepted(),
    }
}

/// The sealed id of `session`, just initialized by `principal`, under which it is filed from
/// now on; `None` without a seal key, or when the session cannot be sealed (it keeps its
/// random id, known to this replica only).
fn seal(state: &AppState, session: &Session, principal: &Principal) -> Option<String> {
    let sealer = state.config.sealer.as_ref()?;
    let now = sealed::unix_now();
    let lifetime = state.config.session_lifetime;
    let claims = sealed::claims_of(&session.id, &session.state(), principal, now, lifetime)?;
    let token = sealer
        .seal(&claims)
        .inspect_err(|e| {
            tracing::warn!(session = %session.id, "Session id not sealed, so only this replica knows it: {e}");
        })
        .ok()?;
    lock(&state.sessions).rekey(&session.id, token.clone(), claims.exp);
    Some(token)
}

/// For a 2026-07-28 request, where closing the response stream is how a client cancels:
/// dropped before [`CancelOnClose::disarm`], it tells the gateway the request was cancelled.
struct CancelOnClose {
    service: Option<McpService>,
    session: Arc<Session>,
    id: Id,
}

impl CancelOnClose {
    fn new(service: &McpService, session: &Arc<Session>, message: &Message, modern: bool) -> Self {
        Self {
            service: modern.then(|| service.clone()),
            session: session.clone(),
            id: message.reply_id(),
        }
    }

    fn disarm(&mut self) {
        self.service = None;
    }
}

impl Drop for CancelOnClose {
    fn drop(&mut self) {
        let Some(service) = self.service.take() else {
            return;
        };
        /// Serialized straight to JSON text, not through a `Value`: an id like `1e3` keeps
        /// its exact text (a `Value` would make it `1000.0`, an id the client never sent).
        #[derive(serde::Serialize)]
        struct Cancelled<'a> {
            #[serde(rename = "requestId")]
            request_id: &'a Id,
            reason: &'a str,
        }
        let params = serde_json::value::to_raw_value(&Cancelled {
            request_id: &self.id,
            reason: "the client closed the response stream",
        })
        .expect("an id and a string always serialize");
        let request = McpRequest::new(
            Message::notification(Method::Cancelled.as_str(), Some(params)),
            Caller::new(self.session.clone()),
        );
        tokio::spawn(service.oneshot(request));
    }
}
