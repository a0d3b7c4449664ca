//! `mcp-budget inspect`: per server and per tool tokens at every level for the model's
//! rendering, the budget, the plan and the savings — of saved tool lists (`--tools`), or of the
//! policy's own upstreams, started and stopped again ([`super::live`]), with how each started.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::catalog::Catalog;
use crate::compress::Level;
use crate::gateway::{UpstreamSummary, summary_lines};
use crate::listing::{Listing, list_tools};
use crate::pin;
use crate::plan::{Plan, Rules};
use crate::policy::Policy;
use crate::profile::ProfileOverrides;
use crate::tokens::{Counter, Measured};

/// Arguments of `mcp-budget inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The catalog, the policy and the host.
    #[command(flatten)]
    pub catalog: super::CatalogArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A sentence-transformers model directory (as `[discover] embedding_model`): every tool
    /// of the catalog is embedded now, and the report says what the semantic reranker costs
    /// (model load, catalog embedding, how many vectors came from the cache). The vectors go
    /// to the cache `serve` reads, so its start after this is a cache hit (builds with the
    /// `semantic` feature).
    #[arg(long, value_name = "DIR")]
    pub embedding_model: Option<PathBuf>,
    /// Where the tools' vectors are cached (as `[discover] embedding_cache_dir`; default:
    /// `$XDG_CACHE_HOME` or `~/.cache`, then `mcp-budget/embeddings`).
    #[arg(long, value_name = "DIR", requires = "embedding_model")]
    pub embedding_cache_dir: Option<PathBuf>,
}

/// Output format of `inspect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text.
    Table,
    /// One JSON document.
    Json,
    /// One self-contained HTML page with an inline SVG chart.
    Html,
}

/// Everything the offline commands share: the policy (with the host overrides), the catalog
/// as `serve` on that policy would build it, and the planner's rules.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) policy: Policy,
    pub(crate) catalog: Catalog,
    pub(crate) rules: Rules,
    pub(crate) counter: Counter,
    /// How each upstream started, when the catalog is live (no `--tools`).
    pub(crate) upstreams: Option<Vec<UpstreamSummary>>,
}

impl Prepared {
    /// The `tools/list` the budget layer would answer: the one listing function `serve` uses.
    pub(crate) fn listing(&self) -> Listing {
        let volatile = crate::layer::budget::volatile_servers(&self.policy);
        list_tools(&self.catalog, &self.rules, &self.counter, &volatile)
    }
}

/// Loads the policy and the catalog.
pub(crate) fn prepare(args: &super::CatalogArgs) -> anyhow::Result<Prepared> {
    let (tools, model, rendering) = (&args.tools, args.model.as_deref(), args.rendering);
    let mut policy = match &args.policy {
        Some(path) => Policy::load(path)?,
        None => Policy::default(),
    };
    if let Some(model) = model {
        policy.budget = policy.budget.with_model(model)?;
    }
    if let Some(rendering) = rendering {
        policy.budget = policy.budget.with_overrides(ProfileOverrides {
            rendering: Some(rendering),
            ..policy.budget.overrides.clone()
        })?;
    }
    // Saved lists, or (none given) the catalog the policy's upstreams publish when started.
    let (catalog, upstreams) = if tools.is_empty() {
        let live = super::live::snapshot(&policy, &args.live)?;
        (live.catalog, Some(live.upstreams))
    } else {
        let names: Vec<String> = policy.upstreams.iter().map(|u| u.name.clone()).collect();
        let catalog =
            Catalog::from_saved(tools, &names, &policy.separator).context("loading --tools")?;
        // Sanitized and pinned as the gateway admits lists, so offline = live.
        let sanitize = |server: &str| policy.sanitize.rules_for(server);
        (pin::admit_all(&catalog, sanitize, &policy.pin.rules), None)
    };
    let rules = policy
        .budget
        .rules(catalog.tools(), catalog.separator(), &policy.discover);
    let counter = Counter::new(&policy.budget.profile);
    Ok(Prepared {
        policy,
        catalog,
        rules,
        counter,
        upstreams,
    })
}

