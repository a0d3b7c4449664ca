//! Cache-stable tool lists on the LLM-API side: rewrites of Anthropic Messages and `OpenAI`
//! Chat Completions / Responses request bodies, and a tower layer that applies them.
//!
//! Providers cache prompt prefixes byte for byte, and tools come first (Anthropic renders
//! tools → system → messages; `OpenAI` caches the longest common prefix automatically). A host
//! that lists its MCP tools in whatever order the upstreams answered, with keys in whatever
//! order each SDK wrote them, pays a cache write on every turn after any restart. These
//! rewrites make the tools part of a request a function of its tools' values:
//!
//! - **Canonical form**: every tool in [`crate::canonical`] key order (`name`, `description`,
//!   then every other key in byte order; nested objects by key; arrays untouched). Values never
//!   change, only key order.
//! - **Ordering rule**: static tools first, dynamic tools after. Among static tools, the
//!   provider's own tools (Anthropic server tools such as `web_search_*`, `OpenAI` built-in
//!   tools such as `file_search`: anything that is not a client-defined function) come first,
//!   in the relative order the caller gave, then the client-defined tools sorted by name.
//!   Dynamic tools (per-session, promoted, discovered; see [`ToolClasses`]) follow in the
//!   order the caller gave, so adding or removing one leaves the static prefix byte-identical.
//! - **Breakpoints** (Anthropic only, see [`anthropic`]): one `cache_control` on the last static
//!   tool, within the API's limit of 4 per request, never below the model's minimum cacheable
//!   length, never duplicating one the caller set.
//!
//! Every other field of the request is kept: the rewrites only touch `tools`, and the
//! [`LlmCacheLayer`] splices the new `tools` into the original bytes, so every other field
//! reaches the provider byte for byte.
//!
//! ```
//! use mcp_budget::llm_api::{anthropic, Breakpoint, RewriteOptions, ToolClasses};
//! use serde_json::json;
//!
//! let mut body = json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "tools": [
//!     {"name": "session_note", "input_schema": {"type": "object"}},
//!     {"input_schema": {"type": "object"}, "name": "search"},
//!     {"name": "fetch", "input_schema": {"type": "object"}},
//! ], "messages": [{"role": "user", "content": "hi"}]});
//! let options = RewriteOptions::default().with_classes(ToolClasses::dynamic_names(["session_note"]));
//! let outcome = anthropic::rewrite(&mut body, &options);
//! let names: Vec<&str> = body["tools"].as_array().unwrap().iter()
//!     .map(|t| t["name"].as_str().unwrap()).collect();
//! assert_eq!(names, ["fetch", "search", "session_note"]);
//! assert_eq!((outcome.static_tools, outcome.dynamic_tools), (2, 1));
//! // Two tiny tools are far below 1024 tokens: no breakpoint is added.
//! assert_eq!(outcome.breakpoint, Breakpoint::BelowMinimum);
//! ```

pub mod anthropic;
pub mod layer;
pub mod openai;
pub mod preselect;
pub mod proxy;

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::compress::Level;
use crate::tokens::Counter;

pub use layer::{DEFAULT_BODY_LIMIT, LlmCache, LlmCacheLayer, ResponseFuture};

/// Which tools are static (the same on every request: they form the cached prefix) and which
/// are dynamic (come and go: listed after the static ones). The default is all static.
///
/// ```
/// use mcp_budget::llm_api::ToolClasses;
///
/// assert!(!ToolClasses::all_static().is_dynamic("search"));
/// assert!(ToolClasses::dynamic_names(["note"]).is_dynamic("note"));
/// assert!(ToolClasses::dynamic_if(|name| name.starts_with("tmp_")).is_dynamic("tmp_x"));
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ToolClasses {
    dynamic: Dynamic,
}

#[derive(Clone, Default)]
enum Dynamic {
    #[default]
    None,
    Names(Arc<BTreeSet<String>>),
    Predicate(Arc<dyn Fn(&str) -> bool + Send + Sync>),
}

impl std::fmt::Debug for ToolClasses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.dynamic {
            Dynamic::None => f.write_str("ToolClasses::AllStatic"),
            Dynamic::Names(names) => f.debug_tuple("ToolClasses::Dynamic").field(names).finish(),
            Dynamic::Predicate(_) => f.write_str("ToolClasses::DynamicIf(..)"),
        }
    }
}

impl ToolClasses {
    /// Every tool is static.
    #[must_use]
    pub fn all_static() -> Self {
        Self::default()
    }

    /// The tools named in `names` are dynamic, every other tool is static.
    #[must_use]
    pub fn dynamic_names<I>(names: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        Self {
            dynamic: Dynamic::Names(Arc::new(names.into_iter().map(Into::into).collect())),
        }
    }

    /// The tools whose name satisfies `predicate` are dynamic.
    #[must_use]
    pub fn dynamic_if(predicate: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        Self {
            dynamic: Dynamic::Predicate(Arc::new(predicate)),
        }
    }

