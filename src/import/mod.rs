//! Importing the server lists hosts already have (Claude Desktop, Claude Code, VS Code) as
//! upstreams: [`Policy::add_mcp_json`] for `serve` and `check`, and the entries `init` turns
//! into a policy file. What a file of another tool means is decided here; the policy only
//! receives the upstreams.

pub(crate) mod compressor;
pub mod inline;
mod jsonc;
pub(crate) mod mcp_json;

use std::path::Path;

use crate::policy::{ConfigError, Policy, Problem};

// `Policy::add_mcp_json` is written here, next to the reader it calls, so that `policy` does
// not depend on the import of other tools' files.
impl Policy {
    /// Adds the servers of a Claude Desktop / Claude Code `mcpServers` JSON file, or of a VS
    /// Code `mcp.json` (`servers`), as upstreams, as their host would run them (see
    /// `import/mcp_json.rs`: `${…}` resolved where the host resolves it, `type` honoured, odd
    /// names normalised); what the user should know is in [`Policy::warnings`].
    ///
    /// # Errors
    /// [`ConfigError`] when the file cannot be read, is not such a file, or names a server
    /// that is already an upstream.
    pub fn add_mcp_json(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = crate::files::read_text(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let origin = path.display().to_string();
        let import = mcp_json::parse_with(&text, &origin, &|name| std::env::var(name).ok())?;
        self.import_warnings.extend(import.warnings);
        let mut problems = Vec::new();
        for spec in import.specs {
            if self.upstreams.iter().any(|u| u.name == spec.name) {
                problems.push(Problem {
                    path: format!("mcpServers.{}", spec.name),
                    line: None,
                    message: "an upstream of this name is already defined".into(),
                });
            } else {
                self.upstreams.push(spec);
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid {
                path: origin,
                problems,
            })
        }
    }
}
