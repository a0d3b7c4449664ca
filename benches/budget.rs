//! Budget core benchmarks: tokenizer throughput, and count + plan + render of 1,000 tools cold
//! (empty count cache; target ≤ 50 ms) and warm (every count cached; target ≤ 1 ms).
#![allow(missing_docs, clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use mcp_budget::catalog::{CatalogTool, load_saved};
use mcp_budget::plan::{apply, measure_ranked, plan_ranked};
use mcp_budget::policy::{BudgetPolicy, DiscoverPolicy};
use mcp_budget::tokens::{Bpe, Counter, Encoding, Rendering, Tokenizer, render_tool};

fn fixtures() -> Vec<CatalogTool> {
    load_saved(&[Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets")]).unwrap()
}

/// 1,000 distinct tools: the fixtures, repeated under renamed servers.
fn catalog_1000() -> Vec<CatalogTool> {
    let base = fixtures();
    (0..1000)
        .map(|i| {
            let mut t = base[i % base.len()].clone();
            t.server = format!("{}{}", t.server, i / base.len());
            t
        })
        .collect()
}

#[derive(Debug)]
struct Bytes4;

impl Tokenizer for Bytes4 {
    fn count(&self, text: &str) -> usize {
        text.len() / 4
    }
}

fn tokenizer(c: &mut Criterion) {
    let text: String = fixtures()
        .iter()
        .map(|t| render_tool(Rendering::OpenAi, &t.name, &t.definition))
        .collect();
    let mut group = c.benchmark_group("tokenizer");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(10);
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let bpe = Bpe::new(encoding);
        bpe.count("warm up");
        group.bench_function(encoding.as_str(), |b| b.iter(|| bpe.count(&text)));
    }
    group.finish();
}

fn pipeline(c: &mut Criterion) {
    let catalog = catalog_1000();
    let policy = BudgetPolicy::default()
        .with_model("claude-sonnet-4-5")
        .unwrap();
    let discover = DiscoverPolicy::default();
    // Rules are built per run, as the budget layer builds them per catalog version.
    let run_on = |counter: &Counter, catalog: &[CatalogTool], policy: &BudgetPolicy| {
        let rules = policy.rules(catalog, "__", &discover);
        let (measured, ranked) = measure_ranked(counter, catalog, &rules);
        let p = plan_ranked(catalog, &measured, ranked.as_ref(), &rules);
        apply(&p, catalog, &rules)
    };
    let run = |counter: &Counter| run_on(counter, &catalog, &policy);
    let mut group = c.benchmark_group("count_plan_render_1000");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("cold", |b| {
        b.iter_batched(
            || Counter::new(&policy.profile),
            |counter| run(&counter),
            BatchSize::PerIteration,
        );
    });
    // Everything but the BPE (a byte-length tokenizer): rendering, compression, hashing.
    group.bench_function("cold_without_bpe", |b| {
        b.iter_batched(
            || Counter::with_tokenizer(std::sync::Arc::new(Bytes4), "bytes/4", &policy.profile),
            |counter| run(&counter),
            BatchSize::PerIteration,
        );
    });
    // The fixtures alone: every tool distinct (the 1,000 above repeat 356 definitions under new
    // server names, which the segment cache partly shares).
    let unique = fixtures();
    group.bench_function("cold_fixtures_unique", |b| {
        b.iter_batched(
            || Counter::new(&policy.profile),
            |counter| run_on(&counter, &unique, &policy),
            BatchSize::PerIteration,
        );
    });
    let warm = Counter::new(&policy.profile);
    run(&warm);
    group.bench_function("warm", |b| b.iter(|| run(&warm)));
    // Warm, with a plan that lists every tool (the heaviest `apply`).
    let mut full = policy.clone();
    full.mode = mcp_budget::plan::ModeChoice::Full;
    group.bench_function("warm_full_listing", |b| {
        b.iter(|| run_on(&warm, &catalog, &full));
    });
    group.finish();
}

criterion_group!(benches, tokenizer, pipeline);
criterion_main!(benches);
