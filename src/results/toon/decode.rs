//! A decoder of the TOON subset [`super::encode`] writes, for the round-trip tests: every
//! encoded value must decode back to itself. Strict, with the spec's path expansion (§13.4,
//! `expandPaths = "safe"`): an unquoted key of identifiers joined by `.` nests its value
//! (`owner.login: ada` is `{"owner": {"login": "ada"}}`, merged with the other `owner.` keys
//! in the order met); a quoted key is literal; a conflict is an error.

use serde_json::{Map, Value};

struct Line {
    depth: usize,
    text: String,
}

/// `text` as JSON; `None` when it is not TOON of the encoder's subset.
pub(crate) fn decode(text: &str) -> Option<Value> {
    let mut lines: Vec<Line> = Vec::new();
    for raw in text.split('\n') {
        let body = raw.trim_start_matches(' ');
        let spaces = raw.len() - body.len();
        if spaces % 2 != 0 {
            return None;
        }
        lines.push(Line {
            depth: spaces / 2,
            text: body.to_owned(),
        });
    }
    let mut i = 0;
    let value = if lines.first()?.text.starts_with('[') {
        let (key, value) = field(&mut lines, &mut i, 0)?;
        (key.0.is_empty()).then_some(value)?
    } else {
        Value::Object(object(&mut lines, &mut i, 0)?)
    };
    (i == lines.len()).then_some(value)
}

fn object(lines: &mut [Line], i: &mut usize, depth: usize) -> Option<Map<String, Value>> {
    let mut map = Map::new();
    while *i < lines.len() && lines[*i].depth == depth && !is_item(&lines[*i].text) {
        let (key, value) = field(lines, i, depth)?;
        insert(&mut map, key, value)?;
    }
    Some(map)
}

/// A key as written: its text, and whether it was quoted (then never a path).
type Key = (String, bool);

/// Inserts `value` at `key`: a path when it is unquoted and of identifiers joined by `.`
/// (objects on the way merged), else literally; `None` on a conflict or a key given twice.
fn insert(map: &mut Map<String, Value>, (key, quoted): Key, value: Value) -> Option<()> {
    let segments: Vec<&str> = key.split('.').collect();
    let path = !quoted && segments.len() > 1 && segments.iter().all(|s| super::is_identifier(s));
    if !path {
        return map.insert(key, value).is_none().then_some(());
    }
    let (last, parents) = segments.split_last()?;
    let mut node = map;
    for segment in parents {
        node = node
            .entry((*segment).to_owned())
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()?;
    }
    node.insert((*last).to_owned(), value)
        .is_none()
        .then_some(())
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// One field at line `*i` (its key, possibly empty for an array header) and what it holds.
fn field(lines: &mut [Line], i: &mut usize, depth: usize) -> Option<(Key, Value)> {
    let text = lines[*i].text.clone();
    *i += 1;
    let (name, quoted, rest) = key_of(&text)?;
    let key = (name, quoted);
    if let Some(value) = rest.strip_prefix(": ") {
        return Some((key, primitive(value)?));
    }
    if rest == ":" {
        return Some((key, Value::Object(object(lines, i, depth + 1)?)));
    }
    let rest = rest.strip_prefix('[')?;
    let (n, rest) = rest.split_once(']')?;
    let n: usize = n.parse().ok()?;
    if let Some(rest) = rest.strip_prefix('{') {
        let (fields, rest) = rest.split_once("}:")?;
        if !rest.is_empty() {
            return None;
        }
        let names: Option<Vec<Key>> = cells(fields)?
            .iter()
            .map(|f| key_of(f).map(|(name, quoted, _)| (name, quoted)))
            .collect();
        let names = names?;
        let mut rows = Vec::with_capacity(n);
        for _ in 0..n {
            let line = lines.get(*i).filter(|l| l.depth == depth + 1)?;
            let values = cells(&line.text)?;
            *i += 1;
            if values.len() != names.len() {
                return None;
            }
            let mut row = Map::new();
            for (name, v) in names.iter().zip(values) {
                insert(&mut row, name.clone(), primitive(&v)?)?;
            }
            rows.push(Value::Object(row));
        }
        return Some((key, Value::Array(rows)));
    }
    let rest = rest.strip_prefix(':')?;
    if let Some(inline) = rest.strip_prefix(' ') {
        let values: Option<Vec<Value>> = cells(inline)?.iter().map(|c| primitive(c)).collect();
        let values = values?;
        return (values.len() == n).then_some((key, Value::Array(values)));
    }
    if !rest.is_empty() {
        return None;
    }
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(item(lines, i, depth + 1)?);
    }
    Some((key, Value::Array(items)))
}

/// A `- ` item at `depth`: its content is read as if it were at `depth + 1`.
fn item(lines: &mut [Line], i: &mut usize, depth: usize) -> Option<Value> {
    let line = lines.get(*i).filter(|l| l.depth == depth)?;
    if line.text == "-" {
        *i += 1;
        return Some(Value::Object(Map::new()));
    }
    let content = line.text.strip_prefix("- ")?.to_owned();
    if content.starts_with('[') {
        lines[*i] = Line {
            depth: depth + 1,
            text: content,
        };
        return field(lines, i, depth + 1).and_then(|(k, v)| k.0.is_empty().then_some(v));
    }
    let is_field = key_of(&content).is_some_and(|(_, _, rest)| rest.starts_with([':', '[']));
    if !is_field {
        *i += 1;
        return primitive(&content);
    }
    lines[*i] = Line {
        depth: depth + 1,
        text: content,
    };
    Some(Value::Object(object(lines, i, depth + 1)?))
}

/// A key at the start of `text`, whether it was quoted, and what follows it (`:`, `: v`,
/// `[`…); an empty key when `text` starts with `[`.
fn key_of(text: &str) -> Option<(String, bool, &str)> {
    if let Some(body) = text.strip_prefix('"') {
        let end = closing_quote(body)?;
        return Some((unescape(&body[..end])?, true, &body[end + 1..]));
    }
    let end = text.find([':', '[']).unwrap_or(text.len());
    Some((text[..end].to_owned(), false, &text[end..]))
}

/// Where the quote closing a quoted text (after its opening quote) is.
fn closing_quote(body: &str) -> Option<usize> {
    let mut escaped = false;
    for (at, c) in body.char_indices() {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return Some(at),
            _ => {}
        }
    }
    None
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '"' => '"',
            '\\' => '\\',
            _ => return None,
        });
    }
    Some(out)
}

/// `text` split at commas outside quotes (cells keep their quotes).
fn cells(text: &str) -> Option<Vec<String>> {
    let mut out = vec![String::new()];
    let (mut quoted, mut escaped) = (false, false);
    for c in text.chars() {
        match (quoted, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => quoted = !quoted,
            (false, _, ',') => {
                out.push(String::new());
                continue;
            }
            _ => {}
        }
        out.last_mut()?.push(c);
    }
    (!quoted).then_some(out)
}

fn primitive(text: &str) -> Option<Value> {
    if let Some(body) = text.strip_prefix('"') {
        let end = closing_quote(body)?;
        return (end + 1 == body.len()).then(|| unescape(&body[..end]).map(Value::String))?;
    }
    Some(match text {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        _ => match serde_json::from_str::<Value>(text) {
            Ok(n @ Value::Number(_)) => n,
            _ => Value::String(text.to_owned()),
        },
    })
}
