//! Lexical and dense scores fused into one ranking (the semantic reranker of
//! [`crate::semantic`]): pure arithmetic on plain slices, so this room knows nothing of models.
//!
//! Dense retrieval alone ranks worse than the lexical ranker on tool search (it misses exact
//! names and rare words) but finds paraphrases the lexical ranker cannot; so the two are
//! fused, never swapped. Two rules, both tuned on the dev queries only
//! (`/work/shared/data/retrieval-dev.jsonl`, `docs/search.md` has the table):
//!
//! - [`FusionRule::Linear`]: each side scaled to 0..1 over the catalog (lexical by its best
//!   score; dense between the median cosine and the best, below the median counting 0), then
//!   `lexical + weight × dense`.
//! - [`FusionRule::Reciprocal`]: reciprocal-rank fusion, `1/(k + lexical rank) + weight/(k +
//!   dense rank)`, a tool without lexical match counting only its dense term.
//!
//! A tool that shares no word with the query is returned only on the strength of its cosine,
//! and only when that cosine is at least [`Fusion::floor`]: a query about nothing in the
//! catalog still finds nothing.

use super::Hit;

/// How the two rankings are combined.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum FusionRule {
    /// Scores scaled to 0..1, then summed with the dense side weighted.
    Linear,
    /// The lexical score scaled to 0..1 plus the weighted raw cosine.
    Cosine,
    /// Reciprocal-rank fusion with constant `k`.
    Reciprocal {
        /// The rank offset (60 in the literature; smaller favours the top ranks).
        k: f32,
    },
}

/// A fusion rule and its weights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fusion {
    /// The rule.
    pub rule: FusionRule,
    /// Weight of the dense side (the lexical side weighs 1).
    pub weight: f32,
    /// Least cosine for a tool without any lexical match to be returned at all.
    pub floor: f32,
    /// Only the lexical ranking's best `pool` tools (and those without a lexical match over
    /// the floor) are reordered, the rest stay below them in lexical order; 0: every tool.
    pub pool: usize,
}

impl Default for Fusion {
    /// The rule and weights that ranked best on the dev queries.
    fn default() -> Self {
        Self {
            rule: FusionRule::Linear,
            weight: 1.0,
            floor: 0.6,
            pool: 5,
        }
    }
}

/// `lexical` (the tools with a lexical score, any order) fused with `dense` (one cosine per
/// tool): every tool with a lexical score or a cosine of at least the floor.
pub(super) fn fuse(lexical: &[Hit], dense: &[f32], fusion: Fusion) -> Vec<Hit> {
    let n = dense.len();
    let mut lex = vec![0.0f32; n];
    for hit in lexical {
        lex[hit.index] = hit.score;
    }
    let keep = |i: usize| lex[i] > 0.0 || dense[i] >= fusion.floor;
    let fused: Vec<f32> = match fusion.rule {
        FusionRule::Linear => {
            let best = lex.iter().copied().fold(0.0f32, f32::max);
            let (median, top) = median_and_max(dense);
            let span = (top - median).max(f32::EPSILON);
            (0..n)
                .map(|i| {
                    let l = if best > 0.0 { lex[i] / best } else { 0.0 };
                    let d = ((dense[i] - median) / span).max(0.0);
                    l + fusion.weight * d
                })
                .collect()
        }
        FusionRule::Cosine => {
            let best = lex.iter().copied().fold(0.0f32, f32::max);
            (0..n)
                .map(|i| {
                    let l = if best > 0.0 { lex[i] / best } else { 0.0 };
                    l + fusion.weight * dense[i].max(0.0)
                })
                .collect()
        }
        FusionRule::Reciprocal { k } => {
            let lex_rank = ranks(&lex);
            let dense_rank = ranks(dense);
            (0..n)
                .map(|i| {
                    let l = if lex[i] > 0.0 {
                        1.0 / (k + lex_rank[i])
                    } else {
                        0.0
                    };
                    l + fusion.weight / (k + dense_rank[i])
                })
                .collect()
        }
    };
    let pooled = pool(lexical, n, fusion.pool);
    (0..n)
        .filter(|&i| keep(i))
        .map(|i| {
            // Outside the pool: below every pooled tool, in lexical order.
            let score = if pooled[i] || lex[i] <= 0.0 {
                fused[i] + POOLED
            } else {
                lex[i] / (1.0 + lex[i])
            };
            Hit { index: i, score }
        })
        .collect()
}

