//! Who may do what: a client's scope (allow and deny globs over `server/tool`, argument rules)
//! and the two questions every layer asks of it — may this client *see* it (lists, search,
//! schemas) and may it *call* it with these arguments. Both answers come from one function,
//! so a tool is listed to a client exactly when a call of it can be allowed.
//!
//! Names are matched in their canonical form: the upstream's server id and the upstream's own
//! tool name, as the catalog routes them — never the spelling a client sent, which must first
//! resolve to a catalog entry (an unknown spelling is an unknown tool, not a bypass).
//!
//! Globs name tools by default (`github/get_*`); prompts and resources take a kind prefix:
//! `prompt:github/*`, `resource:files/file:///docs/*` (resources by their URI).
//!
//! ```
//! use mcp_budget::authz::{Decision, Glob, Kind, Scope, Target};
//!
//! let scope = Scope::new(
//!     vec![Glob::new("github/get_*"), Glob::new("time/*")],
//!     vec![Glob::new("github/get_secret")],
//!     vec![],
//! );
//! assert!(scope.may_see(Target::tool("github", "get_issue")));
//! assert!(!scope.may_see(Target::tool("github", "get_secret")));
//! let denied = scope.check(Target::tool("github", "delete_repo"), None);
//! assert!(matches!(denied, Decision::Deny { .. }));
//! assert!(!scope.may_see(Target::new(Kind::Prompt, "time", "now")), "tool globs are not prompt globs");
//! ```

mod args;
mod glob;

pub use args::{ArgRule, Constraint};
pub use glob::Glob;

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::catalog::CatalogTool;

/// What a name names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A tool (globs without a prefix).
    Tool,
    /// A prompt (`prompt:` globs).
    Prompt,
    /// A resource or resource template, by URI (`resource:` globs).
    Resource,
}

impl Kind {
    /// The glob prefix of this kind (`""` for tools).
    #[must_use]
    pub const fn prefix(self) -> &'static str {
        match self {
            Self::Tool => "",
            Self::Prompt => "prompt:",
            Self::Resource => "resource:",
        }
    }
}

/// One thing a client may see or call, in canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target<'a> {
    /// Tool, prompt or resource.
    pub kind: Kind,
    /// Server id (the upstream's name in the policy).
    pub server: &'a str,
    /// The upstream's own name (a resource's URI).
    pub name: &'a str,
}

impl<'a> Target<'a> {
    /// A target of any kind.
    #[must_use]
    pub const fn new(kind: Kind, server: &'a str, name: &'a str) -> Self {
        Self { kind, server, name }
    }

    /// A tool.
    #[must_use]
    pub const fn tool(server: &'a str, name: &'a str) -> Self {
        Self::new(Kind::Tool, server, name)
    }

    /// The string globs match: `[prefix]server/name`.
    #[must_use]
    pub fn key(&self) -> String {
        self.with_key(str::to_owned)
    }

    /// `f` of [`Target::key`], the key written on the stack when it fits in 256 bytes (checks
    /// run on every call and for every listed item: no allocation for the usual names).
    pub fn with_key<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        let parts = [self.kind.prefix(), self.server, "/", self.name];
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut stack = [0; 256];
        let Some(buf) = stack.get_mut(..len) else {
            return f(&parts.concat());
        };
        let mut at = 0;
        for part in parts {
            buf[at..at + part.len()].copy_from_slice(part.as_bytes());
            at += part.len();
        }
        // Whole `str`s one after the other: UTF-8.
        f(std::str::from_utf8(buf).unwrap_or_default())
    }
}

/// The outcome of a call-phase check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// Refused; nothing goes upstream.
    Deny {
        /// Why, as a sentence (`argument owner='evil' not in [acme]`).
        reason: String,
        /// Which part of the scope decided: `deny "github/delete_*"`, `not in allow`,
        /// `rule 2`.
        rule: String,
    },
}

