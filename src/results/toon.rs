//! TOON (Token-Oriented Object Notation, spec v3, comma delimiter, two-space indent) for the
//! JSON a tool returns: objects as `key: value` lines, arrays of primitives inline
//! (`tags[3]: a,b,c`), arrays of objects with the same primitive fields as one table
//! (`items[2]{id,name}:` and a row per object), other arrays as `- ` list items.
//!
//! A table's objects may nest objects of the same shape: their fields become dotted columns
//! (`items[2]{id,owner.login,owner.id}:`), which a decoder with the spec's path expansion
//! (§13.4, `expandPaths = "safe"`) nests back — into the same object, in the same key order.
//! Every segment of a dotted column is an identifier (`[A-Za-z_][A-Za-z0-9_]*`); a literal key
//! holding a `.` is always quoted (`"a.b": 1`), so it never reads as a path.
//!
//! Written here rather than taken from a crate: the maintained Rust crates (`toon-format`,
//! `rtoon`, `serde_toon_format`) each pull in their own option types and error enums for a
//! page of code, and what matters here is a guarantee none states: that the text decodes to
//! exactly the JSON given. [`encode`] refuses (returns `None`) whatever it cannot write
//! losslessly — a string with a control character TOON has no escape for, a number in
//! exponent form, an empty root — and the tests decode every output back (a decoder of the
//! same subset, with path expansion, `tests` below) and compare, over generated values too.
//!
//! ```
//! use mcp_budget::results::toon::encode;
//! use serde_json::json;
//!
//! let v = json!({"users": [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Linus"}], "total": 2});
//! assert_eq!(encode(&v).unwrap(), "users[2]{id,name}:\n  1,Ada\n  2,Linus\ntotal: 2");
//! let v = json!([{"id": 1, "owner": {"login": "ada"}}, {"id": 2, "owner": {"login": "lin"}}]);
//! assert_eq!(encode(&v).unwrap(), "[2]{id,owner.login}:\n  1,ada\n  2,lin");
//! ```

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// `value` as TOON, or `None` when it cannot be written so that it decodes back to itself
/// (see the module docs), or is a primitive or empty (nothing to gain).
#[must_use]
pub fn encode(value: &Value) -> Option<String> {
    let mut out = Vec::new();
    match value {
        Value::Object(map) if !map.is_empty() => object_lines(map, 0, &mut out)?,
        Value::Array(items) if !items.is_empty() => field_lines("", items, 0, &mut out)?,
        _ => return None,
    }
    Some(out.join("\n"))
}

/// The lines of `map`'s fields at `depth`.
fn object_lines(map: &Map<String, Value>, depth: usize, out: &mut Vec<String>) -> Option<()> {
    for (key, value) in map {
        let key = key_text(key);
        let pad = "  ".repeat(depth);
        match value {
            Value::Object(inner) => {
                out.push(format!("{pad}{key}:"));
                object_lines(inner, depth + 1, out)?;
            }
            Value::Array(items) => field_lines(&key, items, depth, out)?,
            primitive => out.push(format!("{pad}{key}: {}", primitive_text(primitive)?)),
        }
    }
    Some(())
}

/// An array field (`key` already written as TOON; empty for a root or list-item array).
fn field_lines(key: &str, items: &[Value], depth: usize, out: &mut Vec<String>) -> Option<()> {
    let pad = "  ".repeat(depth);
    let n = items.len();
    if items.iter().all(is_primitive) {
        let cells: Option<Vec<String>> = items.iter().map(primitive_text).collect();
        let cells = cells?.join(",");
        let sep = if cells.is_empty() { "" } else { " " };
        out.push(format!("{pad}{key}[{n}]:{sep}{cells}"));
        return Some(());
    }
    if let Some(columns) = table_columns(items) {
        let header: Vec<String> = columns.iter().map(|path| column_text(path)).collect();
        out.push(format!("{pad}{key}[{n}]{{{}}}:", header.join(",")));
        let row_pad = "  ".repeat(depth + 1);
        for item in items {
            let cells: Option<Vec<String>> = columns
                .iter()
                .map(|path| {
                    let cell = path.iter().try_fold(item, |v, k| v.get(*k))?;
                    primitive_text(cell)
                })
                .collect();
            out.push(format!("{row_pad}{}", cells?.join(",")));
        }
        return Some(());
    }
    out.push(format!("{pad}{key}[{n}]:"));
    for item in items {
        list_item(item, depth + 1, out)?;
    }
    Some(())
}

/// One `- ` item at `depth`: an object's first field goes on the hyphen line, the rest below
/// it at `depth + 1`, as if the object's fields were at `depth + 1`.
fn list_item(item: &Value, depth: usize, out: &mut Vec<String>) -> Option<()> {
    let pad = "  ".repeat(depth);
    let start = out.len();
    match item {
        Value::Object(map) if map.is_empty() => out.push(format!("{pad}-")),
        Value::Object(map) => object_lines(map, depth + 1, out)?,
        Value::Array(items) => field_lines("", items, depth + 1, out)?,
        primitive => {
            out.push(format!("{pad}- {}", primitive_text(primitive)?));
            return Some(());
        }
    }
    if !matches!(item, Value::Object(map) if map.is_empty()) {
        let first = &out[start];
        let inner = "  ".repeat(depth + 1);
        out[start] = format!("{pad}- {}", first.strip_prefix(&inner)?);
    }
    Some(())
}

