//! YAML text as JSON, for `result_format = "toon"`: only a document that is unmistakably YAML
//! data and that JSON (so TOON) holds exactly — anything else is `None` and stays as written.
//!
//! Taken: one block mapping of at least two entries, or one block sequence of at least two
//! mappings of at least two entries each, fully parsed (YAML 1.2, `saphyr-parser`). Scalars
//! read by the 1.2 core schema, where a YAML 1.1 reader would agree: quoted and block scalars
//! are strings; plain `true`/`false`/`null` (and an empty value) are themselves; a plain number
//! only in JSON's own form as JSON writes it back (`42`, `-1.5`); any other plain scalar a
//! string. Refused (the text is left alone): prose and markdown (a scalar or a bullet list at
//! the top, a `#` heading or comment, `**bold**`), tabs, flow collections (`{…}`, `[…]`) at the
//! top, directives, more than one document, anchors and aliases, tags, keys that are not
//! strings, hold a space or are given twice, and plain scalars a reader may take otherwise (`yes`, `~`, `0x1f`,
//! `1e3`, `01`, `.inf`, `1.50`, `True`).
//!
//! ```
//! use mcp_budget::results::yaml::parse;
//! use serde_json::json;
//!
//! let text = "name: mcp-budget\nstars: 42\ntags:\n  - mcp\n  - llm\n";
//! assert_eq!(parse(text), Some(json!({"name": "mcp-budget", "stars": 42, "tags": ["mcp", "llm"]})));
//! assert_eq!(parse("Note: this is a sentence."), None); // one entry: prose
//! assert_eq!(parse("# Title\n\n- one\n- two\n"), None); // markdown
//! ```

use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Map, Number, Value};

/// `text` as the JSON its YAML means, or `None` when it is not YAML this module takes (see
/// the module docs).
#[must_use]
pub fn parse(text: &str) -> Option<Value> {
    let trimmed = text.trim_start();
    if text.contains('\t') || trimmed.starts_with(['{', '[', '%', '-']) && !is_block_start(trimmed)
    {
        return None;
    }
    let mut events = Vec::new();
    for event in Parser::new_from_str(text) {
        events.push(event.ok()?);
    }
    let mut quoted_spans = Vec::new();
    let mut reader = Reader {
        events: events.into_iter(),
        quoted_spans: &mut quoted_spans,
    };
    let value = reader.document()?;
    if has_comment(text, &quoted_spans) {
        return None;
    }
    let data_like = match &value {
        Value::Object(map) => map.len() >= 2,
        Value::Array(items) => {
            items.len() >= 2
                && items
                    .iter()
                    .all(|i| i.as_object().is_some_and(|m| m.len() >= 2))
        }
        _ => false,
    };
    data_like.then_some(value)
}

/// `- ` starting a block sequence, or `---` on its own line starting the document (not a
/// negative number, not `---text`).
fn is_block_start(text: &str) -> bool {
    ["- ", "-\n", "---\n"].iter().any(|p| text.starts_with(p))
}

/// A `#` at the start of a line or after a space, outside quoted and block scalars: a comment,
/// which the parser drops (and markdown's heading).
fn has_comment(text: &str, quoted_spans: &[(usize, usize)]) -> bool {
    let mut previous = '\n';
    for (at, c) in text.chars().enumerate() {
        if c == '#'
            && previous.is_whitespace()
            && !quoted_spans.iter().any(|&(a, b)| a <= at && at < b)
        {
            return true;
        }
        previous = c;
    }
    false
}

struct Reader<'a, I> {
    events: I,
    /// Character ranges of the quoted and block scalars met.
    quoted_spans: &'a mut Vec<(usize, usize)>,
}

