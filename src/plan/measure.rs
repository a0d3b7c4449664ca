//! What the planner needs counted, and the value order it ranks the catalog by: both computed
//! once per `tools/list` of a new catalog version.

use super::{ModeChoice, Rules, value};
use crate::catalog::CatalogTool;
use crate::tokens::{Counter, Measured, Wording};

/// The hybrid rung's value order of one catalog under one set of rules (see [the value
/// model](super#the-value-model)): catalog indices, most useful first; pinned tools alone with
/// `mode = "progressive"`, nothing with `mode = "full"` (which never defers). It reads only
/// uncompressed costs, which [`measure`]'s upper bound holds exactly, so [`measure_ranked`]
/// computes it once for both the measurement and the plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranked {
    order: Vec<usize>,
}

impl Ranked {
    /// The value order of `catalog` under `rules`, from the `off` costs in `measured`.
    #[must_use]
    pub fn of(catalog: &[CatalogTool], measured: &Measured, rules: &Rules) -> Self {
        if rules.mode.lists_all() {
            return Self::default();
        }
        // Only the pinned tools are listed in `progressive` mode; `auto` lists the most useful.
        let only_pinned = rules.mode == ModeChoice::Progressive;
        Self {
            order: value::order(catalog, measured, rules, only_pinned),
        }
    }

    /// Catalog indices, most useful first.
    #[must_use]
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The order, owned.
    #[must_use]
    pub fn into_order(self) -> Vec<usize> {
        self.order
    }
}

/// The token costs [`plan`](super::plan) needs for `catalog` under `rules`, and no more: when the catalog is
/// over the tool cap (and `mode` is not `full`), no direct listing of every tool can be chosen,
/// so direct costs are counted at every level only for the tools the hybrid rung could list
/// (the first of its value order, up to the tool cap), and at `off` for the others
/// ([`Counter::measure_upper_bound`]). This is the call for a gateway's `tools/list`; use
/// [`Counter::measure`] to report.
#[must_use]
pub fn measure(counter: &Counter, catalog: &[CatalogTool], rules: &Rules) -> Measured {
    measure_ranked(counter, catalog, rules).0
}

/// [`measure`], with the value order it computed on the way (empty when it needed none), for
/// [`plan_ranked`](super::plan_ranked): a warm `tools/list` then ranks the catalog once, not twice.
#[must_use]
pub fn measure_ranked(
    counter: &Counter,
    catalog: &[CatalogTool],
    rules: &Rules,
) -> (Measured, Option<Ranked>) {
    if rules.mode.lists_all() || catalog.len() <= rules.budget.tools {
        return (counter.measure(catalog, &rules.wording), None);
    }
    let mut measured = counter.measure_upper_bound(catalog, &rules.wording);
    // The order reads only `off` costs, which the upper bound holds exactly.
    let ranked = Ranked::of(catalog, &measured, rules);
    let listable: Vec<usize> = ranked
        .order
        .iter()
        .copied()
        .take(rules.budget.tools.saturating_sub(rules.wording.meta.len()))
        .collect();
    let subset: Vec<CatalogTool> = listable.iter().map(|&i| catalog[i].clone()).collect();
    let wording = Wording {
        descriptions: listable
            .iter()
            .map(|&i| rules.wording.description(i).map(str::to_owned))
            .collect(),
        ..rules.wording.clone()
    };
    let exact = counter.measure(&subset, &wording);
    for (&i, counts) in listable.iter().zip(exact.tools) {
        measured.tools[i] = counts;
    }
    (measured, Some(ranked))
}
