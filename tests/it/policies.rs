//! Every policy shipped in `policies/` loads and validates.

use std::path::Path;

use mcp_budget::policy::{Policy, Transport};

use crate::harness::{Cli, cli};

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
    let err = cli(["check"]).arg(&bad).fails().stderr;
    assert!(err.contains("line 3: upstream[0].name"), "{err}");

    let json = dir.path().join("claude.json");
    std::fs::write(
        &json,
        r#"{"mcpServers": {"time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}, "web": {"url": "http://127.0.0.1:1/mcp"}}}"#,
    )
    .unwrap();
    cli(["check", "--mcp-json"]).arg(&json).ok();
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

fn check(args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    outcome(cli(["check"]).args(args))
}

/// Runs `command`: (success, stdout, stderr).
fn outcome(command: Cli) -> (bool, String, String) {
    let out = command.run();
    (out.status.success(), out.stdout, out.stderr)
}

#[test]
fn check_reports_every_problem_in_one_run_with_lines_and_suggestions() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "version = 1\n[downstream]\nhtp = \"127.0.0.1:1\"\n[budget]\nthreshold_percent = \"2\"\n\
         [[upstream]]\nname = \"a\"\ncomand = \"x\"\n[discover]\nsearch_tol = \"find\"\n",
    )
    .unwrap();
    let (ok, _, err) = check(&[bad.as_os_str()]);
    assert!(!ok);
    for expected in [
        "line 3: downstream.htp: unknown key `htp`; did you mean `http`?",
        "line 5: budget.threshold_percent: invalid type: string \"2\", expected a number",
        "line 8: upstream[0].comand: unknown key `comand`; did you mean `command`?",
        "line 10: discover.search_tol: unknown key `search_tol`; did you mean `search_tool`?",
    ] {
        assert!(err.contains(expected), "{expected:?} not in {err}");
    }
    assert!(err.contains("4 problem(s)"), "{err}");
}

#[test]
fn check_warns_of_open_binds_and_rules_that_match_nothing_and_fails_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.toml");
    std::fs::write(
        &policy,
        "version = 1\n[downstream]\nhttp = \"0.0.0.0:8931\"\n[[upstream]]\nname = \"git\"\n\
         command = \"mcp-server-git\"\n[budget.tools.\"gitub/*\"]\npin = true\n\
         [budget.tools.\"git/git_stauts\"]\npin = true\n",
    )
    .unwrap();
    let saved = dir.path().join("git.json");
    std::fs::write(
        &saved,
        r#"{"tools": [{"name": "git_status", "description": "Status", "inputSchema": {"type": "object"}}]}"#,
    )
    .unwrap();
    let (ok, out, err) = check(&[policy.as_os_str()]);
    assert!(ok, "warnings alone pass: {err}");
    assert!(out.contains("ok (1 upstreams)"), "{out}");
    assert!(
        err.contains("line 3: downstream.http: serves every client that can reach 0.0.0.0:8931"),
        "{err}"
    );
    assert!(
        err.contains("line 7: budget.tools.\"gitub/*\": no upstream is named `gitub`"),
        "{err}"
    );
    assert!(!err.contains("git_stauts"), "needs --tools to know: {err}");
    let strict = std::ffi::OsStr::new("--strict");
    let tools = std::ffi::OsStr::new("--tools");
    let (ok, _, err) = check(&[policy.as_os_str(), strict, tools, saved.as_os_str()]);
    assert!(!ok, "--strict fails on warnings");
    assert!(
        err.contains(
            "line 9: budget.tools.\"git/git_stauts\": `git/git_stauts` matches none of the upstream's tools"
        ),
        "{err}"
    );
    assert!(err.contains("3 warning(s): errors under --strict"), "{err}");
}

/// `check --mcp-json` on each host's config format, as a user has it (fixtures under
/// `tests/fixtures/hosts/`), with a token in the environment.
fn check_import(file: &str) -> (bool, String, String) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts")
        .join(file);
    outcome(
        cli(["check", "--mcp-json"])
            .arg(path)
            .env("GITHUB_TOKEN", "ghp_test")
            .env("HOME", "/home/ada")
            .env_remove("GITHUB_MCP_URL"),
    )
}

#[test]
fn host_configs_import_as_their_hosts_run_them() {
    let (ok, _, err) = check_import("claude_desktop_config.json");
    assert!(ok, "{err}");
    for expected in [
        "mcpServers.\"github.com\": (", // renamed, not rejected
        "imported as `github_com`",
        "passes to the server as written",
        "mcpServers.old: (",
        "disabled in the file: not imported",
        "`autoApprove` is not used by mcp-budget (ignored)",
    ] {
        assert!(err.contains(expected), "{expected:?} not in {err}");
    }

    let (ok, _, err) = check_import("project/.mcp.json");
    assert!(ok, "{err}");
    assert!(err.contains("imported as `docs_search`"), "{err}");
    // `"type": "sse"` is served by the HTTP+SSE transport now: no warning about it.
    assert!(!err.contains("HTTP+SSE"), "{err}");
    assert!(err.contains("1 warning(s)"), "{err}");

    let (ok, _, err) = check_import("app/.vscode/mcp.json");
    assert!(ok, "{err}");

    let (ok, _, err) = check_import("inputs/.vscode/mcp.json");
    assert!(!ok);
    assert!(
        err.contains("servers.github: headers.Authorization: ${input:github-token} is a value VS Code asks the user for"),
        "{err}"
    );
    assert!(err.contains("${env:GITHUB_TOKEN}"), "{err}");
}

