//! Who is calling: the credentials a message came with, checked against the policy's clients,
//! give a [`Principal`] — or a refusal that tells the client how to authenticate.
//!
//! - **API keys** (`Authorization: Bearer <key>` or `X-Api-Key: <key>`), kept only as SHA-256
//!   digests and compared in constant time ([`api_key`]).
//! - **OAuth 2.1 bearer JWTs**, checked as an MCP resource server checks them ([`jwt`]): the
//!   principal is a claim; it is the `[[client]]` of that name, or else the first client whose
//!   `token_scopes` the token carries all of.
//! - **stdio**: one configured client (`[downstream] stdio_client`), the local user by default.
//! - **No clients configured**: one anonymous principal with every right, as before clients
//!   existed. Once clients exist, a message without valid credentials is refused.
//!
//! ```
//! use mcp_budget::authz::{Glob, Scope};
//! use mcp_budget::identity::{api_key, Client, Credential, Directory, Refusal};
//!
//! let alice = Client::new("alice", Scope::new(vec![Glob::new("time/*")], vec![], vec![]))
//!     .with_key(api_key::digest("k-alice"));
//! let dir = Directory::new(vec![alice]);
//! assert_eq!(dir.authenticate(Credential::ApiKey("k-alice")).unwrap().name(), "alice");
//! assert!(matches!(dir.authenticate(Credential::None), Err(Refusal::Missing)));
//! assert!(matches!(dir.authenticate(Credential::ApiKey("nope")), Err(Refusal::Invalid(_))));
//! ```

pub mod api_key;
pub mod challenge;
mod from_policy;
mod gate;
pub mod jwks;
pub mod jwt;

pub(crate) use from_policy::client_of;
pub use from_policy::read_jwks;
pub use gate::{Gate, KeyMemo, Protected};

use std::sync::Arc;

use jsonwebtoken::jwk::JwkSet;

use crate::authz::Scope;
use api_key::{ApiKeys, KeyDigest};
use jwt::JwtRules;

pub use crate::policy::client::ANONYMOUS;

/// One `[[client]]`: a name, its rights, and how it proves it is itself.
#[derive(Debug, Clone)]
pub struct Client {
    name: Arc<str>,
    scope: Arc<Scope>,
    model: Option<String>,
    keys: Vec<KeyDigest>,
    token_scopes: Vec<String>,
}

impl Client {
    /// A client with `scope` and no credentials yet.
    #[must_use]
    pub fn new(name: impl Into<Arc<str>>, scope: Scope) -> Self {
        Self {
            name: name.into(),
            scope: Arc::new(scope),
            model: None,
            keys: Vec::new(),
            token_scopes: Vec::new(),
        }
    }

    /// Adds an API key (its digest).
    #[must_use]
    pub fn with_key(mut self, digest: KeyDigest) -> Self {
        self.keys.push(digest);
        self
    }

    /// The model profile this client's budget is planned for.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// A bearer token carrying all of `scopes` is this client (when no client has the token's
    /// principal as its name).
    #[must_use]
    pub fn with_token_scopes(mut self, scopes: Vec<String>) -> Self {
        self.token_scopes = scopes;
        self
    }

    /// The client's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its rights.
    #[must_use]
    pub fn scope(&self) -> &Arc<Scope> {
        &self.scope
    }

    /// Its model profile, if it has its own.
    #[must_use]
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
}

/// How a principal proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Nobody asked: a policy without clients.
    Anonymous,
    /// An API key.
    ApiKey,
    /// An OAuth bearer token.
    Bearer,
    /// The stdio transport's configured client.
    Stdio,
    /// Named by the gateway that embeds mcp-budget's layers ([`crate::embed::Caller`]).
    Embedder,
}

/// Who a message is from.
#[derive(Debug, Clone)]
pub struct Principal {
    client: Client,
    via: Via,
    /// The token's subject when it differs from the client name (a scope-mapped token).
    subject: Option<String>,
}

impl Principal {
    /// The anonymous principal of a policy without clients: every right. One shared value, so
    /// a message of an open gateway costs a reference count, not an allocation.
    #[must_use]
    pub fn anonymous() -> Arc<Self> {
        static ANON: std::sync::OnceLock<Arc<Principal>> = std::sync::OnceLock::new();
        ANON.get_or_init(|| {
            Arc::new(Self {
                client: Client::new(ANONYMOUS, Scope::everything()),
                via: Via::Anonymous,
                subject: None,
            })
        })
        .clone()
    }

    /// The client name (what audit lines and errors show).
    #[must_use]
    pub fn name(&self) -> &str {
        self.client.name()
    }

    /// The client behind it.
    #[must_use]
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// How it authenticated.
    #[must_use]
    pub(crate) fn via(&self) -> Via {
        self.via
    }

