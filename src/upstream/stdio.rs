//! Stdio upstreams: a child process speaking newline-delimited JSON-RPC.
//!
//! The child runs in its own process group, so that everything it starts ends with it. A child
//! that exits is restarted (see `upstream::supervise`); its requests in flight fail with
//! `mcp_budget.upstream.unavailable`. Its stderr goes to the log under the server's name.
//!
//! # Environment
//!
//! A child does not inherit the gateway's environment, which may hold credentials meant for
//! the gateway or for other servers (`AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, `MCP_BUDGET_*`).
//! It gets [`BASE_ENV`] and every `LC_*` variable copied from the gateway's environment, then the
//! upstream's `env` on top. With `inherit_env = true` it gets the whole environment instead, with
//! `env` on top. The names (never the values) it got are logged at debug.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Link, Upstream};
use crate::jsonrpc::Message;
use crate::policy::Transport;

/// Grace given to a child between SIGTERM and SIGKILL at shutdown.
const GRACE: Duration = Duration::from_secs(2);
/// Longest line accepted from a child: bigger is treated as a protocol fault.
const MAX_LINE: usize = 64 * 1024 * 1024;

/// Variables a child gets from the gateway's environment when its upstream does not set
/// `inherit_env` (besides every `LC_*`). None of them is a credential:
/// - `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`: what the official MCP SDKs (Python
///   `get_default_environment`, TypeScript `getDefaultEnvironment`) pass on POSIX, after
///   sudo's reset environment; `#!/usr/bin/env node` launchers need `PATH`, servers keep
///   their files under `HOME`.
/// - `LANG`, `LANGUAGE`, `LC_*`: the locale, so a child reads and writes text (paths, messages)
///   in the user's encoding and language, as sudo keeps it too.
/// - `TZ`: the user's time zone, for servers that report local time (`mcp-server-time`).
/// - `TMPDIR`: the user's own temporary directory (per-user and private on macOS); without
///   it, children fall back to the shared `/tmp`.
pub const BASE_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE", "TZ", "TMPDIR",
];

fn spawn(upstream: &Upstream) -> std::io::Result<Child> {
    let Transport::Stdio {
        command,
        args,
        env,
        inherit_env,
        cwd,
    } = &upstream.spec().transport
    else {
        return Err(std::io::Error::other("not a stdio upstream"));
    };
    let child_env =
        child_env(std::env::vars_os(), env, *inherit_env).map_err(std::io::Error::other)?;
    tracing::debug!(
        upstream = upstream.name(),
        inherit_env,
        variables = ?child_env.keys().map(|k| k.to_string_lossy()).collect::<Vec<_>>(),
        "Child environment"
    );
    let mut cmd = Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(&child_env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    cmd.spawn()
}

/// The environment of a child: from the gateway's `vars`, the whole of them when `inherit` is
/// set, otherwise [`BASE_ENV`] and `LC_*` only; then `env` on top, its `${NAME}` references
/// filled from the gateway's `vars` (see [`expand`]). Like the MCP SDKs, base values that
/// start with `()` (exported shell functions) are not copied.
fn child_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    env: &BTreeMap<String, String>,
    inherit: bool,
) -> Result<BTreeMap<OsString, OsString>, String> {
    let in_base = |name: &OsStr, value: &OsStr| {
        let name = name.as_encoded_bytes();
        let known = BASE_ENV.iter().any(|b| b.as_bytes() == name) || name.starts_with(b"LC_");
        known && !value.as_encoded_bytes().starts_with(b"()")
    };
    let vars: Vec<(OsString, OsString)> = vars.into_iter().collect();
    let lookup = |name: &str| {
        vars.iter()
            .find(|(k, _)| k.as_encoded_bytes() == name.as_bytes())
            .and_then(|(_, v)| v.to_str())
    };
    let mut own = Vec::with_capacity(env.len());
    for (k, v) in env {
        let value = expand(v, lookup).map_err(|e| format!("env {k}: {e}"))?;
        own.push((OsString::from(k), OsString::from(value)));
    }
    let mut out: BTreeMap<OsString, OsString> = vars
        .iter()
        .filter(|(name, value)| inherit || in_base(name, value))
        .cloned()
        .collect();
    out.extend(own);
    Ok(out)
}

/// Fills `${NAME}` and `${NAME:-default}` in a policy `env` value from the gateway's own
/// environment, so that a secret reaches the one server that needs it without being written
/// into the policy file (`GITHUB_TOKEN = "${GITHUB_TOKEN}"`, as in Claude Code's `.mcp.json`).
/// `$$` is a literal `$`; any other `$` stays as it is.
///
/// # Errors
/// A variable that is not set (or not UTF-8) and has no default, or a `${` without `}`.
fn expand<'v>(value: &str, lookup: impl Fn(&str) -> Option<&'v str>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| format!("\"${{\" without a closing \"}}\" in {value:?}"))?;
            let (name, default) = match body[..end].split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (&body[..end], None),
            };
            match (lookup(name), default) {
                (Some(v), _) => out.push_str(v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => {
                    return Err(format!(
                        "${{{name}}} is not set in the gateway's environment (set it, or give a \
                         default: ${{{name}:-value}})"
                    ))
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A running child: what the supervisor closes when its connection ends.
#[derive(Debug)]
pub(crate) struct Process {
    child: Child,
    pid: Option<u32>,
    writer: JoinHandle<()>,
}

impl Process {
    /// Starts the child: the process, the link to its stdin, and the reader of its stdout,
    /// which feeds [`Upstream::incoming`] and ends, with the reason, when the child's output
    /// does.
    pub(crate) fn spawn(upstream: &Upstream) -> Result<(Self, Link, JoinHandle<String>), String> {
        let mut child = spawn(upstream).map_err(|err| format!("cannot start: {err}"))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the child's pipes could not be opened".into());
        };
        let pid = child.id();
        let log_name = upstream.name().to_owned();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(upstream = %log_name, "{line}");
            }
        });
        let (tx, rx) = mpsc::unbounded_channel::<Message>();
        let writer = tokio::spawn(crate::jsonrpc::write_lines(rx, stdin));
        let reader = tokio::spawn(read(upstream.clone(), stdout));
        Ok((Self { child, pid, writer }, Link::Stdio(tx), reader))
    }

    /// Ends the child (and its reader); returns `reason` with the exit status when the child
    /// stopped by itself (not at shutdown).
    pub(crate) async fn close(
        mut self,
        reader: Option<JoinHandle<String>>,
        shutdown: bool,
        reason: String,
    ) -> String {
        self.writer.abort();
        if let Some(reader) = reader {
            reader.abort();
        }
        terminate(&mut self.child, self.pid).await;
        match self.child.try_wait() {
            Ok(Some(status)) if !shutdown => {
                format!("{reason} (exit status {status})")
            }
            _ => reason,
        }
    }
}

