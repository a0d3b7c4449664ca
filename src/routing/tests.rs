use serde_json::{Value, json};

use super::*;
use crate::catalog::{Contribution, Held, Quarantined};
use crate::jsonrpc::{Id, to_raw};

/// `git` lists tool `log`, prompt `review` and resource `git://HEAD`; `docs` a template
/// `docs://{page}`; `calc`'s tool `add` is quarantined.
fn catalog() -> Catalog {
    let names = ["git".to_owned(), "docs".to_owned(), "calc".to_owned()];
    let git = Contribution {
        tools: vec![json!({"name": "log", "inputSchema": {"type": "object"}})],
        prompts: vec![json!({"name": "review"})],
        resources: vec![json!({"uri": "git://HEAD", "name": "head"})],
        ..Contribution::default()
    };
    let docs = Contribution {
        templates: vec![json!({"uriTemplate": "docs://{page}", "name": "page"})],
        ..Contribution::default()
    };
    let calc = Contribution {
        tools: vec![json!({"name": "add", "inputSchema": {"type": "object"}})],
        ..Contribution::default()
    };
    let guard = |i: usize, raw: &Contribution, _: &Held| {
        if i != 2 {
            return (raw.clone(), Held::default());
        }
        let q = Quarantined::changed_description("calc", "add");
        let held = Held {
            quarantined: vec![q],
            ..Held::default()
        };
        (Contribution::default(), held)
    };
    let previous = Catalog::default();
    Catalog::build_guarded(vec![git, docs, calc], &names, "__", 1, &previous, guard)
}

fn route(method: &str, params: &Value) -> Option<Routed> {
    let message = Message::request(Id::Number(1), method, Some(to_raw(params)));
    routed(&message, &RequestView::of(&message), &catalog())
}

fn upstream(server: &str, own: &str) -> Reach {
    let at = ["git", "docs", "calc"].iter().position(|s| *s == server);
    Reach::Upstream {
        at: at.unwrap(),
        server: server.into(),
        own: own.into(),
    }
}

#[test]
fn tools_and_prompts_route_to_their_upstream_under_its_own_name() {
    let tool = route("tools/call", &json!({"name": "git__log"})).unwrap();
    assert_eq!((tool.kind, tool.exposed.as_str()), (Kind::Tool, "git__log"));
    assert_eq!(tool.reach, upstream("git", "log"));
    assert_eq!(tool.upstream(), Some("git"));
    let prompt = route("prompts/get", &json!({"name": "git__review"})).unwrap();
    assert_eq!(prompt.kind, Kind::Prompt);
    assert_eq!(prompt.reach, upstream("git", "review"));
    // Tools and prompts are separate name spaces.
    let wrong = route("prompts/get", &json!({"name": "git__log"})).unwrap();
    assert_eq!((&wrong.reach, wrong.upstream()), (&Reach::Nowhere, None));
}

#[test]
fn resources_route_by_uri_and_an_unplaced_uri_may_reach_any_upstream() {
    for method in ["resources/read", "resources/subscribe"] {
        let listed = route(method, &json!({"uri": "git://HEAD"})).unwrap();
        assert_eq!(listed.kind, Kind::Resource);
        assert_eq!(listed.reach, upstream("git", "git://HEAD"), "{method}");
    }
    let templated = route("resources/read", &json!({"uri": "docs://intro"})).unwrap();
    assert_eq!(templated.reach, upstream("docs", "docs://intro"));
    let unplaced = route("resources/read", &json!({"uri": "file:///x"})).unwrap();
    assert_eq!(
        (&unplaced.reach, unplaced.upstream()),
        (&Reach::AnyUpstream, None)
    );
}

#[test]
fn completions_route_by_their_ref() {
    let prompt = json!({"ref": {"type": "ref/prompt", "name": "git__review"}});
    let routed = route("completion/complete", &prompt).unwrap();
    assert_eq!(routed.kind, Kind::Prompt);
    assert_eq!(routed.reach, upstream("git", "review"));
    let resource = json!({"ref": {"type": "ref/resource", "uri": "docs://{page}"}});
    let routed = route("completion/complete", &resource).unwrap();
    assert_eq!(routed.kind, Kind::Resource);
    assert_eq!(routed.reach, upstream("docs", "docs://{page}"));
    // Any other ref is read as a prompt (the gateway answers it with its own error).
    let odd = json!({"ref": {"type": "ref/tool", "name": "git__log"}});
    let routed = route("completion/complete", &odd).unwrap();
    assert_eq!((routed.kind, routed.reach), (Kind::Prompt, Reach::Nowhere));
}

#[test]
fn an_unknown_or_missing_name_routes_nowhere() {
    let unknown = route("tools/call", &json!({"name": "git__Log"})).unwrap();
    assert_eq!(
        (unknown.exposed.as_str(), unknown.given),
        ("git__Log", true)
    );
    assert_eq!(unknown.reach, Reach::Nowhere);
    let nameless = route("tools/call", &json!({"arguments": {}})).unwrap();
    assert_eq!((nameless.exposed.as_str(), nameless.given), ("", false));
    assert_eq!(nameless.reach, Reach::Nowhere);
    // A missing URI still routes as the empty one does; it names no upstream to count on.
    let uriless = route("resources/read", &json!({})).unwrap();
    assert_eq!((uriless.given, uriless.upstream()), (false, None));
    // Methods that call nothing have no route.
    assert_eq!(route("tools/list", &json!({})), None);
    assert_eq!(route("initialize", &json!({})), None);
}

#[test]
fn a_quarantined_tool_is_named_but_not_routed() {
    let held = route("tools/call", &json!({"name": "calc__add"})).unwrap();
    let quarantined = Reach::Quarantined {
        server: "calc".into(),
        own: "add".into(),
    };
    assert_eq!(held.reach, quarantined);
    assert_eq!(held.upstream(), None);
    // The tool is quarantined, not a prompt: a prompt of that name is simply unknown.
    let prompt = route("prompts/get", &json!({"name": "calc__add"})).unwrap();
    assert_eq!(prompt.reach, Reach::Nowhere);
}

#[test]
fn a_request_keeps_its_route_for_the_catalog_it_was_routed_through() {
    use crate::context::{Caller, McpRequest, Session};
    use std::sync::Arc;

    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let params = json!({"name": "git__log"});
    let message = Message::request(Id::Number(1), "tools/call", Some(to_raw(&params)));
    let req = McpRequest::new(message, Caller::new(Arc::new(Session::new("s", tx))));
    let catalog = Arc::new(catalog());
    let first = req.routed(&catalog).unwrap();
    // The layer below, reading the same catalog, gets the same route: not routed again.
    assert!(Arc::ptr_eq(&first, &req.routed(&catalog).unwrap()));
    // A layer reading another catalog routes through that one.
    let other = Arc::new(Catalog::default());
    assert_eq!(req.routed(&other).unwrap().reach, Reach::Nowhere);
    // A rewritten request is routed afresh.
    let rewritten = req.with_params(to_raw(&json!({"name": "calc__add"})));
    let reach = rewritten.routed(&catalog).unwrap().reach.clone();
    assert!(matches!(reach, Reach::Quarantined { .. }), "{reach:?}");
}
