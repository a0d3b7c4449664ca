//! `mcp-budget search`: rank saved tools for a query, as `search_tools` would.
//!
//! With `--query`, prints a table (or JSON with `--format json`). With `--queries FILE.jsonl`,
//! reads one JSON object per line with `id` and `query` and prints one JSON line per input line,
//! `{"id": ..., "results": ["server/tool", ...]}`, for evaluation scripts; with `--report` too,
//! the lines are labelled (`gold`, `source`: [`crate::search::eval`]) and it prints hit@1/5/10
//! and MRR@10 per source and the queries missed at 5, so a user can evaluate search on their own
//! catalog and queries.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Value, json};

use crate::catalog::{CatalogTool, load_saved};
use crate::search::eval::{self, Labelled};
use crate::search::{Ranker, SearchIndex};

/// Output format of a single `--query`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable table.
    #[default]
    Table,
    /// One JSON object.
    Json,
}

/// Ranking method (hidden: for comparing against the baseline).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RankerArg {
    /// Fielded BM25F with stemming and vocabulary expansion.
    #[default]
    Fielded,
    /// Plain BM25 over name + description + parameters.
    Bm25,
}

/// Arguments of `mcp-budget search`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Saved tools/list results (a file's stem is the server id), or directories of them.
    #[arg(long = "tools", required = true, num_args = 1..)]
    pub tools: Vec<PathBuf>,
    /// What to look for, in plain words.
    #[arg(long, conflicts_with = "queries", required_unless_present = "queries")]
    pub query: Option<String>,
    /// A JSON-lines file of `{"id": ..., "query": "..."}` objects; prints one JSON line each.
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// With `--queries` of labelled lines (`gold`: the `server/tool` ids that answer each,
    /// optional `source` and `gold_alternatives`): print hit@1/5/10 and MRR@10 per source and
    /// the queries missed at 5 instead of the rankings (`--format json`: one JSON object).
    #[arg(long, requires = "queries", conflicts_with = "query")]
    pub report: bool,
    /// A usage file (`[budget] usage_file`: `{"server/tool": calls}`): the tools it counts rank
    /// higher when scores are close, as with `[discover] usage_prior`.
    #[arg(long)]
    pub usage: Option<PathBuf>,
    /// A vocabulary file (`[discover] vocabulary_file`: `{"word": ["equivalent", …]}`): the
    /// words users say for the words the tools use.
    #[arg(long)]
    pub vocabulary: Option<PathBuf>,
    /// The usage prior's weight with `--usage` (0..=1: the most called tool's score × 1.2 at
    /// 0.2).
    #[arg(long, default_value_t = crate::policy::DEFAULT_USAGE_PRIOR, requires = "usage")]
    pub usage_prior: f32,
    /// Most results per query.
    #[arg(long, default_value_t = 5)]
    pub top_k: usize,
    /// Output format for `--query` and `--report`.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Ranking method.
    #[arg(long, value_enum, default_value_t = RankerArg::Fielded, hide = true)]
    pub ranker: RankerArg,
    /// With `--query`: show what each query term contributes to each result.
    #[arg(long, hide = true)]
    pub explain: bool,
    /// A sentence-transformers model directory (`config.json`, `tokenizer.json`,
    /// `model.safetensors`; e.g. all-MiniLM-L6-v2): rank with the semantic reranker, its
    /// cosines fused with the lexical scores, as `search_tools` does with `[discover]
    /// embedding_model` (builds with the `semantic` feature).
    #[arg(long, value_name = "DIR")]
    pub embedding_model: Option<PathBuf>,
    /// Where the tools' vectors are cached between runs (default: `$XDG_CACHE_HOME` or
    /// `~/.cache`, then `mcp-budget/embeddings`).
    #[arg(long, value_name = "DIR", requires = "embedding_model")]
    pub embedding_cache_dir: Option<PathBuf>,
    /// Fusion rule (for tuning): `linear` or `rrf`.
    #[arg(long, hide = true, requires = "embedding_model")]
    pub fusion_rule: Option<String>,
    /// Weight of the dense side (for tuning).
    #[arg(long, hide = true, requires = "embedding_model")]
    pub fusion_weight: Option<f32>,
    /// Least cosine of a tool without lexical match (for tuning).
    #[arg(long, hide = true, requires = "embedding_model")]
    pub fusion_floor: Option<f32>,
    /// The `k` of `rrf` (for tuning).
    #[arg(long, hide = true, requires = "embedding_model")]
    pub fusion_k: Option<f32>,
    /// Lexical candidates reordered (for tuning; 0: all).
    #[arg(long, hide = true, requires = "embedding_model")]
    pub fusion_pool: Option<usize>,
}

