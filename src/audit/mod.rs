//! The audit log: one JSON line per authorization decision and per call outcome, so that every
//! denial (its `audit_id` is in the error the client got) and every call can be explained
//! afterwards.
//!
//! Lines go to `[audit] path` (appended) or to stderr. They are written by a thread of their
//! own behind a bounded channel of [`QUEUE`] lines: a call never waits for the disk, and the
//! async runtime never blocks on it. When the
//! writer falls that far behind, lines are dropped and counted ([`Audit::dropped`]), with a
//! warning when dropping starts — calls go on.
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
mod time;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::sync::mpsc;

pub use time::rfc3339;

use crate::policy::audit::AuditPolicy;

/// Lines waiting for the writer before new ones are dropped.
pub const QUEUE: usize = 8192;

/// One audit line. `event` is `decision` (with `decision`, `rule`, `reason`), `outcome`
/// (with `outcome`, `error_type`, `duration_ms`) or one of the guard's ([`guard`]):
/// `quarantine` / `release` (with `reason`, the hashes, `changed`), `refusal` (a call of a
/// quarantined tool) and `sanitize` (with `removed`, `flags`, `score`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Entry<'a> {
    /// `decision` or `outcome` (filled by [`Audit::decision`] / [`Audit::outcome`]).
    pub event: &'a str,
    /// RFC 3339 UTC time (filled when empty).
    pub time: String,
    /// The id shared by a call's decision and outcome lines and by its error.
    pub audit_id: &'a str,
    /// The client.
    pub principal: &'a str,
    /// Who the client acts for, when known (see [`call::Call::subject`]).
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
    /// The audit id of the `run_code` run whose script made the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_audit_id: Option<&'a str>,
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
    let bytes = if entry.time.is_empty() {
        let mut timed = entry.clone();
        timed.time = rfc3339(std::time::SystemTime::now());
        to_line(&timed)
    } else {
        to_line(entry)
    };
    String::from_utf8(bytes).unwrap_or_default()
}

/// A typical line's size: one allocation for most lines.
const LINE_BYTES: usize = 384;

/// `entry` as JSON in a buffer with room for its newline: the bytes `serde_json` writes for it
/// (a property test holds them equal), written by hand because an audit line is on every
/// call's path: the keys are pre-escaped constants, and a string with nothing to escape (an
/// id, a name, a method: nearly all of them) is checked in one pass and copied whole, where
/// `serde_json` escapes it fragment by fragment. Per call with an API-key client (two lines):
/// 63.1 k → 59.0 k instructions on stdio, 124.1 k → 117.1 k on HTTP
/// (`scripts/bench-gateway.sh callgrind-policies`).
fn to_line(entry: &Entry<'_>) -> Vec<u8> {
    let mut line = Line(Vec::with_capacity(LINE_BYTES));
    line.0.push(b'{');
    line.text(b"\"event\":", Some(entry.event));
    line.text(b",\"time\":", Some(&entry.time));
    line.text(b",\"audit_id\":", Some(entry.audit_id));
    line.text(b",\"principal\":", Some(entry.principal));
    line.text(b",\"subject\":", entry.subject);
    line.text(b",\"session\":", Some(entry.session));
    line.text(b",\"method\":", Some(entry.method));
    line.text(b",\"tool\":", entry.tool);
    line.text(b",\"upstream\":", entry.upstream.as_deref());
    line.text(b",\"decision\":", entry.decision);
    line.text(b",\"rule\":", entry.rule);
    line.text(b",\"reason\":", entry.reason);
    line.text(b",\"outcome\":", entry.outcome);
    line.text(b",\"error_type\":", entry.error_type.as_deref());
    line.value(b",\"duration_ms\":", entry.duration_ms.as_ref());
    line.text(b",\"run_audit_id\":", entry.run_audit_id);
    line.value(b",\"arguments\":", entry.arguments.as_ref());
    line.text(b",\"old_hash\":", entry.old_hash);
    line.text(b",\"new_hash\":", entry.new_hash);
    line.value(b",\"changed\":", entry.changed.as_ref());
    line.value(b",\"removed\":", entry.removed.as_ref());
    line.value(b",\"flags\":", entry.flags.as_ref());
    line.value(b",\"score\":", entry.score.as_ref());
    line.0.push(b'}');
    line.0
}

