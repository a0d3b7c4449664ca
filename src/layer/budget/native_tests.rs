//! Native progressive disclosure in the budget layer: the capability at the handshake,
//! `tools/catalog`, `tools/describe` and `tools/list` for a client that declared it, and
//! nothing of it for one that did not.

use std::sync::Arc;

use serde_json::{Value, json};
use tower::Layer;

use super::tests::{answer as ask, fixed, fixtures, names};
use crate::authz::{Glob, Scope};
use crate::canonical::schema_hash;
use crate::catalog::CatalogTool;
use crate::context::{Caller, McpRequest, Session};
use crate::identity::{Client, Credential, Directory, Principal, api_key};
use crate::jsonrpc::{Id, Message, to_raw};
use crate::policy::Policy;

/// The inner service: answers `initialize` with a plain result, anything else as unknown.
fn inner() -> impl crate::layer::Inner {
    tower::service_fn(|req: McpRequest| async move {
        let id = req.message.id.clone().unwrap();
        let reply = if req.message.method() == Some("initialize") {
            Message::response_value(
                id,
                &json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": true}},
                        "serverInfo": {"name": "mcp-budget", "version": "0"}}),
            )
        } else {
            Message::error(
                id,
                crate::jsonrpc::ErrorObject::new(
                    -32601,
                    "unknown",
                    "mcp_budget.method.not_found",
                    None,
                ),
            )
        };
        Ok(Some(reply))
    })
}

fn tools() -> Vec<CatalogTool> {
    fixtures()
        .into_iter()
        .filter(|t| ["time", "git", "filesystem"].contains(&t.server.as_str()))
        .collect()
}

fn policy() -> Policy {
    let mut policy = Policy::default();
    policy.discover.native_disclosure = true;
    policy
}

/// A session that declared `capabilities` at its `initialize`.
fn session(capabilities: Value) -> Arc<Session> {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let session = Arc::new(Session::new("native", tx));
    session.update(|s| s.client_capabilities = capabilities);
    session
}

fn declaring() -> Value {
    json!({"tools": {"progressiveDisclosure": true}})
}

fn request(
    session: &Arc<Session>,
    who: Option<&Arc<Principal>>,
    method: &str,
    params: &Value,
) -> McpRequest {
    let caller = Caller::new(session.clone());
    let caller = match who {
        Some(p) => caller.with_principal(p.clone()),
        None => caller,
    };
    McpRequest::new(
        Message::request(Id::Number(7), method, Some(to_raw(params))),
        caller,
    )
}

#[tokio::test]
async fn the_handshake_offers_the_capability_only_to_a_client_that_declares_it() {
    let mut svc = fixed(tools(), &policy()).layer(inner());
    let init = |caps: Value| {
        request(
            &session(json!({})),
            None,
            "initialize",
            &json!({"protocolVersion": "2025-06-18", "capabilities": caps, "clientInfo": {"name": "t", "version": "0"}}),
        )
    };
    let offered: Value = ask(&mut svc, init(declaring())).await.result_as().unwrap();
    assert_eq!(
        offered["capabilities"]["tools"]["progressiveDisclosure"],
        true
    );
    assert_eq!(
        offered["capabilities"]["tools"]["listChanged"], true,
        "the rest kept"
    );
    let plain: Value = ask(&mut svc, init(json!({}))).await.result_as().unwrap();
    assert!(
        plain["capabilities"]["tools"]
            .get("progressiveDisclosure")
            .is_none()
    );
    // Policy off: never offered.
    let mut off = fixed(tools(), &Policy::default()).layer(inner());
    let result: Value = ask(&mut off, init(declaring())).await.result_as().unwrap();
    assert!(
        result["capabilities"]["tools"]
            .get("progressiveDisclosure")
            .is_none()
    );
}

