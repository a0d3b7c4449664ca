//! `[sanitize] arguments = "strict"` for `prompts/get`: the arguments checked against the
//! prompt's declared `arguments` (`[{"name", "required"?}, ..]`) before anything is forwarded.
//! Every argument must be one the prompt declares, every value a string (MCP's
//! `GetPromptRequest` arguments are a map of strings), and every required one present. Pure:
//! a prompt definition and the arguments in, a verdict out. A refusal never repeats a value.
//!
//! ```
//! use mcp_budget::sanitize::prompt_arguments::check;
//! use serde_json::json;
//!
//! let prompt = json!({"name": "review", "arguments": [{"name": "code", "required": true}]});
//! assert!(check(&prompt, &json!({"code": "x"})).is_ok());
//! assert_eq!(check(&prompt, &json!({"code": "x", "exfil": "S"})).unwrap_err().property, "/exfil");
//! assert_eq!(check(&prompt, &json!({"code": 5})).unwrap_err().property, "/code");
//! assert_eq!(check(&prompt, &json!({})).unwrap_err().property, "/code");
//! ```

use serde_json::Value;

use super::arguments::{Invalid, escape, undeclared};

/// Checks `arguments` (the `prompts/get`'s `arguments`, `{}` when it sent none) against the
/// arguments `prompt` (its definition) declares: the first problem, naming its property. A
/// declared argument is an entry of `arguments` with a string `name`; a prompt that declares
/// none takes none.
///
/// # Errors
/// [`Invalid`] for an undeclared argument, a value that is not a string, a missing required
/// argument, or arguments that are not an object.
pub fn check(prompt: &Value, arguments: &Value) -> Result<(), Invalid> {
    let Some(given) = arguments.as_object() else {
        return Err(Invalid {
            property: String::new(),
            reason: "the arguments must be an object of strings".to_owned(),
        });
    };
    let declared: Vec<(&str, bool)> = (prompt.get("arguments").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|a| {
            let name = a.get("name")?.as_str()?;
            Some((name, a.get("required") == Some(&Value::Bool(true))))
        })
        .collect();
    if let Some(name) = given.keys().find(|k| !declared.iter().any(|(d, _)| d == k)) {
        return Err(undeclared("", name));
    }
    if let Some((name, value)) = given.iter().find(|(_, v)| !v.is_string()) {
        let property = format!("/{}", escape(name));
        let reason = format!(
            "{property:?}: argument {name:?} must be a string, not {}",
            kind_of(value)
        );
        return Err(Invalid { property, reason });
    }
    if let Some((name, _)) =
        (declared.iter()).find(|(n, required)| *required && !given.contains_key(*n))
    {
        let property = format!("/{}", escape(name));
        let reason = format!("required argument {name:?} is missing (at {property:?})");
        return Err(Invalid { property, reason });
    }
    Ok(())
}

/// What a JSON value is, without its value.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn declared_strings_pass_and_everything_else_names_its_property() {
        let prompt = json!({"name": "p", "arguments": [
            {"name": "code", "required": true},
            {"name": "style"},
            {"description": "no name: declares nothing"},
        ]});
        assert!(check(&prompt, &json!({"code": "x"})).is_ok());
        assert!(check(&prompt, &json!({"code": "x", "style": "y"})).is_ok());
        let undeclared = check(&prompt, &json!({"code": "x", "exfil": "SECRET"})).unwrap_err();
        assert_eq!(undeclared.property, "/exfil");
        assert!(undeclared.reason.contains("\"exfil\" is not declared"));
        let number = check(&prompt, &json!({"code": "x", "style": 5})).unwrap_err();
        assert_eq!(number.property, "/style");
        assert!(number.reason.contains("a number"), "{}", number.reason);
        let missing = check(&prompt, &json!({"style": "y"})).unwrap_err();
        assert_eq!(missing.property, "/code");
        assert!(missing.reason.contains("required"), "{}", missing.reason);
        assert_eq!(check(&prompt, &json!(["x"])).unwrap_err().property, "");
    }

    #[test]
    fn a_prompt_without_arguments_takes_none_and_values_are_not_repeated() {
        for prompt in [
            json!({"name": "p"}),
            json!({"name": "p", "arguments": "junk"}),
        ] {
            assert!(check(&prompt, &json!({})).is_ok());
            let err = check(&prompt, &json!({"a": "SECRET-VALUE"})).unwrap_err();
            assert_eq!(err.property, "/a");
            assert!(!err.reason.contains("SECRET-VALUE"), "{}", err.reason);
        }
        let prompt = json!({"name": "p", "arguments": [{"name": "a/b"}]});
        let err = check(&prompt, &json!({"a/b": {"SECRET-VALUE": 1}})).unwrap_err();
        assert_eq!(err.property, "/a~1b");
        assert!(!err.reason.contains("SECRET-VALUE"), "{}", err.reason);
    }
}
