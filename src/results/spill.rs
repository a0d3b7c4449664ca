//! Budgets with recovery: a result over its `max_result_tokens` keeps a head of its text and a
//! structural summary (counts, keys, sizes); the whole of it is kept in the session's
//! [`super::ResultStore`] and the `read_result` meta-tool reads the rest, a page at a time, by
//! character offset, or selected by a JSON pointer or a substring. The note at the end of the
//! shortened result says exactly how.
//!
//! ```
//! use mcp_budget::results::{Read, ResultFormat, Stored, read_page, spill_result};
//! use serde_json::json;
//!
//! let words = |t: &str| t.split_whitespace().count();
//! let text: String = (0..40).map(|i| format!("line {i}\n")).collect();
//! let mut result = json!({"content": [{"type": "text", "text": text}]});
//! let spill = spill_result(&result, 60, &words).expect("over budget");
//! spill.head_into(&mut result, "r1", 60, &words);
//! assert!(result["content"][0]["text"].as_str().unwrap().starts_with("line 0\nline 1\n"));
//! let stored = Stored::new("files__read", spill, 60, ResultFormat::Off);
//! let page = read_page(&stored, "r1", &Read { offset: 70, ..Read::default() }, &words).unwrap();
//! assert!(page["content"][0]["text"].as_str().unwrap().starts_with("line 10\n"));
//! ```

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::compact::{ResultFormat, compact_text};

/// The default name of the meta-tool that reads kept results.
pub const READ_RESULT: &str = "read_result";

/// A result too long for its budget: all of its text, and its JSON when it has some.
#[derive(Debug, Clone, PartialEq)]
pub struct Spill {
    /// The text blocks, joined by line breaks.
    pub text: String,
    /// `structuredContent`, or the text parsed when it is JSON.
    pub json: Option<Value>,
    /// Tokens of `text` (and of `structuredContent` when that was dropped).
    pub total: usize,
}

/// The whole of `result` when its text (with a `structuredContent` that would not fit) is
/// over `max` tokens; `None` when it fits or has no text.
pub fn spill_result(result: &Value, max: usize, count: &dyn Fn(&str) -> usize) -> Option<Spill> {
    let blocks = result.get("content")?.as_array()?;
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        return None;
    }
    let text = texts.join("\n");
    let total = count(&text);
    if total <= max {
        return None;
    }
    let structured = result.get("structuredContent").cloned();
    let json = structured.or_else(|| serde_json::from_str(text.trim()).ok());
    Some(Spill { text, json, total })
}

impl Spill {
    /// Rewrites `result` to the head of the text that fits `max` tokens with the summary and
    /// the note naming `id`; other blocks (images, resources) are kept, `structuredContent`
    /// dropped (it is kept whole with the rest). Returns the tokens of the head.
    pub fn head_into(
        &self,
        result: &mut Value,
        id: &str,
        max: usize,
        count: &dyn Fn(&str) -> usize,
    ) -> usize {
        let len = self.text.chars().count();
        let summary = self.json.as_ref().map_or_else(
            || {
                format!(
                    "text, {} lines, {len} characters",
                    self.text.lines().count()
                )
            },
            describe,
        );
        let draft = note(id, 0, len, self.total, self.total, &summary);
        let room = max.saturating_sub(count(&draft));
        let head = crate::plan::result::longest_prefix(&self.text, room, count);
        let shown = count(head);
        let end = head.chars().count();
        let note = note(id, shown, end, len, self.total, &summary);
        let Some(object) = result.as_object_mut() else {
            return shown;
        };
        let mut content: Vec<Value> = object
            .get("content")
            .and_then(Value::as_array)
            .map(|b| {
                b.iter()
                    .filter(|b| b.get("text").is_none())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        if !head.is_empty() {
            content.insert(0, json!({"type": "text", "text": head}));
        }
        content.push(json!({"type": "text", "text": note}));
        object.insert("content".into(), Value::Array(content));
        object.remove("structuredContent");
        shown
    }
}

/// The note ending a shortened result.
fn note(id: &str, shown: usize, end: usize, len: usize, total: usize, summary: &str) -> String {
    format!(
        "[… {shown} of {total} tokens shown (characters 0–{end} of {len}). The whole result is \
         kept: call {READ_RESULT} with {{\"id\":\"{id}\",\"offset\":{end}}} for the next page, or \
         with \"pointer\" (a JSON pointer, e.g. \"/items/3\") or \"contains\" (a substring) to \
         select part of it. Structure: {summary}]"
    )
}

/// A short structural summary of `value`: kinds, counts, keys and sizes.
fn describe(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut out = format!("object, {} keys:", map.len());
            for (i, (key, v)) in map.iter().enumerate() {
                if i == 12 {
                    out.push_str(" …");
                    break;
                }
                let sep = if i == 0 { " " } else { "; " };
                let _ = write!(out, "{sep}{key} ({})", shape(v));
            }
            out
        }
        other => shape(other),
    }
}

