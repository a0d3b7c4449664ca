use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tower::ServiceExt;

use super::*;
use crate::authz::{ArgRule, Constraint, Glob};
use crate::catalog::Contribution;
use crate::context::{Caller, Session};
use crate::error::kind;
use crate::identity::{Client, Credential, Directory, api_key};
use crate::jsonrpc::Id;
use crate::jsonrpc::code::SERVER_ERROR;

fn catalog() -> Arc<Catalog> {
    let tool = |name: &str| json!({"name": name, "inputSchema": {"type": "object"}});
    let github = Contribution {
        tools: vec![tool("get_issue"), tool("delete_repo"), tool("list_repos")],
        prompts: vec![json!({"name": "triage"})],
        resources: vec![json!({"uri": "file:///docs/a", "name": "a"})],
        ..Contribution::default()
    };
    let time = Contribution {
        tools: vec![tool("now")],
        ..Contribution::default()
    };
    Arc::new(Catalog::build(
        vec![github, time],
        &["github".into(), "time".into()],
        "__",
        1,
    ))
}

fn alice() -> Arc<Principal> {
    let owner = Constraint {
        one_of: Some(vec![json!("acme")]),
        ..Constraint::default()
    };
    let scope = Scope::new(
        vec![Glob::new("github/*"), Glob::new("prompt:github/*")],
        vec![Glob::new("github/delete_*")],
        vec![ArgRule {
            tools: vec![Glob::new("github/list_*")],
            args: [("owner".to_owned(), owner)].into_iter().collect(),
        }],
    );
    let dir = Directory::new(vec![
        Client::new("alice", scope).with_key(api_key::digest("ka")),
    ]);
    Arc::new(dir.authenticate(Credential::ApiKey("ka")).unwrap())
}

struct Run {
    forwarded: Arc<AtomicUsize>,
    reply: Option<Message>,
}

async fn run(principal: Arc<Principal>, method: &str, params: Value, filter_tools: bool) -> Run {
    run_as(principal, method, params, filter_tools, false).await
}

async fn run_as(
    principal: Arc<Principal>,
    method: &str,
    params: Value,
    filter_tools: bool,
    probe: bool,
) -> Run {
    let forwarded = Arc::new(AtomicUsize::new(0));
    let seen = forwarded.clone();
    let inner = tower::service_fn(move |req: McpRequest| {
        seen.fetch_add(1, Ordering::SeqCst);
        let result = match req.message.method() {
            Some("tools/list") => json!({"tools": [
                {"name": "github__get_issue"}, {"name": "github__delete_repo"},
                {"name": "time__now"}, {"name": "unknown"}]}),
            Some("prompts/list") => json!({"prompts": [{"name": "github__triage"}]}),
            Some("resources/list") => json!({"resources": [{"uri": "file:///docs/a"}]}),
            _ => json!({"content": [], "isError": false}),
        };
        async move {
            Ok::<_, Infallible>(Some(Message::response_value(
                req.message.reply_id(),
                &result,
            )))
        }
    });
    let (_tx, rx) = watch::channel(catalog());
    let service = AuthorizeLayer::new(rx, Audit::off(), filter_tools).layer(inner);
    let (notify, _) = tokio::sync::mpsc::unbounded_channel();
    let mut caller = Caller::new(Arc::new(Session::new("s1", notify))).with_principal(principal);
    caller.probe = probe;
    let msg = Message::request(Id::Number(1), method, Some(to_raw(&params)));
    let reply = service.oneshot(McpRequest::new(msg, caller)).await.unwrap();
    Run { forwarded, reply }
}

fn denial(run: &Run) -> Option<Value> {
    let err = run.reply.as_ref()?.error.as_ref()?;
    assert_eq!(err.code, SERVER_ERROR);
    let data: Value = serde_json::from_str(err.data.as_ref()?.get()).ok()?;
    assert_eq!(data["type"], kind::AUTHORIZATION_DENIED);
    assert_eq!(
        run.forwarded.load(Ordering::SeqCst),
        0,
        "a denial is never forwarded"
    );
    Some(data)
}