/// Runs the command, writing to `out`.
///
/// # Errors
/// Any failure, with context.
pub fn run(args: &Args, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let prepared = prepare(&args.catalog)?;
    let listing = prepared.listing();
    // Every level counted exactly for the table, whatever the plan needed.
    let measured = prepared
        .counter
        .measure(prepared.catalog.tools(), &prepared.rules.wording);
    let mut report = report(&prepared, &measured, &listing.plan);
    if let Some(model) = &args.embedding_model {
        report["reranker"] = reranker_cost(model, args, &prepared)?;
    }
    let text = match args.format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&report)?;
            s.push('\n');
            s
        }
        Format::Table => table(&report),
        Format::Html => super::report::html::page(&report),
    };
    match &args.out {
        Some(path) => {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        None => out.write_all(text.as_bytes())?,
    }
    Ok(())
}

/// What the semantic reranker of `model` costs on the catalog (every tool embedded now).
#[cfg(feature = "semantic")]
fn reranker_cost(
    model: &std::path::Path,
    args: &Args,
    prepared: &Prepared,
) -> anyhow::Result<Value> {
    let cache_dir = args.embedding_cache_dir.as_deref();
    let tools = prepared.catalog.tools();
    let (_, _, about) = super::search::embed_catalog(model, cache_dir, tools)?;
    Ok(about)
}

#[cfg(not(feature = "semantic"))]
fn reranker_cost(_: &std::path::Path, _: &Args, _: &Prepared) -> anyhow::Result<Value> {
    anyhow::bail!("--embedding-model needs a build with the `semantic` feature")
}

fn per_level(counts: impl Fn(Level) -> usize) -> Value {
    Value::Object(
        Level::ALL
            .into_iter()
            .map(|l| (l.as_str().to_owned(), json!(counts(l))))
            .collect(),
    )
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    // Display only: token counts are far below 2^52.
    #[allow(clippy::cast_precision_loss)]
    let ratio = part as f64 / whole as f64;
    (ratio * 1000.0).round() / 10.0
}

/// The JSON report (the `json` format; the other formats are drawn from it).
fn report(p: &Prepared, m: &Measured, plan: &Plan) -> Value {
    let budget = &p.policy.budget;
    let servers = by_server(p.catalog.tools());
    let catalog_empty = p.catalog.tools().is_empty();
    let mut report = json!({
        "model": budget.model,
        "profile": profile_json(&budget.profile),
        "rendering": budget.profile.rendering.as_str(),
        "budget": {
            "tokens": plan.budget.tokens,
            "tools": plan.budget.tools,
            "threshold_percent": f64::from(budget.threshold_bp) / 100.0,
            "enabled": budget.enabled,
        },
        "overhead_tokens": m.overhead,
        "meta_tools_tokens": m.meta,
        "totals": per_level(|l| if catalog_empty { 0 } else { m.total_at(l) }),
        "servers": servers_json(&servers, m),
        "plan": plan_json(plan),
        "tools": tools_json(p, m, plan),
        "collisions": collisions_json(&p.catalog),
        "upstreams": p.upstreams.as_deref().map(upstreams_json),
    });
    let why = why(p, m, plan);
    report["plan"]["reason"] = Value::from(super::report::reason(&why));
    report["plan"]["decided_by"] = Value::from(why.decided_by());
    report["plan"]["advice"] = super::report::advice(&why).map_or(Value::Null, Value::from);
    report["levels"] = levels(m, plan, catalog_empty);
    report["discovery"] = discovery(p, plan);
    for ((server, cost), share) in report["servers"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .zip(server_costs(&servers, m, plan))
        .zip(shares(&servers, &p.rules, plan))
    {
        server["plan"] = cost;
        server["share"] = share;
    }
    report
}

/// The catalog's tools by server, in catalog order: each server with the positions of its
/// tools.
fn by_server(tools: &[crate::catalog::CatalogTool]) -> Vec<(String, Vec<usize>)> {
    let mut servers: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        match servers.last_mut() {
            Some((s, idx)) if *s == tool.server => idx.push(i),
            _ => servers.push((tool.server.clone(), vec![i])),
        }
    }
    servers
}

