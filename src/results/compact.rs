//! Lossless compaction of a `tools/call` result's text blocks.
//!
//! Each text block is rendered anew only when the rendering is lossless and counts fewer
//! tokens: with `json`, JSON text loses its whitespace (outside strings; every other byte
//! kept); with `toon`, JSON becomes TOON when that is smaller still (numbers and keys checked
//! against the original text, so `1.50`, `1e3` or a duplicated key keep it JSON), CSV a
//! TOON table, and YAML data ([`super::yaml`]: only what is unmistakably YAML) TOON. A `structuredContent` mirrored as text is compacted like any text (the
//! structured copy is left for programs). `isError` results and text that does not parse are
//! left alone.
//!
//! ```
//! use mcp_budget::results::{ResultFormat, compact_result};
//! use serde_json::json;
//!
//! let chars = |t: &str| t.len();
//! let text = "[\n  {\"id\": 1, \"name\": \"Ada\"},\n  {\"id\": 2, \"name\": \"Linus\"}\n]";
//! let mut result = json!({"content": [{"type": "text", "text": text}]});
//! let c = compact_result(&mut result, ResultFormat::Toon, &chars).unwrap();
//! assert_eq!(result["content"][0]["text"], "[2]{id,name}:\n  1,Ada\n  2,Linus");
//! assert!(c.after < c.before);
//! ```

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

/// How a tool's text results are rendered (`result_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum ResultFormat {
    /// As the upstream wrote them.
    #[default]
    Off,
    /// JSON minified.
    Json,
    /// JSON minified or as TOON, CSV as a TOON table, YAML data as TOON: whichever counts
    /// fewest tokens.
    Toon,
}

impl FromStr for ResultFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            "json" => Ok(Self::Json),
            "toon" => Ok(Self::Toon),
            other => Err(format!(
                "unknown result_format {other:?}: expected off, json or toon"
            )),
        }
    }
}

impl fmt::Display for ResultFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Off => "off",
            Self::Json => "json",
            Self::Toon => "toon",
        })
    }
}

/// What a compaction saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// Tokens of the text blocks before.
    pub before: usize,
    /// Tokens of the text blocks after.
    pub after: usize,
}

/// Compacts the text blocks of `result` (a `tools/call` result) in place; `None` (and
/// `result` untouched) when nothing got smaller, `format` is off or the result is an error.
pub fn compact_result(
    result: &mut Value,
    format: ResultFormat,
    count: &dyn Fn(&str) -> usize,
) -> Option<Compaction> {
    if format == ResultFormat::Off || result.get("isError").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let blocks = result.get_mut("content")?.as_array_mut()?;
    let (mut before, mut after, mut changed) = (0, 0, false);
    for block in blocks {
        let Some(text) = block.get("text").and_then(Value::as_str) else {
            continue;
        };
        let tokens = count(text);
        before += tokens;
        match compact_text(text, format, count) {
            Some((smaller, n)) if n < tokens => {
                block["text"] = Value::String(smaller);
                after += n;
                changed = true;
            }
            _ => after += tokens,
        }
    }
    changed.then_some(Compaction { before, after })
}

/// The smallest lossless rendering of `text` under `format`, with its tokens; `None` when
/// there is none (not JSON nor CSV, or `format` is off). It may not be smaller than `text`.
#[must_use]
pub fn compact_text(
    text: &str,
    format: ResultFormat,
    count: &dyn Fn(&str) -> usize,
) -> Option<(String, usize)> {
    if format == ResultFormat::Off {
        return None;
    }
    let Some((value, minified)) = parse_json(text) else {
        if let Some((preamble, rest)) = after_preamble(text, format) {
            let (body, _) = compact_text(rest, format, count)?;
            let whole = format!("{preamble}\n{body}");
            let n = count(&whole);
            return Some((whole, n));
        }
        if format == ResultFormat::Toon {
            let toon = super::toon::csv_table(text)
                .or_else(|| super::yaml::parse(text).and_then(|v| super::toon::encode(&v)))?;
            let n = count(&toon);
            return Some((toon, n));
        }
        return None;
    };
    let exact = format == ResultFormat::Toon && minified.exact(&value);
    let mut best = (minified.text, 0);
    best.1 = count(&best.0);
    if exact {
        if let Some(toon) = super::toon::encode(&value) {
            let n = count(&toon);
            if n < best.1 {
                best = (toon, n);
            }
        }
    }
    Some(best)
}

