//! Every policy shipped in `policies/` loads and validates.

use std::path::Path;

use mcp_budget::policy::{Policy, Transport};

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

#[test]
fn example_policy_declares_roots_and_inherit_env() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/local-servers.toml");
    let policy = Policy::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let files = policy.upstreams.iter().find(|u| u.name == "files").unwrap();
    assert_eq!(
        files.roots,
        Some(vec![
            serde_json::json!({"uri": "file:///srv/data"}),
            serde_json::json!({"uri": "file:///srv/shared", "name": "Shared"}),
        ])
    );
    let inherits: Vec<(&str, bool)> = policy
        .upstreams
        .iter()
        .map(|u| match &u.transport {
            Transport::Stdio { inherit_env, .. } => (u.name.as_str(), *inherit_env),
            _ => panic!("{} is not stdio", u.name),
        })
        .collect();
    assert_eq!(
        inherits,
        [("github", false), ("files", false), ("cloud", true)]
    );
}

/// Servers imported from an `mcpServers` file keep their `env` and get a clean environment
/// (the SDKs' stdio default), not the gateway's whole one.
#[test]
fn imported_servers_keep_their_env_and_do_not_inherit() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("claude.json");
    std::fs::write(
        &json,
        r#"{"mcpServers": {"gh": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "t"}}}}"#,
    )
    .unwrap();
    let mut policy = Policy::from_toml_str("version = 1\n", "inline.toml").unwrap();
    policy.add_mcp_json(&json).unwrap();
    let Transport::Stdio {
        env, inherit_env, ..
    } = &policy.upstreams[0].transport
    else {
        panic!("not stdio");
    };
    assert!(!inherit_env);
    assert_eq!(
        env.get("GITHUB_PERSONAL_ACCESS_TOKEN").map(String::as_str),
        Some("t")
    );
    assert_eq!(policy.upstreams[0].roots, None);
}
