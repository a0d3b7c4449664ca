//! Kept results shared through `[state]` (issue 54 item 2): a result over its
//! `max_result_tokens` spilled on one replica is read whole through another (the relay does not
//! carry a session's `read_result` to the replica that kept it: without the shared store the
//! other replica answers that no such result is kept), and still once that replica is gone;
//! only while the caller may still see the tool, on the replica that serves the read; with the store down, the replica that kept it
//! still reads it and another answers `mcp_budget.state.unavailable` at once. And the store's
//! bounded put (`state::results::PUT`) on a real `redis-server`: a session's bytes stay within
//! `result_session_bytes` (oldest out first), even with two replicas putting at once, and a
//! result expires after `result_ttl_secs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_budget::state::Store;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::harness::{self, Up, free_port};
use super::{Replica, TURN, open_session_as, post_mcp_as};

/// A replica's policy in its own folder of `dir`: `server-everything`, sealed ids, `echo`'s
/// results over 150 tokens kept, the clients `alice` (allowed `alice_allow`) and `bob` (every
/// tool), `[state]` on the test's store.
fn results_policy(dir: &Path, name: &str, tag: &str, alice_allow: &str) -> PathBuf {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let downstream = "max_sessions_per_client = 1000\n\n\
                      [sessions]\nseal_key_env = \"MCP_BUDGET_SEAL_KEY\"\n\n\
                      [budget]\nmode = \"full\"\n\n\
                      [budget.tools.\"e/echo\"]\nmax_result_tokens = 150\n";
    let path = harness::policy(&dir, tag, downstream, &[Up::everything("e")]);
    let digest = |key: &str| {
        use sha2::Digest as _;
        format!("{:x}", sha2::Sha256::digest(key.as_bytes()))
    };
    let text = std::fs::read_to_string(&path).unwrap()
        + &format!(
            "\n[[client]]\nname = \"alice\"\napi_key_sha256 = \"{}\"\nallow = {alice_allow}\n\
             \n[[client]]\nname = \"bob\"\napi_key_sha256 = \"{}\"\nallow = [\"*\"]\n\
             \n[state]\nbackend = \"redis\"\nurl_env = \"MCP_BUDGET_REDIS_URL\"\n\
             key_prefix = \"{tag}:\"\ntimeout_ms = 250\n",
            digest("key-a"),
            digest("key-b")
        );
    std::fs::write(&path, text).unwrap();
    path
}

/// One JSON-RPC call as `key` on `session` through `url`: the answer's message.
async fn call(url: &str, key: &str, session: &str, name: &str, arguments: &Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": name, "arguments": arguments}});
    post_mcp_as(url, Some(key), Some(session), &body)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .0
}

