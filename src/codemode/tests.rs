use serde_json::{Value, json};

use super::*;

/// A bridge over a fixed set of tools: `echo` returns its arguments as structured content,
/// `text` returns `{"n": 1}` as text, `fail` returns a tool error, `denied` is refused by the
/// gateway, `big` returns `size` bytes of text.
#[derive(Default)]
struct Fake {
    calls: Vec<(String, Value)>,
}

impl Bridge for Fake {
    fn call(&mut self, name: &str, arguments: Value) -> Result<Value, CallError> {
        self.calls.push((name.to_owned(), arguments.clone()));
        match name {
            "echo" => Ok(json!({"content": [], "structuredContent": arguments})),
            "text" => Ok(json!({"content": [{"type": "text", "text": "{\"n\": 1}"}]})),
            "fail" => {
                Ok(json!({"content": [{"type": "text", "text": "it broke"}], "isError": true}))
            }
            "denied" => Err(CallError {
                message: "tool \"denied\" is not allowed".into(),
                kind: Some("mcp_budget.authorization.denied".into()),
            }),
            "big" => {
                let size = usize::try_from(arguments["size"].as_u64().unwrap_or(0)).unwrap();
                Ok(json!({"content": [{"type": "text", "text": "x".repeat(size)}]}))
            }
            other => Err(CallError {
                message: format!("unknown tool {other:?}"),
                kind: None,
            }),
        }
    }
    fn search(&mut self, query: &str) -> Value {
        json!([{"name": "echo", "description": format!("found for {query}")}])
    }
    fn schema(&mut self, name: &str) -> Value {
        if name == "echo" {
            json!({"name": "echo", "inputSchema": {"type": "object"}})
        } else {
            Value::Null
        }
    }
    fn describe(&mut self, query: Option<&str>) -> String {
        format!("namespace tools {{ // {} }}", query.unwrap_or("all"))
    }
}

fn run_ok(code: &str) -> Value {
    let ran = run(code, &Limits::default(), Fake::default()).unwrap_or_else(|e| panic!("{e:?}"));
    serde_json::from_str(&ran.json).unwrap()
}

fn run_err(code: &str, limits: &Limits) -> Failure {
    match run(code, limits, Fake::default()) {
        Ok(ran) => panic!("ran: {}", ran.json),
        Err(failure) => failure,
    }
}

fn stopped_by(code: &str, limits: &Limits) -> (Limit, String) {
    match run_err(code, limits) {
        Failure::Stopped { limit, message } => (limit, message),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_result_is_the_return_value_or_the_last_expression() {
    assert_eq!(run_ok("return {a: 1}"), json!({"a": 1}));
    assert_eq!(run_ok("const x = 2; x * 21"), json!(42));
    assert_eq!(
        run_ok("const r = await tools.call('echo', {v: 3}); return r.v"),
        json!(3)
    );
    assert_eq!(run_ok("undefined"), Value::Null);
    assert_eq!(run_ok("function f() { return [1, 2]; } f()"), json!([1, 2]));
}

#[test]
fn tools_chain_filter_and_throw() {
    let code = r#"
        const a = tools.call("echo", {items: [1, 2, 3, 4]});
        const b = tools.call("text");
        let caught;
        try { tools.call("fail", {}); } catch (e) { caught = e.message; }
        let refused;
        try { tools.call("denied", {}); } catch (e) { refused = [e.type, e.tool]; }
        return {even: a.items.filter(n => n % 2 == 0), n: b.n, caught, refused};
    "#;
    assert_eq!(
        run_ok(code),
        json!({"even": [2, 4], "n": 1, "caught": "it broke",
               "refused": ["mcp_budget.authorization.denied", "denied"]})
    );
}

#[test]
fn search_schema_and_describe_reach_the_bridge() {
    let code = "return [tools.search('x')[0].description, tools.schema('echo').name, \
                tools.schema('nope'), tools.describe(), tools.describe('github')]";
    assert_eq!(
        run_ok(code),
        json!([
            "found for x",
            "echo",
            null,
            "namespace tools { // all }",
            "namespace tools { // github }"
        ])
    );
}

#[test]
fn an_uncaught_error_is_reported_with_its_message() {
    let failure = run_err("tools.call('fail')", &Limits::default());
    assert!(
        matches!(&failure, Failure::Threw(t) if t.contains("it broke")),
        "{failure:?}"
    );
    let failure = run_err("return (", &Limits::default());
    assert!(
        matches!(&failure, Failure::Threw(t) if t.starts_with("SyntaxError")),
        "{failure:?}"
    );
    let failure = run_err("return 1n", &Limits::default());
    assert!(
        matches!(&failure, Failure::Threw(t) if t.contains("JSON")),
        "{failure:?}"
    );
}

#[test]
fn an_infinite_loop_stops_at_the_step_limit_even_when_caught() {
    let limits = Limits {
        max_steps: 50,
        ..Limits::default()
    };
    let (limit, message) = stopped_by("while (true) { try { for(;;){} } catch (e) {} }", &limits);
    assert_eq!(limit, Limit::Steps);
    assert!(
        message.contains("`[discover] code_mode_max_steps`"),
        "{message}"
    );
}

#[test]
fn an_infinite_loop_stops_at_the_wall_time_limit() {
    let limits = Limits {
        timeout: std::time::Duration::from_millis(50),
        max_steps: u64::MAX,
        ..Limits::default()
    };
    let (limit, message) = stopped_by("for (;;) {}", &limits);
    assert_eq!(limit, Limit::Timeout);
    assert!(message.contains("wall-time limit of 50 ms"), "{message}");
}

#[test]
fn memory_bombs_and_huge_strings_stop_at_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 8 << 20,
        ..Limits::default()
    };
    let (limit, _) = stopped_by(
        "const a = []; for (;;) a.push(new Array(1000).fill(1))",
        &limits,
    );
    assert_eq!(limit, Limit::Memory);
    let (limit, message) = stopped_by("let s = 'x'; for (;;) s = s + s", &limits);
    assert_eq!(limit, Limit::Memory, "{message}");
    assert!(message.contains("memory limit of 8 MiB"), "{message}");
}

