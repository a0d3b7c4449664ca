//! Host entries that run a server through mcp-compressor (`mcp-compressor -c high -- npx -y
//! @modelcontextprotocol/server-github`, or the same through `uvx` / `pipx run`): imported as
//! the server itself, so that it is not wrapped twice, with its flags mapped as the drop-in
//! command line maps them (docs/commands.md "Coming from mcp-compressor"). Pure.

/// What an mcp-compressor wrapper said about the server it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Wrapped {
    /// The server's own command and arguments (after `--`).
    pub(crate) command: String,
    pub(crate) args: Vec<String>,
    /// `-c` / `--compression`, as our level name (`max` is `extreme`).
    pub(crate) level: Option<String>,
    /// `--include-tools` / `--exclude-tools`, split at commas.
    pub(crate) include_tools: Vec<String>,
    pub(crate) exclude_tools: Vec<String>,
    /// Its flags with no equivalent, as written (reported, not applied).
    pub(crate) dropped: Vec<String>,
}

/// An mcp-compressor level as ours: `max` is `extreme`, the others have our names.
pub(crate) fn level(name: &str) -> &str {
    if name == "max" { "extreme" } else { name }
}

/// Flags of mcp-compressor that take a value (the value is the next word unless `=`).
const WITH_VALUE: [&str; 12] = [
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
];

/// The server an mcp-compressor entry (`command` and `args`) runs, or `None` when the entry
/// does not run mcp-compressor, or runs it on a URL or a config file (nothing to unwrap into a
/// command).
pub(crate) fn unwrap(command: &str, args: &[String]) -> Option<Wrapped> {
    let rest = compressor_args(command, args)?;
    let split = rest.iter().position(|a| a == "--")?;
    let (flags, server) = (&rest[..split], &rest[split + 1..]);
    let (server_command, server_args) = server.split_first()?;
    if server_command.starts_with("http://") || server_command.starts_with("https://") {
        return None;
    }
    let mut out = Wrapped {
        command: server_command.clone(),
        args: server_args.to_vec(),
        ..Wrapped::default()
    };
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
            "--exclude-tools" => out.exclude_tools.extend(list(&value)),
            // The frontend's name and transport are the gateway's own business.
            "-n" | "--server-name" | "--transport" | "--port" => {}
            "--transform-mode" if value.as_deref() == Some("compressed-tools") => {}
            _ => out.dropped.push(match value {
                Some(v) => format!("{flag} {v}"),
                None => flag.to_owned(),
            }),
        }
    }
    Some(out)
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
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-github",
        ]);
        let w = unwrap("/usr/local/bin/mcp-compressor", &args).unwrap();
        assert_eq!(w.command, "npx");
        assert_eq!(
            w.args,
            words(&["-y", "@modelcontextprotocol/server-github"])
        );
        assert_eq!(w.level.as_deref(), Some("extreme"));
        assert_eq!(w.include_tools, words(&["get_issue", "list_issues"]));
        assert_eq!(w.dropped, words(&["--toonify"]));
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
        assert_eq!(
            (w.command.as_str(), w.level.as_deref()),
            ("uvx", Some("low"))
        );
        assert_eq!(w.args, words(&["mcp-server-time"]));
    }

    #[test]
    fn other_entries_and_url_backends_are_left_alone() {
        assert_eq!(unwrap("npx", &words(&["-y", "server-github"])), None);
        assert_eq!(unwrap("uvx", &words(&["mcp-server-time"])), None);
        let url = words(&["-c", "high", "--", "https://example.com/mcp"]);
        assert_eq!(unwrap("mcp-compressor", &url), None);
        assert_eq!(
            unwrap("mcp-compressor", &words(&["--config", "x.json"])),
            None
        );
    }
}
