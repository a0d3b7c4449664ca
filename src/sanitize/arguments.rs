//! `[sanitize] arguments = "strict"`: a call's arguments checked against the tool's (pinned)
//! input schema before anything is forwarded, so that a model steered into sending
//! `{"exfil": "SECRET"}` to a tool without such a parameter reaches no server. Pure: schemas
//! in, a verdict out; the validator is the `jsonschema` crate (every draft the schema names,
//! no remote `$ref` fetched: its HTTP and file resolvers are not built in).
//!
//! Strict reads a schema as a contract: at the top level, a property the schema does not
//! declare is refused unless the schema allows more explicitly (`additionalProperties` true or
//! a schema, `patternProperties`, `unevaluatedProperties`) — most servers leave
//! `additionalProperties` out, and that omission is exactly how undeclared parameters would
//! slip through. Nested objects are checked as their schema says (standard semantics).
//!
//! **Why a second validator beside `discover::arguments`** (the lenient one of
//! `invoke_tool`): on a strict `invoke_tool` both run, that one first. That one helps a model
//! retry (every `invoke_tool`, lenient, every problem as a line of an `isError` result with a
//! call of the right shape); this one is the boundary every `tools/call` crosses below the
//! budget and authorization layers, direct or through a meta-tool, and reads the schema as a
//! contract. It must not depend on a lenient check above it, and the lenient one must not
//! answer with this one's single-property JSON-RPC error, which a model cannot retry from.
//!
//! ```
//! use mcp_budget::sanitize::arguments::{Compiled, check};
//! use serde_json::json;
//!
//! let schema = json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]});
//! let compiled = Compiled::new(&schema).unwrap();
//! assert!(check(&compiled, &json!({"a": 1})).is_ok());
//! let bad = check(&compiled, &json!({"a": 1, "exfil": "SECRET"})).unwrap_err();
//! assert_eq!(bad.property, "/exfil");
//! assert!(bad.reason.contains("\"exfil\" is not declared"), "{}", bad.reason);
//! assert_eq!(check(&compiled, &json!({})).unwrap_err().property, "/a");
//! ```

use serde_json::{Map, Value};

/// What a call's arguments get (`[sanitize] arguments`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Arguments {
    /// Forwarded as sent (the server checks them, or not).
    #[default]
    Pass,
    /// Checked against the tool's input schema; a call that does not match is refused.
    Strict,
}

/// A tool's input schema, compiled for strict checks.
#[derive(Debug)]
pub struct Compiled {
    validator: jsonschema::Validator,
    /// The top-level properties the schema declares, when it allows no others (see the
    /// module docs): checked first, by name.
    declared: Option<Vec<String>>,
}

impl Compiled {
    /// Compiles `schema` as strict reads it (see the module docs).
    ///
    /// # Errors
    /// Why the schema does not compile (an invalid schema, an unresolvable `$ref`, a `$schema`
    /// the validator does not know whose schema compiles as none of the drafts tried): strict
    /// then refuses the tool's calls, as it cannot check them.
    ///
    /// A schema without `$schema` is read as 2020-12 (MCP's default); one that only compiles
    /// as an older draft (draft 4's boolean `exclusiveMinimum`, seen in real servers) is
    /// compiled as draft 7, then draft 4, before it counts as broken. A `$schema` the
    /// validator does not know (draft 3, `""`, a custom URI) is tried the same way. Never
    /// online: a `$ref` outside the schema does not compile. Never a panic: should the
    /// validator panic on a schema, that schema does not compile.
    pub fn new(schema: &Value) -> Result<Self, String> {
        std::panic::catch_unwind(|| Self::compile(schema))
            .unwrap_or_else(|_| Err("the validator failed on this schema (it panicked)".to_owned()))
    }

