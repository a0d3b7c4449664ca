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
    /// Why the schema does not compile (an invalid schema, an unresolvable `$ref`): the tool's
    /// calls are then not checked.
    ///
    /// A schema without `$schema` is read as 2020-12 (MCP's default); one that only compiles
    /// as an older draft (draft 4's boolean `exclusiveMinimum`, seen in real servers) is
    /// compiled as draft 7, then draft 4, before it counts as broken. Never online: a `$ref`
    /// outside the schema does not compile.
    pub fn new(schema: &Value) -> Result<Self, String> {
        let mut drafts = vec![jsonschema::Draft::default().detect(schema)];
        if schema.get("$schema").is_none() {
            drafts.extend([jsonschema::Draft::Draft7, jsonschema::Draft::Draft4]);
        }
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
        Err(first.unwrap_or_default())
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

/// The refusal of property `name` of the object at pointer `at`, which its schema does not
/// declare.
fn undeclared(at: &str, name: &str) -> Invalid {
    let property = format!("{at}/{}", escape(name));
    let reason = format!("property {name:?} is not declared (at {property:?})");
    Invalid { property, reason }
}

/// A name as one JSON-pointer segment (RFC 6901).
fn escape(name: &str) -> String {
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
    fn a_schema_that_does_not_compile_is_reported() {
        assert!(Compiled::new(&json!({"type": "no-such-type"})).is_err());
        assert!(Compiled::new(&json!({"$ref": "https://example.com/remote.json"})).is_err());
    }
}
