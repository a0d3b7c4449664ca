use serde_json::value::RawValue;

use super::*;

#[test]
fn kinds_and_round_trip_keep_bytes() {
    let raw =
        br#"{"jsonrpc":"2.0","id":"a","result":{"z":1,"a":{"_meta":{"x":[1,2]}},"unknown":true}}"#;
    let msg = Message::parse(raw).unwrap();
    assert_eq!(msg.kind(), Kind::Response);
    assert_eq!(msg.to_bytes(), raw.to_vec());
}

#[test]
fn null_id_is_kept_distinct_from_absent() {
    let msg =
        Message::parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}"#).unwrap();
    assert_eq!(msg.id, Some(Id::Null));
    let msg = Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
    assert_eq!(msg.kind(), Kind::Notification);
}

#[test]
fn errors_are_classified() {
    assert!(matches!(
        Message::parse(b"{not json"),
        Err(DecodeError::Parse(_))
    ));
    assert!(matches!(Message::parse(b"[]"), Err(DecodeError::Batch)));
    for (bad, reason) in [
        (
            r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#,
            "jsonrpc must be \"2.0\", got \"1.0\"",
        ),
        (
            r#"{"jsonrpc":2,"id":3,"method":"x"}"#,
            "invalid type: integer `2`, expected a string",
        ),
    ] {
        let err = Message::parse(bad.as_bytes()).unwrap_err();
        assert!(err.to_string().contains(reason), "{err}");
    }
    let err = Message::parse(br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#).unwrap_err();
    assert!(matches!(
        err,
        DecodeError::Invalid {
            id: Some(Id::Number(3)),
            ..
        }
    ));
    // Found by fuzzing (`tests/fixtures/fuzz/message/`): invalid UTF-8 in a member serde
    // ignores, and an array whose items spell a message's fields in order.
    let err = Message::parse(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"j\":\"\xff\"}");
    assert!(matches!(err, Err(DecodeError::Parse(_))), "{err:?}");
    let err = Message::parse(br#" ["2.0",1,"tools/list"]"#);
    assert!(matches!(err, Err(DecodeError::Batch)), "{err:?}");
    let err = Message::parse(br#"{"jsonrpc":"2.0","id":4}"#).unwrap_err();
    let resp = err.to_response();
    assert_eq!(resp.id, Some(Id::Number(4)));
    assert_eq!(
        resp.error.unwrap().kind().as_deref(),
        Some("mcp_budget.request.invalid")
    );
}

/// Id texts JSON-RPC allows, and whether they are an `i64`.
const IDS: &[(&str, bool)] = &[
    ("0", true),
    ("-7", true),
    ("9223372036854775807", true),
    ("-9223372036854775808", true),
    ("9223372036854775808", false),
    ("18446744073709551615", false),
    ("-9223372036854775809", false),
    ("123456789012345678901234567890123456789", false),
    ("1.0", false),
    ("1e3", false),
    ("1E+2", false),
    ("-1.5e-7", false),
    ("-0", false),
    ("1E400", false),
    ("0.0", false),
    (r#""a""#, false),
    (r#""""#, false),
    (r#""é\"\n\u001f""#, false),
];

#[test]
fn every_id_comes_back_as_sent() {
    for &(text, is_i64) in IDS {
        let msg = Message::parse(
            format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#).as_bytes(),
        )
        .unwrap_or_else(|e| panic!("{text}: {e}"));
        let id = msg.id.clone().unwrap();
        assert_eq!(matches!(id, Id::Number(_)), is_i64, "{text}: {id:?}");
        // The `Deserialize` of `Message` (any deserializer) reads the same id.
        let derived: Message = serde_json::from_str(&format!(
            r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#
        ))
        .unwrap();
        assert_eq!(derived.id.as_ref(), Some(&id), "{text}");
        let answer = Message::response_value(id.clone(), &serde_json::json!({}));
        assert_eq!(
            String::from_utf8(answer.to_bytes()).unwrap(),
            format!(r#"{{"jsonrpc":"2.0","id":{text},"result":{{}}}}"#)
        );
        // The same text elsewhere (a cancel's requestId, the id scanner) is the same id.
        let cancel = Message::parse(
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"reason":"x","requestId":{text}}}}}"#
            )
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(cancel.params_id("requestId").as_ref(), Some(&id), "{text}");
        let mut set = std::collections::HashSet::new();
        set.insert(id.clone());
        assert!(set.contains(&cancel.params_id("requestId").unwrap()));
        let mut scan = IdScanner::default();
        scan.feed(format!(r#"{{"method":"m","id":{text}}}"#).as_bytes());
        assert_eq!(scan.id().as_ref(), Some(&id), "{text}");
    }
    // A string is the same string, its escapes written as serde writes them.
    let msg = Message::parse(br#"{"jsonrpc":"2.0","id":"\u00e9\/","method":"ping"}"#).unwrap();
    assert_eq!(msg.id, Some(Id::String("é/".into())));
    // Different number texts are different ids, even for the same value.
    let id = |text: &str| Id::from_raw(&RawValue::from_string(text.into()).unwrap());
    assert_ne!(id("1.0"), id("1"));
    assert_ne!(id("1e3"), id("1000"));
    assert_eq!(id("1e3"), id("1e3"));
}

#[test]
fn ids_that_are_not_strings_or_numbers_are_invalid() {
    for text in ["true", "{}", r#"{"a":1}"#, "[1]", "[]"] {
        let err = Message::parse(
            format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#).as_bytes(),
        )
        .unwrap_err();
        assert!(
            matches!(err, DecodeError::Invalid { id: None, .. }),
            "{text}: {err:?}"
        );
        assert_eq!(err.to_response().id, Some(Id::Null));
    }
    // A null request id is answered with null.
    let err = Message::parse(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).unwrap_err();
    assert!(matches!(err, DecodeError::Invalid { id: None, .. }));
}

/// A `tools/call` `levels` deep: its `arguments` are `levels - 2` nested arrays; `before`
/// and `after` go around `method` and `params`.
fn nested(levels: usize, before: &str, after: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0",{before}"method":"tools/call","params":{{"name":"t","arguments":{}"x"{}}}{after}}}"#,
        "[".repeat(levels - 2),
        "]".repeat(levels - 2)
    )
    .into_bytes()
}

#[test]
fn too_deep_messages_are_refused_with_their_id() {
    let ok = Message::parse_with_max_depth(&nested(128, r#""id":1,"#, ""), 128).unwrap();
    assert_eq!(ok.id, Some(Id::Number(1)));
    for (levels, before, after, id) in [
        (129, r#""id":1,"#, "", Some(Id::Number(1))),
        (
            10_000,
            "",
            r#","id":"late""#,
            Some(Id::String("late".into())),
        ),
        (
            1_000_000,
            r#""id":1e3,"#,
            "",
            Id::from_raw(&RawValue::from_string("1e3".into()).unwrap()),
        ),
        (200, "", "", None),
    ] {
        let err = Message::parse_with_max_depth(&nested(levels, before, after), 128).unwrap_err();
        let DecodeError::TooDeep {
            limit: 128,
            id: got,
        } = &err
        else {
            panic!("{levels}: {err:?}");
        };
        assert_eq!(got, &id, "{levels}");
        let resp = err.to_response();
        assert_eq!(resp.id, Some(id.unwrap_or(Id::Null)));
        let error = resp.error.unwrap();
        assert_eq!(error.code, INVALID_REQUEST);
        assert_eq!(error.kind().as_deref(), Some("mcp_budget.request.too_deep"));
        assert!(error.message.contains("128"), "{}", error.message);
        assert!(
            error.message.contains("downstream.max_json_depth"),
            "{}",
            error.message
        );
    }
    // Without the check, a deep payload is kept raw and parses: the check is what stops it.
    assert!(Message::parse(&nested(1_000_000, r#""id":1,"#, "")).is_ok());
}

#[test]
fn errors_of_deep_valid_json_are_still_classified() {
    // Deeper than serde's own recursion limit (128) but within the policy's: still an
    // invalid message with its id, not a parse error.
    let text = nested(500, r#""jsonrpc":"1.0","id":5,"#, "");
    let text = String::from_utf8(text)
        .unwrap()
        .replacen(r#""jsonrpc":"2.0","#, "", 1);
    let err = Message::parse_with_max_depth(text.as_bytes(), 1000).unwrap_err();
    assert!(
        matches!(
            err,
            DecodeError::Invalid {
                id: Some(Id::Number(5)),
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn unpaired_surrogate_escapes_are_found_and_pairs_are_not() {
    use super::decode::lone_surrogate;
    for (text, at) in [
        (r#"{"s":"\ud800"}"#, Some(6)),
        (r#"{"s":"a\uDBFFb"}"#, Some(7)),
        (r#"{"s":"\udc00"}"#, Some(6)),
        (r#"{"s":"\ud800\u0041"}"#, Some(6)),
        (r#"{"s":"\ud800\ud800"}"#, Some(6)),
        (r#"{"s":"\ud83d\ude00\ud800"}"#, Some(18)),
        (r#"{"s":"\\\ud800"}"#, Some(8)),
        (r#"{"s":"\ud83d\ude00", "t":"\uD83D\uDE00"}"#, None),
        (r#"{"s":"\\ud800"}"#, None),
        (r#"{"s":"\u00e9\"\\\n"}"#, None),
        (r#"{"s":"plain"}"#, None),
    ] {
        assert_eq!(lone_surrogate(text), at, "{text}");
    }
}

#[test]
fn a_message_with_an_unpaired_surrogate_is_a_parse_error_with_its_id() {
    let raw = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"s":"\ud800"}}}"#;
    let err = Message::parse(raw).unwrap_err();
    let DecodeError::LoneSurrogate { message, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(message.id, Some(Id::Number(7)));
    let answer = err.to_response();
    assert_eq!(answer.id, Some(Id::Number(7)));
    let error = answer.error.unwrap();
    assert_eq!(error.code, -32700);
    assert!(error.message.contains("surrogate"), "{}", error.message);
    let paired = br#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"s":"\ud83d\ude00"}}"#;
    assert!(Message::parse(paired).is_ok());
}
