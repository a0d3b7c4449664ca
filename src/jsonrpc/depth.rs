//! How deeply a JSON text nests objects and arrays, in one pass over its bytes.
//!
//! The gateway keeps payloads raw (serde skips them without recursion and without a limit), so
//! nothing on the way stops a client's `arguments` nested a million levels deep from reaching an
//! upstream whose parser recurses. This scan is the gate: a loop over the bytes with a counter,
//! no recursion and no allocation, that stops as soon as the depth passes the limit.

/// The nesting depth of the JSON text `bytes`, counting objects and arrays: a scalar is 0,
/// `{}` and `[]` are 1, `{"a":[1]}` is 2. A JSON-RPC message is an object, so its top level
/// is depth 1 and `params` at depth 2. Brackets inside strings do not count (escapes are
/// followed).
///
/// The scan stops once the depth exceeds `stop_above` and returns `stop_above + 1`, so that
/// refusing a deep message costs what reading `stop_above` levels does; pass `usize::MAX` for
/// the whole depth. Bytes that are not JSON still give a number (the largest count of
/// unclosed brackets seen) and never fail.
///
/// ```
/// use mcp_budget::jsonrpc::nesting_depth;
///
/// assert_eq!(nesting_depth(br#"{"params":{"a":[1,"]]]"]}}"#, usize::MAX), 3);
/// assert_eq!(nesting_depth(&[b'['; 1_000_000], 128), 129);
/// ```
#[must_use]
pub fn nesting_depth(bytes: &[u8], stop_above: usize) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        match b {
            b'{' | b'[' => {
                depth += 1;
                if depth > deepest {
                    deepest = depth;
                    if deepest > stop_above {
                        return deepest;
                    }
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => i = string_end(bytes, i),
            _ => {}
        }
    }
    deepest
}

/// Whether `bytes` may nest deeper than `limit`: whether they hold more than `limit` opening
/// brackets (`{`, `[`, strings included), the most levels they can open. A count the compiler
/// vectorizes, far cheaper than [`nesting_depth`]: most messages are settled by it alone.
#[must_use]
pub(crate) fn may_nest_deeper(bytes: &[u8], limit: usize) -> bool {
    if bytes.len() <= limit {
        return false;
    }
    let mut opening = 0usize;
    // u8 counters per chunk of 255 bytes cannot overflow and let the loop vectorize.
    for chunk in bytes.chunks(255) {
        let n: u8 = chunk
            .iter()
            .map(|&b| u8::from(b == b'{') + u8::from(b == b'['))
            .sum();
        opening += usize::from(n);
    }
    opening > limit
}

/// The index just past the closing quote of the string whose content starts at `i` (or the
/// length, for a string that does not end).
fn string_end(bytes: &[u8], mut i: usize) -> usize {
    while let Some(&b) = bytes.get(i) {
        i += 1;
        match b {
            b'"' => return i,
            // Whatever follows a backslash belongs to the string (`\uXXXX` has no quote in
            // it either).
            b'\\' => i += 1,
            _ => {}
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// The depth by the book: recursion over the parsed value.
    fn real_depth(v: &Value) -> usize {
        match v {
            Value::Array(items) => 1 + items.iter().map(real_depth).max().unwrap_or(0),
            Value::Object(members) => 1 + members.values().map(real_depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    #[test]
    fn counts_objects_and_arrays_and_skips_strings() {
        let depth = |text: &str| nesting_depth(text.as_bytes(), usize::MAX);
        assert_eq!(depth("1"), 0);
        assert_eq!(depth(r#""[{""#), 0);
        assert_eq!(depth("{}"), 1);
        assert_eq!(depth(r#"{"a":[],"b":{}}"#), 2);
        assert_eq!(depth(r#"{"a":"\"[[[","b":["\\",[]]}"#), 3);
        assert_eq!(depth(r#"{"k\"{[":"\u005b"}"#), 1);
        // Not JSON: still a number, never a panic.
        assert_eq!(depth("]]]]{"), 1);
        assert_eq!(depth(r#"["unterminated \"#), 1);
    }

    #[test]
    fn stops_just_past_the_limit() {
        let deep = format!("{}{}", "[".repeat(2_000_000), "]".repeat(2_000_000));
        assert_eq!(nesting_depth(deep.as_bytes(), 128), 129);
        assert_eq!(nesting_depth(deep.as_bytes(), usize::MAX), 2_000_000);
        let at_limit = format!("{}1{}", "{\"a\":".repeat(128), "}".repeat(128));
        assert_eq!(nesting_depth(at_limit.as_bytes(), 128), 128);
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[ -~\\n\"\\\\{}\\[\\]é]{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(24, 96, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z\"\\\\{}\\[\\]]{0,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The scan agrees with the depth of the parsed value, compact or pretty-printed.
        #[test]
        fn agrees_with_the_parsed_value(v in json(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_vec_pretty(&v).unwrap()
            } else {
                serde_json::to_vec(&v).unwrap()
            };
            let depth = real_depth(&v);
            prop_assert_eq!(nesting_depth(&text, usize::MAX), depth);
            if depth > 0 {
                prop_assert_eq!(nesting_depth(&text, depth - 1), depth);
            }
            prop_assert_eq!(nesting_depth(&text, depth), depth);
        }

        /// Any bytes: a result no larger than the count of opening brackets, and no panic; the
        /// quick count never clears what the scan would refuse.
        #[test]
        fn random_bytes_never_panic(
            bytes in prop::collection::vec(
                prop_oneof![Just(b'{'), Just(b'['), Just(b'"'), Just(b'\\'), any::<u8>()],
                0..1024,
            ),
            limit in 0usize..64,
        ) {
            let opens = bytes.iter().filter(|&&b| b == b'{' || b == b'[').count();
            prop_assert!(nesting_depth(&bytes, usize::MAX) <= opens);
            prop_assert!(nesting_depth(&bytes, 3) <= opens.min(4));
            prop_assert_eq!(may_nest_deeper(&bytes, limit), opens > limit);
            if nesting_depth(&bytes, limit) > limit {
                prop_assert!(may_nest_deeper(&bytes, limit));
            }
        }
    }
}