/// The calls of each of `tools` in the usage file at `path`.
fn read_usage(path: &Path, tools: &[CatalogTool]) -> anyhow::Result<Vec<u64>> {
    let text =
        crate::files::read_text(path).with_context(|| format!("cannot read {}", path.display()))?;
    let counts = crate::plan::parse_usage(&text).with_context(|| format!("{}", path.display()))?;
    Ok(crate::plan::usage_of(tools, &counts))
}

/// Runs the command, writing to `out`.
///
/// # Errors
/// Unreadable or malformed tool files or query files, and write failures.
pub fn run(args: &Args, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let tools = load_saved(&args.tools)?;
    let ranker = match args.ranker {
        RankerArg::Fielded => Ranker::Fielded,
        RankerArg::Bm25 => Ranker::Bm25,
    };
    let mut index = SearchIndex::build_with(&tools, ranker);
    if let Some(path) = &args.usage {
        index.set_usage(&read_usage(path, &tools)?, args.usage_prior);
    }
    if let Some(path) = &args.vocabulary {
        index.add_vocabulary(&crate::policy::read_vocabulary(path).map_err(anyhow::Error::msg)?);
    }
    let ranking = Ranking::new(index, &tools, args)?;
    let index = &ranking.index;
    if let (Some(path), true) = (&args.queries, args.report) {
        return report(&ranking, &tools, path, args.format, out);
    }
    if let Some(path) = &args.queries {
        return rankings(&ranking, &tools, path, args.top_k, out);
    }
    let query = args.query.as_deref().unwrap_or_default();
    let hits = ranking.search(query, args.top_k);
    match args.format {
        Format::Json => {
            let results: Vec<Value> = hits
                .iter()
                .map(|hit| {
                    let tool = &tools[hit.index];
                    json!({"id": tool.id(), "score": hit.score, "description": first_line(tool)})
                })
                .collect();
            writeln!(out, "{}", json!({"query": query, "results": results}))?;
        }
        Format::Table => {
            if hits.is_empty() {
                writeln!(out, "no tool matches {query:?}")?;
            }
            let width = hits
                .iter()
                .map(|h| tools[h.index].id().len())
                .max()
                .unwrap_or(0);
            for (rank, hit) in hits.iter().enumerate() {
                let tool = &tools[hit.index];
                writeln!(
                    out,
                    "{:>2}  {:>6.2}  {:<width$}  {}",
                    rank + 1,
                    hit.score,
                    tool.id(),
                    first_line(tool)
                )?;
                if args.explain {
                    let parts: Vec<String> = index
                        .explain(query, hit.index)
                        .into_iter()
                        .filter(|(_, score)| *score > 0.0)
                        .map(|(term, score)| format!("{term}={score:.2}"))
                        .collect();
                    writeln!(out, "              {}", parts.join(" "))?;
                }
            }
        }
    }
    Ok(())
}

/// `--queries FILE` without `--report`: one JSON line of results per query line.
fn rankings(
    ranking: &Ranking,
    tools: &[CatalogTool],
    path: &Path,
    top_k: usize,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let text =
        crate::files::read_text(path).with_context(|| format!("cannot read {}", path.display()))?;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let where_ = || format!("{}:{}", path.display(), n + 1);
        let value: Value = serde_json::from_str(line).with_context(where_)?;
        let query = value
            .get("query")
            .and_then(Value::as_str)
            .with_context(|| format!("{}: no string \"query\"", where_()))?;
        let results: Vec<String> = ranking
            .search(query, top_k)
            .iter()
            .map(|hit| tools[hit.index].id())
            .collect();
        let id = value.get("id").cloned().unwrap_or(Value::Null);
        writeln!(out, "{}", json!({"id": id, "results": results}))?;
    }
    Ok(())
}

/// `--queries FILE --report`: every labelled line ranked (top 10) and scored.
fn report(
    ranking: &Ranking,
    tools: &[CatalogTool],
    path: &std::path::Path,
    format: Format,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let text =
        crate::files::read_text(path).with_context(|| format!("cannot read {}", path.display()))?;
    let rows =
        Labelled::parse_lines(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let top = eval::CUTOFFS[eval::CUTOFFS.len() - 1];
    let ranked: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let hits = ranking.search(&row.query, top);
            hits.iter().map(|hit| tools[hit.index].id()).collect()
        })
        .collect();
    let report = eval::evaluate(&rows, &ranked);
    match format {
        Format::Json => {
            let mut json = report.json();
            if let (Some(object), Some(reranker)) = (json.as_object_mut(), &ranking.about) {
                object.insert("reranker".into(), reranker.clone());
            }
            writeln!(out, "{json}")?;
        }
        Format::Table => {
            if let Some(about) = &ranking.about {
                writeln!(out, "reranker: {about}")?;
            }
            write!(
                out,
                "{} queries, {} tools\n\n{}",
                rows.len(),
                tools.len(),
                report.table()
            )?;
        }
    }
    Ok(())
}

