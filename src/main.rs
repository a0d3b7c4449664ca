//! The `mcp-budget` command: `serve`, `check`, `inspect`, `render`, `search`, `calibrate`,
//! `pin`, `init`, `completions`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use mcp_budget::cli;

mod serve;

/// jemalloc (Unix): see `Cargo.toml` for why; its background thread is started in `main`.
#[cfg(unix)]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Exit status for a policy that does not validate (`EX_DATAERR`).
const EXIT_CONFIG: u8 = 65;

#[derive(Debug, Parser)]
#[command(
    name = "mcp-budget",
    version,
    about = "A token-budget gateway for MCP",
    // `mcp-budget -c medium -- npx …` is `serve`: the one-word switch from mcp-compressor.
    args_conflicts_with_subcommands = true,
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no command: `serve` with these arguments.
    #[command(flatten)]
    serve: ServeArgs,
}

/// `serve`'s arguments (also taken with no command at all).
#[derive(Debug, Clone, clap::Args)]
#[allow(clippy::struct_excessive_bools, reason = "command-line flags")]
struct ServeArgs {
    /// Policy file (TOML).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// mcpServers JSON files (Claude Desktop / Claude Code) whose servers become upstreams
    /// (`--config`: mcp-compressor's name).
    #[arg(long = "mcp-json", visible_alias = "config")]
    mcp_json: Vec<PathBuf>,
    /// Serve MCP on stdin/stdout (logs stay on stderr); the default with `-- COMMAND`,
    /// `--url` or `--mcp-json` and no policy.
    #[arg(long)]
    stdio: bool,
    /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8931); overrides the policy.
    #[arg(long)]
    http: Option<std::net::SocketAddr>,
    /// mcp-compressor's `--transport`: `stdio`, or `streamable-http` on 127.0.0.1:`--port`.
    #[arg(long, value_parser = ["stdio", "streamable-http"])]
    transport: Option<String>,
    /// With `--transport streamable-http`: the port (0: any free one).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// A streamable HTTP (or SSE) server to serve, instead of `-- COMMAND`.
    #[arg(long)]
    url: Option<String>,
    /// The server's id, the namespace of its tools (default: from the command or URL).
    #[arg(short = 'n', long = "server-name")]
    server_name: Option<String>,
    /// Compression level: auto, off, low, medium, high, extreme (`max`: extreme); `-c` and
    /// `--compression` as mcp-compressor spells it. Overrides `[budget] level`.
    #[arg(long, short = 'c', visible_alias = "compression")]
    level: Option<String>,
    /// Exposure: auto, full, progressive, `host_search`. Overrides `[budget] mode`.
    #[arg(long)]
    mode: Option<String>,
    /// The host model (e.g. claude-sonnet-4-5). Overrides `[budget] model`.
    #[arg(long)]
    model: Option<String>,
    /// Share of the context window tools may use, 1 to 5. Overrides `[budget]
    /// threshold_percent`.
    #[arg(long)]
    budget_percent: Option<f64>,
    /// Serve only the server's tools matching these globs (comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    include_tools: Vec<String>,
    /// Do not serve the server's tools matching these globs (comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    exclude_tools: Vec<String>,
    /// mcp-compressor's `--transform-mode`: `compressed-tools` is `--mode progressive`; `cli`
    /// and `just-bash` have no equivalent.
    #[arg(long)]
    transform_mode: Option<String>,
    /// mcp-compressor flags with no equivalent here: refused with what to use instead.
    #[arg(long, hide = true)]
    cli_mode: bool,
    #[arg(long, hide = true, alias = "just-bash-mode")]
    just_bash: bool,
    /// mcp-compressor's `--toonify`: the server's JSON results as TOON when smaller
    /// (`[budget.tools."NAME/*"] result_format = "toon"`).
    #[arg(long)]
    toonify: bool,
    /// mcp-compressor's `--shrinkfit[=MAX_CHARS]`: results over about `MAX_CHARS` characters
    /// (default 16000) keep a head and a summary, the rest read with `read_result`
    /// (`max_result_tokens` = `MAX_CHARS` / 4; compacted first).
    #[arg(long, num_args = 0..=1, default_missing_value = "", require_equals = true, value_name = "MAX_CHARS")]
    shrinkfit: Option<String>,
    #[arg(long, hide = true)]
    code_mode: Option<String>,
    #[arg(long, hide = true)]
    output_dir: Option<PathBuf>,
    #[arg(long, hide = true)]
    multi_server: Vec<String>,
    /// Seconds to wait for upstreams before serving anyway.
    #[arg(long, default_value_t = 30)]
    ready_timeout_secs: u64,
    /// Log lines as `text` or `json` (one object per line); overrides `[telemetry] log_format`.
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
    /// The server to serve: a command and its arguments, or one URL (everything after `--`).
    #[arg(last = true, value_name = "COMMAND_OR_URL")]
    command: Vec<String>,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process")]
