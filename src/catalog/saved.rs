//! Saved `tools/list` results: what the offline commands read instead of live upstreams.
//!
//! A file's stem is the server id. [`Catalog::from_saved`] builds the same [`Catalog`] the
//! gateway builds live (servers in the policy's `[[upstream]]` order, tools repaired as live
//! tools are), so that `render` and `inspect` show what `serve` lists.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Catalog, CatalogError, CatalogTool, Contribution, repair_tool};

impl Catalog {
    /// The catalog of saved `tools/list` results (see [`load_saved`] for `paths`), as the
    /// gateway would build it for upstreams `names` (the policy's `[[upstream]]` names, in
    /// order): a file whose stem is one of `names` stands for that upstream; files of other
    /// stems come after, in the order given (files of one stem are joined); an upstream
    /// without a file contributes nothing.
    ///
    /// # Errors
    /// [`CatalogError`] for an unreadable file or one that is not a `tools/list` result.
    pub fn from_saved(
        paths: &[PathBuf],
        names: &[String],
        separator: &str,
    ) -> Result<Self, CatalogError> {
        let mut servers: Vec<String> = names.to_vec();
        let mut contributions = vec![Contribution::default(); servers.len()];
        for file in files(paths)? {
            let (server, mut tools) = read_list(&file)?;
            for tool in &mut tools {
                repair_tool(&server, tool);
            }
            let i = match servers.iter().position(|s| *s == server) {
                Some(i) => i,
                None => {
                    servers.push(server);
                    contributions.push(Contribution::default());
                    servers.len() - 1
                }
            };
            contributions[i].tools.extend(tools);
        }
        Ok(Self::build(contributions, &servers, separator, 1))
    }
}

/// Reads saved `tools/list` results. Each path is a JSON file (server id = file stem) or a
/// directory of them (read in file-name order). Files keep the order given.
///
/// # Errors
/// [`CatalogError`] for an unreadable file or one that is not a `tools/list` result.
pub fn load_saved(paths: &[PathBuf]) -> Result<Vec<CatalogTool>, CatalogError> {
    let mut tools = Vec::new();
    for file in files(paths)? {
        tools.extend(load_file(&file)?);
    }
    Ok(tools)
}

/// The files `paths` name: each file, and the `.json` files of each directory in name order.
fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CatalogError> {
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
    Ok(files)
}

/// Reads one saved `tools/list` result; the server id is the file stem.
///
/// # Errors
/// [`CatalogError`] for an unreadable file or one that is not a `tools/list` result.
pub fn load_file(path: &Path) -> Result<Vec<CatalogTool>, CatalogError> {
    let (server, list) = read_list(path)?;
    list.into_iter()
        .map(|tool| CatalogTool::new(&server, tool))
        .collect()
}

/// The server id (file stem) and the tool objects of one saved `tools/list` result.
fn read_list(path: &Path) -> Result<(String, Vec<Value>), CatalogError> {
    let text = crate::files::read_text(path).map_err(|source| CatalogError::Io {
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
    Ok((server, list))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toolsets() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets")
    }

    #[test]
    fn loads_fixture_directory_in_name_order() {
        let tools = load_saved(&[toolsets()]).unwrap();
        assert!(tools.len() > 100);
        let servers: Vec<&str> = tools.iter().map(|t| t.server.as_str()).collect();
        let mut sorted = servers.clone();
        sorted.sort_unstable();
        assert_eq!(servers, sorted);
    }

    #[test]
    fn saved_catalog_takes_the_policy_order_then_the_rest() {
        let names = vec!["time".to_owned(), "absent".to_owned()];
        let catalog = Catalog::from_saved(&[toolsets()], &names, "__").unwrap();
        assert_eq!(&catalog.names()[..2], &names[..]);
        assert_eq!(catalog.tools()[0].server, "time");
        assert_eq!(catalog.upstreams()[1].counts().tools, 0);
        assert_eq!(
            catalog.tools().len(),
            load_saved(&[toolsets()]).unwrap().len()
        );
    }
}
