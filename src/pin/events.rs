//! What the guard newly found between two catalogs: the events the audit log and the metrics
//! record once each ([`crate::audit::guard`]), however often an upstream is listed again.
//!
//! State, not a stream: comparing the last catalog seen with the current one finds the same
//! events whether the reader saw every version in between or not.
//!
//! ```
//! use mcp_budget::catalog::{Catalog, Contribution, Held};
//! use mcp_budget::pin::{self, events::{events, Event}};
//! use serde_json::json;
//!
//! let raw = vec![Contribution {
//!     tools: vec![json!({"name": "add", "description": "Adds\u{200b}"})],
//!     ..Contribution::default()
//! }];
//! let names = ["calc".to_owned()];
//! let guard = |_: usize, raw: &Contribution, held: &Held| {
//!     pin::admit("calc", raw, held, &Default::default(), &Default::default())
//! };
//! let first = Catalog::build_guarded(raw.clone(), &names, "__", 1, &Catalog::default(), guard);
//! assert!(matches!(events(&Catalog::default(), &first)[..], [Event::Sanitized { .. }]));
//! let again = Catalog::build_guarded(raw, &names, "__", 2, &first, guard);
//! assert!(events(&first, &again).is_empty(), "listed again: nothing new");
//! ```

use crate::catalog::{Catalog, Quarantined};
use crate::sanitize::ItemReport;

/// One thing the guard newly found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// A tool, prompt or template held out of the catalog (or held again for another reason
    /// or hash).
    Quarantined(&'a Quarantined),
    /// A tool, prompt or template held before and served now (approved, or changed back);
    /// its server is still there.
    Released(&'a Quarantined),
    /// Sanitizing removed characters from, or flagged, an item of `server`.
    Sanitized {
        /// The upstream's name.
        server: &'a str,
        /// What was found.
        report: &'a ItemReport,
    },
}

/// The events of `after` that `before` did not have, upstream by upstream (matched by name).
#[must_use]
pub fn events<'a>(before: &'a Catalog, after: &'a Catalog) -> Vec<Event<'a>> {
    let mut out = Vec::new();
    for (server, now) in after.names().iter().zip(after.held()) {
        let was = before
            .names()
            .iter()
            .position(|n| n == server)
            .and_then(|i| before.held().get(i));
        let held: &[Quarantined] = was.map_or(&[], |h| &h.quarantined);
        let reports: &[ItemReport] = was.map_or(&[], |h| &h.reports);
        out.extend(
            now.quarantined
                .iter()
                .filter(|q| !held.contains(q))
                .map(Event::Quarantined),
        );
        out.extend(
            held.iter()
                .filter(|q| {
                    !now.quarantined
                        .iter()
                        .any(|n| n.kind == q.kind && n.name == q.name)
                })
                .map(Event::Released),
        );
        out.extend(
            now.reports
                .iter()
                .filter(|r| !reports.contains(r))
                .map(|report| Event::Sanitized { server, report }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Contribution, Held};
    use crate::pin::{Lock, Rules, admit};
    use serde_json::json;

    fn catalog(tools: Vec<serde_json::Value>, previous: &Catalog, rules: &Rules) -> Catalog {
        let raw = vec![Contribution {
            tools,
            ..Contribution::default()
        }];
        let guard = |_: usize, raw: &Contribution, held: &Held| {
            admit("calc", raw, held, &crate::sanitize::Rules::default(), rules)
        };
        let version = previous.version() + 1;
        Catalog::build_guarded(raw, &["calc".into()], "__", version, previous, guard)
    }

    fn add(description: &str) -> serde_json::Value {
        json!({"name": "add", "description": description, "inputSchema": {"type": "object"}})
    }

    #[test]
    fn a_rug_pull_is_one_quarantine_however_often_it_is_listed() {
        let rules = Rules::default();
        let empty = Catalog::default();
        let v1 = catalog(vec![add("Adds")], &empty, &rules);
        assert!(events(&empty, &v1).is_empty(), "trusted, clean");
        let v2 = catalog(vec![add("Adds and subtracts")], &v1, &rules);
        let found = events(&v1, &v2);
        let [Event::Quarantined(q)] = found[..] else {
            panic!("{found:?}")
        };
        assert_eq!((q.name.as_str(), q.reason), ("add", "changed"));
        let v3 = catalog(vec![add("Adds and subtracts")], &v2, &rules);
        assert!(events(&v2, &v3).is_empty(), "listed again");
        assert_eq!(events(&v1, &v3).len(), 1, "versions skipped: still one");
        let v4 = catalog(vec![add("Adds")], &v3, &rules);
        assert!(matches!(events(&v3, &v4)[..], [Event::Released(q)] if q.name == "add"));
    }

    #[test]
    fn a_tool_missing_from_the_lock_is_quarantined_once_from_the_start() {
        let rules = Rules {
            lock: Some(Lock::default()),
            ..Rules::default()
        };
        let empty = Catalog::default();
        let v1 = catalog(vec![add("Adds\u{200b}")], &empty, &rules);
        let found = events(&empty, &v1);
        assert!(
            matches!(found[..], [Event::Quarantined(q), Event::Sanitized { server: "calc", report }]
                if q.reason == "unknown" && report.removed.invisible == 1),
            "{found:?}"
        );
        assert!(events(&v1, &catalog(vec![add("Adds\u{200b}")], &v1, &rules)).is_empty());
    }
}
