//! One way to report a validation problem: a [`Problems`] collector, typed field paths
//! ([`At`]), and a helper per kind of value (linkerd's `parse(strings, KEY, parser)` idiom).
//!
//! A section validates itself at the path it is given (`at.at("max_sessions")`,
//! `at.at("upstream").index(2)`); a problem is pushed where it is found and the section goes on
//! with a default, so one run reports every problem. Lines are found at the end, once, by
//! walking the parsed file along each problem's path (the nearest enclosing entry when the key
//! itself is not written), else the line of the enclosing [`Spanned`](serde_spanned::Spanned)
//! value the path was scoped from.

use std::fmt::Write as _;
use std::num::NonZeroUsize;
use std::path::Path;
use std::time::Duration;

use super::Problem;
use super::lines::{self, Step};

/// Every problem found so far, in the order found.
#[derive(Debug, Default)]
pub(crate) struct Problems {
    found: Vec<Found>,
}

#[derive(Debug)]
struct Found {
    path: Vec<Seg>,
    line: Option<usize>,
    message: String,
}

/// One step of a field path as a problem shows it.
#[derive(Debug, Clone)]
enum Seg {
    /// A key, shown as written (`downstream`, `limits.client.alice`).
    Key(String),
    /// A key always shown quoted (`budget.tools."github/*"`).
    Quoted(String),
    /// An array entry.
    Index(usize),
}

impl Problems {
    /// No problems yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The top of the file: `root().at("version")`.
    pub(crate) fn root(&mut self) -> At<'_> {
        At {
            problems: self,
            path: Vec::new(),
            line: None,
        }
    }

    /// Whether nothing was found.
    pub(crate) fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// Moves `other`'s problems after these.
    pub(crate) fn append(&mut self, other: Self) {
        self.found.extend(other.found);
    }

    /// The problems, each with its line in `text` (the policy file they were found in).
    pub(crate) fn into_problems(self, text: &str) -> Vec<Problem> {
        let doc = toml::de::DeTable::parse(text).ok();
        self.found
            .into_iter()
            .map(|found| {
                let steps: Vec<Step> = found.path.iter().map(Seg::step).collect();
                let line = doc
                    .as_ref()
                    .and_then(|doc| lines::line_in(text, doc, &steps));
                Problem {
                    path: display(&found.path),
                    line: line.or(found.line),
                    message: found.message,
                }
            })
            .collect()
    }

    /// `(path, message)` pairs, for tests that look at a section alone.
    #[cfg(test)]
    pub(crate) fn pairs(&self) -> Vec<(String, String)> {
        (self.found.iter())
            .map(|f| (display(&f.path), f.message.clone()))
            .collect()
    }
}

impl Seg {
    fn step(&self) -> Step {
        match self {
            Self::Key(k) | Self::Quoted(k) => Step::Key(k.clone()),
            Self::Index(i) => Step::Index(*i),
        }
    }
}

/// A field path as problems show it: `a.b[0]."x/y"`.
fn display(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
            Seg::Key(k) | Seg::Quoted(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                if matches!(seg, Seg::Quoted(_)) {
                    let _ = write!(out, "{k:?}");
                } else {
                    out.push_str(k);
                }
            }
        }
    }
    out
}

/// Where in the policy a section is being validated; problems pushed here carry this path.
#[derive(Debug)]
pub(crate) struct At<'p> {
    problems: &'p mut Problems,
    path: Vec<Seg>,
    line: Option<usize>,
}

