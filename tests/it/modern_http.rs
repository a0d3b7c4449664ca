//! The HTTP rules of MCP 2026-07-28 (stateless) on the gateway's streamable HTTP downstream, with
//! raw requests (reqwest): mirrored headers (`-32020`), the `_meta` envelope (`-32602`),
//! unsupported versions (`-32022`), methods 2026-07-28 removed (404 + `-32601`), DNS rebinding
//! (403), `GET` / `DELETE` without a session (405) next to 2025 sessions that keep both, and the
//! modern result fields. After every refusal a good request must still be served.
//!
//! Reference for statuses and codes: the Python `mcp` 2.3 SDK's
//! `mcp/server/_streamable_http_modern.py` and `mcp/shared/inbound.py` (its validation ladder
//! and `ERROR_CODE_HTTP_STATUS`); the conformance suite's `server-stateless` and
//! `http-header-validation` scenarios agree (`tests/conformance_modern.rs`).

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, error_type, http_client};

const V: &str = "2026-07-28";

struct Modern {
    client: reqwest::Client,
    url: String,
}

/// A reply: status, `Allow` header, body (the last SSE event's data when streamed).
struct Reply {
    status: u16,
    allow: Option<String>,
    retry_after: Option<String>,
    body: Value,
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientInfo": {"name": "it-modern", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// A modern request body: `params` plus the full `_meta` envelope.
fn request(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The mirrored headers a conforming client sends for `body`.
fn mirrored(body: &Value) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("mcp-protocol-version", V.to_owned()),
        ("mcp-method", body["method"].as_str().unwrap().to_owned()),
    ];
    let p = &body["params"];
    if let Some(name) = p["name"].as_str().or(p["uri"].as_str()) {
        h.push(("mcp-name", name.to_owned()));
    }
    h
}

impl Modern {
    async fn send(
        &self,
        method: reqwest::Method,
        body: Option<String>,
        headers: &[(&str, String)],
    ) -> Reply {
        let mut req = self
            .client
            .request(method, &self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let resp = req.send().await.expect("the gateway answers");
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let (allow, retry_after) = (header("allow"), header("retry-after"));
        let text = resp.text().await.unwrap_or_default();
        let json_text = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .next_back()
            .map_or(text.as_str(), |d| d)
            .to_owned();
        Reply {
            status,
            allow,
            retry_after,
            body: serde_json::from_str(&json_text).unwrap_or(Value::Null),
        }
    }

    async fn post(&self, body: &Value, headers: &[(&str, String)]) -> Reply {
        self.send(reqwest::Method::POST, Some(body.to_string()), headers)
            .await
    }

    /// Posts `body` with the headers a conforming client sends.
    async fn good(&self, body: &Value) -> Reply {
        self.post(body, &mirrored(body)).await
    }

    /// A good `tools/list` is still served.
    async fn assert_serving(&self, after: &str) {
        let r = self.good(&request(999, "tools/list", json!({}))).await;
        assert_eq!(r.status, 200, "after {after}: {}", r.body);
        assert!(
            r.body["result"]["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty()),
            "after {after}: {}",
            r.body
        );
    }

    /// `body` with `headers` is refused with `status`, `code` and `data.type`; the id is echoed.
    async fn refused(
        &self,
        what: &str,
        body: &Value,
        headers: &[(&str, String)],
        want: (u16, i64, &str),
    ) -> Value {
        let r = self.post(body, headers).await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_i64()),
            (want.0, Some(want.1)),
            "{what}: {}",
            r.body
        );
        assert_eq!(error_type(&r.body), want.2, "{what}");
        assert_eq!(
            r.body["id"], body["id"],
            "{what}: the error carries the request id"
        );
        self.assert_serving(what).await;
        r.body
    }

    /// `body` with `headers` is refused as a header mismatch: 400 + -32020.
    async fn mismatched(&self, what: &str, body: &Value, headers: &[(&str, String)]) {
        self.refused(what, body, headers, (400, -32020, MISMATCH))
            .await;
    }
}

impl Reply {
    /// The reply is an error with this HTTP status and JSON-RPC code.
    fn assert_error(&self, status: u16, code: i64) {
        assert_eq!(
            (self.status, self.body["error"]["code"].as_i64()),
            (status, Some(code)),
            "{}",
            self.body
        );
    }
}

