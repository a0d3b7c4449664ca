//! `[[client]]` and `[auth]`: who may call the gateway, with what rights, and how callers
//! prove who they are. Validated into plain values the core takes ([`crate::authz::Scope`],
//! `crate::identity::Client`, built by `identity::from_policy`); keys are read from the
//! environment when the policy is resolved, never written in the file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::problems::{At, Section};
pub use crate::authz::Scope;
use crate::authz::{ArgRule, Constraint, Glob};

/// The name of the anonymous principal of a policy without clients.
pub const ANONYMOUS: &str = "anonymous";

/// A SHA-256 digest of a key (`api_key_sha256`).
pub type KeyDigest = [u8; 32];

/// Parses a digest written as 64 hex digits (`api_key_sha256`).
///
/// # Errors
/// A message saying what is wrong with the text.
pub fn parse_digest(hex: &str) -> Result<KeyDigest, String> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(
            "must be 64 hex digits: the SHA-256 of the key (`printf %s KEY | sha256sum`)".into(),
        );
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte =
            u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|e| format!("not hex: {e}"))?;
    }
    Ok(out)
}

/// How bearer tokens are checked (`[auth.jwt]`).
#[derive(Debug, Clone)]
pub struct JwtRules {
    /// Accepted `iss` values.
    pub issuers: Vec<String>,
    /// Accepted `aud` values (the gateway's resource URI).
    pub audiences: Vec<String>,
    /// The claim that names the principal.
    pub principal_claim: String,
    /// Allowed clock skew for `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
}

/// Longest regular expression accepted in an argument rule, compiled (bytes of program).
const MAX_PATTERN_SIZE: usize = 1 << 16;

/// One `[[client]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawClient {
    /// The client's name (audit lines, errors, JWT principals).
    pub name: String,
    /// Environment variable holding this client's API key.
    pub api_key_env: Option<String>,
    /// SHA-256 (hex) of this client's API key.
    pub api_key_sha256: Option<String>,
    /// `server/tool` globs (`prompt:` / `resource:` prefixes for those kinds). Default: none.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Globs that win over `allow`. Default: none.
    #[serde(default)]
    pub deny: Vec<String>,
    /// This client's budget profile. Default: `[budget] model`.
    pub model: Option<String>,
    /// A bearer token carrying all of these scopes is this client. Default: none.
    #[serde(default)]
    pub token_scopes: Vec<String>,
    /// Argument constraints.
    #[serde(default)]
    pub rule: Vec<RawRule>,
    /// This client's credentials for `share = "per_client"` upstreams, by upstream name
    /// (`[client.upstream.<name>]`). Default: none.
    #[serde(default)]
    pub upstream: BTreeMap<String, super::share::RawCredentials>,
}

/// One `[[client.rule]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawRule {
    /// Which tools (`server/tool` globs).
    pub tools: Vec<String>,
    /// Constraint per argument.
    #[serde(default)]
    pub args: BTreeMap<String, RawConstraint>,
}

/// One `args.NAME = { … }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawConstraint {
    /// Allowed values.
    pub one_of: Option<Vec<Value>>,
    /// Regular expression the whole string must match.
    pub pattern: Option<String>,
    /// Largest number.
    pub max: Option<Value>,
    /// Smallest number.
    pub min: Option<Value>,
    /// Longest string (characters) or array (items).
    pub max_length: Option<usize>,
    /// The argument may be left out. Default: false (a constrained argument is required).
    #[serde(default)]
    pub optional: bool,
}

/// `[auth]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawAuth {
    /// The gateway's resource URI (`aud` of its tokens; RFC 9728 `resource`).
    pub resource: Option<String>,
    /// Authorization servers named in the protected-resource metadata.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes named in the metadata's `scopes_supported`.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// Bearer JWTs.
    pub jwt: Option<RawJwt>,
}

/// `[auth.jwt]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawJwt {
    /// Accepted `iss` (one or a list).
    pub issuer: OneOrMany,
    /// Accepted `aud` (one or a list). Default: `[auth] resource`.
    pub audience: Option<OneOrMany>,
    /// A JWKS file.
    pub jwks_file: Option<PathBuf>,
    /// A JWKS URL (fetched at start, cached, refreshed).
    pub jwks_url: Option<String>,
    /// Claim naming the principal. Default: `sub`.
    pub principal_claim: Option<String>,
    /// Clock skew allowed on `exp` / `nbf`, seconds. Default: 60.
    pub leeway_secs: Option<u64>,
    /// How often a JWKS URL is fetched again, seconds. Default: 300.
    pub jwks_refresh_secs: Option<u64>,
}

