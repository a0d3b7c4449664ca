//! What the guard between the upstreams and the catalog ([`crate::pin::admit`]) held back or
//! reported, kept in the catalog value so every reader sees the same.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

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

/// A definition trusted on first use: its `schemaHash` and its original object as compact
/// JSON text. Kept as text, not as a [`Value`], because nearly every one is only compared by
/// hash for the gateway's life (a `Value` of a tool takes three to four times the room of its
/// text); the text is parsed only to say what changed when the hash differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trusted {
    /// Its `schemaHash` when first seen.
    pub hash: String,
    /// The original object as first seen, compact JSON (shared: every guard run after the
    /// first carries it over).
    pub original: Arc<str>,
}

impl Trusted {
    /// `original` (an upstream's object as given), whose `schemaHash` is `hash`.
    ///
    /// ```
    /// use mcp_budget::catalog::Trusted;
    /// use serde_json::json;
    ///
    /// let tool = json!({"name": "now", "inputSchema": {"type": "object"}});
    /// let trusted = Trusted::new(&tool, "h".into());
    /// assert_eq!(trusted.value(), tool);
    /// ```
    #[must_use]
    pub fn new(original: &Value, hash: String) -> Self {
        Self {
            hash,
            original: Arc::from(original.to_string()),
        }
    }

    /// The original object again (`Null` only if the text were not JSON, which [`Trusted::new`]
    /// never makes).
    #[must_use]
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.original).unwrap_or(Value::Null)
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
    pub reports: Vec<ItemReport>,
    /// Warnings that did not hold anything back (`on_change = "warn"`, flags).
    pub warnings: Vec<String>,
}
