//! A minimal `text/event-stream` decoder: yields the `data` of each event.
//!
//! Events with empty data (priming events that carry only `id` and `retry`) are skipped.

/// Incremental SSE decoder.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    buf: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
}

impl SseDecoder {
    /// Feeds bytes; returns the data of every event completed by them.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                if self.has_data && !self.data.trim_ascii().is_empty() {
                    events.push(std::mem::take(&mut self.data));
                }
                self.data.clear();
                self.has_data = false;
            } else if let Some(rest) = line.strip_prefix(b"data:") {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data
                    .extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
                self.has_data = true;
            }
            // Other fields (id, event, retry) and comments do not matter to the gateway.
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
}
