use std::sync::Mutex;

use serde_json::json;
use tower::service_fn;

use super::*;
use crate::lock::lock;

/// What the fake inner service saw: each request's method, its tool name (calls), and the
/// caller's client from the extensions.
type Seen = Arc<Mutex<Vec<(String, Option<String>, Option<String>)>>>;

/// A fake aggregator: `tools` listed in pages of 50, calls echoed with an unknown field,
/// `boom` failing.
fn inner(
    tools: Arc<Mutex<Vec<Value>>>,
    seen: Seen,
) -> impl Service<Request, Response = Option<Value>, Error = BoxError, Future: Send>
+ Clone
+ Send
+ Sync
+ 'static {
    service_fn(move |req: Request| {
        let (tools, seen) = (tools.clone(), seen.clone());
        async move {
            let m = &req.message;
            let method = m["method"].as_str().unwrap_or_default().to_owned();
            let name = m["params"]["name"].as_str().map(str::to_owned);
            let client = req
                .extensions
                .get::<Caller>()
                .and_then(Caller::client)
                .map(str::to_owned);
            lock(&seen).push((method.clone(), name.clone(), client));
            let Some(id) = m.get("id").cloned() else {
                return Ok(None);
            };
            let result = match method.as_str() {
                "tools/list" => {
                    let all = lock(&tools).clone();
                    let from: usize = m["params"]["cursor"]
                        .as_str()
                        .map_or(0, |c| c.parse().unwrap());
                    let page: Vec<Value> = all.iter().skip(from).take(50).cloned().collect();
                    let mut result = json!({"tools": page});
                    if from + 50 < all.len() {
                        result["nextCursor"] = json!((from + 50).to_string());
                    }
                    result
                }
                "tools/call" if name.as_deref() == Some("boom") => {
                    return Err("the aggregator's upstream is gone".into());
                }
                "tools/call" => json!({
                    "content": [{"type": "text", "text": format!("called {}", name.unwrap())}],
                    "x-extra": {"kept": true}
                }),
                "prompts/list" | "resources/list" | "resources/templates/list" => {
                    return Ok(Some(json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32601, "message": "method not found"}})));
                }
                _ => json!({}),
            };
            Ok(Some(json!({"jsonrpc": "2.0", "id": id, "result": result})))
        }
    })
}

fn github_tools() -> Vec<Value> {
    let text = include_str!("../../tests/fixtures/toolsets/github.json");
    let file: Value = serde_json::from_str(text).unwrap();
    file["tools"].as_array().unwrap().clone()
}

fn progressive() -> Policy {
    Policy::from_toml_str(
        "version = 1\n[budget]\nmodel = \"claude-haiku-4-5\"\nthreshold_percent = 1\n",
        "test",
    )
    .unwrap()
}

fn call(id: u64, method: &str, params: &Value) -> Request {
    Request::new(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

async fn ask<S>(service: &S, req: Request) -> Value
where
    S: Service<Request, Response = Option<Value>, Error = BoxError> + Clone,
{
    service
        .clone()
        .oneshot(req)
        .await
        .unwrap()
        .expect("answered")
}

#[tokio::test]
async fn the_host_gets_meta_tools_and_invoke_tool_reaches_the_inner_service() {
    let seen = Seen::default();
    let tools = Arc::new(Mutex::new(github_tools()));
    let layer = EmbedLayer::new(progressive());
    let service = layer.layer(inner(tools, seen.clone()));

    let list = ask(&service, call(1, "tools/list", &json!({}))).await;
    assert_eq!(list["id"], 1);
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"invoke_tool"), "{names:?}");
    assert!(names.contains(&"search_tools"), "{names:?}");
    // Every page was learned: all 117 tools are in the plan.
    assert_eq!(layer.summary().unwrap().tools, 117);
    let pages = lock(&seen).iter().filter(|s| s.0 == "tools/list").count();
    assert_eq!(pages, 3, "117 tools in pages of 50");

    let again = ask(&service, call(2, "tools/list", &json!({}))).await;
    assert_eq!(again["result"], list["result"], "byte-stable");

    // A tool the plan deferred, by its own name.
    let deferred = github_tools()
        .iter()
        .filter(|t| {
            t["inputSchema"]["required"]
                .as_array()
                .is_none_or(Vec::is_empty)
        })
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .find(|n| !names.contains(&n.as_str()))
        .expect("progressive: most tools are deferred");
    let invoke = json!({"name": "invoke_tool", "arguments": {"name": deferred, "arguments": {}}});
    let answer = ask(&service, call(3, "tools/call", &invoke)).await;
    assert_eq!(answer["id"], 3);
    assert_eq!(
        answer["result"]["content"][0]["text"],
        format!("called {deferred}")
    );
    assert_eq!(
        answer["result"]["x-extra"]["kept"], true,
        "unknown fields pass"
    );
    let last = lock(&seen).last().cloned().unwrap();
    assert_eq!(
        (last.0.as_str(), last.1.as_deref()),
        ("tools/call", Some(deferred.as_str()))
    );
}

