//! `mcp-budget search` end to end, on the fixture toolsets.

use std::path::PathBuf;

use serde_json::Value;

use crate::harness::cli;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets")
}

fn search(args: &[&str]) -> String {
    cli(["search", "--tools"])
        .arg(fixtures())
        .args(args)
        .ok()
        .stdout
}

#[test]
fn queries_file_gives_one_json_line_per_query() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("q.jsonl");
    std::fs::write(
        &file,
        "{\"id\": \"a\", \"query\": \"create a new directory\"}\n\n{\"id\": 7, \"query\": \"what time is it in Tokyo\"}\n",
    )
    .unwrap();
    let out = search(&["--queries", file.to_str().unwrap(), "--top-k", "3"]);
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["id"], "a");
    assert_eq!(rows[1]["id"], 7);
    let first: Vec<&str> = rows[0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(first.len(), 3);
    assert!(
        first.iter().any(|id| id.ends_with("/create_directory")),
        "{first:?}"
    );
    assert!(first.iter().all(|id| id.contains('/')));
}

#[test]
fn single_query_table_and_json() {
    let table = search(&["--query", "get the weather forecast"]);
    assert_eq!(table.lines().count(), 5, "{table}");
    assert!(table.lines().next().unwrap().trim_start().starts_with("1 "));
    let json: Value = serde_json::from_str(&search(&[
        "--query",
        "get the weather forecast",
        "--format",
        "json",
        "--top-k",
        "2",
    ]))
    .unwrap();
    assert_eq!(json["results"].as_array().unwrap().len(), 2);
    assert!(
        json["results"][0]["id"]
            .as_str()
            .unwrap()
            .starts_with("weather/")
    );
}

#[test]
fn baseline_ranker_flag_is_accepted() {
    let out = search(&[
        "--query",
        "create a new directory",
        "--ranker",
        "bm25",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert!(!json["results"].as_array().unwrap().is_empty());
}

#[test]
fn query_or_queries_is_required() {
    cli(["search", "--tools"]).arg(fixtures()).fails();
}

/// `--report` scores labelled queries per source and lists the misses: a query whose gold tool
/// ranks first, one found lower, one no ranking can find, and one with an alternative.
#[test]
fn report_scores_labelled_queries_per_source_with_the_misses() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("labelled.jsonl");
    let lines = [
        r#"{"id": "dir", "source": "fs", "query": "create a new directory", "gold": ["filesystem/create_directory"]}"#,
        r#"{"id": "nope", "source": "fs", "query": "create a new directory", "gold": ["filesystem/no_such_tool"], "gold_alternatives": {"filesystem/no_such_tool": ["filesystem/create_directory"]}}"#,
        r#"{"id": "tz", "source": "time", "query": "what time is it in Tokyo", "gold": ["time/get_current_time"]}"#,
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let path = file.to_str().unwrap();
    let table = search(&["--queries", path, "--report"]);
    assert!(table.starts_with("3 queries, "), "{table}");
    assert!(
        table.contains("(strict)") && table.contains("(lenient)"),
        "{table}"
    );
    assert!(
        table.contains("1 of 3 queries missed at 5:\n- [fs] nope "),
        "{table}"
    );
    let json: Value = serde_json::from_str(&search(&[
        "--queries",
        path,
        "--report",
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(json["overall"]["strict"]["n"], 3);
    assert_eq!(json["sources"]["fs"]["strict"]["hit@5"], 0.5);
    assert_eq!(json["sources"]["fs"]["lenient"]["hit@5"], 1.0);
    assert_eq!(json["sources"]["time"]["strict"]["hit@5"], 1.0);
    assert_eq!(json["misses"][0]["id"], "nope");
    assert_eq!(json["misses"][0]["got"].as_array().unwrap().len(), 5);
}

#[test]
fn report_names_the_line_without_gold_and_needs_queries() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.jsonl");
    std::fs::write(
        &file,
        "{\"query\": \"a\", \"gold\": [\"x/y\"]}\n{\"query\": \"b\"}\n",
    )
    .unwrap();
    let stderr = cli(["search", "--report", "--queries"])
        .arg(&file)
        .arg("--tools")
        .arg(fixtures())
        .fails()
        .stderr;
    assert!(
        stderr.contains("bad.jsonl: line 2: no \"gold\""),
        "{stderr}"
    );
    cli(["search", "--report", "--query", "x", "--tools"])
        .arg(fixtures())
        .fails();
}
