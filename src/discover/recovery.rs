//! What `invoke_tool` answers when a call cannot go through as sent, written so that the
//! model's next try works: the concrete problem (path, expected, got), the required fields, a
//! call of the right shape, and the tool's full input schema inline (no extra `get_tool_schema`
//! round trip).
//!
//! Three cases, each a `CallToolResult` with `isError: true` whose `structuredContent.type`
//! names it:
//!
//! - `mcp_budget.discover.missing_arguments`: no arguments (or `{}`) where the schema
//!   requires fields;
//! - `mcp_budget.discover.misplaced_arguments`: the tool's arguments sent next to `name`
//!   (or under another key, such as `tool_input`) instead of inside `arguments`;
//! - `mcp_budget.discover.invalid_arguments`: arguments that fail the schema check.
//!
//! Misplaced arguments are never moved into place and forwarded: a guessed call to a tool
//! with side effects is worse than one more round trip.

use serde_json::{Map, Value, json};

use crate::error::kind;

/// Keys of an `invoke_tool` call that belong to the call itself, not to the tool.
pub(crate) const CALL_KEYS: &[&str] = &["name", "tool_name", "arguments"];

/// Keys some models and frameworks put a tool's arguments under instead of `arguments`.
const ARGUMENT_ALIASES: &[&str] = &["tool_input", "input", "args", "parameters", "params"];

/// How the arguments were sent, when they are not where they belong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Misplaced {
    /// Under another key (`tool_input`, `args`, ...).
    Alias(String),
    /// At the top level next to `name`: these keys.
    TopLevel(Vec<String>),
}

/// Where the arguments of `call` (an `invoke_tool`'s own arguments) went, when `arguments`
/// itself is missing or empty and something else looks like them.
pub(crate) fn misplaced(call: &Value) -> Option<Misplaced> {
    let call = call.as_object()?;
    let given = call.get("arguments");
    if given.is_some_and(|a| a.as_object().is_none_or(|o| !o.is_empty()) && !a.is_null()) {
        return None;
    }
    if let Some(alias) = ARGUMENT_ALIASES
        .iter()
        .find(|k| call.get(**k).is_some_and(Value::is_object))
    {
        return Some(Misplaced::Alias((*alias).to_owned()));
    }
    let top: Vec<String> = call
        .keys()
        .filter(|k| !CALL_KEYS.contains(&k.as_str()))
        .cloned()
        .collect();
    (!top.is_empty()).then_some(Misplaced::TopLevel(top))
}

/// The recovery answer for tool `exposed` (its `schema`, as the upstream gave it) called with
/// `problem`; `invoke` is the `invoke_tool` meta-tool's name.
pub(crate) fn answer(exposed: &str, schema: &Value, invoke: &str, problem: &Problem) -> Value {
    let required = required_fields(schema);
    let (type_of, headline) = match problem {
        Problem::Missing => (
            kind::discover::MISSING_ARGUMENTS,
            format!("{exposed} needs arguments; none were given."),
        ),
        Problem::Misplaced(Misplaced::Alias(key)) => (
            kind::discover::MISPLACED_ARGUMENTS,
            format!("The arguments of {exposed} go inside \"arguments\", not \"{key}\"."),
        ),
        Problem::Misplaced(Misplaced::TopLevel(keys)) => (
            kind::discover::MISPLACED_ARGUMENTS,
            format!(
                "The arguments of {exposed} go inside \"arguments\", not next to \"name\": found {} at the top level.",
                keys.join(", ")
            ),
        ),
        Problem::Invalid(problems) => (
            kind::discover::INVALID_ARGUMENTS,
            format!(
                "Invalid arguments for {exposed}:\n- {}",
                problems.join("\n- ")
            ),
        ),
    };
    let mut text = headline;
    if !required.is_empty() {
        let listed: Vec<String> = required
            .iter()
            .map(|(name, kind)| match kind {
                Some(kind) => format!("{name} ({kind})"),
                None => name.clone(),
            })
            .collect();
        text.push_str(&format!("\nRequired: {}.", listed.join(", ")));
    }
    text.push_str(&format!(
        "\nCall {invoke} again as {}.\nInput schema of {exposed}: {schema}",
        example_call(exposed, &required)
    ));
    let problems = match problem {
        Problem::Invalid(problems) => problems.clone(),
        _ => Vec::new(),
    };
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": {
            "type": type_of,
            "tool": exposed,
            "problems": problems,
            "required": required.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            "inputSchema": schema,
        },
        "isError": true
    })
}

/// What is wrong with an `invoke_tool` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// No arguments where some are required.
    Missing,
    /// The arguments are elsewhere in the call.
    Misplaced(Misplaced),
    /// The schema check's problems.
    Invalid(Vec<String>),
}

/// The top-level required fields of `schema`, with their types when declared.
fn required_fields(schema: &Value) -> Vec<(String, Option<String>)> {
    let properties = schema.get("properties").and_then(Value::as_object);
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(|name| {
                    let kind = properties
                        .and_then(|p| p.get(name))
                        .and_then(|p| p.get("type"))
                        .map(|t| match t {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        });
                    (name.to_owned(), kind)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `schema` requires any top-level field.
pub(crate) fn requires_fields(schema: &Value) -> bool {
    schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
}

/// `{"name": "x", "arguments": {"a": "…", "b": 0}}` with a placeholder per required field.
fn example_call(exposed: &str, required: &[(String, Option<String>)]) -> String {
    let arguments: Map<String, Value> = required
        .iter()
        .map(|(name, kind)| {
            let placeholder = match kind.as_deref() {
                Some("integer" | "number") => json!(0),
                Some("boolean") => json!(false),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("…"),
            };
            (name.clone(), placeholder)
        })
        .collect();
    json!({"name": exposed, "arguments": arguments}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_arguments_sent_elsewhere() {
        assert_eq!(
            misplaced(&json!({"name": "t", "arguments": {"a": 1}})),
            None
        );
        assert_eq!(misplaced(&json!({"name": "t"})), None);
        assert_eq!(
            misplaced(&json!({"name": "t", "arguments": {}, "owner": "o", "repo": "r"})),
            Some(Misplaced::TopLevel(vec!["owner".into(), "repo".into()]))
        );
        assert_eq!(
            misplaced(&json!({"tool_name": "t", "tool_input": {"a": 1}})),
            Some(Misplaced::Alias("tool_input".into()))
        );
        // Arguments given where they belong: other keys are ignored, as before.
        assert_eq!(
            misplaced(&json!({"name": "t", "arguments": {"a": 1}, "b": 2})),
            None
        );
    }

    #[test]
    fn answers_name_the_required_fields_and_carry_the_schema() {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"},
            "days": {"type": "integer"}}, "required": ["city", "days"]});
        let r = answer("w__forecast", &schema, "invoke_tool", &Problem::Missing);
        assert_eq!(r["isError"], true);
        let text = r["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            text,
            format!(
                "w__forecast needs arguments; none were given.\nRequired: city (string), days (integer).\n\
                 Call invoke_tool again as {{\"name\":\"w__forecast\",\"arguments\":{{\"city\":\"…\",\"days\":0}}}}.\n\
                 Input schema of w__forecast: {schema}"
            )
        );
        assert_eq!(
            r["structuredContent"]["type"],
            "mcp_budget.discover.missing_arguments"
        );
        assert_eq!(r["structuredContent"]["inputSchema"], schema);
        assert!(requires_fields(&schema) && !requires_fields(&json!({"type": "object"})));
    }
}
