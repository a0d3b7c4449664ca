//! Tokens of real tool results before and after compaction (issue 54): reads the corpus of
//! `tests/fixtures/results` (`SERVER__TOOL.json`, see its `SOURCES.md`) and prints, per result
//! and per server, the tokens of its text blocks as the upstream sent them, with
//! `result_format = "json"` and with `result_format = "toon"` (the gateway's own
//! [`compact_result`]: a rendering is used only when it counts fewer tokens).
//!
//! `cargo run --release --example result_tokens -- [DIR] [--model M] [--dump FILE]`: DIR
//! defaults to the corpus; tokens are the model's (default claude-sonnet-4-5, calibrated);
//! `--dump` writes every result's three texts as JSON (what `scripts/results/eval.py` asks the
//! local model about).
#![allow(clippy::print_stdout, missing_docs)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use mcp_budget::profile::{ProfileOverrides, resolve};
use mcp_budget::results::{ResultFormat, compact_result};
use mcp_budget::tokens::Counter;
use serde_json::{Value, json};

fn texts(result: &Value) -> String {
    let blocks = result["content"].as_array().cloned().unwrap_or_default();
    let texts: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
    texts.join("\n")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut dir, mut model, mut dump) = (None, "claude-sonnet-4-5".to_owned(), None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => model = args.next().ok_or("--model needs a name")?,
            "--dump" => dump = Some(PathBuf::from(args.next().ok_or("--dump needs a file")?)),
            other => dir = Some(PathBuf::from(other)),
        }
    }
    let dir = dir.unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results")
    });
    let counter = Counter::new(&resolve(&model, &ProfileOverrides::default())?);
    let count = |t: &str| counter.count_text(t);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    println!(
        "Tokens of tool results ({model}), text blocks as sent / result_format = \"json\" / \"toon\":\n"
    );
    println!("| result | as sent | json | toon | saved (toon) |");
    println!("|---|---:|---:|---:|---:|");
    let mut servers: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut dumped = Vec::new();
    for path in &files {
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
        let server = fixture["server"].as_str().unwrap_or("?").to_owned();
        let name = format!("{server}/{}", fixture["tool"].as_str().unwrap_or("?"));
        let label = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        let original = fixture["result"].clone();
        let mut rendered = [original.clone(), original.clone(), original.clone()];
        compact_result(&mut rendered[1], ResultFormat::Json, &count);
        compact_result(&mut rendered[2], ResultFormat::Toon, &count);
        let tokens = rendered.each_ref().map(|r| count(&texts(r)));
        let totals = servers.entry(server).or_default();
        for (total, n) in totals.iter_mut().zip(tokens) {
            *total += n;
        }
        println!(
            "| {label} | {} | {} | {} | {} |",
            tokens[0],
            tokens[1],
            tokens[2],
            saved(tokens[0], tokens[2])
        );
        dumped.push(json!({"name": name, "file": label, "original": texts(&rendered[0]), "json": texts(&rendered[1]), "toon": texts(&rendered[2]), "tokens": tokens}));
    }
    println!("\nPer server:\n");
    println!("| server | as sent | json | toon | saved (toon) |");
    println!("|---|---:|---:|---:|---:|");
    let mut all = [0; 3];
    for (server, t) in &servers {
        println!(
            "| {server} | {} | {} | {} | {} |",
            t[0],
            t[1],
            t[2],
            saved(t[0], t[2])
        );
        for (a, n) in all.iter_mut().zip(t) {
            *a += n;
        }
    }
    println!(
        "| **all** | {} | {} | {} | {} |",
        all[0],
        all[1],
        all[2],
        saved(all[0], all[2])
    );
    if let Some(path) = dump {
        std::fs::write(path, serde_json::to_string_pretty(&dumped)?)?;
    }
    Ok(())
}

/// The share saved, in percent.
fn saved(before: usize, after: usize) -> String {
    if before == 0 {
        return "–".into();
    }
    #[allow(clippy::cast_precision_loss)]
    let pct = 100.0 * (before as f64 - after as f64) / before as f64;
    format!("{pct:.0} %")
}
