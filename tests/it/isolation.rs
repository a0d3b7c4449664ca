//! Two clients on one gateway (streamable HTTP downstream) must not see each other's
//! server→client traffic. The upstream is `tests/peers/ask_server.py`, which asks its client
//! (sampling, elicitation, roots) or logs after a delay, and records every answer and error it
//! got; the clients are two Python `mcp` SDK sessions in one program
//! (`tests/peers/two_clients.py`), or raw HTTP sessions for what the SDK cannot do (answering
//! with someone else's id).
//!
//! The rules under test: a server→client request goes to the one client that certainly owns
//! it (the only session with a call in flight on that upstream, or the session whose progress
//! token the request names); with no certain owner it goes to nobody and the server gets
//! `mcp_budget.route.ambiguous`. Roots asked outside any call come from the policy's `roots`
//! (none without the key), never from a client. A client can answer only what was asked of
//! it: guessed or foreign ids get HTTP 400 `mcp_budget.route.unknown_request`. Logs tied to no
//! call reach only sessions that asked for logs with `logging/setLevel`.
//!
//! Each test collects every rule broken into one list and asserts, after the leftover check,
//! that the list is empty, so that a failure shows all that went wrong at once. Racy scenarios
//! run several rounds, in both orders of who starts first.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::harness::{
    Gateway, Mode, TagGuard, Up, WAIT, assert_no_leftovers, everything_http, http_client, new_tag,
    peer_file, venv_bin,
};

const ALICE: &str = "file:///home/alice";
const BOB: &str = "file:///home/bob";
const SHARED: &str = "file:///srv/shared";
const AMBIGUOUS: &str = "mcp_budget.route.ambiguous";
const UNKNOWN_REQUEST: &str = "mcp_budget.route.unknown_request";

// ---------------------------------------------------------------------------------------------
// The fixture upstream and the two clients

/// The `[[upstream]] ask` table of the fixture server, with `roots` when given. Its children
/// carry `tag` through the policy's `env` (a stdio child need not inherit the gateway's
/// environment), so that [`assert_no_leftovers`] on `tag` finds them.
///
/// The harness's `Up` has no `roots`: the table goes in through the text that
/// `GatewayBuilder::policy` puts after `[downstream]`, with no `Up` of its own.
fn ask_upstream(tag: &str, roots: Option<&[&str]>) -> String {
    let q = |s: &str| serde_json::to_string(s).expect("strings serialize");
    let mut s = format!(
        "[[upstream]]\nname = \"ask\"\ncommand = {}\nargs = [{}]\ntimeout_secs = 30\n",
        q(&venv_bin("python")),
        q(&peer_file("ask_server.py")),
    );
    if let Some(roots) = roots {
        let list: Vec<String> = roots.iter().map(|r| q(r)).collect();
        s += &format!("roots = [{}]\n", list.join(", "));
    }
    s + &format!("[upstream.env]\nMCPB_IT_TAG = {}\n", q(tag))
}

/// The gateway over HTTP in front of the fixture server; the fixture's processes carry the
/// returned guard's tag.
async fn ask_gateway(test: &str, roots: Option<&[&str]>) -> (Gateway, TagGuard) {
    let up_tag = new_tag(&format!("{test}-up"));
    let gw = Gateway::builder(test, Mode::Http)
        .policy(&ask_upstream(&up_tag, roots))
        .start(&[])
        .await;
    (gw, TagGuard(up_tag))
}

/// Ends the gateway and checks that neither it nor the fixture left a process behind.
async fn stop(gw: Gateway, up: &TagGuard) {
    gw.stop_and_check().await;
    assert_no_leftovers(&up.0).await;
}

/// Runs `tests/peers/two_clients.py` against `url` with `plan`; its JSON report.
pub(crate) async fn two_clients(tag: &str, url: &str, plan: &Value) -> Value {
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(peer_file("two_clients.py"))
        .arg(url)
        .env("PLAN", plan.to_string())
        .env("MCPB_IT_TAG", tag)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("the two clients finish in time")
        .expect("the two clients run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "two_clients.py failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("bad report ({e}): {stdout}\n{stderr}"))
}

