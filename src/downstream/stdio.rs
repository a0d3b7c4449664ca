//! The stdio downstream: newline-delimited JSON-RPC on stdin/stdout.
//!
//! Each message is served concurrently; answers and server→client messages share one writer,
//! so lines never interleave. Unreadable input gets `-32700`/`-32600` and the connection lives
//! on; a line over the size limit is refused with `mcp_budget.request.too_large`. A request
//! the client cancelled (`notifications/cancelled`) gets no answer, as MCP asks: the cancel
//! goes upstream and whatever comes back for it is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tower::ServiceExt;

use crate::context::{Caller, McpRequest, Session};
use crate::error::Error;
use crate::gateway::Gateway;
use crate::jsonrpc::{Id, Kind, Message};
use crate::stack::McpService;

/// How long answers in flight may take once the client closed its input.
const DRAIN: Duration = Duration::from_secs(5);

/// Serves one client on `input`/`output` until the input closes.
pub async fn serve<R, W>(
    service: McpService,
    gateway: &Gateway,
    input: R,
    output: W,
    max_message_bytes: usize,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    let writer = tokio::spawn(crate::jsonrpc::write_lines(rx, output));
    let session = Arc::new(Session::new("stdio", tx.clone()));
    gateway.register_session(&session);
    let mut reader = BufReader::new(input);
    let mut tasks = JoinSet::new();
    // Requests in flight → whether the client cancelled them.
    let inflight: Arc<Mutex<HashMap<Id, bool>>> = Arc::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = match read_line(&mut reader, &mut line, max_message_bytes).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) => {
                tracing::warn!(error = %err, "Reading stdin failed");
                break;
            }
        };
        if n > max_message_bytes {
            let err = Error::TooLarge {
                size: n,
                limit: max_message_bytes,
            };
            let _ = tx.send(Message::error(Id::Null, err.to_error_object()));
            continue;
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        match Message::parse(text) {
            Err(err) => {
                let _ = tx.send(err.to_response());
            }
            Ok(message) => {
                let request_id = match message.kind() {
                    Kind::Request => message.id.clone(),
                    _ => None,
                };
                if let Some(id) = &request_id {
                    lock(&inflight).insert(id.clone(), false);
                } else if let Some(id) = cancelled_id(&message) {
                    if let Some(flag) = lock(&inflight).get_mut(&id) {
                        *flag = true;
                    }
                }
                let inflight = inflight.clone();
                let request = McpRequest {
                    message,
                    caller: Caller::new(session.clone()),
                };
                let service = service.clone();
                let tx = tx.clone();
                tasks.spawn(async move {
                    let reply = service.oneshot(request).await;
                    let cancelled = request_id
                        .and_then(|id| lock(&inflight).remove(&id))
                        .unwrap_or(false);
                    match reply {
                        Ok(Some(reply)) if cancelled => {
                            tracing::debug!(id = ?reply.id, "Answer to a cancelled request dropped");
                        }
                        Ok(Some(reply)) => {
                            let _ = tx.send(reply);
                        }
                        _ => {}
                    }
                });
            }
        }
        // Reap finished tasks so the set does not grow with the session.
        while tasks.try_join_next().is_some() {}
    }
    let _ = tokio::time::timeout(DRAIN, async { while tasks.join_next().await.is_some() {} }).await;
    gateway.remove_session(&session.id);
    drop(tx);
    drop(session);
    // Flush what is queued; senders still held by upstream calls in flight must not keep the
    // writer alive forever.
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Single inserts and removes: a poisoned map is still consistent.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The request a `notifications/cancelled` names.
fn cancelled_id(message: &Message) -> Option<Id> {
    if message.method() != Some("notifications/cancelled") {
        return None;
    }
    let params: serde_json::Value = message.params_as().ok()?;
    serde_json::from_value(params.get("requestId")?.clone()).ok()
}

/// Reads one line; returns its full length even when only `limit` bytes were kept.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let len = chunk.len();
        if total + len <= limit + 1 {
            line.extend_from_slice(chunk);
        }
        total += len;
        reader.consume(len);
        if done {
            return Ok(total.saturating_sub(1));
        }
    }
}