#[tokio::test]
async fn denied_tools_and_arguments_are_refused_with_reason_and_audit_id() {
    let call = |name: &str, args: Value| json!({"name": name, "arguments": args});
    let deny = run(
        alice(),
        "tools/call",
        call("github__delete_repo", json!({})),
        false,
    )
    .await;
    let data = denial(&deny).expect("denied");
    assert_eq!(data["tool"], "github__delete_repo");
    assert_eq!(
        data["reason"],
        "github/delete_repo is denied to this client"
    );
    assert_eq!(data["audit_id"].as_str().map(str::len), Some(32));
    let other = run(alice(), "tools/call", call("time__now", json!({})), false).await;
    assert!(denial(&other).is_some(), "not in allow");
    let evil = run(
        alice(),
        "tools/call",
        call("github__list_repos", json!({"owner": "evil"})),
        false,
    )
    .await;
    let reason = denial(&evil).expect("denied")["reason"].clone();
    assert!(reason.as_str().unwrap().contains("owner"), "{reason}");
    let acme = run(
        alice(),
        "tools/call",
        call("github__list_repos", json!({"owner": "acme"})),
        false,
    )
    .await;
    assert_eq!(acme.forwarded.load(Ordering::SeqCst), 1);
    assert!(acme.reply.unwrap().error.is_none());
    let ok = run(
        alice(),
        "tools/call",
        call("github__get_issue", json!({})),
        false,
    )
    .await;
    assert_eq!(ok.forwarded.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn spellings_the_gateway_would_not_route_are_unknown_not_bypasses() {
    let long = "g".repeat(100_000);
    for name in [
        "GITHUB__DELETE_REPO",
        "github_delete_repo",
        "github/delete_repo",
        "github__delete_repo ",
        "github__dеlete_repo", // Cyrillic е
        "github__delete_repo\u{200b}",
        "",
        long.as_str(),
    ] {
        let r = run(alice(), "tools/call", json!({"name": name}), false).await;
        assert_eq!(r.forwarded.load(Ordering::SeqCst), 0, "{name:?} went down");
        let error = r
            .reply
            .and_then(|m| m.error)
            .expect("answered with an error");
        let got = error.kind().unwrap_or_default();
        assert!(
            got == kind::AUTHORIZATION_DENIED || got == kind::CATALOG_NOT_FOUND,
            "{name:?}: {got}"
        );
    }
}

#[tokio::test]
async fn an_unknown_name_is_decided_on_its_namespace_never_on_what_exists() {
    // A typo of a tool alice may call: "not found", as without clients.
    let r = run(
        alice(),
        "tools/call",
        json!({"name": "github__get_isue"}),
        false,
    )
    .await;
    assert_eq!(r.forwarded.load(Ordering::SeqCst), 0);
    let error = r.reply.and_then(|m| m.error).unwrap();
    assert_eq!(error.kind().as_deref(), Some(kind::CATALOG_NOT_FOUND));
    // In a namespace she may not see: denied as the tool there would be, existing or not.
    let exists =
        denial(&run(alice(), "tools/call", json!({"name": "time__now"}), false).await).unwrap();
    let missing =
        denial(&run(alice(), "tools/call", json!({"name": "time__later"}), false).await).unwrap();
    assert_eq!(
        exists["reason"].as_str().unwrap().replace("now", "X"),
        missing["reason"].as_str().unwrap().replace("later", "X")
    );
    // Under a deny glob: denied by it.
    let r = run(
        alice(),
        "tools/call",
        json!({"name": "github__delete_all"}),
        false,
    )
    .await;
    assert!(denial(&r).is_some());
}

#[tokio::test]
async fn repeated_names_are_refused_before_anyone_reads_them_differently() {
    let forwarded = Arc::new(AtomicUsize::new(0));
    let seen = forwarded.clone();
    let inner = tower::service_fn(move |_: McpRequest| {
        seen.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Infallible>(None) }
    });
    let (_tx, rx) = watch::channel(catalog());
    let service = AuthorizeLayer::new(rx, Audit::off(), false).layer(inner);
    let (notify, _) = tokio::sync::mpsc::unbounded_channel();
    let caller = Caller::new(Arc::new(Session::new("s", notify))).with_principal(alice());
    let text = r#"{"name":"github__delete_repo","name":"github__get_issue"}"#;
    let params = serde_json::value::RawValue::from_string(text.into()).unwrap();
    let msg = Message::request(Id::Number(1), "tools/call", Some(params));
    let reply = service.oneshot(McpRequest::new(msg, caller)).await.unwrap();
    assert!(reply.unwrap().error.is_some());
    assert_eq!(forwarded.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn prompts_resources_and_completions_are_checked_by_kind() {
    let prompt = run(
        alice(),
        "prompts/get",
        json!({"name": "github__triage"}),
        false,
    )
    .await;
    assert_eq!(prompt.forwarded.load(Ordering::SeqCst), 1);
    let read = run(
        alice(),
        "resources/read",
        json!({"uri": "file:///docs/a"}),
        false,
    )
    .await;
    assert!(denial(&read).is_some(), "no resource: globs");
    let sub = run(
        alice(),
        "resources/subscribe",
        json!({"uri": "file:///x"}),
        false,
    )
    .await;
    assert!(denial(&sub).is_some());
    let complete = json!({"ref": {"type": "ref/prompt", "name": "github__triage"}, "argument": {"name": "a", "value": ""}});
    assert_eq!(
        run(alice(), "completion/complete", complete, false)
            .await
            .forwarded
            .load(Ordering::SeqCst),
        1
    );
    let complete = json!({"ref": {"type": "ref/resource", "uri": "file:///docs/a"}});
    assert!(denial(&run(alice(), "completion/complete", complete, false).await).is_some());
}

#[tokio::test]
async fn lists_passing_up_hold_only_what_the_client_may_see() {
    let items = |run: Run, key: &str| -> Vec<Value> {
        let reply = run.reply.unwrap();
        let v: Value = serde_json::from_str(reply.result.unwrap().get()).unwrap();
        v[key].as_array().unwrap().clone()
    };
    let tools = items(run(alice(), "tools/list", json!({}), true).await, "tools");
    assert_eq!(tools, vec![json!({"name": "github__get_issue"})]);
    let untouched = items(run(alice(), "tools/list", json!({}), false).await, "tools");
    assert_eq!(
        untouched.len(),
        4,
        "the budget layer plans tools/list when it is on"
    );
    assert_eq!(
        items(
            run(alice(), "prompts/list", json!({}), true).await,
            "prompts"
        )
        .len(),
        1
    );
    assert!(
        items(
            run(alice(), "resources/list", json!({}), true).await,
            "resources"
        )
        .is_empty()
    );
}

#[tokio::test]
async fn the_anonymous_principal_passes_untouched() {
    let r = run(
        Principal::anonymous(),
        "tools/call",
        json!({"name": "nope"}),
        true,
    )
    .await;
    assert_eq!(r.forwarded.load(Ordering::SeqCst), 1);
    let tools = run(Principal::anonymous(), "tools/list", json!({}), true).await;
    let v: Value = serde_json::from_str(tools.reply.unwrap().result.unwrap().get()).unwrap();
    assert_eq!(v["tools"].as_array().unwrap().len(), 4);
}

#[test]
fn an_outcome_is_an_error_only_when_the_result_says_so_however_it_spells_it() {
    let reply = |result: &str| {
        Message::parse(format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#).as_bytes())
            .unwrap()
    };
    let outcome = |result: &str| super::outcome_of(Some(&reply(result))).0.as_str();
    assert_eq!(
        outcome(r#"{"content":[{"type":"text","text":"fine"}]}"#),
        "ok"
    );
    assert_eq!(outcome(r#"{"content":[],"isError":true}"#), "is_error");
    assert_eq!(outcome(r#"{"content":[],"isError":false}"#), "ok");
    // The key written with an escape is the same key.
    assert_eq!(outcome(r#"{"content":[],"is\u0045rror":true}"#), "is_error");
    // The words in a text are not the flag.
    assert_eq!(
        outcome(r#"{"content":[{"type":"text","text":"isError: true"}]}"#),
        "ok"
    );
    assert_eq!(super::outcome_of(None).0.as_str(), "none");
}

#[tokio::test]
async fn a_probe_is_answered_here_and_never_forwarded() {
    // Denied: the same answer as the direct call it stands for.
    let denied = run_as(
        alice(),
        "tools/call",
        json!({"name": "github__delete_repo"}),
        true,
        true,
    )
    .await;
    assert!(denial(&denied).is_some());
    // Allowed (the catalog changed since the budget layer looked): "not found", and the tool
    // is not called.
    let probe = run_as(
        alice(),
        "tools/call",
        json!({"name": "github__get_issue"}),
        true,
        true,
    )
    .await;
    let err = probe.reply.as_ref().unwrap().error.as_ref().unwrap();
    let data: Value = serde_json::from_str(err.data.as_ref().unwrap().get()).unwrap();
    assert_eq!(data["type"], kind::CATALOG_NOT_FOUND);
    assert_eq!(data["name"], "github__get_issue");
    assert_eq!(
        probe.forwarded.load(Ordering::SeqCst),
        0,
        "the tool was called"
    );
    // A name nothing routes is answered as a direct call of it is: "not found".
    let unknown = run_as(
        alice(),
        "tools/call",
        json!({"name": "nowhere__x"}),
        true,
        true,
    )
    .await;
    let err = unknown.reply.as_ref().unwrap().error.as_ref().unwrap();
    assert_eq!(err.kind().as_deref(), Some(kind::CATALOG_NOT_FOUND));
    assert_eq!(unknown.forwarded.load(Ordering::SeqCst), 0);
    // The same call without the flag is forwarded.
    let call = run(
        alice(),
        "tools/call",
        json!({"name": "github__get_issue"}),
        true,
    )
    .await;
    assert_eq!(call.forwarded.load(Ordering::SeqCst), 1);
}
