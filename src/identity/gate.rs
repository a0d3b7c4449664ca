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

    /// [`Gate::authenticate`] for a connection that remembers its last API key in `memo`: the
    /// same key again, under the same directory, is the same principal without the key's
    /// SHA-256 and the scan of every client's digest (an HTTP client sends its key with every
    /// request on a keep-alive connection). A reload (a new directory) forgets it; bearer
    /// tokens are verified every time (they expire).
    ///
    /// # Errors
    /// As [`Gate::authenticate`].
    pub fn authenticate_with(
        &self,
        credential: Credential<'_>,
        memo: &KeyMemo,
    ) -> Result<Arc<Principal>, Refusal> {
        let Credential::ApiKey(key) = credential else {
            return self.authenticate(credential);
        };
        let directory = self.directory.load();
        if directory.is_open() {
            return Ok(Principal::anonymous());
        }
        if let Some(principal) = memo.recall(&directory, key) {
            return Ok(principal);
        }
        let principal = Arc::new(directory.authenticate(credential)?);
        memo.keep(&directory, key, &principal);
        Ok(principal)
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

/// The last API key one connection presented and the principal it proved, under the directory
/// that said so ([`Gate::authenticate_with`]). The key is compared in constant time.
///
/// ```
/// use mcp_budget::authz::Scope;
/// use mcp_budget::identity::{api_key::digest, Client, Credential, Directory, Gate, KeyMemo};
///
/// let alice = Client::new("alice", Scope::everything()).with_key(digest("k-alice"));
/// let gate = Gate::new(Directory::new(vec![alice]), Default::default());
/// let memo = KeyMemo::default();
/// let first = gate.authenticate_with(Credential::ApiKey("k-alice"), &memo).unwrap();
/// let again = gate.authenticate_with(Credential::ApiKey("k-alice"), &memo).unwrap();
/// assert!(std::sync::Arc::ptr_eq(&first, &again), "remembered");
/// assert!(gate.authenticate_with(Credential::ApiKey("k-eve"), &memo).is_err());
/// // A reload forgets it: the same key is verified again under the new directory.
/// let bob = Client::new("bob", Scope::everything()).with_key(digest("k-bob"));
/// gate.directory().store(std::sync::Arc::new(Directory::new(vec![bob])));
/// assert!(gate.authenticate_with(Credential::ApiKey("k-alice"), &memo).is_err(), "revoked");
/// ```
#[derive(Debug, Default)]
pub struct KeyMemo(std::sync::Mutex<Option<Remembered>>);

#[derive(Debug)]
struct Remembered {
    /// The directory that verified the key (held weakly: a reload frees the old one, and the
    /// pointer is never reused while this is held).
    directory: std::sync::Weak<Directory>,
    key: Box<[u8]>,
    principal: Arc<Principal>,
}

impl KeyMemo {
    /// The principal of `key` when it is the key remembered under `directory`.
    fn recall(&self, directory: &Arc<Directory>, key: &str) -> Option<Arc<Principal>> {
        use subtle::ConstantTimeEq;
        let memo = crate::lock::lock(&self.0);
        let kept = memo.as_ref()?;
        let same = std::ptr::eq(kept.directory.as_ptr(), Arc::as_ptr(directory))
            && bool::from(kept.key.as_ref().ct_eq(key.as_bytes()));
        same.then(|| kept.principal.clone())
    }

    /// Remembers that `key` proved `principal` under `directory`.
    fn keep(&self, directory: &Arc<Directory>, key: &str, principal: &Arc<Principal>) {
        *crate::lock::lock(&self.0) = Some(Remembered {
            directory: Arc::downgrade(directory),
            key: key.as_bytes().into(),
            principal: principal.clone(),
        });
    }
}
