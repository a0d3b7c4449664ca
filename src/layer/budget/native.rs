//! Native progressive disclosure (experimental; `[discover] native_disclosure = true`): for a
//! client that declares the draft SEP's `tools.progressiveDisclosure` capability, the tools it
//! may see are served as `tools/catalog` entries and `tools/describe` definitions instead of
//! behind meta-tools.
//!
//! The shapes are the draft's (see `docs/budget.md` for where it is silent and what was
//! decided):
//!
//! - the `initialize` (or `server/discover`) result of such a client carries
//!   `capabilities.tools.progressiveDisclosure: true`;
//! - `tools/list` lists the same set as `tools/catalog`: every tool the client may see, in
//!   full, no discovery meta-tools (the host searches and describes itself), but the code-mode
//!   one when `[discover] code_mode` is on ([`with_code_tool`]): it is a tool the client calls,
//!   not a way to find tools, so it is listed, catalogued (tag [`META_TAG`]) and described as
//!   any other;
//! - `tools/catalog` gives `{name, title?, summary, tags, schemaHash, annotations?}` per tool
//!   (a `query` narrows it to the search's best matches), all in one page;
//! - `tools/describe` gives `{tools: [...]}` for `names`, in their order, each byte for byte
//!   the object `tools/list` gives; any name the client cannot see (missing or denied alike)
//!   fails the whole request with `-32002` and `data.unknownNames`;
//! - `schemaHash` is the lowercase hex SHA-256 of the RFC 8785 form of exactly that object
//!   ([`crate::canonical::schema_hash`]).

use std::collections::HashMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::canonical::schema_hash;
use crate::catalog::CatalogTool;
use crate::context::McpRequest;
use crate::discover::one_line;
use crate::error::Error;
use crate::jsonrpc::{ErrorObject, Id, Message, to_raw};
use crate::search::SearchIndex;

/// Longest `summary`, in characters (the draft: "SHOULD keep this under 200 characters").
pub(super) const SUMMARY_CHARS: usize = 199;

/// Most names one `tools/describe` may ask for (the draft lets a server bound it).
pub(super) const MAX_DESCRIBE: usize = 100;

/// Results of a `tools/catalog` with a `query`.
const QUERY_RESULTS: usize = 20;

/// The catalog tag of the gateway's own tools (the code-mode meta-tool), where an upstream's
/// tools carry their server id: the `/` keeps it apart from every server id (those are
/// `A-Z a-z 0-9 _ -`), and it reads as the gateway's `_meta` keys do.
pub(super) const META_TAG: &str = "mcp-budget/meta";

/// Whether `capabilities` (a client's) declare progressive disclosure: `tools.progressiveDisclosure`
/// `true` or an object.
#[must_use]
pub(super) fn declares(capabilities: &Value) -> bool {
    capabilities
        .get("tools")
        .and_then(|t| t.get("progressiveDisclosure"))
        .is_some_and(|v| v.as_bool() == Some(true) || v.is_object())
}

/// Whether the client of a handshake request (`initialize`, `server/discover`) declares it.
pub(super) fn declared_at_handshake(req: &McpRequest) -> bool {
    if let Some(meta) = req.view.request_meta() {
        return declares(&meta.client_capabilities);
    }
    req.message
        .params_as::<Value>()
        .ok()
        .and_then(|p| p.get("capabilities").cloned())
        .is_some_and(|c| declares(&c))
}

/// Adds `capabilities.tools.progressiveDisclosure: true` to a handshake result (errors and
/// other shapes pass as they are).
pub(super) fn advertise(message: &mut Message) {
    let Ok(mut result) = message.result_as::<Map<String, Value>>() else {
        return;
    };
    let capabilities = result
        .entry("capabilities")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(capabilities) = capabilities.as_object_mut() else {
        return;
    };
    let tools = capabilities
        .entry("tools")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(tools) = tools.as_object_mut() {
        tools.insert("progressiveDisclosure".into(), Value::Bool(true));
        message.result = Some(to_raw(&Value::Object(result)));
    }
}

/// A client's catalog: the entries and the full tools of what it may see.
#[derive(Debug)]
pub(super) struct NativeCatalog {
    /// The `tools/catalog` result without a query, serialized once.
    all: Box<RawValue>,
    /// One entry per listed tool, in listing order.
    entries: Vec<Value>,
    /// Each listed tool as `tools/list` writes it, in listing order.
    described: Vec<Box<RawValue>>,
    /// Exposed name → position in `entries` and `described`.
    by_name: HashMap<String, usize>,
    /// Search over the visible tools (catalog order), for `query`.
    index: SearchIndex,
    /// Per visible tool, its entry.
    entry_of: Vec<Option<usize>>,
}

impl NativeCatalog {
    /// The catalog of `listed` (the `tools/list` tools of `tools`, the visible catalog tools,
    /// and the code-mode meta-tool named `code` when it is listed).
    pub(super) fn new(
        tools: &[CatalogTool],
        separator: &str,
        listed: &[Value],
        code: Option<&str>,
    ) -> Self {
        let mut server_of: HashMap<String, &str> = tools
            .iter()
            .map(|t| (t.exposed_name(separator).into_owned(), t.server.as_str()))
            .collect();
        if let Some(code) = code {
            server_of.insert(code.to_owned(), META_TAG);
        }
        let mut entries = Vec::with_capacity(listed.len());
        let mut described = Vec::with_capacity(listed.len());
        let mut by_name = HashMap::with_capacity(listed.len());
        for tool in listed {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            by_name.insert(name.to_owned(), entries.len());
            entries.push(entry(tool, name, server_of.get(name).copied()));
            described.push(to_raw(tool));
        }
        let entry_of = tools
            .iter()
            .map(|t| by_name.get(t.exposed_name(separator).as_ref()).copied())
            .collect();
        Self {
            all: to_raw(&json!({ "tools": entries })),
            entries,
            described,
            by_name,
            index: SearchIndex::build(tools),
            entry_of,
        }
    }

