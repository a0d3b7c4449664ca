use std::convert::Infallible;

use proptest::prelude::*;
use serde_json::json;
use tower::Service;

use super::*;
use crate::catalog::Contribution;
use crate::context::{Caller, Session};
use crate::error::kind;
use crate::jsonrpc::Id;
use crate::sanitize::Rules;

/// Every `params` the inner service received, as text.
type Received = Arc<Mutex<Vec<String>>>;

/// A strict catalog of upstream `u` with tool `t` (input schema `schema`) and prompt `p`
/// (arguments `who`, required, and `tone`).
fn catalog(schema: &Value) -> watch::Receiver<Arc<Catalog>> {
    let raw = Contribution {
        tools: vec![json!({"name": "t", "inputSchema": schema})],
        prompts: vec![json!({"name": "p", "arguments": [
            {"name": "who", "required": true}, {"name": "tone"}]})],
        ..Contribution::default()
    };
    let catalog = Catalog::build(vec![raw], &["u".to_owned()], "__", 1);
    watch::channel(Arc::new(catalog)).1
}

fn strict() -> SanitizePolicy {
    SanitizePolicy {
        global: Rules {
            arguments: Arguments::Strict,
            ..Rules::default()
        },
        ..SanitizePolicy::default()
    }
}

/// The layer over an inner service that records the params it gets and answers `{}`.
fn service(schema: &Value) -> (CheckArguments<impl Inner>, Received) {
    let received = Received::default();
    let seen = received.clone();
    let inner = tower::service_fn(move |req: McpRequest| {
        let params = req.message.params.as_ref().map(|p| p.get().to_owned());
        lock(&seen).push(params.unwrap_or_default());
        let id = req.message.reply_id();
        async move { Ok::<_, Infallible>(Some(Message::response_value(id, &json!({})))) }
    });
    let layer = ArgumentsLayer::new(catalog(schema), &strict());
    (layer.layer(inner), received)
}

/// A request of `method` with `params` as raw text (repeated keys kept), id 7.
fn raw_request(method: &str, params: &str) -> McpRequest {
    let text = format!(r#"{{"jsonrpc":"2.0","id":7,"method":"{method}","params":{params}}}"#);
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    McpRequest::new(
        Message::parse(text.as_bytes()).expect("a request"),
        Caller::new(Arc::new(Session::new("s", tx))),
    )
}

/// What the layer answers `method` with `params`: the error's `data.type` and `data`, or
/// `None` when the call went through.
async fn outcome(
    svc: &mut CheckArguments<impl Inner>,
    method: &str,
    params: &str,
) -> Option<(String, Value)> {
    let reply = svc
        .call(raw_request(method, params))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply.id, Some(Id::Number(7)));
    let error = reply.error?;
    let data: Value = serde_json::from_str(error.data.as_ref().unwrap().get()).unwrap();
    Some((error.kind().unwrap_or_default(), data))
}

const Q: &str = r#"{"q": {"type": "string"}}"#;

#[tokio::test]
async fn an_unknown_schema_uri_is_read_as_a_known_draft() {
    for uri in [
        "http://json-schema.org/draft-03/schema#",
        "",
        "https://example.com/my-meta",
    ] {
        let schema = json!({"$schema": uri, "type": "object", "properties": serde_json::from_str::<Value>(Q).unwrap()});
        let (mut svc, received) = service(&schema);
        let call = r#"{"name": "u__t", "arguments": {"q": "x"}}"#;
        assert_eq!(outcome(&mut svc, "tools/call", call).await, None, "{uri}");
        let exfil = r#"{"name": "u__t", "arguments": {"q": "x", "exfil": "S"}}"#;
        let (kind, data) = outcome(&mut svc, "tools/call", exfil).await.unwrap();
        assert_eq!(
            (kind.as_str(), &data["property"]),
            (kind::ARGUMENTS_INVALID, &json!("/exfil"))
        );
        assert_eq!(lock(&received).len(), 1, "{uri}");
    }
}