enum Command {
    /// Run the gateway: on a policy (`--policy`), host configs (`--mcp-json`) and/or one server
    /// given on the command line (`-- COMMAND ARGS…` or `--url URL`, with `--level`, `--mode`,
    /// `--model`, `--budget-percent`, `--include-tools`, `--exclude-tools`, `-n NAME`). The
    /// same with no command at all: `mcp-budget -c medium -- npx -y @modelcontextprotocol/server-github`.
    Serve(ServeArgs),
    /// Validate policy files (and mcpServers JSON files): every problem with its line, then
    /// warnings; exits non-zero on any problem (and on warnings with --strict).
    Check(cli::check::Args),
    /// Token counts per tool and level, the budget and the plan, on saved tools/list results
    /// or (no --tools) on the policy's own upstreams, started and stopped again.
    Inspect(cli::inspect::Args),
    /// Print the tools/list result a host would receive, on saved tools/list results or (no
    /// --tools) on the policy's own upstreams, started and stopped again.
    Render(cli::render::Args),
    /// Search saved tools/list results as `search_tools` would.
    Search(cli::search::Args),
    /// Run labelled requests through each exposure (flat lists, levels, the plan, progressive
    /// discovery, code mode) with a real LLM behind an OpenAI-compatible endpoint: tool-call
    /// accuracy, argument validity, tokens and cost side by side (docs/eval.md).
    Eval(cli::eval::Args),
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to stdout, e.g.
    /// `mcp-budget completions bash > ~/.local/share/bash-completion/completions/mcp-budget`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// The calibration of a Claude model's counts, from one answer of Anthropic's token counter.
    Calibrate(cli::calibrate::Args),
    /// Write a commented policy from a host's server list (Claude Desktop, Claude Code, VS
    /// Code), and print the entry that makes the host start the gateway instead.
    Init(cli::init::Args),
    /// Connect to a policy's upstreams and write the lockfile of their tools, prompts and
    /// resource templates (schemaHash of each), for `[pin] lock` and `check --lock`.
    Pin(cli::pin::Args),
}

/// The bash completion script with its subcommands' `case` labels spelled as the names it
/// assigns: `clap_complete` escapes the hyphen of `mcp-budget` as `__subcmd__` in the labels
/// (`mcp__subcmd__budget__subcmd__serve)`) but as `__` in the names it matches them with
/// (`cmd="mcp__budget__subcmd__serve"`), so no subcommand's flags completed
/// (clap-rs/clap#6421).
fn bash_subcommands_fixed(script: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(script)
        .replace("mcp__subcmd__budget__", "mcp__budget__")
        .into_bytes()
}

