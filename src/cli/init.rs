//! `mcp-budget init`: a commented policy from the server list a host already has, and the
//! entry to put back into that host so it talks to the gateway instead.
//!
//! The host file is `--from FILE`, or the first found of (see [`candidates`]): `./.mcp.json`
//! and `./.vscode/mcp.json` (this project), `~/.claude.json` (Claude Code, user scope), Claude
//! Desktop's `claude_desktop_config.json` (macOS, Windows and Linux locations). Its servers are
//! read as the policy's `.mcp.json` import reads them (names made valid ids, disabled entries
//! skipped, `type` honoured) and written as `[[upstream]]` tables.
//!
//! Secrets stay out of the policy: every `env` and `headers` value becomes a `${env:NAME}`
//! reference. A value the file wrote out (Claude Desktop expands nothing, so all of its values)
//! moves into the `env` of the host's new gateway entry; a reference the host resolves
//! (`${GITHUB_TOKEN}` in `.mcp.json`, `${env:…}` / `${input:…}` in VS Code) is passed on as a
//! reference the host resolves when it starts the gateway. So is a reference in `args`, which
//! the gateway resolves when it starts the child; `command` is written as the host would run it
//! now (references resolved).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::import::mcp_json::{self, Host, Server};
use crate::policy::expand::{Piece, Syntax, env_name, expand, pieces};

mod snippet;

/// Arguments of `mcp-budget init`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The host's server list (`claude_desktop_config.json`, `.mcp.json`, `~/.claude.json`,
    /// `.vscode/mcp.json`); without it, the first found at the standard paths.
    #[arg(long)]
    pub from: Option<PathBuf>,
    /// The host's model, for the budget (e.g. claude-sonnet-4-5, gpt-4o).
    #[arg(long, default_value = "claude-sonnet-4-5")]
    pub model: String,
    /// Write the policy to this file (refused when it exists, unless --force) instead of
    /// standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Overwrite --out.
    #[arg(long, requires = "out")]
    pub force: bool,
}

/// Where hosts keep their server lists, in the order `init` tries them: the project's files
/// in `cwd`, Claude Code's user file in `home`, then Claude Desktop's file for `os`
/// (`std::env::consts::OS`; `appdata` is `%APPDATA%` on Windows, `config` is
/// `$XDG_CONFIG_HOME` elsewhere).
///
/// ```
/// use std::path::{Path, PathBuf};
/// use mcp_budget::cli::init::candidates;
///
/// let found = candidates(Path::new("/src/app"), Some(Path::new("/home/ada")), None, None, "macos");
/// assert_eq!(found[0], PathBuf::from("/src/app/.mcp.json"));
/// assert_eq!(
///     found.last().unwrap(),
///     Path::new("/home/ada/Library/Application Support/Claude/claude_desktop_config.json")
/// );
/// ```
#[must_use]
pub fn candidates(
    cwd: &Path,
    home: Option<&Path>,
    appdata: Option<&Path>,
    config: Option<&Path>,
    os: &str,
) -> Vec<PathBuf> {
    let mut out = vec![cwd.join(".mcp.json"), cwd.join(".vscode").join("mcp.json")];
    if let Some(home) = home {
        out.push(home.join(".claude.json"));
    }
    let desktop = match os {
        "macos" => home.map(|h| h.join("Library/Application Support/Claude")),
        "windows" => appdata.map(|a| a.join("Claude")),
        _ => config
            .map(Path::to_path_buf)
            .or_else(|| home.map(|h| h.join(".config")))
            .map(|c| c.join("Claude")),
    };
    out.extend(desktop.map(|d| d.join("claude_desktop_config.json")));
    out
}