/// Client specs for the plan: A answers `A-ANSWER` with root alice, B `B-ANSWER` with bob.
fn alice_and_bob() -> Value {
    json!({
        "A": {"sampling": "A-ANSWER", "elicit": "A-ANSWER", "roots": [ALICE]},
        "B": {"sampling": "B-ANSWER", "elicit": "B-ANSWER", "roots": [BOB]},
    })
}

/// A tools/call step of `client`, labelled `label` in the report.
fn call(client: &str, tool: &str, args: Value, label: &str) -> Value {
    let mut step = json!({"op": "call", "client": client, "name": tool, "as": label});
    step["args"] = args;
    step
}

/// The same step, running on while the next steps do.
fn background(mut step: Value) -> Value {
    step["background"] = json!(true);
    step
}

/// The same step, with a progress callback (the SDK then sends a `progressToken`).
fn with_progress(mut step: Value) -> Value {
    step["progress"] = json!(true);
    step
}

fn sleep(seconds: f64) -> Value {
    json!({"op": "sleep", "seconds": seconds})
}

fn mark(name: &str) -> Value {
    json!({"op": "mark", "name": name})
}

fn join() -> Value {
    json!({"op": "join"})
}

/// Lets the `roots/list` the fixture asks by itself after each client's `initialized` be
/// answered before any call is in flight (a call in flight would make its client the owner).
fn settle() -> Value {
    sleep(0.5)
}

/// The text a call of the report returned (its text blocks, one per line), or `NO RESULT` with
/// the call's entry (its error).
pub(crate) fn text_of(report: &Value, label: &str) -> String {
    let entry = &report["calls"][label];
    let texts: Vec<&str> = entry["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect();
    if texts.is_empty() {
        format!("NO RESULT {entry}")
    } else {
        texts.join("\n")
    }
}

/// What the callbacks of `client` got, of one kind (`sampling`, `elicitation`, `roots`, `logs`).
fn got<'a>(report: &'a Value, client: &str, kind: &str) -> &'a [Value] {
    report["clients"][client][kind]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// The JSON a fixture tool returned as text (`roots_seen`, `errors_seen`, `ask_roots`).
