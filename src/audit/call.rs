//! The audit lines of one authorized request: its `decision` line, then, for an allowed call,
//! its `outcome` line, both naming the same call under one audit id.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Entry;

/// What the two audit lines of one request say of it, kept from the decision to the outcome.
#[derive(Debug, Clone)]
pub struct Call {
    /// The id shared by the call's decision and outcome lines and by its error.
    pub audit_id: String,
    /// The client.
    pub principal: String,
    /// Who the client acts for, when its credential or embedder says so (a scope-mapped
    /// token's principal claim, an embedder's [`crate::embed::Caller`] principal).
    pub subject: Option<String>,
    /// The downstream session.
    pub session: String,
    /// The JSON-RPC method.
    pub method: String,
    /// The name the client called (exposed tool or prompt name, resource URI).
    pub tool: String,
    /// `server/name` it routes to, when it routes.
    pub upstream: Option<String>,
    /// The audit id of the `run_code` run whose script made the call.
    pub run: Option<Arc<str>>,
}

impl Call {
    /// The `decision` line: `deny` with its `reason` when there is one, else `allow`; `rule` is
    /// the part of the scope that decided.
    #[must_use]
    pub fn decision<'a>(
        &'a self,
        rule: &'a str,
        reason: Option<&'a str>,
        arguments: Option<Value>,
    ) -> Entry<'a> {
        Entry {
            decision: Some(if reason.is_some() { "deny" } else { "allow" }),
            rule: Some(rule),
            reason,
            arguments,
            ..self.entry()
        }
    }

    /// The `outcome` line of an allowed call: `outcome` (`ok`, `is_error`, `error`, `none`),
    /// the error's type, and how long the call took below the authorization.
    #[must_use]
    pub fn outcome(
        &self,
        outcome: &'static str,
        error_type: Option<String>,
        took: Duration,
    ) -> Entry<'_> {
        Entry {
            outcome: Some(outcome),
            error_type,
            duration_ms: Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX)),
            ..self.entry()
        }
    }

    /// The fields both lines share.
    fn entry(&self) -> Entry<'_> {
        Entry {
            audit_id: &self.audit_id,
            principal: &self.principal,
            subject: self.subject.as_deref(),
            session: &self.session,
            method: &self.method,
            tool: Some(&self.tool),
            upstream: self.upstream.clone(),
            run_audit_id: self.run.as_deref(),
            ..Entry::default()
        }
    }
}