fn main() -> ExitCode {
    // Freed pages go back to the system after `dirty_decay_ms` (1 s as built from this tree,
    // `.cargo/config.toml`; jemalloc's default 10 s otherwise) even when the process is idle:
    // without the thread, jemalloc purges only when it is next called. A failure (a jemalloc
    // built without threads) only keeps the pages longer.
    #[cfg(unix)]
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        return serve(cli.serve);
    };
    let result = match command {
        Command::Check(args) => return check(&args),
        Command::Completions { shell } => {
            // Into a buffer first: the generator panics on a closed pipe (`... | head`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "mcp-budget", &mut script);
            if shell == clap_complete::Shell::Bash {
                script = bash_subcommands_fixed(&script);
            }
            use std::io::Write as _;
            let _ = std::io::stdout().lock().write_all(&script);
            return ExitCode::SUCCESS;
        }
        Command::Serve(args) => return serve(args),
        Command::Inspect(args) => cli::inspect::run(&args, &mut std::io::stdout().lock()),
        Command::Render(args) => cli::render::run(&args, &mut std::io::stdout().lock()),
        Command::Search(args) => cli::search::run(&args, &mut std::io::stdout().lock()),
        Command::Eval(args) => cli::eval::run(&args, &mut std::io::stdout().lock()),
        Command::Calibrate(args) => cli::calibrate::run(&args, &mut std::io::stdout().lock()),
        Command::Pin(args) => cli::pin::run(&args, &mut std::io::stdout().lock()),
        Command::Init(args) => cli::init::run(
            &args,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr().lock(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    let log_format = args.log_format.as_deref().and_then(|f| f.parse().ok());
    let ready_timeout = std::time::Duration::from_secs(args.ready_timeout_secs);
    let source = match source_of(args) {
        Ok(source) => source,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let loaded = match source.load() {
        Ok(p) => p,
        Err(err) => {
            // With its cause: "cannot read FILE: not a regular file".
            eprintln!("{:#}", anyhow::Error::new(err));
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // Stdout is the protocol in stdio mode: nothing here may hold its lock.
    match serve::run(source, loaded, ready_timeout, log_format) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// mcp-compressor flags with no equivalent here: refused, saying what to use instead.
fn refuse_without_equivalent(args: &ServeArgs) -> Result<(), String> {
    let no_equivalent = [
        (args.cli_mode, "--cli-mode"),
        (args.just_bash, "--just-bash"),
        (args.output_dir.is_some(), "--output-dir"),
    ];
    if let Some((_, flag)) = no_equivalent.iter().find(|(set, _)| *set) {
        return Err(format!(
            "{flag} (mcp-compressor) has no equivalent in mcp-budget: drop it; \
             --mode progressive gives search/schema/invoke meta-tools"
        ));
    }
    if args.code_mode.is_some() {
        return Err(
            "--code-mode (mcp-compressor) generates a client library; mcp-budget \
                    has no equivalent: its code mode is a run_code tool (docs/code-mode.md)"
                .into(),
        );
    }
    if !args.multi_server.is_empty() {
        return Err(
            "--multi-server (mcp-compressor): give several servers in an mcpServers \
                    JSON file (--mcp-json) or a policy's [[upstream]] entries"
                .into(),
        );
    }
    Ok(())
}

/// `--shrinkfit[=MAX_CHARS]`: the characters, the default when bare.
fn shrinkfit_chars(value: Option<&str>) -> Result<Option<usize>, String> {
    match value {
        None => Ok(None),
        Some("") => Ok(Some(mcp_budget::import::inline::DEFAULT_SHRINKFIT_CHARS)),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(format!(
                "--shrinkfit={v}: expected a number of characters (at least 1)"
            )),
        },
    }
}

/// Where `serve`'s policy comes from, with mcp-compressor's flags mapped (see
/// docs/commands.md "Coming from mcp-compressor").
fn source_of(args: ServeArgs) -> Result<mcp_budget::reload::Source, String> {
    refuse_without_equivalent(&args)?;
    let mut mode = args.mode;
    match args.transform_mode.as_deref() {
        None => {}
        Some("compressed-tools") => {
            mode.get_or_insert_with(|| "progressive".to_owned());
        }
        Some(other) => {
            return Err(format!(
                "--transform-mode {other} (mcp-compressor) has no equivalent in mcp-budget: \
                 use compressed-tools (that is --mode progressive) or --mode auto"
            ));
        }
    }
    let mut http = args.http;
    let mut stdio = args.stdio;
    match args.transport.as_deref() {
        Some("stdio") => stdio = true,
        Some(_) => {
            http.get_or_insert(std::net::SocketAddr::from(([127, 0, 0, 1], args.port)));
        }
        None => {}
    }
    let inline = mcp_budget::import::inline::Inline {
        command: args.command,
        url: args.url,
        name: args.server_name,
        level: args.level,
        mode,
        model: args.model,
        budget_percent: args.budget_percent,
        include_tools: args.include_tools,
        exclude_tools: args.exclude_tools,
        toonify: args.toonify,
        shrinkfit: shrinkfit_chars(args.shrinkfit.as_deref())?,
    };
    if args.policy.is_none() && args.mcp_json.is_empty() && !inline.has_server() {
        return Err("no server to serve: pass --policy FILE, --mcp-json FILE, or the server \
                    itself after `--` (mcp-budget serve -- npx -y @modelcontextprotocol/server-everything) \
                    or with --url URL"
            .into());
    }
    // Like mcp-compressor: a server on the command line, or a host config (`--config`), is
    // served on stdio unless told.
    let from_command_line = inline.has_server() || !args.mcp_json.is_empty();
    if from_command_line && args.policy.is_none() && http.is_none() {
        stdio = true;
    }
    Ok(mcp_budget::reload::Source {
        policy: args.policy,
        mcp_json: args.mcp_json,
        stdio,
        http,
        inline,
    })
}

fn check(args: &cli::check::Args) -> ExitCode {
    match cli::check::run(
        args,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    ) {
        Ok(outcome) if outcome.ok(args.strict) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(EXIT_CONFIG),
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
