//! Per-request preselection: of a request's client-defined tools, only the `k` that fit the
//! conversation are listed in full, after the cacheable static block.
//!
//! A model choosing among many full definitions does worse than among a few (the eval's
//! `flat-N` against `preselect-K`, `docs/eval.md`), but a static list cannot know the request.
//! Where the gateway sees the request (an LLM API call, [`super::LlmCacheLayer`]), it can:
//!
//! - **Static block**: the provider's own tools and the tools [`Preselect::keep`] names (the
//!   gateway's meta-tools, so the rest stay reachable), in canonical order, then the cache
//!   breakpoint (Anthropic). These are the same on every turn, so caches keep hitting.
//! - **Per-request set**: at most [`Preselect::k`] of the other client-defined tools, best
//!   first, chosen by [`choose`] from the [`Conversation`]; the others are left out of this
//!   request (the host still has them: a call of one by name still reaches it).
//! - **Dynamic tools** (the caller's [`super::ToolClasses`]) follow, as without preselection.
//!
//! The rule, in order, until `k` are chosen: (1) the tools called since the last user text
//! turn (a tool loop keeps its tools); (2) the lexical search ([`crate::search`], as
//! `search_tools` ranks) of the last user text turn; (3) the same search of up to
//! [`EARLIER_TURNS`] earlier user text turns, most recent first. A user text turn is a user
//! message with text in it (tool results are not one). A tool no step ranks is not listed.
//!
//! ```
//! use mcp_budget::llm_api::preselect::{Conversation, choose, request_tool};
//! use serde_json::json;
//!
//! let tools: Vec<_> = [
//!     ("fs__read_file", "Read a file from disk"),
//!     ("fs__write_file", "Write a file to disk"),
//!     ("time__now", "The current time"),
//! ]
//! .iter()
//! .filter_map(|(n, d)| request_tool(&json!({"name": n, "description": d})))
//! .collect();
//! let body = json!({"messages": [{"role": "user", "content": "what time is it?"}]});
//! let conversation = Conversation::of(&body);
//! assert_eq!(conversation.last, "what time is it?");
//! assert_eq!(choose(&tools, &conversation, 1), [2]);
//! ```

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::{Slot, ToolClasses};
use crate::catalog::CatalogTool;
use crate::search::SearchIndex;

/// Most earlier user text turns searched to fill the per-request set.
pub const EARLIER_TURNS: usize = 2;

/// Most characters of a turn searched (its end: the question usually closes a pasted text).
pub const TURN_CHARS: usize = 2000;

/// The separator a request tool's name is split at into server and tool for the search's
/// server field (`filesystem__read_file`), as the gateway names them by default.
const SEPARATOR: &str = "__";

/// How a request's tools are preselected.
///
/// ```
/// use mcp_budget::llm_api::ToolClasses;
/// use mcp_budget::llm_api::preselect::Preselect;
///
/// let p = Preselect::new(5).keeping(ToolClasses::dynamic_names(["search_tools"]));
/// assert_eq!(p.k, 5);
/// assert!(p.keep.is_dynamic("search_tools"));
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Preselect {
    /// Most client-defined tools listed in full per request (besides the kept ones).
    pub k: usize,
    /// Tools always listed, in the static block (a name the classes call "dynamic" is kept):
    /// the gateway's meta-tools, through which the rest stay reachable.
    pub keep: ToolClasses,
    /// `k` comes from the request's `model`: its built-in profile's
    /// [`preselect`](crate::profile::Profile::preselect) (0, every tool, for a model with
    /// none).
    pub by_model: bool,
}

impl Preselect {
    /// `k` tools per request, none kept.
    #[must_use]
    pub fn new(k: usize) -> Self {
        Self {
            k,
            keep: ToolClasses::all_static(),
            by_model: false,
        }
    }

