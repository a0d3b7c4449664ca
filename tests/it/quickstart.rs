//! `scripts/quickstart.sh --stdio` as the command of a host's server entry (issue 49): a host's
//! PATH has no cargo, so the entry runs the built binary, and it serves that host on stdio only,
//! binding no HTTP port (the demo policy's listener left out). Started by the Python SDK as a
//! host starts its entry, with the tests' build of the gateway as the built binary.

use serde_json::json;

use crate::harness::{TagGuard, assert_no_leftovers, new_tag, root};
use crate::packaging::{Sdk, host_entry};

/// The PATH's folders that hold no `cargo` (node and the shell tools stay).
fn path_without_cargo() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<_> = std::env::split_paths(&path)
        .filter(|dir| !dir.join("cargo").exists())
        .collect();
    std::env::join_paths(kept)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_stdio_runs_the_built_binary_without_cargo_and_binds_no_port() {
    let tag = new_tag("quickstart-stdio");
    let guard = TagGuard(tag.clone());
    let entry = json!({
        "command": root().join("scripts/quickstart.sh"),
        "args": ["--stdio"],
        "env": {
            "PATH": path_without_cargo(),
            "MCP_BUDGET_BIN": env!("CARGO_BIN_EXE_mcp-budget"),
            "MCPB_IT_TAG": tag,
            "MCP_BUDGET_LOG": "warn",
        },
    });
    let (report, stderr) = host_entry(Sdk::Python, &entry, "get-env").await;
    assert!(
        report["text"]
            .as_str()
            .unwrap_or_default()
            .contains("\"PATH\""),
        "{report}\n{stderr}"
    );
    assert!(stderr.contains("serving MCP on stdio"), "{stderr}");
    assert!(
        !stderr.contains("listening on"),
        "the stdio entry bound a port: {stderr}"
    );
    assert_no_leftovers(&tag).await;
    drop(guard);
}
