//! Tool results as script values, and the run's result as a `CallToolResult`.

use serde_json::{Value, json};

use super::CallError;

/// The value a script gets from `tools.call` for the tool's `CallToolResult`: its
/// `structuredContent` when it has one, else its content — one text part parsed as JSON when
/// it is JSON (else the text), several parts as an array of those values (parts that are not
/// text as they are), no content as `null`.
///
/// # Errors
/// A result with `isError: true`: its text, to be thrown into the script.
///
/// ```
/// use mcp_budget::codemode::script_value;
/// use serde_json::json;
/// let text = json!({"content": [{"type": "text", "text": "[1, 2]"}]});
/// assert_eq!(script_value(&text).unwrap(), json!([1, 2]));
/// let failed = json!({"content": [{"type": "text", "text": "no such repo"}], "isError": true});
/// assert_eq!(script_value(&failed).unwrap_err().message, "no such repo");
/// ```
pub fn script_value(result: &Value) -> Result<Value, CallError> {
    let parts: Vec<Value> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|content| content.iter().map(part_value).collect())
        .unwrap_or_default();
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = parts
            .iter()
            .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join("\n");
        return Err(CallError {
            message: if message.is_empty() {
                "the tool reported an error".to_owned()
            } else {
                message
            },
            kind: None,
        });
    }
    if let Some(structured) = result.get("structuredContent") {
        return Ok(structured.clone());
    }
    let mut parts = parts;
    Ok(match parts.len() {
        0 => Value::Null,
        1 => parts.remove(0),
        _ => Value::Array(parts),
    })
}

/// One content part as a value: a text part's text (parsed when it is JSON), anything else as
/// it is.
fn part_value(part: &Value) -> Value {
    match (part.get("type").and_then(Value::as_str), part.get("text")) {
        (Some("text"), Some(Value::String(text))) => {
            let trimmed = text.trim_start();
            let looks_json = trimmed.starts_with(['{', '[', '"']);
            looks_json
                .then(|| serde_json::from_str(text).ok())
                .flatten()
                .unwrap_or_else(|| Value::String(text.clone()))
        }
        _ => part.clone(),
    }
}

/// The `run_code` result for a run that returned `json` (JSON text).
#[must_use]
pub fn success_result(json: &str) -> Value {
    json!({"content": [{"type": "text", "text": json}]})
}

/// The `run_code` result for a run that ended without a result: `isError: true` with `text`.
#[must_use]
pub fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}
