//! One audit line: the [`Entry`] and the JSON bytes written for it, without going through
//! `serde_json` (a property test holds them equal), and argument redaction.

use serde::Serialize;
use serde_json::Value;

use super::time;

/// One audit line. `event` is `decision` (with `decision`, `rule`, `reason`), `outcome`
/// (with `outcome`, `error_type`, `duration_ms`) or one of the guard's ([`super::guard`]):
/// `quarantine` / `release` (with `reason`, the hashes, `changed`), `refusal` (a call of a
/// quarantined tool) and `sanitize` (with `removed`, `flags`, `score`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Entry<'a> {
    /// `decision` or `outcome` (filled by [`super::Audit::decision`] / [`super::Audit::outcome`]).
    pub event: &'a str,
    /// RFC 3339 UTC time (filled when empty).
    pub time: String,
    /// The id shared by a call's decision and outcome lines and by its error.
    pub audit_id: &'a str,
    /// The client.
    pub principal: &'a str,
    /// Who the client acts for, when known (see [`super::call::Called::subject`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<&'a str>,
    /// The downstream session.
    pub session: &'a str,
    /// The JSON-RPC method.
    pub method: &'a str,
    /// The name the client called (exposed tool or prompt name, resource URI).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<&'a str>,
    /// `server/name` it routes to, when it routes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The audit id of the `run_code` run whose script made the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_audit_id: Option<&'a str>,
    /// `allow` or `deny`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'a str>,
    /// Which part of the scope decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'a str>,
    /// Why a call was denied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'a str>,
    /// `ok`, `is_error` (a tool result with `isError`), `error` or `none` (no answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'a str>,
    /// The error's `data.type` (or its code) for `outcome = error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// How long the call took below the authorization, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The arguments (only with `log_arguments`, redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// Guard events: the `schemaHash` the tool was pinned at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_hash: Option<&'a str>,
    /// Guard events: the `schemaHash` of the tool as the upstream lists it now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_hash: Option<&'a str>,
    /// Guard events: what changed since the pin (`description`, `schema`, `annotations`,
    /// `other`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<&'a [&'static str]>,
    /// Sanitize events: the characters removed, by class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<crate::sanitize::Counts>,
    /// Sanitize events: the steering rules that matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flags: Option<Vec<&'a str>>,
    /// Sanitize events: the steering score (the matched rules' weights).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<u32>,
}

/// `entry` as its line (no newline), with the time filled in when empty.
#[must_use]
pub fn line(entry: &Entry<'_>) -> String {
    let mut out = Vec::with_capacity(LINE_BYTES);
    write_line(&mut out, entry);
    String::from_utf8(out).unwrap_or_default()
}

/// A typical line's size: one allocation for most lines.
const LINE_BYTES: usize = 384;

/// `entry` as JSON (no newline): the bytes `serde_json` writes for it (a property test holds
/// them equal).
#[cfg(test)]
fn to_line(entry: &Entry<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(LINE_BYTES);
    write_line(&mut out, entry);
    out
}

/// Appends `entry` as JSON to `out` (no newline), its time filled in when empty.
///
/// Written by hand because an audit line is on every call's path: the keys are pre-escaped
/// constants, a string with nothing to escape (an id, a name, a method: nearly all of them) is
/// checked eight bytes at a time and copied whole, where `serde_json` escapes it fragment by
/// fragment, and the time is written on the stack. (A call's own two lines are written from
/// pre-joined constants by [`super::call::Call`].)
pub(super) fn write_line(out: &mut Vec<u8>, entry: &Entry<'_>) {
    let mut line = Line(out);
    line.0.push(b'{');
    line.text(b"\"event\":", Some(entry.event));
    if entry.time.is_empty() {
        let mut now = [0; time::LEN];
        line.plain(
            b",\"time\":",
            time::write(&mut now, std::time::SystemTime::now()),
        );
    } else {
        line.text(b",\"time\":", Some(&entry.time));
    }
    let upstream = entry.upstream.as_deref().map(|u| [u]);
    line.shared(&Members {
        audit_id: entry.audit_id,
        principal: entry.principal,
        subject: entry.subject,
        session: entry.session,
        method: entry.method,
        tool: entry.tool,
        upstream: upstream.as_ref().map_or(&[], <[&str; 1]>::as_slice),
        run: entry.run_audit_id,
    });
    line.text(b",\"decision\":", entry.decision);
    line.text(b",\"rule\":", entry.rule);
    line.text(b",\"reason\":", entry.reason);
    line.text(b",\"outcome\":", entry.outcome);
    line.text(b",\"error_type\":", entry.error_type.as_deref());
    if let Some(ms) = entry.duration_ms {
        line.number(b",\"duration_ms\":", ms);
    }
    line.value(b",\"arguments\":", entry.arguments.as_ref());
    line.text(b",\"old_hash\":", entry.old_hash);
    line.text(b",\"new_hash\":", entry.new_hash);
    line.value(b",\"changed\":", entry.changed.as_ref());
    line.value(b",\"removed\":", entry.removed.as_ref());
    line.value(b",\"flags\":", entry.flags.as_ref());
    line.value(b",\"score\":", entry.score.as_ref());
    line.0.push(b'}');
}