    /// [`Compiled::new`], which catches a panic of this (the property tests call it directly,
    /// to see that it does not panic at all).
    pub(crate) fn compile(schema: &Value) -> Result<Self, String> {
        use jsonschema::Draft;
        let named = schema.get("$schema");
        let detected = Draft::default().detect(schema);
        // `with_draft` panics on `Draft::Unknown` (a `$schema` the validator does not know):
        // that one is tried as an unnamed draft is.
        let drafts = match named {
            Some(_) if detected != Draft::Unknown => vec![detected],
            _ => vec![Draft::Draft202012, Draft::Draft7, Draft::Draft4],
        };
        let mut first = None;
        for draft in drafts {
            match jsonschema::options()
                .with_draft(draft)
                .offline()
                .build(schema)
            {
                Ok(validator) => {
                    return Ok(Self {
                        validator,
                        declared: closed_properties(schema),
                    });
                }
                Err(e) => {
                    first.get_or_insert_with(|| e.masked().to_string());
                }
            }
        }
        let why = first.unwrap_or_default();
        Err(match named {
            Some(uri) if detected == Draft::Unknown => format!(
                "$schema {uri} is not a draft the validator knows, and the schema does not compile as draft 2020-12, 7 or 4: {why}"
            ),
            _ => why,
        })
    }
}

/// The names a schema's `properties` declares, when strict allows no others at the top
/// (`additionalProperties` absent or `false`):
/// `None` when the schema allows more explicitly, composes others, or does not describe an
/// object.
fn closed_properties(schema: &Value) -> Option<Vec<String>> {
    let object = schema.as_object()?;
    // `additionalProperties: false` closes it too (checked here by name, so that the refusal
    // names the property).
    let open = object.contains_key("patternProperties")
        || object.contains_key("unevaluatedProperties")
        || object
            .get("additionalProperties")
            .is_some_and(|a| a != false);
    let is_object = match object.get("type") {
        // `["object", "null"]`: arguments that are an object are checked as one.
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        Some(t) => t == "object",
        None => object.contains_key("properties"),
    };
    if open || !is_object || has_composition(object) {
        return None;
    }
    let properties = object.get("properties").and_then(Value::as_object);
    Some(
        properties
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default(),
    )
}

/// Whether the schema composes others at the top (`allOf`, `$ref`…): their properties count as
/// declared, which the top-level `properties` alone would not show, so only the validator
/// decides.
fn has_composition(object: &Map<String, Value>) -> bool {
    ["allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas"]
        .iter()
        .any(|k| object.contains_key(*k))
}

/// Why arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The JSON pointer of the offending value in `arguments` (`/exfil`, `/a/b`; `""` for the
    /// whole object).
    pub property: String,
    /// What is wrong, naming the property.
    pub reason: String,
}

/// Checks `arguments` (the call's `arguments`, `{}` when it sent none) against `compiled`: the
/// first problem, naming its property.
///
/// # Errors
/// [`Invalid`] for arguments the schema does not accept.
pub fn check(compiled: &Compiled, arguments: &Value) -> Result<(), Invalid> {
    if let (Some(declared), Some(given)) = (&compiled.declared, arguments.as_object()) {
        if let Some(name) = given.keys().find(|k| !declared.contains(k)) {
            return Err(undeclared("", name));
        }
    }
    let Some(error) = compiled.validator.iter_errors(arguments).next() else {
        return Ok(());
    };
    let at = error.instance_path().to_string();
    let (property, reason) = match error.kind() {
        jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
            return Err(undeclared(
                &at,
                unexpected.first().map_or("", String::as_str),
            ));
        }
        jsonschema::error::ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            let pointer = format!("{at}/{}", escape(&name));
            (
                pointer.clone(),
                format!("required property {name:?} is missing (at {pointer:?})"),
            )
        }
        _ => {
            let shown = if at.is_empty() {
                "the arguments".to_owned()
            } else {
                format!("{at:?}")
            };
            // Masked: a secret sent as an argument is not repeated in the error or the log.
            (at, format!("{shown}: {}", error.masked()))
        }
    };
    Err(Invalid { property, reason })
}

