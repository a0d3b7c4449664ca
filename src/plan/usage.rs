//! The usage file (`[budget] usage_file`): how often a deployment called each tool, the input of
//! the value model's second tier ([`Rules::usage`](super::Rules::usage)).
//!
//! Format: one JSON object of `"server/tool"` ids (the keys of `[budget.tools."server/tool"]`,
//! whatever the separator or a collision renames) to call counts, keys sorted, one per line:
//!
//! ```json
//! {
//!   "github/get_issue": 412,
//!   "time/get_current_time": 3
//! }
//! ```
//!
//! An operator may write or edit it; the gateway reads it at start and rewrites it with its own
//! counts added. Keys of tools that no longer exist are kept (a server may come back).
//!
//! ```
//! use mcp_budget::catalog::CatalogTool;
//! use mcp_budget::plan::{parse_usage, render_usage, usage_of};
//! use serde_json::json;
//!
//! let counts = parse_usage(r#"{"time/now": 7, "gone/tool": 1}"#)?;
//! let catalog = vec![
//!     CatalogTool::new("time", json!({"name": "now"}))?,
//!     CatalogTool::new("time", json!({"name": "zone"}))?,
//! ];
//! assert_eq!(usage_of(&catalog, &counts), [7, 0]);
//! assert_eq!(parse_usage(&render_usage(&counts))?, counts);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use serde_json::Value;

use crate::catalog::CatalogTool;

/// Call counts by `"server/tool"` id.
pub type UsageCounts = BTreeMap<String, u64>;

/// A usage file that is not a JSON object of non-negative integer counts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a usage file ({0}); expected a JSON object of \"server/tool\" ids to call counts")]
pub struct UsageFileError(pub String);

/// The counts in a usage file's text (empty text: no counts).
///
/// # Errors
/// [`UsageFileError`] when the text is not a JSON object whose values are non-negative
/// integers.
pub fn parse_usage(text: &str) -> Result<UsageCounts, UsageFileError> {
    if text.trim().is_empty() {
        return Ok(UsageCounts::new());
    }
    let value: Value = serde_json::from_str(text).map_err(|e| UsageFileError(e.to_string()))?;
    let Value::Object(map) = value else {
        return Err(UsageFileError("the top level is not an object".into()));
    };
    map.into_iter()
        .map(|(id, count)| match count.as_u64() {
            Some(n) => Ok((id, n)),
            None => Err(UsageFileError(format!("{id:?} has {count}, not a count"))),
        })
        .collect()
}

/// The text of a usage file holding `counts`: keys sorted, one per line, a final line break.
#[must_use]
pub fn render_usage(counts: &UsageCounts) -> String {
    let mut out = String::from("{");
    for (k, (id, n)) in counts.iter().enumerate() {
        out.push_str(if k == 0 { "\n  " } else { ",\n  " });
        out.push_str(&Value::String(id.clone()).to_string());
        out.push_str(": ");
        out.push_str(&n.to_string());
    }
    out.push_str(if counts.is_empty() { "}\n" } else { "\n}\n" });
    out
}

/// Per catalog tool, in catalog order, its count in `counts` (0 when absent): the planner's
/// [`Rules::usage`](super::Rules::usage). Empty when no tool of `catalog` was called, as
/// `Rules::usage` is when unknown.
#[must_use]
pub fn usage_of(catalog: &[CatalogTool], counts: &UsageCounts) -> Vec<u64> {
    if counts.is_empty() {
        return Vec::new();
    }
    let usage: Vec<u64> = catalog
        .iter()
        .map(|t| counts.get(&t.id()).copied().unwrap_or(0))
        .collect();
    if usage.iter().all(|&n| n == 0) {
        Vec::new()
    } else {
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_say_what_is_wrong() {
        assert_eq!(parse_usage("  \n"), Ok(UsageCounts::new()));
        assert!(parse_usage("[1]").unwrap_err().0.contains("not an object"));
        let e = parse_usage(r#"{"a/b": -1}"#).unwrap_err();
        assert!(e.to_string().contains(r#""a/b" has -1"#), "{e}");
        assert!(parse_usage("{").is_err());
    }

    #[test]
    fn rendering_is_sorted_and_round_trips() {
        let counts: UsageCounts = [("z/a".to_owned(), 2), ("a/\"q\"".to_owned(), 9)].into();
        let text = render_usage(&counts);
        assert_eq!(text, "{\n  \"a/\\\"q\\\"\": 9,\n  \"z/a\": 2\n}\n");
        assert_eq!(parse_usage(&text), Ok(counts));
        assert_eq!(render_usage(&UsageCounts::new()), "{}\n");
    }
}
