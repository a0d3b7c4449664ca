//! The top-level `"id"` of a JSON-RPC message read in pieces, without keeping the message.
//!
//! A stdio line over the size limit is discarded as it is read; its error should still name
//! the request it answers, or the client waits for that id until its own timeout. The scanner
//! follows the JSON structure byte by byte (strings, escapes, nesting) and keeps only the key
//! being read at the top level and, once that key is `"id"`, the value's bytes.

use super::Id;

/// Longest id value kept (bytes of its JSON text); a longer one is not an MCP id worth echoing.
const MAX_ID_BYTES: usize = 256;

/// Scans a JSON object fed in chunks for its top-level `"id"`.
///
/// ```
/// use mcp_budget::jsonrpc::{Id, IdScanner};
///
/// let mut scan = IdScanner::default();
/// scan.feed(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"id":"inner","#);
/// scan.feed(br#""arguments":{"text":"\"id\":9"}},"id":42}"#);
/// assert_eq!(scan.id(), Some(Id::Number(42)));
/// ```
#[derive(Debug, Default)]
pub struct IdScanner {
    /// Nesting depth outside the captured value: 1 inside the top-level object.
    depth: u32,
    in_string: bool,
    escape: bool,
    /// At depth 1, the next string is a key (after `{` or `,`).
    expect_key: bool,
    /// The depth-1 string being read is a key.
    reading_key: bool,
    /// The key being read, if it can still be `id`.
    key: Vec<u8>,
    /// The last key read at depth 1 was `"id"`: its value follows the `:`.
    id_key: bool,
    /// Bytes of the id's value, being captured.
    value: Option<Vec<u8>>,
    /// The scan has ended: `Some` when an id was read.
    done: Option<Option<Id>>,
}

