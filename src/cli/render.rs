//! `mcp-budget render`: the `tools/list` result a host would receive.

use std::path::PathBuf;

use crate::discover::MetaToolNames;
use crate::plan::{apply, plan, LevelChoice, ModeChoice};
use crate::tokens::Rendering;

/// Arguments of `mcp-budget render`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Saved tools/list results (a file's stem is the server id), or directories of them.
    #[arg(long = "tools", required = true, num_args = 1..)]
    pub tools: Vec<PathBuf>,
    /// Policy file (its `[budget]` section and separator).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Host model (overrides the policy's), e.g. claude-haiku-4-5, gpt-4o.
    #[arg(long)]
    pub model: Option<String>,
    /// Host rendering (overrides the model's): openai, anthropic or raw.
    #[arg(long)]
    pub rendering: Option<Rendering>,
    /// Compression level: off, low, medium, high, extreme, or auto (the planner's choice).
    /// Default: the policy's (auto).
    #[arg(long)]
    pub level: Option<LevelChoice>,
    /// Exposure: full, progressive, or auto (the planner's choice). Default: the policy's
    /// (auto).
    #[arg(long)]
    pub mode: Option<ModeChoice>,
    /// Indent the JSON (the default is the compact bytes a host receives).
    #[arg(long)]
    pub pretty: bool,
}

/// Runs the command, writing to `out`.
///
/// # Errors
/// Any failure, with context.
pub fn run(args: &Args, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let mut prepared = super::inspect::prepare(
        &args.tools,
        args.policy.as_ref(),
        args.model.as_deref(),
        args.rendering,
    )?;
    if let Some(level) = args.level {
        prepared.budget.level = level;
    }
    if let Some(mode) = args.mode {
        prepared.budget.mode = mode;
    }
    let plan = plan(&prepared.catalog, &prepared.measured, &prepared.budget);
    let tools = apply(
        &plan,
        &prepared.catalog,
        &prepared.budget,
        &prepared.separator,
        &MetaToolNames::default(),
    );
    let result = serde_json::json!({ "tools": tools });
    if args.pretty {
        serde_json::to_writer_pretty(&mut *out, &result)?;
    } else {
        serde_json::to_writer(&mut *out, &result)?;
    }
    writeln!(out)?;
    Ok(())
}