/// A string or a list of strings.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One.
    One(String),
    /// Several.
    Many(Vec<String>),
}

impl OneOrMany {
    fn to_vec(&self) -> Vec<String> {
        match self {
            Self::One(s) => vec![s.clone()],
            Self::Many(v) => v.clone(),
        }
    }
}

/// Where a client's API key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// An environment variable, read when the policy is resolved.
    Env(String),
    /// A digest written in the policy.
    Digest(KeyDigest),
}

/// One validated `[[client]]`.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// Name.
    pub name: String,
    /// Its rights.
    pub scope: Scope,
    /// Its model profile, if its own.
    pub model: Option<String>,
    /// Its API key, if any.
    pub key: Option<KeySource>,
    /// Scopes that map a bearer token to it.
    pub token_scopes: Vec<String>,
}

/// Where JWT signing keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A file.
    File(PathBuf),
    /// A URL, refreshed every `refresh_secs`.
    Url {
        /// The URL.
        url: String,
        /// Refresh period.
        refresh_secs: u64,
    },
}

/// `[auth.jwt]` validated.
#[derive(Debug, Clone)]
pub struct JwtSpec {
    /// The checks.
    pub rules: JwtRules,
    /// The keys.
    pub jwks: JwksSource,
}

/// `[auth]` validated.
#[derive(Debug, Clone, Default)]
pub struct AuthSpec {
    /// Resource URI.
    pub resource: Option<String>,
    /// Authorization servers for the metadata.
    pub authorization_servers: Vec<String>,
    /// `scopes_supported` for the metadata.
    pub scopes_supported: Vec<String>,
    /// Bearer JWTs, when configured.
    pub jwt: Option<JwtSpec>,
}

impl Section for RawClient {
    type Valid = ClientSpec;
    /// The clients before this one (names must be unique).
    type Context<'c> = &'c [ClientSpec];

    fn validate(self, earlier: &[ClientSpec], mut at: At<'_>) -> ClientSpec {
        if self.name.trim().is_empty() {
            at.push_at("name", "must not be empty");
        }
        if earlier.iter().any(|s| s.name == self.name) {
            at.push_at("name", format!("{:?} is already a client", self.name));
        }
        let key = match (self.api_key_env, &self.api_key_sha256) {
            (Some(_), Some(_)) => {
                at.push_at(
                    "api_key_env",
                    "give api_key_env or api_key_sha256, not both",
                );
                None
            }
            (Some(var), None) if var.trim().is_empty() => {
                at.push_at("api_key_env", "must name an environment variable");
                None
            }
            (Some(var), None) => Some(KeySource::Env(var)),
            (None, Some(hex)) => at
                .parse("api_key_sha256", Some(hex.as_str()), parse_digest)
                .map(KeySource::Digest),
            (None, None) => None,
        };
        if self.allow.is_empty() {
            at.push_at(
                "allow",
                "lists nothing: a client with no allow globs can call nothing (use [\"*\"] for everything)",
            );
        }
        let mut rules = Vec::new();
        let mut in_rule = at.at("rule");
        for (j, r) in self.rule.into_iter().enumerate() {
            rules.push(r.validate((), in_rule.index(j)));
        }
        ClientSpec {
            name: self.name,
            scope: Scope::new(
                self.allow.iter().map(Glob::new).collect(),
                self.deny.iter().map(Glob::new).collect(),
                rules,
            ),
            model: self.model,
            key,
            token_scopes: self.token_scopes,
        }
    }
}

impl Section for RawRule {
    type Valid = ArgRule;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> ArgRule {
        if self.tools.is_empty() {
            at.push_at("tools", "must name at least one tool glob");
        }
        if self.args.is_empty() {
            at.push_at("args", "constrains nothing");
        }
        let mut in_args = at.at("args");
        let args = (self.args.into_iter())
            .map(|(name, raw)| {
                let constraint = raw.validate((), in_args.at(&name));
                (name, constraint)
            })
            .collect();
        ArgRule {
            tools: self.tools.iter().map(Glob::new).collect(),
            args,
        }
    }
}

