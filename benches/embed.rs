//! What each way of embedding costs per call, in process (`docs/embedding.md` quotes it):
//!
//! - `embed/*`: [`EmbedLayer`] (default policy: a hybrid list of the GitHub toolset, 117
//!   tools) over the `embed_layers` example's aggregator, against the aggregator alone:
//!   `tools/list`, a direct `tools/call`, and an `invoke_tool`.
//! - `llm_api/*`: [`LlmCacheLayer`] over an inner service that reads the body, for an Anthropic
//!   request carrying the GitHub toolset, against the inner service alone.
//!
//! The whole gateway's stack is `benches/gateway.rs`; its loopback figures are in
//! `docs/benchmarks.md`. Under `cargo test --all-targets` (test mode) each benchmark runs once.

#[allow(
    dead_code,
    unreachable_pub,
    reason = "the example's main; its items are the example's own API"
)]
#[path = "../examples/embed_layers.rs"]
mod embed_layers;

use std::hint::black_box;

use axum::body::Body;
use criterion::{Criterion, criterion_main};
use mcp_budget::embed::{EmbedLayer, Request};
use mcp_budget::llm_api::{LlmCacheLayer, RewriteOptions};
use mcp_budget::policy::Policy;
use serde_json::{Value, json};
use tower::{Layer, ServiceExt, service_fn};

fn message(id: u64, method: &str, params: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn embed(c: &mut Criterion, runtime: &tokio::runtime::Runtime) {
    let inner = embed_layers::Aggregator::github();
    let embedded = EmbedLayer::new(Policy::default()).layer(inner.clone());
    let list = message(1, "tools/list", &json!({}));
    let call = message(2, "tools/call", &json!({"name": "get_me", "arguments": {}}));
    let invoke = message(
        3,
        "tools/call",
        &json!({"name": "invoke_tool", "arguments":
        {"name": "list_issues", "arguments": {"owner": "o", "repo": "r"}}}),
    );
    // Learned and planned once, outside the timing.
    runtime.block_on(async {
        let _ = embedded.clone().oneshot(Request::new(list.clone())).await;
    });
    let mut group = c.benchmark_group("embed");
    let cases = [
        ("tools/list", &list),
        ("tools/call", &call),
        ("invoke_tool", &invoke),
    ];
    for (name, msg) in cases {
        if name != "invoke_tool" {
            group.bench_function(format!("{name}/inner_only"), |b| {
                b.iter(|| {
                    let req = Request::new(msg.clone());
                    black_box(runtime.block_on(inner.clone().oneshot(req)))
                });
            });
        }
        group.bench_function(format!("{name}/embedded"), |b| {
            b.iter(|| {
                let req = Request::new(msg.clone());
                black_box(runtime.block_on(embedded.clone().oneshot(req)))
            });
        });
    }
    group.finish();
}

fn llm_api(c: &mut Criterion, runtime: &tokio::runtime::Runtime) {
    let file: Value = serde_json::from_str(include_str!("../tests/fixtures/toolsets/github.json"))
        .expect("the fixture is JSON");
    let tools: Vec<Value> = file["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| json!({"name": t["name"], "description": t["description"], "input_schema": t["inputSchema"]}))
        .collect();
    let body = serde_json::to_vec(&json!({
        "model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": tools,
        "messages": [{"role": "user", "content": "hi"}]
    }))
    .expect("JSON");
    let inner = service_fn(|req: http::Request<Body>| async move {
        let bytes = axum::body::to_bytes(req.into_body(), usize::MAX).await?;
        Ok::<_, axum::Error>(bytes.len())
    });
    let layered = LlmCacheLayer::new(RewriteOptions::default()).layer(inner);
    let request = || {
        http::Request::post("/v1/messages")
            .header("content-type", "application/json")
            .body(Body::from(body.clone()))
            .expect("a request")
    };
    let mut group = c.benchmark_group("llm_api");
    group.bench_function("messages/inner_only", |b| {
        b.iter(|| black_box(runtime.block_on(inner.oneshot(request()))));
    });
    group.bench_function("messages/layered", |b| {
        b.iter(|| black_box(runtime.block_on(layered.clone().oneshot(request()))));
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime starts");
    embed(c, &runtime);
    llm_api(c, &runtime);
}

mod group {
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::bench);
}
use group::benches;

criterion_main!(benches);
