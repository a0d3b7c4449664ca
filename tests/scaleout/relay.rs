//! What replicas tell each other through the store (`[state] backend = "redis"`, issue 34
//! item 5): a `DELETE` ends a sealed session on every replica, replicas started later
//! included; a client's answer to a sampling or elicitation request reaches the replica whose
//! upstream asked, whichever replica HAProxy's round-robin gives it (the Python and
//! TypeScript SDKs against `server-everything`); an answer for a replica that is gone is
//! refused at once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{self, free_port};
use super::{Haproxy, Replica, Scripted, TURN, metric, open_session, post_mcp, write_policy};

/// A replica's policy in its own folder of `dir`: `server-everything`, sealed ids, `[state]`
/// on the test's store, its admin listener on `admin`.
fn relay_policy(dir: &Path, i: usize, tag: &str, admin: u16) -> PathBuf {
    let dir = dir.join(format!("r{i}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = write_policy(&dir, tag);
    let text = std::fs::read_to_string(&path).unwrap()
        + &format!(
            "\n[state]\nbackend = \"redis\"\nurl_env = \"MCP_BUDGET_REDIS_URL\"\n\
             key_prefix = \"{tag}:\"\ntimeout_ms = 250\n\n[admin]\nhttp = \"127.0.0.1:{admin}\"\n"
        );
    std::fs::write(&path, text).unwrap();
    path
}

/// Three replicas sharing one store, each with its admin listener.
struct Deployment {
    tag: String,
    _guard: harness::TagGuard,
    dir: tempfile::TempDir,
    redis: harness::RedisServer,
    gateways: Vec<Replica>,
    ports: Vec<u16>,
    admin: Vec<u16>,
}

impl Deployment {
    async fn start(name: &str) -> Self {
        let tag = harness::new_tag(name);
        let guard = harness::TagGuard(tag.clone());
        let dir = tempfile::tempdir().unwrap();
        let redis = harness::RedisServer::start(&tag).await;
        let mut deployment = Self {
            tag,
            _guard: guard,
            dir,
            redis,
            gateways: Vec::new(),
            ports: Vec::new(),
            admin: Vec::new(),
        };
        for _ in 0..3 {
            deployment.add().await;
        }
        deployment
    }

    /// One more replica.
    async fn add(&mut self) {
        let (port, admin) = (free_port(), free_port());
        let i = self.gateways.len();
        let policy = relay_policy(self.dir.path(), i, &self.tag, admin);
        let env = [("MCP_BUDGET_REDIS_URL", self.redis.url())];
        self.gateways
            .push(Replica::start_with(&policy, port, &self.tag, &env).await);
        self.ports.push(port);
        self.admin.push(admin);
    }

    fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}/mcp", self.ports[i])
    }

    async fn stop(mut self) {
        for gateway in self.gateways.drain(..) {
            gateway.stop().await;
        }
        self.redis.kill().await;
        harness::assert_no_leftovers(&self.tag).await;
    }
}

/// A `tools/list` on `session` through `url`: the HTTP status and, on an error, its type.
async fn list_status(url: &str, session: &str) -> (u16, String) {
    let list = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"});
    match post_mcp(url, Some(session), &list).await {
        Ok(_) => (200, String::new()),
        Err(e) => {
            let status = e
                .strip_prefix("HTTP ")
                .and_then(|r| r.get(..3))
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            (status, e)
        }
    }
}