/// A client's rights.
#[derive(Debug, Clone)]
pub struct Scope {
    allow: Vec<Glob>,
    deny: Vec<Glob>,
    rules: Vec<ArgRule>,
    /// [`Scope::key`], computed once.
    key: Arc<str>,
    /// Every glob (allow, deny, the rules') answers on a name's parts
    /// ([`Glob::matches_parts`]): an allowed call or item is decided without writing its key.
    by_parts: bool,
}

impl Scope {
    /// A scope from its parts. Deny wins over allow; argument rules apply to allowed calls.
    #[doc(hidden)]
    #[must_use]
    pub fn new(allow: Vec<Glob>, deny: Vec<Glob>, rules: Vec<ArgRule>) -> Self {
        let key = visibility_key(&allow, &deny).into();
        let by_parts = allow
            .iter()
            .chain(&deny)
            .chain(rules.iter().flat_map(|r| &r.tools))
            .all(Glob::matches_by_parts);
        Self {
            allow,
            deny,
            rules,
            key,
            by_parts,
        }
    }

    /// Whether `target` is allowed with no argument rule to check, decided on its parts
    /// without writing its key; `false` when that cannot be told so (then the full check
    /// decides, and writes the reasons).
    fn plainly_allowed(&self, target: Target<'_>) -> bool {
        if !self.by_parts {
            return false;
        }
        let parts = [target.kind.prefix(), target.server, "/", target.name];
        let matching = |g: &Glob| g.matches_parts(&parts) == Some(true);
        !self.deny.iter().any(matching)
            && self.allow.iter().any(matching)
            && !self.rules.iter().any(|r| r.tools.iter().any(matching))
    }

    /// What decides the list phase, as one string: equal keys, equal visibility (argument
    /// rules hide nothing, so they are not in it). Derived views of what a client may see (its
    /// plan, its search index) are cached by it, so clients of equal rights share them.
    ///
    /// ```
    /// use mcp_budget::authz::{Glob, Scope};
    ///
    /// let a = Scope::new(vec![Glob::new("a/*"), Glob::new("b/*")], vec![], vec![]);
    /// let b = Scope::new(vec![Glob::new("b/*"), Glob::new("a/*"), Glob::new("a/*")], vec![], vec![]);
    /// assert_eq!(a.key(), b.key(), "order and repeats do not count");
    /// assert_ne!(a.key(), Scope::everything().key());
    /// ```
    #[must_use]
    pub fn key(&self) -> &Arc<str> {
        &self.key
    }

    /// Everything allowed: the one anonymous principal of a policy with no clients.
    #[must_use]
    pub fn everything() -> Self {
        Self::new(
            [Kind::Tool, Kind::Prompt, Kind::Resource]
                .iter()
                .map(|k| Glob::new(format!("{}*", k.prefix())))
                .collect(),
            Vec::new(),
            Vec::new(),
        )
    }

    /// List phase: whether the client may see `target` (in lists, search results, catalog
    /// lines, schemas). Argument rules do not hide a tool: some arguments may be allowed.
    #[doc(hidden)]
    #[must_use]
    pub fn may_see(&self, target: Target<'_>) -> bool {
        if self.plainly_allowed(target) {
            return true;
        }
        target.with_key(|key| self.visibility(key).is_ok())
    }

    /// Call phase: whether the client may call `target` with `arguments` (the call's
    /// `arguments` object, `None` when it has none).
    #[doc(hidden)]
    #[must_use]
    pub fn check(&self, target: Target<'_>, arguments: Option<&Map<String, Value>>) -> Decision {
        self.check_with(target, || arguments)
    }

