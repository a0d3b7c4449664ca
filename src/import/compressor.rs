//! Host entries that run a server through mcp-compressor (`mcp-compressor -c high -- npx -y
//! @modelcontextprotocol/server-github`, or the same through `uvx` / `pipx run`): imported as
//! the server itself, so that it is not wrapped twice, with its flags mapped as the drop-in
//! command line maps them (docs/commands.md "Coming from mcp-compressor"). Pure.

/// One server an mcp-compressor entry runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Backend {
    /// A command and its arguments.
    Command { command: String, args: Vec<String> },
    /// A streamable HTTP (or SSE) server's URL.
    Url(String),
}

impl Backend {
    /// A server as mcp-compressor takes it after `--`: one `http(s)://` URL, else a command and
    /// its arguments; `None` for no words.
    fn of(words: Vec<String>) -> Option<Self> {
        let mut words = words.into_iter();
        let first = words.next()?;
        Some(if is_url(&first) {
            Self::Url(first)
        } else {
            Self::Command {
                command: first,
                args: words.collect(),
            }
        })
    }
}

/// Whether a server word is a URL (`http://` or `https://`), as mcp-compressor tells them.
pub(crate) fn is_url(word: &str) -> bool {
    word.starts_with("http://") || word.starts_with("https://")
}

/// `--shrinkfit` without a value: 16,000 characters (about 4,000 tokens, the size of a
/// `run_code` result).
pub const DEFAULT_SHRINKFIT_CHARS: usize = 16_000;

/// What an mcp-compressor wrapper said about the servers it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Wrapped {
    /// The servers: the one after `--` (no name of its own), then each `--multi-server
    /// NAME=COMMAND ARGS…` with its name.
    pub(crate) backends: Vec<(Option<String>, Backend)>,
    /// `-c` / `--compression`, as our level name (`max` is `extreme`).
    pub(crate) level: Option<String>,
    /// `--include-tools` / `--exclude-tools`, split at commas.
    pub(crate) include_tools: Vec<String>,
    pub(crate) exclude_tools: Vec<String>,
    /// `--toonify`: results as TOON.
    pub(crate) toonify: bool,
    /// `--shrinkfit[=MAX_CHARS]`: the characters results are shrunk to fit.
    pub(crate) shrinkfit: Option<usize>,
    /// Its flags with no equivalent, as written (reported, not applied).
    pub(crate) dropped: Vec<String>,
}

/// An mcp-compressor level as ours: `max` is `extreme`, the others have our names.
pub(crate) fn level(name: &str) -> &str {
    if name == "max" { "extreme" } else { name }
}

/// Flags of mcp-compressor that take a value (the value is the next word unless `=`).
const WITH_VALUE: [&str; 13] = [
    "-c",
    "--compression",
    "-n",
    "--server-name",
    "--include-tools",
    "--exclude-tools",
    "--transform-mode",
    "--transport",
    "--port",
    "--code-mode",
    "--output-dir",
    "--config",
    "--multi-server",
];

/// The servers an mcp-compressor entry (`command` and `args`) runs — a command or a URL after
/// `--`, and each `--multi-server` — or `None` when the entry does not run mcp-compressor, or
/// runs it on a config file only (its servers are another file's entries).
pub(crate) fn unwrap(command: &str, args: &[String]) -> Option<Wrapped> {
    let rest = compressor_args(command, args)?;
    let split = rest.iter().position(|a| a == "--").unwrap_or(rest.len());
    let (flags, server) = (&rest[..split], rest.get(split + 1..).unwrap_or_default());
    let mut out = Wrapped::default();
    if let Some(backend) = Backend::of(server.to_vec()) {
        out.backends.push((None, backend));
    }
    let mut words = flags.iter();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (word.as_str(), None),
        };
        let value = if WITH_VALUE.contains(&flag) {
            inline.or_else(|| words.next().cloned())
        } else {
            inline
        };
        let list = |v: &Option<String>| -> Vec<String> {
            (v.iter().flat_map(|v| v.split(',')))
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        match flag {
            "-c" | "--compression" => {
                out.level = value.map(|v| level(&v).to_owned());
            }
            "--include-tools" => out.include_tools.extend(list(&value)),
            "--multi-server" => match value.as_deref().and_then(multi_server) {
                Some(named) => out.backends.push(named),
                None => out.dropped.push(format!(
                    "--multi-server {} (not NAME=COMMAND ARGS…)",
                    value.unwrap_or_default()
                )),
            },
            "--exclude-tools" => out.exclude_tools.extend(list(&value)),
            "--toonify" if value.is_none() => out.toonify = true,
            "--shrinkfit" => match value.as_deref().map(str::parse::<usize>) {
                None => out.shrinkfit = Some(DEFAULT_SHRINKFIT_CHARS),
                Some(Ok(n)) if n > 0 => out.shrinkfit = Some(n),
                Some(_) => out
                    .dropped
                    .push(format!("{flag}={}", value.unwrap_or_default())),
            },
            // The frontend's name and transport are the gateway's own business.
            "-n" | "--server-name" | "--transport" | "--port" => {}
            "--transform-mode" if value.as_deref() == Some("compressed-tools") => {}
            _ => out.dropped.push(match value {
                Some(v) => format!("{flag} {v}"),
                None => flag.to_owned(),
            }),
        }
    }
    (!out.backends.is_empty()).then_some(out)
}

