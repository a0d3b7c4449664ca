//! Search latency over a 10,000-tool catalog and index build time.
//!
//! The catalog replicates the fixture toolsets under distinct server ids until it holds 10,000
//! tools. Under `cargo test --all-targets` (test mode) each benchmark runs once.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_main, Criterion};
use mcp_budget::catalog::{load_saved, CatalogTool};
use mcp_budget::search::SearchIndex;

const TOOLS: usize = 10_000;

fn catalog() -> Vec<CatalogTool> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
    let base = load_saved(&[dir]).expect("fixtures load");
    let mut tools = Vec::with_capacity(TOOLS);
    for copy in 0.. {
        for tool in &base {
            if tools.len() == TOOLS {
                return tools;
            }
            let mut t = tool.clone();
            t.server = format!("{}-{copy}", t.server);
            tools.push(t);
        }
    }
    tools
}

fn bench(c: &mut Criterion) {
    let tools = catalog();
    let index = SearchIndex::build(&tools);
    let mut group = c.benchmark_group("search_10k");
    for (label, query) in [
        ("short", "create issue"),
        ("sentence", "Find the latest news about the economy in Germany."),
        (
            "long",
            "Read all the PDF articles in the /root/papers directory, compare them and save a Markdown report",
        ),
    ] {
        group.bench_function(label, |b| b.iter(|| index.search(black_box(query), 5)));
    }
    group.finish();
    let mut build = c.benchmark_group("build");
    build.sample_size(10);
    build.bench_function("index_10k", |b| {
        b.iter(|| SearchIndex::build(black_box(&tools)));
    });
    build.finish();
}

// The macro generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench);
}
use group::benches;

criterion_main!(benches);
