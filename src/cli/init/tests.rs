use std::collections::BTreeMap;

use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/home/ada".into()),
        "GITHUB_TOKEN" => Some("ghp_from_env".into()),
        _ => None,
    }
}

fn init(text: &str, origin: &str) -> Init {
    let profile = crate::profile::resolve("claude-sonnet-4-5", &Default::default()).unwrap();
    convert(text, origin, "claude-sonnet-4-5", &profile, &env).unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn claude_desktop_values_move_to_the_host_entry_and_never_into_the_policy() {
    let got = init(
        r#"{"mcpServers": {
            "gh.com": {"command": "npx", "args": ["-y", "server-github"],
                       "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret", "PRICE": "5$"}},
            "other": {"command": "x", "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_other"}},
            "old": {"command": "y", "disabled": true}}}"#,
        "/home/ada/.config/Claude/claude_desktop_config.json",
    );
    assert!(!got.policy.contains("ghp_"), "{}", got.policy);
    assert!(got.policy.contains("name = \"gh_com\""), "{}", got.policy);
    assert!(
        got.policy.contains(
            "env = { GITHUB_PERSONAL_ACCESS_TOKEN = \"${env:GITHUB_PERSONAL_ACCESS_TOKEN}\", PRICE = \"${env:PRICE}\" }"
        ),
        "{}",
        got.policy
    );
    // The same name with another value gets a variable of its own.
    assert!(
        got.policy
            .contains("GITHUB_PERSONAL_ACCESS_TOKEN = \"${env:GITHUB_PERSONAL_ACCESS_TOKEN_2}\""),
        "{}",
        got.policy
    );
    assert_eq!(got.servers, ["gh_com", "other"]);
    assert_eq!(
        got.vars["GITHUB_PERSONAL_ACCESS_TOKEN_2"],
        Source::Value("ghp_other".into())
    );
    assert_eq!(got.vars["PRICE"], Source::Value("5$".into()));
    assert!(
        got.warnings.iter().any(|w| w.contains("disabled")),
        "{:?}",
        got.warnings
    );
    let notes = got.notes("f", "/bin/mcp-budget", "/p.toml", true);
    // Values the file wrote out are not printed on the terminal: a placeholder, and where the
    // values are.
    assert!(!notes.contains("ghp_"), "{notes}");
    assert!(
        notes.contains(
            "\"GITHUB_PERSONAL_ACCESS_TOKEN\": \"<value of GITHUB_PERSONAL_ACCESS_TOKEN>\""
        ),
        "{notes}"
    );
    assert!(
        notes.contains("not printed, as they may be secrets: the values of GITHUB_PERSONAL_ACCESS_TOKEN, GITHUB_PERSONAL_ACCESS_TOKEN_2, PRICE"),
        "{notes}"
    );
    assert!(
        notes.contains(
            "\"args\": [\n        \"serve\",\n        \"--policy\",\n        \"/p.toml\""
        ),
        "{notes}"
    );
}

#[test]
fn claude_code_references_stay_references_with_their_defaults() {
    let got = init(
        r#"{"mcpServers": {
            "gh": {"type": "http", "url": "${GH_URL:-https://api.example.com/mcp}",
                   "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}},
            "docs": {"type": "sse", "url": "http://127.0.0.1:8000/sse"},
            "time": {"command": "uvx", "args": ["mcp-server-time", "${TZ_NAME:-UTC}"],
                     "env": {"A": "x$y ${GITHUB_TOKEN}"}}}}"#,
        "/src/app/.mcp.json",
    );
    assert_eq!(got.host, Host::ClaudeCode);
    let p = &got.policy;
    assert!(
        p.contains("url = \"${env:GH_URL:-https://api.example.com/mcp}\""),
        "{p}"
    );
    assert!(
        p.contains("Authorization = \"Bearer ${env:GITHUB_TOKEN}\""),
        "{p}"
    );
    assert!(
        p.contains("url = \"http://127.0.0.1:8000/sse\"\ntransport = \"sse\""),
        "{p}"
    );
    // A reference in args stays one (the gateway resolves it when the child starts).
    assert!(
        p.contains("args = [\"mcp-server-time\", \"${env:TZ_NAME:-UTC}\"]"),
        "{p}"
    );
    assert_eq!(got.vars["TZ_NAME"], Source::Env(Some("UTC".into())));
    assert!(p.contains("A = \"x$$y ${env:GITHUB_TOKEN}\""), "{p}");
    assert!(!p.contains("ghp_from_env"), "{p}");
    assert_eq!(got.vars["GITHUB_TOKEN"], Source::Env(None));
    assert_eq!(
        got.vars["GH_URL"],
        Source::Env(Some("https://api.example.com/mcp".into()))
    );
    let notes = got.notes("f", "/bin/mcp-budget", "/p.toml", true);
    assert!(
        notes.contains(
            "claude mcp add --scope project mcp-budget -e 'GH_URL=${GH_URL:-https://api.example.com/mcp}' -e 'GITHUB_TOKEN=${GITHUB_TOKEN}' -e 'TZ_NAME=${TZ_NAME:-UTC}' -- /bin/mcp-budget serve --policy /p.toml"
        ),
        "{notes}"
    );
}

