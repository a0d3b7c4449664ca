//! RFC 8785 (JSON Canonicalization Scheme) and the `schemaHash` built on it.
//!
//! JCS writes a JSON value in one byte form: no whitespace, object keys sorted by their UTF-16
//! code units, strings with only the escapes JSON requires, numbers as ECMAScript writes a
//! double. The draft SEP "Progressive Tool Disclosure" names a tool's fingerprint `schemaHash`:
//! the lowercase hex SHA-256 of the JCS form of the whole tool object. Pinning, `inspect` and
//! `tools/catalog` all take it from [`schema_hash`], so they agree byte for byte.
//!
//! ```
//! use mcp_budget::canonical::{jcs, schema_hash};
//! use serde_json::json;
//!
//! assert_eq!(jcs(&json!({"b": [1.0, 1e21, "é\n"], "a": null})), r#"{"a":null,"b":[1,1e+21,"é\n"]}"#);
//! let a = schema_hash(&json!({"name": "t", "inputSchema": {"type": "object"}}));
//! let b = schema_hash(&json!({"inputSchema": {"type": "object"}, "name": "t"}));
//! assert_eq!(a, b);
//! assert_eq!(a.len(), 64);
//! ```

use std::fmt::Write as _;

use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

/// The RFC 8785 form of `value`.
#[must_use]
pub fn jcs(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Lowercase hex SHA-256 of the [`jcs`] form of `tool`: the SEP's `schemaHash`. Give it the
/// upstream's original tool (before namespacing, compression or sanitizing).
#[must_use]
pub fn schema_hash(tool: &Value) -> String {
    let digest = Sha256::digest(jcs(tool).as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        // Writing to a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(obj) => {
            let mut entries: Vec<(&String, &Value)> = obj.iter().collect();
            // RFC 8785 §3.2.3: keys in the order of their UTF-16 code units.
            entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (n, (key, item)) in entries.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// JSON string escaping as RFC 8785 §3.2.2.2 asks: `"`, `\` and controls below U+0020 only
/// (`\b \t \n \f \r` by name, others as lowercase `\u00xx`), which is `serde_json`'s.
fn write_string(out: &mut String, s: &str) {
    out.push_str(&serde_json::to_string(s).expect("a string always serializes"));
}

/// Numbers as ECMAScript's `Number.prototype.toString` writes the double (RFC 8785 §3.2.2.3).
fn write_number(out: &mut String, n: &Number) {
    if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() < (1 << 53)) {
        let _ = write!(out, "{i}");
        return;
    }
    let x = n.as_f64().unwrap_or(0.0);
    if x == 0.0 || !x.is_finite() {
        // JSON has no NaN or infinity; -0 is written "0".
        out.push('0');
        return;
    }
    // `{:e}` gives the shortest digits that round-trip, as ECMAScript picks them.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} always has an exponent");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().expect("{:e} writes an integer exponent");
    let k = i32::try_from(digits.len()).expect("a double has at most 17 digits");
    let point = exp + 1; // ECMAScript's n: the decimal point sits after `point` digits.
    if x < 0.0 {
        out.push('-');
    }
    if k <= point && point <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n(
            '0',
            usize::try_from(point - k).unwrap_or(0),
        ));
    } else if 0 < point && point <= 21 {
        let (int, frac) = digits.split_at(usize::try_from(point).unwrap_or(0));
        let _ = write!(out, "{int}.{frac}");
    } else if -6 < point && point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n(
            '0',
            usize::try_from(-point).unwrap_or(0),
        ));
        out.push_str(&digits);
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            let _ = write!(out, ".{rest}");
        }
        let e = point - 1;
        let _ = write!(out, "e{}{}", if e < 0 { '-' } else { '+' }, e.abs());
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fixture_tools, reorder};
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn num(text: &str) -> String {
        jcs(&serde_json::from_str(text).unwrap())
    }

    #[test]
    // The literals are RFC 8785's, digits beyond a double's precision included.
    #[allow(clippy::excessive_precision)]
    fn numbers_follow_ecmascript() {
        // RFC 8785 appendix B and the usual edge cases.
        let cases = [
            ("0", "0"),
            ("-0.0", "0"),
            ("1.0", "1"),
            ("-1.5", "-1.5"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("4.50", "4.5"),
            ("2e-3", "0.002"),
            ("0.1", "0.1"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("5e-324", "5e-324"),
            ("9007199254740993", "9007199254740992"),
        ];
        for (input, want) in cases {
            assert_eq!(num(input), want, "{input}");
        }
        // From a Rust literal: serde_json's default float parser may miss the nearest double.
        assert_eq!(
            jcs(&json!(123_456_789_012_345_680_000.0_f64)),
            "123456789012345680000"
        );
        assert_eq!(jcs(&json!(333_333_333.333_333_29_f64)), "333333333.3333333");
    }

    #[test]
    fn keys_sort_by_utf16_and_strings_keep_unicode() {
        // RFC 8785 §3.2.3's example: U+1F600 (surrogates D83D..) sorts before U+FB33.
        let v =
            json!({"\u{fb33}": 1, "\u{1f600}": 2, "\r": 3, "1": 4, "a\u{7f}\u{1f}": "\u{20ac}"});
        assert_eq!(
            jcs(&v),
            "{\"\\r\":3,\"1\":4,\"a\u{7f}\\u001f\":\"\u{20ac}\",\"\u{1f600}\":2,\"\u{fb33}\":1}"
        );
    }

    #[test]
    fn known_hash() {
        // sha256 of the 2 bytes "{}".
        assert_eq!(
            schema_hash(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    /// Every string and number position of `value`, as paths of keys / indexes.
    fn leaves(value: &Value, path: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
        match value {
            Value::Object(obj) => {
                for (k, v) in obj {
                    path.push(Value::String(k.clone()));
                    leaves(v, path, out);
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    path.push(json!(i));
                    leaves(v, path, out);
                    path.pop();
                }
            }
            _ => out.push(path.clone()),
        }
    }

    fn at<'a>(value: &'a mut Value, path: &[Value]) -> &'a mut Value {
        path.iter().fold(value, |v, step| match step {
            Value::String(k) => &mut v[k.as_str()],
            Value::Number(i) => &mut v[usize::try_from(i.as_u64().unwrap()).unwrap()],
            _ => unreachable!(),
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn hash_ignores_key_order_and_whitespace(shift in 0usize..7, pick in 0usize..644) {
            let tools = fixture_tools();
            let tool = &tools[pick % tools.len()];
            let pretty: Value = serde_json::from_str(&serde_json::to_string_pretty(&reorder(tool, shift)).unwrap()).unwrap();
            prop_assert_eq!(schema_hash(tool), schema_hash(&pretty));
        }

        #[test]
        fn hash_changes_with_any_value(pick in 0usize..644, leaf in 0usize..10_000) {
            let tools = fixture_tools();
            let tool = &tools[pick % tools.len()];
            let mut paths = Vec::new();
            leaves(tool, &mut Vec::new(), &mut paths);
            let path = &paths[leaf % paths.len()];
            let mut changed = tool.clone();
            let slot = at(&mut changed, path);
            *slot = match slot.take() {
                Value::String(s) => Value::String(format!("{s}x")),
                Value::Number(n) => json!(n.as_f64().unwrap_or(0.0) + 1.0),
                Value::Bool(b) => Value::Bool(!b),
                _ => json!(0),
            };
            prop_assert_ne!(schema_hash(tool), schema_hash(&changed));
        }
    }
}
