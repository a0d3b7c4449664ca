//! Anthropic Messages API (`POST /v1/messages`): cache-stable `tools` and one breakpoint.
//!
//! [`rewrite`] orders and canonicalizes `tools` (see [`crate::llm_api`]), then places the
//! static tools' cache breakpoint by these rules:
//!
//! 1. **Target**: the last static tool. No static tool, no breakpoint.
//! 2. **The caller's breakpoints win.** A `cache_control` the caller set on a static tool before
//!    the target is moved onto the target (its value kept, e.g. a `"ttl": "1h"`): its old
//!    position moves with upstream order, so it would bust the cache it asks for. When several
//!    were set there, one is kept (a one-hour one if any, else the last). When the target (or
//!    any later tool) carries one, nothing is added.
//! 3. **At most 4 breakpoints per request**: the `cache_control` of `tools`, of `system` blocks,
//!    of `messages[].content[]` blocks (and of the blocks inside their `tool_result` content)
//!    and a top-level `cache_control` are counted; at 4, nothing is added.
//! 4. **Not below the minimum cacheable length** ([`min_cacheable_tokens`], or
//!    [`RewriteOptions::min_cache_tokens`]): the static tools' JSON is counted with
//!    [`RewriteOptions::counter`] (or estimated at 4 characters per token); below the minimum
//!    the API would not cache, and the breakpoint would only use up one of the 4.
//! 5. **Added**: `{"type": "ephemeral"}` on the target, with `"ttl": "1h"` when
//!    [`RewriteOptions::ttl`] asks for it or when a later breakpoint of the request is a
//!    one-hour one (the API wants longer TTLs before shorter ones).
//!
//! Server tools (a `type` other than `custom`, such as `web_search_20250305` or
//! `text_editor_20250728`) are defined by the caller's code, not by upstreams, so they are the
//! most stable tools of all: they come first among the static tools, in the caller's relative
//! order, before the custom tools sorted by name. Naming one in [`ToolClasses`] makes it
//! dynamic like any other tool.
//!
//! Only `tools` changes; every other field of the request is kept as it is.
//!
//! ```
//! use mcp_budget::llm_api::{anthropic, Breakpoint, RewriteOptions};
//! use serde_json::json;
//!
//! let long = "word ".repeat(1_500);
//! let mut body = json!({"model": "claude-sonnet-4-5", "tools": [
//!     {"name": "b", "description": long, "input_schema": {"type": "object"}},
//!     {"name": "a", "description": long, "input_schema": {"type": "object"}},
//! ], "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]});
//! let outcome = anthropic::rewrite(&mut body, &RewriteOptions::default());
//! assert_eq!(outcome.breakpoint, Breakpoint::Added);
//! assert_eq!(body["tools"][0]["name"], "a");
//! assert_eq!(body["tools"][1]["cache_control"], json!({"type": "ephemeral"}));
//! assert_eq!(anthropic::breakpoints(&body), 2);
//! ```

use serde_json::{Map, Value};

#[cfg(doc)]
use super::ToolClasses;
use super::{
    Breakpoint, CacheTtl, Rewrite, RewriteOptions, Slot, compress_tool, put_tools, take_ordered,
};
use crate::compress::Level;

/// Most cache breakpoints the Messages API accepts in one request.
pub const MAX_BREAKPOINTS: usize = 4;

/// The minimum cacheable prompt length of `model`, in tokens: 4096 for Claude Opus 4.5/4.6
/// and Haiku 4.5, 2048 for Sonnet 4.6 and older Haiku-class models, 1024 for the other
/// Sonnet/Opus-class models (Anthropic's prompt-caching documentation). Unknown models get
/// their class's value (Haiku-class 2048, else 1024).
///
/// ```
/// use mcp_budget::llm_api::anthropic::min_cacheable_tokens;
///
/// assert_eq!(min_cacheable_tokens("claude-sonnet-4-5-20250929"), 1024);
/// assert_eq!(min_cacheable_tokens("claude-3-5-haiku-latest"), 2048);
/// assert_eq!(min_cacheable_tokens("claude-haiku-4-5"), 4096);
/// ```
#[must_use]
pub fn min_cacheable_tokens(model: &str) -> usize {
    let m: String = model
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c == '.' || c == '_' { '-' } else { c })
        .collect();
    let has = |s: &str| {
        m.match_indices(s).any(|(i, _)| {
            // `opus-4-5` but not `opus-4-50…`: the version ends at a `-` or the end.
            m[i + s.len()..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_ascii_digit())
        })
    };
    if has("opus-4-5") || has("opus-4-6") || has("haiku-4-5") {
        4096
    } else if has("sonnet-4-6") || m.contains("haiku") {
        2048
    } else {
        1024
    }
}

