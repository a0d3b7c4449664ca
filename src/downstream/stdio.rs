//! The stdio downstream: newline-delimited JSON-RPC on stdin/stdout.
//!
//! Each message is served concurrently; answers and server→client messages share one writer,
//! so lines never interleave. Unreadable input gets `-32700`/`-32600` and the connection lives
//! on; a line over the size limit is refused with `mcp_budget.request.too_large` (with the line's
//! id, found by [`IdScanner`] as the line is discarded, so the client is not left waiting), and
//! one nested deeper than `max_json_depth` with `mcp_budget.request.too_deep`, never forwarded.
//! A request the client cancelled (`notifications/cancelled`) gets no answer, as MCP asks: the
//! cancel goes upstream and whatever comes back for it is dropped.
//!
//! A 2025-era request other than `initialize`, `ping` (and the `server/discover` probe) before
//! the client sent `initialize` is refused with `mcp_budget.session.invalid` (`-32600`), as the
//! HTTP downstream refuses one without a session; a 2026-07-28 request (its `_meta` names the
//! protocol version) needs no handshake and is served.
//!
//! # The path of a call, and its hops
//!
//! Serving stdio only, the gateway runs on one thread (`serve.rs` builds a current-thread
//! runtime), so a `tools/call` to a stdio upstream wakes the process twice, as a zero-logic
//! relay (`socat`) is woken, and otherwise hands off between tasks of that thread:
//! 1. stdin is readable: the reactor wakes the read loop (`Connection::read_loop`), which reads
//!    the line and spawns `answer` — hand-off 1 (a task, same thread);
//! 2. the layers run inside `answer`; the pool queues the request for the upstream's writer task
//!    — hand-off 2 — which writes it to the upstream's stdin;
//! 3. the upstream's stdout is readable: the reactor wakes its reader task, which routes the
//!    answer to the call waiting for it (a oneshot) — hand-off 3;
//! 4. `answer` queues the reply for `write_out` — hand-off 4 — which writes it to stdout.
//!
//! Two wake-ups from `epoll` and four task hand-offs, none across threads (serving HTTP too, the
//! runtime has a worker per core and any hand-off may cross them). Measured with
//! `scripts/bench-gateway.sh latency` and `callgrind`: on a loaded machine (load 2–3) one
//! thread added half the latency at the median and at p99; on a quiet one the same median
//! (a relay's fifth); 1.1 k fewer instructions per call either way. The tasks stay: the read
//! loop must go on reading while calls are in flight, and the writer must keep answers whole
//! and in one order.
//!
//! # Bounds
//!
//! A host that writes and does not read its stdout must not make the gateway buffer without
//! end. With `N` = `[downstream] max_outbound_messages`:
//! - while `N` messages wait for the host to read them, stdin is not read (backpressure: the
//!   host's writes block once the pipe is full); answers are never dropped, so every request
//!   still gets exactly one;
//! - at most `N` requests are in flight: the next one is read when one is answered;
//! - a notification of the servers (progress, logs, `resources/updated`…) that finds `N`
//!   messages waiting is dropped, counted, with a warning when dropping starts and when the host
//!   catches up; a `…/list_changed` is only dropped when the same one is already waiting (it
//!   says nothing more). Server→client requests (sampling, elicitation, roots) are never dropped.
//!
//! stdin is read in order: while `N` requests are in flight, whatever the host wrote after the
//! next request waits too, its answers to server→client requests included. A host whose `N`
//! requests all wait on such an answer (sampling, elicitation) written behind an `N+1`th request
//! stalls its own session; with the default of 1024 that takes 1024 questions open at once.

use std::collections::{HashMap, VecDeque};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::Endpoint;
use crate::context::{Caller, McpRequest, Session};
use crate::error::Error;
use crate::identity::{Directory, Gate, Principal};
use crate::jsonrpc::{Id, IdScanner, Kind, Message};
use crate::lock::lock;
use crate::mcp::method::Method;
use crate::mcp::view::RequestView;
use crate::policy::{
    DEFAULT_MAX_JSON_DEPTH, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_OUTBOUND_MESSAGES, Downstream,
};
use crate::stack::McpService;

