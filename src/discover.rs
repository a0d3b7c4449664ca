//! Progressive discovery: the meta-tools (`search_tools`, `get_tool_schema`, `invoke_tool`) that
//! stand in for deferred tools.
//!
//! Their definitions live here because their tokens count against the budget: the planner
//! measures them like any other tool.
//!
//! ```
//! use mcp_budget::discover::{meta_tool_definitions, MetaToolNames};
//!
//! let defs = meta_tool_definitions(&MetaToolNames::default());
//! assert_eq!(defs.len(), 3);
//! assert_eq!(defs[0]["name"], "search_tools");
//! ```

use serde_json::{json, Value};

/// Names of the three meta-tools; configurable so that chained gateways do not collide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaToolNames {
    /// Search the deferred tools.
    pub search: String,
    /// Read one tool's full definition.
    pub schema: String,
    /// Call a deferred tool.
    pub invoke: String,
}

impl Default for MetaToolNames {
    fn default() -> Self {
        Self {
            search: "search_tools".into(),
            schema: "get_tool_schema".into(),
            invoke: "invoke_tool".into(),
        }
    }
}

/// The MCP tool objects of the meta-tools, in the order they are listed.
#[must_use]
pub fn meta_tool_definitions(names: &MetaToolNames) -> Vec<Value> {
    vec![
        json!({
            "name": names.search,
            "description": format!("Find tools that are not listed directly. Describe the task in plain words; returns the best matching tools with a one-line description and their parameters. Then call {} to read one, or {} to run it.", names.schema, names.invoke),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, e.g. \"create a GitHub issue\""},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Most results to return (default 5)"}
                },
                "required": ["query"]
            }
        }),
        json!({
            "name": names.schema,
            "description": format!("Get the full definition (description, input schema) of a tool found with {}.", names.search),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool name as returned by search"}
                },
                "required": ["name"]
            }
        }),
        json!({
            "name": names.invoke,
            "description": format!("Run a tool found with {} with arguments that match its input schema.", names.search),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool name as returned by search"},
                    "arguments": {"type": "object", "description": "The tool's arguments"}
                },
                "required": ["name", "arguments"]
            }
        }),
    ]
}

/// The first sentence (or line) of `text`, cut at a word boundary to at most `max` characters
/// (an ellipsis marks a cut).
#[must_use]
pub fn one_line(text: &str, max: usize) -> String {
    let text = text.trim();
    let mut end = text.find('\n').unwrap_or(text.len());
    if let Some(dot) = text[..end].find(". ") {
        end = dot + 1;
    }
    let line = text[..end].trim();
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    if let Some(space) = cut.rfind(' ') {
        if space > max / 2 {
            cut.truncate(space);
        }
    }
    format!("{}…", cut.trim_end_matches([',', ';', ':', ' ']))
}
