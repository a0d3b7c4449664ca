//! Who is calling, end to end: API keys and bearer JWTs (minted with `PyJWT`, their JWKS
//! served by the test) through the real Python SDK over HTTP in both eras (and the TypeScript
//! SDK), and the configured stdio client; each client sees and calls exactly its scope,
//! argument rules refuse and allow as written, denials are in the audit log under the id the
//! client got, bad credentials get a 401 with the metadata header, no credential reaches an
//! upstream, and a bypass suite finds no way around the check.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{
    self, ACCEPT_BOTH, Gateway, Mode, Up, error_type, http_client, peer_file, py_script_output,
    report, venv_bin,
};

const ALICE: &str = "k-alice-4f1d9e";
const BOB: &str = "k-bob-77c2a0";
const DENIED: &str = "mcp_budget.authorization.denied";
const CONVERT: &str = "time__convert_time";

fn convert_args() -> Value {
    json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"})
}

/// `[downstream]` keys and the two clients: alice may echo only greetings and read the clock
/// but not convert times; bob has everything of server-everything.
fn clients(audit: &Path, extra: &str) -> String {
    format!(
        r#"stdio_client = "alice"
{extra}

[[client]]
name = "alice"
api_key_env = "ALICE_KEY"
allow = ["time/*", "e/echo"]
deny = ["time/convert_time"]

[[client.rule]]
tools = ["e/echo"]
args.message = {{ pattern = "hello.*" }}

[[client]]
name = "bob"
api_key_env = "BOB_KEY"
allow = ["e/*"]

[audit]
path = {audit:?}
"#
    )
}

const KEYS: [(&str, &str); 2] = [("ALICE_KEY", ALICE), ("BOB_KEY", BOB)];

/// Runs `tests/peers/auth_client.py` against `target` with `headers`; its report.
async fn py(tag: &str, target: &[&str], mode: &str, headers: &Value, calls: &Value) -> Value {
    let plan = json!({ "calls": calls });
    let env = [("HEADERS", headers.to_string())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    report(&py_script_output("auth_client.py", tag, mode, target, &plan, &env).await).0
}

/// Runs `tests/peers/ts_auth_client.mjs` (the TypeScript SDK) against `url`; its report.
async fn ts(url: &str, headers: &Value, calls: &Value) -> Value {
    let (headers, plan) = (headers.to_string(), json!({ "calls": calls }).to_string());
    let env = [("HEADERS", headers.as_str()), ("PLAN", plan.as_str())];
    crate::harness::ts_client("ts_auth_client.mjs", &[url], &env).await
}

fn key(k: &str) -> Value {
    json!({ "authorization": format!("Bearer {k}") })
}

/// The denial data of a call in a report (`None` when it was not denied).
fn denial(call: &Value) -> Option<&Value> {
    let data = &call["error"]["data"];
    (data["type"] == DENIED).then_some(data)
}

/// The audit log's lines.
pub(crate) fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an audit line is JSON"))
        .collect()
}

