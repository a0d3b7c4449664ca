//! What asks for a reload: a change to one of the policy's files, or `SIGHUP`.
//!
//! Files are watched through their directory, because editors and config tools replace a file
//! (write a new one, rename it over the old) rather than write into it, and a watch on the old
//! file would go quiet after the first save. Bursts of events (a save is several) are merged:
//! a request is sent once the directory has been quiet for [`QUIET`].

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

/// How long the files must be quiet after a change before the reload runs.
pub const QUIET: Duration = Duration::from_millis(200);

/// Why a reload was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// One of the watched files was written, created, renamed or removed.
    File(PathBuf),
    /// The process received `SIGHUP`.
    Signal,
}

/// Reload requests, in order; the file watch lives as long as this value.
#[derive(Debug)]
pub struct Triggers {
    rx: mpsc::UnboundedReceiver<Trigger>,
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Triggers {
    /// The next request, with the burst it started merged into it; `None` once nothing can
    /// ask any more.
    pub async fn next(&mut self) -> Option<Trigger> {
        let first = self.rx.recv().await?;
        loop {
            match tokio::time::timeout(QUIET, self.rx.recv()).await {
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return Some(first),
            }
        }
    }
}

/// Watches `files` (through their directories) and, on Unix, `SIGHUP`.
///
/// Must be called inside a Tokio runtime (the signal is a Tokio stream).
///
/// # Errors
/// The file watch or the signal handler could not be set up (the message names which).
pub fn triggers(files: &[PathBuf]) -> Result<Triggers, String> {
    let (tx, rx) = mpsc::unbounded_channel();
    let watcher = if files.is_empty() {
        None
    } else {
        Some(watch_files(files, tx.clone())?)
    };
    listen_for_hangup(tx)?;
    Ok(Triggers {
        rx,
        _watcher: watcher,
    })
}

/// The link a Kubernetes volume swaps to update every file it mounts at once.
const KUBERNETES_DATA: &str = "..data";

fn watch_files(
    files: &[PathBuf],
    tx: mpsc::UnboundedSender<Trigger>,
) -> Result<notify::RecommendedWatcher, String> {
    let dirs: BTreeSet<PathBuf> = files.iter().map(|f| directory_of(f)).collect();
    let mut names: BTreeSet<OsString> = files
        .iter()
        .filter_map(|f| f.file_name().map(OsString::from))
        .collect();
    // A Kubernetes ConfigMap or Secret volume never touches the file itself: `policy.toml` is
    // a link into `..data/`, and an update renames a new `..data` link over the old one.
    names.insert(OsString::from(KUBERNETES_DATA));
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if event.kind.is_access() {
            return;
        }
        for path in event.paths {
            if path.file_name().is_some_and(|n| names.contains(n)) {
                let _ = tx.send(Trigger::File(path));
                // One request per event, whichever of its paths matched.
                break;
            }
        }
    })
    .map_err(|e| format!("cannot watch the policy files: {e}"))?;
    for dir in &dirs {
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;
    }
    Ok(watcher)
}

fn directory_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    }
}

#[cfg(unix)]
fn listen_for_hangup(tx: mpsc::UnboundedSender<Trigger>) -> Result<(), String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangup =
        signal(SignalKind::hangup()).map_err(|e| format!("cannot handle SIGHUP: {e}"))?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            if tx.send(Trigger::Signal).is_err() {
                return;
            }
        }
    });
    Ok(())
}

#[cfg(not(unix))]
fn listen_for_hangup(_tx: mpsc::UnboundedSender<Trigger>) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_replaced_file_asks_once_per_burst() {
        let dir = std::env::temp_dir().join(format!("mcp-budget-trigger-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("policy.toml");
        std::fs::write(&file, "a").expect("write");
        let mut triggers = triggers(std::slice::from_ref(&file)).expect("watch");
        // An editor's save: a new file renamed over the old, plus a write into it.
        let tmp = dir.join(".policy.toml.swp");
        std::fs::write(&tmp, "b").expect("write");
        std::fs::rename(&tmp, &file).expect("rename");
        std::fs::write(&file, "c").expect("write");
        let got = tokio::time::timeout(Duration::from_secs(5), triggers.next())
            .await
            .expect("a trigger within 5 s");
        assert_eq!(got, Some(Trigger::File(file.clone())));
        // The burst was merged: nothing else is pending.
        assert!(
            tokio::time::timeout(QUIET * 2, triggers.next())
                .await
                .is_err(),
            "one request per burst"
        );
        // Files in the same directory that are not the policy do not ask.
        std::fs::write(dir.join("other.toml"), "x").expect("write");
        assert!(
            tokio::time::timeout(QUIET * 3, triggers.next())
                .await
                .is_err()
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    /// What the kubelet does to a `ConfigMap` volume: `policy.toml` links to `..data/policy.toml`,
    /// `..data` links to a timestamped directory, and an update writes a new directory and
    /// renames a new `..data` link over the old one. The file's own name sees no event.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_kubernetes_volume_update_asks() {
        use std::os::unix::fs::symlink;
        let dir = std::env::temp_dir().join(format!("mcp-budget-k8s-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("..2026_12_01_1")).expect("temp dir");
        std::fs::write(dir.join("..2026_12_01_1/policy.toml"), "a").expect("write");
        symlink("..2026_12_01_1", dir.join("..data")).expect("link");
        symlink("..data/policy.toml", dir.join("policy.toml")).expect("link");
        let file = dir.join("policy.toml");
        let mut triggers = triggers(std::slice::from_ref(&file)).expect("watch");
        std::fs::create_dir_all(dir.join("..2026_12_01_2")).expect("dir");
        std::fs::write(dir.join("..2026_12_01_2/policy.toml"), "b").expect("write");
        symlink("..2026_12_01_2", dir.join("..data_tmp")).expect("link");
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("swap");
        let got = tokio::time::timeout(Duration::from_secs(5), triggers.next())
            .await
            .expect("a trigger within 5 s");
        assert!(matches!(got, Some(Trigger::File(_))), "{got:?}");
        assert_eq!(std::fs::read_to_string(&file).expect("read"), "b");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
