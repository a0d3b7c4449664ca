//! `OpenAI` Chat Completions (`POST /v1/chat/completions`) and Responses (`POST /v1/responses`):
//! cache-stable `tools`.
//!
//! `OpenAI` caches the longest common prompt prefix automatically (no breakpoints), and tools
//! come before the messages, so [`rewrite`] only orders and canonicalizes `tools` (see
//! [`crate::llm_api`]). Function tools are the client-defined tools sorted by name, in either
//! shape: Chat Completions' `{"type": "function", "function": {"name", "description",
//! "parameters"}}` and Responses' `{"type": "function", "name", "description", "parameters"}`.
//! Every other tool (`web_search`, `file_search`, `code_interpreter`, `mcp`, `custom`, …) is
//! kept first among the static tools, in the caller's relative order. Only `tools` changes.
//!
//! ```
//! use mcp_budget::llm_api::{openai, RewriteOptions, ToolClasses};
//! use serde_json::json;
//!
//! let mut body = json!({"model": "gpt-4o", "tools": [
//!     {"type": "function", "function": {"parameters": {"type": "object"}, "name": "b"}},
//!     {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
//! ]});
//! let outcome = openai::rewrite(&mut body, &RewriteOptions::default());
//! assert_eq!(outcome.static_tools, 2);
//! assert_eq!(
//!     serde_json::to_string(&body["tools"][1])?,
//!     r#"{"function":{"name":"b","parameters":{"type":"object"}},"type":"function"}"#
//! );
//! # Ok::<(), serde_json::Error>(())
//! ```

use serde_json::{Map, Value};

use super::{Rewrite, RewriteOptions, Slot, compress_tool, put_tools, take_ordered};
use crate::compress::Level;

/// Rewrites the `tools` of a Chat Completions or Responses request body in place (see the
/// module docs). A body without a `tools` array is left as it is.
#[must_use = "the outcome says how many tools are static"]
pub fn rewrite(body: &mut Value, options: &RewriteOptions) -> Rewrite {
    let Some((tools, outcome)) = take_ordered(body, options, compress, slot, canonical) else {
        return Rewrite::default();
    };
    put_tools(body, tools);
    outcome
}

/// A function tool's description and parameters compressed (inside its `function` object for
/// Chat Completions, at its top level for Responses); other tools stay as sent.
fn compress(tool: &mut Value, level: Level) {
    if !is_function(tool) {
        return;
    }
    match tool.get_mut("function") {
        Some(Value::Object(f)) => compress_tool(f, level, "parameters"),
        _ => {
            if let Value::Object(t) = tool {
                compress_tool(t, level, "parameters");
            }
        }
    }
}

/// Canonical key order of the tool, and of its `function` object (Chat Completions), so that
/// `name` and `description` lead inside it too.
fn canonical(tool: Value) -> Value {
    let mut tool = crate::canonical::into_canonical_tool(tool);
    if let Some(f) = tool.get_mut("function") {
        *f = crate::canonical::into_canonical_tool(std::mem::take(f));
    }
    tool
}

fn is_function(tool: &Value) -> bool {
    tool.get("type").and_then(Value::as_str) == Some("function")
}

fn slot(tool: &Value) -> Slot {
    let name = tool
        .get("function")
        .and_then(|f| f.get("name"))
        .or_else(|| tool.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Slot {
        name,
        sorted: is_function(tool),
    }
}

/// A Chat Completions function tool from an MCP tool object.
///
/// ```
/// use mcp_budget::llm_api::openai::chat_tool_from_mcp;
/// use serde_json::json;
///
/// let mcp = json!({"name": "now", "description": "Time", "inputSchema": {"type": "object"}});
/// assert_eq!(
///     chat_tool_from_mcp(mcp.as_object().unwrap()),
///     json!({"type": "function", "function": {"name": "now", "description": "Time",
///         "parameters": {"type": "object"}}})
/// );
/// ```
#[must_use]
pub fn chat_tool_from_mcp(tool: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    out.insert("function".into(), function_of(tool));
    out.insert("type".into(), Value::String("function".into()));
    canonical(Value::Object(out))
}

/// A Responses API function tool from an MCP tool object.
///
/// ```
/// use mcp_budget::llm_api::openai::responses_tool_from_mcp;
/// use serde_json::json;
///
/// let mcp = json!({"name": "now", "inputSchema": {"type": "object"}});
/// assert_eq!(
///     responses_tool_from_mcp(mcp.as_object().unwrap()),
///     json!({"name": "now", "parameters": {"type": "object"}, "type": "function"})
/// );
/// ```
#[must_use]
pub fn responses_tool_from_mcp(tool: &Map<String, Value>) -> Value {
    let Value::Object(mut out) = function_of(tool) else {
        return Value::Null;
    };
    out.insert("type".into(), Value::String("function".into()));
    canonical(Value::Object(out))
}

fn function_of(tool: &Map<String, Value>) -> Value {
    Value::Object(super::function_from_mcp(tool, "parameters"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm_api::ToolClasses;
    use serde_json::json;

    #[test]
    fn responses_shape_and_builtin_tools() {
        let mut body = json!({"model": "gpt-5", "input": "hi", "tools": [
            {"type": "function", "name": "zeta", "parameters": {}},
            {"type": "web_search"},
            {"type": "function", "name": "dyn", "parameters": {}},
            {"type": "function", "name": "alpha", "parameters": {}},
            {"type": "file_search", "vector_store_ids": ["v"]},
        ]});
        let options = RewriteOptions {
            classes: ToolClasses::dynamic_names(["dyn"]),
            ..RewriteOptions::default()
        };
        let outcome = rewrite(&mut body, &options);
        let order: Vec<String> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t.get("name")
                    .unwrap_or(&t["type"])
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(order, ["web_search", "file_search", "alpha", "zeta", "dyn"]);
        assert_eq!((outcome.static_tools, outcome.dynamic_tools), (4, 1));
        assert_eq!(body["input"], "hi");
    }

    #[test]
    fn compresses_chat_functions() {
        let mut body = json!({"tools": [{"type": "function", "function": {"name": "a",
            "description": "## A\n\nDoes **a**.\n\nMore.", "parameters": {"type": "object"}}}]});
        let options = RewriteOptions {
            compress: Some(crate::compress::Level::Medium),
            ..RewriteOptions::default()
        };
        let _ = rewrite(&mut body, &options);
        assert_eq!(body["tools"][0]["function"]["description"], "Does a.");
    }
}