/// Waits until the audit log holds a line with `audit_id` (the writer is a thread of its own).
async fn audited(path: &Path, audit_id: &str) -> Value {
    for _ in 0..100 {
        if let Some(line) = audit_lines(path)
            .into_iter()
            .find(|l| l["audit_id"] == audit_id && l["event"] == "decision")
        {
            return line;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no audit line for {audit_id}: {:?}", audit_lines(path));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_give_each_client_its_scope_over_http_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let ups = [Up::everything("e"), Up::time("time")];
    let gw = Gateway::builder("identity-http", Mode::Http)
        .policy(&clients(&audit, ""))
        .env(&KEYS)
        .start(&ups)
        .await;
    let calls = json!([
        {"name": CONVERT, "args": convert_args()},
        {"name": "e__echo", "args": {"message": "hello there"}},
        {"name": "e__echo", "args": {"message": "bye"}},
        {"name": "e__get-sum", "args": {"a": 1, "b": 2}},
        {"name": "time__get_current_time", "args": {"timezone": "UTC"}},
    ]);
    for mode in ["legacy", "auto"] {
        let r = py(&gw.tag, &["http", gw.url()], mode, &key(ALICE), &calls).await;
        assert_eq!(
            r["tools"],
            json!(["e__echo", "time__get_current_time"]),
            "{mode}: alice lists exactly her scope"
        );
        let c = r["calls"].as_array().unwrap();
        let convert = denial(&c[0]).unwrap_or_else(|| panic!("{mode}: {}", c[0]));
        assert_eq!(convert["tool"], CONVERT);
        assert!(
            c[1]["result"].is_object(),
            "{mode}: a greeting is echoed: {}",
            c[1]
        );
        let bye = denial(&c[2]).unwrap_or_else(|| panic!("{mode}: {}", c[2]));
        assert!(bye["reason"].as_str().unwrap().contains("message"), "{bye}");
        assert!(denial(&c[3]).is_some(), "{mode}: {}", c[3]);
        assert!(c[4]["result"].is_object(), "{mode}: {}", c[4]);
        // Every denial is in the audit log under the id the client was given.
        for denied in [convert, bye] {
            let id = denied["audit_id"].as_str().unwrap();
            let line = audited(&audit, id).await;
            assert_eq!(line["decision"], "deny", "{line}");
            assert_eq!(line["principal"], "alice", "{line}");
        }
    }
    // The TypeScript SDK sees and calls the same.
    let r = ts(gw.url(), &json!({"x-api-key": ALICE}), &calls).await;
    assert_eq!(
        r["tools"],
        json!(["e__echo", "time__get_current_time"]),
        "{r}"
    );
    let c = r["calls"].as_array().unwrap();
    assert!(denial(&c[0]).is_some() && denial(&c[2]).is_some(), "{r}");
    assert!(
        c[1]["result"].is_object() && c[4]["result"].is_object(),
        "{r}"
    );
    let r = py(&gw.tag, &["http", gw.url()], "legacy", &key(BOB), &calls).await;
    let tools: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.len() > 5 && tools.iter().all(|t| t.starts_with("e__")),
        "{tools:?}"
    );
    let c = r["calls"].as_array().unwrap();
    assert!(
        denial(&c[0]).is_some() && denial(&c[4]).is_some(),
        "bob has no clock"
    );
    assert!(
        c[2]["result"].is_object(),
        "bob's echo has no rule: {}",
        c[2]
    );
    // Allowed calls have an outcome line; arguments are not logged by default.
    let lines = audit_lines(&audit);
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "outcome" && l["outcome"] == "ok")
    );
    assert!(lines.iter().all(|l| l.get("arguments").is_none()));
    gw.stop_and_check().await;
}

