use super::*;
use crate::jsonrpc::code::UNSUPPORTED_VERSION;
use crate::mcp::modern::MODERN_VERSION;
use serde_json::json;

/// Error objects compare as the JSON they are sent as.
fn json_of(err: Option<ErrorObject>) -> Value {
    serde_json::to_value(err).unwrap()
}

fn parse(text: &str) -> Message {
    Message::parse(text.as_bytes()).unwrap()
}

fn request(method: &str, params: &str) -> Message {
    parse(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#
    ))
}

const ENVELOPE: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"c"}}"#;

#[test]
fn a_tool_call_gives_its_name_arguments_and_progress_token() {
    let msg = request(
        "tools/call",
        r#"{"name":"a__now","arguments":{"tz":"UTC","n":1e3},"_meta":{"progressToken":1.0}}"#,
    );
    let view = RequestView::of(&msg);
    assert_eq!(view.method(), &Method::ToolsCall);
    assert_eq!(view.name(), Some("a__now"));
    assert_eq!(view.typed_name(), Some("a__now"));
    assert_eq!(view.tool_or_prompt(), Some("a__now"));
    assert_eq!(view.target_name(), Some("a__now"));
    // Exact texts: the arguments are a span of the params, the token keeps its form.
    assert_eq!(view.arguments(&msg), Some(r#"{"tz":"UTC","n":1e3}"#));
    assert_eq!(view.meta(&msg), Some(r#"{"progressToken":1.0}"#));
    assert_eq!(
        view.progress_token().map(ToString::to_string).as_deref(),
        Some("1.0")
    );
    assert_eq!(view.era(), Era::Legacy);
    assert!(view.request_meta().is_none() && view.refusal().is_none());
}

#[test]
fn prompts_name_and_resources_uri_are_what_mcp_name_mirrors() {
    let prompt = RequestView::of(&request("prompts/get", r#"{"name":"greet"}"#));
    assert_eq!(prompt.tool_or_prompt(), Some("greet"));
    assert_eq!(prompt.target_name(), Some("greet"));
    let read = request("resources/read", r#"{"uri":"file:///a","name":"not this"}"#);
    let view = RequestView::of(&read);
    assert_eq!(view.uri(), Some("file:///a"));
    assert_eq!(view.target_name(), Some("file:///a"));
    assert_eq!(view.tool_or_prompt(), None);
    // As `modern::target_name` reads the params.
    let params: Value = read.params_as().unwrap();
    assert_eq!(
        modern::target_name("resources/read", &params).as_deref(),
        view.target_name()
    );
    let list = RequestView::of(&request("tools/list", r#"{"cursor":"x"}"#));
    assert_eq!((list.target_name(), list.arguments(&read)), (None, None));
}

#[test]
fn notifications_and_answers_are_not_read() {
    let note = parse(
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    );
    let view = RequestView::of(&note);
    assert_eq!(view.method(), &Method::ToolsCall);
    assert_eq!((view.name(), view.era()), (None, Era::Legacy));
    let answer = parse(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    assert_eq!(RequestView::of(&answer).method(), &Method::default());
}

#[test]
fn a_modern_request_gives_its_meta_as_request_meta_does() {
    let msg = request("tools/list", &format!(r#"{{"_meta":{ENVELOPE}}}"#));
    let view = RequestView::of(&msg);
    assert_eq!(view.era(), Era::Modern);
    assert_eq!(view.request_meta(), modern::request_meta(&msg).as_ref());
    let meta = view.request_meta().unwrap();
    assert_eq!(meta.protocol_version, MODERN_VERSION);
    assert_eq!(meta.client_capabilities, json!({"sampling": {}}));
    assert_eq!(meta.client_info, json!({"name": "c"}));
    assert!(view.envelope_error().is_none() && view.refusal().is_none());
}

#[test]
fn the_era_rules_refuse_as_the_envelope_check_does_first_failure_first() {
    // No capabilities: the envelope error (the same object `check_envelope` gives), even
    // though the method is a removed one too.
    let partial = request(
        "ping",
        r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
    );
    let view = RequestView::of(&partial);
    let err = view.refusal().unwrap();
    assert_eq!(
        json_of(Some(err.clone())),
        json_of(modern::check_envelope(&partial).err())
    );
    assert_eq!(err.code, crate::jsonrpc::INVALID_PARAMS);
    // A whole envelope of an unknown version, for a removed method: the version first.
    let unknown = ENVELOPE.replace("2026-07-28", "2099-01-01");
    let view = RequestView::of(&request("ping", &format!(r#"{{"_meta":{unknown}}}"#)));
    assert_eq!(view.refusal().unwrap().code, UNSUPPORTED_VERSION);
    // A served version, a removed method.
    let view = RequestView::of(&request("ping", &format!(r#"{{"_meta":{ENVELOPE}}}"#)));
    assert_eq!(
        json_of(view.refusal()),
        json_of(Some(modern::removed_method("ping")))
    );
}

#[test]
fn a_request_the_transport_calls_modern_is_checked_even_without_meta() {
    for params in ["{}", r#"{"_meta":{"progressToken":"p"}}"#, "[1]"] {
        let msg = request("tools/list", params);
        let view = RequestView::of_modern(&msg);
        assert_eq!(view.era(), Era::Modern, "{params}");
        assert_eq!(
            json_of(view.envelope_error().cloned()),
            json_of(modern::check_envelope(&msg).err()),
            "{params}"
        );
        assert!(view.request_meta().is_none());
        // A rewrite keeps what the transport said.
        assert_eq!(view.rebuilt(&msg).era(), Era::Modern);
        assert_eq!(RequestView::of(&msg).era(), Era::Legacy);
    }
}

#[test]
fn an_escaped_slash_in_the_key_is_still_modern_and_a_u_escape_is_not() {
    let escaped = ENVELOPE.replace("modelcontextprotocol/", r"modelcontextprotocol\/");
    let msg = request("tools/list", &format!(r#"{{"_meta":{escaped}}}"#));
    assert_eq!(RequestView::of(&msg).era(), Era::Modern);
    assert!(modern::request_meta(&msg).is_some());
    let u = ENVELOPE.replace("modelcontextprotocol/", r"modelcontextprotocol\u002f");
    let msg = request("tools/list", &format!(r#"{{"_meta":{u}}}"#));
    assert_eq!(RequestView::of(&msg).era(), Era::Legacy);
    assert!(modern::request_meta(&msg).is_none());
}

#[test]
fn malformed_params_read_as_absent_as_the_typed_parses_do() {
    for params in ["null", "[\"search_tools\"]", "\"x\"", "5", r#"{"name":7}"#] {
        let msg = request("tools/call", params);
        let view = RequestView::of(&msg);
        assert_eq!(view.name(), None, "{params}");
        assert_eq!(view.arguments(&msg), None, "{params}");
        assert_eq!(view.era(), Era::Legacy, "{params}");
    }
    let msg = parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
    assert_eq!(RequestView::of(&msg).name(), None);
}

#[test]
fn a_repeated_key_reads_last_wins_but_is_no_typed_name() {
    // As a `Value` reads it: the last one.
    let msg = request("tools/call", r#"{"name":"a","name":"b"}"#);
    let view = RequestView::of(&msg);
    assert_eq!(view.name(), Some("b"));
    assert_eq!(view.typed_name(), None);
    let msg = request(
        "tools/call",
        r#"{"name":"a","arguments":{},"arguments":{"x":1}}"#,
    );
    let view = RequestView::of(&msg);
    assert_eq!(view.arguments(&msg), Some(r#"{"x":1}"#));
    assert_eq!((view.name(), view.typed_name()), (Some("a"), None));
    // A string name after a number: the last one counts.
    let view = RequestView::of(&request("tools/call", r#"{"name":1,"name":"c"}"#));
    assert_eq!(view.name(), Some("c"));
    // Names with escapes are read, unescaped.
    let view = RequestView::of(&request("tools/call", r#"{"name":"a\u005fb"}"#));
    assert_eq!(view.typed_name(), Some("a_b"));
}

#[test]
fn arguments_as_a_value_are_null_when_absent() {
    let msg = request("tools/call", r#"{"name":"a"}"#);
    assert_eq!(RequestView::of(&msg).arguments_value(&msg), Value::Null);
    let msg = request("tools/call", r#"{"name":"a","arguments":{"q":[1,2]}}"#);
    assert_eq!(
        RequestView::of(&msg).arguments_value(&msg),
        json!({"q": [1, 2]})
    );
}