/// The reranker of `model` with `tools` embedded now (what is in the cache at `cache_dir`, or
/// the default cache, is read; what is not is computed and written there), and what it cost:
/// `model`, `load_secs`, `tools`, `embedded`, `from_cache`, `catalog_secs`, `cache_dir`.
#[cfg(feature = "semantic")]
pub(crate) fn embed_catalog(
    model: &std::path::Path,
    cache_dir: Option<&std::path::Path>,
    tools: &[CatalogTool],
) -> anyhow::Result<(
    crate::semantic::Reranker,
    crate::semantic::CatalogTexts,
    Value,
)> {
    use crate::semantic::{CatalogTexts, Reranker, cache};
    let cache_dir = cache_dir
        .map(std::path::Path::to_path_buf)
        .or_else(cache::default_dir);
    let reranker = Reranker::new(model, cache_dir.as_deref());
    let started = std::time::Instant::now();
    reranker.embedder().map_err(anyhow::Error::msg)?;
    let load_secs = started.elapsed().as_secs_f64();
    let texts = CatalogTexts::of(tools);
    let started = std::time::Instant::now();
    let embedded = reranker.embed_now(&texts).map_err(anyhow::Error::msg)?;
    let about = json!({
        "model": model.display().to_string(),
        "load_secs": load_secs,
        "tools": texts.len(),
        "embedded": embedded,
        "from_cache": texts.len() - embedded,
        "catalog_secs": started.elapsed().as_secs_f64(),
        "cache_dir": cache_dir.map(|d| d.display().to_string()),
    });
    Ok((reranker, texts, about))
}

/// The lexical index, and the reranker when `--embedding-model` is given.
struct Ranking {
    index: SearchIndex,
    #[cfg(feature = "semantic")]
    dense: Option<(crate::semantic::Reranker, crate::semantic::CatalogTexts)>,
    #[cfg_attr(not(feature = "semantic"), allow(dead_code))]
    fusion: crate::search::Fusion,
    /// What the reranker cost: the model, how many tools were embedded and in how long.
    about: Option<Value>,
}

impl Ranking {
    #[cfg(feature = "semantic")]
    fn new(index: SearchIndex, tools: &[CatalogTool], args: &Args) -> anyhow::Result<Self> {
        let fusion = fusion_of(args)?;
        let Some(model) = &args.embedding_model else {
            return Ok(Self {
                index,
                dense: None,
                fusion,
                about: None,
            });
        };
        let (reranker, texts, mut about) =
            embed_catalog(model, args.embedding_cache_dir.as_deref(), tools)?;
        about["fusion"] = format!("{fusion:?}").into();
        Ok(Self {
            index,
            dense: Some((reranker, texts)),
            fusion,
            about: Some(about),
        })
    }

    #[cfg(not(feature = "semantic"))]
    fn new(index: SearchIndex, _tools: &[CatalogTool], args: &Args) -> anyhow::Result<Self> {
        if args.embedding_model.is_some() {
            anyhow::bail!("--embedding-model needs a build with the `semantic` feature");
        }
        Ok(Self {
            index,
            fusion: fusion_of(args)?,
            about: None,
        })
    }

    /// The best `limit` tools for `query`, fused with the query's cosines when reranking.
    fn search(&self, query: &str, limit: usize) -> Vec<crate::search::Hit> {
        #[cfg(feature = "semantic")]
        if let Some((reranker, texts)) = &self.dense {
            let dense = reranker.scores(query, texts);
            return self
                .index
                .search_fused_with(query, limit, dense.as_deref(), self.fusion);
        }
        self.index.search(query, limit)
    }
}

/// The default fusion, with the hidden tuning flags applied.
fn fusion_of(args: &Args) -> anyhow::Result<crate::search::Fusion> {
    use crate::search::{Fusion, FusionRule};
    let mut fusion = Fusion::default();
    match args.fusion_rule.as_deref() {
        None => {}
        Some("linear") => fusion.rule = FusionRule::Linear,
        Some("cosine") => fusion.rule = FusionRule::Cosine,
        Some("rrf") => {
            fusion.rule = FusionRule::Reciprocal {
                k: args.fusion_k.unwrap_or(60.0),
            }
        }
        Some(other) => anyhow::bail!("--fusion-rule {other}: linear, cosine or rrf"),
    }
    if let Some(weight) = args.fusion_weight {
        fusion.weight = weight;
    }
    if let Some(floor) = args.fusion_floor {
        fusion.floor = floor;
    }
    if let Some(pool) = args.fusion_pool {
        fusion.pool = pool;
    }
    Ok(fusion)
}

fn first_line(tool: &CatalogTool) -> String {
    crate::discover::one_line(tool.description(), 100)
}
