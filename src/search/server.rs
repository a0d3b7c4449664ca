//! Which servers a query names: "GitHub issues" prefers GitHub's issue tools over Sentry's,
//! "git log" the git server's over GitHub's.
//!
//! A server is named by a word of its id (`github`, `sentry`; not the generic `mcp`, `server`,
//! `api`, ...) or by the first word most of its tools' names share (`playwright_*`, `git_*`),
//! when that word is *distinctive*: at least half of the tools that mention it outside the
//! server field belong to that server. So `github` names the GitHub server (68 of the 70 tools
//! that mention it are GitHub's) but not `mcp-github-trending`, and `search` names no server even
//! though `google-search` and `duckduckgo-search` carry it. A word of the general vocabulary
//! (`src/search/synonyms.rs`: `get_*`, `generate_*`, `weather`, `chart`, `document`) names
//! nothing: it says what is wanted, not from whom, and the ranking already weighs it.

use std::collections::HashMap;

use super::text::{Analyzer, words};
use crate::catalog::CatalogTool;

/// Words of server ids that say nothing about which server it is.
const GENERIC: &[&str] = &[
    "agent", "api", "client", "cn", "mcp", "plugin", "server", "service", "tool", "tools",
];

/// Share of a server's tools whose names must start with the same word for it to name it.
const PREFIX_SHARE: f32 = 0.6;

/// Server aliases of a catalog.
#[derive(Debug, Default)]
pub(crate) struct ServerNames {
    /// Alias term → the servers it names (indices into `servers`), sorted.
    named_by: HashMap<String, Vec<u32>>,
    /// Each document's server (index into the distinct server ids).
    server_of: Vec<u32>,
}

impl ServerNames {
    /// Aliases of each server of `tools`. `mentions(term)` gives the documents that have `term`
    /// in a field other than the server id; `general(term)` whether it is a word of the general
    /// vocabulary.
    pub(crate) fn build(
        tools: &[CatalogTool],
        analyzer: &Analyzer,
        mentions: impl Fn(&str) -> Vec<u32>,
        general: impl Fn(&str) -> bool,
    ) -> Self {
        let mut ids: Vec<&str> = tools.iter().map(|t| t.server.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let server_of: Vec<u32> = tools
            .iter()
            .map(|t| {
                let at = ids.binary_search(&t.server.as_str()).expect("id is listed");
                u32::try_from(at).expect("fewer than 2^32 servers")
            })
            .collect();
        let mut named_by: HashMap<String, Vec<u32>> = HashMap::new();
        for (s, id) in ids.iter().enumerate() {
            let s = u32::try_from(s).expect("fewer than 2^32 servers");
            let mut candidates: Vec<String> = analyzer
                .literal_terms(id)
                .into_iter()
                .filter(|t| !GENERIC.contains(&t.as_str()))
                .collect();
            let names = tools
                .iter()
                .zip(&server_of)
                .filter(|&(_, &of)| of == s)
                .map(|(t, _)| t.name.as_str());
            candidates.extend(common_first_word(names, analyzer));
            for term in candidates.into_iter().filter(|t| !general(t)) {
                let docs = mentions(&term);
                let own = docs.iter().filter(|&&d| server_of[d as usize] == s).count();
                if own * 2 >= docs.len() {
                    let servers = named_by.entry(term).or_default();
                    if !servers.contains(&s) {
                        servers.push(s);
                        servers.sort_unstable();
                    }
                }
            }
        }
        Self {
            named_by,
            server_of,
        }
    }

    /// The servers `terms` name, sorted and without duplicates.
    pub(crate) fn named<'a>(&self, terms: impl IntoIterator<Item = &'a str>) -> Vec<u32> {
        let mut out: Vec<u32> = terms
            .into_iter()
            .filter_map(|t| self.named_by.get(t))
            .flatten()
            .copied()
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The server of document `doc`.
    pub(crate) fn server_of(&self, doc: usize) -> u32 {
        self.server_of[doc]
    }
}

/// The term of the first word shared by at least [`PREFIX_SHARE`] of `names` (at least two).
fn common_first_word<'a>(
    names: impl Iterator<Item = &'a str>,
    analyzer: &Analyzer,
) -> Option<String> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut total = 0usize;
    for name in names {
        total += 1;
        let mut first = None;
        words(name, |word, _| {
            if first.is_none() {
                first = Some(word.to_owned());
            }
        });
        if let Some(term) = first.and_then(|w| analyzer.term(&w)) {
            *counts.entry(term).or_default() += 1;
        }
    }
    let (term, count) = counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))?;
    let enough = count >= 2 && count as f32 >= PREFIX_SHARE * total as f32;
    enough.then_some(term)
}
