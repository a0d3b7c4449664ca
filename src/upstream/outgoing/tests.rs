use proptest::prelude::*;
use serde_json::{Value, json};

use super::{Outgoing, Rewrite, declared_capabilities, progress_token, rewrite};
use crate::jsonrpc::to_raw;
use crate::mcp::Era;

fn how(era: Option<Era>, progress: Option<(usize, i64)>) -> Rewrite<'static> {
    static GATEWAY: std::sync::LazyLock<Value> =
        std::sync::LazyLock::new(|| json!({"roots": {"listChanged": true}}));
    Rewrite {
        era,
        progress,
        capabilities: &GATEWAY,
        log_level: None,
    }
}

fn params(out: &Outgoing) -> Value {
    serde_json::from_str(out.params.as_ref().expect("params").get()).unwrap()
}

#[test]
fn params_without_meta_pass_byte_for_byte() {
    let text = r#"{"name":"echo",  "arguments":{"x":1}}"#;
    for era in [Some(Era::Legacy), None] {
        let raw = serde_json::value::RawValue::from_string(text.to_owned()).unwrap();
        let out = rewrite(Some(raw), &how(era, Some((0, 7))));
        assert_eq!(out.params.unwrap().get(), text, "{era:?}");
        assert!(out.progress.is_none());
    }
    assert!(
        rewrite(None, &how(Some(Era::Legacy), Some((0, 1))))
            .params
            .is_none()
    );
}

#[test]
fn a_legacy_upstream_never_sees_the_modern_envelope() {
    let p = json!({
        "name": "echo",
        "x-extra": [1, 2],
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "c"},
            "vendor/key": true,
        },
    });
    let out = rewrite(Some(to_raw(&p)), &how(Some(Era::Legacy), None));
    assert_eq!(
        params(&out),
        json!({"name": "echo", "x-extra": [1, 2], "_meta": {"vendor/key": true}})
    );
    let only = json!({"name": "echo", "_meta": {"io.modelcontextprotocol/protocolVersion": "x"}});
    let out = rewrite(Some(to_raw(&only)), &how(Some(Era::Legacy), None));
    assert_eq!(params(&out), json!({"name": "echo"}));
    // An upstream of unknown era is being probed: nothing is taken away yet.
    let out = rewrite(Some(to_raw(&only)), &how(None, None));
    assert_eq!(params(&out), only);
}

#[test]
fn the_progress_token_is_the_gateways_and_the_clients_comes_back() {
    let p = json!({"name": "slow", "_meta": {"progressToken": 42, "other": "kept"}});
    let out = rewrite(Some(to_raw(&p)), &how(Some(Era::Legacy), Some((3, 17))));
    assert_eq!(
        params(&out),
        json!({"name": "slow", "_meta": {"progressToken": "mcpb-3-17", "other": "kept"}})
    );
    assert_eq!(out.progress, Some(("mcpb-3-17".to_owned(), json!(42))));
    // No client waits: the token stays the client's.
    let out = rewrite(Some(to_raw(&p)), &how(Some(Era::Legacy), None));
    assert_eq!(params(&out), p);
    assert!(out.progress.is_none());
    // A token outside `_meta` is no progress token.
    let p = json!({"arguments": {"progressToken": "mine"}});
    let out = rewrite(Some(to_raw(&p)), &how(Some(Era::Legacy), Some((0, 1))));
    assert_eq!(params(&out), p);
    assert!(out.progress.is_none());
}

#[test]
fn an_escaped_meta_key_is_still_found() {
    let text = r#"{"\u005fmeta":{"progressToken":"t"}}"#;
    let raw = serde_json::value::RawValue::from_string(text.to_owned()).unwrap();
    let out = rewrite(Some(raw), &how(Some(Era::Legacy), Some((1, 2))));
    assert_eq!(
        params(&out),
        json!({"_meta": {"progressToken": "mcpb-1-2"}})
    );
    assert_eq!(out.progress.unwrap().1, json!("t"));
}

#[test]
fn a_modern_upstream_gets_the_gateways_envelope() {
    let client = json!({"sampling": {}});
    let p = json!({"name": "echo", "_meta": {"progressToken": "p"}});
    let out = rewrite(
        Some(to_raw(&p)),
        &Rewrite {
            era: Some(Era::Modern),
            progress: Some((0, 5)),
            capabilities: &client,
            log_level: Some("debug"),
        },
    );
    let sent = params(&out);
    assert_eq!(sent["name"], "echo");
    let meta = &sent["_meta"];
    assert_eq!(meta["progressToken"], "mcpb-0-5");
    assert_eq!(meta[crate::mcp::meta::META_LOG_LEVEL], "debug");
    assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], client);
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "mcp-budget"
    );
    // A request without params gets params for the envelope.
    let out = rewrite(None, &how(Some(Era::Modern), None));
    assert!(params(&out)["_meta"].is_object());
}

#[test]
fn the_caller_declares_its_own_capabilities() {
    let gateway = json!({"roots": {}});
    let empty = json!({});
    let client = json!({"elicitation": {}});
    assert_eq!(
        declared_capabilities(Some(&client), &gateway, &empty),
        &client
    );
    assert_eq!(
        declared_capabilities(Some(&Value::Null), &gateway, &empty),
        &empty
    );
    assert_eq!(declared_capabilities(None, &gateway, &empty), &gateway);
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z\\\\\"_ ]{0,8}".prop_map(Value::from),
    ]
}

fn extra_fields() -> impl Strategy<Value = serde_json::Map<String, Value>> {
    prop::collection::btree_map("[a-z][a-z_/.]{0,8}", json_leaf(), 0..6)
        .prop_map(|m| m.into_iter().collect())
}

proptest! {
    /// Unknown fields (top level and in `_meta`) survive every rewrite, the client's token
    /// comes back as it was, and tokens of distinct requests differ.
    #[test]
    fn rewrites_keep_what_they_do_not_own(
        top in extra_fields(),
        meta in extra_fields(),
        token in prop::option::of(json_leaf()),
        era in prop_oneof![Just(Some(Era::Legacy)), Just(None), Just(Some(Era::Modern))],
        id in 1..i64::MAX,
    ) {
        let mut p = top.clone();
        let mut m = meta.clone();
        if let Some(token) = &token {
            m.insert("progressToken".into(), token.clone());
        }
        p.insert("_meta".into(), Value::Object(m));
        let out = rewrite(Some(to_raw(&Value::Object(p))), &how(era, Some((2, id))));
        let sent = params(&out);
        for (k, v) in &top {
            prop_assert_eq!(&sent[k], v);
        }
        for (k, v) in &meta {
            prop_assert_eq!(&sent["_meta"][k], v);
        }
        match token {
            Some(token) => {
                let (ours, theirs) = out.progress.expect("a token to map back");
                prop_assert_eq!(theirs, token);
                prop_assert_eq!(&sent["_meta"]["progressToken"], &json!(ours));
                prop_assert_ne!(progress_token(2, id), progress_token(2, id - 1));
            }
            None => prop_assert!(out.progress.is_none()),
        }
    }
}
