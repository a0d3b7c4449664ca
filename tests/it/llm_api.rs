//! Cache-stable LLM API requests: property tests of the rewrites on the fixture toolsets, the
//! tower layer over a `service_fn`, and `render --format`.

use std::path::PathBuf;
use std::sync::OnceLock;

use axum::body::Body;
use mcp_budget::llm_api::{
    Breakpoint, LlmCacheLayer, RewriteOptions, ToolClasses, anthropic, openai,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tower::{Layer, ServiceExt, service_fn};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets")
}

/// Every fixture tool as an MCP object named as a gateway exposes it.
fn mcp_tools() -> &'static [Map<String, Value>] {
    static TOOLS: OnceLock<Vec<Map<String, Value>>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        mcp_budget::catalog::load_saved(&[fixtures()])
            .unwrap()
            .into_iter()
            .map(|t| {
                let mut def = std::sync::Arc::unwrap_or_clone(t.definition);
                def.insert(
                    "name".into(),
                    Value::String(mcp_budget::naming::exposed_name(&t.server, &t.name, "__")),
                );
                def
            })
            .collect()
    })
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap()
    }
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// The same value with every object's keys in a pseudo-random order.
fn shuffle_keys(value: &Value, rng: &mut Rng) -> Value {
    match value {
        Value::Object(obj) => {
            let mut entries: Vec<(&String, &Value)> = obj.iter().collect();
            rng.shuffle(&mut entries);
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), shuffle_keys(v, rng)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| shuffle_keys(v, rng)).collect()),
        other => other.clone(),
    }
}

/// `count` distinct fixture tools starting at `start`, converted by `convert`.
fn pick(start: usize, count: usize, convert: Convert) -> Vec<Value> {
    let all = mcp_tools();
    (0..count)
        .map(|i| convert(&all[(start + i * 7) % all.len()]))
        .collect()
}