/// How long answers in flight may take once the client closed its input.
const DRAIN: Duration = Duration::from_secs(5);

/// Queued messages are written together up to about this many bytes.
const WRITE_BATCH: usize = 64 * 1024;

/// Settings of the stdio downstream (the `[downstream]` limits).
#[derive(Debug, Clone)]
pub struct StdioConfig {
    /// Longest accepted line, in bytes.
    pub max_message_bytes: usize,
    /// Deepest accepted nesting of objects and arrays in a message.
    pub max_json_depth: usize,
    /// Messages waiting for the host to read them before stdin stops being read; also the
    /// most requests in flight.
    pub max_outbound_messages: usize,
    /// The `[[client]]` stdio messages come from (`[downstream] stdio_client`; the one named
    /// after the local user when unset). Unused without clients.
    pub client: Option<String>,
}

impl Default for StdioConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
            max_outbound_messages: DEFAULT_MAX_OUTBOUND_MESSAGES.get(),
            client: None,
        }
    }
}

impl From<&Downstream> for StdioConfig {
    fn from(d: &Downstream) -> Self {
        Self {
            max_message_bytes: d.max_message_bytes,
            max_json_depth: d.max_json_depth,
            max_outbound_messages: d.max_outbound_messages.get(),
            client: d.stdio_client.clone(),
        }
    }
}

/// Serves one client on `input`/`output` until the input closes.
pub async fn serve<R, W>(endpoint: Endpoint, input: R, output: W, config: StdioConfig)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_until(endpoint, input, output, config, CancellationToken::new()).await;
}

/// [`serve`] until the input closes or `stop` is cancelled (the gateway stopping: a host may
/// signal it and keep its end of the pipe open). Either way nothing more is read, and the
/// answers to the requests in flight are written before it returns.
pub async fn serve_until<R, W>(
    endpoint: Endpoint,
    input: R,
    output: W,
    config: StdioConfig,
    stop: CancellationToken,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let Endpoint {
        service,
        sessions,
        gate,
        ..
    } = endpoint;
    // One principal for the whole connection (whoever started the gateway on a pipe), found
    // again when a reload stores another directory: its rights are the new ones.
    let principal = match gate.stdio(config.client.as_deref()) {
        Ok(principal) => principal,
        Err(refusal) => {
            tracing::error!("Not serving stdio: {refusal}");
            return;
        }
    };
    let directory = gate.directory().load_full();
    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    let backlog = Arc::new(Backlog::new(config.max_outbound_messages.max(1)));
    let writer = tokio::spawn(write_out(rx, output, backlog.clone()));
    let session = Arc::new(Session::new("stdio", tx.clone()));
    sessions.opened(&session);
    let mut connection = Connection {
        service,
        gate,
        client: config.client.clone(),
        principal,
        directory,
        session,
        tx,
        backlog,
        inflight: Inflight::default(),
        tasks: JoinSet::new(),
        initialize_seen: false,
    };
    connection.read_loop(input, &config, &stop).await;
    let Connection {
        mut tasks,
        tx,
        session,
        ..
    } = connection;
    let _ = tokio::time::timeout(DRAIN, async { while tasks.join_next().await.is_some() {} }).await;
    sessions.ended(&session.id);
    drop(tx);
    drop(session);
    // Flush what is queued; senders still held by upstream calls in flight must not keep the
    // writer alive forever.
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
}

/// One stdio connection as its reader holds it: what serving a message needs.
struct Connection {
    service: McpService,
    gate: Gate,
    /// `[downstream] stdio_client`, to find the principal again after a reload.
    client: Option<String>,
    principal: Arc<Principal>,
    /// The directory `principal` was found in.
    directory: Arc<Directory>,
    session: Arc<Session>,
    /// To the writer.
    tx: mpsc::UnboundedSender<Message>,
    backlog: Arc<Backlog>,
    inflight: Inflight,
    /// One task per message served.
    tasks: JoinSet<()>,
    /// Whether the client sent `initialize` (read in order, so a request written after it is
    /// served even while the `initialize` is still being answered).
    initialize_seen: bool,
}