fn profile_json(profile: &crate::profile::Profile) -> Value {
    json!({
        "name": profile.name,
        "context_window": profile.context_window,
        "tokenizer": profile.encoding.as_str(),
        "max_tools": profile.max_tools,
        "overhead_tokens": profile.overhead_tokens,
        "calibration_permille": profile.calibration_permille,
        "estimate": profile.estimate,
    })
}

/// The plan's figures (its reason and advice are added from [`why`]).
fn plan_json(plan: &Plan) -> Value {
    let saved = plan.tokens_before.saturating_sub(plan.tokens_after);
    json!({
        "mode": plan.rung.mode(),
        "rung": plan.rung.name(),
        "level": plan.listed_level.map(Level::as_str),
        "catalog_level": plan.catalog_level.map(Level::as_str),
        "meta_tools": plan.meta_tools,
        "fits": plan.fits,
        "tokens_before": plan.tokens_before,
        "exposed_tokens": plan.tokens_after,
        "saved_tokens": saved,
        "saved_percent": percent(saved, plan.tokens_before),
        "listed_tools": plan.tools_after,
        "exposed_tools": plan.exposed_count(),
        "deferred_tools": plan.deferred_count(),
    })
}

/// Each server's tool count and tokens at every level.
fn servers_json(servers: &[(String, Vec<usize>)], m: &Measured) -> Value {
    servers
        .iter()
        .map(|(s, idx)| {
            json!({
                "server": s,
                "tools": idx.len(),
                "tokens": per_level(|l| idx.iter().map(|&i| m.tools[i].direct[l.index()]).sum()),
            })
        })
        .collect()
}

/// Per server: what its listed tools cost as planned, what compression saved on them, and the
/// full cost of its deferred tools (the three add up to its cost in full).
fn server_costs(servers: &[(String, Vec<usize>)], m: &Measured, plan: &Plan) -> Vec<Value> {
    servers
        .iter()
        .map(|(_, idx)| {
            let (mut listed, mut compressed, mut deferred) = (0, 0, 0);
            for &i in idx {
                let full = m.tools[i].direct[Level::Off.index()];
                match plan.levels[i] {
                    Some(level) => {
                        let now = m.tools[i].direct[level.index()];
                        listed += now;
                        compressed += full.saturating_sub(now);
                    }
                    None => deferred += full,
                }
            }
            json!({"listed_tokens": listed, "compression_saved_tokens": compressed,
                   "deferred_tokens": deferred,
                   "listed_tools": idx.iter().filter(|&&i| plan.levels[i].is_some()).count()})
        })
        .collect()
}

/// Per server: its max-min fair share of the listed slots ([`crate::plan::fair_shares`]), what
/// it got, and why (`whole`: fewer tools than its share; `pinned`: more pins than its share;
/// `fair`: rounds across servers gave it its share, the rest behind search; `budget`: the
/// tokens ran out before its share).
fn shares(servers: &[(String, Vec<usize>)], rules: &Rules, plan: &Plan) -> Vec<Value> {
    let sizes: Vec<usize> = servers.iter().map(|(_, idx)| idx.len()).collect();
    let fair = crate::plan::fair_shares(&sizes, plan.exposed_count());
    servers
        .iter()
        .zip(fair)
        .map(|((_, idx), share)| {
            let listed = idx.iter().filter(|&&i| plan.levels[i].is_some()).count();
            let pinned = (idx.iter())
                .filter(|&&i| rules.pins.get(i).copied().unwrap_or(false))
                .count();
            #[allow(clippy::cast_precision_loss)] // tool counts are far below 2^52
            let (listed_f, pinned_f) = (listed as f64, pinned as f64);
            let why = if listed == idx.len() {
                "whole"
            } else if pinned > 0 && pinned_f >= share {
                "pinned"
            } else if listed_f + 1.0 > share {
                "fair"
            } else {
                "budget"
            };
            json!({"fair_share": (share * 10.0).round() / 10.0, "listed_tools": listed,
                   "pinned_tools": pinned, "why": why})
        })
        .collect()
}

