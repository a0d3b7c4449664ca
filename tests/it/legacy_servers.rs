//! Deprecated real servers: server-github (protocol 2024-11-05) and server-gitlab (inputSchema
//! without `"type"`).

use serde_json::{Value, json};

use crate::harness::{
    Gateway, Mode, TagGuard, Up, assert_no_leftovers, gateway_stdio_args, new_tag, node_bin,
    policy, python_client, python_client_output, tool_names,
};

fn github() -> Up {
    Up::stdio("github", &node_bin("mcp-server-github"), &[])
        .env("GITHUB_PERSONAL_ACCESS_TOKEN", "dummy")
}

fn gitlab() -> Up {
    Up::stdio("gitlab", &node_bin("mcp-server-gitlab"), &[])
        .env("GITLAB_PERSONAL_ACCESS_TOKEN", "dummy")
        .env("GITLAB_API_URL", "http://127.0.0.1:9/api/v4")
}

/// server-github answers protocol 2024-11-05 to the gateway's 2025-11-25: it is served anyway,
/// and its 26 tools are listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_github_on_protocol_2024_11_05_is_listed() {
    let mut gw = Gateway::start("github", Mode::Stdio, &[github()]).await;
    assert!(
        gw.log().contains("protocol 2024-11-05"),
        "startup summary: {}",
        gw.log()
    );
    let c = gw.client();
    c.initialize().await;
    let list = c.request("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 26, "{list}");
    assert!(tools.iter().any(|t| t["name"] == "github__create_issue"));
    gw.stop_and_check().await;
}

/// server-gitlab's schemas lack `"type": "object"`; the gateway repairs them, so the strict
/// Python client accepts the whole list (it rejects it when talking to gitlab directly).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_gitlab_schemas_are_repaired_for_the_python_client() {
    let tag = new_tag("gitlab");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path(), &tag, "", &[gitlab(), github()]);
    let args = gateway_stdio_args(&policy);
    let mut target = vec!["stdio"];
    target.extend(args.iter().map(String::as_str));
    let report = python_client(&tag, "legacy", &target, &json!({})).await;
    let names = tool_names(&report);
    let gitlab: Vec<&Value> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap().starts_with("gitlab__"))
        .collect();
    assert_eq!(gitlab.len(), 9, "{names:?}");
    for tool in &gitlab {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        // Only "type" was added: the rest of the schema is the server's.
        assert!(tool["inputSchema"].get("$schema").is_some(), "{tool}");
    }
    assert_eq!(
        names.iter().filter(|n| n.starts_with("github__")).count(),
        26
    );

    // Without the gateway the same client refuses gitlab's whole list.
    let direct = python_client_output(
        &tag,
        "legacy",
        &[
            "stdio",
            "env",
            "GITLAB_PERSONAL_ACCESS_TOKEN=dummy",
            &node_bin("mcp-server-gitlab"),
        ],
        &json!({}),
    )
    .await;
    assert!(!direct.status.success());
    let stderr = String::from_utf8_lossy(&direct.stderr);
    assert!(stderr.contains("inputSchema.type"), "{stderr}");
    assert_no_leftovers(&tag).await;
}
