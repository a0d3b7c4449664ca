//! Query latency of `search_tools` ranking with and without the semantic reranker, at about
//! 1,000 and 10,000 tools, and the reranker's memory. Needs the `semantic` feature and a model.
//!
//! ```text
//! cargo run --release --example semantic_latency -- MODEL_DIR TOOLSETS_DIR QUERIES.jsonl CACHE_DIR
//! ```
//!
//! The catalog is the saved toolsets repeated under numbered server ids until it reaches the
//! size; a repeated tool has the same text, so its vector is the original's (read from the
//! cache, which the first run fills: about 30 s for 702 tools). Per query: lexical =
//! `SearchIndex::search`; fused = embedding the query + cosines with every tool +
//! `search_fused`, the work one `search_tools` call does on the blocking pool.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]

use std::path::PathBuf;
use std::time::Instant;

use mcp_budget::catalog::{CatalogTool, load_saved};
use mcp_budget::search::SearchIndex;
use mcp_budget::semantic::{CatalogTexts, Reranker};

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [model, toolsets, queries, cache] = &args[..] else {
        panic!("usage: semantic_latency MODEL_DIR TOOLSETS_DIR QUERIES.jsonl CACHE_DIR");
    };
    let base = load_saved(std::slice::from_ref(toolsets)).unwrap();
    let queries: Vec<String> = std::fs::read_to_string(queries)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["query"].as_str().map(str::to_owned))
        .collect();
    println!("rss before the model: {} MB", rss_mb("VmRSS"));
    let started = Instant::now();
    let reranker = Reranker::new(model, Some(cache));
    reranker.embedder().unwrap();
    println!(
        "model load: {:.2} s, rss {} MB",
        started.elapsed().as_secs_f64(),
        rss_mb("VmRSS")
    );
    for size in [1_000, 10_000] {
        let tools = repeated(&base, size);
        let index = SearchIndex::build(&tools);
        let texts = CatalogTexts::of(&tools);
        let started = Instant::now();
        let embedded = reranker.embed_now(&texts).unwrap();
        assert!(reranker.ready(&texts).is_some());
        println!(
            "{} tools: vectors ready in {:.3} s ({embedded} embedded, the rest from the cache)",
            tools.len(),
            started.elapsed().as_secs_f64()
        );
        let (mut lexical, mut fused) = (Vec::new(), Vec::new());
        for query in &queries {
            let t = Instant::now();
            std::hint::black_box(index.search(query, 5));
            lexical.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let dense = reranker.scores(query, &texts).unwrap();
            std::hint::black_box(index.search_fused(query, 5, Some(&dense)));
            fused.push(t.elapsed().as_secs_f64() * 1e3);
        }
        println!(
            "{} tools, {} queries: lexical p50 {:.3} ms p99 {:.3} ms; fused p50 {:.2} ms p99 {:.2} ms",
            tools.len(),
            queries.len(),
            percentile(&mut lexical, 0.50),
            percentile(&mut lexical, 0.99),
            percentile(&mut fused, 0.50),
            percentile(&mut fused, 0.99),
        );
    }
    println!(
        "rss now {} MB, peak {} MB",
        rss_mb("VmRSS"),
        rss_mb("VmHWM")
    );
}

/// `base` repeated under numbered server ids up to `size` tools.
fn repeated(base: &[CatalogTool], size: usize) -> Vec<CatalogTool> {
    let mut tools = Vec::with_capacity(size);
    for round in 0.. {
        for tool in base {
            if tools.len() == size {
                return tools;
            }
            let mut tool = tool.clone();
            if round > 0 {
                tool.server = format!("{}-{round}", tool.server);
            }
            tools.push(tool);
        }
    }
    tools
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 - 1.0) * p).round();
    values[rank as usize]
}

fn rss_mb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}
