//! Typo-tolerant matching of query words against the words of tool names (`create_isue` finds
//! `create_issue`).
//!
//! Only a query word the index does not know at all is corrected, and only towards the words
//! of tool names. Short words must match exactly; longer ones may be one edit away (two from
//! 8 letters on), counting an insertion, a deletion, a substitution or a swap of neighbours as
//! one edit. The first letter must be right (typing errors rarely hit it, and it keeps the
//! candidates few). The cost is bounded: the name vocabulary is bucketed by first letter and
//! length, each comparison stops as soon as the bound is passed, and the rows of the distance
//! table are allocated once per word.

use std::collections::HashMap;

use super::text::Analyzer;

/// Words shorter than this are never corrected.
const MIN_LEN: usize = 4;
/// From this length on, two edits are allowed.
const TWO_EDITS_FROM: usize = 8;
/// Most corrections kept for one word (all at the smallest distance found).
const MAX_CORRECTIONS: usize = 3;

/// A name word's lower-cased letters and its index term.
type Entry = (Vec<char>, String);

/// Distinct lower-cased words of tool names, by first letter and length, with their terms.
#[derive(Debug, Default)]
pub(crate) struct NameWords {
    buckets: HashMap<(char, usize), Vec<Entry>>,
}

impl NameWords {
    /// Collects `word` (a word of a tool name).
    pub(crate) fn add(&mut self, word: &str, analyzer: &Analyzer) {
        let lower: Vec<char> = word.to_lowercase().chars().collect();
        if lower.len() < MIN_LEN || !lower.iter().all(char::is_ascii_alphabetic) {
            return;
        }
        let Some(term) = analyzer.term(word) else {
            return;
        };
        let bucket = self.buckets.entry((lower[0], lower.len())).or_default();
        if !bucket.iter().any(|(w, _)| *w == lower) {
            bucket.push((lower, term));
        }
    }

    /// Sorts the buckets so corrections come out in a fixed order.
    pub(crate) fn finish(&mut self) {
        for bucket in self.buckets.values_mut() {
            bucket.sort_unstable();
        }
    }

    /// The terms of the name words closest to `word` within its edit bound, best first (ties in
    /// word order); empty for short or non-alphabetic words.
    pub(crate) fn corrections(&self, word: &str) -> Vec<&str> {
        let query: Vec<char> = word.to_lowercase().chars().collect();
        if query.len() < MIN_LEN || !query.iter().all(char::is_ascii_alphabetic) {
            return Vec::new();
        }
        let bound = if query.len() >= TWO_EDITS_FROM { 2 } else { 1 };
        let mut best = bound + 1;
        let mut out: Vec<&str> = Vec::new();
        let mut rows = Rows::default();
        for len in query.len().saturating_sub(bound)..=query.len() + bound {
            let bucket = self.buckets.get(&(query[0], len));
            for (candidate, term) in bucket.into_iter().flatten() {
                let Some(d) = rows.distance_within(&query, candidate, best.min(bound)) else {
                    continue;
                };
                if d < best {
                    best = d;
                    out.clear();
                }
                if d == best && out.len() < MAX_CORRECTIONS && !out.contains(&term.as_str()) {
                    out.push(term);
                }
            }
        }
        out
    }
}

/// The three rows of the distance table, reused from one comparison to the next.
#[derive(Debug, Default)]
struct Rows {
    before: Vec<usize>,
    previous: Vec<usize>,
    current: Vec<usize>,
}

impl Rows {
    /// Optimal-string-alignment distance between `a` and `b` if it is at most `bound`.
    fn distance_within(&mut self, a: &[char], b: &[char], bound: usize) -> Option<usize> {
        if a.len().abs_diff(b.len()) > bound {
            return None;
        }
        let width = b.len() + 1;
        let Self {
            before,
            previous,
            current,
        } = self;
        before.clear();
        before.resize(width, 0);
        previous.clear();
        previous.extend(0..width);
        current.clear();
        current.resize(width, 0);
        for i in 1..=a.len() {
            current[0] = i;
            let mut row_min = current[0];
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut d = (previous[j] + 1)
                    .min(current[j - 1] + 1)
                    .min(previous[j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    d = d.min(before[j - 2] + 1);
                }
                current[j] = d;
                row_min = row_min.min(d);
            }
            if row_min > bound {
                return None;
            }
            std::mem::swap(before, previous);
            std::mem::swap(previous, current);
        }
        let d = previous[b.len()];
        (d <= bound).then_some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::text::Analysis;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn distance_counts_each_kind_of_edit_once() {
        let mut rows = Rows::default();
        let mut d = |a: &str, b: &str| rows.distance_within(&chars(a), &chars(b), 3);
        assert_eq!(d("issue", "issue"), Some(0));
        assert_eq!(d("isue", "issue"), Some(1));
        assert_eq!(d("isseu", "issue"), Some(1));
        assert_eq!(d("isxue", "issue"), Some(1));
        assert_eq!(d("repositry", "repository"), Some(1));
        assert_eq!(d("abc", "xyz"), Some(3));
        assert_eq!(d("abc", "xyz"), Some(3));
        let mut rows = Rows::default();
        assert_eq!(
            rows.distance_within(&chars("abcd"), &chars("wxyz"), 2),
            None
        );
    }

    #[test]
    fn corrects_longer_words_only() {
        let analyzer = Analyzer::new(Analysis::Full);
        let mut names = NameWords::default();
        for word in ["create", "issue", "search", "repositories", "add", "pull"] {
            names.add(word, &analyzer);
        }
        names.finish();
        assert_eq!(names.corrections("isue"), ["issu"]);
        assert_eq!(names.corrections("serch"), ["search"]);
        assert_eq!(names.corrections("repostiories"), ["repositori"]);
        // Short words need an exact match; far words are not corrected.
        assert!(names.corrections("ad").is_empty());
        assert!(names.corrections("pul").is_empty());
        assert!(names.corrections("banana").is_empty());
        // The first letter must be right.
        assert!(names.corrections("xreate").is_empty());
    }
}
