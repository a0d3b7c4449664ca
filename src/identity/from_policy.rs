//! The identity directory a policy describes: its `[[client]]` entries with their API keys read
//! from the environment, and the `[auth.jwt]` key set read from its file. This is the I/O
//! half of `[[client]]` and `[auth]`; `policy::client` validates what is written.

use std::sync::Arc;

use jsonwebtoken::jwk::JwkSet;

use super::api_key;
/// Reads a JWKS file (one reader for `check`'s validation and for the directory).
pub use crate::policy::client::read_jwks;
use crate::policy::client::{JwksSource, KeySource};
use crate::policy::{ConfigError, Policy, Problem};

/// The client `spec` describes (name, scope, token scopes, model), before its credentials.
pub(crate) fn client_of(spec: &crate::policy::client::ClientSpec) -> super::Client {
    let client = super::Client::new(spec.name.as_str(), spec.scope.clone())
        .with_token_scopes(spec.token_scopes.clone());
    match &spec.model {
        Some(model) => client.with_model(model.clone()),
        None => client,
    }
}

// `Policy::directory` is written here, next to what it builds, so that `policy` stays free of
// identity I/O (and of a `policy → identity` edge).
impl Policy {
    /// The clients as the caller stage checks them: API keys read from the environment, the
    /// JWKS read from its file (a `jwks_url` policy passes the fetched set as `fetched`).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming every key variable that is not set and a JWKS
    /// that cannot be read or parsed.
    pub fn directory(&self, fetched: Option<Arc<JwkSet>>) -> Result<super::Directory, ConfigError> {
        self.directory_with(&|name| std::env::var(name).ok(), fetched)
    }

    pub(crate) fn directory_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        fetched: Option<Arc<JwkSet>>,
    ) -> Result<super::Directory, ConfigError> {
        use super::Directory;
        let mut problems = Vec::new();
        let mut clients = Vec::new();
        for (i, spec) in self.clients.iter().enumerate() {
            let mut client = client_of(spec);
            match &spec.key {
                Some(KeySource::Digest(d)) => client = client.with_key(*d),
                Some(KeySource::Env(var)) => match env(var).filter(|v| !v.is_empty()) {
                    Some(key) => client = client.with_key(api_key::digest(&key)),
                    None => problems.push(Problem {
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
                    Ok(keys) => Some(Arc::new(keys)),
                    Err(message) => {
                        problems.push(Problem {
                            path: "auth.jwt.jwks_file".into(),
                            line: None,
                            message,
                        });
                        None
                    }
                },
                (JwksSource::Url { url, .. }, None) => {
                    problems.push(Problem {
                        path: "auth.jwt.jwks_url".into(),
                        line: None,
                        message: format!(
                            "the keys at {} have not been fetched",
                            crate::redact::Url(url)
                        ),
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
            Err(ConfigError::Invalid {
                path: "environment".into(),
                problems,
            })
        }
    }
}
