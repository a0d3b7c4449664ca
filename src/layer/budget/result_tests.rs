//! Result economy in the budget layer: compaction on the way back, a result over its budget
//! kept for the session and read back with `read_result` by a client that may still see its
//! tool, and by no other.

use std::sync::Arc;

use serde_json::{Value, json};
use tower::Layer;

use super::client_tests::session;
use super::tests::{answer, fixed, names};
use crate::authz::{Glob, Scope};
use crate::catalog::CatalogTool;
use crate::context::{Caller, McpRequest, Session};
use crate::identity::{Client, Credential, Directory, Principal, api_key};
use crate::jsonrpc::{Id, Message, to_raw};
use crate::plan::ModeChoice;
use crate::policy::Policy;

/// A JSON document of `n` issues, pretty-printed as an API would send it.
fn issues(n: usize) -> String {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"number": i, "title": format!("issue {i}"), "state": "open"}))
        .collect();
    serde_json::to_string_pretty(&items).unwrap()
}

/// The inner service answers every call with `issues(200)`.
fn upstream() -> impl crate::layer::Inner {
    tower::service_fn(|req: McpRequest| async move {
        let id = req.message.id.clone().unwrap();
        let text = issues(200);
        Ok(Some(Message::response_value(
            id,
            &json!({"content": [{"type": "text", "text": text}]}),
        )))
    })
}

fn tools() -> Vec<CatalogTool> {
    let tool = |name: &str| {
        CatalogTool::new(
            "gh",
            json!({"name": name, "inputSchema": {"type": "object"}}),
        )
        .unwrap()
    };
    vec![tool("list_issues"), tool("get_secret")]
}

fn policy(rules: &str) -> Policy {
    let text = format!("version = 1\n[budget]\nmode = \"full\"\n{rules}");
    let mut p = Policy::from_toml_str(&text, "t.toml").unwrap();
    p.budget.mode = ModeChoice::Full;
    p
}

fn principal(name: &str, allow: &[&str]) -> Arc<Principal> {
    let globs = allow.iter().map(|s| Glob::new(*s)).collect();
    let key = format!("k-{name}");
    let dir = Directory::new(vec![
        Client::new(name, Scope::new(globs, vec![], vec![])).with_key(api_key::digest(&key)),
    ]);
    Arc::new(
        dir.authenticate(Credential::ApiKey(&key))
            .expect("a client"),
    )
}

fn call(
    session: &Arc<Session>,
    who: Option<&Arc<Principal>>,
    name: &str,
    args: &Value,
) -> McpRequest {
    let params = json!({"name": name, "arguments": args});
    let mut caller = Caller::new(session.clone());
    if let Some(p) = who {
        caller = caller.with_principal(p.clone());
    }
    McpRequest::new(
        Message::request(Id::Number(1), "tools/call", Some(to_raw(&params))),
        caller,
    )
}

fn texts(reply: &Message) -> Vec<String> {
    let result: Value = reply.result_as().unwrap();
    (result["content"].as_array().unwrap().iter())
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect()
}

/// The `{"id":…,"offset":…}` a note or footer ends with.
fn next_of(note: &str) -> Option<Value> {
    let at = note.rfind("{\"id\"")?;
    let end = note[at..].find('}')? + at + 1;
    serde_json::from_str(&note[at..end]).ok()
}

#[tokio::test]
async fn compaction_applies_to_the_tools_whose_rule_asks_for_it() {
    let layer = fixed(
        tools(),
        &policy("[budget.tools.\"gh/list_issues\"]\nresult_format = \"toon\"\n"),
    );
    let mut svc = layer.layer(upstream());
    let s = session("s1");
    let reply = answer(&mut svc, call(&s, None, "gh__list_issues", &json!({}))).await;
    let text = &texts(&reply)[0];
    assert!(
        text.starts_with("[200]{number,title,state}:\n  0,issue 0,open"),
        "{text}"
    );
    let plain = answer(&mut svc, call(&s, None, "gh__get_secret", &json!({}))).await;
    assert_eq!(texts(&plain)[0], issues(200));
    assert_eq!(layer.results_compacted(), 1);
    // No budget, no store: read_result is not listed.
    let list = answer(&mut svc, super::tests::request(2, "tools/list", &json!({}))).await;
    assert!(!names(&list.result_as().unwrap()).contains(&"read_result".to_owned()));
}

#[tokio::test]
async fn a_result_over_its_budget_is_read_back_whole_by_its_session_only() {
    let layer = fixed(
        tools(),
        &policy("[budget.tools.\"gh/*\"]\nmax_result_tokens = 200\n"),
    );
    let mut svc = layer.layer(upstream());
    let list = answer(&mut svc, super::tests::request(2, "tools/list", &json!({}))).await;
    assert_eq!(
        names(&list.result_as().unwrap()).last().map(String::as_str),
        Some("read_result")
    );
    let s = session("s1");
    let first = texts(&answer(&mut svc, call(&s, None, "gh__list_issues", &json!({}))).await);
    let (head, note) = (&first[0], &first[1]);
    assert!(
        note.contains("array of 200 objects {number,title,state}"),
        "{note}"
    );
    let mut whole = head.clone();
    let mut next = next_of(note).expect("the note names the next page");
    let id = next["id"].as_str().unwrap().to_owned();
    // Another session cannot read it.
    let other = texts(&answer(&mut svc, call(&session("s2"), None, "read_result", &next)).await);
    assert!(other[0].contains("no result"), "{other:?}");
    for _ in 0..100 {
        let page = texts(&answer(&mut svc, call(&s, None, "read_result", &next)).await);
        whole.push_str(&page[0]);
        match next_of(&page[1]) {
            Some(n) => next = n,
            None => break,
        }
    }
    assert_eq!(whole, issues(200));
    assert_eq!(layer.results_cut(), 1);
    let pointer = json!({"id": id, "pointer": "/150/title"});
    let page = texts(&answer(&mut svc, call(&s, None, "read_result", &pointer)).await);
    assert_eq!(page[0], "issue 150");
}

#[tokio::test]
async fn a_client_that_may_not_see_the_tool_may_not_read_its_result() {
    let layer = fixed(
        tools(),
        &policy("[budget.tools.\"gh/*\"]\nmax_result_tokens = 150\n"),
    );
    let mut svc = layer.layer(upstream());
    let alice = principal("alice", &["gh/*"]);
    let mallory = principal("mallory", &["gh/get_secret"]);
    let s = session("shared");
    let first = texts(
        &answer(
            &mut svc,
            call(&s, Some(&alice), "gh__list_issues", &json!({})),
        )
        .await,
    );
    let next = next_of(first.last().unwrap()).unwrap();
    let read = texts(&answer(&mut svc, call(&s, Some(&alice), "read_result", &next)).await);
    assert!(read[0].contains("issue"), "{read:?}");
    // The same session's id, read by a client whose scope hides gh/list_issues: refused.
    let denied = texts(&answer(&mut svc, call(&s, Some(&mallory), "read_result", &next)).await);
    assert!(denied[0].contains("may not use"), "{denied:?}");
    assert!(!denied[0].contains("issue 1"), "{denied:?}");
}