/// Whether `bytes` hold nothing JSON escapes: no `"`, `\\` or control character below 0x20
/// (what `serde_json` escapes), in one pass without a branch per byte.
fn is_plain(bytes: &[u8]) -> bool {
    bytes.iter().fold(true, |plain, &b| {
        plain & (b >= 0x20) & (b != b'"') & (b != b'\\')
    })
}

/// An audit line being written.
struct Line(Vec<u8>);

impl Line {
    /// `key` (its `"name":`, with the comma before it) and the string `value`, when there is
    /// one.
    fn text(&mut self, key: &[u8], value: Option<&str>) {
        let Some(value) = value else { return };
        self.0.extend_from_slice(key);
        if is_plain(value.as_bytes()) {
            self.0.push(b'"');
            self.0.extend_from_slice(value.as_bytes());
            self.0.push(b'"');
        } else {
            let _ = serde_json::to_writer(&mut self.0, value);
        }
    }

    /// `key` and `value` as `serde_json` writes it, when there is one.
    fn value<T: Serialize + ?Sized>(&mut self, key: &[u8], value: Option<&T>) {
        let Some(value) = value else { return };
        self.0.extend_from_slice(key);
        let _ = serde_json::to_writer(&mut self.0, value);
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

/// A new audit id.
#[must_use]
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The audit log's sending side: cheap to clone; off when no lines are wanted.
#[derive(Debug, Clone, Default)]
pub struct Audit {
    inner: Option<Arc<Inner>>,
}

#[derive(Debug)]
struct Inner {
    tx: mpsc::SyncSender<Vec<u8>>,
    dropped: AtomicU64,
    config: AuditPolicy,
}

impl Audit {
    /// No audit log.
    #[must_use]
    pub fn off() -> Self {
        Self::default()
    }

    /// Starts the writer thread of `config`'s log; it ends when the last [`Audit`] clone is
    /// dropped, after writing what is queued.
    ///
    /// # Errors
    /// The file at `config.path` cannot be opened for appending, or no thread can be started.
    pub fn start(config: AuditPolicy) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let out: Box<dyn Write + Send> = match &config.path {
            Some(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ),
            None => Box::new(std::io::stderr()),
        };
        std::thread::Builder::new()
            .name("mcp-budget-audit".into())
            .spawn(move || write_lines(&rx, out))?;
        Ok(Self {
            inner: Some(Arc::new(Inner {
                tx,
                dropped: AtomicU64::new(0),
                config,
            })),
        })
    }

    /// Whether lines are written.
    #[must_use]
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Lines dropped because the writer was [`QUEUE`] lines behind.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, |i| i.dropped.load(Ordering::Relaxed))
    }

    /// The arguments as the log may show them: `None` unless `log_arguments`.
    #[must_use]
    pub fn arguments(&self, arguments: impl FnOnce() -> Value) -> Option<Value> {
        let inner = self.inner.as_ref()?;
        inner
            .config
            .log_arguments
            .then(|| redacted(&arguments(), &inner.config.redact))
    }

    /// Logs a decision line.
    pub fn decision(&self, mut entry: Entry<'_>) {
        entry.event = "decision";
        self.record_owned(entry);
    }

    /// Logs an outcome line.
    pub fn outcome(&self, mut entry: Entry<'_>) {
        entry.event = "outcome";
        self.record_owned(entry);
    }

    /// Logs a line whose `event` the caller set (the guard's events, [`guard`]).
    pub fn event(&self, entry: &Entry<'_>) {
        if self.inner.is_some() {
            self.record_owned(entry.clone());
        }
    }

    /// [`Audit::start`], falling back to stderr (with an error logged) when the file cannot be
    /// opened, and to no log when not even that can start.
    #[must_use]
    pub fn start_or_stderr(config: &AuditPolicy) -> Self {
        Self::start(config.clone()).unwrap_or_else(|err| {
            tracing::error!(error = %err, path = ?config.path,
                "Cannot open the audit log; writing it to stderr");
            Self::start(AuditPolicy {
                path: None,
                ..config.clone()
            })
            .unwrap_or_default()
        })
    }

    /// Queues `entry`'s line, its time filled in here when empty (owned: no copy for that).
    fn record_owned(&self, mut entry: Entry<'_>) {
        let Some(inner) = &self.inner else {
            return;
        };
        if entry.time.is_empty() {
            entry.time = rfc3339(std::time::SystemTime::now());
        }
        let mut out = to_line(&entry);
        if out.is_empty() {
            return;
        }
        out.push(b'\n');
        if inner.tx.try_send(out).is_err() {
            // Full (or the writer is gone at shutdown): never make a call wait for the log.
            if inner.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    queue = QUEUE,
                    "Audit log writer is behind: dropping audit lines (counted)"
                );
            }
        }
    }
}

