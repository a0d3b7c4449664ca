//! Host renderings: the text a model is charged for, per tool.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use serde_json::{Map, Value};

/// How a host shows tools to its model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rendering {
    /// `OpenAI`: a TypeScript `namespace functions { ... }` in the system message.
    OpenAi,
    /// Anthropic: the Messages API `tools` JSON (`name`, `description`, `input_schema`) plus a
    /// fixed tool-use system prompt.
    Anthropic,
    /// Compact JSON of the MCP tool object (no whitespace, keys in received order).
    Raw,
}

impl Rendering {
    /// The name used in policies and on the command line.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Raw => "raw",
        }
    }

    /// Text around all tools, paid once whenever there is at least one tool.
    #[must_use]
    pub fn wrapper(self) -> &'static str {
        match self {
            Self::OpenAi => super::openai::WRAPPER,
            Self::Anthropic | Self::Raw => "",
        }
    }

    /// Tokens added by the API besides the rendered text (not counting a profile's overhead).
    #[must_use]
    pub fn extra_tokens(self) -> usize {
        match self {
            Self::OpenAi => super::openai::EXTRA_TOKENS,
            Self::Anthropic | Self::Raw => 0,
        }
    }
}

impl fmt::Display for Rendering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rendering name that is not `openai`, `anthropic` or `raw`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown rendering {0:?}; expected openai, anthropic or raw")]
pub struct UnknownRendering(pub String);

impl FromStr for Rendering {
    type Err = UnknownRendering;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "openai" => Ok(Self::OpenAi),
            "anthropic" => Ok(Self::Anthropic),
            "raw" => Ok(Self::Raw),
            other => Err(UnknownRendering(other.to_owned())),
        }
    }
}

#[derive(Serialize)]
struct AnthropicTool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a Value>,
    input_schema: &'a Value,
}

/// Serializes an MCP tool object with its name replaced, keys in received order.
struct Renamed<'a> {
    name: &'a str,
    tool: &'a Map<String, Value>,
}

impl Serialize for Renamed<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.tool.len()))?;
        for (key, value) in self.tool {
            if key == "name" {
                map.serialize_entry(key, self.name)?;
            } else if key == "_meta" {
                // The gateway's own always-load marker is for the host, never shown to a
                // model: counted or not, a tool costs the same.
                match value.as_object() {
                    Some(meta) if meta.contains_key(ALWAYS_LOAD) => {
                        let mut rest = meta.clone();
                        rest.remove(ALWAYS_LOAD);
                        if !rest.is_empty() {
                            map.serialize_entry(key, &rest)?;
                        }
                    }
                    _ => map.serialize_entry(key, value)?,
                }
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// The `_meta` key that keeps a tool loaded in a host that defers tools itself (Claude Code's
/// tool search), set by the planner on the tools it lists ([`crate::plan::apply`]): for the
/// host, never shown to a model, so no rendering counts it.
pub const ALWAYS_LOAD: &str = "anthropic/alwaysLoad";

/// The text of one tool (exposed as `name`) in `rendering`.
#[must_use]
pub fn render_tool(rendering: Rendering, name: &str, tool: &Map<String, Value>) -> String {
    match rendering {
        Rendering::OpenAi => super::openai::render_tool(name, tool),
        Rendering::Anthropic => {
            let empty = serde_json::json!({"type": "object"});
            let view = AnthropicTool {
                name,
                description: tool.get("description"),
                input_schema: tool.get("inputSchema").unwrap_or(&empty),
            };
            serde_json::to_string(&view).unwrap_or_default()
        }
        Rendering::Raw => serde_json::to_string(&Renamed { name, tool }).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn anthropic_and_raw_are_compact() {
        let tool = json!({"name": "now", "title": "Now", "description": "Time",
            "inputSchema": {"type": "object"}});
        let tool = tool.as_object().unwrap();
        assert_eq!(
            render_tool(Rendering::Anthropic, "t__now", tool),
            r#"{"name":"t__now","description":"Time","input_schema":{"type":"object"}}"#
        );
        assert_eq!(
            render_tool(Rendering::Raw, "t__now", tool),
            r#"{"name":"t__now","title":"Now","description":"Time","inputSchema":{"type":"object"}}"#
        );
    }
}
