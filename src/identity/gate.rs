//! The caller stage's shared state, as the downstreams hold it: the [`Directory`] (behind an
//! [`ArcSwap`], so a reload stores a new one and the next message sees it) and what a refused
//! HTTP client is told about this protected resource (RFC 9728).

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::{Credential, Directory, Principal, Refusal};

/// What the protected-resource metadata says: this gateway's resource URI, who issues its
/// tokens, which scopes exist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    /// `[auth] resource` (when unset, the URI a request reached the gateway at).
    pub resource: Option<String>,
    /// `[auth] authorization_servers`.
    pub authorization_servers: Vec<String>,
    /// `[auth] scopes_supported`.
    pub scopes_supported: Vec<String>,
}

/// Who may pass: the directory every message is checked against, and the metadata.
///
/// ```
/// use mcp_budget::identity::{Credential, Gate};
/// let gate = Gate::open();
/// assert!(gate.is_open());
/// assert_eq!(gate.authenticate(Credential::None).unwrap().name(), "anonymous");
/// ```
#[derive(Debug, Clone)]
pub struct Gate {
    directory: Arc<ArcSwap<Directory>>,
    protected: Arc<Protected>,
    /// Told when a token names a key the JWKS lacks ([`super::jwks::keep_fresh`] listens).
    unknown_kid: Arc<tokio::sync::Notify>,
}

impl Default for Gate {
    fn default() -> Self {
        Self::open()
    }
}

impl Gate {
    /// A gate without clients: every message is the anonymous principal.
    #[must_use]
    pub fn open() -> Self {
        Self::new(Directory::default(), Protected::default())
    }

    /// A gate checking `directory`, describing itself with `protected`.
    #[must_use]
    pub fn new(directory: Directory, protected: Protected) -> Self {
        Self {
            directory: Arc::new(ArcSwap::from_pointee(directory)),
            protected: Arc::new(protected),
            unknown_kid: Arc::default(),
        }
    }

    /// The directory, shared: a reload stores a new one here
    /// (`gate.directory().store(Arc::new(new))`), and every downstream of this gate uses it
    /// from its next message on.
    #[must_use]
    pub fn directory(&self) -> &Arc<ArcSwap<Directory>> {
        &self.directory
    }

    /// Whether no clients are configured (then nothing is checked).
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.directory.load().is_open()
    }

    /// The protected-resource metadata's contents.
    #[must_use]
    pub fn protected(&self) -> &Protected {
        &self.protected
    }

    /// The principal `credential` proves. Without clients, the shared anonymous principal
    /// (no allocation).
    ///
    /// # Errors
    /// [`Refusal`] as [`Directory::authenticate`] gives it.
    pub fn authenticate(&self, credential: Credential<'_>) -> Result<Arc<Principal>, Refusal> {
        let directory = self.directory.load();
        if directory.is_open() {
            return Ok(Principal::anonymous());
        }
        let result = directory.authenticate(credential).map(Arc::new);
        if let (Err(Refusal::Invalid(_)), Credential::Bearer(token)) = (&result, credential) {
            if directory.lacks_key_of(token) {
                self.unknown_kid.notify_one();
            }
        }
        result
    }

    /// Replaces the JWKS of the directory in use (a refresh).
    pub fn set_jwks(&self, keys: &Arc<jsonwebtoken::jwk::JwkSet>) {
        self.directory.rcu(|current| {
            let mut next = Directory::clone(current);
            next.set_jwks(keys.clone());
            next
        });
    }

    /// Notified when a token names a key id the JWKS lacks.
    #[must_use]
    pub fn unknown_kid(&self) -> &tokio::sync::Notify {
        &self.unknown_kid
    }

    /// The stdio transport's principal: the client `name`; unset, the client named after the
    /// local user (`$USER`), else the one named `anonymous`. Without clients, the anonymous
    /// principal.
    ///
    /// # Errors
    /// [`Refusal::Invalid`] when clients are configured and none has that name.
    pub fn stdio(&self, name: Option<&str>) -> Result<Arc<Principal>, Refusal> {
        let directory = self.directory.load();
        if directory.is_open() {
            return Ok(Principal::anonymous());
        }
        let user = std::env::var("USER").ok();
        let tried: Vec<&str> = match name {
            Some(name) => vec![name],
            None => user
                .iter()
                .map(String::as_str)
                .chain([super::ANONYMOUS])
                .collect(),
        };
        tried
            .iter()
            .find_map(|n| directory.stdio(Some(n)).ok())
            .map(Arc::new)
            .ok_or_else(|| {
                Refusal::Invalid(format!(
                    "stdio messages come from no [[client]]: set [downstream] stdio_client to a \
                     client's name (tried {tried:?})"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::{Glob, Scope};
    use crate::identity::{Client, api_key};

    #[test]
    fn a_stored_directory_is_what_the_next_message_meets() {
        let gate = Gate::open();
        assert!(gate.authenticate(Credential::None).is_ok());
        let alice = Client::new("alice", Scope::new(vec![Glob::new("*")], vec![], vec![]))
            .with_key(api_key::digest("ka"));
        gate.directory()
            .store(Arc::new(Directory::new(vec![alice])));
        assert!(!gate.is_open());
        assert_eq!(
            gate.authenticate(Credential::None).err(),
            Some(Refusal::Missing)
        );
        let p = gate.authenticate(Credential::ApiKey("ka")).expect("alice");
        assert_eq!(p.name(), "alice");
        assert_eq!(gate.stdio(Some("alice")).expect("alice").name(), "alice");
        assert!(gate.stdio(Some("bob")).is_err());
    }
}
