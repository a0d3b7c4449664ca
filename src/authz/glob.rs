//! `server/tool` globs: `*` matches any run of characters (the `/` included), `?` one
//! character; everything else matches itself, case and all.

/// A compiled glob.
///
/// ```
/// use mcp_budget::authz::Glob;
///
/// let g = Glob::new("github/get_*");
/// assert!(g.matches("github/get_issue"));
/// assert!(!g.matches("github/delete_issue"));
/// assert!(!g.matches("GitHub/get_issue"), "case counts: names are matched canonical");
/// assert!(Glob::new("*").matches("any/thing"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    text: String,
    /// Worked out from `text` once: the usual globs match without the general loop.
    shape: Shape,
}

/// What a glob's text is, for [`Glob::matches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Only `*`s: anything.
    Any,
    /// Text then one `*` at the end (`github/*`): a prefix.
    Prefix,
    /// No wildcard: the name itself.
    Exact,
    /// Anything else.
    General,
}

impl Glob {
    /// A glob from its text.
    #[must_use]
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        let wild = |b: &u8| matches!(b, b'*' | b'?');
        let shape = match text.as_bytes() {
            t if !t.is_empty() && t.iter().all(|&b| b == b'*') => Shape::Any,
            [head @ .., b'*'] if !head.iter().any(wild) => Shape::Prefix,
            t if !t.iter().any(wild) => Shape::Exact,
            _ => Shape::General,
        };
        Self { text, shape }
    }

    /// The glob as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `name` matches, in O(len(glob) × len(name)) at worst (no backtracking blow-up).
    #[must_use]
    pub fn matches(&self, name: &str) -> bool {
        self.matches_parts(&[name])
            .unwrap_or_else(|| matches(self.text.as_bytes(), name.as_bytes()))
    }

    /// Whether the name that `parts` spell one after the other matches, without writing it
    /// out; `None` for a glob of the general shape, which needs the name whole.
    pub(crate) fn matches_parts(&self, parts: &[&str]) -> Option<bool> {
        let text = self.text.as_bytes();
        match self.shape {
            Shape::Any => Some(true),
            Shape::Prefix => Some(starts_with_parts(parts, &text[..text.len() - 1])),
            Shape::Exact => Some(equals_parts(parts, text)),
            Shape::General => None,
        }
    }

    /// Whether [`Glob::matches_parts`] answers for this glob.
    pub(crate) fn matches_by_parts(&self) -> bool {
        self.shape != Shape::General
    }
}

/// Whether `parts` one after the other begin with `prefix`.
fn starts_with_parts(parts: &[&str], mut prefix: &[u8]) -> bool {
    for part in parts {
        let part = part.as_bytes();
        if prefix.len() <= part.len() {
            return part.starts_with(prefix);
        }
        let Some(rest) = prefix.strip_prefix(part) else {
            return false;
        };
        prefix = rest;
    }
    prefix.is_empty()
}

/// Whether `parts` one after the other are `text`.
fn equals_parts(parts: &[&str], mut text: &[u8]) -> bool {
    for part in parts {
        let Some(rest) = text.strip_prefix(part.as_bytes()) else {
            return false;
        };
        text = rest;
    }
    text.is_empty()
}

/// Iterative wildcard match with one backtrack point (the last `*`), which is enough because a
/// later `*` can always absorb what an earlier one would have.
fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_usual_shapes() {
        let cases = [
            ("time/*", "time/now", true),
            ("time/*", "timer/now", false),
            ("*/get_*", "github/get_me", true),
            ("github/get_?", "github/get_x", true),
            ("github/get_?", "github/get_xy", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbY", false),
            ("", "", true),
            ("", "a", false),
            ("**", "", true),
        ];
        for (glob, name, want) in cases {
            assert_eq!(Glob::new(glob).matches(name), want, "{glob} ~ {name}");
        }
    }

    proptest! {
        #[test]
        fn a_name_matches_itself_and_star_matches_all(name in "[a-z_/]{0,20}") {
            prop_assert!(Glob::new(name.clone()).matches(&name));
            prop_assert!(Glob::new("*").matches(&name));
        }

        /// The shortcuts for the usual shapes (`*`, `prefix*`, no wildcard) answer as the
        /// general loop does.
        #[test]
        fn every_shape_matches_as_the_general_loop(glob in "[ab*?/]{0,6}", name in "[ab/]{0,8}") {
            prop_assert_eq!(
                Glob::new(glob.clone()).matches(&name),
                matches(glob.as_bytes(), name.as_bytes()),
                "{} ~ {}", glob, name
            );
        }

        /// Matching the parts of a name is matching the name, for every glob that answers.
        #[test]
        fn parts_match_as_their_name(
            glob in "[ab*/]{0,5}",
            parts in proptest::collection::vec("[ab/]{0,3}", 0..4),
        ) {
            let glob = Glob::new(glob);
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            let whole = parts.concat();
            if let Some(answer) = glob.matches_parts(&parts) {
                prop_assert_eq!(answer, glob.matches(&whole), "{:?} ~ {:?}", glob, parts);
            } else {
                prop_assert!(!glob.matches_by_parts());
            }
        }

        #[test]
        fn a_prefix_glob_is_a_prefix_test(prefix in "[a-z/]{0,6}", name in "[a-z/]{0,10}") {
            prop_assert_eq!(Glob::new(format!("{prefix}*")).matches(&name), name.starts_with(&prefix));
        }
    }
}