impl Connection {
    /// Reads stdin a line at a time while the [`Backlog`] has room, answers the lines that
    /// cannot be served (too large, unreadable) and dispatches the others, until the input
    /// ends, `stop` is cancelled or the principal is refused after a reload.
    async fn read_loop<R: AsyncRead + Unpin>(
        &mut self,
        input: R,
        config: &StdioConfig,
        stop: &CancellationToken,
    ) {
        let max_message_bytes = config.max_message_bytes;
        let mut reader = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            let next = async {
                self.backlog.room().await;
                line.clear();
                read_line(&mut reader, &mut line, max_message_bytes).await
            };
            // Stopping drops a line half read: nothing more is served.
            let read = tokio::select! {
                read = next => read,
                () = stop.cancelled() => break,
            };
            match read {
                Ok(Line::End) => break,
                Ok(Line::Kept) => {}
                Ok(Line::TooLarge { size, id }) => {
                    let err = Error::TooLarge {
                        size,
                        limit: max_message_bytes,
                    };
                    let _ = self.tx.send(Message::error(
                        id.unwrap_or(Id::Null),
                        err.to_error_object(),
                    ));
                    continue;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "Reading stdin failed");
                    break;
                }
            }
            let text = line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            match Message::parse_with_max_depth(text, config.max_json_depth) {
                Err(err) => {
                    let _ = self.tx.send(err.to_response());
                }
                Ok(message) => {
                    if self.dispatch(message).is_break() {
                        break;
                    }
                }
            }
            // Reap finished tasks so the set does not grow with the session.
            while self.tasks.try_join_next().is_some() {}
        }
    }

    /// Serves `message` in a task of its own: a request is counted in flight until answered,
    /// a `notifications/cancelled` marks the request it names. Breaks when the principal is
    /// refused after a reload.
    fn dispatch(&mut self, message: Message) -> ControlFlow<()> {
        let request_id = match message.kind() {
            Kind::Request => message.id.clone(),
            _ => None,
        };
        let view = Arc::new(RequestView::of(&message));
        if let Some(id) = &request_id
            && let Some(refused) = self.before_initialize(&view)
        {
            let _ = self
                .tx
                .send(Message::error(id.clone(), refused.to_error_object()));
            return ControlFlow::Continue(());
        }
        // Only requests count, until answered; answers to the servers' questions and
        // notifications do not.
        let slot = request_id
            .as_ref()
            .map(|_| Backlog::start_request(&self.backlog));
        if let Some(id) = &request_id {
            self.inflight.start(id.clone());
        } else if let Some(id) = cancelled_id(&message) {
            self.inflight.cancel(&id);
        }
        self.refresh_principal()?;
        let caller = Caller::new(self.session.clone()).with_principal(self.principal.clone());
        self.tasks.spawn(answer(
            self.service.clone(),
            McpRequest::with_view(message, caller, view),
            request_id,
            self.inflight.clone(),
            self.tx.clone(),
            slot,
        ));
        ControlFlow::Continue(())
    }

    /// The refusal of a 2025-era request sent before `initialize` (`view` is a request's); notes
    /// the `initialize`. `ping` may come first, and the `server/discover` probe; a 2026-07-28
    /// request has no handshake.
    fn before_initialize(&mut self, view: &RequestView) -> Option<Error> {
        let method = view.method();
        if *method == Method::Initialize {
            self.initialize_seen = true;
        }
        if self.initialize_seen
            || view.is_modern()
            || matches!(method, Method::Ping | Method::Discover)
        {
            return None;
        }
        Some(Error::Session(format!(
            "{} before initialize: send initialize first",
            method.as_str()
        )))
    }

    /// Finds the principal again when a reload stored another directory (its rights are the
    /// new ones); breaks when the new directory refuses it.
    fn refresh_principal(&mut self) -> ControlFlow<()> {
        let current = self.gate.directory().load_full();
        if !Arc::ptr_eq(&current, &self.directory) {
            match self.gate.stdio(self.client.as_deref()) {
                Ok(now) => self.principal = now,
                Err(refusal) => {
                    tracing::error!("Not serving stdio any more: {refusal}");
                    return ControlFlow::Break(());
                }
            }
            self.directory = current;
        }
        ControlFlow::Continue(())
    }
}

