//! Stdio upstreams: a child process speaking newline-delimited JSON-RPC.
//!
//! The child runs in its own process group, so that everything it starts ends with it. A child
//! that exits is restarted (see `upstream::supervise`); its requests in flight fail with
//! `mcp_budget.upstream.unavailable`. Its stderr goes to the log under the server's name, and
//! its last lines ([`TAIL_LINES`], at most [`TAIL_BYTES`]) into the reason it is down when it
//! exits by itself: the line that says why (a missing token) is in the startup summary and in
//! the error clients get, not only in the log. A command that cannot be started is named, with
//! where it was looked for and the usual fix (`spawn_failure`).
//!
//! # Environment
//!
//! A child does not inherit the gateway's environment, which may hold credentials meant for
//! the gateway or for other servers (`AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, `MCP_BUDGET_*`).
//! It gets [`BASE_ENV`], [`NETWORK_ENV`] (CA bundles, proxies) and every `LC_*` variable copied
//! from the gateway's environment, then the
//! upstream's `env` on top. With `inherit_env = true` it gets the whole environment instead, with
//! `env` on top. The names (never the values) it got are logged at debug.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Link, Upstream};
use crate::jsonrpc::{DecodeError, Message};
use crate::lock::lock;
use crate::policy::Transport;
use crate::policy::expand::{Syntax, expand};

/// Grace given to a child between SIGTERM and SIGKILL at shutdown.
const GRACE: Duration = Duration::from_secs(2);
/// Longest line accepted from a child: bigger is treated as a protocol fault.
const MAX_LINE: usize = 64 * 1024 * 1024;
/// Room for one line kept between lines: a bigger line's buffer (a `tools/list` answer of
/// 100 tools is ~100 KiB) is let go once read, not held for the upstream's life.
const LINE_KEPT: usize = 16 * 1024;
/// Stderr lines of a child kept for the reason it stopped.
pub const TAIL_LINES: usize = 5;
/// Bytes of stderr kept for the reason it stopped (the newest lines win).
pub const TAIL_BYTES: usize = 1024;
/// Longest stderr line read at once (the rest of a longer one is read as further lines).
const MAX_STDERR_LINE: u64 = 64 * 1024;
/// How long closing waits for the last stderr lines of a child that is gone.
const TAIL_WAIT: Duration = Duration::from_millis(500);

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

/// How the network is reached, passed on like [`BASE_ENV`] so that `npx` / `uvx` servers work
/// behind a company CA or proxy as they do in the user's shell: the CA bundles of OpenSSL and
/// rustls (`SSL_CERT_FILE`, `SSL_CERT_DIR`, uv's `UV_NATIVE_TLS`), Node (`NODE_EXTRA_CA_CERTS`),
/// Python requests and pip (`REQUESTS_CA_BUNDLE`, `PIP_CERT`), curl (`CURL_CA_BUNDLE`), and the
/// proxies, in both cases. A proxy URL may carry a password: a server that must not have it
/// gets `HTTPS_PROXY = ""` (and the like) in its `env`.
pub const NETWORK_ENV: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "UV_NATIVE_TLS",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
];

/// What a child's last stderr lines say when a company CA or proxy is in the way (uv, pip,
/// requests, Node, curl, rustls).
const NETWORK_TROUBLE: &[&str] = &[
    "unknownissuer",
    "invalid peer certificate",
    "unable to get local issuer certificate",
    "unable_to_get_issuer_cert_locally",
    "self signed certificate in certificate chain",
    "self-signed certificate in certificate chain",
    "self_signed_cert_in_chain",
    "certificate_verify_failed",
    "certificate verify failed",
    "proxy authentication required",
    "proxyerror",
    "tunnel connection failed",
];

/// The fix to suggest when `tail` (a child's last stderr) looks like TLS interception or a
/// proxy, naming which of the variables the gateway's environment lacks (`is_set`).
pub(crate) fn network_hint(tail: &str, is_set: &dyn Fn(&str) -> bool) -> Option<String> {
    let lower = tail.to_ascii_lowercase();
    if !NETWORK_TROUBLE.iter().any(|p| lower.contains(p)) {
        return None;
    }
    let set: Vec<&str> = NETWORK_ENV.iter().copied().filter(|v| is_set(v)).collect();
    let now = if set.is_empty() {
        "none of them is set in the gateway's environment".to_owned()
    } else {
        format!("the gateway's environment has {}", set.join(", "))
    };
    Some(format!(
        "this looks like a company CA or proxy in the way: set SSL_CERT_FILE (uv, Python, Rust \
         tools), NODE_EXTRA_CA_CERTS (Node) or REQUESTS_CA_BUNDLE to your CA bundle, and \
         HTTPS_PROXY / NO_PROXY if you use a proxy, where the host starts the gateway (its \
         entry's env) or in this upstream's env; children get them by default ({now})"
    ))
}

