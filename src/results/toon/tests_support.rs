//! Generated JSON values for the property tests.

use proptest::prelude::*;
use serde_json::{Value, json};

/// Any JSON value, with tables (uniform rows, some nesting uniform objects: dotted columns),
/// keys holding dots (literal, never paths) and strings that need quoting in TOON.
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
            prop::collection::vec(("[a-z_. ]{0,6}", inner.clone()), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            nested_rows(inner),
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

/// Rows of the same shape nesting objects of the same shape (a GitHub issue's `user`), with
/// keys that read as paths when unquoted (`user.login` as a literal key beside `user`), and
/// sometimes one row off the shape (an array, an empty object, another key): not a table.
fn nested_rows(inner: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("id"),
        Just("user.login"),
        Just("a-b"),
        Just("_x"),
        Just("n1")
    ];
    (
        1usize..5,
        prop::collection::vec((key, any::<i16>()), 1..4),
        prop::collection::vec(any::<u8>(), 1..4),
        prop::option::of(inner),
    )
        .prop_map(|(n, fields, nested, odd)| {
            let rows = (0..n).map(|r| {
                let mut row = serde_json::Map::new();
                for (k, x) in &fields {
                    row.insert(
                        (*k).to_owned(),
                        json!(i64::from(*x) + i64::try_from(r).unwrap_or(0)),
                    );
                }
                let user: serde_json::Map<String, Value> = nested
                    .iter()
                    .enumerate()
                    .map(|(i, x)| (format!("f{i}"), json!(format!("v{x}-{r}"))))
                    .collect();
                row.insert(
                    "user".into(),
                    json!({"login": format!("u{r}"), "deep": user}),
                );
                row.insert("tail".into(), json!(r % 2 == 0));
                Value::Object(row)
            });
            let mut rows: Vec<Value> = rows.collect();
            if let (Some(odd), Some(Value::Object(last))) = (odd, rows.last_mut()) {
                last.insert("user".into(), odd);
            }
            Value::Array(rows)
        })
}
