//! Newline-delimited JSON framing of messages, as both stdio sides of the gateway write it.

use super::message::Message;

/// Queued messages are written together up to about this many bytes.
const WRITE_BATCH: usize = 64 * 1024;

/// Writes the messages of `rx` to `out` as newline-delimited JSON until the channel closes or a
/// write fails: whatever is queued goes out in one write and one flush (stdio peers on both
/// sides of the gateway use it).
pub async fn write_lines<W>(mut rx: tokio::sync::mpsc::UnboundedReceiver<Message>, mut out: W)
where
    W: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    let mut buf = Vec::new();
    while let Some(msg) = rx.recv().await {
        buf.clear();
        push_line(&mut buf, &msg);
        while buf.len() < WRITE_BATCH {
            let Ok(msg) = rx.try_recv() else { break };
            push_line(&mut buf, &msg);
        }
        if out.write_all(&buf).await.is_err() || out.flush().await.is_err() {
            break;
        }
    }
}

/// Appends `msg` as one line of JSON.
pub(crate) fn push_line(buf: &mut Vec<u8>, msg: &Message) {
    serde_json::to_writer(&mut *buf, msg).expect("a message always serializes");
    buf.push(b'\n');
}
