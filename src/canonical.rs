//! The canonical form of tool definitions: the same bytes for the same values.
//!
//! Providers cache prompt prefixes byte for byte, and tools come first. Upstreams may return
//! the same tool with keys in another order (a restart, another SDK version), so every tool
//! the gateway lists is written in one canonical form:
//!
//! - a tool's own keys in a fixed order: `name`, `title`, `description`, `inputSchema`,
//!   `outputSchema`, `annotations`, `execution`, `icons`, `_meta`, then any other key in
//!   byte order;
//! - every nested object's keys in byte order (so a schema's `properties` are listed by name);
//! - arrays keep their order (their order is meaning: `enum`, `required`, `oneOf`, …).
//!
//! Values are never changed, only key order.
//!
//! [`jcs`](fn@jcs) is the other canonical form, RFC 8785's, and [`schema_hash`] the tool fingerprint
//! built on it.
//!
//! ```
//! use mcp_budget::canonical::canonical_tool;
//! use serde_json::json;
//!
//! let a = canonical_tool(&json!({"inputSchema": {"type": "object", "properties": {"b": {}, "a": {}}}, "name": "t"}));
//! let b = canonical_tool(&json!({"name": "t", "inputSchema": {"properties": {"a": {}, "b": {}}, "type": "object"}}));
//! assert_eq!(serde_json::to_string(&a)?, serde_json::to_string(&b)?);
//! assert!(serde_json::to_string(&a)?.starts_with(r#"{"name":"t","inputSchema""#));
//! # Ok::<(), serde_json::Error>(())
//! ```

mod jcs;

pub use jcs::{jcs, schema_hash};

use serde_json::{Map, Value};

/// Keys of a tool object, in the order they are written.
const TOOL_KEYS: &[&str] = &[
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "execution",
    "icons",
    "_meta",
];

/// A tool object in canonical form (see the module docs). Non-objects are returned as they are.
#[must_use]
pub fn canonical_tool(tool: &Value) -> Value {
    let Value::Object(obj) = tool else {
        return tool.clone();
    };
    let mut out = Map::with_capacity(obj.len());
    for key in TOOL_KEYS {
        if let Some(v) = obj.get(*key) {
            out.insert((*key).to_owned(), canonical_value(v));
        }
    }
    let mut rest: Vec<(&String, &Value)> = obj
        .iter()
        .filter(|(k, _)| !TOOL_KEYS.contains(&k.as_str()))
        .collect();
    rest.sort_by(|a, b| a.0.cmp(b.0));
    for (k, v) in rest {
        out.insert(k.clone(), canonical_value(v));
    }
    Value::Object(out)
}

/// [`canonical_tool`], consuming the tool (no copy of its contents).
#[must_use]
pub fn into_canonical_tool(tool: Value) -> Value {
    let Value::Object(mut obj) = tool else {
        return tool;
    };
    let mut out = Map::with_capacity(obj.len());
    for key in TOOL_KEYS {
        if let Some(v) = obj.shift_remove(*key) {
            out.insert((*key).to_owned(), into_canonical_value(v));
        }
    }
    let mut rest: Vec<(String, Value)> = obj.into_iter().collect();
    rest.sort_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in rest {
        out.insert(k, into_canonical_value(v));
    }
    Value::Object(out)
}

fn into_canonical_value(value: Value) -> Value {
    match value {
        Value::Object(obj) => {
            let mut entries: Vec<(String, Value)> = obj.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, into_canonical_value(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(into_canonical_value).collect()),
        other => other,
    }
}

/// Any JSON value with every object's keys in byte order.
#[must_use]
pub fn canonical_value(value: &Value) -> Value {
    match value {
        Value::Object(obj) => {
            let mut keys: Vec<&String> = obj.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical_value(&obj[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical_value).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Rebuilds every object with its keys rotated by `shift`: same value, other key order.
    pub(super) fn reorder(value: &Value, shift: usize) -> Value {
        match value {
            Value::Object(obj) => {
                let mut entries: Vec<(&String, &Value)> = obj.iter().collect();
                if !entries.is_empty() {
                    let n = entries.len();
                    entries.rotate_left(shift % n);
                }
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), reorder(v, shift + 1)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| reorder(v, shift)).collect()),
            other => other.clone(),
        }
    }

    pub(super) fn fixture_tools() -> Vec<Value> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
        crate::catalog::load_saved(&[dir])
            .unwrap()
            .into_iter()
            .map(|t| Value::Object(std::sync::Arc::unwrap_or_clone(t.definition)))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn key_order_never_shows_and_values_never_change(shift in 0usize..7, pick in 0usize..644) {
            let tools = fixture_tools();
            let tool = &tools[pick % tools.len()];
            let shuffled = reorder(tool, shift);
            let a = serde_json::to_string(&canonical_tool(tool)).unwrap();
            let b = serde_json::to_string(&canonical_tool(&shuffled)).unwrap();
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(&canonical_tool(tool), tool);
            let owned = serde_json::to_string(&into_canonical_tool(shuffled)).unwrap();
            prop_assert_eq!(&a, &owned);
        }
    }
}