impl IdScanner {
    /// Feeds the next bytes of the message. Does nothing once the id is known (or known to be
    /// unreadable).
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.done.is_some() {
                return;
            }
            if self.value.is_some() {
                self.capture(b);
            } else {
                self.step(b);
            }
        }
    }

    /// The top-level id read so far; `None` until it was read whole, or when the message is
    /// not an object, has no `id`, or its `id` is not a string, number or `null`. A number
    /// keeps its exact text ([`Id::RawNumber`] when it is not an `i64`).
    #[must_use]
    pub fn id(&self) -> Option<Id> {
        self.done.clone().flatten()
    }

    fn finish(&mut self, id: Option<Id>) {
        self.done = Some(id);
    }

    /// One byte outside the id's value.
    fn step(&mut self, b: u8) {
        if self.in_string {
            if self.escape {
                self.escape = false;
                if self.reading_key {
                    self.spoil_key(); // a key with an escape is never taken for `id`
                }
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.reading_key {
                    self.reading_key = false;
                    self.id_key = self.key == b"id";
                }
            } else if self.reading_key {
                if self.key.len() < 3 {
                    self.key.push(b);
                } else {
                    self.spoil_key(); // longer than `id`
                }
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                self.reading_key = self.depth == 1 && self.expect_key;
                self.key.clear();
            }
            b'{' | b'[' => {
                if self.depth == 0 && b == b'[' {
                    return self.finish(None); // a batch: no single id
                }
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = true;
                }
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.finish(None); // the object ended without an id
                }
            }
            b':' if self.depth == 1 => {
                self.expect_key = false;
                if std::mem::take(&mut self.id_key) {
                    self.value = Some(Vec::new());
                }
            }
            b',' if self.depth == 1 => self.expect_key = true,
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ if self.depth == 0 => self.finish(None), // not an object
            _ => {}
        }
    }

    /// Makes the key being read one that cannot be `id`, without keeping its bytes.
    fn spoil_key(&mut self) {
        self.key.clear();
        self.key.extend_from_slice(b"---");
    }

    /// One byte of the id's value (a string, number or `null` ends at `,` or `}`).
    fn capture(&mut self, b: u8) {
        let Some(value) = self.value.as_mut() else {
            return;
        };
        if self.in_string {
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
            }
        } else {
            match b {
                b',' | b'}' => {
                    let id = serde_json::from_slice::<Id>(value.trim_ascii()).ok();
                    return self.finish(id);
                }
                b'{' | b'[' => return self.finish(None), // not an id
                b'"' => self.in_string = true,
                _ => {}
            }
        }
        if value.len() >= MAX_ID_BYTES {
            return self.finish(None);
        }
        value.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn scan(text: &[u8]) -> Option<Id> {
        let mut s = IdScanner::default();
        s.feed(text);
        s.id()
    }

    #[test]
    fn reads_the_top_level_id_wherever_it_is() {
        assert_eq!(scan(br#"{"id":1,"method":"x"}"#), Some(Id::Number(1)));
        assert_eq!(
            scan(br#" { "method" : "x" , "id" : "a,b}" } "#),
            Some(Id::String("a,b}".into()))
        );
        assert_eq!(
            scan(br#"{"params":{"id":5,"l":[{"id":6}]},"id":-7}"#),
            Some(Id::Number(-7))
        );
        assert_eq!(
            scan(br#"{"a":"\"id\":3","id":"q\"x"}"#),
            Some(Id::String("q\"x".into()))
        );
        assert_eq!(scan(br#"{"id":null}"#), Some(Id::Null));
    }

    #[test]
    fn no_id_when_there_is_none_to_read() {
        assert_eq!(
            scan(br#"{"method":"notifications/x","params":{"id":1}}"#),
            None
        );
        assert_eq!(scan(br#"[{"id":1}]"#), None);
        assert_eq!(scan(br#"{"id":{"nested":1}}"#), None);
        assert_eq!(scan(br#"{"id":[1]}"#), None);
        assert_eq!(scan(br#"{"idx":1,"xid":2}"#), None);
        assert_eq!(scan(br#"{"\"id":1,"i\u0064":2}"#), None);
        assert_eq!(scan(b"not json at all"), None);
        // The line was cut before the id's value ended.
        assert_eq!(scan(br#"{"id":12"#), None);
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_ID_BYTES));
        assert_eq!(scan(long.as_bytes()), None);
    }

    fn id_strategy() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            "[ -~\\n\"\\\\é]{0,20}".prop_map(Value::from),
        ]
    }

    fn noise() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[ -~\\n\"\\\\{}\\[\\],:]{0,16}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("(id|[a-z\"\\\\]{0,4})", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever surrounds it and however the bytes are cut, the scanner reads the id
        /// serde reads.
        #[test]
        fn agrees_with_serde_in_any_chunking(
            id in id_strategy(),
            params in noise(),
            id_first in any::<bool>(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let msg = if id_first {
                json!({"jsonrpc": "2.0", "id": id, "method": "m", "params": params})
            } else {
                json!({"jsonrpc": "2.0", "method": "m", "params": params, "id": id})
            };
            let text = serde_json::to_vec(&msg).unwrap();
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(text.len() + 1)).collect();
            at.sort_unstable();
            let mut s = IdScanner::default();
            let mut from = 0;
            for cut in at.into_iter().chain([text.len()]) {
                s.feed(&text[from..cut]);
                from = cut;
            }
            let expected: Id = serde_json::from_value(msg["id"].clone()).unwrap();
            prop_assert_eq!(s.id(), Some(expected));
        }

        /// Any JSON number as the id: the scanner reads the id `Message::parse` reads, and it
        /// prints back as the same text.
        #[test]
        fn numbers_keep_their_text(
            number in "-?(0|[1-9][0-9]{0,30})(\\.[0-9]{1,6})?([eE][+-]?[0-9]{1,3})?",
            params in noise(),
            cut in any::<prop::sample::Index>(),
        ) {
            let text = format!(
                r#"{{"jsonrpc":"2.0","method":"m","params":{},"id":{number}}}"#,
                serde_json::to_string(&params).unwrap()
            );
            let parsed = crate::jsonrpc::Message::parse(text.as_bytes()).unwrap().id.unwrap();
            prop_assert_eq!(serde_json::to_string(&parsed).unwrap(), number);
            let at = cut.index(text.len() + 1);
            let mut s = IdScanner::default();
            s.feed(&text.as_bytes()[..at]);
            s.feed(&text.as_bytes()[at..]);
            prop_assert_eq!(s.id(), Some(parsed));
        }
    }
}