#[tokio::test]
async fn catalog_describe_and_list_agree_byte_for_byte() {
    let catalog = tools();
    let mut svc = fixed(catalog.clone(), &policy()).layer(inner());
    let s = session(declaring());
    let list = ask(&mut svc, request(&s, None, "tools/list", &json!({}))).await;
    let list_text = list.result.as_ref().unwrap().get().to_owned();
    let listed: Value = serde_json::from_str(&list_text).unwrap();
    let listed = listed["tools"].as_array().unwrap();
    // Every tool, no meta-tools: the same set tools/catalog gives.
    assert_eq!(listed.len(), catalog.len());
    assert!(listed.iter().all(|t| t["name"] != "search_tools"));
    let entries: Value = ask(&mut svc, request(&s, None, "tools/catalog", &json!({})))
        .await
        .result_as()
        .unwrap();
    let entries = entries["tools"].as_array().unwrap();
    assert_eq!(entries.len(), listed.len());
    for (entry, tool) in entries.iter().zip(listed) {
        assert_eq!(entry["name"], tool["name"]);
        assert_eq!(entry["schemaHash"], schema_hash(tool), "{}", tool["name"]);
        let summary = entry["summary"].as_str().unwrap();
        assert!(
            !summary.is_empty() && summary.chars().count() < 200,
            "{summary}"
        );
        assert!(entry["tags"].as_array().is_some_and(|t| t.len() == 1));
        let keys: Vec<&str> = entry
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert!(
            keys.iter().all(|k| [
                "name",
                "title",
                "summary",
                "tags",
                "schemaHash",
                "annotations"
            ]
            .contains(k)),
            "{keys:?}"
        );
    }
    // Describe: in the order asked, each object's bytes exactly as tools/list wrote them.
    let names = [listed[3]["name"].clone(), listed[0]["name"].clone()];
    let described = ask(
        &mut svc,
        request(&s, None, "tools/describe", &json!({"names": names})),
    )
    .await;
    let text = described.result.unwrap().get().to_owned();
    let expected = format!(
        "{{\"tools\":[{},{}]}}",
        serde_json::to_string(&listed[3]).unwrap(),
        serde_json::to_string(&listed[0]).unwrap()
    );
    assert_eq!(text, expected);
    for tool in [&listed[3], &listed[0]] {
        let bytes = serde_json::to_string(tool).unwrap();
        assert!(
            list_text.contains(&bytes),
            "the same bytes are in tools/list"
        );
    }
    // A query narrows the catalog to its best matches.
    let found: Value = ask(
        &mut svc,
        request(
            &s,
            None,
            "tools/catalog",
            &json!({"query": "current time in a timezone"}),
        ),
    )
    .await
    .result_as()
    .unwrap();
    assert_eq!(found["tools"][0]["name"], "time__get_current_time");
    assert!(found["tools"].as_array().unwrap().len() < entries.len());
}

#[tokio::test]
async fn describe_refuses_unknown_and_denied_names_alike() {
    let dir = Directory::new(vec![
        Client::new(
            "timer",
            Scope::new(vec![Glob::new("time/*")], vec![], vec![]),
        )
        .with_key(api_key::digest("k")),
    ]);
    let timer = Arc::new(dir.authenticate(Credential::ApiKey("k")).unwrap());
    let mut svc = fixed(tools(), &policy()).layer(inner());
    let s = session(declaring());
    let entries: Value = ask(
        &mut svc,
        request(&s, Some(&timer), "tools/catalog", &json!({})),
    )
    .await
    .result_as()
    .unwrap();
    let names = names(&entries);
    assert_eq!(names, ["time__convert_time", "time__get_current_time"]);
    let error = |names: Value| {
        let req = request(&s, Some(&timer), "tools/describe", &json!({"names": names}));
        let mut svc = svc.clone();
        async move { ask(&mut svc, req).await.error.expect("an error") }
    };
    let denied = error(json!(["time__convert_time", "git__git_status"])).await;
    assert_eq!(denied.code, -32002);
    let data: Value = serde_json::from_str(denied.data.as_ref().unwrap().get()).unwrap();
    assert_eq!(data["unknownNames"], json!(["git__git_status"]));
    assert_eq!(data["type"], "mcp_budget.catalog.not_found");
    let missing = error(json!(["time__convert_time", "git__git_nothing"])).await;
    assert_eq!(missing.code, denied.code);
    assert_eq!(
        missing.message.replace("git__git_nothing", "X"),
        denied.message.replace("git__git_status", "X"),
        "a denied name is answered as a missing one"
    );
    for bad in [json!([]), json!("time__convert_time"), json!([1])] {
        assert_eq!(error(bad).await.code, -32602);
    }
}

