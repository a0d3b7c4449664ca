//! `share = "per_client"` upstreams, end to end: two API-key clients (the Python SDK over
//! HTTP) each get their own instance of a real server, started with their own
//! `[client.upstream.<name>]` credentials; server-everything's `get-env` shows each its own
//! token and never the other's, `@modelcontextprotocol/server-memory` keeps each one's
//! entities from the other; an idle instance is stopped (its process gone) and the next call
//! starts a new one; past `max_instances` a new client is refused with a clear error while a
//! shared upstream beside it serves everyone; a reload that changes a client's credentials
//! restarts that client's instance.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    Gateway, Mode, Up, WAIT, drain_stderr, free_port, node_bin, peer_file, pids_with_env,
    py_script_output, report, venv_bin,
};

const ALICE: &str = "k-alice-pc-31a7";
const BOB: &str = "k-bob-pc-9e05";
const EXHAUSTED: &str = "mcp_budget.upstream.instances_exhausted";

/// What `who`'s instance gets as `PER_CLIENT_TOKEN` (through `${env:…}`) in test `test`
/// (unique, as the tests run side by side and count the processes that have it).
fn token(who: &str, test: &str) -> String {
    format!("{who}-token-{test}-{}", std::process::id())
}

/// Alice's and bob's tokens in test `test`.
fn tokens(test: &str) -> (String, String) {
    (token("alice", test), token("bob", test))
}

/// The gateway's environment in test `test`: both API keys and both tokens.
fn env(test: &str) -> Vec<(String, String)> {
    vec![
        ("ALICE_KEY".into(), ALICE.into()),
        ("BOB_KEY".into(), BOB.into()),
        ("ALICE_UPSTREAM_TOKEN".into(), tokens(test).0),
        ("BOB_UPSTREAM_TOKEN".into(), tokens(test).1),
    ]
}

/// Starts the gateway of test `test` over HTTP with the two clients (`policy`) and `ups`.
async fn start(test: &str, policy: &str, ups: &[Up]) -> Gateway {
    let env = env(test);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Gateway::builder(test, Mode::Http)
        .policy(policy)
        .env(&env)
        .start(ups)
        .await
}

/// Two clients, alice and bob, each with its own credentials for upstream `e` (its token from
/// `ALICE_UPSTREAM_TOKEN` / `BOB_UPSTREAM_TOKEN`) and the tables `more` gives for it (called
/// with `ALICE` / `BOB`).
fn clients(more: impl Fn(&str) -> String) -> String {
    let client = |name: &str| {
        let upper = name.to_uppercase();
        let more = more(&upper);
        format!(
            "[[client]]\nname = {name:?}\napi_key_env = \"{upper}_KEY\"\nallow = [\"*\"]\n\n\
             [client.upstream.e]\nenv = {{ PER_CLIENT_TOKEN = \"${{env:{upper}_UPSTREAM_TOKEN}}\" }}\n\
             {more}\n"
        )
    };
    format!("\n{}{}", client("alice"), client("bob"))
}

/// No more tables (see [`clients`]).
fn nothing(_: &str) -> String {
    String::new()
}

/// server-everything, one instance per client.
fn everything(extra: &[(&str, &str)]) -> Up {
    let mut up = Up::everything("e").key("share", "per_client");
    for (k, v) in extra {
        up = up.raw_key(k, v);
    }
    up
}

/// Runs the Python SDK client (2025-era session over HTTP) with API key `key`: lists, then
/// makes `calls`; its report.
async fn py(gw: &Gateway, key: &str, calls: &Value) -> Value {
    let headers = json!({ "authorization": format!("Bearer {key}") }).to_string();
    let plan = json!({ "calls": calls });
    let env = [("HEADERS", headers.as_str())];
    let target = ["http", gw.url()];
    report(&py_script_output("auth_client.py", &gw.tag, "legacy", &target, &plan, &env).await).0
}

/// The text of call `i` of a report (panics, showing the report, when it failed).
fn text(report: &Value, i: usize) -> String {
    let call = &report["calls"][i];
    call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("call {i} has no text: {report}"))
        .to_owned()
}