/// The `params` members of a `tools/call` that strict forwards: `name`, `arguments`, `_meta`,
/// and what the protocol defines besides (`task`, 2025-11-25's task-augmented call;
/// `inputResponses` and `requestState`, a 2026-07-28 retry with the client's answers).
pub const TOOLS_CALL_PARAMS: &[&str] = &[
    "name",
    "arguments",
    "_meta",
    "task",
    "inputResponses",
    "requestState",
];

/// The `params` members of a `prompts/get` that strict forwards: `name`, `arguments`, `_meta`,
/// and a 2026-07-28 retry's `inputResponses` and `requestState`.
pub const PROMPTS_GET_PARAMS: &[&str] = &[
    "name",
    "arguments",
    "_meta",
    "inputResponses",
    "requestState",
];

/// What strict forwards of a checked call's `params` (read as a `serde_json::Value` reads
/// them, the last of repeated keys winning, as the check read them): the members in `kept`,
/// `arguments` only when it is not `null` (`null` reads as none, as the check read it),
/// `_meta` only when it is an object; the names of the members dropped come second. Whoever
/// sends the result serialises it again, so no repeated key reaches the server and the
/// arguments it reads are the ones checked.
///
/// ```
/// use mcp_budget::sanitize::arguments::{strict_params, TOOLS_CALL_PARAMS};
/// use serde_json::json;
///
/// let params = json!({"name": "t", "arguments": {"a": 1}, "_meta": {"progressToken": 1}, "smuggled": "S"});
/// let serde_json::Value::Object(params) = params else { unreachable!() };
/// let (kept, dropped) = strict_params(params, TOOLS_CALL_PARAMS);
/// assert_eq!(serde_json::Value::Object(kept), json!({"name": "t", "arguments": {"a": 1}, "_meta": {"progressToken": 1}}));
/// assert_eq!(dropped, ["smuggled"]);
/// ```
#[must_use]
pub fn strict_params(
    params: Map<String, Value>,
    kept: &[&str],
) -> (Map<String, Value>, Vec<String>) {
    let mut dropped = Vec::new();
    let forwarded = params
        .into_iter()
        .filter(|(key, value)| {
            let keep = kept.contains(&key.as_str())
                && match key.as_str() {
                    "arguments" => !value.is_null(),
                    "_meta" => value.is_object(),
                    _ => true,
                };
            // `arguments: null` reads as none: not forwarded, and nothing was dropped.
            let none = key == "arguments" && value.is_null();
            if !(keep || none) {
                dropped.push(key.clone());
            }
            keep
        })
        .collect();
    (forwarded, dropped)
}

/// The refusal of property `name` of the object at pointer `at`, which its schema does not
/// declare.
pub(super) fn undeclared(at: &str, name: &str) -> Invalid {
    let property = format!("{at}/{}", escape(name));
    let reason = format!("property {name:?} is not declared (at {property:?})");
    Invalid { property, reason }
}