/// Rewrites the `tools` of a Messages API request body in place (see the module docs) and
/// reports what it did. A body without a `tools` array is left as it is.
#[must_use = "the outcome says whether a breakpoint was added"]
pub fn rewrite(body: &mut Value, options: &RewriteOptions) -> Rewrite {
    let Some((mut tools, mut outcome)) = take_ordered(
        body,
        options,
        compress,
        slot,
        crate::canonical::into_canonical_tool,
    ) else {
        return Rewrite::default();
    };
    let static_len = outcome.static_tools;
    outcome.breakpoint = if static_len == 0 {
        Breakpoint::NoStaticTools
    } else {
        consolidate(&mut tools, static_len - 1);
        if tools[static_len - 1..].iter().any(has_cache_control) {
            Breakpoint::Caller
        } else {
            place(body, &mut tools, static_len, options, &mut outcome)
        }
    };
    put_tools(body, tools);
    outcome
}

/// A client-defined tool's description and schema compressed; provider tools stay as sent.
fn compress(tool: &mut Value, level: Level) {
    let custom = is_custom(tool);
    if let (Value::Object(t), true) = (tool, custom) {
        compress_tool(t, level, "input_schema");
    }
}

/// Steps 3 to 5 of the module docs, for a request whose tools carry no breakpoint at or after
/// the target.
fn place(
    body: &Value,
    tools: &mut [Value],
    static_len: usize,
    options: &RewriteOptions,
    outcome: &mut Rewrite,
) -> Breakpoint {
    let outside = outside_tools(body);
    let in_tools = tools.iter().filter(|t| has_cache_control(t)).count();
    if outside.len() + in_tools >= MAX_BREAKPOINTS {
        return Breakpoint::NoRoom;
    }
    let min = options.min_cache_tokens.unwrap_or_else(|| {
        min_cacheable_tokens(body.get("model").and_then(Value::as_str).unwrap_or(""))
    });
    outcome.static_tokens = static_tokens(&tools[..static_len], options, min);
    if outcome.static_tokens < min {
        return Breakpoint::BelowMinimum;
    }
    let later_hour = outside.iter().any(|c| is_one_hour(c));
    let ttl = match options.ttl {
        _ if later_hour => Some(CacheTtl::OneHour),
        ttl => ttl,
    };
    let mut control = Map::new();
    if let Some(ttl) = ttl {
        control.insert("ttl".into(), Value::String(ttl.as_str().into()));
    }
    control.insert("type".into(), Value::String("ephemeral".into()));
    let target = &mut tools[static_len - 1];
    if let Value::Object(t) = target {
        t.insert("cache_control".into(), Value::Object(control));
    }
    *target = crate::canonical::into_canonical_tool(std::mem::take(target));
    Breakpoint::Added
}

/// Moves the caller's breakpoints on static tools before `target` onto `target` (keeping one).
fn consolidate(tools: &mut [Value], target: usize) {
    let mut moved: Option<Value> = None;
    for tool in &mut tools[..target] {
        if let Some(control) = tool.as_object_mut().and_then(|t| t.remove("cache_control")) {
            // Keep a one-hour breakpoint over a five-minute one, else the last.
            if !moved.as_ref().is_some_and(is_one_hour) || is_one_hour(&control) {
                moved = Some(control);
            }
        }
    }
    if let (Some(control), false) = (moved, has_cache_control(&tools[target])) {
        let tool = &mut tools[target];
        if let Value::Object(t) = tool {
            t.insert("cache_control".into(), control);
        }
        *tool = crate::canonical::into_canonical_tool(std::mem::take(tool));
    }
}

