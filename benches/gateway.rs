//! In-process cost of the tower stack: `stack::build` (recover + trace layers) over a
//! [`Gateway`] with no upstreams, answering `ping` and `tools/list`, against calling the
//! `Gateway` service directly. The difference is what the layers add per message. Loopback
//! (process-to-process) figures come from `scripts/bench-gateway.sh`. Under
//! `cargo test --all-targets` (test mode) each benchmark runs once.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_main};
use mcp_budget::context::{Caller, McpRequest, Session};
use mcp_budget::gateway::Gateway;
use mcp_budget::jsonrpc::{Id, Message};
use mcp_budget::policy::Policy;
use mcp_budget::stack::{self, McpService};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

fn request(caller: &Caller, method: &str) -> McpRequest {
    McpRequest::new(
        Message::request(Id::Number(1), method, None),
        caller.clone(),
    )
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime starts");
    let gateway = runtime.block_on(async {
        let announce = stack::announce(&Policy::default());
        let gateway = Gateway::start(Policy::default(), announce, CancellationToken::new());
        gateway.wait_ready(std::time::Duration::from_secs(1)).await;
        gateway
    });
    // The budget layer starts its list_changed task on the runtime.
    let service: McpService = {
        let _inside = runtime.enter();
        stack::build(gateway.clone())
    };
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let caller = Caller::new(Arc::new(Session::new("bench", tx)));
    // An initialized session, as a real client's would be.
    runtime.block_on(async {
        let init = Message::request(
            Id::Number(0),
            "initialize",
            Some(mcp_budget::jsonrpc::to_raw(&serde_json::json!({
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"}
            }))),
        );
        let req = McpRequest::new(init, caller.clone());
        let _ = service.clone().oneshot(req).await;
    });

    let mut group = c.benchmark_group("stack");
    for method in ["ping", "tools/list"] {
        group.bench_function(format!("{method}/gateway_only"), |b| {
            b.iter(|| {
                let reply = runtime.block_on(gateway.clone().oneshot(request(&caller, method)));
                black_box(reply)
            });
        });
        group.bench_function(format!("{method}/full_stack"), |b| {
            b.iter(|| {
                let reply = runtime.block_on(service.clone().oneshot(request(&caller, method)));
                black_box(reply)
            });
        });
    }
    group.finish();
}

mod group {
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::bench);
}
use group::benches;

criterion_main!(benches);
