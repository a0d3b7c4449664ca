//! Search over the catalog: the index and the ranking behind `search_tools`.
//!
//! [`SearchIndex::build`] indexes each tool in eight fields, each with its own weight: the tool
//! name (split at `_`, `-` and camel case), its title, the server id, the description and its
//! first sentence, and the parameters' names, descriptions and enum values (nested ones
//! included). Ranking is BM25F (per-field length normalisation, one saturation), on
//! Snowball-stemmed terms without stop words, with CJK text as character unigrams and bigrams.
//! Tool-land abbreviations are expanded on both sides (`PRs` → `pull request`). Each query word
//! also looks for its equivalents in a small generic vocabulary of tool land (`fetch` ~ `get` ~
//! `retrieve`, `share` ~ `stock` ~ `ticker`, ...) at a lower weight; a tool whose name words are
//! covered by the query gets a bonus; the tools of a server the query names ("github") are
//! preferred; a query word no tool has is corrected to the tool-name words it is a typo of; a
//! verb before an article ("open a ticket", "file a bug") also means create.
//! Ties are broken by `server/tool` id, so results are deterministic. Building is a single pass
//! over the catalog (no training, no model), cheap enough to redo on every catalog change.
//!
//! ```
//! use mcp_budget::catalog::CatalogTool;
//! use mcp_budget::search::SearchIndex;
//! use serde_json::json;
//!
//! let tools = vec![
//!     CatalogTool::new("git", json!({"name": "git_log", "description": "Show the commit logs"}))?,
//!     CatalogTool::new("weather", json!({"name": "get_forecast", "description": "Weather forecast for a city"}))?,
//! ];
//! let index = SearchIndex::build(&tools);
//! let hits = index.search("what's the temperature tomorrow in Paris", 5);
//! assert_eq!(tools[hits[0].index].id(), "weather/get_forecast");
//! # Ok::<(), mcp_budget::catalog::CatalogError>(())
//! ```

pub mod eval;
mod exact;
mod fields;
mod fusion;
mod fuzzy;
mod server;
mod synonyms;
mod text;
mod vocabulary;

use std::collections::HashMap;

use crate::catalog::CatalogTool;
use fields::{
    DESCRIPTION, ENUM_VALUES, FIELDS, NAME, PARAM_DESCRIPTIONS, PARAMS, SERVER, field_texts,
    is_value_like,
};
pub use fusion::{Fusion, FusionRule};
use fuzzy::NameWords;
use server::ServerNames;
pub use text::one_line;
use text::{Analysis, Analyzer, StemCache};
pub use vocabulary::{MAX_VOCABULARY_ENTRIES, Vocabulary, VocabularyError};

/// A ranking method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ranker {
    /// Field-weighted BM25F with stemming, vocabulary expansion and name coverage (the default).
    #[default]
    Fielded,
    /// Plain BM25 over name + description + parameters as one bag of lower-cased words: the
    /// reference the default is measured against.
    Bm25,
}

/// One search result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// Position of the tool in the slice given to [`SearchIndex::build`].
    pub index: usize,
    /// Relevance score (higher is better; only comparable within one query).
    pub score: f32,
}

/// Tuning of the fielded ranker. Chosen once on general grounds (a name word says more than a
/// description word; long descriptions must not win by length) and checked on the dev queries.
#[derive(Clone, Copy, Debug)]
struct Tuning {
    weight: [f32; FIELDS],
    b: [f32; FIELDS],
    k1: f32,
    /// Weight of an equivalent word relative to the query's own word.
    synonym: f32,
    /// Bonus for a tool whose name words are all found in the query, scaled by the
    /// idf-weighted share found.
    name_coverage: f32,
    /// Weight of words inside argument-like spans of the query (paths, URLs, file names):
    /// they name what to act on, not what to do.
    value: f32,
    /// Exponent of the coordination factor: a score is multiplied by (share of the query's
    /// weighted terms the tool matches)^coord, so tools that answer more of the query win over
    /// tools that match one word strongly.
    coord: f32,
    /// Score boost (a factor of `1 + server`) for the tools of a server the query names.
    server: f32,
    /// Weight of a name word found by typo correction instead of the unknown query word.
    typo: f32,
}

