//! One episode: a labelled request, the tools the gateway lists, the model's turns, each tool
//! call through the gateway, until the first call of a tool that is not a meta-tool (the one
//! scored), an answer without a call, or the last turn.

use std::time::Instant;

use serde_json::{Value, json};

use super::gateway::{Host, Recorded, Rig, result_text};
use super::llm::{Completion, Llm};
use crate::discover::{MetaTool, MetaToolNames};
use crate::eval::calls::{ToolCall, Via, parse_message};
use crate::eval::score::{
    ArgumentCheck, Ending, Episode, Search, Trace, check_arguments, classify, judge,
};
use crate::search::eval::Labelled;
use crate::tokens::Counter;

/// The system prompt every exposure gets (then the gateway's `instructions`, as hosts add
/// them).
pub const SYSTEM: &str = "You are a helpful assistant. When one of the tools can do what the \
                          user asks, call it.";

/// What stays the same across an exposure's episodes.
#[derive(Debug)]
pub struct Setting<'a> {
    /// The exposure's name.
    pub exposure: String,
    /// The flat list's group.
    pub group: Option<usize>,
    /// The meta-tools' names.
    pub meta: &'a MetaToolNames,
    /// Model turns at most.
    pub max_turns: usize,
    /// Counts the tool block.
    pub counter: &'a Counter,
    /// `preselect-K`: K, the tools listed per request, chosen from the listed ones.
    pub preselect: Option<usize>,
}

/// What the episode gathered so far.
#[derive(Default)]
struct Gathered {
    trace: Trace,
    native: usize,
    text: usize,
    meta_steps: usize,
    turns: usize,
    searches: Vec<Search>,
    prompt: u64,
    completion: u64,
    cached: Option<u64>,
    last_text: Option<String>,
    error: Option<String>,
    scored: Option<(String, Value)>,
    /// The scored call's name was resolved by the gateway to another tool name.
    resolved: bool,
    ending: Option<Ending>,
}

/// Runs `row` through `gateway` with `llm`; `recall` is a side session for measuring the
/// model's search queries; `n` names the session.
pub async fn run(
    gateway: &Rig,
    recall: &mut Host,
    llm: &Llm,
    row: &Labelled,
    setting: &Setting<'_>,
    n: usize,
) -> Episode {
    let started = Instant::now();
    gateway.take_calls();
    let mut host = gateway.host(&format!("eval-{n}")).await;
    let mut functions = functions(&host.list_tools().await);
    if let Some(k) = setting.preselect {
        functions = preselect(functions, &row.query, k);
    }
    let tool_block = block_tokens(setting.counter, &functions);
    let tools_listed = functions.len();
    let mut g = Gathered::default();
    g.trace.meta_listed = functions
        .iter()
        .any(|f| setting.meta.which(name_of(f)).is_some());
    let system = match &host.instructions {
        Some(instructions) => format!("{SYSTEM}\n\n{instructions}"),
        None => SYSTEM.to_owned(),
    };
    let mut messages = vec![
        json!({"role": "system", "content": system}),
        json!({"role": "user", "content": row.query}),
    ];
    while g.ending.is_none() && g.turns < setting.max_turns {
        g.turns += 1;
        match llm.chat(&messages, &functions).await {
            Ok(completion) => {
                let calls = take_completion(&mut g, &completion);
                if calls.is_empty() {
                    g.ending = Some(Ending::Answered);
                    break;
                }
                messages.push(assistant(&calls, g.turns));
                for (i, call) in calls.iter().enumerate() {
                    let answer = step(gateway, &mut host, recall, row, setting, call, &mut g).await;
                    messages.push(
                        json!({"role": "tool", "tool_call_id": call_id(call, g.turns, i),
                        "content": answer}),
                    );
                    if g.ending.is_some() {
                        break;
                    }
                }
                if host.list_changed() {
                    functions = self::functions(&host.list_tools().await);
                }
            }
            Err(err) => {
                g.error = Some(err);
                g.trace.error = true;
                g.ending = Some(Ending::Error);
            }
        }
    }
    finish(row, setting, g, tool_block, tools_listed, gateway, started)
}

