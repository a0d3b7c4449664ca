//! Scoring a ranking against labelled queries: hit@1/5/10 and MRR@10 per query source, and the
//! queries it missed. Pure: the caller ranks (with [`SearchIndex::search`](super::SearchIndex)
//! or anything else) and hands the ranked ids over; `mcp-budget search --queries FILE --report`
//! is the command on top.
//!
//! A labelled query is one JSON object per line: `{"id": "q1", "source": "github", "query":
//! "open a bug", "gold": ["github/create_issue"], "gold_alternatives": {"github/create_issue":
//! ["github/create_pull_request"]}}`, where `gold` holds the `server/tool` ids that answer it
//! (any of them found counts: a query is hit at *k* when one of its gold tools is in the top
//! *k*), and the optional `gold_alternatives` the ids also accepted in the lenient scores.
//! `source` groups the rows (default `"queries"`); `id` defaults to the line number.
//!
//! ```
//! use mcp_budget::search::eval::{Labelled, evaluate};
//!
//! let rows = vec![
//!     Labelled::parse(r#"{"id": "a", "source": "s", "query": "q", "gold": ["x/one"]}"#, 1)?,
//!     Labelled::parse(r#"{"id": "b", "source": "s", "query": "q", "gold": ["x/two"]}"#, 2)?,
//! ];
//! let ranked = vec![
//!     vec!["x/one".to_owned(), "x/two".to_owned()],
//!     vec!["x/one".to_owned(), "x/two".to_owned()],
//! ];
//! let report = evaluate(&rows, &ranked);
//! assert_eq!(report.overall.strict.hit_at(1), 0.5);
//! assert_eq!(report.overall.strict.mrr(), 0.75);
//! assert_eq!(report.misses.len(), 0); // both are in the top 5
//! # Ok::<(), String>(())
//! ```

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

/// Ranks scored: hit@k for each, MRR up to the last.
pub const CUTOFFS: [usize; 3] = [1, 5, 10];

/// The rank a query must reach not to be listed as a miss.
pub const MISS_AT: usize = 5;

/// One labelled query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    /// The row's id (the line number when the row has none).
    pub id: String,
    /// The group it is scored in.
    pub source: String,
    /// What the user asked.
    pub query: String,
    /// The `server/tool` ids that answer it.
    pub gold: Vec<String>,
    /// Per gold id, ids also accepted in the lenient scores.
    pub alternatives: HashMap<String, Vec<String>>,
}

impl Labelled {
    /// Parses one line; `line` (1-based) names it in errors and is the default id.
    ///
    /// # Errors
    /// Not a JSON object, no string `query`, or no `gold` id.
    pub fn parse(text: &str, line: usize) -> Result<Self, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("line {line}: not JSON: {e}"))?;
        let string = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        let query = string("query").ok_or(format!("line {line}: no string \"query\""))?;
        let ids = |v: &Value| -> Vec<String> {
            match v {
                Value::String(s) => vec![s.clone()],
                Value::Array(items) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                _ => Vec::new(),
            }
        };
        let gold = value.get("gold").map(ids).unwrap_or_default();
        if gold.is_empty() {
            return Err(format!(
                "line {line}: no \"gold\": list the server/tool ids that answer the query"
            ));
        }
        let alternatives = value
            .get("gold_alternatives")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), ids(v))).collect())
            .unwrap_or_default();
        let id = match value.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(v @ Value::Number(_)) => v.to_string(),
            _ => line.to_string(),
        };
        Ok(Self {
            id,
            source: string("source").unwrap_or_else(|| "queries".to_owned()),
            query,
            gold,
            alternatives,
        })
    }

    /// The best 1-based rank in `ranked` of a gold id (or, `lenient`, of one of its
    /// alternatives), within the first [`CUTOFFS`]`.last()` results.
    #[must_use]
    pub fn best_rank(&self, ranked: &[String], lenient: bool) -> Option<usize> {
        let top = &ranked[..ranked.len().min(CUTOFFS[CUTOFFS.len() - 1])];
        top.iter()
            .position(|id| self.accepts(id, lenient))
            .map(|i| i + 1)
    }

    /// Whether `id` answers the query: one of its gold ids, or (`lenient`) one of their
    /// alternatives.
    #[must_use]
    pub fn accepts(&self, id: &str, lenient: bool) -> bool {
        self.gold.iter().any(|g| g == id)
            || (lenient && self.alternatives.values().flatten().any(|a| a == id))
    }
}

/// Sums over a set of queries.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scores {
    /// Queries counted.
    pub n: usize,
    hits: [usize; CUTOFFS.len()],
    reciprocal: f64,
}