fn name_of(tool: &Value) -> &str {
    tool.get("function")
        .unwrap_or(tool)
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn tools_bytes(body: &Value) -> String {
    serde_json::to_string(&body["tools"]).unwrap()
}

/// The tools up to and including the last static one, serialized.
fn static_prefix(body: &Value, static_len: usize) -> String {
    serde_json::to_string(&body["tools"].as_array().unwrap()[..static_len]).unwrap()
}

fn without_tools(body: &Value) -> Value {
    let mut body = body.clone();
    body.as_object_mut().unwrap().shift_remove("tools");
    body
}

type Convert = fn(&Map<String, Value>) -> Value;

const CONVERTERS: [Convert; 3] = [
    anthropic::tool_from_mcp,
    openai::chat_tool_from_mcp,
    openai::responses_tool_from_mcp,
];

fn rewrite(
    kind: usize,
    body: &mut Value,
    options: &RewriteOptions,
) -> mcp_budget::llm_api::Rewrite {
    if kind == 0 {
        anthropic::rewrite(body, options)
    } else {
        openai::rewrite(body, options)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Shuffled tool order and object key order give identical bytes, for each API shape.
    #[test]
    fn shuffled_order_and_keys_give_identical_bytes(
        kind in 0usize..3, start in 0usize..644, count in 1usize..40, seed in 1u64..u64::MAX,
        dynamic in 0usize..5,
    ) {
        let tools = pick(start, count, CONVERTERS[kind]);
        let dyn_names: Vec<String> = tools.iter().take(dynamic).map(|t| name_of(t).to_owned()).collect();
        let options = RewriteOptions::default().with_classes(ToolClasses::dynamic_names(dyn_names));
        let mut rng = Rng(seed);
        let mut shuffled: Vec<Value> = tools.iter().map(|t| shuffle_keys(t, &mut rng)).collect();
        // Dynamic tools keep their given relative order: shuffle only the static ones.
        rng.shuffle(&mut shuffled[dynamic.min(count)..]);
        let mut a = json!({"model": "claude-sonnet-4-5", "tools": tools});
        let mut b = json!({"model": "claude-sonnet-4-5", "tools": shuffled});
        let ra = rewrite(kind, &mut a, &options);
        let rb = rewrite(kind, &mut b, &options);
        prop_assert_eq!(tools_bytes(&a), tools_bytes(&b));
        prop_assert_eq!(ra, rb);
        // Idempotent: a rewritten request is already in canonical form.
        let once = a.clone();
        let _ = rewrite(kind, &mut a, &options);
        prop_assert_eq!(tools_bytes(&a), tools_bytes(&once));
    }

    /// Adding or removing dynamic tools leaves the static prefix byte-identical.
    #[test]
    fn dynamic_tools_leave_the_static_prefix_alone(
        kind in 0usize..3, start in 0usize..644, statics in 1usize..30,
        extra_a in 0usize..6, extra_b in 0usize..6, seed in 1u64..u64::MAX,
    ) {
        let pool = pick(start, statics + 12, CONVERTERS[kind]);
        let (fixed, dynamic) = pool.split_at(statics);
        let dyn_names: Vec<String> = dynamic.iter().map(|t| name_of(t).to_owned()).collect();
        let options = RewriteOptions::default().with_classes(ToolClasses::dynamic_names(dyn_names));
        let mut rng = Rng(seed);
        let mut request = |extra: usize| {
            let mut tools: Vec<Value> = fixed.to_vec();
            let at = rng.below(dynamic.len());
            tools.extend(dynamic.iter().cycle().skip(at).take(extra).cloned());
            rng.shuffle(&mut tools);
            let mut body = json!({"model": "claude-opus-4-1", "tools": tools});
            let outcome = rewrite(kind, &mut body, &options);
            (body, outcome)
        };
        let (a, ra) = request(extra_a);
        let (b, rb) = request(extra_b);
        prop_assert_eq!(ra.static_tools, statics);
        prop_assert_eq!(rb.static_tools, statics);
        prop_assert_eq!(static_prefix(&a, statics), static_prefix(&b, statics));
        prop_assert_eq!(ra.breakpoint, rb.breakpoint);
    }

    /// The rewritten Anthropic request is valid and carries exactly the caller's other fields.
    #[test]
    fn anthropic_requests_stay_valid(
        start in 0usize..644, count in 0usize..40, dynamic in 0usize..4,
        in_system in 0usize..3, in_messages in 0usize..3, caller_tool in proptest::option::of(0usize..40),
        model in prop::sample::select(vec!["claude-sonnet-4-5", "claude-haiku-4-5", "claude-3-5-haiku", "claude-opus-4-1"]),
        hour in any::<bool>(),
    ) {
        let mut tools = pick(start, count, anthropic::tool_from_mcp);
        if let Some(i) = caller_tool.filter(|i| *i < tools.len()) {
            tools[i]["cache_control"] = json!({"type": "ephemeral"});
        }
        let control = if hour { json!({"type": "ephemeral", "ttl": "1h"}) } else { json!({"type": "ephemeral"}) };
        let block = |cached: bool| {
            let mut b = json!({"type": "text", "text": "Context.", "citations": null});
            if cached { b["cache_control"] = control.clone(); }
            b
        };
        let system: Vec<Value> = (0..2).map(|i| block(i < in_system)).collect();
        let content: Vec<Value> = (0..2).map(|i| block(i < in_messages)).collect();
        let dyn_names: Vec<String> = tools.iter().take(dynamic).map(|t| name_of(t).to_owned()).collect();
        let options = RewriteOptions::default().with_classes(ToolClasses::dynamic_names(dyn_names));
        let original = json!({
            "model": model, "max_tokens": 1024, "x-unknown": {"kept": [1, 2.5, "three"]},
            "tools": tools, "system": system, "tool_choice": {"type": "auto"},
            "messages": [{"role": "user", "content": content}], "stream": true,
        });
        let before = anthropic::breakpoints(&original);
        let caller_in_tools = tools.iter().filter(|t| t.get("cache_control").is_some()).count();
        let mut body = original.clone();
        let outcome = anthropic::rewrite(&mut body, &options);
        let after = anthropic::breakpoints(&body);

        prop_assert_eq!(without_tools(&body), without_tools(&original));
        prop_assert!(after <= before.max(anthropic::MAX_BREAKPOINTS));
        let out_tools = body["tools"].as_array().unwrap();
        prop_assert_eq!(out_tools.len(), tools.len());
        let marked: Vec<usize> = out_tools.iter().enumerate()
            .filter(|(_, t)| t.get("cache_control").is_some()).map(|(i, _)| i).collect();
        match outcome.breakpoint {
            Breakpoint::Added => {
                prop_assert_eq!(caller_in_tools, 0);
                prop_assert_eq!(after, before + 1);
                prop_assert_eq!(&marked, &vec![outcome.static_tools - 1]);
                prop_assert!(outcome.static_tokens >= anthropic::min_cacheable_tokens(model));
                // Longer TTLs first: ours is one hour whenever a later one is.
                if hour && in_system + in_messages > 0 {
                    prop_assert_eq!(&out_tools[marked[0]]["cache_control"]["ttl"], "1h");
                }
            }
            Breakpoint::Caller => {
                // The caller's breakpoint is kept (moved at most), never duplicated.
                prop_assert_eq!(after, before);
                prop_assert_eq!(marked.len(), 1);
                prop_assert!(marked[0] >= outcome.static_tools - 1);
            }
            Breakpoint::BelowMinimum => {
                prop_assert_eq!(after, before);
                prop_assert!(outcome.static_tokens < anthropic::min_cacheable_tokens(model));
            }
            Breakpoint::NoRoom => {
                prop_assert_eq!(after, before);
                prop_assert!(before >= anthropic::MAX_BREAKPOINTS);
            }
            Breakpoint::NoStaticTools => {
                prop_assert_eq!(after, before);
                prop_assert_eq!(outcome.static_tools, 0);
            }
            Breakpoint::NotApplicable => prop_assert!(false, "a tools array is always there"),
        }
    }
}

#[test]
fn big_static_prefix_gets_one_breakpoint_at_its_end() {
    let tools = pick(0, 30, anthropic::tool_from_mcp);
    let dynamic = name_of(&tools[0]).to_owned();
    let mut body = json!({"model": "claude-sonnet-4-5", "tools": tools});
    let profile = mcp_budget::profile::resolve(
        "claude-sonnet-4-5",
        &mcp_budget::profile::ProfileOverrides::default(),
    )
    .unwrap();
    let options = RewriteOptions::default()
        .with_classes(ToolClasses::dynamic_names([dynamic.clone()]))
        .with_counter(mcp_budget::tokens::Counter::new(&profile));
    let outcome = anthropic::rewrite(&mut body, &options);
    assert_eq!(outcome.breakpoint, Breakpoint::Added);
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(name_of(&tools[29]), dynamic);
    assert_eq!(tools[28]["cache_control"], json!({"type": "ephemeral"}));
    let names: Vec<&str> = tools[..29].iter().map(name_of).collect();
    assert!(names.is_sorted());
}

/// The layer over a `service_fn`: rewritten tools spliced into the original bytes, a
/// per-request [`ToolClasses`] from the extensions, pass-through of malformed JSON.
#[tokio::test]
async fn layer_rewrites_anthropic_bodies_and_keeps_the_rest_byte_for_byte() {
    let inner = service_fn(|req: http::Request<Body>| async move {
        let bytes = axum::body::to_bytes(req.into_body(), usize::MAX).await?;
        Ok::<_, axum::Error>(bytes)
    });
    let svc = LlmCacheLayer::new(RewriteOptions::default().with_min_cache_tokens(1)).layer(inner);
    let body = r#"{ "model" : "claude-sonnet-4-5", "max_tokens": 1.5e3, "metadata": {"user_id": "u"},
        "tools": [{"name": "dyn", "input_schema": {}}, {"input_schema": {"type": "object"}, "name": "zz"},
                  {"name": "aa", "input_schema": {}}],
        "messages": [ {"role": "user", "content": "hi"} ] }"#;
    let mut req = http::Request::post("/v1/messages")
        .header("content-type", "application/json; charset=utf-8")
        .body(Body::from(body))
        .unwrap();
    req.extensions_mut()
        .insert(ToolClasses::dynamic_names(["dyn"]));
    let seen = svc.clone().oneshot(req).await.unwrap();
    let seen = std::str::from_utf8(&seen).unwrap();
    assert_eq!(
        seen,
        concat!(
            r#"{"model":"claude-sonnet-4-5","max_tokens":1.5e3,"metadata":{"user_id": "u"},"tools":["#,
            r#"{"name":"aa","input_schema":{}},"#,
            r#"{"name":"zz","cache_control":{"type":"ephemeral"},"input_schema":{"type":"object"}},"#,
            r#"{"name":"dyn","input_schema":{}}],"#,
            r#""messages":[ {"role": "user", "content": "hi"} ]}"#
        )
    );

    let malformed = r#"{"model": "claude-sonnet-4-5", "tools": [{"name": "b"}, {"name": "a"}"#;
    let req = http::Request::post("/v1/messages")
        .body(Body::from(malformed))
        .unwrap();
    let seen = svc.oneshot(req).await.unwrap();
    assert_eq!(seen, malformed.as_bytes());
}

fn render(format: &str) -> Value {
    crate::harness::cli(["render", "--tools"])
        .arg(fixtures().join("github.json"))
        .args([
            "--level",
            "off",
            "--mode",
            "full",
            "--model",
            "claude-sonnet-4-5",
            "--format",
            format,
        ])
        .ok()
        .json()
}

#[test]
fn render_formats() {
    let mcp = render("mcp");
    let n = mcp["tools"].as_array().unwrap().len();
    assert!(mcp["tools"][0].get("inputSchema").is_some());

    let anthropic = render("anthropic");
    let tools = anthropic["tools"].as_array().unwrap();
    assert_eq!(tools.len(), n);
    let marked: Vec<usize> = tools
        .iter()
        .enumerate()
        .filter(|(_, t)| t.get("cache_control").is_some())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(marked, [n - 1]);
    assert!(
        tools
            .iter()
            .all(|t| t.get("input_schema").is_some() && t.get("inputSchema").is_none())
    );

    for (format, shape) in [("openai", "function"), ("openai-responses", "parameters")] {
        let out = render(format);
        let tools = out["tools"].as_array().unwrap();
        assert_eq!(tools.len(), n);
        assert!(
            tools
                .iter()
                .all(|t| t["type"] == "function" && t.get(shape).is_some())
        );
        let names: Vec<&str> = tools.iter().map(name_of).collect();
        assert!(names.is_sorted());
    }
}

/// An MCP tool as the host's Anthropic tool (what a host sends for the gateway's tools).
fn anthropic_tool(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description,
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}})
}

