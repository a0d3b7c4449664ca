//! The tool catalog: every tool of every upstream, as the upstream defined it.
//!
//! The catalog is what the pure core (counting, planning, compressing, search) works on. Live,
//! the `aggregate` layer fills it from the upstreams; offline, [`load_saved`] reads saved
//! `tools/list` results (a file's stem is the server id).
//!
//! ```
//! use mcp_budget::catalog::CatalogTool;
//! use serde_json::json;
//!
//! let tool = CatalogTool::new("time", json!({"name": "get_current_time", "inputSchema": {"type": "object"}}))?;
//! assert_eq!(tool.id(), "time/get_current_time");
//! # Ok::<(), mcp_budget::catalog::CatalogError>(())
//! ```

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// One tool of the catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogTool {
    /// Server id (from the policy, or a saved file's stem).
    pub server: String,
    /// The upstream's own tool name.
    pub name: String,
    /// The whole tool object as the upstream gave it (unknown keys kept), in canonical key
    /// order ([`crate::canonical`]).
    pub definition: Map<String, Value>,
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
            definition,
        })
    }

    /// `"server/tool"`, the id used by the offline commands and the labelled data.
    #[must_use]
    pub fn id(&self) -> String {
        format!("{}/{}", self.server, self.name)
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

/// Reads saved `tools/list` results. Each path is a JSON file (server id = file stem) or a
/// directory of them (read in file-name order). Files keep the order given.
///
/// # Errors
/// [`CatalogError`] for an unreadable file or one that is not a `tools/list` result.
pub fn load_saved(paths: &[PathBuf]) -> Result<Vec<CatalogTool>, CatalogError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let io = |source| CatalogError::Io {
                path: path.clone(),
                source,
            };
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(io)?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    let mut tools = Vec::new();
    for file in files {
        tools.extend(load_file(&file)?);
    }
    Ok(tools)
}

/// Reads one saved `tools/list` result; the server id is the file stem.
///
/// # Errors
/// [`CatalogError`] for an unreadable file or one that is not a `tools/list` result.
pub fn load_file(path: &Path) -> Result<Vec<CatalogTool>, CatalogError> {
    let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Io {
        path: path.to_owned(),
        source,
    })?;
    let shape = |reason: String| CatalogError::Shape {
        path: path.to_owned(),
        reason,
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| shape(e.to_string()))?;
    let server = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let list = match value {
        Value::Object(mut obj) => match obj.remove("tools") {
            Some(Value::Array(list)) => list,
            _ => return Err(shape("expected an object with a \"tools\" array".into())),
        },
        Value::Array(list) => list,
        _ => return Err(shape("expected an object with a \"tools\" array".into())),
    };
    list.into_iter()
        .map(|tool| CatalogTool::new(&server, tool))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_fixture_directory_in_name_order() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
        let tools = load_saved(&[dir]).unwrap();
        assert!(tools.len() > 100);
        let servers: Vec<&str> = tools.iter().map(|t| t.server.as_str()).collect();
        let mut sorted = servers.clone();
        sorted.sort_unstable();
        assert_eq!(servers, sorted);
    }
}