#[test]
fn vscode_env_references_in_args_stay_references_even_when_unset() {
    // Before: `init` resolved args now, so an unset variable failed the import and a set one
    // wrote its value (a token) into the policy.
    let got = init(
        r#"{"servers": {"gh": {"command": "npx",
                               "args": ["-y", "server-github", "--token=${env:NOT_SET_HERE}",
                                        "${env:GITHUB_TOKEN}", "${userHome}/x"]}}}"#,
        "/src/app/.vscode/mcp.json",
    );
    let p = &got.policy;
    assert!(
        p.contains(
            "args = [\"-y\", \"server-github\", \"--token=${env:NOT_SET_HERE}\", \"${env:GITHUB_TOKEN}\", \"/home/ada/x\"]"
        ),
        "{p}"
    );
    assert!(!p.contains("ghp_"), "{p}");
    assert_eq!(got.vars["NOT_SET_HERE"], Source::Env(None));
    let notes = got.notes("f", "/bin/mcp-budget", "/p.toml", true);
    assert!(
        notes.contains("\"NOT_SET_HERE\": \"${env:NOT_SET_HERE}\""),
        "{notes}"
    );
}

#[test]
fn vscode_inputs_become_variables_the_host_fills_from_its_inputs() {
    let got = init(
        r#"{"inputs": [{"id": "github-token", "type": "promptString"}],
            "servers": {"gh": {"type": "http", "url": "https://x/mcp",
                               "headers": {"Authorization": "Bearer ${input:github-token}"}},
                        "fs": {"command": "npx", "args": ["${userHome}/notes"],
                               "env": {"T": "${env:GITHUB_TOKEN}", "H": "${userHome}"}}}}"#,
        "/src/app/.vscode/mcp.json",
    );
    let p = &got.policy;
    // `fs` (first by name) claims GITHUB_TOKEN for the host's own variable; the input is
    // another source, so it gets a variable of its own.
    assert!(
        p.contains("Authorization = \"Bearer ${env:GITHUB_TOKEN_2}\""),
        "{p}"
    );
    assert!(p.contains("args = [\"/home/ada/notes\"]"), "{p}");
    assert!(p.contains("H = \"/home/ada\""), "{p}");
    let notes = got.notes("f", "/bin/mcp-budget", "/p.toml", true);
    assert!(notes.contains("\"${input:github-token}\""), "{notes}");
    assert!(
        notes.contains("keep the \"inputs\" github-token"),
        "{notes}"
    );
    assert!(notes.contains("\"type\": \"stdio\""), "{notes}");
}

#[test]
fn candidates_cover_each_host_and_os() {
    let home = Path::new("/home/ada");
    let linux = candidates(Path::new("/p"), Some(home), None, None, "linux");
    assert_eq!(
        linux,
        [
            PathBuf::from("/p/.mcp.json"),
            PathBuf::from("/p/.vscode/mcp.json"),
            PathBuf::from("/home/ada/.claude.json"),
            PathBuf::from("/home/ada/.config/Claude/claude_desktop_config.json"),
        ]
    );
    let xdg = candidates(
        Path::new("/p"),
        Some(home),
        None,
        Some(Path::new("/x")),
        "linux",
    );
    assert_eq!(
        xdg[3],
        PathBuf::from("/x/Claude/claude_desktop_config.json")
    );
    let windows = candidates(
        Path::new("/p"),
        Some(home),
        Some(Path::new("/AppData")),
        None,
        "windows",
    );
    assert_eq!(
        windows[3],
        PathBuf::from("/AppData/Claude/claude_desktop_config.json")
    );
    let vars: BTreeMap<String, Source> = BTreeMap::new();
    assert!(
        snippet::for_host(Host::ClaudeDesktop, "user", "m", &[], &vars).contains("\"mcp-budget\"")
    );
}

