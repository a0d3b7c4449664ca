//! The one rule for a tool the client may not call, on the meta-tools' paths.
//!
//! A client's plan knows only the tools its scope lets it see, so `invoke_tool` and
//! `get_tool_schema` would answer a hidden tool's name as an unknown one. They answer it as a
//! direct call of it is answered instead: the call goes down the stack as the client's
//! `tools/call` of that name, and the authorize layer refuses it (its scope denies every tool
//! it may not see) with `mcp_budget.authorization.denied`, its audit line and its metric. The
//! reason is in `src/layer/authorize.rs` and `docs/security.md`.
//!
//! Nothing of the hidden tool is read here but its route: no schema, no near names, and the
//! arguments go down as the client sent them (checked against no schema). A `get_tool_schema`
//! goes down as a probe ([`crate::context::Caller::probe`]): the authorize layer answers it
//! whatever it decides, so a schema lookup never becomes a call of the tool, even when the
//! catalog changes between the two layers' reads.

use serde_json::{Map, Value};

use crate::authz::Target;
use crate::catalog::Catalog;
use crate::context::McpRequest;
use crate::identity::Via;
use crate::jsonrpc::to_raw;

/// The params of the direct `tools/call` a meta-tool call of a tool the client may not see
/// stands for: the tool `name` the meta-tool names, the `arguments` given (for
/// `get_tool_schema`: none) and the call's `_meta`. `None` for a tool the client may see, a
/// name the catalog does not route, or an anonymous caller (who sees every tool).
pub(super) fn as_direct_call(
    req: &McpRequest,
    catalog: &Catalog,
    arguments: &Value,
    meta: Option<&Value>,
    with_arguments: bool,
) -> Option<Box<serde_json::value::RawValue>> {
    let principal = &req.caller.principal;
    if principal.via() == Via::Anonymous {
        return None;
    }
    let name = arguments.get("name")?.as_str()?;
    let (i, own) = catalog.tool(name)?;
    let server = catalog.names().get(i)?;
    if principal
        .client()
        .scope()
        .may_see(Target::tool(server, own))
    {
        return None;
    }
    let mut params = Map::new();
    params.insert("name".into(), Value::String(name.to_owned()));
    if with_arguments {
        if let Some(given) = arguments.get("arguments") {
            params.insert("arguments".into(), given.clone());
        }
    }
    if let Some(meta) = meta {
        params.insert("_meta".into(), meta.clone());
    }
    Some(to_raw(&Value::Object(params)))
}
