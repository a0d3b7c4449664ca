//! The value model of the hybrid rung: which tools are most worth listing directly when not
//! every tool can be.
//!
//! The hybrid rung lists a prefix of one fixed order, so the order alone says what is worth
//! most. Most useful first:
//!
//! 1. **pinned** tools (`pin = true`, `never_defer`): the operator said so;
//! 2. then **rounds across servers** (water-filling): every server's best tool, then every
//!    server's second best, and so on, a server leaving the rounds when it has nothing left.
//!    Any prefix of this order is a max-min fair share of its length over the servers' tool
//!    counts: a server with fewer tools than its share is listed whole and the slots it does
//!    not need go to the others equally. So whatever the tool cap and the token budget leave
//!    room for, no server gets more than one tool more than another that still has tools to
//!    list, pins aside (a desktop host's `everything` 13 tools, GitHub's 26 and `time` 2 under Sonnet's 20
//!    tools used to list 13 + 2 of 26 + 2: "smallest server first" after two rounds). Pinned
//!    tools take their server's first rounds. Within a round, **called** tools first (most
//!    calls first, [`Rules::usage`]), then **cheaper** ones (the prefix stops at the first tool
//!    that does not fit, so a dear one late in a round costs the fewest others);
//! 3. a server's own order (what "best" means): **most calls first** when the deployment's
//!    usage is known (`[budget] usage_file`): what a deployment really calls beats any guess
//!    from names; else the prior: **read-only and common operations** first (`readOnlyHint:
//!    true`, or a name whose first verb is get/list/search/read/find/…), then the others,
//!    **destructive** ones last (`destructiveHint: true`, or delete/remove/…): reads are the
//!    most frequent calls and the safest to offer without a search step;
//! 4. then **cheaper** tools first (tokens listed uncompressed), then the tool name.
//!
//! A description's "generality" is not scored: no lexical measure of it held up (length
//! rewards verbosity, word lists reward the test set), and cost order already favours simple
//! tools. The order depends only on the catalog, uncompressed costs and the rules, never on the
//! budget, which keeps the planner monotone; and on tool ids, never on arrival order, which
//! keeps it deterministic.

use std::cmp::Reverse;
use std::collections::HashMap;

use serde_json::Value;

use super::Rules;
use crate::catalog::CatalogTool;
use crate::tokens::Measured;

/// Name verbs of operations that only read.
const READ_VERBS: &[&str] = &[
    "get",
    "list",
    "search",
    "read",
    "find",
    "fetch",
    "query",
    "show",
    "describe",
    "view",
    "lookup",
    "browse",
    "check",
    "count",
    "inspect",
    "explain",
    "summarize",
    "validate",
];

/// Name verbs of operations that destroy.
const DESTRUCTIVE_VERBS: &[&str] = &[
    "delete",
    "remove",
    "drop",
    "destroy",
    "purge",
    "erase",
    "kill",
    "terminate",
    "wipe",
    "truncate",
    "reset",
    "revoke",
    "unprotect",
    "archive",
];

/// What a tool does, by its annotations, else by the first verb in its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Operation {
    /// Only reads (`readOnlyHint: true`, or a read verb).
    Read,
    /// Writes, or unknown.
    Write,
    /// Destroys (`destructiveHint: true`, or a destructive verb).
    Destroy,
}

impl Operation {
    /// The operation of `tool`: explicit annotations win over the name.
    pub(crate) fn of(tool: &CatalogTool) -> Self {
        let hint = |key: &str| {
            tool.definition
                .get("annotations")
                .and_then(|a| a.get(key))
                .and_then(Value::as_bool)
        };
        if hint("readOnlyHint") == Some(true) {
            return Self::Read;
        }
        // The MCP default of `destructiveHint` is true for tools that write, so only an explicit
        // true counts: an unannotated tool is judged by its name.
        if hint("destructiveHint") == Some(true) {
            return Self::Destroy;
        }
        // The first word that is a known verb: `get_issue`, `actions_list`, `getStory`.
        let verb = |w: &str| {
            let known = |verbs: &[&str]| verbs.iter().any(|v| v.eq_ignore_ascii_case(w));
            if known(READ_VERBS) {
                Some(true)
            } else if known(DESTRUCTIVE_VERBS) {
                Some(false)
            } else {
                None
            }
        };
        match words(&tool.name).find_map(verb) {
            Some(true) if hint("readOnlyHint") == Some(false) => Self::Write,
            Some(true) => Self::Read,
            Some(false) => Self::Destroy,
            None => Self::Write,
        }
    }
}

