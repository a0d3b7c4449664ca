//! Progressive discovery: the meta-tools (`search_tools`, `get_tool_schema`, `invoke_tool`) that
//! stand in for deferred tools, and their handlers.
//!
//! Their definitions live here because their tokens count against the budget: the planner
//! measures them like any other tool. [`Discovery`] answers their calls over the deferred tools,
//! as pure functions: the gateway layer forwards the [`MetaCall::Invoke`] outcome as a normal
//! `tools/call` to the upstream, so authorization and tracing see a direct call.
//!
//! `invoke_tool` recovers from the calls generic invoke wrappers get wrong: arguments that
//! fail the schema check, none where fields are required, or arguments sent next to `name`
//! (or under `tool_input`, `args`, ...) are answered `isError: true` with the concrete
//! problem, the required fields, a call of the right shape and the tool's full input schema,
//! so the model's next try works (`recovery`). `tool_name` is accepted for `name`.
//!
//! ```
//! use mcp_budget::catalog::CatalogTool;
//! use mcp_budget::discover::{
//!     meta_tool_definitions, Discovery, MetaCall, MetaTool, MetaToolNames, SearchLimits,
//! };
//! use serde_json::json;
//!
//! let defs = meta_tool_definitions(&MetaToolNames::default());
//! assert_eq!(defs.len(), 3);
//! assert_eq!(defs[0]["name"], "search_tools");
//!
//! let tools = vec![CatalogTool::new("weather", json!({
//!     "name": "get_forecast",
//!     "description": "Weather forecast for a city.",
//!     "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
//! }))?];
//! let discovery = Discovery::new(tools, "__", &MetaToolNames::default(), SearchLimits::default());
//! let found = discovery.search_tools("weather in Paris tomorrow", None);
//! assert_eq!(found["structuredContent"]["tools"][0]["name"], "weather__get_forecast");
//! let names = MetaToolNames::default();
//! let invoke = names.which("invoke_tool").unwrap();
//! match discovery.call(invoke, &json!({"name": "weather__get_forecast", "arguments": {"city": "Paris"}})) {
//!     Some(MetaCall::Invoke { tool, arguments }) => {
//!         assert_eq!((tool.server.as_str(), tool.name.as_str()), ("weather", "get_forecast"));
//!         assert_eq!(arguments, json!({"city": "Paris"}));
//!     }
//!     other => panic!("{other:?}"),
//! }
//! # Ok::<(), mcp_budget::catalog::CatalogError>(())
//! ```

mod arguments;
mod instructions;
mod recovery;

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

pub use arguments::check_arguments;
pub use instructions::{
    GENERAL_CHARS, SERVER_CHARS, ServerNote, host_search_instructions, upstream_sections,
};

use crate::catalog::CatalogTool;
use crate::search::SearchIndex;
pub use crate::search::one_line;

/// Longest one-line description in `search_tools` results, in characters.
const LINE_CHARS: usize = 160;

/// Most characters of the query a `search_tools` answer repeats (a query may carry a pasted
/// document: the model has it already).
const QUERY_CHARS: usize = 120;

/// Most required parameters a hit's line shows with their types (more: `+N required`).
const SHOWN_REQUIRED: usize = 6;

/// Names of the three meta-tools; configurable so that chained gateways do not collide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaToolNames {
    /// Search the deferred tools.
    pub search: String,
    /// Read one tool's full definition.
    pub schema: String,
    /// Call a deferred tool.
    pub invoke: String,
    /// Run a script that calls tools (`[discover] code_mode`): listed after the three, `None`
    /// when code mode is off.
    pub code: Option<String>,
}

impl MetaToolNames {
    /// How many meta-tools are listed: the three, and the code-mode one when on.
    #[must_use]
    pub fn count(&self) -> usize {
        3 + usize::from(self.code.is_some())
    }