impl Scores {
    fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if let Some(rank) = rank {
            for (hit, cutoff) in self.hits.iter_mut().zip(CUTOFFS) {
                *hit += usize::from(rank <= cutoff);
            }
            #[allow(clippy::cast_precision_loss)] // ranks ≤ 10
            {
                self.reciprocal += 1.0 / rank as f64;
            }
        }
    }

    /// The share of queries with a gold tool in the top `k` (one of [`CUTOFFS`]; 0 otherwise).
    #[must_use]
    pub fn hit_at(&self, k: usize) -> f64 {
        let Some(i) = CUTOFFS.iter().position(|&c| c == k) else {
            return 0.0;
        };
        ratio(self.hits[i] as f64, self.n)
    }

    /// Mean reciprocal rank of the first gold tool within the top 10 (0 past it).
    #[must_use]
    pub fn mrr(&self) -> f64 {
        ratio(self.reciprocal, self.n)
    }

    fn json(&self) -> Value {
        json!({
            "n": self.n,
            "hit@1": round(self.hit_at(1)),
            "hit@5": round(self.hit_at(5)),
            "hit@10": round(self.hit_at(10)),
            "mrr@10": round(self.mrr()),
        })
    }
}

#[allow(clippy::cast_precision_loss)] // query counts
fn ratio(sum: f64, n: usize) -> f64 {
    if n == 0 { 0.0 } else { sum / n as f64 }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Strict (gold ids only) and lenient (alternatives accepted) scores of one group.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Group {
    /// Only the gold ids count.
    pub strict: Scores,
    /// A gold id's alternatives count too.
    pub lenient: Scores,
}

/// A query with no gold tool in the top [`MISS_AT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    /// The row's id.
    pub id: String,
    /// Its group.
    pub source: String,
    /// What was asked.
    pub query: String,
    /// What answers it.
    pub gold: Vec<String>,
    /// The first [`MISS_AT`] results the ranking gave.
    pub got: Vec<String>,
    /// Where the first gold tool came within the top 10, if it did.
    pub rank: Option<usize>,
}

/// Everything `--report` prints.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Per `source`, in name order.
    pub sources: BTreeMap<String, Group>,
    /// All queries.
    pub overall: Group,
    /// The queries missed at [`MISS_AT`] (strictly), in input order.
    pub misses: Vec<Miss>,
    /// Whether any row has `gold_alternatives` (else lenient equals strict).
    pub has_alternatives: bool,
}

/// Scores `ranked[i]` (best first, `server/tool` ids) against `rows[i]`.
///
/// # Panics
/// Never for well-formed input; `rows` and `ranked` are zipped (extra entries are ignored).
#[must_use]
pub fn evaluate(rows: &[Labelled], ranked: &[Vec<String>]) -> Report {
    let mut report = Report::default();
    for (row, got) in rows.iter().zip(ranked) {
        let strict = row.best_rank(got, false);
        let lenient = row.best_rank(got, true);
        report.has_alternatives |= !row.alternatives.is_empty();
        for group in [
            report.sources.entry(row.source.clone()).or_default(),
            &mut report.overall,
        ] {
            group.strict.add(strict);
            group.lenient.add(lenient);
        }
        if strict.is_none_or(|r| r > MISS_AT) {
            report.misses.push(Miss {
                id: row.id.clone(),
                source: row.source.clone(),
                query: row.query.clone(),
                gold: row.gold.clone(),
                got: got.iter().take(MISS_AT).cloned().collect(),
                rank: strict,
            });
        }
    }
    report
}

