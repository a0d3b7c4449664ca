//! Embedding (issue 36): the two examples run as they ship (`examples/embed_layers.rs`,
//! `examples/embed_rmcp.rs`, included here so the tests run the examples' own code), and the
//! standalone gateway aggregating an in-process service beside its other upstreams.

#[allow(dead_code, reason = "the example's main")]
#[path = "../../examples/embed_layers.rs"]
mod embed_layers;

#[allow(dead_code, reason = "the example's main")]
#[path = "../../examples/embed_rmcp.rs"]
mod embed_rmcp;

use std::sync::Arc;
use std::time::Duration;

use mcp_budget::context::{Caller, McpRequest, Session};
use mcp_budget::embed::Request;
use mcp_budget::jsonrpc::Message;
use mcp_budget::policy::{InProcess, Policy};
use mcp_budget::server::{READY_TIMEOUT, Server};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

#[tokio::test]
async fn embed_layers_example_lists_meta_tools_and_invokes_through_the_aggregator() {
    let out = embed_layers::run().await.unwrap();
    assert!(
        out.starts_with("tools/list: 117 tools learned from the aggregator"),
        "{out}"
    );
    for meta in ["  search_tools\n", "  get_tool_schema\n", "  invoke_tool\n"] {
        assert!(out.contains(meta), "{meta:?} in {out}");
    }
    assert!(!out.contains("  list_issues\n"), "deferred: {out}");
    assert!(
        out.contains(
            r#"invoke_tool list_issues: my-aggregator ran list_issues with {"owner":"octo-org","repo":"hello"}"#
        ),
        "{out}"
    );
    assert!(
        out.ends_with("calls that reached the aggregator: 1\n"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn embed_rmcp_example_serves_its_in_process_rmcp_server_to_an_rmcp_client() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let served = tokio::spawn(embed_rmcp::serve(listener, shutdown.clone()));

    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("embed-rmcp-test", "0.1.0"),
    );
    let client = tokio::time::timeout(
        Duration::from_secs(30),
        config.serve(StreamableHttpClientTransport::from_uri(url)),
    )
    .await
    .unwrap()
    .unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["notes__shout", "notes__word_count"]);
    let args = json!({"text": "three little words"});
    let result = client
        .call_tool(
            CallToolRequestParams::new("notes__word_count")
                .with_arguments(args.as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    let text = serde_json::to_value(&result.content).unwrap();
    assert_eq!(text[0]["text"], "3 words", "{text}");
    client.cancel().await.unwrap();

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), served)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// A message through `server`'s stack, from a session of its own.
async fn ask(server: &Server, message: Value) -> Value {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let caller = Caller::new(Arc::new(Session::new("s1", tx)));
    let message = Message::from_value(&message).unwrap();
    let answer = server
        .service()
        .oneshot(McpRequest::new(message, caller))
        .await
        .unwrap();
    answer.unwrap().to_value()
}

#[tokio::test]
async fn the_gateway_aggregates_an_in_process_service_and_fails_its_errors_at_once() {
    let aggregator = embed_layers::Aggregator::github();
    let calls = aggregator.calls.clone();
    let mut policy = Policy::default();
    policy.budget.enabled = false;
    let github = InProcess::service(aggregator.map_request(Request::new));
    policy.add_in_process("github", github).unwrap();
    let failing = InProcess::service(tower::service_fn(|msg: Value| async move {
        if msg["method"] == "tools/call" {
            return Err::<Option<Value>, _>(tower::BoxError::from("the backend is gone"));
        }
        Ok(embed_layers::Aggregator::github().answer(&msg))
    }));
    policy.add_in_process("flaky", failing).unwrap();
    assert!(
        policy
            .add_in_process(
                "github",
                InProcess::service(tower::service_fn(|_: Value| async {
                    Ok::<_, tower::BoxError>(None)
                }))
            )
            .is_err(),
        "one name, one upstream"
    );
    let shutdown = CancellationToken::new();
    let server = Server::start(policy, READY_TIMEOUT, shutdown.clone()).await;

    // Both lists, every page, namespaced as any upstream's.
    assert_eq!(server.catalog().tools().len(), 2 * 117);
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "github__get_me", "arguments": {}}});
    let answer = ask(&server, call).await;
    assert_eq!(answer["id"], 5);
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "my-aggregator ran get_me with {}"
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 1);

    let call = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": "flaky__get_me", "arguments": {}}});
    let answer = tokio::time::timeout(Duration::from_secs(5), ask(&server, call))
        .await
        .expect("failed at once, not at the timeout");
    assert_eq!(answer["id"], 6);
    assert_eq!(
        answer["error"]["data"]["type"],
        "mcp_budget.upstream.unavailable"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the backend is gone"),
        "{answer}"
    );
    server.stop().await;
}

