//! What `eval` writes: a progress line per episode (stderr), the summary table (stdout),
//! `summary.json` and `report.html` — one self-contained page in the style of `inspect
//! --format html`: accuracy against prompt tokens per task, one point per exposure with its
//! 95 % interval (`circle.exposure` with `data-exposure`), then the table.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::cli::report::html::{CSS, escape};
use crate::eval::score::Episode;

/// One line of progress.
#[must_use]
pub fn progress(e: &Episode, done: usize, of: usize, right: usize) -> String {
    let what = match (&e.called, &e.error) {
        (_, Some(error)) => format!("endpoint error: {error}"),
        (Some(called), None) => format!("called {called} {}", if e.strict { "✓" } else { "✗" }),
        (None, None) => format!("{:?}, no call ✗", e.ending).to_lowercase(),
    };
    #[allow(clippy::cast_precision_loss, reason = "counts of episodes")]
    let share = right as f64 / done as f64;
    format!(
        "eval: {} [{done}/{of}] {}: {what} ({} turn(s), {:.1} s) accuracy so far {share:.2}",
        e.exposure,
        e.query_id,
        e.turns,
        e.wall_ms as f64 / 1e3,
    )
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// The summary table.
#[must_use]
pub fn table(summaries: &[Value]) -> String {
    let mut t = format!(
        "{:<18} {:>5} {:>6} {:>13} {:>7} {:>7} {:>9} {:>7} {:>7} {:>8} {:>7}\n",
        "exposure",
        "n",
        "acc",
        "95% CI",
        "lenient",
        "args ok",
        "prompt/t",
        "compl/t",
        "cached",
        "cost/t",
        "wall s"
    );
    for s in summaries {
        let ci = &s["accuracy_ci95"];
        let _ = writeln!(
            t,
            "{:<18} {:>5} {:>6.3} {:>13} {:>7.3} {:>7.3} {:>9.0} {:>7.0} {:>7} {:>8.4} {:>7.0}{}",
            s["exposure"].as_str().unwrap_or("?"),
            s["episodes"],
            f(&s["accuracy"]),
            format!("{:.2}–{:.2}", f(&ci[0]), f(&ci[1])),
            f(&s["lenient"]),
            f(&s["arguments_valid"]),
            f(&s["prompt_tokens_per_task"]),
            f(&s["completion_tokens_per_task"]),
            s["cached_share"]
                .as_f64()
                .map_or("-".to_owned(), |c| format!("{c:.2}")),
            f(&s["cost_per_task"]),
            f(&s["wall_seconds"]),
            s["skipped"]
                .as_str()
                .map_or(String::new(), |w| format!("  skipped: {w}")),
        );
    }
    t
}

/// Writes `summary.json` and `report.html` into `dir`.
///
/// # Errors
/// A file that cannot be written.
pub fn write(dir: &Path, summaries: &[Value]) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(&Value::from(summaries.to_vec()))?;
    std::fs::write(dir.join("summary.json"), json + "\n")?;
    std::fs::write(dir.join("report.html"), page(summaries))
}

/// The report page.
#[must_use]
pub fn page(summaries: &[Value]) -> String {
    let mut rows = String::new();
    for s in summaries {
        let ci = &s["accuracy_ci95"];
        let _ = write!(
            rows,
            "<tr><td>{}</td><td class=n>{}</td><td class=n>{:.3} ({:.2}–{:.2})</td>\
             <td class=n>{:.3}</td><td class=n>{:.3}</td><td class=n>{:.0}</td><td class=n>{:.0}</td>\
             <td class=n>{:.4}</td><td class=n>{:.0}</td><td>{}</td></tr>",
            escape(s["exposure"].as_str().unwrap_or("?")),
            s["episodes"],
            f(&s["accuracy"]),
            f(&ci[0]),
            f(&ci[1]),
            f(&s["lenient"]),
            f(&s["arguments_valid"]),
            f(&s["prompt_tokens_per_task"]),
            f(&s["completion_tokens_per_task"]),
            f(&s["cost_per_task"]),
            f(&s["wall_seconds"]),
            escape(s["skipped"].as_str().unwrap_or("")),
        );
    }
    format!(
        "<!doctype html><html><head><meta charset=utf-8><title>mcp-budget eval</title>\
         <style>{CSS}</style></head><body><h1>mcp-budget eval <small>tokens and tool-call \
         accuracy per exposure</small></h1>{plot}<table><tr><th>exposure</th><th>episodes</th>\
         <th>accuracy (95% CI)</th><th>lenient</th><th>arguments valid</th><th>prompt tokens/task</th>\
         <th>completion/task</th><th>cost/task</th><th>wall s</th><th></th></tr>{rows}</table>\
         </body></html>\n",
        plot = plot(summaries)
    )
}

