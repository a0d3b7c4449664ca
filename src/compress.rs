//! Description compression levels, each a pure function tool → tool.
//!
//! # Contract
//!
//! Compression only ever rewrites *annotations meant for the model*: the tool's `description`
//! and, inside its schemas, the `description`, `title`, `examples`, `$comment` and `$schema`
//! keywords. **No level removes or changes a property, a type, `required`, `enum`, `const`,
//! `default`, a bound, a pattern, `additionalProperties` or any other constraint**, nor any key
//! of the tool object other than `description` (`name`, `annotations`, `outputSchema`, `_meta`
//! and unknown keys pass through; `title` is dropped when it merely repeats the name).
//!
//! | level | tool description | parameter descriptions | schema annotations |
//! |---|---|---|---|
//! | [`Level::Off`] | as given | as given | as given |
//! | [`Level::Low`] | all meaning kept; markdown, repeated whitespace, boilerplate openers and `Args:` sections that repeat the schema dropped | cleaned the same way | `$schema`, `$comment`, titles equal to the tool or property name dropped |
//! | [`Level::Medium`] | the first paragraph | the first sentence, at most 80 characters | `title`, `examples` dropped too |
//! | [`Level::High`] | one line (the first sentence, at most 100 characters) | dropped | dropped |
//! | [`Level::Extreme`] | a few words (at most 6 words, 40 characters) | dropped | dropped |
//!
//! The same levels shape [`catalog_line`], the one-line entry of a deferred tool.
//!
//! ```
//! use mcp_budget::compress::{compress, Level};
//! use serde_json::json;
//!
//! let tool = json!({
//!     "name": "get_weather",
//!     "description": "## Weather\n\nGet the **current** weather for a city.\n\nReturns JSON.",
//!     "inputSchema": {"type": "object", "properties": {
//!         "city": {"type": "string", "description": "City name. Example: Paris"},
//!         "unit": {"type": "string", "enum": ["c", "f"]}
//!     }, "required": ["city"]}
//! });
//! let tool = tool.as_object().unwrap();
//! let low = compress(tool, Level::Low);
//! assert_eq!(low["description"], "Weather:\nGet the current weather for a city.\n\nReturns JSON.");
//! let medium = compress(tool, Level::Medium);
//! assert_eq!(medium["description"], "Get the current weather for a city.");
//! let high = compress(tool, Level::High);
//! assert_eq!(high["description"], "Get the current weather for a city.");
//! assert!(high["inputSchema"]["properties"]["city"].get("description").is_none());
//! assert_eq!(high["inputSchema"]["properties"]["unit"]["enum"], json!(["c", "f"]));
//! ```

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// How much of a tool's prose is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Level {
    /// The definition as the upstream gave it.
    #[default]
    Off,
    /// All meaning kept, noise dropped.
    Low,
    /// First paragraph, short parameter descriptions.
    Medium,
    /// One line per tool, no parameter descriptions.
    High,
    /// The name and a few words.
    Extreme,
}

impl Level {
    /// Every level, least lossy first.
    pub const ALL: [Self; 5] = [
        Self::Off,
        Self::Low,
        Self::Medium,
        Self::High,
        Self::Extreme,
    ];

    /// Position in [`Level::ALL`] (0 = `off`).
    #[must_use]
    pub fn index(self) -> usize {
        self as usize
    }

    /// The level at position `i` of [`Level::ALL`], saturating at `extreme`.
    #[must_use]
    pub fn from_index(i: usize) -> Self {
        Self::ALL[i.min(4)]
    }

    /// The lower-case name used in policies and on the command line.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Extreme => "extreme",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A level name that is not one of `off low medium high extreme`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown level {0:?}; expected off, low, medium, high or extreme")]
pub struct UnknownLevel(pub String);

impl FromStr for Level {
    type Err = UnknownLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Self::Off),
            "low" => Ok(Self::Low),
            "medium" => Ok(Self::Medium),
            "high" => Ok(Self::High),
            "extreme" | "max" => Ok(Self::Extreme),
            other => Err(UnknownLevel(other.to_owned())),
        }
    }
}

