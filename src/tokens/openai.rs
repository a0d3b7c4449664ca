//! The TypeScript-namespace rendering `OpenAI` chat models see for function tools.
//!
//! Reproduces the format reverse-engineered from the API's token usage (hmarr's
//! `openai-chat-tokens`, used by most counters): a `// description` line, then
//! `type name = (_: { ... }) => any;`, one `// description` line above each top-level (and
//! first nested) property, `?` on optional properties, enums as unions of literals, arrays as
//! `T[]`, nested objects inline. Shapes the known format does not cover (`anyOf`/`oneOf`, type
//! arrays, `const`) are rendered the way TypeScript would write them.

use serde_json::{Map, Value};

/// The text around all function blocks.
pub(crate) const WRAPPER: &str = "namespace functions {\n\n} // namespace functions";

/// Tokens the API adds for the tools block besides the rendered text (measured by hmarr).
pub(crate) const EXTRA_TOKENS: usize = 9;

/// One function's block, ending with a blank line, as it appears inside the namespace.
pub(crate) fn render_tool(name: &str, tool: &Map<String, Value>) -> String {
    let mut out = String::new();
    if let Some(desc) = tool.get("description").and_then(Value::as_str) {
        if !desc.is_empty() {
            out.push_str("// ");
            out.push_str(desc);
            out.push('\n');
        }
    }
    let schema = tool.get("inputSchema");
    let has_props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    match schema {
        Some(schema) if has_props => {
            out.push_str("type ");
            out.push_str(name);
            out.push_str(" = (_: {\n");
            object_properties(schema, 0, &mut out);
            out.push_str("}) => any;\n\n");
        }
        _ => {
            out.push_str("type ");
            out.push_str(name);
            out.push_str(" = () => any;\n\n");
        }
    }
    out
}

fn object_properties(schema: &Value, indent: usize, out: &mut String) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let pad = " ".repeat(indent);
    for (name, prop) in props {
        if indent < 2 {
            if let Some(desc) = prop.get("description").and_then(Value::as_str) {
                out.push_str(&pad);
                out.push_str("// ");
                out.push_str(desc);
                out.push('\n');
            }
        }
        out.push_str(&pad);
        out.push_str(name);
        if !required.contains(&name.as_str()) {
            out.push('?');
        }
        out.push_str(": ");
        type_of(prop, indent, out);
        out.push_str(",\n");
    }
}

fn type_of(schema: &Value, indent: usize, out: &mut String) {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        union(values, out);
        return;
    }
    if let Some(value) = schema.get("const") {
        literal(value, out);
        return;
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            for (i, option) in options.iter().enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                type_of(option, indent, out);
            }
            return;
        }
    }
    match schema.get("type") {
        Some(Value::String(t)) => named_type(t, schema, indent, out),
        Some(Value::Array(types)) => {
            for (i, t) in types.iter().filter_map(Value::as_str).enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                named_type(t, schema, indent, out);
            }
        }
        _ if schema.get("properties").is_some() => named_type("object", schema, indent, out),
        _ => out.push_str("any"),
    }
}

fn named_type(t: &str, schema: &Value, indent: usize, out: &mut String) {
    match t {
        "array" => match schema.get("items") {
            Some(items) if items.is_object() => {
                let mut inner = String::new();
                type_of(items, indent, &mut inner);
                if inner.contains(" | ") {
                    out.push('(');
                    out.push_str(&inner);
                    out.push(')');
                } else {
                    out.push_str(&inner);
                }
                out.push_str("[]");
            }
            _ => out.push_str("any[]"),
        },
        "object" => {
            if schema
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| !p.is_empty())
            {
                out.push_str("{\n");
                object_properties(schema, indent + 2, out);
                // hmarr's format closes nested objects at column 0.
                out.push('}');
            } else {
                out.push_str("object");
            }
        }
        other => out.push_str(other),
    }
}

fn union(values: &[Value], out: &mut String) {
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push_str(" | ");
        }
        literal(v, out);
    }
}

fn literal(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_the_known_format() {
        let tool = json!({
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "inputSchema": {"type": "object", "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "array", "items": {"type": "integer"}},
                "opts": {"type": "object", "properties": {"deep": {"type": "boolean", "description": "Go deep"}}, "required": ["deep"]}
            }, "required": ["location"]}
        });
        let text = render_tool("get_current_weather", tool.as_object().unwrap());
        assert_eq!(
            text,
            "// Get the current weather in a given location\n\
             type get_current_weather = (_: {\n\
             // The city and state, e.g. San Francisco, CA\n\
             location: string,\n\
             unit?: \"celsius\" | \"fahrenheit\",\n\
             days?: integer[],\n\
             opts?: {\n  \
               deep: boolean,\n\
             },\n\
             }) => any;\n\n"
        );
    }

    #[test]
    fn no_parameters() {
        let tool = json!({"name": "now", "inputSchema": {"type": "object"}});
        assert_eq!(
            render_tool("now", tool.as_object().unwrap()),
            "type now = () => any;\n\n"
        );
    }
}
