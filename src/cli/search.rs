//! `mcp-budget search`.

use std::path::PathBuf;

/// Arguments of `mcp-budget search`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Saved tools/list results (a file's stem is the server id), or directories of them.
    #[arg(long = "tools", required = true, num_args = 1..)]
    pub tools: Vec<PathBuf>,
}

/// Runs the command, writing to `out`.
///
/// # Errors
/// Any failure, with context.
pub fn run(args: &Args, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let tools = crate::catalog::load_saved(&args.tools)?;
    writeln!(
        out,
        "{} tools loaded; `search` is not built yet",
        tools.len()
    )?;
    anyhow::bail!("`mcp-budget search` is not implemented yet")
}
