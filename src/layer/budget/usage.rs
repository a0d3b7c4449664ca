//! The budget layer's call counter and its usage file (`[budget] usage_file`, `relearn_secs`).
//!
//! Every `tools/call` of a catalog tool (directly or through `invoke_tool`) adds one to its
//! count: a short lock and two hash lookups, no allocation once a tool has been called. The
//! counts reach the plan only at a *relearn*, at most once per `relearn_secs`: until then the
//! plan — and so the listed bytes a host's prompt cache holds — stays what it was. The file is
//! read at start (its counts plan the first list) and written at every relearn and every
//! [`FLUSH_EVERY`] in between (writing changes no plan), so a restart keeps what was counted.
//!
//! **With a `[state]` store** the counts are the deployment's, not the replica's: a relearn
//! sends the calls counted since the last one to the store and plans with the counts the store
//! hands every replica for the current epoch ([`crate::state::usage`]), so all replicas list
//! the same bytes. The file then keeps a copy of those counts, and seeds the store with its
//! own once. While the store does not answer, nothing is relearned (a replica relearning alone
//! would list other bytes than the rest) and the calls counted wait for the next relearn.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::lock::lock;
use crate::plan::{UsageCounts, parse_usage, render_usage};
use crate::state::Store;

/// How often counts are written between relearns (when something was counted).
pub(crate) const FLUSH_EVERY: Duration = Duration::from_secs(300);

/// Call counts, the counts the plan uses, and the file they persist to.
#[derive(Debug)]
pub(crate) struct UsageLog {
    path: PathBuf,
    /// False when the file at start could not be read as a usage file: it is the operator's,
    /// and is never overwritten.
    writable: bool,
    live: Mutex<Live>,
    learned: Mutex<Learned>,
    /// The store the counts go to and are learned from, and the epoch length
    /// (`relearn_secs`); `None`: this replica's own counts.
    shared: Option<(Store, Duration)>,
}

#[derive(Debug, Default)]
struct Live {
    /// server → tool → calls (the file's counts included); without a store only.
    counts: HashMap<String, HashMap<String, u64>>,
    /// server → tool → calls not sent to the store yet; with a store only.
    unsent: HashMap<String, HashMap<String, u64>>,
    /// The file's counts, until they seeded the store; with a store only.
    seeds: UsageCounts,
    /// Counted (or, with a store, learned) since the last write.
    dirty: bool,
}

/// The counts the plan uses, and their generation (one more at each relearn that changed them).
#[derive(Debug, Clone, Default)]
pub(crate) struct Learned {
    pub(crate) generation: u64,
    pub(crate) counts: Arc<UsageCounts>,
}

impl UsageLog {
    /// Opens `path` (a missing file is an empty one): its counts are what the first plan learns.
    /// With `shared` (a store and the epoch length), counts go to the store and are learned
    /// from it.
    pub(crate) fn open(path: &Path, shared: Option<(Store, Duration)>) -> Self {
        let (counts, writable) = match crate::files::read_text(path) {
            Ok(text) => match parse_usage(&text) {
                Ok(counts) => (counts, true),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "Usage file not read; it will not be written (fix or remove it)");
                    (UsageCounts::new(), false)
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (UsageCounts::new(), true),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "Usage file not read; it will not be written");
                (UsageCounts::new(), false)
            }
        };
        let mut live = Live::default();
        if shared.is_some() {
            live.seeds = counts.clone();
        } else {
            for (id, &n) in &counts {
                let (server, tool) = id.split_once('/').unwrap_or((id.as_str(), ""));
                live.counts
                    .entry(server.to_owned())
                    .or_default()
                    .insert(tool.to_owned(), n);
            }
        }
        Self {
            path: path.to_owned(),
            writable,
            live: Mutex::new(live),
            learned: Mutex::new(Learned {
                generation: 0,
                counts: Arc::new(counts),
            }),
            shared,
        }
    }

    /// Whether the counts are the store's (`[state]`).
    pub(crate) fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Counts one call of `server`'s tool `tool`.
    pub(crate) fn record(&self, server: &str, tool: &str) {
        let mut live = lock(&self.live);
        let counts = if self.shared.is_some() {
            &mut live.unsent
        } else {
            live.dirty = true;
            &mut live.counts
        };
        add(counts, server, tool, 1);
    }

    /// What the plan uses now.
    pub(crate) fn learned(&self) -> Learned {
        lock(&self.learned).clone()
    }

    /// Makes the counts so far what the plan uses; true when they differ from the last ones.
    /// (With a store, [`UsageLog::relearn_shared`].)
    pub(crate) fn relearn(&self) -> bool {
        let now = self.snapshot();
        self.learn(now)
    }

    /// Makes `now` what the plan uses; true when it differs from the last counts.
    fn learn(&self, now: UsageCounts) -> bool {
        let mut learned = lock(&self.learned);
        if *learned.counts == now {
            return false;
        }
        learned.generation += 1;
        learned.counts = Arc::new(now);
        true
    }

    /// With a store: sends the calls counted since the last time (and, the first time, the
    /// file's counts as seeds), and makes the counts the store hands every replica for this
    /// epoch what the plan uses. `Ok`: whether they changed, and how long until the next epoch
    /// begins (when to relearn next). `Err`: the store did not answer (a [`names`] reason);
    /// nothing changed, and the counts wait for the next try.
    ///
    /// [`names`]: crate::telemetry::names
    pub(crate) async fn relearn_shared(&self) -> Result<(bool, Duration), &'static str> {
        let Some((store, period)) = &self.shared else {
            return Ok((self.relearn(), Duration::MAX));
        };
        let (unsent, seeds) = {
            let mut live = lock(&self.live);
            (
                std::mem::take(&mut live.unsent),
                std::mem::take(&mut live.seeds),
            )
        };
        match store.learn_usage(*period, &ids(&unsent), &seeds).await {
            Ok(learned) => {
                let changed = self.learn(learned.counts);
                if changed {
                    lock(&self.live).dirty = true;
                }
                Ok((changed, learned.next_in))
            }
            Err(reason) => {
                // Sent again next time, with what is counted meanwhile.
                let mut live = lock(&self.live);
                for (server, tools) in unsent {
                    for (tool, n) in tools {
                        add(&mut live.unsent, &server, &tool, n);
                    }
                }
                if live.seeds.is_empty() {
                    live.seeds = seeds;
                }
                Err(reason)
            }
        }
    }

    /// The file's new text, when something was counted since the last write and the file may
    /// be written; the write itself is [`write_usage`] (blocking I/O, run off the runtime).
    pub(crate) fn pending_write(&self) -> Option<(PathBuf, String)> {
        if !self.writable {
            return None;
        }
        let text = {
            let mut live = lock(&self.live);
            if !live.dirty {
                return None;
            }
            live.dirty = false;
            if self.shared.is_some() {
                render_usage(&lock(&self.learned).counts)
            } else {
                render_usage(&ids(&live.counts))
            }
        };
        Some((self.path.clone(), text))
    }

    fn snapshot(&self) -> UsageCounts {
        ids(&lock(&self.live).counts)
    }
}

