//! `mcp-budget inspect`: per server and per tool tokens at every level for the model's
//! rendering, the budget, the plan and the savings — of saved tool lists (`--tools`), or of the
//! policy's own upstreams, started and stopped again ([`super::live`]), with how each started.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::{json, Value};

use crate::catalog::Catalog;
use crate::compress::Level;
use crate::gateway::{summary_lines, UpstreamSummary};
use crate::listing::{list_tools, Listing};
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
    let report = report(&prepared, &measured, &listing.plan);
    let text = match args.format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&report)?;
            s.push('\n');
            s
        }
        Format::Table => table(&report),
        Format::Html => html(&report),
    };
    match &args.out {
        Some(path) => {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        None => out.write_all(text.as_bytes())?,
    }
    Ok(())
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
    let profile = &budget.profile;
    let tools = p.catalog.tools();
    let mut servers: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        match servers.last_mut() {
            Some((s, idx)) if *s == tool.server => idx.push(i),
            _ => servers.push((tool.server.clone(), vec![i])),
        }
    }
    let collisions: Vec<Value> = p
        .catalog
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
        .collect();
    let catalog_empty = tools.is_empty();
    let tools: Vec<Value> = tools
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
        .collect();
    let servers: Vec<Value> = servers
        .iter()
        .map(|(s, idx)| {
            json!({
                "server": s,
                "tools": idx.len(),
                "tokens": per_level(|l| idx.iter().map(|&i| m.tools[i].direct[l.index()]).sum()),
            })
        })
        .collect();
    let saved = plan.tokens_before.saturating_sub(plan.tokens_after);
    let mut report = json!({
        "model": budget.model,
        "profile": {
            "name": profile.name,
            "context_window": profile.context_window,
            "tokenizer": profile.encoding.as_str(),
            "max_tools": profile.max_tools,
            "overhead_tokens": profile.overhead_tokens,
            "calibration_permille": profile.calibration_permille,
            "estimate": profile.estimate,
        },
        "rendering": profile.rendering.as_str(),
        "budget": {
            "tokens": plan.budget.tokens,
            "tools": plan.budget.tools,
            "threshold_percent": f64::from(budget.threshold_bp) / 100.0,
            "enabled": budget.enabled,
        },
        "overhead_tokens": m.overhead,
        "meta_tools_tokens": m.meta,
        "totals": per_level(|l| if catalog_empty { 0 } else { m.total_at(l) }),
        "servers": servers,
        "plan": {
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
        },
        "tools": tools,
        "collisions": collisions,
        "upstreams": p.upstreams.as_deref().map(upstreams_json),
    });
    report["plan"]["reason"] = Value::from(plan_reason(&report));
    report
}

/// Why the plan is what it is, in one sentence, from the report's budget and plan.
fn plan_reason(r: &Value) -> String {
    let (plan, budget) = (&r["plan"], &r["budget"]);
    if budget["enabled"] == false {
        return "the budget is off ([budget] enabled = false): serve lists every tool as its \
                upstream does"
            .to_owned();
    }
    let limits = format!(
        "the budget of {} tokens and {} tools",
        budget["tokens"], budget["tools"]
    );
    let before = &plan["tokens_before"];
    let reason = match (plan["rung"].as_str(), plan["level"].as_str()) {
        (Some("full"), _) => format!("every tool in full ({before} tokens) fits {limits}"),
        (Some("uniform" | "mixed"), Some(level)) => format!(
            "in full ({before} tokens) the tools exceed {limits}; compressed to {level} they \
             take {}",
            plan["exposed_tokens"]
        ),
        _ => format!(
            "even compressed the tools exceed {limits}; {} of them are deferred behind the \
             search meta-tools",
            plan["deferred_tools"]
        ),
    };
    if plan["fits"] == true {
        reason
    } else {
        format!("{reason}; the smallest plan still does not fit")
    }
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
        let _ = writeln!(s, "why: {}", plan["reason"].as_str().unwrap_or(""));
    }
    for collision in r["collisions"].as_array().into_iter().flatten() {
        let _ = writeln!(s, "collision: {}", collision["text"].as_str().unwrap_or(""));
    }
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
    s
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const COLORS: [&str; 5] = ["#4e79a7", "#59a14f", "#edc948", "#f28e2b", "#e15759"];

