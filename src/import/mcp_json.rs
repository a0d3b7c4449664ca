//! Import of the server lists hosts already have: Claude Desktop's and Claude Code's
//! `mcpServers` JSON (`claude_desktop_config.json`, `.mcp.json`, `~/.claude.json`) and VS
//! Code's `mcp.json` (`servers`, `inputs`).
//!
//! Each entry becomes an upstream as its host would run it:
//! - `${…}` references are resolved where the host resolves them ([`crate::policy::expand`]): Claude
//!   Code expands `${VAR}` / `${VAR:-default}`, VS Code `${env:VAR}`, `${userHome}`,
//!   `${workspaceFolder}` (and asks the user for `${input:…}`, which a gateway cannot: an error
//!   says what to write instead); Claude Desktop expands nothing.
//! - `type` is honoured: `stdio`, `http` (also `streamable-http`), `sse` (the 2024-11-05
//!   HTTP+SSE transport: `transport = "sse"`); without `type`, `command` or `url` decides.
//! - A name that is not a valid server id (`my.server`, `web search`) is turned into one
//!   (`my_server`, `web_search`) and reported; names that become equal get `_2`, `_3`, …
//! - `disabled: true` entries are skipped (reported); keys the gateway does not use
//!   (`autoApprove`, `alwaysAllow`, …) are reported as ignored.
//!
//! An imported stdio server gets a clean environment, as a `[[upstream]]` without `inherit_env`
//! does: the small base plus the entry's `env`. That is what the official SDKs' stdio clients,
//! which hosts build on, give a server (their default environment with `env` on top), so an
//! entry written for them works here, and the gateway's own secrets stay out of servers imported
//! from a file written for another tool.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::compressor::Backend;
use crate::policy::expand::{Syntax, expand, has_reference};
use crate::policy::{
    ConfigError, HttpOptions, HttpTransport, Problem, ToolFilter, Transport, UpstreamSpec, upstream,
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    mcp_servers: Option<BTreeMap<String, Server>>,
    /// VS Code.
    servers: Option<BTreeMap<String, Server>>,
}

// Lenient on purpose: these files carry keys of other tools (`autoApprove`, ...): kept in
// `other` and reported.
#[derive(Debug, Deserialize)]
pub(crate) struct Server {
    #[serde(rename = "type")]
    pub(crate) kind: Option<String>,
    pub(crate) command: Option<String>,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) url: Option<String>,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    #[serde(default)]
    disabled: bool,
    /// What an mcp-compressor wrapper around the server said (it is imported unwrapped).
    #[serde(skip)]
    pub(crate) wrapped: Option<super::compressor::Wrapped>,
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

impl Server {
    /// Whether it is a stdio server (`type`, else whether it has a `command`).
    pub(crate) fn is_stdio(&self) -> Result<bool, String> {
        let kind = self.kind.as_deref().map(str::to_ascii_lowercase);
        match kind.as_deref() {
            Some("stdio") => Ok(true),
            Some("http" | "streamable-http" | "streamablehttp" | "sse") => Ok(false),
            Some(other) => Err(format!(
                "unknown \"type\": {other:?} (expected \"stdio\", \"http\" or \"sse\")"
            )),
            None => Ok(self.command.is_some()),
        }
    }

    /// Whether `type: sse` asks for the 2024-11-05 HTTP+SSE transport.
    pub(crate) fn is_sse(&self) -> bool {
        self.kind
            .as_deref()
            .is_some_and(|k| k.eq_ignore_ascii_case("sse"))
    }
}

/// The host whose file it is, which decides how `${…}` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Host {
    /// `claude_desktop_config.json`: nothing expanded.
    ClaudeDesktop,
    /// `.mcp.json`, `~/.claude.json`: `${VAR}`, `${VAR:-default}`.
    ClaudeCode,
    /// `.vscode/mcp.json` (`servers`): `${env:VAR}`, `${input:id}`, …
    VsCode,
}