/// A few lines of prose before one JSON document, or (with `toon`) a YAML one
/// (`Contents of URL:` and the document, as `fetch` writes): the prose (kept as written) and
/// the document.
fn after_preamble(text: &str, format: ResultFormat) -> Option<(&str, &str)> {
    let mut at = 0;
    for _ in 0..4 {
        at += text[at..].find('\n')? + 1;
        let rest = &text[at..];
        let json = rest.trim_start().starts_with(['{', '[']) && parse_json(rest).is_some();
        if json || format == ResultFormat::Toon && super::yaml::parse(rest).is_some() {
            return Some((&text[..at - 1], rest));
        }
    }
    None
}

/// `text` parsed, and minified; `None` when it is not one JSON object or array.
fn parse_json(text: &str) -> Option<(Value, Minified)> {
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return None;
    }
    let value: Value = serde_json::from_str(trimmed).ok()?;
    Some((value, minify(trimmed)))
}

/// JSON text without whitespace outside strings, with what a lossless re-encoding must match.
struct Minified {
    text: String,
    /// Number tokens as written, in order.
    numbers: Vec<String>,
    /// Object members written (a `:` outside strings each).
    members: usize,
}

impl Minified {
    /// Whether `value` (parsed from the same text) holds exactly what was written: the same
    /// number of members (no key given twice) and every number as written.
    fn exact(&self, value: &Value) -> bool {
        let mut numbers = Vec::new();
        let members = walk(value, &mut numbers);
        members == self.members && numbers == self.numbers
    }
}

/// Members of the objects in `value`, and its numbers as serde writes them, in order.
fn walk(value: &Value, numbers: &mut Vec<String>) -> usize {
    match value {
        Value::Number(n) => {
            numbers.push(n.to_string());
            0
        }
        Value::Array(items) => items.iter().map(|v| walk(v, numbers)).sum(),
        Value::Object(map) => map.len() + map.values().map(|v| walk(v, numbers)).sum::<usize>(),
        _ => 0,
    }
}