impl Section for RawConstraint {
    type Valid = Constraint;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> Constraint {
        let mut number = |key: &str, v: Option<Value>| {
            at.parse(key, v, |v| v.as_f64().ok_or("must be a number"))
        };
        let max = number("max", self.max);
        let min = number("min", self.min);
        if let (Some(lo), Some(hi)) = (min, max) {
            if lo > hi {
                at.push_at("min", format!("{lo} is above max {hi}"));
            }
        }
        if self.one_of.as_ref().is_some_and(Vec::is_empty) {
            at.push_at("one_of", "allows nothing");
        }
        let pattern = at.parse("pattern", self.pattern.as_deref(), |p| {
            (regex::RegexBuilder::new(p)
                .size_limit(MAX_PATTERN_SIZE)
                .build())
            .map_err(|e| format!("not a regular expression: {e}"))
        });
        let constraint = Constraint {
            one_of: self.one_of,
            pattern,
            max,
            min,
            max_length: self.max_length,
            optional: self.optional,
        };
        if constraint.one_of.is_none()
            && constraint.pattern.is_none()
            && max.is_none()
            && min.is_none()
            && constraint.max_length.is_none()
        {
            at.push("constrains nothing: give one_of, pattern, max, min or max_length");
        }
        constraint
    }
}

impl Section for RawAuth {
    type Valid = AuthSpec;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> AuthSpec {
        let jwt_set = self.jwt.is_some();
        let jwt = self
            .jwt
            .and_then(|j| j.validate(&self.resource, at.at("jwt")));
        if jwt_set && self.resource.is_none() {
            at.push_at(
                "resource",
                "bearer tokens need the gateway's resource URI (for the 401 challenge's metadata)",
            );
        }
        AuthSpec {
            resource: self.resource,
            authorization_servers: self.authorization_servers,
            scopes_supported: self.scopes_supported,
            jwt,
        }
    }
}

impl RawJwt {
    /// `[auth.jwt]`, given `[auth] resource` (the default audience); `None` when no JWKS.
    fn validate(self, resource: &Option<String>, mut at: At<'_>) -> Option<JwtSpec> {
        let audiences = match &self.audience {
            Some(a) => a.to_vec(),
            None => resource.iter().cloned().collect(),
        };
        if audiences.is_empty() {
            at.push_at(
                "audience",
                "set it, or [auth] resource (the gateway's URI, which tokens must name as aud)",
            );
        }
        let issuers = self.issuer.to_vec();
        if issuers.is_empty() {
            at.push_at("issuer", "must name the token issuer");
        }
        let max = super::problems::MAX_SECS;
        let leeway_secs = at.bounded("leeway_secs", self.leeway_secs, max);
        let refresh_secs = at.bounded("jwks_refresh_secs", self.jwks_refresh_secs, max);
        let jwks = match (self.jwks_file, self.jwks_url) {
            (Some(file), None) => {
                // `check` opens it: a missing or broken file is a problem with its line, not a
                // failure at `serve`.
                let readable = at.file_exists("jwks_file", Some(&file), read_jwks);
                readable.map(|_| JwksSource::File(file))
            }
            (None, Some(url)) => Some(JwksSource::Url {
                url,
                refresh_secs: refresh_secs.unwrap_or(300).max(10),
            }),
            _ => {
                at.push_at("jwks_file", "give exactly one of jwks_file or jwks_url");
                None
            }
        };
        Some(JwtSpec {
            rules: JwtRules {
                issuers,
                audiences,
                principal_claim: self.principal_claim.unwrap_or_else(|| "sub".into()),
                leeway_secs: leeway_secs.unwrap_or(60),
            },
            jwks: jwks?,
        })
    }
}

/// Reads a JWKS file (`[auth.jwt] jwks_file`): what `check` opens and `serve` loads.
///
/// # Errors
/// A message naming the file and what is wrong with it.
pub fn read_jwks(path: &std::path::Path) -> Result<jsonwebtoken::jwk::JwkSet, String> {
    let text = crate::files::read_text(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not a JWKS: {e}", path.display()))
}

#[cfg(test)]
mod tests;