/// The columns of a table: every item an object whose fields, with those of the objects it
/// nests, are primitives at the same paths in the same order (at least one). A path of more
/// than one key (a nested object's field) has identifiers only, and no nested object is empty.
fn table_columns(items: &[Value]) -> Option<Vec<Vec<&str>>> {
    let mut columns = Vec::new();
    leaf_paths(items.first()?.as_object()?, &mut Vec::new(), &mut columns)?;
    if columns.is_empty() {
        return None;
    }
    for item in &items[1..] {
        let mut paths = Vec::with_capacity(columns.len());
        leaf_paths(item.as_object()?, &mut Vec::new(), &mut paths)?;
        if paths != columns {
            return None;
        }
    }
    Some(columns)
}

/// The paths to `map`'s primitives (after `prefix`); `None` when it holds an array, an empty
/// object, or a nested key that is not an identifier.
fn leaf_paths<'a>(
    map: &'a Map<String, Value>,
    prefix: &mut Vec<&'a str>,
    out: &mut Vec<Vec<&'a str>>,
) -> Option<()> {
    for (key, value) in map {
        if !prefix.is_empty() && !is_identifier(key) {
            return None;
        }
        prefix.push(key);
        match value {
            Value::Array(_) => return None,
            Value::Object(inner) if inner.is_empty() || !is_identifier(key) => return None,
            Value::Object(inner) => leaf_paths(inner, prefix, out)?,
            _ => out.push(prefix.clone()),
        }
        prefix.pop();
    }
    Some(())
}

/// A column's name: a field's key, or a nested field's identifiers joined by `.`.
fn column_text(path: &[&str]) -> String {
    match path {
        [key] => key_text(key),
        _ => path.join("."),
    }
}

/// Whether `key` is a path segment (`[A-Za-z_][A-Za-z0-9_]*`): written bare, and foldable.
pub(crate) fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_primitive(value: &Value) -> bool {
    !matches!(value, Value::Array(_) | Value::Object(_))
}

/// A primitive as TOON: `None` for a string TOON cannot escape or a number in exponent form.
fn primitive_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("null".into()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => {
            let text = n.to_string();
            (!text.contains(['e', 'E'])).then_some(text)
        }
        Value::String(s) => string_text(s),
        _ => None,
    }
}

/// A key: bare when it is an identifier, else quoted — a key holding a `.` too, so that it
/// never reads as a folded path.
fn key_text(key: &str) -> String {
    if is_identifier(key) {
        key.to_owned()
    } else {
        quoted(key).unwrap_or_else(|| format!("{key:?}"))
    }
}

/// A string value: bare unless it could be read as something else.
fn string_text(s: &str) -> Option<String> {
    if needs_quotes(s) {
        quoted(s)
    } else {
        Some(s.to_owned())
    }
}

/// Whether `s` must be quoted to decode as this string (comma delimiter).
pub(crate) fn needs_quotes(s: &str) -> bool {
    s.is_empty()
        || s.trim() != s
        || matches!(s, "true" | "false" | "null")
        || looks_numeric(s)
        || s.starts_with('-')
        || s.contains([':', '"', '\\', '[', ']', '{', '}', ',', '#'])
        || s.chars().any(char::is_control)
}

/// Numbers and number-like words (`05`, `1e3`, `.5`) are quoted when they are strings.
fn looks_numeric(s: &str) -> bool {
    s.parse::<f64>().is_ok()
        || (s.starts_with(|c: char| c.is_ascii_digit() || c == '.')
            && s.chars().all(|c| c.is_ascii_digit() || ".eE+-".contains(c)))
}

/// `"…"` with TOON's five escapes; `None` for another control character (no escape exists).
fn quoted(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => return None,
            c => out.push(c),
        }
    }
    out.push('"');
    Some(out)
}

/// A CSV text (RFC 4180: a header row, then rows of as many cells; quoted cells may hold
/// commas, quotes and line breaks) as one TOON table of strings, or `None` when it is not
/// such a text (fewer than two columns or one row, a column name twice — an object holds a key
/// once —, ragged rows, a stray quote). A column name holding a `.` is quoted, never a path.
#[must_use]
pub fn csv_table(text: &str) -> Option<String> {
    let rows = csv_rows(text)?;
    let (header, body) = rows.split_first()?;
    let repeated = header
        .iter()
        .enumerate()
        .any(|(i, h)| header[..i].contains(h));
    if header.len() < 2
        || repeated
        || body.is_empty()
        || body.iter().any(|r| r.len() != header.len())
    {
        return None;
    }
    let mut out = String::new();
    let keys: Vec<String> = header.iter().map(|k| key_text(k)).collect();
    let _ = write!(out, "[{}]{{{}}}:", body.len(), keys.join(","));
    for row in body {
        let cells: Option<Vec<String>> = row.iter().map(|c| string_text(c)).collect();
        let _ = write!(out, "\n  {}", cells?.join(","));
    }
    Some(out)
}

/// The rows of a CSV text; `None` when a quote is unbalanced or misplaced.
fn csv_rows(text: &str) -> Option<Vec<Vec<String>>> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    let mut rows = vec![Vec::new()];
    let mut cell = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') if cell.is_empty() && !was_quoted => (quoted, was_quoted) = (true, true),
            (false, '"') => return None,
            (false, ',') => {
                rows.last_mut()?.push(std::mem::take(&mut cell));
                was_quoted = false;
            }
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n') => {
                rows.last_mut()?.push(std::mem::take(&mut cell));
                rows.push(Vec::new());
                was_quoted = false;
            }
            (false, c) if was_quoted => {
                let _ = c;
                return None;
            }
            (false, c) => cell.push(c),
        }
    }
    if quoted {
        return None;
    }
    rows.last_mut()?.push(cell);
    Some(rows)
}

#[cfg(test)]
pub(crate) mod decode;
#[cfg(test)]
pub(crate) mod tests_support;

#[cfg(test)]
mod tests;