#[tokio::test]
async fn a_client_without_the_capability_gets_meta_tools_as_before() {
    let mut policy = policy();
    policy.budget.mode = crate::plan::ModeChoice::Progressive;
    let mut svc = fixed(fixtures(), &policy).layer(inner());
    let s = session(json!({"sampling": {}}));
    let list: Value = ask(&mut svc, request(&s, None, "tools/list", &json!({})))
        .await
        .result_as()
        .unwrap();
    assert!(
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "search_tools")
    );
    // tools/catalog is not served to it: it goes down, and is unknown there.
    let reply = ask(&mut svc, request(&s, None, "tools/catalog", &json!({}))).await;
    assert_eq!(reply.error.unwrap().code, -32601);
    // The same for a declaring client when the policy leaves it off.
    let mut off = fixed(tools(), &Policy::default()).layer(inner());
    let reply = ask(
        &mut off,
        request(
            &session(declaring()),
            None,
            "tools/describe",
            &json!({"names": ["time__convert_time"]}),
        ),
    )
    .await;
    assert_eq!(reply.error.unwrap().code, -32601);
}

#[tokio::test]
async fn a_modern_request_declares_it_in_its_own_meta() {
    let mut svc = fixed(tools(), &policy()).layer(inner());
    let meta = |caps: Value| {
        json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps
        }})
    };
    // The session knows nothing: the request's own capabilities decide.
    let s = session(json!({}));
    let entries = ask(
        &mut svc,
        request(&s, None, "tools/catalog", &meta(declaring())),
    )
    .await;
    let entries: Value = entries.result_as().unwrap();
    assert_eq!(entries["tools"].as_array().unwrap().len(), tools().len());
    let plain = ask(
        &mut svc,
        request(&s, None, "tools/catalog", &meta(json!({}))),
    )
    .await;
    assert_eq!(plain.error.unwrap().code, -32601);
}

