//! Fairness between two API-key clients of one gateway (2025-era streamable HTTP, the real
//! `@modelcontextprotocol/server-everything` over stdio behind it): while client A keeps 40
//! slow calls in flight (with progress tokens, so progress flows too), client B's fast `echo`
//! calls stay within twice their idle p50 plus a floor, under the `[limits]` a deployment
//! would set. The full measurement (100 slow calls, with and without `[limits]`) is
//! `scripts/fairness.py`; figures in `docs/benchmarks.md`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{self, ACCEPT_BOTH, Gateway, Mode, Up, http_client};

const A: &str = "k-fair-a-1d9e";
const B: &str = "k-fair-b-7c2a";

/// Two clients with every right on `e`, and per-client limits: A may hold 16 calls at once,
/// the rest of its flood waits in its own queue.
const POLICY: &str = r#"
[[client]]
name = "a"
api_key_env = "FAIR_A_KEY"
allow = ["e/*"]

[[client]]
name = "b"
api_key_env = "FAIR_B_KEY"
allow = ["e/*"]

[limits]
in_flight = 16
queue = 128
queue_ms = 30000
"#;

/// Absorbs a loaded CI machine: the debug gateway, node and the test share 2 cores with other
/// builds, where one scheduling delay is 10–20 ms; B's idle p50 is 3–7 ms there, so 2× alone
/// would fail on noise, while a queue behind A's flood (3 s calls) costs seconds, far above it.
const FLOOR_MS: f64 = 25.0;

/// A POST of `key`'s client (on `session` once it has one): the session id given, and the
/// JSON-RPC answer.
async fn post(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    session: Option<&str>,
    body: &Value,
) -> (Option<String>, Value) {
    let mut headers = vec![("x-api-key", key)];
    if let Some(s) = session {
        headers.extend([
            ("mcp-session-id", s),
            ("mcp-protocol-version", "2025-06-18"),
        ]);
    }
    let answer = harness::post(http, url, ACCEPT_BOTH, &headers, body).await;
    (answer.session(), answer.json())
}

async fn session(http: &reqwest::Client, url: &str, key: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "fairness", "version": "0"}}});
    let (sid, body) = post(http, url, key, None, &init).await;
    assert!(body["result"].is_object(), "{body}");
    let sid = sid.expect("a 2025-era session id");
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(http, url, key, Some(&sid), &done).await;
    sid
}

/// `n` sequential `echo` calls of B; their latencies in ms.
async fn echoes(http: &reqwest::Client, url: &str, sid: &str, n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let call = json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
            "params": {"name": "e__echo", "arguments": {"message": format!("b {i}")}}});
        let start = Instant::now();
        let (_, body) = post(http, url, B, Some(sid), &call).await;
        out.push(start.elapsed().as_secs_f64() * 1000.0);
        assert!(body["result"]["content"].is_array(), "{body}");
    }
    out
}

fn p50(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_flood_of_slow_calls_leaves_anothers_fast_calls_near_idle() {
    let gw = Gateway::builder("fairness", Mode::Http)
        .policy(POLICY)
        .env(&[
            ("FAIR_A_KEY", A),
            ("FAIR_B_KEY", B),
            ("MCP_BUDGET_LOG", "warn"),
        ])
        .start(&[Up::everything("e")])
        .await;
    let url = gw.url().to_owned();
    // Each client keeps its connections, as the SDKs' clients do.
    let (http_a, http_b) = (http_client(), http_client());
    let (a, b) = (
        session(&http_a, &url, A).await,
        session(&http_b, &url, B).await,
    );
    echoes(&http_b, &url, &b, 10).await;
    let mut idle = echoes(&http_b, &url, &b, 30).await;
    let flood: Vec<_> = (0..40)
        .map(|i| {
            let (http, url, a) = (http_a.clone(), url.clone(), a.clone());
            tokio::spawn(async move {
                let call = json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
                    "params": {"name": "e__trigger-long-running-operation",
                        "arguments": {"duration": 3, "steps": 3},
                        "_meta": {"progressToken": format!("p{i}")}}});
                post(&http, &url, A, Some(&a), &call).await.1
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut flooded = echoes(&http_b, &url, &b, 30).await;
    let (idle50, flooded50) = (p50(&mut idle), p50(&mut flooded));
    eprintln!("fairness: B echo p50 idle {idle50:.2} ms, flooded {flooded50:.2} ms");
    assert!(
        flooded50 <= 2.0 * idle50 + FLOOR_MS,
        "B's p50 went from {idle50:.2} ms idle to {flooded50:.2} ms under A's flood"
    );
    for call in flood {
        let done = tokio::time::timeout(Duration::from_secs(25), call)
            .await
            .expect("A's slow calls end")
            .unwrap();
        assert!(done["result"]["content"].is_array(), "{done}");
    }
    gw.stop_and_check().await;
}
