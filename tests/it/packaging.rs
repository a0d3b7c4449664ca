//! The installs without Rust (issue 49): the npm package `mcp-budget` and the Python wheel
//! `mcp-budget-gateway`, built by `scripts/dist/` around the test build of the gateway, installed
//! offline into fresh prefixes, and started as host entries — `npx -y mcp-budget …`, the
//! installed launcher, `uvx mcp-budget-gateway …`, the pip-installed commands — by the Python and
//! TypeScript SDKs, the way a host starts its config's entry: the SDK's default environment plus
//! the entry's `env`, whose secret the server must receive.
//!
//! The packaging is what is tested here, around the binary the suite already builds; the static
//! musl binary itself (`scripts/dist.sh`) takes a cold build of its own and is verified by hand
//! (figures in `docs/install.md`). The `uvx` entries need `uv` (in the peers' venv or on the
//! PATH; skipped, saying so, without it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    TagGuard, assert_no_leftovers, new_tag, node_bin, peer_file, report, root, venv_bin,
};

use crate::harness::BIN as GATEWAY;
/// What the entry's `env` carries and the server must see (server-everything's `get-env`).
const SECRET: (&str, &str) = ("MCPB_PACKAGING_SECRET", "token-5f1c0de");

/// The packed artifacts, built once per test process into a directory kept for its lifetime.
struct Artifacts {
    dir: tempfile::TempDir,
    npm: PathBuf,
    wheel: PathBuf,
}

fn artifacts() -> &'static Artifacts {
    static ARTIFACTS: OnceLock<Artifacts> = OnceLock::new();
    ARTIFACTS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let npm = script_output(
            Command::new(root().join("scripts/dist/npm.sh")).args([Path::new(GATEWAY), &out]),
        );
        let wheel = script_output(
            Command::new("python3")
                .arg(root().join("scripts/dist/wheel.py"))
                .args([Path::new(GATEWAY), &out]),
        );
        Artifacts {
            dir,
            npm: PathBuf::from(npm),
            wheel: PathBuf::from(wheel),
        }
    })
}

/// Runs a command that must succeed; the last line of its stdout.
fn script_output(cmd: &mut Command) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().last().unwrap_or_default().trim().to_owned()
}

/// A host entry's arguments: mcp-compressor's `-c medium -- SERVER` behind `prefix`.
fn entry_args(prefix: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = prefix.iter().map(|s| (*s).to_owned()).collect();
    args.extend(["-c", "medium", "--"].map(str::to_owned));
    args.push(node_bin("mcp-server-everything"));
    args
}

/// A host entry (`{"command", "args", "env", "cwd"}`) with the secret and the test's tag.
fn entry(tag: &str, command: &str, args: &[String], extra: &[(&str, &str)], cwd: &Path) -> Value {
    let mut env = json!({SECRET.0: SECRET.1, "MCPB_IT_TAG": tag, "MCP_BUDGET_LOG": "warn"});
    for (k, v) in extra {
        env[*k] = json!(v);
    }
    json!({"command": command, "args": args, "env": env, "cwd": cwd})
}

/// Which SDK starts the entry.
#[derive(Debug, Clone, Copy)]
pub enum Sdk {
    Python,
    TypeScript,
}

/// Starts `entry` with `sdk` as a host does and calls the server's `tool` (no arguments) through
/// the gateway (`tests/peers/host_entry.py`, `ts_host_entry.mjs`); the client's report (tools,
/// text) and its stderr, where the gateway's own goes.
pub async fn host_entry(sdk: Sdk, entry: &Value, tool: &str) -> (Value, String) {
    let mut cmd = match sdk {
        Sdk::Python => {
            let mut cmd = tokio::process::Command::new(venv_bin("python"));
            cmd.arg(peer_file("host_entry.py"));
            cmd
        }
        Sdk::TypeScript => {
            let mut cmd = tokio::process::Command::new("node");
            cmd.arg(peer_file("ts_host_entry.mjs"));
            cmd
        }
    };
    cmd.env("ENTRY", entry.to_string())
        .env("TOOL", tool)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{sdk:?} client with {entry} finishes in time"))
        .unwrap();
    report(&out)
}

