//! Measures the budget core on saved toolsets: tokens per level and rendering, the plans for
//! Claude Haiku 4.5 and Sonnet 4.5 at 2%, and retrieval fidelity per level (a tiny BM25 over
//! the compressed text, hit@5 on labelled queries).
//!
//! `cargo run --release --example measure_budget -- TOOLSETS_DIR [QUERIES.jsonl]`
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    missing_docs
)]

use std::collections::HashMap;
use std::path::PathBuf;

use mcp_budget::catalog::{CatalogTool, load_saved};
use mcp_budget::compress::{Level, catalog_line_exposed, compress};
use mcp_budget::plan::{Rules, plan};
use mcp_budget::policy::{BudgetPolicy, DiscoverPolicy};
use mcp_budget::profile::ProfileOverrides;
use mcp_budget::tokens::{Counter, Measured, Rendering};
use serde_json::Value;

fn rules(catalog: &[CatalogTool], policy: &BudgetPolicy) -> Rules {
    policy.rules(catalog, "__", &DiscoverPolicy::default())
}

fn measure(catalog: &[CatalogTool], policy: &BudgetPolicy) -> Measured {
    Counter::new(&policy.profile).measure(catalog, &rules(catalog, policy).wording)
}

fn with_rendering(rendering: Rendering) -> BudgetPolicy {
    // o200k for every rendering, calibration 1, no fixed overhead: comparable raw BPE counts.
    let mut overrides = ProfileOverrides::default();
    overrides.rendering = Some(rendering);
    overrides.overhead_tokens = Some(0);
    BudgetPolicy::default()
        .with_model("gpt-4o")
        .unwrap()
        .with_overrides(overrides)
        .unwrap()
}

fn token_table(name: &str, catalog: &[CatalogTool]) {
    println!("\n### Tokens per level: {name} ({} tools)\n", catalog.len());
    println!("| rendering | off | low | medium | high | extreme |");
    println!("|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for (label, policy) in [
        (
            "openai (o200k, TS namespace)",
            with_rendering(Rendering::OpenAi),
        ),
        (
            "anthropic JSON (o200k, no overhead)",
            with_rendering(Rendering::Anthropic),
        ),
        ("raw compact JSON (o200k)", with_rendering(Rendering::Raw)),
        (
            "anthropic as billed (Sonnet 4.5 profile: cl100k×1.25 + 346)",
            BudgetPolicy::default()
                .with_model("claude-sonnet-4-5")
                .unwrap(),
        ),
    ] {
        let m = measure(catalog, &policy);
        let cells: Vec<String> = Level::ALL
            .iter()
            .map(|&l| m.total_at(l).to_string())
            .collect();
        println!("| {label} | {} |", cells.join(" | "));
        rows.push(m);
    }
    // Progressive equivalent (meta-tools + catalog lines at each level), raw JSON: the measure
    // comparable to mcp-compressor's levels, which replace tools by wrapper tools.
    let m = &rows[2];
    let cells: Vec<String> = Level::ALL
        .iter()
        .map(|&l| {
            (m.meta + m.listing_header + m.tools.iter().map(|t| t.line[l.index()]).sum::<usize>())
                .to_string()
        })
        .collect();
    println!(
        "| progressive: meta-tools + catalog lines (raw, o200k) | {} |",
        cells.join(" | ")
    );
}

fn plans(name: &str, catalog: &[CatalogTool]) {
    println!("\n### Plans at 2%: {name}\n");
    println!("| model | budget | before | after | plan | listed | deferred | catalog lines |");
    println!("|---|---|---|---|---|---|---|---|");
    for model in ["claude-haiku-4-5", "claude-sonnet-4-5", "gpt-4o", "gpt-5"] {
        let policy = BudgetPolicy::default().with_model(model).unwrap();
        let m = measure(catalog, &policy);
        let p = plan(catalog, &m, &rules(catalog, &policy));
        println!(
            "| {model} | {} tok / {} tools | {} | {} | {} {} | {} | {} | {} |",
            p.budget.tokens,
            p.budget.tools,
            p.tokens_before,
            p.tokens_after,
            p.rung.mode(),
            p.rung,
            p.tools_after,
            p.deferred_count(),
            p.catalog_level.map_or("-", Level::as_str),
        );
    }
}

fn words(text: &str) -> Vec<String> {
    let mut out = mcp_budget::naming::words(text);
    const STOP: &[&str] = &[
        "the", "a", "an", "of", "to", "and", "or", "in", "for", "is", "on", "with", "me", "my",
        "i", "you", "be", "it", "this", "that",
    ];
    out.retain(|w| !STOP.contains(&w.as_str()));
    out
}

struct Bm25 {
    docs: Vec<HashMap<String, f64>>,
    lens: Vec<f64>,
    avg: f64,
    df: HashMap<String, f64>,
}

