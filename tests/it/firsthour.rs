//! The first hour's stumbles (issue 49, item 5), each on the real binary: `invoke_tool` of a
//! tool the plan lists directly, a mistyped tool name under a client's scope, and the bash
//! completion of subcommands' flags.

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, cli, error_type};

const DENIED: &str = "mcp_budget.authorization.denied";
const NOT_FOUND: &str = "mcp_budget.catalog.not_found";

fn invoke(name: &str, arguments: &Value) -> Value {
    json!({"name": "invoke_tool", "arguments": {"name": name, "arguments": arguments}})
}

/// The names a `tools/list` answer lists.
fn listed(answer: &Value) -> Vec<String> {
    (answer["result"]["tools"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoke_tool_calls_a_tool_the_plan_lists_directly() {
    // Progressive, with the clock kept out of search: it is listed next to the meta-tools.
    let budget = "[budget]\nmode = \"progressive\"\nlist_catalog = false\n\n\
                  [discover]\nnever_defer = [\"time/get_current_time\"]\n";
    let mut gw = Gateway::builder("firsthour-listed", Mode::Stdio)
        .policy(budget)
        .start(&[Up::time("time")])
        .await;
    let c = gw.client();
    c.initialize().await;
    let names = listed(&c.request("tools/list", json!({})).await);
    assert!(
        names.contains(&"time__get_current_time".to_owned())
            && names.contains(&"invoke_tool".to_owned()),
        "{names:?}"
    );
    let r = c
        .request(
            "tools/call",
            invoke("time__get_current_time", &json!({"timezone": "UTC"})),
        )
        .await;
    assert!(
        r["result"].is_object() && r["result"]["isError"] != true,
        "{r}"
    );
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("UTC"), "the clock answered: {r}");
    // Its schema too, and a deferred tool still goes through.
    let r = c
        .request(
            "tools/call",
            json!({"name": "get_tool_schema", "arguments": {"name": "time__get_current_time"}}),
        )
        .await;
    assert!(
        r["result"]["structuredContent"]["inputSchema"].is_object(),
        "{r}"
    );
    let r = c
        .request("tools/call", invoke("time__convert_time", &json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"})))
        .await;
    assert!(
        r["result"].is_object() && r["result"]["isError"] != true,
        "{r}"
    );
    // Search stays over the deferred tools: the listed one is not offered again.
    let r = c
        .request(
            "tools/call",
            json!({"name": "search_tools", "arguments": {"query": "current time"}}),
        )
        .await;
    let found = r["result"]["structuredContent"]["tools"].to_string();
    assert!(!found.contains("get_current_time"), "{r}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_tool_under_a_scope_is_unknown_and_a_hidden_one_stays_denied() {
    let downstream = "stdio_client = \"alice\"\n\n\
        [[client]]\nname = \"alice\"\napi_key_env = \"ALICE_KEY\"\n\
        allow = [\"time/*\", \"e/echo\"]\ndeny = [\"time/convert_time\"]\n";
    let ups = [Up::everything("e"), Up::time("time")];
    let mut gw = Gateway::builder("firsthour-mistyped", Mode::Stdio)
        .policy(downstream)
        .env(&[("ALICE_KEY", "k-alice-firsthour")])
        .start(&ups)
        .await;
    let c = gw.client();
    c.initialize().await;
    let call = |name: &str| json!({"name": name, "arguments": {}});
    // A typo of a tool the client may call: the unknown-tool error anyone gets.
    let r = c.request("tools/call", call("time__get_curent_time")).await;
    assert_eq!(error_type(&r), NOT_FOUND, "mistyped in scope: {r}");
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A name in no upstream's namespace cannot be a hidden tool: unknown too.
    let r = c.request("tools/call", call("get_curent_time")).await;
    assert_eq!(error_type(&r), NOT_FOUND, "no namespace: {r}");
    // Out of the scope, an existing tool and a name that does not exist answer alike.
    let hidden = c.request("tools/call", call("e__add")).await;
    let missing = c.request("tools/call", call("e__no_such_tool")).await;
    assert_eq!(error_type(&hidden), DENIED, "{hidden}");
    assert_eq!(error_type(&missing), DENIED, "{missing}");
    // The same rule and reason, but for the name each call sent.
    let reason = |r: &Value, name: &str| {
        (r["error"]["data"]["reason"].as_str().unwrap()).replace(name, "NAME")
    };
    assert_eq!(
        reason(&hidden, "add"),
        reason(&missing, "no_such_tool"),
        "{hidden} / {missing}"
    );
    let r = c.request("tools/call", call("time__convert_time")).await;
    assert_eq!(error_type(&r), DENIED, "a denied tool stays denied: {r}");
    gw.stop_and_check().await;
}

/// What bash offers for `words` (the last one being completed), with the script `mcp-budget
/// completions bash` prints sourced and its function found as bash finds it (`complete -p`).
fn bash_completes(words: &[&str]) -> String {
    let script = cli(["completions", "bash"]).ok();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp-budget.bash");
    std::fs::write(&path, &script.stdout).unwrap();
    let last = words.len() - 1;
    let probe = format!(
        r#"source {path:?}
f=$(complete -p mcp-budget | sed -E 's/.*-F ([^ ]+) .*/\1/')
COMP_WORDS=({words}); COMP_CWORD={last}
"$f" mcp-budget "${{COMP_WORDS[$COMP_CWORD]}}" "${{COMP_WORDS[$((COMP_CWORD-1))]}}"
echo "${{COMPREPLY[*]}}""#,
        words = words.join(" "),
    );
    let out = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &probe])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn bash_completes_every_subcommands_flags() {
    let serve = bash_completes(&["mcp-budget", "serve", "--po"]);
    assert!(
        serve.split(' ').any(|w| w == "--policy"),
        "serve --po<TAB>: {serve:?}"
    );
    let check = bash_completes(&["mcp-budget", "check", "--"]);
    for flag in ["--policy", "--lock", "--strict"] {
        assert!(
            check.split(' ').any(|w| w == flag),
            "check --<TAB>: {check:?}"
        );
    }
    // Flags of `serve` are not offered for `check`.
    assert!(!check.split(' ').any(|w| w == "--http"), "{check:?}");
    let top = bash_completes(&["mcp-budget", "ser"]);
    assert_eq!(top, "serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_include_pattern_that_matches_no_tool_is_warned_with_the_near_names() {
    let ups = [
        Up::time("time").raw_key("include_tools", r#"["get_curent_time"]"#),
        Up::time("clock").raw_key("include_tools", r#"["nosuch", "convert_*"]"#),
    ];
    let mut gw = Gateway::start("firsthour-include", Mode::Stdio, &ups).await;
    let log = gw.log();
    // The startup summary, under each upstream's line.
    assert!(
        log.contains(r#"time                 warning: include pattern "get_curent_time" matches none of the 2 tools the server lists (did you mean get_current_time?)"#),
        "{log}"
    );
    assert!(
        log.contains(r#"clock                warning: include pattern "nosuch" matches none of the 2 tools the server lists (its tools: get_current_time, convert_time)"#),
        "{log}"
    );
    // A pattern that matches is not warned about; and the log has the WARN line.
    assert!(!log.contains(r#""convert_*" matches"#), "{log}");
    assert!(
        log.contains("WARN") && log.contains("upstream=\"clock\""),
        "{log}"
    );
    let c = gw.client();
    c.initialize().await;
    let names = listed(&c.request("tools/list", json!({})).await);
    assert_eq!(names, ["clock__convert_time"], "{names:?}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upstream_start_says_what_it_waits_for() {
    // A server that takes 6 s to start (an `npx` fetching its package, say).
    let script = format!(
        "sleep 6; exec {} {} hang",
        crate::harness::venv_bin("python"),
        crate::harness::peer_file("fake_server.py")
    );
    let ups = [Up::stdio("slow", "sh", &["-c", &script])];
    let mut gw = Gateway::start("firsthour-slow", Mode::Stdio, &ups).await;
    let log = gw.log();
    let waiting: Vec<&str> = (log.lines())
        .filter(|l| l.contains("Waiting for upstream slow to start"))
        .collect();
    assert!(
        waiting.len() == 1 || waiting.len() == 2,
        "at 2 s, then every 5 s: {log}"
    );
    assert!(waiting[0].contains("(2 s so far, at most 20 s)"), "{log}");
    // stdout stays the protocol's: the client talks to the gateway as usual.
    let c = gw.client();
    c.initialize().await;
    let names = listed(&c.request("tools/list", json!({})).await);
    assert!(names.contains(&"slow__echo".to_owned()), "{names:?}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_counts_as_denied_not_as_the_upstreams_error() {
    let admin_port = crate::harness::free_port();
    let downstream = format!(
        "stdio_client = \"alice\"\n{}\n[[client]]\nname = \"alice\"\napi_key_env = \"ALICE_KEY\"\n\
         allow = [\"time/*\"]\ndeny = [\"time/convert_time\"]\n",
        crate::telemetry::admin(admin_port)
    );
    let mut gw = Gateway::builder("firsthour-denied", Mode::Stdio)
        .policy(&downstream)
        .env(&[("ALICE_KEY", "k-alice-firsthour")])
        .start(&[Up::time("time")])
        .await;
    let c = gw.client();
    c.initialize().await;
    let args =
        json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"});
    let r = c
        .request(
            "tools/call",
            json!({"name": "time__convert_time", "arguments": args}),
        )
        .await;
    assert_eq!(error_type(&r), DENIED, "{r}");
    let (_, metrics) = crate::telemetry::get(admin_port, "/metrics").await;
    let line = |name: &str, outcome: &str| {
        metrics.lines().any(|l| {
            l.starts_with(name)
                && l.contains("tool=\"convert_time\"")
                && l.contains(&format!("outcome=\"{outcome}\""))
        })
    };
    assert!(line("mcp_budget_tool_calls_total", "denied"), "{metrics}");
    assert!(!line("mcp_budget_tool_calls_total", "error"), "{metrics}");
    let request = |outcome: &str| {
        metrics.lines().any(|l| {
            l.starts_with("mcp_budget_requests_total")
                && l.contains("method=\"tools/call\"")
                && l.contains(&format!("outcome=\"{outcome}\""))
        })
    };
    assert!(request("denied") && !request("error"), "{metrics}");
    gw.stop_and_check().await;
}
