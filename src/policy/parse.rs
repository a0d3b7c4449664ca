//! Reading a policy file's text into [`RawPolicy`], with every problem in one run.
//!
//! `toml` stops at the first unknown key or wrong type, so a user fixing a policy would see
//! one problem per run. Here the file is parsed once into a spanned document; it is then
//! deserialized, and each time that fails the offending entry (named by its field path) is
//! set aside and the rest tried again, so one run reports every problem, each with its line,
//! its field path and, for a mistyped key, the key it was probably meant to be.
//!
//! The text-position tools it shares with the problems of validation (field paths, the line
//! of a path or an offset) are in `lines.rs`, a leaf every section's reporting can use without
//! depending on this parser.
//!
//! ```
//! use mcp_budget::policy::Policy;
//!
//! let err = Policy::from_toml_str("version = 1\n[budget]\nmodle = \"gpt-5\"\nthreshold_percent = \"2\"\n", "p.toml")
//!     .unwrap_err()
//!     .to_string();
//! assert!(err.contains("line 3: budget.modle: unknown key `modle`; did you mean `model`?"), "{err}");
//! assert!(err.contains("line 4: budget.threshold_percent:"), "{err}");
//! ```

use std::collections::BTreeMap;

use serde_spanned::Spanned;
use toml::de::{DeTable, DeValue};

use super::Problem;
use super::lines::{Step, display, line_at};
use super::raw::RawPolicy;

/// The most problems one run reports (the rest are usually consequences).
const MAX_PROBLEMS: usize = 50;

/// Parses and deserializes policy text, reporting every syntax error, unknown key and wrong
/// type found, each with its line.
pub(super) fn raw(text: &str) -> Result<RawPolicy, Vec<Problem>> {
    let (doc, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        return Err(errors
            .iter()
            .take(MAX_PROBLEMS)
            .map(|e| Problem {
                path: "(syntax)".into(),
                line: e.span().map(|s| line_at(text, s.start)),
                message: e.message().trim_end().to_owned(),
            })
            .collect());
    }
    let mut doc = doc;
    let mut problems = Vec::new();
    // Indices set aside so far, per array (by its path in the file), so that later problems
    // name the entries as the file numbers them.
    let mut removed: BTreeMap<Vec<Step>, Vec<usize>> = BTreeMap::new();
    loop {
        let de = toml::de::Deserializer::from(doc.clone());
        let err = match serde_path_to_error::deserialize::<_, RawPolicy>(de) {
            Ok(raw) if problems.is_empty() => return Ok(raw),
            Ok(_) => return Err(in_file_order(problems)),
            Err(err) => err,
        };
        let current = steps(err.path());
        let original = to_original(&current, &removed);
        let message = err.inner().message().trim_end();
        problems.push(Problem {
            path: display(&original),
            line: err.inner().span().map(|s| line_at(text, s.start)),
            message: explain(message),
        });
        if problems.len() >= MAX_PROBLEMS || current.is_empty() || !remove(&mut doc, &current) {
            return Err(in_file_order(problems));
        }
        if let Some(Step::Index(_)) = original.last() {
            let (array, last) = original.split_at(original.len() - 1);
            if let Step::Index(i) = last[0] {
                let list = removed.entry(array.to_vec()).or_default();
                list.push(i);
                list.sort_unstable();
            }
        }
    }
}

/// Problems as a reader meets them, top to bottom (serde visits fields in struct order).
fn in_file_order(mut problems: Vec<Problem>) -> Vec<Problem> {
    problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    problems
}

/// The path of a deserialization error, without the wrapper `Spanned` adds.
fn steps(path: &serde_path_to_error::Path) -> Vec<Step> {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|segment| match segment {
            Segment::Seq { index } => Some(Step::Index(*index)),
            Segment::Map { key } if key.starts_with("$__serde_spanned") => None,
            Segment::Map { key } => Some(Step::Key(key.clone())),
            Segment::Enum { variant } => Some(Step::Key(variant.clone())),
            Segment::Unknown => None,
        })
        .collect()
}

