//! `inspect --format html`: one self-contained page (inline CSS and SVG, nothing fetched),
//! drawn from the JSON report. It tells the story top down: before → after against the budget
//! line, why (the deciding rule) and the change that would list more, each server's cost as a
//! stacked bar (listed / saved by compression / deferred) sorted by cost, what a deferred tool
//! costs to reach, what each compression level would give, then every tool.
//!
//! The chart elements carry classes a test (or a user's script) can find: `rect.bar` with
//! `data-server` and `data-part`, `line.budget`, `rect.level`.

use std::fmt::Write as _;

use serde_json::Value;

use crate::compress::Level;

const LISTED: &str = "#4e79a7";
const SAVED: &str = "#a0cbe8";
const DEFERRED: &str = "#bab0ac";
const OVER: &str = "#e15759";
const FITS: &str = "#59a14f";
const WIDTH: u64 = 720;

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn s(v: &Value) -> String {
    escape(v.as_str().unwrap_or(""))
}

/// `value` of `max` as a width of `WIDTH` pixels.
fn px(value: u64, max: u64) -> u64 {
    value * WIDTH / max.max(1)
}

/// Server bars leave room for their label on the right.
const SERVER_WIDTH: u64 = WIDTH - 260;

/// The page for report `r`.
#[must_use]
pub(crate) fn page(r: &Value) -> String {
    let plan = &r["plan"];
    let advice = match plan["advice"].as_str() {
        Some(a) => format!("<p class=advice><b>To list more:</b> {}</p>", escape(a)),
        None => "<p class=advice>Every tool is listed: nothing to change.</p>".to_owned(),
    };
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>mcp-budget inspect: {model}</title>\
         <style>{CSS}</style></head><body>\
         <h1>{tools} tools: {before} → <b>{after}</b> tokens <small>{model}</small></h1>\
         <p class=sub>Budget <b>{budget}</b> tokens ({pct}% of {window}) and <b>{cap}</b> tools; \
         rendering {rendering}. Plan <b>{mode}</b> ({rung}): {exposed} listed, {deferred} deferred.</p>\
         {headline}\
         <h2>Why</h2><p class=why><span class=badge>{decided}</span> {reason}</p>{advice}\
         <h2>Per server, by cost</h2>{servers}\
         <h2>Reaching a deferred tool</h2>{discovery}\
         <h2>What each compression level would give</h2>{levels}\
         <h2>Tools</h2>{tools_table}</body></html>\n",
        CSS = CSS,
        model = s(&r["model"]),
        tools = r["tools"].as_array().map_or(0, Vec::len),
        before = plan["tokens_before"],
        after = plan["exposed_tokens"],
        budget = r["budget"]["tokens"],
        pct = r["budget"]["threshold_percent"],
        window = r["profile"]["context_window"],
        cap = r["budget"]["tools"],
        rendering = s(&r["rendering"]),
        mode = s(&plan["mode"]),
        rung = s(&plan["rung"]),
        exposed = plan["exposed_tools"],
        deferred = plan["deferred_tools"],
        headline = headline(r),
        decided = s(&plan["decided_by"]).replace('_', " "),
        reason = s(&plan["reason"]),
        servers = servers(r),
        discovery = discovery(r),
        levels = levels(r),
        tools_table = tools_table(r),
    )
}

