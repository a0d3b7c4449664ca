//! `Mcp-Param-*` headers (2026-07-28, SEP-2243): a tool's `inputSchema` may mark a property
//! with `"x-mcp-header": "Region"`; an HTTP `tools/call` then mirrors that argument in the
//! header `Mcp-Param-Region` so intermediaries can route on it without reading the body.
//!
//! A client emits the headers ([`param_headers`]); a server checks that each marked argument
//! and its header are present together and equal ([`check_param_headers`], `-32020` otherwise).
//! Only properties reachable from the root through `properties` alone count; a schema with an
//! invalid marking (not a header token, not on a string/integer/boolean property, a name used
//! twice) gets neither emission nor checking, as conforming clients drop such tools.
//!
//! ```
//! use mcp_budget::mcp::params::{marked, param_headers};
//! use serde_json::json;
//!
//! let schema = json!({"type": "object", "properties": {
//!     "region": {"type": "string", "x-mcp-header": "Region"}}});
//! let headers = param_headers(&marked(&schema), &json!({"region": "eu-west-1"}));
//! assert_eq!(headers, vec![("mcp-param-region".to_owned(), "eu-west-1".to_owned())]);
//! ```

use serde_json::Value;

use super::modern::{decode_header_value, header_mismatch};
use crate::jsonrpc::ErrorObject;

/// Schema key that marks a property as mirrored in a header.
pub const X_MCP_HEADER: &str = "x-mcp-header";
/// Prefix of the mirrored argument headers.
pub const PARAM_HEADER_PREFIX: &str = "Mcp-Param-";

/// One marked property: its path from the arguments' root, the header token, its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked {
    /// Property names from the root.
    pub path: Vec<String>,
    /// The header name after `Mcp-Param-`.
    pub token: String,
    /// `string`, `integer` or `boolean`.
    pub kind: String,
}

/// The marked properties of a tool's `inputSchema`; empty when it marks none or marks one
/// invalidly.
#[must_use]
pub fn marked(schema: &Value) -> Vec<Marked> {
    let mut found = Vec::new();
    if walk(schema, &mut Vec::new(), &mut found).is_err() {
        return Vec::new();
    }
    let mut seen: Vec<String> = Vec::new();
    for m in &found {
        let lower = m.token.to_ascii_lowercase();
        if seen.contains(&lower) {
            return Vec::new();
        }
        seen.push(lower);
    }
    found
}

/// Tool name → its marked properties, for the tools (`tools/list` items) that mark some.
#[must_use]
pub fn marked_tools(tools: &[Value]) -> std::collections::HashMap<String, Vec<Marked>> {
    tools
        .iter()
        .filter_map(|t| {
            let name = t.get("name")?.as_str()?;
            let marks = marked(t.get("inputSchema")?);
            (!marks.is_empty()).then(|| (name.to_owned(), marks))
        })
        .collect()
}

/// Collects markings along pure `properties` chains; `Err` on an invalid one.
fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Vec<Marked>) -> Result<(), ()> {
    let Some(obj) = schema.as_object() else {
        return Ok(());
    };
    if let Some(token) = obj.get(X_MCP_HEADER) {
        let token = token.as_str().ok_or(())?;
        let kind = obj.get("type").and_then(Value::as_str).ok_or(())?;
        let is_token = !token.is_empty()
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if path.is_empty() || !is_token || !matches!(kind, "string" | "integer" | "boolean") {
            return Err(());
        }
        out.push(Marked {
            path: path.clone(),
            token: token.to_owned(),
            kind: kind.to_owned(),
        });
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        for (name, sub) in props {
            path.push(name.clone());
            walk(sub, path, out)?;
            path.pop();
        }
    }
    Ok(())
}

fn value_at<'a>(arguments: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut node = arguments;
    for key in path {
        node = node.as_object()?.get(key)?;
    }
    (!node.is_null()).then_some(node)
}

