//! The corpus of real results (`tests/fixtures/results`, see its `SOURCES.md`) through
//! `result_format = "toon"`, counted as `examples/result_tokens.rs` counts (claude-sonnet-4-5).

use serde_json::Value;

use super::toon::decode::decode;
use super::{ResultFormat, compact_result};
use crate::profile::{ProfileOverrides, resolve};
use crate::tokens::Counter;

/// Tokens of `name`'s text blocks as sent and as `toon` renders them, and the rendered text.
fn measured(name: &str) -> (usize, usize, String) {
    let path = format!(
        "{}/tests/fixtures/results/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let counter =
        Counter::new(&resolve("claude-sonnet-4-5", &ProfileOverrides::default()).unwrap());
    let count = |t: &str| counter.count_text(t);
    let text = |r: &Value| r["content"][0]["text"].as_str().unwrap().to_owned();
    let mut result = fixture["result"].clone();
    let before = count(&text(&result));
    compact_result(&mut result, ResultFormat::Toon, &count);
    let after = text(&result);
    (before, count(&after), after)
}

fn saved(before: usize, after: usize) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let share = (before as f64 - after as f64) / before as f64;
    share
}

/// GitHub's repositories nest an `owner` each: a table with dotted columns, decoded back to
/// exactly the JSON sent. Its issues also hold arrays (`labels`, `assignees`), which no TOON v3
/// table can: they stay minified JSON (21 %, see docs/budget.md).
#[test]
fn githubs_results_save_by_dotted_columns_and_decode_back_exactly() {
    let (before, after, text) = measured("github__search_repositories");
    assert!(saved(before, after) >= 0.30, "{before} → {after}:\n{text}");
    assert!(
        text.contains("items[4]{id,node_id,name,full_name,owner.login,owner.id,"),
        "{text}"
    );
    let fixture = std::fs::read_to_string(format!(
        "{}/tests/fixtures/results/github__search_repositories.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let fixture: Value = serde_json::from_str(&fixture).unwrap();
    let sent: Value =
        serde_json::from_str(fixture["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(decode(&text).map(|v| v.to_string()), Some(sent.to_string()));
    let (before, after, text) = measured("github__list_issues");
    assert!(saved(before, after) >= 0.20, "{before} → {after}");
    assert!(
        text.starts_with("[{"),
        "minified JSON, the smallest lossless form"
    );
}

/// A YAML result (`fetch` of a YAML document) is rendered as TOON, and saves.
#[test]
fn a_fetched_yaml_document_becomes_toon() {
    let (before, after, text) = measured("fetch__fetch_yaml");
    assert!(text.contains("items[8]{"), "{text}");
    assert!(saved(before, after) >= 0.30, "{before} → {after}:\n{text}");
}