/// Longest parameter description kept at [`Level::Medium`], in characters.
const MEDIUM_PARAM_CHARS: usize = 80;
/// Longest summary of a catalog line at [`Level::Medium`], in characters.
const MEDIUM_LINE_CHARS: usize = 160;
/// Longest tool description kept at [`Level::High`], in characters.
const HIGH_CHARS: usize = 100;
/// Most words kept at [`Level::Extreme`].
const EXTREME_WORDS: usize = 6;
/// Most characters kept at [`Level::Extreme`] (for scripts written without spaces).
const EXTREME_CHARS: usize = 40;

/// Cleaned texts of one tool, shared across levels (cleaning is the costly part of
/// compression, and every level starts from the same cleaned text).
#[derive(Debug, Default)]
pub(crate) struct Memo {
    cleaned: std::collections::HashMap<(usize, usize, bool, bool), String>,
}

impl Memo {
    /// `clean(text, schema, keep_headings)`, computed once per text borrowed from one tool.
    fn clean(&mut self, text: &str, schema: Option<&Value>, keep_headings: bool) -> String {
        let key = (
            text.as_ptr() as usize,
            text.len(),
            schema.is_some(),
            keep_headings,
        );
        self.cleaned
            .entry(key)
            .or_insert_with(|| clean(text, schema, keep_headings))
            .clone()
    }
}

/// Compresses one MCP tool object to `level`. Pure; the input is not changed.
#[must_use]
pub fn compress(tool: &Map<String, Value>, level: Level) -> Map<String, Value> {
    compress_with(tool, level, None)
}

/// Like [`compress`], with the tool's description replaced by `description` (a policy
/// override) before compression. A pinned description is applied with `level = Off`.
#[must_use]
pub fn compress_with(
    tool: &Map<String, Value>,
    level: Level,
    description: Option<&str>,
) -> Map<String, Value> {
    compress_memo(tool, level, description, &mut Memo::default())
}