/// Serves `request` and sends its answer to the writer, unless the client cancelled it. `slot`
/// counts the request in flight until then.
async fn answer(
    service: McpService,
    request: McpRequest,
    request_id: Option<Id>,
    inflight: Inflight,
    tx: mpsc::UnboundedSender<Message>,
    slot: Option<Slot>,
) {
    let reply = service.oneshot(request).await;
    let is_request = request_id.is_some();
    let cancelled = request_id.is_some_and(|id| inflight.finish(&id));
    match reply {
        Ok(Some(reply)) if cancelled => {
            tracing::debug!(id = ?reply.id, "Answer to a cancelled request dropped");
        }
        // A refused answer of the client (to no request waiting for it): the gateway logged
        // it; a line with `id: null` would only confuse the host.
        Ok(Some(_)) if !is_request => {}
        Ok(Some(reply)) => {
            let _ = tx.send(reply);
        }
        _ => {}
    }
    drop(slot);
}

/// The requests in flight, each with whether the client cancelled it (`notifications/cancelled`):
/// the answer to a cancelled request is dropped, as MCP asks.
#[derive(Debug, Clone, Default)]
struct Inflight(Arc<Mutex<HashMap<Id, bool>>>);

impl Inflight {
    fn start(&self, id: Id) {
        lock(&self.0).insert(id, false);
    }

    /// Marks `id` cancelled, if it is still in flight.
    fn cancel(&self, id: &Id) {
        if let Some(cancelled) = lock(&self.0).get_mut(id) {
            *cancelled = true;
        }
    }

    /// Forgets `id`, answered; whether it was cancelled.
    fn finish(&self, id: &Id) -> bool {
        lock(&self.0).remove(id).unwrap_or(false)
    }
}

/// What the gateway holds for the client: messages waiting for it to read them (counted by the
/// writer) and requests in flight (counted by the reader and the tasks serving them). The reader
/// reads stdin only while both are under `limit`.
#[derive(Debug)]
struct Backlog {
    limit: usize,
    queued: AtomicUsize,
    in_flight: AtomicUsize,
    /// Signalled when a count falls below the limit.
    room: Notify,
}

impl Backlog {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            queued: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            room: Notify::new(),
        }
    }

    fn has_room(&self) -> bool {
        self.queued.load(Ordering::Acquire) < self.limit
            && self.in_flight.load(Ordering::Acquire) < self.limit
    }

    /// Waits until fewer than `limit` messages are queued and fewer than `limit` requests are
    /// in flight.
    async fn room(&self) {
        if self.has_room() {
            return; // the usual case: no waiter registered, no lock taken
        }
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            // Registered before the check, so a change between the check and the wait is seen.
            room.as_mut().enable();
            if self.has_room() {
                return;
            }
            room.await;
        }
    }

    /// Publishes the count of queued messages.
    fn set_queued(&self, queued: usize) {
        let before = self.queued.swap(queued, Ordering::AcqRel);
        if before >= self.limit && queued < self.limit {
            self.room.notify_one();
        }
    }

    /// Counts a request in flight until the returned guard is dropped.
    fn start_request(this: &Arc<Self>) -> Slot {
        this.in_flight.fetch_add(1, Ordering::AcqRel);
        Slot(this.clone())
    }
}

/// The place of a request in flight in the [`Backlog`] (see [`Backlog::start_request`]).
struct Slot(Arc<Backlog>);

impl Drop for Slot {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == self.0.limit {
            self.0.room.notify_one();
        }
    }
}

/// The writer's queue: what waits for the host, and what it did not get.
struct Outbox {
    pending: VecDeque<Message>,
    backlog: Arc<Backlog>,
    /// Notifications dropped since the queue was last down to half the limit.
    dropped: u64,
}

impl Outbox {
    /// Queues `msg`, unless it is a notification that finds the queue full.
    fn admit(&mut self, msg: Message) {
        if self.pending.len() >= self.backlog.limit && msg.kind() == Kind::Notification {
            let method = msg.method().unwrap_or_default();
            let repeated = !method.ends_with("/list_changed")
                || self.pending.iter().any(|m| m.method() == Some(method));
            if repeated {
                if self.dropped == 0 {
                    tracing::warn!(
                        limit = self.backlog.limit,
                        method,
                        "The client is not reading stdout: dropping notifications for it until it \
                         catches up (downstream.max_outbound_messages)"
                    );
                }
                self.dropped += 1;
                return;
            }
        }
        self.pending.push_back(msg);
    }

