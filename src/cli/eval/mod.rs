//! `mcp-budget eval`: a labelled request set through every exposure with a real LLM — the
//! same requests, each exposure exactly what the gateway lists, the model's calls run through
//! the real layer stack down to simulated upstreams — and tokens, cost and tool-call accuracy
//! side by side (`docs/eval.md`).
//!
//! Pure parts (call parsing, scoring, the flat lists, the exposures) are [`crate::eval`]; this
//! module does the I/O: the endpoint ([`llm`]), the gateway ([`gateway`]), the loop
//! ([`episode`]) and the files ([`report`]).

pub mod episode;
pub mod gateway;
pub mod llm;
pub mod report;

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::catalog::{CatalogTool, load_saved};
use crate::eval::exposure::{self, Exposure};
use crate::eval::flat::{self, Rng};
use crate::eval::score::{Episode, Price, summarize};
use crate::policy::Policy;
use crate::search::eval::Labelled;
use crate::tokens::{Counter, Counting, Encoding, Rendering};

use episode::Setting;
use gateway::Rig;
use llm::Llm;

/// `mcp-budget eval`'s arguments.
#[derive(Debug, clap::Args)]
#[allow(clippy::struct_field_names, reason = "flag names")]
pub struct Args {
    /// Saved tools/list results (a file's stem is the server id), or directories of them.
    #[arg(long = "tools", required_unless_present = "policy", num_args = 1..)]
    pub tools: Vec<PathBuf>,
    /// Policy file: its `[budget]` and `[discover]` settings (what `plan` lists), and without
    /// `--tools` its upstreams, started, listed and stopped (their calls are never sent to
    /// them: every call goes to a simulated server).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Labelled requests, one JSON object per line: `query`, `gold` (`server/tool` ids),
    /// optional `gold_alternatives`, `id`, `source`.
    #[arg(long)]
    pub queries: PathBuf,
    /// An OpenAI-compatible endpoint: a base URL (`http://127.0.0.1:8080`) or the full
    /// `/v1/chat/completions` URL.
    #[arg(long)]
    pub llm: String,
    /// The model name sent to the endpoint (and the budget profile of `plan` when it is a
    /// built-in one).
    #[arg(long, default_value = "default")]
    pub model: String,
    /// The environment variable holding the endpoint's API key (sent as a bearer token).
    #[arg(long, value_name = "NAME")]
    pub api_key_env: Option<String>,
    /// Comma-separated exposures: flat-N, flat-N:LEVEL, full, full:LEVEL, plan, progressive,
    /// code, preselect-K (`levels` = flat-20 at each level).
    #[arg(long, default_value = exposure::DEFAULT)]
    pub exposures: String,
    /// Run at most this many requests: a sample drawn (seeded) from each `source` in
    /// proportion.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Seeds the sample, the flat lists and the endpoint's sampling.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Prices per million tokens, `IN,OUT`, for the cost column (default 0,0).
    #[arg(long, value_name = "IN,OUT", value_parser = parse_price)]
    pub price: Option<PriceArg>,
    /// Where `episodes.jsonl`, `summary.json` and `report.html` go.
    #[arg(long, default_value = "eval-out")]
    pub out: PathBuf,
    /// Model turns per request at most.
    #[arg(long, default_value_t = 4)]
    pub max_turns: usize,
    /// Completion tokens per turn at most.
    #[arg(long, default_value_t = 512)]
    pub max_tokens: u32,
    /// The model's context window (default: what the endpoint says, llama.cpp's `/props`):
    /// an exposure whose tool block does not fit is skipped, saying so.
    #[arg(long)]
    pub context_window: Option<usize>,
    /// Seconds one completion may take.
    #[arg(long, default_value_t = 900)]
    pub request_timeout_secs: u64,
    /// Upstreams started from the policy (no `--tools`): how long they get to be ready.
    #[command(flatten)]
    pub live: super::live::LiveArgs,
}

/// `--price IN,OUT`.
#[derive(Debug, Clone, Copy)]
pub struct PriceArg(pub Price);