impl<'input, I: Iterator<Item = (Event<'input>, Span)>> Reader<'_, I> {
    /// The stream: exactly one document, implicit or `---`, and nothing after it.
    fn document(&mut self) -> Option<Value> {
        matches!(self.events.next()?.0, Event::StreamStart).then_some(())?;
        matches!(self.events.next()?.0, Event::DocumentStart(_)).then_some(())?;
        let (first, span) = self.events.next()?;
        let value = match first {
            Event::MappingStart(0, None) | Event::SequenceStart(0, None) => {
                self.node(first, span)?
            }
            _ => return None,
        };
        matches!(self.events.next()?.0, Event::DocumentEnd).then_some(())?;
        matches!(self.events.next()?.0, Event::StreamEnd).then_some(())?;
        self.events.next().is_none().then_some(value)
    }

    /// One node from its first event; `None` for an anchor, alias, tag or another refusal.
    fn node(&mut self, event: Event<'input>, span: Span) -> Option<Value> {
        match event {
            Event::Scalar(text, style, 0, None) => {
                if style != ScalarStyle::Plain {
                    self.quoted_spans
                        .push((span.start.index(), span.end.index()));
                }
                scalar(&text, style)
            }
            Event::SequenceStart(0, None) => {
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.events.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        return Some(Value::Array(items));
                    }
                    items.push(self.node(event, span)?);
                }
            }
            Event::MappingStart(0, None) => self.mapping(),
            _ => None,
        }
    }

    /// A mapping's entries after its start: string keys without spaces, each once.
    fn mapping(&mut self) -> Option<Value> {
        let mut map = Map::new();
        loop {
            let (event, span) = self.events.next()?;
            let key = match event {
                Event::MappingEnd => return Some(Value::Object(map)),
                Event::Scalar(..) => self.node(event, span)?,
                _ => return None,
            };
            // A key with a space is a sentence's start ("Contents of …:"), not data.
            let Value::String(key) = key else {
                return None;
            };
            if key.is_empty() || key.contains(char::is_whitespace) {
                return None;
            }
            let (event, span) = self.events.next()?;
            let value = self.node(event, span)?;
            if map.insert(key, value).is_some() {
                return None;
            }
        }
    }
}

/// A scalar as JSON by the rules in the module docs; `None` for a plain scalar that readers
/// may take differently.
fn scalar(text: &str, style: ScalarStyle) -> Option<Value> {
    if style != ScalarStyle::Plain {
        return Some(Value::String(text.to_owned()));
    }
    match text {
        "" | "null" => return Some(Value::Null),
        "true" => return Some(Value::Bool(true)),
        "false" => return Some(Value::Bool(false)),
        _ => {}
    }
    if let Ok(number) = text.parse::<Number>() {
        // Only what JSON writes back byte for byte (no `1.50`, `1e3`, `-0`, 20-digit ints).
        return (number.to_string() == text && !text.contains(['e', 'E']))
            .then_some(Value::Number(number));
    }
    (!read_otherwise(text)).then(|| Value::String(text.to_owned()))
}

/// A plain scalar that is not JSON's number yet that a YAML 1.1 or 1.2 reader takes for a
/// boolean, null or number (`yes`, `~`, `+1`, `.5`, `1e3`, `.inf`, `0x1f`, `012`, `1_000`,
/// `1:20`, `True`). Dates, versions (`1.2.3`) and other words are strings to both.
fn read_otherwise(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let body = lower.strip_prefix(['-', '+']).unwrap_or(&lower);
    let digits_and = |extra: &str| {
        body.starts_with(|c: char| c.is_ascii_digit())
            && body
                .chars()
                .all(|c| c.is_ascii_digit() || extra.contains(c))
    };
    matches!(
        lower.as_str(),
        "~" | "yes" | "no" | "on" | "off" | "y" | "n" | "true" | "false" | "null"
    ) || lower.parse::<f64>().is_ok()
        || lower.starts_with(['+', '.'])
        || body.starts_with('.')
        || (body.starts_with('0') && body.len() > 1 && !body.starts_with("0."))
        || (digits_and("_.") && body.contains('_'))
        || (digits_and(":") && body.contains(':'))
}

#[cfg(test)]
mod tests;
