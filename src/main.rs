//! The `mcp-budget` command: `serve`, `check`, `inspect`, `render`, `search`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mcp_budget::cli;
use mcp_budget::policy::Policy;

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
    /// Validate policy files (and mcpServers JSON files); exits non-zero on any problem.
    Check {
        /// Policy files.
        files: Vec<PathBuf>,
        /// mcpServers JSON files (Claude Desktop / Claude Code) to validate as upstreams.
        #[arg(long = "mcp-json")]
        mcp_json: Vec<PathBuf>,
    },
    /// Token counts per tool and level, the budget and the plan, on saved tools/list results.
    Inspect(cli::inspect::Args),
    /// Print the tools/list result a host would receive, on saved tools/list results.
    Render(cli::render::Args),
    /// Search saved tools/list results as `search_tools` would.
    Search(cli::search::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut stdout = std::io::stdout().lock();
    let result = match cli.command {
        Command::Check { files, mcp_json } => return check(&files, &mcp_json),
        Command::Inspect(args) => cli::inspect::run(&args, &mut stdout),
        Command::Render(args) => cli::render::run(&args, &mut stdout),
        Command::Search(args) => cli::search::run(&args, &mut stdout),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn check(files: &[PathBuf], mcp_json: &[PathBuf]) -> ExitCode {
    let mut ok = true;
    let mut policy = Policy::default();
    for file in files {
        match Policy::load(file) {
            Ok(p) => {
                println!("{}: ok ({} upstreams)", file.display(), p.upstreams.len());
                policy = p;
            }
            Err(err) => {
                eprintln!("{err}");
                ok = false;
            }
        }
    }
    for file in mcp_json {
        match policy.add_mcp_json(file) {
            Ok(()) => println!("{}: ok", file.display()),
            Err(err) => {
                eprintln!("{err}");
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_CONFIG)
    }
}
