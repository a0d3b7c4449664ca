//! Observability against real infrastructure: the admin listener's health endpoints through an
//! HTTP upstream going down and back, its metrics checked by `promtool` and scraped by a real
//! Prometheus server, JSON call logs, and spans received by an OTLP/HTTP endpoint that decodes
//! them with the official OpenTelemetry protobuf definitions.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::harness::{
    Gateway, Mode, Up, WAIT, drain_stderr, everything_http_on, free_port, http_client, kill_tagged,
    new_tag, peer_file, venv_bin,
};

/// `GET http://127.0.0.1:PORT{path}`: status and body.
pub(crate) async fn get(port: u16, path: &str) -> (u16, String) {
    let resp = http_client()
        .get(format!("http://127.0.0.1:{port}{path}"))
        .send()
        .await
        .expect("the admin listener answers");
    let status = resp.status().as_u16();
    (status, resp.text().await.expect("a body"))
}

/// Polls `GET path` until its status is `want` (at most `limit`); the last body.
async fn wait_status(port: u16, path: &str, want: u16, limit: Duration) -> String {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let (status, body) = get(port, path).await;
        if status == want {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} stayed {status}, not {want}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) fn admin(port: u16) -> String {
    format!("\n[admin]\nhttp = \"127.0.0.1:{port}\"\n")
}

/// `/readyz` is 503 while the required HTTP upstream is unreachable, 200 once it is up, 503
/// again when it dies and 200 when it is back; an upstream with `required = false` that never
/// comes up does not hold readiness. `/healthz` answers all along; `/status` tells each
/// upstream's state; a foreign `Host` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_a_required_upstream_down_and_back() {
    let tag = new_tag("telemetry-health");
    let (port, admin_port) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{port}/mcp");
    let optional = Up::http("spare", &format!("http://127.0.0.1:{}/mcp", free_port()))
        .raw_key("required", "false");
    let ups = [Up::http("web", &url), optional];
    let gw = Gateway::builder("telemetry-health", Mode::Stdio)
        .policy(&admin(admin_port))
        .start(&ups)
        .await;
    assert_eq!(get(admin_port, "/healthz").await, (200, "ok\n".into()));
    let body = wait_status(admin_port, "/readyz", 503, WAIT).await;
    assert!(body.contains("web: down"), "{body}");
    assert!(!body.contains("spare"), "{body}");

    let (server, _) = everything_http_on(&tag, port).await;
    wait_status(admin_port, "/readyz", 200, WAIT).await;
    let (_, status) = get(admin_port, "/status").await;
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["ready"], true, "{status}");
    assert_eq!(status["upstreams"][0]["name"], "web");
    assert_eq!(status["upstreams"][0]["status"], "ready", "{status}");
    assert_ne!(status["upstreams"][0]["era"], "unknown", "{status}");
    // Ready means listed too: /readyz waits for the `tools/list` after the handshake.
    assert_eq!(status["upstreams"][0]["listed"], true, "{status}");
    assert!(
        status["upstreams"][0]["tools"].as_u64().unwrap() > 0,
        "{status}"
    );
    assert_eq!(status["upstreams"][1]["status"], "down", "{status}");
    assert_eq!(status["upstreams"][1]["required"], false, "{status}");

    drop(server);
    wait_status(admin_port, "/readyz", 503, WAIT).await;
    let (_server, _) = everything_http_on(&tag, port).await;
    wait_status(admin_port, "/readyz", 200, WAIT).await;
    // Reconnected: ready again only with the new connection's lists in.
    let status: Value = serde_json::from_str(&get(admin_port, "/status").await.1).unwrap();
    assert_eq!(status["upstreams"][0]["listed"], true, "{status}");
    assert!(
        status["upstreams"][0]["tools"].as_u64().unwrap() > 0,
        "{status}"
    );

    let foreign = http_client()
        .get(format!("http://127.0.0.1:{admin_port}/status"))
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status().as_u16(), 400);
    // Probes answer any Host (a kubelet sends the pod's address).
    let probe = http_client()
        .get(format!("http://127.0.0.1:{admin_port}/readyz"))
        .header("Host", "10.1.2.3:9464")
        .send()
        .await
        .unwrap();
    assert_eq!(probe.status().as_u16(), 200);
    gw.stop_and_check().await;
    kill_tagged(&tag);
}