/// Reads the child's messages until its output ends; returns why it ended.
async fn read(upstream: Upstream, stdout: ChildStdout) -> String {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) => return "the process closed its output".to_owned(),
            Ok(n) if n > MAX_LINE => return "the process sent an oversized line".to_owned(),
            Ok(_) => {}
            Err(err) => return format!("reading its output failed: {err}"),
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        match Message::parse(text) {
            Ok(msg) => upstream.incoming(msg, None),
            Err(err) => {
                // Servers print banners and debug lines on stdout; one bad line must not
                // take the upstream down. Requests waiting on it time out.
                tracing::warn!(upstream = upstream.name(), error = %err, line = %String::from_utf8_lossy(&text[..text.len().min(200)]), "Non-JSON-RPC line from upstream ignored");
            }
        }
    }
}

/// Ends the child's whole process group: SIGTERM, then SIGKILL after a grace period; reaps it.
async fn terminate(child: &mut Child, pid: Option<u32>) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;

    let group = pid.and_then(|p| i32::try_from(p).ok()).map(Pid::from_raw);
    if let Some(group) = group {
        let _ = killpg(group, Signal::SIGTERM);
    }
    if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
        if let Some(group) = group {
            let _ = killpg(group, Signal::SIGKILL);
        }
        let _ = child.kill().await;
    }
    // Stragglers in the group (grandchildren that ignored SIGTERM) go too.
    if let Some(group) = group {
        let _ = killpg(group, Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::ffi::OsString;

    use super::{child_env, expand};

    #[test]
    fn env_values_take_the_gateways_variables_by_reference() {
        let vars = |name: &str| match name {
            "TOKEN" => Some("s3cret"),
            "EMPTY" => Some(""),
            _ => None,
        };
        assert_eq!(expand("${TOKEN}", vars).unwrap(), "s3cret");
        assert_eq!(expand("Bearer ${TOKEN}!", vars).unwrap(), "Bearer s3cret!");
        assert_eq!(expand("${MISSING:-fallback}", vars).unwrap(), "fallback");
        assert_eq!(expand("${EMPTY:-fallback}", vars).unwrap(), "");
        assert_eq!(expand("$$5 and $PATH", vars).unwrap(), "$5 and $PATH");
        assert_eq!(expand("plain", vars).unwrap(), "plain");
        let err = expand("${MISSING}", vars).unwrap_err();
        assert!(err.contains("${MISSING} is not set"), "{err}");
        assert!(expand("${TOKEN", vars).is_err());
    }

    #[test]
    fn a_missing_reference_keeps_the_child_from_starting() {
        let own: std::collections::BTreeMap<String, String> =
            [("GITHUB_TOKEN".to_owned(), "${NOT_SET_ANYWHERE}".to_owned())].into();
        let err = child_env(Vec::new(), &own, false).unwrap_err();
        assert!(err.starts_with("env GITHUB_TOKEN: "), "{err}");
    }

    fn gateway_env() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/me"),
            ("LANG", "de_DE.UTF-8"),
            ("LC_TIME", "en_GB.UTF-8"),
            ("TZ", "Europe/Berlin"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("GITHUB_TOKEN", "gh"),
            ("MCP_BUDGET_LOG", "debug"),
            ("SSH_AUTH_SOCK", "/run/agent"),
            ("SHELL", "() { :; }; echo pwned"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    fn names(env: &BTreeMap<OsString, OsString>) -> Vec<&str> {
        env.keys().map(|k| k.to_str().unwrap()).collect()
    }

    #[test]
    fn a_clean_child_gets_the_base_and_its_env_only() {
        let own = BTreeMap::from([
            ("GITHUB_TOKEN".to_owned(), "mine".to_owned()),
            ("PATH".to_owned(), "/opt/bin".to_owned()),
        ]);
        let env = child_env(gateway_env(), &own, false).unwrap();
        assert_eq!(
            names(&env),
            ["GITHUB_TOKEN", "HOME", "LANG", "LC_TIME", "PATH", "TZ"]
        );
        // The policy's `env` wins over the base.
        assert_eq!(env[&OsString::from("PATH")], "/opt/bin");
        assert_eq!(env[&OsString::from("GITHUB_TOKEN")], "mine");
    }

    #[test]
    fn inherit_gives_everything_with_env_on_top() {
        let own = BTreeMap::from([("X".to_owned(), "y".to_owned())]);
        let env = child_env(gateway_env(), &own, true).unwrap();
        assert_eq!(env.len(), gateway_env().len() + 1);
        assert_eq!(env[&OsString::from("AWS_SECRET_ACCESS_KEY")], "aws");
        assert_eq!(env[&OsString::from("X")], "y");
    }
}
