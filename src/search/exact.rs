//! The exact-name fallback: a query that is a tool's name, or says one as an identifier
//! (`read_file`, `filesystem/read_file`, `filesystem__read_file`, `getCurrentTime`), ranks
//! that tool first, whatever the words around it score.
//!
//! Models that search often write the name they expect (`search_tools("read_file")`), and a
//! user who names a tool means it. A name that is one plain word (`search`, `fetch`) counts
//! only when it is the whole query or server-qualified: as a word of a sentence it is just a
//! word. Several tools of one name (two servers' `read_file`) all go first, in the order the
//! ranking gave them; a server-qualified name picks its server's only.

use std::collections::HashMap;

use super::Hit;
use crate::catalog::CatalogTool;

/// Exact names → the tools they name.
#[derive(Debug, Default)]
pub(super) struct ExactNames {
    /// Lowercased `name`, `server/name`, the exposed name (and `server__name`) → tools.
    names: HashMap<String, Vec<u32>>,
}

impl ExactNames {
    pub(super) fn build(tools: &[CatalogTool]) -> Self {
        let mut names: HashMap<String, Vec<u32>> = HashMap::new();
        for (doc, tool) in tools.iter().enumerate() {
            let doc = u32::try_from(doc).expect("fewer than 2^32 tools");
            let mut forms = vec![
                tool.name.to_lowercase(),
                format!("{}/{}", tool.server, tool.name).to_lowercase(),
                format!("{}__{}", tool.server, tool.name).to_lowercase(),
            ];
            if let Some(exposed) = tool.catalog_name() {
                forms.push(exposed.to_lowercase());
            }
            forms.sort_unstable();
            forms.dedup();
            for form in forms {
                names.entry(form).or_default().push(doc);
            }
        }
        Self { names }
    }

    /// The tools `query` names exactly (see the module docs), the most specific form first.
    pub(super) fn named(&self, query: &str) -> Vec<u32> {
        if self.names.is_empty() {
            return Vec::new();
        }
        let whole = trim(query);
        let mut found: Vec<u32> = Vec::new();
        let chunks = query.split_whitespace().map(trim);
        for chunk in std::iter::once(whole).chain(chunks) {
            if chunk.is_empty() || !(chunk == whole || is_identifier(chunk)) {
                continue;
            }
            if let Some(docs) = self.names.get(&chunk.to_lowercase()) {
                for &doc in docs {
                    if !found.contains(&doc) {
                        found.push(doc);
                    }
                }
            }
        }
        found
    }
}

/// `hits` (best first) with the tools of `named` moved to the front, in their order among the
/// hits (those not among them after, in `named` order).
pub(super) fn promote(hits: &mut Vec<Hit>, named: &[u32]) {
    if named.is_empty() {
        return;
    }
    let best = hits.first().map_or(0.0, |h| h.score);
    let is_named = |i: usize| named.iter().any(|&d| d as usize == i);
    let mut front: Vec<Hit> = hits.iter().copied().filter(|h| is_named(h.index)).collect();
    hits.retain(|h| !is_named(h.index));
    for &doc in named {
        let doc = doc as usize;
        if !front.iter().any(|h| h.index == doc) {
            front.push(Hit {
                index: doc,
                score: best,
            });
        }
    }
    let top = front.iter().map(|h| h.score).fold(best, f32::max);
    let count = front.len();
    for (i, hit) in front.iter_mut().enumerate() {
        // Above every other hit, in the order found.
        hit.score = top + (count - i) as f32;
    }
    front.append(hits);
    *hits = front;
}

/// A chunk without the quotes, brackets and sentence punctuation around it.
fn trim(chunk: &str) -> &str {
    chunk
        .trim()
        .trim_matches(|c: char| "\"'`()[]{}<>".contains(c))
        .trim_end_matches(|c: char| ".,:;?!".contains(c))
        .trim_matches(|c: char| "\"'`()[]{}<>".contains(c))
}

/// Whether `chunk` is written as an identifier: with `_`, `-`, `/`, `.` between word
/// characters, or in camelCase.
fn is_identifier(chunk: &str) -> bool {
    let chars: Vec<char> = chunk.chars().collect();
    chars
        .windows(3)
        .any(|w| w[0].is_alphanumeric() && "_-/.".contains(w[1]) && w[2].is_alphanumeric())
        || chars
            .windows(2)
            .any(|w| w[0].is_lowercase() && w[1].is_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<CatalogTool> {
        [
            ("filesystem", "read_file"),
            ("desktop-commander", "read_file"),
            ("fetch", "fetch"),
            ("time", "getCurrentTime"),
        ]
        .iter()
        .map(|(s, n)| CatalogTool::new(s, json!({"name": n})).unwrap())
        .collect()
    }

    #[test]
    fn identifiers_and_whole_queries_name_tools() {
        let exact = ExactNames::build(&tools());
        assert_eq!(exact.named("read_file"), [0, 1]);
        assert_eq!(exact.named("call `read_file` on notes.txt"), [0, 1]);
        assert_eq!(exact.named("desktop-commander/read_file please"), [1]);
        assert_eq!(exact.named("filesystem__read_file"), [0]);
        assert_eq!(exact.named("what does getCurrentTime say?"), [3]);
        assert_eq!(exact.named("Fetch"), [2]);
        // A plain word inside a sentence is only a word.
        assert!(exact.named("fetch the page").is_empty());
        assert!(exact.named("read the file").is_empty());
    }

    #[test]
    fn named_tools_go_first_in_order() {
        let mut hits = vec![
            Hit {
                index: 5,
                score: 3.0,
            },
            Hit {
                index: 1,
                score: 1.0,
            },
        ];
        promote(&mut hits, &[0, 1]);
        let order: Vec<usize> = hits.iter().map(|h| h.index).collect();
        assert_eq!(order, [1, 0, 5]);
        assert!(hits[0].score > hits[1].score && hits[1].score > hits[2].score);
    }
}