/// What a reloaded budget layer does with the usage log of the layer it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handover {
    /// Counts on in the same log: the file is the same, and the log may write it.
    Keep,
    /// Writes what the log counted to its file, and opens the new file (if any) afresh: the
    /// file changed, usage was switched off, or the file at start was not a usage file (an
    /// operator who fixed it gets it read again).
    Flush,
}

/// What happens to `log` when the reloaded policy's usage file is `file` and its
/// `relearn_secs` is `relearn` (with a store, the epochs change with it).
pub(crate) fn handover(log: &UsageLog, file: Option<&Path>, relearn: Duration) -> Handover {
    let same_epochs = log
        .shared
        .as_ref()
        .is_none_or(|(_, period)| *period == relearn);
    if log.writable && file == Some(log.path.as_path()) && same_epochs {
        Handover::Keep
    } else {
        Handover::Flush
    }
}

/// Adds `n` calls of `server`'s `tool` (allocating only for a tool not counted yet).
fn add(counts: &mut HashMap<String, HashMap<String, u64>>, server: &str, tool: &str, n: u64) {
    let tools = match counts.get_mut(server) {
        Some(tools) => tools,
        None => counts.entry(server.to_owned()).or_default(),
    };
    match tools.get_mut(tool) {
        Some(count) => *count += n,
        None => {
            tools.insert(tool.to_owned(), n);
        }
    }
}

fn ids(counts: &HashMap<String, HashMap<String, u64>>) -> UsageCounts {
    counts
        .iter()
        .flat_map(|(server, tools)| {
            tools
                .iter()
                .map(move |(tool, &n)| (format!("{server}/{tool}"), n))
        })
        .collect()
}

/// Writes `text` to `path` whole (a temporary file beside it, then a rename), so a reader never
/// sees half a file. Failures are logged: counting goes on, and the next write tries again.
pub(crate) fn write_usage(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "Usage file not written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn counts_reach_the_plan_only_at_a_relearn_and_the_file_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.json");
        std::fs::write(&path, r#"{"time/now": 2}"#).unwrap();
        let log = UsageLog::open(&path, None);
        assert_eq!(log.learned().counts.get("time/now"), Some(&2));
        log.record("time", "now");
        log.record("github", "get_issue");
        assert_eq!(log.learned().generation, 0, "not before a relearn");
        assert!(log.relearn());
        assert!(!log.relearn(), "nothing new");
        let learned = log.learned();
        assert_eq!(learned.generation, 1);
        assert_eq!(learned.counts.get("time/now"), Some(&3));
        let (to, text) = log.pending_write().unwrap();
        assert!(log.pending_write().is_none(), "written once");
        write_usage(&to, &text);
        let reopened = UsageLog::open(&path, None);
        assert_eq!(reopened.learned().counts, learned.counts);
    }

    #[test]
    fn a_reload_keeps_the_log_only_for_the_same_writable_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.json");
        let log = UsageLog::open(&path, None);
        assert_eq!(handover(&log, Some(&path), DAY), Handover::Keep);
        let other = dir.path().join("other.json");
        assert_eq!(handover(&log, Some(&other), DAY), Handover::Flush);
        assert_eq!(
            handover(&log, None, DAY),
            Handover::Flush,
            "usage switched off"
        );
        // Not a usage file at start: read again at the reload (it may have been fixed).
        std::fs::write(&path, "not json").unwrap();
        let unread = UsageLog::open(&path, None);
        assert_eq!(handover(&unread, Some(&path), DAY), Handover::Flush);
    }

    #[test]
    fn a_file_that_is_not_a_usage_file_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.json");
        std::fs::write(&path, "not json").unwrap();
        let log = UsageLog::open(&path, None);
        log.record("time", "now");
        assert!(log.pending_write().is_none());
        assert!(log.learned().counts.is_empty());
    }
}