    /// [`Scope::check`] with the arguments given on demand: `arguments` is called only when
    /// an argument rule applies to `target` (most calls need no parse of their arguments).
    #[must_use]
    pub(crate) fn check_with<'a>(
        &self,
        target: Target<'_>,
        arguments: impl FnOnce() -> Option<&'a Map<String, Value>>,
    ) -> Decision {
        if self.plainly_allowed(target) {
            return Decision::Allow;
        }
        let applying = target.with_key(|key| {
            self.visibility(key)?;
            Ok(self
                .rules
                .iter()
                .enumerate()
                .filter(|(_, rule)| rule.applies_to(key))
                .collect::<Vec<_>>())
        });
        let applying = match applying {
            Ok(applying) if !applying.is_empty() => applying,
            Ok(_) => return Decision::Allow,
            Err(deny) => return deny,
        };
        let arguments = arguments();
        for (i, rule) in applying {
            if let Some(reason) = rule.violation(arguments) {
                return Decision::Deny {
                    reason,
                    rule: format!("rule {}", i + 1),
                };
            }
        }
        Decision::Allow
    }

    /// List phase over tools: the tools of `tools` this client may see, in their order, with
    /// their exposed names as they are (a tool has the same name for every client).
    #[must_use]
    pub fn visible(&self, tools: &[CatalogTool]) -> Vec<CatalogTool> {
        tools
            .iter()
            .filter(|t| self.may_see(Target::tool(&t.server, &t.name)))
            .cloned()
            .collect()
    }

    fn visibility(&self, key: &str) -> Result<(), Decision> {
        if let Some(glob) = self.deny.iter().find(|g| g.matches(key)) {
            return Err(Decision::Deny {
                reason: format!("{key} is denied to this client"),
                rule: format!("deny {:?}", glob.as_str()),
            });
        }
        if self.allow.iter().any(|g| g.matches(key)) {
            Ok(())
        } else {
            Err(Decision::Deny {
                reason: format!("{key} is not in this client's allow list"),
                rule: "not in allow".to_owned(),
            })
        }
    }
}

