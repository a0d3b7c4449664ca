//! Positions in a policy file's text: field paths (`budget.tools."github/*".min_level`,
//! `upstream[1].env`) as steps and back, and the line of a path or of a byte offset.
//!
//! A leaf: the parser (`parse.rs`) and the problems every section reports (`problems.rs`) both
//! use it, so the reporting tool does not depend on the parser of the whole file.
//! [`line_in`] finds the line of a typed field path, for the problems validation collects;
//! [`line_of`] reads the path from its text first, for the warnings and the seal-key
//! problems, which are built with text paths.

use std::fmt::Write as _;

use serde_spanned::Spanned;
use toml::de::{DeTable, DeValue};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Step {
    /// A key.
    Key(String),
    /// An array entry.
    Index(usize),
}

/// The 1-based line of the value at a field path as [`super::Problem::path`] writes it; for a path
/// that is not in the file (a missing key), the line of the nearest enclosing entry that is;
/// `None` when not even the first step is.
pub(super) fn line_of(text: &str, path: &str) -> Option<usize> {
    let steps = parse_path(path)?;
    let doc = DeTable::parse(text).ok()?;
    line_in(text, &doc, &steps)
}

/// [`line_of`] for a typed path in a parsed document.
pub(super) fn line_in(text: &str, doc: &Spanned<DeTable<'_>>, steps: &[Step]) -> Option<usize> {
    let mut span = None;
    let mut here: Option<&DeValue<'_>> = None;
    let mut table = Some(doc.get_ref());
    for step in steps {
        let found: Option<&Spanned<DeValue<'_>>> = match (step, table, here) {
            (Step::Key(k), Some(t), _) => t.get(k.as_str()),
            (Step::Index(i), _, Some(DeValue::Array(a))) => a.get(*i),
            _ => None,
        };
        let Some(value) = found else {
            break;
        };
        span = Some(value.span());
        here = Some(value.get_ref());
        table = match value.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => None,
        };
    }
    span.map(|span| line_at(text, span.start))
}

/// Line numbers of increasing offsets in one text, counted in one pass: each call to
/// [`Lines::at`] counts only the newlines since the previous offset. An offset before the
/// previous one is counted from the start again.
pub(super) struct Lines<'a> {
    text: &'a [u8],
    offset: usize,
    line: usize,
}

impl<'a> Lines<'a> {
    /// Lines of `text`, starting at its first.
    pub(super) fn new(text: &'a str) -> Self {
        Self {
            text: text.as_bytes(),
            offset: 0,
            line: 1,
        }
    }

    /// The 1-based line of byte `offset`, as [`line_at`] counts it.
    pub(super) fn at(&mut self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        if offset < self.offset {
            (self.offset, self.line) = (0, 1);
        }
        self.line += self.text[self.offset..offset]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.offset = offset;
        self.line
    }
}

/// The 1-based line of byte `offset` of `text`.
pub(super) fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A field path as problems show it: `a.b[0]."x/y"`.
pub(super) fn display(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&path_key(k));
            }
        }
    }
    out
}

/// Whether TOML allows `key` bare (`A-Z a-z 0-9 _ -`, not empty).
pub(crate) fn bare_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// One key of a field path: bare when TOML allows it bare, else quoted (`"x/y"`).
pub(crate) fn path_key(key: &str) -> String {
    if bare_key(key) {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

/// Reads a path written by [`display`] (or by validation, which writes the same form).
fn parse_path(path: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let mut chars = path.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            '.' => {
                chars.next();
            }
            '[' => {
                chars.next();
                let digits: String = chars.by_ref().take_while(|&c| c != ']').collect();
                steps.push(Step::Index(digits.parse().ok()?));
            }
            '"' => {
                chars.next();
                let mut key = String::new();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => key.push(chars.next()?),
                        c => key.push(c),
                    }
                }
                steps.push(Step::Key(key));
            }
            _ => {
                let mut key = String::new();
                while let Some(&c) = chars.peek() {
                    if c == '.' || c == '[' {
                        break;
                    }
                    key.push(c);
                    chars.next();
                }
                steps.push(Step::Key(key));
            }
        }
    }
    Some(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_counts_increasing_offsets_as_line_at_does() {
        let text = "a\nb\n\ncd\ne";
        let mut lines = Lines::new(text);
        for offset in [0, 1, 2, 5, 5, 7, 40] {
            assert_eq!(lines.at(offset), line_at(text, offset), "{offset}");
        }
        assert_eq!(
            lines.at(3),
            line_at(text, 3),
            "an earlier offset counts again"
        );
    }

    #[test]
    fn line_of_follows_keys_quoted_keys_and_indices() {
        let text = "version = 1\n\
                    [budget]\n\
                    model = \"x\"\n\
                    [budget.tools.\"github/*\"]\n\
                    min_level = \"hihg\"\n\
                    [[upstream]]\n\
                    name = \"a\"\n\
                    [[upstream]]\n\
                    name = \"b\"\n\
                    env = { A = \"1\" }\n";
        assert_eq!(line_of(text, "budget.model"), Some(3));
        assert_eq!(
            line_of(text, "budget.tools.\"github/*\".min_level"),
            Some(5)
        );
        assert_eq!(line_of(text, "upstream[1].env"), Some(10));
        assert_eq!(line_of(text, "upstream[1].name"), Some(9));
        // Missing: the nearest enclosing entry, or nothing.
        assert_eq!(line_of(text, "budget.level"), Some(2));
        assert_eq!(line_of(text, "upstream[0].command"), Some(6));
        assert_eq!(line_of(text, "upstream[5]"), Some(6));
        assert_eq!(line_of(text, "discover.search_tool"), None);
    }

    #[test]
    fn paths_round_trip() {
        for path in ["a.b[0].c", "budget.tools.\"x/y\".pin", "upstream[2]"] {
            assert_eq!(display(&parse_path(path).unwrap()), path);
        }
    }
}