/// One writer per configuration, handed to everyone who logs under it: the authorize layer
/// of each stack generation and the guard's journal ([`guard::journal`]) write through the
/// same thread, so their lines never interleave; a reload that changes `[audit]` starts a new
/// writer (the old one ends with its last user).
#[derive(Debug, Default)]
pub struct Shared {
    current: std::sync::Mutex<Option<(Option<AuditPolicy>, Audit)>>,
}

impl Shared {
    /// The writer of `config` (`None`: no log), started on first use.
    #[must_use]
    pub fn get(&self, config: Option<&AuditPolicy>) -> Audit {
        let mut current = crate::lock::lock(&self.current);
        if let Some((open, audit)) = current.as_ref() {
            if open.as_ref() == config {
                return audit.clone();
            }
        }
        let audit = config.map_or_else(Audit::off, Audit::start_or_stderr);
        *current = Some((config.cloned(), audit.clone()));
        audit
    }
}

/// Writes lines as they come, what is queued together, flushing whenever the queue is empty.
fn write_lines(rx: &mpsc::Receiver<Vec<u8>>, mut out: Box<dyn Write + Send>) {
    while let Ok(mut lines) = rx.recv() {
        while let Ok(more) = rx.try_recv() {
            lines.extend_from_slice(&more);
        }
        if let Err(err) = out.write_all(&lines).and_then(|()| out.flush()) {
            tracing::error!(error = %err, "Writing the audit log failed");
        }
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
                time: strings[1].clone(),
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

    #[test]
    fn lines_reach_the_file_and_arguments_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::start(AuditPolicy {
            path: Some(path.clone()),
            log_arguments: false,
            redact: vec![],
        })
        .unwrap();
        assert_eq!(audit.arguments(|| json!({"a": 1})), None);
        audit.decision(Entry {
            audit_id: "x1",
            principal: "alice",
            method: "tools/call",
            decision: Some("allow"),
            ..Entry::default()
        });
        let mut text = String::new();
        for _ in 0..100 {
            text = std::fs::read_to_string(&path).unwrap_or_default();
            if !text.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let v: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["event"], "decision");
        assert_eq!(v["audit_id"], "x1");
        assert!(v["time"].as_str().unwrap().ends_with('Z'));
        assert_eq!(audit.dropped(), 0);
    }

    #[test]
    fn an_audit_that_is_off_records_nothing_and_costs_nothing() {
        let audit = Audit::off();
        assert!(!audit.is_on());
        audit.decision(Entry::default());
        assert_eq!(audit.dropped(), 0);
    }
}