/// Each tool's id, exposed name, schema hash, tokens at every level and planned level.
fn tools_json(p: &Prepared, m: &Measured, plan: &Plan) -> Value {
    p.catalog
        .tools()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            json!({
                "id": t.id(),
                "name": t.exposed_name(p.catalog.separator()),
                "schemaHash": crate::pin::hash_of(&t.definition),
                "tokens": per_level(|l| m.tools[i].direct[l.index()]),
                "line_tokens": per_level(|l| m.tools[i].line[l.index()]),
                "plan": plan.levels[i].map_or("deferred", Level::as_str),
            })
        })
        .collect()
}

fn collisions_json(catalog: &Catalog) -> Value {
    catalog
        .collisions()
        .iter()
        .map(|c| {
            json!({
                "kind": c.kind,
                "name": c.exposed,
                "claimants": c.claimants.iter().zip(&c.resolved).map(|((server, name), exposed)| {
                    json!({"server": server, "name": name, "exposed": exposed})
                }).collect::<Vec<Value>>(),
                "text": c.to_string(),
            })
        })
        .collect()
}

/// The plan's facts for [`super::report::reason`] and [`super::report::advice`].
fn why(p: &Prepared, m: &Measured, plan: &Plan) -> super::report::Why {
    let budget = &p.policy.budget;
    let tools = p.catalog.tools().len();
    super::report::Why {
        enabled: budget.enabled,
        model: budget.model.clone(),
        context_window: budget.profile.context_window,
        threshold_percent: f64::from(budget.threshold_bp) / 100.0,
        tools,
        cap: (budget.mode != crate::plan::ModeChoice::HostSearch).then_some(plan.budget.tools),
        budget_tokens: plan.budget.tokens,
        tokens_before: plan.tokens_before,
        tokens_smallest: (tools > 0).then(|| m.total_at(Level::Extreme)),
        tokens_after: plan.tokens_after,
        rung: plan.rung.name().to_owned(),
        level: plan.listed_level.map(|l| l.as_str().to_owned()),
        exposed: plan.exposed_count(),
        pinned: p.rules.pins.iter().filter(|&&pin| pin).count(),
        fits: plan.fits,
        fixed: super::report::fixed_choice(budget),
        command_line: false,
        pin_candidates: pin_candidates(p, m, plan),
    }
}

/// The deferred tools most worth pinning: the next ones the hybrid order would list, one per
/// server (so every server that has tools behind search is named), at most three.
fn pin_candidates(p: &Prepared, m: &Measured, plan: &Plan) -> Vec<String> {
    let tools = p.catalog.tools();
    if tools.len() != plan.levels.len() || tools.len() != m.tools.len() {
        return Vec::new();
    }
    let mut named: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for i in crate::plan::value_order(tools, m, &p.rules, false) {
        let server = tools[i].server.as_str();
        if plan.levels[i].is_none() && !named.contains(&server) {
            named.push(server);
            out.push(tools[i].id());
            if out.len() == 3 {
                break;
            }
        }
    }
    out
}

/// What every tool at each level would cost, and whether that fits the token budget (the
/// tool cap aside).
fn levels(m: &Measured, plan: &Plan, empty: bool) -> Value {
    Level::ALL
        .into_iter()
        .map(|l| {
            let tokens = if empty { 0 } else { m.total_at(l) };
            json!({"level": l.as_str(), "tokens": tokens, "fits": tokens <= plan.budget.tokens})
        })
        .collect()
}

