//! Names a small model gets wrong, resolved (issue 55): the gateway binary over stdio, a
//! scoped client, real upstreams (`server-everything` as `e`, `mcp-server-time` twice, as
//! `time` and `t2`). A bare name, another separator or another case reaches the one tool it
//! means — and authorization decides on that tool; two candidates are named; with
//! `resolve_names = "strict"` the right name is the answer.

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, error_type, first_text};

const CLIENT: &str = r#"stdio_client = "alice"

[[client]]
name = "alice"
api_key_env = "ALICE_KEY"
allow = ["time/*", "t2/*", "e/echo"]
deny = ["time/convert_time"]

[[client.rule]]
tools = ["e/echo"]
args.message = { pattern = "hello.*" }
"#;

async fn gateway(test: &str, policy: &str) -> Gateway {
    let ups = [Up::everything("e"), Up::time("time"), Up::time("t2")];
    let mut gw = Gateway::builder(test, Mode::Stdio)
        .policy(policy)
        .env(&[("ALICE_KEY", "k-alice-names")])
        .start(&ups)
        .await;
    gw.client().initialize().await;
    gw
}

fn call(name: &str, arguments: &Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_names_reach_their_tool_and_authorization_decides_on_it() {
    let mut gw = gateway("names-route", CLIENT).await;
    let c = gw.client();
    let hello = json!({"message": "hello there"});
    for name in ["echo", "e.echo", "e/echo", "E__ECHO"] {
        let r = c.request("tools/call", call(name, &hello)).await;
        assert!(first_text(&r).contains("hello there"), "{name}: {r}");
    }
    // Authorization decides on the tool reached: its argument rule holds by any spelling.
    let r = c
        .request("tools/call", call("echo", &json!({"message": "hi"})))
        .await;
    assert_eq!(error_type(&r), "mcp_budget.authorization.denied", "{r}");
    // A client denied a tool cannot reach it through another spelling, nor learn it exists.
    for name in ["time/convert_time", "Time__Convert_Time"] {
        let r = c.request("tools/call", call(name, &json!({}))).await;
        assert_eq!(
            error_type(&r),
            "mcp_budget.catalog.not_found",
            "{name}: {r}"
        );
    }
    // Its bare name has one candidate the client may call, `t2`'s: that one it reaches.
    let args = json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "UTC"});
    let r = c.request("tools/call", call("convert_time", &args)).await;
    assert!(r.get("result").is_some(), "{r}");
    // Two servers have it: the candidates, for the model to pick.
    let r = c
        .request("tools/call", call("get_current_time", &json!({})))
        .await;
    assert_eq!(error_type(&r), "mcp_budget.catalog.ambiguous_name", "{r}");
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(
        r["error"]["data"]["candidates"],
        json!(["t2__get_current_time", "time__get_current_time"]),
        "{r}"
    );
    // A tool the client may not see is never offered: `e/get-sum` is outside its scope.
    let r = c.request("tools/call", call("get-sum", &json!({}))).await;
    assert_eq!(error_type(&r), "mcp_budget.catalog.not_found", "{r}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_resolution_answers_the_one_right_name() {
    let policy = format!("{CLIENT}\n[aggregate]\nresolve_names = \"strict\"\n");
    let mut gw = gateway("names-strict", &policy).await;
    let c = gw.client();
    let r = c
        .request("tools/call", call("echo", &json!({"message": "hello"})))
        .await;
    assert_eq!(error_type(&r), "mcp_budget.catalog.misnamed", "{r}");
    assert_eq!(r["error"]["data"]["tool"], "e__echo", "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("e__echo"),
        "{r}"
    );
    // The hidden tool's name is not given.
    let r = c
        .request("tools/call", call("time.convert_time", &json!({})))
        .await;
    assert_eq!(error_type(&r), "mcp_budget.catalog.not_found", "{r}");
    gw.stop_and_check().await;
}