    /// Publishes the queue length to the reader; once the queue is down to half the limit (so
    /// that a queue hovering at the limit does not log on every message), says how many
    /// notifications were dropped.
    fn publish(&mut self) {
        let queued = self.pending.len();
        if self.dropped > 0 && queued <= self.backlog.limit / 2 {
            self.report_dropped();
        }
        self.backlog.set_queued(queued);
    }

    fn report_dropped(&mut self) {
        if self.dropped > 0 {
            tracing::warn!(
                dropped = self.dropped,
                "The client reads stdout again; notifications were dropped while it did not"
            );
            self.dropped = 0;
        }
    }
}

/// Writes the messages of `rx` to `out` as lines of JSON, whatever is queued in one write,
/// until the channel closes or a write fails. While a write waits for the host, `rx` is still
/// drained into the [`Outbox`], so what the servers send piles up nowhere else.
async fn write_out<W>(mut rx: mpsc::UnboundedReceiver<Message>, mut out: W, backlog: Arc<Backlog>)
where
    W: AsyncWrite + Unpin,
{
    let mut outbox = Outbox {
        pending: VecDeque::new(),
        backlog,
        dropped: 0,
    };
    let mut open = true;
    let mut buf = Vec::new();
    loop {
        if outbox.pending.is_empty() {
            // Closed (no sender left) and nothing queued: done.
            let Some(msg) = rx.recv().await else { break };
            outbox.admit(msg);
        }
        while let Ok(msg) = rx.try_recv() {
            outbox.admit(msg);
        }
        buf.clear();
        while buf.len() < WRITE_BATCH {
            let Some(msg) = outbox.pending.pop_front() else {
                break;
            };
            crate::jsonrpc::push_line(&mut buf, &msg);
        }
        outbox.publish();
        let write = async {
            out.write_all(&buf).await?;
            out.flush().await
        };
        tokio::pin!(write);
        let written = loop {
            tokio::select! {
                biased;
                written = &mut write => break written,
                msg = rx.recv(), if open => match msg {
                    Some(msg) => {
                        outbox.admit(msg);
                        outbox.publish();
                    }
                    None => open = false,
                },
            }
        };
        if written.is_err() {
            break;
        }
    }
    // Nothing more can be written: the reader must not wait for room that never comes.
    outbox.pending.clear();
    outbox.publish();
    outbox.report_dropped();
}

/// The request a `notifications/cancelled` names (its id as sent, so `1.0` cancels `1.0`).
fn cancelled_id(message: &Message) -> Option<Id> {
    if message.method() != Some(Method::Cancelled.as_str()) {
        return None;
    }
    message.params_id("requestId")
}

/// What [`read_line`] read.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    /// The input ended (a last line without a newline is still [`Line::Kept`]).
    End,
    /// A line within the limit, in the buffer.
    Kept,
    /// A line over the limit, discarded as it was read; `id` is its top-level id if it had one.
    TooLarge { size: usize, id: Option<Id> },
}