fn with(
    headers: &[(&'static str, String)],
    name: &'static str,
    value: Option<&str>,
) -> Vec<(&'static str, String)> {
    let mut out: Vec<_> = headers
        .iter()
        .filter(|(k, _)| *k != name)
        .cloned()
        .collect();
    if let Some(v) = value {
        out.push((name, v.to_owned()));
    }
    out
}

async fn start(test: &str) -> (Gateway, Modern) {
    let gw = Gateway::start(test, Mode::Http, &[Up::everything("e")]).await;
    let m = Modern {
        client: http_client(),
        url: gw.url().to_owned(),
    };
    (gw, m)
}

const MISMATCH: &str = "mcp_budget.protocol.header_mismatch";
const ENVELOPE: &str = "mcp_budget.protocol.invalid_envelope";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_headers_must_mirror_the_body() {
    let (gw, m) = start("modern-headers").await;
    m.assert_serving("start").await;

    let list = request(1, "tools/list", json!({}));
    let h = mirrored(&list);
    for (what, name, value) in [
        ("Mcp-Method differs", "mcp-method", Some("prompts/list")),
        ("Mcp-Method missing", "mcp-method", None),
        (
            "Mcp-Method in another case",
            "mcp-method",
            Some("Tools/List"),
        ),
        ("MCP-Protocol-Version missing", "mcp-protocol-version", None),
    ] {
        m.mismatched(what, &list, &with(&h, name, value)).await;
    }
    // The header rung comes before the version rung: a client that disagrees with itself is told
    // so, not that the body's version is unsupported (SDK ladder; conformance
    // sep-2575-http-server-header-mismatch-400).
    let mut v999 = list.clone();
    v999["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    m.mismatched("MCP-Protocol-Version differs from _meta", &v999, &h)
        .await;
    let dup = [h.clone(), vec![("mcp-method", "tools/list".to_owned())]].concat();
    m.mismatched("Mcp-Method twice", &list, &dup).await;

    let call = request(
        2,
        "tools/call",
        json!({"name": "e__echo", "arguments": {"message": "hi"}}),
    );
    let ch = mirrored(&call);
    for (what, value) in [
        ("Mcp-Name differs", Some("e__other")),
        ("Mcp-Name missing", None),
        ("Mcp-Name bad base64", Some("=?base64?ZV9fZWNobw?=")),
        (
            "Mcp-Name base64 of another name",
            Some("=?base64?ZV9fb3RoZXI=?="),
        ),
    ] {
        m.mismatched(what, &call, &with(&ch, "mcp-name", value))
            .await;
    }
    let read = request(
        3,
        "resources/read",
        json!({"uri": "demo://resource/static/document/architecture.md"}),
    );
    m.mismatched(
        "Mcp-Name differs from uri",
        &read,
        &with(&mirrored(&read), "mcp-name", Some("demo://x")),
    )
    .await;

    // Matching values are accepted: plain, base64-encoded ("e__echo"), header names in any case.
    let ok = m.good(&call).await;
    assert_eq!(
        (ok.status, ok.body["result"]["resultType"].as_str()),
        (200, Some("complete")),
        "{}",
        ok.body
    );
    let b64 = m
        .post(
            &call,
            &with(&ch, "mcp-name", Some("=?base64?ZV9fZWNobw==?=")),
        )
        .await;
    assert_eq!(b64.status, 200, "base64 Mcp-Name: {}", b64.body);
    assert!(
        b64.body["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hi"),
        "{}",
        b64.body
    );
    let upper: Vec<(&str, String)> = vec![
        ("MCP-PROTOCOL-VERSION", V.to_owned()),
        ("MCP-METHOD", "tools/list".to_owned()),
    ];
    assert_eq!(m.post(&list, &upper).await.status, 200);
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_envelope_version_and_removed_methods_are_refused() {
    let (gw, m) = start("modern-envelope").await;

    // Unknown version: -32022 with what is supported and what was asked.
    let mut v999 = request(1, "tools/list", json!({}));
    v999["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let h = with(&mirrored(&v999), "mcp-protocol-version", Some("v999.0.0"));
    let err = m
        .refused(
            "unsupported version",
            &v999,
            &h,
            (400, -32022, "mcp_budget.protocol.unsupported_version"),
        )
        .await;
    assert_eq!(err["error"]["data"]["supported"], json!([V]));
    assert_eq!(err["error"]["data"]["requested"], "v999.0.0");

    // A modern header without the envelope, or an envelope without a required key: -32602.
    let h = mirrored(&request(0, "tools/list", json!({})));
    let bare = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    m.refused("no _meta", &bare, &h, (400, -32602, ENVELOPE))
        .await;
    let no_params = json!({"jsonrpc": "2.0", "id": "s", "method": "tools/list"});
    m.refused("no params", &no_params, &h, (400, -32602, ENVELOPE))
        .await;
    for key in [
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
    ] {
        let mut body = request(3, "tools/list", json!({}));
        body["params"]["_meta"].as_object_mut().unwrap().remove(key);
        m.refused(
            &format!("_meta without {key}"),
            &body,
            &h,
            (400, -32602, ENVELOPE),
        )
        .await;
    }
    // clientInfo is a SHOULD: its absence is served.
    let mut body = request(4, "tools/list", json!({}));
    body["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientInfo");
    assert_eq!(m.good(&body).await.status, 200);

    // Methods 2026-07-28 removed: 404 + -32601, never served as if a session existed.
    for (i, (method, params)) in [
        ("ping", json!({})),
        ("logging/setLevel", json!({"level": "debug"})),
        (
            "resources/subscribe",
            json!({"uri": "demo://resource/static/document/architecture.md"}),
        ),
        (
            "resources/unsubscribe",
            json!({"uri": "demo://resource/static/document/architecture.md"}),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let body = request(10 + i as u64, method, params);
        m.refused(
            method,
            &body,
            &mirrored(&body),
            (404, -32601, "mcp_budget.method.not_found"),
        )
        .await;
    }

    // Notifications: 202 at a served version, -32022 at another (SDK `_acknowledge_notification`).
    let note =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    let r = m
        .post(
            &note,
            &[
                ("mcp-protocol-version", V.to_owned()),
                ("mcp-method", "notifications/cancelled".to_owned()),
            ],
        )
        .await;
    assert_eq!(r.status, 202);
    let r = m
        .post(&note, &[("mcp-protocol-version", "v999.0.0".to_owned())])
        .await;
    r.assert_error(400, -32022);
    m.assert_serving("notifications").await;

    // DNS rebinding: a foreign Host or Origin gets 403 before any modern rule.
    let list = request(20, "tools/list", json!({}));
    for (k, v) in [
        ("host", "evil.example.com"),
        ("origin", "http://evil.example.com"),
    ] {
        let r = m
            .post(&list, &[mirrored(&list), vec![(k, v.to_owned())]].concat())
            .await;
        assert_eq!(r.status, 403, "{k}: {}", r.body);
        assert_eq!(error_type(&r.body), "mcp_budget.http.forbidden_origin");
        m.assert_serving(k).await;
    }
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_get_and_delete_get_405_while_2025_sessions_keep_them() {
    let (gw, m) = start("modern-405").await;
    let modern = [("mcp-protocol-version", V.to_owned())];
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = m.send(method.clone(), None, &modern).await;
        assert_eq!(
            (r.status, r.allow.as_deref()),
            (405, Some("POST")),
            "{method}"
        );
    }
    m.assert_serving("GET/DELETE").await;

    // A 2025 session on the same endpoint: GET opens its stream, DELETE ends it.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "it-legacy", "version": "0"}}});
    let resp = m
        .client
        .post(&m.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let legacy = [
        ("mcp-protocol-version", "2025-11-25".to_owned()),
        ("mcp-session-id", session.clone()),
    ];
    let get = m
        .client
        .get(&m.url)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 200);
    assert!(
        get.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    drop(get);
    let r = m.send(reqwest::Method::DELETE, None, &legacy).await;
    assert_eq!(r.status, 200);
    let r = m.send(reqwest::Method::DELETE, None, &legacy).await;
    assert_eq!(r.status, 404, "the session is gone");
    m.assert_serving("the 2025 session").await;
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_discover_lists_and_calls_carry_the_modern_result_fields() {
    let (gw, m) = start("modern-results").await;
    let d = m.good(&request(1, "server/discover", json!({}))).await;
    assert_eq!(d.status, 200, "{}", d.body);
    let r = &d.body["result"];
    assert!(
        r["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(V)),
        "{r}"
    );
    assert_eq!(r["resultType"], "complete");
    assert!(r["capabilities"]["tools"].is_object(), "{r}");
    assert!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"].is_string(),
        "{r}"
    );

    for (method, params, key) in [
        ("tools/list", json!({}), "tools"),
        ("prompts/list", json!({}), "prompts"),
        ("resources/list", json!({}), "resources"),
        ("resources/templates/list", json!({}), "resourceTemplates"),
        (
            "resources/read",
            json!({"uri": "demo://resource/static/document/architecture.md"}),
            "contents",
        ),
    ] {
        let r = m.good(&request(2, method, params)).await;
        let res = &r.body["result"];
        assert_eq!(r.status, 200, "{method}: {}", r.body);
        assert!(res[key].is_array(), "{method}: {res}");
        assert_eq!(res["resultType"], "complete", "{method}");
        assert!(res["ttlMs"].as_u64().is_some(), "{method}: ttlMs {res}");
        assert!(
            matches!(res["cacheScope"].as_str(), Some("public" | "private")),
            "{method}: {res}"
        );
    }

    let call = m
        .good(&request(
            3,
            "tools/call",
            json!({"name": "e__echo", "arguments": {"message": "modern"}}),
        ))
        .await;
    let res = &call.body["result"];
    assert_eq!(res["resultType"], "complete", "{res}");
    assert_eq!(res["content"][0]["text"], "Echo: modern");
    assert!(
        res.get("ttlMs").is_none() && res.get("cacheScope").is_none(),
        "a call is not cacheable: {res}"
    );
    gw.stop_and_check().await;
}

/// Errors produced inside the stack reach a modern client with the HTTP status 2026-07-28 gives
/// their code (`modern::http_status`): `unknown/method` → 404 + -32601; `tools/call` of an
/// unknown tool → 400 + -32602.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_errors_from_the_stack_get_their_http_status() {
    let (gw, m) = start("modern-status").await;
    let unknown = request(1, "unknown/method", json!({}));
    let r = m.good(&unknown).await;
    r.assert_error(404, -32601);
    let call = request(2, "tools/call", json!({"name": "e__nope", "arguments": {}}));
    let r = m.good(&call).await;
    r.assert_error(400, -32602);
    gw.stop_and_check().await;
}

/// A modern call over the caller's `[limits]` rate: 429 with `Retry-After` (whole seconds,
/// rounded up from `data.retryAfterMs`) and `-32023` `mcp_budget.limit.rate`; lists are still
/// served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_call_over_the_rate_is_429_with_retry_after() {
    let limits = "\n[limits]\ncalls_per_sec = 0.5\nburst = 1\n";
    let gw = Gateway::builder("modern-rate", Mode::Http)
        .policy(limits)
        .start(&[Up::everything("e")])
        .await;
    let m = Modern {
        client: http_client(),
        url: gw.url().to_owned(),
    };
    let call = |id| {
        request(
            id,
            "tools/call",
            json!({"name": "e__echo", "arguments": {"message": "hi"}}),
        )
    };
    let first = m.good(&call(1)).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert!(first.body["result"]["content"].is_array(), "{}", first.body);
    let r = m.good(&call(2)).await;
    r.assert_error(429, -32023);
    assert_eq!(error_type(&r.body), "mcp_budget.limit.rate");
    let ms = r.body["error"]["data"]["retryAfterMs"]
        .as_u64()
        .expect("retryAfterMs");
    assert!((1..=2000).contains(&ms), "{ms}");
    assert_eq!(r.retry_after, Some(ms.div_ceil(1000).to_string()));
    m.assert_serving("a rate-limited call").await;
    gw.stop_and_check().await;
}

/// A modern `initialize` (2026-07-28 headers and `_meta`) is a removed method: 404 + -32601,
/// not a 2025 handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_initialize_is_a_removed_method() {
    let (gw, m) = start("modern-init").await;
    let init = request(1, "initialize", json!({}));
    let r = m.good(&init).await;
    r.assert_error(404, -32601);
    gw.stop_and_check().await;
}

/// A modern `tools/call` whose 2025-era upstream asks for sampling, from a client that declared
/// no `sampling` capability: 400 + -32021 with `data.requiredCapabilities = {"sampling": {}}`,
/// as a modern server would answer (the gateway refuses the upstream's request and cancels it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_call_needing_an_undeclared_capability_gets_32021() {
    let gw = Gateway::start("modern-caps", Mode::Http, &[Up::everything("e").timeout(5)]).await;
    let m = Modern {
        client: http_client(),
        url: gw.url().to_owned(),
    };
    let call = request(
        1,
        "tools/call",
        json!({"name": "e__trigger-sampling-request", "arguments": {"prompt": "hi"}}),
    );
    let r = m.good(&call).await;
    r.assert_error(400, -32021);
    assert!(
        r.body["error"]["data"]["requiredCapabilities"]["sampling"].is_object(),
        "{}",
        r.body
    );
    gw.stop_and_check().await;
}
