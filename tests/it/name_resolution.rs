//! Names a small model gets wrong, resolved (issue 55): the gateway binary over stdio, a
//! scoped client, real upstreams (`server-everything` as `e`, `mcp-server-time` twice, as
//! `time` and `t2`). A bare name, another separator or another case reaches the one tool it
//! means — and authorization decides on that tool; two candidates are named; with
//! `resolve_names = "strict"` the right name is the answer.

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, error_type, first_text, free_port};
use crate::telemetry::{admin, get};

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
    let c = gw.client();
    c.initialize().await;
    // On a loaded machine an upstream may still be starting when the gateway serves: wait
    // until the tools these tests call are listed.
    let want = ["e__echo", "time__get_current_time", "t2__convert_time"];
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let list = c.request("tools/list", json!({})).await;
        let names: Vec<&str> = (list["result"]["tools"].as_array().into_iter().flatten())
            .filter_map(|t| t["name"].as_str())
            .collect();
        if want.iter().all(|w| names.contains(w)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never listed: {names:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    gw
}

fn call(name: &str, arguments: &Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_names_reach_their_tool_and_authorization_decides_on_it() {
    let admin_port = free_port();
    let policy = format!("{CLIENT}{}", admin(admin_port));
    let mut gw = gateway("names-route", &policy).await;
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
    // Counted by rule: `echo` and `convert_time` and the denied `echo` bare, `e.echo` and
    // `e/echo` by separator, `E__ECHO` by case.
    let (_, metrics) = get(admin_port, "/metrics").await;
    let count = |labels: &str| {
        let line = format!("mcp_budget_tool_name_resolved_total{{{labels}}} ");
        let found = metrics.lines().find_map(|l| l.strip_prefix(line.as_str()));
        found
            .unwrap_or_else(|| panic!("no {line} in\n{metrics}"))
            .trim()
            .to_owned()
    };
    assert_eq!(count("rule=\"bare\",outcome=\"routed\""), "3");
    assert_eq!(count("rule=\"separator\",outcome=\"routed\""), "2");
    assert_eq!(count("rule=\"case\",outcome=\"routed\""), "1");
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