impl Report {
    /// The report as a table per source (strict, then lenient when there are alternatives),
    /// then the misses.
    #[must_use]
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let width = self
            .sources
            .keys()
            .map(String::len)
            .max()
            .unwrap_or(0)
            .max("overall".len());
        let modes: &[(&str, bool)] = if self.has_alternatives {
            &[("strict", false), ("lenient", true)]
        } else {
            &[("strict", false)]
        };
        let overall = "overall".to_owned();
        for &(mode, lenient) in modes {
            let _ = writeln!(
                out,
                "{:<width$}  {:>5}  {:>6}  {:>6}  {:>6}  {:>6}   ({mode})",
                "source", "n", "hit@1", "hit@5", "hit@10", "MRR"
            );
            let rows = self.sources.iter().chain([(&overall, &self.overall)]);
            for (source, group) in rows {
                let s = if lenient {
                    &group.lenient
                } else {
                    &group.strict
                };
                let _ = writeln!(
                    out,
                    "{source:<width$}  {:>5}  {:>6.3}  {:>6.3}  {:>6.3}  {:>6.3}",
                    s.n,
                    s.hit_at(1),
                    s.hit_at(5),
                    s.hit_at(10),
                    s.mrr()
                );
            }
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "{} of {} queries missed at {MISS_AT}:",
            self.misses.len(),
            self.overall.strict.n
        );
        for miss in &self.misses {
            let rank = miss.rank.map_or("none in the top 10".to_owned(), |r| {
                format!("first gold at {r}")
            });
            let query = super::one_line(&miss.query, 110);
            let _ = writeln!(out, "- [{}] {} {query:?} ({rank})", miss.source, miss.id);
            let _ = writeln!(out, "    gold {}", miss.gold.join(", "));
            let _ = writeln!(out, "    got  {}", miss.got.join(", "));
        }
        out
    }

    /// The report as one JSON object: `sources`, `overall` (each `{strict, lenient}` with `n`,
    /// `hit@1`, `hit@5`, `hit@10`, `mrr@10`) and `misses`.
    #[must_use]
    pub fn json(&self) -> Value {
        let group = |g: &Group| json!({"strict": g.strict.json(), "lenient": g.lenient.json()});
        let sources: serde_json::Map<String, Value> = self
            .sources
            .iter()
            .map(|(k, g)| (k.clone(), group(g)))
            .collect();
        let misses: Vec<Value> = self
            .misses
            .iter()
            .map(|m| {
                json!({"id": m.id, "source": m.source, "query": m.query, "gold": m.gold,
                       "got": m.got, "rank": m.rank})
            })
            .collect();
        json!({"sources": sources, "overall": group(&self.overall), "misses": misses})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, source: &str, gold: &[&str]) -> Labelled {
        Labelled {
            id: id.into(),
            source: source.into(),
            query: format!("query {id}"),
            gold: gold.iter().map(|s| (*s).to_owned()).collect(),
            alternatives: HashMap::new(),
        }
    }

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn scores_each_source_and_overall_by_the_best_gold_rank() {
        let rows = [
            row("a", "s1", &["x/1"]),
            row("b", "s1", &["x/9", "x/3"]),
            row("c", "s2", &["x/7"]),
        ];
        let many: Vec<String> = (1..=12).map(|i| format!("x/{i}")).collect();
        let ranked = [ids(&["x/1", "x/2"]), many.clone(), many];
        let r = evaluate(&rows, &ranked);
        let s1 = &r.sources["s1"].strict;
        assert_eq!((s1.n, s1.hit_at(1), s1.hit_at(5)), (2, 0.5, 1.0));
        assert!((s1.mrr() - (1.0 + 1.0 / 3.0) / 2.0).abs() < 1e-12);
        let s2 = &r.sources["s2"].strict;
        assert_eq!((s2.hit_at(5), s2.hit_at(10)), (0.0, 1.0));
        assert_eq!(r.overall.strict.n, 3);
        assert_eq!(r.misses.len(), 1);
        assert_eq!(r.misses[0].id, "c");
        assert_eq!(r.misses[0].rank, Some(7));
        assert_eq!(r.misses[0].got.len(), MISS_AT);
    }

    #[test]
    fn a_gold_past_ten_counts_nothing_and_alternatives_count_only_leniently() {
        let mut q = row("a", "s", &["x/11"]);
        q.alternatives.insert("x/11".into(), ids(&["x/2"]));
        let ranked: Vec<String> = (1..=12).map(|i| format!("x/{i}")).collect();
        let r = evaluate(&[q], &[ranked]);
        assert_eq!(r.overall.strict.mrr(), 0.0);
        assert_eq!(r.overall.strict.hit_at(10), 0.0);
        assert_eq!(r.overall.lenient.hit_at(5), 1.0);
        assert_eq!(r.overall.lenient.mrr(), 0.5);
        assert!(r.has_alternatives);
        assert!(r.table().contains("(lenient)"), "{}", r.table());
    }

    #[test]
    fn parse_defaults_and_errors_name_the_line() {
        let q = Labelled::parse(r#"{"query": "q", "gold": "a/b"}"#, 7).unwrap();
        assert_eq!((q.id.as_str(), q.source.as_str()), ("7", "queries"));
        assert_eq!(q.gold, ["a/b"]);
        let e = Labelled::parse(r#"{"query": "q"}"#, 3).unwrap_err();
        assert!(e.starts_with("line 3: no \"gold\""), "{e}");
        let e = Labelled::parse("nope", 4).unwrap_err();
        assert!(e.starts_with("line 4: not JSON"), "{e}");
    }

    #[test]
    fn the_table_lists_sources_overall_and_misses() {
        let rows = [row("a", "github", &["g/x"]), row("b", "web", &["w/y"])];
        let ranked = [ids(&["g/x"]), ids(&["g/x"])];
        let t = evaluate(&rows, &ranked).table();
        assert!(
            t.contains("github       1   1.000   1.000   1.000   1.000"),
            "{t}"
        );
        assert!(
            t.contains("overall      2   0.500   0.500   0.500   0.500"),
            "{t}"
        );
        assert!(
            t.contains("1 of 2 queries missed at 5:\n- [web] b \"query b\""),
            "{t}"
        );
        assert!(!t.contains("lenient"));
    }
}