/// One value's kind and size.
fn shape(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let keys = items.first().and_then(Value::as_object).map(|o| {
                let mut k: Vec<&str> = o.keys().map(String::as_str).take(10).collect();
                if o.len() > 10 {
                    k.push("…");
                }
                k.join(",")
            });
            match keys {
                Some(keys) => format!("array of {} objects {{{keys}}}", items.len()),
                None => format!("array of {}", items.len()),
            }
        }
        Value::Object(map) => format!("object, {} keys", map.len()),
        Value::String(s) => format!("string, {} characters", s.chars().count()),
        Value::Number(_) => "number".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Null => "null".into(),
    }
}

/// A `read_result` call's arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Read {
    /// Character offset into the (selected) text.
    pub offset: usize,
    /// A JSON pointer selecting part of a JSON result.
    pub pointer: Option<String>,
    /// Only lines (or array items) containing this text, ignoring case.
    pub contains: Option<String>,
}

/// Why a `read_result` call cannot be answered (said to the model as an error result).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The arguments are not `{id, offset?, pointer?, contains?}`.
    #[error("{0}")]
    Arguments(String),
    /// No result is kept under that id for this session (never, expired or evicted).
    #[error("no result {0:?} is kept for this session (kept results expire; call the tool again)")]
    Unknown(String),
    /// A pointer into a result that is not JSON, or that selects nothing.
    #[error("{0}")]
    Pointer(String),
}

impl Read {
    /// The arguments of a `read_result` call: its `id` and what to read.
    ///
    /// # Errors
    /// [`ReadError::Arguments`] when `id` is missing or a field has the wrong type.
    pub fn of(arguments: &Value) -> Result<(String, Self), ReadError> {
        let bad = |m: &str| ReadError::Arguments(m.to_owned());
        let id = arguments
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("id (a string) is required"))?;
        let offset = match arguments.get("offset") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_u64()
                .and_then(|o| usize::try_from(o).ok())
                .ok_or_else(|| bad("offset must be a non-negative integer"))?,
        };
        let text = |key: &str| match arguments.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ReadError::Arguments(format!("{key} must be a string"))),
        };
        let read = Self {
            offset,
            pointer: text("pointer")?,
            contains: text("contains")?,
        };
        Ok((id.to_owned(), read))
    }
}

/// One page of `stored` (kept as `id`): what `read` selects, from its offset, as many tokens
/// as the tool's budget; a note says where the page ends and how to read the next one.
///
/// # Errors
/// [`ReadError::Pointer`] for a pointer into a result that is not JSON or selects nothing.
pub fn read_page(
    stored: &Stored,
    id: &str,
    read: &Read,
    count: &dyn Fn(&str) -> usize,
) -> Result<Value, ReadError> {
    let selected = select(stored, read, count)?;
    let len = selected.chars().count();
    let start = selected
        .char_indices()
        .nth(read.offset)
        .map_or(selected.len(), |(at, _)| at);
    let rest = &selected[start..];
    let mut page = crate::plan::result::longest_prefix(rest, stored.budget, count);
    if page.is_empty() && !rest.is_empty() {
        // One character over the budget still moves the reader on.
        page = &rest[..rest.chars().next().map_or(0, char::len_utf8)];
    }
    let end = read.offset.min(len) + page.chars().count();
    let mut next = json!({"id": id, "offset": end});
    for (key, value) in [("pointer", &read.pointer), ("contains", &read.contains)] {
        if let Some(v) = value {
            next[key] = Value::String(v.clone());
        }
    }
    let footer = if end >= len {
        format!(
            "[characters {}–{end} of {len}: the end]",
            read.offset.min(len)
        )
    } else {
        format!(
            "[characters {}–{end} of {len}; next page: {READ_RESULT} {next}]",
            read.offset
        )
    };
    Ok(json!({"content": [
        {"type": "text", "text": page},
        {"type": "text", "text": footer},
    ]}))
}