/// Per field (in `fields` order: name, title, server, description, parameter names, lead,
/// parameter descriptions, enum values).
const FIELDED: Tuning = Tuning {
    weight: [3.0, 2.0, 1.5, 0.8, 0.4, 1.0, 0.3, 1.2],
    b: [0.3, 0.3, 0.3, 0.75, 0.75, 0.5, 0.75, 0.75],
    k1: 1.2,
    synonym: 0.5,
    name_coverage: 3.0,
    value: 0.3,
    coord: 0.5,
    server: 0.5,
    typo: 0.8,
};

const BM25: Tuning = Tuning {
    weight: [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    b: [0.75, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    k1: 1.2,
    synonym: 0.0,
    name_coverage: 0.0,
    value: 1.0,
    coord: 0.0,
    server: 0.0,
    typo: 0.0,
};

/// The usage prior moves only tools whose score is at least this share of the best one: usage
/// decides between close candidates and never lifts a weak match into the results. Chosen on
/// the dev queries with `scripts/eval-usage-prior.py` (at 0.8 an unrelated usage history already
/// cost hit@5 0.055 on one half; at 0.85, 0.008).
const PRIOR_GATE: f32 = 0.85;

/// Multiplies each hit scoring at least [`PRIOR_GATE`] of the best one by `1 + boost` (`boosts`
/// in `hits` order; empty: no usage prior).
fn apply_usage(hits: &mut [Hit], boosts: &[f32]) {
    if boosts.is_empty() {
        return;
    }
    let top = hits.iter().map(|h| h.score).fold(0.0f32, f32::max);
    for (hit, boost) in hits.iter_mut().zip(boosts) {
        if hit.score >= PRIOR_GATE * top {
            hit.score *= 1.0 + boost;
        }
    }
}

/// One document's occurrences of one term, per field.
#[derive(Clone, Copy, Debug)]
struct Posting {
    doc: u32,
    tf: [u16; FIELDS],
}

/// An index over a catalog; rebuild it when the catalog changes.
#[derive(Debug)]
pub struct SearchIndex {
    ranker: Ranker,
    tuning: Tuning,
    analyzer: Analyzer,
    /// Position of each document in `server/tool` id order, to break ties.
    tie_rank: Vec<u32>,
    terms: HashMap<String, u32>,
    postings: Vec<Vec<Posting>>,
    lengths: Vec<[f32; FIELDS]>,
    average: [f32; FIELDS],
    /// Sum of the idf of the distinct terms of each tool's name.
    name_idf: Vec<f32>,
    /// Term → its equivalents (stemmed), from [`synonyms::GROUPS`] and
    /// [`SearchIndex::add_vocabulary`].
    equivalents: HashMap<String, Vec<String>>,
    /// Which query terms name which servers.
    servers: ServerNames,
    /// Words of tool names, for typo correction.
    name_words: NameWords,
    /// Per tool, its usage boost (a factor of `1 + prior`; empty: none), from
    /// [`SearchIndex::set_usage`].
    prior: Vec<f32>,
    /// The largest entry `prior` may hold (the weight given to `set_usage`).
    prior_cap: f32,
    /// Exact tool names, for the exact-name fallback ([`exact`]).
    exact: exact::ExactNames,
}

impl SearchIndex {
    /// Indexes `tools` for the default ranker; hits refer to positions in `tools`.
    #[must_use]
    pub fn build(tools: &[CatalogTool]) -> Self {
        Self::build_with(tools, Ranker::default())
    }

    /// Indexes `tools` for `ranker`.
    #[must_use]
    pub fn build_with(tools: &[CatalogTool], ranker: Ranker) -> Self {
        let (analysis, tuning) = match ranker {
            Ranker::Fielded => (Analysis::Full, FIELDED),
            Ranker::Bm25 => (Analysis::Plain, BM25),
        };
        let analyzer = Analyzer::new(analysis);
        let mut index = Self {
            ranker,
            tuning,
            analyzer,
            tie_rank: tie_ranks(tools),
            terms: HashMap::new(),
            postings: Vec::new(),
            lengths: Vec::with_capacity(tools.len()),
            average: [0.0; FIELDS],
            name_idf: vec![0.0; tools.len()],
            equivalents: HashMap::new(),
            servers: ServerNames::default(),
            name_words: NameWords::default(),
            prior: Vec::new(),
            prior_cap: 0.0,
            exact: exact::ExactNames::build(tools),
        };
        let mut cache = StemCache::default();
        for (doc, tool) in tools.iter().enumerate() {
            index.add(doc, tool, &mut cache);
        }
        if !tools.is_empty() {
            let n = tools.len() as f32;
            for f in 0..FIELDS {
                let total: f32 = index.lengths.iter().map(|l| l[f]).sum();
                index.average[f] = (total / n).max(1.0);
            }
        }
        for postings in &index.postings {
            let idf = idf(tools.len(), postings.len());
            for p in postings.iter().filter(|p| p.tf[NAME] > 0) {
                index.name_idf[p.doc as usize] += idf;
            }
        }
        if tuning.synonym > 0.0 {
            index.equivalents = equivalents(&index.analyzer);
        }
        if tuning.server > 0.0 {
            index.servers = ServerNames::build(
                tools,
                &index.analyzer,
                |term| index.mentions(term),
                |term| index.equivalents.contains_key(term),
            );
        }
        index.name_words.finish();
        index
    }

    /// The documents that have `term` in a field other than the server id.
    fn mentions(&self, term: &str) -> Vec<u32> {
        let Some(&id) = self.terms.get(term) else {
            return Vec::new();
        };
        self.postings[id as usize]
            .iter()
            .filter(|p| (0..FIELDS).any(|f| f != SERVER && p.tf[f] > 0))
            .map(|p| p.doc)
            .collect()
    }

    /// The ranker this index was built for.
    #[must_use]
    pub fn ranker(&self) -> Ranker {
        self.ranker
    }

    /// Number of indexed tools.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether the index has no tools.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    fn add(&mut self, doc: usize, tool: &CatalogTool, cache: &mut StemCache) {
        let fields = field_texts(tool);
        if self.tuning.typo > 0.0 {
            let (names, analyzer) = (&mut self.name_words, &self.analyzer);
            text::words(&tool.name, |word, cjk| {
                if !cjk {
                    names.add(word, analyzer);
                }
            });
        }
        let mut counts: HashMap<String, [u16; FIELDS]> = HashMap::new();
        let mut lengths = [0.0; FIELDS];
        for (f, texts) in fields.iter().enumerate() {
            // The baseline is one bag of name + description + parameter words.
            let target = match self.ranker {
                Ranker::Fielded => f,
                Ranker::Bm25
                    if matches!(
                        f,
                        NAME | DESCRIPTION | PARAMS | PARAM_DESCRIPTIONS | ENUM_VALUES
                    ) =>
                {
                    NAME
                }
                Ranker::Bm25 => continue,
            };
            for text in texts {
                for term in self.analyzer.terms_cached(text, cache) {
                    let tf = counts.entry(term).or_default();
                    tf[target] = tf[target].saturating_add(1);
                    lengths[target] += 1.0;
                }
            }
        }
        let doc = u32::try_from(doc).expect("fewer than 2^32 tools");
        let mut sorted: Vec<(String, [u16; FIELDS])> = counts.into_iter().collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (term, tf) in sorted {
            let next = u32::try_from(self.postings.len()).expect("fewer than 2^32 terms");
            let id = *self.terms.entry(term).or_insert(next);
            if id == next {
                self.postings.push(Vec::new());
            }
            self.postings[id as usize].push(Posting { doc, tf });
        }
        self.lengths.push(lengths);
    }

    /// The best `limit` tools for `query`, best first; ties in id order. Tools that share no
    /// term with the query are not returned.
    #[must_use]
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        if limit == 0 || self.is_empty() {
            return Vec::new();
        }
        let hits = self.scored(query);
        self.exact_first(query, self.top(hits, limit), limit)
    }

    /// [`Self::search`] fused with dense scores: `dense[i]` is the cosine of the query's
    /// embedding with tool `i`'s ([`crate::semantic`]), one per indexed tool. `None` (or a
    /// slice of another length) is the lexical search. The rule and its weights are
    /// [`Fusion::default`]'s.
    #[must_use]
    pub fn search_fused(&self, query: &str, limit: usize, dense: Option<&[f32]>) -> Vec<Hit> {
        self.search_fused_with(query, limit, dense, Fusion::default())
    }

    /// [`Self::search_fused`] with another fusion (for tuning on labelled queries).
    #[must_use]
    pub fn search_fused_with(
        &self,
        query: &str,
        limit: usize,
        dense: Option<&[f32]>,
        fusion: Fusion,
    ) -> Vec<Hit> {
        let dense = dense.filter(|d| d.len() == self.len());
        let Some(dense) = dense.filter(|_| limit > 0) else {
            return self.search(query, limit);
        };
        let lexical = self.scored(query);
        let hits = fusion::fuse(&lexical, dense, fusion);
        self.exact_first(query, self.top(hits, limit), limit)
    }

    /// `hits` (the best `limit`, best first) with the tools `query` names exactly first
    /// ([`exact`]), still at most `limit`.
    fn exact_first(&self, query: &str, mut hits: Vec<Hit>, limit: usize) -> Vec<Hit> {
        if self.ranker == Ranker::Fielded {
            exact::promote(&mut hits, &self.exact.named(query));
            hits.truncate(limit);
        }
        hits
    }

    /// The best `limit` of `hits`, best first, ties in id order.
    fn top(&self, mut hits: Vec<Hit>, limit: usize) -> Vec<Hit> {
        let order = |a: &Hit, b: &Hit| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| self.tie_rank[a.index].cmp(&self.tie_rank[b.index]))
        };
        if hits.len() > limit {
            hits.select_nth_unstable_by(limit - 1, order);
            hits.truncate(limit);
        }
        hits.sort_unstable_by(order);
        hits
    }

    /// Every tool that shares a term with `query`, with its lexical score, in index order.
    fn scored(&self, query: &str) -> Vec<Hit> {
        if self.is_empty() {
            return Vec::new();
        }
        let concepts = self.query_terms(query);
        let query_weight: f32 = concepts.iter().map(|(_, w)| w).sum();
        let named = self.servers.named(concepts.iter().map(|(t, _)| t.as_str()));
        let n = self.len();
        let mut total = vec![0.0f32; n];
        let mut concept = vec![0.0f32; n];
        let mut name_hits = vec![0.0f32; n];
        let mut in_name = vec![0.0f32; n];
        let mut matched = vec![0.0f32; n];
        let mut touched: Vec<u32> = Vec::new();
        for (term, weight) in &concepts {
            let own_idf = self.idf_of(term);
            self.accumulate(
                term,
                *weight,
                own_idf,
                &mut concept,
                &mut in_name,
                &mut touched,
            );
            if let Some(others) = self.equivalents.get(term) {
                for other in others {
                    if !concepts.iter().any(|(t, _)| t == other) {
                        let weight = weight * self.tuning.synonym;
                        let (c, m) = (&mut concept, &mut in_name);
                        self.accumulate(other, weight, own_idf, c, m, &mut touched);
                    }
                }
            }
            for &doc in &touched {
                let d = doc as usize;
                total[d] += concept[d];
                concept[d] = 0.0;
                matched[d] += weight;
                name_hits[d] += in_name[d];
                in_name[d] = 0.0;
            }
            touched.clear();
        }
        let mut hits: Vec<Hit> = Vec::new();
        let mut boosts: Vec<f32> = Vec::new();
        for (doc, &score) in total.iter().enumerate() {
            if score <= 0.0 {
                continue;
            }
            let mut score = score;
            if self.tuning.coord > 0.0 {
                score *= (matched[doc] / query_weight).powf(self.tuning.coord);
            }
            let mut covered = 0.0;
            if self.tuning.name_coverage > 0.0 && self.name_idf[doc] > 0.0 {
                covered = (name_hits[doc] / self.name_idf[doc]).min(1.0);
                score += self.tuning.name_coverage * covered * covered;
            }
            if !named.is_empty() && named.binary_search(&self.servers.server_of(doc)).is_ok() {
                score *= 1.0 + self.tuning.server;
            }
            if let Some(&prior) = self.prior.get(doc) {
                // A tool whose whole name the query says gets the most any usage gives: a
                // popular tool never passes an exact match on its popularity alone.
                boosts.push(if covered >= 1.0 {
                    self.prior_cap
                } else {
                    prior
                });
            }
            hits.push(Hit { index: doc, score });
        }
        apply_usage(&mut hits, &boosts);
        hits
    }

    /// The distinct terms of a query with their weights: 1, or less inside argument-like spans.
    fn query_terms(&self, query: &str) -> Vec<(String, f32)> {
        let mut out: Vec<(String, f32)> = Vec::new();
        let chunks: Vec<&str> = query.split_whitespace().collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let value = self.ranker == Ranker::Fielded && is_value_like(chunk);
            let (weight, terms) = if value {
                (self.tuning.value, self.analyzer.literal_terms(chunk))
            } else {
                (1.0, self.analyzer.terms(chunk))
            };
            // "open a ticket": the verb means create; its own sense counts as an equivalent
            // (or not at all: "file a bug").
            let verb = (self.ranker == Ranker::Fielded)
                .then(|| synonyms::creates(chunk, chunks.get(i + 1).copied()))
                .flatten();
            let own = match verb {
                Some(true) => 0.0,
                Some(false) => self.tuning.synonym,
                None => 1.0,
            };
            if own > 0.0 {
                for term in terms {
                    add_term(&mut out, term, weight * own);
                }
            }
            if verb.is_some() {
                for term in self.analyzer.terms("create") {
                    add_term(&mut out, term, weight);
                }
            }
            if !value && self.tuning.typo > 0.0 {
                self.correct_typos(chunk, &mut out);
            }
        }
        out
    }

    /// Replaces the terms of `chunk`'s words that the index does not know by the tool-name
    /// words they are a typo of, at the typo weight.
    fn correct_typos(&self, chunk: &str, out: &mut Vec<(String, f32)>) {
        text::words(chunk, |word, cjk| {
            if cjk {
                return;
            }
            let Some(term) = self.analyzer.term(word) else {
                return;
            };
            if self.terms.contains_key(&term) {
                return;
            }
            let corrections = self.name_words.corrections(word);
            if corrections.is_empty() {
                return;
            }
            out.retain(|(t, _)| *t != term);
            for correction in corrections {
                add_term(out, correction.to_owned(), self.tuning.typo);
            }
        });
    }

    /// Makes the tools this deployment calls rank higher when scores are close: among the tools
    /// scoring at least 85 % of the best one, tool `i`'s score is multiplied by
    /// `1 + weight × ln(1 + calls[i]) / ln(1 + max calls)` (so at most by `1 + weight`, for the
    /// most called tool), and a tool whose every name word the query has gets the full
    /// `1 + weight` whatever its calls, so popularity alone never puts a tool above an exact
    /// match, and never lifts a weak match into the results. `weight` is clamped to `0..=1`; 0,
    /// or no calls at all, removes the prior. `calls` is indexed like the tools given to
    /// [`SearchIndex::build`] (missing entries: 0).
    ///
    /// ```
    /// use mcp_budget::catalog::CatalogTool;
    /// use mcp_budget::search::SearchIndex;
    /// use serde_json::json;
    ///
    /// let tools = vec![
    ///     CatalogTool::new("a", json!({"name": "search_files", "description": "Search for files"}))?,
    ///     CatalogTool::new("b", json!({"name": "find_files", "description": "Find files by name"}))?,
    /// ];
    /// let mut index = SearchIndex::build(&tools);
    /// let first = |index: &SearchIndex| tools[index.search("look for files", 2)[0].index].id();
    /// assert_eq!(first(&index), "a/search_files");
    /// index.set_usage(&[0, 40], 0.3); // this deployment calls b/find_files
    /// assert_eq!(first(&index), "b/find_files");
    /// # Ok::<(), mcp_budget::catalog::CatalogError>(())
    /// ```
    pub fn set_usage(&mut self, calls: &[u64], weight: f32) {
        let weight = weight.clamp(0.0, 1.0);
        let most = calls.iter().copied().max().unwrap_or(0);
        if weight == 0.0 || most == 0 {
            self.prior = Vec::new();
            self.prior_cap = 0.0;
            return;
        }
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)] // a share in 0..=1
        let scale = |n: u64| ((n as f64).ln_1p() / (most as f64).ln_1p()) as f32;
        self.prior = (0..self.len())
            .map(|i| weight * scale(calls.get(i).copied().unwrap_or(0)))
            .collect();
        self.prior_cap = weight;
    }

    /// Adds a deployment's own equivalents (`[discover] vocabulary_file`): each word of
    /// `vocabulary` also looks for its listed words, at the weight of the built-in equivalence
    /// groups (half the word's own). One way: the query's word finds the tools' words.
    ///
    /// ```
    /// use mcp_budget::catalog::CatalogTool;
    /// use mcp_budget::search::{SearchIndex, Vocabulary};
    /// use serde_json::json;
    ///
    /// let tools = vec![CatalogTool::new("gitlab", json!({"name": "create_merge_request", "description": "Open a merge request"}))?];
    /// let mut index = SearchIndex::build(&tools);
    /// assert!(index.search("my changeset", 1).is_empty());
    /// index.add_vocabulary(&Vocabulary::parse(r#"{"changeset": ["merge request"]}"#).unwrap());
    /// assert_eq!(index.search("my changeset", 1)[0].index, 0);
    /// # Ok::<(), mcp_budget::catalog::CatalogError>(())
    /// ```
    pub fn add_vocabulary(&mut self, vocabulary: &Vocabulary) {
        if self.tuning.synonym <= 0.0 {
            return;
        }
        for (word, others) in vocabulary.entries() {
            for stem in self.analyzer.terms(word) {
                let entry = self.equivalents.entry(stem.clone()).or_default();
                for other in others.iter().flat_map(|o| self.analyzer.terms(o)) {
                    if other != stem && !entry.contains(&other) {
                        entry.push(other);
                    }
                }
            }
        }
    }

    /// The words of `query` that tool `doc` has, by their own term or an equivalent one
    /// (`fetch` for a tool that says `get`): why a hit matched, in the user's words, lower-cased,
    /// in query order, each once. Stop words and words no field of the tool has are left out.
    ///
    /// ```
    /// use mcp_budget::catalog::CatalogTool;
    /// use mcp_budget::search::SearchIndex;
    /// use serde_json::json;
    ///
    /// let tools = vec![CatalogTool::new(
    ///     "github",
    ///     json!({"name": "get_issue", "description": "Get one issue of a repository"}),
    /// )?];
    /// let index = SearchIndex::build(&tools);
    /// // `fetch` is an equivalent of `get`, `repo` short for `repository`; "open" is not there.
    /// let words = index.matched_words("Fetch the open Issues of my repo", 0);
    /// assert_eq!(words, ["fetch", "issues", "repo"]);
    /// # Ok::<(), mcp_budget::catalog::CatalogError>(())
    /// ```
    #[must_use]
    pub fn matched_words(&self, query: &str, doc: usize) -> Vec<String> {
        let Ok(doc) = u32::try_from(doc) else {
            return Vec::new();
        };
        let has = |term: &str| {
            self.terms.get(term).is_some_and(|&id| {
                let postings = &self.postings[id as usize];
                postings.binary_search_by_key(&doc, |p| p.doc).is_ok()
            })
        };
        let mut out: Vec<String> = Vec::new();
        text::words(query, |word, _| {
            let hit = self.analyzer.terms(word).iter().any(|term| {
                has(term)
                    || (self.equivalents.get(term)).is_some_and(|eq| eq.iter().any(|e| has(e)))
            });
            let word = word.to_lowercase();
            if hit && !out.contains(&word) {
                out.push(word);
            }
        });
        out
    }

    /// Per query term, the score it gives tool `doc` (its own word and its equivalents), for
    /// debugging a ranking.
    #[doc(hidden)]
    #[must_use]
    pub fn explain(&self, query: &str, doc: usize) -> Vec<(String, f32)> {
        let mut out = Vec::new();
        let n = self.len();
        for (term, weight) in self.query_terms(query) {
            let mut concept = vec![0.0f32; n];
            let mut named = vec![0.0f32; n];
            let mut touched = Vec::new();
            let own_idf = self.idf_of(&term);
            self.accumulate(
                &term,
                weight,
                own_idf,
                &mut concept,
                &mut named,
                &mut touched,
            );
            let own = concept[doc];
            for other in self.equivalents.get(&term).into_iter().flatten() {
                let (c, m) = (&mut concept, &mut named);
                let weight = weight * self.tuning.synonym;
                self.accumulate(other, weight, own_idf, c, m, &mut touched);
                if concept[doc] > own {
                    out.push((format!("{term}~{other}"), concept[doc]));
                    concept[doc] = own;
                }
            }
            out.push((term, own));
        }
        out
    }

    /// The idf of `term` in this index; the highest possible for a term no tool has.
    fn idf_of(&self, term: &str) -> f32 {
        let df = self
            .terms
            .get(term)
            .map_or(0, |&id| self.postings[id as usize].len());
        idf(self.len(), df)
    }

    /// Adds `weight` × the BM25F score of `term` into `concept` (keeping the best of a word and
    /// its equivalents, so a concept counts once), and into `named` the weighted idf of the term
    /// for documents whose name has it. The term's idf is capped at `max_idf`: an equivalent
    /// word found in the catalog says no more than the word typed would have (`information`
    /// must not count as much as the rarer `metadata` it stands in for).
    fn accumulate(
        &self,
        term: &str,
        weight: f32,
        max_idf: f32,
        concept: &mut [f32],
        named: &mut [f32],
        touched: &mut Vec<u32>,
    ) {
        let Some(&id) = self.terms.get(term) else {
            return;
        };
        let postings = &self.postings[id as usize];
        let idf = idf(self.len(), postings.len()).min(max_idf);
        let t = &self.tuning;
        for p in postings {
            let d = p.doc as usize;
            let mut tf = 0.0;
            for f in 0..FIELDS {
                if p.tf[f] > 0 {
                    let norm = 1.0 - t.b[f] + t.b[f] * self.lengths[d][f] / self.average[f];
                    tf += t.weight[f] * f32::from(p.tf[f]) / norm;
                }
            }
            let score = weight * idf * tf * (t.k1 + 1.0) / (t.k1 + tf);
            if concept[d] == 0.0 {
                touched.push(p.doc);
            }
            if score > concept[d] {
                concept[d] = score;
            }
            if p.tf[NAME] > 0 && self.ranker == Ranker::Fielded {
                // The share of the name this concept covers: the term's idf, discounted like
                // its score (an equivalent word or an argument value counts less).
                named[d] = named[d].max(weight * idf);
            }
        }
    }
}

