//! The `[discover]` keys that tune search, in the gateway binary with the real
//! `@modelcontextprotocol/server-memory` behind it and everything deferred:
//! - `usage_prior`: the tools a deployment calls (its `[budget] usage_file`) rank higher in
//!   `search_tools` among close candidates; the same search with the prior on and off;
//! - `vocabulary_file`: the words a deployment's users say find the tools' words.

use serde_json::json;

use crate::harness::{Gateway, Mode, Up, node_bin};

/// "remove relations or observations" ranks `delete_relations` first on its words alone, with
/// `delete_observations` close behind (within the prior's 15 %).
const QUERY: &str = "remove relations or observations";

/// The tool names `search_tools` answers `QUERY` with, best first, from a gateway whose usage
/// file says `delete_observations` was called 50 times, with `discover` as its `[discover]`.
async fn ranked(test: &str, discover: &str) -> Vec<String> {
    ranked_for(test, discover, QUERY).await
}

/// The tool names `search_tools` answers `query` with, as [`ranked`].
async fn ranked_for(test: &str, discover: &str, query: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let usage = dir.path().join("usage.json");
    std::fs::write(&usage, r#"{"memory/delete_observations": 50}"#).unwrap();
    let policy = format!(
        "[budget]\nenabled = true\nmode = \"progressive\"\nusage_file = {:?}\n[discover]\n{discover}\n",
        usage.display().to_string()
    );
    let ups = [Up::stdio("memory", &node_bin("mcp-server-memory"), &[])];
    let mut gw = Gateway::builder(test, Mode::Stdio)
        .policy(&policy)
        .start(&ups)
        .await;
    gw.client().initialize().await;
    let found = gw
        .client()
        .call_tool("search_tools", json!({"query": query}))
        .await;
    gw.stop_and_check().await;
    found["result"]["structuredContent"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{found}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_called_tool_passes_a_close_one_and_the_prior_turns_off() {
    let off = ranked("prior-off", "usage_prior = 0").await;
    assert_eq!(
        off[..2],
        ["memory__delete_relations", "memory__delete_observations"],
        "on their words alone: {off:?}"
    );
    let on = ranked("prior-on", "").await;
    assert_eq!(
        on[..2],
        ["memory__delete_observations", "memory__delete_relations"],
        "the default prior lifts the called tool: {on:?}"
    );
    let others = |list: &[String]| -> Vec<String> { list[2..].to_vec() };
    assert_eq!(others(&on), others(&off), "nothing else moves");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vocabulary_file_finds_the_tools_by_the_users_words() {
    let query = "forget a fact about someone";
    let plain = ranked_for("vocabulary-off", "", query).await;
    assert!(
        plain.is_empty(),
        "no word of the query is a tool's: {plain:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let words = dir.path().join("words.json");
    std::fs::write(
        &words,
        r#"{"forget": ["delete", "remove"], "fact": "observation"}"#,
    )
    .unwrap();
    let discover = format!("vocabulary_file = {:?}", words.display().to_string());
    let found = ranked_for("vocabulary-on", &discover, query).await;
    assert_eq!(
        found.first().map(String::as_str),
        Some("memory__delete_observations"),
        "{found:?}"
    );
}