fn parse_price(text: &str) -> Result<PriceArg, String> {
    let parse = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|p| p.is_finite() && *p >= 0.0)
    };
    match text.split_once(',').map(|(i, o)| (parse(i), parse(o))) {
        Some((Some(input), Some(output))) => Ok(PriceArg(Price { input, output })),
        _ => Err(format!(
            "{text:?}: expected IN,OUT (prices per million tokens, e.g. 3,15)"
        )),
    }
}

/// Episodes in a row that may fail at the endpoint before the run stops.
const MAX_ERRORS_IN_A_ROW: usize = 3;

/// Runs the evaluation; the summary table goes to `out`, progress to stderr.
///
/// # Errors
/// Unreadable inputs, a queries file naming unknown tools, an endpoint that does not answer
/// (the files of what ran are still written), an unwritable `--out`.
pub fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let exposures = Exposure::parse_list(&args.exposures).map_err(anyhow::Error::msg)?;
    let policy = policy_table(args)?;
    let tools = catalog(args)?;
    let rows = queries(args, &tools)?;
    let api_key = match &args.api_key_env {
        Some(name) => Some(std::env::var(name).with_context(|| {
            format!("--api-key-env {name}: the variable is not set (or not UTF-8)")
        })?),
        None => None,
    };
    let timeout = Duration::from_secs(args.request_timeout_secs);
    let llm = Llm::new(
        &args.llm,
        api_key.as_deref(),
        &args.model,
        args.max_tokens,
        args.seed,
        timeout,
    )
    .map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let plan = Plan {
        args,
        exposures,
        policy,
        tools,
        rows,
        llm,
    };
    let result = runtime.block_on(plan.run());
    runtime.shutdown_timeout(Duration::from_millis(200));
    let (summaries, failure) = result?;
    report::write(&args.out, &summaries).context("writing the report")?;
    out.write_all(report::table(&summaries).as_bytes())?;
    writeln!(out, "files: {}", args.out.display())?;
    match failure {
        Some(why) => bail!(
            "{why} (the episodes run so far are in {})",
            args.out.display()
        ),
        None => Ok(()),
    }
}

/// The policy's table (its upstreams dropped) with `plan`'s budget for the model filled in.
fn policy_table(args: &Args) -> anyhow::Result<toml::Table> {
    let mut table = match &args.policy {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Policy::from_toml_str(&text, &path.display().to_string())
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            toml::from_str::<toml::Table>(&text)?
        }
        None => toml::Table::new(),
    };
    table.remove("upstream");
    table.remove("downstream");
    table.entry("version").or_insert(1.into());
    Ok(table)
}

/// `plan`'s budget: the policy's; else the model's built-in profile (with the context window
/// the endpoint reports, when it does: a local runtime runs with its own); else a local
/// model's, from its context window (o200k counts, the `openai` rendering, 20 tools at most).
fn budget_for_model(table: &mut toml::Table, model: &str, window: Option<usize>) {
    let budget = exposure::section(table, "budget");
    if budget.contains_key("model") {
        return;
    }
    let known = crate::profile::builtin(model).is_some();
    budget.insert("model".into(), model.into());
    if known {
        if let Some(window) = window.and_then(|w| i64::try_from(w).ok()) {
            budget.entry("context_window").or_insert(window.into());
        }
        return;
    }
    let window = i64::try_from(window.unwrap_or(32_768)).unwrap_or(i64::MAX);
    budget.entry("context_window").or_insert(window.into());
    budget.entry("tokenizer").or_insert("o200k_base".into());
    budget.entry("rendering").or_insert("openai".into());
    budget.entry("max_tools").or_insert(20.into());
}