/// Starts the child; `Err` is the reason to show, naming what to fix.
fn spawn(upstream: &Upstream) -> Result<Child, String> {
    let Transport::Stdio {
        command,
        args,
        env,
        inherit_env,
        cwd,
    } = &upstream.spec().transport
    else {
        return Err("not a stdio upstream".into());
    };
    let child_env = child_env(std::env::vars_os(), env, *inherit_env)?;
    let args = child_args(args, &|name| std::env::var(name).ok())?;
    tracing::debug!(
        upstream = upstream.name(),
        inherit_env,
        variables = ?child_env.keys().map(|k| k.to_string_lossy()).collect::<Vec<_>>(),
        "Child environment"
    );
    let mut cmd = Command::new(command);
    cmd.args(&args)
        .env_clear()
        .envs(&child_env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group, so that `terminate` ends what it starts too.
    #[cfg(unix)]
    cmd.process_group(0);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    cmd.spawn().map_err(|err| {
        let here = std::env::current_dir().unwrap_or_default();
        let place = Place {
            path: child_env.get(OsStr::new("PATH")).map(OsString::as_os_str),
            cwd: cwd.as_deref().unwrap_or(&here),
            cwd_set: cwd.is_some(),
        };
        spawn_failure(command, &err, &place)
    })
}

/// Where a command was looked for: the child's `PATH` and working directory.
#[derive(Debug, Clone, Copy)]
struct Place<'a> {
    /// The child's `PATH`, if it has one.
    path: Option<&'a OsStr>,
    /// Its working directory.
    cwd: &'a Path,
    /// Whether the upstream set `cwd` (rather than inheriting the gateway's).
    cwd_set: bool,
}

/// Why `command` could not be started, said so that the message alone tells what to fix: the
/// command, where it was looked for (the directories of the child's `PATH`, or the working
/// directory for a relative path) and the usual fix for the launchers MCP server entries use
/// (`npx`, `uvx`, `docker`, `node`, `python`), instead of the bare `No such file or directory
/// (os error 2)`.
fn spawn_failure(command: &str, err: &std::io::Error, place: &Place<'_>) -> String {
    use std::io::ErrorKind;

    if place.cwd_set && !place.cwd.is_dir() {
        return format!(
            "cannot start {command:?}: its cwd {} is not a directory (fix the upstream's cwd)",
            place.cwd.display()
        );
    }
    let is_path = command.contains('/');
    match err.kind() {
        ErrorKind::NotFound if is_path => {
            let full = place.cwd.join(command);
            if full.is_file() {
                format!(
                    "cannot start {command:?}: the interpreter on its first line (#!) was not \
                     found; install it or fix that line"
                )
            } else if Path::new(command).is_absolute() {
                format!("cannot start {command:?}: no such file")
            } else {
                format!(
                    "cannot start {command:?}: no such file relative to the working directory \
                     {} (give an absolute path, or set the upstream's cwd)",
                    place.cwd.display()
                )
            }
        }
        ErrorKind::NotFound => {
            let looked = match place.path {
                None => "its environment has no PATH (set one in the upstream's env)".to_owned(),
                Some(path) => {
                    let dirs: Vec<String> = std::env::split_paths(path)
                        .map(|d| d.display().to_string())
                        .collect();
                    let shown = if dirs.len() > 8 {
                        format!("{}, …", dirs[..8].join(", "))
                    } else {
                        dirs.join(", ")
                    };
                    match dirs.len() {
                        1 => format!("not found in the one directory of its PATH ({shown})"),
                        n => format!("not found in the {n} directories of its PATH ({shown})"),
                    }
                }
            };
            format!(
                "cannot start {command:?}: command {looked}; {}",
                install_hint(command)
            )
        }
        ErrorKind::PermissionDenied => format!(
            "cannot start {command:?}: permission denied (is it executable? `chmod +x` it, or \
             run it through its interpreter)"
        ),
        _ => format!("cannot start {command:?}: {err}"),
    }
}

