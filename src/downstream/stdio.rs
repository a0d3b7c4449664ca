//! The stdio downstream: newline-delimited JSON-RPC on stdin/stdout.
//!
//! Each message is served concurrently; answers and server→client messages share one writer,
//! so lines never interleave. Unreadable input gets `-32700`/`-32600` and the connection lives
//! on; a line over the size limit is refused with `mcp_budget.request.too_large` (with the line's
//! id, found by [`IdScanner`] as the line is discarded, so the client is not left waiting), and
//! one nested deeper than `max_json_depth` with `mcp_budget.request.too_deep`, never forwarded.
//! A request the client cancelled (`notifications/cancelled`) gets no answer, as MCP asks: the
//! cancel goes upstream and whatever comes back for it is dropped.

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
use crate::jsonrpc::{Id, IdScanner, Kind, Message};
use crate::policy::{Downstream, DEFAULT_MAX_JSON_DEPTH, DEFAULT_MAX_MESSAGE_BYTES};
use crate::stack::McpService;

/// How long answers in flight may take once the client closed its input.
const DRAIN: Duration = Duration::from_secs(5);

/// Settings of the stdio downstream (the `[downstream]` limits).
#[derive(Debug, Clone)]
pub struct StdioConfig {
    /// Longest accepted line, in bytes.
    pub max_message_bytes: usize,
    /// Deepest accepted nesting of objects and arrays in a message.
    pub max_json_depth: usize,
}

impl Default for StdioConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
        }
    }
}

impl From<&Downstream> for StdioConfig {
    fn from(d: &Downstream) -> Self {
        Self {
            max_message_bytes: d.max_message_bytes,
            max_json_depth: d.max_json_depth,
        }
    }
}

/// Serves one client on `input`/`output` until the input closes.
pub async fn serve<R, W>(
    service: McpService,
    gateway: &Gateway,
    input: R,
    output: W,
    config: StdioConfig,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max_message_bytes = config.max_message_bytes;
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
        match read_line(&mut reader, &mut line, max_message_bytes).await {
            Ok(Line::End) => break,
            Ok(Line::Kept) => {}
            Ok(Line::TooLarge { size, id }) => {
                let err = Error::TooLarge {
                    size,
                    limit: max_message_bytes,
                };
                let _ = tx.send(Message::error(
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

/// The request a `notifications/cancelled` names (its id as sent, so `1.0` cancels `1.0`).
fn cancelled_id(message: &Message) -> Option<Id> {
    if message.method() != Some("notifications/cancelled") {
        return None;
    }
    message.params_id("requestId")
}

/// What [`read_line`] read.
#[derive(Debug, PartialEq)]
enum Line {
    /// The input ended (a last line without a newline is still [`Line::Kept`]).
    End,
    /// A line within the limit, in the buffer.
    Kept,
    /// A line over the limit, discarded as it was read; `id` is its top-level id if it had one.
    TooLarge { size: usize, id: Option<Id> },
}

/// Reads one line into `line` (newline included) if it is at most `limit` bytes; a longer one
/// is read to its end without being kept, scanning for the id its error should carry.
async fn read_line<R: AsyncRead + Unpin>(
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
}
