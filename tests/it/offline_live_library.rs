//! Offline = live, on the library path: for a fixture catalog and each policy in `policies/`,
//! the `tools/list` bytes the stack's budget layer answers over the catalog the gateway would
//! publish (upstreams' tools in any order, keys in any order) equal what `render --policy P
//! --tools …` prints from the saved lists. With `[budget] enabled = false` the layer is left
//! out and hosts get the gateway's pass-through list. The same through the real binary:
//! [`offline_live_binary`](crate::offline_live_binary).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcp_budget::catalog::{Catalog, Contribution};
use mcp_budget::cli::{CatalogArgs, render};
use mcp_budget::context::{Caller, McpRequest, Session};
use mcp_budget::jsonrpc::{Id, Message};
use mcp_budget::layer::budget::BudgetLayer;
use mcp_budget::policy::Policy;
use proptest::prelude::*;
use serde_json::{Map, Value};
use tower::{Layer, Service, ServiceExt};

const FIXTURES: [&str; 5] = ["time", "filesystem", "memory", "git", "fetch"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn policies() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root().join("policies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    found.sort();
    found
}

fn tools_of(fixture: &str) -> Vec<Value> {
    let file = root().join(format!("tests/fixtures/toolsets/{fixture}.json"));
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    saved["tools"].as_array().unwrap().clone()
}

/// Each upstream of `policy` gets a fixture (its own name's if there is one); the saved lists
/// go into `dir` as `<upstream>.json`.
fn assign(policy: &Policy, dir: &Path) -> Vec<(String, Vec<Value>)> {
    let mut spare = FIXTURES
        .iter()
        .filter(|f| !policy.upstreams.iter().any(|u| u.name == **f));
    policy
        .upstreams
        .iter()
        .map(|u| {
            let fixture = if FIXTURES.contains(&u.name.as_str()) {
                u.name.as_str()
            } else {
                spare.next().unwrap()
            };
            let tools = tools_of(fixture);
            let file = dir.join(format!("{}.json", u.name));
            std::fs::write(file, serde_json::json!({ "tools": tools }).to_string()).unwrap();
            (u.name.clone(), tools)
        })
        .collect()
}

fn shuffled_keys(value: Value, seed: &mut u64) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            let k = next(seed, entries.len());
            entries.rotate_left(k);
            if next(seed, 2) == 1 {
                entries.reverse();
            }
            let map: Map<String, Value> = entries
                .into_iter()
                .map(|(k, v)| (k, shuffled_keys(v, seed)))
                .collect();
            Value::Object(map)
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| shuffled_keys(v, seed)).collect())
        }
        other => other,
    }
}

fn next(seed: &mut u64, n: usize) -> usize {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    usize::try_from(*seed >> 33).unwrap() % n.max(1)
}

/// What a host gets from `serve` on `policy` over these upstream lists.
fn served(policy: &Policy, upstreams: &[(String, Vec<Value>)]) -> String {
    let names: Vec<String> = upstreams.iter().map(|(n, _)| n.clone()).collect();
    let per_upstream = upstreams
        .iter()
        .map(|(name, tools)| {
            let mut tools = tools.clone();
            for tool in &mut tools {
                mcp_budget::catalog::repair_tool(name, tool);
            }
            Contribution {
                tools,
                ..Contribution::default()
            }
        })
        .collect();
    let catalog = Catalog::build(per_upstream, &names, &policy.separator, 1);
    // Through the door the gateway's pool admits lists by: sanitized and pinned.
    let sanitize = |server: &str| policy.sanitize.rules_for(server);
    let catalog = mcp_budget::pin::admit_all(&catalog, sanitize, &policy.pin.rules);
    if !policy.budget.enabled {
        return mcp_budget::listing::pass_through(&catalog).get().to_owned();
    }
    let inner = tower::service_fn(|_: McpRequest| async { Ok(None) });
    let mut service = BudgetLayer::fixed(catalog, policy).layer(inner);
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let request = McpRequest::new(
        Message::request(Id::Number(1), "tools/list", None),
        Caller::new(Arc::new(Session::new("offline-live", tx))),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let reply = runtime
        .block_on(async { service.ready().await.unwrap().call(request).await })
        .unwrap()
        .unwrap();
    reply.result.unwrap().get().to_owned()
}

fn rendered(policy: &Path, tools: &Path) -> String {
    let args = render::Args {
        catalog: CatalogArgs {
            tools: vec![tools.to_owned()],
            policy: Some(policy.to_owned()),
            model: None,
            rendering: None,
            live: mcp_budget::cli::live::LiveArgs::default(),
        },
        level: None,
        mode: None,
        format: render::Format::Mcp,
        pretty: false,
    };
    let mut out = Vec::new();
    render::run(&args, &mut out).unwrap();
    String::from_utf8(out).unwrap().trim_end().to_owned()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    #[test]
    fn render_prints_what_serve_lists(seed in any::<u64>()) {
        for path in policies() {
            let policy = Policy::load(&path).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let saved = assign(&policy, dir.path());
            // The upstreams answer in another order, with their keys in another order.
            let mut seed = seed;
            let mut live = saved.clone();
            for (_, tools) in &mut live {
                let k = next(&mut seed, tools.len());
                tools.rotate_left(k);
                if next(&mut seed, 2) == 1 {
                    tools.reverse();
                }
                *tools = tools.drain(..).map(|t| shuffled_keys(t, &mut seed)).collect();
            }
            // Hosts see the upstreams' order when the list passes through: the saved lists
            // must be the live ones then.
            let offline_dir = tempfile::tempdir().unwrap();
            let offline = if policy.budget.enabled {
                dir.path().to_owned()
            } else {
                for (name, tools) in &live {
                    let file = offline_dir.path().join(format!("{name}.json"));
                    std::fs::write(file, serde_json::json!({ "tools": tools }).to_string()).unwrap();
                }
                offline_dir.path().to_owned()
            };
            let served = served(&policy, &live);
            let rendered = rendered(&path, &offline);
            prop_assert!(served == rendered, "{}: serve and render differ\nserve:  {:.300}\nrender: {:.300}", path.display(), served, rendered);
        }
    }
}
