//! Native progressive disclosure end to end (`[discover] native_disclosure = true`): the
//! gateway binary with `mcp-server-time` and `server-everything` behind it, driven by the
//! project's own raw JSON-RPC client (no SDK has `tools/catalog` / `tools/describe` yet);
//! with code mode on, `run_code` is listed, catalogued, described and run for such a client.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::harness::{Gateway, Mode, Up, first_text};

const POLICY: &str = "[budget]\nmode = \"progressive\"\n\n[discover]\nnative_disclosure = true\n";

fn sha256_jcs(tool: &Value) -> String {
    let digest = Sha256::digest(mcp_budget::canonical::jcs(tool).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

async fn start(test: &str) -> Gateway {
    start_with(test, POLICY).await
}

async fn start_with(test: &str, policy: &str) -> Gateway {
    Gateway::builder(test, Mode::Stdio)
        .policy(policy)
        .start(&[Up::time("time"), Up::everything("everything")])
        .await
}

/// `initialize` (declaring progressive disclosure) and `notifications/initialized`.
async fn declare(client: &mut crate::harness::RawClient) {
    let init = client
        .request(
            "initialize",
            json!({"protocolVersion": "2025-06-18",
                   "capabilities": {"tools": {"progressiveDisclosure": true}},
                   "clientInfo": {"name": "it-native", "version": "0"}}),
        )
        .await;
    assert_eq!(
        init["result"]["capabilities"]["tools"]["progressiveDisclosure"], true,
        "{init}"
    );
    client
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declaring_client_gets_catalog_and_describe_instead_of_meta_tools() {
    let mut gw = start("native-catalog").await;
    let client = gw.client();
    declare(client).await;

    let list = client.request("tools/list", json!({})).await;
    let listed = list["result"]["tools"].as_array().expect("tools").clone();
    let names: Vec<&str> = listed.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"time__get_current_time"), "{names:?}");
    assert!(names.contains(&"everything__echo"), "{names:?}");
    assert!(!names.contains(&"search_tools"), "no meta-tools: {names:?}");

    let catalog = client.request("tools/catalog", json!({})).await;
    let entries = catalog["result"]["tools"].as_array().expect("entries");
    let entry_names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(entry_names, names, "the same set as tools/list");
    for (entry, tool) in entries.iter().zip(&listed) {
        assert!(entry.get("inputSchema").is_none(), "{entry}");
        assert!(!entry["summary"].as_str().unwrap().is_empty(), "{entry}");
        assert_eq!(entry["schemaHash"], sha256_jcs(tool), "{}", tool["name"]);
    }

    let wanted = json!(["everything__echo", "time__get_current_time"]);
    let described = client
        .request("tools/describe", json!({"names": wanted}))
        .await;
    let tools = described["result"]["tools"].as_array().expect("tools");
    for (tool, name) in tools.iter().zip(wanted.as_array().unwrap()) {
        assert_eq!(&tool["name"], name);
        let from_list = listed.iter().find(|t| &t["name"] == name).unwrap();
        assert_eq!(
            serde_json::to_string(tool).unwrap(),
            serde_json::to_string(from_list).unwrap(),
            "describe gives what tools/list gives"
        );
    }

    let unknown = client
        .request(
            "tools/describe",
            json!({"names": ["everything__echo", "everything__nope"]}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    assert_eq!(
        unknown["error"]["data"]["unknownNames"],
        json!(["everything__nope"])
    );

    let found = client
        .request("tools/catalog", json!({"query": "current time"}))
        .await;
    assert_eq!(
        found["result"]["tools"][0]["name"], "time__get_current_time",
        "{found}"
    );

    // A described tool is called directly, as any listed tool.
    let echoed = client
        .call_tool("everything__echo", json!({"message": "native"}))
        .await;
    assert_eq!(first_text(&echoed), "Echo: native");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_capability_keeps_the_meta_tools() {
    let mut gw = start("native-plain").await;
    let client = gw.client();
    let init = client.initialize().await;
    assert!(
        init["result"]["capabilities"]["tools"]
            .get("progressiveDisclosure")
            .is_none(),
        "{init}"
    );
    let list = client.request("tools/list", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"search_tools"), "{names:?}");
    let catalog = client.request("tools/catalog", json!({})).await;
    assert_eq!(catalog["error"]["code"], -32601, "{catalog}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_code_mode_a_declaring_client_is_offered_run_code_and_runs_it() {
    let policy = format!("{POLICY}code_mode = true\n");
    let mut gw = start_with("native-code", &policy).await;
    let client = gw.client();
    declare(client).await;
    let list = client.request("tools/list", json!({})).await;
    let listed = list["result"]["tools"].as_array().expect("tools").clone();
    let code = listed
        .iter()
        .find(|t| t["name"] == "run_code")
        .unwrap_or_else(|| panic!("run_code is listed: {list}"))
        .clone();
    assert!(listed.iter().all(|t| t["name"] != "search_tools"), "{list}");

    let catalog = client.request("tools/catalog", json!({})).await;
    let entries = catalog["result"]["tools"].as_array().expect("entries");
    assert_eq!(entries.len(), listed.len(), "the same set as tools/list");
    let entry = entries
        .iter()
        .find(|e| e["name"] == "run_code")
        .unwrap_or_else(|| panic!("run_code is catalogued: {catalog}"));
    assert_eq!(entry["tags"], json!(["mcp-budget/meta"]), "{entry}");
    assert_eq!(entry["schemaHash"], sha256_jcs(&code), "{entry}");

    let described = client
        .request("tools/describe", json!({"names": ["run_code"]}))
        .await;
    assert_eq!(described["result"]["tools"], json!([code]), "{described}");
    assert!(
        code["inputSchema"]["required"] == json!(["code"]),
        "the full definition: {code}"
    );

    let ran = client
        .call_tool(
            "run_code",
            json!({"code": "const r = tools.call('everything__echo', {message: 'from a script'}); return r.toUpperCase()"}),
        )
        .await;
    assert_eq!(first_text(&ran), "\"ECHO: FROM A SCRIPT\"", "{ran}");
    gw.stop_and_check().await;
}