/// [`compress_with`] sharing cleaned texts through `memo` (one memo per tool).
pub(crate) fn compress_memo(
    tool: &Map<String, Value>,
    level: Level,
    description: Option<&str>,
    memo: &mut Memo,
) -> Map<String, Value> {
    if level == Level::Off && description.is_none() {
        return tool.clone();
    }
    let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
    let schema = tool.get("inputSchema");
    let mut out = Map::with_capacity(tool.len());
    for (key, value) in tool {
        match key.as_str() {
            "description" => {
                let text = description.unwrap_or_else(|| value.as_str().unwrap_or(""));
                if let Some(text) = value.as_str().map(|_| text) {
                    out.insert(
                        key.clone(),
                        Value::String(describe_tool(text, level, schema, memo)),
                    );
                } else {
                    out.insert(key.clone(), value.clone());
                }
            }
            "inputSchema" => {
                out.insert(key.clone(), compress_schema(value, level, name, memo));
            }
            "title" if level > Level::Off && same_words(value.as_str().unwrap_or(""), name) => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if let (Some(text), false) = (description, tool.contains_key("description")) {
        out.insert(
            "description".into(),
            Value::String(describe_tool(text, level, schema, memo)),
        );
    }
    out
}

/// The one-line entry of a deferred tool at `level`: `name(params): summary` (parameters are
/// listed up to `medium`; `?` marks optional ones).
#[must_use]
pub fn catalog_line(tool: &Map<String, Value>, level: Level) -> String {
    catalog_line_with(tool, level, None)
}

/// Like [`catalog_line`], with a policy description override.
#[must_use]
pub fn catalog_line_with(
    tool: &Map<String, Value>,
    level: Level,
    description: Option<&str>,
) -> String {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
    catalog_line_memo(name, tool, level, description, &mut Memo::default())
}

/// [`catalog_line_with`] for a tool exposed as `name`, sharing cleaned texts through `memo`.
pub(crate) fn catalog_line_memo(
    name: &str,
    tool: &Map<String, Value>,
    level: Level,
    description: Option<&str>,
    memo: &mut Memo,
) -> String {
    let text = description
        .or_else(|| tool.get("description").and_then(Value::as_str))
        .unwrap_or("");
    let schema = tool.get("inputSchema");
    let mut line = String::from(name);
    if level <= Level::Medium {
        if let Some(props) = schema
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
        {
            let required = required_names(schema);
            line.push('(');
            for (i, key) in props.keys().enumerate() {
                if i > 0 {
                    line.push_str(", ");
                }
                line.push_str(key);
                if !required.contains(&key.as_str()) {
                    line.push('?');
                }
            }
            line.push(')');
        }
    }
    // One line at every level. A line sits next to a hundred others, so it says only what
    // tells its tool apart: the parameters and the first sentence at `medium`, the first
    // sentence at `high`, and the name alone at `extreme` (search supplies the rest).
    let summary = match level {
        Level::Off => one_line(text),
        Level::Low => one_line(&describe_tool(text, Level::Low, schema, memo)),
        Level::Medium => lead(&memo.clean(text, schema, false)),
        Level::High => describe_tool(text, level, schema, memo),
        Level::Extreme => String::new(),
    };
    if !summary.is_empty() {
        line.push_str(": ");
        line.push_str(&summary);
    }
    line
}

fn required_names(schema: Option<&Value>) -> Vec<&str> {
    schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The tool description at `level`.
fn describe_tool(text: &str, level: Level, schema: Option<&Value>, memo: &mut Memo) -> String {
    match level {
        Level::Off => text.to_owned(),
        Level::Low => memo.clean(text, schema, true),
        Level::Medium => first_paragraph(&memo.clean(text, schema, false)),
        Level::High => cut_chars(
            &first_sentence(&memo.clean(text, schema, false)),
            HIGH_CHARS,
        ),
        Level::Extreme => cut_chars(
            &first_words(
                &first_sentence(&memo.clean(text, schema, false)),
                EXTREME_WORDS,
            ),
            EXTREME_CHARS,
        ),
    }
}

/// A parameter description at `level` (`None`: dropped).
fn describe_param(text: &str, level: Level, memo: &mut Memo) -> Option<String> {
    match level {
        Level::Off => Some(text.to_owned()),
        Level::Low => Some(memo.clean(text, None, true)),
        Level::Medium => Some(cut_chars(
            &first_sentence(&memo.clean(text, None, false)),
            MEDIUM_PARAM_CHARS,
        )),
        Level::High | Level::Extreme => None,
    }
    .filter(|t| !t.is_empty())
}

/// JSON Schema keywords whose value is a schema.
const SUB_SCHEMA: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
];
/// JSON Schema keywords whose value is an array of schemas.
const SCHEMA_ARRAYS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems", "items"];
/// JSON Schema keywords whose value is a map of name → schema.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Annotation keywords that carry no constraint, and the least level that drops each.
fn drops_annotation(key: &str, level: Level) -> bool {
    match key {
        "$schema" | "$comment" => level >= Level::Low,
        "title" | "examples" => level >= Level::Medium,
        _ => false,
    }
}

/// Compresses a schema: annotations only, every constraint kept.
fn compress_schema(schema: &Value, level: Level, name: &str, memo: &mut Memo) -> Value {
    let Value::Object(obj) = schema else {
        return schema.clone();
    };
    let mut out = Map::with_capacity(obj.len());
    for (key, value) in obj {
        if key == "title" && level > Level::Off && same_words(value.as_str().unwrap_or(""), name) {
            // A title that repeats the property (or tool) name says nothing new.
            continue;
        }
        if drops_annotation(key, level) && (key != "title" || value.is_string()) {
            continue;
        }
        let kept = match key.as_str() {
            // The root description is rarely shown by hosts, but it is prose like the others.
            "description" => match value.as_str() {
                Some(text) => match describe_param(text, level, memo) {
                    // "owner": "Owner" says nothing the name does not (checked after
                    // shortening, so that compressing twice changes nothing).
                    Some(t) if level > Level::Off && same_words(&t, name) => continue,
                    Some(t) => Value::String(t),
                    None => continue,
                },
                None => value.clone(),
            },
            k if SCHEMA_MAPS.contains(&k) => match value {
                Value::Object(map) => Value::Object(
                    map.iter()
                        .map(|(prop, sub)| (prop.clone(), compress_schema(sub, level, prop, memo)))
                        .collect(),
                ),
                other => other.clone(),
            },
            k if SCHEMA_ARRAYS.contains(&k) && value.is_array() => Value::Array(
                value
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|s| compress_schema(s, level, "", memo))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            k if SUB_SCHEMA.contains(&k) => compress_schema(value, level, "", memo),
            "dependencies" => match value {
                // Draft-7 `dependencies`: a map of schemas or arrays of names.
                Value::Object(map) => Value::Object(
                    map.iter()
                        .map(|(prop, sub)| (prop.clone(), compress_schema(sub, level, "", memo)))
                        .collect(),
                ),
                other => other.clone(),
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), kept);
    }
    Value::Object(out)
}

/// Whether two names are the same words (`get_issue` ~ "Get issue").
fn same_words(a: &str, b: &str) -> bool {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .flat_map(char::to_lowercase)
            .collect()
    };
    let a = norm(a);
    !a.is_empty() && a == norm(b)
}

/// Openers that add no meaning; removed at `low`, case-insensitively.
const BOILERPLATE: &[&str] = &[
    "this tool allows you to ",
    "this tool lets you ",
    "this tool can be used to ",
    "this tool is used to ",
    "this tool will ",
    "this tool ",
    "use this tool to ",
    "use this to ",
    "a tool to ",
    "a tool that ",
    "tool to ",
    "tool that ",
    "allows you to ",
    "lets you ",
];

/// `low`: strips markdown and noise, keeping every sentence.
fn clean(text: &str, schema: Option<&Value>, keep_headings: bool) -> String {
    let params: Vec<String> = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .map(|p| p.keys().map(|k| k.to_lowercase()).collect())
        .unwrap_or_default();
    let described = |name: &str| -> bool {
        schema
            .and_then(|s| s.get("properties"))
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("description"))
            .and_then(Value::as_str)
            .is_some_and(|d| !d.trim().is_empty())
    };
    let mut lines: Vec<String> = Vec::new();
    let mut in_fence = false;
    let mut fence_lines: Vec<String> = Vec::new();
    let mut skipping_args = false;
    let mut after_heading = false;
    for raw_line in text.lines() {
        let trimmed = raw_line.trim();
        if trimmed.starts_with("```") {
            if in_fence {
                // A fenced block that only shows a JSON call repeating the schema is noise.
                let body = fence_lines.join("\n");
                if !looks_like_schema_example(&body, &params) {
                    lines.append(&mut fence_lines);
                }
                fence_lines.clear();
            }
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            fence_lines.push(collapse_spaces(trimmed));
            continue;
        }
        // Docstring `Args:` sections repeat the schema when every listed argument is a
        // described parameter.
        let lower = trimmed.to_lowercase();
        if matches!(
            lower.as_str(),
            "args:" | "arguments:" | "parameters:" | "params:" | "inputs:"
        ) {
            skipping_args = true;
            continue;
        }
        if skipping_args {
            if trimmed.is_empty() {
                continue;
            }
            let indented = raw_line.starts_with([' ', '\t']) || trimmed.starts_with(['-', '*']);
            let arg = trimmed
                .trim_start_matches(['-', '*', ' '])
                .split([':', ' ', '('])
                .next()
                .unwrap_or("")
                .trim_matches('`')
                .to_lowercase();
            if indented && params.contains(&arg) && described(&arg) {
                continue;
            }
            if indented && params.contains(&arg) {
                // Not described in the schema: this line is the only place the meaning is.
                lines.push(clean_inline(trimmed));
                continue;
            }
            skipping_args = false;
        }
        if let Some(heading) = trimmed.strip_prefix('#') {
            // A heading labels what follows: kept as `Heading:` at `low`, dropped from summaries.
            let heading = clean_inline(heading.trim_start_matches('#'));
            if keep_headings && !heading.is_empty() {
                lines.push(if heading.ends_with(':') {
                    heading
                } else {
                    format!("{heading}:")
                });
            }
            after_heading = true;
            continue;
        }
        let line = clean_inline(trimmed);
        if line.is_empty() {
            if !after_heading && lines.last().is_some_and(|l| !l.is_empty()) {
                lines.push(String::new());
            }
            continue;
        }
        after_heading = false;
        lines.push(line);
    }
    lines.append(&mut fence_lines);
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    // Runs of blank lines become one paragraph break (`\n\n`), which `first_paragraph` uses.
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in lines {
        if line.is_empty() {
            blank = true;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank { "\n\n" } else { "\n" });
        }
        blank = false;
        out.push_str(&line);
    }
    strip_boilerplate(&out)
}

