//! The fuzz targets' invariants as property tests: arbitrary bytes, mutated real messages and
//! arbitrary chunkings for each door the AFL++ targets fuzz (`fuzz/`, `scripts/fuzz.sh`), a few
//! hundred cases each, so a regression shows in the normal suite. Every input a fuzzer found
//! (`tests/fixtures/fuzz/<target>/`) is replayed here too.

#[allow(dead_code, unreachable_pub)]
#[path = "../../fuzz/src/checks.rs"]
mod checks;

use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value, json};

/// Real client messages, as the seed corpus has them.
const MESSAGES: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"mcp","version":"0.1.0"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"everything__echo","arguments":{"message":"hi \"there\" é"},"_meta":{"progressToken":7}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user"}}"#,
    r#"{"jsonrpc":"2.0","id":9,"result":{"roots":[{"uri":"file:///tmp","name":"tmp"}]}}"#,
    r#"{"jsonrpc":"2.0","id":10,"error":{"code":-32601,"message":"nope","data":{"x":[1,{"id":2}]}}}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"time__get_current_time","arguments":{"timezone":"UTC"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}"#,
];

/// Bytes that make JSON and break it.
fn json_bytes() -> impl Strategy<Value = u8> {
    prop_oneof![
        4 => prop::sample::select(b"{}[]\":,\\ \n0-1e.truefalsnuidmethodjsonrpc2".to_vec()),
        1 => any::<u8>(),
    ]
}

/// A real message with a few bytes replaced, inserted or cut.
fn mutated_message() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(MESSAGES),
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, json_bytes()), 0..4),
    )
        .prop_map(|(text, edits)| {
            let mut bytes = text.as_bytes().to_vec();
            for (at, op, b) in edits {
                let i = at.index(bytes.len() + 1);
                match op {
                    0 if i < bytes.len() => bytes[i] = b,
                    1 => bytes.insert(i, b),
                    _ => bytes.truncate(i.max(1)),
                }
            }
            bytes
        })
}

/// Input for a door: arbitrary bytes, JSON-ish bytes, or a mutated real message.
fn door_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        prop::collection::vec(json_bytes(), 0..256),
        mutated_message(),
    ]
}

fn chunk_sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..40, 0..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn message_decoding_agrees_with_serde(data in door_input()) {
        checks::message(&data);
    }

    #[test]
    fn id_scanner_is_chunking_independent_and_agrees_with_serde(
        data in door_input(),
        sizes in chunk_sizes(),
    ) {
        checks::check_id_scanner(&data, &sizes);
    }

    #[test]
    fn stdio_lines_split_like_a_plain_split(
        lines in prop::collection::vec(door_input(), 0..5),
        sizes in chunk_sizes(),
        capacity in 1usize..64,
        limit in 1usize..200,
        final_newline in any::<bool>(),
    ) {
        let mut input = lines.join(&b'\n');
        if final_newline && !input.is_empty() {
            input.push(b'\n');
        }
        checks::check_stdio_lines(&input, &sizes, capacity, limit);
    }

    #[test]
    fn modern_meta_and_header_checks_agree(
        body in door_input(),
        version in prop::sample::select(vec!["2026-07-28", "2025-11-25", "", " 2026-07-28"]),
        method in prop::sample::select(vec!["tools/call", "tools/list", "prompts/get", ""]),
        name in prop_oneof![
            Just(String::new()),
            "[ -~é\\t]{0,12}",
            "=\\?base64\\?[A-Za-z0-9+/=!]{0,12}\\?=",
        ],
    ) {
        let mut data = body;
        for field in [version, method, name.as_str()] {
            data.push(0);
            data.extend_from_slice(field.as_bytes());
        }
        checks::modern(&data);
    }

    #[test]
    fn emitted_param_headers_pass_the_param_header_check(
        region in prop_oneof![
            "[ -~]{0,10}",
            " [a-z]{0,4}",
            "[a-z]{0,4} ",
            "=\\?[a-z]{0,4}",
            "[ -~é\\r\\n\\t]{0,10}",
        ],
        count in prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
            "[0-9a-z.-]{0,6}".prop_map(Value::from),
            Just(Value::Null),
        ],
        flag in prop_oneof![any::<bool>().prop_map(Value::from), Just(json!([1]))],
        headers in prop::collection::vec(
            (prop::sample::select(vec!["mcp-param-region", "mcp-param-count", "mcp-param-flag"]),
             "[ -~]{0,8}"),
            0..4,
        ),
    ) {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "nested": {"type": "object", "properties": {
                "flag": {"type": "boolean", "x-mcp-header": "Flag"}}},
        }});
        let arguments = json!({"region": region, "count": count, "nested": {"flag": flag}});
        let headers: Vec<(String, String)> =
            headers.into_iter().map(|(n, v)| (n.to_owned(), v)).collect();
        checks::check_param_headers_for(&schema, &arguments, &headers);
    }

    #[test]
    fn policy_loading_never_panics(data in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        policy_text(),
    ]) {
        checks::policy(&data);
    }

    #[test]
    fn mcp_json_import_never_panics(data in prop_oneof![
        prop::collection::vec(json_bytes(), 0..200),
        mcp_json_text(),
    ]) {
        checks::mcp_json(&data);
    }
}

