//! Budget layer tests with clients: each sees its own scope, planned for its own model, in
//! every list-phase answer; and `list_changed` reaches only the clients whose list changed.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};
use tower::Layer;

use super::BudgetLayer;
use super::state::Audience;
use super::tests::{answer, echo, fixed, fixtures, names};
use crate::authz::{Decision, Glob, Scope, Target};
use crate::catalog::{Catalog, CatalogTool};
use crate::context::{Caller, McpRequest, Session};
use crate::identity::{Client, Credential, Directory, Principal, api_key};
use crate::jsonrpc::{Id, Message, to_raw};
use crate::plan::ModeChoice;
use crate::policy::Policy;

fn scope(allow: &[&str], deny: &[&str]) -> Scope {
    let globs = |g: &[&str]| g.iter().map(|s| Glob::new(*s)).collect();
    Scope::new(globs(allow), globs(deny), vec![])
}

/// Alice (read-only GitHub and time, no `get_me`) and Bob (GitHub but deletes, and the
/// filesystem; a Haiku-class model), authenticated by their API keys as the HTTP downstream
/// does.
fn alice_and_bob() -> (Arc<Principal>, Arc<Principal>) {
    let dir = Directory::new(vec![
        Client::new(
            "alice",
            scope(
                &["github/get_*", "github/list_*", "time/*"],
                &["github/get_me"],
            ),
        )
        .with_key(api_key::digest("k-alice")),
        Client::new(
            "bob",
            scope(&["github/*", "filesystem/*"], &["github/delete_*"]),
        )
        .with_key(api_key::digest("k-bob"))
        .with_model("claude-haiku-4-5"),
    ]);
    let who = |key| Arc::new(dir.authenticate(Credential::ApiKey(key)).expect("a client"));
    (who("k-alice"), who("k-bob"))
}

fn tools() -> Vec<CatalogTool> {
    fixtures()
        .into_iter()
        .filter(|t| ["github", "time", "filesystem", "git"].contains(&t.server.as_str()))
        .collect()
}

fn allowed(principal: &Principal, tool: &CatalogTool) -> bool {
    let target = Target::tool(&tool.server, &tool.name);
    principal.client().scope().check(target, None) == Decision::Allow
}

pub(super) fn session(id: &str) -> Arc<Session> {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    Arc::new(Session::new(id, tx))
}

fn as_client(principal: &Arc<Principal>, id: i64, method: &str, params: &Value) -> McpRequest {
    McpRequest::new(
        Message::request(Id::Number(id), method, Some(to_raw(params))),
        Caller::new(session(&format!("s-{}", principal.name()))).with_principal(principal.clone()),
    )
}

#[tokio::test]
async fn each_client_lists_exactly_its_scope() {
    let mut policy = Policy::default();
    policy.budget.mode = ModeChoice::Full;
    let catalog = tools();
    let layer = fixed(catalog.clone(), &policy);
    let mut svc = layer.layer(echo());
    let (alice, bob) = alice_and_bob();
    for who in [&alice, &bob] {
        let list = answer(&mut svc, as_client(who, 1, "tools/list", &json!({}))).await;
        let mut listed = names(&list.result_as().unwrap());
        listed.sort();
        let mut expected: Vec<String> = catalog
            .iter()
            .filter(|t| allowed(who, t))
            .map(|t| t.exposed_name("__").into_owned())
            .collect();
        expected.sort();
        assert!(!expected.is_empty());
        assert_eq!(listed, expected, "{}", who.name());
    }
    // The anonymous caller still gets the whole catalog.
    let all = answer(&mut svc, super::tests::request(2, "tools/list", &json!({}))).await;
    assert_eq!(names(&all.result_as().unwrap()).len(), catalog.len());
}