/// What a deferred tool costs to reach: one `search_tools` answer (the median over searches
/// for the deferred tools' own names) and one `get_tool_schema` answer (the median over the
/// deferred tools), in the host's tokens; `null` when nothing is deferred.
fn discovery(p: &Prepared, plan: &Plan) -> Value {
    let deferred: Vec<crate::catalog::CatalogTool> = p
        .catalog
        .tools()
        .iter()
        .zip(&plan.levels)
        .filter(|(_, level)| level.is_none())
        .map(|(t, _)| t.clone())
        .collect();
    if deferred.is_empty() {
        return Value::Null;
    }
    let discovery = crate::discover::Discovery::new(
        deferred,
        p.catalog.separator(),
        &p.policy.discover.names,
        p.policy.discover.limits,
    );
    let answer = |result: &Value| {
        p.counter
            .count_text(result["content"][0]["text"].as_str().unwrap_or_default())
    };
    let median = |mut v: Vec<usize>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    // A sample is enough for a typical answer, and keeps big catalogs quick.
    let sample = || discovery.tools().iter().take(25);
    let search = median(
        sample()
            .map(|t| answer(&discovery.search_tools(&t.name.replace(['_', '-'], " "), None)))
            .collect(),
    );
    let schema = median(
        (0..discovery.tools().len().min(25))
            .filter_map(|i| discovery.exposed_name(i))
            .map(|name| answer(&discovery.get_tool_schema(name)))
            .collect(),
    );
    json!({
        "search_answer_tokens": search,
        "schema_answer_tokens": schema,
        "round_trip_tokens": search + schema,
        "search_results": p.policy.discover.limits.default,
    })
}

/// How each started upstream looked (live catalogs only): the status line `serve`'s startup
/// summary prints, and its parts.
fn upstreams_json(upstreams: &[UpstreamSummary]) -> Value {
    let lines = summary_lines(upstreams);
    upstreams
        .iter()
        .map(|u| {
            let (status, reason) = match &u.status {
                crate::upstream::Status::Ready => ("ready", None),
                crate::upstream::Status::Starting => ("starting", None),
                crate::upstream::Status::Stopped => ("stopped", None),
                crate::upstream::Status::Down(reason) => ("down", Some(reason.as_str())),
            };
            json!({
                "name": u.name,
                "transport": u.transport,
                "status": status,
                "reason": reason,
                "protocol_version": u.protocol_version,
                "tools": u.counts.0,
                "prompts": u.counts.1,
                "resources": u.counts.2,
                "summary": lines.get(&u.name),
            })
        })
        .collect()
}

fn level_cells(v: &Value) -> String {
    Level::ALL
        .iter()
        .map(|l| format!("{:>8}", v[l.as_str()].to_string()))
        .collect()
}

fn table(r: &Value) -> String {
    let mut s = String::new();
    headline(&mut s, r);
    for upstream in r["upstreams"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "upstream {:<20} {}",
            upstream["name"].as_str().unwrap_or(""),
            upstream["summary"].as_str().unwrap_or("")
        );
    }
    if r["budget"]["enabled"] == false {
        let _ = writeln!(
            s,
            "budget: off ([budget] enabled = false): serve passes every tool through"
        );
    } else {
        reasons(&mut s, r);
    }
    for collision in r["collisions"].as_array().into_iter().flatten() {
        let _ = writeln!(s, "collision: {}", collision["text"].as_str().unwrap_or(""));
    }
    token_tables(&mut s, r);
    if let Some(cost) = r.get("reranker") {
        let _ = writeln!(
            s,
            "search reranker {}: model loaded in {:.2} s; {} tools, {} embedded in {:.2} s, {} from the cache{}",
            cost["model"].as_str().unwrap_or(""),
            cost["load_secs"].as_f64().unwrap_or(0.0),
            cost["tools"],
            cost["embedded"],
            cost["catalog_secs"].as_f64().unwrap_or(0.0),
            cost["from_cache"],
            cost["cache_dir"]
                .as_str()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default(),
        );
    }
    s
}