/// The tools: saved lists, or the policy's upstreams listed live.
fn catalog(args: &Args) -> anyhow::Result<Vec<CatalogTool>> {
    if !args.tools.is_empty() {
        return load_saved(&args.tools).context("loading --tools");
    }
    let path = args
        .policy
        .as_ref()
        .context("--tools or --policy is needed")?;
    let policy = Policy::load(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let live = super::live::snapshot(&policy, &args.live)?;
    Ok(live.catalog.tools().to_vec())
}

/// The labelled requests (a seeded, per-source sample under `--limit`); every gold id must be
/// a tool of the catalog.
fn queries(args: &Args, tools: &[CatalogTool]) -> anyhow::Result<Vec<Labelled>> {
    let path = &args.queries;
    let text =
        crate::files::read_text(path).with_context(|| format!("cannot read {}", path.display()))?;
    let rows =
        Labelled::parse_lines(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if rows.is_empty() {
        bail!("{}: no labelled request", path.display());
    }
    let known: BTreeSet<String> = tools.iter().map(CatalogTool::id).collect();
    let unknown: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            r.gold
                .iter()
                .filter(|g| !known.contains(*g))
                .map(|g| format!("{} ({g})", r.id))
        })
        .collect();
    if !unknown.is_empty() {
        bail!(
            "{}: {} gold id(s) name no tool of the catalog, e.g. {}; give the servers' saved \
             lists with --tools (a file's stem is the server id)",
            path.display(),
            unknown.len(),
            unknown
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(match args.limit {
        Some(limit) if limit < rows.len() => sample(rows, limit, args.seed),
        _ => rows,
    })
}

/// `limit` rows drawn (seeded) from each source in proportion (largest remainders), kept in
/// file order.
fn sample(rows: Vec<Labelled>, limit: usize, seed: u64) -> Vec<Labelled> {
    let mut sources: Vec<&str> = rows.iter().map(|r| r.source.as_str()).collect();
    sources.sort_unstable();
    sources.dedup();
    let total = rows.len();
    let mut shares: Vec<(usize, usize, &str)> = sources
        .iter()
        .map(|s| {
            let n = rows.iter().filter(|r| r.source == *s).count();
            (n * limit / total, n * limit % total, *s)
        })
        .collect();
    let mut left = limit - shares.iter().map(|s| s.0).sum::<usize>();
    let mut by_remainder: Vec<usize> = (0..shares.len()).collect();
    by_remainder.sort_by_key(|&i| std::cmp::Reverse(shares[i].1));
    for i in by_remainder {
        if left == 0 {
            break;
        }
        shares[i].0 += 1;
        left -= 1;
    }
    let mut rng = Rng::new(seed);
    let mut keep = vec![false; total];
    for (want, _, source) in shares {
        let mut of: Vec<usize> = (0..total).filter(|&i| rows[i].source == source).collect();
        rng.shuffle(&mut of);
        of.into_iter().take(want).for_each(|i| keep[i] = true);
    }
    rows.into_iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(r, _)| r)
        .collect()
}

/// Everything one run needs.
struct Plan<'a> {
    args: &'a Args,
    exposures: Vec<Exposure>,
    policy: toml::Table,
    tools: Vec<CatalogTool>,
    rows: Vec<Labelled>,
    llm: Llm,
}

/// One gateway's share of an exposure: the tools it lists and the requests it serves.
struct Part {
    group: Option<usize>,
    tools: Vec<CatalogTool>,
    queries: Vec<usize>,
}

/// The summaries, and why the run stopped early (if it did).
type Outcome = (Vec<Value>, Option<String>);