/// POSTs `body` to `url`: the echo endpoint's `{"path", "body"}` as the provider saw it.
async fn post(url: &str, body: &Value) -> Value {
    let answer = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("x-api-key", "sk-test")
        .body(body.to_string())
        .send()
        .await
        .expect("the LLM API listener answers");
    assert!(answer.status().is_success(), "{}", answer.status());
    serde_json::from_str(&answer.text().await.unwrap()).expect("JSON")
}

fn names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| name_of(t).to_owned())
        .collect()
}

/// `serve` with `[llm_api] preselect = 2` in front of a provider that echoes what it got: the
/// static block (the meta-tools, with the breakpoint) stays the same across requests, then the
/// two tools that fit each request, for Anthropic Messages and Chat Completions alike.
#[tokio::test]
async fn serve_preselects_each_requests_tools_after_the_static_block() {
    use crate::harness::{Gateway, Mode, free_port};
    let provider = crate::eval::scripted(&["echo"]);
    let port = free_port();
    let policy = format!(
        "[llm_api]\nlisten = \"127.0.0.1:{port}\"\nupstream = \"{}\"\npreselect = 2\n",
        provider.url
    );
    let gateway = Gateway::builder("llm_api_preselect", Mode::Http)
        .policy(&policy)
        .start(&[])
        .await;
    // A search meta-tool long enough for the static block to pass 1024 tokens.
    let meta = [
        anthropic_tool(
            "search_tools",
            &"Search the tools by what they do. ".repeat(200),
        ),
        anthropic_tool("invoke_tool", "Call a tool by name"),
        anthropic_tool("get_tool_schema", "A tool's full definition"),
    ];
    let tools: Vec<Value> = [
        (
            "filesystem__read_file",
            "Read the complete contents of a file",
        ),
        (
            "filesystem__write_file",
            "Create a new file or overwrite a file",
        ),
        ("git__git_commit", "Record changes to the repository"),
        (
            "time__get_current_time",
            "Get the current time in a timezone",
        ),
        ("fetch__fetch", "Fetch a URL from the internet"),
        (
            "github__create_issue",
            "Create a new issue in a GitHub repository",
        ),
    ]
    .iter()
    .map(|(n, d)| anthropic_tool(n, d))
    .chain(meta)
    .collect();
    let url = format!("http://127.0.0.1:{port}");
    let ask = |text: &str| {
        json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "tools": tools,
            "messages": [{"role": "user", "content": text}]})
    };
    let seen = post(
        &format!("{url}/v1/messages"),
        &ask("What time is it in Tokyo now?"),
    )
    .await;
    assert_eq!(seen["path"], "/v1/messages");
    let first = &seen["body"];
    let listed = names(first);
    assert_eq!(
        listed[..3],
        ["get_tool_schema", "invoke_tool", "search_tools"]
    );
    assert_eq!(listed[3], "time__get_current_time", "{listed:?}");
    assert!(listed.len() <= 5, "{listed:?}");
    assert_eq!(first["tools"][2]["cache_control"]["type"], "ephemeral");
    assert!(
        first["tools"].as_array().unwrap()[3..]
            .iter()
            .all(|t| t.get("cache_control").is_none())
    );
    assert_eq!(
        first["messages"][0]["content"],
        "What time is it in Tokyo now?"
    );
    let second = post(
        &format!("{url}/v1/messages"),
        &ask("Write the notes to a file"),
    )
    .await;
    let second = &second["body"];
    assert_eq!(
        second["tools"].as_array().unwrap()[..3],
        first["tools"].as_array().unwrap()[..3],
        "the static block is byte-identical across requests"
    );
    assert_eq!(names(second)[3], "filesystem__write_file");
    // Chat Completions, in a tool loop: the tool called since the user's turn stays listed.
    let chat = json!({"model": "gpt-4o", "tools": tools.iter().map(|t| json!({"type": "function",
            "function": {"name": t["name"], "description": t["description"],
            "parameters": t["input_schema"]}})).collect::<Vec<_>>(),
        "messages": [
            {"role": "user", "content": "Open an issue about the crash on GitHub"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
                "function": {"name": "fetch__fetch", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "1", "content": "the crash log"}]});
    let seen = post(&format!("{url}/v1/chat/completions"), &chat).await;
    let listed: Vec<&str> = seen["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            "get_tool_schema",
            "invoke_tool",
            "search_tools",
            "fetch__fetch",
            "github__create_issue"
        ]
    );
    assert!(
        gateway.log().contains("LLM API on http://"),
        "{}",
        gateway.log()
    );
}