/// Runs `init`: the policy on `out` (or in `--out`), what was imported and the host entry on
/// `err`.
///
/// # Errors
/// No host file found, a file that does not import, an unknown model, an existing `--out`.
pub fn run(
    args: &Args,
    out: &mut dyn std::io::Write,
    err: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let from = match &args.from {
        Some(file) => file.clone(),
        None => find()?,
    };
    let text =
        crate::files::read_text(&from).with_context(|| format!("reading {}", from.display()))?;
    let origin = from.display().to_string();
    let profile =
        crate::profile::resolve(&args.model, &crate::profile::ProfileOverrides::default())
            .with_context(|| format!("--model {}", args.model))?;
    let env = |name: &str| std::env::var(name).ok();
    let init = convert(&text, &origin, &args.model, &profile, &env)?;
    if let Some(path) = &args.out {
        if path.exists() && !args.force {
            anyhow::bail!(
                "{} exists: not overwritten (pass --force to replace it)",
                path.display()
            );
        }
        std::fs::write(path, &init.policy)
            .with_context(|| format!("writing {}", path.display()))?;
    } else {
        out.write_all(init.policy.as_bytes())?;
    }
    let policy = match &args.out {
        Some(path) => std::path::absolute(path).unwrap_or_else(|_| path.clone()),
        None => PathBuf::from("/path/to/mcp-budget.toml"),
    };
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| {
                dir.join(if cfg!(windows) {
                    "mcp-budget.exe"
                } else {
                    "mcp-budget"
                })
            })
            .find(|p| p.is_file())
    });
    let current = std::env::current_exe().ok();
    let (exe, note) = host_command(current.as_deref(), on_path.as_deref());
    if let Some(note) = note {
        writeln!(err, "{note}")?;
    }
    err.write_all(
        init.notes(
            &origin,
            &exe,
            &policy.display().to_string(),
            args.out.is_some(),
        )
        .as_bytes(),
    )?;
    Ok(())
}

/// The command a host entry runs: the `mcp-budget` on `PATH` (as an absolute path: hosts such
/// as Claude Desktop do not start with the user's shell `PATH`), else the running binary unless
/// it lives in a build folder (`target/debug`, `target/release`), which `cargo clean` or the
/// next checkout removes: then `mcp-budget`, with a note to install it.
fn host_command(current: Option<&Path>, on_path: Option<&Path>) -> (String, Option<String>) {
    if let Some(installed) = on_path {
        return (installed.display().to_string(), None);
    }
    let in_build_folder = |p: &Path| {
        let parts: Vec<_> = p
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect();
        parts
            .windows(2)
            .any(|w| w[0] == "target" && matches!(w[1].as_ref(), "debug" | "release"))
    };
    match current {
        Some(exe) if !in_build_folder(exe) => (exe.display().to_string(), None),
        _ => (
            "mcp-budget".to_owned(),
            Some(
                "note: this mcp-budget runs from a build folder, which the host should not \
                 depend on: install it (`cargo install --path .` or a release binary) so that \
                 `mcp-budget` is on PATH, or write its installed path in the entry below"
                    .to_owned(),
            ),
        ),
    }
}

/// The first host file at the standard paths.
fn find() -> anyhow::Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).map(PathBuf::from);
    let cwd = std::env::current_dir().context("the working directory")?;
    let home = var("HOME").or_else(|| var("USERPROFILE"));
    let looked = candidates(
        &cwd,
        home.as_deref(),
        var("APPDATA").as_deref(),
        var("XDG_CONFIG_HOME").as_deref(),
        std::env::consts::OS,
    );
    match looked.iter().find(|p| p.is_file()) {
        Some(found) => Ok(found.clone()),
        None => {
            let list: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
            anyhow::bail!(
                "no host configuration found (looked for {}); pass --from FILE",
                list.join(", ")
            )
        }
    }
}

/// A variable the policy refers to, and what the host puts in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A value the host file wrote out, moved into the host's gateway entry.
    Value(String),
    /// The host's own variable of that name, as the file referred to it (with its default).
    Env(Option<String>),
    /// A VS Code input the host asks the user for (`${input:id}`).
    Input(String),
}

/// What `init` makes of a host file.
#[derive(Debug)]
pub(crate) struct Init {
    pub(crate) host: Host,
    /// The policy text.
    pub(crate) policy: String,
    /// The imported server ids, in policy order.
    pub(crate) servers: Vec<String>,
    /// The variables the policy refers to.
    pub(crate) vars: BTreeMap<String, Source>,
    /// Renamed and skipped entries, unused keys.
    pub(crate) warnings: Vec<String>,
}

