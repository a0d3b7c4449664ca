//! What a `search_tools` answer costs the host: over every labelled query, the tokens of the
//! answer's text (what a host shows the model) and of the whole result with its structured
//! content (what a host that passes both pays), with the default limit of 5 hits, on the
//! catalog of every saved toolset. Deterministic (no timing): compare two builds.
//!
//! `cargo run --release --example search_answer_tokens -- TOOLSETS_DIR QUERIES.jsonl [MODEL]`
//! (MODEL default `claude-sonnet-4-5`.)
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    missing_docs
)]

use std::path::PathBuf;

use mcp_budget::catalog::load_saved;
use mcp_budget::discover::{Discovery, MetaToolNames, SearchLimits};
use mcp_budget::policy::BudgetPolicy;
use mcp_budget::tokens::Counter;
use serde_json::Value;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tools = load_saved(&[PathBuf::from(&args[0])]).unwrap();
    let n_tools = tools.len();
    let text = std::fs::read_to_string(&args[1]).unwrap();
    let model = args.get(2).map_or("claude-sonnet-4-5", String::as_str);
    let policy = BudgetPolicy::default().with_model(model).unwrap();
    let counter = Counter::new(&policy.profile);
    let discovery = Discovery::new(
        tools,
        "__",
        &MetaToolNames::default(),
        SearchLimits::default(),
    );
    let (mut texts, mut wholes) = (Vec::new(), Vec::new());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        let answer = discovery.search_tools(v["query"].as_str().unwrap(), None);
        let shown = answer["content"][0]["text"].as_str().unwrap();
        texts.push(counter.count_text(shown));
        wholes.push(counter.count_text(&answer.to_string()));
    }
    let summary = |name: &str, v: &mut Vec<usize>| {
        v.sort_unstable();
        let mean = v.iter().sum::<usize>() as f64 / v.len() as f64;
        println!(
            "{name:<28} mean {mean:7.1}  p50 {:5}  p90 {:5}  max {:5}",
            v[v.len() / 2],
            v[v.len() * 9 / 10],
            v[v.len() - 1]
        );
    };
    println!("{} queries, {n_tools} tools, {model}", texts.len());
    summary("answer text (tokens)", &mut texts);
    summary("whole result (tokens)", &mut wholes);
}
