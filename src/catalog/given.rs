//! [`Given`]: an upstream's lists as it gave them, kept between catalog builds as compact JSON
//! text.
//!
//! The catalog keeps these lists for the next build (a refresh compares with them, a publish
//! or reload guards them again) and for the commands that show them; nothing serves from
//! them. As `serde_json::Value`s they took five times the bytes of their JSON text and were
//! the biggest thing in an idle gateway's memory (10 upstreams × 100 tools: 4.7 MB of 15 MB).
//! Text is read again (a few milliseconds for a thousand tools) only when a catalog is built.

use super::Contribution;

/// An upstream's lists as it gave them ([`Contribution`]), as compact JSON text, with their
/// lengths at hand.
///
/// ```
/// use mcp_budget::catalog::{Contribution, Given};
/// use serde_json::json;
///
/// let lists = Contribution {
///     tools: vec![json!({"name": "now", "inputSchema": {"type": "object"}})],
///     ..Contribution::default()
/// };
/// let given = Given::new(&lists);
/// assert_eq!(given.counts().tools, 1);
/// assert_eq!(given.lists(), lists);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Given {
    text: Box<str>,
    counts: Counts,
}

/// How many items each of an upstream's lists holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Tools.
    pub tools: usize,
    /// Prompts.
    pub prompts: usize,
    /// Resources.
    pub resources: usize,
    /// Resource templates.
    pub templates: usize,
}

impl Given {
    /// `lists` as text.
    #[must_use]
    pub fn new(lists: &Contribution) -> Self {
        // Values of string keys always serialize.
        let text = serde_json::to_string(lists).unwrap_or_default();
        Self {
            text: text.into_boxed_str(),
            counts: Counts {
                tools: lists.tools.len(),
                prompts: lists.prompts.len(),
                resources: lists.resources.len(),
                templates: lists.templates.len(),
            },
        }
    }

    /// The lists, read back: equal to what [`Given::new`] was given (maps keep their order).
    #[must_use]
    pub fn lists(&self) -> Contribution {
        // The text is what `new` wrote (or nothing, by default): it always reads back.
        serde_json::from_str(&self.text).unwrap_or_default()
    }

    /// How many items each list holds, without reading the text.
    #[must_use]
    pub const fn counts(&self) -> Counts {
        self.counts
    }
}

impl From<Contribution> for std::sync::Arc<Given> {
    fn from(lists: Contribution) -> Self {
        Self::new(Given::new(&lists))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_lists_read_back_as_given_key_order_and_numbers_included() {
        let lists = Contribution {
            tools: vec![json!({
                "name": "t", "inputSchema": {"type": "object", "z": 1, "a": 2.5e-7},
                "annotations": {"readOnlyHint": true}, "extra": [null, "é\u{1}", u64::MAX, -3]
            })],
            prompts: vec![json!({"name": "p"})],
            resources: vec![json!({"uri": "file:///a", "name": "a"})],
            templates: vec![json!({"uriTemplate": "file:///{x}", "name": "x"})],
        };
        let given = Given::new(&lists);
        let back = given.lists();
        assert_eq!(back, lists);
        // Maps keep their order (a Value's equality would not tell).
        assert_eq!(
            serde_json::to_string(&back.tools[0]).ok(),
            serde_json::to_string(&lists.tools[0]).ok()
        );
        let counts = given.counts();
        assert_eq!(
            (
                counts.tools,
                counts.prompts,
                counts.resources,
                counts.templates
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(Given::default().lists(), Contribution::default());
    }
}
