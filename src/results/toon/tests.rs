use proptest::prelude::*;
use serde_json::{Value, json};

use super::decode::decode;
use super::tests_support::json_value;
use super::{csv_table, encode};

/// Encodes `v`, decodes it back: the same JSON, keys in the same order.
fn round_trip(v: &Value) {
    let text = encode(v).expect("encodable");
    let back = decode(&text);
    assert_eq!(back.as_ref(), Some(v), "TOON:\n{text}");
    assert_eq!(
        back.unwrap().to_string(),
        v.to_string(),
        "key order, TOON:\n{text}"
    );
}

#[test]
fn tables_lists_and_nesting_round_trip() {
    let v = json!({
        "repo": {"name": "mcp-budget", "stars": 42, "private": false, "topics": ["mcp", "llm"]},
        "issues": [
            {"number": 1, "title": "Cut: results, ask for less", "state": "open", "score": 1.5},
            {"number": 2, "title": "  padded ", "state": "closed", "score": null},
        ],
        "mixed": [1, {"a": "x", "b": [1, 2]}, [true, "05"], {}, "-dash", {"k": {"deep": "v"}}],
        "empty": {},
        "none": [],
        "odd key": "tab\there \"quoted\" back\\slash",
    });
    round_trip(&v);
    let text = encode(&v).unwrap();
    assert!(text.contains(
        "issues[2]{number,title,state,score}:\n  1,\"Cut: results, ask for less\",open,1.5"
    ));
    assert!(text.contains("topics[2]: mcp,llm"));
    round_trip(&json!([{"a": 1}, {"a": 2}]));
    round_trip(&json!([[1, 2], [3]]));
}

#[test]
fn what_cannot_be_written_losslessly_is_refused() {
    assert_eq!(encode(&json!({"bell": "\u{7}"})), None);
    assert_eq!(encode(&json!({"big": 1e300})), None);
    assert_eq!(encode(&json!({})), None);
    assert_eq!(encode(&json!("plain")), None);
}

#[test]
fn strings_that_read_as_other_things_are_quoted() {
    let v = json!({"a": ["true", "42", "1.0.0", "", "x:y", "[1]", "#", "-1", "null"]});
    round_trip(&v);
}

#[test]
fn csv_becomes_one_table_of_strings() {
    let csv = "id,name,note\n1,Ada,\"likes, commas\"\n2,Linus,\"says \"\"hi\"\"\"\n";
    let toon = csv_table(csv).unwrap();
    assert_eq!(
        toon,
        "[2]{id,name,note}:\n  \"1\",Ada,\"likes, commas\"\n  \"2\",Linus,\"says \\\"hi\\\"\""
    );
    let decoded = decode(&toon).unwrap();
    assert_eq!(decoded[1]["note"], "says \"hi\"");
    assert_eq!(csv_table("just one line"), None);
    assert_eq!(csv_table("a,b\n1,2,3\n"), None);
    assert_eq!(csv_table("a,b\n\"1,2\n"), None);
    assert_eq!(
        csv_table("a,a\n1,2\n"),
        None,
        "a column twice would lose a cell"
    );
    let dotted = csv_table("user.login,id\nada,1\n").unwrap();
    assert_eq!(dotted, "[1]{\"user.login\",id}:\n  ada,\"1\"");
    assert_eq!(
        decode(&dotted),
        Some(json!([{"user.login": "ada", "id": "1"}]))
    );
}

#[test]
fn nested_uniform_objects_become_dotted_columns_and_nest_back_in_order() {
    let v = json!({"total": 2, "items": [
        {"id": 1, "owner": {"login": "ada", "site": {"admin": false}}, "name": "x.y", "score": 1.5},
        {"id": 2, "owner": {"login": "lin", "site": {"admin": true}}, "name": "b", "score": null},
    ]});
    round_trip(&v);
    let text = encode(&v).unwrap();
    assert!(
        text.contains(
            "items[2]{id,owner.login,owner.site.admin,name,score}:\n  1,ada,false,x.y,1.5"
        ),
        "{text}"
    );
}

#[test]
fn literal_dotted_keys_are_quoted_and_stay_literal() {
    let v = json!({"a.b": 1, "a": {"c": 2}, "rows": [{"k.v": 1, "u": {"x": 1}}, {"k.v": 2, "u": {"x": 2}}]});
    round_trip(&v);
    let text = encode(&v).unwrap();
    assert!(text.starts_with("\"a.b\": 1\na:\n  c: 2\n"), "{text}");
    assert!(text.contains("rows[2]{\"k.v\",u.x}:"), "{text}");
    // Path expansion reads only unquoted keys as paths, and merges them.
    assert_eq!(
        decode("a.b: 1\na.c: 2"),
        Some(json!({"a": {"b": 1, "c": 2}}))
    );
    assert_eq!(decode("\"a.b\": 1"), Some(json!({"a.b": 1})));
    assert_eq!(decode("a.b: 1\na: 2"), None, "a conflict is an error");
}

#[test]
fn rows_that_do_not_nest_the_same_shape_stay_list_items() {
    for rows in [
        json!([{"id": 1, "u": {"x": 1}}, {"id": 2, "u": {"y": 1}}]),
        json!([{"id": 1, "u": {}}, {"id": 2, "u": {}}]),
        json!([{"id": 1, "u": {"a-b": 1}}, {"id": 2, "u": {"a-b": 2}}]),
        json!([{"id": 1, "u": {"x": 1}}, {"id": 2, "u": null}]),
        json!([{"id": 1, "u": {"x": [1]}}, {"id": 2, "u": {"x": [2]}}]),
    ] {
        round_trip(&rows);
        assert!(!encode(&rows).unwrap().starts_with("[2]{"), "{rows}");
    }
}

proptest! {
    /// Whatever TOON the encoder writes decodes to the JSON it was given.
    #[test]
    fn every_encoding_decodes_to_its_json(v in json_value()) {
        if let Some(text) = encode(&v) {
            let back = decode(&text);
            prop_assert_eq!(back.as_ref().map(Value::to_string), Some(v.to_string()), "TOON:\n{}", text);
        }
    }
}
