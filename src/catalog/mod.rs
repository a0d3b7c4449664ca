//! The catalog: every tool, prompt and resource of every upstream, and the names hosts see.
//!
//! [`Catalog`] is an immutable value built by one pure function, [`Catalog::build`], from what
//! each upstream contributed: namespaced names are computed once there, colliding names are
//! resolved deterministically (whatever order the upstreams answered in) and recorded as
//! [`Collision`]s, and the routing maps (exposed name → upstream and its own name, resource URI
//! → upstream) and `Mcp-Param-*` marks are derived. Live, the
//! [`Gateway`](crate::gateway::Gateway) builds a new one whenever an upstream's lists change
//! and publishes it; routing, the header checks and the budget layer read the snapshot.
//! Offline, [`Catalog::from_saved`] builds one from saved `tools/list` results (a file's stem
//! is the server id), and [`load_saved`] reads them as plain [`CatalogTool`]s.
//!
//! ```
//! use mcp_budget::catalog::CatalogTool;
//! use serde_json::json;
//!
//! let tool = CatalogTool::new("time", json!({"name": "get_current_time", "inputSchema": {"type": "object"}}))?;
//! assert_eq!(tool.id(), "time/get_current_time");
//! # Ok::<(), mcp_budget::catalog::CatalogError>(())
//! ```

mod build;
mod given;
mod guarded;
mod item;
mod saved;

pub use build::{Catalog, Collision, Contribution};
pub use given::{Counts, Given};
pub use guarded::{Held, Quarantined, Trusted};
pub use item::Item;
pub use saved::{load_file, load_saved};

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

/// One tool of the catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogTool {
    /// Server id (from the policy, or a saved file's stem).
    pub server: String,
    /// The upstream's own tool name.
    pub name: String,
    /// The whole tool object as the upstream gave it (unknown keys kept), in canonical key
    /// order ([`crate::canonical`]). Shared: the plans, search indexes and per-client views
    /// made of a catalog hold this one copy (`Arc::make_mut` or a clone of the map to change
    /// it).
    pub definition: Arc<Map<String, Value>>,
    /// The name hosts see, when a [`Catalog`] gave it one (collisions resolved).
    exposed: Option<String>,
}

/// Why a catalog could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// A file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file is not a `tools/list` result.
    #[error("{path}: not a tools/list result: {reason}")]
    Shape {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A tool object has no string `name`.
    #[error("server {server}: a tool has no string \"name\"")]
    NoName {
        /// The server id.
        server: String,
    },
}

impl CatalogTool {
    /// Wraps a tool object of server `server`.
    ///
    /// # Errors
    /// [`CatalogError::NoName`] when the value is not an object with a string `name`.
    pub fn new(server: &str, tool: Value) -> Result<Self, CatalogError> {
        let no_name = || CatalogError::NoName {
            server: server.to_owned(),
        };
        // Canonical key order from the start, so that what is counted, planned and listed is
        // the same bytes whatever key order the upstream used.
        let Value::Object(definition) = crate::canonical::into_canonical_tool(tool) else {
            return Err(no_name());
        };
        let name = definition
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(no_name)?
            .to_owned();
        Ok(Self {
            server: server.to_owned(),
            name,
            definition: Arc::new(definition),
            exposed: None,
        })
    }

    /// The name hosts see: the one its [`Catalog`] gave it (with the catalog's separator and
    /// any collision resolved), or, for a tool outside a catalog, its
    /// [`exposed_name`](crate::naming::exposed_name) with `separator`.
    #[must_use]
    pub fn exposed_name(&self, separator: &str) -> Cow<'_, str> {
        match &self.exposed {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(crate::naming::exposed_name(
                &self.server,
                &self.name,
                separator,
            )),
        }
    }

    /// `"server/tool"`, the id used by the offline commands and the labelled data.
    #[must_use]
    pub fn id(&self) -> String {
        format!("{}/{}", self.server, self.name)
    }

    /// The same tool under the exposed name `name` (a tool from outside a catalog whose name a
    /// host already knows, as in an LLM API request).
    pub(crate) fn with_exposed_name(mut self, name: &str) -> Self {
        self.exposed = Some(name.to_owned());
        self
    }

    /// The name its [`Catalog`] gave it, if it came from one.
    pub(crate) fn catalog_name(&self) -> Option<&str> {
        self.exposed.as_deref()
    }

    /// The tool's description, or `""`.
    #[must_use]
    pub fn description(&self) -> &str {
        self.definition
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The tool's `inputSchema`, if any.
    #[must_use]
    pub fn input_schema(&self) -> Option<&Value> {
        self.definition.get("inputSchema")
    }
}

/// Makes a tool callable by strict clients: MCP requires `inputSchema` to be an object schema
/// with `"type": "object"`, and one tool without it makes some clients (the Python SDK) reject
/// the whole list. Nothing else is touched. Live and saved lists get the same repair, so that
/// offline output is what `serve` lists.
pub fn repair_tool(upstream: &str, tool: &mut Value) {
    let Some(obj) = tool.as_object_mut() else {
        return;
    };
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match obj.get_mut("inputSchema") {
        Some(Value::Object(schema)) => {
            if schema.get("type").is_none() {
                tracing::warn!(upstream, tool = %name, "inputSchema without \"type\"; adding \"type\": \"object\"");
                schema.insert("type".into(), Value::String("object".into()));
            }
        }
        _ => {
            tracing::warn!(upstream, tool = %name, "Tool without an object inputSchema; using an empty object schema");
            obj.insert("inputSchema".into(), serde_json::json!({"type": "object"}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repair_adds_missing_object_type_only() {
        let mut tool = json!({"name": "t", "inputSchema": {"$schema": "x", "properties": {}}});
        repair_tool("u", &mut tool);
        assert_eq!(tool["inputSchema"]["type"], "object");
        assert_eq!(tool["inputSchema"]["$schema"], "x");
    }
}
