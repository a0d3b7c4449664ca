//! What the guard between the upstreams and the catalog ([`crate::pin::admit`]) held back or
//! reported, kept in the catalog value so every reader sees the same.

use std::collections::BTreeMap;

use crate::catalog::Item;
use crate::sanitize::ItemReport;

/// A tool, prompt or resource template held out of the catalog (not listed, not searchable,
/// calls and gets refused), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// A tool, a prompt or a resource template.
    pub kind: Item,
    /// Server id.
    pub server: String,
    /// The upstream's own tool or prompt name; a template's `uriTemplate`.
    pub name: String,
    /// `changed` (differs from the pin), `unknown` (not in the lock) or `steering` (flagged
    /// by the sanitizer, with `[sanitize] steering = "quarantine"`).
    pub reason: &'static str,
    /// The pinned `schemaHash`, when there is one.
    pub old: Option<String>,
    /// The served tool's `schemaHash`.
    pub new: String,
    /// What changed: `description`, `schema` (a prompt's `arguments`), `annotations`,
    /// `other` (empty unless `changed`).
    pub changed: Vec<&'static str>,
}

impl Quarantined {
    /// The error `data.type` a request that names it is refused with:
    /// `mcp_budget.tool.flagged` for steering (only tools are held for it), else
    /// `mcp_budget.prompt.changed` for a prompt and `mcp_budget.tool.changed` for a tool
    /// (also when it is unknown to the lock).
    #[must_use]
    pub fn error_type(&self) -> &'static str {
        use crate::error::kind;
        match (self.reason, self.kind) {
            ("steering", _) => kind::TOOL_FLAGGED,
            (_, Item::Prompt) => kind::PROMPT_CHANGED,
            (_, Item::Tool | Item::Template) => kind::TOOL_CHANGED,
        }
    }
}

#[cfg(test)]
impl Quarantined {
    /// `server`'s tool `name`, held because its description changed since its pin (for tests).
    pub(crate) fn changed_description(server: &str, name: &str) -> Self {
        Self {
            kind: Item::Tool,
            server: server.into(),
            name: name.into(),
            reason: "changed",
            old: Some("a".repeat(64)),
            new: "b".repeat(64),
            changed: vec!["description"],
        }
    }
}

/// A definition trusted on first use: its `schemaHash`, and the short hashes of its parts
/// (what [`crate::pin::lock::Parts`] holds, written by the guard as one text), which say what
/// changed when the hash differs. Not the definition itself: nearly every one is only compared
/// by hash for the gateway's life, and a thousand tools' originals took close to a megabyte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trusted {
    /// Its `schemaHash` when first seen.
    pub hash: String,
    /// Its parts' hashes when first seen, as the guard writes them.
    pub parts: String,
}

impl Trusted {
    /// A definition whose `schemaHash` is `hash` and whose parts' hashes are `parts`.
    ///
    /// ```
    /// use mcp_budget::catalog::Trusted;
    ///
    /// let trusted = Trusted::new("h".into(), "d:s:a:o".into());
    /// assert_eq!((trusted.hash.as_str(), trusted.parts.as_str()), ("h", "d:s:a:o"));
    /// ```
    #[must_use]
    pub const fn new(hash: String, parts: String) -> Self {
        Self { hash, parts }
    }
}

/// One upstream's guard state: what was held back and reported, and (trust on first use) the
/// definitions first seen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Held {
    /// Tools, prompts and resource templates held out of the catalog.
    pub quarantined: Vec<Quarantined>,
    /// Trust on first use (without a lock, or for a kind the lock does not pin): each tool,
    /// prompt and template as first seen, by kind and its own name.
    pub trusted: BTreeMap<(Item, String), Trusted>,
    /// What sanitizing removed or flagged, per item (items with nothing to report are left
    /// out).
    pub(crate) reports: Vec<ItemReport>,
    /// Warnings that did not hold anything back (`on_change = "warn"`, flags).
    pub warnings: Vec<String>,
}