    /// The bearer token's own principal claim, when the client was found by scopes.
    #[must_use]
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }
}

/// What a message presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential<'a> {
    /// Nothing.
    None,
    /// `X-Api-Key`, or a bearer value that is not a JWT.
    ApiKey(&'a str),
    /// A bearer value shaped like a JWT (three base64url parts).
    Bearer(&'a str),
}

impl<'a> Credential<'a> {
    /// From the `Authorization` and `X-Api-Key` header values. `Authorization` wins when both
    /// are sent.
    #[must_use]
    pub fn from_headers(authorization: Option<&'a str>, x_api_key: Option<&'a str>) -> Self {
        if let Some(value) = authorization {
            let value = value.trim();
            let token = value
                .split_once(' ')
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map_or("", |(_, t)| t.trim());
            if looks_like_jwt(token) {
                return Self::Bearer(token);
            }
            return Self::ApiKey(token);
        }
        x_api_key.map_or(Self::None, |k| Self::ApiKey(k.trim()))
    }
}

fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Why a message was not given a principal: the HTTP downstream answers `401` with a
/// [`challenge`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No credentials where clients are configured.
    #[error(
        "this gateway needs credentials: an API key (Authorization: Bearer KEY or X-Api-Key) or an OAuth bearer token"
    )]
    Missing,
    /// Credentials that match no client (the reason is safe to show the client).
    #[error("the credentials were not accepted: {0}")]
    Invalid(String),
    /// A valid bearer token whose principal is no client and whose scopes match none: the
    /// client needs a token with more scopes (HTTP 403, `insufficient_scope`).
    #[error("the token is valid but grants no access here: {0}")]
    Insufficient(String),
}

/// The policy's clients and how to check their credentials.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    clients: Vec<Client>,
    keys: ApiKeys,
    jwt: Option<(JwtRules, Arc<JwkSet>)>,
}

impl Directory {
    /// A directory of `clients` (API keys only until [`Directory::with_jwt`]).
    #[must_use]
    pub fn new(clients: Vec<Client>) -> Self {
        let keys = ApiKeys::new(
            clients
                .iter()
                .flat_map(|c| c.keys.iter().map(|k| (c.name.to_string(), *k)))
                .collect(),
        );
        Self {
            clients,
            keys,
            jwt: None,
        }
    }

    /// Accepts bearer JWTs checked by `rules` against `keys`.
    #[must_use]
    pub fn with_jwt(mut self, rules: JwtRules, keys: Arc<JwkSet>) -> Self {
        self.jwt = Some((rules, keys));
        self
    }

    /// The JWKS in use, if bearer tokens are accepted (a reload passes it on to the new
    /// directory, [`crate::policy::Policy::directory`]'s `fetched`).
    #[must_use]
    pub fn jwks(&self) -> Option<Arc<JwkSet>> {
        self.jwt.as_ref().map(|(_, keys)| keys.clone())
    }

    /// Replaces the JWKS (after a refresh); no effect without JWT rules.
    pub fn set_jwks(&mut self, keys: Arc<JwkSet>) {
        if let Some((_, current)) = &mut self.jwt {
            *current = keys;
        }
    }

    /// Whether `token` names a key id (`kid`) that the JWKS in use does not have: a reason to
    /// fetch the keys again (the authorization server may have rotated them).
    #[must_use]
    pub fn lacks_key_of(&self, token: &str) -> bool {
        let Some((_, keys)) = &self.jwt else {
            return false;
        };
        jsonwebtoken::decode_header(token)
            .ok()
            .and_then(|h| h.kid)
            .is_some_and(|kid| keys.find(&kid).is_none())
    }

