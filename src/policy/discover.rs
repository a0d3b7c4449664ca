//! `[discover]`: progressive discovery (the meta-tools and search).
//!
//! ```toml
//! [discover]
//! search_tool = "search_tools"       # meta-tool names (rename when chaining gateways)
//! schema_tool = "get_tool_schema"
//! invoke_tool = "invoke_tool"
//! never_defer = ["github/create_*", "time__get_current_time"]
//! promote_on_use = false
//! default_limit = 5
//! max_limit = 20
//! native_disclosure = false          # experimental: tools/catalog + tools/describe
//! ```

use serde::Deserialize;

use crate::discover::{MetaToolNames, SearchLimits};
use crate::naming;

/// Largest accepted `max_limit`: more results than this cost more tokens than listing tools.
pub const MAX_SEARCH_LIMIT: usize = 50;

/// `[discover]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawDiscover {
    /// Name of the search meta-tool. Default: `"search_tools"`.
    pub search_tool: Option<String>,
    /// Name of the schema meta-tool. Default: `"get_tool_schema"`.
    pub schema_tool: Option<String>,
    /// Name of the invoke meta-tool. Default: `"invoke_tool"`.
    pub invoke_tool: Option<String>,
    /// Tools never deferred behind search, as patterns over `server/tool` ids or exposed
    /// names; `*` matches any run of characters, `?` one. Default: none.
    #[serde(default)]
    pub never_defer: Vec<String>,
    /// Once a deferred tool is invoked, list it directly for that caller from then on (appended
    /// after the static tools, so cached prefixes survive). Default: false.
    #[serde(default)]
    pub promote_on_use: bool,
    /// Results returned by search when the model gives no `limit`. Default: 5.
    pub default_limit: Option<usize>,
    /// Most results search returns, whatever `limit` the model asks for. Default: 20.
    pub max_limit: Option<usize>,
    /// Experimental: serve the draft SEP "Progressive Tool Disclosure" (`tools/catalog`,
    /// `tools/describe`) to clients that declare `tools.progressiveDisclosure`, instead of
    /// the meta-tools. Needs the budget layer. Default: false.
    #[serde(default)]
    pub native_disclosure: bool,
}

/// `[discover]` validated (defaults: the default meta-tool names and search limits, nothing
/// pinned or promoted).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DiscoverPolicy {
    /// Names of the meta-tools.
    pub names: MetaToolNames,
    /// Tools never deferred.
    pub never_defer: Vec<ToolPattern>,
    /// List a deferred tool directly once it has been invoked.
    pub promote_on_use: bool,
    /// Search results: `default` from `default_limit` (1..=`max`), `max` from `max_limit`
    /// (1..=[`MAX_SEARCH_LIMIT`]).
    pub limits: SearchLimits,
    /// Serve `tools/catalog` and `tools/describe` to clients that declare progressive
    /// disclosure.
    pub native_disclosure: bool,
}

impl DiscoverPolicy {
    /// Whether a tool (by `server/tool` id or exposed name) must always be listed directly.
    #[must_use]
    pub fn never_deferred(&self, id: &str, exposed: &str) -> bool {
        self.never_defer
            .iter()
            .any(|p| p.matches(id) || p.matches(exposed))
    }
}

/// A glob over tool ids or names: `*` matches any run of characters, `?` exactly one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPattern(String);

impl ToolPattern {
    /// Wraps a pattern.
    #[must_use]
    pub fn new(pattern: &str) -> Self {
        Self(pattern.to_owned())
    }

    /// The pattern as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `text` matches the whole pattern.
    #[must_use]
    pub fn matches(&self, text: &str) -> bool {
        let p: Vec<char> = self.0.chars().collect();
        let t: Vec<char> = text.chars().collect();
        // Iterative wildcard match with backtracking to the last `*`: linear in practice.
        let (mut pi, mut ti) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
                pi += 1;
                ti += 1;
            } else if pi < p.len() && p[pi] == '*' {
                star = Some((pi, ti));
                pi += 1;
            } else if let Some((sp, st)) = star {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|&c| c == '*')
    }
}

