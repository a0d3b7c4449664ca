//! `[sanitize]`: what the gateway removes from and flags in upstream text (see
//! [`crate::sanitize`]), overridable per upstream.
//!
//! ```toml
//! [sanitize]
//! strip = true              # remove invisible and control text (default true)
//! steering = "flag"         # "flag" | "quarantine" | "off" (default "flag")
//! allow = ["calc/add"]      # tools let through whatever their steering score
//! arguments = "strict"      # "pass" | "strict": calls checked against the input schema
//!
//! [[upstream]]
//! name = "calc"
//! command = "calc-server"
//! sanitize = { steering = "quarantine" }   # keys not given come from [sanitize]
//! ```

use serde::Deserialize;

use super::problems::{At, Section};

pub use crate::sanitize::arguments::Arguments;
pub use crate::sanitize::{Rules, Steering};

/// `[sanitize]` (and an upstream's `sanitize = { .. }`) as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawSanitize {
    /// Remove invisible and control text from what reaches the model. Default: true.
    pub strip: Option<bool>,
    /// What a definition whose steering score reaches the threshold gets: `"flag"` (reported),
    /// `"quarantine"` (held back until allowed) or `"off"` (not scored). Default: `"flag"`.
    pub steering: Option<String>,
    /// Tools (`server/tool`) let through whatever their steering score. Default: none.
    #[serde(default)]
    pub allow: Vec<String>,
    /// What a call's arguments get: `"pass"` (forwarded as sent) or `"strict"` (checked against
    /// the tool's pinned input schema; a property it does not declare, a wrong type or a missing
    /// required one is refused with `-32602` `mcp_budget.arguments.invalid`, never forwarded;
    /// a tool whose schema cannot be checked, not even as draft 2020-12, 7 or 4, has its calls
    /// refused with `-32000` `mcp_budget.arguments.uncheckable`; a `prompts/get` must give
    /// only the prompt's declared arguments, as strings, the required ones included; what is
    /// forwarded is what was checked, re-serialised, without params members the protocol does
    /// not define). Default: `"pass"`.
    pub arguments: Option<String>,
}

/// `[sanitize]` validated: the rules of each upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SanitizePolicy {
    /// The `[sanitize]` section (upstream-agnostic; `allow` as `server/tool` ids).
    pub global: Rules,
    /// Per upstream id, its overriding rules (already merged with `global`).
    pub upstreams: std::collections::BTreeMap<String, Rules>,
}

impl SanitizePolicy {
    /// The rules for upstream `server`, with `allow` reduced to its own tool names.
    #[must_use]
    pub fn rules_for(&self, server: &str) -> Rules {
        let rules = self.upstreams.get(server).unwrap_or(&self.global);
        let prefix = format!("{server}/");
        Rules {
            allow: rules
                .allow
                .iter()
                .filter_map(|id| id.strip_prefix(&prefix).map(str::to_owned))
                .collect(),
            ..rules.clone()
        }
    }
}

impl Section for RawSanitize {
    type Valid = Rules;
    /// What is not written is taken from here (`[sanitize]` for an upstream's own table).
    type Context<'c> = &'c Rules;

    fn validate(self, base: &Rules, mut at: At<'_>) -> Rules {
        let steering = at.one_of(
            "steering",
            self.steering.as_deref(),
            base.steering,
            &[
                ("flag", Steering::Flag),
                ("quarantine", Steering::Quarantine),
                ("off", Steering::Off),
            ],
        );
        for id in &self.allow {
            if !id.contains('/') {
                at.push_at(
                    "allow",
                    format!("{id:?} is not a tool id such as \"server/tool\""),
                );
            }
        }
        let arguments = at.one_of(
            "arguments",
            self.arguments.as_deref(),
            base.arguments,
            &[("pass", Arguments::Pass), ("strict", Arguments::Strict)],
        );
        let mut allow = base.allow.clone();
        allow.extend(self.allow);
        Rules {
            strip: self.strip.unwrap_or(base.strip),
            steering,
            allow,
            arguments,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::problems::Problems;

    #[test]
    fn upstream_overrides_merge_and_allow_is_per_server() {
        let mut problems = Problems::new();
        let global = RawSanitize {
            allow: vec!["calc/add".into(), "fs/read".into()],
            ..RawSanitize::default()
        }
        .validate(&Rules::default(), problems.root().at("sanitize"));
        let calc = RawSanitize {
            steering: Some("quarantine".into()),
            ..RawSanitize::default()
        }
        .validate(
            &global,
            problems.root().at("upstream").index(0).at("sanitize"),
        );
        assert!(problems.is_empty());
        let policy = SanitizePolicy {
            upstreams: [("calc".to_owned(), calc)].into(),
            global,
        };
        let rules = policy.rules_for("calc");
        assert_eq!(
            (rules.steering, rules.allow),
            (Steering::Quarantine, vec!["add".to_owned()])
        );
        assert_eq!(policy.rules_for("fs").allow, ["read"]);
        // `arguments` is inherited and overridden like the other keys.
        let strict = RawSanitize {
            arguments: Some("strict".into()),
            ..RawSanitize::default()
        }
        .validate(&Rules::default(), problems.root().at("sanitize"));
        let inherited = RawSanitize::default().validate(&strict, problems.root().at("u"));
        assert_eq!(inherited.arguments, Arguments::Strict);
        assert!(problems.is_empty());
        RawSanitize {
            steering: Some("block".into()),
            allow: vec!["add".into()],
            arguments: Some("nonsense".into()),
            ..RawSanitize::default()
        }
        .validate(&Rules::default(), problems.root().at("sanitize"));
        assert_eq!(problems.pairs().len(), 3);
    }
}
