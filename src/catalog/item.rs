//! The kind of a catalog item: a tool, a prompt or a resource template.
//!
//! One enum for the catalog, the pins (each lock section is one kind), the guard's
//! quarantine and the reports, with the names each of them spells it by.
//!
//! ```
//! use mcp_budget::catalog::Item;
//!
//! assert_eq!(Item::Prompt.label(), "prompt");
//! assert_eq!(Item::Template.list_method(), "resources/templates/list");
//! ```

use serde_json::Value;

/// The kind of a catalog item a model reads as text, and what a pin is of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Item {
    /// A tool (`tools/list`), named by `name`.
    #[default]
    Tool,
    /// A prompt (`prompts/list`), named by `name`.
    Prompt,
    /// A resource template (`resources/templates/list`), named by `uriTemplate`.
    Template,
}

impl Item {
    /// Every kind, in lockfile order.
    pub const ALL: [Self; 3] = [Self::Tool, Self::Prompt, Self::Template];

    /// Its name in reports and audit lines (the sanitizer's `kind`): `tool`, `prompt`,
    /// `template`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
            Self::Template => "template",
        }
    }

    /// The key of the upstream's object that names it: `name`, or a template's
    /// `uriTemplate`.
    #[must_use]
    pub fn id_key(self) -> &'static str {
        match self {
            Self::Tool | Self::Prompt => "name",
            Self::Template => "uriTemplate",
        }
    }

    /// The name of one of the upstream's objects of this kind (`None` without one).
    #[must_use]
    pub fn id_of(self, definition: &Value) -> Option<&str> {
        definition.get(self.id_key()).and_then(Value::as_str)
    }

    /// How reports name one of `server`'s (`name`: a template's `uriTemplate`):
    /// `server/tool`, `server prompt name`, `server template uri` (as the sanitizer's lines).
    #[must_use]
    pub fn who(self, server: &str, name: &str) -> String {
        match self {
            Self::Tool => format!("{server}/{name}"),
            kind => format!("{server} {} {name}", kind.label()),
        }
    }

    /// Its plural, for messages: `tools`, `prompts`, `resource templates`.
    #[must_use]
    pub fn plural(self) -> &'static str {
        match self {
            Self::Tool => "tools",
            Self::Prompt => "prompts",
            Self::Template => "resource templates",
        }
    }

    /// The method that lists the upstream's items of this kind: `tools/list`, `prompts/list`,
    /// `resources/templates/list`.
    #[must_use]
    pub fn list_method(self) -> &'static str {
        match self {
            Self::Tool => "tools/list",
            Self::Prompt => "prompts/list",
            Self::Template => "resources/templates/list",
        }
    }
}