/// How a scalar argument is written in its header (`None`: it has no header form).
fn render(value: &Value) -> Option<String> {
    match value {
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The `Mcp-Param-*` headers (lower-case names) a `tools/call` with `arguments` carries for a
/// tool whose marked properties are `marks` (see [`marked`]).
#[must_use]
pub fn param_headers(marks: &[Marked], arguments: &Value) -> Vec<(String, String)> {
    marks
        .iter()
        .filter_map(|m| {
            let rendered = render(value_at(arguments, &m.path)?)?;
            Some((
                format!("{PARAM_HEADER_PREFIX}{}", m.token).to_ascii_lowercase(),
                super::modern::encode_header_value(&rendered),
            ))
        })
        .collect()
}

/// Checks the `Mcp-Param-*` headers of a `tools/call` against its arguments, for a tool whose
/// marked properties are `marks`. `header(name)` gives every value of the header `name`
/// (lower-case).
///
/// # Errors
/// The `-32020` error naming the first header that is missing, extra, sent twice or different.
pub fn check_param_headers<'h>(
    marks: &[Marked],
    arguments: &Value,
    header: impl Fn(&str) -> Vec<&'h str>,
) -> Result<(), ErrorObject> {
    for m in marks {
        let name = format!("{PARAM_HEADER_PREFIX}{}", m.token);
        let values = header(&name.to_ascii_lowercase());
        if values.len() > 1 {
            return Err(header_mismatch(format!(
                "{name} header appears more than once"
            )));
        }
        let argument = m.path.join(".");
        let value = value_at(arguments, &m.path);
        let raw = values.first().map(|v| v.trim());
        let rendered = value.and_then(render);
        match (raw, value, rendered) {
            (None, None, _) | (None, Some(_), None) => {}
            (Some(_), None, _) => {
                return Err(header_mismatch(format!(
                    "{name} header is present but the {argument:?} argument is absent"
                )));
            }
            (Some(_), Some(_), None) => {
                return Err(header_mismatch(format!(
                    "{name} header does not match the {argument:?} argument"
                )));
            }
            (None, Some(_), Some(_)) => {
                return Err(header_mismatch(format!(
                    "{name} header is missing but the {argument:?} argument is present"
                )));
            }
            (Some(raw), Some(value), Some(rendered)) => {
                let decoded = decode_header_value(raw).map_err(header_mismatch)?;
                if !matches(&m.kind, value, &rendered, &decoded) {
                    return Err(header_mismatch(format!(
                        "{name} header does not match the {argument:?} argument"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Integers compare numerically (`42` matches `42.0`); everything else as written.
fn matches(kind: &str, value: &Value, rendered: &str, decoded: &str) -> bool {
    if kind == "integer" {
        if let (Some(body), Ok(header)) = (value.as_f64(), decoded.parse::<f64>()) {
            let canonical = decoded
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b'-' || b == b'.');
            if canonical && body.fract() == 0.0 {
                return body == header;
            }
        }
    }
    decoded == rendered
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "nested": {"type": "object", "properties": {
                "flag": {"type": "boolean", "x-mcp-header": "Flag"}}},
            "plain": {"type": "string"},
        }})
    }

    #[test]
    fn headers_mirror_the_marked_arguments() {
        let args = json!({"region": "eu", "count": 3, "nested": {"flag": true}, "plain": "x"});
        let headers = param_headers(&marked(&schema()), &args);
        assert_eq!(
            headers,
            vec![
                ("mcp-param-region".to_owned(), "eu".to_owned()),
                ("mcp-param-count".to_owned(), "3".to_owned()),
                ("mcp-param-flag".to_owned(), "true".to_owned()),
            ]
        );
        let headers = param_headers(&marked(&schema()), &json!({"region": "été"}));
        assert!(headers[0].1.starts_with("=?base64?"), "{headers:?}");
    }

    #[test]
    fn invalid_markings_disable_everything() {
        let dup = json!({"properties": {
            "a": {"type": "string", "x-mcp-header": "X"},
            "b": {"type": "string", "x-mcp-header": "x"}}});
        assert!(marked(&dup).is_empty());
        let object = json!({"properties": {"a": {"type": "object", "x-mcp-header": "A"}}});
        assert!(marked(&object).is_empty());
        let bad_token = json!({"properties": {"a": {"type": "string", "x-mcp-header": "a b"}}});
        assert!(marked(&bad_token).is_empty());
    }

    #[test]
    fn checks_presence_and_equality() {
        let s = marked(&schema());
        let args = json!({"region": "eu", "count": 3});
        let ok = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| -> Vec<&'static str> {
                pairs
                    .iter()
                    .filter(|(n, _)| *n == name)
                    .map(|(_, v)| *v)
                    .collect()
            }
        };
        assert!(
            check_param_headers(
                &s,
                &args,
                ok(&[("mcp-param-region", " eu "), ("mcp-param-count", "3.0")])
            )
            .is_ok()
        );
        let missing = check_param_headers(&s, &args, ok(&[("mcp-param-region", "eu")]));
        assert_eq!(
            missing.unwrap_err().code,
            crate::jsonrpc::code::HEADER_MISMATCH
        );
        let wrong = check_param_headers(
            &s,
            &args,
            ok(&[("mcp-param-region", "us"), ("mcp-param-count", "3")]),
        );
        assert!(wrong.is_err());
        let extra = check_param_headers(
            &s,
            &json!({"region": "eu", "count": 3}),
            ok(&[
                ("mcp-param-region", "eu"),
                ("mcp-param-count", "3"),
                ("mcp-param-flag", "true"),
            ]),
        );
        assert!(extra.is_err(), "a header without its argument is refused");
        let twice = check_param_headers(
            &s,
            &args,
            ok(&[
                ("mcp-param-region", "eu"),
                ("mcp-param-region", "eu"),
                ("mcp-param-count", "3"),
            ]),
        );
        assert!(twice.is_err());
    }
}