/// The words of a tool name, without allocating: `getStory` → `get`, `Story`; `list-files` →
/// `list`, `files`.
fn words(name: &str) -> impl Iterator<Item = &str> {
    let mut rest = name;
    std::iter::from_fn(move || {
        rest = rest.trim_start_matches(|c: char| !c.is_alphanumeric());
        let mut chars = rest.char_indices();
        chars.next()?;
        let end = chars
            .find(|&(_, c)| !c.is_alphanumeric() || c.is_uppercase())
            .map_or(rest.len(), |(i, _)| i);
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(word)
    })
}

/// Catalog indices, most useful first (see the module doc). Pinned tools come first;
/// `only_pinned` keeps them alone (the `progressive` mode lists nothing else).
pub(crate) fn order(
    catalog: &[CatalogTool],
    measured: &Measured,
    rules: &Rules,
    only_pinned: bool,
) -> Vec<usize> {
    let pinned = |i: usize| rules.pins.get(i).copied().unwrap_or(false);
    let used = |i: usize| rules.usage.get(i).copied().unwrap_or(0);
    let off = |i: usize| measured.tools[i].direct[0];
    // Servers by name, as numbers: sorting then compares integers, not server names.
    let mut names: Vec<&str> = catalog.iter().map(|t| t.server.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let server_rank: HashMap<&str, usize> =
        names.iter().enumerate().map(|(r, &n)| (n, r)).collect();
    // Per tool once, so that sorting compares plain numbers (a warm `tools/list` plans every
    // time): a server's own order is most calls first, reads first, cheaper first, then the
    // name (never the arrival order).
    let keys: Vec<(usize, Reverse<u64>, Operation, usize)> = catalog
        .iter()
        .enumerate()
        .map(|(i, t)| {
            (
                server_rank[t.server.as_str()],
                Reverse(used(i)),
                Operation::of(t),
                off(i),
            )
        })
        .collect();
    let own = |i: usize| (keys[i], catalog[i].name.as_str());
    let mut all: Vec<usize> = (0..catalog.len()).collect();
    all.sort_by(|&a, &b| own(a).cmp(&own(b)));
    // Pinned tools first, each server's in its own order.
    let mut out: Vec<usize> = all.iter().copied().filter(|&i| pinned(i)).collect();
    if only_pinned {
        return out;
    }
    // Water-filling: a tool's round is its place in its server's order, pinned tools counted
    // first (they take their server's first rounds); every prefix of the rounds is a max-min
    // fair share of its length.
    let mut round = vec![0usize; catalog.len()];
    let mut placed: HashMap<&str, usize> = HashMap::new();
    for &i in out.iter().chain(all.iter().filter(|&&i| !pinned(i))) {
        let next = placed.entry(catalog[i].server.as_str()).or_default();
        round[i] = *next;
        *next += 1;
    }
    let mut rest: Vec<usize> = all.into_iter().filter(|&i| !pinned(i)).collect();
    // Within a round: called tools first (most calls first), then cheaper first (the prefix
    // stops at the first tool that does not fit), then the server and the name.
    let fair = |i: usize| {
        (
            round[i],
            keys[i].1,
            keys[i].3,
            keys[i].0,
            catalog[i].name.as_str(),
        )
    };
    rest.sort_by(|&a, &b| fair(a).cmp(&fair(b)));
    out.extend(rest);
    out
}

/// Each server's max-min fair share of `slots` listed tools, by water-filling over the servers'
/// tool counts (`sizes`, one per server): a server with fewer tools than an equal split gets
/// them all, the slots it leaves go to the others equally. What the rounds of the value
/// model (this module) give any prefix, to within one tool per server; `inspect` prints it beside what
/// each server got.
///
/// ```
/// use mcp_budget::plan::fair_shares;
///
/// // `time` 2 tools, `everything` 13, GitHub 26, 17 slots (Sonnet's cap less 3 meta-tools).
/// assert_eq!(fair_shares(&[2, 13, 26], 17), [2.0, 7.5, 7.5]);
/// assert_eq!(fair_shares(&[2, 3], 10), [2.0, 3.0]);
/// ```
#[must_use]
#[allow(clippy::cast_precision_loss)] // tool counts are far below 2^52
pub fn fair_shares(sizes: &[usize], slots: usize) -> Vec<f64> {
    let mut by_size: Vec<usize> = (0..sizes.len()).collect();
    by_size.sort_by_key(|&s| sizes[s]);
    let mut shares = vec![0.0; sizes.len()];
    let mut left = slots.min(sizes.iter().sum()) as f64;
    for (k, &s) in by_size.iter().enumerate() {
        let equal = left / (sizes.len() - k) as f64;
        shares[s] = equal.min(sizes[s] as f64);
        left -= shares[s];
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(server: &str, name: &str, annotations: &Value) -> CatalogTool {
        CatalogTool::new(server, json!({"name": name, "annotations": annotations})).unwrap()
    }

    #[test]
    fn operations_come_from_annotations_then_names() {
        let op = |name, annotations: Value| Operation::of(&tool("s", name, &annotations));
        assert_eq!(op("getStory", json!({})), Operation::Read);
        assert_eq!(op("list-files", json!({})), Operation::Read);
        assert_eq!(op("create_issue", json!({})), Operation::Write);
        assert_eq!(op("delete_file", json!({})), Operation::Destroy);
        assert_eq!(op("run", json!({"readOnlyHint": true})), Operation::Read);
        assert_eq!(
            op("get_and_bump", json!({"readOnlyHint": false})),
            Operation::Write
        );
        assert_eq!(
            op("apply", json!({"destructiveHint": true})),
            Operation::Destroy
        );
        assert_eq!(op("actions_list", json!({})), Operation::Read);
        assert_eq!(op("repo_delete", json!({})), Operation::Destroy);
        assert_eq!(
            words("__Get_meNow").collect::<Vec<_>>(),
            ["Get", "me", "Now"]
        );
    }

    #[test]
    fn order_is_pins_then_rounds_across_servers_used_then_reads_first() {
        let catalog = vec![
            tool("big", "delete_a", &json!({})),
            tool("big", "get_b", &json!({})),
            tool("big", "make_c", &json!({})),
            tool("small", "write_d", &json!({})),
            tool("small", "list_e", &json!({})),
            tool("big", "make_f", &json!({})),
        ];
        let measured = Measured {
            tools: vec![crate::tokens::ToolCounts::default(); catalog.len()],
            ..Measured::default()
        };
        let mut rules = Rules::new(super::super::Budget {
            tokens: 1000,
            tools: 10,
        });
        rules.pins = vec![false, false, true];
        rules.usage = vec![0, 0, 0, 0, 0, 7];
        let names = |order: Vec<usize>| -> Vec<&str> {
            order.iter().map(|&i| catalog[i].name.as_str()).collect()
        };
        assert_eq!(
            names(order(&catalog, &measured, &rules, false)),
            // `big` has a pin (its round 0): `small` opens; then the used tool, ahead of
            // `small`'s second in round 1; then `big` alone, reads before destroys.
            ["make_c", "list_e", "make_f", "write_d", "get_b", "delete_a"]
        );
        assert_eq!(names(order(&catalog, &measured, &rules, true)), ["make_c"]);
    }
}