/// The policy for host file `text` (from `origin`) with a budget for `model`; `env` answers
/// the references `command` and `args` hold.
pub(crate) fn convert(
    text: &str,
    origin: &str,
    model: &str,
    profile: &crate::profile::Profile,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Init> {
    let entries = mcp_json::entries(text, origin)?;
    let mut init = Init {
        host: entries.host,
        policy: header(origin, entries.host, model, profile),
        servers: Vec::new(),
        vars: BTreeMap::new(),
        warnings: entries.warnings.iter().map(ToString::to_string).collect(),
    };
    let mut problems = Vec::new();
    for (path, id, server) in &entries.servers {
        match upstream(id, server, entries.syntax.as_ref(), env, &mut init.vars) {
            Ok(table) => {
                let _ = write!(init.policy, "\n# {path}\n{table}");
                init.servers.push(id.clone());
            }
            Err(message) => problems.push(format!("{path}: {message}")),
        }
    }
    if !problems.is_empty() {
        anyhow::bail!("{origin}: {}", problems.join("; "));
    }
    if init.servers.is_empty() {
        anyhow::bail!("{origin}: no server to import");
    }
    Ok(init)
}

fn host_name(host: Host) -> &'static str {
    match host {
        Host::ClaudeDesktop => "Claude Desktop",
        Host::ClaudeCode => "Claude Code",
        Host::VsCode => "VS Code",
    }
}

/// The policy's top: where it came from, how to check it, the downstream and the budget.
fn header(origin: &str, host: Host, model: &str, profile: &crate::profile::Profile) -> String {
    let threshold = 2;
    format!(
        "# mcp-budget policy written by `mcp-budget init` from {origin} ({host}).\n\
         # Check it with `mcp-budget check FILE`; see what the host will be shown, and why, with\n\
         # `mcp-budget inspect --policy FILE` (`--format html` for the report).\n\
         version = 1\n\n\
         [downstream]\n\
         # The host starts the gateway and talks to it on stdin/stdout (`serve --http ADDR` for\n\
         # a network endpoint instead).\n\
         stdio = true\n\n\
         [budget]\n\
         # The host's model: a {window}-token context window and a cap of {cap} tools.\n\
         model = {model_q}\n\
         # The tool definitions may take {threshold}% of the context window: {tokens} tokens. When the\n\
         # servers list more, their descriptions are compressed, then the least used tools are\n\
         # deferred behind search_tools / get_tool_schema / invoke_tool.\n\
         threshold_percent = {threshold}\n",
        host = host_name(host),
        window = profile.context_window,
        cap = profile.max_tools,
        model_q = quote(model),
        tokens = profile.context_window * threshold / 100,
    )
}

/// One `[[upstream]]` table.
fn upstream(
    id: &str,
    server: &Server,
    syntax: Option<&Syntax>,
    env: &dyn Fn(&str) -> Option<String>,
    vars: &mut BTreeMap<String, Source>,
) -> Result<String, String> {
    let mut t = format!("[[upstream]]\nname = {}\n", quote(id));
    if server.is_stdio()? {
        stdio_keys(&mut t, id, server, syntax, env, vars)?;
        return Ok(t);
    }
    let url = server
        .url
        .as_deref()
        .ok_or("an http or sse server needs \"url\"")?;
    // An address is not a secret: only its references are rewritten.
    let url = if syntax.is_some() && url.contains("${") {
        reference(url, "URL", syntax, env, vars, false).map_err(|e| format!("url: {e}"))?
    } else {
        url.to_owned()
    };
    let _ = writeln!(t, "url = {}", quote(&url));
    if server.is_sse() {
        t.push_str("transport = \"sse\"\n");
    }
    let mut table = Vec::new();
    for (key, value) in &server.headers {
        let name = format!("{}_{}", env_name(id), env_name(key));
        let value = reference(value, &name, syntax, env, vars, false)
            .map_err(|e| format!("headers.{key}: {e}"))?;
        table.push(format!("{} = {}", bare_or_quoted(key), quote(&value)));
    }
    if !table.is_empty() {
        let _ = writeln!(t, "headers = {{ {} }}", table.join(", "));
    }
    Ok(t)
}

