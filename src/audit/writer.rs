//! The audit log's writer: a thread of its own writes the lines calls append to a buffer, in
//! batches, and drops (and counts) lines when it falls too far behind.

use std::io::Write;

use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::call;
use super::line::{Entry, redacted, write_line};
use crate::policy::audit::AuditPolicy;

/// Lines waiting for the writer before new ones are dropped.
pub const QUEUE: usize = 8192;

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

    /// Logs a line whose `event` the caller set (the guard's events, [`super::guard`]).
    pub(crate) fn event(&self, entry: &Entry<'_>) {
        self.record(|out| write_line(out, entry));
    }

    /// Logs `call`'s decision line, made `at` ([`super::now`]; see [`call::Call::write_decision`]).
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
/// of each stack generation and the guard's journal ([`super::guard::journal`]) write through the
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
