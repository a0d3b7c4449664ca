//! OAuth 2.1 bearer tokens, checked as an MCP resource server checks them: the signature
//! against the authorization server's JWKS, then `iss`, `aud` (this gateway's resource URI),
//! `exp` and `nbf` with a clock skew. The principal is one claim (`sub` by default); scopes
//! come from `scope` (space-separated) or `scp` (a list or a string).
//!
//! Only asymmetric algorithms are accepted, and only the one the chosen key is for: a token
//! whose header says `HS256` can never be checked against a public key used as an HMAC secret,
//! and one whose header names another algorithm than its key's `alg` (a `PS256` token from a
//! key marked `RS256`, which the same RSA key would verify) is refused; a key without `alg`
//! takes any asymmetric algorithm of its type.

use jsonwebtoken::jwk::{Jwk, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

pub use crate::policy::client::JwtRules;

/// A token that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The principal claim's value.
    pub principal: String,
    /// The token's scopes.
    pub scopes: Vec<String>,
}

/// Why a token was refused, as RFC 6750 describes it to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// Not a JWT, a bad signature, no key for it, wrong issuer or audience, expired.
    #[error("invalid_token: {0}")]
    Invalid(String),
}

/// Checks `token` against `keys` and `rules`.
///
/// # Errors
/// [`JwtError::Invalid`] with a description a client developer can act on (which check
/// failed), never the token itself.
pub fn verify(token: &str, keys: &JwkSet, rules: &JwtRules) -> Result<Verified, JwtError> {
    let invalid = |why: String| JwtError::Invalid(why);
    let header =
        jsonwebtoken::decode_header(token).map_err(|e| invalid(format!("not a JWT ({e})")))?;
    if !is_asymmetric(header.alg) {
        return Err(invalid(format!(
            "algorithm {:?} is not accepted (only RS*, PS*, ES*, EdDSA)",
            header.alg
        )));
    }
    let jwk = pick_key(keys, header.kid.as_deref())?;
    if let Some(pinned) = jwk.common.key_algorithm
        && pinned != KeyAlgorithm::from(header.alg)
    {
        return Err(invalid(format!(
            "the token's algorithm {:?} is not its key's ({pinned})",
            header.alg
        )));
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|e| invalid(format!("unusable key ({e})")))?;
    let mut validation = Validation::new(header.alg);
    validation.leeway = rules.leeway_secs;
    validation.validate_nbf = true;
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.set_issuer(&rules.issuers);
    validation.set_audience(&rules.audiences);
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|e| invalid(describe(&e)))?;
    let claims = data.claims;
    let principal = match claims.get(&rules.principal_claim) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(invalid(format!(
                "the token has no {:?} claim to name its principal",
                rules.principal_claim
            )));
        }
    };
    Ok(Verified {
        principal,
        scopes: scopes(&claims),
    })
}

fn is_asymmetric(alg: Algorithm) -> bool {
    !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

fn pick_key<'k>(keys: &'k JwkSet, kid: Option<&str>) -> Result<&'k Jwk, JwtError> {
    match kid {
        Some(kid) => keys
            .find(kid)
            .ok_or_else(|| JwtError::Invalid(format!("no key with kid {kid:?} in the JWKS"))),
        None if keys.keys.len() == 1 => Ok(&keys.keys[0]),
        None => Err(JwtError::Invalid(
            "the token names no key (kid) and the JWKS has several".into(),
        )),
    }
}

fn describe(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::ExpiredSignature => "the token has expired".into(),
        K::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        K::InvalidAudience => "the token is for another audience (aud)".into(),
        K::InvalidIssuer => "the token is from another issuer (iss)".into(),
        K::InvalidSignature => "the signature does not verify".into(),
        K::InvalidAlgorithm => "the token's algorithm does not match its key".into(),
        K::MissingRequiredClaim(c) => format!("the token has no {c} claim"),
        other => format!("{other:?}"),
    }
}

/// `scope` (space-separated, RFC 8693 / RFC 9068) or `scp` (a list or a string).
fn scopes(claims: &Map<String, Value>) -> Vec<String> {
    let split = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => split(s),
        (_, Some(Value::Array(items))) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