/// A host file's entries to import, before their references are resolved: names made valid
/// ids, disabled entries and unused keys reported.
#[derive(Debug)]
pub(crate) struct Entries {
    // Read by `init` (the `cli` feature).
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    pub(crate) host: Host,
    /// How the host reads `${…}` (`None`: it does not).
    pub(crate) syntax: Option<Syntax>,
    /// Field path in the file (`mcpServers."github.com"`), server id, entry.
    pub(crate) servers: Vec<(String, String, Server)>,
    pub(crate) warnings: Vec<Problem>,
}

/// What an import gives: the upstreams, and what the user should know about them.
#[derive(Debug, Default)]
pub(crate) struct Import {
    pub(crate) specs: Vec<UpstreamSpec>,
    pub(crate) warnings: Vec<Problem>,
}

/// The upstreams of a host's server list (see the module doc), reading the process
/// environment.
pub(crate) fn parse(text: &str, origin: &str) -> Result<Vec<UpstreamSpec>, ConfigError> {
    parse_with(text, origin, &|name| std::env::var(name).ok()).map(|import| import.specs)
}

/// [`parse`] with warnings, looking variables up with `env`.
pub(crate) fn parse_with(
    text: &str,
    origin: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Import, ConfigError> {
    let entries = entries(text, origin)?;
    let mut import = Import {
        specs: Vec::new(),
        warnings: entries.warnings,
    };
    let mut problems = Vec::new();
    for (path, id, server) in entries.servers {
        let mut warn = |message: String| {
            import.warnings.push(Problem {
                path: path.clone(),
                line: None,
                message: format!("({origin}) {message}"),
            });
        };
        let http = HttpOptions::default().with_transport(if server.is_sse() {
            HttpTransport::Sse
        } else {
            HttpTransport::Streamable
        });
        let tools = (server.wrapped.as_ref()).map_or_else(ToolFilter::default, |w| {
            ToolFilter::new(&w.include_tools, &w.exclude_tools)
        });
        match entry(server, entries.syntax.as_ref(), env, &mut warn) {
            Ok(transport) => import.specs.push(UpstreamSpec {
                http,
                tools,
                ..UpstreamSpec::with_defaults(&id, transport)
            }),
            Err(message) => problems.push(Problem {
                path: path.clone(),
                line: None,
                message,
            }),
        }
    }
    if problems.is_empty() {
        Ok(import)
    } else {
        Err(ConfigError::Invalid {
            path: origin.to_owned(),
            problems,
        })
    }
}

/// The entries of a host's server list `text` (from `origin`, whose file name tells Claude
/// Desktop from Claude Code).
pub(crate) fn entries(text: &str, origin: &str) -> Result<Entries, ConfigError> {
    let not_a_list = |message: String| ConfigError::Parse {
        path: origin.to_owned(),
        message,
    };
    // VS Code writes JSONC (comments, trailing commas), and Windows editors a BOM.
    let text = super::jsonc::to_json(text);
    let file: File = serde_json::from_str(&text).map_err(|e| {
        not_a_list(format!(
            "not an mcpServers (Claude Desktop / Claude Code) or servers (VS Code) JSON file: {e}"
        ))
    })?;
    let (host, servers, key) = match (file.mcp_servers, file.servers) {
        (Some(servers), _) => (host_of(origin), servers, "mcpServers"),
        (None, Some(servers)) => (Host::VsCode, servers, "servers"),
        (None, None) => return Err(not_a_list(
            "has neither \"mcpServers\" (Claude Desktop / Claude Code) nor \"servers\" (VS Code)"
                .into(),
        )),
    };
    let syntax = match host {
        Host::ClaudeDesktop => None,
        Host::ClaudeCode => Some(Syntax::Shell),
        Host::VsCode => Some(Syntax::VsCode {
            workspace: workspace_of(Path::new(origin)),
        }),
    };
    let mut out = Entries {
        host,
        syntax,
        servers: Vec::new(),
        warnings: Vec::new(),
    };
    let mut taken = BTreeSet::new();
    for (name, server) in servers {
        let path = format!("{key}.{}", crate::policy::path_key(&name));
        let mut warn = |message: String| {
            out.warnings.push(Problem {
                path: path.clone(),
                line: None,
                message: format!("({origin}) {message}"),
            });
        };
        if server.disabled {
            warn("disabled in the file: not imported".into());
            continue;
        }
        let id = unique_id(&name, &mut taken);
        if id != name {
            warn(format!(
                "imported as `{id}` (a server id may use only A-Z a-z 0-9 _ -, at most 32)"
            ));
        }
        for key in server.other.keys() {
            warn(format!("`{key}` is not used by mcp-budget (ignored)"));
        }
        let wrapped =
            (server.command.as_deref()).and_then(|c| super::compressor::unwrap(c, &server.args));
        if let Some(w) = wrapped {
            warn(compressor_note(&id, &server, &w));
            let many = w.backends.len() > 1;
            for (name, backend) in &w.backends {
                let id = match name {
                    Some(name) if many => unique_id(name, &mut taken),
                    _ => id.clone(),
                };
                out.servers
                    .push((path.clone(), id, server.unwrapped(backend, &w)));
            }
            continue;
        }
        out.servers.push((path, id, server));
    }
    Ok(out)
}

/// What importing mcp-compressor entry `id` (`server`, which runs `w`) does, for a warning.
fn compressor_note(id: &str, server: &Server, w: &super::compressor::Wrapped) -> String {
    let mut note = match w.backends.len() {
        1 => "runs its server through mcp-compressor: imported as the server itself \
              (mcp-budget compresses it)"
            .to_owned(),
        n => format!(
            "runs {n} servers through mcp-compressor (--multi-server): imported as {n} \
             upstreams (mcp-budget compresses them)"
        ),
    };
    if let Some(level) = &w.level {
        note += &format!("; -c {level}: set [budget] level or [budget.tools.\"{id}/*\"] min_level");
    }
    if !w.dropped.is_empty() {
        note += &format!("; no equivalent, dropped: {}", w.dropped.join(" "));
    }
    let to_url = w.backends.iter().any(|(_, b)| matches!(b, Backend::Url(_)));
    if !server.env.is_empty() && to_url {
        note += "; its env is not passed to a URL server (put a token in headers)";
    }
    note
}

impl Server {
    /// This mcp-compressor entry as the server `backend` it runs (its env and cwd kept for a
    /// command, a URL without them).
    fn unwrapped(&self, backend: &Backend, wrapped: &super::compressor::Wrapped) -> Self {
        let (kind, command, args, url) = match backend {
            Backend::Command { command, args } => (None, Some(command.clone()), args.clone(), None),
            Backend::Url(url) => (Some("http".to_owned()), None, Vec::new(), Some(url.clone())),
        };
        let is_url = url.is_some();
        Self {
            kind,
            command,
            args,
            env: if is_url {
                BTreeMap::new()
            } else {
                self.env.clone()
            },
            cwd: if is_url { None } else { self.cwd.clone() },
            url,
            headers: self.headers.clone(),
            disabled: false,
            wrapped: Some(wrapped.clone()),
            other: BTreeMap::new(),
        }
    }
}

/// One entry's transport, references resolved.
fn entry(
    server: Server,
    syntax: Option<&Syntax>,
    env: &dyn Fn(&str) -> Option<String>,
    warn: &mut dyn FnMut(String),
) -> Result<Transport, String> {
    let resolve = |what: &str, value: &str| -> Result<String, String> {
        match syntax {
            Some(syntax) => expand(value, syntax, env).map_err(|e| format!("{what}: {e}")),
            None => Ok(value.to_owned()),
        }
    };
    if syntax.is_none() {
        let literal = server
            .command
            .iter()
            .chain(&server.args)
            .chain(server.env.values());
        if literal.chain(server.url.iter()).any(|v| has_reference(v)) {
            warn("has `${…}`, which Claude Desktop passes to the server as written; so does mcp-budget".into());
        }
    }
    if server.is_stdio()? {
        let Some(command) = server.command else {
            return Err("a stdio server needs \"command\"".into());
        };
        if server.url.is_some() {
            return Err("give either \"command\" or \"url\", not both".into());
        }
        let mut env_out = BTreeMap::new();
        for (key, value) in &server.env {
            // The child's env is expanded again when it starts (`${NAME}`, `$$`): keep what the
            // host resolved literal.
            env_out.insert(
                key.clone(),
                resolve(&format!("env.{key}"), value)?.replace('$', "$$"),
            );
        }
        let args = server
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| resolve(&format!("args[{i}]"), a))
            .collect::<Result<_, _>>()?;
        return Ok(Transport::Stdio {
            command: resolve("command", &command)?,
            args,
            env: env_out,
            inherit_env: false,
            cwd: server.cwd,
        });
    }
    let Some(url) = server.url else {
        return Err("an http or sse server needs \"url\"".into());
    };
    if server.command.is_some() {
        return Err("give either \"command\" or \"url\", not both".into());
    }
    let url = resolve("url", &url)?;
    http_url(&url)?;
    let mut headers = BTreeMap::new();
    for (key, value) in &server.headers {
        headers.insert(key.clone(), resolve(&format!("headers.{key}"), value)?);
    }
    Ok(Transport::Http { url, headers })
}