    /// As many tools per request as the request's model's profile says, none kept.
    ///
    /// ```
    /// use mcp_budget::llm_api::preselect::Preselect;
    /// use serde_json::json;
    ///
    /// let p = Preselect::by_model();
    /// assert_eq!(p.k_for(&json!({"model": "qwen2.5-coder:1.5b"})), 5);
    /// assert_eq!(p.k_for(&json!({"model": "claude-sonnet-4-5"})), 0);
    /// assert_eq!(Preselect::new(3).k_for(&json!({"model": "qwen2.5:7b"})), 3);
    /// ```
    #[must_use]
    pub fn by_model() -> Self {
        Self {
            by_model: true,
            ..Self::new(0)
        }
    }

    /// The most tools preselected for the request `body`: [`Self::k`], or with
    /// [`Self::by_model`] its `model`'s profile's (0 without one: no preselection).
    #[must_use]
    pub fn k_for(&self, body: &Value) -> usize {
        if !self.by_model {
            return self.k;
        }
        body.get("model")
            .and_then(Value::as_str)
            .and_then(crate::profile::builtin)
            .map_or(0, |p| p.preselect)
    }

    /// With `keep` as [`Preselect::keep`].
    #[must_use]
    pub fn keeping(mut self, keep: ToolClasses) -> Self {
        self.keep = keep;
        self
    }
}

/// What preselection reads of a request: the last user text turn, earlier ones, and the tools
/// called since the last one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Conversation {
    /// The text of the last user text turn (its last [`TURN_CHARS`] characters).
    pub last: String,
    /// Up to [`EARLIER_TURNS`] earlier user text turns, most recent first.
    pub earlier: Vec<String>,
    /// Tools called since the last user text turn, in call order, each once.
    pub called: Vec<String>,
}

impl Conversation {
    /// The conversation of an Anthropic Messages, `OpenAI` Chat Completions (`messages`) or
    /// Responses (`input`, a string or items) request body.
    #[must_use]
    pub fn of(body: &Value) -> Self {
        let turns: Vec<Turn> = match (body.get("messages"), body.get("input")) {
            (Some(Value::Array(messages)), _) | (None, Some(Value::Array(messages))) => {
                messages.iter().map(turn).collect()
            }
            (None, Some(Value::String(text))) => vec![Turn::User(text.clone())],
            _ => Vec::new(),
        };
        let mut out = Self::default();
        let mut texts = Vec::new();
        let mut called = Vec::new();
        for turn in turns.into_iter().rev() {
            match turn {
                Turn::User(text) => texts.push(text),
                Turn::Calls(names) if texts.is_empty() => called.extend(names.into_iter().rev()),
                Turn::Calls(_) | Turn::Other => {}
            }
            if texts.len() > EARLIER_TURNS {
                break;
            }
        }
        let mut seen = HashSet::new();
        out.called = called
            .into_iter()
            .rev()
            .filter(|n| seen.insert(n.clone()))
            .collect();
        let mut texts = texts.into_iter().map(|t| tail(&t));
        out.last = texts.next().unwrap_or_default();
        out.earlier = texts.collect();
        out
    }

    /// A conversation of one user turn.
    #[must_use]
    pub fn from_text(text: &str) -> Self {
        Self {
            last: tail(text),
            ..Self::default()
        }
    }
}

/// One message, as preselection sees it.
enum Turn {
    User(String),
    Calls(Vec<String>),
    Other,
}

fn turn(message: &Value) -> Turn {
    let role = message.get("role").and_then(Value::as_str);
    let kind = message.get("type").and_then(Value::as_str);
    if kind == Some("function_call") {
        return Turn::Calls(str_at(message, "name").into_iter().collect());
    }
    match role {
        Some("user") => {
            let text = text_of(message.get("content"));
            if text.trim().is_empty() {
                Turn::Other
            } else {
                Turn::User(text)
            }
        }
        Some("assistant") => {
            let mut names: Vec<String> = blocks(message.get("content"))
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                .filter_map(|b| str_at(b, "name"))
                .collect();
            if let Some(Value::Array(calls)) = message.get("tool_calls") {
                names.extend(
                    calls
                        .iter()
                        .filter_map(|c| str_at(c.get("function")?, "name")),
                );
            }
            Turn::Calls(names)
        }
        _ => Turn::Other,
    }
}