fn json_of(report: &Value, label: &str) -> Value {
    let text = text_of(report, label);
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// The root URIs of a `roots/list` result.
fn uris(result: &Value) -> Vec<String> {
    result["roots"]
        .as_array()
        .map(|roots| {
            roots
                .iter()
                .filter_map(|r| r["uri"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Fails with every broken rule, and the report, when there are any.
fn assert_none(wrong: &[String], report: &Value) {
    assert!(
        wrong.is_empty(),
        "{} rule(s) broken:\n- {}\nreport: {report}",
        wrong.len(),
        wrong.join("\n- ")
    );
}

// ---------------------------------------------------------------------------------------------
// 1. No certain owner → nobody

/// A asks for sampling, elicitation and roots while B has a call in flight on the same stdio
/// upstream (B first, then A first, alternately): the gateway cannot tell whose the requests
/// are, so none reaches a client and the server gets `mcp_budget.route.ambiguous` for each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_requests_with_no_certain_owner_reach_no_client() {
    const ROUNDS: usize = 5;
    let (gw, up) = ask_gateway("isolation-ambiguous", None).await;
    let mut steps = vec![settle()];
    for r in 0..ROUNDS {
        steps.push(mark(&format!("round-{r}")));
        let b_first = r % 2 == 0;
        // Whoever starts first, both calls are in flight when the server asks (at 0.7 s;
        // B's call lasts from 0 or 0.2 s to 1.5 or 1.7 s).
        let delay = if b_first { 0.5 } else { 0.7 };
        let asks = [
            call(
                "A",
                "ask__ask_sampling",
                json!({"delay": delay, "secret": format!("A-SECRET-{r}")}),
                &format!("sampling-{r}"),
            ),
            call(
                "A",
                "ask__ask_elicit",
                json!({"delay": delay, "secret": format!("A-SECRET-{r}")}),
                &format!("elicit-{r}"),
            ),
            call(
                "A",
                "ask__ask_roots",
                json!({"delay": delay}),
                &format!("roots-{r}"),
            ),
        ];
        let slow = call(
            "B",
            "ask__slow",
            json!({"seconds": 1.5}),
            &format!("slow-{r}"),
        );
        if b_first {
            steps.push(background(slow));
            steps.push(sleep(0.2));
            steps.extend(asks.into_iter().map(background));
        } else {
            steps.extend(asks.into_iter().map(background));
            steps.push(sleep(0.2));
            steps.push(background(slow));
        }
        steps.push(join());
    }
    steps.push(mark("final"));
    steps.push(call("A", "ask__errors_seen", json!({}), "errors"));
    steps.push(call("A", "ask__roots_seen", json!({}), "roots"));
    let plan = json!({"clients": alice_and_bob(), "steps": steps});
    let report = two_clients(&gw.tag, gw.url(), &plan).await;

    let mut wrong = Vec::new();
    for r in 0..ROUNDS {
        for what in ["sampling", "elicit", "roots"] {
            let text = text_of(&report, &format!("{what}-{r}"));
            if text.contains("B-ANSWER") || text.contains(BOB) {
                wrong.push(format!("round {r}: A's {what} got B's answer: {text}"));
            } else if !(text.starts_with("ERROR") && text.contains(AMBIGUOUS)) {
                wrong.push(format!(
                    "round {r}: A's {what} should fail with {AMBIGUOUS}, got: {text}"
                ));
            }
        }
        let slow = text_of(&report, &format!("slow-{r}"));
        if slow != "slept 1.5" {
            wrong.push(format!("round {r}: B's slow call: {slow}"));
        }
    }
    for client in ["A", "B"] {
        for kind in ["sampling", "elicitation", "roots"] {
            let seen = got(&report, client, kind);
            if !seen.is_empty() {
                wrong.push(format!(
                    "{client}'s {kind} callback ran {} time(s) (marks {:?})",
                    seen.len(),
                    seen.iter().map(|s| &s["mark"]).collect::<Vec<_>>()
                ));
            }
        }
    }
    let errors = json_of(&report, "errors");
    for method in ["sampling/createMessage", "elicitation/create", "roots/list"] {
        let ambiguous = errors
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["method"] == method && e["error"]["data"]["type"] == AMBIGUOUS)
            .count();
        if ambiguous != ROUNDS {
            wrong.push(format!(
                "the server got {ambiguous} {AMBIGUOUS} error(s) for {method}, not {ROUNDS}: {errors}"
            ));
        }
    }
    let roots = json_of(&report, "roots").to_string();
    if roots.contains(BOB) || roots.contains(ALICE) {
        wrong.push(format!("a client's roots reached the server: {roots}"));
    }
    stop(gw, &up).await;
    assert_none(&wrong, &report);
}

// ---------------------------------------------------------------------------------------------
// 2. A certain owner → that client

/// A alone in flight: its sampling, elicitation and roots requests reach A (with A's secret)
/// and A's answers reach the server. A sampling request that names the progress token of A's
/// call reaches A even while B has a call in flight (B first, then A first). B, connected and
/// idle or busy, never sees any of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_requests_reach_their_certain_owner_only() {
    const ROUNDS: usize = 5;
    let (gw, up) = ask_gateway("isolation-owner", None).await;
    let mut steps = vec![settle()];
    for r in 0..ROUNDS {
        steps.push(mark(&format!("alone-{r}")));
        let secret = format!("A-SECRET-{r}");
        steps.push(call(
            "A",
            "ask__ask_sampling",
            json!({"delay": 0.1, "secret": secret}),
            &format!("sampling-{r}"),
        ));
        steps.push(call(
            "A",
            "ask__ask_elicit",
            json!({"delay": 0.1, "secret": secret}),
            &format!("elicit-{r}"),
        ));
        steps.push(call(
            "A",
            "ask__ask_roots",
            json!({"delay": 0.1}),
            &format!("roots-{r}"),
        ));
        for b_first in [true, false] {
            let order = if b_first { "b-first" } else { "a-first" };
            steps.push(mark(&format!("token-{order}-{r}")));
            // The server asks at 0.4 s; B's call lasts from 0 or 0.15 s to 0.8 or 0.95 s.
            let delay = if b_first { 0.25 } else { 0.4 };
            let ask = with_progress(call(
                "A",
                "ask__ask_sampling",
                json!({"delay": delay, "secret": format!("A-TOKEN-{order}-{r}"),
                       "name_token": true}),
                &format!("token-{order}-{r}"),
            ));
            let slow = background(call(
                "B",
                "ask__slow",
                json!({"seconds": 0.8}),
                &format!("slow-{order}-{r}"),
            ));
            if b_first {
                steps.extend([slow, sleep(0.15), background(ask)]);
            } else {
                steps.extend([background(ask), sleep(0.15), slow]);
            }
            steps.push(join());
        }
    }
    let plan = json!({"clients": alice_and_bob(), "steps": steps});
    let report = two_clients(&gw.tag, gw.url(), &plan).await;

    let mut wrong = Vec::new();
    for r in 0..ROUNDS {
        let secret = format!("A-SECRET-{r}");
        let label = format!("sampling-{r}");
        expect_sampling(&report, &format!("alone-{r}"), &secret, &label, &mut wrong);
        for order in ["b-first", "a-first"] {
            let label = format!("token-{order}-{r}");
            let secret = format!("A-TOKEN-{order}-{r}");
            expect_sampling(&report, &label, &secret, &label, &mut wrong);
        }
        let elicit = json_of(&report, &format!("elicit-{r}"));
        if elicit != json!({"action": "accept", "content": {"answer": "A-ANSWER"}}) {
            wrong.push(format!("round {r}: A's elicitation answer: {elicit}"));
        }
        let elicited = got(&report, "A", "elicitation").iter().any(|e| {
            e["mark"] == format!("alone-{r}").as_str()
                && e["params"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&secret))
        });
        if !elicited {
            wrong.push(format!(
                "round {r}: A's elicitation callback never got {secret}"
            ));
        }
        let roots = json_of(&report, &format!("roots-{r}"));
        if uris(&roots) != [ALICE] {
            wrong.push(format!(
                "round {r}: ask_roots should get A's roots, got: {roots}"
            ));
        }
    }
    let count = got(&report, "A", "sampling").len();
    if count != 3 * ROUNDS {
        wrong.push(format!(
            "A's sampling callback ran {count} times, not {}",
            3 * ROUNDS
        ));
    }
    for kind in ["sampling", "elicitation", "roots"] {
        let seen = got(&report, "B", kind);
        if !seen.is_empty() {
            wrong.push(format!(
                "B's {kind} callback ran {} time(s) (marks {:?})",
                seen.len(),
                seen.iter().map(|s| &s["mark"]).collect::<Vec<_>>()
            ));
        }
    }
    stop(gw, &up).await;
    assert_none(&wrong, &report);
}

/// The call `label` returned A's sampling answer, and A's sampling callback got `secret` under
/// `mark`.
fn expect_sampling(report: &Value, mark: &str, secret: &str, label: &str, wrong: &mut Vec<String>) {
    let text = text_of(report, label);
    if text != "A-ANSWER" {
        wrong.push(format!(
            "{label}: the tool should return A's answer, got: {text}"
        ));
    }
    let reached = got(report, "A", "sampling").iter().any(|s| {
        s["mark"] == mark
            && s["params"]["messages"][0]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains(secret))
    });
    if !reached {
        wrong.push(format!("{label}: A's sampling callback never got {secret}"));
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Roots asked outside any call come from the policy

/// Steps for the roots tests: both clients announce a roots change (each makes the server ask,
/// with no call in flight), then each asks through `ask_roots` alone, then the record.
fn roots_plan() -> Value {
    json!({"clients": alice_and_bob(), "steps": [
        settle(),
        {"op": "roots_changed", "client": "A"},
        sleep(0.5),
        {"op": "roots_changed", "client": "B"},
        sleep(0.5),
        call("A", "ask__ask_roots", json!({}), "a-roots"),
        call("B", "ask__ask_roots", json!({}), "b-roots"),
        call("A", "ask__roots_seen", json!({}), "seen"),
    ]})
}

/// Without `roots` in the policy, the asks the server makes by itself (after the gateway's
/// and each client's `initialized`, after each `roots/list_changed`) get no roots, never a
/// client's; a call's own `roots/list` gets its caller's roots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_asked_outside_a_call_are_none_without_a_policy() {
    let (gw, up) = ask_gateway("isolation-roots-none", None).await;
    let report = two_clients(&gw.tag, gw.url(), &roots_plan()).await;
    let mut wrong = Vec::new();
    let seen = json_of(&report, "seen");
    let entries = seen.as_array().cloned().unwrap_or_default();
    let unsolicited: Vec<&Value> = entries
        .iter()
        .filter(|e| e["source"] != "ask_roots")
        .collect();
    if unsolicited.is_empty() {
        wrong.push(format!("the server's own roots/list never ran: {seen}"));
    }
    for e in &unsolicited {
        if e["result"] != json!({"roots": []}) {
            wrong.push(format!("an unsolicited roots/list got {e}"));
        }
    }
    for (label, want) in [("a-roots", ALICE), ("b-roots", BOB)] {
        let roots = json_of(&report, label);
        if uris(&roots) != [want] {
            wrong.push(format!("{label} should get {want} only, got: {roots}"));
        }
    }
    stop(gw, &up).await;
    assert_none(&wrong, &report);
}

/// With `[[upstream]] roots = [...]`, every `roots/list` the server makes, by itself or
/// within a call, gets exactly the policy's roots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_come_from_the_policy_when_it_declares_them() {
    let (gw, up) = ask_gateway("isolation-roots-policy", Some(&[SHARED])).await;
    let report = two_clients(&gw.tag, gw.url(), &roots_plan()).await;
    let mut wrong = Vec::new();
    let seen = json_of(&report, "seen");
    let entries = seen.as_array().cloned().unwrap_or_default();
    let shared = json!({"roots": [{"uri": SHARED}]});
    let asked = entries
        .iter()
        .filter(|e| e["source"] == "ask_roots")
        .count();
    if asked != 2 || entries.len() < 3 {
        wrong.push(format!(
            "expected 2 ask_roots and at least one unsolicited roots/list: {seen}"
        ));
    }
    for e in &entries {
        if e["result"] != shared {
            wrong.push(format!("a roots/list got {e}, not {shared}"));
        }
    }
    for label in ["a-roots", "b-roots"] {
        let roots = json_of(&report, label);
        if roots != shared {
            wrong.push(format!("{label} got {roots}"));
        }
    }
    stop(gw, &up).await;
    assert_none(&wrong, &report);
}

// ---------------------------------------------------------------------------------------------
// 4. Guessed and foreign answers are refused (raw HTTP)

/// A 2025-era session driven over raw HTTP.
struct RawSession {
    http: reqwest::Client,
    url: String,
    id: String,
}

impl RawSession {
    /// `initialize` (declaring the sampling capability) and `notifications/initialized`.
    async fn open(http: &reqwest::Client, url: &str) -> Self {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"sampling": {}},
            "clientInfo": {"name": "it-isolation", "version": "0"}}});
        let resp = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init.to_string())
            .send()
            .await
            .expect("the gateway answers initialize");
        assert_eq!(resp.status().as_u16(), 200, "initialize");
        let id = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_owned();
        let session = Self {
            http: http.clone(),
            url: url.to_owned(),
            id,
        };
        let (status, _) = session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(status, 202, "notifications/initialized");
        session
    }

    /// Starts a POST on the session.
    async fn send(&self, body: &Value) -> reqwest::Response {
        self.http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("mcp-session-id", &self.id)
            .body(body.to_string())
            .send()
            .await
            .expect("the gateway answers")
    }

    /// A POST whose answer is one JSON body (or an empty one): status and body.
    async fn post(&self, body: &Value) -> (u16, Value) {
        let resp = self.send(body).await;
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// Reads JSON-RPC messages off an SSE response (or the one message of a JSON response).
struct Events {
    resp: reqwest::Response,
    sse: bool,
    buf: String,
}

impl Events {
    fn new(resp: reqwest::Response) -> Self {
        let sse = resp.headers().get("content-type").is_some_and(|v| {
            v.to_str()
                .unwrap_or_default()
                .starts_with("text/event-stream")
        });
        Self {
            resp,
            sse,
            buf: String::new(),
        }
    }

    /// The next message within `limit`; `None` at the end of the stream or on timeout.
    async fn next(&mut self, limit: Duration) -> Option<Value> {
        tokio::time::timeout(limit, self.next_message())
            .await
            .ok()
            .flatten()
    }

    async fn next_message(&mut self) -> Option<Value> {
        loop {
            let normalized = self.buf.replace("\r\n", "\n");
            let end = if self.sse {
                normalized.find("\n\n").map(|at| (at, at + 2))
            } else {
                None
            };
            if let Some((at, skip)) = end {
                let event = normalized[..at].to_owned();
                self.buf = normalized[skip..].to_owned();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue;
                }
                return serde_json::from_str(&data.join("\n")).ok();
            }
            match self.resp.chunk().await {
                Ok(Some(chunk)) => self.buf.push_str(&String::from_utf8_lossy(&chunk)),
                _ if !self.sse && !self.buf.is_empty() => {
                    let body = std::mem::take(&mut self.buf);
                    return serde_json::from_str(&body).ok();
                }
                _ => return None,
            }
        }
    }

    /// Messages until the answer to `id` (which ends the call): what came before, and it.
    async fn until_answer(&mut self, id: &Value) -> (Vec<Value>, Option<Value>) {
        let mut before = Vec::new();
        while let Some(msg) = self.next(WAIT).await {
            if msg.get("method").is_none() && msg["id"] == *id {
                return (before, Some(msg));
            }
            before.push(msg);
        }
        (before, None)
    }
}

