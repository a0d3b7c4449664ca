//! What of a tool goes into which index field, and which parts of a query are argument values.

use serde_json::Value;

use crate::catalog::CatalogTool;

/// Tool name, split at `_`, `-` and camel case.
pub(crate) const NAME: usize = 0;
/// `title` and `annotations.title`.
pub(crate) const TITLE: usize = 1;
/// Server id.
pub(crate) const SERVER: usize = 2;
/// The whole description.
pub(crate) const DESCRIPTION: usize = 3;
/// Parameter names, nested ones included.
pub(crate) const PARAMS: usize = 4;
/// The description's first sentence, which says what the tool does (also in `DESCRIPTION`).
pub(crate) const LEAD: usize = 5;
/// Parameter descriptions.
pub(crate) const PARAM_DESCRIPTIONS: usize = 6;
/// String `enum` values of parameters: the closed vocabulary a tool accepts
/// (`rocket`, `heart` for a reaction; `open`, `closed` for a state).
pub(crate) const ENUM_VALUES: usize = 7;
/// Number of fields.
pub(crate) const FIELDS: usize = 8;

/// The texts of each field of a tool.
pub(crate) fn field_texts(tool: &CatalogTool) -> [Vec<&str>; FIELDS] {
    let mut fields: [Vec<&str>; FIELDS] = Default::default();
    fields[NAME].push(&tool.name);
    let def = &tool.definition;
    if let Some(title) = def.get("title").and_then(Value::as_str) {
        fields[TITLE].push(title);
    }
    if let Some(title) = def
        .get("annotations")
        .and_then(|a| a.get("title"))
        .and_then(Value::as_str)
    {
        fields[TITLE].push(title);
    }
    fields[SERVER].push(&tool.server);
    fields[DESCRIPTION].push(tool.description());
    fields[LEAD].push(lead_sentence(tool.description()));
    if let Some(schema) = tool.input_schema() {
        schema_texts(schema, 0, &mut fields);
    }
    fields
}

/// The first sentence (or line) of a description.
fn lead_sentence(text: &str) -> &str {
    let text = text.trim_start();
    let mut end = text.find('\n').unwrap_or(text.len());
    for stop in [". ", "。", "! ", "? "] {
        if let Some(at) = text[..end].find(stop) {
            end = end.min(at);
        }
    }
    &text[..end]
}

/// Parameter names, descriptions and string enum values of a schema, nested ones included,
/// each into its field.
fn schema_texts<'a>(schema: &'a Value, depth: usize, fields: &mut [Vec<&'a str>; FIELDS]) {
    const MAX_DEPTH: usize = 6;
    let Value::Object(obj) = schema else {
        return;
    };
    if depth > MAX_DEPTH {
        return;
    }
    if depth > 0 {
        if let Some(d) = obj.get("description").and_then(Value::as_str) {
            fields[PARAM_DESCRIPTIONS].push(d);
        }
        if let Some(Value::Array(values)) = obj.get("enum") {
            fields[ENUM_VALUES].extend(values.iter().filter_map(Value::as_str));
        }
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        for (name, prop) in props {
            fields[PARAMS].push(name);
            schema_texts(prop, depth + 1, fields);
        }
    }
    if let Some(items) = obj.get("items") {
        schema_texts(items, depth + 1, fields);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(list)) = obj.get(key) {
            for sub in list {
                schema_texts(sub, depth + 1, fields);
            }
        }
    }
}

/// Whether a whitespace-separated chunk of a query looks like an argument value (a path, a
/// URL, a file name, a CSS selector, a handle) rather than words saying what to do.
pub(crate) fn is_value_like(chunk: &str) -> bool {
    let chunk = chunk
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '(' | ')' | ',' | '?' | '!' | ':' | ';'));
    let chunk = chunk.strip_suffix('.').unwrap_or(chunk);
    if chunk.contains('/') || chunk.contains('\\') {
        return true;
    }
    if chunk.len() > 1 && chunk.starts_with(['#', '.', '@', '$', '~']) {
        return true;
    }
    let bytes = chunk.as_bytes();
    // `name.ext`, `www.example.com`: a dot between alphanumerics.
    bytes
        .windows(3)
        .any(|w| w[1] == b'.' && w[0].is_ascii_alphanumeric() && w[2].is_ascii_alphabetic())
}