impl RawDiscover {
    /// Validates the section, pushing problems as `(field path, message)`.
    pub(crate) fn validate(&self, problems: &mut Vec<(String, String)>) -> DiscoverPolicy {
        let defaults = DiscoverPolicy::default();
        let mut name = |field: &str, value: &Option<String>, default: &str| -> String {
            let Some(value) = value else {
                return default.to_owned();
            };
            if !naming::is_valid(value) {
                problems.push((
                    format!("discover.{field}"),
                    format!(
                        "{value:?} is not a valid tool name (1-{} characters of a-z A-Z 0-9 _ -)",
                        naming::MAX_NAME_LEN
                    ),
                ));
            }
            value.clone()
        };
        let names = MetaToolNames {
            search: name("search_tool", &self.search_tool, &defaults.names.search),
            schema: name("schema_tool", &self.schema_tool, &defaults.names.schema),
            invoke: name("invoke_tool", &self.invoke_tool, &defaults.names.invoke),
        };
        if names.search == names.schema
            || names.search == names.invoke
            || names.schema == names.invoke
        {
            problems.push((
                "discover".into(),
                "search_tool, schema_tool and invoke_tool must be three different names".into(),
            ));
        }
        let mut never_defer = Vec::with_capacity(self.never_defer.len());
        for (i, pattern) in self.never_defer.iter().enumerate() {
            if pattern.trim().is_empty() {
                problems.push((
                    format!("discover.never_defer[{i}]"),
                    "empty pattern; write a `server/tool` id, an exposed name, or a glob".into(),
                ));
            } else {
                never_defer.push(ToolPattern::new(pattern.trim()));
            }
        }
        let max_limit = self.max_limit.unwrap_or(defaults.limits.max);
        if !(1..=MAX_SEARCH_LIMIT).contains(&max_limit) {
            problems.push((
                "discover.max_limit".into(),
                format!("must be between 1 and {MAX_SEARCH_LIMIT}, got {max_limit}"),
            ));
        }
        let default_limit = self
            .default_limit
            .unwrap_or(defaults.limits.default.min(max_limit));
        if default_limit == 0 || default_limit > max_limit {
            problems.push((
                "discover.default_limit".into(),
                format!("must be between 1 and max_limit ({max_limit}), got {default_limit}"),
            ));
        }
        DiscoverPolicy {
            names,
            never_defer,
            promote_on_use: self.promote_on_use,
            native_disclosure: self.native_disclosure,
            limits: SearchLimits {
                default: default_limit.clamp(1, MAX_SEARCH_LIMIT),
                max: max_limit.clamp(1, MAX_SEARCH_LIMIT),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(toml_text: &str) -> (DiscoverPolicy, Vec<(String, String)>) {
        let raw: RawDiscover = toml::from_str(toml_text).unwrap();
        let mut problems = Vec::new();
        (raw.validate(&mut problems), problems)
    }

    #[test]
    fn defaults() {
        let (policy, problems) = validate("");
        assert!(problems.is_empty());
        assert_eq!(policy.names, MetaToolNames::default());
        assert_eq!((policy.limits.default, policy.limits.max), (5, 20));
        assert!(!policy.promote_on_use);
        assert!(!policy.native_disclosure);
    }

    #[test]
    fn reads_every_option() {
        let (policy, problems) = validate(
            r#"
            search_tool = "find_tools"
            schema_tool = "tool_schema"
            invoke_tool = "call_tool"
            never_defer = ["github/create_*", "time__get_current_time"]
            promote_on_use = true
            default_limit = 3
            max_limit = 10
            native_disclosure = true
            "#,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(policy.native_disclosure);
        assert_eq!(policy.names.search, "find_tools");
        assert!(policy.promote_on_use);
        assert_eq!((policy.limits.default, policy.limits.max), (3, 10));
        assert!(policy.never_deferred("github/create_issue", "github__create_issue"));
        assert!(policy.never_deferred("time/get_current_time", "time__get_current_time"));
        assert!(!policy.never_deferred("github/list_issues", "github__list_issues"));
    }

    #[test]
    fn reports_every_problem() {
        let (_, problems) = validate(
            r#"
            search_tool = "search tools"
            invoke_tool = "get_tool_schema"
            never_defer = [" "]
            default_limit = 30
            max_limit = 25
            "#,
        );
        let paths: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "discover.search_tool",
                "discover",
                "discover.never_defer[0]",
                "discover.default_limit"
            ]
        );
    }

    #[test]
    fn unknown_keys_are_errors() {
        assert!(toml::from_str::<RawDiscover>("search = \"x\"").is_err());
    }

    #[test]
    fn native_disclosure_needs_the_budget_layer() {
        use crate::policy::{ConfigError, Policy};
        let text = "version = 1\n[budget]\nenabled = false\n[discover]\nnative_disclosure = true\n";
        let Err(ConfigError::Invalid { problems, .. }) = Policy::from_toml_str(text, "t.toml")
        else {
            panic!("expected a problem")
        };
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "discover.native_disclosure");
        assert_eq!(problems[0].line, Some(5), "the line of the key");
        let on = "version = 1\n[discover]\nnative_disclosure = true\n";
        assert!(
            Policy::from_toml_str(on, "t.toml")
                .unwrap()
                .discover
                .native_disclosure
        );
    }

    #[test]
    fn glob_matching() {
        let p = ToolPattern::new("git*/*_issue?");
        assert!(p.matches("github/create_issues"));
        assert!(!p.matches("github/create_issue"));
        assert!(ToolPattern::new("*").matches(""));
        assert!(ToolPattern::new("a*b*c").matches("aXbYbZc"));
        assert!(!ToolPattern::new("a*b*c").matches("aXbYbZ"));
    }
}
