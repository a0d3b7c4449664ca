//! A light JSON Schema check of `invoke_tool` arguments against the tool's real `inputSchema`.
//!
//! It checks what models get wrong and can fix from a message: missing required properties,
//! wrong types, values outside an `enum`/`const`, unknown properties under
//! `additionalProperties: false`, numeric and length bounds, nested objects and arrays,
//! `anyOf`/`oneOf`/`allOf`, and local `$ref`s (`#/$defs/..`, `#/definitions/..`). Keywords it
//! does not know (`pattern`, `format`, ...) are ignored rather than rejected: the upstream still
//! validates, and a sloppy upstream schema must not block a call the upstream would accept.
//!
//! **Why a second validator beside [`crate::sanitize::arguments`]** (the `jsonschema` one of
//! `[sanitize] arguments = "strict"`): the two answer different questions for different
//! readers, and on a strict `invoke_tool` both run, this one first. This one helps a model
//! retry: it runs on every `invoke_tool` whatever `[sanitize] arguments` says, is lenient (an
//! unknown keyword or a sloppy schema never blocks), and reports every problem as a line that
//! `recovery` turns into an `isError` result with the required fields and a call of the right
//! shape. The strict one is a security boundary: it sees every `tools/call` below the budget
//! and authorization layers (a direct call too, and an `invoke_tool` as the call it becomes),
//! reads the schema as a contract (an undeclared top-level property is refused), knows every
//! draft, and refuses with a JSON-RPC error. It cannot trust a check above it that is lenient
//! by design, and this one cannot take the strict one's verdicts without losing its messages.

use serde_json::{Map, Value};

/// Most problems reported for one call (the rest are summarised).
const MAX_PROBLEMS: usize = 20;
/// Deepest nesting (and `$ref` chain) followed.
const MAX_DEPTH: usize = 32;

/// Checks `arguments` against `schema`; `Err` lists every problem found as readable lines,
/// each starting with the path of the offending value (`arguments.items[2].name`).
///
/// # Errors
/// The problems found, at most 20 (plus a line counting the rest).
///
/// ```
/// use mcp_budget::discover::check_arguments;
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
/// assert_eq!(check_arguments(&schema, &json!({"n": 3})), Ok(()));
/// let problems = check_arguments(&schema, &json!({"n": "3"})).unwrap_err();
/// assert_eq!(problems, ["arguments.n: expected integer, got string \"3\""]);
/// ```
pub fn check_arguments(schema: &Value, arguments: &Value) -> Result<(), Vec<String>> {
    let mut checker = Checker {
        root: schema,
        problems: Vec::new(),
    };
    checker.check(schema, arguments, "arguments", 0);
    let mut problems = checker.problems;
    if problems.is_empty() {
        return Ok(());
    }
    if problems.len() > MAX_PROBLEMS {
        let more = problems.len() - MAX_PROBLEMS;
        problems.truncate(MAX_PROBLEMS);
        problems.push(format!("... and {more} more"));
    }
    Err(problems)
}

/// Which side of a value an inclusive bound (`minimum`, `maxLength`, ...) holds.
#[derive(Debug, Clone, Copy)]
enum Bound {
    /// The value may not be below it.
    Min,
    /// The value may not be above it.
    Max,
}

struct Checker<'a> {
    root: &'a Value,
    problems: Vec<String>,
}

