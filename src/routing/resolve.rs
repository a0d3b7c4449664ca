//! Names a small model gets wrong, resolved: a `tools/call` of a name the catalog does not
//! list, matched to the one tool it means by a documented rule (`[aggregate] resolve_names`).
//!
//! The rules, tried in this order; the first that matches anything decides:
//!
//! 1. **`separator`**: the server id, then another separator, then a tool of that server —
//!    `github.get_issue`, `github/get_issue`, `github:get_issue`, `github-get_issue`,
//!    `github_get_issue` for `github__get_issue` (whatever the policy's separator is);
//! 2. **`case`**: an exposed name in another case (`GitHub__Get_Issue`);
//! 3. **`bare`**: a tool's own name without its server (`get_issue`), then in another case.
//!
//! One match is the tool; two or more are ambiguous (all are named, for the caller to pick);
//! none leaves the name unknown. Pure: the catalog alone decides, never the caller (the
//! layer that resolves checks what the caller may see).
//!
//! ```
//! use mcp_budget::catalog::{Catalog, CatalogTool};
//! use mcp_budget::routing::resolve::{resolve, Resolution, Rule};
//! use serde_json::json;
//!
//! let tools = ["get_issue", "list_issues"].map(|n| CatalogTool::new("github", json!({"name": n})));
//! let mut tools: Vec<CatalogTool> = tools.into_iter().collect::<Result<_, _>>()?;
//! tools.push(CatalogTool::new("jira", json!({"name": "get_issue"}))?);
//! let catalog = Catalog::from_tools(tools, "__");
//! assert_eq!(resolve(&catalog, "github/get_issue"),
//!            Resolution::One { exposed: "github__get_issue".into(), rule: Rule::Separator });
//! assert_eq!(resolve(&catalog, "LIST_ISSUES"),
//!            Resolution::One { exposed: "github__list_issues".into(), rule: Rule::Bare });
//! let candidates = vec!["github__get_issue".into(), "jira__get_issue".into()];
//! assert_eq!(resolve(&catalog, "get_issue"), Resolution::Many { candidates, rule: Rule::Bare });
//! assert_eq!(resolve(&catalog, "close_issue"), Resolution::None);
//! # Ok::<(), mcp_budget::catalog::CatalogError>(())
//! ```

use crate::catalog::Catalog;

/// Separators a model writes between a server id and a tool name.
const SEPARATORS: &[&str] = &["__", ".", "/", ":", "-", "_"];

/// The rule that resolved a name (the metric's `rule` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Another separator between the server id and the tool name.
    Separator,
    /// An exposed name in another case.
    Case,
    /// A tool's own name, without its server (in any case).
    Bare,
}

impl Rule {
    /// `separator`, `case` or `bare`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Separator => "separator",
            Self::Case => "case",
            Self::Bare => "bare",
        }
    }
}

/// What a name the catalog does not list resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// One tool: its exposed name, and the rule that found it.
    One {
        /// The exposed name of the tool meant.
        exposed: String,
        /// The rule that matched.
        rule: Rule,
    },
    /// Several tools match the first rule that matches anything.
    Many {
        /// Their exposed names, sorted.
        candidates: Vec<String>,
        /// The rule that matched.
        rule: Rule,
    },
    /// Nothing matches.
    None,
}

/// Whether an (exposed name, own name) pair matches by one rule.
type Matcher<'a> = dyn Fn(&(String, &str)) -> bool + 'a;

/// Resolves `name`, a tool name `catalog` does not list, by the rules of the module doc.
#[must_use]
pub fn resolve(catalog: &Catalog, name: &str) -> Resolution {
    let separator = catalog.separator();
    let exposed: Vec<(String, &str)> = catalog
        .tools()
        .iter()
        .map(|t| (t.exposed_name(separator).into_owned(), t.name.as_str()))
        .collect();
    let by_separator = |(e, own): &(String, &str)| {
        let server = e.strip_suffix(own)?.strip_suffix(separator)?;
        let rest = name.strip_prefix(server)?;
        SEPARATORS
            .iter()
            .any(|s| rest.strip_prefix(s) == Some(*own))
            .then_some(())
    };
    let rules: [(Rule, &Matcher<'_>); 4] = [
        (Rule::Separator, &|t| by_separator(t).is_some()),
        (Rule::Case, &|(e, _)| e.eq_ignore_ascii_case(name)),
        (Rule::Bare, &|(_, own)| *own == name),
        (Rule::Bare, &|(_, own)| own.eq_ignore_ascii_case(name)),
    ];
    for (rule, matches) in rules {
        let mut found: Vec<String> = (exposed.iter())
            .filter(|t| t.0 != name && matches(t))
            .map(|t| t.0.clone())
            .collect();
        found.sort();
        found.dedup();
        match found.len() {
            0 => {}
            1 => {
                let exposed = found.swap_remove(0);
                return Resolution::One { exposed, rule };
            }
            _ => {
                return Resolution::Many {
                    candidates: found,
                    rule,
                };
            }
        }
    }
    Resolution::None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CatalogTool;
    use serde_json::json;

    fn catalog(separator: &str) -> Catalog {
        let tools = [
            ("filesystem", "read_file"),
            ("desktop-commander", "read_file"),
            ("filesystem", "create_directory"),
            ("git", "git_status"),
        ]
        .map(|(s, n)| CatalogTool::new(s, json!({"name": n})).unwrap());
        Catalog::from_tools(tools.into(), separator)
    }

    #[test]
    fn separators_case_and_bare_names_resolve_in_that_order() {
        let c = catalog("__");
        let one = |exposed: &str, rule| Resolution::One {
            exposed: exposed.into(),
            rule,
        };
        for name in [
            "filesystem.create_directory",
            "filesystem/create_directory",
            "filesystem:create_directory",
            "filesystem_create_directory",
        ] {
            assert_eq!(
                resolve(&c, name),
                one("filesystem__create_directory", Rule::Separator),
                "{name}"
            );
        }
        // A server id with a dash: its own dash is not a separator.
        assert_eq!(
            resolve(&c, "desktop-commander/read_file"),
            one("desktop-commander__read_file", Rule::Separator)
        );
        assert_eq!(
            resolve(&c, "Filesystem__Create_Directory"),
            one("filesystem__create_directory", Rule::Case)
        );
        assert_eq!(
            resolve(&c, "create_directory"),
            one("filesystem__create_directory", Rule::Bare)
        );
        assert_eq!(
            resolve(&c, "Git_Status"),
            one("git__git_status", Rule::Bare)
        );
        assert_eq!(
            resolve(&c, "read_file"),
            Resolution::Many {
                candidates: vec![
                    "desktop-commander__read_file".into(),
                    "filesystem__read_file".into()
                ],
                rule: Rule::Bare
            }
        );
        assert_eq!(resolve(&c, "write_file"), Resolution::None);
        // Another policy separator: the default one is a variant then.
        let single = catalog("_");
        assert_eq!(
            resolve(&single, "git__git_status"),
            one("git_git_status", Rule::Separator)
        );
    }
}