/// Tool calls and searches counted by server, tool and outcome; the exposition passes
/// `promtool check metrics`; a real Prometheus server scrapes it and its query API returns the
/// counts of the calls this test made; the token gauges equal `inspect --format json`'s
/// figures for the same policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_pass_promtool_and_a_real_prometheus_scrapes_them() {
    let admin_port = free_port();
    let downstream = format!(
        "\n[budget]\nenabled = true\nmodel = \"claude-haiku-4-5\"\n{}",
        admin(admin_port)
    );
    let ups = [Up::time("time")];
    let mut gw = Gateway::builder("telemetry-metrics", Mode::Stdio)
        .policy(&downstream)
        .start(&ups)
        .await;
    let c = gw.client();
    c.initialize().await;
    let listed = c.request("tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    for _ in 0..2 {
        let ok = c
            .call_tool(
                "time__get_current_time",
                json!({"timezone": "Europe/Paris"}),
            )
            .await;
        assert!(ok["result"].is_object(), "{ok}");
    }
    let bad = c
        .call_tool(
            "time__get_current_time",
            json!({"timezone": "Nowhere/Else"}),
        )
        .await;
    assert!(
        bad["result"]["isError"] == true || bad["error"].is_object(),
        "{bad}"
    );

    let (status, text) = get(admin_port, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        text.contains(
            "mcp_budget_tool_calls_total{server=\"time\",tool=\"get_current_time\",outcome=\"ok\"} 2"
        ),
        "{text}"
    );
    assert!(
        text.contains("mcp_budget_tool_call_duration_seconds_bucket"),
        "{text}"
    );
    assert!(
        text.contains("mcp_budget_upstream_up{server=\"time\"} 1"),
        "{text}"
    );
    assert!(
        !text.contains("Europe/Paris"),
        "no argument values in labels"
    );

    let dir = tempfile::tempdir().unwrap();
    promtool_check(dir.path(), &text).await;

    // The token gauges against `inspect` on the same policy.
    let policy = crate::harness::policy(dir.path(), &gw.tag, &downstream, &ups);
    let report = inspect_json(&policy).await;
    let gauge = |name: &str| -> u64 {
        let prefix = format!("{name}{{server=\"time\",profile=\"default\"}} ");
        let line = text.lines().find(|l| l.starts_with(&prefix));
        line.and_then(|l| l[prefix.len()..].parse().ok())
            .unwrap_or_else(|| panic!("{prefix} in {text}"))
    };
    let tools = report["tools"].as_array().unwrap();
    let before: u64 = tools
        .iter()
        .map(|t| t["tokens"]["off"].as_u64().unwrap())
        .sum();
    let after: u64 = tools
        .iter()
        .filter(|t| t["plan"] != "deferred")
        .map(|t| t["tokens"][t["plan"].as_str().unwrap()].as_u64().unwrap())
        .sum();
    assert_eq!(gauge("mcp_budget_tokens_before"), before, "{report}");
    assert_eq!(gauge("mcp_budget_tokens_after"), after, "{report}");
    assert_eq!(gauge("mcp_budget_tokens_saved"), before - after);

    let prometheus = Prometheus::start(dir.path(), admin_port).await;
    let query =
        "mcp_budget_tool_calls_total{server=\"time\",tool=\"get_current_time\",outcome=\"ok\"}";
    assert_eq!(prometheus.wait_value(query).await, "2");
    let up = prometheus
        .wait_value("mcp_budget_upstream_up{server=\"time\"}")
        .await;
    assert_eq!(up, "1");
    gw.stop_and_check().await;
}

