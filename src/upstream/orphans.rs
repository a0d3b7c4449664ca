//! Descendants that left their upstream's process group (`setsid`, a daemonizing server): the
//! group kill of [`stdio`](super::stdio) cannot reach them. On Linux the gateway process makes
//! itself a child subreaper ([`adopt`]), so such an orphan is re-parented to the gateway rather
//! than to init, and [`end`] ends the ones left once the server has stopped.
//!
//! Only the binary calls these (`mcp-budget serve`): being a subreaper is a property of the
//! whole process, which a program embedding the library decides for itself. Elsewhere than
//! Linux both do nothing.

/// How long the orphans have after SIGTERM before SIGKILL.
#[cfg(target_os = "linux")]
const GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Makes this process the child subreaper of its descendants (`PR_SET_CHILD_SUBREAPER`): an
/// upstream's descendant whose parent exits is re-parented here. Call it before any upstream
/// starts.
///
/// # Errors
/// When the kernel refuses (the gateway then runs as before, without the adoption).
#[cfg(target_os = "linux")]
pub fn adopt() -> std::io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)
}

/// [`adopt`] elsewhere: nothing to do.
///
/// # Errors
/// Never.
#[cfg(not(target_os = "linux"))]
pub fn adopt() -> std::io::Result<()> {
    Ok(())
}

/// Ends this process's remaining children (after the server stopped, so they are the orphans
/// [`adopt`] took in, and any their death re-parented in turn): SIGTERM, SIGKILL after
/// `GRACE`, each reaped. Returns how many there were.
#[cfg(target_os = "linux")]
pub fn end() -> usize {
    use nix::sys::signal::{Signal, kill};
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};

    let mut ended = 0;
    // An orphan's own children come here when it dies: a few rounds.
    for _ in 0..4 {
        let left = children();
        if left.is_empty() {
            break;
        }
        ended += left.len();
        for &pid in &left {
            let _ = kill(pid, Signal::SIGTERM);
        }
        let deadline = std::time::Instant::now() + GRACE;
        let mut waiting = left;
        while !waiting.is_empty() && std::time::Instant::now() < deadline {
            // Still alive (not yet reaped, and still ours): keep waiting.
            waiting.retain(|&pid| {
                matches!(
                    waitpid(pid, Some(WaitPidFlag::WNOHANG)),
                    Ok(WaitStatus::StillAlive)
                )
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for pid in waiting {
            let _ = kill(pid, Signal::SIGKILL);
            let _ = waitpid(pid, None);
        }
    }
    if ended > 0 {
        tracing::info!(
            ended,
            "Ended processes that had left their upstream's process group"
        );
    }
    ended
}

/// [`end`] elsewhere: nothing to do.
#[cfg(not(target_os = "linux"))]
pub fn end() -> usize {
    0
}

/// The processes whose parent is this one (`/proc/<pid>/stat`).
#[cfg(target_os = "linux")]
fn children() -> Vec<nix::unistd::Pid> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        if parent_of(&stat)? != me {
            return None;
        }
        Some(nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?))
    })
    .collect()
}

/// The parent pid in the text of `/proc/<pid>/stat`: `pid (comm) state ppid …`, where `comm`
/// may hold spaces and parentheses (so read after the last `)`).
#[cfg(any(target_os = "linux", test))]
fn parent_of(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_after_the_command_name() {
        assert_eq!(parent_of("42 (sleep) S 7 42 42 0"), Some(7));
        assert_eq!(parent_of("42 (a) b (c)) Z 9 1 1"), Some(9));
        assert_eq!(parent_of("42 (x"), None);
    }
}