/// A name as one JSON-pointer segment (RFC 6901).
pub(super) fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn verdict(schema: &Value, args: &Value) -> Result<(), Invalid> {
        check(&Compiled::new(schema).unwrap(), args)
    }

    #[test]
    fn undeclared_properties_are_refused_unless_the_schema_allows_more() {
        let declared = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let err = verdict(&declared, &json!({"q": "x", "exfil": "S"})).unwrap_err();
        assert_eq!(err.property, "/exfil");
        for open in [
            json!({"type": "object", "properties": {"q": {}}, "additionalProperties": true}),
            json!({"type": "object", "properties": {"q": {}}, "additionalProperties": {"type": "string"}}),
            json!({"type": "object", "patternProperties": {"^x_": {}}, "additionalProperties": false, "properties": {"exfil": {}}}),
            json!({"type": "object", "allOf": [{"properties": {"exfil": {}}}]}),
        ] {
            assert!(verdict(&open, &json!({"exfil": "S"})).is_ok(), "{open}");
        }
        // Closed as written: the refusal still names the property.
        let closed =
            json!({"type": "object", "properties": {"q": {}}, "additionalProperties": false});
        assert_eq!(
            verdict(&closed, &json!({"exfil": 1})).unwrap_err().property,
            "/exfil"
        );
        // No properties at all and `type: object`: nothing is declared, so nothing may come.
        let none = json!({"type": "object"});
        assert_eq!(verdict(&none, &json!({"x": 1})).unwrap_err().property, "/x");
        assert!(verdict(&none, &json!({})).is_ok());
    }

    #[test]
    fn wrong_types_and_missing_required_name_the_property() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"},
            "inner": {"type": "object", "properties": {"deep": {"type": "boolean"}}}},
            "required": ["n"]});
        let err = verdict(&schema, &json!({"n": "five"})).unwrap_err();
        assert_eq!(err.property, "/n");
        assert!(err.reason.contains("\"/n\""), "{}", err.reason);
        assert_eq!(verdict(&schema, &json!({})).unwrap_err().property, "/n");
        let deep = verdict(&schema, &json!({"n": 1, "inner": {"deep": "yes"}})).unwrap_err();
        assert_eq!(deep.property, "/inner/deep");
        // Nested objects follow their own schema: extra keys there are allowed here.
        assert!(verdict(&schema, &json!({"n": 1, "inner": {"other": 1}})).is_ok());
        let odd = verdict(&schema, &json!({"n": 1, "a/b": 2})).unwrap_err();
        assert_eq!(odd.property, "/a~1b");
    }

    /// Every real tool schema of the fixtures compiles (some only as an older draft) and
    /// refuses an undeclared property.
    #[test]
    fn real_toolsets_compile_and_refuse_an_undeclared_property() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
        let tools = crate::catalog::load_saved(&[dir]).unwrap();
        assert!(tools.len() > 600);
        let mut broken = Vec::new();
        let mut open = Vec::new();
        for tool in &tools {
            let Some(schema) = tool.input_schema() else {
                continue;
            };
            match Compiled::new(schema) {
                Err(why) => broken.push(format!("{}: {why}", tool.id())),
                Ok(c) if check(&c, &json!({"exfil": "SECRET"})).is_ok() => open.push(tool.id()),
                Ok(_) => {}
            }
        }
        assert!(broken.is_empty(), "{broken:#?}");
        assert!(open.is_empty(), "{open:#?}");
    }

    #[test]
    fn a_wrong_value_is_not_repeated() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let err = verdict(&schema, &json!({"n": "SECRET-VALUE"})).unwrap_err();
        assert!(!err.reason.contains("SECRET-VALUE"), "{}", err.reason);
    }

    #[test]
    fn an_unknown_schema_uri_is_tried_as_a_known_draft_and_named_when_none_fits() {
        for uri in ["http://json-schema.org/draft-03/schema#", "", "urn:custom"] {
            let schema =
                json!({"$schema": uri, "type": ["object", "null"], "properties": {"q": {}}});
            let err = verdict(&schema, &json!({"q": 1, "exfil": 2})).unwrap_err();
            assert_eq!(err.property, "/exfil", "{uri}");
        }
        let draft3 = json!({"$schema": "http://json-schema.org/draft-03/schema#",
            "properties": {"q": {"required": true}}});
        let why = Compiled::new(&draft3).unwrap_err();
        assert!(
            why.contains("draft-03") && why.contains("2020-12, 7 or 4"),
            "{why}"
        );
    }

    #[test]
    fn a_schema_that_does_not_compile_is_reported() {
        assert!(Compiled::new(&json!({"type": "no-such-type"})).is_err());
        assert!(Compiled::new(&json!({"$ref": "https://example.com/remote.json"})).is_err());
    }
}