#[test]
fn an_mcp_compressor_entry_is_imported_as_the_server_it_wraps_with_its_flags_mapped() {
    let got = init(
        r#"{"mcpServers": {"github": {"command": "mcp-compressor",
            "args": ["-c", "high", "--exclude-tools", "delete_repo", "--toonify", "--shrinkfit", "--cli-mode",
                     "--", "npx", "-y", "@modelcontextprotocol/server-github"]}}}"#,
        "/home/ada/.config/Claude/claude_desktop_config.json",
    );
    let policy = crate::policy::Policy::from_toml_str(&got.policy, "init")
        .unwrap_or_else(|e| panic!("{e}\n{}", got.policy));
    let up = &policy.upstreams[0];
    match &up.transport {
        crate::policy::Transport::Stdio { command, args, .. } => {
            assert_eq!(command, "npx");
            assert_eq!(args, &["-y", "@modelcontextprotocol/server-github"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(!up.tools.keeps("delete_repo") && up.tools.keeps("get_issue"));
    let rule = policy.budget.tools.iter().find(|(p, _)| p == "github/*");
    let rule = rule.unwrap_or_else(|| panic!("no min_level rule:\n{}", got.policy));
    assert_eq!(rule.1.min_level, Some(crate::compress::Level::High));
    // --toonify and --shrinkfit (bare: 16,000 characters) are the server's result rule.
    assert_eq!(rule.1.result_format, crate::results::ResultFormat::Toon);
    assert_eq!(rule.1.max_result_tokens, Some(4000));
    assert!(
        got.policy.contains("# Dropped (no equivalent): --cli-mode"),
        "{}",
        got.policy
    );
    assert!(
        got.warnings.iter().any(|w| w.contains("mcp-compressor")),
        "{:?}",
        got.warnings
    );
}

#[test]
fn the_host_entry_runs_the_installed_binary_never_the_build_folders() {
    let installed = Path::new("/usr/local/bin/mcp-budget");
    let built = Path::new("/home/ada/src/mcp-budget/target/release/mcp-budget");
    assert_eq!(
        host_command(Some(built), Some(installed)).0,
        "/usr/local/bin/mcp-budget"
    );
    let (exe, note) = host_command(Some(built), None);
    assert_eq!(exe, "mcp-budget");
    assert!(note.unwrap().contains("cargo install"));
    let elsewhere = Path::new("/opt/mcp-budget/bin/mcp-budget");
    assert_eq!(
        host_command(Some(elsewhere), None),
        (elsewhere.display().to_string(), None)
    );
}

#[test]
fn claude_code_add_line_and_entry_print_no_secret_values() {
    let got = init(
        r#"{"mcpServers": {"gh": {"command": "npx", "args": ["-y", "server-github"],
                                  "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_s3cret"}}}}"#,
        "/src/app/.mcp.json",
    );
    let notes = got.notes("f", "/bin/mcp-budget", "/p.toml", true);
    assert!(!notes.contains("ghp_s3cret"), "{notes}");
    assert!(
        notes.contains(
            "claude mcp add --scope project mcp-budget -e 'GITHUB_PERSONAL_ACCESS_TOKEN=${GITHUB_PERSONAL_ACCESS_TOKEN}' --"
        ),
        "{notes}"
    );
    assert!(
        notes.contains("\"GITHUB_PERSONAL_ACCESS_TOKEN\": \"${GITHUB_PERSONAL_ACCESS_TOKEN}\""),
        "{notes}"
    );
    assert!(
        notes.contains("set each in the environment the host starts with"),
        "{notes}"
    );
}