    /// The meta-tool a called tool's name names, through the configured names: the one place
    /// a name becomes a [`MetaTool`] (the code-mode one only when code mode is on).
    ///
    /// ```
    /// use mcp_budget::discover::{MetaTool, MetaToolNames};
    ///
    /// let names = MetaToolNames { invoke: "gw_invoke".into(), ..MetaToolNames::default() };
    /// assert_eq!(names.which("gw_invoke"), Some(MetaTool::Invoke));
    /// assert_eq!(names.which("invoke_tool"), None);
    /// assert_eq!(names.which("run_code"), None);
    /// ```
    #[must_use]
    pub fn which(&self, name: &str) -> Option<MetaTool> {
        MetaTool::ALL
            .into_iter()
            .find(|&tool| self.name(tool) == Some(name))
    }

    /// The configured name of `tool`; `None` for [`MetaTool::Code`] when code mode is off.
    #[must_use]
    pub fn name(&self, tool: MetaTool) -> Option<&str> {
        match tool {
            MetaTool::Search => Some(&self.search),
            MetaTool::Schema => Some(&self.schema),
            MetaTool::Invoke => Some(&self.invoke),
            MetaTool::Code => self.code.as_deref(),
        }
    }

    /// The names served, in the order they are listed.
    pub fn served(&self) -> impl Iterator<Item = &str> {
        MetaTool::ALL.into_iter().filter_map(|tool| self.name(tool))
    }
}

/// A meta-tool, whatever `[discover]` names it ([`MetaToolNames::which`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaTool {
    /// `search_tools`: search the deferred tools.
    Search,
    /// `get_tool_schema`: one tool's full definition.
    Schema,
    /// `invoke_tool`: call a deferred tool.
    Invoke,
    /// `run_code` (`[discover] code_mode`): run a script that calls tools.
    Code,
}

impl MetaTool {
    /// Every meta-tool, in the order they are listed.
    pub const ALL: [Self; 4] = [Self::Search, Self::Schema, Self::Invoke, Self::Code];
}

impl Default for MetaToolNames {
    fn default() -> Self {
        Self {
            search: "search_tools".into(),
            schema: "get_tool_schema".into(),
            invoke: "invoke_tool".into(),
            code: None,
        }
    }
}

/// How many results `search_tools` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchLimits {
    /// Results when the model gives no `limit` (1..=`max`).
    pub default: usize,
    /// Most results, whatever `limit` the model asks for.
    pub max: usize,
}

impl Default for SearchLimits {
    /// 5 results, at most 20.
    fn default() -> Self {
        Self {
            default: 5,
            max: 20,
        }
    }
}

/// The MCP tool objects of the meta-tools, in the order they are listed (the code-mode one
/// last, when on).
///
/// Written for the model and kept short (every host prompt pays for them): what each does, when
/// to use it, and the order of use.
#[must_use]
pub fn meta_tool_definitions(names: &MetaToolNames) -> Vec<Value> {
    let mut definitions = discovery_definitions(names);
    if let Some(code) = &names.code {
        definitions.push(crate::codemode::definition(code));
    }
    definitions
}

/// The three discovery meta-tools' definitions.
fn discovery_definitions(names: &MetaToolNames) -> Vec<Value> {
    vec![
        json!({
            "name": names.search,
            "description": format!("Search tools not listed here. Describe the task in plain words; returns matching tool names, what they do, their required parameters with types and the words that matched. Then call {} with a name and its arguments (or {} first for the full schema).", names.invoke, names.schema),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The task, e.g. \"create a GitHub issue\""},
                    "limit": {"type": "integer", "description": "Most results (default 5)"}
                },
                "required": ["query"]
            }
        }),
        json!({
            "name": names.schema,
            "description": format!("Full definition (description, input schema) of a tool found with {}.", names.search),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Tool name from search results"}
                },
                "required": ["name"]
            }
        }),
        json!({
            "name": names.invoke,
            "description": format!("Call a tool found with {}.", names.search),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Tool name from search results"},
                    "arguments": {"type": "object", "description": "The tool's arguments"}
                },
                "required": ["name", "arguments"]
            }
        }),
    ]
}

