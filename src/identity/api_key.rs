//! API keys: each client's key is kept only as its SHA-256 digest, and a presented key is
//! compared against every digest in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use crate::policy::client::{KeyDigest, parse_digest};

/// The digest of `key`.
#[must_use]
pub fn digest(key: &str) -> KeyDigest {
    Sha256::digest(key.as_bytes()).into()
}

/// The clients' key digests, in policy order.
///
/// ```
/// use mcp_budget::identity::api_key::{digest, ApiKeys};
///
/// let keys = ApiKeys::new(vec![("alice".into(), digest("k-alice")), ("bob".into(), digest("k-bob"))]);
/// assert_eq!(keys.verify("k-bob"), Some("bob"));
/// assert_eq!(keys.verify("k-eve"), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ApiKeys {
    entries: Vec<(String, KeyDigest)>,
}

impl ApiKeys {
    /// Keys from (client name, digest) pairs.
    #[must_use]
    pub fn new(entries: Vec<(String, KeyDigest)>) -> Self {
        Self { entries }
    }

    /// Whether no client has a key.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The client whose key `presented` is. Every digest is compared (no early exit), so the
    /// time taken says nothing about which key, or how much of one, matched.
    #[must_use]
    pub fn verify(&self, presented: &str) -> Option<&str> {
        let want = digest(presented);
        let mut found = None;
        for (name, have) in &self.entries {
            if bool::from(have.ct_eq(&want)) && found.is_none() {
                found = Some(name.as_str());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_round_trip_through_hex() {
        let d = digest("secret");
        let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
        );
        assert_eq!(parse_digest(&hex.to_uppercase()), Ok(d));
        assert!(parse_digest("abc").is_err());
        assert!(parse_digest(&"g".repeat(64)).is_err());
    }

    #[test]
    fn near_misses_are_refused() {
        let keys = ApiKeys::new(vec![("alice".into(), digest("k-alice"))]);
        for wrong in ["", "k-alic", "k-alice ", "K-ALICE", "k-alicee"] {
            assert_eq!(keys.verify(wrong), None, "{wrong:?}");
        }
    }
}