/// Added to the fused score of a pooled tool: more than any unpooled one has (< 1).
const POOLED: f32 = 1.0;

/// Which tools are in the lexical ranking's best `size` (all of them when `size` is 0).
fn pool(lexical: &[Hit], n: usize, size: usize) -> Vec<bool> {
    if size == 0 || size >= lexical.len() {
        return vec![true; n];
    }
    let mut order: Vec<&Hit> = lexical.iter().collect();
    order.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    let mut pooled = vec![false; n];
    for hit in order.into_iter().take(size) {
        pooled[hit.index] = true;
    }
    pooled
}

/// The median (the middle value in sorted order, the upper one of two) and the largest of
/// `values` (not empty): a selection, O(n), not a sort of the whole catalog's cosines per
/// query.
fn median_and_max(values: &[f32]) -> (f32, f32) {
    let top = values.iter().copied().max_by(f32::total_cmp).unwrap_or(0.0);
    let mut copy = values.to_vec();
    if copy.is_empty() {
        return (0.0, top);
    }
    let middle = copy.len() / 2;
    let (_, median, _) = copy.select_nth_unstable_by(middle, f32::total_cmp);
    (*median, top)
}

/// The 1-based rank of each value, highest first (ties in index order).
fn ranks(values: &[f32]) -> Vec<f32> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
    let mut rank = vec![0.0f32; values.len()];
    for (r, i) in order.into_iter().enumerate() {
        rank[i] = (r + 1) as f32;
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn the_median_is_the_sorted_middle(values in proptest::collection::vec(-1.0f32..1.0, 1..200)) {
            let mut sorted = values.clone();
            sorted.sort_unstable_by(f32::total_cmp);
            let (median, top) = median_and_max(&values);
            proptest::prop_assert_eq!(median, sorted[sorted.len() / 2]);
            proptest::prop_assert_eq!(top, sorted[sorted.len() - 1]);
        }
    }

    fn hit(index: usize, score: f32) -> Hit {
        Hit { index, score }
    }

    #[test]
    fn dense_scores_reorder_the_lexical_top_five() {
        // Tool 1 is second lexically but what the query means; tool 6 is sixth lexically and
        // closest in meaning, but outside the pool of five.
        let lexical = [
            hit(0, 2.0),
            hit(1, 1.5),
            hit(3, 1.4),
            hit(4, 1.3),
            hit(5, 1.2),
            hit(6, 1.1),
        ];
        let dense = [0.2, 0.7, 0.05, 0.1, 0.1, 0.1, 0.9];
        let fused = fuse(&lexical, &dense, Fusion::default());
        let score = |i: usize| fused.iter().find(|h| h.index == i).map(|h| h.score);
        assert!(score(1) > score(0), "{fused:?}");
        assert!(score(6) < score(5), "{fused:?}");
        // A tool without lexical match under the floor is not returned.
        assert_eq!(score(2), None);
    }

    #[test]
    fn reciprocal_rank_fusion_adds_both_ranks() {
        let lexical = [hit(0, 3.0), hit(1, 1.0)];
        let dense = [0.2, 0.9];
        let rule = FusionRule::Reciprocal { k: 1.0 };
        let fusion = Fusion {
            rule,
            weight: 1.0,
            floor: 0.0,
            pool: 0,
        };
        let fused = fuse(&lexical, &dense, fusion);
        // Each is first on one side and second on the other.
        assert!((fused[0].score - fused[1].score).abs() < 1e-6, "{fused:?}");
    }
}
