//! Budget layer tests: lists, meta-tools, promotion, byte stability.
use super::*;
use crate::catalog::CatalogTool;
use crate::context::{Caller, Session};
use crate::jsonrpc::Id;
use serde_json::json;
use std::path::Path;
use tower::Service;

pub(super) fn fixed(tools: Vec<CatalogTool>, policy: &Policy) -> BudgetLayer {
    BudgetLayer::fixed(Catalog::from_tools(tools, &policy.separator), policy)
}

pub(super) fn fixtures() -> Vec<CatalogTool> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
    crate::catalog::load_saved(&[dir]).unwrap()
}

pub(super) fn request(id: i64, method: &str, params: &Value) -> McpRequest {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    McpRequest::new(
        Message::request(Id::Number(id), method, Some(to_raw(params))),
        Caller::new(Arc::new(Session::new("t", tx))),
    )
}

/// The answer `svc` gives `req`.
pub(super) async fn answer<S>(svc: &mut S, req: McpRequest) -> Message
where
    S: Service<McpRequest, Response = Option<Message>, Error = std::convert::Infallible>,
{
    svc.call(req).await.unwrap().expect("an answer")
}

/// The tool names of a `tools/list` (or `tools/catalog`) result, in order.
pub(super) fn names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .expect("a tools array")
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_owned())
        .collect()
}

/// The inner service echoes the tools/call it receives.
pub(super) fn echo() -> impl crate::layer::Inner {
    tower::service_fn(|req: McpRequest| async move {
        let params: Value = req.message.params_as().unwrap();
        // What comes down is read as what it is (a rewritten call has a new view).
        assert_eq!(req.view.name(), params.get("name").and_then(Value::as_str));
        let id = req.message.id.clone().unwrap();
        Ok(Some(Message::response_value(
            id,
            &json!({"content": [{"type": "text", "text": params.to_string()}]}),
        )))
    })
}

#[tokio::test]
async fn large_catalog_goes_behind_search_and_invoke_reaches_the_real_tool() {
    let mut policy = Policy::default();
    // Everything behind search (`auto` would list small servers' tools, time's among them).
    policy.budget.mode = crate::plan::ModeChoice::Progressive;
    let layer = fixed(fixtures(), &policy);
    let mut svc = layer.layer(echo());
    let list = svc
        .call(request(1, "tools/list", &json!({})))
        .await
        .unwrap()
        .unwrap();
    let tools: Value = list.result_as().unwrap();
    let names = names(&tools);
    assert!(names.iter().any(|n| n == "search_tools"), "{names:?}");
    assert!(names.len() < 20, "{names:?}");

    let found = svc
        .call(request(
            2,
            "tools/call",
            &json!({"name": "search_tools", "arguments": {"query": "current time in a timezone"}}),
        ))
        .await
        .unwrap()
        .unwrap();
    let text = found.result.unwrap().get().to_owned();
    assert!(text.contains("time__get_current_time"), "{text}");

    let invoked = svc
        .call(request(3, "tools/call", &json!({"name": "invoke_tool", "arguments": {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}})))
        .await
        .unwrap()
        .unwrap();
    let text = invoked.result.unwrap().get().to_owned();
    assert!(
        text.contains(r#"\"name\":\"time__get_current_time\""#),
        "{text}"
    );

    let bad = svc
        .call(request(4, "tools/call", &json!({"name": "invoke_tool", "arguments": {"name": "time__get_current_time", "arguments": {"timezone": 3}}})))
        .await
        .unwrap()
        .unwrap();
    let result: Value = bad.result_as().unwrap();
    assert_eq!(result["isError"], true, "{result}");
}

#[tokio::test]
async fn tools_of_volatile_upstreams_come_after_the_static_prefix() {
    let mut policy = Policy::from_toml_str(
        "version = 1\n[[upstream]]\nname = \"github\"\ncommand = \"x\"\nvolatile = true\n",
        "t.toml",
    )
    .unwrap();
    policy.budget.mode = crate::plan::ModeChoice::Full;
    let tools: Vec<CatalogTool> = fixtures()
        .into_iter()
        .filter(|t| t.server == "github" || t.server == "time")
        .collect();
    let layer = fixed(tools, &policy);
    let list = layer
        .layer(echo())
        .call(request(1, "tools/list", &json!({})))
        .await
        .unwrap()
        .unwrap();
    let list: Value = list.result_as().unwrap();
    let names = names(&list);
    // github sorts before time, but it is volatile: time's tools come first.
    assert!(names[0].starts_with("time__"), "{names:?}");
    assert!(names.last().unwrap().starts_with("github__"), "{names:?}");
}

#[tokio::test]
async fn promoted_tools_are_appended_for_that_session_only() {
    let mut policy = Policy::default();
    policy.discover.promote_on_use = true;
    policy.budget.mode = crate::plan::ModeChoice::Progressive;
    let layer = fixed(fixtures(), &policy);
    let mut svc = layer.layer(echo());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let session = Arc::new(Session::new("promoting", tx));
    let call = |id, method: &str, params: &Value| {
        McpRequest::new(
            Message::request(Id::Number(id), method, Some(to_raw(params))),
            Caller::new(session.clone()),
        )
    };
    let before = svc
        .call(call(1, "tools/list", &json!({})))
        .await
        .unwrap()
        .unwrap();
    let before = before.result.unwrap().get().to_owned();
    svc.call(call(2, "tools/call", &json!({"name": "invoke_tool", "arguments": {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}})))
        .await
        .unwrap();
    let note = rx.try_recv().unwrap();
    assert_eq!(note.method(), Some("notifications/tools/list_changed"));
    let after = svc
        .call(call(3, "tools/list", &json!({})))
        .await
        .unwrap()
        .unwrap();
    let after = after.result.unwrap().get().to_owned();
    // The static prefix is byte-identical; the promoted tool comes after it.
    let prefix = before.trim_end_matches("]}");
    assert!(after.starts_with(prefix), "static prefix changed");
    assert!(after[prefix.len()..].contains("time__get_current_time"));
    // Another session still sees the plain list.
    let other = svc
        .call(request(4, "tools/list", &json!({})))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other.result.unwrap().get(), before);
}

