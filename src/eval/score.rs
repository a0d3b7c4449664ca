//! Scoring episodes: which tool was called against the labels, whether its arguments fit the
//! tool's schema, and one summary per exposure with 95 % intervals. Pure: the runner records
//! [`Episode`]s, [`summarize`] reads them.
//!
//! ```
//! use mcp_budget::eval::score::{ArgumentCheck, check_arguments, wilson};
//! use serde_json::json;
//!
//! let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
//! assert_eq!(check_arguments(Some(&schema), &json!({"q": "x"})), ArgumentCheck::Valid);
//! assert_eq!(check_arguments(Some(&schema), &json!({})), ArgumentCheck::Empty);
//! let (low, high) = wilson(8, 10);
//! assert!(low < 0.8 && 0.8 < high);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::search::eval::Labelled;

/// How a call's arguments fit the called tool's `inputSchema`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgumentCheck {
    /// Required properties present, types and enums right (the gateway's own check:
    /// [`crate::discover::check_arguments`]).
    Valid,
    /// `{}` (or nothing) for a tool with required arguments.
    Empty,
    /// Anything else wrong: the problems, one per line.
    Invalid(Vec<String>),
}

impl ArgumentCheck {
    /// `valid`, `empty` or `invalid`.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Valid => "valid",
            Self::Empty => "empty",
            Self::Invalid(_) => "invalid",
        }
    }
}

/// Checks `arguments` against `schema` (none: anything is valid).
#[must_use]
pub fn check_arguments(schema: Option<&Value>, arguments: &Value) -> ArgumentCheck {
    let Some(schema) = schema else {
        return ArgumentCheck::Valid;
    };
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty());
    let empty = arguments.as_object().is_some_and(serde_json::Map::is_empty);
    if empty && required {
        return ArgumentCheck::Empty;
    }
    match crate::discover::check_arguments(schema, arguments) {
        Ok(()) => ArgumentCheck::Valid,
        Err(problems) => ArgumentCheck::Invalid(problems),
    }
}

/// The Wilson score interval of `k` successes in `n` trials at 95 % (`(0, 1)` for none).
#[must_use]
#[allow(clippy::cast_precision_loss, reason = "counts of episodes")]
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.959_964_f64;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let denominator = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Whether `id` answers `row`: strictly (one of its gold ids), or leniently (also one of their
/// alternatives).
#[must_use]
pub fn judge(row: &Labelled, id: &str) -> (bool, bool) {
    (row.accepts(id, false), row.accepts(id, true))
}

/// How an episode ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// A tool (not a meta-tool) was called: the scored call.
    Called,
    /// The model answered without a call.
    Answered,
    /// The turns ran out while it only used meta-tools.
    Turns,
    /// The endpoint failed.
    Error,
}

/// Why an episode that did not call a right tool failed, for the meta-tool paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The endpoint failed.
    Error,
    /// It never searched, and called no right tool.
    NoSearch,
    /// It searched, and no right tool was among the results it got.
    SearchMissed,
    /// A right tool was among its results; it picked another.
    WrongPick,
    /// A right tool was among its results; it never read its schema nor called it.
    SchemaNeverRead,
    /// Its `invoke_tool` (or `run_code`) call was refused as malformed, and it called nothing.
    InvokeMalformed,
    /// It called a wrong tool straight from the list (no meta-tool involved).
    WrongTool,
    /// It answered, or ran out of turns, without a call.
    NoCall,
}

/// One search the model made, and whether a right tool was in its top 5.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Search {
    /// The query the model wrote.
    pub query: String,
    /// A right (lenient) tool among the first 5 the gateway's search gives for it.
    pub hit_at_5: bool,
    /// A right (lenient) tool among what the model was shown.
    pub shown_right: bool,
}