/// Minifies well-formed JSON text (a lexer pass: strings are copied byte for byte).
fn minify(text: &str) -> Minified {
    let mut out = String::with_capacity(text.len());
    let (mut numbers, mut members) = (Vec::new(), 0);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push('"');
                let mut escaped = false;
                for c in chars.by_ref() {
                    out.push(c);
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        _ => {}
                    }
                }
            }
            ' ' | '\t' | '\n' | '\r' => {}
            '-' | '0'..='9' => {
                let mut number = String::from(c);
                while let Some(&d) = chars.peek() {
                    if !(d.is_ascii_digit() || "+-.eE".contains(d)) {
                        break;
                    }
                    number.push(d);
                    chars.next();
                }
                out.push_str(&number);
                numbers.push(number);
            }
            ':' => {
                members += 1;
                out.push(c);
            }
            c => out.push(c),
        }
    }
    Minified {
        text: out,
        numbers,
        members,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chars(t: &str) -> usize {
        t.len()
    }

    #[test]
    fn json_is_minified_byte_for_byte_outside_strings() {
        let text = "{ \"a\" : [1, 2.50, -3e2],\n \"s\": \"keep  this\\\" : too\" }";
        let (out, _) = compact_text(text, ResultFormat::Json, &chars).unwrap();
        assert_eq!(out, "{\"a\":[1,2.50,-3e2],\"s\":\"keep  this\\\" : too\"}");
    }

    #[test]
    fn numbers_or_keys_a_reencoding_would_change_keep_it_json() {
        for text in [
            "[{\"a\": 1.50}, {\"a\": 2}]",
            "{\"k\": 1, \"k\": 2, \"x\": [1,2]}",
        ] {
            let (out, _) = compact_text(text, ResultFormat::Toon, &chars).unwrap();
            assert!(out.starts_with(['{', '[']), "{out}");
        }
    }

    #[test]
    fn errors_prose_and_broken_json_are_untouched() {
        let big = "[\n  {\"id\": 1},\n  {\"id\": 2}\n]";
        let mut error = json!({"isError": true, "content": [{"type": "text", "text": big}]});
        assert_eq!(compact_result(&mut error, ResultFormat::Toon, &chars), None);
        for text in [
            "plain words, nothing to do",
            "{\"a\": 1",
            "[1, 2] trailing",
            "a\n[1,",
        ] {
            let mut r = json!({"content": [{"type": "text", "text": text}]});
            let before = r.clone();
            assert_eq!(compact_result(&mut r, ResultFormat::Toon, &chars), None);
            assert_eq!(r, before);
        }
    }

    #[test]
    fn a_rendering_is_used_only_when_it_counts_fewer_tokens() {
        // Already minimal: nothing changes, no compaction reported.
        let mut r = json!({"content": [{"type": "text", "text": "{\"a\":1}"}]});
        assert_eq!(compact_result(&mut r, ResultFormat::Json, &chars), None);
        let mut r = json!({"content": [
            {"type": "text", "text": "{\n \"rows\": [{\"x\": 1, \"y\": 2}, {\"x\": 3, \"y\": 4}]\n}"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
        ], "structuredContent": {"rows": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}});
        let c = compact_result(&mut r, ResultFormat::Toon, &chars).unwrap();
        assert_eq!(r["content"][0]["text"], "rows[2]{x,y}:\n  1,2\n  3,4");
        assert_eq!(r["content"][1]["type"], "image");
        assert_eq!(r["structuredContent"]["rows"][1]["y"], 4);
        assert_eq!(c.after, chars("rows[2]{x,y}:\n  1,2\n  3,4"));
    }

    #[test]
    fn yaml_becomes_toon_when_smaller_and_prose_or_markdown_stay_as_written() {
        let yaml = "Contents of http://x/pods.yaml:\nitems:\n  - name: web-1\n    status:\n      phase: Running\n  - name: web-2\n    status:\n      phase: Pending\nkind: PodList\n";
        let (out, _) = compact_text(yaml, ResultFormat::Toon, &chars).unwrap();
        assert_eq!(
            out,
            "Contents of http://x/pods.yaml:\nitems[2]{name,status.phase}:\n  web-1,Running\n  web-2,Pending\nkind: PodList"
        );
        assert_eq!(compact_text(yaml, ResultFormat::Json, &chars), None);
        for text in [
            "Summary: all good.\nDetails: nothing to report.",
            "# Release notes\n\n- fixed: a bug\n- added: a flag\n",
            "Content type text/plain cannot be simplified, but here is the raw content:\nContents of http://x/a.txt:\nJust words: more words.",
        ] {
            let mut r = json!({"content": [{"type": "text", "text": text}]});
            assert_eq!(
                compact_result(&mut r, ResultFormat::Toon, &chars),
                None,
                "{text}"
            );
        }
    }

    #[test]
    fn prose_before_a_json_document_is_kept_and_the_document_compacted() {
        let text = "Contents of http://x/r.json:\n[\n  {\"a\": 1},\n  {\"a\": 2}\n]";
        let (out, _) = compact_text(text, ResultFormat::Toon, &chars).unwrap();
        assert_eq!(out, "Contents of http://x/r.json:\n[2]{a}:\n  1\n  2");
    }

    proptest::proptest! {
        /// Whatever the compaction writes means the same JSON as the original.
        #[test]
        fn compacted_json_means_the_same(v in crate::results::toon::tests_support::json_value()) {
            let text = serde_json::to_string_pretty(&v).unwrap();
            if let Some((out, _)) = compact_text(&text, ResultFormat::Toon, &chars) {
                let back = if out.starts_with(['{', '[']) && serde_json::from_str::<Value>(&out).is_ok() {
                    serde_json::from_str::<Value>(&out).ok()
                } else {
                    crate::results::toon::decode::decode(&out)
                };
                proptest::prop_assert_eq!(back, Some(v));
            }
        }
    }
}