#[tokio::test]
async fn promotions_of_ended_sessions_are_forgotten_and_modern_requests_promote_nothing() {
    let mut policy = Policy::default();
    policy.discover.promote_on_use = true;
    policy.budget.mode = crate::plan::ModeChoice::Progressive;
    let layer = fixed(fixtures(), &policy);
    let mut svc = layer.layer(echo());
    let invoke = json!({"name": "invoke_tool", "arguments": {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}});
    for n in 0..3 {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let session = Arc::new(Session::new(format!("s{n}"), tx));
        let req = McpRequest::new(
            Message::request(Id::Number(n), "tools/call", Some(to_raw(&invoke))),
            Caller::new(session),
        );
        svc.call(req).await.unwrap();
    }
    // Each promotion dropped the entries of the sessions that ended before it.
    assert_eq!(crate::lock::lock(&layer.state.promoted).len(), 1);
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let modern = Arc::new(Session::new("modern", tx));
    // The era is the request's own (its `_meta`), whatever the session's state says.
    let mut modern_invoke = invoke.clone();
    modern_invoke["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let req = McpRequest::new(
        Message::request(Id::Number(9), "tools/call", Some(to_raw(&modern_invoke))),
        Caller::new(modern.clone()),
    );
    let reply = svc.call(req).await.unwrap().unwrap();
    // Forwarded as the real call, `_meta` and all, with the view of what went down.
    let result: Value = reply.result_as().unwrap();
    let text = result["content"][0]["text"].as_str().unwrap();
    let forwarded: Value = serde_json::from_str(text).unwrap();
    assert_eq!(forwarded["name"], "time__get_current_time");
    assert_eq!(
        forwarded["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(!crate::lock::lock(&layer.state.promoted).contains_key("modern"));
}

#[tokio::test]
async fn same_catalog_same_bytes_whatever_the_upstream_order() {
    // Every tool listed, so that order shows in the bytes.
    let mut policy = Policy::default();
    policy.budget.mode = crate::plan::ModeChoice::Full;
    let a = fixed(fixtures(), &policy);
    let mut shuffled = fixtures();
    // Each server's tools in reverse: a different upstream answer order.
    shuffled.reverse();
    shuffled.sort_by(|x, y| x.server.cmp(&y.server));
    assert_ne!(shuffled, fixtures());
    let b = fixed(shuffled, &policy);
    let la = a
        .layer(echo())
        .call(request(1, "tools/list", &json!({})))
        .await
        .unwrap()
        .unwrap();
    let lb = b
        .layer(echo())
        .call(request(1, "tools/list", &json!({})))
        .await
        .unwrap()
        .unwrap();
    assert!(la.to_bytes().len() > 100_000, "every tool is listed");
    assert_eq!(la.to_bytes(), lb.to_bytes());
}

#[tokio::test]
async fn never_deferred_tools_are_listed_in_full_with_their_rules() {
    let policy = Policy::from_toml_str(
        "version = 1\n[budget.tools.\"time/*\"]\nmin_level = \"extreme\"\n\
         [budget.tools.\"time/get_current_time\"]\ndescription = \"Now, in a time zone.\"\n\
         [discover]\nnever_defer = [\"time__get_*\"]\n",
        "t.toml",
    )
    .unwrap();
    let layer = fixed(fixtures(), &policy);
    let list = layer
        .layer(echo())
        .call(request(1, "tools/list", &json!({})))
        .await
        .unwrap()
        .unwrap();
    let list: Value = list.result_as().unwrap();
    let tools = list["tools"].as_array().unwrap();
    // The large catalog goes behind search, but the never-deferred tool stays listed: pinned,
    // so uncompressed despite time's min_level, and with its own rule's description.
    let now = tools
        .iter()
        .find(|t| t["name"] == "time__get_current_time")
        .unwrap_or_else(|| panic!("not listed: {list}"));
    assert_eq!(now["description"], "Now, in a time zone.");
    let upstream = fixtures()
        .into_iter()
        .find(|t| t.id() == "time/get_current_time")
        .unwrap();
    assert_eq!(now["inputSchema"], upstream.definition["inputSchema"]);
    assert!(tools.iter().all(|t| t["name"] != "time__convert_time"));
    assert!(tools.iter().any(|t| t["name"] == "search_tools"));
}

#[tokio::test]
async fn the_session_remembers_its_last_search_for_the_rank_of_what_it_invokes() {
    crate::telemetry::record::enable();
    let mut policy = Policy::default();
    policy.budget.mode = crate::plan::ModeChoice::Progressive;
    let layer = fixed(fixtures(), &policy);
    let mut svc = layer.layer(echo());
    let search =
        json!({"name": "search_tools", "arguments": {"query": "current time in a timezone"}});
    let found = answer(&mut svc, request(1, "tools/call", &search)).await;
    let found: Value = found.result_as().unwrap();
    let ranked: Vec<&str> = found["structuredContent"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(ranked.len() >= 2, "{found}");
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let session = crate::context::Session::new("t", tx);
    let searches = &layer.state.searches;
    assert_eq!(searches.rank(&session, ranked[1]), Some(2));
    assert_eq!(searches.rank(&session, "nowhere__tool"), None);
    let other = crate::context::Session::new("another", tokio::sync::mpsc::unbounded_channel().0);
    assert_eq!(searches.rank(&other, ranked[0]), None, "per session");
}

#[test]
fn the_static_prefix_changes_with_static_tools_not_with_volatile_ones() {
    let policy = Policy::from_toml_str(
        "version = 1\n[[upstream]]\nname = \"github\"\ncommand = \"x\"\nvolatile = true\n",
        "t.toml",
    )
    .unwrap();
    let tools = |drop: &str| -> Vec<CatalogTool> {
        fixtures()
            .into_iter()
            .filter(|t| (t.server == "github" || t.server == "time") && t.name != drop)
            .collect()
    };
    let mut policy = policy;
    policy.budget.mode = crate::plan::ModeChoice::Full;
    let prefix = |tools| fixed(tools, &policy).state.prefix_fingerprint();
    let all = prefix(tools(""));
    let github = fixtures()
        .into_iter()
        .find(|t| t.server == "github")
        .unwrap();
    assert_eq!(prefix(tools(&github.name)), all, "a volatile tool went");
    assert_ne!(prefix(tools("get_current_time")), all, "a static tool went");
}