    /// Whether clients are configured (then every message must authenticate).
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.clients.is_empty()
    }

    /// The client of this name.
    #[must_use]
    pub fn client(&self, name: &str) -> Option<&Client> {
        self.clients.iter().find(|c| &*c.name == name)
    }

    /// The principal `credential` proves.
    ///
    /// # Errors
    /// [`Refusal`] when clients are configured and the credential is missing or matches none.
    pub fn authenticate(&self, credential: Credential<'_>) -> Result<Principal, Refusal> {
        if self.is_open() {
            return Ok(Principal::anonymous().as_ref().clone());
        }
        match credential {
            Credential::None => Err(Refusal::Missing),
            Credential::ApiKey(key) => self
                .keys
                .verify(key)
                .and_then(|name| self.client(name))
                .map(|c| Principal {
                    client: c.clone(),
                    via: Via::ApiKey,
                    subject: None,
                })
                .ok_or_else(|| Refusal::Invalid("unknown API key".into())),
            Credential::Bearer(token) => self.bearer(token),
        }
    }

    fn bearer(&self, token: &str) -> Result<Principal, Refusal> {
        let Some((rules, keys)) = &self.jwt else {
            // A JWT-shaped API key is still a key.
            return self.authenticate(Credential::ApiKey(token));
        };
        let verified =
            jwt::verify(token, keys, rules).map_err(|e| Refusal::Invalid(e.to_string()))?;
        if let Some(c) = self.client(&verified.principal) {
            return Ok(Principal {
                client: c.clone(),
                via: Via::Bearer,
                subject: None,
            });
        }
        self.clients
            .iter()
            .find(|c| {
                !c.token_scopes.is_empty()
                    && c.token_scopes.iter().all(|s| verified.scopes.contains(s))
            })
            .map(|c| Principal {
                client: c.clone(),
                via: Via::Bearer,
                subject: Some(verified.principal.clone()),
            })
            .ok_or_else(|| {
                Refusal::Insufficient(format!(
                    "the token's principal {:?} is no client of this gateway, and its scopes match none",
                    verified.principal
                ))
            })
    }

    /// The stdio transport's principal: the client `name` (or the anonymous one when no clients
    /// are configured).
    ///
    /// # Errors
    /// [`Refusal::Invalid`] when clients are configured and none has that name.
    pub fn stdio(&self, name: Option<&str>) -> Result<Principal, Refusal> {
        if self.is_open() {
            return self.authenticate(Credential::None);
        }
        let name = name.unwrap_or(ANONYMOUS);
        self.client(name)
            .map(|c| Principal {
                client: c.clone(),
                via: Via::Stdio,
                subject: None,
            })
            .ok_or_else(|| Refusal::Invalid(format!("no [[client]] named {name:?} for stdio")))
    }

    /// The principal an embedding gateway names ([`crate::embed::Caller`]): its `[[client]]`
    /// `name` (the anonymous principal when no clients are configured), with the embedder's
    /// own id for the caller as `subject` when it differs from the client name.
    ///
    /// # Errors
    /// [`Refusal::Invalid`] when clients are configured and none has that name, or none was
    /// named.
    pub fn embedded(
        &self,
        name: Option<&str>,
        subject: Option<&str>,
    ) -> Result<Principal, Refusal> {
        if self.is_open() {
            return self.authenticate(Credential::None);
        }
        let name = name.ok_or_else(|| {
            Refusal::Invalid("the embedder named no [[client]] for this request".into())
        })?;
        self.client(name)
            .map(|c| Principal {
                client: c.clone(),
                via: Via::Embedder,
                subject: subject.filter(|s| *s != name).map(str::to_owned),
            })
            .ok_or_else(|| Refusal::Invalid(format!("no [[client]] named {name:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::Glob;

    fn scope(glob: &str) -> Scope {
        Scope::new(vec![Glob::new(glob)], vec![], vec![])
    }

    #[test]
    fn headers_become_credentials() {
        assert_eq!(Credential::from_headers(None, None), Credential::None);
        assert_eq!(
            Credential::from_headers(Some("Bearer k1"), None),
            Credential::ApiKey("k1")
        );
        assert_eq!(
            Credential::from_headers(Some("bearer a.b.c"), None),
            Credential::Bearer("a.b.c")
        );
        assert_eq!(
            Credential::from_headers(None, Some(" k2 ")),
            Credential::ApiKey("k2")
        );
        assert_eq!(
            Credential::from_headers(Some("Basic xyz"), Some("k2")),
            Credential::ApiKey(""),
            "a non-bearer Authorization is no key, and X-Api-Key does not rescue it"
        );
    }

    #[test]
    fn no_clients_means_one_anonymous_principal() {
        let dir = Directory::default();
        let p = dir.authenticate(Credential::None).expect("open");
        assert_eq!((p.name(), p.via()), (ANONYMOUS, Via::Anonymous));
        assert_eq!(dir.stdio(None).expect("open").name(), ANONYMOUS);
    }

    #[test]
    fn keys_pick_their_client_and_stdio_its_configured_one() {
        let dir = Directory::new(vec![
            Client::new("alice", scope("a/*")).with_key(api_key::digest("ka")),
            Client::new("bob", scope("b/*"))
                .with_key(api_key::digest("kb"))
                .with_model("claude-haiku-4-5"),
        ]);
        let bob = dir.authenticate(Credential::ApiKey("kb")).expect("bob");
        assert_eq!(
            (bob.name(), bob.client().model()),
            ("bob", Some("claude-haiku-4-5"))
        );
        assert!(matches!(
            dir.authenticate(Credential::Bearer("a.b.c")),
            Err(Refusal::Invalid(_))
        ));
        assert_eq!(dir.stdio(Some("alice")).expect("alice").via(), Via::Stdio);
        assert!(dir.stdio(None).is_err(), "no client named anonymous");
    }
}
