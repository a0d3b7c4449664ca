//! What a refused client is told: the `WWW-Authenticate` challenge of RFC 6750 with the
//! `resource_metadata` parameter of RFC 9728, and the protected-resource metadata document that
//! parameter points to (which is how MCP clients find the authorization server).

use serde_json::{Value, json};

/// The well-known path of protected-resource metadata (RFC 9728 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Where the metadata of `resource` (an absolute URI such as `https://gw.example/mcp`) lives:
/// the well-known path inserted between the authority and the resource's path.
///
/// ```
/// use mcp_budget::identity::challenge::metadata_url;
/// assert_eq!(
///     metadata_url("https://gw.example/mcp"),
///     "https://gw.example/.well-known/oauth-protected-resource/mcp"
/// );
/// assert_eq!(
///     metadata_url("http://127.0.0.1:8931"),
///     "http://127.0.0.1:8931/.well-known/oauth-protected-resource"
/// );
/// ```
#[must_use]
pub fn metadata_url(resource: &str) -> String {
    let (scheme, rest) = resource.split_once("://").unwrap_or(("https", resource));
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let path = path.trim_end_matches('/');
    format!("{scheme}://{authority}{METADATA_PATH}{path}")
}

/// A `WWW-Authenticate: Bearer …` value. `error` is an RFC 6750 code (`invalid_token`,
/// `insufficient_scope`) with its description; `scope` is what the request needed.
///
/// ```
/// use mcp_budget::identity::challenge::www_authenticate;
/// assert_eq!(
///     www_authenticate("https://gw/.well-known/oauth-protected-resource", None, None),
///     r#"Bearer resource_metadata="https://gw/.well-known/oauth-protected-resource""#
/// );
/// assert_eq!(
///     www_authenticate("m", Some(("invalid_token", "the token has \"expired\"")), None),
///     r#"Bearer resource_metadata="m", error="invalid_token", error_description="the token has 'expired'""#
/// );
/// ```
#[must_use]
pub fn www_authenticate(
    metadata: &str,
    error: Option<(&str, &str)>,
    scope: Option<&str>,
) -> String {
    let mut out = format!("Bearer resource_metadata={}", quoted(metadata));
    if let Some((code, description)) = error {
        out.push_str(&format!(
            ", error={}, error_description={}",
            quoted(code),
            quoted(description)
        ));
    }
    if let Some(scope) = scope {
        out.push_str(&format!(", scope={}", quoted(scope)));
    }
    out
}

/// An auth-param value: quoted, with the characters a quoted-string cannot hold replaced
/// (`"` → `'`, `\` and controls dropped), so upstream-independent text can never break the
/// header.
fn quoted(text: &str) -> String {
    let clean: String = text
        .chars()
        .filter(|c| !c.is_control() && *c != '\\')
        .map(|c| if c == '"' { '\'' } else { c })
        .collect();
    format!("\"{clean}\"")
}

/// The protected-resource metadata document (RFC 9728 §2).
#[must_use]
pub fn metadata(resource: &str, authorization_servers: &[String], scopes: &[String]) -> Value {
    let mut doc = json!({
        "resource": resource,
        "authorization_servers": authorization_servers,
        "bearer_methods_supported": ["header"],
    });
    if !scopes.is_empty() {
        doc["scopes_supported"] = json!(scopes);
    }
    doc
}
