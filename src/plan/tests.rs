//! Tests of the planner: the ladder, its properties, and the accounting against real counts.

use super::*;
use crate::tokens::ToolCounts;
use proptest::prelude::*;
use serde_json::json;

fn catalog(n: usize) -> Vec<CatalogTool> {
    (0..n)
        .map(|i| {
            CatalogTool::new(
                "s",
                json!({"name": format!("tool_{}_{}", ["get", "list", "make"][i % 3], i), "inputSchema": {"type": "object"}}),
            )
            .unwrap()
        })
        .collect()
}

fn measured(direct: &[[usize; 5]]) -> Measured {
    Measured {
        tools: direct
            .iter()
            .map(|d| ToolCounts {
                direct: *d,
                line: [d[0] / 4 + 3, d[1] / 5 + 3, d[2] / 6 + 3, 6, 4],
            })
            .collect(),
        overhead: 20,
        meta: 150,
        listing_header: 6,
        exact: true,
    }
}

/// Rules for a 100k context window: `bp` hundredths of a percent of it, `cap` tools.
fn rules(bp: u32, cap: usize) -> Rules {
    Rules::new(Budget {
        tokens: 100_000 * bp as usize / 10_000,
        tools: cap,
    })
}

/// Loss of a plan: lower is better. Full rungs first by summed level, then progressive
/// ones by deferred count, then as the hybrid rung prefers its candidates: catalog lines at a
/// findable level, the listed (unpinned) tools' level, the lines' level.
fn loss(p: &Plan, pins: &[bool]) -> (u8, usize, usize, usize, usize) {
    match p.rung {
        Rung::Full | Rung::Uniform(_) | Rung::Mixed(_) => (
            0,
            p.levels.iter().map(|l| l.map_or(5, Level::index)).sum(),
            0,
            0,
            0,
        ),
        Rung::Hybrid | Rung::Search => {
            let listed = p
                .levels
                .iter()
                .enumerate()
                .filter(|(i, _)| !pins.get(*i).copied().unwrap_or(false))
                .find_map(|(_, l)| *l)
                .map_or(0, Level::index);
            let findable = match p.catalog_level {
                Some(c) if c < Level::Extreme => 0,
                Some(_) => 1,
                None => 2,
            };
            (
                1,
                p.deferred_count(),
                findable,
                listed,
                p.catalog_level.map_or(5, Level::index),
            )
        }
    }
}

#[test]
fn climbs_the_ladder() {
    let cat = catalog(4);
    let m = measured(&[[400, 300, 200, 100, 50]; 4]);
    // 100k × bp / 10k tokens.
    let at = |bp| plan(&cat, &m, &rules(bp, 20));
    assert_eq!(at(500).rung, Rung::Full);
    assert_eq!(at(135).rung, Rung::Mixed(Level::Low));
    assert_eq!(at(122).rung, Rung::Uniform(Level::Low));
    assert_eq!(at(100).rung, Rung::Mixed(Level::Medium));
    assert_eq!(at(82).rung, Rung::Uniform(Level::Medium));
    assert_eq!(at(20).rung, Rung::Search);
    assert_eq!(at(20).catalog_level, Some(Level::High));
    // Over the tool cap: the hybrid rung lists as many tools as the cap leaves room for
    // (20 − 3 meta-tools), uncompressed, with the others' lines.
    let p = plan(
        &catalog(30),
        &measured(&[[40, 30, 20, 10, 5]; 30]),
        &rules(500, 20),
    );
    assert_eq!(p.rung, Rung::Hybrid);
    assert_eq!((p.exposed_count(), p.tools_after), (17, 20));
    assert!(p.levels.iter().flatten().all(|&l| l == Level::Off));
    assert_eq!(p.listed_level, Some(Level::Off));
    assert_eq!(p.catalog_level, Some(Level::Off));
    assert!(p.fits);
    // Tighter: the same tools compressed, lines kept at a findable level.
    let tight = |bp| {
        plan(
            &catalog(30),
            &measured(&[[40, 30, 20, 10, 5]; 30]),
            &rules(bp, 20),
        )
    };
    let p = tight(40);
    assert_eq!((p.rung, p.exposed_count()), (Rung::Hybrid, 17));
    assert_eq!(p.catalog_level, Some(Level::Medium));
    assert!(p.levels.iter().flatten().all(|&l| l == Level::Extreme));
    assert_eq!(p.listed_level, Some(Level::Extreme));
    // Tighter still: no room for lines, and fewer tools.
    let p = tight(20);
    assert_eq!(
        (p.rung, p.exposed_count(), p.catalog_level),
        (Rung::Hybrid, 6, None)
    );
    assert!(p.fits);
}

