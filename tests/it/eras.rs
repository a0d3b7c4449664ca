//! Every pair of protocol eras through the gateway (issue 3): the Python `mcp` 2.x client in its
//! default mode (`auto`: it probes `server/discover` and speaks 2026-07-28 when offered) and in
//! `mode="legacy"` (2025-11-25 `initialize`), against
//!
//! * `tests/peers/era_server.py --era modern` (2026-07-28 only: refuses `initialize`),
//! * `era_server.py --era legacy` (2025-11-25 only: `server/discover` → -32601),
//! * `era_server.py --era dual` (both; the SDK's default),
//! * server-everything (npm, legacy only), server-github 2025.4.8 (2024-11-05 only),
//! * `mcp-server-time` (`PyPI`, a real dual-era server).
//!
//! Transport `stdio`: client → gateway stdio, gateway → upstream stdio. Transport `http`: client →
//! gateway streamable HTTP, gateway → upstream streamable HTTP (era fixture, server-everything).
//!
//! Groups per cell: `core` (namespaced list, call, progress, cancel: the client cancels, the
//! upstream sees it, the gateway keeps serving), `asks` (elicitation, sampling and roots that the
//! upstream needs answered by the client, on 2025 as server→client requests, on 2026-07-28 as
//! MRTR `input_required` rounds), `list_changed` (`notifications/tools/list_changed`, or
//! `subscriptions/listen` for a 2026-07-28 client), and `upstream_era` (which era the gateway
//! speaks upstream: its startup summary and the fixture's own log of each request's era).
//!
//! Tests that today's gateway fails are `#[ignore = "issue 3: …"]` with the reason; run them with
//! `cargo test --test it eras -- --include-ignored`. rmcp as the client:
//! [`rmcp_eras`](crate::rmcp_eras).

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    EraHttp, Gateway, LEGACY, MODERN, Mode, TagGuard, Transport, Up, Upstream, assert_no_leftovers,
    era_client, era_server_http, era_upstream, gateway_stdio_args, log_shows, new_tag, node_bin,
    policy, summary_protocol,
};
use crate::macros::cells;

/// The Python SDK's default mode: `server/discover`, then 2026-07-28.
const PY_MODERN: &str = "auto";
/// `Client(..., mode="legacy")`: the 2025-11-25 `initialize` handshake.
const PY_LEGACY: &str = "legacy";

/// What one client run left behind: its report and everything logged on the way (the gateway's
/// log, which holds its stdio upstreams' stderr, plus an HTTP fixture's own stderr).
struct Run {
    report: Value,
    log: String,
}

/// Runs the Python era client in `mode` with `plan` through a gateway in front of `up`.
async fn run(mode: &str, up: Upstream, transport: Transport, plan: &Value) -> Run {
    match transport {
        Transport::Stdio => {
            let tag = new_tag(&format!("eras-stdio-{mode}-{up:?}"));
            let _guard = TagGuard(tag.clone());
            let dir = tempfile::tempdir().unwrap();
            // Over stdio no HTTP server is started.
            let (upstream, _, _) = era_upstream(up, transport, &tag).await;
            let policy = policy(dir.path(), &tag, "", &[upstream]);
            let args = gateway_stdio_args(&policy);
            let mut target = vec!["stdio"];
            target.extend(args.iter().map(String::as_str));
            let (report, log) = era_client(&tag, mode, &target, plan).await;
            // The client closed the gateway's stdin: the gateway and its upstream are gone.
            assert_no_leftovers(&tag).await;
            Run { report, log }
        }
        Transport::Http => {
            let tag = new_tag(&format!("eras-http-up-{up:?}"));
            let _guard = TagGuard(tag.clone());
            let (upstream, fixture, everything) = era_upstream(up, transport, &tag).await;
            let gw =
                Gateway::start(&format!("eras-http-{mode}-{up:?}"), Mode::Http, &[upstream]).await;
            let (report, client_log) = era_client(&gw.tag, mode, &["http", gw.url()], plan).await;
            let mut log = gw.log() + &client_log;
            if let Some(f) = &fixture {
                // A cancel may travel on its own POST: give it a moment to land.
                if plan.to_string().contains("\"cancel\"") {
                    log_shows(|| f.log(), "era_server: cancelled", Duration::from_secs(3)).await;
                }
                log += &f.log();
            }
            gw.stop_and_check().await;
            drop(fixture);
            drop(everything);
            assert_no_leftovers(&tag).await;
            Run { report, log }
        }
    }
}