impl At<'_> {
    fn child(&mut self, seg: Seg) -> At<'_> {
        let mut path = self.path.clone();
        path.push(seg);
        At {
            problems: self.problems,
            path,
            line: self.line,
        }
    }

    /// This same path, borrowed again (to hand a section its `At` and keep this one).
    pub(crate) fn reborrow(&mut self) -> At<'_> {
        At {
            problems: self.problems,
            path: self.path.clone(),
            line: self.line,
        }
    }

    /// The key `key` under this path.
    pub(crate) fn at(&mut self, key: &str) -> At<'_> {
        self.child(Seg::Key(key.to_owned()))
    }

    /// The key `key` under this path, always shown quoted (a glob such as `"github/*"`).
    pub(crate) fn quoted(&mut self, key: &str) -> At<'_> {
        self.child(Seg::Quoted(key.to_owned()))
    }

    /// Entry `i` of the array at this path.
    pub(crate) fn index(&mut self, i: usize) -> At<'_> {
        self.child(Seg::Index(i))
    }

    /// The line problems here fall back to when their key is not in the file (a
    /// `Spanned` value's line).
    #[must_use]
    pub(crate) fn on_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    /// Reports a problem at this path.
    pub(crate) fn push(&mut self, message: impl Into<String>) {
        self.problems.found.push(Found {
            path: self.path.clone(),
            line: self.line,
            message: message.into(),
        });
    }

    /// Reports a problem at `key` under this path.
    pub(crate) fn push_at(&mut self, key: &str, message: impl Into<String>) {
        self.at(key).push(message);
    }

    /// `key`'s value, checked by `parser`: the parsed value, or `None` with the parser's
    /// message pushed at `key` (linkerd's `parse(strings, KEY, parser)`).
    pub(crate) fn parse<T, U, E: std::fmt::Display>(
        &mut self,
        key: &str,
        value: Option<T>,
        parser: impl FnOnce(T) -> Result<U, E>,
    ) -> Option<U> {
        match parser(value?) {
            Ok(v) => Some(v),
            Err(e) => {
                self.push_at(key, e.to_string());
                None
            }
        }
    }

    /// A count that must be greater than 0 (`default` when not given or 0).
    pub(crate) fn positive(
        &mut self,
        key: &str,
        value: Option<usize>,
        default: NonZeroUsize,
    ) -> NonZeroUsize {
        self.parse(key, value, |n| {
            NonZeroUsize::new(n).ok_or("must be greater than 0")
        })
        .unwrap_or(default)
    }

    /// Whole seconds, greater than 0 and at most [`MAX_SECS`] (`default` when not given, 0 or
    /// too long).
    pub(crate) fn secs(&mut self, key: &str, value: Option<u64>, default: Duration) -> Duration {
        self.parse(key, value, |secs| match secs {
            0 => Err("must be greater than 0".to_owned()),
            secs => at_most_a_year(secs, MAX_SECS).map(Duration::from_secs),
        })
        .unwrap_or(default)
    }

    /// A duration `value` in the unit whose year is `max` ([`MAX_SECS`], [`MAX_MS`]): itself
    /// when at most `max`, else `None` with a problem at `key`; for the duration keys with
    /// their own lower bound, so that none reaches a timer (where a huge one panics).
    pub(crate) fn bounded(&mut self, key: &str, value: Option<u64>, max: u64) -> Option<u64> {
        self.parse(key, value, |n| at_most_a_year(n, max))
    }

    /// One of `choices` (`None` for `default`), by its name; `default` with a problem when
    /// the value is none of them.
    pub(crate) fn one_of<T: Copy>(
        &mut self,
        key: &str,
        value: Option<&str>,
        default: T,
        choices: &[(&str, T)],
    ) -> T {
        let names = || {
            let quoted: Vec<String> = choices.iter().map(|(n, _)| format!("{n:?}")).collect();
            quoted.join(", ")
        };
        self.parse(key, value, |v| {
            (choices.iter().find(|(name, _)| *name == v))
                .map(|&(_, t)| t)
                .ok_or_else(|| format!("{v:?} is not one of {}", names()))
        })
        .unwrap_or(default)
    }

    /// A file that `check` can read, by `reader` (which names the file in its message).
    pub(crate) fn file_exists<T>(
        &mut self,
        key: &str,
        path: Option<&Path>,
        reader: impl FnOnce(&Path) -> Result<T, String>,
    ) -> Option<T> {
        self.parse(key, path, reader)
    }
}

/// The longest duration a `*_secs` key takes: a year. Longer ones mean "never" in practice,
/// and a deadline of `now + u64::MAX` seconds overflows the clock.
pub(crate) const MAX_SECS: u64 = 365 * 86_400;

/// The longest duration a `*_ms` key takes: a year.
pub(crate) const MAX_MS: u64 = MAX_SECS * 1000;

/// `n` when at most `max` (a year in its unit), else the problem.
fn at_most_a_year(n: u64, max: u64) -> Result<u64, String> {
    if n <= max {
        Ok(n)
    } else {
        Err(format!("must be at most {max} (a year)"))
    }
}

/// One section of the policy file: validates itself (consuming what was written) at the path
/// it is given, reporting problems there, and returns the validated value, defaults filled in.
/// Rules that join sections stay in `validate.rs`.
pub(crate) trait Section {
    /// The validated section.
    type Valid;
    /// What the section needs to know of the rest of the policy (`()` for most).
    type Context<'c>;
    /// Validates the section at `at`.
    fn validate(self, cx: Self::Context<'_>, at: At<'_>) -> Self::Valid;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_scoped_and_lines_found() {
        let text =
            "version = 1\n[downstream]\nmax_sessions = 0\n[budget.tools.\"a/*\"]\npin = true\n";
        let mut problems = Problems::new();
        let mut root = problems.root();
        let mut down = root.at("downstream");
        let n = down.positive("max_sessions", Some(0), NonZeroUsize::MIN);
        assert_eq!(n.get(), 1);
        root.at("budget").at("tools").quoted("a/*").push("x");
        root.at("upstream").index(3).on_line(9).push("y");
        let found = problems.into_problems(text);
        let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "line 3: downstream.max_sessions: must be greater than 0",
                "line 4: budget.tools.\"a/*\": x",
                "line 9: upstream[3]: y",
            ]
        );
    }

    #[test]
    fn one_of_names_the_choices() {
        let mut problems = Problems::new();
        let v = problems
            .root()
            .one_of("share", Some("x"), 0, &[("global", 0), ("per_client", 1)]);
        assert_eq!(v, 0);
        assert_eq!(
            problems.pairs(),
            [(
                "share".to_owned(),
                "\"x\" is not one of \"global\", \"per_client\"".to_owned()
            )]
        );
    }
}
