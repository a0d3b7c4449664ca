//! The audit lines of one authorized request: its `decision` line, then, for an allowed call,
//! its `outcome` line, both naming the same call under one audit id.

use std::time::Duration;

use serde_json::Value;

#[cfg(doc)]
use super::Entry;
use super::line::{Line, Members};

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

/// What became of an allowed call: its `outcome` line's `outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A result.
    Ok,
    /// A tool result with `isError: true`.
    IsError,
    /// An error answer.
    Error,
    /// No answer.
    None,
}

impl Outcome {
    /// As the line writes it: `ok`, `is_error`, `error`, `none`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::IsError => "is_error",
            Self::Error => "error",
            Self::None => "none",
        }
    }
}

impl Call {
    /// The call `called` names.
    #[must_use]
    pub fn new(called: &Called<'_>) -> Self {
        let mut shared = Vec::with_capacity(256);
        let upstream = called.upstream.map(|(server, name)| [server, "/", name]);
        Line(&mut shared).shared(&Members {
            audit_id: called.audit_id,
            principal: called.principal,
            subject: called.subject,
            session: called.session,
            method: called.method,
            tool: Some(called.tool),
            upstream: upstream.as_ref().map_or(&[], <[&str; 3]>::as_slice),
            run: called.run,
        });
        Self { shared }
    }

    /// Appends the `decision` line (no newline), written at `at`: `deny` with its `reason`
    /// when there is one, else `allow`; `rule` is the part of the scope that decided;
    /// `arguments` as the log may show them. The line [`super::line`] writes for the same
    /// [`Entry`], written from pre-joined constants (this runs on every audited call).
    pub(super) fn write_decision(
        &self,
        out: &mut Vec<u8>,
        at: Duration,
        rule: &str,
        reason: Option<&str>,
        arguments: Option<&Value>,
    ) {
        self.start(
            out,
            b"{\"event\":\"decision\",\"time\":\"",
            at,
            rule.len() + 48,
        );
        let mut line = Line(out);
        match reason {
            None if super::line::is_plain(rule.as_bytes()) => {
                // An allowed call, nearly every line: one constant, the rule, a quote.
                line.0
                    .extend_from_slice(b",\"decision\":\"allow\",\"rule\":\"");
                line.0.extend_from_slice(rule.as_bytes());
                line.0.push(b'"');
            }
            None => {
                line.0.extend_from_slice(b",\"decision\":\"allow\"");
                line.text(b",\"rule\":", Some(rule));
            }
            Some(reason) => {
                line.0.extend_from_slice(b",\"decision\":\"deny\"");
                line.text(b",\"rule\":", Some(rule));
                line.text(b",\"reason\":", Some(reason));
            }
        }
        line.value(b",\"arguments\":", arguments);
        line.0.push(b'}');
    }

    /// Appends the `outcome` line of an allowed call (no newline), written at `at`: `outcome`
    /// ([`Outcome::as_str`]), the error's type, and how long the call took below the
    /// authorization. As [`Call::write_decision`], the line [`super::line`] writes.
    pub(super) fn write_outcome(
        &self,
        out: &mut Vec<u8>,
        at: Duration,
        outcome: Outcome,
        error_type: Option<&str>,
        took: Duration,
    ) {
        self.start(out, b"{\"event\":\"outcome\",\"time\":\"", at, 64);
        let mut line = Line(out);
        line.plain(b",\"outcome\":", outcome.as_str().as_bytes());
        line.text(b",\"error_type\":", error_type);
        line.number(
            b",\"duration_ms\":",
            u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        );
        line.0.push(b'}');
    }

    /// A line's start: `head` (its event and the time's key), the time `at` (since the Unix
    /// epoch), the shared members; room made once for them and `more` bytes.
    fn start(&self, out: &mut Vec<u8>, head: &[u8], at: Duration, more: usize) {
        out.reserve(head.len() + super::time::LEN + 1 + self.shared.len() + more);
        out.extend_from_slice(head);
        let mut now = [0; super::time::LEN];
        out.extend_from_slice(super::time::write_since(&mut now, at));
        out.push(b'"');
        out.extend_from_slice(&self.shared);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Entry;
    use super::*;

    /// A call's lines are, byte for byte, what `serde_json` writes for the whole entries
    /// (the time aside, which is the time of writing).
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
        let shared = Entry {
            audit_id: "a1",
            principal: "al\"ice",
            subject: Some("bob"),
            session: "s1",
            method: "tools/call",
            tool: Some("gh__x"),
            upstream: Some("gh/x\n".into()),
            run_audit_id: Some("r1"),
            ..Entry::default()
        };
        let arguments = serde_json::json!({"q": "a\tb", "n": 1});
        let lines: [(Vec<u8>, Entry<'_>); 4] = [
            (
                written(|out| call.write_decision(out, super::super::now(), "allow", None, None)),
                Entry {
                    event: "decision",
                    decision: Some("allow"),
                    rule: Some("allow"),
                    ..shared.clone()
                },
            ),
            (
                written(|out| {
                    call.write_decision(
                        out,
                        super::super::now(),
                        "deny \"gh/*\"",
                        Some("no \u{2028}"),
                        Some(&arguments),
                    );
                }),
                Entry {
                    event: "decision",
                    decision: Some("deny"),
                    rule: Some("deny \"gh/*\""),
                    reason: Some("no \u{2028}"),
                    arguments: Some(arguments),
                    ..shared.clone()
                },
            ),
            (
                written(|out| {
                    call.write_outcome(
                        out,
                        super::super::now(),
                        Outcome::Ok,
                        None,
                        Duration::from_millis(12),
                    );
                }),
                Entry {
                    event: "outcome",
                    outcome: Some("ok"),
                    duration_ms: Some(12),
                    ..shared.clone()
                },
            ),
            (
                written(|out| {
                    call.write_outcome(
                        out,
                        super::super::now(),
                        Outcome::Error,
                        Some("a\"b"),
                        Duration::from_secs(3),
                    );
                }),
                Entry {
                    event: "outcome",
                    outcome: Some("error"),
                    error_type: Some("a\"b".into()),
                    duration_ms: Some(3000),
                    ..shared.clone()
                },
            ),
        ];
        for (line, mut whole) in lines {
            let line = String::from_utf8(line).unwrap();
            let time: Value = serde_json::from_str::<Value>(&line).unwrap()["time"].clone();
            whole.time = time.as_str().unwrap().to_owned();
            assert!(
                whole.time.ends_with('Z') && whole.time.len() == 24,
                "{line}"
            );
            assert_eq!(line, serde_json::to_string(&whole).unwrap());
        }
    }

    fn written(write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut out);
        out
    }
}