fn str_at(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn blocks(content: Option<&Value>) -> impl Iterator<Item = &Value> {
    content.and_then(Value::as_array).into_iter().flatten()
}

/// The text of a message's content: a string, or its text blocks joined.
fn text_of(content: Option<&Value>) -> String {
    if let Some(Value::String(text)) = content {
        return text.clone();
    }
    let texts: Vec<&str> = blocks(content)
        .filter(|b| {
            matches!(
                b.get("type").and_then(Value::as_str),
                Some("text" | "input_text")
            )
        })
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    texts.join("\n")
}

/// The last [`TURN_CHARS`] characters of `text`.
fn tail(text: &str) -> String {
    let count = text.chars().count();
    text.chars()
        .skip(count.saturating_sub(TURN_CHARS))
        .collect()
}

/// A request tool (Anthropic, Chat Completions with its `function` object, or Responses) as a
/// catalog tool the search can index: its name split at the first `__` into server and tool
/// (else server `request`), its description, its input schema. `None` without a name.
#[must_use]
pub fn request_tool(tool: &Value) -> Option<CatalogTool> {
    let function = tool
        .get("function")
        .filter(|f| f.is_object())
        .unwrap_or(tool);
    let name = function.get("name").and_then(Value::as_str)?;
    let (server, tool_name) = match name.split_once(SEPARATOR) {
        Some((server, rest)) if !server.is_empty() && !rest.is_empty() => (server, rest),
        _ => ("request", name),
    };
    let mut definition = Map::new();
    definition.insert("name".into(), json!(tool_name));
    if let Some(description) = function.get("description") {
        definition.insert("description".into(), description.clone());
    }
    let schema = ["input_schema", "parameters", "inputSchema"]
        .iter()
        .find_map(|k| function.get(*k));
    if let Some(schema) = schema {
        definition.insert("inputSchema".into(), schema.clone());
    }
    let catalog = CatalogTool::new(server, Value::Object(definition)).ok()?;
    Some(catalog.with_exposed_name(name))
}

/// The indices of the tools to list, best first, at most `k` (see the module docs for the
/// rule).
#[must_use]
pub fn choose(tools: &[CatalogTool], conversation: &Conversation, k: usize) -> Vec<usize> {
    let mut chosen: Vec<usize> = Vec::new();
    let add = |i: usize, chosen: &mut Vec<usize>| {
        if chosen.len() < k && !chosen.contains(&i) {
            chosen.push(i);
        }
    };
    for name in &conversation.called {
        if let Some(i) = tools.iter().position(|t| t.catalog_name() == Some(name)) {
            add(i, &mut chosen);
        }
    }
    if chosen.len() >= k {
        return chosen;
    }
    let index = SearchIndex::build(tools);
    for text in std::iter::once(&conversation.last).chain(&conversation.earlier) {
        for hit in index.search(text, k) {
            add(hit.index, &mut chosen);
        }
        if chosen.len() >= k {
            break;
        }
    }
    chosen
}

/// What preselection did to a request's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Chosen {
    /// Client-defined tools listed in the per-request set.
    pub listed: usize,
    /// Client-defined tools left out of this request.
    pub left_out: usize,
}

