//! Every policy shipped in `policies/` loads and validates.

use std::path::Path;

use mcp_budget::policy::Policy;

#[test]
fn every_shipped_policy_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let policy = Policy::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(!policy.upstreams.is_empty(), "{}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 3);
}

#[test]
fn check_command_reports_problems_with_lines_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "version = 1\n[[upstream]]\nname = \"x y\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-budget"))
        .arg("check")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: upstream[0].name"), "{err}");

    let json = dir.path().join("claude.json");
    std::fs::write(
        &json,
        r#"{"mcpServers": {"time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}, "web": {"url": "http://127.0.0.1:1/mcp"}}}"#,
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-budget"))
        .arg("check")
        .arg("--mcp-json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