#[tokio::test]
async fn search_schema_and_invoke_see_only_the_clients_tools() {
    let mut policy = Policy::default();
    policy.budget.mode = ModeChoice::Progressive;
    let catalog = tools();
    let layer = fixed(catalog.clone(), &policy);
    let mut svc = layer.layer(echo());
    let (alice, _) = alice_and_bob();
    let call = |id, name: &str, arguments: Value| {
        as_client(
            &alice,
            id,
            "tools/call",
            &json!({"name": name, "arguments": arguments}),
        )
    };
    // Search: whatever the query, only tools alice may call come back.
    for (n, query) in [
        "delete a repository",
        "read a file",
        "get me",
        "git log",
        "issues",
    ]
    .iter()
    .enumerate()
    {
        let found = answer(
            &mut svc,
            call(
                n as i64,
                "search_tools",
                json!({"query": query, "limit": 20}),
            ),
        )
        .await;
        let result: Value = found.result_as().unwrap();
        for hit in result["structuredContent"]["tools"].as_array().unwrap() {
            let name = hit["name"].as_str().unwrap();
            let tool = catalog
                .iter()
                .find(|t| t.exposed_name("__") == name)
                .unwrap();
            assert!(allowed(&alice, tool), "{query:?} found {name}");
        }
    }
    // Schemas: exactly the tools alice may call. The others go down as the direct call they
    // stand for (no arguments), which the authorize layer below denies as it denies a direct
    // call: the budget layer answers nothing of them itself.
    let sent_down = |m: &Message| -> Value {
        let r: Value = m.result_as().unwrap();
        serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap()
    };
    for (n, tool) in catalog.iter().enumerate() {
        let name = tool.exposed_name("__").into_owned();
        let reply = answer(
            &mut svc,
            call(100 + n as i64, "get_tool_schema", json!({"name": name})),
        )
        .await;
        let result: Value = reply.result_as().unwrap();
        if allowed(&alice, tool) {
            assert!(result.get("isError").is_none(), "{name}: {result}");
            assert_eq!(
                result["structuredContent"]["name"],
                name.as_str(),
                "{result}"
            );
        } else {
            assert_eq!(sent_down(&reply), json!({"name": name}), "{name}: {result}");
        }
    }
    let denied = answer(
        &mut svc,
        call(1000, "get_tool_schema", json!({"name": "github__get_me"})),
    )
    .await;
    let missing = answer(
        &mut svc,
        call(1001, "get_tool_schema", json!({"name": "github__get_mx"})),
    )
    .await;
    assert_eq!(sent_down(&denied), json!({"name": "github__get_me"}));
    // A name the catalog does not route is unknown, with near names from alice's tools only.
    let r: Value = missing.result_as().unwrap();
    assert_eq!(r["isError"], true);
    let missing = r["content"][0]["text"].as_str().unwrap();
    assert!(
        missing.starts_with("Unknown tool \"github__get_mx\"."),
        "{missing}"
    );
    assert!(!missing.contains("github__get_me"), "{missing}");
    // Invoke: a denied tool goes down as its direct call, arguments as given, unchecked.
    let invoked = answer(
        &mut svc,
        call(
            1002,
            "invoke_tool",
            json!({"name": "github__delete_file", "arguments": {}}),
        ),
    )
    .await;
    assert_eq!(
        sent_down(&invoked),
        json!({"name": "github__delete_file", "arguments": {}})
    );
    // An allowed deferred tool goes down as a direct call.
    let invoked = answer(
        &mut svc,
        call(
            1003,
            "invoke_tool",
            json!({"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}),
        ),
    )
    .await;
    let result: Value = invoked.result_as().unwrap();
    assert!(result.get("isError").is_none(), "{result}");
}

#[tokio::test]
async fn clients_of_different_models_get_different_lists_each_byte_stable() {
    let same = scope(&["*"], &[]);
    let dir = Directory::new(vec![
        Client::new("carol", same.clone()).with_key(api_key::digest("kc")),
        Client::new("dave", same)
            .with_key(api_key::digest("kd"))
            .with_model("claude-haiku-4-5"),
    ]);
    let carol = Arc::new(dir.authenticate(Credential::ApiKey("kc")).unwrap());
    let dave = Arc::new(dir.authenticate(Credential::ApiKey("kd")).unwrap());
    let policy = Policy::default();
    let lists = |layer: BudgetLayer| {
        let (carol, dave) = (carol.clone(), dave.clone());
        async move {
            let mut svc = layer.layer(echo());
            let mut out = Vec::new();
            for who in [&carol, &dave, &carol, &dave] {
                let reply = answer(&mut svc, as_client(who, 1, "tools/list", &json!({}))).await;
                out.push(reply.result.unwrap().get().to_owned());
            }
            out
        }
    };
    let first = lists(fixed(fixtures(), &policy)).await;
    assert_ne!(first[0], first[1], "sonnet and haiku budgets differ");
    assert_eq!(first[0], first[2], "carol's list is byte-stable");
    assert_eq!(first[1], first[3], "dave's list is byte-stable");
    // The same in a fresh layer (a restart): same catalog, policy and scope, same bytes.
    assert_eq!(first, lists(fixed(fixtures(), &policy)).await);
    let haiku: Value = serde_json::from_str(&first[1]).unwrap();
    assert!(
        names(&haiku).len() <= 12 + 3,
        "haiku's tool cap: {:?}",
        names(&haiku)
    );
}

#[tokio::test]
async fn list_changed_reaches_only_the_clients_whose_list_changed() {
    let mut policy = Policy::default();
    policy.budget.mode = ModeChoice::Full;
    // A gateway with clients: nobody is told through the everyone-channel.
    policy.clients.push(crate::policy::client::ClientSpec {
        name: "alice".into(),
        scope: Scope::everything(),
        model: None,
        key: None,
        token_scopes: Vec::new(),
    });
    let time_only = |extra: bool| {
        let mut tools: Vec<CatalogTool> = fixtures()
            .into_iter()
            .filter(|t| t.server == "time" || t.server == "git")
            .collect();
        if !extra {
            tools.retain(|t| t.name != "git_status");
        }
        Catalog::from_tools(tools, "__")
    };
    let (publish, catalog) = tokio::sync::watch::channel(Arc::new(time_only(true)));
    let layer = BudgetLayer::new(catalog, &policy);
    let (sink, mut everyone) = tokio::sync::mpsc::unbounded_channel();
    layer.announce_to(sink);
    let mut svc = layer.layer(echo());
    let dir = Directory::new(vec![
        Client::new("timer", scope(&["time/*"], &[])).with_key(api_key::digest("kt")),
        Client::new("gitter", scope(&["git/*"], &[])).with_key(api_key::digest("kg")),
    ]);
    let mut channels = Vec::new();
    for key in ["kt", "kg"] {
        let principal = Arc::new(dir.authenticate(Credential::ApiKey(key)).unwrap());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let session = Arc::new(Session::new(key, tx));
        let req = McpRequest::new(
            Message::request(Id::Number(1), "tools/list", Some(to_raw(&json!({})))),
            Caller::new(session.clone()).with_principal(principal),
        );
        answer(&mut svc, req).await;
        channels.push((session, rx));
    }
    // git_status goes away: the git client's list changes, the time client's does not.
    let mut next = time_only(false);
    next = Catalog::build(
        next.upstreams().iter().map(|g| g.lists()).collect(),
        next.names(),
        "__",
        next.version() + 1,
    );
    publish.send(Arc::new(next)).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (_, timer_rx) = &mut channels[0];
    assert!(timer_rx.try_recv().is_err(), "time's list did not change");
    let (_, gitter_rx) = &mut channels[1];
    let note = gitter_rx.try_recv().expect("git's list changed");
    assert_eq!(note.method(), Some("notifications/tools/list_changed"));
    assert!(everyone.try_recv().is_err(), "no broadcast with clients");
}

/// `name` is listed in `text` as a catalog line (`\n- name` then no more name characters).
fn has_line(text: &str, name: &str) -> bool {
    let needle = format!("\n- {name}");
    text.match_indices(&needle).any(|(at, _)| {
        text[at + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
    })
}

fn arb_tools() -> impl Strategy<Value = Vec<CatalogTool>> {
    let words = ["alpha", "beta", "gamma", "delta", "omega", "sigma"];
    proptest::collection::btree_set(("[ab]", "[pq][0-5]"), 1..12).prop_map(move |ids| {
        ids.into_iter()
            .enumerate()
            .map(|(i, (server, name))| {
                let description = format!(
                    "{} {} the {name} thing of {server}.",
                    words[i % words.len()],
                    words[(i / 2) % words.len()]
                );
                CatalogTool::new(
                    &server,
                    json!({"name": name, "description": description,
                           "inputSchema": {"type": "object", "properties": {"v": {"type": "string"}}}}),
                )
                .expect("a tool")
            })
            .collect()
    })
}

fn arb_glob() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_owned()),
        "[ab]/[pq][0-5]",
        "[ab]/\\*",
        "[ab]/[pq]\\*",
        "\\*/[pq]\\*",
        "prompt:[ab]/\\*",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A tool is in a client's list-phase answers (tools/list, catalog lines, search results,
    /// get_tool_schema) exactly when the call phase allows it (arguments aside).
    #[test]
    fn list_phase_answers_agree_with_the_call_phase(
        tools in arb_tools(),
        allow in proptest::collection::vec(arb_glob(), 0..4),
        deny in proptest::collection::vec(arb_glob(), 0..3),
        progressive in any::<bool>(),
        max_tools in 1usize..6,
    ) {
        let globs = |g: &[String]| g.iter().map(|s| Glob::new(s.as_str())).collect();
        let scope = Scope::new(globs(&allow), globs(&deny), vec![]);
        let dir = Directory::new(vec![Client::new("c", scope).with_key(api_key::digest("k"))]);
        let principal = dir.authenticate(Credential::ApiKey("k")).unwrap();
        let mut policy = Policy::default();
        policy.budget.mode = if progressive { ModeChoice::Progressive } else { ModeChoice::Auto };
        policy.budget.profile.max_tools = max_tools;
        let layer = fixed(tools.clone(), &policy);
        let planned = layer.state.planned_for(Audience::of(&principal, false).as_ref());
        let listed: Value = serde_json::from_str(planned.result.get()).unwrap();
        let listed_names = names(&listed);
        let lines = listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["description"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let searched: Vec<String> = planned.discovery.as_ref().map(|d| {
            ["alpha", "beta gamma", "delta thing", "omega sigma", "p1 q2 a b"]
                .iter()
                .flat_map(|q| {
                    let r = d.search_tools(q, Some(50));
                    names(&r["structuredContent"]).into_iter()
                })
                .collect()
        }).unwrap_or_default();
        for tool in &tools {
            let name = tool.exposed_name("__").into_owned();
            let ok = allowed(&principal, tool);
            let is_listed = listed_names.contains(&name);
            let schema = planned.discovery.as_ref().is_some_and(|d| {
                d.get_tool_schema(&name).get("isError").is_none()
            });
            let seen = is_listed || schema || has_line(&lines, &name) || searched.contains(&name);
            prop_assert_eq!(seen, ok, "{} listed={} schema={}", name, is_listed, schema);
            if ok {
                prop_assert!(is_listed || schema, "{} is allowed but neither listed nor describable", name);
            }
        }
    }
}

#[tokio::test]
async fn calls_of_tools_a_client_may_not_see_are_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("usage.json");
    let policy = Policy::from_toml_str(
        &format!(
            "version = 1\n[budget]\nusage_file = {:?}\n",
            file.display().to_string()
        ),
        "t.toml",
    )
    .unwrap();
    let layer = fixed(tools(), &policy);
    let mut svc = layer.layer(echo());
    let (alice, _) = alice_and_bob();
    for (id, name) in [(1, "github__delete_file"), (2, "time__get_current_time")] {
        let call = json!({"name": name, "arguments": {}});
        answer(&mut svc, as_client(&alice, id, "tools/call", &call)).await;
    }
    let (_, text) = layer.state.usage.as_ref().unwrap().pending_write().unwrap();
    assert!(text.contains("get_current_time"), "{text}");
    assert!(
        !text.contains("delete_file"),
        "a denied call moved the plan: {text}"
    );
}

#[tokio::test]
async fn host_search_instructions_name_only_what_the_client_may_see() {
    let mut policy = Policy::default();
    policy.budget.mode = ModeChoice::HostSearch;
    let layer = fixed(tools(), &policy);
    let upstream_init = tower::service_fn(|req: McpRequest| async move {
        let id = req.message.id.clone().unwrap();
        let result = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mcp-budget", "version": "0"},
            "instructions": "## time\nClocks.\n\n## git\nLocal repositories.\n\n## filesystem\nFiles.",
        });
        Ok::<_, std::convert::Infallible>(Some(Message::response_value(id, &result)))
    });
    let mut svc = layer.layer(upstream_init);
    let (alice, _) = alice_and_bob();
    let reply = answer(&mut svc, as_client(&alice, 1, "initialize", &json!({}))).await;
    let result: Value = reply.result_as().unwrap();
    let text = result["instructions"].as_str().unwrap();
    assert!(text.contains("## time (2 tools"), "{text}");
    assert!(
        text.contains("github__get_issue") || text.contains("## github ("),
        "{text}"
    );
    for hidden in [
        "## git (",
        "## filesystem",
        "Local repositories",
        "github__get_me",
        "delete",
    ] {
        assert!(!text.contains(hidden), "{hidden:?} leaked: {text}");
    }
}

#[tokio::test]
async fn each_client_is_a_token_profile_of_its_own() {
    let mut policy = Policy::default();
    policy.budget.mode = ModeChoice::Full;
    for (name, allow) in [("timer", "time/*"), ("gitter", "git/*")] {
        policy.clients.push(crate::policy::client::ClientSpec {
            name: name.into(),
            scope: scope(&[allow], &[]),
            model: None,
            key: None,
            token_scopes: Vec::new(),
        });
    }
    let profiles = fixed(tools(), &policy).profile_summaries();
    let names: Vec<&str> = profiles.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["default", "timer", "gitter"]);
    let servers = |i: usize| -> Vec<String> {
        let per_server = &profiles[i].1.per_server;
        per_server.iter().map(|s| s.server.clone()).collect()
    };
    assert_eq!(servers(1), ["time"]);
    assert_eq!(servers(2), ["git"]);
    assert!(servers(0).len() >= 4, "{:?}", servers(0));
    let before = |i: usize| profiles[i].1.tokens_before;
    assert!(before(1) < before(0) && before(2) < before(0));
    assert_ne!(before(1), before(2));
}