/// The plan's tools and the meta-tools carry `_meta["anthropic/alwaysLoad"]`, merged into the
/// tool's own `_meta`; a host that defers itself gets the deferred tools too, unmarked, and the
/// meta-tools only when it cooperates.
#[test]
fn listed_tools_are_marked_always_load_and_a_deferring_host_gets_the_rest() {
    let mut cat = catalog(30);
    cat[0] = CatalogTool::new(
        "s",
        json!({"name": "tool_get_0", "inputSchema": {"type": "object"}, "_meta": {"up/k": 1}}),
    )
    .unwrap();
    let m = measured(&[[40, 30, 20, 10, 5]; 30]);
    let marked = |t: &Value| t["_meta"][ALWAYS_LOAD] == true;
    let mut pol = rules(500, 20);
    let p = plan(&cat, &m, &pol);
    assert_eq!((p.rung, p.exposed_count()), (Rung::Hybrid, 17));
    let tools = apply(&p, &cat, &pol);
    assert_eq!(tools.len(), 20);
    assert!(tools.iter().all(marked), "{tools:#?}");
    let first = tools.iter().find(|t| t["name"] == "s__tool_get_0").unwrap();
    assert_eq!(
        first["_meta"]["up/k"], 1,
        "the upstream's key is kept: {first}"
    );
    for (deferral, total, meta) in [
        (HostDeferral::Cooperate, 33, true),
        (HostDeferral::Host, 30, false),
    ] {
        pol.host_deferral = deferral;
        pol.list_catalog = false;
        let tools = apply(&p, &cat, &pol);
        assert_eq!(tools.len(), total, "{deferral:?}");
        assert_eq!(
            tools.iter().filter(|t| marked(t)).count(),
            if meta { 20 } else { 17 }
        );
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(
            names.contains(&"search_tools"),
            meta,
            "{deferral:?}: {names:?}"
        );
    }
    // A host that searches every tool itself keeps none loaded for the gateway.
    pol.host_deferral = HostDeferral::Off;
    pol.mode = ModeChoice::HostSearch;
    let p = plan(&cat, &m, &pol);
    assert!(!apply(&p, &cat, &pol).iter().any(marked));
}

#[test]
fn pinned_tools_stay_listed_in_full() {
    let cat = catalog(30);
    let m = measured(&[[40, 30, 20, 10, 5]; 30]);
    let mut pol = rules(500, 20);
    pol.pins = vec![false; 30];
    // tool_get_0
    pol.pins[0] = true;
    // `progressive` lists the pinned tools only.
    pol.mode = ModeChoice::Progressive;
    let p = plan(&cat, &m, &pol);
    assert_eq!(p.rung, Rung::Hybrid);
    assert_eq!(p.levels[0], Some(Level::Off));
    assert_eq!(p.exposed_count(), 1);
    let tools = apply(&p, &cat, &pol);
    assert_eq!(tools.len(), 4);
    assert_eq!(tools[0]["name"], "s__tool_get_0");
    let search = tools[1]["description"].as_str().unwrap();
    assert!(search.contains("\n- s__tool_list_1"), "{search}");
    // `auto` lists the pinned tool first, then the most useful others.
    pol.mode = ModeChoice::Auto;
    let p = plan(&cat, &m, &pol);
    assert_eq!((p.levels[0], p.exposed_count()), (Some(Level::Off), 17));
}

fn arb_case() -> impl Strategy<Value = (Vec<[usize; 5]>, u32, usize, Vec<bool>)> {
    (1usize..25).prop_flat_map(|n| {
        (
            prop::collection::vec(
                (
                    10usize..400,
                    0usize..100,
                    0usize..100,
                    0usize..100,
                    0usize..100,
                )
                    .prop_map(|(a, b, c, d, e)| {
                        let l1 = a - a * b / 200;
                        let l2 = l1 - l1 * c / 200;
                        let l3 = l2 - l2 * d / 200;
                        [a, l1, l2, l3, l3 - l3 * e / 200]
                    }),
                n,
            ),
            10u32..500,
            1usize..30,
            prop::collection::vec(prop::bool::weighted(0.1), n),
        )
    })
}