/// A sampling answer with `text`, to the server→client request `id`.
fn sampling_answer(id: &Value, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {
        "role": "assistant", "model": "raw",
        "content": {"type": "text", "text": text}}})
}

/// Starts `ask_sampling` on `a` (call id `call_id`) and returns its event stream and the id
/// of the `sampling/createMessage` it brought; `None` when none came.
async fn ask_raw(a: &RawSession, call_id: i64, secret: &str) -> (Events, Option<Value>) {
    let call = json!({"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {
        "name": "ask__ask_sampling", "arguments": {"delay": 0.2, "secret": secret}}});
    let mut events = Events::new(a.send(&call).await);
    while let Some(msg) = events.next(WAIT).await {
        if msg["method"] == "sampling/createMessage" {
            return (events, Some(msg["id"].clone()));
        }
        if msg.get("method").is_none() {
            // The call ended without asking.
            return (events, None);
        }
    }
    (events, None)
}

/// Whether two ids issued in a row look drawn at random rather than counted: with their
/// common prefix and suffix cut off, each keeps at least 16 characters (`mcpb-0-7` and
/// `mcpb-0-8` keep one).
fn unguessable(first: &str, second: &str) -> bool {
    let prefix = first
        .chars()
        .zip(second.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let (a, b): (Vec<char>, Vec<char>) = (
        first.chars().skip(prefix).collect(),
        second.chars().skip(prefix).collect(),
    );
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    a.len() - suffix >= 16 && b.len() - suffix >= 16
}

#[test]
fn counted_ids_are_told_from_random_ones() {
    assert!(!unguessable("mcpb-0-5", "mcpb-0-6"));
    assert!(!unguessable("mcpb-0-9", "mcpb-0-10"));
    assert!(!unguessable("mcpb-0-1234567", "mcpb-0-1234568"));
    let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    assert!(unguessable(
        &format!("mcpb-0-{}", a.simple()),
        &format!("mcpb-0-{}", b.simple())
    ));
}

/// While a server→client request waits for raw session A, session B answers it with 200
/// guessed ids, random ids and A's real id: each is refused with HTTP 400
/// `mcp_budget.route.unknown_request` (id null). A's own answer then reaches the server; the
/// same answer a second time is refused too. Ids the gateway issues in a row are not a counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessed_and_foreign_answers_are_refused() {
    let (gw, up) = ask_gateway("isolation-guess", None).await;
    let http = http_client();
    let a = RawSession::open(&http, gw.url()).await;
    let b = RawSession::open(&http, gw.url()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut wrong = Vec::new();

    let (mut events, real) = ask_raw(&a, 10, "A-RAW-1").await;
    let real = real.expect("A's call brings a sampling/createMessage to A");
    let mut guesses: Vec<Value> = (1..=200).map(|n| json!(format!("mcpb-0-{n}"))).collect();
    guesses.extend((0..5).map(|_| json!(uuid::Uuid::new_v4().simple().to_string())));
    guesses.push(real.clone());
    let mut accepted = Vec::new();
    for id in &guesses {
        let (status, body) = b.post(&sampling_answer(id, "INJECTED-BY-B")).await;
        let refused = status == 400
            && body["error"]["data"]["type"] == UNKNOWN_REQUEST
            && body["id"].is_null();
        if !refused {
            accepted.push(format!("{id} → {status} {body}"));
        }
    }
    if !accepted.is_empty() {
        let shown: Vec<&String> = accepted.iter().take(5).collect();
        wrong.push(format!(
            "{} of B's {} answers were not refused with 400 {UNKNOWN_REQUEST} (id null), e.g. {shown:?}",
            accepted.len(),
            guesses.len()
        ));
    }
    let (status, body) = b
        .post(&json!({"jsonrpc": "2.0", "id": 99, "method": "ping"}))
        .await;
    if status != 200 || !body["result"].is_object() {
        wrong.push(format!("B's session stopped serving: {status} {body}"));
    }

    let (status, body) = a.post(&sampling_answer(&real, "A-RAW-ANSWER")).await;
    if status != 202 {
        wrong.push(format!("A's own answer: {status} {body}"));
    }
    let (_, answer) = events.until_answer(&json!(10)).await;
    let text = answer
        .as_ref()
        .and_then(|m| m["result"]["content"][0]["text"].as_str())
        .unwrap_or_default();
    if text != "A-RAW-ANSWER" {
        wrong.push(format!(
            "A's tool result should hold A's answer: {answer:?}"
        ));
    }
    let (status, body) = a.post(&sampling_answer(&real, "A-RAW-AGAIN")).await;
    if status != 400 || body["error"]["data"]["type"] != UNKNOWN_REQUEST {
        wrong.push(format!("A's second answer to {real}: {status} {body}"));
    }

    let (mut events, next) = ask_raw(&a, 11, "A-RAW-2").await;
    match next {
        Some(next) => {
            let (first, second) = (real.to_string(), next.to_string());
            if !unguessable(&first, &second) {
                wrong.push(format!(
                    "ids issued in a row look counted: {first}, {second}"
                ));
            }
            a.post(&sampling_answer(&next, "A-RAW-ANSWER-2")).await;
            events.until_answer(&json!(11)).await;
        }
        None => wrong.push("A's second call brought no sampling request".to_owned()),
    }
    stop(gw, &up).await;
    assert_none(&wrong, &json!(null));
}

// ---------------------------------------------------------------------------------------------
// 5. Logs

/// A sets a log level, B does not. A log the server sends outside any call (while B was the
/// last to call) reaches A only; a log sent during A's call (A alone in flight) reaches A only;
/// B gets no log at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_reach_only_the_client_that_asked_for_them() {
    const ROUNDS: usize = 5;
    let (gw, up) = ask_gateway("isolation-logs", None).await;
    let mut steps = vec![
        settle(),
        json!({"op": "set_level", "client": "A", "level": "info"}),
    ];
    for r in 0..ROUNDS {
        steps.push(mark(&format!("later-{r}")));
        steps.push(call(
            "A",
            "ask__log_later",
            json!({"delay": 0.5, "text": format!("LATER-{r}")}),
            &format!("later-{r}"),
        ));
        steps.push(sleep(0.1));
        // B is the last client to have called when the log comes.
        steps.push(call(
            "B",
            "ask__slow",
            json!({"seconds": 0}),
            &format!("poke-{r}"),
        ));
        steps.push(sleep(0.8));
        steps.push(mark(&format!("now-{r}")));
        steps.push(call(
            "A",
            "ask__log_now",
            json!({"text": format!("NOW-{r}")}),
            &format!("now-{r}"),
        ));
        steps.push(sleep(0.3));
    }
    let clients = json!({"A": {"log": true}, "B": {"log": true}});
    let plan = json!({"clients": clients, "steps": steps});
    let report = two_clients(&gw.tag, gw.url(), &plan).await;

    let mut wrong = Vec::new();
    let logs_a: Vec<&str> = got(&report, "A", "logs")
        .iter()
        .filter_map(|l| l["params"]["data"].as_str())
        .collect();
    for r in 0..ROUNDS {
        for text in [format!("LATER-{r}"), format!("NOW-{r}")] {
            let n = logs_a.iter().filter(|l| **l == text).count();
            if n != 1 {
                wrong.push(format!("A got {text} {n} time(s)"));
            }
        }
    }
    let logs_b = got(&report, "B", "logs");
    if !logs_b.is_empty() {
        wrong.push(format!("B got {} log(s): {logs_b:?}", logs_b.len()));
    }
    stop(gw, &up).await;
    assert_none(&wrong, &report);
}

