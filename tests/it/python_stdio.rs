//! A Python MCP SDK client (a script in `tests/peers`) against the gateway binary over stdio,
//! serving a policy whose upstreams are the real `mcp-server-time` (`PyPI`) and
//! `@modelcontextprotocol/server-everything` (npm), plus any a test adds. Shared by
//! [`budget_e2e`](crate::budget_e2e) and [`discovery_e2e`](crate::discovery_e2e). (The
//! harness's `python_client` drives the same SDK through a tagged gateway instead.)

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// `tests/peers`.
pub(crate) fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// The Python of the test venv.
///
/// # Panics
/// When the venv is not installed.
pub(crate) fn python() -> PathBuf {
    let python = peers().join(".venv/bin/python");
    assert!(python.exists(), "run scripts/install-test-deps.sh first");
    python
}

/// What the client printed.
#[derive(Debug)]
pub(crate) struct Report {
    /// Its last stdout line, as JSON.
    pub(crate) json: Value,
    /// Its stderr, the gateway's log included (the gateway inherits it).
    pub(crate) stderr: String,
}

/// Runs `client` (the script under `tests/peers` and its first arguments; the gateway's command
/// line follows them) with `env`, against the gateway serving `[budget]` with `budget` (its keys,
/// and any sections after it) over `time`, `everything` and the `[[upstream]]` tables of
/// `more_upstreams`.
///
/// # Panics
/// When the client fails, or its last line is not JSON.
pub(crate) fn run(
    client: &[&str],
    budget: &str,
    more_upstreams: &str,
    env: &[(&str, &str)],
) -> Report {
    let peers = peers();
    let python = python();
    let dir = tempfile::tempdir().expect("a temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            r#"version = 1

[budget]
model = "claude-haiku-4-5"
{budget}

[[upstream]]
name = "time"
command = "{time}"
args = ["--local-timezone", "UTC"]

[[upstream]]
name = "everything"
command = "{everything}"
{more_upstreams}"#,
            time = peers.join(".venv/bin/mcp-server-time").display(),
            everything = peers
                .join("node_modules/.bin/mcp-server-everything")
                .display(),
        ),
    )
    .expect("the policy written");
    let (script, args) = client.split_first().expect("a client script");
    let output = Command::new("timeout")
        .arg("120")
        .arg(&python)
        .arg(peers.join(script))
        .args(args)
        .arg(crate::harness::BIN)
        .args(["serve", "--stdio", "--policy"])
        .arg(&policy)
        .envs(env.iter().copied())
        .output()
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "client failed:\n{stdout}\n{stderr}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    let json = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("bad report ({e}): {stdout}\n{stderr}"));
    Report { json, stderr }
}