proptest! {
    #[test]
    fn plan_properties((direct, bp, cap, pins) in arb_case()) {
        let cat = catalog(direct.len());
        let m = measured(&direct);
        let mut pol = rules(bp, cap);
        pol.pins = pins;
        let p = plan(&cat, &m, &pol);
        // Same input, same plan.
        prop_assert_eq!(&p, &plan(&cat, &m, &pol));
        // Never over budget when a fitting plan exists.
        let planner = Planner { measured: &m, facts: &Facts::of(&cat, &pol), budget: pol.budget, meta_count: META_TOOLS, list_catalog: true, capped: true };
        let cheapest_full = planner.uniform(Level::Extreme);
        let bare_search = planner.finish(Rung::Search, vec![None; cat.len()], None);
        if cheapest_full.fits || bare_search.fits {
            prop_assert!(p.fits, "{:?}", p);
        }
        prop_assert_eq!(p.fits, p.tokens_after <= p.budget.tokens && p.tools_after <= p.budget.tools);
        // A bigger budget never yields a poorer plan.
        let bigger = plan(&cat, &m, &rules_with(&pol, bp + 37));
        prop_assert!(loss(&bigger, &pol.pins) <= loss(&p, &pol.pins), "{:?} vs {:?}", bigger, p);
        let more_tools = plan(&cat, &m, &rules_cap(&pol, cap + 5));
        prop_assert!(loss(&more_tools, &pol.pins) <= loss(&p, &pol.pins), "{:?} vs {:?}", more_tools, p);
        // Pinned tools are listed before any other.
        let pinned_deferred = pol.pins.iter().zip(&p.levels).any(|(&pin, l)| pin && l.is_none());
        let other_listed = pol.pins.iter().zip(&p.levels).any(|(&pin, l)| !pin && l.is_some());
        prop_assert!(!(pinned_deferred && other_listed), "{:?}", p);
        // The applied list has the planned size.
        prop_assert_eq!(apply(&p, &cat, &pol).len(), p.tools_after);
    }
}

/// A catalog of several servers (tool `i` on server `i % servers`, verbs that read, write and
/// destroy), with direct costs from `direct`.
fn servers_catalog(direct: &[[usize; 5]], servers: usize) -> Vec<CatalogTool> {
    (0..direct.len())
        .map(|i| {
            let verb = ["get", "create", "delete", "list", "update"][i % 5];
            CatalogTool::new(
                &format!("s{}", i % servers),
                json!({"name": format!("{verb}_{i}"), "inputSchema": {"type": "object"}}),
            )
            .unwrap()
        })
        .collect()
}

proptest! {
    /// Same tools in any arrival order: the same tools listed at the same levels, the same
    /// catalog level, the same costs.
    #[test]
    fn plan_is_independent_of_arrival_order(
        (direct, bp, cap, pins) in arb_case(),
        servers in 1usize..5,
        seed in any::<u64>(),
    ) {
        let cat = servers_catalog(&direct, servers);
        let m = measured(&direct);
        let mut pol = rules(bp, cap);
        pol.pins = pins;
        let p = plan(&cat, &m, &pol);
        // A permutation from the seed.
        let mut perm: Vec<usize> = (0..cat.len()).collect();
        perm.sort_by_key(|&i| (i as u64 + 1).wrapping_mul(seed | 1).rotate_left(17));
        let shuffled: Vec<CatalogTool> = perm.iter().map(|&i| cat[i].clone()).collect();
        let shuffled_m = Measured {
            tools: perm.iter().map(|&i| m.tools[i]).collect(),
            ..m
        };
        let mut shuffled_pol = pol.clone();
        shuffled_pol.pins = perm.iter().map(|&i| pol.pins[i]).collect();
        let q = plan(&shuffled, &shuffled_m, &shuffled_pol);
        let by_id = |plan: &Plan, cat: &[CatalogTool]| {
            let mut v: Vec<(String, Option<Level>)> =
                cat.iter().zip(&plan.levels).map(|(t, l)| (t.id(), *l)).collect();
            v.sort();
            v
        };
        prop_assert_eq!(by_id(&p, &cat), by_id(&q, &shuffled));
        prop_assert_eq!(
            (p.rung, p.catalog_level, p.tokens_after, p.tools_after),
            (q.rung, q.catalog_level, q.tokens_after, q.tools_after)
        );
    }
}

fn rules_with(r: &Rules, bp: u32) -> Rules {
    Rules {
        budget: rules(bp, r.budget.tools).budget,
        ..r.clone()
    }
}

fn rules_cap(r: &Rules, cap: usize) -> Rules {
    let mut r = r.clone();
    r.budget.tools = cap;
    r
}

mod accounting {
    use super::*;
    use crate::profile::{DEFAULT_MODEL, ProfileOverrides, resolve};
    use crate::tokens::{Counter, Rendering};