#[tokio::test]
async fn a_schema_that_compiles_as_no_draft_refuses_every_call() {
    let draft3 = json!({"$schema": "http://json-schema.org/draft-03/schema#", "type": "object",
        "properties": {"q": {"type": "string", "required": true}}});
    for schema in [draft3, json!({"$ref": "https://example.com/remote.json"})] {
        let (mut svc, received) = service(&schema);
        let call = r#"{"name": "u__t", "arguments": {"q": "x"}}"#;
        let (kind, data) = outcome(&mut svc, "tools/call", call).await.unwrap();
        assert_eq!(kind, kind::ARGUMENTS_UNCHECKABLE, "{schema}");
        assert_eq!(data["tool"], "u__t");
        assert!(!data["reason"].as_str().unwrap().is_empty(), "{data}");
        assert!(lock(&received).is_empty(), "nothing forwarded");
    }
}

#[tokio::test]
async fn a_type_array_with_object_gets_the_declared_key_check() {
    for types in [json!(["object"]), json!(["object", "null"])] {
        let schema = json!({"type": types, "properties": {"q": {"type": "string"}}});
        let (mut svc, _) = service(&schema);
        let exfil = r#"{"name": "u__t", "arguments": {"q": "x", "exfil": "S"}}"#;
        let (kind, data) = outcome(&mut svc, "tools/call", exfil).await.unwrap();
        assert_eq!(
            (kind.as_str(), &data["property"]),
            (kind::ARGUMENTS_INVALID, &json!("/exfil"))
        );
    }
}

#[tokio::test]
async fn what_is_forwarded_is_what_was_checked() {
    let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}});
    let (mut svc, received) = service(&schema);
    // A repeated key: the check reads the last; the server must not see the first.
    let repeated = r#"{"name": "u__t", "arguments": {"q": "SMUGGLED", "q": "fine"}}"#;
    assert_eq!(outcome(&mut svc, "tools/call", repeated).await, None);
    // Repeated `arguments`, members the protocol does not define, and the ones it does.
    let extra = r#"{"name": "u__t", "arguments": {"exfil": "S"}, "arguments": {"q": "x"},
        "exfil": "SECRET", "task": {"ttl": 1000}, "_meta": {"progressToken": 3, "k": "v"}}"#;
    assert_eq!(outcome(&mut svc, "tools/call", extra).await, None);
    // `_meta` that is not an object, and `arguments: null` (read as none).
    let odd = r#"{"name": "u__t", "arguments": null, "_meta": "junk"}"#;
    assert_eq!(outcome(&mut svc, "tools/call", odd).await, None);
    let got: Vec<Value> = (lock(&received).iter())
        .map(|p| serde_json::from_str(p).unwrap())
        .collect();
    assert_eq!(
        got,
        [
            json!({"name": "u__t", "arguments": {"q": "fine"}}),
            json!({"name": "u__t", "arguments": {"q": "x"}, "task": {"ttl": 1000},
                   "_meta": {"progressToken": 3, "k": "v"}}),
            json!({"name": "u__t"}),
        ]
    );
    assert!(
        !lock(&received)
            .iter()
            .any(|p| p.contains("SMUGGLED") || p.contains("SECRET"))
    );
}

