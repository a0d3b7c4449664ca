//! The `mcp-budget` command: `serve`, `check`, `inspect`, `render`, `search`, `calibrate`,
//! `pin`, `init`, `completions`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use mcp_budget::cli;

mod serve;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit status for a policy that does not validate (`EX_DATAERR`).
const EXIT_CONFIG: u8 = 65;

#[derive(Debug, Parser)]
#[command(name = "mcp-budget", version, about = "A token-budget gateway for MCP")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway.
    Serve {
        /// Policy file (TOML).
        #[arg(long)]
        policy: Option<PathBuf>,
        /// mcpServers JSON files (Claude Desktop / Claude Code) whose servers become upstreams.
        #[arg(long = "mcp-json")]
        mcp_json: Vec<PathBuf>,
        /// Serve MCP on stdin/stdout (logs stay on stderr).
        #[arg(long)]
        stdio: bool,
        /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8931); overrides the policy.
        #[arg(long)]
        http: Option<std::net::SocketAddr>,
        /// Seconds to wait for upstreams before serving anyway.
        #[arg(long, default_value_t = 30)]
        ready_timeout_secs: u64,
        /// Log lines as `text` or `json` (one object per line); overrides `[telemetry] log_format`.
        #[arg(long, value_parser = ["text", "json"])]
        log_format: Option<String>,
    },
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => return check(&args),
        Command::Completions { shell } => {
            // Into a buffer first: the generator panics on a closed pipe (`... | head`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "mcp-budget", &mut script);
            use std::io::Write as _;
            let _ = std::io::stdout().lock().write_all(&script);
            return ExitCode::SUCCESS;
        }
        Command::Serve {
            policy,
            mcp_json,
            stdio,
            http,
            ready_timeout_secs,
            log_format,
        } => {
            let source = mcp_budget::reload::Source {
                policy,
                mcp_json,
                stdio,
                http,
            };
            let loaded = match source.load() {
                Ok(p) => p,
                Err(err) => {
                    eprintln!("{err}");
                    return ExitCode::from(EXIT_CONFIG);
                }
            };
            // Stdout is the protocol in stdio mode: nothing here may hold its lock.
            let log_format = log_format.and_then(|f| f.parse().ok());
            let ready_timeout = std::time::Duration::from_secs(ready_timeout_secs);
            serve::run(source, loaded, ready_timeout, log_format)
        }
        Command::Inspect(args) => cli::inspect::run(&args, &mut std::io::stdout().lock()),
        Command::Render(args) => cli::render::run(&args, &mut std::io::stdout().lock()),
        Command::Search(args) => cli::search::run(&args, &mut std::io::stdout().lock()),
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
