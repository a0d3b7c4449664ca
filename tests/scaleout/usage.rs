//! Shared usage learning (`[budget] usage_file` with `[state] backend = "redis"`, issue 34
//! item 4): three replicas, each with its own usage file, each called for tools of its own;
//! after each relearn every replica lists the same bytes, the tools called through any replica
//! among them. With `memory` the same traffic leaves the replicas listing
//! different bytes (each learned only the calls it served): the check can fail. And
//! `promote_on_use`: a tool a session invoked through one replica is listed for it by all.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{self, Up, free_port};
use super::{Haproxy, Replica, TURN, open_session, post_mcp};

/// Tools of `server-everything` that need no client capability, any of which the budget may
/// defer.
const CANDIDATES: [&str; 8] = [
    "echo",
    "get-sum",
    "get-env",
    "get-tiny-image",
    "get-annotated-message",
    "get-structured-content",
    "get-resource-links",
    "toggle-simulated-logging",
];

/// Seconds between relearns (the store's epochs).
const RELEARN_SECS: u64 = 2;

/// A replica's policy in its own folder of `dir`: `server-everything`, sealed ids, the budget
/// listing 4 tools and searching the rest, its own usage file relearned every
/// [`RELEARN_SECS`], then `state`.
fn usage_policy(dir: &Path, i: usize, tag: &str, state: &str) -> PathBuf {
    let dir = dir.join(format!("r{i}"));
    std::fs::create_dir_all(&dir).unwrap();
    let usage = dir.join("usage.json");
    let downstream = format!(
        "max_sessions_per_client = 1000\n\n\
         [sessions]\nseal_key_env = \"MCP_BUDGET_SEAL_KEY\"\n\n\
         [budget]\nenabled = true\nmode = \"auto\"\nmax_tools = 6\n\
         usage_file = {:?}\nrelearn_secs = {RELEARN_SECS}\n{state}",
        usage.display().to_string()
    );
    harness::policy(&dir, tag, &downstream, &[Up::everything("e")])
}

