//! `[sanitize] arguments = "strict"` end to end: a call with a parameter the tool does not
//! declare (`{"exfil": "SECRET"}`), a wrong type or a missing required one is refused with
//! `-32602` `mcp_budget.arguments.invalid` naming the property, directly, through `invoke_tool`
//! and from a `run_code` script, and the upstream never receives it (`fake_server.py` reports
//! every call it got); the reference server-everything's own schemas are enforced the same way;
//! without the key, the same call is forwarded as before.

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up};

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
    let mut gw = Gateway::start_with("strict-args", Mode::Stdio, POLICY, &ups).await;
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