/// Clients are checked but not yet enforced: `check` accepts the issue's example shape, and
/// `serve` refuses it instead of serving without the access control it asks for.
#[test]
fn client_policies_check_and_serve_once_their_keys_are_set() {
    let dir = std::env::temp_dir().join(format!("mcp-budget-clients-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("clients.toml");
    std::fs::write(
        &file,
        "version = 1\n[downstream]\nstdio = true\nstdio_client = \"alice\"\n\
         [[client]]\nname = \"alice\"\napi_key_env = \"ALICE_KEY\"\nallow = [\"time/*\"]\n\
         [[client.rule]]\ntools = [\"time/*\"]\nargs.timezone = { one_of = [\"UTC\"] }\n",
    )
    .expect("write");
    let (ok, _, err) = check(&[file.as_os_str()]);
    assert!(ok, "{err}");
    let serve = || {
        cli(["serve", "--policy"])
            .arg(&file)
            .env_remove("ALICE_KEY")
    };
    // Without the key variable, serving refuses and names it.
    let (ok, _, err) = outcome(serve());
    assert!(!ok);
    assert!(err.contains("ALICE_KEY"), "{err}");
    // With it, the gateway serves stdio (until its input ends, at once here).
    let (ok, _, err) = outcome(serve().env("ALICE_KEY", "k"));
    assert!(ok, "{err}");
    assert!(err.contains("serving MCP on stdio"), "{err}");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn the_per_client_example_gives_each_client_its_token() {
    use mcp_budget::policy::share::Share;

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/per-client.toml");
    let policy = Policy::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let github = policy
        .upstreams
        .iter()
        .find(|u| u.name == "github")
        .unwrap();
    let Share::PerClient(share) = github.share else {
        panic!("github is per client");
    };
    assert_eq!((share.idle.as_secs(), share.max_instances.get()), (600, 16));
    let time = policy.upstreams.iter().find(|u| u.name == "time").unwrap();
    assert_eq!(time.share, Share::Global);
    let alice = &policy.credentials[&("alice".to_owned(), "github".to_owned())];
    assert_eq!(
        alice.env["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "${env:ALICE_GITHUB_TOKEN}"
    );
}

#[test]
fn check_reports_every_per_client_problem_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        r#"version = 1
[[upstream]]
name = "gh"
command = "gh"
share = "per_user"
[[upstream]]
name = "web"
url = "http://127.0.0.1:1/mcp"
idle_secs = 5
[[client]]
name = "alice"
api_key_env = "ALICE_KEY"
allow = ["*"]
[client.upstream.web]
env = { A = "1" }
[client.upstream.nope]
headers = { B = "2" }
"#,
    )
    .unwrap();
    let (ok, _, err) = check(&[bad.as_os_str()]);
    assert!(!ok);
    for expected in [
        "line 5: upstream[0].share",
        "line 9: upstream[1].idle_secs",
        "line 14: client[0].upstream.web",
        "line 15: client[0].upstream.web.env",
        "line 16: client[0].upstream.nope",
    ] {
        assert!(err.contains(expected), "{expected}:\n{err}");
    }

    // Per client needs clients to be per.
    std::fs::write(
        &bad,
        "version = 1\n[[upstream]]\nname = \"gh\"\ncommand = \"gh\"\nshare = \"per_client\"\n",
    )
    .unwrap();
    let (ok, _, err) = check(&[bad.as_os_str()]);
    assert!(!ok);
    assert!(
        err.contains("line 5: upstream[0].share") && err.contains("[[client]]"),
        "{err}"
    );
}

/// `check --mcp-json` refuses a server whose `url` is not http(s): `file://` names no server.
#[test]
fn check_refuses_a_file_url_in_a_host_config() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".mcp.json");
    std::fs::write(
        &file,
        r#"{"mcpServers": {"local": {"type": "http", "url": "file:///etc/passwd"}}}"#,
    )
    .unwrap();
    let (ok, _, err) = outcome(cli(["check", "--mcp-json"]).arg(&file));
    assert!(!ok, "accepted: {err}");
    assert!(
        err.contains(r#"mcpServers.local: url: "file:///etc/passwd" is not an http(s) URL"#),
        "{err}"
    );
}

/// The harness's door to the binary: a run that does not end as expected panics with the
/// command line, the exit status, stdout and stderr.
#[test]
fn cli_says_what_ran_and_what_it_printed_when_the_exit_is_unexpected() {
    let panic = std::panic::catch_unwind(|| cli(["check", "/nonexistent/policy.toml"]).ok())
        .expect_err("check of a missing file fails");
    let message = panic.downcast_ref::<String>().expect("a formatted message");
    for part in [
        "mcp-budget\" \"check\" \"/nonexistent/policy.toml\"",
        "expected exit 0, got exit status: ",
        "--- stdout\n",
        "--- stderr\n",
        "/nonexistent/policy.toml",
    ] {
        assert!(message.contains(part), "{part:?} not in:\n{message}");
    }
    let failed = cli(["check", "/nonexistent/policy.toml"]).fails();
    assert!(!failed.stderr.is_empty());
    assert_eq!(
        cli(["check", "/nonexistent/policy.toml"])
            .code(failed.status.code().unwrap())
            .status,
        failed.status
    );
}
