//! The streamable HTTP downstream at the HTTP level (reqwest, raw sockets): unreadable bodies,
//! batches, oversized bodies, unknown methods, sessions, DNS-rebinding protection, concurrent
//! POSTs on one session, `Content-Type` / `Accept` / `Host` / `Origin` hygiene, one GET stream
//! per session. The server keeps serving the session through all of it.

use serde_json::{Value, json};

use crate::harness::{self, Gateway, Mode, Up, http_client};

struct Http {
    client: reqwest::Client,
    url: String,
    session: Option<String>,
}

impl Http {
    async fn post_with(&self, body: String, host: Option<&str>) -> (u16, Value) {
        let mut req = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body);
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s);
        }
        if let Some(h) = host {
            req = req.header("host", h);
        }
        let resp = req.send().await.expect("the gateway answers");
        let status = resp.status().as_u16();
        let is_sse = resp.headers().get("content-type").is_some_and(|v| {
            v.to_str()
                .unwrap_or_default()
                .starts_with("text/event-stream")
        });
        let text = resp.text().await.unwrap_or_default();
        let json_text = if is_sse {
            // The last event's data is the answer.
            text.lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .next_back()
                .unwrap_or_default()
                .to_owned()
        } else {
            text
        };
        (
            status,
            serde_json::from_str(&json_text).unwrap_or(Value::Null),
        )
    }

    async fn post(&self, body: &Value) -> (u16, Value) {
        self.post_with(body.to_string(), None).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_downstream_refuses_bad_input_and_keeps_the_session() {
    let gw = Gateway::builder("http-down", Mode::Http)
        .policy("max_message_bytes = 4096")
        .start(&[Up::everything("everything")])
        .await;
    let mut http = Http {
        client: http_client(),
        url: gw.url().to_owned(),
        session: None,
    };

    // A request without a session is refused; initialize opens one.
    let (status, _) = http
        .post(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .await;
    assert_eq!(status, 400);
    let init = http
        .client
        .post(&http.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "it-http", "version": "0"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(init.status().as_u16(), 200);
    http.session = init
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(http.session.is_some());
    let (status, _) = http
        .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    assert_eq!(status, 202);

    let (status, parse) = http.post_with("not json".into(), None).await;
    assert_eq!(
        (status, parse["error"]["code"].as_i64()),
        (400, Some(-32700))
    );
    let (status, batch) = http
        .post(&json!([{"jsonrpc": "2.0", "id": 2, "method": "ping"}]))
        .await;
    assert_eq!(
        (status, batch["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    let huge = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "everything__echo", "arguments": {"message": "x".repeat(10_000)}}});
    let (status, too_large) = http.post(&huge).await;
    assert_eq!(status, 413);
    assert_eq!(
        too_large["error"]["data"]["type"],
        "mcp_budget.request.too_large"
    );
    let (status, unknown) = http
        .post(&json!({"jsonrpc": "2.0", "id": 4, "method": "no/such/method"}))
        .await;
    assert_eq!(
        (status, unknown["error"]["code"].as_i64()),
        (200, Some(-32601))
    );
    assert_eq!(unknown["id"], 4);

    // DNS rebinding: a foreign Host is refused, localhost names are not.
    let ping = json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}).to_string();
    let (status, _) = http.post_with(ping.clone(), Some("evil.example.com")).await;
    assert_eq!(status, 403);
    let (status, _) = http.post_with(ping, Some("localhost:1234")).await;
    assert_eq!(status, 200);

    // Three concurrent calls on the session, each answered with its own id.
    let bodies: Vec<Value> = (10..13)
        .map(|id| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "everything__echo", "arguments": {"message": format!("m{id}")}}})
        })
        .collect();
    let calls = bodies.iter().map(|b| http.post(b));
    let answers = futures::future::join_all(calls).await;
    for (i, (status, answer)) in answers.iter().enumerate() {
        assert_eq!(*status, 200);
        assert_eq!(answer["id"], 10 + i, "{answer}");
        assert_eq!(
            answer["result"]["content"][0]["text"],
            format!("Echo: m{}", 10 + i)
        );
    }

    // DELETE ends the session; it is unknown afterwards.
    let del = http
        .client
        .delete(&http.url)
        .header("mcp-session-id", http.session.clone().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(del.status().as_u16(), 200);
    let (status, _) = http
        .post(&json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}))
        .await;
    assert_eq!(status, 404);
    gw.stop_and_check().await;
}