fn looks_like_schema_example(body: &str, params: &[String]) -> bool {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(body) else {
        return false;
    };
    let obj = match obj.get("arguments").or_else(|| obj.get("params")) {
        Some(Value::Object(inner)) => inner.clone(),
        _ => obj,
    };
    !obj.is_empty() && obj.keys().all(|k| params.contains(&k.to_lowercase()))
}

/// `text` without its boilerplate openers (all of them, so that cleaning twice changes
/// nothing), its first letter upper-cased when one was removed.
fn strip_boilerplate(text: &str) -> String {
    let mut rest = text;
    while let Some(opener) = BOILERPLATE.iter().find(|o| {
        rest.get(..o.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(o))
    }) {
        rest = &rest[opener.len()..];
    }
    if rest.len() == text.len() {
        return text.to_owned();
    }
    let mut chars = rest.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Markdown emphasis, inline code, links and images → plain text; spaces collapsed.
fn clean_inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' | '`' => {}
            '_' if (i + 1 < chars.len() && chars[i + 1] == '_')
                || (i > 0 && chars[i - 1] == '_') =>
            {
                // `__bold__`; a lone `_` is kept (snake_case names).
                let word_inside = i > 0
                    && chars[i - 1].is_alphanumeric()
                    && i + 2 < chars.len()
                    && chars[i + 2].is_alphanumeric();
                if word_inside {
                    out.push(c);
                }
            }
            '!' if chars.get(i + 1) == Some(&'[') => {}
            '[' => {
                // `[text](url)` → `text`.
                if let Some(close) = chars[i..].iter().position(|&x| x == ']') {
                    let end = i + close;
                    if chars.get(end + 1) == Some(&'(') {
                        if let Some(paren) = chars[end..].iter().position(|&x| x == ')') {
                            out.extend(&chars[i + 1..end]);
                            i = end + paren + 1;
                            continue;
                        }
                    }
                }
                out.push(c);
            }
            _ => out.push(c),
        }
        i += 1;
    }
    let out = out.trim_start_matches(['>', ' ']);
    let out = if let Some(rest) = out.strip_prefix("* ").or_else(|| out.strip_prefix("+ ")) {
        format!("- {rest}")
    } else {
        out.to_owned()
    };
    collapse_spaces(&out)
}

fn collapse_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    out
}

fn one_line(text: &str) -> String {
    collapse_spaces(text)
}

fn first_paragraph(text: &str) -> String {
    text.split("\n\n").next().unwrap_or("").trim().to_owned()
}

/// The first sentence: up to the first `. `, `! `, `? ` or line break.
fn first_sentence(text: &str) -> String {
    let para = text.lines().next().unwrap_or("");
    let bytes = para.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|&n| n == b' ') {
            // Skip abbreviations such as "e.g." and "i.e.".
            let before = &para[..i];
            if before.ends_with("e.g") || before.ends_with("i.e") || before.ends_with("etc") {
                continue;
            }
            return para[..=i].to_owned();
        }
    }
    para.to_owned()
}

/// Fewest words of a `medium` line's first sentence: a shorter one ("Search.") says too
/// little to tell its tool from its neighbours, so the next sentence is added.
const LEAD_WORDS: usize = 4;

/// The summary of a `medium` catalog line: the first sentence of the first line, with the
/// next one when it is shorter than [`LEAD_WORDS`] words; at most [`MEDIUM_LINE_CHARS`].
fn lead(text: &str) -> String {
    let first = first_sentence(text);
    if first.split_whitespace().count() >= LEAD_WORDS {
        return cut_chars(&first, MEDIUM_LINE_CHARS);
    }
    let line = text.lines().next().unwrap_or("");
    let second = first_sentence(line[first.len()..].trim_start());
    cut_chars(format!("{first} {second}").trim(), MEDIUM_LINE_CHARS)
}

/// At most `max` characters, cut on a word boundary with `…`.
fn cut_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max).collect();
    if let Some(space) = cut.rfind(' ') {
        cut.truncate(space);
    } else {
        // Room for the `…`: a cut text is never cut again (compression is idempotent).
        cut.pop();
    }
    let cut = cut.trim_end_matches([',', ';', ':', ' ', '(', '-']);
    format!("{cut}…")
}

fn first_words(text: &str, n: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= n {
        return text.trim_end_matches('.').to_owned();
    }
    words[..n]
        .join(" ")
        .trim_end_matches([',', ';', ':', '.'])
        .to_owned()
}

/// The schema with every annotation keyword removed: what compression must keep intact.
/// Used by tests and the property checks.
#[must_use]
pub fn constraints_of(schema: &Value) -> Value {
    strip_all(schema)
}

fn strip_all(schema: &Value) -> Value {
    let Value::Object(obj) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in obj {
        let annotation = match key.as_str() {
            "description" | "title" => value.is_string(),
            "examples" | "$comment" | "$schema" => true,
            _ => false,
        };
        if annotation {
            continue;
        }
        let kept = if SCHEMA_MAPS.contains(&key.as_str()) || key == "dependencies" {
            match value {
                Value::Object(map) => {
                    Value::Object(map.iter().map(|(k, v)| (k.clone(), strip_all(v))).collect())
                }
                other => other.clone(),
            }
        } else if SCHEMA_ARRAYS.contains(&key.as_str()) && value.is_array() {
            Value::Array(
                value
                    .as_array()
                    .map(|a| a.iter().map(strip_all).collect())
                    .unwrap_or_default(),
            )
        } else if SUB_SCHEMA.contains(&key.as_str()) {
            strip_all(value)
        } else {
            value.clone()
        };
        out.insert(key.clone(), kept);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        let Value::Object(map) = v else {
            panic!("not an object")
        };
        map
    }

    #[test]
    fn low_drops_noise_and_keeps_sentences() {
        let t = obj(json!({
            "name": "search_repos",
            "title": "Search repos",
            "description": "Use this tool to **search** GitHub   repositories.\n\n## Notes\n- Results are [paged](https://x.y).\n\nArgs:\n    query: the query\n    page: page number\n",
            "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                "properties": {"query": {"type": "string", "description": "Search query"},
                               "page": {"type": "integer", "minimum": 1}},
                "required": ["query"]}
        }));
        let low = compress(&t, Level::Low);
        assert_eq!(
            low["description"],
            "Search GitHub repositories.\n\nNotes:\n- Results are paged.\n\npage: page number"
        );
        assert!(low.get("title").is_none());
        assert!(low["inputSchema"].get("$schema").is_none());
        assert_eq!(low["inputSchema"]["properties"]["page"]["minimum"], 1);
    }

    #[test]
    fn levels_shrink_monotonically_on_fixtures() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
        let tools = crate::catalog::load_saved(&[dir]).unwrap();
        for tool in &tools {
            let mut last = usize::MAX;
            for level in Level::ALL {
                let c = compress(&tool.definition, level);
                let len = serde_json::to_string(&c).unwrap().len();
                assert!(len <= last, "{} grew at {level}", tool.id());
                last = len;
                let before = tool.input_schema().map(constraints_of);
                let after = c.get("inputSchema").map(constraints_of);
                assert_eq!(before, after, "{} lost a constraint at {level}", tool.id());
                assert_eq!(c.get("name"), tool.definition.get("name"));
            }
        }
    }

    #[test]
    fn property_named_description_is_not_an_annotation() {
        let t = obj(
            json!({"name": "x", "description": "d", "inputSchema": {"type": "object",
            "properties": {"description": {"type": "string", "description": "The body"},
                           "title": {"type": "string"}}}}),
        );
        for level in Level::ALL {
            let c = compress(&t, level);
            let props = c["inputSchema"]["properties"].as_object().unwrap();
            assert!(props.contains_key("description") && props.contains_key("title"));
        }
    }

    #[test]
    fn catalog_lines_are_one_line() {
        let t = obj(
            json!({"name": "gh__create_issue", "description": "Create an issue.\nIn a repo.",
            "inputSchema": {"type": "object", "properties": {"owner": {"type": "string"}, "title": {"type": "string"}, "body": {}}, "required": ["owner", "title"]}}),
        );
        // `medium`: the parameters and the first sentence (of the first line).
        assert_eq!(
            catalog_line(&t, Level::Medium),
            "gh__create_issue(owner, title, body?): Create an issue."
        );
        assert_eq!(
            catalog_line(&t, Level::High),
            "gh__create_issue: Create an issue."
        );
        assert_eq!(catalog_line(&t, Level::Extreme), "gh__create_issue");
    }

    #[test]
    fn override_description_is_used() {
        let t = obj(json!({"name": "x", "description": "Old.", "inputSchema": {"type": "object"}}));
        assert_eq!(
            compress_with(&t, Level::Off, Some("New."))["description"],
            "New."
        );
    }

    #[test]
    fn medium_lines_say_what_tells_a_tool_apart() {
        let t = obj(json!({"name": "fetch", "description":
            "Fetch a URL from the internet and return its text. Follows redirects. Returns markdown.",
            "inputSchema": {"type": "object", "properties": {"url": {"type": "string"},
                "raw": {"type": "boolean"}}, "required": ["url"]}}));
        assert_eq!(
            catalog_line(&t, Level::Medium),
            "fetch(url, raw?): Fetch a URL from the internet and return its text."
        );
        // A first sentence of fewer than four words says too little: the next one is added.
        let t = obj(json!({"name": "q", "description": "Search. Finds issues by title.\n\nMore."}));
        assert_eq!(
            catalog_line(&t, Level::Medium),
            "q: Search. Finds issues by title."
        );
        let long = format!("Does {}.", "very ".repeat(60));
        let t = obj(json!({"name": "l", "description": long}));
        let line = catalog_line(&t, Level::Medium);
        assert!(line.ends_with('…') && line.chars().count() <= "l: ".len() + MEDIUM_LINE_CHARS);
    }

    #[test]
    fn extreme_lines_are_the_name_alone() {
        let t = obj(json!({"name": "x", "description": "Does a thing.",
            "inputSchema": {"type": "object", "properties": {"a": {}}, "required": ["a"]}}));
        assert_eq!(catalog_line(&t, Level::Extreme), "x");
        // Directly listed tools keep a few words at `extreme`.
        assert_eq!(compress(&t, Level::Extreme)["description"], "Does a thing");
    }

    #[test]
    fn parameter_descriptions_that_repeat_the_name_are_dropped() {
        let t = obj(
            json!({"name": "x", "inputSchema": {"type": "object", "properties": {
            "repo_owner": {"type": "string", "description": "Repo owner"},
            "repo": {"type": "string", "description": "Repository name"}}}}),
        );
        assert_eq!(compress(&t, Level::Off), t);
        let low = compress(&t, Level::Low);
        let props = &low["inputSchema"]["properties"];
        assert!(props["repo_owner"].get("description").is_none());
        assert_eq!(props["repo"]["description"], "Repository name");
    }

    #[test]
    fn every_boilerplate_opener_is_dropped() {
        let t =
            obj(json!({"name": "x", "description": "Use this tool to use this to list files."}));
        assert_eq!(compress(&t, Level::Low)["description"], "List files.");
    }

    /// Tool prose as servers write it: sentences, markdown, headings, lists, `Args:` sections.
    fn arb_prose() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[A-Za-z]{1,9}( [a-z]{1,9}){0,12}[.!?]?".prop_map(|s| s),
            Just("Use this tool to ".to_owned()),
            Just("**bold** and `code`".to_owned()),
            Just("[a link](https://x.y)".to_owned()),
            Just("\n\n".to_owned()),
            Just("\n## Heading\n".to_owned()),
            Just("\n- item one\n* item two\n".to_owned()),
            Just("\nArgs:\n    a: the a\n    b: the b\n".to_owned()),
            Just("e.g. this, i.e. that".to_owned()),
            Just(" ".to_owned()),
        ];
        prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
    }

    fn arb_schema() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!({"type": "string"})),
            Just(json!({"type": "integer", "minimum": 0, "maximum": 9})),
            Just(json!({"type": "string", "enum": ["a", "b"], "description": "Pick. Really."})),
            "[ -~\\n]{0,40}".prop_map(
                |d| json!({"type": "string", "description": d, "title": "T", "examples": ["x"]})
            ),
            Just(json!({"const": 3, "$comment": "c"})),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::btree_map("[a-z]{1,6}", inner.clone(), 0..4).prop_map(|m| {
                    let keys: Vec<String> = m.keys().take(1).cloned().collect();
                    json!({"type": "object", "properties": m, "required": keys, "additionalProperties": false, "description": "Obj. More."})
                }),
                inner.clone().prop_map(|i| json!({"type": "array", "items": i, "minItems": 1})),
                prop::collection::vec(inner, 1..3).prop_map(|v| json!({"anyOf": v})),
            ]
        })
    }

    proptest! {
        #[test]
        fn levels_are_idempotent_and_shrink(schema in arb_schema(), desc in arb_prose()) {
            let tool = obj(json!({"name": "t", "description": desc, "inputSchema": {"type": "object",
                "properties": {"a": schema, "b": {"type": "string", "description": "B"}},
                "required": ["a"]}}));
            let (mut last_len, mut last_line) = (usize::MAX, usize::MAX);
            for level in Level::ALL {
                let once = compress(&tool, level);
                prop_assert_eq!(&compress(&once, level), &once, "not idempotent at {}", level);
                let len = serde_json::to_string(&once).unwrap().len();
                prop_assert!(len <= last_len, "longer at {} than the level above", level);
                let line = catalog_line(&tool, level);
                let line_len = line.chars().count();
                prop_assert!(line_len <= last_line, "line longer at {}: {:?}", level, line);
                if level <= Level::Medium {
                    // Required parameters are named, unmarked, on every line that lists them.
                    prop_assert!(line.starts_with("t(a, b?)"), "{:?}", line);
                }
                prop_assert_eq!(&once["inputSchema"]["required"], &json!(["a"]));
                (last_len, last_line) = (len, line_len);
            }
        }

        #[test]
        fn compression_never_drops_a_constraint(schema in arb_schema(), desc in "[ -~\\n]{0,200}") {
            let tool = obj(json!({"name": "t", "description": desc, "inputSchema": schema}));
            for level in Level::ALL {
                let c = compress(&tool, level);
                prop_assert_eq!(constraints_of(&tool["inputSchema"]), constraints_of(&c["inputSchema"]));
                prop_assert_eq!(&c["name"], &tool["name"]);
                prop_assert!(!catalog_line(&tool, level).contains('\n'));
            }
        }
    }
}
