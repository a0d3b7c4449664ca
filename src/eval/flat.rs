//! The fixed lists of the `flat-N` exposures: the queries split (seeded) into groups whose
//! gold tools fill at most half of N, each group with one list of its gold tools plus
//! distractors drawn (seeded) from the catalog — as a host's catalog is fixed, so each list's
//! tool block is computed once by the model server and reused from its prompt cache.
//!
//! ```
//! use mcp_budget::eval::flat::groups;
//! use mcp_budget::search::eval::Labelled;
//!
//! let rows: Vec<Labelled> = (0..6)
//!     .map(|i| Labelled::parse(&format!(r#"{{"query": "q{i}", "gold": ["s/t{i}"]}}"#), i + 1))
//!     .collect::<Result<_, _>>()?;
//! let catalog: Vec<String> = (0..40).map(|i| format!("s/t{i}")).collect();
//! let groups = groups(&rows, &catalog, 4, 7);
//! assert_eq!(groups.len(), 3); // two gold tools fill half of 4
//! assert!(groups.iter().all(|g| g.tools.len() == 4));
//! # Ok::<(), String>(())
//! ```

use std::collections::BTreeSet;

use crate::search::eval::Labelled;

/// A small seeded generator (`SplitMix64`), written out so that a seed draws the same lists
/// with every build: a benchmark's lists must not change when a dependency does.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 for 0).
    #[allow(
        clippy::cast_possible_truncation,
        reason = "the result is below n, a usize"
    )]
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// `items` shuffled in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// One group: its queries (indices into the rows) and its fixed list (`server/tool` ids, in
/// catalog order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Indices of the group's queries, in the order they run.
    pub queries: Vec<usize>,
    /// The listed tools: the gold tools of the queries and distractors, `n` in all (fewer
    /// when the catalog is smaller).
    pub tools: Vec<String>,
}

/// The groups of `rows` for lists of `n` tools drawn from `catalog` (ids in catalog order),
/// seeded with `seed`. A query whose gold tools alone are over half of `n` gets a group of its
/// own; gold ids not in the catalog are left out of the lists (the caller checks them first).
#[must_use]
pub fn groups(rows: &[Labelled], catalog: &[String], n: usize, seed: u64) -> Vec<Group> {
    let mut rng = Rng::new(seed ^ (n as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
    let mut order: Vec<usize> = (0..rows.len()).collect();
    rng.shuffle(&mut order);
    let known: BTreeSet<&str> = catalog.iter().map(String::as_str).collect();
    let gold_of = |i: usize| -> BTreeSet<&str> {
        rows[i]
            .gold
            .iter()
            .map(String::as_str)
            .filter(|g| known.contains(g))
            .collect()
    };
    let mut split: Vec<(Vec<usize>, BTreeSet<&str>)> = Vec::new();
    for i in order {
        let gold = gold_of(i);
        let fits = split
            .last()
            .is_some_and(|(_, held)| held.union(&gold).count() <= (n / 2).max(1));
        match split.last_mut() {
            Some((queries, held)) if fits => {
                queries.push(i);
                held.extend(gold);
            }
            _ => split.push((vec![i], gold)),
        }
    }
    split
        .into_iter()
        .map(|(queries, gold)| Group {
            tools: fill(catalog, &gold, n, &mut rng),
            queries,
        })
        .collect()
}

/// `gold` plus distractors drawn from the rest of `catalog`, up to `n`, in catalog order.
fn fill(catalog: &[String], gold: &BTreeSet<&str>, n: usize, rng: &mut Rng) -> Vec<String> {
    let mut others: Vec<&String> = catalog
        .iter()
        .filter(|id| !gold.contains(id.as_str()))
        .collect();
    rng.shuffle(&mut others);
    let wanted = n.saturating_sub(gold.len());
    let chosen: BTreeSet<&str> = gold
        .iter()
        .copied()
        .chain(others.into_iter().take(wanted).map(String::as_str))
        .collect();
    catalog
        .iter()
        .filter(|id| chosen.contains(id.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{prop, prop_assert, prop_assert_eq, proptest};

    fn rows(golds: &[Vec<usize>]) -> Vec<Labelled> {
        golds
            .iter()
            .enumerate()
            .map(|(i, gold)| {
                let gold: Vec<String> = gold.iter().map(|g| format!("s/t{g}")).collect();
                let line = serde_json::json!({"query": format!("q{i}"), "gold": gold});
                Labelled::parse(&line.to_string(), i + 1).unwrap()
            })
            .collect()
    }

    #[test]
    fn the_generator_is_fixed_for_a_seed() {
        let mut a = Rng::new(0);
        let mut b = Rng::new(0);
        let drawn: Vec<u64> = (0..3).map(|_| a.next_u64()).collect();
        assert_eq!(drawn, (0..3).map(|_| b.next_u64()).collect::<Vec<_>>());
        // SplitMix64's well-known first output for seed 0 (Vigna's reference code).
        assert_eq!(drawn[0], 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn a_query_with_too_many_gold_tools_gets_a_group_of_its_own() {
        let catalog: Vec<String> = (0..30).map(|i| format!("s/t{i}")).collect();
        let rows = rows(&[vec![0, 1, 2, 3, 4, 5, 6], vec![7], vec![8]]);
        let groups = groups(&rows, &catalog, 10, 3);
        let alone = groups.iter().find(|g| g.queries.contains(&0)).unwrap();
        assert_eq!(alone.queries, [0]);
        assert_eq!(alone.tools.len(), 10);
    }

    proptest! {
        #[test]
        fn every_query_runs_once_with_its_gold_listed(
            golds in prop::collection::vec(prop::collection::vec(0usize..60, 1..4), 1..40),
            n in prop::sample::select(vec![4usize, 10, 20, 50]),
            seed in 0u64..1000,
        ) {
            let catalog: Vec<String> = (0..60).map(|i| format!("s/t{i}")).collect();
            let rows = rows(&golds);
            let groups = groups(&rows, &catalog, n, seed);
            let mut seen: Vec<usize> = groups.iter().flat_map(|g| g.queries.clone()).collect();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..rows.len()).collect::<Vec<_>>());
            for group in &groups {
                let distinct: BTreeSet<&String> = group.tools.iter().collect();
                prop_assert_eq!(distinct.len(), group.tools.len());
                prop_assert!(group.tools.len() >= n.min(60));
                for &q in &group.queries {
                    for gold in &rows[q].gold {
                        prop_assert!(group.tools.contains(gold));
                    }
                }
            }
            // The same seed, the same lists.
            prop_assert_eq!(groups, super::groups(&rows, &catalog, n, seed));
        }
    }
}
