//! The tool calls in one assistant message of an OpenAI-compatible chat completion: native
//! `tool_calls`, or written as text, as small models do — a JSON object with `name` and
//! `arguments`, bare, fenced (```` ```json ````) or inside `<tool_call>` tags (Qwen's own
//! format when the server did not parse it).
//!
//! ```
//! use mcp_budget::eval::calls::{Via, parse_message};
//! use serde_json::json;
//!
//! let message = json!({"role": "assistant", "content":
//!     "```json\n{\"name\": \"time__now\", \"arguments\": {\"zone\": \"UTC\"}}\n```"});
//! let calls = parse_message(&message);
//! assert_eq!(calls[0].name, "time__now");
//! assert_eq!(calls[0].arguments, json!({"zone": "UTC"}));
//! assert_eq!(calls[0].via, Via::Text);
//! ```

use serde_json::{Map, Value};

/// How a call reached us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// The endpoint's `tool_calls`.
    Native,
    /// JSON written in the message's text.
    Text,
}

/// One tool call the model made.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The arguments: an object when they parsed as one; else the text the model wrote, as a
    /// string (and [`ToolCall::malformed`] says why).
    pub arguments: Value,
    /// Native or text.
    pub via: Via,
    /// The endpoint's id of a native call.
    pub id: Option<String>,
    /// Why the arguments are not an object, when they are not.
    pub malformed: Option<String>,
}

/// The calls of `message` (a chat completion's `choices[0].message`): its native `tool_calls`
/// when it has any, else those written in its `content`, in order. Empty when it made none.
#[must_use]
pub fn parse_message(message: &Value) -> Vec<ToolCall> {
    let native: Vec<ToolCall> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| calls.iter().filter_map(native_call).collect())
        .unwrap_or_default();
    if !native.is_empty() {
        return native;
    }
    message
        .get("content")
        .and_then(Value::as_str)
        .map(parse_text)
        .unwrap_or_default()
}

fn native_call(call: &Value) -> Option<ToolCall> {
    let function = call.get("function")?;
    let name = function.get("name")?.as_str()?.to_owned();
    let (arguments, malformed) = arguments_of(function.get("arguments"));
    Some(ToolCall {
        name,
        arguments,
        via: Via::Native,
        id: call.get("id").and_then(Value::as_str).map(str::to_owned),
        malformed,
    })
}

/// Arguments given as an object, as a JSON string of one, or not at all (`{}`).
fn arguments_of(given: Option<&Value>) -> (Value, Option<String>) {
    match given {
        None | Some(Value::Null) => (Value::Object(Map::new()), None),
        Some(Value::Object(_)) => (given.cloned().unwrap_or_default(), None),
        Some(Value::String(text)) if text.trim().is_empty() => (Value::Object(Map::new()), None),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => (object, None),
            Ok(_) => (
                Value::String(text.clone()),
                Some("the arguments are not a JSON object".to_owned()),
            ),
            Err(err) => (
                Value::String(text.clone()),
                Some(format!("the arguments are not JSON: {err}")),
            ),
        },
        Some(other) => (
            other.clone(),
            Some("the arguments are not a JSON object".to_owned()),
        ),
    }
}

/// The calls written in `text`: the contents of `<tool_call>` tags, else of fenced blocks, else
/// the JSON values found in the text itself; each an object with a string `name` (or an array
/// of them).
#[must_use]
pub fn parse_text(text: &str) -> Vec<ToolCall> {
    let tagged = between(text, "<tool_call>", "</tool_call>");
    if !tagged.is_empty() {
        return tagged.iter().flat_map(|t| calls_in(t)).collect();
    }
    let fenced = fenced_blocks(text);
    let from_fences: Vec<ToolCall> = fenced.iter().flat_map(|t| calls_in(t)).collect();
    if !from_fences.is_empty() {
        return from_fences;
    }
    calls_in(text)
}

/// The pieces of `text` between each `open` and the next `close` (or the end: a model that
/// stops at its limit leaves the last tag open).
fn between<'t>(text: &'t str, open: &str, close: &str) -> Vec<&'t str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let after = &rest[start + open.len()..];
        let end = after.find(close).unwrap_or(after.len());
        found.push(&after[..end]);
        rest = &after[(end + close.len()).min(after.len())..];
    }
    found
}

/// The bodies of the ```` ``` ```` fenced blocks of `text` (the info string dropped).
fn fenced_blocks(text: &str) -> Vec<&str> {
    between(text, "```", "```")
        .into_iter()
        .map(|block| match block.split_once('\n') {
            Some((info, body)) if !info.trim_start().starts_with(['{', '[']) => body,
            _ => block,
        })
        .collect()
}