impl Plan<'_> {
    async fn run(mut self) -> anyhow::Result<Outcome> {
        let probe = [serde_json::json!({"role": "user", "content": "Say OK."})];
        self.llm
            .chat(&probe, &[])
            .await
            .map_err(|e| anyhow::anyhow!("the endpoint does not answer: {e}"))?;
        let window = match self.args.context_window {
            Some(w) => Some(w),
            None => self.llm.context_window().await,
        };
        budget_for_model(&mut self.policy, &self.args.model, window);
        let file = File::create(self.args.out.join("episodes.jsonl"))?;
        let mut sink = Sink {
            file: BufWriter::new(file),
            in_a_row: 0,
            total: 0,
        };
        let mut summaries = Vec::new();
        let price = self.args.price.map_or(Price::default(), |p| p.0);
        let mut failure = None;
        for exposure in &self.exposures {
            let mut episodes = Vec::new();
            let stopped = self
                .exposure(*exposure, window, &mut sink, &mut episodes)
                .await?;
            let refs: Vec<&Episode> = episodes.iter().collect();
            let mut summary = summarize(&exposure.name(), &refs, price);
            if let Some(Stop::Skipped(why)) = &stopped {
                summary["skipped"] = Value::from(why.as_str());
            }
            summaries.push(summary);
            if let Some(Stop::Failed(why) | Stop::Interrupted(why)) = stopped {
                failure = Some(why);
                break;
            }
        }
        Ok((summaries, failure))
    }

    /// The parts of `exposure`: one per flat group, else the whole catalog.
    fn parts(&self, exposure: Exposure) -> Vec<Part> {
        let all: Vec<usize> = (0..self.rows.len()).collect();
        let Some(n) = exposure.flat_size() else {
            return vec![Part {
                group: None,
                tools: self.tools.clone(),
                queries: all,
            }];
        };
        let ids: Vec<String> = self.tools.iter().map(CatalogTool::id).collect();
        flat::groups(&self.rows, &ids, n, self.args.seed)
            .into_iter()
            .enumerate()
            .map(|(g, group)| {
                let listed: BTreeSet<&String> = group.tools.iter().collect();
                let tools = self
                    .tools
                    .iter()
                    .filter(|t| listed.contains(&t.id()))
                    .cloned()
                    .collect();
                Part {
                    group: Some(g),
                    tools,
                    queries: group.queries,
                }
            })
            .collect()
    }

    async fn exposure(
        &self,
        exposure: Exposure,
        window: Option<usize>,
        sink: &mut Sink,
        episodes: &mut Vec<Episode>,
    ) -> anyhow::Result<Option<Stop>> {
        let mut table = self.policy.clone();
        exposure.apply(&mut table);
        let policy = Policy::from_toml_str(&toml::to_string(&table)?, "eval policy")
            .map_err(|e| anyhow::anyhow!("the policy of exposure {exposure}: {e}"))?;
        let counter = Counter::new(Counting {
            encoding: Encoding::O200kBase,
            rendering: Rendering::OpenAi,
            calibration_permille: 1000,
            overhead_tokens: 0,
        });
        for part in self.parts(exposure) {
            let gateway = Rig::start(policy.clone(), &part.tools)
                .await
                .map_err(anyhow::Error::msg)?;
            let setting = Setting {
                exposure: exposure.name(),
                group: part.group,
                meta: &policy.discover.names,
                max_turns: self.args.max_turns,
                counter: &counter,
                preselect: exposure.preselect_size(),
            };
            let stop = self
                .part(&gateway, &setting, &part, window, sink, episodes)
                .await?;
            gateway.stop().await;
            if stop.is_some() {
                return Ok(stop);
            }
        }
        Ok(None)
    }

    async fn part(
        &self,
        gateway: &Rig,
        setting: &Setting<'_>,
        part: &Part,
        window: Option<usize>,
        sink: &mut Sink,
        episodes: &mut Vec<Episode>,
    ) -> anyhow::Result<Option<Stop>> {
        let mut recall = gateway.host("eval-recall").await;
        let listed = episode::functions(&recall.list_tools().await);
        let tokens = episode::block_tokens(setting.counter, &listed);
        // `preselect-K` lists K of these per request, not all of them.
        if let Some(window) = window
            && tokens > window
            && setting.preselect.is_none()
        {
            return Ok(Some(Stop::Skipped(format!(
                "its {} tools are ~{tokens} tokens, over the model's {window}-token context",
                listed.len()
            ))));
        }
        for &q in &part.queries {
            let row = &self.rows[q];
            let n = sink.total + 1;
            let run = episode::run(gateway, &mut recall, &self.llm, row, setting, n);
            let episode = tokio::select! {
                episode = run => episode,
                _ = tokio::signal::ctrl_c() => {
                    return Ok(Some(Stop::Interrupted("interrupted".to_owned())));
                }
            };
            let stop = sink.add(&episode, episodes, self.rows.len())?;
            episodes.push(episode);
            if stop.is_some() {
                return Ok(stop);
            }
        }
        Ok(None)
    }
}