/// Estimated tokens of `tools`, counted until `min` is reached.
fn static_tokens(tools: &[Value], options: &RewriteOptions, min: usize) -> usize {
    let mut total = 0;
    for tool in tools {
        let text = serde_json::to_string(tool).unwrap_or_default();
        total += match &options.counter {
            Some(counter) => counter.count_text(&text),
            None => text.len().div_ceil(4),
        };
        if total >= min {
            break;
        }
    }
    total
}

fn slot(tool: &Value) -> Slot {
    Slot {
        name: tool.get("name").and_then(Value::as_str).map(str::to_owned),
        sorted: is_custom(tool),
    }
}

/// A client-defined tool (no `type`, or `custom`), as opposed to a server tool.
fn is_custom(tool: &Value) -> bool {
    match tool.get("type") {
        None => true,
        Some(t) => t == "custom",
    }
}

fn has_cache_control(value: &Value) -> bool {
    value.get("cache_control").is_some_and(|c| !c.is_null())
}

fn is_one_hour(control: &Value) -> bool {
    control.get("ttl").and_then(Value::as_str) == Some("1h")
}

/// The breakpoints of a request outside `tools`, in request order.
fn outside_tools(body: &Value) -> Vec<&Value> {
    fn blocks<'a>(content: Option<&'a Value>, found: &mut Vec<&'a Value>) {
        let Some(Value::Array(blocks)) = content else {
            return;
        };
        for block in blocks {
            if let Some(c) = block.get("cache_control").filter(|c| !c.is_null()) {
                found.push(c);
            }
            // A tool_result's own content blocks may carry breakpoints too.
            if let Some(Value::Array(inner)) = block.get("content") {
                found.extend(
                    inner
                        .iter()
                        .filter_map(|b| b.get("cache_control").filter(|c| !c.is_null())),
                );
            }
        }
    }
    let mut found = Vec::new();
    blocks(body.get("system"), &mut found);
    if let Some(Value::Array(messages)) = body.get("messages") {
        for message in messages {
            blocks(message.get("content"), &mut found);
        }
    }
    if let Some(c) = body.get("cache_control").filter(|c| !c.is_null()) {
        found.push(c);
    }
    found
}

/// Cache breakpoints in a whole Messages API request (`tools`, `system`, `messages`, and a
/// top-level `cache_control`).
#[must_use]
pub fn breakpoints(body: &Value) -> usize {
    let in_tools = match body.get("tools") {
        Some(Value::Array(tools)) => tools.iter().filter(|t| has_cache_control(t)).count(),
        _ => 0,
    };
    in_tools + outside_tools(body).len()
}