async fn delete(url: &str, session: &str) -> u16 {
    harness::http_client()
        .delete(url)
        .header("mcp-session-id", session)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A deployment named `name` and a session opened on replica 0 that every replica serves (and
/// holds: an entry rebuilt from the sealed id).
async fn served_everywhere(name: &str) -> (Deployment, String) {
    let deployment = Deployment::start(name).await;
    let session = open_session(&deployment.url(0)).await;
    for i in 0..3 {
        assert_eq!(list_status(&deployment.url(i), &session).await.0, 200);
    }
    (deployment, session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_on_one_replica_ends_the_session_on_every_replica_and_on_later_ones() {
    let _turn = TURN.lock().await;
    let (mut deployment, session) = served_everywhere("scaleout-revoke").await;
    assert_eq!(delete(&deployment.url(1), &session).await, 200);
    let ended = std::time::Instant::now();
    for i in [0, 2] {
        // Published at once; a little time for it to arrive.
        let within = Duration::from_secs(2).saturating_sub(ended.elapsed());
        let (status, _) = ended_within(&deployment.url(i), &session, within).await;
        assert_eq!(status.0, 404, "replica {i} still serves it: {}", status.1);
        assert!(
            status.1.contains("mcp_budget.session.unknown"),
            "{}",
            status.1
        );
    }
    eprintln!(
        "revoked on the two other replicas within {:?}",
        ended.elapsed()
    );
    // A replica that starts after the DELETE reads the revocations when it subscribes.
    deployment.add().await;
    let (status, _) = ended_within(&deployment.url(3), &session, Duration::from_secs(3)).await;
    assert_eq!(status.0, 404, "a later replica serves it: {}", status.1);
    assert_eq!(
        delete(&deployment.url(2), &session).await,
        404,
        "ended once"
    );
    // Other sessions are untouched.
    let other = open_session(&deployment.url(1)).await;
    for i in 0..4 {
        assert_eq!(list_status(&deployment.url(i), &other).await.0, 200);
    }
    deployment.stop().await;
}

/// Polls `tools/list` on `session` through `url` until it is refused (404) or `within` passes:
/// the last status and error, and how long it took.
async fn ended_within(url: &str, session: &str, within: Duration) -> ((u16, String), Duration) {
    let started = std::time::Instant::now();
    let mut status = list_status(url, session).await;
    while status.0 == 200 && started.elapsed() < within {
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = list_status(url, session).await;
    }
    (status, started.elapsed())
}

/// The size of the store's revocation set, as `redis-server` answers `ZCARD` (`:1`).
async fn revocations_in_store(deployment: &Deployment) -> String {
    let key = format!("{}:revoked", deployment.tag);
    deployment.redis.command(&format!("ZCARD {key}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_survives_a_store_restarted_empty() {
    let _turn = TURN.lock().await;
    let (mut deployment, session) = served_everywhere("scaleout-revoke-restart").await;
    assert_eq!(delete(&deployment.url(1), &session).await, 200);
    for i in [0, 2] {
        let (status, _) = ended_within(&deployment.url(i), &session, Duration::from_secs(2)).await;
        assert_eq!(status.0, 404, "replica {i}: {}", status.1);
    }
    assert_eq!(revocations_in_store(&deployment).await, ":1");
    // The store restarts with nothing (no persistence): the replicas that know the revocation
    // put it back, and a replica started afterwards refuses the session.
    let port = deployment.redis.port;
    deployment.redis.kill().await;
    deployment.redis = harness::RedisServer::start_on(port, &deployment.tag).await;
    let back = std::time::Instant::now();
    while revocations_in_store(&deployment).await != ":1" && back.elapsed() < Duration::from_secs(5)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "revocations in the restarted store after {:?}: {}",
        back.elapsed(),
        revocations_in_store(&deployment).await
    );
    deployment.add().await;
    let (status, took) = ended_within(&deployment.url(3), &session, Duration::from_secs(3)).await;
    assert_eq!(
        status.0, 404,
        "a replica started after the store restarted empty serves a revoked session: {}",
        status.1
    );
    eprintln!("the later replica refused it after {took:?}");
    deployment.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_while_the_store_is_down_reaches_every_replica_once_it_is_back() {
    let _turn = TURN.lock().await;
    let (mut deployment, session) = served_everywhere("scaleout-revoke-down").await;
    let port = deployment.redis.port;
    deployment.redis.kill().await;
    assert_eq!(
        delete(&deployment.url(1), &session).await,
        200,
        "ended here at least"
    );
    assert_eq!(list_status(&deployment.url(1), &session).await.0, 404);
    // The store comes back (empty): the revocation is delivered then, to every replica.
    deployment.redis = harness::RedisServer::start_on(port, &deployment.tag).await;
    let back = std::time::Instant::now();
    for i in [0, 2] {
        let (status, _) = ended_within(&deployment.url(i), &session, Duration::from_secs(8)).await;
        assert_eq!(
            status.0, 404,
            "replica {i} still serves a session DELETEd while the store was down: {}",
            status.1
        );
    }
    eprintln!(
        "a DELETE made while the store was down reached the other replicas {:?} after it came back",
        back.elapsed()
    );
    assert_eq!(revocations_in_store(&deployment).await, ":1");
    deployment.add().await;
    let (status, _) = ended_within(&deployment.url(3), &session, Duration::from_secs(3)).await;
    assert_eq!(status.0, 404, "a later replica: {}", status.1);
    deployment.stop().await;
}

/// Three sampling and three elicitation calls, the client answering with `text` and `name`.
fn asking_plan(text: &str, name: &str) -> Value {
    let sample = json!({"op": "call", "name": "e__trigger-sampling-request",
                        "args": {"prompt": "hi", "maxTokens": 20}});
    let elicit = json!({"op": "call", "name": "e__trigger-elicitation-request", "args": {}});
    json!({
        "sampling": text,
        "elicit": {"name": name, "check": true},
        "steps": [sample, elicit, sample, elicit, sample, elicit],
    })
}

/// Every step of `report` got a result carrying what the client answered.
fn assert_answered(client: &str, report: &Value, text: &str, name: &str) {
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 6, "{client}: {report}");
    for step in steps {
        let result = step["result"].to_string();
        let wanted = if step["name"] == "e__trigger-sampling-request" {
            text
        } else {
            name
        };
        assert!(
            step.get("error").is_none() && result.contains(wanted),
            "{client}: {step}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_and_elicitation_answers_reach_the_replica_that_asked_through_round_robin() {
    let _turn = TURN.lock().await;
    let deployment = Deployment::start("scaleout-answers").await;
    let haproxy = Haproxy::start(&deployment.ports, &deployment.tag).await;
    let timeout = ("STEP_TIMEOUT", "15".to_owned());
    let python_plan = [
        ("PLAN", asking_plan("SAMPLED-BY-PY", "Ada").to_string()),
        timeout.clone(),
    ];
    let ts_plan = [
        ("PLAN", asking_plan("SAMPLED-BY-TS", "Grace").to_string()),
        timeout,
    ];
    let tag = &deployment.tag;
    // One after the other: server-everything's elicitation request names no client, and the
    // gateway does not guess between two clients calling one shared server at once.
    let python = Scripted::python("session_client.py", &haproxy.url(), &python_plan, tag)
        .report(Duration::from_secs(120))
        .await;
    let ts = Scripted::node("ts_session_client.mjs", &haproxy.url(), &ts_plan, tag)
        .report(Duration::from_secs(120))
        .await;
    assert_answered("python", &python, "SAMPLED-BY-PY", "Ada");
    assert_answered("ts", &ts, "SAMPLED-BY-TS", "Grace");
    let mut forwarded = 0;
    for port in &deployment.admin {
        for (labels, n) in metric(*port, "mcp_budget_state_answers_total").await {
            assert_eq!(
                labels, "outcome=\"forwarded\"",
                "only forwarded: {labels} {n}"
            );
            forwarded += n;
        }
    }
    eprintln!("12 answers through round-robin, {forwarded} forwarded to the replica that asked");
    assert!(forwarded > 0, "round-robin sent no answer elsewhere");
    drop(haproxy);
    deployment.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_for_a_replica_that_is_gone_is_refused_at_once() {
    let _turn = TURN.lock().await;
    let mut deployment = Deployment::start("scaleout-asker-gone").await;
    let session = open_session(&deployment.url(0)).await;
    // An answer to a request replica 0 sent, for a replica id no heartbeat knows.
    let answer = json!({"jsonrpc": "2.0", "id": "mcpb-0-0123456789abcdef0123456789abcdef-feedfacecafebeef",
                        "result": {"action": "accept", "content": {}}});
    let started = std::time::Instant::now();
    let refused = post_mcp(&deployment.url(1), Some(&session), &answer).await;
    let took = started.elapsed();
    let error = refused.unwrap_err();
    assert!(error.starts_with("HTTP 400"), "{error}");
    assert!(error.contains("mcp_budget.route.asker_gone"), "{error}");
    assert!(
        took < Duration::from_secs(2),
        "refused at once, not after {took:?}"
    );
    // A replica killed (its heartbeat still fresh, its subscription gone): the same.
    let status: Value = reqwest::get(format!("http://127.0.0.1:{}/status", deployment.admin[2]))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let replica = status["state"]["replica"].as_str().unwrap().to_owned();
    deployment.gateways[2].kill().await;
    let answer = json!({"jsonrpc": "2.0", "id": format!("mcpb-0-0123456789abcdef0123456789abcdef-{replica}"),
                        "result": {"action": "accept", "content": {}}});
    let error = post_mcp(&deployment.url(1), Some(&session), &answer)
        .await
        .unwrap_err();
    assert!(error.contains("mcp_budget.route.asker_gone"), "{error}");
    let gone = deployment.gateways.remove(2);
    drop(gone);
    deployment.ports.remove(2);
    deployment.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_clients_retry_resumes_its_parked_call_on_the_replica_that_parked_it() {
    let _turn = TURN.lock().await;
    let deployment = Deployment::start("scaleout-resume").await;
    let haproxy = Haproxy::start(&deployment.ports, &deployment.tag).await;
    // A 2026-07-28 client calling 2025-era server-everything: each question parks the call on
    // the replica that asked, and the client's retry (round-robin: another replica) resumes it.
    let elicit = json!({"op": "call", "name": "e__trigger-elicitation-request", "args": {}});
    let sample = json!({"op": "call", "name": "e__trigger-sampling-request",
                        "args": {"prompt": "say hi", "maxTokens": 5}});
    let plan = json!({
        "sampling": "SAMPLED-MODERN",
        "elicit": {"name": "Ada", "check": true},
        "steps": [elicit, sample, elicit, sample],
    });
    let mut cmd = tokio::process::Command::new(harness::venv_bin("python"));
    cmd.arg(harness::peer_file("era_client.py"))
        .arg("http")
        .arg(haproxy.url());
    let env = [
        ("PLAN", plan.to_string()),
        ("MODE", "auto".to_owned()),
        ("STEP_TIMEOUT", "15".to_owned()),
    ];
    let report = Scripted::spawn("era_client", cmd, &env, &deployment.tag)
        .report(Duration::from_secs(120))
        .await;
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4, "{report}");
    for step in steps {
        let result = step["result"].to_string();
        let wanted = if step["name"] == "e__trigger-sampling-request" {
            "SAMPLED-MODERN"
        } else {
            "Ada"
        };
        assert!(
            step.get("error").is_none() && result.contains(wanted),
            "{step}"
        );
    }
    let mut resumed = 0;
    for port in &deployment.admin {
        for (labels, n) in metric(*port, "mcp_budget_state_answers_total").await {
            if labels == "outcome=\"resumed_elsewhere\"" {
                resumed += n;
            }
        }
    }
    eprintln!(
        "4 parked calls through round-robin, {resumed} resumed on the replica that parked them"
    );
    assert!(resumed > 0, "round-robin sent no retry elsewhere");
    drop(haproxy);
    deployment.stop().await;
}
