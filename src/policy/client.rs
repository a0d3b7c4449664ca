//! `[[client]]` and `[auth]`: who may call the gateway, with what rights, and how callers
//! prove who they are. Validated into plain values the core takes ([`crate::authz::Scope`],
//! [`crate::identity::Client`]); keys are read from the environment when the policy is
//! resolved, never written in the file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use crate::authz::{ArgRule, Constraint, Glob, Scope};
use crate::identity::api_key::{self, KeyDigest};

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
    pub rules: crate::identity::jwt::JwtRules,
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

/// Validates `[[client]]` entries and `[auth]`; problems as (path, message).
pub(crate) fn validate(
    clients: &[RawClient],
    auth: &RawAuth,
    problems: &mut Vec<(String, String)>,
) -> (Vec<ClientSpec>, AuthSpec) {
    let mut specs: Vec<ClientSpec> = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let at = |key: &str| format!("client[{i}].{key}");
        if c.name.trim().is_empty() {
            problems.push((at("name"), "must not be empty".into()));
        }
        if specs.iter().any(|s| s.name == c.name) {
            problems.push((at("name"), format!("{:?} is already a client", c.name)));
        }
        let key = match (&c.api_key_env, &c.api_key_sha256) {
            (Some(_), Some(_)) => {
                problems.push((
                    at("api_key_env"),
                    "give api_key_env or api_key_sha256, not both".into(),
                ));
                None
            }
            (Some(var), None) if var.trim().is_empty() => {
                problems.push((
                    at("api_key_env"),
                    "must name an environment variable".into(),
                ));
                None
            }
            (Some(var), None) => Some(KeySource::Env(var.clone())),
            (None, Some(hex)) => match api_key::parse_digest(hex) {
                Ok(d) => Some(KeySource::Digest(d)),
                Err(e) => {
                    problems.push((at("api_key_sha256"), e));
                    None
                }
            },
            (None, None) => None,
        };
        if c.allow.is_empty() {
            problems.push((
                at("allow"),
                "lists nothing: a client with no allow globs can call nothing (use [\"*\"] for everything)".into(),
            ));
        }
        let mut rules = Vec::new();
        for (j, r) in c.rule.iter().enumerate() {
            let at = |key: &str| format!("client[{i}].rule[{j}].{key}");
            if r.tools.is_empty() {
                problems.push((at("tools"), "must name at least one tool glob".into()));
            }
            if r.args.is_empty() {
                problems.push((at("args"), "constrains nothing".into()));
            }
            let args = r
                .args
                .iter()
                .map(|(name, raw)| {
                    (
                        name.clone(),
                        constraint(raw, &at(&format!("args.{name}")), problems),
                    )
                })
                .collect();
            rules.push(ArgRule {
                tools: r.tools.iter().map(Glob::new).collect(),
                args,
            });
        }
        specs.push(ClientSpec {
            name: c.name.clone(),
            scope: Scope::new(
                c.allow.iter().map(Glob::new).collect(),
                c.deny.iter().map(Glob::new).collect(),
                rules,
            ),
            model: c.model.clone(),
            key,
            token_scopes: c.token_scopes.clone(),
        });
    }
    (specs, auth_spec(auth, problems))
}

fn constraint(raw: &RawConstraint, at: &str, problems: &mut Vec<(String, String)>) -> Constraint {
    let mut number = |key: &str, v: &Option<Value>| match v {
        None => None,
        Some(v) => v.as_f64().or_else(|| {
            problems.push((format!("{at}.{key}"), "must be a number".into()));
            None
        }),
    };
    let max = number("max", &raw.max);
    let min = number("min", &raw.min);
    if let (Some(lo), Some(hi)) = (min, max) {
        if lo > hi {
            problems.push((format!("{at}.min"), format!("{lo} is above max {hi}")));
        }
    }
    if raw.one_of.as_ref().is_some_and(Vec::is_empty) {
        problems.push((format!("{at}.one_of"), "allows nothing".into()));
    }
    let pattern = raw.pattern.as_deref().and_then(|p| {
        regex::RegexBuilder::new(p)
            .size_limit(MAX_PATTERN_SIZE)
            .build()
            .map_err(|e| {
                problems.push((
                    format!("{at}.pattern"),
                    format!("not a regular expression: {e}"),
                ));
            })
            .ok()
    });
    let constraint = Constraint {
        one_of: raw.one_of.clone(),
        pattern,
        max,
        min,
        max_length: raw.max_length,
        optional: raw.optional,
    };
    if constraint.one_of.is_none()
        && constraint.pattern.is_none()
        && max.is_none()
        && min.is_none()
        && constraint.max_length.is_none()
    {
        problems.push((
            at.to_owned(),
            "constrains nothing: give one_of, pattern, max, min or max_length".into(),
        ));
    }
    constraint
}