/// The protocol version the client negotiated with the gateway in `mode`.
fn client_era(mode: &str) -> &'static str {
    if mode == PY_MODERN { MODERN } else { LEGACY }
}

fn step(run: &Run, i: usize) -> &Value {
    &run.report["steps"][i]
}

fn text(step: &Value) -> String {
    step["result"]["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// A step that got a result (not an error, not `isError`).
fn assert_ok(run: &Run, i: usize) {
    let s = step(run, i);
    assert!(
        s.get("error").is_none() && s["result"].is_object() && s["result"]["isError"] != true,
        "step {i} failed: {s}\nreport: {}\nlog:\n{}",
        run.report,
        run.log
    );
}

fn listed(run: &Run, i: usize) -> Vec<String> {
    assert_ok_list(run, i);
    step(run, i)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

fn assert_ok_list(run: &Run, i: usize) {
    let s = step(run, i);
    assert!(
        s.get("error").is_none(),
        "step {i} failed: {s}\nlog:\n{}",
        run.log
    );
}

// ---------------------------------------------------------------------------------------------
// core: list, call, progress, cancel

fn core_plan(up: Upstream) -> Value {
    let n = up.name();
    let steps = match up {
        Upstream::Everything => json!([
            {"op": "list_tools"},
            {"op": "call", "name": "everything__echo", "args": {"message": "through the gateway"}},
            {"op": "call", "name": "everything__trigger-long-running-operation",
             "args": {"duration": 0.6, "steps": 3}, "progress": true},
            {"op": "cancel", "name": "everything__trigger-long-running-operation",
             "args": {"duration": 10, "steps": 20}, "after_progress": 1},
            {"op": "call", "name": "everything__echo", "args": {"message": "after cancel"}},
        ]),
        Upstream::Time => json!([
            {"op": "list_tools"},
            {"op": "call", "name": "time__get_current_time", "args": {"timezone": "UTC"}},
            {"op": "call", "name": "time__convert_time",
             "args": {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}},
        ]),
        _ => json!([
            {"op": "list_tools"},
            {"op": "call", "name": format!("{n}__add"), "args": {"a": 2, "b": 3}},
            {"op": "call", "name": format!("{n}__slow"), "args": {"seconds": 0.3, "steps": 3},
             "progress": true},
            {"op": "cancel", "name": format!("{n}__slow"), "args": {"seconds": 5, "steps": 10},
             "after_progress": 1},
            {"op": "call", "name": format!("{n}__echo"), "args": {"message": "after cancel"}},
        ]),
    };
    json!({"steps": steps})
}

/// Namespaced list, a call, a call with progress, a cancelled call (the upstream sees the
/// cancel) and a call after it.
async fn core(mode: &str, up: Upstream, transport: Transport) {
    let run = run(mode, up, transport, &core_plan(up)).await;
    assert_eq!(run.report["protocol"], client_era(mode), "{}", run.report);
    assert_eq!(run.report["server"]["name"], "mcp-budget", "{}", run.report);
    let names = listed(&run, 0);
    let expected: &[&str] = match up {
        Upstream::Everything => &[
            "everything__echo",
            "everything__trigger-long-running-operation",
        ],
        Upstream::Time => &["time__get_current_time", "time__convert_time"],
        _ => &[
            "era__echo",
            "era__add",
            "era__slow",
            "era__ask_user",
            "era__add_tool_later",
        ],
    };
    for name in expected {
        assert!(
            names.iter().any(|n| n == name),
            "{name} in {names:?}\n{}",
            run.log
        );
    }
    assert_ok(&run, 1);
    if up == Upstream::Time {
        let now = &step(&run, 1)["result"]["structuredContent"];
        assert_eq!(now["timezone"], "UTC", "{}", run.report);
        assert_ok(&run, 2);
        assert_eq!(
            step(&run, 2)["result"]["structuredContent"]["target"]["timezone"],
            "Asia/Tokyo",
            "{}",
            run.report
        );
        return;
    }
    let first = text(step(&run, 1));
    if up == Upstream::Everything {
        assert_eq!(first, "Echo: through the gateway", "{}", run.report);
    } else {
        assert_eq!(first, "2 + 3 = 5", "{}", run.report);
    }

    // Progress: every notification, with the total, reaches the client's callback.
    assert_ok(&run, 2);
    let progress = step(&run, 2)["progress"].as_array().unwrap();
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(values, vec![1.0, 2.0, 3.0], "{}", run.report);
    assert!(progress.iter().all(|p| p["total"] == 3.0), "{}", run.report);
    if up.is_fixture() {
        assert_eq!(text(step(&run, 2)), "slept 0.3s in 3 steps");
    }

    // Cancel: the client gave up after the first progress notification, the upstream stopped
    // working on it, and the gateway still serves.
    let cancel = step(&run, 3);
    assert!(cancel.get("error").is_none(), "{cancel}\n{}", run.log);
    assert_eq!(cancel["cancelled"], true, "{cancel}");
    assert!(cancel["ms"].as_u64().unwrap() < 4000, "{cancel}");
    if up.is_fixture() {
        assert!(
            run.log.contains("era_server: cancelled slow"),
            "the upstream never saw the cancel:\n{}",
            run.log
        );
    }
    assert_ok(&run, 4);
    assert_eq!(text(step(&run, 4)), "Echo: after cancel", "{}", run.report);
}

// ---------------------------------------------------------------------------------------------
// asks: elicitation, sampling, roots

fn asks_plan(up: Upstream) -> Value {
    match up {
        Upstream::Everything => json!({
            "sampling": "sampled by era_client",
            "elicit": {"name": "Ada", "check": true},
            "roots": ["file:///tmp/era-root"],
            "steps": [
                {"op": "call", "name": "everything__trigger-elicitation-request", "args": {}},
                {"op": "call", "name": "everything__trigger-sampling-request",
                 "args": {"prompt": "say hi", "maxTokens": 5}},
                {"op": "call", "name": "everything__get-roots-list", "args": {}},
            ],
        }),
        _ => json!({
            "sampling": "sampled by era_client",
            "elicit": {"answer": "blue"},
            "roots": ["file:///tmp/era-root"],
            "steps": [
                {"op": "call", "name": "era__ask_user", "args": {"question": "Favourite colour?"}},
                {"op": "call", "name": "era__ask_model", "args": {"prompt": "say hi"}},
                {"op": "call", "name": "era__list_roots", "args": {}},
            ],
        }),
    }
}

/// The upstream needs the client's user (elicitation), model (sampling) and roots to finish a
/// call: the client's callbacks are asked once each and the answers reach the tool result.
async fn asks(mode: &str, up: Upstream, transport: Transport) {
    let run = run(mode, up, transport, &asks_plan(up)).await;
    assert_eq!(run.report["protocol"], client_era(mode), "{}", run.report);
    for i in 0..3 {
        assert_ok(&run, i);
    }
    let report = &run.report;
    assert_eq!(
        report["elicitation"].as_array().unwrap().len(),
        1,
        "{report}"
    );
    assert_eq!(report["sampling"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["roots"].as_array().unwrap().len(), 1, "{report}");
    if up == Upstream::Everything {
        assert!(text(step(&run, 0)).contains("- Name: Ada"), "{report}");
        assert!(
            text(step(&run, 1)).contains("sampled by era_client"),
            "{report}"
        );
        assert_eq!(
            report["sampling"][0]["messages"][0]["content"]["text"],
            "Resource trigger-sampling-request context: say hi"
        );
        assert!(
            text(step(&run, 2)).contains("file:///tmp/era-root"),
            "{report}"
        );
    } else {
        assert_eq!(report["elicitation"][0]["message"], "Favourite colour?");
        assert_eq!(text(step(&run, 0)), "user answered: blue", "{report}");
        assert_eq!(
            report["sampling"][0]["messages"][0]["content"]["text"],
            "say hi"
        );
        assert_eq!(
            text(step(&run, 1)),
            "model said: sampled by era_client",
            "{report}"
        );
        assert_eq!(
            text(step(&run, 2)),
            "roots: file:///tmp/era-root",
            "{report}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// list_changed

/// A tool added at run time upstream: the client hears of it (2025: the notification; 2026-07-28:
/// on its `subscriptions/listen` stream) and the next listing has it.
async fn list_changed(mode: &str, up: Upstream, transport: Transport) {
    let plan = json!({"steps": [{"op": "list_changed", "name": "era__add_tool_later"}]});
    let run = run(mode, up, transport, &plan).await;
    assert_ok(&run, 0);
    assert_eq!(
        step(&run, 0)["added"],
        json!(["era__later"]),
        "{}\n{}",
        run.report,
        run.log
    );
}

// ---------------------------------------------------------------------------------------------
// upstream_era: what the gateway speaks upstream

/// The gateway speaks `expected` to the era fixture in `era`: its startup summary says so, and
/// the fixture logs each request it gets with the era it arrived in.
async fn upstream_era(era: &str, transport: Transport, expected: &str) {
    let tag = new_tag(&format!("eras-upstream-{era}"));
    let _guard = TagGuard(tag.clone());
    let fixture = match transport {
        Transport::Http => Some(era_server_http(&tag, era).await),
        Transport::Stdio => None,
    };
    let up = match &fixture {
        Some(f) => Up::http("era", &f.url),
        None => Up::era_server("era", era),
    };
    let mut gw = Gateway::start(
        &format!("eras-upstream-{era}"),
        Mode::Stdio,
        &[up.timeout(10)],
    )
    .await;
    let c = gw.client();
    c.initialize().await;
    let r = c
        .call_tool("era__echo", json!({"message": "which era?"}))
        .await;
    let log = || gw.log() + &fixture.as_ref().map(EraHttp::log).unwrap_or_default();
    assert_eq!(
        summary_protocol(&gw.log(), "era").as_deref(),
        Some(expected),
        "startup summary:\n{}",
        log()
    );
    assert_eq!(
        r["result"]["content"][0]["text"],
        "Echo: which era?",
        "{r}\n{}",
        log()
    );
    let line = format!("era_server: tools/call echo era={expected}");
    assert!(
        log_shows(log, &line, Duration::from_secs(2)).await,
        "the fixture did not log {line:?}:\n{}",
        log()
    );
    gw.stop_and_check().await;
    drop(fixture);
    assert_no_leftovers(&tag).await;
}

/// A real third-party upstream's era, from the startup summary only.
async fn third_party_era(up: Up, name: &str, expected: &str) {
    let gw = Gateway::start(&format!("eras-third-{name}"), Mode::Stdio, &[up]).await;
    assert_eq!(
        summary_protocol(&gw.log(), name).as_deref(),
        Some(expected),
        "startup summary:\n{}",
        gw.log()
    );
    gw.stop_and_check().await;
}

// ---------------------------------------------------------------------------------------------
// The matrix, one row per cell: `test_name: group(arguments);`

cells! {
    // Python default (2026-07-28) client, stdio
    py_modern_stdio_modern_core:         core(PY_MODERN, Upstream::Modern,     Transport::Stdio);
    py_modern_stdio_legacy_core:         core(PY_MODERN, Upstream::Legacy,     Transport::Stdio);
    py_modern_stdio_dual_core:           core(PY_MODERN, Upstream::Dual,       Transport::Stdio);
    py_modern_stdio_everything_core:     core(PY_MODERN, Upstream::Everything, Transport::Stdio);
    py_modern_stdio_time_core:           core(PY_MODERN, Upstream::Time,       Transport::Stdio);
    py_modern_stdio_modern_asks:         asks(PY_MODERN, Upstream::Modern,     Transport::Stdio);
    py_modern_stdio_legacy_asks:         asks(PY_MODERN, Upstream::Legacy,     Transport::Stdio);
    py_modern_stdio_dual_asks:           asks(PY_MODERN, Upstream::Dual,       Transport::Stdio);
    py_modern_stdio_everything_asks:     asks(PY_MODERN, Upstream::Everything, Transport::Stdio);
    py_modern_stdio_modern_list_changed:
        list_changed(PY_MODERN, Upstream::Modern, Transport::Stdio);
    py_modern_stdio_legacy_list_changed:
        list_changed(PY_MODERN, Upstream::Legacy, Transport::Stdio);
    py_modern_stdio_dual_list_changed:
        list_changed(PY_MODERN, Upstream::Dual, Transport::Stdio);

    // Python legacy (2025-11-25) client, stdio
    py_legacy_stdio_modern_core:         core(PY_LEGACY, Upstream::Modern,     Transport::Stdio);
    py_legacy_stdio_legacy_core:         core(PY_LEGACY, Upstream::Legacy,     Transport::Stdio);
    py_legacy_stdio_dual_core:           core(PY_LEGACY, Upstream::Dual,       Transport::Stdio);
    py_legacy_stdio_everything_core:     core(PY_LEGACY, Upstream::Everything, Transport::Stdio);
    py_legacy_stdio_time_core:           core(PY_LEGACY, Upstream::Time,       Transport::Stdio);
    py_legacy_stdio_modern_asks:         asks(PY_LEGACY, Upstream::Modern,     Transport::Stdio);
    py_legacy_stdio_legacy_asks:         asks(PY_LEGACY, Upstream::Legacy,     Transport::Stdio);
    py_legacy_stdio_dual_asks:           asks(PY_LEGACY, Upstream::Dual,       Transport::Stdio);
    py_legacy_stdio_everything_asks:     asks(PY_LEGACY, Upstream::Everything, Transport::Stdio);
    py_legacy_stdio_modern_list_changed:
        list_changed(PY_LEGACY, Upstream::Modern, Transport::Stdio);
    py_legacy_stdio_legacy_list_changed:
        list_changed(PY_LEGACY, Upstream::Legacy, Transport::Stdio);
    py_legacy_stdio_dual_list_changed:
        list_changed(PY_LEGACY, Upstream::Dual, Transport::Stdio);

    // Both Python modes over HTTP (client → gateway HTTP → upstream HTTP)
    py_modern_http_modern_core:          core(PY_MODERN, Upstream::Modern,     Transport::Http);
    py_modern_http_legacy_core:          core(PY_MODERN, Upstream::Legacy,     Transport::Http);
    py_modern_http_dual_core:            core(PY_MODERN, Upstream::Dual,       Transport::Http);
    py_modern_http_everything_core:      core(PY_MODERN, Upstream::Everything, Transport::Http);
    py_modern_http_modern_asks:          asks(PY_MODERN, Upstream::Modern,     Transport::Http);
    py_modern_http_legacy_asks:          asks(PY_MODERN, Upstream::Legacy,     Transport::Http);
    py_modern_http_dual_asks:            asks(PY_MODERN, Upstream::Dual,       Transport::Http);
    py_modern_http_dual_list_changed:    list_changed(PY_MODERN, Upstream::Dual,   Transport::Http);
    py_legacy_http_modern_core:          core(PY_LEGACY, Upstream::Modern,     Transport::Http);
    py_legacy_http_legacy_core:          core(PY_LEGACY, Upstream::Legacy,     Transport::Http);
    py_legacy_http_dual_core:            core(PY_LEGACY, Upstream::Dual,       Transport::Http);
    py_legacy_http_everything_core:      core(PY_LEGACY, Upstream::Everything, Transport::Http);
    py_legacy_http_modern_asks:          asks(PY_LEGACY, Upstream::Modern,     Transport::Http);
    py_legacy_http_legacy_asks:          asks(PY_LEGACY, Upstream::Legacy,     Transport::Http);
    py_legacy_http_dual_asks:            asks(PY_LEGACY, Upstream::Dual,       Transport::Http);
    py_legacy_http_dual_list_changed:    list_changed(PY_LEGACY, Upstream::Dual,   Transport::Http);

    // The era the gateway speaks upstream
    upstream_era_stdio_modern_is_2026:   upstream_era("modern",  Transport::Stdio, MODERN);
    upstream_era_stdio_dual_is_2026:     upstream_era("dual",    Transport::Stdio, MODERN);
    upstream_era_stdio_legacy_is_2025:   upstream_era("legacy",  Transport::Stdio, LEGACY);
    upstream_era_http_modern_is_2026:    upstream_era("modern",  Transport::Http,  MODERN);
    upstream_era_http_dual_is_2026:      upstream_era("dual",    Transport::Http,  MODERN);
    upstream_era_http_legacy_is_2025:    upstream_era("legacy",  Transport::Http,  LEGACY);
    /// mcp-server-time 2026.10.19 answers `server/discover` with `["2026-07-28"]`.
    upstream_era_time_is_2026:
        third_party_era(Up::time("time"), "time", MODERN);
    /// server-everything answers `server/discover` with -32601: the gateway falls back to 2025.
    upstream_era_everything_is_2025:
        third_party_era(Up::everything("everything"), "everything", LEGACY);
}

/// server-github 2025.4.8 answers any `initialize` with 2024-11-05 and knows no
/// `server/discover`: still served, listed to both client eras.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_era_github_is_2024_and_listed_to_both_client_eras() {
    let github = Up::stdio("github", &node_bin("mcp-server-github"), &[])
        .env("GITHUB_PERSONAL_ACCESS_TOKEN", "dummy");
    let tag = new_tag("eras-github");
    let _guard = TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path(), &tag, "", &[github]);
    let args = gateway_stdio_args(&policy);
    let mut target = vec!["stdio"];
    target.extend(args.iter().map(String::as_str));
    let plan = json!({"steps": [{"op": "list_tools"}]});
    for mode in [PY_MODERN, PY_LEGACY] {
        let (report, log) = era_client(&tag, mode, &target, &plan).await;
        assert_eq!(report["protocol"], client_era(mode), "{report}");
        assert_eq!(
            summary_protocol(&log, "github").as_deref(),
            Some("2024-11-05"),
            "{log}"
        );
        let tools = report["steps"][0]["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 26, "{report}");
        assert!(
            tools.iter().any(|t| t == "github__create_issue"),
            "{report}"
        );
    }
    assert_no_leftovers(&tag).await;
}