/// The allow and deny globs, each set sorted and without repeats, as JSON (so that no glob
/// text can make two different scopes' keys equal).
fn visibility_key(allow: &[Glob], deny: &[Glob]) -> String {
    let sorted = |globs: &[Glob]| {
        let mut texts: Vec<&str> = globs.iter().map(Glob::as_str).collect();
        texts.sort_unstable();
        texts.dedup();
        Value::from(texts)
    };
    Value::Array(vec![sorted(allow), sorted(deny)]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn deny_wins_and_the_reason_names_the_rule() {
        let scope = Scope::new(
            vec![Glob::new("github/*")],
            vec![Glob::new("github/delete_*")],
            vec![],
        );
        assert_eq!(
            scope.check(Target::tool("github", "delete_repo"), None),
            Decision::Deny {
                reason: "github/delete_repo is denied to this client".into(),
                rule: "deny \"github/delete_*\"".into(),
            }
        );
        assert_eq!(
            scope.check(Target::tool("github", "get_me"), None),
            Decision::Allow
        );
    }

    #[test]
    fn argument_rules_refuse_calls_but_do_not_hide_tools() {
        let rule = ArgRule {
            tools: vec![Glob::new("github/*")],
            args: [(
                "owner".to_owned(),
                Constraint {
                    one_of: Some(vec![json!("acme")]),
                    ..Constraint::default()
                },
            )]
            .into(),
        };
        let scope = Scope::new(vec![Glob::new("*")], vec![], vec![rule]);
        let t = Target::tool("github", "list_issues");
        assert!(scope.may_see(t));
        let evil = json!({"owner": "evil"});
        assert_eq!(
            scope.check(t, evil.as_object()),
            Decision::Deny {
                reason: "argument owner='evil' not in [acme]".into(),
                rule: "rule 1".into()
            }
        );
        let acme = json!({"owner": "acme"});
        assert_eq!(scope.check(t, acme.as_object()), Decision::Allow);
        assert_eq!(
            scope.check(Target::tool("time", "now"), None),
            Decision::Allow
        );
    }

    #[test]
    fn arguments_are_asked_for_only_when_a_rule_applies() {
        let rule = ArgRule {
            tools: vec![Glob::new("github/*")],
            args: [("owner".to_owned(), Constraint::default())].into(),
        };
        let scope = Scope::new(vec![Glob::new("*")], vec![Glob::new("git/*")], vec![rule]);
        let asked = std::cell::Cell::new(0);
        let acme = json!({"owner": "acme"});
        let arguments = || {
            asked.set(asked.get() + 1);
            acme.as_object()
        };
        let time = Target::tool("time", "now");
        assert_eq!(scope.check_with(time, arguments), Decision::Allow);
        let git = Target::tool("git", "log");
        assert!(matches!(
            scope.check_with(git, arguments),
            Decision::Deny { .. }
        ));
        assert_eq!(asked.get(), 0, "no rule applies: no arguments needed");
        let github = Target::tool("github", "list_issues");
        assert_eq!(scope.check_with(github, arguments), Decision::Allow);
        assert_eq!(asked.get(), 1);
    }

    #[test]
    fn kinds_do_not_leak_into_each_other() {
        let scope = Scope::new(vec![Glob::new("prompt:github/*")], vec![], vec![]);
        assert!(scope.may_see(Target::new(Kind::Prompt, "github", "triage")));
        assert!(!scope.may_see(Target::tool("github", "triage")));
        assert!(!scope.may_see(Target::new(Kind::Resource, "github", "triage")));
        let all = Scope::everything();
        for kind in [Kind::Tool, Kind::Prompt, Kind::Resource] {
            assert!(all.may_see(Target::new(kind, "s", "n")));
        }
    }

    fn glob() -> impl Strategy<Value = Glob> {
        prop_oneof![
            Just(Glob::new("*")),
            "[ab]/[xy]".prop_map(Glob::new),
            "[ab]/\\*".prop_map(Glob::new),
            "\\*/[xy]".prop_map(Glob::new),
            "prompt:[ab]/\\*".prop_map(Glob::new),
        ]
    }

    proptest! {
        /// Listed ⇔ callable (arguments aside): the list phase and the call phase agree.
        #[test]
        fn seen_exactly_when_callable(
            allow in proptest::collection::vec(glob(), 0..4),
            deny in proptest::collection::vec(glob(), 0..3),
            server in "[ab]",
            name in "[xy]",
            prompt in any::<bool>(),
        ) {
            let scope = Scope::new(allow, deny, vec![]);
            let kind = if prompt { Kind::Prompt } else { Kind::Tool };
            let t = Target::new(kind, &server, &name);
            prop_assert_eq!(scope.may_see(t), scope.check(t, None) == Decision::Allow);
        }

        /// A catalog filtered by the list phase keeps exactly the callable tools, in order,
        /// under their names; equal keys, equal filters.
        #[test]
        fn visible_tools_are_the_callable_ones(
            allow in proptest::collection::vec(glob(), 0..4),
            deny in proptest::collection::vec(glob(), 0..3),
            ids in proptest::collection::btree_set(("[ab]", "[xy]"), 0..4),
        ) {
            let tools: Vec<CatalogTool> = ids
                .iter()
                .map(|(s, n)| CatalogTool::new(s, json!({"name": n})).unwrap())
                .collect();
            let mut reversed = allow.clone();
            reversed.reverse();
            let scope = Scope::new(allow, deny.clone(), vec![]);
            let visible = scope.visible(&tools);
            let callable: Vec<&CatalogTool> = tools
                .iter()
                .filter(|t| scope.check(Target::tool(&t.server, &t.name), None) == Decision::Allow)
                .collect();
            prop_assert_eq!(visible.iter().collect::<Vec<_>>(), callable);
            let same = Scope::new(reversed, deny, vec![]);
            prop_assert_eq!(same.key(), scope.key());
            prop_assert_eq!(same.visible(&tools), visible);
        }
    }
}