/// `tools` in canonical order with `static_len` static ones (as [`super::order`] gives them),
/// preselected for `body`'s conversation: the static block (provider tools and kept ones),
/// the per-request set, then the dynamic tools; with the new static length.
pub(crate) fn apply(
    tools: Vec<Value>,
    static_len: usize,
    body: &Value,
    preselect: &Preselect,
    k: usize,
    slot: impl Fn(&Value) -> Slot,
) -> (Vec<Value>, usize, Chosen) {
    let mut fixed = Vec::new();
    let mut candidates = Vec::new();
    let mut catalog = Vec::new();
    let mut dynamic = Vec::new();
    for (i, tool) in tools.into_iter().enumerate() {
        let Slot { name, sorted } = slot(&tool);
        let kept = name
            .as_deref()
            .is_some_and(|n| preselect.keep.is_dynamic(n));
        let as_catalog = (i < static_len && sorted && !kept)
            .then(|| request_tool(&tool))
            .flatten();
        match as_catalog {
            Some(c) => {
                catalog.push(c);
                candidates.push(Some(tool));
            }
            None if i < static_len => fixed.push(tool),
            None => dynamic.push(tool),
        }
    }
    let conversation = Conversation::of(body);
    let order = choose(&catalog, &conversation, k);
    let chosen = Chosen {
        listed: order.len(),
        left_out: candidates.len() - order.len(),
    };
    let static_len = fixed.len();
    let mut out = fixed;
    out.extend(order.into_iter().filter_map(|i| candidates[i].take()));
    out.extend(dynamic);
    (out, static_len, chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(names: &[(&str, &str)]) -> Vec<CatalogTool> {
        names
            .iter()
            .filter_map(|(n, d)| request_tool(&json!({"name": n, "description": d})))
            .collect()
    }

    #[test]
    fn the_conversation_is_the_last_user_text_and_the_calls_since() {
        let body = json!({"messages": [
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "read the notes"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "fs__read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "b", "type": "function", "function": {"name": "fs__list", "arguments": "{}"}},
                {"id": "c", "type": "function", "function": {"name": "fs__read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "b", "content": "y"},
        ]});
        let c = Conversation::of(&body);
        assert_eq!(c.last, "read the notes");
        assert_eq!(c.earlier, ["first question"]);
        assert_eq!(c.called, ["fs__read", "fs__list"]);
    }

    #[test]
    fn responses_input_counts_too() {
        let c = Conversation::of(&json!({"input": "hello"}));
        assert_eq!(c.last, "hello");
        let body = json!({"input": [
            {"role": "user", "content": [{"type": "input_text", "text": "weather in Paris"}]},
            {"type": "function_call", "name": "w__forecast", "call_id": "1", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "1", "output": "sunny"},
        ]});
        let c = Conversation::of(&body);
        assert_eq!(
            (c.last.as_str(), c.called.as_slice()),
            ("weather in Paris", &["w__forecast".to_owned()][..])
        );
        assert_eq!(tail(&"x".repeat(TURN_CHARS + 5)).len(), TURN_CHARS);
    }

    #[test]
    fn called_tools_come_first_then_the_search_then_earlier_turns() {
        let all = tools(&[
            ("fs__read_file", "Read a file"),
            ("fs__write_file", "Write a file"),
            ("git__commit", "Record changes to the repository"),
            ("time__now", "The current time"),
        ]);
        let c = Conversation {
            last: "write the file".into(),
            earlier: vec!["what time is it".into()],
            called: vec!["git__commit".into(), "unknown__tool".into()],
        };
        assert_eq!(choose(&all, &c, 1), [2]);
        let three = choose(&all, &c, 3);
        assert_eq!(three[..2], [2, 1]);
        assert_eq!(choose(&all, &c, 10).last(), Some(&3));
        assert!(choose(&all, &Conversation::from_text("zebra"), 3).is_empty());
    }

    #[test]
    fn apply_puts_kept_tools_first_and_the_chosen_after() {
        let slot = |t: &Value| Slot {
            name: t.get("name").and_then(Value::as_str).map(str::to_owned),
            sorted: t.get("type").is_none(),
        };
        let tools = vec![
            json!({"type": "web_search_20250305", "name": "web_search"}),
            json!({"name": "fs__read_file", "description": "Read a file"}),
            json!({"name": "search_tools", "description": "Search the tools"}),
            json!({"name": "time__now", "description": "The current time"}),
            json!({"name": "note", "description": "dynamic"}),
        ];
        let body = json!({"messages": [{"role": "user", "content": "what time is it now"}]});
        let p = Preselect::new(1).keeping(ToolClasses::dynamic_names(["search_tools"]));
        let (out, static_len, chosen) = apply(tools, 4, &body, &p, p.k, slot);
        let names: Vec<&str> = out.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["web_search", "search_tools", "time__now", "note"]);
        assert_eq!(static_len, 2);
        assert_eq!(
            chosen,
            Chosen {
                listed: 1,
                left_out: 1
            }
        );
    }
}