/// The text blocks of a `tools/call` answer.
fn texts(answer: &Value) -> Vec<String> {
    answer["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("a result: {answer}"))
        .iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect()
}

/// The id the note ending a shortened result names.
fn kept_id(answer: &Value) -> String {
    let texts = texts(answer);
    let note = texts.last().unwrap();
    let (_, rest) = note
        .split_once("{\"id\":\"")
        .unwrap_or_else(|| panic!("a kept result's note: {note}"));
    rest.split('"').next().unwrap().to_owned()
}

/// Every page of result `id` read through `url`, joined (or the first answer that is not a
/// page).
async fn read_whole(url: &str, key: &str, session: &str, id: &str) -> Result<String, Value> {
    let mut whole = String::new();
    let mut offset = 0;
    for _ in 0..1_000 {
        let answer = call(
            url,
            key,
            session,
            "read_result",
            &json!({"id": id, "offset": offset}),
        )
        .await;
        if answer["result"]["isError"] == true || answer.get("error").is_some() {
            return Err(answer);
        }
        let texts = texts(&answer);
        whole.push_str(&texts[0]);
        let footer = &texts[1];
        if footer.ends_with("the end]") {
            return Ok(whole);
        }
        let next = footer
            .split("read_result ")
            .nth(1)
            .unwrap()
            .trim_end_matches(']');
        let next: Value = serde_json::from_str(next).unwrap();
        offset = next["offset"].as_u64().unwrap();
    }
    panic!("no end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_spilled_on_one_replica_is_read_whole_through_another() {
    let _turn = TURN.lock().await;
    let tag = harness::new_tag("scaleout-results");
    let _guard = harness::TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let mut redis = harness::RedisServer::start(&tag).await;
    let env = [("MCP_BUDGET_REDIS_URL", redis.url())];
    let all = results_policy(dir.path(), "all", &tag, "[\"*\"]");
    // Replica C's policy no longer lets alice use echo (a reload rolling through replicas).
    let narrow = results_policy(dir.path(), "narrow", &tag, "[\"e/get-sum\"]");
    let ports = [free_port(), free_port(), free_port()];
    let (a, b, c) = tokio::join!(
        Replica::start_with(&all, ports[0], &tag, &env),
        Replica::start_with(&all, ports[1], &tag, &env),
        Replica::start_with(&narrow, ports[2], &tag, &env),
    );
    let url = |i: usize| format!("http://127.0.0.1:{}/mcp", ports[i]);
    let session = open_session_as(&url(0), Some("key-a")).await;
    let message: String = (0..800).map(|i| format!("word{i} ")).collect();
    let echo = json!({"message": message});

    // Spilled on A: a head and a note; the whole result read through B, page after page.
    let spilled = call(&url(0), "key-a", &session, "e__echo", &echo).await;
    let id = kept_id(&spilled);
    assert!(texts(&spilled)[0].starts_with("Echo: word0 "), "{spilled}");
    let whole = format!("Echo: {message}");
    let through_b = read_whole(&url(1), "key-a", &session, &id).await;
    assert_eq!(through_b.as_deref(), Ok(whole.as_str()));
    let through_a = read_whole(&url(0), "key-a", &session, &id).await;
    assert_eq!(
        through_a, through_b,
        "the replica that kept it reads it too"
    );

    // Another session (bob's, on B) does not read it; C, where alice may not use echo, refuses.
    let bobs = open_session_as(&url(1), Some("key-b")).await;
    let other = read_whole(&url(1), "key-b", &bobs, &id).await.unwrap_err();
    assert!(
        texts(&other)[0].contains("no result"),
        "another session's id reads nothing: {other}"
    );
    let denied = read_whole(&url(2), "key-a", &session, &id)
        .await
        .unwrap_err();
    assert!(
        texts(&denied)[0].contains("which this client may not use"),
        "the scope of the replica serving the read: {denied}"
    );

    // A is gone (the relay could not reach it now): its result is still read through B.
    let spilled = call(&url(0), "key-a", &session, "e__echo", &echo).await;
    let id = kept_id(&spilled);
    a.stop().await;
    let after_a = read_whole(&url(1), "key-a", &session, &id).await;
    assert_eq!(after_a.as_deref(), Ok(whole.as_str()), "A gone");

    // The store goes: a spill on B is still read on B; C answers at once that the store is down.
    redis.kill().await;
    let spilled = call(&url(1), "key-a", &session, "e__echo", &echo).await;
    let id = kept_id(&spilled);
    let here = read_whole(&url(1), "key-a", &session, &id).await;
    assert_eq!(here.as_deref(), Ok(whole.as_str()));
    let asked = std::time::Instant::now();
    let there = read_whole(&url(2), "key-a", &session, &id)
        .await
        .unwrap_err();
    assert_eq!(
        there["error"]["data"]["type"], "mcp_budget.state.unavailable",
        "{there}"
    );
    assert_eq!(there["error"]["data"]["id"], id.as_str(), "{there}");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "no hang: {:?}",
        asked.elapsed()
    );
    for gateway in [b, c] {
        gateway.stop().await;
    }
    harness::assert_no_leftovers(&tag).await;
}

/// A store on `redis` for the put tests: `[state]` with `prefix`, its heartbeat running until
/// `shutdown`.
fn store_on(redis: &harness::RedisServer, prefix: &str, shutdown: &CancellationToken) -> Store {
    let text = format!(
        "version = 1\n[state]\nbackend = \"redis\"\nurl_env = \"U\"\nkey_prefix = \"{prefix}\"\n\
         timeout_ms = 1000\n"
    );
    let policy = mcp_budget::policy::Policy::from_toml_str(&text, "p.toml").unwrap();
    let mcp_budget::policy::state::Backend::Redis(settings) = policy.state.backend else {
        panic!("redis");
    };
    Store::start(settings, Ok(redis.url()), shutdown.clone())
}

/// Whether session `sid`'s byte count under `prefix` is the sum of what its hash holds, and
/// within `cap`: `:1` when it is.
async fn counted_right(
    redis: &harness::RedisServer,
    prefix: &str,
    sid: &str,
    cap: usize,
) -> String {
    let script = "local n = 0 for _, id in ipairs(redis.call('HKEYS', KEYS[1])) do \
                  n = n + redis.call('HSTRLEN', KEYS[1], id) end \
                  local c = tonumber(redis.call('GET', KEYS[2]) or '0') \
                  if n == c and c <= tonumber(ARGV[1]) then return 1 end return 0";
    let hash = format!("{prefix}{{session:{sid}}}:results");
    redis
        .command(&format!("EVAL \"{script}\" 2 {hash} {hash}:bytes {cap}"))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_put_keeps_a_sessions_bytes_within_its_cap_oldest_out_first() {
    let tag = harness::new_tag("scaleout-results-put");
    let _guard = harness::TagGuard(tag.clone());
    let redis = harness::RedisServer::start(&tag).await;
    let shutdown = CancellationToken::new();
    let prefix = format!("{tag}:");
    let (one, two) = (
        store_on(&redis, &prefix, &shutdown),
        store_on(&redis, &prefix, &shutdown),
    );
    let ttl = Duration::from_secs(60);
    let value = |n: usize| "x".repeat(n);

    // Within 100 bytes: the third of 40 pushes the first out; one larger than the cap is not kept.
    for id in ["r1", "r2", "r3"] {
        assert_eq!(
            one.keep_result(("s", id), &value(40), ttl, 100).await,
            Ok(true)
        );
    }
    assert_eq!(
        one.kept_result("s", "r1", ttl).await,
        Ok(None),
        "the oldest went"
    );
    let (text, age) = two.kept_result("s", "r3", ttl).await.unwrap().unwrap();
    assert_eq!((text.len(), age < Duration::from_secs(5)), (40, true));
    assert_eq!(
        two.kept_result("other", "r3", ttl).await,
        Ok(None),
        "per session"
    );
    assert_eq!(
        one.keep_result(("s", "big"), &value(101), ttl, 100).await,
        Ok(false)
    );
    assert!(
        two.kept_result("s", "r2", ttl).await.unwrap().is_some(),
        "untouched"
    );
    assert_eq!(counted_right(&redis, &prefix, "s", 100).await, ":1");

    // Two replicas putting at once: never over the cap, the count always the hash's bytes.
    let puts = (0..40).map(|i| {
        let store = if i % 2 == 0 { one.clone() } else { two.clone() };
        async move {
            let id = format!("c{i}");
            store
                .keep_result(("c", &id), &"y".repeat(30), ttl, 100)
                .await
        }
    });
    for kept in futures::future::join_all(puts).await {
        assert_eq!(kept, Ok(true));
    }
    assert_eq!(counted_right(&redis, &prefix, "c", 100).await, ":1");
    let held = redis
        .command(&format!("HLEN {prefix}{{session:c}}:results"))
        .await;
    assert_eq!(held, ":3", "three of 30 bytes fit in 100");

    // The TTL: gone after it, with the session's keys.
    let short = Duration::from_millis(300);
    assert_eq!(
        one.keep_result(("t", "r1"), "z", short, 100).await,
        Ok(true)
    );
    assert!(two.kept_result("t", "r1", short).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(two.kept_result("t", "r1", short).await, Ok(None));
    let left = redis.command(&format!("EXISTS {prefix}{{session:t}}:results {prefix}{{session:t}}:results:at {prefix}{{session:t}}:results:bytes")).await;
    assert_eq!(left, ":0", "the session's keys expire with its last result");
    shutdown.cancel();
}