/// The usual fix for a launcher that is not installed (or not on the `PATH` a host starts
/// the gateway with: GUI hosts often get a shorter one than a shell).
fn install_hint(command: &str) -> String {
    let install = match command {
        "npx" | "npm" | "node" => {
            "install Node.js (node, npm and npx come with it: https://nodejs.org)"
        }
        "uvx" | "uv" => {
            "install uv (uvx comes with it: https://docs.astral.sh/uv/getting-started/installation/)"
        }
        "docker" => "install Docker (https://docs.docker.com/get-docker/) and start it",
        "python" | "python3" => {
            "install Python 3 (https://www.python.org/downloads/), or use a virtualenv's \
             bin/python"
        }
        _ => {
            return format!(
                "give its full path as the upstream's command (`command -v {command}` in a shell \
             prints it), or add its directory to PATH in the upstream's env"
            );
        }
    };
    format!(
        "{install}, or give its full path as the upstream's command (`command -v {command}` in a \
         shell prints it)"
    )
}

/// The environment of a child: from the gateway's `vars`, the whole of them when `inherit` is
/// set, otherwise [`BASE_ENV`] and `LC_*` only; then `env` on top, its `${NAME}` references
/// filled from the gateway's `vars` ([`Syntax::ChildEnv`]), so that a secret reaches the one
/// server that needs it without being written into the policy file
/// (`GITHUB_TOKEN = "${GITHUB_TOKEN}"`, as in Claude Code's `.mcp.json`). Like the MCP SDKs,
/// base values that start with `()` (exported shell functions) are not copied. A variable
/// that is not UTF-8 counts as not set.
fn child_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    env: &BTreeMap<String, String>,
    inherit: bool,
) -> Result<BTreeMap<OsString, OsString>, String> {
    let in_base = |name: &OsStr, value: &OsStr| {
        let name = name.as_encoded_bytes();
        let known = (BASE_ENV.iter().chain(NETWORK_ENV)).any(|b| b.as_bytes() == name)
            || name.starts_with(b"LC_");
        known && !value.as_encoded_bytes().starts_with(b"()")
    };
    let vars: Vec<(OsString, OsString)> = vars.into_iter().collect();
    let lookup = |name: &str| {
        vars.iter()
            .find(|(k, _)| k.as_encoded_bytes() == name.as_bytes())
            .and_then(|(_, v)| v.to_str())
            .map(str::to_owned)
    };
    let mut own = Vec::with_capacity(env.len());
    for (k, v) in env {
        let value = expand(v, &Syntax::ChildEnv, &lookup).map_err(|e| format!("env {k}: {e}"))?;
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

/// A child's arguments: an argument that holds `${env:VAR}` (or `${env:VAR:-default}`) gets it
/// from the gateway's environment `env` when the child starts ([`Syntax::Policy`]: any other
/// `${…}` stays as written), so that `init` keeps a VS Code entry's `${env:TOKEN}` a reference
/// and a token passed as an argument stays out of the policy. An argument without `${env:` is
/// passed as written, byte for byte.
fn child_args(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, String> {
    args.iter()
        .enumerate()
        .map(|(i, arg)| {
            if arg.contains("${env:") {
                expand(arg, &Syntax::Policy, env).map_err(|e| format!("args[{i}]: {e}"))
            } else {
                Ok(arg.clone())
            }
        })
        .collect()
}

/// A running child: what the supervisor closes when its connection ends.
#[derive(Debug)]
pub(crate) struct Process {
    /// Boxed: the supervisor's connection enum stays small.
    child: Box<Child>,
    pid: Option<u32>,
    writer: JoinHandle<()>,
    /// The reader of its stderr, which ends when the child (and its group) is gone.
    stderr: JoinHandle<()>,
    /// Its last stderr lines.
    tail: Arc<Mutex<Tail>>,
}

impl Process {
    /// Starts the child: the process, the link to its stdin, and the reader of its stdout,
    /// which feeds [`Upstream::incoming`] and ends, with the reason, when the child's output
    /// does.
    pub(crate) fn spawn(upstream: &Upstream) -> Result<(Self, Link, JoinHandle<String>), String> {
        let mut child = spawn(upstream)?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the child's pipes could not be opened".into());
        };
        let pid = child.id();
        let tail = Arc::new(Mutex::new(Tail::default()));
        let stderr = tokio::spawn(log_stderr(upstream.name().to_owned(), stderr, tail.clone()));
        let (tx, rx) = mpsc::unbounded_channel::<Message>();
        let writer = tokio::spawn(crate::jsonrpc::write_lines(rx, stdin));
        let reader = tokio::spawn(read(upstream.clone(), stdout));
        let process = Self {
            child: Box::new(child),
            pid,
            writer,
            stderr,
            tail,
        };
        Ok((process, Link::Stdio(tx), reader))
    }

    /// Ends the child (and its reader); returns `reason` with the exit status and the last
    /// stderr lines when the child stopped by itself (not at shutdown).
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
        if shutdown {
            self.stderr.abort();
            return reason;
        }
        // The group is gone, so its stderr ends: wait (briefly) for the last lines.
        if tokio::time::timeout(TAIL_WAIT, &mut self.stderr)
            .await
            .is_err()
        {
            self.stderr.abort();
        }
        let status = self.child.try_wait().ok().flatten();
        let tail = lock(&self.tail).text();
        stopped(&reason, status, tail.as_deref())
    }
}

/// The reason a child is down: why its connection ended, how it exited (`exit status: 1`,
/// `signal: 9 (SIGKILL)`) and what it last wrote on stderr.
fn stopped(reason: &str, status: Option<std::process::ExitStatus>, tail: Option<&str>) -> String {
    let mut out = reason.to_owned();
    if let Some(status) = status {
        out += &format!(" ({status})");
    }
    if let Some(tail) = tail {
        out += &format!("; its stderr ended with: {tail}");
        let is_set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        if let Some(hint) = network_hint(tail, &is_set) {
            out += &format!(" ({hint})");
        }
    }
    out
}

/// Logs each stderr line of the child under its server's name, and keeps the last ones.
async fn log_stderr(name: String, stderr: tokio::process::ChildStderr, tail: Arc<Mutex<Tail>>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_STDERR_LINE)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        // Not UTF-8 is still worth showing.
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        tracing::info!(upstream = %name, "{text}");
        lock(&tail).push(text);
    }
}