    /// Whether the tool named `name` is dynamic.
    #[must_use]
    pub fn is_dynamic(&self, name: &str) -> bool {
        match &self.dynamic {
            Dynamic::None => false,
            Dynamic::Names(names) => names.contains(name),
            Dynamic::Predicate(p) => p(name),
        }
    }
}

/// How a request's tools are rewritten: [`Default`], then the `with_*` methods.
///
/// ```
/// use mcp_budget::compress::Level;
/// use mcp_budget::llm_api::{CacheTtl, RewriteOptions, ToolClasses};
///
/// let options = RewriteOptions::default()
///     .with_classes(ToolClasses::dynamic_names(["note"]))
///     .with_compress(Level::Low)
///     .with_ttl(CacheTtl::OneHour);
/// assert!(options.counter.is_none()); // chars/4 estimate
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RewriteOptions {
    /// Which tools are dynamic (default: none).
    pub classes: ToolClasses,
    /// Compress client-defined tools' descriptions to this level ([`crate::compress`]);
    /// `None` (the default) keeps them as given.
    pub compress: Option<Level>,
    /// Counts the static tools' tokens against the minimum cacheable length (Anthropic).
    /// `None` (the default): a `chars / 4` estimate of their JSON.
    pub counter: Option<Counter>,
    /// Minimum cacheable prompt length, in tokens (Anthropic); `None` (the default): the
    /// model's, from [`anthropic::min_cacheable_tokens`].
    pub min_cache_tokens: Option<usize>,
    /// TTL of the breakpoint the rewrite adds (Anthropic); `None` (the default): the API's
    /// default (5 minutes), unless a later breakpoint of the request asks for one hour (the API
    /// wants longer TTLs first, so the added one then asks for one hour too).
    pub ttl: Option<CacheTtl>,
    /// Per-request preselection of the client-defined tools ([`preselect`]); `None` (the
    /// default): every tool is listed.
    pub preselect: Option<preselect::Preselect>,
}

impl RewriteOptions {
    /// With `classes` as [`RewriteOptions::classes`].
    #[must_use]
    pub fn with_classes(mut self, classes: ToolClasses) -> Self {
        self.classes = classes;
        self
    }

    /// With `level` as [`RewriteOptions::compress`].
    #[must_use]
    pub fn with_compress(mut self, level: Level) -> Self {
        self.compress = Some(level);
        self
    }

    /// With `counter` as [`RewriteOptions::counter`].
    #[must_use]
    pub fn with_counter(mut self, counter: Counter) -> Self {
        self.counter = Some(counter);
        self
    }

    /// With `tokens` as [`RewriteOptions::min_cache_tokens`].
    #[must_use]
    pub fn with_min_cache_tokens(mut self, tokens: usize) -> Self {
        self.min_cache_tokens = Some(tokens);
        self
    }

    /// With `ttl` as [`RewriteOptions::ttl`].
    #[must_use]
    pub fn with_ttl(mut self, ttl: CacheTtl) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// With `preselect` as [`RewriteOptions::preselect`].
    #[must_use]
    pub fn with_preselect(mut self, preselect: preselect::Preselect) -> Self {
        self.preselect = Some(preselect);
        self
    }
}

/// TTL of an Anthropic cache breakpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheTtl {
    /// `"ttl": "5m"` (cache writes cost 1.25× the input price).
    FiveMinutes,
    /// `"ttl": "1h"` (cache writes cost 2× the input price).
    OneHour,
}

impl CacheTtl {
    /// The API's value (`5m`, `1h`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FiveMinutes => "5m",
            Self::OneHour => "1h",
        }
    }
}

/// What a rewrite did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Rewrite {
    /// Tools listed first, forming the cached prefix.
    pub static_tools: usize,
    /// Tools listed after the static ones.
    pub dynamic_tools: usize,
    /// Estimated tokens of the static tools (Anthropic; counted only up to the minimum
    /// cacheable length, so a lower bound when the breakpoint was added; 0 for `OpenAI`).
    pub static_tokens: usize,
    /// What happened to the cache breakpoint of the static tools.
    pub breakpoint: Breakpoint,
    /// With [`RewriteOptions::preselect`]: the client-defined tools listed after the static
    /// ones for this request (counted in neither `static_tools` nor `dynamic_tools`).
    pub preselected: usize,
    /// With [`RewriteOptions::preselect`]: the client-defined tools left out of this request.
    pub left_out: usize,
}

/// The cache breakpoint of the static tools after a rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Breakpoint {
    /// `OpenAI` (automatic prefix caching, no breakpoints), or a request without a `tools`
    /// array.
    #[default]
    NotApplicable,
    /// No tool is static: nothing to mark.
    NoStaticTools,
    /// One was added on the last static tool.
    Added,
    /// The caller's own breakpoint covers the last static tool (it was on it or on a later
    /// tool, or on an earlier static tool and was moved onto the last one): none was added.
    Caller,
    /// The static tools are below the model's minimum cacheable length: none was added.
    BelowMinimum,
    /// The request already has the API's maximum of 4 breakpoints: none was added.
    NoRoom,
}

