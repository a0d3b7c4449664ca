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
//! | [`Level::Medium`] | the first paragraph | the first sentence, at most 80 characters; dropped when it only repeats the parameter's name | `title`, `examples` dropped too |
//! | [`Level::High`] | one line (the first sentence, at most 100 characters) | dropped | dropped |
//! | [`Level::Extreme`] | a few words (at most 6 words, 40 characters) | dropped | dropped |
//!
//! The same levels shape [`catalog_line`], the one-line entry of a deferred tool. A line sits
//! next to many others, so it keeps only what tells its tool apart:
//!
//! | level | catalog line |
//! |---|---|
//! | [`Level::Off`], [`Level::Low`] | `name(p1, p2?): description` (as given / cleaned), on one line |
//! | [`Level::Medium`] | `name(p1, p2?): first sentence` (and the next when the first has under 4 words), without qualifiers that select nothing (`a specific`, `the specified`, `an existing`, …), at most 160 characters |
//! | [`Level::High`] | `name: first sentence`, without those qualifiers, at most 100 characters |
//! | [`Level::Extreme`] | `name` alone (search supplies the rest) |
//!
//! Every level is deterministic (same bytes for the same tool, so prompt caches hold) and
//! idempotent, and each is never longer than the one before it (property-tested).
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

use prose::{
    clean, cut_chars, drop_filler, drop_namespace_tail, first_paragraph, first_sentence,
    first_words, namespace_words, one_line, same_words,
};

mod prose;

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
    catalog_line_memo("", name, tool, level, description, &mut Memo::default())
}

/// The line of a tool of server `server` as a catalog lists it, under its exposed name
/// `exposed`: like [`catalog_line`], and at `medium` and `high` without a closing phrase that
/// only repeats the namespace the name shows.
///
/// ```
/// use mcp_budget::compress::{Level, catalog_line, catalog_line_exposed};
/// use serde_json::json;
///
/// let tool = json!({"name": "find_teams", "description": "Find teams in Sentry."});
/// let tool = tool.as_object().unwrap();
/// assert_eq!(
///     catalog_line_exposed("sentry", "sentry__find_teams", tool, Level::Medium),
///     "sentry__find_teams: Find teams."
/// );
/// assert_eq!(catalog_line(tool, Level::Medium), "find_teams: Find teams in Sentry.");
/// ```
#[must_use]
pub fn catalog_line_exposed(
    server: &str,
    exposed: &str,
    tool: &Map<String, Value>,
    level: Level,
) -> String {
    catalog_line_memo(server, exposed, tool, level, None, &mut Memo::default())
}

/// [`catalog_line_with`] for a tool of server `server` exposed as `name`, sharing cleaned
/// texts through `memo`. A closing phrase of the summary that only repeats the namespace
/// `name` shows ("… in Sentry" of `sentry__find_teams`) is dropped at `medium` and `high`.
pub(crate) fn catalog_line_memo(
    server: &str,
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
    // sentence at `high` (both without qualifiers that select nothing, nor a closing phrase
    // that repeats the namespace), and the name alone at `extreme` (search supplies the rest).
    let namespace = if matches!(level, Level::Medium | Level::High) {
        namespace_words(server, name)
    } else {
        Vec::new()
    };
    let summary = match level {
        Level::Off => one_line(text),
        Level::Low => one_line(&describe_tool(text, Level::Low, schema, memo)),
        Level::Medium => lead(&memo.clean(text, schema, false), &namespace),
        // Fillers dropped at `high` too, so that a `high` line is never longer than the
        // `medium` one.
        Level::High => cut_chars(
            &drop_namespace_tail(
                &drop_filler(&first_sentence(&memo.clean(text, schema, false))),
                &namespace,
            ),
            HIGH_CHARS,
        ),
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
                    Some(t) if level >= Level::Medium && same_words(&t, name) => continue,
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

/// Fewest words of a `medium` line's first sentence: a shorter one ("Search.") says too
/// little to tell its tool from its neighbours, so the next sentence is added.
const LEAD_WORDS: usize = 4;

/// The summary of a `medium` catalog line: the first sentence of the first line, with the
/// next one when it is shorter than [`LEAD_WORDS`] words, without [`prose`]'s filler
/// qualifiers (`specific`, `existing`, …) and without a closing phrase of only `namespace`
/// words ([`prose::drop_namespace_tail`]); at most [`MEDIUM_LINE_CHARS`].
fn lead(text: &str, namespace: &[String]) -> String {
    let first = first_sentence(text);
    let trim = |s: &str| drop_namespace_tail(&drop_filler(s), namespace);
    if first.split_whitespace().count() >= LEAD_WORDS {
        return cut_chars(&trim(&first), MEDIUM_LINE_CHARS);
    }
    // The two sentences as written (`。` is followed by no space).
    let line = text.lines().next().unwrap_or("");
    let rest = line[first.len()..].trim_start();
    let end = line.len() - rest.len() + first_sentence(rest).len();
    cut_chars(&trim(line[..end].trim()), MEDIUM_LINE_CHARS)
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
mod tests;