/// The outcome of a meta-tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaCall<'a> {
    /// Answer the call with this `CallToolResult` (a search result, a schema, or an error
    /// result with `isError: true`).
    Result(Value),
    /// The arguments are valid: forward them as a `tools/call` of `tool` (its upstream name, on
    /// its server) and answer with the upstream's result.
    Invoke {
        /// The deferred tool to call.
        tool: &'a CatalogTool,
        /// Its arguments, checked against its `inputSchema`.
        arguments: Value,
    },
}

/// The deferred tools and their search index: answers the meta-tools. Rebuild it when the
/// catalog or the plan changes (building is one pass over the tools).
#[derive(Debug)]
pub struct Discovery {
    /// The deferred tools (the first `deferred`, searched), then the listed ones
    /// ([`Self::with_listed`]: found by name, never searched).
    tools: Vec<CatalogTool>,
    deferred: usize,
    exposed: Vec<String>,
    by_name: HashMap<String, usize>,
    index: SearchIndex,
    names: MetaToolNames,
    limits: SearchLimits,
}

impl Discovery {
    /// Indexes the deferred `tools`; `separator` joins server id and tool name into the
    /// exposed names (as in the policy's `[aggregate]`). The meta-tools answer to `names`, and
    /// search within `limits`.
    #[must_use]
    pub fn new(
        tools: Vec<CatalogTool>,
        separator: &str,
        names: &MetaToolNames,
        limits: SearchLimits,
    ) -> Self {
        let exposed: Vec<String> = tools
            .iter()
            .map(|t| t.exposed_name(separator).into_owned())
            .collect();
        let mut by_name = HashMap::with_capacity(tools.len());
        for (i, name) in exposed.iter().enumerate() {
            by_name.entry(name.clone()).or_insert(i);
        }
        let index = SearchIndex::build(&tools);
        Self {
            deferred: tools.len(),
            tools,
            exposed,
            by_name,
            index,
            names: names.clone(),
            limits,
        }
    }

    /// The same search with a usage prior: the tools this deployment calls (`calls`, indexed
    /// like the tools given to [`Self::new`]) rank higher among close candidates, by `weight`
    /// (see [`SearchIndex::set_usage`]).
    #[must_use]
    pub fn with_usage(mut self, calls: &[u64], weight: f32) -> Self {
        self.index.set_usage(calls, weight);
        self
    }

    /// The same search with a deployment's own equivalents (see
    /// [`SearchIndex::add_vocabulary`]).
    #[must_use]
    pub fn with_vocabulary(mut self, vocabulary: &crate::search::Vocabulary) -> Self {
        self.index.add_vocabulary(vocabulary);
        self
    }

    /// The same discovery, whose `invoke_tool` and `get_tool_schema` also answer for the
    /// tools the plan lists directly (`listed`): a model that calls a listed tool through
    /// `invoke_tool` gets it called, not "unknown tool". They are found by name only: search
    /// results, near names and [`Self::tools`] stay the deferred tools.
    #[must_use]
    pub fn with_listed(mut self, listed: Vec<CatalogTool>, separator: &str) -> Self {
        for tool in listed {
            let exposed = tool.exposed_name(separator).into_owned();
            self.by_name
                .entry(exposed.clone())
                .or_insert(self.tools.len());
            self.exposed.push(exposed);
            self.tools.push(tool);
        }
        self
    }

    /// The deferred tools, in the order given.
    #[must_use]
    pub fn tools(&self) -> &[CatalogTool] {
        &self.tools[..self.deferred]
    }

    /// Whether the tool at `index` (as [`Self::find`] gives it) is a deferred one, not one the
    /// plan lists.
    #[must_use]
    pub fn is_deferred(&self, index: usize) -> bool {
        index < self.deferred
    }