/// A raw POST of `body` with `headers`: (status, `WWW-Authenticate`, body, with the session id
/// the gateway gave as `session`).
async fn post(
    http: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, String, Value) {
    let answer = harness::post(http, url, ACCEPT_BOTH, headers, body).await;
    let mut body = answer.json();
    if let Some(s) = answer.session() {
        body["session"] = json!(s);
    }
    (
        answer.status,
        answer.header("www-authenticate").to_owned(),
        body,
    )
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_get_401_with_the_metadata_and_sessions_stay_with_their_client() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let ups = [Up::time("time")];
    let gw = Gateway::builder("identity-401", Mode::Http)
        .policy(&clients(&audit, ""))
        .env(&KEYS)
        .start(&ups)
        .await;
    let url = gw.url().to_owned();
    let http = http_client();
    let origin = url.trim_end_matches("/mcp");
    let metadata = format!("{origin}/.well-known/oauth-protected-resource/mcp");
    let (status, challenge, body) = post(&http, &url, &[], &initialize()).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata}\"")
    );
    assert_eq!(error_type(&body), "mcp_budget.authentication.required");
    for wrong in [
        ("authorization", "Bearer nope"),
        ("x-api-key", "nope"),
        ("authorization", "Basic YWxpY2U6eA=="),
    ] {
        let (status, challenge, body) = post(&http, &url, &[wrong], &initialize()).await;
        assert_eq!(status, 401, "{wrong:?}");
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(challenge.contains(&metadata), "{challenge}");
        assert_eq!(error_type(&body), "mcp_budget.authentication.invalid");
    }
    let doc: Value = reqwest::get(&metadata).await.unwrap().json().await.unwrap();
    assert_eq!(doc["resource"], url);
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    // A session is alice's: bob cannot ride it, nor can a request without a key.
    let alice = format!("Bearer {ALICE}");
    let (status, _, body) = post(&http, &url, &[("authorization", &alice)], &initialize()).await;
    assert_eq!(status, 200, "{body}");
    let session = body["session"].as_str().unwrap().to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let on = |k: &'static str, v: String| vec![(k, v), ("mcp-session-id", session.clone())];
    let bob = on("x-api-key", BOB.to_owned());
    let bob: Vec<(&str, &str)> = bob.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, _, body) = post(&http, &url, &bob, &list).await;
    assert_eq!(
        (status, error_type(&body)),
        (403, "mcp_budget.session.foreign")
    );
    let (status, _, _) = post(&http, &url, &[("mcp-session-id", &session)], &list).await;
    assert_eq!(status, 401);
    let mine = on("x-api-key", ALICE.to_owned());
    let mine: Vec<(&str, &str)> = mine.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, _, body) = post(&http, &url, &mine, &list).await;
    assert_eq!(status, 200, "{body}");
    // Nor can bob end it.
    let delete = |k: &str| {
        http.delete(&url)
            .header("x-api-key", k)
            .header("mcp-session-id", &session)
            .send()
    };
    assert_eq!(delete(BOB).await.unwrap().status().as_u16(), 403);
    assert_eq!(delete(ALICE).await.unwrap().status().as_u16(), 200);
    // The 2026-07-28 era: headers that disagree with the body never get a denied call through.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": CONVERT, "arguments": convert_args(), "_meta": meta}});
    let headers = [
        ("x-api-key", ALICE),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "time__get_current_time"),
    ];
    let (_, _, body) = post(&http, &url, &headers, &call).await;
    assert!(body.get("result").is_none(), "{body}");
    gw.stop_and_check().await;
}

/// Serves `jwks` at `http://127.0.0.1:PORT/jwks.json` until dropped; the URL.
async fn serve_jwks(jwks: String) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            let body = jwks.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = tcp.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = tcp.write_all(head.as_bytes()).await;
                let _ = tcp.write_all(body.as_bytes()).await;
            });
        }
    });
    (url, task)
}