/// `NAME=COMMAND ARGS…` (one word, split as a shell would) as a named server.
fn multi_server(spec: &str) -> Option<(Option<String>, Backend)> {
    let (name, line) = spec.split_once('=')?;
    let backend = Backend::of(shlex::split(line)?)?;
    (!name.trim().is_empty()).then(|| (Some(name.trim().to_owned()), backend))
}

/// The arguments mcp-compressor gets, when `command` runs it (directly or through `uvx`,
/// `uv tool run`, `pipx run`).
fn compressor_args<'a>(command: &str, args: &'a [String]) -> Option<&'a [String]> {
    let program = command.rsplit(['/', '\\']).next().unwrap_or(command);
    let program = program.strip_suffix(".exe").unwrap_or(program);
    if program == "mcp-compressor" {
        return Some(args);
    }
    if !matches!(program, "uvx" | "pipx" | "uv") {
        return None;
    }
    // `uvx [--from X] mcp-compressor[@v] ARGS`, `pipx run mcp-compressor ARGS`.
    let at = args.iter().position(|a| {
        let name = a.split(['@', '=']).next().unwrap_or(a);
        name == "mcp-compressor"
    })?;
    Some(&args[at + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn an_entry_through_mcp_compressor_is_the_server_it_runs() {
        let args = words(&[
            "-c",
            "max",
            "--include-tools=get_issue,list_issues",
            "-n",
            "gh",
            "--toonify",
            "--shrinkfit=8000",
            "--cli-mode",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-github",
        ]);
        let w = unwrap("/usr/local/bin/mcp-compressor", &args).unwrap();
        assert_eq!(
            w.backends,
            [(
                None,
                Backend::Command {
                    command: "npx".into(),
                    args: words(&["-y", "@modelcontextprotocol/server-github"])
                }
            )]
        );
        assert_eq!(w.level.as_deref(), Some("extreme"));
        assert_eq!(w.include_tools, words(&["get_issue", "list_issues"]));
        assert_eq!((w.toonify, w.shrinkfit), (true, Some(8000)));
        assert_eq!(w.dropped, words(&["--cli-mode"]));
        // Through uvx, with a version.
        let args = words(&[
            "mcp-compressor@0.38.2",
            "--compression",
            "low",
            "--",
            "uvx",
            "mcp-server-time",
        ]);
        let w = unwrap("uvx", &args).unwrap();
        assert_eq!(w.level.as_deref(), Some("low"));
        assert_eq!(
            w.backends,
            [(
                None,
                Backend::Command {
                    command: "uvx".into(),
                    args: words(&["mcp-server-time"])
                }
            )]
        );
    }

    #[test]
    fn url_backends_and_multi_servers_are_the_servers_they_name() {
        let url = words(&["-c", "high", "--", "https://example.com/mcp"]);
        let w = unwrap("mcp-compressor", &url).unwrap();
        assert_eq!(
            w.backends,
            [(None, Backend::Url("https://example.com/mcp".into()))]
        );
        let multi = words(&[
            "--multi-server",
            "time=uvx mcp-server-time --local-timezone 'Europe/Paris'",
            "--multi-server=gh=https://api.githubcopilot.com/mcp/",
            "--multi-server",
            "broken",
        ]);
        let w = unwrap(
            "uvx",
            &[&["mcp-compressor".to_owned()][..], &multi].concat(),
        )
        .unwrap();
        assert_eq!(
            w.backends,
            [
                (
                    Some("time".into()),
                    Backend::Command {
                        command: "uvx".into(),
                        args: words(&["mcp-server-time", "--local-timezone", "Europe/Paris"])
                    }
                ),
                (
                    Some("gh".into()),
                    Backend::Url("https://api.githubcopilot.com/mcp/".into())
                ),
            ]
        );
        assert_eq!(
            w.dropped,
            words(&["--multi-server broken (not NAME=COMMAND ARGS…)"])
        );
    }

    #[test]
    fn other_entries_and_config_files_are_left_alone() {
        assert_eq!(unwrap("npx", &words(&["-y", "server-github"])), None);
        assert_eq!(unwrap("uvx", &words(&["mcp-server-time"])), None);
        assert_eq!(
            unwrap("mcp-compressor", &words(&["--config", "x.json"])),
            None
        );
    }
}