    /// Answers a `tools/catalog` or `tools/describe` request.
    pub(super) fn answer(&self, req: &McpRequest, id: Id, describe: bool) -> Message {
        let params = req.message.params_as::<Value>().unwrap_or(Value::Null);
        let answer = if describe {
            self.describe(&params)
        } else {
            self.catalog(&params)
        };
        match answer {
            Ok(result) => Message::response(id, result),
            Err(error) => Message::error(id, error),
        }
    }

    /// `tools/catalog`: every entry, or with a `query` the best matches (best first).
    fn catalog(&self, params: &Value) -> Result<Box<RawValue>, ErrorObject> {
        if params.get("cursor").is_some_and(|c| !c.is_null()) {
            return Err(invalid(
                "tools/catalog: this gateway gives the whole catalog in one page and no \
                 nextCursor, so no cursor is valid; ask again without one",
            ));
        }
        let query = match params.get("query") {
            None | Some(Value::Null) => return Ok(self.all.clone()),
            Some(Value::String(q)) => q,
            Some(_) => return Err(invalid("tools/catalog: \"query\" must be a string")),
        };
        let tools: Vec<&Value> = self
            .index
            .search(query, QUERY_RESULTS)
            .iter()
            .filter_map(|hit| self.entry_of.get(hit.index).copied().flatten())
            .map(|i| &self.entries[i])
            .collect();
        Ok(to_raw(&json!({ "tools": tools })))
    }

    /// `tools/describe`: the full tools of `names`, in their order.
    fn describe(&self, params: &Value) -> Result<Box<RawValue>, ErrorObject> {
        let names: Option<Vec<&str>> = params
            .get("names")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(Value::as_str).collect());
        let Some(names) = names.filter(|n| !n.is_empty()) else {
            return Err(invalid(
                "tools/describe needs \"names\": a non-empty array of tool names from tools/catalog",
            ));
        };
        if names.len() > MAX_DESCRIBE {
            return Err(invalid(&format!(
                "tools/describe: {} names asked for, at most {MAX_DESCRIBE} per request; ask in batches",
                names.len()
            )));
        }
        let unknown: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !self.by_name.contains_key(*n))
            .collect();
        if !unknown.is_empty() {
            return Err(Error::NotAvailable {
                names: unknown.into_iter().map(str::to_owned).collect(),
            }
            .to_error_object());
        }
        // Each tool's bytes exactly as `tools/list` wrote them.
        let mut out = String::from("{\"tools\":[");
        for (n, name) in names.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(self.described[self.by_name[*name]].get());
        }
        out.push_str("]}");
        Ok(RawValue::from_string(out).expect("joined JSON values are JSON"))
    }
}

/// `listed` (a native audience's `tools/list` tools) with the code-mode meta-tool named `name`
/// after the static tools and before those of volatile upstreams (`dynamic` names them), so
/// the static prefix keeps its bytes when a volatile upstream's tools change.
///
/// Why it is listed at all: the draft's `tools/list` is the set `tools/catalog` lists and
/// `tools/describe` describes, and a client may call `run_code`, so leaving it out of one
/// leaves it out of all three (a client would have to know the name). A `tools/list` of
/// `run_code` alone would break that equality, and a host that reads only the catalog would
/// never learn of it.
pub(super) fn with_code_tool(
    mut listed: Vec<Value>,
    name: &str,
    dynamic: impl Fn(&str) -> bool,
) -> Vec<Value> {
    let at = listed
        .iter()
        .position(|t| t.get("name").and_then(Value::as_str).is_some_and(&dynamic))
        .unwrap_or(listed.len());
    let definition = crate::canonical::into_canonical_tool(crate::codemode::definition(name));
    listed.insert(at, definition);
    listed
}

fn invalid(message: &str) -> ErrorObject {
    Error::Params(message.to_owned()).to_error_object()
}

/// The catalog entry of a listed tool: the draft's fields, in its order.
fn entry(tool: &Value, name: &str, server: Option<&str>) -> Value {
    let mut entry = Map::new();
    entry.insert("name".into(), Value::String(name.to_owned()));
    let title = tool.get("title").and_then(Value::as_str);
    if let Some(title) = title {
        entry.insert("title".into(), Value::String(title.to_owned()));
    }
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut summary = one_line(description, SUMMARY_CHARS);
    if summary.is_empty() {
        // The draft requires a summary: the title, else the name, says at least what it is.
        summary = title.unwrap_or(name).to_owned();
    }
    entry.insert("summary".into(), Value::String(summary));
    // The server id (or [`META_TAG`]): what groups the entry.
    if let Some(server) = server {
        entry.insert("tags".into(), json!([server]));
    }
    entry.insert("schemaHash".into(), Value::String(schema_hash(tool)));
    if let Some(annotations) = tool.get("annotations").filter(|a| a.is_object()) {
        entry.insert("annotations".into(), annotations.clone());
    }
    Value::Object(entry)
}