impl<'a> Checker<'a> {
    fn check(&mut self, schema: &'a Value, value: &Value, path: &str, depth: usize) {
        let Value::Object(schema) = schema else {
            if schema == &Value::Bool(false) {
                self.problems
                    .push(format!("{path}: no value is allowed here"));
            }
            return;
        };
        if depth > MAX_DEPTH {
            return;
        }
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            if let Some(resolved) = self.resolve(target) {
                self.check(resolved, value, path, depth + 1);
            }
        }
        if let Some(expected) = schema.get("type") {
            if !type_matches(expected, value) {
                self.problems.push(format!(
                    "{path}: expected {}, got {}",
                    type_names(expected),
                    describe(value)
                ));
                // Further keywords would only repeat the type problem.
                return;
            }
        }
        self.check_allowed(schema, value, path);
        match value {
            Value::Object(object) => self.check_object(schema, object, path, depth),
            Value::Array(items) => self.check_array(schema, items, path, depth),
            Value::String(s) => {
                let len = s.chars().count() as f64;
                self.bound(schema, "minLength", Bound::Min, len, path, |n| {
                    format!("must be at least {n} characters long")
                });
                self.bound(schema, "maxLength", Bound::Max, len, path, |n| {
                    format!("must be at most {n} characters long")
                });
            }
            Value::Number(n) => {
                if let Some(x) = n.as_f64() {
                    self.check_number(schema, x, path);
                }
            }
            Value::Null | Value::Bool(_) => {}
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            let Some(Value::Array(subs)) = schema.get(key) else {
                continue;
            };
            if key == "allOf" {
                for sub in subs {
                    self.check(sub, value, path, depth + 1);
                }
            } else {
                self.check_any_of(key, subs, value, path, depth);
            }
        }
    }

    /// `enum` and `const`.
    fn check_allowed(&mut self, schema: &Map<String, Value>, value: &Value, path: &str) {
        if let Some(Value::Array(allowed)) = schema.get("enum") {
            if !allowed.iter().any(|a| json_eq(a, value)) {
                self.problems.push(format!(
                    "{path}: {} is not one of {}",
                    short(value),
                    list(allowed)
                ));
            }
        }
        if let Some(constant) = schema.get("const") {
            if !json_eq(constant, value) {
                self.problems.push(format!(
                    "{path}: must be {}, got {}",
                    short(constant),
                    short(value)
                ));
            }
        }
    }

    /// `anyOf` and `oneOf` (`key`) alike: accept a value one branch accepts (an ambiguous
    /// `oneOf` is the schema's problem, not the caller's). Otherwise the types expected, when
    /// every branch names one; else the problem of the nearest branch, when it has only one.
    fn check_any_of(
        &mut self,
        key: &str,
        subs: &'a [Value],
        value: &Value,
        path: &str,
        depth: usize,
    ) {
        let types: Vec<&Value> = subs.iter().filter_map(|s| s.get("type")).collect();
        if types.len() == subs.len() && !types.iter().any(|t| type_matches(t, value)) {
            let names: Vec<String> = types.iter().map(|t| type_names(t)).collect();
            self.problems.push(format!(
                "{path}: expected {}, got {}",
                names.join(" or "),
                describe(value)
            ));
            return;
        }
        let mut best: Option<Vec<String>> = None;
        for sub in subs {
            let mut inner = Checker {
                root: self.root,
                problems: Vec::new(),
            };
            inner.check(sub, value, path, depth + 1);
            if inner.problems.is_empty() {
                best = None;
                break;
            }
            if best.as_ref().is_none_or(|b| inner.problems.len() < b.len()) {
                best = Some(inner.problems);
            }
        }
        if let Some(problems) = best {
            if problems.len() == 1 {
                self.problems.extend(problems);
            } else {
                self.problems.push(format!(
                    "{path}: matches none of the allowed shapes ({key})"
                ));
            }
        }
    }

    fn check_object(
        &mut self,
        schema: &'a Map<String, Value>,
        object: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    let hint = properties
                        .and_then(|p| p.get(name))
                        .map(|s| match s.get("type") {
                            Some(t) => format!(" ({})", type_names(t)),
                            None => String::new(),
                        })
                        .unwrap_or_default();
                    self.problems
                        .push(format!("{path}.{name}: required property is missing{hint}"));
                }
            }
        }
        let additional = schema.get("additionalProperties");
        for (name, value) in object {
            let child = format!("{path}.{name}");
            if let Some(sub) = properties.and_then(|p| p.get(name)) {
                self.check(sub, value, &child, depth + 1);
                continue;
            }
            match additional {
                Some(Value::Bool(false)) => {
                    let known: Vec<&str> = properties
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    self.problems.push(if known.is_empty() {
                        format!("{child}: unknown property (this tool takes no arguments)")
                    } else {
                        format!("{child}: unknown property; known: {}", known.join(", "))
                    });
                }
                Some(sub @ Value::Object(_)) => self.check(sub, value, &child, depth + 1),
                _ => {}
            }
        }
    }

    fn check_array(
        &mut self,
        schema: &'a Map<String, Value>,
        items: &[Value],
        path: &str,
        depth: usize,
    ) {
        let len = items.len() as f64;
        self.bound(schema, "minItems", Bound::Min, len, path, |n| {
            format!("must have at least {n} items")
        });
        self.bound(schema, "maxItems", Bound::Max, len, path, |n| {
            format!("must have at most {n} items")
        });
        // Draft 2020-12 `prefixItems`, or the older array form of `items`.
        let prefix = match (schema.get("prefixItems"), schema.get("items")) {
            (Some(Value::Array(p)), _) | (None, Some(Value::Array(p))) => p.as_slice(),
            _ => &[],
        };
        for (i, item) in items.iter().enumerate() {
            let child = format!("{path}[{i}]");
            if let Some(sub) = prefix.get(i) {
                self.check(sub, item, &child, depth + 1);
            } else if let Some(sub @ Value::Object(_)) = schema.get("items") {
                self.check(sub, item, &child, depth + 1);
            }
        }
    }

    fn check_number(&mut self, schema: &Map<String, Value>, x: f64, path: &str) {
        self.bound(schema, "minimum", Bound::Min, x, path, |n| {
            format!("must be ≥ {n}")
        });
        self.bound(schema, "maximum", Bound::Max, x, path, |n| {
            format!("must be ≤ {n}")
        });
        if let Some(n) = schema.get("exclusiveMinimum").and_then(Value::as_f64) {
            if x <= n {
                self.problems.push(format!("{path}: {x} must be > {n}"));
            }
        }
        if let Some(n) = schema.get("exclusiveMaximum").and_then(Value::as_f64) {
            if x >= n {
                self.problems.push(format!("{path}: {x} must be < {n}"));
            }
        }
    }

    /// A problem when `actual` is on the wrong side of the schema's `key`, if it has one.
    fn bound(
        &mut self,
        schema: &Map<String, Value>,
        key: &str,
        bound: Bound,
        actual: f64,
        path: &str,
        message: impl Fn(f64) -> String,
    ) {
        if let Some(n) = schema.get(key).and_then(Value::as_f64) {
            let outside = match bound {
                Bound::Min => actual < n,
                Bound::Max => actual > n,
            };
            if outside {
                self.problems.push(format!("{path}: {}", message(n)));
            }
        }
    }

    /// A local JSON pointer (`#/...`) into the root schema.
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(pointer)
    }
}