/// Adds `term` at `weight` to a query's terms, keeping the higher weight of a repeated term.
fn add_term(out: &mut Vec<(String, f32)>, term: String, weight: f32) {
    match out.iter_mut().find(|(t, _)| *t == term) {
        Some(seen) => seen.1 = seen.1.max(weight),
        None => out.push((term, weight)),
    }
}

/// BM25 inverse document frequency (never negative).
fn idf(docs: usize, df: usize) -> f32 {
    let (n, df) = (docs as f32, df as f32);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// Each tool's position in `server/tool` id order (then input order).
fn tie_ranks(tools: &[CatalogTool]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..tools.len()).collect();
    order.sort_by(|&a, &b| {
        let (ta, tb) = (&tools[a], &tools[b]);
        (ta.server.as_str(), ta.name.as_str(), a).cmp(&(tb.server.as_str(), tb.name.as_str(), b))
    });
    let mut rank = vec![0u32; tools.len()];
    for (position, doc) in order.into_iter().enumerate() {
        rank[doc] = u32::try_from(position).expect("fewer than 2^32 tools");
    }
    rank
}

/// Stemmed term → stemmed equivalents.
fn equivalents(analyzer: &Analyzer) -> HashMap<String, Vec<String>> {
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    for group in synonyms::GROUPS {
        let stems: Vec<String> = group.iter().filter_map(|w| analyzer.term(w)).collect();
        for stem in &stems {
            let entry = map.entry(stem.clone()).or_default();
            for other in &stems {
                if other != stem && !entry.contains(other) {
                    entry.push(other.clone());
                }
            }
        }
    }
    map
}

#[cfg(test)]
mod tests;
