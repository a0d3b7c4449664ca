//! The real all-MiniLM-L6-v2 (installed by `scripts/install-test-deps.sh` into
//! `tests/peers/models/`) against reference vectors computed independently of candle
//! (`scripts/semantic-reference.py`, `tests/fixtures/semantic/`).

#![allow(clippy::print_stdout)] // the skip message and the per-sentence error table

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::*;

fn model_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/models/all-MiniLM-L6-v2");
    if missing_files(&dir).is_empty() {
        Some(dir)
    } else {
        println!(
            "SKIPPED: no model in {} (run scripts/install-test-deps.sh)",
            dir.display()
        );
        None
    }
}

#[test]
fn embeddings_match_the_reference_within_1e4() {
    let Some(dir) = model_dir() else { return };
    let embedder = Embedder::load(&dir).unwrap();
    assert_eq!(embedder.dims(), 384);
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/semantic/reference.json");
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let rows = reference["sentences"].as_array().unwrap();
    let texts: Vec<&str> = rows.iter().map(|r| r["text"].as_str().unwrap()).collect();
    assert!(rows.iter().any(|r| r["tokens"].as_u64().unwrap() > 128));
    // All at once (padded batches) and one by one: the same vectors.
    let together = embedder.embed(&texts).unwrap();
    for (row, vector) in rows.iter().zip(&together) {
        let alone = &embedder.embed(&[row["text"].as_str().unwrap()]).unwrap()[0];
        let expected: Vec<f64> = row["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(vector.len(), expected.len());
        let worst = |v: &[f32]| {
            v.iter()
                .zip(&expected)
                .map(|(a, b)| (f64::from(*a) - b).abs())
                .fold(0.0f64, f64::max)
        };
        let (batched, single) = (worst(vector), worst(alone));
        println!(
            "{:>8.1e} {:>8.1e}  {:?}",
            batched,
            single,
            row["text"]
                .as_str()
                .unwrap()
                .chars()
                .take(40)
                .collect::<String>()
        );
        assert!(
            batched < 1e-4 && single < 1e-4,
            "{row}: off by {batched} / {single}"
        );
    }
}

#[test]
fn a_missing_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    let missing = missing_files(dir.path());
    assert_eq!(missing.len(), 2);
    #[cfg(feature = "semantic")]
    {
        let error = Embedder::load(dir.path()).unwrap_err().to_string();
        assert!(error.contains("tokenizer.json is missing"), "{error}");
    }
}

#[cfg(feature = "semantic")]
#[test]
fn cosines_rank_a_paraphrase_first() {
    let Some(dir) = model_dir() else { return };
    let embedder = Embedder::load(&dir).unwrap();
    let tools = embedder
        .embed(&[
            "get forecast: Weather forecast for a city",
            "git log: Show the commit logs",
        ])
        .unwrap();
    let query = &embedder.embed(&["will it rain in Oslo tomorrow"]).unwrap()[0];
    let scores = cosines(query, &tools.concat());
    assert!(scores[0] > scores[1] + 0.1, "{scores:?}");
}