fn auth_spec(auth: &RawAuth, problems: &mut Vec<(String, String)>) -> AuthSpec {
    let jwt = auth.jwt.as_ref().and_then(|j| {
        let audiences = match &j.audience {
            Some(a) => a.to_vec(),
            None => auth.resource.iter().cloned().collect(),
        };
        if audiences.is_empty() {
            problems.push((
                "auth.jwt.audience".into(),
                "set it, or [auth] resource (the gateway's URI, which tokens must name as aud)"
                    .into(),
            ));
        }
        let issuers = j.issuer.to_vec();
        if issuers.is_empty() {
            problems.push((
                "auth.jwt.issuer".into(),
                "must name the token issuer".into(),
            ));
        }
        let jwks = match (&j.jwks_file, &j.jwks_url) {
            (Some(file), None) => Some(JwksSource::File(file.clone())),
            (None, Some(url)) => Some(JwksSource::Url {
                url: url.clone(),
                refresh_secs: j.jwks_refresh_secs.unwrap_or(300).max(10),
            }),
            _ => {
                problems.push((
                    "auth.jwt.jwks_file".into(),
                    "give exactly one of jwks_file or jwks_url".into(),
                ));
                None
            }
        };
        Some(JwtSpec {
            rules: crate::identity::jwt::JwtRules {
                issuers,
                audiences,
                principal_claim: j.principal_claim.clone().unwrap_or_else(|| "sub".into()),
                leeway_secs: j.leeway_secs.unwrap_or(60),
            },
            jwks: jwks?,
        })
    });
    if auth.jwt.is_some() && auth.resource.is_none() {
        problems.push((
            "auth.resource".into(),
            "bearer tokens need the gateway's resource URI (for the 401 challenge's metadata)"
                .into(),
        ));
    }
    AuthSpec {
        resource: auth.resource.clone(),
        authorization_servers: auth.authorization_servers.clone(),
        scopes_supported: auth.scopes_supported.clone(),
        jwt,
    }
}

impl super::Policy {
    /// The clients as the caller stage checks them: API keys read from the environment, the
    /// JWKS read from its file (a `jwks_url` policy passes the fetched set as `fetched`).
    ///
    /// # Errors
    /// [`super::ConfigError::Invalid`] naming every key variable that is not set and a JWKS
    /// that cannot be read or parsed.
    pub fn directory(
        &self,
        fetched: Option<std::sync::Arc<jsonwebtoken::jwk::JwkSet>>,
    ) -> Result<crate::identity::Directory, super::ConfigError> {
        self.directory_with(&|name| std::env::var(name).ok(), fetched)
    }

    fn directory_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        fetched: Option<std::sync::Arc<jsonwebtoken::jwk::JwkSet>>,
    ) -> Result<crate::identity::Directory, super::ConfigError> {
        use crate::identity::{Client, Directory};
        let mut problems = Vec::new();
        let mut clients = Vec::new();
        for (i, spec) in self.clients.iter().enumerate() {
            let mut client = Client::new(spec.name.as_str(), spec.scope.clone())
                .with_token_scopes(spec.token_scopes.clone());
            if let Some(model) = &spec.model {
                client = client.with_model(model.clone());
            }
            match &spec.key {
                Some(KeySource::Digest(d)) => client = client.with_key(*d),
                Some(KeySource::Env(var)) => match env(var).filter(|v| !v.is_empty()) {
                    Some(key) => client = client.with_key(api_key::digest(&key)),
                    None => problems.push(super::Problem {
                        path: format!("client[{i}].api_key_env"),
                        line: None,
                        message: format!(
                            "environment variable {var} is not set (it holds {}'s API key)",
                            spec.name
                        ),
                    }),
                },
                None => {}
            }
            clients.push(client);
        }
        let mut directory = Directory::new(clients);
        if let Some(jwt) = &self.auth.jwt {
            let keys = match (&jwt.jwks, fetched) {
                (_, Some(keys)) => Some(keys),
                (JwksSource::File(path), None) => match read_jwks(path) {
                    Ok(keys) => Some(std::sync::Arc::new(keys)),
                    Err(message) => {
                        problems.push(super::Problem {
                            path: "auth.jwt.jwks_file".into(),
                            line: None,
                            message,
                        });
                        None
                    }
                },
                (JwksSource::Url { url, .. }, None) => {
                    problems.push(super::Problem {
                        path: "auth.jwt.jwks_url".into(),
                        line: None,
                        message: format!("the keys at {url} have not been fetched"),
                    });
                    None
                }
            };
            if let Some(keys) = keys {
                directory = directory.with_jwt(jwt.rules.clone(), keys);
            }
        }
        if problems.is_empty() {
            Ok(directory)
        } else {
            Err(super::ConfigError::Invalid {
                path: "environment".into(),
                problems,
            })
        }
    }
}

/// Reads a JWKS file.
///
/// # Errors
/// A message naming the file and what is wrong with it.
pub fn read_jwks(path: &std::path::Path) -> Result<jsonwebtoken::jwk::JwkSet, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not a JWKS: {e}", path.display()))
}

#[cfg(test)]
mod tests;