/// The table's first two lines: the model, rendering and budget; the plan and what it saves.
fn headline(s: &mut String, r: &Value) {
    let plan = &r["plan"];
    let est = if r["profile"]["estimate"] == true {
        " (estimate)"
    } else {
        ""
    };
    let _ = writeln!(
        s,
        "model {} | rendering {}{} | budget {} tokens ({}% of {}), {} tools",
        r["model"].as_str().unwrap_or(""),
        r["rendering"].as_str().unwrap_or(""),
        est,
        r["budget"]["tokens"],
        r["budget"]["threshold_percent"],
        r["profile"]["context_window"],
        r["budget"]["tools"],
    );
    let _ = writeln!(
        s,
        "plan: {} ({}{}) | {} -> {} tokens (saved {}%) | {} listed, {} deferred{}{}",
        plan["mode"].as_str().unwrap_or(""),
        plan["rung"].as_str().unwrap_or(""),
        plan["level"]
            .as_str()
            .map(|l| format!(" {l}"))
            .unwrap_or_default(),
        plan["tokens_before"],
        plan["exposed_tokens"],
        plan["saved_percent"],
        plan["exposed_tools"],
        plan["deferred_tools"],
        plan["catalog_level"]
            .as_str()
            .map(|l| format!(", catalog lines at {l}"))
            .unwrap_or_default(),
        if plan["fits"] == true {
            ""
        } else {
            " | DOES NOT FIT"
        },
    );
}

/// Why the plan is what it is (with the budget on): the reason, the advice, every level's
/// total and what reaching a deferred tool costs.
fn reasons(s: &mut String, r: &Value) {
    let plan = &r["plan"];
    let _ = writeln!(s, "why: {}", plan["reason"].as_str().unwrap_or(""));
    if let Some(advice) = plan["advice"].as_str() {
        let _ = writeln!(s, "to list more: {advice}");
    }
    let levels: Vec<String> = r["levels"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            let over = if l["fits"] == true { "" } else { " (over)" };
            format!(
                "{} {}{over}",
                l["level"].as_str().unwrap_or(""),
                l["tokens"]
            )
        })
        .collect();
    let _ = writeln!(s, "every tool at: {}", levels.join(" | "));
    share_line(s, r);
    let d = &r["discovery"];
    if !d.is_null() {
        let _ = writeln!(
            s,
            "reaching a deferred tool: one search ({} tokens, {} results) + one schema ({} tokens) = {} tokens",
            d["search_answer_tokens"],
            d["search_results"],
            d["schema_answer_tokens"],
            d["round_trip_tokens"]
        );
    }
}

/// Each server's listed tools against its fair share of the listed slots, when some are
/// deferred: `share: github 7/26 (fair 7.5: fair), time 2/2 (whole)`.
fn share_line(s: &mut String, r: &Value) {
    if r["plan"]["deferred_tools"] == 0 {
        return;
    }
    let cells: Vec<String> = (r["servers"].as_array().into_iter().flatten())
        .map(|server| {
            let share = &server["share"];
            format!(
                "{} {}/{} (fair {}: {})",
                server["server"].as_str().unwrap_or(""),
                share["listed_tools"],
                server["tools"],
                share["fair_share"],
                share["why"].as_str().unwrap_or("")
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "share of the {} listed slots (rounds across servers; whole = fewer tools than its share, \
         budget = the tokens ran out first): {}",
        r["plan"]["exposed_tools"],
        cells.join(", ")
    );
}

/// The tokens at every level per server (with the total) and per tool.
fn token_tables(s: &mut String, r: &Value) {
    let header: String = Level::ALL
        .iter()
        .map(|l| format!("{:>8}", l.as_str()))
        .collect();
    let _ = writeln!(s, "\n{:<48}{:>6}{header}", "server", "tools");
    for server in r["servers"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "{:<48}{:>6}{}",
            server["server"].as_str().unwrap_or(""),
            server["tools"].to_string(),
            level_cells(&server["tokens"])
        );
    }
    let tool_count = r["tools"].as_array().map_or(0, Vec::len);
    let _ = writeln!(
        s,
        "{:<48}{:>6}{}",
        "total (with overhead)",
        tool_count,
        level_cells(&r["totals"])
    );
    let _ = writeln!(s, "\n{:<48}{:>6}{header}", "tool", "plan");
    for tool in r["tools"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "{:<48}{:>6}{}",
            tool["id"].as_str().unwrap_or(""),
            tool["plan"]
                .as_str()
                .map_or("", |p| if p == "deferred" { "-" } else { p }),
            level_cells(&tool["tokens"])
        );
    }
}
