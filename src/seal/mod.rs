//! Sealed session ids: a 2025-era `Mcp-Session-Id` that carries what any replica needs to serve
//! the session, encrypted and authenticated, so no replica holds state another one needs.
//!
//! - **Cipher:** XChaCha20-Poly1305 with a random 192-bit nonce per token (no counter shared
//!   between replicas; collisions are negligible at any session rate).
//! - **Keys:** 32 bytes each, base64 (standard or URL-safe, padding optional), from the policy's
//!   `[sessions] seal_key_env` variable or a key file: one or more keys separated by commas or
//!   whitespace. The **first seals, every one opens**: rotate by putting the new key first and
//!   keeping the old one until the longest session has expired.
//! - **Token:** `s1.` then base64url (no padding) of key id (4 bytes: the start of the key's
//!   SHA-256, so opening picks the key without trying each) + nonce + ciphertext. Visible ASCII
//!   only, as the transport spec asks of session ids. The version and key id are bound into the
//!   authenticated data, so neither can be swapped.
//! - **Expiry is inside the token** (`exp`): a replica that never saw the session can still tell
//!   it is over. What the token cannot carry (idle time, a `DELETE`) the server tracks; see the
//!   downstream's session store.
//!
//! Pure: the clock is a parameter.
//!
//! ```
//! use mcp_budget::seal::{Claims, Sealer};
//!
//! let sealer = Sealer::from_text("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")?;
//! let claims = Claims::new("alice", "2025-11-25", 1_000, 3_600);
//! let id = sealer.seal(&claims)?;
//! assert!(id.starts_with("s1.") && id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
//! assert_eq!(sealer.open(&id, 2_000)?.principal, "alice");
//! assert!(sealer.open(&id, 5_000).is_err(), "expired");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What a token starts with: the format's version.
pub const PREFIX: &str = "s1.";
/// Longest token [`Sealer::seal`] makes (bytes): an id travels in a header on every request.
pub const MAX_TOKEN_BYTES: usize = 4096;

const KEY_ID_BYTES: usize = 4;
const NONCE_BYTES: usize = 24;
const TAG_BYTES: usize = 16;

/// What a sealed session id carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// A random id of the session itself (logs, local idle and revocation tracking).
    pub sid: String,
    /// The client the session belongs to (every request on it must authenticate as that client).
    pub principal: String,
    /// The bearer token's own subject, when it differs from the client name (a scope-mapped
    /// token): part of who the session belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// The client's declared capabilities.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub client_capabilities: Value,
    /// The client's `clientInfo`.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub client_info: Value,
    /// The log level the client set, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// Issued at (Unix seconds).
    pub iat: u64,
    /// Expires at (Unix seconds).
    pub exp: u64,
}

impl Claims {
    /// Claims for a new session of `principal` at `now`, valid for `lifetime_secs`, with a fresh
    /// random `sid`.
    #[must_use]
    pub fn new(principal: &str, protocol_version: &str, now: u64, lifetime_secs: u64) -> Self {
        Self {
            sid: uuid::Uuid::new_v4().simple().to_string(),
            principal: principal.to_owned(),
            subject: None,
            protocol_version: protocol_version.to_owned(),
            client_capabilities: Value::Null,
            client_info: Value::Null,
            log_level: None,
            iat: now,
            exp: now.saturating_add(lifetime_secs),
        }
    }
}

/// Why keys or a token were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The key text holds no key, or a key that is not 32 bytes of base64.
    #[error(
        "seal key {index}: {reason} (give 32 random bytes in base64, e.g. `openssl rand -base64 32`)"
    )]
    BadKey {
        /// 1-based position in the key list.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The claims make a token over [`MAX_TOKEN_BYTES`].
    #[error(
        "the session's claims seal to {0} bytes, over the {MAX_TOKEN_BYTES}-byte limit for a session id"
    )]
    TooLarge(usize),
    /// Not a token of this format (another gateway's id, a plain id, garbage).
    #[error("not a sealed session id")]
    Malformed,
    /// Sealed with a key this gateway does not hold (rotated out, or another deployment's).
    #[error("sealed with a key this gateway does not have")]
    UnknownKey,
    /// The authentication tag does not match: altered, or forged.
    #[error("the session id does not authenticate (altered or forged)")]
    Forged,
    /// Valid, but past its `exp`.
    #[error("the session expired at {0} (Unix seconds)")]
    Expired(u64),
}

struct Key {
    id: [u8; KEY_ID_BYTES],
    cipher: XChaCha20Poly1305,
}

