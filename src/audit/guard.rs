//! The guard's audit lines and metrics: a tool, prompt or resource template quarantined or
//! released, an item sanitized (characters removed, steering flagged) — each once, when the
//! catalog that holds it is published ([`journal`]) — and a call of a quarantined tool (or a
//! get of a quarantined prompt) refused ([`refusal`], by the guard layer).
//!
//! ```
//! use mcp_budget::audit::{guard, Audit};
//! use mcp_budget::catalog::Quarantined;
//! use mcp_budget::catalog::Item;
//! use mcp_budget::pin::events::Event;
//!
//! let q = Quarantined {
//!     kind: Item::Tool,
//!     server: "calc".into(),
//!     name: "add".into(),
//!     reason: "changed",
//!     old: Some("a".repeat(64)),
//!     new: "b".repeat(64),
//!     changed: vec!["description"],
//! };
//! let line = mcp_budget::audit::line(&guard::entry(&Event::Quarantined(&q), Some("calc__add"), "e1"));
//! assert!(line.contains(r#""event":"quarantine""#) && line.contains(r#""tool":"calc__add""#));
//! assert!(line.contains(r#""changed":["description"]"#));
//! # let _ = Audit::off();
//! ```

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Audit, Entry, new_id};
use crate::catalog::Item;
use crate::catalog::{Catalog, Quarantined};
use crate::naming::exposed_name;
use crate::pin::events::{Event, events};
use crate::telemetry::record;

/// Writes the guard's events of every catalog `catalog` publishes, from the first (compared
/// with an empty catalog, so what the guard held at start is logged too) until `shutdown`,
/// to the log `audit` returns at that moment (a reload may change it); counts them in the
/// metrics.
pub async fn journal(
    mut catalog: watch::Receiver<Arc<Catalog>>,
    audit: impl Fn() -> Audit + Send,
    shutdown: CancellationToken,
) {
    let mut seen = Arc::new(Catalog::default());
    loop {
        let now = catalog.borrow_and_update().clone();
        if !Arc::ptr_eq(&seen, &now) {
            let audit = audit();
            for event in events(&seen, &now) {
                let id = new_id();
                let exposed = match event {
                    Event::Quarantined(q) | Event::Released(q) => Some(match q.kind {
                        // Templates keep their own URI template: they are not namespaced.
                        Item::Template => q.name.clone(),
                        Item::Tool | Item::Prompt => {
                            exposed_name(&q.server, &q.name, now.separator())
                        }
                    }),
                    Event::Sanitized { .. } => None,
                };
                audit.event(&entry(&event, exposed.as_deref(), &id));
                count(&event);
            }
            seen = now;
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = catalog.changed() => if changed.is_err() { return },
        }
    }
}

/// The audit line of `event`; `tool`: a quarantined tool's or prompt's exposed name (a
/// template's URI template).
#[must_use]
pub fn entry<'a>(event: &Event<'a>, tool: Option<&'a str>, audit_id: &'a str) -> Entry<'a> {
    match *event {
        Event::Quarantined(q) | Event::Released(q) => {
            let released = matches!(event, Event::Released(_));
            Entry {
                event: if released { "release" } else { "quarantine" },
                method: q.kind.list_method(),
                reason: Some(q.reason),
                old_hash: q.old.as_deref(),
                new_hash: (!released).then_some(q.new.as_str()),
                changed: (!q.changed.is_empty()).then_some(q.changed.as_slice()),
                ..of_tool(q, tool, audit_id)
            }
        }
        Event::Sanitized { server, report } => Entry {
            event: "sanitize",
            audit_id,
            method: list_of(report.kind),
            tool: None,
            upstream: Some(format!("{server}/{}", report.name)),
            reason: Some(report.kind),
            removed: (report.removed.total() > 0).then_some(report.removed),
            flags: (!report.flags.is_empty())
                .then(|| report.flags.iter().map(|h| h.rule).collect()),
            score: (!report.flags.is_empty()).then(|| report.score()),
            ..Entry::default()
        },
    }
}

/// A request `method` that names quarantined `q` (as `tool`) refused: its line. `method` is
/// `tools/call`, or `prompts/get` / `completion/complete` of a quarantined prompt.
pub fn refusal(
    audit: &Audit,
    q: &Quarantined,
    method: &str,
    tool: &str,
    principal: &str,
    session: &str,
) {
    if !audit.is_on() {
        return;
    }
    let id = new_id();
    audit.event(&Entry {
        event: "refusal",
        principal,
        session,
        method,
        reason: Some(q.reason),
        error_type: Some(q.error_type().to_owned()),
        old_hash: q.old.as_deref(),
        new_hash: Some(&q.new),
        changed: (!q.changed.is_empty()).then_some(q.changed.as_slice()),
        ..of_tool(q, Some(tool), &id)
    });
}

fn of_tool<'a>(q: &'a Quarantined, tool: Option<&'a str>, audit_id: &'a str) -> Entry<'a> {
    Entry {
        audit_id,
        tool,
        upstream: Some(format!("{}/{}", q.server, q.name)),
        ..Entry::default()
    }
}

/// The list method an item of `kind` comes from.
fn list_of(kind: &str) -> &'static str {
    match kind {
        "prompt" => "prompts/list",
        "resource" => "resources/list",
        "template" => "resources/templates/list",
        _ => "tools/list",
    }
}

/// The metrics of `event`: characters removed by class, steering flags.
fn count(event: &Event<'_>) {
    if let Event::Sanitized { server, report } = event {
        record::sanitized(server, record::DEFINITION, &report.removed);
        if report.score() >= crate::sanitize::flag::THRESHOLD {
            record::flagged(server);
        }
    }
}