/// Counts the completion in and gives its calls.
fn take_completion(g: &mut Gathered, completion: &Completion) -> Vec<ToolCall> {
    g.prompt += completion.prompt_tokens;
    g.completion += completion.completion_tokens;
    if let Some(cached) = completion.cached_tokens {
        g.cached = Some(g.cached.unwrap_or(0) + cached);
    }
    if let Some(text) = completion.message.get("content").and_then(Value::as_str)
        && !text.trim().is_empty()
    {
        g.last_text = Some(text.chars().take(400).collect());
    }
    let calls = parse_message(&completion.message);
    g.native += calls.iter().filter(|c| c.via == Via::Native).count();
    g.text += calls.iter().filter(|c| c.via == Via::Text).count();
    calls
}

/// Sends one call through the gateway and notes what it did; the text the model gets back.
async fn step(
    gateway: &Rig,
    host: &mut Host,
    recall: &mut Host,
    row: &Labelled,
    setting: &Setting<'_>,
    call: &ToolCall,
    g: &mut Gathered,
) -> String {
    let params = json!({"name": call.name, "arguments": call.arguments});
    let answer = host.request("tools/call", params).await;
    let text = result_text(&answer);
    let refused = answer.is_err() || answer.as_ref().is_ok_and(|r| r["isError"] == true);
    let meta = setting.meta;
    let kind = meta.which(&call.name);
    if let Some(Recorded { id, arguments }) = gateway.take_calls().into_iter().next() {
        g.trace.through_meta = kind.is_some();
        // A direct call the gateway routed under another name than it sent: a near name the
        // policy resolves (`[aggregate] resolve_names`), scored as the tool it reached.
        g.resolved = kind.is_none() && gateway.exposed_of.get(&id) != Some(&call.name);
        g.scored = Some((id, arguments));
        g.ending = Some(Ending::Called);
    } else if kind.is_none() {
        // A tool that is not listed or refused its arguments: scored as called all the same.
        let id = gateway
            .id_of
            .get(&call.name)
            .cloned()
            .unwrap_or(call.name.clone());
        g.scored = Some((id, call.arguments.clone()));
        g.ending = Some(Ending::Called);
    } else {
        g.meta_steps += 1;
        let right = right_names(gateway, row);
        if kind == Some(MetaTool::Search) {
            let query = call
                .arguments
                .get("query")
                .and_then(Value::as_str)
                .unwrap_or("");
            let top5 = recall
                .request(
                    "tools/call",
                    json!({"name": meta.search,
                    "arguments": {"query": query, "limit": 5}}),
                )
                .await;
            g.trace.searched = true;
            let shown_right = right.iter().any(|n| mentions(&text, n));
            g.trace.shown_right |= shown_right;
            g.searches.push(Search {
                query: query.to_owned(),
                hit_at_5: right.iter().any(|n| mentions(&result_text(&top5), n)),
                shown_right,
            });
        } else if kind == Some(MetaTool::Schema) {
            let asked = call
                .arguments
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("");
            g.trace.schema_read_right |= right.iter().any(|n| n == asked);
        } else {
            g.trace.invoke_refused |= refused;
        }
    }
    text
}

/// The exposed names of the tools that answer `row` (gold and alternatives).
fn right_names(gateway: &Rig, row: &Labelled) -> Vec<String> {
    row.gold
        .iter()
        .chain(row.alternatives.values().flatten())
        .filter_map(|id| gateway.exposed_of.get(id).cloned())
        .collect()
}