/// The text `read` selects of `stored`: all of it, the value at a pointer, the lines (or
/// array items) containing a substring.
fn select(
    stored: &Stored,
    read: &Read,
    count: &dyn Fn(&str) -> usize,
) -> Result<String, ReadError> {
    let mut value = match (&read.pointer, &stored.json) {
        (None, _) => None,
        (Some(p), Some(json)) => Some(json.pointer(p).cloned().ok_or_else(|| {
            ReadError::Pointer(format!("nothing at pointer {p:?} ({})", describe(json)))
        })?),
        (Some(_), None) => {
            return Err(ReadError::Pointer(
                "this result is not JSON: read it by offset or contains".into(),
            ));
        }
    };
    let needle = read.contains.as_deref().map(str::to_lowercase);
    if let Some(needle) = &needle {
        let array = value
            .as_ref()
            .or(stored.json.as_ref())
            .and_then(Value::as_array);
        if let Some(items) = array {
            let hits = items
                .iter()
                .filter(|v| v.to_string().to_lowercase().contains(needle.as_str()))
                .cloned()
                .collect();
            value = Some(Value::Array(hits));
        } else if value.is_none() {
            let lines: Vec<&str> = stored
                .text
                .lines()
                .filter(|l| l.to_lowercase().contains(needle.as_str()))
                .collect();
            return Ok(lines.join("\n"));
        }
    }
    Ok(match value {
        None => stored.text.clone(),
        Some(Value::String(s)) => s,
        Some(v) => {
            let pretty = v.to_string();
            compact_text(&pretty, stored.format.max(ResultFormat::Json), count)
                .map_or(pretty, |c| c.0)
        }
    })
}

/// The `read_result` meta-tool's definition, named `name`.
#[must_use]
pub fn read_definition(name: &str) -> Value {
    json!({
        "name": name,
        "description": "Read more of a tool result that was too long to show whole (its note gives the id): the next page by offset, or the part a JSON pointer or a substring selects.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The id the result's note gives"},
                "offset": {"type": "integer", "description": "Character to start at (default 0)"},
                "pointer": {"type": "string", "description": "JSON pointer into the result, e.g. /items/3"},
                "contains": {"type": "string", "description": "Only lines (or array items) containing this text"}
            },
            "required": ["id"]
        }
    })
}

#[cfg(test)]
mod tests;

/// One kept result.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The exposed name of the tool that returned it (a reader must be allowed to call it).
    pub tool: String,
    /// Its text (the compacted rendering, when one was used).
    pub text: String,
    /// Its JSON (for pointers and item filters).
    pub json: Option<Value>,
    /// Tokens a page may hold: the tool's `max_result_tokens`.
    pub budget: usize,
    /// How pointer selections are rendered.
    pub format: ResultFormat,
    bytes: usize,
}

impl Stored {
    /// `spill` of tool `tool`, read `budget` tokens a page.
    #[must_use]
    pub fn new(tool: &str, spill: Spill, budget: usize, format: ResultFormat) -> Self {
        let json_bytes = spill.json.as_ref().map_or(0, |j| j.to_string().len());
        Self {
            tool: tool.to_owned(),
            bytes: spill.text.len() + json_bytes + tool.len(),
            text: spill.text,
            json: spill.json,
            budget: budget.max(1),
            format,
        }
    }

    /// The bytes it counts against the limits.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Its text as the replicas share it (`[state]`, [`crate::state::results`]): a JSON
    /// object, the JSON left out when it is the text parsed (read back by parsing again).
    #[must_use]
    pub fn to_shared(&self) -> String {
        let parsed = || serde_json::from_str::<Value>(self.text.trim()).ok();
        let from_text = self.json.is_some() && parsed() == self.json;
        json!({
            "tool": self.tool,
            "text": self.text,
            "json": if from_text { &Value::Null } else { self.json.as_ref().unwrap_or(&Value::Null) },
            "json_from_text": from_text,
            "budget": self.budget,
            "format": self.format.to_string(),
        })
        .to_string()
    }

    /// A result [`Stored::to_shared`] wrote, or `None` when `shared` is not one.
    #[must_use]
    pub fn from_shared(shared: &str) -> Option<Self> {
        let doc: Value = serde_json::from_str(shared).ok()?;
        let text = doc.get("text")?.as_str()?.to_owned();
        let json = if doc.get("json_from_text")?.as_bool()? {
            Some(serde_json::from_str(text.trim()).ok()?)
        } else {
            doc.get("json").filter(|j| !j.is_null()).cloned()
        };
        let spill = Spill {
            text,
            json,
            total: 0,
        };
        let tool = doc.get("tool")?.as_str()?;
        let budget = usize::try_from(doc.get("budget")?.as_u64()?).ok()?;
        let format = doc.get("format")?.as_str()?.parse().ok()?;
        Some(Self::new(tool, spill, budget, format))
    }
}