/// Reads one line into `line` (newline included) if it is at most `limit` bytes; a longer one
/// is read to its end without being kept, scanning for the id its error should carry.
pub(crate) async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Line> {
    let mut total = 0;
    let mut scan: Option<IdScanner> = None;
    loop {
        let buf = reader.fill_buf().await?;
        // (bytes of this line in `buf`, whether they end it, with a newline or at the end)
        let (len, newline, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true, true),
            None => (buf.len(), false, buf.is_empty()),
        };
        let chunk = &buf[..len];
        match scan.as_mut() {
            Some(scan) => scan.feed(chunk),
            None if total + len <= limit + 1 => line.extend_from_slice(chunk),
            None => {
                let mut s = IdScanner::default();
                s.feed(line);
                s.feed(chunk);
                line.clear();
                scan = Some(s);
            }
        }
        total += len;
        reader.consume(len);
        if done {
            let size = total - usize::from(newline);
            if total == 0 {
                return Ok(Line::End);
            }
            if size <= limit {
                return Ok(Line::Kept);
            }
            let scan = scan.unwrap_or_else(|| {
                // A last line without a newline, one byte over: kept whole.
                let mut s = IdScanner::default();
                s.feed(line);
                s
            });
            return Ok(Line::TooLarge {
                size,
                id: scan.id(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::sync::atomic::AtomicBool;
    use tokio::io::AsyncReadExt;

    /// Reads every line of `input` through a buffer of `chunk` bytes.
    async fn lines(input: &[u8], chunk: usize, limit: usize) -> Vec<(Line, Vec<u8>)> {
        let mut reader = BufReader::with_capacity(chunk, input);
        let mut out = Vec::new();
        loop {
            let mut line = Vec::new();
            let got = read_line(&mut reader, &mut line, limit).await.unwrap();
            if got == Line::End {
                return out;
            }
            out.push((got, line));
        }
    }

    #[tokio::test]
    async fn long_lines_are_refused_with_their_id_and_short_ones_kept() {
        let big = format!(
            r#"{{"jsonrpc":"2.0","method":"x","params":{{"s":"{}"}},"id":7}}"#,
            "a".repeat(100)
        );
        let input = format!(
            "{{\"id\":1}}\n{big}\n{{\"id\":2}}\n{}\n{big}",
            "b".repeat(40)
        );
        for chunk in [1, 3, 16, 4096] {
            let got = lines(input.as_bytes(), chunk, 40).await;
            let size = big.len();
            assert_eq!(
                got,
                vec![
                    (Line::Kept, b"{\"id\":1}\n".to_vec()),
                    (
                        Line::TooLarge {
                            size,
                            id: Some(Id::Number(7))
                        },
                        Vec::new()
                    ),
                    (Line::Kept, b"{\"id\":2}\n".to_vec()),
                    (Line::Kept, format!("{}\n", "b".repeat(40)).into_bytes()),
                    (
                        Line::TooLarge {
                            size,
                            id: Some(Id::Number(7))
                        },
                        Vec::new()
                    ),
                ],
                "chunk {chunk}"
            );
        }
        // A last line without a newline, exactly one byte over the limit.
        let got = lines(br#"{"id":"z","p":"xx"}"#, 4, 18).await;
        assert_eq!(
            got,
            vec![(
                Line::TooLarge {
                    size: 19,
                    id: Some(Id::String("z".into()))
                },
                br#"{"id":"z","p":"xx"}"#.to_vec()
            )]
        );
    }

    fn notification(method: &str) -> Message {
        Message::notification(method, None)
    }

    #[test]
    fn a_full_queue_drops_notifications_but_never_answers_or_questions() {
        let mut outbox = Outbox {
            pending: VecDeque::new(),
            backlog: Arc::new(Backlog::new(2)),
            dropped: 0,
        };
        outbox.admit(notification("notifications/progress"));
        outbox.admit(notification("notifications/tools/list_changed"));
        // Full from here on.
        outbox.admit(notification("notifications/progress"));
        outbox.admit(notification("notifications/message"));
        outbox.admit(notification("notifications/tools/list_changed"));
        outbox.admit(notification("notifications/prompts/list_changed"));
        outbox.admit(notification("notifications/prompts/list_changed"));
        outbox.admit(Message::response_value(Id::Number(1), &json!({})));
        outbox.admit(Message::request(
            Id::String("q".into()),
            "sampling/createMessage",
            None,
        ));
        let kept: Vec<String> = outbox
            .pending
            .iter()
            .map(|m| {
                m.method()
                    .map_or_else(|| format!("answer {:?}", m.id), str::to_owned)
            })
            .collect();
        assert_eq!(
            kept,
            [
                "notifications/progress",
                "notifications/tools/list_changed",
                "notifications/prompts/list_changed",
                "answer Some(Number(1))",
                "sampling/createMessage",
            ]
        );
        assert_eq!(outbox.dropped, 4);
        outbox.publish();
        assert_eq!(outbox.backlog.queued.load(Ordering::Acquire), 5);
        outbox.pending.truncate(2);
        outbox.publish();
        assert_eq!(outbox.dropped, 4, "still at the limit");
        outbox.pending.truncate(1);
        outbox.publish();
        assert_eq!(
            outbox.dropped, 0,
            "the count restarts once the queue is down to half"
        );
    }

    /// Stopped while the client keeps its input open, the downstream returns (it does not wait
    /// for an input that never ends).
    #[tokio::test]
    async fn serve_until_returns_when_stopped_with_the_input_still_open() {
        let policy = crate::policy::Policy::default();
        let announce = crate::stack::announce(&policy);
        let gateway = crate::gateway::Gateway::start(policy, announce, CancellationToken::new());
        let service = crate::stack::build(gateway.clone());
        let endpoint = Endpoint::new(service, Arc::new(gateway.clone()), gateway.catalog());
        let (mut client_in, gateway_in) = tokio::io::duplex(4096);
        let (gateway_out, client_out) = tokio::io::duplex(4096);
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve_until(
            endpoint,
            gateway_in,
            gateway_out,
            StdioConfig::default(),
            stop.clone(),
        ));
        client_in
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        let mut lines = BufReader::new(client_out).lines();
        let answer = lines.next_line().await.unwrap().unwrap();
        assert!(answer.contains("\"id\":1"), "{answer}");
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(2), server)
            .await
            .expect("returned once stopped")
            .unwrap();
        drop(client_in);
    }

    /// A client writes `n` pings and reads nothing until its writes stall; then it reads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_does_not_read_is_not_read_and_loses_no_answer() {
        let policy = crate::policy::Policy::default();
        let announce = crate::stack::announce(&policy);
        let shutdown = tokio_util::sync::CancellationToken::new();
        let gateway = crate::gateway::Gateway::start(policy, announce, shutdown);
        let service = crate::stack::build(gateway.clone());
        let endpoint = Endpoint::new(service, Arc::new(gateway.clone()), gateway.catalog());
        let (mut client_in, gateway_in) = tokio::io::duplex(4096);
        let (gateway_out, mut client_out) = tokio::io::duplex(4096);
        let config = StdioConfig {
            max_outbound_messages: 8,
            ..StdioConfig::default()
        };
        let server = tokio::spawn(async move {
            serve(endpoint, gateway_in, gateway_out, config).await;
        });
        let n = 5_000;
        let sent = Arc::new(AtomicUsize::new(0));
        let finished = Arc::new(AtomicBool::new(false));
        let (sent2, finished2) = (sent.clone(), finished.clone());
        let writer = tokio::spawn(async move {
            for i in 0..n {
                let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n");
                client_in.write_all(line.as_bytes()).await.unwrap();
                sent2.fetch_add(1, Ordering::Relaxed);
            }
            finished2.store(true, Ordering::Relaxed);
            client_in
        });
        // Until the client's writes stop going through (at most 10 s).
        let mut last = usize::MAX;
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = sent.load(Ordering::Relaxed);
            if now == last {
                break;
            }
            last = now;
        }
        let stalled_at = sent.load(Ordering::Relaxed);
        assert!(!finished.load(Ordering::Relaxed), "all {n} lines were read");
        // What may be held: the pipes (4 KiB each way), the reader's buffer (8 KiB), a write
        // batch, 8 queued answers and 8 requests in flight: a few hundred lines (288 here), not 5,000.
        assert!(
            stalled_at < 1_000,
            "{stalled_at} lines read by a gateway nobody reads"
        );

        let mut answers = Vec::new();
        let mut buf = vec![0; 64 * 1024];
        let mut text = Vec::new();
        while answers.len() < n {
            let got = tokio::time::timeout(Duration::from_secs(10), client_out.read(&mut buf))
                .await
                .expect("answers keep coming")
                .unwrap();
            assert!(got > 0, "output closed after {} answers", answers.len());
            text.extend_from_slice(&buf[..got]);
            while let Some(end) = text.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = text.drain(..=end).collect();
                let v: Value = serde_json::from_slice(&line).unwrap();
                assert_eq!(v["result"], json!({}), "{v}");
                answers.push(v["id"].as_u64().unwrap());
            }
        }
        answers.sort_unstable();
        assert!(
            answers.iter().copied().eq(0..n as u64),
            "every id answered once"
        );
        drop(writer.await.unwrap());
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the session ends with its input")
            .unwrap();
    }
}