/// Maps indices of the document as it is now (entries set aside) back to the file's.
fn to_original(current: &[Step], removed: &BTreeMap<Vec<Step>, Vec<usize>>) -> Vec<Step> {
    let mut original: Vec<Step> = Vec::with_capacity(current.len());
    for step in current {
        let step = match step {
            Step::Index(i) => {
                let mut index = *i;
                if let Some(gone) = removed.get(&original) {
                    for &g in gone {
                        if g <= index {
                            index += 1;
                        }
                    }
                }
                Step::Index(index)
            }
            key @ Step::Key(_) => key.clone(),
        };
        original.push(step);
    }
    original
}

/// Removes the entry at `steps` from the document; false when it is not there.
fn remove(doc: &mut Spanned<DeTable<'_>>, steps: &[Step]) -> bool {
    let Some((last, parents)) = steps.split_last() else {
        return false;
    };
    let mut value: Option<&mut DeValue<'_>> = None;
    let mut table: Option<&mut DeTable<'_>> = Some(doc.get_mut());
    for step in parents {
        let next = match (step, table, value) {
            (Step::Key(k), Some(t), _) => t.get_mut(k.as_str()),
            (Step::Index(i), _, Some(DeValue::Array(a))) => a.get_mut(*i),
            _ => None,
        };
        let Some(next) = next else {
            return false;
        };
        let inner = next.get_mut();
        (table, value) = match inner {
            DeValue::Table(t) => (Some(t), None),
            other => (None, Some(other)),
        };
    }
    match (last, table, value) {
        (Step::Key(k), Some(t), _) => t.remove(k.as_str()).is_some(),
        (Step::Index(i), _, Some(DeValue::Array(a))) if *i < a.len() => {
            // `DeArray` has no `remove`: rebuild it without the entry.
            let items = std::mem::replace(a, toml::de::DeArray::new());
            *a = items
                .into_iter()
                .enumerate()
                .filter_map(|(j, item)| (j != *i).then_some(item))
                .collect();
            true
        }
        _ => false,
    }
}

/// serde's wording, made to say what to do: unknown keys get the nearest known key.
fn explain(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let Some((unknown, expected)) = rest.split_once('`') else {
            return message.to_owned();
        };
        let known = backticked(expected);
        return match nearest(unknown, &known) {
            Some(best) => format!("unknown key `{unknown}`; did you mean `{best}`?"),
            None if known.is_empty() => format!("unknown key `{unknown}`: this table takes none"),
            None => format!(
                "unknown key `{unknown}`; the keys here are: {}",
                known.join(", ")
            ),
        };
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        if let Some((field, _)) = rest.split_once('`') {
            return format!("missing key `{field}`: it is required here");
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        if let Some((value, expected)) = rest.split_once('`') {
            let known = backticked(expected);
            if let Some(best) = nearest(value, &known) {
                return format!("unknown value `{value}`; did you mean `{best}`?");
            }
        }
    }
    message
        .replace("expected u64", "expected a whole number (0 or more)")
        .replace("expected u32", "expected a whole number (0 or more)")
        .replace("expected usize", "expected a whole number (0 or more)")
        .replace("expected f64", "expected a number")
        .replace("expected a boolean", "expected true or false")
}

