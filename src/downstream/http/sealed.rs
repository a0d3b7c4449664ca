//! Sealed 2025-era session ids (with `[sessions] seal_key_env` or `seal_key_file`): what a
//! session's id carries, how a replica that never saw the session rebuilds it, and what ends
//! one. The pure decisions of [`super::sessions`]; the cipher is [`crate::seal`].
//!
//! **What ends a sealed session, and why so.** Replicas share nothing but the policy and the
//! key, so nothing one replica learns reaches another:
//! - **Expiry is inside the id** (`exp`, `[sessions] max_lifetime_secs` after `initialize`):
//!   every replica refuses the id from then on, whether it saw the session or not.
//! - **`DELETE`** ends the session on the replica that serves it, at once, and that replica
//!   keeps the session's `sid` in a revocation set until the id's `exp` (after which the id is
//!   refused anyway, so the set never outgrows what one lifetime of `DELETE`s adds, and is
//!   capped besides). Another replica that never learns of the `DELETE` could still serve the
//!   id, to its own principal only: an id is no credential (every request authenticates, and a
//!   session answers only the client that opened it), so nothing is reached that the client
//!   could not reach with a new `initialize`. What `DELETE` is for, freeing the gateway's
//!   state, holds on every replica through idle expiry.
//! - **Idle expiry** (`[downstream] session_idle_secs`) frees a replica's entry of a session
//!   unused there. It does not revoke the id: a replica cannot tell "unused everywhere" from
//!   "unused here while another replica serves it", and refusing a session that is active
//!   elsewhere is the very bug sealed ids exist to remove. The next request rebuilds the entry
//!   from the id.
//!
//! What is not carried: a log level set after `initialize` (the id cannot change), resource
//! subscriptions, and server→client requests in flight stay with the replica that has them.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::context::SessionState;
use crate::identity::Principal;
use crate::seal::Claims;

/// Most session ids a replica remembers as ended by `DELETE` (the oldest `exp` goes first).
pub(super) const MAX_REVOKED: usize = 65_536;

/// Now, in Unix seconds (the clock sealed ids count in).
pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The claims of a session that `principal` opened at `now`, with the state `initialize` left,
/// valid for `lifetime`; `None` before a protocol version was agreed (an `initialize` that
/// failed gets an unsealed id).
pub(super) fn claims_of(
    sid: &str,
    state: &SessionState,
    principal: &Principal,
    now: u64,
    lifetime: Duration,
) -> Option<Claims> {
    let version = state.protocol_version.as_deref()?;
    let mut claims = Claims::new(principal.name(), version, now, lifetime.as_secs());
    sid.clone_into(&mut claims.sid);
    claims.subject = principal.subject().map(str::to_owned);
    claims.client_capabilities = state.client_capabilities.clone();
    claims.client_info = state.client_info.clone();
    claims.log_level.clone_from(&state.log_level);
    Some(claims)
}

/// Whether `claims` are of a session `principal` opened (a session answers only its client).
pub(super) fn belongs_to(claims: &Claims, principal: &Principal) -> bool {
    claims.principal == principal.name() && claims.subject.as_deref() == principal.subject()
}

/// The state of a session rebuilt from its id. It counts as initialized: its client sent
/// requests on it, which it may only do after `notifications/initialized` (sent to whichever
/// replica served it).
pub(super) fn state_of(claims: &Claims) -> SessionState {
    SessionState {
        client_capabilities: claims.client_capabilities.clone(),
        client_info: claims.client_info.clone(),
        protocol_version: Some(claims.protocol_version.clone()),
        initialized: true,
        log_level: claims.log_level.clone(),
    }
}

/// The sessions this replica ended by `DELETE`, each until its id expires.
#[derive(Debug, Default)]
pub(super) struct Revoked {
    /// `sid` → the id's `exp`.
    by_sid: HashMap<String, u64>,
}

impl Revoked {
    /// Remembers that session `sid`, whose id expires at `exp`, ended. Past [`MAX_REVOKED`],
    /// the entry that would expire first is forgotten.
    pub(super) fn insert(&mut self, sid: &str, exp: u64) {
        if self.by_sid.len() >= MAX_REVOKED && !self.by_sid.contains_key(sid) {
            let first = self
                .by_sid
                .iter()
                .min_by_key(|(_, exp)| **exp)
                .map(|(sid, _)| sid.clone());
            if let Some(first) = first {
                self.by_sid.remove(&first);
            }
        }
        self.by_sid.insert(sid.to_owned(), exp);
    }

    /// Whether session `sid` was ended here.
    pub(super) fn contains(&self, sid: &str) -> bool {
        self.by_sid.contains_key(sid)
    }

    /// Forgets the sessions whose ids expired by `now`: they are refused for that already.
    pub(super) fn prune(&mut self, now: u64) {
        self.by_sid.retain(|_, exp| *exp > now);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_sid.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::{Glob, Scope};
    use crate::identity::{Client, Credential, Directory, Gate, Protected, api_key};
    use serde_json::json;

    fn alice() -> std::sync::Arc<Principal> {
        let client = Client::new("alice", Scope::new(vec![Glob::new("*")], vec![], vec![]))
            .with_key(api_key::digest("ka"));
        let gate = Gate::new(Directory::new(vec![client]), Protected::default());
        gate.authenticate(Credential::ApiKey("ka")).unwrap()
    }

    fn initialized() -> SessionState {
        SessionState {
            client_capabilities: json!({"sampling": {}}),
            client_info: json!({"name": "py", "version": "1"}),
            protocol_version: Some("2025-06-18".into()),
            initialized: false,
            log_level: None,
        }
    }

    #[test]
    fn a_rebuilt_session_has_what_initialize_left() {
        let claims = claims_of(
            "abc",
            &initialized(),
            &alice(),
            100,
            Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(
            (claims.sid.as_str(), claims.iat, claims.exp),
            ("abc", 100, 160)
        );
        let state = state_of(&claims);
        assert_eq!(state.protocol_version.as_deref(), Some("2025-06-18"));
        assert_eq!(state.client_capabilities, json!({"sampling": {}}));
        assert_eq!(state.client_info["name"], "py");
        assert!(state.initialized, "its client already sent requests on it");
        let failed = SessionState::default();
        assert!(claims_of("abc", &failed, &alice(), 100, Duration::from_secs(60)).is_none());
    }

    #[test]
    fn a_session_belongs_to_the_client_that_opened_it() {
        let claims = claims_of("s", &initialized(), &alice(), 0, Duration::from_secs(9)).unwrap();
        assert!(belongs_to(&claims, &alice()));
        assert!(!belongs_to(&claims, &Principal::anonymous()));
        let mut other_subject = claims;
        other_subject.subject = Some("mallory".into());
        assert!(!belongs_to(&other_subject, &alice()));
    }

    #[test]
    fn revocations_last_until_the_id_expires_and_are_capped() {
        let mut revoked = Revoked::default();
        revoked.insert("a", 10);
        revoked.insert("b", 20);
        assert!(revoked.contains("a") && revoked.contains("b") && !revoked.contains("c"));
        revoked.prune(10);
        assert!(!revoked.contains("a") && revoked.contains("b"));
        for i in 0..MAX_REVOKED {
            revoked.insert(&i.to_string(), 100 + u64::try_from(i).unwrap());
        }
        assert_eq!(revoked.len(), MAX_REVOKED);
        assert!(!revoked.contains("b"), "the first to expire went");
        assert!(revoked.contains("0") && revoked.contains(&(MAX_REVOKED - 1).to_string()));
    }
}