/// Why an exposure stopped before its last request.
enum Stop {
    /// It does not fit the model's context.
    Skipped(String),
    /// The endpoint failed too often: the run stops.
    Failed(String),
    /// Ctrl-C.
    Interrupted(String),
}

/// Where episodes go as they finish.
struct Sink {
    file: BufWriter<File>,
    in_a_row: usize,
    total: usize,
}

impl Sink {
    /// Writes `episode` and a progress line; a stop after too many endpoint failures in a row.
    fn add(
        &mut self,
        episode: &Episode,
        before: &[Episode],
        of: usize,
    ) -> anyhow::Result<Option<Stop>> {
        serde_json::to_writer(&mut self.file, episode)?;
        self.file.write_all(b"\n")?;
        self.file.flush()?;
        self.total += 1;
        let done = before.len() + 1;
        let right = before.iter().filter(|e| e.strict).count() + usize::from(episode.strict);
        let _ = writeln!(
            std::io::stderr().lock(),
            "{}",
            report::progress(episode, done, of, right)
        );
        self.in_a_row = if episode.error.is_some() {
            self.in_a_row + 1
        } else {
            0
        };
        Ok((self.in_a_row >= MAX_ERRORS_IN_A_ROW).then(|| {
            Stop::Failed(format!(
                "the endpoint failed {MAX_ERRORS_IN_A_ROW} times in a row, last: {}",
                episode.error.as_deref().unwrap_or("?")
            ))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: usize, source: &str) -> Labelled {
        let line = serde_json::json!({"id": format!("q{i}"), "source": source, "query": "q", "gold": ["s/t"]});
        Labelled::parse(&line.to_string(), i + 1).unwrap()
    }

    #[test]
    fn a_sample_keeps_each_source_in_proportion_and_file_order() {
        let rows: Vec<Labelled> = (0..100)
            .map(|i| row(i, if i < 60 { "a" } else { "b" }))
            .collect();
        let picked = sample(rows, 10, 3);
        assert_eq!(picked.len(), 10);
        assert_eq!(picked.iter().filter(|r| r.source == "a").count(), 6);
        let ids: Vec<usize> = picked.iter().map(|r| r.id[1..].parse().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn prices_parse_or_say_the_shape() {
        let p = parse_price("3,15").unwrap().0;
        assert_eq!((p.input, p.output), (3.0, 15.0));
        assert!(parse_price("3").unwrap_err().contains("IN,OUT"));
        assert!(parse_price("-1,2").is_err());
    }

    #[test]
    fn a_local_model_gets_a_budget_of_its_window() {
        let mut table: toml::Table = toml::from_str("version = 1").unwrap();
        budget_for_model(&mut table, "my-local-model", Some(8192));
        assert_eq!(table["budget"]["context_window"].as_integer(), Some(8192));
        assert_eq!(table["budget"]["max_tools"].as_integer(), Some(20));
        Policy::from_toml_str(&toml::to_string(&table).unwrap(), "t").unwrap();
        // A local family with a profile keeps it, with the window the server runs with.
        let mut qwen: toml::Table = toml::from_str("version = 1").unwrap();
        budget_for_model(&mut qwen, "qwen2.5-coder-0.5b", Some(8192));
        assert_eq!(qwen["budget"]["context_window"].as_integer(), Some(8192));
        assert!(qwen["budget"].get("max_tools").is_none());
        Policy::from_toml_str(&toml::to_string(&qwen).unwrap(), "t").unwrap();
        let mut known = toml::Table::new();
        budget_for_model(&mut known, "gpt-4o", None);
        assert_eq!(known["budget"].as_table().unwrap().len(), 1);
    }
}