/// A Messages API tool (`name`, `description`, `input_schema`) from an MCP tool object; MCP-only
/// keys (`title`, `outputSchema`, `annotations`, `_meta`, …) are dropped, as the API accepts
/// only its own.
///
/// ```
/// use mcp_budget::llm_api::anthropic::tool_from_mcp;
/// use serde_json::json;
///
/// let mcp = json!({"name": "now", "title": "Now", "inputSchema": {"type": "object"}});
/// let tool = tool_from_mcp(mcp.as_object().unwrap());
/// assert_eq!(tool, json!({"name": "now", "input_schema": {"type": "object"}}));
/// ```
#[must_use]
pub fn tool_from_mcp(tool: &Map<String, Value>) -> Value {
    let out = super::function_from_mcp(tool, "input_schema");
    crate::canonical::into_canonical_tool(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm_api::ToolClasses;
    use serde_json::json;

    fn tool(name: &str, words: usize) -> Value {
        json!({"name": name, "description": "lorem ".repeat(words), "input_schema": {"type": "object"}})
    }

    fn names(body: &Value) -> Vec<&str> {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("?"))
            .collect()
    }

    #[test]
    fn server_tools_first_then_sorted_then_dynamic() {
        let mut body = json!({"model": "claude-opus-4-1", "tools": [
            tool("zeta", 1), {"type": "web_search_20250305", "name": "web_search"},
            tool("dyn_b", 1), tool("alpha", 1), tool("dyn_a", 1),
            {"type": "bash_20250124", "name": "bash"},
        ]});
        let options = RewriteOptions {
            classes: ToolClasses::dynamic_if(|n| n.starts_with("dyn_")),
            ..RewriteOptions::default()
        };
        let outcome = rewrite(&mut body, &options);
        assert_eq!(
            names(&body),
            ["web_search", "bash", "alpha", "zeta", "dyn_b", "dyn_a"]
        );
        assert_eq!((outcome.static_tools, outcome.dynamic_tools), (4, 2));
        assert_eq!(outcome.breakpoint, Breakpoint::BelowMinimum);
    }

    #[test]
    fn adds_one_breakpoint_above_the_minimum() {
        let mut body = json!({"model": "claude-sonnet-4-5", "tools": [tool("b", 700), tool("a", 700), tool("d", 5)]});
        let options = RewriteOptions {
            classes: ToolClasses::dynamic_names(["d"]),
            ..RewriteOptions::default()
        };
        assert_eq!(rewrite(&mut body, &options).breakpoint, Breakpoint::Added);
        assert_eq!(
            body["tools"][1]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(breakpoints(&body), 1);
        // Idempotent: the second pass sees its own breakpoint and adds none.
        let once = body.clone();
        assert_eq!(rewrite(&mut body, &options).breakpoint, Breakpoint::Caller);
        assert_eq!(body, once);
    }

    #[test]
    fn haiku_needs_more() {
        let mut body = json!({"model": "claude-3-5-haiku-latest", "tools": [tool("a", 1200)]});
        let outcome = rewrite(&mut body, &RewriteOptions::default());
        assert_eq!(outcome.breakpoint, Breakpoint::BelowMinimum);
        assert!(outcome.static_tokens >= 1024 && outcome.static_tokens < 2048);
    }

    #[test]
    fn callers_earlier_breakpoint_moves_onto_the_last_static_tool() {
        let mut body = json!({"model": "claude-sonnet-4-5", "tools": [
            {"name": "b", "input_schema": {}},
            {"name": "a", "input_schema": {}, "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        ]});
        assert_eq!(
            rewrite(&mut body, &RewriteOptions::default()).breakpoint,
            Breakpoint::Caller
        );
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(body["tools"][1]["cache_control"]["ttl"], "1h");
        assert_eq!(breakpoints(&body), 1);
    }

    #[test]
    fn no_room_at_four() {
        let block = json!({"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}});
        let mut body = json!({"model": "claude-sonnet-4-5", "tools": [tool("a", 1500)],
            "system": [block, block],
            "messages": [{"role": "user", "content": [block, {"type": "tool_result", "tool_use_id": "t", "content": [block]}]}]});
        assert_eq!(breakpoints(&body), 4);
        assert_eq!(
            rewrite(&mut body, &RewriteOptions::default()).breakpoint,
            Breakpoint::NoRoom
        );
        assert_eq!(breakpoints(&body), 4);
    }

    #[test]
    fn one_hour_later_makes_ours_one_hour() {
        let mut body = json!({"model": "claude-sonnet-4-5", "tools": [tool("a", 1500)],
            "system": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]});
        assert_eq!(
            rewrite(&mut body, &RewriteOptions::default()).breakpoint,
            Breakpoint::Added
        );
        assert_eq!(
            body["tools"][0]["cache_control"],
            json!({"ttl": "1h", "type": "ephemeral"})
        );
    }

    #[test]
    fn counter_and_compression() {
        let profile = crate::profile::resolve(
            "claude-sonnet-4-5",
            &crate::profile::ProfileOverrides::default(),
        )
        .unwrap();
        let mut body = json!({"model": "claude-sonnet-4-5", "tools": [
            {"name": "a", "description": "## Title\n\nDoes **a**.\n\nMore text here.", "input_schema": {"type": "object"}}]});
        let options = RewriteOptions {
            counter: Some(crate::tokens::Counter::new(&profile)),
            compress: Some(crate::compress::Level::Medium),
            ..RewriteOptions::default()
        };
        let outcome = rewrite(&mut body, &options);
        assert_eq!(body["tools"][0]["description"], "Does a.");
        assert!(outcome.static_tokens > 0);
    }

    #[test]
    fn minimums() {
        assert_eq!(min_cacheable_tokens("claude-opus-4-5-20251101"), 4096);
        assert_eq!(min_cacheable_tokens("claude-opus-4-1"), 1024);
        assert_eq!(min_cacheable_tokens("claude-sonnet-4.6"), 2048);
        assert_eq!(min_cacheable_tokens("claude-3-haiku-20240307"), 2048);
        assert_eq!(min_cacheable_tokens("something-else"), 1024);
    }
}
