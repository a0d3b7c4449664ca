//! The semantic reranker in the real gateway: `[discover] embedding_model` names the real
//! all-MiniLM-L6-v2 (installed by `scripts/install-test-deps.sh`), three saved toolsets of the
//! dev catalog are served by `tests/peers/saved_server.py`, everything is deferred. A
//! paraphrased dev-set query (`mcptoolbench++/filesystem`: [`QUERY`], gold
//! `filesystem/list_directory`) is missed at 1 by the lexical ranker (it puts
//! `github/get_file_contents` first) and found at 1 once the catalog is embedded.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, cli, peer_file, root};

const QUERY: &str = "What files and directories, along with their types, are present in the path ./test_project_root/tests?";

/// `saved_server.py` is plain Python (no SDK): any `python3` on the `PATH` runs it.
fn python3() -> String {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("python3"))
        .find(|p| p.is_file())
        .expect("python3 on the PATH")
        .display()
        .to_string()
}

fn saved(server: &str) -> Up {
    let file = root().join(format!("tests/fixtures/toolsets/{server}.json"));
    Up::stdio(
        server,
        &python3(),
        &[&peer_file("saved_server.py"), &file.to_string_lossy()],
    )
}

fn first_hit(answer: &Value) -> String {
    answer["result"]["structuredContent"]["tools"][0]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("no hit: {answer}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paraphrase_the_lexical_ranker_misses_is_found_once_the_catalog_is_embedded() {
    let model = root().join("tests/peers/models/all-MiniLM-L6-v2");
    if !model.join("model.safetensors").is_file() {
        println!(
            "SKIPPED: no model in {} (run scripts/install-test-deps.sh)",
            model.display()
        );
        return;
    }
    // What the lexical ranker alone makes of it, on the same tools.
    let servers = ["filesystem", "github", "desktop-commander"];
    let files: Vec<_> = servers
        .iter()
        .map(|s| root().join(format!("tests/fixtures/toolsets/{s}.json")))
        .collect();
    let tools = mcp_budget::catalog::load_saved(&files).unwrap();
    let index = mcp_budget::search::SearchIndex::build(&tools);
    let lexical = tools[index.search(QUERY, 1)[0].index].id();
    assert_eq!(lexical, "github/get_file_contents");

    let cache = tempfile::tempdir().unwrap();
    let policy = format!(
        "\n[budget]\nmode = \"progressive\"\n\n[discover]\nembedding_model = {:?}\nembedding_cache_dir = {:?}\n",
        model.display().to_string(),
        cache.path().display().to_string(),
    );
    let ups: Vec<Up> = servers.iter().map(|s| saved(s)).collect();
    let mut gw = Gateway::builder("semantic-e2e", Mode::Stdio)
        .policy(&policy)
        .start(&ups)
        .await;
    gw.client().initialize().await;
    let listed = gw.client().request("tools/list", json!({})).await;
    assert_eq!(
        listed["result"]["tools"][0]["name"], "search_tools",
        "{listed}"
    );
    // Served (lexically, at once) while the catalog is being embedded; fused once it is.
    let started = Instant::now();
    let fused = loop {
        let answer = gw
            .client()
            .call_tool("search_tools", json!({"query": QUERY}))
            .await;
        let first = first_hit(&answer);
        if first != "github__get_file_contents" {
            break first;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "still lexical after 2 minutes: {answer}\n{}",
            gw.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(fused, "filesystem__list_directory");
    let log = gw.log();
    assert!(log.contains("Embedding model loaded"), "{log}");
    assert!(log.contains("Catalog embedded"), "{log}");
    // The vectors were saved for the next start.
    let saved: Vec<_> = std::fs::read_dir(cache.path()).unwrap().collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    gw.stop_and_check().await;
}

/// `inspect --embedding-model` embeds the catalog now, says what that cost, and leaves the
/// vectors in the cache `serve` reads: a second run embeds nothing.
#[test]
fn inspect_with_a_model_reports_the_reranker_cost_and_warms_the_cache() {
    let model = root().join("tests/peers/models/all-MiniLM-L6-v2");
    if !model.join("model.safetensors").is_file() {
        println!("SKIPPED: no model in {}", model.display());
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let tools = root().join("tests/fixtures/toolsets/filesystem.json");
    let inspect = |format: &str| {
        cli(["inspect", "--tools"])
            .arg(&tools)
            .arg("--embedding-model")
            .arg(&model)
            .arg("--embedding-cache-dir")
            .arg(cache.path())
            .arg("--format")
            .arg(format)
            .ok()
            .stdout
    };
    let first: Value = serde_json::from_str(&inspect("json")).unwrap();
    let cost = &first["reranker"];
    let n = cost["tools"].as_u64().unwrap();
    assert!(n > 5, "{cost}");
    assert_eq!(cost["embedded"], n, "{cost}");
    assert_eq!(cost["from_cache"], 0, "{cost}");
    let table = inspect("table");
    assert!(
        table.contains(&format!("{n} tools, 0 embedded"))
            && table.contains(&format!("{n} from the cache")),
        "{table}"
    );
}