/// Whether `bytes` hold nothing JSON escapes: no `"`, `\\` or control character below 0x20
/// (what `serde_json` escapes), eight bytes at a time (the classic "has a byte less than n"
/// and "has a zero byte" word tricks, exact for whether any byte matches). The last word
/// overlaps the one before it, and a string shorter than a word is padded with a plain byte:
/// no byte-by-byte tail.
pub(super) fn is_plain(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let flags = |word: &[u8]| {
        let mut eight = [b'a'; 8];
        eight[..word.len()].copy_from_slice(word);
        let x = u64::from_ne_bytes(eight);
        x.wrapping_sub(ONES * 0x20) & !x & HIGHS
            | zero_byte(x ^ QUOTES)
            | zero_byte(x ^ BACKSLASHES)
    };
    if bytes.len() < 8 {
        return flags(bytes) == 0;
    }
    let mut found = flags(&bytes[bytes.len() - 8..]);
    for word in bytes.chunks_exact(8) {
        found |= flags(word);
    }
    found == 0
}

/// The members a call's two lines share ([`Line::shared`]): what [`super::call::Call`] writes once
/// for both, and what an [`Entry`] holds of them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Members<'a> {
    pub(super) audit_id: &'a str,
    pub(super) principal: &'a str,
    pub(super) subject: Option<&'a str>,
    pub(super) session: &'a str,
    pub(super) method: &'a str,
    pub(super) tool: Option<&'a str>,
    /// `upstream`, written from its parts (`server`, `/`, `name`); empty: none.
    pub(super) upstream: &'a [&'a str],
    pub(super) run: Option<&'a str>,
}

/// An audit line being written.
pub(super) struct Line<'o>(pub(super) &'o mut Vec<u8>);

impl Line<'_> {
    /// `key` (its `"name":`, with the comma before it) and the string `value`, when there is
    /// one.
    pub(super) fn text(&mut self, key: &[u8], value: Option<&str>) {
        let Some(value) = value else { return };
        if is_plain(value.as_bytes()) {
            self.plain(key, value.as_bytes());
        } else {
            self.parts(key, &[value]);
        }
    }

    /// `key` and `value`, UTF-8 known to hold nothing to escape (a string [`is_plain`]
    /// passed, an ASCII time): copied as it is, with room made once.
    pub(super) fn plain(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(is_plain(value) && std::str::from_utf8(value).is_ok());
        let out = &mut *self.0;
        out.reserve(key.len() + value.len() + 2);
        out.extend_from_slice(key);
        out.push(b'"');
        out.extend_from_slice(value);
        out.push(b'"');
    }

    /// `key` and the string that is `parts` one after the other (escaping is per character,
    /// so the parts are escaped one by one).
    pub(super) fn parts(&mut self, key: &[u8], parts: &[&str]) {
        self.0.extend_from_slice(key);
        self.0.push(b'"');
        for part in parts {
            if is_plain(part.as_bytes()) {
                self.0.extend_from_slice(part.as_bytes());
            } else {
                let start = self.0.len();
                let _ = serde_json::to_writer(&mut *self.0, part);
                // Without the quotes serde_json put around it.
                self.0.remove(start);
                self.0.pop();
            }
        }
        self.0.push(b'"');
    }

    /// The members a call's two lines share, from `audit_id` to `run_audit_id`.
    pub(super) fn shared(&mut self, members: &Members<'_>) {
        let Members {
            audit_id,
            principal,
            subject,
            session,
            method,
            tool,
            upstream,
            run,
        } = *members;
        let optional = [subject, tool, run];
        let plain = |s: &str| is_plain(s.as_bytes());
        let maybe = |s: Option<&str>| s.is_none_or(plain);
        // `&`, not `&&`: when all are plain (nearly always) every one is looked at anyway.
        let all_plain = plain(audit_id)
            & plain(principal)
            & plain(session)
            & plain(method)
            & maybe(subject)
            & maybe(tool)
            & maybe(run)
            & upstream.iter().all(|s| plain(s));
        if all_plain {
            // Nearly every call: the keys and values copied one after the other into room
            // made once (no check, no escape per member).
            let out = &mut *self.0;
            let len = |s: Option<&str>| s.map_or(0, |s| s.len() + 16);
            out.reserve(
                audit_id.len()
                    + principal.len()
                    + session.len()
                    + method.len()
                    + optional.into_iter().map(len).sum::<usize>()
                    + upstream.iter().map(|s| s.len()).sum::<usize>()
                    + 96,
            );
            #[inline(always)]
            fn put(out: &mut Vec<u8>, key: &[u8], value: &str) {
                out.extend_from_slice(key);
                out.extend_from_slice(value.as_bytes());
                out.push(b'"');
            }
            put(out, b",\"audit_id\":\"", audit_id);
            put(out, b",\"principal\":\"", principal);
            if let Some(subject) = subject {
                put(out, b",\"subject\":\"", subject);
            }
            put(out, b",\"session\":\"", session);
            put(out, b",\"method\":\"", method);
            if let Some(tool) = tool {
                put(out, b",\"tool\":\"", tool);
            }
            if !upstream.is_empty() {
                out.extend_from_slice(b",\"upstream\":\"");
                for part in upstream {
                    out.extend_from_slice(part.as_bytes());
                }
                out.push(b'"');
            }
            if let Some(run) = run {
                put(out, b",\"run_audit_id\":\"", run);
            }
            return;
        }
        self.text(b",\"audit_id\":", Some(audit_id));
        self.text(b",\"principal\":", Some(principal));
        self.text(b",\"subject\":", subject);
        self.text(b",\"session\":", Some(session));
        self.text(b",\"method\":", Some(method));
        self.text(b",\"tool\":", tool);
        if !upstream.is_empty() {
            self.parts(b",\"upstream\":", upstream);
        }
        self.text(b",\"run_audit_id\":", run);
    }

    /// `key` and the integer `n` (written with `itoa`, as `serde_json` writes it).
    pub(super) fn number(&mut self, key: &[u8], n: u64) {
        self.0.extend_from_slice(key);
        self.0
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }

    /// `key` and `value` as `serde_json` writes it, when there is one.
    pub(super) fn value<T: Serialize + ?Sized>(&mut self, key: &[u8], value: Option<&T>) {
        let Some(value) = value else { return };
        self.0.extend_from_slice(key);
        let _ = serde_json::to_writer(&mut *self.0, value);
    }
}

