//! `mcp-budget calibrate`: how Claude really counts a tool list, from one `count_tokens` answer.
//!
//! Claude's tokenizer is not public, so Claude profiles count cl100k × a calibration
//! (`docs/budget.md`, "Counting Claude"). A user with an Anthropic key can measure theirs:
//!
//! 1. `mcp-budget render --format anthropic --tools ... > tools.json` (the tools as sent; or
//!    give `calibrate` the same `--tools` instead of `--tools-file`);
//! 2. `mcp-budget calibrate --model M --tools-file tools.json --print-request > request.json`;
//! 3. POST `request.json` to Anthropic's `/v1/messages/count_tokens` and save the answer
//!    (`{"input_tokens": N}`) as `response.json`;
//! 4. `mcp-budget calibrate --model M --tools-file tools.json --count-tokens-response response.json`
//!    prints the `calibration` to put in `[budget]`.
//!
//! The tools' share of `N` is `N` minus the message (`--baseline-response`: the same request
//! without `tools`, else [`MESSAGE_TOKENS`]) minus the tool-use system prompt (346 tokens for
//! `tool_choice` auto/none, 313 for any/tool); the calibration is that share over the
//! cl100k count of the same tools as the `anthropic` rendering counts them.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use crate::profile::{ANTHROPIC_OVERHEAD_ANY, ANTHROPIC_OVERHEAD_AUTO};
use crate::tokens::{Counter, Counting, Rendering};

/// The one user message of the request `--print-request` writes.
pub const MESSAGE: &str = "x";
/// What `count_tokens` charges for [`MESSAGE`] (its text and the turn's framing), used when no
/// `--baseline-response` is given; an error of a few tokens on a tool list of thousands.
pub const MESSAGE_TOKENS: usize = 8;

/// `tool_choice` of the counted request (it decides the size of the tool-use system prompt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ToolChoice {
    /// `auto` or `none` (the default): 346 tokens of tool-use system prompt on Claude 4.x.
    #[default]
    Auto,
    /// `any` or a named tool: 313 tokens.
    Any,
}

/// Arguments of `mcp-budget calibrate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The Claude model the request was counted for (its profile names the BPE counted).
    #[arg(long)]
    pub model: String,
    /// The tools as sent: `render --format anthropic` output, a bare array, or a whole
    /// Messages request.
    #[arg(
        long = "tools-file",
        required_unless_present = "tools",
        conflicts_with = "tools"
    )]
    pub tools_file: Option<PathBuf>,
    /// Or saved tools/list results (as `render --tools`): the tools are rendered as
    /// `render --format anthropic --mode full --level off` prints them.
    #[arg(long = "tools", num_args = 1..)]
    pub tools: Vec<PathBuf>,
    /// Policy file for `--tools` (as `render --policy`).
    #[arg(long, requires = "tools")]
    pub policy: Option<PathBuf>,
    /// Print the `count_tokens` request to send (model, one message, the tools) and exit.
    #[arg(long)]
    pub print_request: bool,
    /// Anthropic's `count_tokens` answer for that request (`{"input_tokens": N}`).
    #[arg(
        long = "count-tokens-response",
        required_unless_present = "print_request"
    )]
    pub response: Option<PathBuf>,
    /// The answer for the same request without `tools`, to subtract the message exactly.
    #[arg(long = "baseline-response")]
    pub baseline: Option<PathBuf>,
    /// `tool_choice` of the counted request.
    #[arg(long = "tool-choice", value_enum, default_value_t = ToolChoice::Auto)]
    pub tool_choice: ToolChoice,
}

/// What one `count_tokens` answer says about a tool list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Tools in the list.
    pub tools: usize,
    /// Claude's tokens for the tools alone (answer − message − tool-use system prompt).
    pub claude_tokens: usize,
    /// The BPE count of the same tools, as the `anthropic` rendering counts them.
    pub bpe_tokens: usize,
    /// `claude_tokens / bpe_tokens`.
    pub calibration: f64,
}

/// Computes the calibration from the tools, Claude's `input_tokens`, the message's tokens and
/// the tool-use system prompt's.
///
/// # Errors
/// When the answer is smaller than its fixed parts, or the tools count nothing.
///
/// ```
/// use mcp_budget::cli::calibrate::compute;
/// use mcp_budget::tokens::Encoding;
///
/// let tools = vec![serde_json::json!({"name": "now", "description": "The time",
///     "input_schema": {"type": "object"}})];
/// let c = compute(&tools, Encoding::Cl100kBase, 8 + 346 + 30, 8, 346)?;
/// assert_eq!(c.claude_tokens, 30);
/// assert!((c.calibration - 30.0 / c.bpe_tokens as f64).abs() < 1e-9);
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn compute(
    tools: &[Value],
    encoding: crate::tokens::Encoding,
    input_tokens: usize,
    message_tokens: usize,
    overhead_tokens: usize,
) -> anyhow::Result<Calibration> {
    let counter = Counter::new(Counting {
        encoding,
        rendering: Rendering::Anthropic,
        calibration_permille: 1000,
        overhead_tokens: 0,
    });
    let mut bpe_tokens = 0;
    for (i, tool) in tools.iter().enumerate() {
        let Some(obj) = tool.as_object() else {
            bail!("tools[{i}] is not an object");
        };
        let name = obj.get("name").and_then(Value::as_str).unwrap_or_default();
        bpe_tokens += counter.count_tool(name, &as_mcp(obj));
    }
    if bpe_tokens == 0 {
        bail!("the tools file has no tools: give the output of `render --format anthropic`");
    }
    let fixed = message_tokens + overhead_tokens;
    let Some(claude_tokens) = input_tokens.checked_sub(fixed).filter(|&t| t > 0) else {
        bail!(
            "count_tokens answered {input_tokens}, not more than the message ({message_tokens}) \
             and the tool-use system prompt ({overhead_tokens}) alone: was the request sent \
             with these tools?"
        );
    };
    #[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
    let calibration = claude_tokens as f64 / bpe_tokens as f64;
    Ok(Calibration {
        tools: tools.len(),
        claude_tokens,
        bpe_tokens,
        calibration,
    })
}