#[tokio::test]
async fn a_change_only_native_clients_see_is_announced() {
    let mut policy = policy();
    policy.budget.mode = crate::plan::ModeChoice::Progressive;
    policy.budget.list_catalog = false;
    let catalog = |description: &str, version: u64| {
        let mut tools = tools();
        let first = tools.iter_mut().find(|t| t.server == "time").unwrap();
        Arc::make_mut(&mut first.definition)
            .insert("description".into(), Value::String(description.into()));
        let built = crate::catalog::Catalog::from_tools(tools, "__");
        crate::catalog::Catalog::build(
            built.upstreams().iter().map(|g| g.lists()).collect(),
            built.names(),
            "__",
            version,
        )
    };
    let (publish, receiver) = tokio::sync::watch::channel(Arc::new(catalog("Before.", 1)));
    let layer = super::BudgetLayer::new(receiver, &policy);
    let plain_before = layer.fingerprint();
    let (sink, mut everyone) = tokio::sync::mpsc::unbounded_channel();
    layer.announce_to(sink);
    publish.send(Arc::new(catalog("After.", 2))).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // Behind search, the description does not show in the plain list...
    assert_eq!(layer.fingerprint(), plain_before);
    // ...but a declaring client lists every tool in full: it is told.
    let note = everyone.try_recv().expect("announced");
    assert_eq!(note.method(), Some("notifications/tools/list_changed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_code_mode_run_code_is_listed_catalogued_described_and_callable() {
    let mut policy = policy();
    policy.discover.names.code = Some("run_code".into());
    policy.discover.code_mode = Some(crate::policy::CodeMode::default());
    let catalog = tools();
    let mut svc = fixed(catalog.clone(), &policy).layer(inner());
    let s = session(declaring());
    let list = ask(&mut svc, request(&s, None, "tools/list", &json!({}))).await;
    let listed: Value = list.result_as().unwrap();
    let listed = listed["tools"].as_array().unwrap();
    assert_eq!(listed.len(), catalog.len() + 1, "every tool and run_code");
    let code = listed.last().unwrap();
    assert_eq!(code["name"], "run_code");
    assert!(
        listed.iter().all(|t| t["name"] != "search_tools"),
        "no discovery meta-tools: the host discovers itself"
    );
    let entries: Value = ask(&mut svc, request(&s, None, "tools/catalog", &json!({})))
        .await
        .result_as()
        .unwrap();
    let entry = entries["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "run_code")
        .expect("a catalog entry");
    assert_eq!(entry["tags"], json!([super::native::META_TAG]));
    assert_eq!(entry["schemaHash"], schema_hash(code));
    assert!(
        entry["summary"]
            .as_str()
            .unwrap()
            .starts_with("Run a JavaScript program")
    );
    let described = ask(
        &mut svc,
        request(&s, None, "tools/describe", &json!({"names": ["run_code"]})),
    )
    .await;
    assert_eq!(
        described.result.unwrap().get(),
        format!("{{\"tools\":[{}]}}", serde_json::to_string(code).unwrap()),
        "the full definition, byte for byte as listed"
    );
    let ran: Value = ask(
        &mut svc,
        request(
            &s,
            None,
            "tools/call",
            &json!({"name": "run_code", "arguments": {"code": "return 6 * 7"}}),
        ),
    )
    .await
    .result_as()
    .unwrap();
    assert_eq!(ran["content"][0]["text"], "42", "{ran}");
}

#[test]
fn with_code_mode_the_native_plan_counts_run_code() {
    let mut coded = policy();
    coded.discover.names.code = Some("run_code".into());
    coded.discover.code_mode = Some(crate::policy::CodeMode::default());
    let native = |policy: &Policy| {
        let layer = fixed(tools(), policy);
        let principal = Principal::anonymous();
        let audience = super::state::Audience::of(&principal, true);
        layer.state.planned_for(audience.as_ref()).plan.clone()
    };
    let (plain, with) = (native(&policy()), native(&coded));
    let definition = crate::codemode::definition("run_code");
    let counter = crate::tokens::Counter::new(&coded.budget.profile);
    let own = counter.count_tool("run_code", definition.as_object().unwrap());
    assert!(own > 100, "{own}");
    assert_eq!(
        with.tokens_after - plain.tokens_after,
        own,
        "the plan pays for run_code's definition"
    );
    assert_eq!(with.tools_after, plain.tools_after + 1);
    // A budget between the two: without run_code it fits, with it not.
    let mut plan = plain.clone();
    plan.budget.tokens = plain.tokens_after + own / 2;
    plan.fits = true;
    plan.count_added(own, true);
    assert!(!plan.fits, "{plan:?}");
}

#[test]
fn run_code_goes_after_the_static_tools_and_before_the_volatile_ones() {
    let tool = |name: &str| json!({"name": name});
    let names = |listed: Vec<Value>| -> Vec<String> {
        listed
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let listed = vec![tool("a__x"), tool("b__y"), tool("v__z")];
    let placed = super::native::with_code_tool(listed.clone(), "js", |n| n.starts_with("v__"));
    assert_eq!(names(placed), ["a__x", "b__y", "js", "v__z"]);
    let placed = super::native::with_code_tool(listed, "js", |_| false);
    assert_eq!(names(placed), ["a__x", "b__y", "v__z", "js"]);
}
