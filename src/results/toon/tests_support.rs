//! Generated JSON values for the property tests.

use proptest::prelude::*;
use serde_json::{Value, json};

/// Any JSON value, with tables (uniform rows) and strings that need quoting in TOON.
pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1.0e9f64..1.0e9).prop_map(Value::from),
        "[ -~\\t\\n\\u{e9}\\u{4e2d}]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("true"),
            Just("-"),
            Just("1e5"),
            Just(" a"),
            Just("a,b"),
            Just("k: v")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z_ ]{0,6}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            // Uniform rows: tables.
            (1usize..5, prop::collection::vec(any::<i32>(), 1..4)).prop_map(|(n, xs)| {
                Value::Array(
                    (0..n)
                        .map(|r| {
                            let row: serde_json::Map<String, Value> = xs
                                .iter()
                                .enumerate()
                                .map(|(i, x)| {
                                    (
                                        format!("f{i}"),
                                        json!(i64::from(*x) + i64::try_from(r % 7).unwrap_or(0)),
                                    )
                                })
                                .collect();
                            Value::Object(row)
                        })
                        .collect(),
                )
            }),
        ]
    })
}