/// Accuracy (y, 0..1) against prompt tokens per task (x, log scale).
fn plot(summaries: &[Value]) -> String {
    let (w, h, left, bottom) = (720.0, 360.0, 60.0, 40.0);
    let ran: Vec<&Value> = summaries
        .iter()
        .filter(|s| f(&s["episodes"]) > 0.0)
        .collect();
    let tokens = |s: &Value| f(&s["prompt_tokens_per_task"]).max(1.0).log10();
    let lo = ran
        .iter()
        .map(|s| tokens(s))
        .fold(f64::INFINITY, f64::min)
        .floor();
    let hi = ran
        .iter()
        .map(|s| tokens(s))
        .fold(f64::NEG_INFINITY, f64::max)
        .ceil();
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo, hi)
    } else {
        (2.0, 5.0)
    };
    let x = |v: f64| left + (v - lo) / (hi - lo) * (w - left - 20.0);
    let y = |a: f64| (h - bottom) - a * (h - bottom - 20.0);
    let mut svg = format!(
        "<svg width={w} height={h} role=img aria-label=\"accuracy against prompt tokens\">"
    );
    let _ = write!(
        svg,
        "<line x1={left} y1={} x2={} y2={} stroke=#888 />",
        y(0.0),
        w - 20.0,
        y(0.0)
    );
    let _ = write!(
        svg,
        "<line x1={left} y1={} x2={left} y2={} stroke=#888 />",
        y(0.0),
        y(1.0)
    );
    for tick in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let _ = write!(svg, "<text x=8 y={}>{tick:.2}</text>", y(tick) + 4.0);
    }
    #[allow(clippy::cast_possible_truncation, reason = "a few decades")]
    for decade in lo as i32..=hi as i32 {
        let _ = write!(
            svg,
            "<text x={} y={}>{}</text>",
            x(f64::from(decade)) - 10.0,
            h - 12.0,
            10f64.powi(decade)
        );
    }
    let _ = write!(
        svg,
        "<text x={} y={}>prompt tokens per task (log)</text>",
        w / 2.0 - 80.0,
        h - 0.0
    );
    for s in ran {
        let name = escape(s["exposure"].as_str().unwrap_or("?"));
        let (cx, cy) = (x(tokens(s)), y(f(&s["accuracy"])));
        let ci = &s["accuracy_ci95"];
        let _ = write!(
            svg,
            "<line x1={cx:.1} y1={:.1} x2={cx:.1} y2={:.1} stroke=#4e79a7 />\
             <circle class=exposure data-exposure=\"{name}\" cx={cx:.1} cy={cy:.1} r=5 fill=#4e79a7 />\
             <text x={:.1} y={:.1}>{name}</text>",
            y(f(&ci[0])),
            y(f(&ci[1])),
            cx + 8.0,
            cy - 6.0,
        );
    }
    svg + "</svg>"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary(name: &str, accuracy: f64, tokens: f64) -> Value {
        json!({"exposure": name, "episodes": 10, "accuracy": accuracy, "accuracy_ci95": [0.1, 0.9],
               "lenient": accuracy, "arguments_valid": 1.0, "prompt_tokens_per_task": tokens,
               "completion_tokens_per_task": 20.0, "cached_share": null, "cost_per_task": 0.0,
               "wall_seconds": 12.0})
    }

    #[test]
    fn the_page_plots_each_exposure_and_escapes_names() {
        let page = page(&[summary("flat-20", 0.3, 4700.0), summary("<x>", 0.6, 1800.0)]);
        assert_eq!(page.matches("<circle class=exposure").count(), 2);
        assert!(page.contains("data-exposure=\"flat-20\""));
        assert!(page.contains("&lt;x&gt;") && !page.contains("<x>"));
    }

    #[test]
    fn the_table_has_a_row_per_exposure_and_says_what_was_skipped() {
        let mut full = summary("full", 0.0, 0.0);
        full["episodes"] = json!(0);
        full["skipped"] = json!("over the context");
        let table = table(&[summary("flat-20", 0.3, 4700.0), full]);
        assert_eq!(table.lines().count(), 3);
        assert!(table.contains("skipped: over the context"));
    }
}