pub(crate) const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:64em;color:#222}\
h1{font-size:1.6em;margin-bottom:.2em}h1 small{font-size:.55em;color:#666;font-weight:normal}\
.sub{color:#444;margin-top:0}.badge{background:#222;color:#fff;border-radius:3px;padding:1px 6px;\
font-size:.85em;text-transform:uppercase}.advice{background:#f4f8e8;border-left:4px solid #59a14f;\
padding:.5em .8em}table{border-collapse:collapse;font-size:.9em}td,th{padding:2px 8px;\
border-bottom:1px solid #ddd}.n{text-align:right}svg text{font-size:12px}";

/// Before (every tool in full) and after (this plan) against the budget line.
fn headline(r: &Value) -> String {
    let plan = &r["plan"];
    let (before, after, budget) = (
        n(&plan["tokens_before"]),
        n(&plan["exposed_tokens"]),
        n(&r["budget"]["tokens"]),
    );
    let max = before.max(after).max(budget) * 11 / 10;
    let (x0, h) = (150, 28);
    let mut svg = format!(
        "<svg class=headline xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"104\">",
        x0 + WIDTH + 20
    );
    for (i, (label, value, colour, part)) in [
        ("before: all in full", before, DEFERRED, "before"),
        (
            "after: this plan",
            after,
            if after <= budget { FITS } else { OVER },
            "after",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let y = 10 + i as u64 * (h + 12);
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{label}</text>\
             <rect class=\"bar headline\" data-part=\"{part}\" x=\"{x0}\" y=\"{y}\" width=\"{}\" height=\"{h}\" fill=\"{colour}\"><title>{value} tokens</title></rect>\
             <text x=\"{}\" y=\"{}\">{value}</text>",
            x0 - 8,
            y + 18,
            px(value, max).max(1),
            x0 + px(value, max) + 4,
            y + 18,
        );
    }
    let bx = x0 + px(budget, max);
    let _ = write!(
        svg,
        "<line class=budget x1=\"{bx}\" x2=\"{bx}\" y1=\"2\" y2=\"88\" stroke=\"{OVER}\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\
         <text x=\"{bx}\" y=\"100\" text-anchor=\"middle\" fill=\"{OVER}\">budget {budget}</text></svg>"
    );
    svg
}

/// One stacked bar per server, the costliest first: listed as planned, saved by compression,
/// deferred behind search.
fn servers(r: &Value) -> String {
    let mut rows: Vec<&Value> = r["servers"].as_array().into_iter().flatten().collect();
    rows.sort_by_key(|s| std::cmp::Reverse(n(&s["tokens"]["off"])));
    let max = rows
        .iter()
        .map(|s| n(&s["tokens"]["off"]))
        .max()
        .unwrap_or(1);
    let (x0, h, gap) = (180, 18, 8);
    let height = 30 + rows.len() as u64 * (h + gap);
    let mut svg = format!(
        "<svg class=servers xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\">",
        x0 + WIDTH + 20
    );
    for (i, (label, colour)) in [
        ("listed", LISTED),
        ("saved by compression", SAVED),
        ("deferred", DEFERRED),
    ]
    .into_iter()
    .enumerate()
    {
        let x = x0 + i as u64 * 170;
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"4\" width=\"12\" height=\"12\" fill=\"{colour}\"/><text x=\"{}\" y=\"14\">{label}</text>",
            x + 16
        );
    }
    for (i, server) in rows.iter().enumerate() {
        let y = 26 + i as u64 * (h + gap);
        let name = s(&server["server"]);
        let cost = &server["plan"];
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{name}</text>",
            x0 - 8,
            y + 13
        );
        let mut x = x0;
        for (part, key, colour) in [
            ("listed", "listed_tokens", LISTED),
            ("saved", "compression_saved_tokens", SAVED),
            ("deferred", "deferred_tokens", DEFERRED),
        ] {
            let tokens = n(&cost[key]);
            let w = tokens * SERVER_WIDTH / max.max(1);
            if tokens > 0 {
                let _ = write!(
                    svg,
                    "<rect class=bar data-server=\"{name}\" data-part=\"{part}\" x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"{h}\" fill=\"{colour}\"><title>{name}: {tokens} tokens {part}</title></rect>",
                    w.max(1)
                );
            }
            x += w;
        }
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\">{} → {} tokens, {}/{} tools listed</text>",
            x + 6,
            y + 13,
            server["tokens"]["off"],
            cost["listed_tokens"],
            cost["listed_tools"],
            server["tools"]
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The round trips that reach a deferred tool, and the honest saving.
fn discovery(r: &Value) -> String {
    let d = &r["discovery"];
    if d.is_null() {
        return "<p>Nothing is deferred: every tool is in the list, no search needed.</p>".into();
    }
    let saved = n(&r["plan"]["saved_tokens"]);
    let trip = n(&d["round_trip_tokens"]);
    format!(
        "<p>The first use of a deferred tool in a conversation takes one <code>search_tools</code> \
         call (a typical answer of {results} results: <b>{search}</b> tokens) and one \
         <code>get_tool_schema</code> call (<b>{schema}</b> tokens): about <b>{trip}</b> tokens. \
         The plan saves {saved} tokens on every prompt, so it pays off unless a conversation \
         reaches more than {breakeven} deferred tools.</p>",
        results = d["search_results"],
        search = d["search_answer_tokens"],
        schema = d["schema_answer_tokens"],
        breakeven = saved / trip.max(1),
    )
}

/// Every tool at each level, against the budget line.
fn levels(r: &Value) -> String {
    let rows: Vec<&Value> = r["levels"].as_array().into_iter().flatten().collect();
    let budget = n(&r["budget"]["tokens"]);
    let max = rows
        .iter()
        .map(|l| n(&l["tokens"]))
        .max()
        .unwrap_or(0)
        .max(budget)
        * 11
        / 10;
    let (x0, h, gap) = (150, 16, 6);
    let height = 24 + rows.len() as u64 * (h + gap);
    let mut svg = format!(
        "<svg class=levels xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\">",
        x0 + WIDTH + 120
    );
    for (i, level) in rows.iter().enumerate() {
        let y = 4 + i as u64 * (h + gap);
        let tokens = n(&level["tokens"]);
        let fits = level["fits"] == true;
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect class=level data-level=\"{}\" x=\"{x0}\" y=\"{y}\" width=\"{}\" height=\"{h}\" fill=\"{}\"/>\
             <text x=\"{}\" y=\"{}\">{tokens} tokens{}</text>",
            x0 - 8,
            y + 12,
            s(&level["level"]),
            s(&level["level"]),
            px(tokens, max).max(1),
            if fits { FITS } else { OVER },
            x0 + px(tokens, max) + 6,
            y + 12,
            if fits { "" } else { " (over)" },
        );
    }
    let bx = x0 + px(budget, max);
    let _ = write!(
        svg,
        "<line class=budget x1=\"{bx}\" x2=\"{bx}\" y1=\"0\" y2=\"{}\" stroke=\"{OVER}\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\
         <text x=\"{bx}\" y=\"{}\" text-anchor=\"middle\" fill=\"{OVER}\">budget {budget}</text></svg>",
        height - 14,
        height - 2
    );
    svg
}

fn tools_table(r: &Value) -> String {
    let head: String = Level::ALL
        .iter()
        .map(|l| format!("<th>{}</th>", l.as_str()))
        .collect();
    let mut rows = String::new();
    for tool in r["tools"].as_array().into_iter().flatten() {
        let cells: String = Level::ALL
            .iter()
            .map(|l| format!("<td class=n>{}</td>", tool["tokens"][l.as_str()]))
            .collect();
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td>{cells}</tr>",
            s(&tool["id"]),
            s(&tool["plan"])
        );
    }
    format!("<table><tr><th>tool</th><th>plan</th>{head}</tr>{rows}</table>")
}
