//! The command line as a policy: `mcp-budget [serve] [--level L] … -- COMMAND ARGS…` (or
//! `--url URL`) runs one upstream with no policy file, the way `mcp-compressor … -- COMMAND`
//! does, so that a host entry switches by one word. The flags become a policy fragment,
//! validated by the same code as a policy file (a bad value is a problem naming its flag), and
//! merged into the policy the other sources gave (`--policy`, `--mcp-json`).

use crate::policy::{ConfigError, Policy, Problem};

/// Where problems of the command line are reported.
const ORIGIN: &str = "the command line";

/// What the command line says about the upstream and the budget (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inline {
    /// The server's command and its arguments (after `--`); one `http(s)://` URL there is a
    /// URL, as mcp-compressor takes it.
    pub command: Vec<String>,
    /// `--url`: a streamable HTTP (or SSE) server.
    pub url: Option<String>,
    /// `-n` / `--server-name`: its server id (default: from the command or URL).
    pub name: Option<String>,
    /// `--level` (`-c`, `--compression`): `auto`, `off`, `low`, `medium`, `high`, `extreme`
    /// (`max` is `extreme`).
    pub level: Option<String>,
    /// `--mode`: `auto`, `full`, `progressive`, `host_search`.
    pub mode: Option<String>,
    /// `--model`: the host model.
    pub model: Option<String>,
    /// `--budget-percent`: `[budget] threshold_percent`.
    pub budget_percent: Option<f64>,
    /// `--include-tools`: the server's tools served (globs; default all).
    pub include_tools: Vec<String>,
    /// `--exclude-tools`: the server's tools not served (globs).
    pub exclude_tools: Vec<String>,
    /// `--toonify` (mcp-compressor): the server's JSON results as TOON (`[budget.tools."NAME/*"]
    /// result_format = "toon"`).
    pub toonify: bool,
    /// `--shrinkfit[=MAX_CHARS]` (mcp-compressor): the server's results shrunk to fit about
    /// `MAX_CHARS` characters — compacted losslessly, then a head and a summary, the rest read
    /// with `read_result` (`max_result_tokens` = `MAX_CHARS` / 4).
    pub shrinkfit: Option<usize>,
}

pub use super::compressor::DEFAULT_SHRINKFIT_CHARS;

/// Tokens of a `--shrinkfit` of `chars` characters: four characters a token, rounded up.
#[must_use]
pub fn shrinkfit_tokens(chars: usize) -> usize {
    chars.div_ceil(4).max(1)
}

impl Inline {
    /// Whether the command line names a server.
    #[must_use]
    pub fn has_server(&self) -> bool {
        !self.command.is_empty() || self.url.is_some()
    }

    /// The URL of the server, when it is one.
    fn server_url(&self) -> Option<&str> {
        self.url
            .as_deref()
            .or_else(|| match self.command.as_slice() {
                [one] if super::compressor::is_url(one) => Some(one),
                _ => None,
            })
    }