/// The keys of a stdio `[[upstream]]`: its command, args, cwd, env and the wrapper's flags.
fn stdio_keys(
    t: &mut String,
    id: &str,
    server: &Server,
    syntax: Option<&Syntax>,
    env: &dyn Fn(&str) -> Option<String>,
    vars: &mut BTreeMap<String, Source>,
) -> Result<(), String> {
    let now = |what: &str, value: &str| match syntax {
        Some(syntax) => expand(value, syntax, env).map_err(|e| format!("{what}: {e}")),
        None => Ok(value.to_owned()),
    };
    let command = server
        .command
        .as_deref()
        .ok_or("a stdio server needs \"command\"")?;
    let _ = writeln!(t, "command = {}", quote(&now("command", command)?));
    if !server.args.is_empty() {
        let args = server
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                // A reference the host resolves stays one: the child's args are expanded
                // when it starts. Text without references is written as it is.
                let a = if syntax.is_some() && a.contains("${") {
                    reference(a, "ARG", syntax, env, vars, false)
                        .map_err(|e| format!("args[{i}]: {e}"))?
                } else {
                    a.clone()
                };
                Ok::<_, String>(quote(&a))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let _ = writeln!(t, "args = [{}]", args.join(", "));
    }
    if let Some(cwd) = &server.cwd {
        let _ = writeln!(t, "cwd = {}", quote(&cwd.display().to_string()));
    }
    let mut table = Vec::new();
    for (key, value) in &server.env {
        let value = reference(value, key, syntax, env, vars, true)
            .map_err(|e| format!("env.{key}: {e}"))?;
        table.push(format!("{} = {}", bare_or_quoted(key), quote(&value)));
    }
    if !table.is_empty() {
        t.push_str("# Values come from the gateway's environment, which the host's entry sets.\n");
        let _ = writeln!(t, "env = {{ {} }}", table.join(", "));
    }
    if let Some(wrapped) = &server.wrapped {
        t.push_str(&compressor_keys(id, wrapped));
    }
    Ok(())
}

/// What an mcp-compressor wrapper's flags become (the entry is imported as the server it ran):
/// its tool filter, and its level as the server's least compression.
fn compressor_keys(id: &str, wrapped: &crate::import::compressor::Wrapped) -> String {
    let list = |l: &[String]| l.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", ");
    let mut t = String::from("# Was run through mcp-compressor; the gateway compresses it now.\n");
    if !wrapped.include_tools.is_empty() {
        let _ = writeln!(t, "include_tools = [{}]", list(&wrapped.include_tools));
    }
    if !wrapped.exclude_tools.is_empty() {
        let _ = writeln!(t, "exclude_tools = [{}]", list(&wrapped.exclude_tools));
    }
    if !wrapped.dropped.is_empty() {
        let _ = writeln!(
            t,
            "# Dropped (no equivalent): {}",
            wrapped.dropped.join(" ")
        );
    }
    let mut rule = String::new();
    if let Some(level) = &wrapped.level {
        let _ = write!(
            rule,
            "# mcp-compressor -c {level}: this server's tools are compressed at least that much.\n\
             min_level = {}\n",
            quote(level)
        );
    }
    if wrapped.toonify || wrapped.shrinkfit.is_some() {
        let format = if wrapped.toonify { "toon" } else { "json" };
        let _ = writeln!(
            rule,
            "# mcp-compressor --toonify / --shrinkfit: results compacted losslessly{}.\n\
             result_format = {}",
            if wrapped.shrinkfit.is_some() {
                ", over the budget a head and a summary (the rest read with read_result)"
            } else {
                ""
            },
            quote(format)
        );
    }
    if let Some(chars) = wrapped.shrinkfit {
        let tokens = crate::import::inline::shrinkfit_tokens(chars);
        let _ = writeln!(
            rule,
            "max_result_tokens = {tokens}  # --shrinkfit={chars} characters"
        );
    }
    if !rule.is_empty() {
        let _ = write!(t, "\n[budget.tools.{}]\n{rule}", quote(&format!("{id}/*")));
    }
    t
}