/// A newline-delimited JSON-RPC server on `stream` answering as `Aggregator::github` does;
/// with `hang_up_after_list`, it ends the connection once it has answered `tools/list`.
async fn line_server(stream: tokio::io::DuplexStream, hang_up_after_list: bool) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read).lines();
    let aggregator = embed_layers::Aggregator::github();
    while let Ok(Some(line)) = lines.next_line().await {
        let message: Value = serde_json::from_str(&line).unwrap();
        if let Some(answer) = aggregator.answer(&message) {
            let mut bytes = serde_json::to_vec(&answer).unwrap();
            bytes.push(b'\n');
            write.write_all(&bytes).await.unwrap();
        }
        let listed = message["method"] == "tools/list" && message["params"]["cursor"] == "100";
        if hang_up_after_list && listed {
            return;
        }
    }
}

#[tokio::test]
async fn an_in_process_stream_that_ends_is_connected_again() {
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = connections.clone();
    let server = InProcess::streams(move || {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let first = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        tokio::spawn(line_server(theirs, first));
        tokio::io::split(ours)
    });
    let mut policy = Policy::default();
    policy.budget.enabled = false;
    policy.add_in_process("lines", server).unwrap();
    let shutdown = CancellationToken::new();
    let server = Server::start(policy, READY_TIMEOUT, shutdown.clone()).await;
    // The first connection hangs up after its list; the supervisor connects again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while connections.load(std::sync::atomic::Ordering::SeqCst) < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not connected again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server.catalog().tools().len(), 117, "its tools stay known");
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "lines__get_me", "arguments": {}}});
    let mut answer = ask(&server, call.clone()).await;
    while answer.get("error").is_some() && tokio::time::Instant::now() < deadline {
        // Ready again only after the new connection's handshake.
        tokio::time::sleep(Duration::from_millis(50)).await;
        answer = ask(&server, call.clone()).await;
    }
    assert_eq!(
        answer["result"]["content"][0]["text"], "my-aggregator ran get_me with {}",
        "{answer}"
    );
    server.stop().await;
}

/// The rmcp server of `examples/embed_rmcp.rs` straight under the layers, no gateway: the
/// inner service is [`mcp_budget::embed::Connected`] over its in-process duplex. The host sees
/// its tools (full, two fit the budget) and a call reaches it under the tool's own name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_server_in_process_sits_directly_under_the_layers() {
    use mcp_budget::embed::{Connected, EmbedLayer, Request};
    use tower::ServiceExt;
    let connected = Connected::start("notes", embed_rmcp::notes_in_process());
    assert!(
        connected.wait_ready(Duration::from_secs(10)).await,
        "the handshake"
    );
    let service = tower::ServiceBuilder::new()
        .layer(EmbedLayer::new(mcp_budget::policy::Policy::default()))
        .service(connected.clone());
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let listed = service
        .clone()
        .oneshot(Request::new(list))
        .await
        .unwrap()
        .unwrap();
    let mut names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["shout", "word_count"], "{listed}");
    let call = json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                      "params": {"name": "shout", "arguments": {"text": "hi there"}}});
    let answer = service
        .clone()
        .oneshot(Request::new(call))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer["id"], "c", "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "HI THERE",
        "{answer}"
    );
    // An unknown tool is the server's own error, answered once.
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                      "params": {"name": "nope", "arguments": {}}});
    let answer = service.oneshot(Request::new(call)).await.unwrap().unwrap();
    assert_eq!(answer["id"], 9, "{answer}");
    assert!(
        answer.get("error").is_some() || answer["result"]["isError"] == true,
        "{answer}"
    );
    assert!(connected.notifications().is_some(), "taken once");
    assert!(connected.notifications().is_none());
}
