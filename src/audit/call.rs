//! The audit lines of one authorized request: its `decision` line, then, for an allowed call,
//! its `outcome` line, both naming the same call under one audit id.

use std::time::Duration;

use serde_json::Value;

use super::{Entry, Line};

/// Who made a call and what it calls: the members a call's two lines share.
#[derive(Debug, Clone, Copy, Default)]
pub struct Called<'a> {
    /// The id shared by the call's decision and outcome lines and by its error.
    pub audit_id: &'a str,
    /// The client.
    pub principal: &'a str,
    /// Who the client acts for, when its credential or embedder says so (a scope-mapped
    /// token's principal claim, an embedder's [`crate::embed::Caller`] principal).
    pub subject: Option<&'a str>,
    /// The downstream session.
    pub session: &'a str,
    /// The JSON-RPC method.
    pub method: &'a str,
    /// The name the client called (exposed tool or prompt name, resource URI).
    pub tool: &'a str,
    /// The (server, own name) it routes to, when it routes (`server/name` in the lines).
    pub upstream: Option<(&'a str, &'a str)>,
    /// The audit id of the `run_code` run whose script made the call.
    pub run: Option<&'a str>,
}

/// What the two audit lines of one request say of it, kept from the decision to the outcome:
/// the members they share, written as JSON once (no copy of each string to keep).
#[derive(Debug, Clone)]
pub struct Call {
    /// `,"audit_id":…` up to `run_audit_id`, as the lines hold them.
    shared: Vec<u8>,
}

impl Call {
    /// The call `called` names.
    #[must_use]
    pub fn new(called: &Called<'_>) -> Self {
        let mut shared = Vec::with_capacity(256);
        let entry = Entry {
            audit_id: called.audit_id,
            principal: called.principal,
            subject: called.subject,
            session: called.session,
            method: called.method,
            tool: Some(called.tool),
            run_audit_id: called.run,
            ..Entry::default()
        };
        let upstream = called.upstream.map(|(server, name)| [server, "/", name]);
        Line(&mut shared).shared(&entry, upstream.as_ref().map(<[&str; 3]>::as_slice));
        Self { shared }
    }

    /// The shared members as JSON (each with the comma before it).
    pub(super) fn shared(&self) -> &[u8] {
        &self.shared
    }

    /// The `decision` line: `deny` with its `reason` when there is one, else `allow`; `rule` is
    /// the part of the scope that decided.
    #[must_use]
    pub fn decision<'a>(
        rule: &'a str,
        reason: Option<&'a str>,
        arguments: Option<Value>,
    ) -> Entry<'a> {
        Entry {
            event: "decision",
            decision: Some(if reason.is_some() { "deny" } else { "allow" }),
            rule: Some(rule),
            reason,
            arguments,
            ..Entry::default()
        }
    }

    /// The `outcome` line of an allowed call: `outcome` (`ok`, `is_error`, `error`, `none`),
    /// the error's type, and how long the call took below the authorization.
    #[must_use]
    pub fn outcome(
        outcome: &'static str,
        error_type: Option<String>,
        took: Duration,
    ) -> Entry<'static> {
        Entry {
            event: "outcome",
            outcome: Some(outcome),
            error_type,
            duration_ms: Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX)),
            ..Entry::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's lines are the lines of the entries with its members in them.
    #[test]
    fn a_calls_lines_are_its_entries_lines() {
        let called = Called {
            audit_id: "a1",
            principal: "al\"ice",
            subject: Some("bob"),
            session: "s1",
            method: "tools/call",
            tool: "gh__x",
            upstream: Some(("gh", "x\n")),
            run: Some("r1"),
        };
        let call = Call::new(&called);
        let whole = Entry {
            event: "decision",
            time: "t".into(),
            audit_id: "a1",
            principal: "al\"ice",
            subject: Some("bob"),
            session: "s1",
            method: "tools/call",
            tool: Some("gh__x"),
            upstream: Some("gh/x\n".into()),
            run_audit_id: Some("r1"),
            decision: Some("allow"),
            rule: Some("allow"),
            ..Entry::default()
        };
        let mut line = Vec::new();
        let part = Entry {
            time: "t".into(),
            ..Call::decision("allow", None, None)
        };
        super::super::write_line(&mut line, &part, Some(call.shared()));
        assert_eq!(
            String::from_utf8(line).unwrap(),
            serde_json::to_string(&whole).unwrap()
        );
    }
}
