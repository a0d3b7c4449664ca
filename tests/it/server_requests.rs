//! Server→client requests (sampling) under concurrency (issue 31): six Python SDK clients
//! (`tests/peers/two_clients.py`) sample at once through one gateway in front of the reference
//! server-everything, while a seventh client without sampling has a long call in flight there.
//!
//! - stdio upstream, `server_requests = "serialize"`: every sampling call gets its own client's
//!   answer (calls that can be asked take the upstream in turn);
//! - stdio upstream, the default (`refuse_ambiguous`): the same plan is refused as ambiguous, as
//!   before (the contrast that shows what `serialize` changes);
//! - HTTP upstream, the default: each request comes on its call's stream, so all six succeed;
//! - a client that never answers: past `server_request_timeout_secs` its call fails with
//!   `mcp_budget.client.timeout`, its SDK is told to drop the request, and the next client's
//!   sampling goes through at once;
//! - a call cancelled while it waits for its turn never reaches the server;
//! - a client that is slow to answer (a person filling in a form) or never answers holds no call
//!   of a client that cannot be asked (issue 50): the calls of other clients that may be asked
//!   wait, and fail as `mcp_budget.upstream.turn_timeout` past their `timeout_secs`.

use serde_json::{Value, json};

use crate::harness::{
    Gateway, Mode, TagGuard, Up, assert_no_leftovers, everything_http, new_tag, peer_file, venv_bin,
};
use crate::isolation::{text_of, two_clients};

const SAMPLE: &str = "everything__trigger-sampling-request";
const LONG: &str = "everything__trigger-long-running-operation";
const CLIENTS: [&str; 6] = ["A", "B", "C", "D", "E", "F"];

fn call(client: &str, tool: &str, args: Value, label: &str) -> Value {
    let mut step = json!({"op": "call", "client": client, "name": tool, "as": label,
                          "background": true});
    step["args"] = args;
    step
}

/// Six sampling clients and `G` (no sampling): G starts a 2 s call, then the six sample at once.
fn six_at_once() -> Value {
    let mut clients = serde_json::Map::new();
    for c in CLIENTS {
        clients.insert(c.into(), json!({"sampling": format!("{c}-ANSWER")}));
    }
    clients.insert("G".into(), json!({}));
    let mut steps = vec![
        call("G", LONG, json!({"duration": 2, "steps": 2}), "long"),
        json!({"op": "sleep", "seconds": 0.3}),
    ];
    for c in CLIENTS {
        let args = json!({"prompt": format!("{c}-PROMPT"), "maxTokens": 5});
        steps.push(call(c, SAMPLE, args, &format!("sample-{c}")));
    }
    steps.push(json!({"op": "join"}));
    json!({"clients": clients, "steps": steps})
}

/// The prompts `client`'s sampling callback was asked.
fn prompts(report: &Value, client: &str) -> Vec<String> {
    report["clients"][client]["sampling"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["params"]["messages"][0]["content"]["text"].to_string())
        .collect()
}

/// What went wrong in a run where every client should have sampled with its own answer.
fn all_served(report: &Value) -> Vec<String> {
    let mut wrong = Vec::new();
    for c in CLIENTS {
        let text = text_of(report, &format!("sample-{c}"));
        if !text.contains(&format!("{c}-ANSWER")) {
            wrong.push(format!("{c}'s sampling call: {text}"));
        }
        let asked = prompts(report, c);
        if asked.len() != 1 || !asked[0].contains(&format!("{c}-PROMPT")) {
            wrong.push(format!("{c}'s callback was asked {asked:?}"));
        }
    }
    if report["calls"]["long"]["result"].is_null() {
        wrong.push(format!("G's long call: {}", report["calls"]["long"]));
    }
    wrong
}