    /// The policy fragment the flags make (TOML; [`flag_of`] maps its keys back to flags).
    fn fragment(&self) -> Result<toml::Table, String> {
        let mut doc = toml::Table::new();
        doc.insert("version".into(), 1.into());
        let mut budget = toml::Table::new();
        if let Some(level) = &self.level {
            budget.insert("level".into(), super::compressor::level(level).into());
        }
        if let Some(mode) = &self.mode {
            budget.insert("mode".into(), mode.as_str().into());
        }
        if let Some(percent) = self.budget_percent {
            budget.insert("threshold_percent".into(), percent.into());
        }
        doc.insert("budget".into(), budget.clone().into());
        if !self.has_server() {
            if !self.include_tools.is_empty() || !self.exclude_tools.is_empty() {
                return Err(
                    "--include-tools and --exclude-tools apply to the server given \
                            after `--` (or by --url): name one"
                        .into(),
                );
            }
            if self.result_rule().is_some() {
                return Err(
                    "--toonify and --shrinkfit apply to the server given after `--` \
                            (or by --url): name one, or set [budget.tools.\"SERVER/*\"] \
                            result_format and max_result_tokens in the policy"
                        .into(),
                );
            }
            return Ok(doc);
        }
        let mut up = toml::Table::new();
        let name = self.name.clone().unwrap_or_else(|| self.default_name());
        up.insert("name".into(), name.clone().into());
        match (self.server_url(), self.command.split_first()) {
            (Some(url), _) => {
                if self.url.is_some() && !self.command.is_empty() {
                    return Err("give either --url or a command after `--`, not both".into());
                }
                up.insert("url".into(), url.into());
            }
            (None, Some((command, args))) => {
                up.insert("command".into(), command.as_str().into());
                up.insert("args".into(), strings(args));
                // The host entry that starts the gateway is this server's entry: its `env`
                // (a token, a company CA) is meant for the server, as mcp-compressor passes it.
                up.insert("inherit_env".into(), true.into());
            }
            (None, None) => unreachable!("has_server"),
        }
        if !self.include_tools.is_empty() {
            up.insert("include_tools".into(), strings(&self.include_tools));
        }
        if !self.exclude_tools.is_empty() {
            up.insert("exclude_tools".into(), strings(&self.exclude_tools));
        }
        if let Some(rule) = self.result_rule() {
            let mut tools = toml::Table::new();
            tools.insert(format!("{name}/*"), rule.into());
            budget.insert("tools".into(), tools.into());
            doc.insert("budget".into(), budget.into());
        }
        doc.insert("upstream".into(), vec![toml::Value::from(up)].into());
        Ok(doc)
    }

    /// The `[budget.tools."NAME/*"]` rule `--toonify` and `--shrinkfit` make, if any.
    fn result_rule(&self) -> Option<toml::Table> {
        if !self.toonify && self.shrinkfit.is_none() {
            return None;
        }
        let mut rule = toml::Table::new();
        let format = if self.toonify { "toon" } else { "json" };
        rule.insert("result_format".into(), format.into());
        if let Some(chars) = self.shrinkfit {
            let tokens = i64::try_from(shrinkfit_tokens(chars)).unwrap_or(i64::MAX);
            rule.insert("max_result_tokens".into(), tokens.into());
        }
        Some(rule)
    }

    /// A server id from the command or URL: the package or program name without the usual
    /// `mcp-server-` / `server-` / `-mcp` decorations (`npx -y @modelcontextprotocol/server-github`
    /// → `github`, `uvx mcp-server-time` → `time`), or the URL's host.
    fn default_name(&self) -> String {
        let raw = match self.server_url() {
            Some(url) => host_label(url),
            None => package_of(&self.command),
        };
        let trimmed = ["mcp-server-", "server-", "mcp-"]
            .iter()
            .find_map(|p| raw.strip_prefix(p))
            .unwrap_or(&raw);
        let trimmed = ["-mcp-server", "-mcp", "-server"]
            .iter()
            .find_map(|s| trimmed.strip_suffix(s))
            .unwrap_or(trimmed);
        let mut taken = std::collections::BTreeSet::new();
        let name = if trimmed.is_empty() { &raw } else { trimmed };
        super::mcp_json::unique_id(name, &mut taken)
    }
}

/// The name a URL's host gives a server: its first label that is not `www`, `api` or `mcp`
/// (`https://api.githubcopilot.com/mcp/` → `githubcopilot`), or a whole IP address
/// (`127-0-0-1`); never the user info (`http://user:pw@host` → `host`) or the port.
fn host_label(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = match host_port.strip_prefix('[') {
        // `[::1]:8080`: an IPv6 literal.
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => host_port.split(':').next().unwrap_or(host_port),
    };
    if host.parse::<std::net::IpAddr>().is_ok() {
        return host.replace(['.', ':'], "-").trim_matches('-').to_owned();
    }
    host.split('.')
        .find(|p| !p.is_empty() && !matches!(*p, "www" | "api" | "mcp"))
        .unwrap_or("server")
        .to_owned()
}