/// Runs `promtool check metrics` on `text`; fails the test on any problem it reports.
pub(crate) async fn promtool_check(dir: &Path, text: &str) {
    let file = dir.join("metrics.txt");
    std::fs::write(&file, text).unwrap();
    let out = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .await
        .expect("promtool (Debian package prometheus) is installed");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `mcp-budget inspect --policy POLICY --format json`.
async fn inspect_json(policy: &Path) -> Value {
    crate::harness::cli(["inspect", "--format", "json", "--policy"])
        .arg(policy)
        .ok_async()
        .await
        .json()
}

/// A Prometheus server on loopback scraping the admin listener every second; killed on drop.
struct Prometheus {
    _child: Child,
    port: u16,
}

impl Prometheus {
    async fn start(dir: &Path, target: u16) -> Self {
        let port = free_port();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: mcp-budget\n    static_configs:\n\
                 \x20     - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("prometheus (Debian package prometheus) is installed");
        Self {
            _child: child,
            port,
        }
    }

    /// The value of the one series `query` selects, once Prometheus has scraped it.
    async fn wait_value(&self, query: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut last = Value::Null;
        let http = http_client();
        while tokio::time::Instant::now() < deadline {
            let resp = http
                .get(format!(
                    "http://127.0.0.1:{}/api/v1/query?query={}",
                    self.port,
                    percent_encoded(query)
                ))
                .send()
                .await;
            if let Ok(resp) = resp {
                last = serde_json::from_str(&resp.text().await.unwrap_or_default())
                    .unwrap_or(Value::Null);
                if let Some(v) = last["data"]["result"][0]["value"][1].as_str() {
                    return v.to_owned();
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        panic!("prometheus never had {query}: {last}");
    }
}

/// `text` with every byte outside `A-Za-z0-9` as `%XX` (a URL query value).
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `[telemetry] log_format = "json"`: one JSON object per tool call, with duration, server,
/// tool and outcome, and never the call's argument values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_have_one_line_per_tool_call() {
    let downstream = "\n[telemetry]\nlog_format = \"json\"\n";
    let mut gw = Gateway::builder("telemetry-log", Mode::Stdio)
        .policy(downstream)
        .start(&[Up::time("time")])
        .await;
    let c = gw.client();
    c.initialize().await;
    for zone in ["Europe/Paris", "Asia/Tokyo"] {
        c.call_tool("time__get_current_time", json!({"timezone": zone}))
            .await;
    }
    c.call_tool("time__nope", json!({})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let calls = loop {
        let log = gw.log();
        let calls: Vec<Value> = log
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["message"] == "Tool call")
            .collect();
        if calls.len() >= 3 || tokio::time::Instant::now() > deadline {
            assert!(!log.contains("Europe/Paris"), "{log}");
            break calls;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(calls.len(), 3, "{calls:?}");
    for call in &calls[..2] {
        assert_eq!(call["level"], "INFO");
        assert_eq!(call["server"], "time");
        assert_eq!(call["tool"], "get_current_time");
        assert_eq!(call["outcome"], "ok");
        assert!(call["duration_ms"].as_f64().is_some(), "{call}");
        assert!(call.get("principal").is_none(), "anonymous: {call}");
    }
    assert_eq!(calls[2]["server"], "unknown");
    assert_eq!(calls[2]["outcome"], "error");
    let started = gw
        .log()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["message"] == "Gateway started");
    let started = started.expect("the startup summary as one event");
    assert_eq!(started["upstreams"], 1, "{started}");
    gw.stop_and_check().await;
}

/// A Python process of `tests/peers` with its stderr kept; killed on drop.
async fn python_peer(
    args: &[&str],
    ready: fn(&str) -> Option<String>,
) -> (Child, Arc<Mutex<String>>) {
    let mut child = Command::new(venv_bin("python"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let (log, mut rx) = drain_stderr(&mut child, "peer", ready);
    let up = tokio::time::timeout(WAIT, rx.recv()).await;
    assert!(matches!(up, Ok(Some(_))), "{}", log.lock().unwrap());
    (child, log)
}

/// Spans reach a real OTLP/HTTP endpoint: the client request's server span named and
/// attributed per the MCP conventions, its parent the `traceparent` the client sent in
/// `_meta`, a child client span per upstream request, and the HTTP upstream sees a
/// `traceparent` with the same trace id; a tool error sets `error.type = tool_error`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_an_otlp_endpoint_with_parents_across_the_http_upstream() {
    use tokio::io::AsyncBufReadExt as _;
    let (otlp_port, up_port) = (free_port(), free_port());
    let (mut receiver, _) = python_peer(
        &[&peer_file("otlp_receiver.py"), &otlp_port.to_string()],
        |l| (l == "listening").then(String::new),
    )
    .await;
    let (_upstream, upstream_log) = python_peer(
        &[&peer_file("otlp_traced_server.py"), &up_port.to_string()],
        |l| l.starts_with("listening on").then(String::new),
    )
    .await;
    let endpoint = format!("http://127.0.0.1:{otlp_port}");
    let url = format!("http://127.0.0.1:{up_port}/mcp");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_SERVICE_NAME", "gw-under-test"),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
    ];
    let mut gw = Gateway::builder("telemetry-otlp", Mode::Stdio)
        .policy("\n[budget]\nenabled = true\n")
        .env(&env)
        .start(&[Up::http("up", &url), Up::fake("st", "hang")])
        .await;
    let c = gw.client();
    c.initialize().await;
    let listed = c.request("tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let parent_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_span = "00f067aa0ba902b7";
    // A tools/call whose `_meta` names a client's span in `trace` as its parent.
    let traced = |name: &str, arguments: Value, trace: &str| {
        let traceparent = format!("00-{trace}-{parent_span}-01");
        json!({"name": name, "arguments": arguments, "_meta": {"traceparent": traceparent}})
    };
    let ok = c
        .request(
            "tools/call",
            traced("up__echo", json!({"text": "hi"}), parent_trace),
        )
        .await;
    assert!(ok["result"].is_object(), "{ok}");
    let stdio_trace = "5bf92f3577b34da6a3ce929d0e0e4737";
    let asked = json!({"message": "traceparent?"});
    let seen_by_stdio = c
        .request("tools/call", traced("st__echo", asked, stdio_trace))
        .await;
    let seen_by_stdio = seen_by_stdio["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{seen_by_stdio}"))
        .to_owned();
    let failed = c.call_tool("up__fail", json!({})).await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    gw.stop_and_check().await;

    // Everything was flushed at shutdown.
    let mut out = tokio::io::BufReader::new(receiver.stdout.take().unwrap()).lines();
    let mut spans: Vec<Value> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !spans.iter().any(|s| s["name"] == "tools/call up__fail") {
        let line = tokio::time::timeout_at(deadline, out.next_line()).await;
        let Ok(Ok(Some(line))) = line else {
            panic!("spans so far: {spans:#?}")
        };
        spans.push(serde_json::from_str(&line).unwrap());
    }
    let echo = spans
        .iter()
        .find(|s| s["name"] == "tools/call up__echo")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    assert_eq!(echo["service"], "gw-under-test");
    assert_eq!(echo["kind"], "SPAN_KIND_SERVER");
    assert_eq!(echo["trace_id"], parent_trace, "{echo}");
    assert_eq!(echo["parent_span_id"], parent_span, "{echo}");
    let attrs = &echo["attributes"];
    assert_eq!(attrs["mcp.method.name"], "tools/call", "{echo}");
    assert_eq!(attrs["gen_ai.tool.name"], "up__echo", "{echo}");
    assert_eq!(attrs["mcp.session.id"], "stdio", "{echo}");
    assert!(attrs["jsonrpc.request.id"].is_string(), "{echo}");
    assert!(attrs["mcp.protocol.version"].is_string(), "{echo}");
    let child = spans
        .iter()
        .find(|s| s["kind"] == "SPAN_KIND_CLIENT" && s["parent_span_id"] == echo["span_id"])
        .unwrap_or_else(|| panic!("no upstream span under {echo}: {spans:#?}"));
    assert_eq!(child["trace_id"], parent_trace);
    assert_eq!(child["name"], "tools/call echo", "{child}");
    let seen = upstream_log.lock().unwrap().clone();
    let header = format!(
        "traceparent=00-{parent_trace}-{}-01 method=tools/call",
        child["span_id"].as_str().unwrap()
    );
    assert!(seen.contains(&header), "{header} not in:\n{seen}");

    // A stdio upstream's request has its client span too, and the upstream gets its context
    // in `_meta`.
    let stdio = spans
        .iter()
        .find(|s| s["name"] == "tools/call st__echo")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    assert_eq!(stdio["trace_id"], stdio_trace, "{stdio}");
    let stdio_child = spans
        .iter()
        .find(|s| s["kind"] == "SPAN_KIND_CLIENT" && s["parent_span_id"] == stdio["span_id"])
        .unwrap_or_else(|| panic!("no stdio upstream span under {stdio}: {spans:#?}"));
    assert_eq!(stdio_child["name"], "tools/call echo", "{stdio_child}");
    assert_eq!(
        stdio_child["attributes"]["server.name"], "st",
        "{stdio_child}"
    );
    let child_id = stdio_child["span_id"].as_str().unwrap();
    assert_eq!(seen_by_stdio, format!("00-{stdio_trace}-{child_id}-01"));

    let list = spans
        .iter()
        .find(|s| s["name"] == "tools/list" && s["kind"] == "SPAN_KIND_SERVER")
        .unwrap();
    assert!(
        list["attributes"]["mcp_budget.plan.rung"].is_string(),
        "{list}"
    );
    let listed_tokens = list["attributes"]["mcp_budget.tokens.listed"].as_i64();
    assert!(listed_tokens.is_some_and(|t| t > 0), "{list}");
    let fail = spans
        .iter()
        .find(|s| s["name"] == "tools/call up__fail")
        .unwrap();
    assert_eq!(fail["attributes"]["error.type"], "tool_error", "{fail}");
    assert_eq!(fail["status"], "STATUS_CODE_ERROR", "{fail}");
    assert_ne!(
        fail["trace_id"], parent_trace,
        "a new trace without a parent"
    );
}

/// Over streamable HTTP, the `traceparent` header of a POST parents the request's server span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_traceparent_header_parents_the_request_span() {
    let otlp_port = free_port();
    let (mut receiver, _) = python_peer(
        &[&peer_file("otlp_receiver.py"), &otlp_port.to_string()],
        |l| (l == "listening").then(String::new),
    )
    .await;
    let endpoint = format!("http://127.0.0.1:{otlp_port}");
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];
    let gw = Gateway::builder("telemetry-otlp-http", Mode::Http)
        .env(&env)
        .start(&[])
        .await;
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let resp = http_client()
        .post(gw.url())
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("traceparent", format!("00-{trace}-b7ad6b7169203331-01"))
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    gw.stop_and_check().await;
    let span = first_span(&mut receiver, "initialize")
        .await
        .expect("an initialize span");
    assert_eq!(span["trace_id"], trace, "{span}");
    assert_eq!(span["parent_span_id"], "b7ad6b7169203331", "{span}");
}

/// The first span named `name` the OTLP receiver prints (within 10 s).
async fn first_span(receiver: &mut Child, name: &str) -> Option<Value> {
    use tokio::io::AsyncBufReadExt as _;
    let mut out = tokio::io::BufReader::new(receiver.stdout.take()?).lines();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let line = tokio::time::timeout_at(deadline, out.next_line()).await;
        let Ok(Ok(Some(line))) = line else {
            return None;
        };
        let span: Value = serde_json::from_str(&line).unwrap();
        if span["name"] == name {
            return Some(span);
        }
    }
}

/// An `https://` OTLP endpoint whose certificate chains to the CA named by
/// `OTEL_EXPORTER_OTLP_CERTIFICATE` gets the spans (through the upstreams' rustls client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_an_https_otlp_endpoint_trusting_the_named_ca() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let made = Command::new(venv_bin("python"))
        .arg(peer_file("transport_server.py"))
        .arg("--make-certs")
        .arg(&certs)
        .status()
        .await
        .expect("the transport fixture runs");
    assert!(made.success());
    let otlp_port = free_port();
    let certs_arg = certs.to_str().unwrap();
    let (mut receiver, log) = python_peer(
        &[
            &peer_file("otlp_receiver.py"),
            &otlp_port.to_string(),
            certs_arg,
        ],
        |l| (l == "listening").then(String::new),
    )
    .await;
    let endpoint = format!("https://127.0.0.1:{otlp_port}");
    let ca = certs.join("ca.pem");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.to_str().unwrap()),
    ];
    let mut gw = Gateway::builder("telemetry-otlp-https", Mode::Stdio)
        .env(&env)
        .start(&[])
        .await;
    gw.client().initialize().await;
    gw.stop_and_check().await;
    let span = first_span(&mut receiver, "initialize").await;
    let span = span.unwrap_or_else(|| panic!("no span over HTTPS: {}", log.lock().unwrap()));
    assert_eq!(span["kind"], "SPAN_KIND_SERVER", "{span}");
}