/// The calls among the JSON values that start in `text`, in order.
fn calls_in(text: &str) -> Vec<ToolCall> {
    let mut calls = Vec::new();
    let mut at = 0;
    while let Some(offset) = text[at..].find(['{', '[']) {
        let start = at + offset;
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(value)) => {
                let before = calls.len();
                collect_calls(&value, &mut calls);
                at = if calls.len() > before {
                    start + values.byte_offset()
                } else {
                    start + 1
                };
            }
            _ => at = start + 1,
        }
    }
    calls
}

fn collect_calls(value: &Value, calls: &mut Vec<ToolCall>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| collect_calls(v, calls)),
        Value::Object(object) => {
            // `{"function": {"name": …, "arguments": …}}`, as OpenAI's own calls read.
            let inner = object.get("function").filter(|f| f.get("name").is_some());
            let call = inner.and_then(Value::as_object).unwrap_or(object);
            let Some(name) = call.get("name").and_then(Value::as_str) else {
                return;
            };
            let given = call.get("arguments").or_else(|| call.get("parameters"));
            let (arguments, malformed) = arguments_of(given);
            calls.push(ToolCall {
                name: name.to_owned(),
                arguments,
                via: Via::Text,
                id: None,
                malformed,
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(calls: &[ToolCall]) -> Vec<&str> {
        calls.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn native_calls_win_and_their_string_arguments_are_parsed() {
        let message = json!({"content": "{\"name\": \"other\"}", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "a__b", "arguments": "{\"x\": 1}"}}
        ]});
        let calls = parse_message(&message);
        assert_eq!(names(&calls), ["a__b"]);
        assert_eq!(calls[0].arguments, json!({"x": 1}));
        assert_eq!(calls[0].via, Via::Native);
        assert_eq!(calls[0].id.as_deref(), Some("c1"));
    }

    #[test]
    fn broken_native_arguments_are_kept_as_text_and_said() {
        let message = json!({"tool_calls": [{"function": {"name": "t", "arguments": "{x: 1"}}]});
        let call = &parse_message(&message)[0];
        assert_eq!(call.arguments, json!("{x: 1"));
        assert!(call.malformed.as_deref().unwrap().contains("not JSON"));
    }

    #[test]
    fn tagged_fenced_and_bare_calls_are_found() {
        let tagged = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n\
                      <tool_call>{\"name\": \"b\", \"arguments\": {\"q\": 1}}";
        assert_eq!(names(&parse_text(tagged)), ["a", "b"]);
        let fenced = "Sure:\n```json\n{\"name\": \"c\", \"arguments\": {\"q\": \"x\"}}\n```\nDone.";
        assert_eq!(names(&parse_text(fenced)), ["c"]);
        let bare = "I will call {\"name\": \"d\", \"parameters\": {\"n\": 2}} now";
        let calls = parse_text(bare);
        assert_eq!(names(&calls), ["d"]);
        assert_eq!(calls[0].arguments, json!({"n": 2}));
        let listed = "[{\"name\": \"e\", \"arguments\": {}}, {\"name\": \"f\"}]";
        assert_eq!(names(&parse_text(listed)), ["e", "f"]);
        let openai =
            "{\"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": \"{}\"}}";
        assert_eq!(names(&parse_text(openai)), ["g"]);
    }

    #[test]
    fn prose_and_json_without_a_name_are_no_call() {
        assert!(parse_text("The time in Tokyo is 10:00.").is_empty());
        assert!(parse_text("{\"answer\": 42} and {broken").is_empty());
        assert!(parse_message(&json!({"content": null})).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_without_panicking(text in ".{0,200}") {
            let _ = parse_text(&text);
        }

        #[test]
        fn a_written_call_is_found_whatever_surrounds_it(
            before in "[a-zA-Z ,.:]{0,40}", after in "[a-zA-Z ,.:]{0,40}",
            name in "[a-z_]{1,12}", n in 0i64..1000,
        ) {
            let call = json!({"name": name, "arguments": {"n": n}});
            let text = format!("{before}{call}{after}");
            let calls = parse_text(&text);
            proptest::prop_assert_eq!(calls.len(), 1);
            proptest::prop_assert_eq!(&calls[0].name, &name);
            proptest::prop_assert_eq!(&calls[0].arguments, &json!({"n": n}));
        }
    }
}
