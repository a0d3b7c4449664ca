//! `scripts/quickstart.sh --stdio` as the command of a host's server entry (issue 49): a host's
//! PATH has no cargo, so the entry runs the built binary, and it serves that host on stdio only,
//! binding no HTTP port (the demo policy's listener left out). Started by the Python SDK as a
//! host starts its entry, with the tests' build of the gateway as the built binary.

use serde_json::json;

use crate::harness::{TagGuard, assert_no_leftovers, new_tag, root};
use crate::packaging::{Sdk, host_entry};

/// The PATH's folders that hold no `cargo` (node and the shell tools stay).
fn path_without_cargo() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<_> = std::env::split_paths(&path)
        .filter(|dir| !dir.join("cargo").exists())
        .collect();
    std::env::join_paths(kept)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_stdio_runs_the_built_binary_without_cargo_and_binds_no_port() {
    let tag = new_tag("quickstart-stdio");
    let guard = TagGuard(tag.clone());
    let entry = json!({
        "command": root().join("scripts/quickstart.sh"),
        "args": ["--stdio"],
        "env": {
            "PATH": path_without_cargo(),
            "MCP_BUDGET_BIN": crate::harness::BIN,
            "MCPB_IT_TAG": tag,
            "MCP_BUDGET_LOG": "warn",
        },
    });
    let (report, stderr) = host_entry(Sdk::Python, &entry, "get-env").await;
    assert!(
        report["text"]
            .as_str()
            .unwrap_or_default()
            .contains("\"PATH\""),
        "{report}\n{stderr}"
    );
    assert!(stderr.contains("serving MCP on stdio"), "{stderr}");
    assert!(
        !stderr.contains("listening on"),
        "the stdio entry bound a port: {stderr}"
    );
    assert_no_leftovers(&tag).await;
    drop(guard);
}

/// The build step of the quick start is not silent: it says what a cold build costs before it
/// starts and runs cargo without `--quiet`, so cargo's progress shows. Run with a `cargo` of the
/// test's own on PATH that records its arguments and fails, so nothing is built or served.
#[test]
fn quickstart_says_what_the_build_costs_and_shows_cargos_progress() {
    let dir = tempfile::tempdir().unwrap();
    let args_file = dir.path().join("cargo-args");
    let fake = dir.path().join("cargo");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\nexit 3\n",
            args_file.display()
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    let path = format!("{}:{}", dir.path().display(), path_without_cargo());
    let out = std::process::Command::new(root().join("scripts/quickstart.sh"))
        .env("PATH", path)
        .env_remove("MCP_BUDGET_BIN")
        .env_remove("QUICKSTART_STOP")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("a cold build takes about 17 minutes")
            || stderr.contains("only what changed since the last build"),
        "{stderr}"
    );
    let args = std::fs::read_to_string(&args_file).unwrap();
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args.first(), Some(&"build"), "{args:?}");
    assert!(
        !args.contains(&"--quiet"),
        "cargo's progress hidden: {args:?}"
    );
}