    /// The plan's token total is what the applied list really costs, re-counted tool by tool.
    #[test]
    fn planned_tokens_match_the_applied_list() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
        let catalog =
            crate::catalog::load_saved(&[dir.join("github.json"), dir.join("time.json")]).unwrap();
        for rendering in [Rendering::OpenAi, Rendering::Anthropic, Rendering::Raw] {
            for (mode, level) in [
                (ModeChoice::Progressive, LevelChoice::Fixed(Level::Medium)),
                (ModeChoice::Full, LevelChoice::Fixed(Level::High)),
                (ModeChoice::Auto, LevelChoice::Auto),
            ] {
                let profile = resolve(
                    DEFAULT_MODEL,
                    &ProfileOverrides {
                        rendering: Some(rendering),
                        ..ProfileOverrides::default()
                    },
                )
                .unwrap();
                // The default share: 2% of the context window.
                let mut rules = Rules::new(Budget {
                    tokens: profile.context_window / 50,
                    tools: profile.max_tools,
                });
                rules.mode = mode;
                rules.level = level;
                let counter = Counter::new(&profile);
                let measured = counter.measure(&catalog, &rules.wording);
                let p = plan(&catalog, &measured, &rules);
                let tools = apply(&p, &catalog, &rules);
                let recount: usize = measured.overhead
                    + tools
                        .iter()
                        .map(|t| {
                            let t = t.as_object().unwrap();
                            counter.count_tool(t["name"].as_str().unwrap(), t)
                        })
                        .sum::<usize>();
                // Full listings are counted exactly. Catalog lines are counted one by one, so a
                // listing may be over-counted by a token per line (never under-counted).
                let planned = p.tokens_after;
                if p.catalog_level.is_none() {
                    assert_eq!(planned, recount, "{rendering} {mode:?}");
                } else {
                    assert!(
                        recount <= planned && planned * 100 <= recount * 106,
                        "{rendering} {mode:?}: planned {planned} vs {recount}"
                    );
                }
            }
        }
    }

    #[test]
    fn plan_measure_is_enough_for_the_plan_and_upgrades_to_exact() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/toolsets/github.json");
        let catalog = crate::catalog::load_saved(&[dir]).unwrap();
        let profile = resolve("claude-haiku-4-5", &ProfileOverrides::default()).unwrap();
        let rules = Rules::new(Budget {
            tokens: profile.context_window / 50,
            tools: profile.max_tools,
        });
        let reference = Counter::new(&profile).measure(&catalog, &rules.wording);
        let counter = Counter::new(&profile);
        let partial = measure(&counter, &catalog, &rules);
        assert!(!partial.exact && reference.exact);
        assert_eq!(
            plan(&catalog, &partial, &rules),
            plan(&catalog, &reference, &rules)
        );
        // The order measured on the way plans the same as one computed again.
        let (again, ranked) = measure_ranked(&counter, &catalog, &rules);
        assert_eq!(again, partial);
        let ranked = ranked.expect("over the tool cap: ranked");
        assert_eq!(ranked, Ranked::of(&catalog, &partial, &rules));
        assert_eq!(
            plan_ranked(&catalog, &partial, Some(&ranked), &rules),
            plan(&catalog, &partial, &rules)
        );
        // Upper bounds, never under-counts.
        for (p, r) in partial.tools.iter().zip(&reference.tools) {
            assert!(p.direct.iter().zip(&r.direct).all(|(p, r)| p >= r));
            assert_eq!(p.line, r.line);
        }
        // A later complete measure recounts what the partial one skipped.
        assert_eq!(counter.measure(&catalog, &rules.wording), reference);
    }

    /// The saved fixture toolsets `names`, Sonnet 4.5's counter and its default rules (2%).
    fn on_sonnet(names: &[&str]) -> (Vec<crate::catalog::CatalogTool>, Counter, Rules) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
        let files: Vec<_> = names
            .iter()
            .map(|n| dir.join(format!("{n}.json")))
            .collect();
        let catalog = crate::catalog::load_saved(&files).unwrap();
        let sonnet = resolve("claude-sonnet-4-5", &ProfileOverrides::default()).unwrap();
        let rules = Rules::new(Budget {
            tokens: sonnet.context_window / 50,
            tools: sonnet.max_tools,
        });
        (catalog, Counter::new(&sonnet), rules)
    }

    /// The example: a desktop host's three servers, 41 tools, 6,284 tokens on Sonnet 4.5
    /// (4,000 tokens / 20 tools). Over the tool cap, so it used to be planned to 0 listed.
    #[test]
    fn three_servers_over_the_cap_list_the_most_useful_tools() {
        let (catalog, counter, rules) =
            on_sonnet(&["12306-mcp", "hackernews", "word-document-server"]);
        let exact = counter.measure(&catalog, &rules.wording);
        assert_eq!((catalog.len(), exact.total_at(Level::Off)), (41, 6284));
        let p = plan(&catalog, &measure(&counter, &catalog, &rules), &rules);
        // The partial measure is enough: same plan as with every level counted.
        assert_eq!(p, plan(&catalog, &exact, &rules));
        assert!(p.fits, "{p:?}");
        assert_eq!(p.rung, Rung::Hybrid);
        assert!(p.exposed_count() >= 15, "{p:?}");
        // Every server has its fair share listed (two rounds across servers), then the small
        // servers whole; the rest behind search with its catalog lines.
        let mut listed: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
        for (tool, level) in catalog.iter().zip(&p.levels) {
            let entry = listed.entry(tool.server.as_str()).or_default();
            entry.0 += usize::from(level.is_some());
            entry.1 += 1;
        }
        // Rounds across servers: 17 slots over 8, 9 and 24 tools, none whole, within one.
        let counts: Vec<usize> = listed.values().map(|&(n, _)| n).collect();
        let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*lo >= 5 && hi - lo <= 1, "a fair share each: {listed:?}");
        assert!(p.catalog_level.is_some_and(|c| c < Level::Extreme), "{p:?}");
    }

    /// The adoption issue's case: four servers, one of them GitHub (the user's main one, and
    /// the biggest), on Sonnet 4.5's default budget. "Smallest server first" listed the two
    /// small ones whole, some of the third and 0 of GitHub's tools; a fair share lists some of
    /// every server.
    #[test]
    fn four_servers_list_something_of_every_server_github_included() {
        let servers = ["github", "12306-mcp", "hackernews", "word-document-server"];
        let (catalog, counter, rules) = on_sonnet(&servers);
        let p = plan(&catalog, &measure(&counter, &catalog, &rules), &rules);
        assert!(p.fits, "{p:?}");
        let mut listed: std::collections::BTreeMap<&str, usize> = Default::default();
        for (tool, level) in catalog.iter().zip(&p.levels) {
            *listed.entry(tool.server.as_str()).or_default() += usize::from(level.is_some());
        }
        assert_eq!(listed.len(), 4);
        assert!(listed.values().all(|&n| n >= 1), "{listed:?}");
        assert!(listed["github"] >= 2, "{listed:?}");
    }

    /// Issue 55's desktop host: `everything` (13 tools), GitHub's reference server (26) and
    /// `time` (2) on Sonnet 4.5 (4,000 tokens, 20 tools). Two rounds then "smallest server
    /// first" listed 13 + 2 of 26 + 2; each server now gets at least 0.6 of its max-min fair
    /// share of the 17 slots (2, 7.5, 7.5).
    #[test]
    fn a_desktop_plan_gives_every_server_its_fair_share() {
        let (_, counter, rules) = on_sonnet(&["time"]);
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/desktop");
        let catalog = crate::catalog::load_saved(&[dir]).unwrap();
        let p = plan(&catalog, &measure(&counter, &catalog, &rules), &rules);
        assert!(p.fits && p.rung == Rung::Hybrid, "{p:?}");
        let mut servers: Vec<(&str, usize, usize)> = Vec::new();
        for (tool, level) in catalog.iter().zip(&p.levels) {
            if servers.last().is_none_or(|s| s.0 != tool.server) {
                servers.push((tool.server.as_str(), 0, 0));
            }
            let last = servers.last_mut().unwrap();
            last.1 += 1;
            last.2 += usize::from(level.is_some());
        }
        let sizes: Vec<usize> = servers.iter().map(|s| s.1).collect();
        assert_eq!(sizes, [13, 26, 2], "{servers:?}");
        let slots = rules.budget.tools - META_TOOLS;
        let shares = crate::plan::fair_shares(&sizes, slots);
        assert_eq!(shares, [7.5, 7.5, 2.0]);
        for ((server, _, listed), share) in servers.iter().zip(&shares) {
            #[allow(clippy::cast_precision_loss)]
            let got = *listed as f64;
            assert!(
                got >= 0.6 * share,
                "{server}: {listed} of a fair {share}: {servers:?}"
            );
        }
        assert_eq!(p.exposed_count(), slots, "{servers:?}");
    }
}