/// `arguments` with the values of members named in `redact` replaced, at any depth.
#[must_use]
pub fn redacted(arguments: &Value, redact: &[String]) -> Value {
    match arguments {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if redact.iter().any(|r| r == k) {
                        Value::String("[redacted]".into())
                    } else {
                        redacted(v, redact)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| redacted(v, redact)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Strings an audit line may carry: mostly plain, sometimes with quotes, backslashes,
    /// control characters, or text beyond ASCII.
    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex(
            "[a-z0-9_/.-]{0,12}|.{0,12}|[\"\\\\\\x00-\\x1f\\x7f é✓\u{2028}]{0,6}",
        )
        .unwrap()
    }

    proptest::proptest! {
        /// The hand-written line is, byte for byte, what `serde_json` writes for the entry.
        #[test]
        fn a_line_is_what_serde_json_writes(
            strings in proptest::collection::vec(text(), 16),
            some in proptest::collection::vec(proptest::bool::ANY, 16),
            n in proptest::num::u64::ANY,
        ) {
            let opt = |i: usize| some[i].then_some(strings[i].as_str());
            let changed: &[&'static str] = &["description", "schema"];
            let entry = Entry {
                event: &strings[0],
                // Never empty: an empty time is filled with the time of writing.
                time: format!("t{}", strings[1]),
                audit_id: &strings[2],
                principal: &strings[3],
                subject: opt(4),
                session: &strings[5],
                method: &strings[6],
                tool: opt(7),
                upstream: opt(8).map(str::to_owned),
                decision: opt(9),
                rule: opt(10),
                reason: opt(11),
                outcome: opt(12),
                error_type: opt(13).map(str::to_owned),
                duration_ms: some[14].then_some(n),
                run_audit_id: opt(15),
                arguments: some[0].then(|| json!({"q": strings[4], "n": n})),
                old_hash: opt(1),
                new_hash: opt(2),
                changed: some[3].then_some(changed),
                removed: some[5].then(crate::sanitize::Counts::default),
                flags: some[6].then(|| vec![strings[7].as_str()]),
                score: some[8].then_some(7),
            };
            let expected = serde_json::to_vec(&entry).unwrap();
            proptest::prop_assert_eq!(
                String::from_utf8(to_line(&entry)).unwrap(),
                String::from_utf8(expected).unwrap()
            );
        }
    }

    #[test]
    fn redaction_reaches_nested_members_and_leaves_the_rest() {
        let args = json!({"owner": "acme", "auth": {"token": "s3cret"}, "list": [{"token": 1}]});
        let shown = redacted(&args, &["token".into()]);
        assert_eq!(
            shown,
            json!({"owner": "acme", "auth": {"token": "[redacted]"}, "list": [{"token": "[redacted]"}]})
        );
    }
}