fn html(r: &Value) -> String {
    let servers: Vec<&Value> = r["servers"].as_array().into_iter().flatten().collect();
    let max = servers
        .iter()
        .filter_map(|s| s["tokens"]["off"].as_u64())
        .max()
        .unwrap_or(1)
        .max(1);
    let (label_w, chart_w, bar_h, gap) = (220u64, 600u64, 4u64, 6u64);
    let row_h = bar_h * 5 + gap;
    let height = row_h * servers.len() as u64 + 40;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">",
        label_w + chart_w + 80
    );
    for (li, level) in Level::ALL.iter().enumerate() {
        let x = label_w + li as u64 * 90;
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"4\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"13\">{}</text>",
            COLORS[li],
            x + 14,
            level.as_str()
        );
    }
    for (si, server) in servers.iter().enumerate() {
        let y0 = 24 + si as u64 * row_h;
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            label_w - 6,
            y0 + bar_h * 3,
            escape(server["server"].as_str().unwrap_or(""))
        );
        for (li, level) in Level::ALL.iter().enumerate() {
            let v = server["tokens"][level.as_str()].as_u64().unwrap_or(0);
            let w = (v * chart_w / max).max(1);
            let _ = write!(
                svg,
                "<rect x=\"{label_w}\" y=\"{}\" width=\"{w}\" height=\"{bar_h}\" fill=\"{}\"><title>{}: {v} tokens at {}</title></rect>",
                y0 + li as u64 * bar_h,
                COLORS[li],
                escape(server["server"].as_str().unwrap_or("")),
                level.as_str()
            );
        }
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            label_w + (server["tokens"]["off"].as_u64().unwrap_or(0) * chart_w / max) + 4,
            y0 + bar_h * 3,
            server["tokens"]["off"]
        );
    }
    svg.push_str("</svg>");
    let mut rows = String::new();
    for tool in r["tools"].as_array().into_iter().flatten() {
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td>{}</tr>",
            escape(tool["id"].as_str().unwrap_or("")),
            tool["plan"].as_str().unwrap_or(""),
            Level::ALL
                .iter()
                .map(|l| format!("<td class=n>{}</td>", tool["tokens"][l.as_str()]))
                .collect::<String>()
        );
    }
    let head: String = Level::ALL
        .iter()
        .map(|l| format!("<th>{}</th>", l.as_str()))
        .collect();
    let totals: String = Level::ALL
        .iter()
        .map(|l| format!("<td class=n>{}</td>", r["totals"][l.as_str()]))
        .collect();
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>mcp-budget inspect</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{padding:2px 8px;border-bottom:1px solid #ddd}}.n{{text-align:right}}</style></head><body>\
         <h1>Tool tokens: {model}</h1><p>Rendering <b>{rendering}</b>; budget <b>{budget}</b> tokens and <b>{tools}</b> tools. \
         Plan: <b>{mode}</b> ({rung}), {before} → <b>{after}</b> tokens (saved {saved}%), {exposed} listed, {deferred} deferred.</p>\
         <h2>Tokens per server and level</h2>{svg}\
         <h2>Whole catalog</h2><table><tr>{head}</tr><tr>{totals}</tr></table>\
         <h2>Tools</h2><table><tr><th>tool</th><th>plan</th>{head}</tr>{rows}</table></body></html>\n",
        model = escape(r["model"].as_str().unwrap_or("")),
        rendering = r["rendering"].as_str().unwrap_or(""),
        budget = r["budget"]["tokens"],
        tools = r["budget"]["tools"],
        mode = r["plan"]["mode"].as_str().unwrap_or(""),
        rung = r["plan"]["rung"].as_str().unwrap_or(""),
        before = r["plan"]["tokens_before"],
        after = r["plan"]["exposed_tokens"],
        saved = r["plan"]["saved_percent"],
        exposed = r["plan"]["exposed_tools"],
        deferred = r["plan"]["deferred_tools"],
    )
}

#[cfg(test)]
mod tests {
    use super::plan_reason;
    use serde_json::json;

    #[test]
    fn the_plan_reason_says_which_limit_decided() {
        let report = |rung: &str, level: Option<&str>, fits: bool| {
            json!({
                "budget": {"enabled": true, "tokens": 4000, "tools": 128},
                "plan": {"rung": rung, "level": level, "fits": fits, "tokens_before": 9000,
                         "exposed_tokens": 3500, "deferred_tools": 40},
            })
        };
        assert_eq!(
            plan_reason(&report("full", Some("off"), true)),
            "every tool in full (9000 tokens) fits the budget of 4000 tokens and 128 tools"
        );
        assert_eq!(
            plan_reason(&report("uniform", Some("medium"), true)),
            "in full (9000 tokens) the tools exceed the budget of 4000 tokens and 128 tools; \
             compressed to medium they take 3500"
        );
        let search = plan_reason(&report("search", None, false));
        assert!(search.contains("40 of them are deferred"), "{search}");
        assert!(
            search.ends_with("; the smallest plan still does not fit"),
            "{search}"
        );
        let off = json!({"budget": {"enabled": false}, "plan": {}});
        assert!(plan_reason(&off).starts_with("the budget is off"));
    }
}
