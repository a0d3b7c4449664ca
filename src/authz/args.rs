//! Argument constraints: what a client may pass to the tools a rule names.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use super::Glob;

/// `[[client.rule]]`: constraints on the arguments of the tools its globs match.
#[derive(Debug, Clone)]
pub struct ArgRule {
    /// Which tools (`server/tool` globs).
    pub tools: Vec<Glob>,
    /// Constraint per top-level argument name.
    pub args: BTreeMap<String, Constraint>,
}

/// What one argument may be. Every given part must hold.
///
/// An argument a constraint names but the call leaves out is refused unless `optional`: the
/// upstream's own default could be anything, and a rule that can be dodged by silence is no
/// rule.
#[derive(Debug, Clone, Default)]
pub struct Constraint {
    /// The value must equal one of these (JSON equality; `1` and `1.0` are equal).
    pub one_of: Option<Vec<Value>>,
    /// A string that must match this regular expression as a whole.
    pub pattern: Option<Regex>,
    /// A number no greater than this.
    pub max: Option<f64>,
    /// A number no less than this.
    pub min: Option<f64>,
    /// A string of at most this many characters, or an array of at most this many items.
    pub max_length: Option<usize>,
    /// The argument may be left out.
    pub optional: bool,
}

impl ArgRule {
    /// Whether this rule speaks about `target` (`server/tool`).
    #[must_use]
    pub fn applies_to(&self, target: &str) -> bool {
        self.tools.iter().any(|g| g.matches(target))
    }

    /// The first broken constraint, as a sentence a person can act on.
    ///
    /// `arguments` is the call's `arguments` object (`None` when the call has none).
    #[must_use]
    pub fn violation(&self, arguments: Option<&serde_json::Map<String, Value>>) -> Option<String> {
        self.args
            .iter()
            .find_map(|(name, c)| match arguments.and_then(|a| a.get(name)) {
                None if c.optional => None,
                None => Some(format!("argument {name} is required by the client's rule")),
                Some(value) => c.violation(name, value),
            })
    }
}

impl Constraint {
    /// Why `value` (argument `name`) breaks this constraint, if it does.
    #[must_use]
    pub fn violation(&self, name: &str, value: &Value) -> Option<String> {
        if let Some(allowed) = &self.one_of {
            if !allowed.iter().any(|a| same_value(a, value)) {
                return Some(format!(
                    "argument {name}={} not in {}",
                    show(value),
                    list(allowed)
                ));
            }
        }
        if let Some(re) = &self.pattern {
            match value.as_str() {
                Some(s) if full_match(re, s) => {}
                Some(_) => {
                    return Some(format!(
                        "argument {name}={} does not match /{}/",
                        show(value),
                        re.as_str()
                    ));
                }
                None => return Some(format!("argument {name} must be a string")),
            }
        }
        if self.max.is_some() || self.min.is_some() {
            let Some(n) = value.as_f64() else {
                return Some(format!("argument {name} must be a number"));
            };
            if let Some(max) = self.max.filter(|&m| n > m) {
                return Some(format!("argument {name}={n} is above the maximum {max}"));
            }
            if let Some(min) = self.min.filter(|&m| n < m) {
                return Some(format!("argument {name}={n} is below the minimum {min}"));
            }
        }
        if let Some(max) = self.max_length {
            let len = match value {
                Value::String(s) => s.chars().count(),
                Value::Array(a) => a.len(),
                _ => return Some(format!("argument {name} must be a string or an array")),
            };
            if len > max {
                return Some(format!(
                    "argument {name} is {len} long, more than the maximum length {max}"
                ));
            }
        }
        None
    }
}

fn full_match(re: &Regex, s: &str) -> bool {
    re.find(s)
        .is_some_and(|m| m.start() == 0 && m.end() == s.len())
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// A value as the denial shows it: strings quoted, long ones cut.
fn show(value: &Value) -> String {
    let text = match value {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    };
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}...")
    } else {
        text
    }
}

fn list(values: &[Value]) -> String {
    let items: Vec<String> = values
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(args: &[(&str, Constraint)]) -> ArgRule {
        ArgRule {
            tools: vec![Glob::new("github/*")],
            args: args
                .iter()
                .map(|(k, c)| ((*k).to_owned(), c.clone()))
                .collect(),
        }
    }

    fn check(rule: &ArgRule, args: &Value) -> Option<String> {
        rule.violation(args.as_object())
    }

    #[test]
    fn one_of_names_the_value_and_the_choices() {
        let r = rule(&[(
            "owner",
            Constraint {
                one_of: Some(vec![json!("acme")]),
                ..Constraint::default()
            },
        )]);
        assert_eq!(check(&r, &json!({"owner": "acme"})), None);
        assert_eq!(
            check(&r, &json!({"owner": "evil"})).as_deref(),
            Some("argument owner='evil' not in [acme]")
        );
        assert_eq!(
            check(&r, &json!({})).as_deref(),
            Some("argument owner is required by the client's rule")
        );
        assert!(
            check(&r, &json!({"owner": ["acme"]})).is_some(),
            "an array is not acme"
        );
    }

    #[test]
    fn patterns_match_whole_strings() {
        let r = rule(&[(
            "repo",
            Constraint {
                pattern: Some(Regex::new("acme-[a-z]+").expect("regex")),
                ..Constraint::default()
            },
        )]);
        assert_eq!(check(&r, &json!({"repo": "acme-web"})), None);
        assert!(check(&r, &json!({"repo": "evil/acme-web"})).is_some());
        assert!(check(&r, &json!({"repo": "acme-web/../x"})).is_some());
        assert!(check(&r, &json!({"repo": 7})).is_some());
    }

    #[test]
    fn numbers_and_lengths() {
        let r = rule(&[
            (
                "per_page",
                Constraint {
                    max: Some(50.0),
                    min: Some(1.0),
                    optional: true,
                    ..Constraint::default()
                },
            ),
            (
                "body",
                Constraint {
                    max_length: Some(5),
                    optional: true,
                    ..Constraint::default()
                },
            ),
        ]);
        assert_eq!(check(&r, &json!({})), None, "both optional");
        assert_eq!(check(&r, &json!({"per_page": 50, "body": "héllo"})), None);
        assert!(check(&r, &json!({"per_page": 51})).is_some());
        assert!(check(&r, &json!({"per_page": 0})).is_some());
        assert!(
            check(&r, &json!({"per_page": "10"})).is_some(),
            "a string is not a number"
        );
        assert!(check(&r, &json!({"body": "toolong"})).is_some());
        assert!(check(&r, &json!({"body": [1, 2, 3, 4, 5, 6]})).is_some());
    }

    #[test]
    fn numbers_compare_by_value() {
        let r = rule(&[(
            "n",
            Constraint {
                one_of: Some(vec![json!(1)]),
                ..Constraint::default()
            },
        )]);
        assert_eq!(check(&r, &json!({"n": 1.0})), None);
    }
}
