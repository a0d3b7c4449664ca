//! The streamable HTTP downstream at the HTTP level (reqwest): unreadable bodies, batches,
//! oversized bodies, unknown methods, sessions, DNS-rebinding protection, concurrent POSTs on
//! one session. The server keeps serving the session through all of it.

use serde_json::{json, Value};

use crate::harness::{Gateway, Mode, Up};

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
    let gw = Gateway::start_with(
        "http-down",
        Mode::Http,
        "max_message_bytes = 4096",
        &[Up::everything("everything")],
    )
    .await;
    let mut http = Http {
        client: reqwest::Client::new(),
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