/// What `get-env` shows as `PER_CLIENT_TOKEN`.
fn token_seen(report: &Value, i: usize) -> Option<String> {
    let env: Value = serde_json::from_str(&text(report, i)).expect("get-env prints JSON");
    env.get("PER_CLIENT_TOKEN")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Asserts that the report's first call (`get-env`) saw `token` as `PER_CLIENT_TOKEN`.
fn assert_sees(report: &Value, token: &str) {
    assert_eq!(token_seen(report, 0).as_deref(), Some(token), "{report}");
}

/// The pids of the processes started with `PER_CLIENT_TOKEN=<token>`.
fn instances_with(token: &str) -> Vec<i32> {
    pids_with_env(&format!("PER_CLIENT_TOKEN={token}"))
}

/// [`py`], and every pid of `token`'s instances seen while it ran. Looked up while the client
/// runs, not after: with a short `idle_secs`, the instance may be stopped before a loaded
/// machine lets the test look once the client has exited.
async fn py_watching(gw: &Gateway, key: &str, calls: &Value, token: &str) -> (Value, Vec<i32>) {
    let run = py(gw, key, calls);
    tokio::pin!(run);
    let mut seen = std::collections::BTreeSet::new();
    loop {
        seen.extend(instances_with(token));
        tokio::select! {
            report = &mut run => {
                seen.extend(instances_with(token));
                return (report, seen.into_iter().collect());
            }
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

/// Waits (at most `limit`) until `done` holds.
async fn eventually(limit: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while !done() {
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_gets_its_own_instance_with_its_own_credentials() {
    let (alice_token, bob_token) = tokens("per-client-own");
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str| dir.path().join(name).display().to_string();
    let (alice_file, bob_file) = (file("alice.jsonl"), file("bob.jsonl"));
    let memory = Up::stdio("memory", &node_bin("mcp-server-memory"), &[])
        .key("share", "per_client")
        .env("MEMORY_FILE_PATH", &file("catalog.jsonl"));
    let ups = [everything(&[]), memory, Up::everything("shared")];
    let policy = clients(|who| {
        let file = if who == "ALICE" {
            &alice_file
        } else {
            &bob_file
        };
        format!("[client.upstream.memory]\nenv = {{ MEMORY_FILE_PATH = {file:?} }}\n")
    });
    let gw = start("per-client-own", &policy, &ups).await;

    let get_env = json!({"name": "e__get-env", "args": {}});
    let shared = json!({"name": "shared__get-env", "args": {}});
    let create = |who: &str| {
        json!({"name": "memory__create_entities", "args": {"entities": [
            {"name": format!("{who}-project"), "entityType": "project", "observations": [format!("owned by {who}")]}
        ]}})
    };
    let read = json!({"name": "memory__read_graph", "args": {}});
    // Alice stores an entity; bob then reads, stores his own, reads; alice reads again.
    let alice = py(&gw, ALICE, &json!([get_env, create("alice"), read])).await;
    let bob = py(&gw, BOB, &json!([get_env, read, create("bob"), read])).await;
    let alice_again = py(&gw, ALICE, &json!([read, shared])).await;

    // Each sees its own credentials' effect, never the other's.
    assert_sees(&alice, &alice_token);
    assert_sees(&bob, &bob_token);
    assert!(!text(&alice, 0).contains(bob_token.as_str()), "{alice}");
    assert!(!text(&bob, 0).contains(alice_token.as_str()), "{bob}");
    // Both list the same catalog (the catalog instance's).
    assert_eq!(alice["tools"], bob["tools"]);
    assert_eq!(
        instances_with(&alice_token).len(),
        1,
        "one instance for alice"
    );
    assert_eq!(instances_with(&bob_token).len(), 1, "one instance for bob");

    // State: what alice stores, bob does not see, and the other way round.
    assert!(text(&alice, 2).contains("alice-project"), "{alice}");
    assert!(!text(&bob, 1).contains("alice-project"), "{bob}");
    assert!(text(&bob, 3).contains("bob-project"), "{bob}");
    let graph = text(&alice_again, 0);
    assert!(
        graph.contains("alice-project") && !graph.contains("bob-project"),
        "{graph}"
    );
    let on_disk = |f: &str| std::fs::read_to_string(f).unwrap_or_default();
    assert!(!on_disk(&alice_file).contains("bob-project"));
    assert!(on_disk(&bob_file).contains("bob-project"));

    // A shared upstream beside them is one process for everyone, without their tokens.
    assert_eq!(token_seen(&alice_again, 1), None, "{alice_again}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_instance_is_stopped_and_the_next_call_starts_one() {
    let alice_token = token("alice", "per-client-idle");
    let ups = [everything(&[("idle_secs", "2")])];
    let gw = start("per-client-idle", &clients(nothing), &ups).await;
    let get_env = json!([{"name": "e__get-env", "args": {}}]);
    let (alice, first) = py_watching(&gw, ALICE, &get_env, &alice_token).await;
    assert_sees(&alice, &alice_token);
    assert_eq!(first.len(), 1, "alice's instance runs: {first:?}");
    assert!(
        eventually(WAIT, || instances_with(&alice_token).is_empty()).await,
        "alice's idle instance still runs: {first:?}\n{}",
        gw.log()
    );
    let stopped = || gw.log().contains("Per-client instance stopped (idle_secs)");
    assert!(eventually(WAIT, stopped).await, "{}", gw.log());
    // The catalog instance keeps serving the lists; the next call starts a new instance.
    let (alice, second) = py_watching(&gw, ALICE, &get_env, &alice_token).await;
    assert_sees(&alice, &alice_token);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(first, second, "a new process");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_instances_a_new_client_is_refused_and_a_shared_upstream_serves_on() {
    let (alice_token, bob_token) = tokens("per-client-cap");
    let ups = [
        everything(&[("max_instances", "1")]),
        Up::everything("shared"),
    ];
    let gw = start("per-client-cap", &clients(nothing), &ups).await;
    let calls = json!([
        {"name": "e__get-env", "args": {}},
        {"name": "shared__echo", "args": {"message": "still here"}},
    ]);
    let alice = py(&gw, ALICE, &calls).await;
    assert_sees(&alice, &alice_token);
    let bob = py(&gw, BOB, &calls).await;
    let refused = &bob["calls"][0]["error"];
    assert_eq!(refused["data"]["type"], EXHAUSTED, "{bob}");
    assert_eq!(refused["data"]["upstream"], "e", "{bob}");
    assert_eq!(refused["data"]["max_instances"], 1, "{bob}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("\"e\"") && message.contains('1') && message.contains("max_instances"),
        "{message}"
    );
    assert!(instances_with(&bob_token).is_empty(), "no instance for bob");
    assert!(text(&bob, 1).contains("still here"), "{bob}");
    // Alice keeps her instance.
    let alice = py(&gw, ALICE, &calls).await;
    assert_sees(&alice, &alice_token);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_a_clients_credentials_restarts_its_instance() {
    let (alice_token, bob_token) = tokens("per-client-reload");
    let ups = [everything(&[])];
    let gw = start("per-client-reload", &clients(nothing), &ups).await;
    let get_env = json!([{"name": "e__get-env", "args": {}}]);
    let alice = py(&gw, ALICE, &get_env).await;
    assert_sees(&alice, &alice_token);
    let bob = py(&gw, BOB, &get_env).await;
    assert_sees(&bob, &bob_token);
    let bob_before = instances_with(&bob_token);
    // Alice's token now comes from bob's variable: her instance restarts, bob's stays.
    let file = gw.policy_file();
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = text.replacen(
        "${env:ALICE_UPSTREAM_TOKEN}",
        "${env:BOB_UPSTREAM_TOKEN}",
        1,
    );
    assert_ne!(text, edited);
    std::fs::write(&file, edited).unwrap();
    assert!(
        eventually(WAIT, || gw.log().contains("reload: ")).await,
        "{}",
        gw.log()
    );
    assert!(
        eventually(WAIT, || instances_with(&bob_token).len() == 1
            && instances_with(&alice_token).is_empty())
        .await,
        "alice's old instance is stopped\n{}",
        gw.log()
    );
    let alice = py(&gw, ALICE, &get_env).await;
    assert_sees(&alice, &bob_token);
    let both = instances_with(&bob_token);
    assert_eq!(both.len(), 2, "alice's new instance and bob's");
    assert!(bob_before.iter().all(|p| both.contains(p)), "bob's is kept");
    gw.stop_and_check().await;
}

/// Server→client requests of a per-client stdio instance belong to its one client: alice and
/// bob trigger sampling at the same time, and each is asked (and answered) by its own
/// callback. On a shared stdio upstream the same two calls in flight would make the requests'
/// owner ambiguous, and they would be refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_of_an_instance_asks_its_own_client_only() {
    let ups = [everything(&[])];
    let gw = start("per-client-sampling", &clients(nothing), &ups).await;
    let client = |key: &str, answer: &str| json!({"sampling": answer, "headers": {"authorization": format!("Bearer {key}")}});
    let sample = |who: &str| {
        json!({"op": "call", "client": who, "name": "e__trigger-sampling-request",
               "args": {"prompt": format!("{who}-PROMPT"), "maxTokens": 5},
               "as": who, "background": true})
    };
    let plan = json!({
        "clients": {"alice": client(ALICE, "ALICE-ANSWER"), "bob": client(BOB, "BOB-ANSWER")},
        "steps": [sample("alice"), sample("bob"), {"op": "join"}],
    });
    let report = crate::isolation::two_clients(&gw.tag, gw.url(), &plan).await;
    for (who, own, other) in [
        ("alice", "ALICE-ANSWER", "BOB-ANSWER"),
        ("bob", "BOB-ANSWER", "ALICE-ANSWER"),
    ] {
        let call = &report["calls"][who];
        let result = call["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            result.contains(own) && !result.contains(other),
            "{who}: {call}\n{report}"
        );
        let asked = report["clients"][who]["sampling"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{who} was asked once: {report}");
        let prompt = asked[0]["params"]["messages"][0]["content"]["text"].as_str();
        assert!(
            prompt.is_some_and(|p| p.contains(&format!("{who}-PROMPT"))),
            "{who} was asked its own prompt: {report}"
        );
    }
    gw.stop_and_check().await;
}

/// An HTTP upstream per client: each client's calls reach the server with that client's header
/// only (the catalog instance's lists with none), on sessions of their own where the era has
/// sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_upstream_gets_each_clients_headers_from_its_own_instance() {
    let (alice_token, bob_token) = tokens("per-client-http");
    let port = free_port();
    let mut server = tokio::process::Command::new(venv_bin("python"))
        .args([peer_file("header_server.py"), port.to_string()])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the header server starts");
    let (seen, mut up) = drain_stderr(&mut server, "web", |l| {
        l.starts_with("listening on").then(String::new)
    });
    let listening = tokio::time::timeout(WAIT, up.recv()).await;
    assert!(matches!(listening, Ok(Some(_))), "{}", seen.lock().unwrap());
    let web = Up::http("web", &format!("http://127.0.0.1:{port}/mcp")).key("share", "per_client");
    let headers = |who: &str| {
        format!(
            "[client.upstream.web]\nheaders = {{ X-Upstream-Token = \"${{env:{who}_UPSTREAM_TOKEN}}\" }}\n"
        )
    };
    let ups = [everything(&[]), web];
    let gw = start("per-client-http", &clients(headers), &ups).await;
    let echo = |text: &str| json!({"name": "web__echo", "args": {"text": text}});
    let alice = py(&gw, ALICE, &json!([echo("from alice")])).await;
    let bob = py(&gw, BOB, &json!([echo("from bob")])).await;
    assert!(text(&alice, 0).contains("from alice"), "{alice}");
    assert!(text(&bob, 0).contains("from bob"), "{bob}");

    // What the server saw: (token, session, method, text) per POST.
    let posts: Vec<Vec<String>> = (seen.lock().unwrap().lines())
        .filter(|l| l.starts_with("token="))
        .map(|l| {
            l.split(' ')
                .map(|f| f.split_once('=').map_or("", |(_, v)| v).to_owned())
                .collect()
        })
        .collect();
    let token_of = |text: &str| {
        let calls = posts
            .iter()
            .filter(|p| p[2] == "tools/call" && p[3] == text);
        calls.map(|p| p[0].clone()).collect::<Vec<_>>()
    };
    assert_eq!(token_of("from_alice"), [alice_token.as_str()], "{posts:?}");
    assert_eq!(token_of("from_bob"), [bob_token.as_str()], "{posts:?}");
    // The catalog instance lists with no client's token.
    let lists: Vec<&Vec<String>> = posts.iter().filter(|p| p[2] == "tools/list").collect();
    assert!(
        !lists.is_empty() && lists.iter().all(|p| p[0] == "-"),
        "{posts:?}"
    );
    // Sessions, where the era has them, are never shared between tokens.
    let sessions = |token: &str| {
        (posts.iter())
            .filter(|p| p[0] == token && p[1] != "-")
            .map(|p| p[1].clone())
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert!(
        sessions(&alice_token).is_disjoint(&sessions(&bob_token)),
        "{posts:?}"
    );
    assert!(
        sessions(&alice_token).is_disjoint(&sessions("-")),
        "{posts:?}"
    );
    gw.stop_and_check().await;
}

/// `GET http://127.0.0.1:PORT{path}` of the admin listener: the body.
async fn admin_get(port: u16, path: &str) -> String {
    let url = format!("http://127.0.0.1:{port}{path}");
    let resp = reqwest::get(url).await.expect("the admin listener answers");
    resp.text().await.expect("a body")
}

/// Upstream `e`'s entry of `/status`.
async fn status_of_e(port: u16) -> Value {
    let status: Value = serde_json::from_str(&admin_get(port, "/status").await).unwrap();
    let ups = status["upstreams"].as_array().expect("upstreams").clone();
    (ups.into_iter().find(|u| u["name"] == "e")).expect("e in /status")
}

/// The `mcp_budget_upstream_instances{server="e"}` sample of `/metrics`.
async fn instances_gauge(port: u16) -> Option<String> {
    let text = admin_get(port, "/metrics").await;
    let line = text
        .lines()
        .find(|l| l.starts_with("mcp_budget_upstream_instances{server=\"e\"}"))?;
    line.rsplit(' ').next().map(str::to_owned)
}

/// Operators see the instances: `/status` lists each client's instance of a per-client
/// upstream (client, state, start, calls in flight, idle since) and
/// `mcp_budget_upstream_instances` counts them; once the idle ones are reaped, both read none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_metrics_list_each_clients_instance_until_it_is_reaped() {
    let admin = free_port();
    let policy = format!(
        "{}\n[admin]\nhttp = \"127.0.0.1:{admin}\"\n",
        clients(nothing)
    );
    let ups = [everything(&[("idle_secs", "8")]), Up::everything("shared")];
    let gw = start("per-client-status", &policy, &ups).await;
    let before = status_of_e(admin).await;
    assert_eq!(before["share"], "per_client", "{before}");
    assert_eq!(before["instances"], json!([]), "{before}");
    let get_env = json!([{"name": "e__get-env", "args": {}}]);
    let (alice, bob) = tokio::join!(py(&gw, ALICE, &get_env), py(&gw, BOB, &get_env));
    assert_sees(&alice, &tokens("per-client-status").0);
    assert_sees(&bob, &tokens("per-client-status").1);

    let e = status_of_e(admin).await;
    let instances = e["instances"].as_array().expect("a list");
    let clients: Vec<&str> = instances
        .iter()
        .filter_map(|i| i["client"].as_str())
        .collect();
    assert_eq!(clients, ["alice", "bob"], "{e}");
    for i in instances {
        assert_eq!(i["status"], "ready", "{e}");
        assert_eq!(i["in_flight"], 0, "{e}");
        let started = i["started_at"].as_str().expect("a start time");
        let idle = i["idle_since"].as_str().expect("idle: its call ended");
        // RFC 3339 in UTC, so text order is time order.
        assert!(started.ends_with('Z') && started <= idle, "{e}");
    }
    let shared = serde_json::from_str::<Value>(&admin_get(admin, "/status").await).unwrap();
    let shared = &shared["upstreams"][1];
    assert_eq!(
        (&shared["share"], &shared["instances"]),
        (&json!("global"), &json!([]))
    );
    assert_eq!(instances_gauge(admin).await.as_deref(), Some("2"));

    let reaped = || {
        gw.log()
            .matches("Per-client instance stopped (idle_secs)")
            .count()
            == 2
    };
    assert!(eventually(WAIT, reaped).await, "{}", gw.log());
    let e = status_of_e(admin).await;
    assert_eq!(e["instances"], json!([]), "{e}");
    assert_eq!(instances_gauge(admin).await.as_deref(), Some("0"));
    gw.stop_and_check().await;
}

/// What a per-client instance says outside a call reaches its own client only: alice and bob
/// both subscribe to the same resource and ask for every log level; only alice turns on
/// server-everything's simulated resource updates and logging (sent every 5 s, the later ones
/// with no call in flight), in her instance. Alice gets her instance's
/// `notifications/resources/updated` and its logs outside the call; bob, subscribed to the
/// same URI on his own instance, gets none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instances_messages_outside_a_call_reach_its_own_client_only() {
    let ups = [everything(&[])];
    let gw = start("per-client-outside", &clients(nothing), &ups).await;
    let uri = "demo://resource/dynamic/text/1";
    let client = |key: &str| {
        json!({"log": true, "updates": true,
               "headers": {"authorization": format!("Bearer {key}")}})
    };
    let call = |who: &str, tool: &str| {
        json!({"op": "call", "client": who, "name": format!("e__{tool}"), "args": {},
               "as": format!("{who}-{tool}")})
    };
    let plan = json!({
        "clients": {"alice": client(ALICE), "bob": client(BOB)},
        "steps": [
            {"op": "set_level", "client": "alice", "level": "debug"},
            {"op": "set_level", "client": "bob", "level": "debug"},
            {"op": "subscribe", "client": "alice", "uri": uri},
            {"op": "subscribe", "client": "bob", "uri": uri},
            {"op": "mark", "name": "toggle"},
            call("alice", "toggle-subscriber-updates"),
            call("alice", "toggle-simulated-logging"),
            {"op": "mark", "name": "after"},
            // The next simulated update and log come 5 s after the toggles, outside any call.
            {"op": "sleep", "seconds": 7},
        ],
    });
    let report = crate::isolation::two_clients(&gw.tag, gw.url(), &plan).await;
    for label in [
        "alice-toggle-subscriber-updates",
        "alice-toggle-simulated-logging",
    ] {
        let call = &report["calls"][label];
        assert!(call["result"].is_object(), "{label}: {report}");
    }
    let got = |who: &str, what: &str| report["clients"][who][what].as_array().unwrap().clone();
    let after = |entries: &[Value]| entries.iter().filter(|e| e["mark"] == "after").count();
    let simulated = |logs: &[Value]| {
        (logs.iter())
            .filter(|l| {
                let data = l["params"]["data"].as_str().unwrap_or_default();
                data.contains("level") && data.contains("message")
            })
            .cloned()
            .collect::<Vec<_>>()
    };

    let updates = got("alice", "updates");
    assert!(
        after(&updates) >= 1,
        "alice's updates outside a call: {report}\n{}",
        gw.log()
    );
    assert!(
        updates.iter().all(|u| u["params"]["uri"] == uri),
        "{report}"
    );
    let logs = simulated(&got("alice", "logs"));
    assert!(
        after(&logs) >= 1,
        "alice's logs outside a call: {report}\n{}",
        gw.log()
    );

    assert_eq!(
        got("bob", "updates"),
        Vec::<Value>::new(),
        "bob gets none of alice's: {report}"
    );
    assert_eq!(
        simulated(&got("bob", "logs")),
        Vec::<Value>::new(),
        "{report}"
    );
    gw.stop_and_check().await;
}

/// A 2026-07-28 upstream per client: a resource update comes from the client's own instance,
/// on that instance's `subscriptions/listen`. Alice subscribes from a 2025-era session
/// (`resources/subscribe`, which the gateway turns into its listen on her instance) and listens
/// from a 2026-07-28 one (`subscriptions/listen`, to another resource); bob does both for the
/// same resources. Alice's `touch` of both, on her instance, reaches each of her sessions for
/// the resource it asked for, and neither of bob's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_instances_resource_updates_reach_its_own_client_only() {
    let ups = [Up::era_server("e", "modern").key("share", "per_client")];
    let gw = start("per-client-modern", &clients(nothing), &ups).await;
    let (static_uri, item_uri) = ("era://static", "era://item/7");
    let client = |key: &str, mode: &str| {
        json!({"updates": true, "mode": mode,
               "headers": {"authorization": format!("Bearer {key}")}})
    };
    let touch = |uri: &str| {
        json!({"op": "call", "client": "alice", "name": "e__touch", "args": {"uri": uri},
               "as": format!("touch {uri}")})
    };
    let listen = |who: &str| json!({"op": "listen", "client": who, "uri": item_uri, "seconds": 5});
    let plan = json!({
        "clients": {
            "alice": client(ALICE, "legacy"), "bob": client(BOB, "legacy"),
            "alice-modern": client(ALICE, "auto"), "bob-modern": client(BOB, "auto"),
        },
        "steps": [
            {"op": "subscribe", "client": "alice", "uri": static_uri},
            {"op": "subscribe", "client": "bob", "uri": static_uri},
            listen("alice-modern"),
            listen("bob-modern"),
            // The instances' listen streams are re-opened with the resources: a moment.
            {"op": "sleep", "seconds": 1},
            touch(static_uri),
            touch(item_uri),
            {"op": "join"},
        ],
    });
    let report = crate::isolation::two_clients(&gw.tag, gw.url(), &plan).await;
    let uris = |who: &str| {
        let updates = report["clients"][who]["updates"].as_array().unwrap();
        let uris = updates.iter().filter_map(|u| u["params"]["uri"].as_str());
        uris.map(str::to_owned)
            .collect::<std::collections::BTreeSet<_>>()
    };
    let log = gw.log();
    assert_eq!(
        uris("alice"),
        [static_uri.to_owned()].into(),
        "{report}\n{log}"
    );
    assert_eq!(
        uris("alice-modern"),
        [item_uri.to_owned()].into(),
        "{report}\n{log}"
    );
    assert!(uris("bob").is_empty(), "bob gets none of alice's: {report}");
    assert!(
        uris("bob-modern").is_empty(),
        "bob gets none of alice's: {report}"
    );
    gw.stop_and_check().await;
}

/// A client's subscription keeps its instance: alice subscribes and makes no call for longer
/// than `idle_secs`; her instance is not stopped (a new one would know nothing of her
/// subscription), so when she turns on the simulated updates, they come for her resource.
/// Once her session ends, the instance idles out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_keeps_its_instance_from_idling_out() {
    let ups = [everything(&[("idle_secs", "1")])];
    let gw = start("per-client-subscribed", &clients(nothing), &ups).await;
    let uri = "demo://resource/dynamic/text/1";
    let alice = json!({"updates": true, "headers": {"authorization": format!("Bearer {ALICE}")}});
    let plan = json!({
        "clients": {"alice": alice},
        "steps": [
            {"op": "subscribe", "client": "alice", "uri": uri},
            // Idle for three times idle_secs (reaped within a second after it).
            {"op": "sleep", "seconds": 3},
            {"op": "call", "client": "alice", "name": "e__toggle-subscriber-updates",
             "args": {}, "as": "toggle"},
            {"op": "sleep", "seconds": 1},
        ],
    });
    let report = crate::isolation::two_clients(&gw.tag, gw.url(), &plan).await;
    assert!(report["calls"]["toggle"]["result"].is_object(), "{report}");
    let updates = report["clients"]["alice"]["updates"].as_array().unwrap();
    let log = gw.log();
    assert!(!updates.is_empty(), "alice's updates: {report}\n{log}");
    let started = "Per-client instance started";
    assert_eq!(
        log.matches(started).count(),
        1,
        "one instance all along: {log}"
    );
    // Once alice's session is gone, so is her subscription: the instance idles out.
    let stopped = || gw.log().contains("Per-client instance stopped (idle_secs)");
    assert!(eventually(WAIT, stopped).await, "{}", gw.log());
    gw.stop_and_check().await;
}
