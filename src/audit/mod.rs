//! The audit log: one JSON line per authorization decision and per call outcome, so that every
//! denial (its `audit_id` is in the error the client got) and every call can be explained
//! afterwards.
//!
//! Lines go to `[audit] path` (appended) or to stderr. A call appends its line to a buffer in
//! place and goes on; a thread of its own writes the buffer in batches (the first line of a
//! batch wakes it, it gathers for [`GATHER`], then writes everything pending at once): a call
//! never waits for the disk, the async runtime never blocks on it, and a busy gateway pays one
//! wake-up and one `write` per batch, not per line. When the writer falls [`QUEUE`] lines (or
//! [`QUEUE_BYTES`]) behind, lines are dropped and counted ([`Audit::dropped`]), with a warning
//! when dropping starts — calls go on.
//!
//! Argument values are not logged unless `log_arguments = true`; then the members named in
//! `redact` (at any depth) are replaced by `"[redacted]"`.
//!
//! ```
//! use mcp_budget::audit::{self, Entry};
//! let line = audit::line(&Entry {
//!     audit_id: "a1",
//!     principal: "alice",
//!     method: "tools/call",
//!     tool: Some("github__delete_repo"),
//!     decision: Some("deny"),
//!     rule: Some("deny \"github/delete_*\""),
//!     ..Entry::default()
//! });
//! assert!(line.contains(r#""audit_id":"a1""#) && line.contains(r#""decision":"deny""#));
//! ```

pub mod call;
pub mod guard;
mod line;
mod time;
mod writer;

pub use line::{Entry, line, redacted};
pub use time::rfc3339;
pub use writer::{Audit, GATHER, QUEUE, QUEUE_BYTES, Shared, flush_all};

use crate::policy::audit::AuditPolicy;

/// The audit log `policy` asks for: `[audit]`, or stderr once clients are configured; none
/// without either (the gateway's and the embedded stack's).
#[must_use]
pub fn config(policy: &crate::policy::Policy) -> Option<AuditPolicy> {
    match (&policy.audit, policy.clients.is_empty()) {
        (Some(config), _) => Some(config.clone()),
        (None, false) => Some(AuditPolicy::default()),
        (None, true) => None,
    }
}

/// The time now as the audit lines take it: since the Unix epoch (one clock read for a call's
/// two lines: the outcome's is this plus how long the call took).
#[must_use]
pub fn now() -> std::time::Duration {
    time::since_epoch(std::time::SystemTime::now())
}

/// A new audit id: a random (v4) UUID's 32 hex digits.
#[must_use]
pub fn new_id() -> String {
    new_id_in(&mut [0; ID_LEN]).to_owned()
}

/// The length of an audit id.
pub const ID_LEN: usize = uuid::fmt::Simple::LENGTH;

/// A new audit id ([`new_id`]) written into `hex`, a call's own stack: no allocation on the
/// path of every audited call.
///
/// ```
/// let mut hex = [0; mcp_budget::audit::ID_LEN];
/// let id = mcp_budget::audit::new_id_in(&mut hex);
/// assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()));
/// ```
pub fn new_id_in(hex: &mut [u8; ID_LEN]) -> &str {
    uuid::Uuid::new_v4().simple().encode_lower(hex)
}
