//! `[sanitize] arguments = "strict"` end to end: a call with a parameter the tool does not
//! declare (`{"exfil": "SECRET"}`), a wrong type or a missing required one is refused with
//! `-32602` `mcp_budget.arguments.invalid` naming the property, directly, through `invoke_tool`
//! and from a `run_code` script, and the upstream never receives it (`fake_server.py` reports
//! every call it got); the reference server-everything's own schemas are enforced the same way;
//! without the key, the same call is forwarded as before.
//!
//! Tools whose `$schema` the validator does not know (draft 3, `""`, a custom URI) are checked
//! as a known draft and every call of them is answered exactly once, over stdio and over HTTP
//! in both eras; a tool whose schema compiles as no draft has its calls refused
//! (`mcp_budget.arguments.uncheckable`) and `check --live` lists it; `"type": ["object"]` gets
//! the declared-key check; what reaches the server is what was checked (repeated keys and
//! undefined params members do not); `prompts/get` arguments are checked against the prompt's
//! declared ones (`tests/peers/strict_server.py` serves all of these and reports the raw lines
//! it received).

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    ACCEPT_BOTH, Gateway, Mode, TagGuard, Up, WAIT, assert_no_leftovers, error_type, http_client,
    new_tag, peer_file, policy, post, run_check, venv_bin,
};

const POLICY: &str = r#"
[budget]
mode = "progressive"

[discover]
code_mode = true

[sanitize]
arguments = "strict"
"#;

