//! The `run_code` meta-tool's definition, and the typed API description scripts read with
//! `tools.describe()`.

use serde_json::{Map, Value, json};

use crate::tokens::{Rendering, render_tool};

/// The meta-tool's name unless `[discover] code_tool` renames it.
pub const DEFAULT_NAME: &str = "run_code";

/// The MCP tool object of the code-mode meta-tool, named `name`.
///
/// Kept short (every host prompt pays for it): what the script can call, what comes back, and
/// where the typed API is (`tools.describe`, on demand, never listed).
#[must_use]
pub fn definition(name: &str) -> Value {
    json!({
        "name": name,
        "description": "Run a JavaScript program that calls tools; only its result enters the conversation, so filter and join there. In the script: tools.call(name, args) returns the tool's result as a value (its structured content, or its text parsed when JSON) and throws on tool errors; tools.search(query) finds tools; tools.schema(name) gives a tool's definition; tools.describe(query?) returns the tools as TypeScript declarations. The top-level return value (or the last expression) is the result, as JSON. Calls are synchronous (await also works). No network, files, timers or modules.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "JavaScript, e.g. const r = tools.call(\"server__tool\", {q: 1}); return r.items.length"}
            },
            "required": ["code"]
        }
    })
}

/// The typed API description of `tools` (exposed name, definition): TypeScript declarations
/// in the `OpenAI` namespace rendering the token counter measures, inside `namespace tools`.
///
/// ```
/// use mcp_budget::codemode::api_description;
/// use serde_json::json;
/// let def = json!({"description": "Forecast.", "inputSchema": {"type": "object",
///     "properties": {"city": {"type": "string"}}, "required": ["city"]}});
/// let text = api_description([("weather__forecast", def.as_object().unwrap())]);
/// assert!(text.contains("type weather__forecast = (_: {\ncity: string,\n}) => any;"));
/// ```
pub fn api_description<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a Map<String, Value>)>,
) -> String {
    let mut out = String::from(
        "// Call as tools.call(\"name\", args): the value is the tool's structured content, else its text (parsed when JSON).\nnamespace tools {\n\n",
    );
    for (name, definition) in tools {
        out.push_str(&render_tool(Rendering::OpenAi, name, definition));
    }
    out.push_str("} // namespace tools");
    out
}