// ---------------------------------------------------------------------------------------------
// 6. An HTTP upstream

/// server-everything over streamable HTTP: A's `trigger-sampling-request` reaches A only while
/// B has `trigger-long-running-operation` in flight on the same upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_upstream_sampling_reaches_its_caller_only() {
    const ROUNDS: usize = 5;
    let tag = new_tag("isolation-everything");
    let guard = TagGuard(tag.clone());
    let (server, url) = everything_http(&tag).await;
    let gw = Gateway::start(
        "isolation-everything",
        Mode::Http,
        &[Up::http("everything", &url)],
    )
    .await;
    let mut steps = Vec::new();
    for r in 0..ROUNDS {
        steps.push(mark(&format!("round-{r}")));
        steps.push(background(call(
            "B",
            "everything__trigger-long-running-operation",
            json!({"duration": 1, "steps": 2}),
            &format!("long-{r}"),
        )));
        steps.push(sleep(0.2));
        steps.push(call(
            "A",
            "everything__trigger-sampling-request",
            json!({"prompt": format!("A-PROMPT-{r}"), "maxTokens": 5}),
            &format!("sampling-{r}"),
        ));
        steps.push(join());
    }
    let clients = json!({"A": {"sampling": "A-ANSWER"}, "B": {"sampling": "B-ANSWER"}});
    let plan = json!({"clients": clients, "steps": steps});
    let report = two_clients(&gw.tag, gw.url(), &plan).await;

    let mut wrong = Vec::new();
    let sampled = got(&report, "A", "sampling");
    for r in 0..ROUNDS {
        let text = text_of(&report, &format!("sampling-{r}"));
        if !text.contains("A-ANSWER") || text.contains("B-ANSWER") {
            wrong.push(format!("round {r}: A's tool result: {text}"));
        }
        let prompt = format!("A-PROMPT-{r}");
        let reached = sampled.iter().any(|s| {
            s["params"]["messages"][0]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains(&prompt))
        });
        if !reached {
            wrong.push(format!("round {r}: A's callback never got {prompt}"));
        }
        if report["calls"][format!("long-{r}")]["result"].is_null() {
            wrong.push(format!(
                "round {r}: B's long call: {}",
                report["calls"][format!("long-{r}")]
            ));
        }
    }
    let b = got(&report, "B", "sampling");
    if !b.is_empty() {
        wrong.push(format!("B's sampling callback ran {} time(s)", b.len()));
    }
    gw.stop_and_check().await;
    drop(server);
    assert_no_leftovers(&tag).await;
    drop(guard);
    assert_none(&wrong, &report);
}