/// `url` is an http or https URL, the only servers mcp-budget reaches by URL: a `file://`,
/// `ws://`… one is refused here, as a policy's `url` is, not when it is first reached.
fn http_url(url: &str) -> Result<(), String> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("http" | "https") => Ok(()),
        _ => Err(format!(
            "url: \"{}\" is not an http(s) URL such as http://127.0.0.1:3001/mcp \
             (mcp-budget reaches servers by URL over http or https only)",
            crate::redact::Url(url)
        )),
    }
}

fn host_of(origin: &str) -> Host {
    let file = Path::new(origin)
        .file_name()
        .map(|f| f.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if file == "claude_desktop_config.json" {
        Host::ClaudeDesktop
    } else {
        Host::ClaudeCode
    }
}

/// The workspace folder of a VS Code file in `<workspace>/.vscode/`.
fn workspace_of(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?;
    if dir.file_name()? != ".vscode" {
        return None;
    }
    let workspace = dir.parent()?;
    let workspace = if workspace.as_os_str().is_empty() {
        Path::new(".")
    } else {
        workspace
    };
    Some(std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned()))
}

/// A valid server id for `name`, distinct from the ids `taken` so far.
pub(crate) fn unique_id(name: &str, taken: &mut BTreeSet<String>) -> String {
    let mut id = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && id.ends_with('_')) {
            id.push(c);
        }
    }
    let mut id: String = id.trim_matches('_').chars().take(28).collect();
    if id.is_empty() {
        id = "server".into();
    }
    debug_assert!(upstream::check_name(&id).is_ok());
    let mut candidate = id.clone();
    let mut n = 2;
    while !taken.insert(candidate.clone()) {
        candidate = format!("{id}_{n}");
        n += 1;
    }
    candidate
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "GITHUB_TOKEN" => Some("ghp_x".into()),
            "HOME" => Some("/home/ada".into()),
            _ => None,
        }
    }

    fn import(text: &str, origin: &str) -> Import {
        parse_with(text, origin, &env).unwrap_or_else(|e| panic!("{e}"))
    }

    fn stdio(spec: &UpstreamSpec) -> (&str, &[String], &BTreeMap<String, String>) {
        match &spec.transport {
            Transport::Stdio {
                command, args, env, ..
            } => (command, args, env),
            _ => panic!("not stdio"),
        }
    }

    fn http(spec: &UpstreamSpec) -> (&str, &BTreeMap<String, String>) {
        match &spec.transport {
            Transport::Http { url, headers } => (url, headers),
            _ => panic!("not http"),
        }
    }

    #[test]
    fn claude_code_expands_references_everywhere() {
        let got = import(
            r#"{"mcpServers": {
                "gh": {"command": "npx", "args": ["-y", "${PKG:-@modelcontextprotocol/server-github}"],
                       "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}", "PRICE": "5$"}},
                "web": {"type": "http", "url": "https://${HOST:-api.example.com}/mcp",
                        "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}}}"#,
            "/p/.mcp.json",
        );
        let (command, args, env) = stdio(&got.specs[0]);
        assert_eq!(
            (command, args[1].as_str()),
            ("npx", "@modelcontextprotocol/server-github")
        );
        assert_eq!(env["GITHUB_PERSONAL_ACCESS_TOKEN"], "ghp_x");
        assert_eq!(
            env["PRICE"], "5$$",
            "kept literal for the child's own expansion"
        );
        let (url, headers) = http(&got.specs[1]);
        assert_eq!(url, "https://api.example.com/mcp");
        assert_eq!(headers["Authorization"], "Bearer ghp_x");
        assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    }

    #[test]
    fn an_unset_variable_without_default_is_an_error_naming_it() {
        let err = parse_with(
            r#"{"mcpServers": {"gh": {"command": "x", "env": {"T": "${NOPE}"}}}}"#,
            ".mcp.json",
            &env,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("mcpServers.gh: env.T: NOPE is not set"),
            "{err}"
        );
    }

    #[test]
    fn claude_desktop_passes_references_as_written_and_says_so() {
        let got = import(
            r#"{"mcpServers": {"gh": {"command": "x", "env": {"T": "${GITHUB_TOKEN}"}}}}"#,
            "/home/ada/.config/Claude/claude_desktop_config.json",
        );
        // Escaped for the child's own expansion at start: the server sees `${GITHUB_TOKEN}`.
        assert_eq!(stdio(&got.specs[0]).2["T"], "$${GITHUB_TOKEN}");
        assert!(
            got.warnings[0]
                .message
                .contains("passes to the server as written")
        );
    }

    #[test]
    fn odd_names_are_normalised_and_reported_disabled_skipped_unknown_keys_reported() {
        let got = import(
            r#"{"mcpServers": {
                "my.server": {"command": "a"}, "my server": {"command": "b"},
                "off": {"command": "c", "disabled": true},
                "ok": {"command": "d", "autoApprove": ["x"]}}}"#,
            ".mcp.json",
        );
        let names: Vec<&str> = got.specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["my_server", "my_server_2", "ok"]);
        let shown: Vec<String> = got.warnings.iter().map(ToString::to_string).collect();
        assert!(
            shown
                .iter()
                .any(|w| w.contains("\"my server\"") && w.contains("imported as `my_server`")),
            "{shown:?}"
        );
        assert!(
            shown
                .iter()
                .any(|w| w.contains("mcpServers.off") && w.contains("disabled")),
            "{shown:?}"
        );
        assert!(
            shown
                .iter()
                .any(|w| w.contains("`autoApprove` is not used")),
            "{shown:?}"
        );
    }

    #[test]
    fn types_are_honoured() {
        let got = import(
            r#"{"mcpServers": {
                "a": {"type": "stdio", "command": "x"},
                "b": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
                "c": {"url": "http://127.0.0.1:1/mcp"},
                "d": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"}}}"#,
            ".mcp.json",
        );
        assert_eq!(got.specs.len(), 4);
        assert_eq!(http(&got.specs[1]).0, "http://127.0.0.1:1/sse");
        assert_eq!(
            got.specs[1].http.transport,
            crate::policy::HttpTransport::Sse
        );
        assert_eq!(
            got.specs[2].http.transport,
            crate::policy::HttpTransport::Streamable
        );
        assert!(got.warnings.is_empty(), "{:?}", got.warnings);
        let bad = parse_with(
            r#"{"mcpServers": {"a": {"type": "websocket", "url": "ws://x"}}}"#,
            ".mcp.json",
            &env,
        );
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("unknown \"type\": \"websocket\"")
        );
        let bad = parse_with(
            r#"{"mcpServers": {"a": {"type": "stdio", "url": "http://x"}}}"#,
            ".mcp.json",
            &env,
        );
        assert!(bad.unwrap_err().to_string().contains("needs \"command\""));
    }

    #[test]
    fn only_http_and_https_urls_are_imported() {
        for url in [
            "file:///etc/passwd",
            "ws://127.0.0.1:1/mcp",
            "127.0.0.1:3001/mcp",
        ] {
            let text = format!(r#"{{"mcpServers": {{"a": {{"url": "{url}"}}}}}}"#);
            let err = parse_with(&text, ".mcp.json", &env)
                .unwrap_err()
                .to_string();
            assert!(err.contains("is not an http(s) URL"), "{url}: {err}");
            assert!(err.contains(url), "{err}");
        }
        let text = r#"{"mcpServers": {"a": {"type": "sse", "url": "HTTPS://x/sse"}}}"#;
        assert!(parse_with(text, ".mcp.json", &env).is_ok());
    }

    #[test]
    fn vs_code_servers_and_inputs() {
        let got = import(
            r#"{"inputs": [{"type": "promptString", "id": "token", "password": true}],
                "servers": {"fs": {"type": "stdio", "command": "npx",
                   "args": ["-y", "@modelcontextprotocol/server-filesystem", "${userHome}/docs"],
                   "env": {"T": "${env:GITHUB_TOKEN}"}}}}"#,
            "/src/app/.vscode/mcp.json",
        );
        let (_, args, vars) = stdio(&got.specs[0]);
        assert_eq!(args[2], "/home/ada/docs");
        assert_eq!(vars["T"], "ghp_x");
        let err = parse_with(
            r#"{"servers": {"gh": {"url": "https://x/mcp", "headers": {"Authorization": "Bearer ${input:token}"}}}}"#,
            "/src/app/.vscode/mcp.json",
            &env,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(
                "servers.gh: headers.Authorization: ${input:token} is a value VS Code asks"
            ),
            "{err}"
        );
        assert!(err.contains("${env:TOKEN}"), "{err}");
    }

    #[test]
    fn compressor_entries_on_a_url_or_several_servers_become_those_upstreams() {
        let got = import(
            r#"{"mcpServers": {
                "remote": {"command": "uvx", "args": ["mcp-compressor", "-c", "high", "--",
                    "https://api.githubcopilot.com/mcp/"], "env": {"T": "x"}},
                "pair": {"command": "mcp-compressor", "args": [
                    "--multi-server", "time=uvx mcp-server-time",
                    "--multi-server", "mem=npx -y @modelcontextprotocol/server-memory"],
                    "env": {"K": "v"}}
            }}"#,
            ".mcp.json",
        );
        let ids: Vec<&str> = got.specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(ids, ["time", "mem", "remote"]);
        assert_eq!(
            stdio(&got.specs[0]),
            (
                "uvx",
                &["mcp-server-time".to_owned()][..],
                &BTreeMap::from([("K".to_owned(), "v".to_owned())])
            )
        );
        assert_eq!(stdio(&got.specs[1]).0, "npx");
        assert_eq!(http(&got.specs[2]).0, "https://api.githubcopilot.com/mcp/");
        let said: Vec<&str> = got.warnings.iter().map(|w| w.message.as_str()).collect();
        assert!(
            said.iter().any(|m| m.contains("imported as 2 upstreams"))
                && said
                    .iter()
                    .any(|m| m.contains("not passed to a URL server")),
            "{said:?}"
        );
    }

    #[test]
    fn a_file_of_neither_shape_is_refused() {
        let err = parse_with(r#"{"foo": {}}"#, "x.json", &env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("neither \"mcpServers\""), "{err}");
    }
}