/// `value` as the policy writes it: the references the host resolves become `${env:…}` ones
/// (VS Code's `${userHome}` / `${workspaceFolder}` are resolved now), and a value without any
/// (every value of a Claude Desktop file) becomes `${env:NAME}`, with the value moved into
/// `vars` (under `name`, or a free variant of it). `child` escapes written `$` as `$$`, for a
/// stdio child's `env`, which is expanded again when it starts.
fn reference(
    value: &str,
    name: &str,
    syntax: Option<&Syntax>,
    env: &dyn Fn(&str) -> Option<String>,
    vars: &mut BTreeMap<String, Source>,
    child: bool,
) -> Result<String, String> {
    let refers = syntax.is_some() && value.contains("${");
    let (Some(syntax), true) = (syntax, refers) else {
        let name = claim(vars, &env_name(name), Source::Value(value.to_owned()));
        return Ok(format!("${{env:{name}}}"));
    };
    let mut out = String::new();
    for piece in pieces(value)? {
        let reference = match piece {
            Piece::Text(text) if child => {
                out.push_str(&text.replace('$', "$$"));
                continue;
            }
            Piece::Text(text) => {
                out.push_str(text);
                continue;
            }
            Piece::Reference(reference) => reference,
        };
        let (head, default) = match reference.split_once(":-") {
            Some((head, default)) => (head, Some(default.to_owned())),
            None => (reference, None),
        };
        let variable = match syntax {
            Syntax::Shell => Some((head.to_owned(), Source::Env(default.clone()))),
            _ if head.starts_with("env:") => {
                Some((head[4..].to_owned(), Source::Env(default.clone())))
            }
            _ if head.starts_with("input:") => {
                Some((env_name(&head[6..]), Source::Input(head[6..].to_owned())))
            }
            _ => None,
        };
        match variable {
            Some((var, source)) => {
                let var = claim(vars, &var, source);
                match default {
                    Some(d) => {
                        let _ = write!(out, "${{env:{var}:-{d}}}");
                    }
                    None => {
                        let _ = write!(out, "${{env:{var}}}");
                    }
                }
            }
            // `${userHome}`, `${workspaceFolder}`: paths of this machine, resolved now.
            None => out.push_str(&expand(&format!("${{{reference}}}"), syntax, env)?),
        }
    }
    Ok(out)
}

/// `name` for `source`, or `name_2`, `name_3`, … when another source holds it.
fn claim(vars: &mut BTreeMap<String, Source>, name: &str, source: Source) -> String {
    let mut candidate = name.to_owned();
    let mut n = 2;
    loop {
        match vars.get(&candidate) {
            None => {
                vars.insert(candidate.clone(), source);
                return candidate;
            }
            Some(held) if *held == source => return candidate,
            // The same host variable with another default: still the same variable.
            Some(Source::Env(_)) if matches!(source, Source::Env(_)) => return candidate,
            Some(_) => {
                candidate = format!("{name}_{n}");
                n += 1;
            }
        }
    }
}

/// A TOML basic string.
fn quote(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

fn bare_or_quoted(key: &str) -> String {
    if crate::policy::bare_key(key) {
        key.to_owned()
    } else {
        quote(key)
    }
}

impl Init {
    /// What the user reads after `init`: what was imported, and the host entry to use.
    fn notes(&self, origin: &str, exe: &str, policy: &str, written: bool) -> String {
        let mut s = format!(
            "init: {} server(s) from {origin} ({}): {}\n",
            self.servers.len(),
            host_name(self.host),
            self.servers.join(", ")
        );
        for warning in &self.warnings {
            let _ = writeln!(s, "  warning: {warning}");
        }
        if written {
            let _ = writeln!(s, "init: policy written to {policy}");
        } else {
            s.push_str("init: save the policy (e.g. `mcp-budget init > mcp-budget.toml`) and use its path below\n");
        }
        let args = ["serve", "--policy", policy];
        // Claude Code keeps user-scope servers in ~/.claude.json, project ones in .mcp.json.
        let scope = if origin.ends_with(".claude.json") {
            "user"
        } else {
            "project"
        };
        let _ = write!(
            s,
            "\nIn the host, replace {} with this one entry (the gateway starts them):\n\n{}\n",
            self.servers.join(", "),
            snippet::for_host(self.host, scope, exe, &args, &self.vars)
        );
        s
    }
}

#[cfg(test)]
mod tests;