#[tokio::test]
async fn a_failing_inner_service_is_one_error_answer_and_notifications_get_none() {
    let tools = Arc::new(Mutex::new(vec![
        json!({"name": "boom", "inputSchema": {"type": "object"}}),
    ]));
    let service = EmbedLayer::new(Policy::default()).layer(inner(tools, Seen::default()));
    let answer = ask(&service, call(7, "tools/call", &json!({"name": "boom"}))).await;
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["data"]["type"], kind::UPSTREAM_UNAVAILABLE);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(service.clone().oneshot(note.into()).await.unwrap(), None);
    let garbage = json!({"jsonrpc": "2.0", "id": 8});
    let answer = ask(&service, garbage.into()).await;
    assert!(answer["error"]["code"].is_i64(), "{answer}");
}

#[tokio::test]
async fn clients_see_their_scope_and_an_unnamed_caller_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let policy = Policy::from_toml_str(
        &format!(
            "version = 1\n[audit]\npath = {:?}\n[[client]]\nname = \"ci\"\nallow = [\"*/get_me\"]\n",
            audit.display().to_string()
        ),
        "test",
    )
    .unwrap();
    let seen = Seen::default();
    let tools = Arc::new(Mutex::new(github_tools()));
    let service = EmbedLayer::new(policy).layer(inner(tools, seen.clone()));

    let refused = ask(&service, call(1, "tools/list", &json!({}))).await;
    assert_eq!(
        refused["error"]["data"]["type"],
        kind::AUTHENTICATION_INVALID
    );

    let as_ci = |req: Request| req.with_caller(Caller::new("ci").with_principal("user-1"));
    let list = ask(&service, as_ci(call(2, "tools/list", &json!({})))).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{list}");
    assert_eq!(tools[0]["name"], "get_me");
    let denied = ask(
        &service,
        as_ci(call(3, "tools/call", &json!({"name": "list_issues"}))),
    )
    .await;
    assert_eq!(denied["error"]["data"]["type"], kind::AUTHORIZATION_DENIED);
    let allowed = ask(
        &service,
        as_ci(call(4, "tools/call", &json!({"name": "get_me"}))),
    )
    .await;
    assert_eq!(allowed["result"]["content"][0]["text"], "called get_me");
    // The caller reached the inner service with the call.
    let last = lock(&seen).last().cloned().unwrap();
    assert_eq!(last.2.as_deref(), Some("ci"));
    // The audit log names the client and the embedder's principal.
    let mut lines = String::new();
    for _ in 0..100 {
        lines = std::fs::read_to_string(&audit).unwrap_or_default();
        if lines.lines().count() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let allowed: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["tool"] == "get_me")
        .collect();
    assert!(!allowed.is_empty(), "{lines}");
    assert!(
        allowed
            .iter()
            .all(|l| l["principal"] == "ci" && l["subject"] == "user-1"),
        "{lines}"
    );
}

#[tokio::test]
async fn list_changed_has_the_tools_learned_again_and_announced() {
    let tools = Arc::new(Mutex::new(github_tools()));
    let (sink, mut announced) = mpsc::unbounded_channel();
    let layer = EmbedLayer::new(progressive()).announce_to(sink);
    let service = layer.layer(inner(tools.clone(), Seen::default()));
    let _ = ask(&service, call(1, "tools/list", &json!({}))).await;
    assert_eq!(layer.summary().unwrap().tools, 117);

    lock(&tools).truncate(3);
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    assert!(
        !layer.inner_notification(&changed),
        "the layer announces its own"
    );
    let note = tokio::time::timeout(Duration::from_secs(5), announced.recv())
        .await
        .expect("announced")
        .unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");
    assert_eq!(layer.catalog().tools().len(), 3);
    let prompts = json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"});
    assert!(layer.inner_notification(&prompts));
    let other = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}});
    assert!(layer.inner_notification(&other));
}

#[tokio::test]
async fn limits_refuse_a_clients_call_beyond_its_rate_without_reaching_the_service() {
    let policy = Policy::from_toml_str(
        "version = 1\n[budget]\nenabled = false\n[limits]\ncalls_per_sec = 1\nburst = 1\n",
        "test",
    )
    .unwrap();
    let seen = Seen::default();
    let tools = Arc::new(Mutex::new(github_tools()));
    let service = EmbedLayer::new(policy).layer(inner(tools, seen.clone()));
    let get_me = json!({"name": "get_me", "arguments": {}});
    let first = ask(&service, call(1, "tools/call", &get_me)).await;
    assert_eq!(first["result"]["content"][0]["text"], "called get_me");
    let second = ask(&service, call(2, "tools/call", &get_me)).await;
    assert_eq!(second["id"], 2);
    assert_eq!(second["error"]["code"], -32023, "{second}");
    let calls = lock(&seen).iter().filter(|s| s.0 == "tools/call").count();
    assert_eq!(calls, 1, "the refused call never reached the service");
}