/// One raw HTTP/1.1 exchange on a new connection (for headers reqwest would not send: no
/// `Host`, two of them, odd spellings): the gateway's status and JSON body.
async fn raw(addr: &str, head: &str, body: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\n{head}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A 2026-07-28 `server/discover` (id 3) from a client that accepts only JSON.
async fn modern_discover_json_only(client: &reqwest::Client, url: &str) -> reqwest::Response {
    let modern = json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .body(modern.to_string())
        .send()
        .await
        .unwrap()
}

/// HTTP hygiene: a POST must be `Content-Type: application/json` (415), accept both JSON and
/// SSE from 2025-03-26 on with `strict_accept` (406; 2024-11-05 clients need only JSON; the
/// default is lenient, see the next test), and carry exactly one
/// `Host` that is an authority only (400) naming this server (403); an `Origin` must be a real
/// origin (`null` gets 403). Good requests are served between the refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_hygiene_content_type_accept_host_and_origin() {
    let gw = Gateway::builder("http-hygiene", Mode::Http)
        .policy("strict_accept = true")
        .start(&[])
        .await;
    let url = gw.url().to_owned();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let client = http_client();
    let init = |version: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "it-hygiene", "version": "0"}}})
        .to_string()
    };
    let send = |content_type: &str, accept: Option<&str>, body: String| {
        let mut req = client
            .post(&url)
            .header("content-type", content_type)
            .body(body);
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let session = resp
                .headers()
                .get("mcp-session-id")
                .map(|v| v.to_str().unwrap().to_owned());
            let text = resp.text().await.unwrap();
            (
                status,
                session,
                serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
            )
        }
    };
    let both = Some("application/json, text/event-stream");

    // Content-Type.
    let (status, session, body) = send("text/plain", both, init("2025-06-18")).await;
    assert_eq!((status, session), (415, None), "{body}");
    assert_eq!(
        body["error"]["data"]["type"],
        "mcp_budget.http.unsupported_media_type"
    );
    let (status, _, _) = send(
        "application/x-www-form-urlencoded",
        both,
        init("2025-06-18"),
    )
    .await;
    assert_eq!(status, 415);
    let (status, _, _) = send("Application/JSON; charset=utf-8", both, init("2025-06-18")).await;
    assert_eq!(status, 200);

    // Accept, per era.
    // (Without an Accept of its own, reqwest sends `*/*`: a missing one is tried raw below.)
    for accept in [Some("application/json"), Some("text/event-stream")] {
        let (status, session, body) = send("application/json", accept, init("2025-06-18")).await;
        assert_eq!((status, session), (406, None), "{accept:?}: {body}");
        assert_eq!(
            body["error"]["data"]["type"],
            "mcp_budget.http.not_acceptable"
        );
        assert_eq!(body["id"], 1, "{body}");
    }
    for accept in [
        "*/*",
        "application/*, text/*",
        "text/event-stream, application/json;q=0.5",
    ] {
        let (status, _, body) = send("application/json", Some(accept), init("2025-11-25")).await;
        assert_eq!(status, 200, "{accept}: {body}");
    }
    // A 2024-11-05 client needs JSON only, on initialize and after it.
    let (status, session, body) = send(
        "application/json",
        Some("application/json"),
        init("2024-11-05"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let session = session.unwrap();
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let resp = client
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-session-id", &session)
        .body(ping.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    // A 2026-07-28 request must accept both too.
    let resp = modern_discover_json_only(&client, &url).await;
    assert_eq!(resp.status().as_u16(), 406);

    // Host: exactly one, an authority only.
    let head = |host: &str| {
        format!(
            "{host}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n"
        )
    };
    let bad_host = |(status, body): (u16, Value)| {
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["data"]["type"], "mcp_budget.http.bad_host");
    };
    bad_host(raw(&addr, &head(""), &ping).await);
    bad_host(
        raw(
            &addr,
            &head("Host: localhost\r\nHost: evil.example\r\n"),
            &ping,
        )
        .await,
    );
    bad_host(raw(&addr, &head("Host: 127.0.0.1:80@evil.example\r\n"), &ping).await);
    bad_host(raw(&addr, &head("Host: localhost/evil\r\n"), &ping).await);
    let (status, body) = raw(&addr, &head("Host: evil.example\r\n"), &ping).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["error"]["data"]["type"],
        "mcp_budget.http.forbidden_origin"
    );
    let (status, body) = raw(&addr, &head(&format!("Host: {addr}\r\n")), &ping).await;
    assert_eq!((status, body["id"].clone()), (200, json!(2)), "{body}");

    // Origin: a real origin, local or allowed.
    let with_origin = |origin: &str| head(&format!("Host: {addr}\r\nOrigin: {origin}\r\n"));
    for origin in [
        "null",
        "http://localhost@evil.example",
        "http://localhost.evil.example",
    ] {
        let (status, body) = raw(&addr, &with_origin(origin), &ping).await;
        assert_eq!(status, 403, "{origin}: {body}");
    }
    let (status, _) = raw(&addr, &with_origin("http://localhost:5173"), &ping).await;
    assert_eq!(status, 200);
    let no_accept = format!("Host: {addr}\r\nContent-Type: application/json\r\n");
    let (status, body) = raw(&addr, &no_accept, &init("2025-06-18")).await;
    assert_eq!(status, 406, "{body}");
    gw.stop_and_check().await;
}

