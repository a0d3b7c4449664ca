//! A minimal `text/event-stream` decoder: yields the `data` of each event (and, for the
//! 2024-11-05 HTTP+SSE transport, the event's name when it is not the default `message`).
//!
//! Events with empty data (priming events that carry only `id` and `retry`) are skipped.

/// One event: its name when not `message`, and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// `event:` when it is not `message` (the default), e.g. `endpoint`.
    pub(crate) name: Option<String>,
    /// The `data:` lines, joined by `\n`.
    pub(crate) data: Vec<u8>,
}

/// Incremental SSE decoder.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    buf: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    name: Option<String>,
}

impl SseDecoder {
    /// Feeds bytes; returns the data of every event completed by them.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        self.feed_events(chunk)
            .into_iter()
            .map(|event| event.data)
            .collect()
    }

    /// Feeds bytes; returns every event completed by them, with its name.
    pub(crate) fn feed_events(&mut self, chunk: &[u8]) -> Vec<Event> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                let name = self.name.take();
                if self.has_data && !self.data.trim_ascii().is_empty() {
                    events.push(Event {
                        name,
                        data: std::mem::take(&mut self.data),
                    });
                }
                self.data.clear();
                self.has_data = false;
            } else if let Some(rest) = line.strip_prefix(b"event:") {
                let name = String::from_utf8_lossy(rest.strip_prefix(b" ").unwrap_or(rest));
                self.name = (name != "message").then(|| name.into_owned());
            } else if let Some(rest) = line.strip_prefix(b"data:") {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data
                    .extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
                self.has_data = true;
            }
            // Other fields (id, retry) and comments do not matter to the gateway.
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_priming_and_joins_data_lines_across_chunks() {
        let mut d = SseDecoder::default();
        let mut out = d.feed(b"id: 1\nretry: 5000\ndata: \n\nevent: message\ndata: {\"a\"");
        assert!(out.is_empty());
        out = d.feed(b":1}\r\n\r\ndata: x\ndata: y\n\n");
        assert_eq!(out, vec![b"{\"a\":1}".to_vec(), b"x\ny".to_vec()]);
    }

    #[test]
    fn names_events_other_than_message() {
        let mut d = SseDecoder::default();
        let out = d.feed_events(
            b"event: endpoint\r\ndata: /messages/?session_id=1\r\n\r\nevent: message\ndata: {}\n\ndata: {}\n\n",
        );
        let names: Vec<_> = out.iter().map(|e| e.name.as_deref()).collect();
        assert_eq!(names, [Some("endpoint"), None, None]);
        assert_eq!(out[0].data, b"/messages/?session_id=1");
    }
}