/// The last [`TAIL_LINES`] non-empty stderr lines of a child, at most [`TAIL_BYTES`] in all,
/// cleaned of control characters and terminal escapes.
#[derive(Debug, Default)]
struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl Tail {
    fn push(&mut self, raw: &str) {
        let mut line = printable(raw);
        if line.is_empty() {
            return;
        }
        if line.len() > TAIL_BYTES {
            let mut cut = TAIL_BYTES;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
        }
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > TAIL_LINES || self.bytes > TAIL_BYTES {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
        }
    }

    /// The lines joined with ` | `, or `None` when the child wrote nothing.
    fn text(&self) -> Option<String> {
        (!self.lines.is_empty()).then(|| Vec::from(self.lines.clone()).join(" | "))
    }
}

/// `raw` without terminal escape sequences (`ESC [ … final`) and control characters (tabs
/// become spaces), trimmed: stderr text fit for one log line and a JSON error message.
fn printable(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: `[`, parameters, then one final byte in `@`..=`~`; other escapes: the
                // next character.
                if chars.next_if_eq(&'[').is_some() {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.trim().to_owned()
}

/// Reads the server's messages until its output ends (a child's stdout, an in-process
/// server's stream); returns why it ended.
pub(super) async fn read<R>(upstream: Upstream, stdout: R) -> String
where
    R: tokio::io::AsyncRead + Unpin,
{
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        line.shrink_to(LINE_KEPT);
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
            Err(DecodeError::LoneSurrogate { at, message }) => {
                upstream.invalid_text(*message, at, None);
            }
            Err(err) => {
                // Servers print banners and debug lines on stdout; one bad line must not
                // take the upstream down. Requests waiting on it time out.
                tracing::warn!(upstream = upstream.name(), error = %err, line = %String::from_utf8_lossy(&text[..text.len().min(200)]), "Non-JSON-RPC line from upstream ignored");
            }
        }
    }
}

