//! The value model of the hybrid rung: which tools are most worth listing directly when not
//! every tool can be.
//!
//! The hybrid rung lists a prefix of one fixed order, so the order alone says what is worth
//! most. Most useful first:
//!
//! 1. **pinned** tools (`pin = true`, `never_defer`): the operator said so;
//! 2. **used** tools, most calls first (`Rules::usage`): what a deployment really calls beats
//!    any guess from names;
//! 3. a **fair share first**: [`FAIR_ROUNDS`] rounds across servers — every server's best
//!    tool, then every server's second best — so that no server the user installed is left
//!    with nothing listed while another is listed whole (four servers, one of them GitHub's 26
//!    tools, used to list 15 demo tools and "0 of 26" GitHub ones). Within a round, cheaper
//!    tools first (the prefix stops at the first tool that does not fit, so a dear one late
//!    in a round costs the fewest others);
//! 4. then the rest **server by server, smallest server first** (fewest tools, then fewest
//!    tokens). A server listed whole shows the model its whole surface: it never has to
//!    wonder whether a sibling exists behind search. Small servers cost few slots of the tool
//!    cap; the big ones are split anyway, and split servers are what search and catalog lines
//!    handle best (many similar names, one vocabulary);
//! 5. a server's own order (what "best" means, in a round and after): **read-only and common
//!    operations** first (`readOnlyHint: true`, or a name whose first verb is
//!    get/list/search/read/find/…), then the others, **destructive** ones last
//!    (`destructiveHint: true`, or delete/remove/…): reads are the most frequent calls and the
//!    safest to offer without a search step;
//! 6. then **cheaper** tools first (tokens listed uncompressed), then the tool id.
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

/// Rounds across servers (each server's best tools) before the rest goes smallest server
/// first. Measured on the labelled set's servers, four at a time (`examples/direct_hits.rs`):
/// 2 keeps the direct-hit rate of "smallest server first" or better on Sonnet, Haiku and GPT-5
/// while no server is left with nothing listed (1 and 3 each lose on one model).
const FAIR_ROUNDS: usize = 2;

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
    // Server size: (tools, uncompressed tokens).
    let mut sizes: HashMap<&str, (usize, usize)> = HashMap::new();
    for (i, tool) in catalog.iter().enumerate() {
        let s = sizes.entry(tool.server.as_str()).or_default();
        s.0 += 1;
        s.1 += off(i);
    }
    // Servers by name, as numbers: sorting then compares integers, not server names (many
    // servers of one size tie on the size).
    let mut names: Vec<&str> = sizes.keys().copied().collect();
    names.sort_unstable();
    let server_rank: HashMap<&str, usize> =
        names.iter().enumerate().map(|(r, &n)| (n, r)).collect();
    // Per tool once, so that sorting compares plain numbers (a warm `tools/list` plans every
    // time): smallest server first, reads first, cheaper first, then the name (never the
    // arrival order).
    let keys: Vec<((usize, usize), usize, Operation, usize)> = catalog
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let server = t.server.as_str();
            (sizes[server], server_rank[server], Operation::of(t), off(i))
        })
        .collect();
    let rank = |i: usize| (keys[i], catalog[i].name.as_str());
    let mut pins: Vec<usize> = (0..catalog.len()).filter(|&i| pinned(i)).collect();
    pins.sort_by(|&a, &b| rank(a).cmp(&rank(b)));
    if only_pinned {
        return pins;
    }
    let mut used_tools: Vec<usize> = (0..catalog.len())
        .filter(|&i| !pinned(i) && used(i) > 0)
        .collect();
    used_tools.sort_by(|&a, &b| (Reverse(used(a)), rank(a)).cmp(&(Reverse(used(b)), rank(b))));
    let mut rest: Vec<usize> = (0..catalog.len())
        .filter(|&i| !pinned(i) && used(i) == 0)
        .collect();
    // Server by server first: a tool's place in its server's own order is the round it is
    // listed in.
    rest.sort_by(|&a, &b| rank(a).cmp(&rank(b)));
    let mut round = vec![0usize; catalog.len()];
    let mut placed: HashMap<&str, usize> = HashMap::new();
    for &i in &rest {
        let next = placed.entry(catalog[i].server.as_str()).or_default();
        round[i] = *next;
        *next += 1;
    }
    // The first rounds across servers (cheaper first within a round), then the rest as a
    // server's whole surface, smallest server first.
    let fair = |i: usize| {
        let first = if round[i] < FAIR_ROUNDS {
            (round[i], keys[i].3, keys[i].0, keys[i].1)
        } else {
            (FAIR_ROUNDS, 0, keys[i].0, keys[i].1)
        };
        (first, keys[i].2, keys[i].3, catalog[i].name.as_str())
    };
    rest.sort_by(|&a, &b| fair(a).cmp(&fair(b)));
    pins.extend(used_tools);
    pins.extend(rest);
    pins
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
    fn order_is_pins_then_usage_then_rounds_across_servers_reads_first() {
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
            ["make_c", "make_f", "list_e", "get_b", "write_d", "delete_a"]
        );
        assert_eq!(names(order(&catalog, &measured, &rules, true)), ["make_c"]);
    }
}