/// The words between backticks in serde's "expected one of `a`, `b`".
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The known key a mistyped one was most likely meant to be: a small edit away, or one is a
/// prefix of the other (`threshold` for `threshold_percent`).
fn nearest<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let unknown_lower = unknown.to_ascii_lowercase();
    let allowed = match unknown.chars().count() {
        0..=3 => 1,
        4..=8 => 2,
        _ => 3,
    };
    known
        .iter()
        .filter_map(|&k| {
            let distance = strsim::damerau_levenshtein(&unknown_lower, k);
            let prefix = unknown_lower.len() >= 4
                && (k.starts_with(unknown_lower.as_str()) || unknown_lower.starts_with(k));
            let length = k.len().abs_diff(unknown_lower.len());
            (distance <= allowed || prefix).then_some((distance, length, k))
        })
        .min()
        .map(|(_, _, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<Problem> {
        raw(text).expect_err("the text has problems")
    }

    #[test]
    fn every_unknown_key_and_wrong_type_in_one_run() {
        let text = "version = 1\n\
                    [downstream]\n\
                    max_conections = 3\n\
                    [budget]\n\
                    modle = \"gpt-5\"\n\
                    threshold_percent = \"2\"\n\
                    [[upstream]]\n\
                    name = \"a\"\n\
                    comand = \"x\"\n\
                    [[upstream]]\n\
                    name = \"b\"\n\
                    timeout_secs = \"slow\"\n\
                    [discover]\n\
                    serch_tool = \"find\"\n";
        let found = problems(text);
        let seen: Vec<(String, Option<usize>)> =
            found.iter().map(|p| (p.path.clone(), p.line)).collect();
        assert_eq!(
            seen,
            [
                ("downstream.max_conections".to_owned(), Some(3)),
                ("budget.modle".to_owned(), Some(5)),
                ("budget.threshold_percent".to_owned(), Some(6)),
                ("upstream[0].comand".to_owned(), Some(9)),
                ("upstream[1].timeout_secs".to_owned(), Some(12)),
                ("discover.serch_tool".to_owned(), Some(14)),
            ],
            "{found:#?}"
        );
        assert!(found[0].message.contains("did you mean `max_connections`?"));
        assert!(found[1].message.contains("did you mean `model`?"));
        assert!(found[3].message.contains("did you mean `command`?"));
        assert!(found[4].message.contains("expected a whole number"));
        assert!(found[5].message.contains("did you mean `search_tool`?"));
    }

    #[test]
    fn a_removed_entry_does_not_shift_the_numbers_of_later_ones() {
        let text = "version = 1\n\
                    [[upstream]]\n\
                    command = \"x\"\n\
                    [[upstream]]\n\
                    name = \"b\"\n\
                    command = \"y\"\n\
                    args = [\"--a\", 3, \"--b\", 4]\n";
        let found = problems(text);
        let paths: Vec<&str> = found.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            ["upstream[0]", "upstream[1].args[1]", "upstream[1].args[3]"],
            "{found:#?}"
        );
        assert!(found[0].message.contains("missing key `name`"));
        assert_eq!(found[1].line, Some(7));
    }

    #[test]
    fn a_key_far_from_every_known_one_lists_them() {
        let found = problems("version = 1\n[aggregate]\ncolour = \"blue\"\n");
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].message,
            "unknown key `colour`; the keys here are: separator, start, idle_stop_secs, manifest_dir, resolve_names"
        );
    }

    #[test]
    fn syntax_errors_have_lines() {
        let found = problems("version = 1\n[budget\nmodel = \"x\"\n");
        assert_eq!(found[0].path, "(syntax)");
        assert_eq!(found[0].line, Some(2));
    }

    #[test]
    fn a_good_file_parses() {
        let raw = raw("version = 1\n[budget]\nmodel = \"gpt-5\"\n").expect("valid");
        assert_eq!(raw.budget.model.as_deref(), Some("gpt-5"));
    }

    #[test]
    fn nearest_prefers_small_edits_and_prefixes() {
        let known = ["model", "threshold_percent", "max_tools"];
        assert_eq!(nearest("modle", &known), Some("model"));
        assert_eq!(nearest("threshold", &known), Some("threshold_percent"));
        assert_eq!(nearest("MAX_TOOLS", &known), Some("max_tools"));
        assert_eq!(nearest("colour", &known), None);
    }
}