    /// The meta-tool names this instance answers to.
    #[must_use]
    pub fn names(&self) -> &MetaToolNames {
        &self.names
    }

    /// The exposed name of the tool at `index` in [`Self::tools`].
    #[must_use]
    pub fn exposed_name(&self, index: usize) -> Option<&str> {
        self.exposed.get(index).map(String::as_str)
    }

    /// The deferred tool a name refers to: its exposed name, or `server/tool`, or an upstream
    /// tool name that only one server has (models sometimes drop the prefix).
    #[must_use]
    pub fn find(&self, name: &str) -> Option<(usize, &CatalogTool)> {
        let name = name.trim();
        if let Some(&i) = self.by_name.get(name) {
            return Some((i, &self.tools[i]));
        }
        if let Some((server, tool)) = name.split_once('/') {
            if let Some(i) = self
                .tools
                .iter()
                .position(|t| t.server == server && t.name == tool)
            {
                return Some((i, &self.tools[i]));
            }
        }
        let mut same = self
            .tools
            .iter()
            .enumerate()
            .filter(|(_, t)| t.name == name);
        match (same.next(), same.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }

    /// [`Self::find`], for a deferred tool only (not one [`Self::with_listed`] added).
    #[must_use]
    pub fn find_deferred(&self, name: &str) -> Option<(usize, &CatalogTool)> {
        self.find(name).filter(|(i, _)| self.is_deferred(*i))
    }

    /// Answers a call of meta-tool `tool` with `arguments` (the `params.arguments` of the
    /// `tools/call`); `None` for [`MetaTool::Code`], which code mode runs, not discovery.
    #[must_use]
    pub fn call(&self, tool: MetaTool, arguments: &Value) -> Option<MetaCall<'_>> {
        self.call_with(tool, arguments, None)
    }