/// Ends the child's whole process group: SIGTERM, then SIGKILL after a grace period; reaps it.
#[cfg(unix)]
async fn terminate(child: &mut Child, pid: Option<u32>) {
    use nix::sys::signal::{Signal, killpg};
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

/// Elsewhere (Windows, no process groups or signals): closed stdin (done by the caller) and a
/// grace period to exit, then the child is killed; reaps it.
#[cfg(not(unix))]
async fn terminate(child: &mut Child, _pid: Option<u32>) {
    if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::ffi::OsString;

    use super::{
        Place, TAIL_BYTES, Tail, child_args, child_env, network_hint, printable, spawn_failure,
        stopped,
    };

    #[test]
    fn args_take_env_references_and_keep_everything_else_as_written() {
        let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
        let args: Vec<String> = [
            "--token=${env:TOKEN}",
            "${env:PORT:-3001}",
            "echo ${HOME} $$ ${",
            "${workspaceFolder}/x",
        ]
        .map(str::to_owned)
        .into();
        let got = child_args(&args, &env).unwrap();
        assert_eq!(
            got,
            [
                "--token=s3cret",
                "3001",
                "echo ${HOME} $$ ${",
                "${workspaceFolder}/x"
            ]
        );
        let err = child_args(&["-x".into(), "${env:NOT_SET_ANYWHERE}".into()], &env).unwrap_err();
        assert!(
            err.starts_with("args[1]: NOT_SET_ANYWHERE is not set"),
            "{err}"
        );
    }

    #[test]
    fn env_values_take_the_gateways_variables_by_reference() {
        let vars: Vec<(OsString, OsString)> = vec![("TOKEN".into(), "s3cret".into())];
        let own: BTreeMap<String, String> = [
            ("AUTH", "Bearer ${TOKEN}!"),
            ("PRICE", "$$5 and $PATH"),
            ("PORT", "${MISSING:-3001}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let got = child_env(vars, &own, false).unwrap();
        assert_eq!(got[&OsString::from("AUTH")], "Bearer s3cret!");
        assert_eq!(got[&OsString::from("PRICE")], "$5 and $PATH");
        assert_eq!(got[&OsString::from("PORT")], "3001");
    }

    #[test]
    fn a_missing_reference_keeps_the_child_from_starting() {
        let own: std::collections::BTreeMap<String, String> =
            [("GITHUB_TOKEN".to_owned(), "${NOT_SET_ANYWHERE}".to_owned())].into();
        let err = child_env(Vec::new(), &own, false).unwrap_err();
        assert!(err.starts_with("env GITHUB_TOKEN: "), "{err}");
        assert!(err.contains("NOT_SET_ANYWHERE is not set"), "{err}");
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
    fn a_clean_child_gets_the_company_ca_and_proxy_of_the_gateway() {
        let mut vars = gateway_env();
        for (k, v) in [
            ("SSL_CERT_FILE", "/etc/corp-ca.pem"),
            ("NODE_EXTRA_CA_CERTS", "/etc/corp-ca.pem"),
            ("https_proxy", "http://proxy:3128"),
            ("NO_PROXY", "localhost"),
        ] {
            vars.push((k.into(), v.into()));
        }
        // A server that must not see the proxy gets it emptied in its env.
        let own = BTreeMap::from([("https_proxy".to_owned(), String::new())]);
        let env = child_env(vars, &own, false).unwrap();
        assert_eq!(env[&OsString::from("SSL_CERT_FILE")], "/etc/corp-ca.pem");
        assert_eq!(
            env[&OsString::from("NODE_EXTRA_CA_CERTS")],
            "/etc/corp-ca.pem"
        );
        assert_eq!(env[&OsString::from("NO_PROXY")], "localhost");
        assert_eq!(env[&OsString::from("https_proxy")], "");
        assert!(!env.contains_key(&OsString::from("GITHUB_TOKEN")));
    }

    #[test]
    fn a_start_failure_that_looks_like_a_company_ca_says_which_variable_to_pass() {
        let uv = "error: Request failed after 3 retries\n  Caused by: invalid peer certificate: UnknownIssuer";
        let hint = network_hint(uv, &|_| false).unwrap();
        assert!(
            hint.contains("SSL_CERT_FILE") && hint.contains("none of them is set"),
            "{hint}"
        );
        let node = "npm error code SELF_SIGNED_CERT_IN_CHAIN";
        let hint = network_hint(node, &|v| v == "HTTPS_PROXY").unwrap();
        assert!(
            hint.contains("NODE_EXTRA_CA_CERTS") && hint.contains("has HTTPS_PROXY"),
            "{hint}"
        );
        assert_eq!(
            network_hint("Error: GITHUB_TOKEN is not set", &|_| false),
            None
        );
        let reason = stopped("the server closed its stdout", None, Some(uv));
        assert!(reason.contains("company CA or proxy"), "{reason}");
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

    fn not_found() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    fn place<'a>(path: Option<&'a str>, cwd: &'a std::path::Path) -> Place<'a> {
        Place {
            path: path.map(std::ffi::OsStr::new),
            cwd,
            cwd_set: false,
        }
    }

    #[test]
    fn a_missing_launcher_is_named_with_its_path_and_the_usual_fix() {
        let cwd = std::env::temp_dir();
        let msg = spawn_failure(
            "uvx",
            &not_found(),
            &place(Some("/usr/bin:/bin:/opt/x"), &cwd),
        );
        assert_eq!(
            msg,
            "cannot start \"uvx\": command not found in the 3 directories of its PATH \
             (/usr/bin, /bin, /opt/x); install uv (uvx comes with it: \
             https://docs.astral.sh/uv/getting-started/installation/), or give its full path as \
             the upstream's command (`command -v uvx` in a shell prints it)"
        );
        for (launcher, fix) in [
            ("npx", "install Node.js"),
            ("node", "install Node.js"),
            ("docker", "install Docker"),
            ("python3", "install Python 3"),
            (
                "mcp-server-x",
                "add its directory to PATH in the upstream's env",
            ),
        ] {
            let msg = spawn_failure(launcher, &not_found(), &place(Some("/bin"), &cwd));
            assert!(msg.contains(fix), "{launcher}: {msg}");
            assert!(!msg.contains("os error"), "{msg}");
        }
        let msg = spawn_failure("npx", &not_found(), &place(None, &cwd));
        assert!(msg.contains("its environment has no PATH"), "{msg}");
        let long: Vec<String> = (0..12).map(|i| format!("/d{i}")).collect();
        let msg = spawn_failure("npx", &not_found(), &place(Some(&long.join(":")), &cwd));
        assert!(
            msg.contains("the 12 directories of its PATH (/d0, "),
            "{msg}"
        );
        assert!(msg.contains("/d7, …)"), "{msg}");
    }

    #[test]
    fn a_missing_path_or_cwd_says_where_it_was_looked_for() {
        let dir = tempfile::tempdir().unwrap();
        let msg = spawn_failure("./srv.py", &not_found(), &place(Some("/bin"), dir.path()));
        assert!(
            msg.contains("no such file relative to the working directory"),
            "{msg}"
        );
        assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
        let script = dir.path().join("srv.py");
        std::fs::write(&script, "#!/no/such/python\n").unwrap();
        let msg = spawn_failure("./srv.py", &not_found(), &place(Some("/bin"), dir.path()));
        assert!(
            msg.contains("the interpreter on its first line (#!)"),
            "{msg}"
        );
        let gone = dir.path().join("gone");
        let msg = spawn_failure(
            "npx",
            &not_found(),
            &Place {
                path: None,
                cwd: &gone,
                cwd_set: true,
            },
        );
        assert!(
            msg.contains("is not a directory (fix the upstream's cwd)"),
            "{msg}"
        );
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let msg = spawn_failure("/srv", &denied, &place(Some("/bin"), dir.path()));
        assert!(msg.contains("chmod +x"), "{msg}");
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_clean_lines_within_bounds() {
        let mut tail = Tail::default();
        assert_eq!(tail.text(), None);
        for i in 0..8 {
            tail.push(&format!("line {i}"));
        }
        tail.push("   ");
        assert_eq!(
            tail.text().unwrap(),
            "line 3 | line 4 | line 5 | line 6 | line 7"
        );
        tail.push(&"x".repeat(5000));
        assert_eq!(tail.text().unwrap().len(), TAIL_BYTES);
        tail.push("\u{1b}[31mError:\u{1b}[0m GITHUB_TOKEN\tis not set\u{7}\r");
        assert_eq!(tail.text().unwrap(), "Error: GITHUB_TOKEN is not set");
        assert_eq!(printable("a\u{1b}]0;title\u{7}b"), "a0;titleb");
    }

    #[test]
    #[cfg(unix)]
    fn a_stopped_child_reports_its_status_once_and_its_stderr() {
        use std::os::unix::process::ExitStatusExt;
        let status = std::process::ExitStatus::from_raw(1 << 8);
        assert_eq!(
            stopped(
                "the process closed its output",
                Some(status),
                Some("no token")
            ),
            "the process closed its output (exit status: 1); its stderr ended with: no token"
        );
        assert_eq!(stopped("gone", None, None), "gone");
    }
}