/// The package or program a command runs: the first argument that is not a flag after a
/// runner (`npx`, `uvx`, `pnpm dlx`, `bunx`, `docker run … IMAGE`, `python -m MODULE`), else
/// the program's file name; a scope, a version and a path are dropped.
fn package_of(command: &[String]) -> String {
    let program = command.first().map_or("", |p| file_name(p));
    let runners = [
        "npx", "uvx", "bunx", "pipx", "pnpm", "yarn", "dlx", "run", "docker", "-m",
    ];
    let mut pick = program;
    let mut after_runner = runners.contains(&program)
        || program.starts_with("python")
        || program == "node"
        || program == "deno";
    for arg in command.iter().skip(1) {
        if !after_runner {
            break;
        }
        if arg.starts_with('-') && arg != "-m" {
            continue;
        }
        if runners.contains(&arg.as_str()) {
            continue;
        }
        pick = arg;
        after_runner = false;
    }
    let name = pick.rsplit('/').next().unwrap_or(pick);
    // `pkg@1.2.3`, `image:tag`, `script.py`.
    let name = name
        .split(['@', ':'])
        .find(|s| !s.is_empty())
        .unwrap_or(name);
    let name = name
        .strip_suffix(".py")
        .or(name.strip_suffix(".js"))
        .unwrap_or(name);
    name.to_owned()
}

fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

fn strings(list: &[String]) -> toml::Value {
    toml::Value::Array(list.iter().map(|s| s.as_str().into()).collect())
}

/// The flag a fragment's key came from, for problems.
fn flag_of(path: &str) -> &'static str {
    match path {
        p if p.starts_with("budget.level") => "--level",
        p if p.starts_with("budget.mode") => "--mode",
        p if p.starts_with("budget.threshold_percent") => "--budget-percent",
        p if p.ends_with(".name") => "--server-name",
        p if p.ends_with(".url") => "--url",
        p if p.contains("include_tools") => "--include-tools",
        p if p.contains("exclude_tools") => "--exclude-tools",
        p if p.contains("max_result_tokens") => "--shrinkfit",
        p if p.contains("result_format") => "--toonify",
        _ => "-- COMMAND",
    }
}

fn invalid(path: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        path: ORIGIN.into(),
        problems: vec![Problem {
            path: path.into(),
            line: None,
            message,
        }],
    }
}

impl Policy {
    /// mcp-compressor's shape, for a command line that is the whole configuration (no
    /// `--policy`; `lone`: no `--mcp-json` either, only the server after `--` or `--url`):
    /// `-c LEVEL` without `--mode` hides the tools behind the meta-tools as its wrapper tools
    /// do (our progressive exposure, the tools' lines at that level), and `-n NAME` names the
    /// meta-tools `NAME_search_tools`, `NAME_get_tool_schema`, `NAME_invoke_tool` (and
    /// `NAME_run_code`) as it names its wrappers `NAME_get_tool_schema`, so that several
    /// drop-in entries of one host do not collide. Returns what it did, for the startup
    /// summary (`None`: nothing).
    pub fn shape_like_compressor(&mut self, inline: &Inline, lone: bool) -> Option<String> {
        let mut said = Vec::new();
        let compressor_level = (inline.level.as_deref())
            .filter(|l| matches!(*l, "low" | "medium" | "high" | "max" | "extreme"));
        if let (Some(level), None) = (compressor_level, &inline.mode) {
            self.budget.mode = crate::plan::ModeChoice::Progressive;
            said.push(format!(
                "-c {level} without --mode: the tools behind search/schema/invoke meta-tools, \
                 as mcp-compressor's wrapper tools (--mode auto lists them directly when they fit)"
            ));
        }
        if let (Some(name), true) = (&inline.name, lone && inline.has_server()) {
            let names = &mut self.discover.names;
            names.search = format!("{name}_search_tools");
            names.schema = format!("{name}_get_tool_schema");
            names.invoke = format!("{name}_invoke_tool");
            if let Some(code) = &mut names.code {
                *code = format!("{name}_run_code");
            }
            said.push(format!(
                "-n {name}: meta-tools {}, {}, {}",
                names.search, names.schema, names.invoke
            ));
        }
        (!said.is_empty()).then(|| said.join("; "))
    }