/// The audit lines of `path` once `done` says they are all there (at most [`WAIT`]), and a
/// little longer (a duplicate would be written with them).
async fn audit_lines(path: &Path, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    let read = || -> Vec<Value> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("each audit line is JSON"))
            .collect()
    };
    while !done(&read()) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    read()
}

/// What the guard does reaches the audit log once per event and the metrics: a poisoned
/// upstream's stripped characters and steering flags (per tool, logged at start and not again
/// when another upstream's `list_changed` re-lists everything), a rug pull quarantined (one
/// line, however often the client lists), each refused call, a stripped result; the
/// quarantine gauge and the sanitize counters pass `promtool`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_events_reach_the_audit_log_once_and_the_metrics() {
    use crate::guard::{gone, poisoned};
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let admin_port = free_port();
    let downstream = format!("\n[audit]\npath = {:?}\n{}", audit, admin(admin_port));
    let ups = [
        poisoned("evil", &["poisoned"]),
        poisoned("rug", &["rugpull", "1"]),
        poisoned("rp", &["rugprompt", "1"]),
    ];
    let mut gw = Gateway::builder("telemetry-guard", Mode::Stdio)
        .policy(&downstream)
        .start(&ups)
        .await;
    let c = gw.client();
    c.initialize().await;
    let added = c.call_tool("evil__add", json!({"a": 1, "b": 2})).await;
    assert_eq!(added["result"]["content"][0]["text"], "3", "{added}");
    let first = c.call_tool("rug__fact", json!({"topic": "x"})).await;
    assert!(first["result"].is_object(), "{first}");
    assert!(
        gone(c, "rug__fact").await,
        "the changed tool is still listed"
    );
    for _ in 0..2 {
        let refused = c.call_tool("rug__fact", json!({"topic": "x"})).await;
        assert_eq!(refused["error"]["data"]["type"], "mcp_budget.tool.changed");
    }
    // A prompt (and a template) that change: held, and a get of the prompt refused.
    let flipped = c.call_tool("rp__flip", json!({})).await;
    assert!(flipped["result"].is_object(), "{flipped}");
    let until = tokio::time::Instant::now() + crate::harness::WAIT;
    let refused = loop {
        let got = c.request("prompts/get", json!({"name": "rp__greet"})).await;
        if got["error"]["data"]["type"] == "mcp_budget.prompt.changed"
            || tokio::time::Instant::now() > until
        {
            break got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        refused["error"]["data"]["type"], "mcp_budget.prompt.changed",
        "{refused}"
    );

    let count = |lines: &[Value], event: &str| lines.iter().filter(|l| l["event"] == event).count();
    let lines = audit_lines(&audit, |l| {
        count(l, "refusal") >= 3 && count(l, "quarantine") >= 3
    })
    .await;
    let of =
        |event: &str| -> Vec<&Value> { lines.iter().filter(|l| l["event"] == event).collect() };
    let of_list = |method: &str| -> Vec<&Value> {
        (of("quarantine").into_iter())
            .filter(|l| l["method"] == method)
            .collect()
    };
    let prompt = of_list("prompts/list");
    assert_eq!(prompt.len(), 1, "{lines:#?}");
    assert_eq!(prompt[0]["tool"], "rp__greet");
    assert_eq!(prompt[0]["upstream"], "rp/greet");
    assert_eq!(prompt[0]["changed"], json!(["description", "arguments"]));
    let template = of_list("resources/templates/list");
    assert_eq!(template.len(), 1, "{lines:#?}");
    assert_eq!(template[0]["tool"], "notes://{id}");
    let quarantined = of_list("tools/list");
    assert_eq!(quarantined.len(), 1, "{lines:#?}");
    let q = quarantined[0];
    assert_eq!(q["tool"], "rug__fact");
    assert_eq!(q["upstream"], "rug/fact");
    assert_eq!(q["reason"], "changed");
    assert_eq!(q["changed"], json!(["description", "schema"]));
    assert_eq!(q["old_hash"].as_str().unwrap().len(), 64, "{q}");
    assert_ne!(q["old_hash"], q["new_hash"]);
    let (refusals, prompt_refusals): (Vec<&Value>, Vec<&Value>) = of("refusal")
        .into_iter()
        .partition(|l| l["method"] == "tools/call");
    assert_eq!(refusals.len(), 2, "one per refused call: {lines:#?}");
    assert_eq!(prompt_refusals.len(), 1, "{lines:#?}");
    assert_eq!(prompt_refusals[0]["method"], "prompts/get");
    assert_eq!(
        prompt_refusals[0]["error_type"],
        "mcp_budget.prompt.changed"
    );
    assert_eq!(prompt_refusals[0]["tool"], "rp__greet");
    assert_eq!(refusals[0]["error_type"], "mcp_budget.tool.changed");
    assert_eq!(refusals[0]["new_hash"], q["new_hash"]);
    let sanitized = of("sanitize");
    let about = |upstream: &str, reason: &str| -> Vec<&Value> {
        (sanitized.iter().copied())
            .filter(|l| l["upstream"] == upstream && l["reason"] == reason)
            .collect()
    };
    let add = about("evil/add", "tool");
    assert_eq!(add.len(), 1, "once, not once per listing: {lines:#?}");
    assert_eq!(
        add[0]["removed"],
        json!({"tag": 30, "bidi": 1, "invisible": 4, "ansi": 2, "control": 0})
    );
    let notes = about("evil/notes", "tool");
    assert_eq!(notes.len(), 1, "{lines:#?}");
    assert!(
        notes[0]["flags"]
            .as_array()
            .unwrap()
            .contains(&json!("secrets"))
    );
    assert!(notes[0]["score"].as_u64().unwrap() > 0);
    assert_eq!(about("evil/weather", "tool").len(), 1, "{lines:#?}");
    let result = about("evil/add", "result");
    assert_eq!(result.len(), 1, "{lines:#?}");
    assert_eq!(result[0]["tool"], "evil__add");
    assert_eq!(result[0]["method"], "tools/call");

    let (status, text) = get(admin_port, "/metrics").await;
    assert_eq!(status, 200);
    for line in [
        "mcp_budget_tools_quarantined{server=\"rug\",reason=\"changed\"} 1",
        "mcp_budget_tools_quarantined{server=\"evil\",reason=\"changed\"} 0",
        "mcp_budget_prompts_quarantined{server=\"rp\",reason=\"changed\"} 1",
        "mcp_budget_prompts_quarantined{server=\"rug\",reason=\"changed\"} 0",
        "mcp_budget_resource_templates_quarantined{server=\"rp\",reason=\"changed\"} 1",
        "mcp_budget_sanitize_removed_total{server=\"evil\",class=\"tag\",part=\"definition\"} 30",
        "mcp_budget_sanitize_removed_total{server=\"evil\",class=\"tag\",part=\"result\"} 12",
        "mcp_budget_sanitize_flagged_total{server=\"evil\"} 2",
        // The refused calls of the quarantined tool, counted as that tool's.
        "mcp_budget_tool_calls_total{server=\"rug\",tool=\"fact\",outcome=\"error\"} 2",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    promtool_check(dir.path(), &text).await;
    gw.stop_and_check().await;
}

/// `/status` polled until its `state` satisfies `done` (at most `WAIT`); that `state`.
async fn state_when(admin_port: u16, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, body) = get(admin_port, "/status").await;
        let status: Value = serde_json::from_str(&body).unwrap();
        if done(&status["state"]) {
            return status["state"].clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `[state] backend = "redis"` with no store listening: `/status` says the store is down, why
/// and since when, `/readyz` stays 200 and names the mode calls are decided by; once a real
/// `redis-server` comes up on the port, both say the limits are shared again. Without
/// `[state]`, `/status` says `memory`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_readyz_tell_a_store_episode_and_its_end() {
    let tag = new_tag("telemetry-state");
    let (store_port, admin_port) = (free_port(), free_port());
    let policy = format!(
        "{}\n[state]\nbackend = \"redis\"\nurl_env = \"STATE_URL\"\non_store_error = \"closed\"\n\
         timeout_ms = 200\n\n[limits]\ncalls_per_sec = 5\n",
        admin(admin_port)
    );
    let url = format!("redis://127.0.0.1:{store_port}");
    let env = [("STATE_URL", url.as_str())];
    let gw = Gateway::builder("telemetry-state", Mode::Stdio)
        .policy(&policy)
        .env(&env)
        .start(&[])
        .await;
    let down = state_when(admin_port, |s| s["up"] == false).await;
    assert_eq!(down["backend"], "redis", "{down}");
    assert_eq!(down["on_store_error"], "closed", "{down}");
    assert!(down["reason"].is_string(), "{down}");
    assert!(down["down_secs"].is_u64(), "{down}");
    assert_eq!(
        get(admin_port, "/readyz").await,
        (200, "ready\nshared state: closed\n".into())
    );

    let store = crate::harness::RedisServer::start_on(store_port, &tag).await;
    let up = state_when(admin_port, |s| s["up"] == true).await;
    assert!(
        up.get("reason").is_none() && up.get("down_secs").is_none(),
        "{up}"
    );
    assert_eq!(up["replicas"], 1, "{up}");
    assert_eq!(get(admin_port, "/readyz").await, (200, "ready\n".into()));
    gw.stop_and_check().await;
    drop(store);

    let memory = Gateway::builder("telemetry-memory", Mode::Stdio)
        .policy(&admin(admin_port))
        .start(&[])
        .await;
    let state = state_when(admin_port, |s| s.is_object()).await;
    assert_eq!(state, json!({"backend": "memory"}));
    memory.stop_and_check().await;
}