async fn run_stdio(test: &str, serialize: bool) -> Value {
    let mut up = Up::everything("everything");
    if serialize {
        up = up.key("server_requests", "serialize");
    }
    let gw = Gateway::start(test, Mode::Http, &[up]).await;
    let report = two_clients(&gw.tag, gw.url(), &six_at_once()).await;
    gw.stop_and_check().await;
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_clients_sample_at_once_through_a_stdio_upstream_that_serializes() {
    let report = run_stdio("server-requests-serialize", true).await;
    let wrong = all_served(&report);
    assert!(wrong.is_empty(), "{wrong:#?}\nreport: {report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_serialize_the_same_requests_are_refused_as_ambiguous() {
    let report = run_stdio("server-requests-refuse", false).await;
    let served: Vec<&str> = CLIENTS
        .into_iter()
        .filter(|c| text_of(&report, &format!("sample-{c}")).contains(&format!("{c}-ANSWER")))
        .collect();
    let asked: usize = CLIENTS.iter().map(|c| prompts(&report, c).len()).sum();
    assert!(
        served.is_empty() && asked == 0,
        "served {served:?}, callbacks asked {asked} time(s)\nreport: {report}"
    );
    let refused = CLIENTS
        .iter()
        .any(|c| text_of(&report, &format!("sample-{c}")).contains("cannot be answered"));
    assert!(refused, "no call says why it was refused\nreport: {report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_clients_sample_at_once_through_an_http_upstream() {
    let tag = new_tag("server-requests-http");
    let guard = TagGuard(tag.clone());
    let (server, url) = everything_http(&tag).await;
    let gw = Gateway::start(
        "server-requests-http",
        Mode::Http,
        &[Up::http("everything", &url)],
    )
    .await;
    let report = two_clients(&gw.tag, gw.url(), &six_at_once()).await;
    gw.stop_and_check().await;
    drop(server);
    assert_no_leftovers(&tag).await;
    drop(guard);
    let wrong = all_served(&report);
    assert!(wrong.is_empty(), "{wrong:#?}\nreport: {report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_request_fails_its_call_at_the_deadline_and_blocks_nobody() {
    let test = "server-requests-deadline";
    let up = Up::everything("everything")
        .key("server_requests", "serialize")
        .raw_key("server_request_timeout_secs", "2");
    let gw = Gateway::start(test, Mode::Http, &[up]).await;
    let sample = |c: &str| json!({"prompt": format!("{c}-PROMPT"), "maxTokens": 5});
    let plan = json!({
        "clients": {
            "A": {"sampling": "A-ANSWER", "sampling_delay": 60},
            "B": {"sampling": "B-ANSWER"},
        },
        "steps": [
            call("A", SAMPLE, sample("A"), "sample-A"),
            {"op": "sleep", "seconds": 0.3},
            call("B", SAMPLE, sample("B"), "sample-B"),
            {"op": "join"},
        ],
    });
    let report = two_clients(&gw.tag, gw.url(), &plan).await;
    gw.stop_and_check().await;
    let a = &report["calls"]["sample-A"];
    assert_eq!(
        a["error"]["data"]["type"], "mcp_budget.client.timeout",
        "A's call: {a}\nreport: {report}"
    );
    let a_ms = a["ms"].as_u64().unwrap_or(u64::MAX);
    assert!((2000..10_000).contains(&a_ms), "A's call took {a_ms} ms");
    assert_eq!(
        report["clients"]["A"]["cancelled"].as_array().map(Vec::len),
        Some(1),
        "A's SDK was not told to drop the request\nreport: {report}"
    );
    let b = text_of(&report, "sample-B");
    assert!(b.contains("B-ANSWER"), "B's call: {b}\nreport: {report}");
    let b_ms = report["calls"]["sample-B"]["ms"]
        .as_u64()
        .unwrap_or(u64::MAX);
    assert!(
        b_ms < 10_000,
        "B waited {b_ms} ms behind A's forgotten request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_while_it_waits_for_its_turn_never_reaches_the_server() {
    let test = "server-requests-cancel-waiting";
    let up = Up::everything("everything").key("server_requests", "serialize");
    let gw = Gateway::start(test, Mode::Http, &[up]).await;
    let sample = |c: &str| json!({"prompt": format!("{c}-PROMPT"), "maxTokens": 5});
    let mut b = call("B", SAMPLE, sample("B"), "sample-B");
    b["cancel_after"] = json!(0.5);
    // A holds the upstream for 3 s (its callback answers late); B waits behind it and gives
    // up; C comes after B gave up.
    let plan = json!({
        "clients": {
            "A": {"sampling": "A-ANSWER", "sampling_delay": 3},
            "B": {"sampling": "B-ANSWER"},
            "C": {"sampling": "C-ANSWER"},
        },
        "steps": [
            call("A", SAMPLE, sample("A"), "sample-A"),
            {"op": "sleep", "seconds": 0.3},
            b,
            {"op": "sleep", "seconds": 1.0},
            call("C", SAMPLE, sample("C"), "sample-C"),
            {"op": "join"},
        ],
    });
    let report = two_clients(&gw.tag, gw.url(), &plan).await;
    gw.stop_and_check().await;
    assert_eq!(report["calls"]["sample-B"]["abandoned"], true, "{report}");
    // Cancelled before its turn: the server never ran B's call, so B was never asked.
    assert_eq!(prompts(&report, "B"), Vec::<String>::new(), "{report}");
    for c in ["A", "C"] {
        let text = text_of(&report, &format!("sample-{c}"));
        assert!(
            text.contains(&format!("{c}-ANSWER")),
            "{c}: {text}\n{report}"
        );
    }
}

/// Issue 50, finding 4: a sampling client that never answers holds no one but those that could
/// be asked themselves. While A's sampling request goes unanswered, G (no sampling) makes plain
/// calls as fast as with A absent; B (sampling) waits for its turn, and past its `timeout_secs`
/// fails with `mcp_budget.upstream.turn_timeout`, which names the cause (not
/// `mcp_budget.upstream.timeout`, which blames the server); A's own call fails at
/// `server_request_timeout_secs` as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_sampler_holds_no_call_of_a_client_that_cannot_be_asked() {
    const ECHO: &str = "everything__echo";
    let test = "server-requests-silent-sampler";
    let up = Up::everything("everything")
        .key("server_requests", "serialize")
        .timeout(2)
        .raw_key("server_request_timeout_secs", "6");
    let gw = Gateway::start(test, Mode::Http, &[up]).await;
    let echo = |label: String| json!({"op": "call", "client": "G", "name": ECHO, "args": {"message": "hi"}, "as": label});
    let sample = |c: &str| json!({"prompt": format!("{c}-PROMPT"), "maxTokens": 5});
    let mut steps: Vec<Value> = (0..5).map(|i| echo(format!("absent-{i}"))).collect();
    steps.push(call("A", SAMPLE, sample("A"), "sample-A"));
    steps.push(json!({"op": "sleep", "seconds": 0.5}));
    steps.push(call("B", SAMPLE, sample("B"), "sample-B"));
    steps.push(json!({"op": "sleep", "seconds": 0.2}));
    steps.extend((0..5).map(|i| echo(format!("present-{i}"))));
    steps.push(json!({"op": "join"}));
    let plan = json!({
        "clients": {
            "A": {"sampling": "A-ANSWER", "sampling_delay": 60},
            "B": {"sampling": "B-ANSWER"},
            "G": {},
        },
        "steps": steps,
    });
    let report = two_clients(&gw.tag, gw.url(), &plan).await;
    gw.stop_and_check().await;
    let ms = |label: String| report["calls"][&label]["ms"].as_u64().unwrap_or(u64::MAX);
    let absent: Vec<u64> = (0..5).map(|i| ms(format!("absent-{i}"))).collect();
    let present: Vec<u64> = (0..5).map(|i| ms(format!("present-{i}"))).collect();
    eprintln!("G's plain calls, ms: silent sampler absent {absent:?}, present {present:?}");
    for i in 0..5 {
        let text = text_of(&report, &format!("present-{i}"));
        assert!(
            text.contains("hi"),
            "G's call {i}: {text}\nreport: {report}"
        );
    }
    let worst = present.iter().max().copied().unwrap_or(u64::MAX);
    assert!(
        worst < 1000,
        "G waited {worst} ms behind A's silence\nreport: {report}"
    );
    let b = &report["calls"]["sample-B"];
    assert_eq!(
        b["error"]["data"]["type"], "mcp_budget.upstream.turn_timeout",
        "B's call: {b}\nreport: {report}"
    );
    let b_message = b["error"]["message"].as_str().unwrap_or_default();
    assert!(
        b_message.contains("server_request_timeout_secs"),
        "B's error says what to change: {b_message}"
    );
    assert_eq!(prompts(&report, "B"), Vec::<String>::new(), "{report}");
    let a = &report["calls"]["sample-A"];
    assert_eq!(
        a["error"]["data"]["type"], "mcp_budget.client.timeout",
        "A's call: {a}\nreport: {report}"
    );
}

/// `tests/peers/ask_server.py` over stdio, serializing, with these timeouts.
fn asker(timeout_secs: u64, server_request_timeout_secs: u64) -> Up {
    Up::stdio("ask", &venv_bin("python"), &[&peer_file("ask_server.py")])
        .key("server_requests", "serialize")
        .timeout(timeout_secs)
        .raw_key(
            "server_request_timeout_secs",
            &server_request_timeout_secs.to_string(),
        )
}

/// A person takes 2 s to fill in A's form (elicitation): meanwhile G (which declared neither
/// sampling nor elicitation) calls as fast as ever, and a long call of G's borrows the turn; A's
/// answer reaches the server only once that call is done, so that whatever the server asks next
/// has one owner. Then a form nobody fills in: at `server_request_timeout_secs` the server gets
/// exactly one answer to it, the error `mcp_budget.client.timeout`, and S's call fails with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_filling_in_a_form_holds_no_call_of_a_client_that_cannot_be_asked() {
    let gw = Gateway::start("server-requests-slow-person", Mode::Http, &[asker(10, 4)]).await;
    let g = |tool: &str, args: Value, label: &str| {
        json!({"op": "call", "client": "G", "name": format!("ask__{tool}"), "args": args,
               "as": label})
    };
    let mut long = g("slow", json!({"seconds": 2.5}), "long-G");
    long["background"] = json!(true);
    let mut steps = vec![
        call(
            "A",
            "ask__ask_elicit",
            json!({"secret": "A-SECRET"}),
            "form-A",
        ),
        json!({"op": "sleep", "seconds": 0.5}),
        long,
    ];
    steps.extend((0..3).map(|i| g("slow", json!({"seconds": 0}), &format!("quick-{i}"))));
    steps.push(json!({"op": "join"}));
    steps.push(call(
        "S",
        "ask__ask_elicit",
        json!({"secret": "S-SECRET"}),
        "form-S",
    ));
    steps.push(json!({"op": "join"}));
    steps.push(g("errors_seen", json!({}), "errors"));
    let plan = json!({
        "clients": {
            "A": {"elicit": "A-ANSWER", "elicit_delay": 2},
            "S": {"elicit": "S-ANSWER", "elicit_delay": 60},
            "G": {},
        },
        "steps": steps,
    });
    let report = two_clients(&gw.tag, gw.url(), &plan).await;
    gw.stop_and_check().await;
    let ms = |label: &str| report["calls"][label]["ms"].as_u64().unwrap_or(u64::MAX);
    let quick: Vec<u64> = (0..3).map(|i| ms(&format!("quick-{i}"))).collect();
    eprintln!(
        "G's calls while A's person fills in the form, ms: {quick:?}; A's call {} ms",
        ms("form-A")
    );
    assert!(
        quick.iter().all(|&q| q < 1000),
        "G waited behind A's form: {quick:?}\nreport: {report}"
    );
    assert!(text_of(&report, "long-G").contains("slept"), "{report}");
    let a = text_of(&report, "form-A");
    assert!(a.contains("A-ANSWER"), "A's call: {a}\nreport: {report}");
    // The person answered at 2 s; G's long call, which borrowed the turn, ends at about 3 s.
    assert!(
        ms("form-A") >= 2800,
        "A's answer reached the server while G's call was in flight\nreport: {report}"
    );
    let s = &report["calls"]["form-S"];
    assert_eq!(
        s["error"]["data"]["type"], "mcp_budget.client.timeout",
        "S's call: {s}\nreport: {report}"
    );
    one_error_answer(&report, "elicitation/create", "mcp_budget.client.timeout");
}

/// Every request of the server gets exactly one answer, even one to a client that has gone: S
/// is asked and gives up its call (which closes the stream the request came on); when the server
/// next asks someone (A), S's request is answered with an error at once instead of being dropped
/// unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_to_a_client_that_has_gone_is_answered() {
    let up = Up::stdio("ask", &venv_bin("python"), &[&peer_file("ask_server.py")]).timeout(10);
    let gw = Gateway::start("server-requests-client-gone", Mode::Http, &[up]).await;
    let mut form_s = call(
        "S",
        "ask__ask_elicit",
        json!({"secret": "S-SECRET"}),
        "form-S",
    );
    form_s["cancel_after"] = json!(0.5);
    let mut form_a = call(
        "A",
        "ask__ask_elicit",
        json!({"secret": "A-SECRET"}),
        "form-A",
    );
    form_a["background"] = json!(false);
    let plan = json!({
        "clients": {
            "S": {"elicit": "S-ANSWER", "elicit_delay": 60},
            "A": {"elicit": "A-ANSWER"},
            "G": {},
        },
        "steps": [
            form_s,
            {"op": "sleep", "seconds": 1.0},
            form_a,
            {"op": "call", "client": "G", "name": "ask__errors_seen", "args": {}, "as": "errors"},
            {"op": "join"},
        ],
    });
    let report = two_clients(&gw.tag, gw.url(), &plan).await;
    gw.stop_and_check().await;
    let a = text_of(&report, "form-A");
    assert!(a.contains("A-ANSWER"), "A's call: {a}\nreport: {report}");
    one_error_answer(
        &report,
        "elicitation/create",
        "mcp_budget.request.cancelled",
    );
}

/// Checks that the server behind the gateway (`ask_server.py`, whose `errors_seen` the plan
/// called as `errors`) got exactly one error answer to its requests: to `method`, of `kind`.
fn one_error_answer(report: &Value, method: &str, kind: &str) {
    let errors: Value = serde_json::from_str(&text_of(report, "errors")).unwrap_or(Value::Null);
    let seen = errors.as_array().cloned().unwrap_or_default();
    assert_eq!(
        seen.len(),
        1,
        "the server's error answers: {errors}\nreport: {report}"
    );
    assert_eq!(seen[0]["method"], method, "{errors}");
    assert_eq!(seen[0]["error"]["data"]["type"], kind, "{errors}");
}