    /// Merges what the command line says ([`Inline`]): its server becomes an upstream, its
    /// budget flags replace the policy's `[budget]` keys of the same meaning.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a value a policy would not accept (naming the flag), or a
    /// server whose name another upstream has.
    pub fn add_inline(&mut self, inline: &Inline) -> Result<(), ConfigError> {
        let fragment = inline.fragment().map_err(|m| invalid("--", m))?;
        let text = toml::to_string(&fragment).map_err(|e| invalid("--", e.to_string()))?;
        let parsed = Self::from_toml_str(&text, ORIGIN).map_err(|err| match err {
            ConfigError::Invalid { path, problems } => ConfigError::Invalid {
                path,
                problems: (problems.into_iter())
                    .map(|p| Problem {
                        path: flag_of(&p.path).to_owned(),
                        line: None,
                        message: p.message,
                    })
                    .collect(),
            },
            other => other,
        })?;
        if let Some(model) = &inline.model {
            self.budget =
                (self.budget.with_model(model)).map_err(|e| invalid("--model", e.to_string()))?;
        }
        if inline.level.is_some() {
            self.budget.level = parsed.budget.level;
        }
        if inline.mode.is_some() {
            self.budget.mode = parsed.budget.mode;
        }
        if inline.budget_percent.is_some() {
            self.budget.threshold_bp = parsed.budget.threshold_bp;
        }
        // `--toonify` / `--shrinkfit`: the server's rule, before the policy's (it wins a tie).
        for rule in parsed.budget.tools.into_iter().rev() {
            self.budget.tools.insert(0, rule);
        }
        for spec in parsed.upstreams {
            if self.upstreams.iter().any(|u| u.name == spec.name) {
                return Err(invalid(
                    "--server-name",
                    format!(
                        "an upstream named {:?} is already defined: pass another --server-name",
                        spec.name
                    ),
                ));
            }
            self.upstreams.push(spec);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(words: &[&str]) -> Inline {
        Inline {
            command: words.iter().map(|w| (*w).to_owned()).collect(),
            ..Inline::default()
        }
    }

    #[test]
    fn toonify_and_shrinkfit_are_the_servers_result_rule() {
        let mut policy = Policy::default();
        let inline = Inline {
            toonify: true,
            shrinkfit: Some(8001),
            ..cmd(&["uvx", "mcp-server-time"])
        };
        policy.add_inline(&inline).unwrap();
        let rule = policy.budget.rule("time", "get_current_time").unwrap();
        assert_eq!(rule.result_format, crate::results::ResultFormat::Toon);
        assert_eq!(rule.max_result_tokens, Some(2001));
        let mut policy = Policy::default();
        let shrink = Inline {
            shrinkfit: Some(400),
            ..cmd(&["uvx", "mcp-server-time"])
        };
        policy.add_inline(&shrink).unwrap();
        let rule = policy.budget.rule("time", "x").unwrap();
        assert_eq!(rule.result_format, crate::results::ResultFormat::Json);
        let no_server = Inline {
            toonify: true,
            ..Inline::default()
        };
        let err = Policy::default().add_inline(&no_server).unwrap_err();
        assert!(err.to_string().contains("--toonify"), "{err}");
    }

    #[test]
    fn server_ids_come_from_the_package_the_command_runs() {
        for (words, id) in [
            (
                &["npx", "-y", "@modelcontextprotocol/server-github"][..],
                "github",
            ),
            (
                &["uvx", "mcp-server-time", "--local-timezone", "UTC"],
                "time",
            ),
            (
                &["/usr/bin/python3", "-m", "mcp_server_git"],
                "mcp_server_git",
            ),
            (
                &[
                    "docker",
                    "run",
                    "-i",
                    "--rm",
                    "ghcr.io/github/github-mcp-server",
                ],
                "github",
            ),
            (&["node", "build/index.js"], "index"),
            (&["./my-tool"], "my-tool"),
            (&["npx", "-y", "@playwright/mcp@latest"], "mcp"),
            (&["https://api.githubcopilot.com/mcp/"], "githubcopilot"),
            // The host, never the user info or the port (issue 50).
            (&["http://user:pw@tools.example.com:8080/mcp"], "tools"),
            (&["https://tok@api.github.example/mcp?x=1"], "github"),
            (&["http://127.0.0.1:3001/mcp"], "127-0-0-1"),
            (&["http://u:p@[::1]:3001/mcp"], "1"),
        ] {
            assert_eq!(cmd(words).default_name(), id, "{words:?}");
        }
    }

    #[test]
    fn the_flags_become_a_validated_policy() {
        let mut policy = Policy::default();
        let inline = Inline {
            level: Some("max".into()),
            mode: Some("progressive".into()),
            budget_percent: Some(3.0),
            model: Some("gpt-4o".into()),
            include_tools: vec!["get_*".into()],
            ..cmd(&["uvx", "mcp-server-time"])
        };
        policy.add_inline(&inline).unwrap();
        assert_eq!(policy.upstreams.len(), 1);
        let up = &policy.upstreams[0];
        assert_eq!(up.name, "time");
        assert!(up.tools.keeps("get_current_time") && !up.tools.keeps("convert_time"));
        assert_eq!(policy.budget.model, "gpt-4o");
        assert_eq!(policy.budget.threshold_bp, 300);
        assert_eq!(
            format!("{:?}", policy.budget.level),
            format!(
                "{:?}",
                crate::plan::LevelChoice::Fixed(crate::compress::Level::Extreme)
            )
        );
        // The same name twice is refused, naming the flag that fixes it.
        let again = policy.add_inline(&inline).unwrap_err().to_string();
        assert!(again.contains("--server-name"), "{again}");
    }

    #[test]
    fn the_command_line_server_inherits_the_entrys_environment() {
        let mut policy = Policy::default();
        policy
            .add_inline(&cmd(&["uvx", "mcp-server-time"]))
            .unwrap();
        let crate::policy::upstream::Transport::Stdio { inherit_env, .. } =
            &policy.upstreams[0].transport
        else {
            panic!("a stdio upstream");
        };
        assert!(inherit_env);
    }

    #[test]
    fn compressor_levels_without_a_mode_are_progressive_and_dash_n_names_the_meta_tools() {
        let inline = Inline {
            level: Some("medium".into()),
            name: Some("gh".into()),
            ..cmd(&["npx", "-y", "@modelcontextprotocol/server-github"])
        };
        let mut policy = Policy::default();
        let said = policy.shape_like_compressor(&inline, true).unwrap();
        assert_eq!(policy.budget.mode, crate::plan::ModeChoice::Progressive);
        let names = &policy.discover.names;
        assert_eq!(
            [&names.search, &names.schema, &names.invoke],
            ["gh_search_tools", "gh_get_tool_schema", "gh_invoke_tool"]
        );
        assert!(
            said.contains("-c medium without --mode") && said.contains("-n gh"),
            "{said}"
        );
        // With --mode, or with other servers beside it (--mcp-json), the names and mode stay.
        let moded = Inline {
            mode: Some("auto".into()),
            ..inline.clone()
        };
        let mut policy = Policy::default();
        assert_eq!(policy.shape_like_compressor(&moded, false), None);
        assert_eq!(policy.budget.mode, crate::plan::ModeChoice::Auto);
        assert_eq!(policy.discover.names.search, "search_tools");
        // Our own levels are not mcp-compressor's: `auto` and `off` keep the planner's choice.
        let auto = Inline {
            level: Some("auto".into()),
            name: None,
            ..inline
        };
        assert_eq!(Policy::default().shape_like_compressor(&auto, true), None);
    }

    #[test]
    fn a_bad_value_is_a_problem_naming_its_flag() {
        let inline = Inline {
            level: Some("tiny".into()),
            ..cmd(&["x"])
        };
        let err = Policy::default()
            .add_inline(&inline)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the command line") && err.contains("--level"),
            "{err}"
        );
        let lone = Inline {
            include_tools: vec!["a".into()],
            ..Inline::default()
        };
        let err = Policy::default().add_inline(&lone).unwrap_err().to_string();
        assert!(err.contains("--include-tools"), "{err}");
    }
}