/// Policies built from real keys with arbitrary values.
fn policy_text() -> impl Strategy<Value = Vec<u8>> {
    let value = prop_oneof![
        Just("0".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("-1".to_owned()),
        Just("true".to_owned()),
        Just("2.5".to_owned()),
        "\"[ -~]{0,10}\"",
        Just("[\"*\", \"\"]".to_owned()),
    ];
    let key = prop::sample::select(vec![
        ("[downstream]", "max_message_bytes"),
        ("[downstream]", "http"),
        ("[downstream]", "allowed_origins"),
        ("[aggregate]", "separator"),
        ("[budget]", "context_window"),
        ("[budget]", "threshold_percent"),
        ("[budget]", "calibration"),
        ("[budget]", "model"),
        ("[budget]", "max_tools"),
        ("[budget]", "overhead_tokens"),
        ("[discover]", "max_limit"),
        ("[discover]", "never_defer"),
        (
            "[[upstream]]\nname = \"a\"\ncommand = \"c\"",
            "timeout_secs",
        ),
        ("[[upstream]]\nname = \"b\"", "url"),
    ]);
    prop::collection::btree_map(key, value, 0..5).prop_map(|pairs| {
        let mut text = String::from("version = 1\n");
        let mut section = "";
        for ((header, key), value) in pairs {
            if header != section || header.starts_with("[[") {
                text.push_str(header);
                text.push('\n');
                section = header;
            }
            text.push_str(&format!("{key} = {value}\n"));
        }
        text.into_bytes()
    })
}

fn mcp_json_text() -> impl Strategy<Value = Vec<u8>> {
    ("[a-z_ -]{0,40}", any::<bool>(), "[ -~]{0,12}").prop_map(|(name, url, target)| {
        let server = if url {
            json!({"url": target, "headers": {"a": "b"}})
        } else {
            json!({"command": target, "args": ["-x"], "env": {"K": "V"}, "disabled": false})
        };
        serde_json::to_vec(&json!({"mcpServers": {name: server}})).expect("a value serializes")
    })
}

/// One target's check.
type Check = fn(&[u8]);

/// Runs `check` on every file in `tests/fixtures/fuzz/<target>/`; returns how many there were.
fn replay(target: &str, check: Check) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut paths: Vec<_> = entries
        .map(|e| e.expect("a readable directory").path())
        .collect();
    paths.sort();
    for path in &paths {
        let data = std::fs::read(path).expect("a readable fixture");
        let outcome = std::panic::catch_unwind(|| check(&data));
        assert!(outcome.is_ok(), "{} fails its check", path.display());
    }
    paths.len()
}

/// The inputs fuzzing found, and the seed corpus, still pass every check.
#[test]
fn fuzz_findings_and_seeds_pass() {
    let targets: [(&str, Check); 7] = [
        ("message", checks::message),
        ("stdio_lines", checks::stdio_lines),
        ("id_scanner", checks::id_scanner),
        ("modern", checks::modern),
        ("param_headers", checks::param_headers_target),
        ("policy", checks::policy),
        ("mcp_json", checks::mcp_json),
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (target, check) in targets {
        replay(target, check);
        let seeds = root.join("fuzz/corpus").join(target);
        let count = std::fs::read_dir(&seeds)
            .map(|entries| {
                entries
                    .map(|e| check(&std::fs::read(e.unwrap().path()).unwrap()))
                    .count()
            })
            .unwrap_or(0);
        assert!(
            count > 0,
            "no seed corpus for {target} in {}",
            seeds.display()
        );
    }
}