/// How a tool takes part in the ordering rule.
pub(crate) struct Slot {
    /// The tool's name, when it has one (classification, sorting).
    pub(crate) name: Option<String>,
    /// A client-defined function, sorted by name among the static tools; otherwise a provider
    /// tool, kept in the caller's relative order.
    pub(crate) sorted: bool,
}

/// What every rewrite starts with: the body's `tools` taken out (`None` when it has no `tools`
/// array), each compressed with `compress` when the options ask for a level, then put in
/// canonical form and order ([`order`]); with the outcome so far (static and dynamic counts).
/// [`put_tools`] puts them back.
pub(crate) fn take_ordered(
    body: &mut Value,
    options: &RewriteOptions,
    compress: impl Fn(&mut Value, Level),
    slot: impl Fn(&Value) -> Slot,
    canonical: impl Fn(Value) -> Value,
) -> Option<(Vec<Value>, Rewrite)> {
    let Some(Value::Array(tools)) = body.get_mut("tools") else {
        return None;
    };
    let mut tools = std::mem::take(tools);
    if let Some(level) = options.compress {
        for tool in &mut tools {
            compress(tool, level);
        }
    }
    let (tools, static_len) = order(tools, &options.classes, &slot, canonical);
    let k = options.preselect.as_ref().map_or(0, |p| p.k_for(body));
    let Some(chooser) = options.preselect.as_ref().filter(|_| k > 0) else {
        let outcome = Rewrite {
            static_tools: static_len,
            dynamic_tools: tools.len() - static_len,
            ..Rewrite::default()
        };
        return Some((tools, outcome));
    };
    let (tools, static_len, chosen) = preselect::apply(tools, static_len, body, chooser, k, slot);
    let outcome = Rewrite {
        static_tools: static_len,
        dynamic_tools: tools.len() - static_len - chosen.listed,
        preselected: chosen.listed,
        left_out: chosen.left_out,
        ..Rewrite::default()
    };
    Some((tools, outcome))
}

/// The rewritten `tools` back into the body [`take_ordered`] took them from.
pub(crate) fn put_tools(body: &mut Value, tools: Vec<Value>) {
    if let Some(slot) = body.get_mut("tools") {
        *slot = Value::Array(tools);
    }
}

/// Canonical form and order of `tools` (see the module docs): returns the tools and how many
/// of them, from the start, are static.
pub(crate) fn order(
    tools: Vec<Value>,
    classes: &ToolClasses,
    slot: &impl Fn(&Value) -> Slot,
    canonical: impl Fn(Value) -> Value,
) -> (Vec<Value>, usize) {
    let mut fixed = Vec::new();
    let mut sorted: Vec<(String, Value)> = Vec::new();
    let mut dynamic = Vec::new();
    for tool in tools {
        let Slot { name, sorted: sort } = slot(&tool);
        let tool = canonical(tool);
        if name.as_deref().is_some_and(|n| classes.is_dynamic(n)) {
            dynamic.push(tool);
        } else if sort {
            sorted.push((name.unwrap_or_default(), tool));
        } else {
            fixed.push(tool);
        }
    }
    // Names are unique in a valid request; ties (an invalid request) still get one order.
    sorted.sort_by(|a, b| {
        a.0.cmp(&b.0).then_with(|| {
            let (x, y) = (serde_json::to_string(&a.1), serde_json::to_string(&b.1));
            x.ok().cmp(&y.ok())
        })
    });
    let static_len = fixed.len() + sorted.len();
    let mut out = fixed;
    out.extend(sorted.into_iter().map(|(_, t)| t));
    out.extend(dynamic);
    (out, static_len)
}

/// An MCP tool as an LLM API function: its `name`, `description`, and its `inputSchema` under
/// `schema_key` (`input_schema` for Anthropic, `parameters` for `OpenAI`; an empty object schema
/// when it has none).
pub(crate) fn function_from_mcp(tool: &Map<String, Value>, schema_key: &str) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(name) = tool.get("name") {
        out.insert("name".into(), name.clone());
    }
    if let Some(description) = tool.get("description") {
        out.insert("description".into(), description.clone());
    }
    out.insert(
        schema_key.into(),
        tool.get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
    );
    out
}

/// Compresses a client-defined tool's description and schema (`schema_key` holds its input
/// schema) through [`crate::compress`], which works on MCP tool objects.
pub(crate) fn compress_tool(tool: &mut Map<String, Value>, level: Level, schema_key: &str) {
    if level == Level::Off {
        return;
    }
    let mut mcp = Map::new();
    for (from, to) in [
        ("name", "name"),
        ("description", "description"),
        (schema_key, "inputSchema"),
    ] {
        if let Some(v) = tool.get(from) {
            mcp.insert(to.to_owned(), v.clone());
        }
    }
    let out = crate::compress::compress(&mcp, level);
    for (from, to) in [("description", "description"), ("inputSchema", schema_key)] {
        if let (Some(v), true) = (out.get(from), tool.contains_key(to)) {
            tool.insert(to.to_owned(), v.clone());
        }
    }
}