/// One episode: one query through one exposure. A line of `episodes.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    /// The exposure's name (`flat-20`, `progressive`, …).
    pub exposure: String,
    /// The query's id.
    pub query_id: String,
    /// The flat list's group, for `flat-N` exposures.
    pub group: Option<usize>,
    /// How it ended.
    pub ending: Ending,
    /// The scored call's `server/tool`, or the name the model called when no tool has it.
    pub called: Option<String>,
    /// Its arguments.
    pub arguments: Option<Value>,
    /// `valid`, `empty` or `invalid` (none without a call, or for a name no server has).
    pub arguments_check: Option<String>,
    /// What was wrong with them.
    pub argument_problems: Vec<String>,
    /// Called a gold tool.
    pub strict: bool,
    /// Called a gold tool or an alternative.
    pub lenient: bool,
    /// The scored call named its tool otherwise than listed (`get_issue` for
    /// `github__get_issue`), and the gateway's policy (`[aggregate] resolve_names = "route"`)
    /// routed it to that tool: it is scored as the tool reached. Under `"strict"` such a call
    /// is refused and scored as the name it sent (no tool).
    #[serde(default)]
    pub resolved: bool,
    /// Calls the model made, native and written as text.
    pub native_calls: usize,
    /// Calls written as text.
    pub text_calls: usize,
    /// Meta-tool calls before the scored one (searches, schema reads, runs that called nothing).
    pub meta_steps: usize,
    /// Model turns.
    pub turns: usize,
    /// The searches the model made.
    pub searches: Vec<Search>,
    /// Why it failed (none when it called a right tool).
    pub failure: Option<Failure>,
    /// Prompt tokens over the episode's turns, as the endpoint reports them.
    pub prompt_tokens: u64,
    /// Completion tokens, as the endpoint reports them.
    pub completion_tokens: u64,
    /// Prompt tokens the endpoint served from its cache, where it says.
    pub cached_tokens: Option<u64>,
    /// The listed tools as our counter sees them (the `openai` rendering, o200k).
    pub tool_block_tokens: usize,
    /// Tools listed at the first turn.
    pub tools_listed: usize,
    /// Wall time of the episode, ms.
    pub wall_ms: u64,
    /// The endpoint's failure, when it ended on one.
    pub error: Option<String>,
    /// The model's last text, cut to 400 characters (what it answered instead of calling).
    pub last_text: Option<String>,
}

/// What an episode did, as far as [`classify`] needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent facts of one episode"
)]
pub struct Trace {
    /// It called a gold tool.
    pub strict: bool,
    /// The endpoint failed.
    pub error: bool,
    /// It called a tool (not a meta-tool).
    pub called: bool,
    /// The call went through a meta-tool (`invoke_tool`, `run_code`).
    pub through_meta: bool,
    /// It searched.
    pub searched: bool,
    /// A right tool was among the search results it was shown.
    pub shown_right: bool,
    /// It read a right tool's schema.
    pub schema_read_right: bool,
    /// An `invoke_tool` or `run_code` of its was refused.
    pub invoke_refused: bool,
    /// The meta-tools were listed to it.
    pub meta_listed: bool,
}

/// Why an episode failed (none when it called a gold tool), precedence top down.
#[must_use]
pub fn classify(t: Trace) -> Option<Failure> {
    if t.strict {
        return None;
    }
    Some(if t.error {
        Failure::Error
    } else if !t.searched {
        match (t.called, t.meta_listed && !t.through_meta) {
            (true, _) => Failure::WrongTool,
            (false, true) => Failure::NoSearch,
            (false, false) if t.invoke_refused => Failure::InvokeMalformed,
            (false, false) => Failure::NoCall,
        }
    } else if !t.shown_right {
        Failure::SearchMissed
    } else if t.called {
        Failure::WrongPick
    } else if t.invoke_refused {
        Failure::InvokeMalformed
    } else if !t.schema_read_right {
        Failure::SchemaNeverRead
    } else {
        Failure::NoCall
    })
}

/// Per-million-token prices, for the cost column.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Price {
    /// Per million prompt tokens.
    pub input: f64,
    /// Per million completion tokens.
    pub output: f64,
}

