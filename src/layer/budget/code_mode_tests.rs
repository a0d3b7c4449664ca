//! `run_code` in the layer: a script's calls reach the inner service as the caller's
//! `tools/call`s, under the run's audit id, and its result comes back capped.
use std::convert::Infallible;
use std::sync::Mutex;

use super::tests::{answer, fixed, names, request};
use super::*;
use crate::catalog::CatalogTool;
use crate::policy::CodeMode;
use serde_json::json;

fn weather() -> Vec<CatalogTool> {
    let tool = |name: &str| {
        CatalogTool::new(
            "weather",
            json!({"name": name, "description": format!("The {name} of a city."),
                   "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}),
        )
        .unwrap()
    };
    vec![tool("forecast"), tool("alerts")]
}

fn code_policy(max_result_tokens: usize) -> Policy {
    let mut policy = Policy::default();
    policy.discover.names.code = Some("run_code".into());
    policy.discover.code_mode = Some(CodeMode {
        max_result_tokens,
        ..CodeMode::default()
    });
    policy
}

/// What reached the inner service: (tool name, session, run id) per call.
type Seen = Arc<Mutex<Vec<(String, String, Option<String>)>>>;

fn recording(seen: Seen) -> impl crate::layer::Inner {
    tower::service_fn(move |req: McpRequest| {
        let seen = seen.clone();
        async move {
            let params: Value = req.message.params_as().unwrap();
            let name = params["name"].as_str().unwrap().to_owned();
            crate::lock::lock(&seen).push((
                name.clone(),
                req.caller.session.id.clone(),
                req.caller.run.as_deref().map(str::to_owned),
            ));
            let id = req.message.id.clone().unwrap();
            let result = if name == "weather__alerts" {
                json!({"content": [{"type": "text", "text": "no alerts feed"}], "isError": true})
            } else {
                json!({"content": [{"type": "text", "text": json!({"city": params["arguments"]["city"], "t": 21}).to_string()}]})
            };
            Ok(Some(Message::response_value(id, &result)))
        }
    })
}

fn run(code: &str) -> McpRequest {
    request(
        7,
        "tools/call",
        &json!({"name": "run_code", "arguments": {"code": code}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripts_calls_go_down_as_the_callers_under_the_runs_audit_id() {
    let seen = Seen::default();
    let layer = fixed(weather(), &code_policy(4000));
    let mut svc = layer.layer(recording(seen.clone()));
    let code = r#"
        const cities = ["Paris", "Oslo"].map(city => tools.call("weather/forecast", {city}));
        let alerts; try { tools.call("alerts", {}); } catch (e) { alerts = e.message; }
        return {warm: cities.filter(c => c.t > 20).map(c => c.city), alerts};
    "#;
    let reply = answer(&mut svc, run(code)).await;
    let result: Value = reply.result_as().unwrap();
    assert!(result.get("isError").is_none(), "{result}");
    let returned: Value =
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        returned,
        json!({"warm": ["Paris", "Oslo"], "alerts": "no alerts feed"})
    );
    let run_id = result["_meta"]["mcp_budget/run_audit_id"].as_str().unwrap();
    let seen = crate::lock::lock(&seen);
    let names: Vec<&str> = seen.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["weather__forecast", "weather__forecast", "weather__alerts"]
    );
    assert!(
        seen.iter()
            .all(|(_, session, run)| session == "t" && run.as_deref() == Some(run_id)),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typed_api_is_the_callers_tools_and_big_results_are_refused() {
    let layer = fixed(weather(), &code_policy(4000));
    let mut svc = layer.layer(recording(Seen::default()));
    let reply = answer(&mut svc, run("return tools.describe()")).await;
    let result: Value = reply.result_as().unwrap();
    let api: String = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert!(
        api.contains("type weather__forecast = (_: {") && api.contains("type weather__alerts"),
        "{api}"
    );
    let mut svc = fixed(weather(), &code_policy(50)).layer(recording(Seen::default()));
    let reply = answer(&mut svc, run("return 'word '.repeat(500)")).await;
    let result: Value = reply.result_as().unwrap();
    assert_eq!(result["isError"], true);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("`[discover] code_mode_max_result_tokens`"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_code_mode_max_runs_is_refused_at_once() {
    let mut policy = code_policy(4000);
    if let Some(code) = policy.discover.code_mode.as_mut() {
        code.max_runs = 1;
    }
    let (entered_tx, mut entered) = tokio::sync::mpsc::unbounded_channel::<()>();
    let release = Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let inner = tower::service_fn(move |req: McpRequest| {
        let (entered_tx, held) = (entered_tx.clone(), held.clone());
        async move {
            let _ = entered_tx.send(());
            held.notified().await;
            let id = req.message.id.clone().unwrap();
            Ok::<_, Infallible>(Some(Message::response_value(id, &json!({"content": []}))))
        }
    });
    let layer = fixed(weather(), &policy);
    let mut first = layer.layer(inner.clone());
    let running = tokio::spawn(async move {
        answer(
            &mut first,
            run("tools.call('weather__forecast', {}); 'done'"),
        )
        .await
    });
    entered
        .recv()
        .await
        .expect("the first run's call reached the inner service");
    let mut second = layer.layer(inner);
    let refused: Value = answer(&mut second, run("1")).await.result_as().unwrap();
    assert_eq!(refused["isError"], true);
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("`[discover] code_mode_max_runs`"), "{text}");
    release.notify_one();
    let done: Value = running.await.unwrap().result_as().unwrap();
    assert_eq!(done["content"][0]["text"], "\"done\"", "{done}");
}

#[tokio::test]
async fn run_code_is_listed_with_the_meta_tools_and_counted_by_the_planner() {
    let mut without = Policy::default();
    without.budget.mode = crate::plan::ModeChoice::Progressive;
    let mut with = code_policy(4000);
    with.budget.mode = crate::plan::ModeChoice::Progressive;
    let plain = fixed(weather(), &without);
    let coded = fixed(weather(), &with);
    let mut svc = coded.layer(recording(Seen::default()));
    let list: Value = answer(&mut svc, request(1, "tools/list", &json!({})))
        .await
        .result_as()
        .unwrap();
    let names = names(&list);
    assert_eq!(
        names,
        ["search_tools", "get_tool_schema", "invoke_tool", "run_code"]
    );
    let definition = crate::codemode::definition("run_code");
    let counter = crate::tokens::Counter::new(&with.budget.profile);
    let own = counter.count_tool("run_code", definition.as_object().unwrap());
    let (before, after) = (plain.summary().tokens_after, coded.summary().tokens_after);
    assert_eq!(
        after - before,
        own,
        "the plan pays for run_code's definition"
    );
}

#[test]
fn each_end_of_a_run_has_its_metric_labels() {
    use crate::codemode::{Failure, Limit, Ran};
    let ran = Ran {
        json: "1".into(),
        calls: 0,
        steps: 0,
    };
    let cases = [
        (Ok(ran), ("ok", "none")),
        (Err(Failure::Threw("Error: x".into())), ("error", "none")),
        (Err(Failure::Engine("no engine".into())), ("engine", "none")),
        (
            Err(Failure::stopped(Limit::Steps, "ran long")),
            ("limit", "code_mode_max_steps"),
        ),
        (
            Err(Failure::stopped(Limit::ResultTokens, "too big")),
            ("limit", "code_mode_max_result_tokens"),
        ),
    ];
    for (outcome, want) in cases {
        assert_eq!(code_mode::labels(&outcome), want, "{outcome:?}");
    }
}