/// An Anthropic tool as the MCP tool the `anthropic` rendering reads.
fn as_mcp(tool: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for key in ["name", "description"] {
        if let Some(v) = tool.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    if let Some(schema) = tool.get("input_schema") {
        out.insert("inputSchema".to_owned(), schema.clone());
    }
    out
}

/// Runs the command, writing to `out`.
///
/// # Errors
/// Unreadable files, a model that is not a Claude one, answers that do not fit the request.
pub fn run(args: &Args, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let profile =
        crate::profile::resolve(&args.model, &crate::profile::ProfileOverrides::default())
            .context("--model")?;
    if profile.rendering != Rendering::Anthropic {
        bail!(
            "{} is not a Claude model: only Claude counts are estimates to calibrate",
            args.model
        );
    }
    let tools = match &args.tools_file {
        Some(file) => read_tools(file)?,
        None => rendered_tools(args)?,
    };
    if args.print_request {
        let request = json!({
            "model": args.model,
            "messages": [{"role": "user", "content": MESSAGE}],
            "tools": tools,
        });
        serde_json::to_writer(&mut *out, &request)?;
        writeln!(out)?;
        return Ok(());
    }
    let Some(response) = &args.response else {
        bail!("give --count-tokens-response FILE (or --print-request)");
    };
    let input_tokens = read_input_tokens(response)?;
    let message_tokens = match &args.baseline {
        Some(path) => read_input_tokens(path)?,
        None => MESSAGE_TOKENS,
    };
    let overhead = match args.tool_choice {
        ToolChoice::Auto => ANTHROPIC_OVERHEAD_AUTO,
        ToolChoice::Any => ANTHROPIC_OVERHEAD_ANY,
    };
    let c = compute(
        &tools,
        profile.encoding,
        input_tokens,
        message_tokens,
        overhead,
    )?;
    if !(0.5..=3.0).contains(&c.calibration) {
        bail!(
            "the calibration would be {:.2}, outside the 0.5 to 3 a policy accepts: check that \
             the answer is for this tools file and this model",
            c.calibration
        );
    }
    #[allow(clippy::cast_precision_loss)]
    let built_in = profile.calibration_permille as f64 / 1000.0;
    writeln!(
        out,
        "{model}: count_tokens {input_tokens} = message {message_tokens} + tool-use system prompt \
         {overhead} + {tools} tools {claude}\n{encoding} counts the same tools {bpe}: calibration \
         {cal:.3} (built-in {built_in})\n\n[budget]\nmodel = \"{model}\"\ncalibration = {cal:.3}",
        model = args.model,
        tools = c.tools,
        claude = c.claude_tokens,
        encoding = profile.encoding.as_str(),
        bpe = c.bpe_tokens,
        cal = c.calibration,
    )?;
    Ok(())
}

/// The `--tools` catalog as `render --format anthropic --mode full --level off` prints it.
fn rendered_tools(args: &Args) -> anyhow::Result<Vec<Value>> {
    let render = super::render::Args {
        catalog: super::CatalogArgs {
            tools: args.tools.clone(),
            policy: args.policy.clone(),
            model: Some(args.model.clone()),
            live: super::live::LiveArgs::default(),
            rendering: None,
        },
        level: Some(crate::plan::LevelChoice::Fixed(crate::compress::Level::Off)),
        mode: Some(crate::plan::ModeChoice::Full),
        format: super::render::Format::Anthropic,
        pretty: false,
    };
    let mut out = Vec::new();
    super::render::run(&render, &mut out)?;
    match serde_json::from_slice::<Value>(&out)? {
        Value::Object(mut obj) => match obj.remove("tools") {
            Some(Value::Array(tools)) => Ok(tools),
            _ => bail!("render printed no tools"),
        },
        _ => bail!("render printed no tools"),
    }
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text =
        crate::files::read_text(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

fn read_tools(path: &Path) -> anyhow::Result<Vec<Value>> {
    match read_json(path)? {
        Value::Array(tools) => Ok(tools),
        Value::Object(mut obj) => match obj.remove("tools") {
            Some(Value::Array(tools)) => Ok(tools),
            _ => bail!("{} has no \"tools\" array", path.display()),
        },
        _ => bail!("{} is not a tools array or object", path.display()),
    }
}

fn read_input_tokens(path: &Path) -> anyhow::Result<usize> {
    let value = read_json(path)?;
    let n = value
        .get("input_tokens")
        .or_else(|| value.pointer("/usage/input_tokens"))
        .and_then(Value::as_u64)
        .with_context(|| {
            format!(
                "{} has no input_tokens (expected count_tokens' answer, {{\"input_tokens\": N}})",
                path.display()
            )
        })?;
    usize::try_from(n).context("input_tokens is too large")
}