    /// [`Self::call`], `search_tools` fusing the `dense` scores (one cosine of the query per
    /// tool of [`Self::tools`], from the semantic reranker) into its ranking.
    #[must_use]
    pub fn call_with(
        &self,
        tool: MetaTool,
        arguments: &Value,
        dense: Option<&[f32]>,
    ) -> Option<MetaCall<'_>> {
        let text = |key: &str| arguments.get(key).and_then(Value::as_str);
        let needs_name = |tool: &str| {
            error_result(format!(
                "{tool} needs a \"name\" string: a tool name from {} results.",
                self.names.search
            ))
        };
        Some(match tool {
            MetaTool::Search => MetaCall::Result(match text("query") {
                Some(query) => {
                    let limit = arguments.get("limit").and_then(Value::as_u64);
                    self.search_tools_with(query, limit, dense)
                }
                None => error_result(format!(
                    "{} needs a \"query\" string: describe the task in plain words.",
                    self.names.search
                )),
            }),
            MetaTool::Schema => MetaCall::Result(match text("name") {
                Some(name) => self.get_tool_schema(name),
                None => needs_name(&self.names.schema),
            }),
            // `tool_name` is what generic `invoke(tool_name, tool_input)` wrappers send.
            MetaTool::Invoke => match text("name").or_else(|| text("tool_name")) {
                Some(name) => self.invoke_call(name, arguments),
                None => MetaCall::Result(needs_name(&self.names.invoke)),
            },
            MetaTool::Code => return None,
        })
    }

    /// An `invoke_tool` call of `name` with the meta-tool's `arguments` (the real ones under
    /// `arguments`, or misplaced next to `name`).
    fn invoke_call(&self, name: &str, arguments: &Value) -> MetaCall<'_> {
        if let Some(misplaced) = recovery::misplaced(arguments) {
            let Some((i, tool)) = self.find(name) else {
                return MetaCall::Result(self.unknown(name));
            };
            let schema = tool.input_schema().cloned().unwrap_or_else(|| json!({}));
            return MetaCall::Result(recovery::answer(
                &self.exposed[i],
                &schema,
                &self.names.invoke,
                &recovery::Problem::Misplaced(misplaced),
            ));
        }
        let arguments = arguments.get("arguments").cloned().unwrap_or(Value::Null);
        match self.invoke_tool(name, &arguments) {
            Ok(tool) => MetaCall::Invoke {
                tool,
                arguments: match arguments {
                    Value::Null => Value::Object(Map::new()),
                    other => other,
                },
            },
            Err(result) => MetaCall::Result(result),
        }
    }

    /// `search_tools`: the best matching deferred tools for `query` as a `CallToolResult`.
    /// `limit` defaults to the [`SearchLimits`]' `default` and is capped at their `max`.
    #[must_use]
    pub fn search_tools(&self, query: &str, limit: Option<u64>) -> Value {
        self.search_tools_with(query, limit, None)
    }

    /// [`Self::search_tools`] with the reranker's `dense` scores, when they are ready.
    #[must_use]
    pub fn search_tools_with(
        &self,
        query: &str,
        limit: Option<u64>,
        dense: Option<&[f32]>,
    ) -> Value {
        let limit = limit
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(self.limits.default)
            .clamp(1, self.limits.max);
        let hits = self.index.search_fused(query, limit, dense);
        let mut lines = Vec::with_capacity(hits.len() + 1);
        let mut found = Vec::with_capacity(hits.len());
        for hit in &hits {
            let tool = &self.tools[hit.index];
            let name = &self.exposed[hit.index];
            let description = one_line(tool.description(), LINE_CHARS);
            let (params, required) = parameters(tool);
            let matched = self.index.matched_words(query, hit.index);
            lines.push(hit_line(
                name,
                tool,
                &params,
                &required,
                &description,
                &matched,
            ));
            found.push(json!({
                "name": name,
                "description": description,
                "parameters": params,
                "required": required,
                "matched": matched,
            }));
        }
        let query = one_line(query, QUERY_CHARS);
        let text = if hits.is_empty() {
            format!(
                "No tool matches {query:?}. Try other words, e.g. the action and the object (\"list issues\")."
            )
        } else {
            format!(
                "{}\nCall {} with a name and its arguments (the required ones are shown with their types); {} gives the full schema.",
                lines.join("\n"),
                self.names.invoke,
                self.names.schema
            )
        };
        json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"query": query, "tools": found}
        })
    }

    /// `get_tool_schema`: the tool's definition as its upstream gave it (description,
    /// `inputSchema`, `outputSchema`, annotations...) under its exposed name, or an error result
    /// for an unknown name.
    #[must_use]
    pub fn get_tool_schema(&self, name: &str) -> Value {
        let Some((i, tool)) = self.find(name) else {
            return self.unknown(name);
        };
        let mut definition = (*tool.definition).clone();
        definition.insert("name".into(), Value::String(self.exposed[i].clone()));
        definition.remove("_meta");
        let definition = Value::Object(definition);
        json!({
            "content": [{"type": "text", "text": definition.to_string()}],
            "structuredContent": definition
        })
    }

    /// `invoke_tool`: finds the tool and checks `arguments` against its real `inputSchema`.
    /// `Ok` is the tool to forward the call to; `Err` is an error `CallToolResult`
    /// (`isError: true`) saying the name is unknown, or, for arguments that do not pass, the
    /// concrete problems (path, expected, got), the required fields, a call of the right shape
    /// and the tool's full input schema, so that the next try works. No arguments (or `{}`)
    /// where the schema requires fields is answered with the fields it requires.
    ///
    /// # Errors
    /// The error result to answer with, as above.
    pub fn invoke_tool(&self, name: &str, arguments: &Value) -> Result<&CatalogTool, Value> {
        let Some((i, tool)) = self.find(name) else {
            return Err(self.unknown(name));
        };
        let Some(schema) = tool.input_schema() else {
            return Ok(tool);
        };
        let empty = arguments.is_null() || arguments.as_object().is_some_and(Map::is_empty);
        let problem = if empty && recovery::requires_fields(schema) {
            recovery::Problem::Missing
        } else {
            let empty_object = Value::Object(Map::new());
            let arguments = if arguments.is_null() {
                &empty_object
            } else {
                arguments
            };
            match check_arguments(schema, arguments) {
                Ok(()) => return Ok(tool),
                Err(problems) => recovery::Problem::Invalid(problems),
            }
        };
        Err(recovery::answer(
            &self.exposed[i],
            schema,
            &self.names.invoke,
            &problem,
        ))
    }

    /// The error result for an unknown tool name, with near names when there are some.
    fn unknown(&self, name: &str) -> Value {
        let near: Vec<&str> = self
            .index
            .search(name, 3)
            .iter()
            .map(|h| self.exposed[h.index].as_str())
            .collect();
        let hint = if near.is_empty() {
            String::new()
        } else {
            format!(" Similar names: {}.", near.join(", "))
        };
        error_result(format!(
            "Unknown tool {name:?}.{hint} Use {} to find tools by what they do.",
            self.names.search
        ))
    }
}