/// By default a POST that accepts either JSON or SSE is answered in a shape it accepts: JSON
/// for `application/json` alone or no `Accept`, an SSE stream (of the answer alone) for
/// `text/event-stream` alone; 2026-07-28 requests too. An `Accept` naming neither still gets
/// 406 `mcp_budget.http.not_acceptable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lenient_accept_answers_in_a_shape_the_client_reads() {
    let gw = Gateway::start(
        "http-lenient-accept",
        Mode::Http,
        &[Up::fake("fake", "hang")],
    )
    .await;
    let url = gw.url().to_owned();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let client = http_client();
    let post = |accept: &str, session: Option<&str>, body: &Value| {
        let headers: Vec<(&str, String)> = session
            .map(|s| ("mcp-session-id", s.to_owned()))
            .into_iter()
            .collect();
        let (accept, body, client, url) = (accept.to_owned(), body.clone(), &client, &url);
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let answer = harness::post(client, url, &accept, &headers, &body).await;
            let content_type = answer.header("content-type").to_owned();
            (answer.status, content_type, answer.session(), answer.text)
        }
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "it-lenient", "version": "0"}}});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});

    // JSON only: a session opens, and requests are answered with JSON.
    let (status, content_type, session, body) = post("application/json", None, &init).await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "application/json"),
        "{body}"
    );
    let session = session.expect("a session");
    let (status, content_type, _, body) = post("application/json", Some(&session), &list).await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "application/json"),
        "{body}"
    );
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["id"], 2, "{body}");
    assert!(answer["result"]["tools"].is_array(), "{body}");

    // SSE only: the answer comes as one event.
    let (status, content_type, _, body) = post("text/event-stream", Some(&session), &list).await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "text/event-stream"),
        "{body}"
    );
    let data = body
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("an event");
    let answer: Value = serde_json::from_str(data).unwrap();
    assert_eq!(answer["id"], 2, "{body}");
    assert!(answer["result"]["tools"].is_array(), "{body}");

    // No Accept at all: JSON.
    let head =
        format!("Host: {addr}\r\nContent-Type: application/json\r\nMcp-Session-Id: {session}\r\n");
    let (status, answer) = raw(&addr, &head, &list.to_string()).await;
    assert_eq!((status, answer["id"].clone()), (200, json!(2)), "{answer}");

    // A 2026-07-28 request that accepts JSON only.
    let resp = modern_discover_json_only(&client, &url).await;
    assert_eq!(resp.status().as_u16(), 200);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["id"], 3, "{answer}");

    // Neither type: still refused.
    let (status, _, _, body) = post("text/html", Some(&session), &list).await;
    assert_eq!(status, 406, "{body}");
    let refusal: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        refusal["error"]["data"]["type"],
        "mcp_budget.http.not_acceptable"
    );
    assert_eq!(refusal["id"], 2, "{body}");
    gw.stop_and_check().await;
}

/// A session has one GET stream: a second GET gets 409 while the first keeps receiving; once
/// the first is closed, a new one opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_get_stream_gets_409_and_the_first_keeps_working() {
    use futures::StreamExt;
    let gw = Gateway::start("http-get-409", Mode::Http, &[Up::fake("fake", "hang")]).await;
    let mut http = Http {
        client: http_client(),
        url: gw.url().to_owned(),
        session: None,
    };
    let init = http
        .client
        .post(&http.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "it-get", "version": "0"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    http.session = Some(
        init.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned(),
    );
    let (status, _) = http
        .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    assert_eq!(status, 202);
    let get = || {
        http.client
            .get(&http.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", http.session.clone().unwrap())
            .send()
    };
    let first = get().await.unwrap();
    assert_eq!(first.status().as_u16(), 200);
    let second = get().await.unwrap();
    assert_eq!(second.status().as_u16(), 409);
    let conflict: Value = second.json().await.unwrap();
    assert_eq!(
        conflict["error"]["data"]["type"],
        "mcp_budget.session.stream_conflict"
    );

    // The first stream still gets the session's messages (list_changed from `grow`).
    let (status, _) = http
        .post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "fake__grow", "arguments": {}}}))
        .await;
    assert_eq!(status, 200);
    let mut events = first.bytes_stream();
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !seen.contains("notifications/tools/list_changed") {
        let chunk = tokio::time::timeout_at(deadline, events.next())
            .await
            .expect("list_changed on the first stream")
            .expect("the stream is open")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }

    // Closed, it makes room for a new one.
    drop(events);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let again = get().await.unwrap();
        if again.status().as_u16() == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still {}",
            again.status()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    gw.stop_and_check().await;
}