/// `serve` with `[llm_api]` and no `preselect`: each request's `model` decides. A small local
/// model (Qwen2.5-Coder 1.5B, as Ollama names it) gets its profile's 5 best tools per request;
/// a hosted model (gpt-4o) and a model with no profile get every tool, as before.
#[tokio::test]
async fn serve_preselects_by_the_requests_model_when_the_policy_does_not_say() {
    use crate::harness::{Gateway, Mode, free_port};
    let provider = crate::eval::scripted(&["echo"]);
    let port = free_port();
    let policy = format!(
        "[llm_api]\nlisten = \"127.0.0.1:{port}\"\nupstream = \"{}\"\n",
        provider.url
    );
    let gateway = Gateway::builder("llm_api_preselect_by_model", Mode::Http)
        .policy(&policy)
        .start(&[])
        .await;
    let tools: Vec<Value> = (0..12)
        .map(|i| format!("server__tool_{i}"))
        .chain(["time__get_current_time".to_owned()])
        .map(|n| {
            json!({"type": "function", "function": {"name": n,
                "description": format!("{n}: does its own thing"),
                "parameters": {"type": "object", "properties": {}}}})
        })
        .collect();
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let small = listed_for(&url, &tools, "qwen2.5-coder:1.5b").await;
    assert!(small.len() <= 5, "{small:?}");
    assert_eq!(small[0], "time__get_current_time", "{small:?}");
    assert_eq!(listed_for(&url, &tools, "gpt-4o").await.len(), 13);
    assert_eq!(listed_for(&url, &tools, "my-own-model").await.len(), 13);
    assert!(
        gateway
            .log()
            .contains("as the request's model's profile says"),
        "{}",
        gateway.log()
    );
}

/// The tool names the provider saw for a Chat Completions request of `model` with `tools`.
async fn listed_for(url: &str, tools: &[Value], model: &str) -> Vec<String> {
    let body = json!({"model": model, "tools": tools,
        "messages": [{"role": "user", "content": "What time is it in Tokyo now?"}]});
    let seen = post(url, &body).await;
    seen["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| name_of(t).to_owned())
        .collect()
}