/// A `CallToolResult` with `isError: true`.
fn error_result(text: impl Into<String>) -> Value {
    let text: String = text.into();
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// One hit of a `search_tools` answer: the name, the required parameters with their types and
/// how many optional ones there are, the one-line purpose, and the query words it matched:
/// `- github__create_issue(owner: string, repo: string, title: string; +3 optional): Create a
/// new issue. [matched: issue, github]`.
fn hit_line(
    name: &str,
    tool: &CatalogTool,
    params: &[String],
    required: &[String],
    description: &str,
    matched: &[String],
) -> String {
    let properties = tool
        .input_schema()
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let mut shown: Vec<String> = params
        .iter()
        .filter(|p| required.contains(p))
        .take(SHOWN_REQUIRED)
        .map(
            |p| match properties.and_then(|ps| ps.get(p)).and_then(type_of) {
                Some(kind) => format!("{p}: {kind}"),
                None => p.clone(),
            },
        )
        .collect();
    let listed_required = params.iter().filter(|p| required.contains(p)).count();
    let hidden = listed_required.saturating_sub(SHOWN_REQUIRED);
    if hidden > 0 {
        shown.push(format!("+{hidden} required"));
    }
    let mut signature = shown.join(", ");
    let optional = params.len() - listed_required;
    if optional > 0 {
        let sep = if signature.is_empty() { "" } else { "; " };
        let _ = write!(signature, "{sep}+{optional} optional");
    }
    let why = if matched.is_empty() {
        String::new()
    } else {
        format!(" [matched: {}]", matched.join(", "))
    };
    format!("- {name}({signature}): {description}{why}")
}

/// A parameter's type in a few characters: `string`, `integer|null`, `string[]`, or up to three
/// of its `enum` values (`"open"|"closed"`); `None` when the schema says none.
fn type_of(schema: &Value) -> Option<String> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let mut shown: Vec<String> = values.iter().take(3).map(Value::to_string).collect();
        if values.len() > 3 {
            shown.push("…".into());
        }
        return Some(shown.join("|"));
    }
    match schema.get("type")? {
        Value::String(kind) if kind == "array" => {
            let item = schema.get("items").and_then(type_of);
            Some(item.map_or_else(|| "array".to_owned(), |i| format!("{i}[]")))
        }
        Value::String(kind) => Some(kind.clone()),
        Value::Array(kinds) => {
            let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
            (!kinds.is_empty()).then(|| kinds.join("|"))
        }
        _ => None,
    }
}

/// Top-level parameter names of a tool (schema order) and the required ones.
fn parameters(tool: &CatalogTool) -> (Vec<String>, Vec<String>) {
    let schema = tool.input_schema();
    let params = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let required = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    (params, required)
}

#[cfg(test)]
mod tests;