/// A token from `tests/peers/jwt_mint.py` (`PyJWT`, RS256) with `claims`, signed by the key in
/// `dir` (made on the first call, with its `jwks.json`).
fn mint(dir: &Path, claims: &Value) -> String {
    let out = std::process::Command::new(venv_bin("python"))
        .arg(peer_file("jwt_mint.py"))
        .arg(dir)
        .arg(claims.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens_checked_against_a_served_jwks_pick_their_client() {
    let dir = tempfile::tempdir().unwrap();
    const ISS: &str = "https://issuer.test";
    const AUD: &str = "https://gw.test/mcp";
    let claims = |sub: &str, extra: Value| {
        let mut c = json!({"sub": sub, "iss": ISS, "aud": AUD});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    };
    let carol = mint(dir.path(), &claims("carol", json!({})));
    let jwks = std::fs::read_to_string(dir.path().join("jwks.json")).unwrap();
    let (jwks_url, server) = serve_jwks(jwks).await;
    let downstream = format!(
        r#"
[[client]]
name = "carol"
allow = ["time/get_*"]

[[client]]
name = "ci"
token_scopes = ["mcp:ci"]
allow = ["time/convert_*"]

[auth]
resource = "{AUD}"
scopes_supported = ["mcp:ci"]

[auth.jwt]
issuer = "{ISS}"
jwks_url = "{jwks_url}"
"#
    );
    let ups = [Up::time("time")];
    let gw = Gateway::builder("identity-jwt", Mode::Http)
        .policy(&downstream)
        .env(&[])
        .start(&ups)
        .await;
    let url = gw.url().to_owned();
    let calls = json!([{"name": CONVERT, "args": convert_args()}]);
    let r = py(&gw.tag, &["http", &url], "legacy", &key(&carol), &calls).await;
    assert_eq!(r["tools"], json!(["time__get_current_time"]));
    assert!(denial(&r["calls"][0]).is_some(), "{}", r["calls"][0]);
    let ci = mint(
        dir.path(),
        &claims("job-17", json!({"scope": "mcp:ci other"})),
    );
    let r = py(&gw.tag, &["http", &url], "auto", &key(&ci), &calls).await;
    assert_eq!(
        r["tools"],
        json!([CONVERT]),
        "a scope-mapped token is client ci"
    );
    assert!(r["calls"][0]["result"].is_object(), "{}", r["calls"][0]);
    let metadata = "https://gw.test/.well-known/oauth-protected-resource/mcp";
    let http = http_client();
    for (what, token, status, needle) in [
        (
            "expired",
            claims("carol", json!({"exp_in": -3600})),
            401,
            "expired",
        ),
        (
            "another audience",
            json!({"sub": "carol", "iss": ISS, "aud": "https://x"}),
            401,
            "aud",
        ),
        (
            "an unknown key",
            claims("carol", json!({"kid": "k9"})),
            401,
            "k9",
        ),
        (
            "a PS256 token from a key marked RS256",
            claims("carol", json!({"alg": "PS256"})),
            401,
            "PS256",
        ),
        (
            "no client",
            claims("dave", json!({"scope": "mcp:other"})),
            403,
            "insufficient_scope",
        ),
    ] {
        let token = format!("Bearer {}", mint(dir.path(), &token));
        let (got, challenge, _) =
            post(&http, &url, &[("authorization", &token)], &initialize()).await;
        assert_eq!(got, status, "{what}");
        assert!(challenge.contains(metadata), "{what}: {challenge}");
        assert!(challenge.contains(needle), "{what}: {challenge}");
    }
    gw.stop_and_check().await;
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_direct_calls_invoke_tool_and_every_spelling_are_held_to_the_scope() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    // Progressive: every tool goes behind the meta-tools, so invoke_tool is how most are called.
    let budget =
        "[budget]\nmodel = \"claude-haiku-4-5\"\nmode = \"progressive\"\nlist_catalog = false\n";
    let ups = [Up::everything("e"), Up::time("time")];
    let mut gw = Gateway::builder("identity-stdio", Mode::Stdio)
        .policy(&clients(&audit, budget))
        .env(&KEYS)
        .start(&ups)
        .await;
    let c = gw.client();
    c.initialize().await;
    let listed = c.request("tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"invoke_tool"), "{names:?}");
    let invoke = |name: &str, arguments: Value| json!({"name": "invoke_tool", "arguments": {"name": name, "arguments": arguments}});
    let r = c
        .request("tools/call", invoke(CONVERT, convert_args()))
        .await;
    // The budget's per-client plan knows no denied tool: it sends the call down as the direct
    // call it stands for, and the authorize layer refuses it as it refuses a direct call.
    assert_eq!(error_type(&r), DENIED, "invoke_tool of a denied tool: {r}");
    let r = c
        .request("tools/call", invoke("e__echo", json!({"message": "bye"})))
        .await;
    assert_eq!(
        error_type(&r),
        DENIED,
        "invoke_tool is held to argument rules: {r}"
    );
    let r = c
        .request(
            "tools/call",
            invoke("time__get_current_time", json!({"timezone": "UTC"})),
        )
        .await;
    assert!(r["result"].is_object(), "{r}");
    let r = c.call_tool(CONVERT, convert_args()).await;
    assert_eq!(error_type(&r), DENIED, "a direct call: {r}");
    // The bypass suite: every other spelling of the denied tool, and other shapes of the call.
    let long = format!("{CONVERT}{}", "x".repeat(100_000));
    let spellings = [
        "TIME__CONVERT_TIME",
        "Time__Convert_Time",
        "time_convert_time",
        "time/convert_time",
        "time.convert_time",
        "time__convert-time",
        "time____convert_time",
        " time__convert_time",
        "time__convert_time ",
        "time__convert_time\n",
        "time__convert_time\t",
        "time__conv\u{0435}rt_time",
        "t\u{0456}me__convert_time",
        "\u{ff54}ime__convert_time",
        "time__convert\u{200b}_time",
        "time__convert_time\u{0}",
        "convert_time",
        long.as_str(),
    ];
    let mut bypasses = Vec::new();
    for name in spellings {
        for call in [
            json!({"name": name, "arguments": convert_args()}),
            invoke(name, convert_args()),
        ] {
            let r = c.request("tools/call", call).await;
            if r.get("result").is_some_and(|res| res["isError"] != true) {
                bypasses.push(name.chars().take(40).collect::<String>());
            }
        }
    }
    // A repeated name, read one way by one parser and another way by the next.
    let raw = format!(
        r#"{{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{{"name":"time__get_current_time","name":"{CONVERT}","arguments":{}}}}}"#,
        convert_args()
    );
    c.send_raw(format!("{raw}\n").as_bytes()).await;
    let r = c.response(&json!("dup"), Duration::from_secs(20)).await;
    if r.get("result").is_some() {
        bypasses.push("repeated name".into());
    }
    // A batch holding the denied call.
    let batch = json!([{"jsonrpc": "2.0", "id": "b1", "method": "tools/call",
        "params": {"name": CONVERT, "arguments": convert_args()}}]);
    c.send_raw(format!("{batch}\n").as_bytes()).await;
    if let Some(r) = c.next(Duration::from_secs(5)).await {
        if r.to_string().contains("\"result\"") {
            bypasses.push("batch".into());
        }
    }
    eprintln!(
        "bypass suite: {} attempts, {} bypasses",
        spellings.len() * 2 + 2,
        bypasses.len()
    );
    assert_eq!(bypasses, Vec::<String>::new(), "bypasses found");
    gw.stop_and_check().await;
}

/// A streamable HTTP MCP server that records the head of every request it gets; its one tool
/// `peek` answers with them all.
async fn recording_upstream() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::sync::{Arc, Mutex};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let heads: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut tcp = tokio::io::BufReader::new(tcp);
                loop {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if tokio::io::AsyncBufReadExt::read_line(&mut tcp, &mut line)
                            .await
                            .unwrap_or(0)
                            == 0
                        {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    let length = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    let mut body = vec![0; length];
                    tcp.read_exact(&mut body).await.unwrap();
                    seen.lock().unwrap().push(head);
                    let msg: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let result = match msg["method"].as_str().unwrap_or_default() {
                        "initialize" => {
                            json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                            "serverInfo": {"name": "recorder", "version": "0"}})
                        }
                        "tools/list" => {
                            json!({"tools": [{"name": "peek", "inputSchema": {"type": "object"}}]})
                        }
                        "tools/call" => {
                            let text = seen.lock().unwrap().join("\n");
                            json!({"content": [{"type": "text", "text": text}]})
                        }
                        _ => Value::Null,
                    };
                    let reply = if msg.get("id").is_none() {
                        "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_owned()
                    } else if result.is_null() {
                        let body = json!({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}).to_string();
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        )
                    } else {
                        let body = json!({"jsonrpc": "2.0", "id": msg["id"], "result": result})
                            .to_string();
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        )
                    };
                    if tcp.get_mut().write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, heads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_never_reach_an_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let (upstream, heads) = recording_upstream().await;
    let downstream = clients(&audit, "").replace(
        r#"allow = ["time/*", "e/echo"]"#,
        r#"allow = ["time/*", "e/echo", "rec/*"]"#,
    );
    let ups = [Up::http("rec", &upstream).key("protocol", "2025-11-25")];
    let gw = Gateway::builder("identity-passthrough", Mode::Http)
        .policy(&downstream)
        .env(&KEYS)
        .start(&ups)
        .await;
    let headers = json!({"authorization": format!("Bearer {ALICE}"), "x-api-key": ALICE});
    let r = py(
        &gw.tag,
        &["http", gw.url()],
        "legacy",
        &headers,
        &json!([{"name": "rec__peek"}]),
    )
    .await;
    let seen = r["calls"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(seen.contains("POST"), "the upstream was called: {r}");
    let all = heads.lock().unwrap().join("\n").to_ascii_lowercase();
    assert!(
        !all.contains(&ALICE.to_ascii_lowercase()),
        "a client key went upstream:\n{all}"
    );
    assert!(
        !all.contains("authorization:") && !all.contains("x-api-key:"),
        "{all}"
    );
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_takes_a_right_away_takes_effect_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let ups = [Up::time("time")];
    let mut gw = Gateway::builder("identity-reload", Mode::Stdio)
        .policy(&clients(&audit, ""))
        .env(&KEYS)
        .start(&ups)
        .await;
    gw.client().initialize().await;
    let now = json!({"timezone": "UTC"});
    let r = gw
        .client()
        .call_tool("time__get_current_time", now.clone())
        .await;
    assert!(r["result"].is_object(), "{r}");
    // The same policy, with alice's clock denied.
    let stricter = clients(&audit, "").replace(
        r#"deny = ["time/convert_time"]"#,
        r#"deny = ["time/convert_time", "time/get_current_time"]"#,
    );
    let file = gw.policy_file();
    crate::harness::policy(file.parent().unwrap(), &gw.tag, &stricter, &ups);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gw.pid()),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !gw.log().contains("reload: ") {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = gw.client().call_tool("time__get_current_time", now).await;
    assert_eq!(error_type(&r), DENIED, "{r}");
    gw.stop_and_check().await;
}

/// The names a `search_tools` call of a report found.
fn found(call: &Value) -> Vec<String> {
    call["result"]["structuredContent"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a search answer: {call}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// Behind a progressive plan, the real Python SDK (both eras) and TypeScript SDK clients with
/// two API keys search and inspect only their own scope: a tool a client may not call is not
/// found by `search_tools` and is unknown to `get_tool_schema`, while its own tools are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_and_schema_show_each_client_only_its_scope_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let budget =
        "[budget]\nmodel = \"claude-haiku-4-5\"\nmode = \"progressive\"\nlist_catalog = false\n";
    let ups = [Up::everything("e"), Up::time("time")];
    let gw = Gateway::builder("identity-search", Mode::Http)
        .policy(&clients(&audit, budget))
        .env(&KEYS)
        .start(&ups)
        .await;
    let search = |q: &str| json!({"name": "search_tools", "args": {"query": q, "limit": 20}});
    let schema = |n: &str| json!({"name": "get_tool_schema", "args": {"name": n}});
    let calls = json!([
        search("echo a message back"),
        search("convert a time between timezones"),
        search("start a long running operation"),
        schema(CONVERT),
        schema("time__get_current_time"),
        schema("e__trigger-long-running-operation"),
    ]);
    let mut reports = Vec::new();
    for mode in ["legacy", "auto"] {
        for who in [ALICE, BOB] {
            let r = py(&gw.tag, &["http", gw.url()], mode, &key(who), &calls).await;
            reports.push((format!("python {mode} {who}"), who, r));
        }
    }
    for who in [ALICE, BOB] {
        reports.push((
            format!("typescript {who}"),
            who,
            ts(gw.url(), &key(who), &calls).await,
        ));
    }
    for (what, who, r) in &reports {
        let c = r["calls"]
            .as_array()
            .unwrap_or_else(|| panic!("{what}: {r}"));
        let all: Vec<String> = c[..3].iter().flat_map(found).collect();
        if *who == ALICE {
            assert!(
                found(&c[0]).contains(&"e__echo".to_owned()),
                "{what}: {c:?}"
            );
            assert!(
                all.iter()
                    .all(|n| n == "e__echo" || n == "time__get_current_time"),
                "{what}: alice finds only her scope: {all:?}"
            );
            assert!(
                denial(&c[3]).is_some() && c[3]["result"].is_null(),
                "{what}: a denied tool has no schema; it is denied as a direct call is: {}",
                c[3]
            );
            assert_eq!(
                c[4]["result"]["structuredContent"]["name"], "time__get_current_time",
                "{what}"
            );
            assert!(
                denial(&c[5]).is_some() && c[5]["result"].is_null(),
                "{what}: bob's tool is denied to alice: {}",
                c[5]
            );
        } else {
            assert!(
                found(&c[2]).contains(&"e__trigger-long-running-operation".to_owned()),
                "{what}: {c:?}"
            );
            assert!(
                all.iter().all(|n| n.starts_with("e__")),
                "{what}: bob finds no time tool: {all:?}"
            );
            assert!(
                denial(&c[3]).is_some() && c[3]["result"].is_null(),
                "{what}: {}",
                c[3]
            );
            assert!(
                denial(&c[4]).is_some() && c[4]["result"].is_null(),
                "{what}: {}",
                c[4]
            );
            assert_eq!(
                c[5]["result"]["structuredContent"]["name"], "e__trigger-long-running-operation",
                "{what}"
            );
        }
    }
    gw.stop_and_check().await;
}

/// The denied-tool rule: a tool the client may not call is answered with the one
/// `mcp_budget.authorization.denied` object on every path — a direct call, `invoke_tool`,
/// `get_tool_schema` and a `run_code` script's `tools.call` — in both eras. (Before,
/// `invoke_tool` and `get_tool_schema` answered it as an unknown tool.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_tool_gets_the_direct_calls_answer_on_every_path_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let progressive = "[budget]\nmodel = \"claude-haiku-4-5\"\nmode = \"progressive\"\n\
                       list_catalog = false\n\n[discover]\ncode_mode = true\n";
    let ups = [Up::everything("e"), Up::time("time")];
    let gw = Gateway::builder("identity-denied-paths", Mode::Http)
        .policy(&clients(&audit, progressive))
        .env(&KEYS)
        .start(&ups)
        .await;
    let script = format!(
        "try {{ tools.call({CONVERT:?}, {}); return {{denied: false}}; }} \
         catch (e) {{ return {{type: e.type, message: e.message}}; }}",
        convert_args()
    );
    let calls = json!([
        {"name": CONVERT, "args": convert_args()},
        {"name": "invoke_tool", "args": {"name": CONVERT, "arguments": convert_args()}},
        {"name": "get_tool_schema", "args": {"name": CONVERT}},
        {"name": "run_code", "args": {"code": script}},
        {"name": "get_tool_schema", "args": {"name": "time__get_current_time"}},
    ]);
    let mut protocols = Vec::new();
    for mode in ["legacy", "auto"] {
        let r = py(&gw.tag, &["http", gw.url()], mode, &key(ALICE), &calls).await;
        protocols.push(r["protocol"].clone());
        let c = r["calls"].as_array().unwrap();
        // The object without its audit id, which names each denial's own audit line.
        let shape = |call: &Value| {
            let error = &call["error"];
            let data = denial(call).unwrap_or_else(|| panic!("{mode}: not denied: {call}"));
            let id = data["audit_id"].as_str().unwrap();
            let message = error["message"].as_str().unwrap().replace(id, "ID");
            (
                error["code"].clone(),
                message,
                data["tool"].clone(),
                data["reason"].clone(),
            )
        };
        let direct = shape(&c[0]);
        assert_eq!(direct.0, -32000, "{mode}: {}", c[0]);
        assert_eq!(direct.2, CONVERT, "{mode}: {}", c[0]);
        assert_eq!(shape(&c[1]), direct, "{mode}: invoke_tool: {}", c[1]);
        assert_eq!(shape(&c[2]), direct, "{mode}: get_tool_schema: {}", c[2]);
        for call in &c[..3] {
            let line = audited(&audit, call["error"]["data"]["audit_id"].as_str().unwrap()).await;
            assert_eq!(line["decision"], "deny", "{mode}: {line}");
            assert_eq!(line["tool"], CONVERT, "{mode}: {line}");
        }
        let text = c[3]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        let inner: Value = serde_json::from_str(text)
            .ok()
            .or_else(|| c[3]["result"]["structuredContent"].get("result").cloned())
            .unwrap_or_else(|| panic!("{mode}: run_code: {}", c[3]));
        assert_eq!(inner["type"], DENIED, "{mode}: run_code: {inner}");
        let message = inner["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("may not call {CONVERT}")),
            "{mode}: {message}"
        );
        // A tool the client may call keeps its schema.
        let schema = &c[4]["result"];
        assert!(
            schema.is_object() && schema["isError"] != true,
            "{mode}: {}",
            c[4]
        );
    }
    assert_ne!(protocols[0], protocols[1], "both eras: {protocols:?}");
}
