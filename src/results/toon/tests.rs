use proptest::prelude::*;
use serde_json::{Value, json};

use super::decode::decode;
use super::tests_support::json_value;
use super::{csv_table, encode};

fn round_trip(v: &Value) {
    let text = encode(v).expect("encodable");
    assert_eq!(decode(&text).as_ref(), Some(v), "TOON:\n{text}");
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
}

proptest! {
    /// Whatever TOON the encoder writes decodes to the JSON it was given.
    #[test]
    fn every_encoding_decodes_to_its_json(v in json_value()) {
        if let Some(text) = encode(&v) {
            prop_assert_eq!(decode(&text), Some(v), "TOON:\n{}", text);
        }
    }
}
