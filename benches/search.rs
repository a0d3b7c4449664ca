//! Search latency over 1,000- and 10,000-tool catalogs and index build time.
//!
//! The catalog replicates the fixture toolsets under distinct server ids until it holds the
//! wanted number of tools. Queries cover the plain case, a typo (which searches the tool-name
//! vocabulary for corrections) and a query naming a server. Under `cargo test --all-targets`
//! (test mode) each benchmark runs once.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_main};
use mcp_budget::catalog::{CatalogTool, load_saved};
use mcp_budget::search::SearchIndex;

const TOOLS: usize = 10_000;

const QUERIES: &[(&str, &str)] = &[
    ("short", "create issue"),
    (
        "sentence",
        "Find the latest news about the economy in Germany.",
    ),
    (
        "long",
        "Read all the PDF articles in the /root/papers directory, compare them and save a Markdown report",
    ),
    ("typo", "serch the repositries for open isues"),
    ("server", "list my open PRs on github"),
];

fn catalog(size: usize) -> Vec<CatalogTool> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
    let base = load_saved(&[dir]).expect("fixtures load");
    let mut tools = Vec::with_capacity(TOOLS);
    for copy in 0.. {
        for tool in &base {
            if tools.len() == size {
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
    for (group_name, size) in [("search_1k", 1_000), ("search_10k", TOOLS)] {
        let tools = catalog(size);
        let index = SearchIndex::build(&tools);
        let mut group = c.benchmark_group(group_name);
        for (label, query) in QUERIES {
            group.bench_function(*label, |b| b.iter(|| index.search(black_box(query), 5)));
        }
        group.finish();
    }
    let tools = catalog(TOOLS);
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