#[test]
fn deep_recursion_stops_at_the_stack_limit() {
    let (limit, message) = stopped_by(
        "function f(n) { return f(n + 1) + 1; } f(0)",
        &Limits::default(),
    );
    assert_eq!(limit, Limit::Stack);
    assert!(
        message.contains("`[discover] code_mode_stack_kb`"),
        "{message}"
    );
}

#[test]
fn a_flood_of_tool_calls_stops_at_the_call_limit() {
    let limits = Limits {
        max_calls: 5,
        ..Limits::default()
    };
    let (limit, message) = stopped_by(
        "for (let i = 0; i < 100; i++) { try { tools.call('echo', {i}); } catch (e) {} }",
        &limits,
    );
    assert_eq!(limit, Limit::Calls);
    assert!(message.contains("more than 5 tool calls"), "{message}");
}

#[test]
fn big_tool_results_stop_at_the_result_bytes_limit() {
    let limits = Limits {
        max_result_bytes: 1000,
        ..Limits::default()
    };
    let (limit, _) = stopped_by(
        "tools.call('big', {size: 600}); tools.call('big', {size: 600})",
        &limits,
    );
    assert_eq!(limit, Limit::ResultBytes);
}

#[test]
fn nothing_outside_the_language_is_reachable() {
    let code = r#"
        const names = Object.getOwnPropertyNames(globalThis);
        const absent = ["require", "process", "Deno", "fetch", "setTimeout", "setInterval",
            "console", "performance", "WeakRef", "FinalizationRegistry", "std", "os", "print",
            "XMLHttpRequest", "import", "module", "exports", "Bun", "scriptArgs", "gc"]
            .filter(n => names.includes(n) || typeof globalThis[n] !== "undefined");
        let imported;
        try { await import("fs"); imported = "loaded"; } catch (e) { imported = "refused"; }
        let fn_escape;
        try { fn_escape = Function("return typeof process")(); } catch (e) { fn_escape = e.name; }
        const t0 = Date.now(); let spin = 0; for (let i = 0; i < 1e5; i++) spin += i;
        return {absent, imported, fn_escape, clock_moves: Date.now() !== t0 || +new Date() !== t0};
    "#;
    assert_eq!(
        run_ok(code),
        json!({"absent": [], "imported": "refused", "fn_escape": "undefined", "clock_moves": false})
    );
}

#[test]
fn prototype_pollution_does_not_outlive_a_run() {
    run_ok("Object.prototype.polluted = 1; Array.prototype.map = () => 'owned'; globalThis.x = 1");
    assert_eq!(
        run_ok("return [({}).polluted ?? null, [1].map(n => n + 1), typeof x]"),
        json!([null, [2], "undefined"])
    );
}

#[test]
fn tools_cannot_be_replaced_by_the_script() {
    assert_eq!(
        run_ok(
            "'use strict'; let r; try { tools.call = () => 1; r = 'replaced' } catch (e) { r = e.name } r"
        ),
        json!("TypeError")
    );
}

#[test]
fn tool_values_follow_structured_content_then_text() {
    assert_eq!(script_value(&json!({"content": []})).unwrap(), Value::Null);
    assert_eq!(
        script_value(&json!({"content": [{"type": "text", "text": "plain"}]})).unwrap(),
        json!("plain")
    );
    assert_eq!(
        script_value(&json!({"content": [{"type": "text", "text": "1"}, {"type": "text", "text": "{\"a\":1}"}]})).unwrap(),
        json!(["1", {"a": 1}])
    );
    assert_eq!(
        script_value(
            &json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": 2}})
        )
        .unwrap(),
        json!({"a": 2})
    );
}

#[test]
fn the_api_description_is_typescript() {
    let def = json!({"description": "List issues.", "inputSchema": {"type": "object",
        "properties": {"repo": {"type": "string"}, "state": {"enum": ["open", "closed"]}},
        "required": ["repo"]}});
    let text = api_description([("gh__list_issues", def.as_object().unwrap())]);
    assert!(text.contains("namespace tools {"), "{text}");
    assert!(text.contains("// List issues.\ntype gh__list_issues = (_: {\nrepo: string,\nstate?: \"open\" | \"closed\",\n}) => any;"), "{text}");
}

#[test]
fn steps_count_work_not_time() {
    let steps = |code: &str| {
        run(code, &Limits::default(), Fake::default())
            .unwrap_or_else(|e| panic!("{e:?}"))
            .steps
    };
    // A fresh context's counter starts at 0: the first call or jump is a check, then one per
    // 10,000.
    assert_eq!(
        steps("return 1"),
        1,
        "a short script takes the first check only"
    );
    // One check per 10,000 calls, jumps and branches: the same count on every run and build.
    let loop_of = |n: u32| format!("let s = 0; for (let i = 0; i < {n}; i++) s += i; return s");
    let million = steps(&loop_of(1_000_000));
    assert_eq!(million, steps(&loop_of(1_000_000)), "deterministic");
    assert!((90..=210).contains(&million), "{million}");
    let two = steps(&loop_of(2_000_000));
    assert!(two.abs_diff(2 * million) <= 2, "{two} vs 2 × {million}");
}