/// Starts `entry` with `sdk`, calls server-everything's `get-env` through the gateway, and
/// checks what came back: the tool was reached, and the entry's secret with it.
async fn assert_entry_works(sdk: Sdk, entry: &Value) {
    let (report, stderr) = host_entry(sdk, entry, "get-env").await;
    let text = report["text"].as_str().unwrap_or_default();
    // get-env answers the server's environment as a JSON object: the server was reached.
    assert!(
        text.contains("\"PATH\""),
        "{sdk:?} {entry}: {report}\n{stderr}"
    );
    assert!(
        text.contains(SECRET.1),
        "{sdk:?} {entry}: the entry's env did not reach the server: {report}\n{stderr}"
    );
}

/// `tool` from the test peers' venv (`uv` is in tests/peers/requirements.txt) or the PATH.
fn find_tool(tool: &str) -> Option<PathBuf> {
    let venv = crate::harness::peers().join(".venv/bin").join(tool);
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::iter::once(venv)
        .chain(std::env::split_paths(&path).map(|dir| dir.join(tool)))
        .find(|p| p.is_file())
}

/// Runs a setup command that must succeed.
fn run_ok(cmd: &mut Command) {
    script_output(cmd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_npm_package_installs_offline_and_runs_as_npx_and_installed_entries() {
    let tag = new_tag("packaging-npm");
    let guard = TagGuard(tag.clone());
    let artifacts = artifacts();
    let project = tempfile::tempdir_in(artifacts.dir.path()).unwrap();
    run_ok(
        Command::new("npm")
            .args([
                "install",
                "--offline",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .arg(&artifacts.npm)
            .current_dir(project.path()),
    );
    // `npx -y mcp-budget …` finds the installed package; offline so it never asks the registry.
    let npx = entry(
        &tag,
        "npx",
        &entry_args(&["-y", "mcp-budget"]),
        &[("npm_config_offline", "true")],
        project.path(),
    );
    assert_entry_works(Sdk::Python, &npx).await;
    assert_entry_works(Sdk::TypeScript, &npx).await;
    let launcher = project.path().join("node_modules/.bin/mcp-budget");
    let direct = entry(
        &tag,
        launcher.to_str().unwrap(),
        &entry_args(&[]),
        &[],
        project.path(),
    );
    assert_entry_works(Sdk::TypeScript, &direct).await;
    assert_no_leftovers(&tag).await;
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wheel_installs_offline_and_runs_as_uvx_and_pip_entries() {
    let tag = new_tag("packaging-wheel");
    let guard = TagGuard(tag.clone());
    let artifacts = artifacts();
    let venv = tempfile::tempdir_in(artifacts.dir.path()).unwrap();
    run_ok(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(venv.path()),
    );
    run_ok(
        Command::new(venv.path().join("bin/pip"))
            .args([
                "install",
                "--no-index",
                "--disable-pip-version-check",
                "--quiet",
            ])
            .arg(&artifacts.wheel),
    );
    for (sdk, command) in [
        (Sdk::Python, "mcp-budget-gateway"),
        (Sdk::TypeScript, "mcp-budget"),
    ] {
        let installed = venv.path().join("bin").join(command);
        let direct = entry(
            &tag,
            installed.to_str().unwrap(),
            &entry_args(&[]),
            &[],
            venv.path(),
        );
        assert_entry_works(sdk, &direct).await;
    }
    match find_tool("uvx") {
        Some(uvx) => {
            // `uvx mcp-budget-gateway …` resolved from the wheel's folder, not from PyPI.
            let links = artifacts
                .wheel
                .parent()
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            let cache = venv.path().join("uv-cache");
            let args = entry_args(&["--no-index", "--find-links", &links, "mcp-budget-gateway"]);
            let extra = [("UV_CACHE_DIR", cache.to_str().unwrap())];
            let uvx_entry = entry(&tag, uvx.to_str().unwrap(), &args, &extra, venv.path());
            assert_entry_works(Sdk::Python, &uvx_entry).await;
            assert_entry_works(Sdk::TypeScript, &uvx_entry).await;
        }
        None => eprintln!("skipped: the uvx entries (no uvx in tests/peers/.venv or on the PATH)"),
    }
    assert_no_leftovers(&tag).await;
    drop(guard);
}