fn refusal(answer: &Value) -> (&str, &str, String) {
    let err = &answer["error"];
    assert_eq!(err["code"], -32602, "{answer}");
    let message = err["message"].as_str().unwrap_or_default().to_owned();
    (
        err["data"]["type"].as_str().unwrap_or_default(),
        err["data"]["property"].as_str().unwrap_or_default(),
        message,
    )
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_arguments_stop_undeclared_parameters_on_every_path() {
    let ups = [Up::fake("f", "hang"), Up::everything("e")];
    let mut gw = Gateway::builder("strict-args", Mode::Stdio)
        .policy(POLICY)
        .start(&ups)
        .await;
    let c = gw.client();
    c.initialize().await;
    let exfil = json!({"message": "hi", "exfil": "SECRET-1"});
    let direct = c.call_tool("f__echo", exfil).await;
    let (kind, property, message) = refusal(&direct);
    assert_eq!((kind, property), ("mcp_budget.arguments.invalid", "/exfil"));
    assert!(
        message.contains("f__echo") && message.contains("\"exfil\" is not declared"),
        "{message}"
    );
    let wrong = c.call_tool("f__echo", json!({"message": 5})).await;
    assert_eq!(refusal(&wrong).1, "/message");
    // Through invoke_tool: the call it makes is checked as a direct one.
    let args = json!({"name": "f__echo", "arguments": {"message": "x", "exfil": "SECRET-2"}});
    let invoked = c.call_tool("invoke_tool", args).await;
    assert_eq!(refusal(&invoked).1, "/exfil", "{invoked}");
    // From a script: its call fails with the refusal.
    let code = "return tools.call('f__echo', {message: 'x', exfil: 'SECRET-3'})";
    let ran = c.call_tool("run_code", json!({"code": code})).await;
    assert_eq!(ran["result"]["isError"], true, "{ran}");
    assert!(text(&ran).contains("\"exfil\" is not declared"), "{ran}");
    // The reference server's own schema: `echo` takes `message` only.
    let everything = c
        .call_tool("e__echo", json!({"message": "m", "extra": 1}))
        .await;
    assert_eq!(refusal(&everything).1, "/extra", "{everything}");
    let missing = c.call_tool("e__echo", json!({})).await;
    assert_eq!(refusal(&missing).1, "/message", "{missing}");
    // What matches goes through.
    assert_eq!(
        text(&c.call_tool("f__echo", json!({"message": "fine"})).await),
        "fine"
    );
    assert!(text(&c.call_tool("e__echo", json!({"message": "m"})).await).contains('m'));
    // The server got the one valid call, never a secret.
    let received = text(&c.call_tool("f__received", json!({})).await);
    assert_eq!(received, r#"[{"message": "fine"}]"#);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_key_the_same_call_is_forwarded() {
    let ups = [Up::fake("f", "hang")];
    let mut gw = Gateway::start("strict-args-pass", Mode::Stdio, &ups).await;
    let c = gw.client();
    c.initialize().await;
    let sent = c
        .call_tool("f__echo", json!({"message": "hi", "exfil": "SECRET"}))
        .await;
    assert_eq!(text(&sent), "hi", "{sent}");
    let received = text(&c.call_tool("f__received", json!({})).await);
    assert!(received.contains("SECRET"), "{received}");
    gw.stop_and_check().await;
}

/// The tools of `strict_server.py` whose schema strict must read as a known draft.
const READABLE: [&str; 4] = ["draft3", "empty", "custom", "listed"];

/// `tests/peers/strict_server.py` as upstream `s`.
fn schemas_up() -> Up {
    Up::stdio("s", &venv_bin("python"), &[&peer_file("strict_server.py")])
}

fn call_params(tool: &str, arguments: &Value) -> Value {
    json!({"name": format!("s__{tool}"), "arguments": arguments})
}

/// Checks the answers a client got for `tool` with `{"q": "x"}` (`good`) and with an
/// undeclared property too (`bad`).
fn assert_checked(tool: &str, good: &Value, bad: &Value) {
    if tool == "broken" {
        assert_eq!(good["error"]["code"], -32000, "{good}");
        assert_eq!(
            error_type(good),
            "mcp_budget.arguments.uncheckable",
            "{good}"
        );
        assert_eq!(good["error"]["data"]["tool"], "s__broken", "{good}");
        assert_eq!(error_type(bad), "mcp_budget.arguments.uncheckable", "{bad}");
        return;
    }
    assert_eq!(text(good), "x", "{tool}: {good}");
    let (kind, property, _) = refusal(bad);
    assert_eq!(
        (kind, property),
        ("mcp_budget.arguments.invalid", "/exfil"),
        "{tool}: {bad}"
    );
}

/// Over stdio, every call of a tool with a `$schema` the validator does not know is answered
/// once (pipelined, 55 calls before any answer is read), as the tool's schema says; directly
/// and through `invoke_tool`. What the server receives is what was checked, and `prompts/get`
/// arguments are checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_answers_every_call_whatever_the_schema_over_stdio() {
    let mut gw = Gateway::builder("strict-schemas", Mode::Stdio)
        .policy(POLICY)
        .start(&[schemas_up()])
        .await;
    let c = gw.client();
    c.initialize().await;
    let good = json!({"q": "x"});
    let bad = json!({"q": "x", "exfil": "SECRET-A"});
    let mut sent = Vec::new();
    for _ in 0..5 {
        for tool in READABLE.iter().chain(&["broken"]) {
            let g = c
                .start_request("tools/call", call_params(tool, &good))
                .await;
            let b = c.start_request("tools/call", call_params(tool, &bad)).await;
            sent.push((*tool, g, b));
        }
    }
    let limit = Duration::from_secs(10);
    for (tool, g, b) in &sent {
        let (g, b) = (c.response(g, limit).await, c.response(b, limit).await);
        assert_checked(tool, &g, &b);
    }
    c.drain(Duration::from_millis(300)).await;
    let ids: Vec<Value> = sent
        .iter()
        .flat_map(|(_, g, b)| [g.clone(), b.clone()])
        .collect();
    c.assert_answered_once(&ids);
    // Through invoke_tool: the same rule.
    let invoked = c
        .call_tool(
            "invoke_tool",
            json!({"name": "s__broken", "arguments": good}),
        )
        .await;
    assert_eq!(
        error_type(&invoked),
        "mcp_budget.arguments.uncheckable",
        "{invoked}"
    );
    let invoked = c
        .call_tool(
            "invoke_tool",
            json!({"name": "s__custom", "arguments": bad}),
        )
        .await;
    assert_eq!(refusal(&invoked).1, "/exfil", "{invoked}");
    // A repeated key and params members MCP does not define: the server gets what was checked.
    c.send_raw(
        concat!(
            r#"{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"s__draft3","#,
            r#""arguments":{"q":"SMUGGLED","q":"fine"},"exfil":"SECRET-B","_meta":{"k":"v"}}}"#,
            "\n"
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(text(&c.response(&json!("dup"), WAIT).await), "fine");
    assert_prompts_are_checked(c).await;
    let received = text(&c.call_tool("s__received", json!({})).await);
    let lines: Vec<String> = serde_json::from_str(&received).unwrap();
    // 5 × 4 good calls, the repeated-key call and the one good prompts/get.
    assert_eq!(lines.len(), 22, "{lines:#?}");
    for secret in ["SECRET", "SMUGGLED", "exfil"] {
        assert!(
            !received.contains(secret),
            "{secret} reached the server: {lines:#?}"
        );
    }
    let dup: Value = serde_json::from_str(&lines[20]).unwrap();
    assert_eq!(dup["params"]["arguments"], json!({"q": "fine"}), "{dup}");
    assert_eq!(dup["params"]["_meta"]["k"], "v", "{dup}");
    gw.stop_and_check().await;
}

/// `prompts/get` of `s__greet` (arguments `who`, required, and `tone`): an undeclared
/// argument, a value that is not a string and a missing required one are refused.
async fn assert_prompts_are_checked(c: &mut crate::harness::RawClient) {
    for (arguments, property) in [
        (json!({"who": "a", "exfil": "SECRET-C"}), "/exfil"),
        (json!({"who": 5}), "/who"),
        (json!({"tone": "warm"}), "/who"),
    ] {
        let got = c
            .request(
                "prompts/get",
                json!({"name": "s__greet", "arguments": arguments}),
            )
            .await;
        let (kind, at, _) = refusal(&got);
        assert_eq!(
            (kind, at),
            ("mcp_budget.arguments.invalid", property),
            "{got}"
        );
        assert_eq!(got["error"]["data"]["prompt"], "s__greet", "{got}");
    }
    let got = c
        .request(
            "prompts/get",
            json!({"name": "s__greet", "arguments": {"who": "bob"}}),
        )
        .await;
    let said = &got["result"]["messages"][0]["content"]["text"];
    assert_eq!(said, "hello bob", "{got}");
}

/// Over HTTP, a 2025-era session and 2026-07-28 stateless requests: every call of a tool with
/// a `$schema` the validator does not know gets its one answer (not a dropped connection, not
/// `-32603`), as the tool's schema says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_answers_every_call_whatever_the_schema_over_http_in_both_eras() {
    let gw = Gateway::builder("strict-schemas-http", Mode::Http)
        .policy(POLICY)
        .start(&[schemas_up()])
        .await;
    let client = http_client();
    let url = gw.url();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "it-strict", "version": "0"}}});
    let session = post(&client, url, ACCEPT_BOTH, &[], &init)
        .await
        .session()
        .unwrap();
    let legacy = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        post(&client, url, ACCEPT_BOTH, &legacy, &note).await.status,
        202
    );
    let modern_meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "it-strict", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    for tool in READABLE.iter().chain(&["broken"]) {
        let name = format!("s__{tool}");
        let modern = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", name.as_str()),
        ];
        let mut answers = Vec::new();
        for arguments in [json!({"q": "x"}), json!({"q": "x", "exfil": "SECRET"})] {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": call_params(tool, &arguments)});
            let old = post(&client, url, ACCEPT_BOTH, &legacy, &body).await;
            let mut body = body;
            body["params"]["_meta"] = modern_meta.clone();
            let new = post(&client, url, ACCEPT_BOTH, &modern, &body).await;
            answers.push((old.json(), new.json()));
        }
        let [(old_good, new_good), (old_bad, new_bad)] = <[_; 2]>::try_from(answers).unwrap();
        assert_checked(tool, &old_good, &old_bad);
        assert_checked(tool, &new_good, &new_bad);
    }
    gw.stop_and_check().await;
}

/// `check --live` lists the tools of a strict upstream whose schema cannot be checked (and
/// only those): with `--strict`, that fails the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_live_lists_the_tools_strict_cannot_check() {
    let tag = new_tag("strict-check-live");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let section = "[sanitize]\narguments = \"strict\"\n";
    let policy = policy(dir.path(), &tag, section, &[schemas_up()]);
    let (code, stderr) = run_check(&policy, &tag, &["--live", "--strict"], &[]).await;
    assert_eq!(code, Some(65), "{stderr}");
    assert!(
        stderr.contains("tool \"s/broken\" is unchecked")
            && stderr.contains("mcp_budget.arguments.uncheckable"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("is unchecked").count(), 1, "{stderr}");
    assert_no_leftovers(&tag).await;
}
