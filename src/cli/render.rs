//! `mcp-budget render`: the `tools/list` result a host would receive, or the same tools as an
//! LLM API request's `tools` (`--format anthropic|openai|openai-responses`, see
//! [`crate::llm_api`]).
//!
//! The list is the one `serve` answers on the same policy ([`crate::listing`]): the budget
//! layer's plan, or, with `[budget] enabled = false` and neither `--level` nor `--mode` given,
//! every tool passed through as upstreams listed it (`serve` pages that list 500 tools at a
//! time; `render` prints it whole).

use serde_json::Value;

use crate::listing::pass_through;
use crate::llm_api::{RewriteOptions, anthropic, openai};
use crate::plan::{LevelChoice, ModeChoice};
use crate::tokens::Counter;

/// The shape `render` writes the tools in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// An MCP `tools/list` result: `{"tools": [...]}` as a host receives it.
    #[default]
    Mcp,
    /// The `tools` of an Anthropic Messages API request (`name`, `description`,
    /// `input_schema`), in canonical order, with `cache_control` on the last tool when the tools
    /// reach the model's minimum cacheable length.
    Anthropic,
    /// The `tools` of an `OpenAI` Chat Completions request (`{"type": "function", "function":
    /// {...}}`), in canonical order.
    Openai,
    /// The `tools` of an `OpenAI` Responses request (`{"type": "function", "name", ...}`), in
    /// canonical order.
    OpenaiResponses,
}

/// Arguments of `mcp-budget render`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The catalog, the policy and the host.
    #[command(flatten)]
    pub catalog: super::CatalogArgs,
    /// Compression level: off, low, medium, high, extreme, or auto (the planner's choice).
    /// Default: the policy's (auto).
    #[arg(long)]
    pub level: Option<LevelChoice>,
    /// Exposure: full, progressive, or auto (the planner's choice). Default: the policy's
    /// (auto).
    #[arg(long)]
    pub mode: Option<ModeChoice>,
    /// Output shape: mcp (a tools/list result), anthropic (Messages API tools, with a cache
    /// breakpoint), openai (Chat Completions tools) or openai-responses (Responses tools).
    #[arg(long, value_enum, default_value_t = Format::Mcp)]
    pub format: Format,
    /// Indent the JSON (the default is the compact bytes a host receives).
    #[arg(long)]
    pub pretty: bool,
}

/// Runs the command, writing to `out`.
///
/// # Errors
/// Any failure, with context.
pub fn run(args: &Args, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let mut prepared = super::inspect::prepare(&args.catalog)?;
    if let Some(level) = args.level {
        prepared.rules.level = level;
    }
    if let Some(mode) = args.mode {
        prepared.rules.mode = mode;
    }
    let planned = prepared.policy.budget.enabled || args.level.is_some() || args.mode.is_some();
    let (tools, bytes) = if planned {
        let listing = prepared.listing();
        (listing.tools, listing.result)
    } else {
        (
            prepared.catalog.listed_tools(),
            pass_through(&prepared.catalog),
        )
    };
    if args.format == Format::Mcp && !args.pretty {
        // The very bytes a host receives.
        out.write_all(bytes.get().as_bytes())?;
        writeln!(out)?;
        return Ok(());
    }
    let budget = &prepared.policy.budget;
    let result = match args.format {
        Format::Mcp => serde_json::json!({ "tools": tools }),
        Format::Anthropic => {
            let tools: Vec<Value> = tools
                .iter()
                .filter_map(Value::as_object)
                .map(anthropic::tool_from_mcp)
                .collect();
            let mut request = serde_json::json!({ "model": budget.model, "tools": tools });
            let options = RewriteOptions::default().with_counter(Counter::new(&budget.profile));
            let _ = anthropic::rewrite(&mut request, &options);
            serde_json::json!({ "tools": request["tools"] })
        }
        Format::Openai | Format::OpenaiResponses => {
            let convert = if args.format == Format::Openai {
                openai::chat_tool_from_mcp
            } else {
                openai::responses_tool_from_mcp
            };
            let tools: Vec<Value> = tools
                .iter()
                .filter_map(Value::as_object)
                .map(convert)
                .collect();
            let mut request = serde_json::json!({ "tools": tools });
            let _ = openai::rewrite(&mut request, &RewriteOptions::default());
            request
        }
    };
    if args.pretty {
        serde_json::to_writer_pretty(&mut *out, &result)?;
    } else {
        serde_json::to_writer(&mut *out, &result)?;
    }
    writeln!(out)?;
    Ok(())
}