/// The summary of one exposure's episodes: an object of `summary.json`.
#[must_use]
#[allow(clippy::cast_precision_loss, reason = "counts of episodes and tokens")]
pub fn summarize(exposure: &str, episodes: &[&Episode], price: Price) -> Value {
    let n = episodes.len();
    let count = |f: &dyn Fn(&Episode) -> bool| episodes.iter().filter(|e| f(e)).count();
    let per_task = |total: f64| if n == 0 { 0.0 } else { total / n as f64 };
    let share = |k: usize, of: usize| if of == 0 { 0.0 } else { k as f64 / of as f64 };
    let strict = count(&|e| e.strict);
    let lenient = count(&|e| e.lenient);
    let with_call = count(&|e| e.arguments_check.is_some());
    let valid = count(&|e| e.arguments_check.as_deref() == Some("valid"));
    let empty = count(&|e| e.arguments_check.as_deref() == Some("empty"));
    // Token figures are per episode the endpoint answered: an errored one has no counts, and
    // counting it as 0 tokens would make a list that timed out look cheap.
    let answered: Vec<&Episode> = (episodes.iter().copied())
        .filter(|e| e.ending != Ending::Error)
        .collect();
    let per_answered = |total: f64| {
        if answered.is_empty() {
            0.0
        } else {
            total / answered.len() as f64
        }
    };
    let prompt: u64 = answered.iter().map(|e| e.prompt_tokens).sum();
    let completion: u64 = answered.iter().map(|e| e.completion_tokens).sum();
    // (cached, prompt) of the episodes that report cached tokens.
    let reported: Vec<(u64, u64)> = (answered.iter())
        .filter_map(|e| Some((e.cached_tokens?, e.prompt_tokens)))
        .collect();
    let cached = (!reported.is_empty()).then(|| reported.iter().map(|r| r.0).sum::<u64>());
    let cached_of: u64 = reported.iter().map(|r| r.1).sum();
    let searches: Vec<&Search> = episodes.iter().flat_map(|e| &e.searches).collect();
    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    for failure in episodes.iter().filter_map(|e| e.failure) {
        let key = serde_json::to_value(failure).unwrap_or_default();
        *failures
            .entry(key.as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
    }
    let cost = (prompt as f64 * price.input + completion as f64 * price.output) / 1e6;
    let interval = |k| {
        let (low, high) = wilson(k, n);
        json!([round(low), round(high)])
    };
    json!({
        "exposure": exposure,
        "episodes": n,
        "accuracy": round(share(strict, n)),
        "accuracy_ci95": interval(strict),
        "lenient": round(share(lenient, n)),
        "lenient_ci95": interval(lenient),
        "called": with_call,
        "called_unknown": count(&|e| e.called.is_some() && e.arguments_check.is_none()),
        "called_resolved": count(&|e| e.resolved),
        "arguments_valid": round(share(valid, with_call)),
        "arguments_empty": round(share(empty, with_call)),
        "arguments_empty_or_invalid": round(share(with_call - valid, with_call)),
        "native_calls": episodes.iter().map(|e| e.native_calls).sum::<usize>(),
        "text_calls": episodes.iter().map(|e| e.text_calls).sum::<usize>(),
        "meta_steps_per_task": round(per_task(episodes.iter().map(|e| e.meta_steps).sum::<usize>() as f64)),
        "turns_per_task": round(per_task(episodes.iter().map(|e| e.turns).sum::<usize>() as f64)),
        "searches": searches.len(),
        "search_recall_at_5": (!searches.is_empty())
            .then(|| round(share(searches.iter().filter(|s| s.hit_at_5).count(), searches.len()))),
        "failures": failures,
        "prompt_tokens_per_task": round(per_answered(prompt as f64)),
        "completion_tokens_per_task": round(per_answered(completion as f64)),
        "cached_share": cached.map(|c| round(if cached_of == 0 { 0.0 } else { c as f64 / cached_of as f64 })),
        "tool_block_tokens": episodes.iter().map(|e| e.tool_block_tokens).max().unwrap_or(0),
        "tools_listed": episodes.iter().map(|e| e.tools_listed).max().unwrap_or(0),
        "cost_per_task": (per_answered(cost) * 1e6).round() / 1e6,
        "wall_seconds": round(episodes.iter().map(|e| e.wall_ms).sum::<u64>() as f64 / 1e3),
        "errors": count(&|e| e.ending == Ending::Error),
    })
}

/// Rounded to 4 decimals, so summaries read and diff well.
fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn row() -> Labelled {
        Labelled {
            id: "q".into(),
            source: "s".into(),
            query: "q".into(),
            gold: vec!["a/x".into()],
            alternatives: HashMap::from([("a/x".into(), vec!["b/x".into()])]),
        }
    }

    fn episode(strict: bool, check: Option<&str>, prompt: u64) -> Episode {
        Episode {
            exposure: "e".into(),
            query_id: "q".into(),
            group: None,
            ending: if check.is_some() {
                Ending::Called
            } else {
                Ending::Answered
            },
            called: None,
            arguments: None,
            arguments_check: check.map(str::to_owned),
            argument_problems: vec![],
            strict,
            lenient: strict,
            resolved: false,
            native_calls: 0,
            text_calls: usize::from(check.is_some()),
            meta_steps: 0,
            turns: 1,
            searches: vec![],
            failure: (!strict).then_some(Failure::NoCall),
            prompt_tokens: prompt,
            completion_tokens: 10,
            cached_tokens: Some(prompt / 2),
            tool_block_tokens: 100,
            tools_listed: 3,
            wall_ms: 1000,
            error: None,
            last_text: None,
        }
    }

    #[test]
    fn failures_say_where_the_meta_path_broke() {
        let base = Trace {
            meta_listed: true,
            ..Trace::default()
        };
        assert_eq!(
            classify(Trace {
                strict: true,
                ..base
            }),
            None
        );
        assert_eq!(
            classify(Trace {
                error: true,
                ..base
            }),
            Some(Failure::Error)
        );
        assert_eq!(classify(base), Some(Failure::NoSearch));
        let flat = Trace::default();
        assert_eq!(classify(flat), Some(Failure::NoCall));
        assert_eq!(
            classify(Trace {
                called: true,
                ..flat
            }),
            Some(Failure::WrongTool)
        );
        let searched = Trace {
            searched: true,
            ..base
        };
        assert_eq!(classify(searched), Some(Failure::SearchMissed));
        let shown = Trace {
            shown_right: true,
            ..searched
        };
        assert_eq!(
            classify(Trace {
                called: true,
                ..shown
            }),
            Some(Failure::WrongPick)
        );
        assert_eq!(
            classify(Trace {
                invoke_refused: true,
                ..shown
            }),
            Some(Failure::InvokeMalformed)
        );
        assert_eq!(classify(shown), Some(Failure::SchemaNeverRead));
        assert_eq!(
            classify(Trace {
                schema_read_right: true,
                ..shown
            }),
            Some(Failure::NoCall)
        );
    }

    #[test]
    fn judging_is_strict_on_gold_and_lenient_on_alternatives() {
        assert_eq!(judge(&row(), "a/x"), (true, true));
        assert_eq!(judge(&row(), "b/x"), (false, true));
        assert_eq!(judge(&row(), "c/x"), (false, false));
    }

    #[test]
    fn arguments_are_valid_empty_or_invalid() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "mode": {"enum": ["a", "b"]}}, "required": ["n"]});
        let check = |args| check_arguments(Some(&schema), &args);
        assert_eq!(check(json!({"n": 1, "mode": "a"})), ArgumentCheck::Valid);
        assert_eq!(check(json!({})), ArgumentCheck::Empty);
        assert_eq!(check(json!({"mode": "a"})).as_str(), "invalid");
        assert_eq!(check(json!({"n": "1"})).as_str(), "invalid");
        assert_eq!(check(json!({"n": 1, "mode": "c"})).as_str(), "invalid");
        assert_eq!(check(json!("not an object")).as_str(), "invalid");
        let optional = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        assert_eq!(
            check_arguments(Some(&optional), &json!({})),
            ArgumentCheck::Valid
        );
    }

    #[test]
    fn the_summary_counts_shares_tokens_and_cost() {
        let episodes = [
            episode(true, Some("valid"), 1000),
            episode(false, Some("empty"), 3000),
            episode(false, None, 2000),
            episode(true, Some("valid"), 2000),
        ];
        let refs: Vec<&Episode> = episodes.iter().collect();
        let price = Price {
            input: 1.0,
            output: 2.0,
        };
        let s = summarize("flat-20", &refs, price);
        assert_eq!(s["exposure"], "flat-20");
        assert_eq!(s["episodes"], 4);
        assert_eq!(s["accuracy"], 0.5);
        assert_eq!(s["arguments_valid"], 0.6667);
        assert_eq!(s["arguments_empty"], 0.3333);
        assert_eq!(s["prompt_tokens_per_task"], 2000.0);
        assert_eq!(s["completion_tokens_per_task"], 10.0);
        assert_eq!(s["cached_share"], 0.5);
        assert_eq!(s["failures"]["no_call"], 2);
        // (8000 × 1 + 40 × 2) / 1e6 / 4 tasks
        assert_eq!(s["cost_per_task"], 0.00202);
        assert!(s["search_recall_at_5"].is_null());
    }

    #[test]
    fn errored_episodes_do_not_dilute_the_token_figures() {
        let mut failed = episode(false, None, 0);
        failed.ending = Ending::Error;
        failed.completion_tokens = 0;
        failed.cached_tokens = None;
        let mut uncounted = episode(true, Some("valid"), 4000);
        uncounted.cached_tokens = None;
        let episodes = [episode(true, Some("valid"), 2000), failed, uncounted];
        let refs: Vec<&Episode> = episodes.iter().collect();
        let s = summarize("flat-100", &refs, Price::default());
        assert_eq!(s["episodes"], 3);
        assert_eq!(s["errors"], 1);
        // Over the two answered episodes, not the three.
        assert_eq!(s["prompt_tokens_per_task"], 3000.0);
        assert_eq!(s["completion_tokens_per_task"], 10.0);
        // Over the episode that reported cached tokens (1000 of its 2000).
        assert_eq!(s["cached_share"], 0.5);
    }

    #[test]
    fn an_empty_exposure_summarizes_to_zeros() {
        let s = summarize("code", &[], Price::default());
        assert_eq!(s["episodes"], 0);
        assert_eq!(s["accuracy"], 0.0);
        assert_eq!(s["accuracy_ci95"], json!([0.0, 1.0]));
    }

    proptest::proptest! {
        #[test]
        fn the_wilson_interval_holds_the_share(n in 1usize..500, k_seed in 0usize..500) {
            let k = k_seed % (n + 1);
            let (low, high) = wilson(k, n);
            #[allow(clippy::cast_precision_loss)]
            let p = k as f64 / n as f64;
            proptest::prop_assert!(0.0 <= low && low <= p + 1e-12);
            proptest::prop_assert!(p - 1e-12 <= high && high <= 1.0);
        }
    }
}