impl Bm25 {
    fn new(texts: &[String]) -> Self {
        let mut docs = Vec::new();
        let mut df: HashMap<String, f64> = HashMap::new();
        let mut lens = Vec::new();
        for t in texts {
            let ws = words(t);
            lens.push(ws.len() as f64);
            let mut tf: HashMap<String, f64> = HashMap::new();
            for w in ws {
                *tf.entry(w).or_default() += 1.0;
            }
            for w in tf.keys() {
                *df.entry(w.clone()).or_default() += 1.0;
            }
            docs.push(tf);
        }
        let avg = lens.iter().sum::<f64>() / lens.len().max(1) as f64;
        Self {
            docs,
            lens,
            avg,
            df,
        }
    }

    fn top(&self, query: &str, k: usize) -> Vec<usize> {
        let n = self.docs.len() as f64;
        let q = words(query);
        let mut scores: Vec<(f64, usize)> = self
            .docs
            .iter()
            .enumerate()
            .map(|(i, tf)| {
                let mut s = 0.0;
                for w in &q {
                    if let Some(f) = tf.get(w) {
                        let df = self.df[w];
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * self.lens[i] / self.avg));
                    }
                }
                (s, i)
            })
            .collect();
        scores.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scores.into_iter().take(k).map(|(_, i)| i).collect()
    }
}

/// The words a model (or a lexical ranker) sees of a directly listed tool.
fn tool_text(tool: &CatalogTool, level: Level) -> String {
    let c = compress(&tool.definition, level);
    let mut text = format!("{} {}", tool.server, tool.name);
    if let Some(d) = c.get("description").and_then(Value::as_str) {
        text.push(' ');
        text.push_str(d);
    }
    if let Some(props) = c
        .get("inputSchema")
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
    {
        for (k, v) in props {
            text.push(' ');
            text.push_str(k);
            if let Some(d) = v.get("description").and_then(Value::as_str) {
                text.push(' ');
                text.push_str(d);
            }
        }
    }
    text
}

fn fidelity(catalog: &[CatalogTool], queries: &PathBuf) {
    let text = std::fs::read_to_string(queries).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<String> = catalog.iter().map(CatalogTool::id).collect();
    println!(
        "\n### Fidelity: BM25 hit@5 on {} labelled queries ({} tools)\n",
        rows.len(),
        catalog.len()
    );
    println!("| text ranked | off | low | medium | high | extreme |");
    println!("|---|---|---|---|---|---|");
    for (label, line) in [
        ("listed tool (name, description, parameters)", false),
        ("catalog line", true),
    ] {
        let mut cells = Vec::new();
        for level in Level::ALL {
            let texts: Vec<String> = catalog
                .iter()
                .map(|t| {
                    if line {
                        let exposed = t.exposed_name("__");
                        let line = catalog_line_exposed(&t.server, &exposed, &t.definition, level);
                        format!("{} {line}", t.server)
                    } else {
                        tool_text(t, level)
                    }
                })
                .collect();
            let index = Bm25::new(&texts);
            let mut hits = 0;
            let mut total = 0;
            for row in &rows {
                let gold: Vec<String> = row["gold"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .flat_map(|g| {
                        let mut all = vec![g.to_owned()];
                        if let Some(alts) = row
                            .get("gold_alternatives")
                            .and_then(|a| a.get(g))
                            .and_then(Value::as_array)
                        {
                            all.extend(alts.iter().filter_map(Value::as_str).map(str::to_owned));
                        }
                        all
                    })
                    .collect();
                if !gold.iter().any(|g| ids.contains(g)) {
                    continue;
                }
                total += 1;
                let top = index.top(row["query"].as_str().unwrap_or(""), 5);
                if top.iter().any(|&i| gold.contains(&ids[i])) {
                    hits += 1;
                }
            }
            cells.push(format!(
                "{:.1}% ({hits}/{total})",
                100.0 * f64::from(hits) / f64::from(total.max(1))
            ));
        }
        println!("| {label} | {} |", cells.join(" | "));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(
        args.first()
            .map_or("tests/fixtures/toolsets", String::as_str),
    );
    let all = load_saved(std::slice::from_ref(&dir)).unwrap();
    let servers: std::collections::BTreeSet<&str> = all.iter().map(|t| t.server.as_str()).collect();
    println!(
        "toolsets: {} ({} servers, {} tools)",
        dir.display(),
        servers.len(),
        all.len()
    );
    let github: Vec<CatalogTool> = all
        .iter()
        .filter(|t| t.server == "github")
        .cloned()
        .collect();
    token_table("github.json", &github);
    token_table("all toolsets", &all);
    plans("github.json", &github);
    plans("all toolsets", &all);
    if let Some(q) = args.get(1) {
        fidelity(&all, &PathBuf::from(q));
    }
}