fn finish(
    row: &Labelled,
    setting: &Setting<'_>,
    g: Gathered,
    tool_block_tokens: usize,
    tools_listed: usize,
    gateway: &Rig,
    started: Instant,
) -> Episode {
    let (strict, lenient) = g
        .scored
        .as_ref()
        .map_or((false, false), |(id, _)| judge(row, id));
    // A name no server has gets no argument check: there is no schema to hold it to.
    let check = g
        .scored
        .as_ref()
        .filter(|(id, _)| gateway.exposed_of.contains_key(id))
        .map(|(id, arguments)| check_arguments(gateway.schema_of(id), arguments));
    let trace = Trace {
        strict,
        called: g.scored.is_some(),
        ..g.trace
    };
    Episode {
        exposure: setting.exposure.clone(),
        query_id: row.id.clone(),
        group: setting.group,
        ending: g.ending.unwrap_or(Ending::Turns),
        called: g.scored.as_ref().map(|(id, _)| id.clone()),
        arguments: g.scored.map(|(_, arguments)| arguments),
        arguments_check: check.as_ref().map(|c| c.as_str().to_owned()),
        argument_problems: match check {
            Some(ArgumentCheck::Invalid(problems)) => problems,
            _ => Vec::new(),
        },
        strict,
        lenient,
        resolved: g.resolved,
        native_calls: g.native,
        text_calls: g.text,
        meta_steps: g.meta_steps,
        turns: g.turns,
        searches: g.searches,
        failure: classify(trace),
        prompt_tokens: g.prompt,
        completion_tokens: g.completion,
        cached_tokens: g.cached,
        tool_block_tokens,
        tools_listed,
        wall_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        error: g.error,
        last_text: g.last_text,
    }
}

/// MCP tools as chat-completions function definitions, as hosts hand them to a chat-completions model.
#[must_use]
pub fn functions(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let mut function = json!({"name": tool["name"]});
            if let Some(description) = tool.get("description") {
                function["description"] = description.clone();
            }
            function["parameters"] = tool
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            json!({"type": "function", "function": function})
        })
        .collect()
}

/// The `k` of `functions` (Chat Completions tools) that fit `query`, best first: the rule of
/// [`crate::llm_api::preselect`] on a one-turn conversation.
#[must_use]
pub fn preselect(functions: Vec<Value>, query: &str, k: usize) -> Vec<Value> {
    use crate::llm_api::preselect::{Conversation, choose, request_tool};
    let (tools, mut functions): (Vec<_>, Vec<_>) = functions
        .into_iter()
        .filter_map(|f| Some((request_tool(&f)?, Some(f))))
        .unzip();
    choose(&tools, &Conversation::from_text(query), k)
        .into_iter()
        .filter_map(|i| functions[i].take())
        .collect()
}

fn name_of(function: &Value) -> &str {
    function["function"]["name"].as_str().unwrap_or_default()
}

/// The listed tools as our counter sees them, in the `openai` rendering.
pub fn block_tokens(counter: &Counter, functions: &[Value]) -> usize {
    functions
        .iter()
        .map(|f| {
            let tool = json!({"name": f["function"]["name"],
                "description": f["function"]["description"],
                "inputSchema": f["function"]["parameters"]});
            let map = tool.as_object().cloned().unwrap_or_default();
            counter.count_tool(name_of(f), &map)
        })
        .sum()
}

/// The assistant turn as the history keeps it: calls written as text become native ones, as a
/// host that parsed them would send them back.
fn assistant(calls: &[ToolCall], turn: usize) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let arguments = match &call.arguments {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            json!({"id": call_id(call, turn, i), "type": "function",
                "function": {"name": call.name, "arguments": arguments}})
        })
        .collect();
    json!({"role": "assistant", "content": null, "tool_calls": tool_calls})
}

fn call_id(call: &ToolCall, turn: usize, i: usize) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| format!("call_{turn}_{i}"))
}

/// Whether `text` names `name` as a whole word (not a longer name it begins).
#[must_use]
pub fn mentions(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_mentioned_as_a_whole_word() {
        let text = "1. github__get_issue_comments — …\n2. github__get_issue: Get an issue";
        assert!(mentions(text, "github__get_issue"));
        assert!(!mentions("github__get_issue_comments", "github__get_issue"));
        assert!(!mentions("xgithub__get_issue", "github__get_issue"));
        assert!(mentions("\"github__get_issue\"", "github__get_issue"));
    }

    #[test]
    fn tools_become_functions_with_their_schema() {
        let tools = [
            json!({"name": "a__b", "description": "d", "inputSchema": {"type": "object"}}),
            json!({"name": "c"}),
        ];
        let f = functions(&tools);
        assert_eq!(
            f[0],
            json!({"type": "function", "function":
            {"name": "a__b", "description": "d", "parameters": {"type": "object"}}})
        );
        assert_eq!(f[1]["function"]["parameters"]["type"], "object");
        assert!(f[1]["function"].get("description").is_none());
    }
}