#[tokio::test]
async fn prompt_arguments_are_checked_against_the_declared_ones() {
    let (mut svc, received) = service(&json!({"type": "object"}));
    for (params, property) in [
        (
            r#"{"name": "u__p", "arguments": {"who": "a", "exfil": "S"}}"#,
            "/exfil",
        ),
        (r#"{"name": "u__p", "arguments": {"who": 5}}"#, "/who"),
        (r#"{"name": "u__p", "arguments": {"tone": "warm"}}"#, "/who"),
        (r#"{"name": "u__p"}"#, "/who"),
    ] {
        let (kind, data) = outcome(&mut svc, "prompts/get", params).await.unwrap();
        assert_eq!(kind, kind::ARGUMENTS_INVALID, "{params}");
        assert_eq!(
            (&data["prompt"], &data["property"]),
            (&json!("u__p"), &json!(property))
        );
    }
    assert!(lock(&received).is_empty());
    let good = r#"{"name": "u__p", "arguments": {"who": "x", "who": "b"}, "exfil": "S"}"#;
    assert_eq!(outcome(&mut svc, "prompts/get", good).await, None);
    let got: Value = serde_json::from_str(&lock(&received)[0]).unwrap();
    assert_eq!(got, json!({"name": "u__p", "arguments": {"who": "b"}}));
}

/// JSON made of schema keywords and the values that trip validators up: unknown `$schema`s,
/// `$ref`s local and remote, broken regexes, draft 3's boolean `required`, huge numbers.
fn hostile() -> impl Strategy<Value = Value> {
    let text = prop_oneof![
        Just(String::new()),
        Just("object".to_owned()),
        Just("string".to_owned()),
        Just("no-such-type".to_owned()),
        Just("http://json-schema.org/draft-03/schema#".to_owned()),
        Just("http://json-schema.org/draft-04/schema#".to_owned()),
        Just("http://json-schema.org/draft-07/schema#".to_owned()),
        Just("https://json-schema.org/draft/2019-09/schema".to_owned()),
        Just("https://json-schema.org/draft/2020-12/schema".to_owned()),
        Just("https://example.com/my-meta".to_owned()),
        Just("urn:x".to_owned()),
        Just("#".to_owned()),
        Just("#/$defs/a".to_owned()),
        Just("#/properties/q".to_owned()),
        Just("#/definitions/a".to_owned()),
        Just("https://example.com/remote.json".to_owned()),
        Just("[".to_owned()),
        Just("^(a+)+$".to_owned()),
        Just("\\".to_owned()),
        Just("q".to_owned()),
        Just("date-time".to_owned()),
        "[ -~]{0,8}",
    ];
    let leaf = prop_oneof![
        text.prop_map(Value::String),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        Just(json!(1e308)),
        Just(json!(-0.5)),
        Just(json!(0)),
    ];
    let key = prop_oneof![
        4 => prop::sample::select(vec![
            "$schema", "type", "properties", "required", "additionalProperties",
            "patternProperties", "items", "prefixItems", "$ref", "$defs", "definitions", "allOf",
            "anyOf", "oneOf", "not", "if", "then", "else", "enum", "const", "minimum",
            "exclusiveMinimum", "maxLength", "pattern", "format", "$id", "id", "$anchor",
            "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
            "unevaluatedProperties", "dependentSchemas", "dependencies", "propertyNames",
            "contains", "minItems", "multipleOf", "$vocabulary", "q", "a",
        ]).prop_map(str::to_owned),
        1 => "[a-z$]{1,6}",
    ];
    leaf.prop_recursive(4, 48, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever a tool's schema holds, compiling it never panics, and a call of it gets
    /// exactly one answer: the inner service's, or a refusal.
    #[test]
    fn every_call_is_answered_once_whatever_the_schema(
        schema in hostile(),
        root in prop::option::of(prop::sample::select(vec![
            "http://json-schema.org/draft-03/schema#", "", "urn:x", "https://example.com/m",
        ])),
        arguments in hostile(),
    ) {
        let mut schema = schema;
        if let (Some(uri), Some(object)) = (root, schema.as_object_mut()) {
            object.insert("$schema".into(), json!(uri));
        }
        prop_assert!(std::panic::catch_unwind(|| Compiled::compile(&schema)).is_ok(), "{}", schema);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (mut svc, received) = service(&schema);
        let params = json!({"name": "u__t", "arguments": arguments}).to_string();
        let reply = runtime.block_on(svc.call(raw_request("tools/call", &params)));
        let reply = reply.unwrap().expect("an answer");
        prop_assert_eq!(reply.id, Some(Id::Number(7)));
        let forwarded = lock(&received).len();
        prop_assert_eq!(forwarded + usize::from(reply.error.is_some()), 1);
    }
}
