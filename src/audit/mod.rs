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
mod time;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::Value;
use std::io::Write;

pub use time::rfc3339;

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
    /// Who the client acts for, when known (see [`call::Called::subject`]).
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
/// pre-joined constants by [`call::Call`].)
fn write_line(out: &mut Vec<u8>, entry: &Entry<'_>) {
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
fn is_plain(bytes: &[u8]) -> bool {
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

/// The members a call's two lines share ([`Line::shared`]): what [`call::Call`] writes once
/// for both, and what an [`Entry`] holds of them.
#[derive(Debug, Clone, Copy)]
struct Members<'a> {
    audit_id: &'a str,
    principal: &'a str,
    subject: Option<&'a str>,
    session: &'a str,
    method: &'a str,
    tool: Option<&'a str>,
    /// `upstream`, written from its parts (`server`, `/`, `name`); empty: none.
    upstream: &'a [&'a str],
    run: Option<&'a str>,
}

/// An audit line being written.
struct Line<'o>(&'o mut Vec<u8>);

impl Line<'_> {
    /// `key` (its `"name":`, with the comma before it) and the string `value`, when there is
    /// one.
    fn text(&mut self, key: &[u8], value: Option<&str>) {
        let Some(value) = value else { return };
        if is_plain(value.as_bytes()) {
            self.plain(key, value.as_bytes());
        } else {
            self.parts(key, &[value]);
        }
    }

    /// `key` and `value`, UTF-8 known to hold nothing to escape (a string [`is_plain`]
    /// passed, an ASCII time): copied as it is, with room made once.
    fn plain(&mut self, key: &[u8], value: &[u8]) {
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
    fn parts(&mut self, key: &[u8], parts: &[&str]) {
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
    fn shared(&mut self, members: &Members<'_>) {
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
    fn number(&mut self, key: &[u8], n: u64) {
        self.0.extend_from_slice(key);
        self.0
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }

    /// `key` and `value` as `serde_json` writes it, when there is one.
    fn value<T: Serialize + ?Sized>(&mut self, key: &[u8], value: Option<&T>) {
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

/// How long the writer gathers lines after the first one of a batch before it writes them:
/// a line reaches the log within about this long, and a busy gateway wakes the writer about
/// once per interval instead of once per line.
pub const GATHER: std::time::Duration = std::time::Duration::from_millis(10);

/// Bytes waiting for the writer before new lines are dropped (besides [`QUEUE`] lines; a line
/// with logged arguments can be large).
pub const QUEUE_BYTES: usize = 16 << 20;

/// The audit log's sending side: cheap to clone; off when no lines are wanted.
#[derive(Debug, Clone, Default)]
pub struct Audit {
    inner: Option<Arc<Handle>>,
}

/// What the senders hold: when the last one is gone, the writer writes what is pending and
/// ends.
#[derive(Debug)]
struct Handle(Arc<Inner>);

impl Drop for Handle {
    fn drop(&mut self) {
        crate::lock::lock(&self.0.pending).closed = true;
        self.0.wake.notify_one();
    }
}

#[derive(Debug)]
struct Inner {
    /// Lines not yet written, appended in place by whoever records one.
    pending: std::sync::Mutex<Pending>,
    /// Wakes the writer for the first line of a batch, for a flush, and at the end.
    wake: std::sync::Condvar,
    /// Tells flushes that a batch was written.
    written: std::sync::Condvar,
    dropped: AtomicU64,
    config: AuditPolicy,
}

#[derive(Debug, Default)]
struct Pending {
    lines: Vec<u8>,
    count: usize,
    closed: bool,
    /// A flush is waiting: write without gathering.
    urgent: bool,
    /// The writer is writing a batch it took.
    writing: bool,
}

impl Audit {
    /// No audit log.
    #[must_use]
    pub fn off() -> Self {
        Self::default()
    }

    /// Starts the writer thread of `config`'s log; it ends when the last [`Audit`] clone is
    /// dropped, after writing what is pending.
    ///
    /// # Errors
    /// The file at `config.path` cannot be opened for appending, or no thread can be started.
    pub fn start(config: AuditPolicy) -> std::io::Result<Self> {
        let out: Box<dyn Write + Send> = match &config.path {
            Some(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ),
            None => Box::new(std::io::stderr()),
        };
        let inner = Arc::new(Inner {
            pending: std::sync::Mutex::default(),
            wake: std::sync::Condvar::new(),
            written: std::sync::Condvar::new(),
            dropped: AtomicU64::new(0),
            config,
        });
        let writer = inner.clone();
        {
            let mut open = crate::lock::lock(&OPEN);
            open.retain(|w| w.strong_count() > 0);
            open.push(Arc::downgrade(&inner));
        }
        std::thread::Builder::new()
            .name("mcp-budget-audit".into())
            .spawn(move || write_lines(&writer, out))?;
        Ok(Self {
            inner: Some(Arc::new(Handle(inner))),
        })
    }

    /// Whether lines are written.
    #[must_use]
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Lines dropped because the writer was [`QUEUE`] lines (or [`QUEUE_BYTES`]) behind.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, |h| h.0.dropped.load(Ordering::Relaxed))
    }

    /// Writes what is pending now instead of at the end of the batch's gathering, and waits
    /// (at most `timeout`) until it is written.
    pub fn flush(&self, timeout: std::time::Duration) {
        if let Some(handle) = &self.inner {
            handle.0.flush(timeout);
        }
    }

    /// The arguments as the log may show them: `None` unless `log_arguments`.
    #[must_use]
    pub fn arguments(&self, arguments: impl FnOnce() -> Value) -> Option<Value> {
        let inner = &self.inner.as_ref()?.0;
        inner
            .config
            .log_arguments
            .then(|| redacted(&arguments(), &inner.config.redact))
    }

    /// Logs a decision line.
    #[doc(hidden)]
    pub fn decision(&self, mut entry: Entry<'_>) {
        entry.event = "decision";
        self.event(&entry);
    }

    /// Logs an outcome line.
    #[doc(hidden)]
    pub fn outcome(&self, mut entry: Entry<'_>) {
        entry.event = "outcome";
        self.event(&entry);
    }

    /// Logs a line whose `event` the caller set (the guard's events, [`guard`]).
    pub(crate) fn event(&self, entry: &Entry<'_>) {
        self.record(|out| write_line(out, entry));
    }

    /// Logs `call`'s decision line, made `at` ([`now`]; see [`call::Call::write_decision`]).
    pub(crate) fn call_decision(
        &self,
        call: &call::Call,
        at: std::time::Duration,
        rule: &str,
        reason: Option<&str>,
        arguments: Option<&Value>,
    ) {
        self.record(|out| call.write_decision(out, at, rule, reason, arguments));
    }

    /// Logs `call`'s outcome line: the call ended `took` after it was decided `at` (one clock
    /// read for both lines' times; see [`call::Call::write_outcome`]).
    pub(crate) fn call_outcome(
        &self,
        call: &call::Call,
        at: std::time::Duration,
        outcome: call::Outcome,
        error_type: Option<&str>,
        took: std::time::Duration,
    ) {
        self.record(|out| call.write_outcome(out, at + took, outcome, error_type, took));
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

    /// Appends the line `write` writes to the pending lines, in place (no allocation once the
    /// buffer has grown), and wakes the writer when it is the first of a batch. A call never
    /// waits for the disk: over [`QUEUE`] lines or [`QUEUE_BYTES`] pending, the line is dropped
    /// and counted.
    fn record(&self, write: impl FnOnce(&mut Vec<u8>)) {
        let Some(handle) = &self.inner else {
            return;
        };
        let inner = &handle.0;
        let mut pending = crate::lock::lock(&inner.pending);
        if pending.count >= QUEUE || pending.lines.len() >= QUEUE_BYTES {
            drop(pending);
            if inner.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    queue = QUEUE,
                    "Audit log writer is behind: dropping audit lines (counted)"
                );
            }
            return;
        }
        write(&mut pending.lines);
        pending.lines.push(b'\n');
        pending.count += 1;
        let first = pending.count == 1;
        drop(pending);
        if first {
            inner.wake.notify_one();
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

/// Every audit log started in this process, for [`flush_all`].
static OPEN: std::sync::Mutex<Vec<std::sync::Weak<Inner>>> = std::sync::Mutex::new(Vec::new());

/// Writes what every audit log of the process has pending, waiting at most `timeout` for each:
/// the server calls it as it stops, so that the lines of its last calls are not left in a
/// batch still gathering.
pub fn flush_all(timeout: std::time::Duration) {
    let open: Vec<_> = crate::lock::lock(&OPEN)
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    for inner in open {
        inner.flush(timeout);
    }
}

impl Inner {
    /// [`Audit::flush`].
    fn flush(&self, timeout: std::time::Duration) {
        let deadline = std::time::Instant::now() + timeout;
        let mut pending = crate::lock::lock(&self.pending);
        if pending.count > 0 {
            pending.urgent = true;
            self.wake.notify_one();
        }
        while pending.count > 0 || pending.writing {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            pending = self
                .written
                .wait_timeout(pending, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}

/// Writes the pending lines in batches: it sleeps until a first line comes, gathers for
/// [`GATHER`] (less when a flush asks or the senders are gone), then takes the whole buffer
/// (leaving its spare one in its place) and writes it with one `write` and a flush. It ends
/// once the senders are gone and nothing is pending.
fn write_lines(inner: &Inner, mut out: Box<dyn Write + Send>) {
    let wait = |pending, for_at_most: Option<std::time::Duration>| match for_at_most {
        None => (inner.wake.wait(pending)).unwrap_or_else(std::sync::PoisonError::into_inner),
        Some(left) => {
            (inner.wake.wait_timeout(pending, left))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0
        }
    };
    let mut spare = Vec::new();
    loop {
        let mut pending = crate::lock::lock(&inner.pending);
        while pending.count == 0 && !pending.closed {
            pending = wait(pending, None);
        }
        if pending.count == 0 {
            return;
        }
        let gathered = std::time::Instant::now() + GATHER;
        while !pending.closed && !pending.urgent {
            let left = gathered.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            pending = wait(pending, Some(left));
        }
        std::mem::swap(&mut pending.lines, &mut spare);
        pending.count = 0;
        pending.urgent = false;
        pending.writing = true;
        drop(pending);
        if let Err(err) = out.write_all(&spare).and_then(|()| out.flush()) {
            tracing::error!(error = %err, "Writing the audit log failed");
        }
        spare.clear();
        crate::lock::lock(&inner.pending).writing = false;
        inner.written.notify_all();
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
    fn a_flush_writes_the_gathering_batch_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::start(AuditPolicy {
            path: Some(path.clone()),
            log_arguments: false,
            redact: vec![],
        })
        .unwrap();
        let read = || std::fs::read_to_string(&path).unwrap_or_default();
        for (i, id) in ["f1", "f2"].into_iter().enumerate() {
            audit.decision(Entry {
                audit_id: id,
                ..Entry::default()
            });
            // Long before the batch's gathering ends, and then at once (`flush_all`).
            let started = std::time::Instant::now();
            if i == 0 {
                audit.flush(std::time::Duration::from_secs(5));
            } else {
                flush_all(std::time::Duration::from_secs(5));
            }
            assert!(
                read().contains(id),
                "{id} not written by the flush: {}",
                read()
            );
            assert!(started.elapsed() < std::time::Duration::from_secs(5));
        }
        assert_eq!(read().lines().count(), 2);
    }

    #[test]
    fn an_audit_that_is_off_records_nothing_and_costs_nothing() {
        let audit = Audit::off();
        assert!(!audit.is_on());
        audit.decision(Entry::default());
        assert_eq!(audit.dropped(), 0);
    }
}