/// Seals and opens session ids with a list of keys (the first seals).
pub struct Sealer {
    keys: Vec<Key>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Key ids only: never the keys.
        let ids: Vec<String> = self.keys.iter().map(|k| hex(&k.id)).collect();
        f.debug_struct("Sealer").field("key_ids", &ids).finish()
    }
}

impl Sealer {
    /// Keys from `text`: base64 keys separated by commas or whitespace, the first one sealing.
    ///
    /// # Errors
    /// [`SealError::BadKey`] for no key at all, or a key that is not 32 bytes of base64.
    #[doc(hidden)]
    pub fn from_text(text: &str) -> Result<Self, SealError> {
        let parts: Vec<&str> = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .collect();
        if parts.is_empty() {
            return Err(SealError::BadKey {
                index: 1,
                reason: "no key given".into(),
            });
        }
        let keys = parts
            .iter()
            .enumerate()
            .map(|(i, part)| {
                key(part).map_err(|reason| SealError::BadKey {
                    index: i + 1,
                    reason,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { keys })
    }

    /// The id of the sealing key (hex), for logs: which key a deployment seals with.
    #[must_use]
    pub fn sealing_key_id(&self) -> String {
        self.keys.first().map_or_else(String::new, |k| hex(&k.id))
    }

    /// `claims` as a session id.
    ///
    /// # Errors
    /// [`SealError::TooLarge`] when the token would pass [`MAX_TOKEN_BYTES`].
    #[doc(hidden)]
    pub fn seal(&self, claims: &Claims) -> Result<String, SealError> {
        let key = &self.keys[0];
        let plain = serde_json::to_vec(claims).map_err(|_| SealError::Malformed)?;
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = key
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: &plain,
                    aad: &aad(&key.id),
                },
            )
            .map_err(|_| SealError::Malformed)?;
        let mut raw = Vec::with_capacity(KEY_ID_BYTES + NONCE_BYTES + sealed.len());
        raw.extend_from_slice(&key.id);
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&sealed);
        let token = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(raw));
        if token.len() > MAX_TOKEN_BYTES {
            return Err(SealError::TooLarge(token.len()));
        }
        Ok(token)
    }

    /// The claims of session id `token`, if it is one of ours and not expired at `now`.
    ///
    /// # Errors
    /// [`SealError::Malformed`], [`SealError::UnknownKey`], [`SealError::Forged`] or
    /// [`SealError::Expired`].
    #[doc(hidden)]
    pub fn open(&self, token: &str, now: u64) -> Result<Claims, SealError> {
        let body = token.strip_prefix(PREFIX).ok_or(SealError::Malformed)?;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(SealError::Malformed);
        }
        let raw = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| SealError::Malformed)?;
        if raw.len() < KEY_ID_BYTES + NONCE_BYTES + TAG_BYTES {
            return Err(SealError::Malformed);
        }
        let (id, rest) = raw.split_at(KEY_ID_BYTES);
        let (nonce, sealed) = rest.split_at(NONCE_BYTES);
        let key = self
            .keys
            .iter()
            .find(|k| k.id == id)
            .ok_or(SealError::UnknownKey)?;
        let plain = key
            .cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: &aad(&key.id),
                },
            )
            .map_err(|_| SealError::Forged)?;
        // Authenticated bytes we sealed ourselves: a parse failure means another version of
        // this format, which is as good as not ours.
        let claims: Claims = serde_json::from_slice(&plain).map_err(|_| SealError::Malformed)?;
        if now >= claims.exp {
            return Err(SealError::Expired(claims.exp));
        }
        Ok(claims)
    }
}

/// The authenticated data: the format version and the key id, so neither can be swapped.
fn aad(id: &[u8; KEY_ID_BYTES]) -> Vec<u8> {
    let mut aad = PREFIX.as_bytes().to_vec();
    aad.extend_from_slice(id);
    aad
}

fn key(text: &str) -> Result<Key, String> {
    let bytes = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
        .ok_or_else(|| "not base64".to_owned())?;
    if bytes.len() != 32 {
        return Err(format!("{} bytes, not 32", bytes.len()));
    }
    let digest = Sha256::digest(&bytes);
    let mut id = [0; KEY_ID_BYTES];
    id.copy_from_slice(&digest[..KEY_ID_BYTES]);
    let cipher = XChaCha20Poly1305::new_from_slice(&bytes).map_err(|e| e.to_string())?;
    Ok(Key { id, cipher })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