/// Three replicas, each with its policy of [`usage_policy`] and `state`: they and their ports.
async fn start_three(
    dir: &Path,
    tag: &str,
    state: &str,
    env: &[(&'static str, String)],
) -> (Vec<Replica>, [u16; 3]) {
    let ports = [free_port(), free_port(), free_port()];
    let started = (0..3).map(|i| {
        let policy = usage_policy(dir, i, tag, state);
        async move { Replica::start_with(&policy, ports[i], tag, env).await }
    });
    (futures::future::join_all(started).await, ports)
}

/// The `tools/list` result's bytes a replica gives session `session`.
async fn listed_bytes(port: u16, session: &str) -> String {
    let url = format!("http://127.0.0.1:{port}/mcp");
    let list = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"});
    let (message, _) = post_mcp(&url, Some(session), &list).await.unwrap();
    message["result"].to_string()
}

fn names(result: &str) -> Vec<String> {
    let value: Value = serde_json::from_str(result).unwrap();
    value["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// Calls `tool` `n` times on `session` through `url`.
async fn call(url: &str, session: &str, tool: &str, n: usize) {
    for k in 0..n {
        let body = json!({"jsonrpc": "2.0", "id": format!("{tool}-{k}"), "method": "tools/call",
                          "params": {"name": format!("e__{tool}"), "arguments": arguments(tool)}});
        let (message, _) = post_mcp(url, Some(session), &body).await.unwrap();
        assert!(message.get("result").is_some(), "{tool}: {message}");
    }
}

fn arguments(tool: &str) -> Value {
    match tool {
        "echo" => json!({"message": "hi"}),
        "get-sum" => json!({"a": 1, "b": 2}),
        "get-annotated-message" => json!({"messageType": "success"}),
        "get-structured-content" => json!({"location": "New York"}),
        "get-resource-links" => json!({"count": 1}),
        _ => json!({}),
    }
}

/// What one run saw: per round, each replica's listed bytes after the relearn.
async fn usage_run(backend: &str) -> (Vec<Vec<String>>, Vec<String>) {
    let tag = harness::new_tag(&format!("scaleout-usage-{backend}"));
    let _guard = harness::TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let (redis, env, state) = super::backend_of(backend, &tag).await;
    let (gateways, ports) = start_three(dir.path(), &tag, &state, &env).await;
    let haproxy = Haproxy::start(&ports, &tag).await;
    let session = open_session(&haproxy.url()).await;
    let first = names(&listed_bytes(ports[0], &session).await);
    let deferred: Vec<&str> = CANDIDATES
        .into_iter()
        .filter(|t| !first.contains(&format!("e__{t}")))
        .collect();
    assert!(deferred.len() >= 3, "the budget defers tools: {first:?}");
    let mut rounds = Vec::new();
    // Each replica gets calls of its own tool, the worst case for sharing: round 0, replica `i`
    // calls `deferred[i]` 3 times; round 1, `deferred[(i + 1) % 3]` 5 times more.
    for (round, times) in [(0, 3), (1, 5)] {
        for (i, port) in ports.iter().enumerate() {
            let url = format!("http://127.0.0.1:{port}/mcp");
            call(&url, &session, deferred[(i + round) % 3], times).await;
        }
        // Two relearns later every replica has relearned past the calls.
        tokio::time::sleep(Duration::from_secs(2 * RELEARN_SECS) + Duration::from_millis(500))
            .await;
        let mut lists = Vec::new();
        for port in ports {
            lists.push(listed_bytes(port, &session).await);
        }
        rounds.push(lists);
    }
    drop(haproxy);
    super::stop_all(gateways, redis, &tag).await;
    let called = deferred[..3].iter().map(|t| format!("e__{t}")).collect();
    (rounds, called)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_relearn_the_same_usage_and_list_the_same_bytes_memory_does_not() {
    let _turn = TURN.lock().await;
    let (rounds, called) = usage_run("redis").await;
    for (round, lists) in rounds.iter().enumerate() {
        assert!(
            lists.iter().all(|l| l == &lists[0]),
            "round {round}: the replicas list different bytes:\n{lists:#?}"
        );
    }
    // Each tool was called through one replica only, and every replica lists all three.
    let listed = names(&rounds[0][0]);
    for tool in &called {
        assert!(
            listed.contains(tool),
            "{tool}, called 3 times through one replica, is not listed: {listed:?}"
        );
    }
    eprintln!("redis: lists byte-identical on 3 replicas after each of 2 relearns");
    let (rounds, _) = usage_run("memory").await;
    let differ = rounds
        .iter()
        .filter(|lists| lists.iter().any(|l| l != &lists[0]))
        .count();
    eprintln!("memory: {differ} of 2 rounds with lists that differ between replicas");
    assert!(
        differ > 0,
        "without a store each replica learns its own calls: {rounds:#?}"
    );
}

/// The `tools/list_changed` notifications a GET stream on `session` through `url` brings within
/// `limit`.
async fn list_changes(url: String, session: String, limit: Duration) -> usize {
    let resp = harness::http_client()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "the GET stream opens");
    let mut resp = resp;
    let (mut text, deadline) = (String::new(), tokio::time::Instant::now() + limit);
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(deadline, resp.chunk()).await {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text.matches("notifications/tools/list_changed").count()
}

/// `promote_on_use`: a tool a session invoked through one replica is listed for that session
/// by every replica, in the same bytes, and the replica holding the session's GET stream tells
/// it; without a store only the replica that saw the call lists it.
async fn promote_run(backend: &str) -> (Vec<String>, usize) {
    let tag = harness::new_tag(&format!("scaleout-promote-{backend}"));
    let _guard = harness::TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let (redis, env, state) = super::backend_of(backend, &tag).await;
    let state = format!("{state}\n[discover]\npromote_on_use = true\n");
    let (gateways, ports) = start_three(dir.path(), &tag, &state, &env).await;
    let url = |i: usize| format!("http://127.0.0.1:{}/mcp", ports[i]);
    let session = open_session(&url(0)).await;
    let first = names(&listed_bytes(ports[0], &session).await);
    let deferred = CANDIDATES
        .into_iter()
        .find(|t| !first.contains(&format!("e__{t}")))
        .unwrap();
    // The session's stream on replica 2; the call through replica 1.
    let stream = tokio::spawn(list_changes(
        url(2),
        session.clone(),
        Duration::from_secs(3),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let invoke = json!({"jsonrpc": "2.0", "id": "i", "method": "tools/call", "params": {
        "name": "invoke_tool",
        "arguments": {"name": format!("e__{deferred}"), "arguments": arguments(deferred)}}});
    let (answer, _) = post_mcp(&url(1), Some(&session), &invoke).await.unwrap();
    assert!(answer.get("result").is_some(), "{answer}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // With a store the replicas converge on the same bytes; how soon depends on the machine's
    // load (once, under the whole suite, 300 ms were not enough), so they get up to 5 s to,
    // and must then agree. Without one they are read once.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut lists = Vec::new();
    loop {
        lists.clear();
        for &port in &ports {
            lists.push(listed_bytes(port, &session).await);
        }
        let agree = lists.iter().all(|l| l == &lists[0]);
        if agree || backend != "redis" || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let notified = stream.await.unwrap();
    super::stop_all(gateways, redis, &tag).await;
    let promoted = format!("e__{deferred}");
    let listing: Vec<String> = lists
        .iter()
        .map(|l| {
            if names(l).contains(&promoted) {
                "listed".into()
            } else {
                "not listed".into()
            }
        })
        .collect();
    assert!(
        lists.iter().all(|l| l == &lists[0]) || backend != "redis",
        "{promoted}: different bytes {listing:?}"
    );
    (listing, notified)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_promoted_through_one_replica_is_listed_by_all_and_announced_on_the_stream() {
    let _turn = TURN.lock().await;
    let (listing, notified) = promote_run("redis").await;
    eprintln!(
        "redis: promoted tool {listing:?} on the 3 replicas; {notified} list_changed on the stream's replica"
    );
    assert_eq!(listing, ["listed", "listed", "listed"]);
    assert!(notified >= 1, "the stream's replica announced it");
    let (listing, notified) = promote_run("memory").await;
    eprintln!(
        "memory: promoted tool {listing:?} on the 3 replicas; {notified} list_changed on the stream's replica"
    );
    assert_eq!(listing, ["not listed", "listed", "not listed"]);
    assert_eq!(
        notified, 0,
        "without a store the stream's replica never hears of it"
    );
}
