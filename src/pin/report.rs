//! One line per finding of the guard, for the startup summary, `check` and `inspect`.

use crate::catalog::Held;

/// What the guard found in each upstream's lists: removed characters and steering flags per
/// item, quarantined tools, prompts and templates, warnings. `names[i]` is upstream `i`'s id.
///
/// ```
/// use mcp_budget::catalog::{Contribution, Held};
/// use serde_json::json;
///
/// let raw = Contribution { tools: vec![json!({"name": "add", "description": "Adds\u{200b}"})], ..Contribution::default() };
/// let (_, held) = mcp_budget::pin::admit("calc", &raw, &Held::default(), &Default::default(), &Default::default());
/// assert_eq!(mcp_budget::pin::report::lines(&[held], &["calc".to_owned()]), ["calc/add: removed 1 invisible"]);
/// ```
#[must_use]
pub fn lines(held: &[Held], names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (h, server) in held.iter().zip(names) {
        for r in &h.reports {
            let mut line = format!("{server}/{}: ", r.name);
            if r.kind != "tool" {
                line = format!("{server} {} {}: ", r.kind, r.name);
            }
            let mut parts = Vec::new();
            if r.removed.total() > 0 {
                parts.push(format!("removed {}", r.removed));
            }
            if !r.flags.is_empty() {
                let rules: Vec<&str> = r.flags.iter().map(|f| f.rule).collect();
                parts.push(format!(
                    "steering score {} ({})",
                    r.score(),
                    rules.join(", ")
                ));
            }
            out.push(line + &parts.join("; "));
        }
        for q in &h.quarantined {
            let why = match q.reason {
                "changed" => format!("{} changed since pinned", q.changed.join(", ")),
                "unknown" => "not in the lock".to_owned(),
                _ => "steering text".to_owned(),
            };
            let who = q.kind.who(server, &q.name);
            out.push(format!("{who}: QUARANTINED: {why} (hash {})", q.new));
        }
        out.extend(h.warnings.iter().map(|w| format!("warning: {w}")));
    }
    out
}