fn type_matches(expected: &Value, value: &Value) -> bool {
    match expected {
        Value::String(t) => one_type_matches(t, value),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .any(|t| one_type_matches(t, value)),
        _ => true,
    }
}

fn one_type_matches(t: &str, value: &Value) -> bool {
    match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => match value {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        // Unknown type names: do not second-guess the upstream.
        _ => true,
    }
}

fn type_names(expected: &Value) -> String {
    match expected {
        Value::String(t) => t.clone(),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        other => other.to_string(),
    }
}

/// Numbers compare by value (`1` equals `1.0`); everything else structurally.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// `string "abc"`, `integer 3`, `object`...
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) if n.is_f64() => format!("number {n}"),
        Value::Number(n) => format!("integer {n}"),
        Value::String(_) => format!("string {}", short(value)),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

/// A value as JSON, cut to a readable length.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 60 {
        return text;
    }
    let cut: String = text.chars().take(57).collect();
    format!("{cut}...")
}

fn list(values: &[Value]) -> String {
    let shown: Vec<String> = values.iter().take(20).map(short).collect();
    let more = if values.len() > 20 { ", ..." } else { "" };
    format!("[{}{more}]", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "owner": {"type": "string", "minLength": 1},
                "state": {"type": "string", "enum": ["open", "closed"]},
                "count": {"type": "integer", "minimum": 1, "maximum": 100},
                "labels": {"type": "array", "items": {"type": "string"}},
                "filter": {"$ref": "#/$defs/filter"},
                "when": {"anyOf": [{"type": "string"}, {"type": "null"}]}
            },
            "required": ["owner"],
            "additionalProperties": false,
            "$defs": {
                "filter": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}},
                    "required": ["field"]
                }
            }
        })
    }

    fn problems(args: &Value) -> Vec<String> {
        check_arguments(&schema(), args).err().unwrap_or_default()
    }

    #[test]
    fn accepts_valid_arguments() {
        let args = json!({"owner": "o", "state": "open", "count": 3.0, "labels": ["a"],
            "filter": {"field": "x"}, "when": null});
        assert_eq!(problems(&args), Vec::<String>::new());
    }

    #[test]
    fn reports_missing_required() {
        assert_eq!(
            problems(&json!({})),
            ["arguments.owner: required property is missing (string)"]
        );
    }

    #[test]
    fn reports_wrong_types_nested() {
        let p = problems(&json!({"owner": 1, "labels": ["a", 2], "filter": {"field": true}}));
        assert_eq!(
            p,
            [
                "arguments.owner: expected string, got integer 1",
                "arguments.labels[1]: expected string, got integer 2",
                "arguments.filter.field: expected string, got boolean true",
            ]
        );
    }

    #[test]
    fn reports_bad_enum_bounds_and_unknown_properties() {
        let p = problems(&json!({"owner": "", "state": "merged", "count": 0, "colour": "red"}));
        assert_eq!(
            p,
            [
                "arguments.owner: must be at least 1 characters long",
                "arguments.state: \"merged\" is not one of [\"open\", \"closed\"]",
                "arguments.count: must be ≥ 1",
                "arguments.colour: unknown property; known: owner, state, count, labels, filter, when",
            ]
        );
    }

    #[test]
    fn reports_any_of_mismatch_and_ref_required() {
        let p = problems(&json!({"owner": "o", "when": 5, "filter": {}}));
        assert_eq!(
            p,
            [
                "arguments.when: expected string or null, got integer 5",
                "arguments.filter.field: required property is missing (string)",
            ]
        );
        let schema = json!({"anyOf": [
            {"type": "object", "required": ["a"]},
            {"type": "object", "required": ["b", "c"]}
        ]});
        assert_eq!(
            check_arguments(&schema, &json!({"b": 1})).unwrap_err(),
            ["arguments.a: required property is missing"]
        );
    }

    #[test]
    fn ignores_unknown_keywords_and_types() {
        let schema = json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "^x", "format": "uri"}, "t": {"type": "uuid"}}});
        assert_eq!(check_arguments(&schema, &json!({"s": "y", "t": 1})), Ok(()));
    }
}
