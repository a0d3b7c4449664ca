//! The direct-hit rate of multi-server plans: on every window of four servers (by name) of the
//! labelled set, the share of its queries whose gold tool the plan lists directly (no search
//! step needed), and how many servers get nothing listed. Deterministic (no timing): compare
//! two builds.
//!
//! `cargo run --release --example direct_hits -- TOOLSETS_DIR QUERIES.jsonl [MODEL]`
//! (MODEL default `claude-sonnet-4-5`; the default budget, 2% of its context window.)
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    missing_docs
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use mcp_budget::catalog::{CatalogTool, load_saved};
use mcp_budget::plan::plan;
use mcp_budget::policy::{BudgetPolicy, DiscoverPolicy};
use mcp_budget::tokens::Counter;
use serde_json::Value;

/// One labelled query: its gold tools (`server/tool`).
fn queries(path: &PathBuf) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["gold"].as_array().unwrap().iter())
                .filter_map(|g| g.as_str().map(str::to_owned))
                .collect()
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = load_saved(&[PathBuf::from(&args[0])]).unwrap();
    let labelled = queries(&PathBuf::from(&args[1]));
    let model = args.get(2).map_or("claude-sonnet-4-5", String::as_str);
    let policy = BudgetPolicy::default().with_model(model).unwrap();
    // The servers some query names, by name; groups of four in that order.
    let servers: BTreeSet<&str> = labelled
        .iter()
        .flatten()
        .filter_map(|g| g.split('/').next())
        .filter(|s| all.iter().any(|t| t.server == *s))
        .collect();
    let servers: Vec<&str> = servers.into_iter().collect();
    let (mut hits, mut asked, mut empty, mut groups) = (0usize, 0usize, 0usize, 0usize);
    for group in servers.windows(4) {
        let catalog: Vec<CatalogTool> = (all.iter())
            .filter(|t| group.contains(&t.server.as_str()))
            .cloned()
            .collect();
        let rules = policy.rules(&catalog, "__", &DiscoverPolicy::default());
        let measured = Counter::new(&policy.profile).measure(&catalog, &rules.wording);
        let p = plan(&catalog, &measured, &rules);
        let listed: BTreeSet<String> = (catalog.iter().zip(&p.levels))
            .filter(|(_, level)| level.is_some())
            .map(|(t, _)| t.id())
            .collect();
        let mut per_server: BTreeMap<&str, usize> = group.iter().map(|s| (*s, 0)).collect();
        for id in &listed {
            if let Some(n) = id.split('/').next().and_then(|s| per_server.get_mut(s)) {
                *n += 1;
            }
        }
        empty += per_server.values().filter(|&&n| n == 0).count();
        groups += 1;
        for gold in &labelled {
            let gold: Vec<&String> = (gold.iter())
                .filter(|g| group.iter().any(|s| g.starts_with(&format!("{s}/"))))
                .collect();
            if gold.is_empty() {
                continue;
            }
            asked += 1;
            hits += usize::from(gold.iter().any(|g| listed.contains(*g)));
        }
    }
    println!(
        "{model}: {groups} plans of 4 servers, {asked} queries: direct hits {hits} ({:.1}%), \
         servers with nothing listed {empty} of {}",
        100.0 * hits as f64 / asked.max(1) as f64,
        groups * 4,
    );
}
