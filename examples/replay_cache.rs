//! Replays 1,000 Anthropic Messages API requests whose tools come from MCP upstreams that
//! restart, reorder their tools and object keys, while dynamic tools come and go, and compares
//! two pipelines:
//!
//! - (a) pass-through: the tools in the order the upstreams answered (servers in connection
//!   order, each server's tools in its own order, keys as its SDK wrote them), dynamic tools
//!   where they appeared, `cache_control` on the last tool (the usual client habit);
//! - (b) the gateway: [`mcp_budget::llm_api::anthropic::rewrite`] (canonical static-before-dynamic
//!   order, one breakpoint on the last static tool).
//!
//! It reports the share of requests whose static prefix (the tools serialized up to and
//! including the last static tool) is byte-identical to the previous request's, and the
//! modelled input cost of the tools with Anthropic cache pricing (prefix read 0.1× when it
//! equals the previous one, else written 1.25×; tools after it 1×).
//!
//! `cargo run --release --example replay_cache [-- TOOLSETS_DIR]`
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    missing_docs
)]

use std::collections::HashMap;
use std::path::PathBuf;

use mcp_budget::catalog::{CatalogTool, load_saved};
use mcp_budget::llm_api::{Breakpoint, RewriteOptions, ToolClasses, anthropic};
use mcp_budget::naming::exposed_name;
use mcp_budget::profile::{ProfileOverrides, resolve};
use mcp_budget::tokens::Counter;
use serde_json::{Value, json};

const REQUESTS: usize = 1_000;
const SEED: u64 = 0x5EED_CAC4_E000_0006;
const MODEL: &str = "claude-sonnet-4-5";
/// A developer's static upstreams; every other fixture server is a pool of dynamic tools.
const STATIC_SERVERS: &[&str] = &[
    "filesystem",
    "git",
    "github",
    "memory",
    "fetch",
    "time",
    "sequential-thinking",
];
/// Per request: an upstream restarts (new tool order, new key order, reconnects last).
const P_RESTART: u64 = 3;
/// Per request: an upstream answers its list in another order without restarting.
const P_REORDER: u64 = 5;
/// Per request: a dynamic tool appears; and, independently, one disappears.
const P_ADD: u64 = 10;
const P_REMOVE: u64 = 8;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap()
    }
    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// The same value with every object's keys in an order drawn from `rng`.
fn shuffle_keys(value: &Value, rng: &mut Rng) -> Value {
    match value {
        Value::Object(obj) => {
            let mut entries: Vec<(&String, &Value)> = obj.iter().collect();
            rng.shuffle(&mut entries);
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), shuffle_keys(v, rng)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| shuffle_keys(v, rng)).collect()),
        other => other.clone(),
    }
}

struct Upstream {
    tools: Vec<usize>,
    /// Seeds the key order of its tools: the same until it restarts.
    key_seed: u64,
}

#[derive(Default)]
struct Tally {
    same_prefix: usize,
    cost: f64,
    written: usize,
    read: usize,
    previous: Option<String>,
}

impl Tally {
    fn record(&mut self, prefix: String, prefix_tokens: usize, rest_tokens: usize) {
        let same = self.previous.as_ref() == Some(&prefix);
        if same {
            self.same_prefix += 1;
            self.read += prefix_tokens;
            self.cost += 0.1 * prefix_tokens as f64;
        } else {
            self.written += prefix_tokens;
            self.cost += 1.25 * prefix_tokens as f64;
        }
        self.cost += rest_tokens as f64;
        self.previous = Some(prefix);
    }
}

fn main() {
    let dir = std::env::args().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets"),
        PathBuf::from,
    );
    let catalog: Vec<CatalogTool> = load_saved(&[dir]).unwrap();
    let profile = resolve(MODEL, &ProfileOverrides::default()).unwrap();
    let counter = Counter::new(&profile);
    let names: Vec<String> = catalog
        .iter()
        .map(|t| exposed_name(&t.server, &t.name, "__"))
        .collect();
    let tokens: Vec<usize> = catalog
        .iter()
        .zip(&names)
        .map(|(t, n)| counter.count_tool(n, &t.definition))
        .collect();
    let wire: Vec<Value> = catalog
        .iter()
        .zip(&names)
        .map(|(t, n)| {
            let mut def = (*t.definition).clone();
            def.insert("name".into(), Value::String(n.clone()));
            anthropic::tool_from_mcp(&def)
        })
        .collect();
    let by_name: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();

    let mut rng = Rng(SEED);
    let mut upstreams: Vec<Upstream> = STATIC_SERVERS
        .iter()
        .map(|s| Upstream {
            tools: (0..catalog.len())
                .filter(|&i| catalog[i].server == *s)
                .collect(),
            key_seed: rng.next(),
        })
        .collect();
    let pool: Vec<usize> = (0..catalog.len())
        .filter(|&i| !STATIC_SERVERS.contains(&catalog[i].server.as_str()))
        .collect();
    let static_count: usize = upstreams.iter().map(|u| u.tools.len()).sum();
    let static_tokens: usize = upstreams
        .iter()
        .flat_map(|u| &u.tools)
        .map(|&i| tokens[i])
        .sum();
    // Active dynamic tools: (catalog index, where the pass-through list shows it).
    let mut dynamic: Vec<(usize, usize)> = Vec::new();
    let options = RewriteOptions::default().with_counter(counter);
    let (mut a, mut b, mut none) = (Tally::default(), Tally::default(), 0.0f64);
    let (mut added, mut dyn_total) = (0usize, 0usize);

    for _ in 0..REQUESTS {
        if rng.percent(P_RESTART) {
            let i = rng.below(upstreams.len());
            let mut up = upstreams.remove(i);
            rng.shuffle(&mut up.tools);
            up.key_seed = rng.next();
            upstreams.push(up);
        }
        if rng.percent(P_REORDER) {
            let i = rng.below(upstreams.len());
            let up = &mut upstreams[i];
            rng.shuffle(&mut up.tools);
        }
        if rng.percent(P_ADD) {
            let tool = pool[rng.below(pool.len())];
            if !dynamic.iter().any(|(t, _)| *t == tool) {
                let at = rng.below(static_count + dynamic.len() + 1);
                dynamic.push((tool, at));
            }
        }
        if rng.percent(P_REMOVE) && !dynamic.is_empty() {
            let i = rng.below(dynamic.len());
            dynamic.remove(i);
        }
        dyn_total += dynamic.len();

        // (a) What the upstreams sent, as they sent it.
        let mut order: Vec<(usize, u64)> = upstreams
            .iter()
            .flat_map(|u| u.tools.iter().map(|&t| (t, u.key_seed)))
            .collect();
        for &(tool, at) in &dynamic {
            order.insert(at.min(order.len()), (tool, tool as u64));
        }
        let mut tools: Vec<Value> = order
            .iter()
            .map(|&(t, seed)| shuffle_keys(&wire[t], &mut Rng(seed ^ (t as u64 + 1))))
            .collect();
        let is_dynamic = |t: usize| dynamic.iter().any(|(d, _)| *d == t);
        let last_static = order.iter().rposition(|&(t, _)| !is_dynamic(t)).unwrap();
        let mut passed = tools.clone();
        if let Some(Value::Object(last)) = passed.last_mut() {
            last.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
        let sum = |ts: &[(usize, u64)]| ts.iter().map(|&(t, _)| tokens[t]).sum::<usize>();
        let prefix = serde_json::to_string(&passed[..=last_static]).unwrap();
        a.record(
            prefix,
            sum(&order[..=last_static]),
            sum(&order[last_static + 1..]),
        );
        let total = sum(&order);
        none += total as f64;

        // (b) The gateway's rewrite of the same request.
        let classes = ToolClasses::dynamic_names(dynamic.iter().map(|(t, _)| names[*t].clone()));
        let mut body = json!({"model": MODEL, "max_tokens": 1024, "tools": std::mem::take(&mut tools),
            "messages": [{"role": "user", "content": "Next step?"}]});
        let outcome = anthropic::rewrite(&mut body, &options.clone().with_classes(classes));
        if outcome.breakpoint == Breakpoint::Added {
            added += 1;
        }
        let out = body["tools"].as_array().unwrap();
        let prefix_tokens: usize = out[..outcome.static_tools]
            .iter()
            .map(|t| tokens[by_name[t["name"].as_str().unwrap()]])
            .sum();
        let prefix = serde_json::to_string(&out[..outcome.static_tools]).unwrap();
        b.record(prefix, prefix_tokens, total - prefix_tokens);
    }

    // The first request of each pipeline cannot read a cache: shares are over the 999 others.
    let share = |t: &Tally| 100.0 * t.same_prefix as f64 / (REQUESTS - 1) as f64;
    println!(
        "Replay: {REQUESTS} requests, seed {SEED:#x}, model {MODEL}; static: {} servers, \
         {static_count} tools, {static_tokens} tokens; dynamic pool: {} tools, {:.1} active on \
         average",
        STATIC_SERVERS.len(),
        pool.len(),
        dyn_total as f64 / REQUESTS as f64
    );
    println!(
        "Tokens: {} ({}), Anthropic rendering (the Messages API tools JSON); cache write 1.25x, \
         read 0.1x, uncached 1x; tool tokens only (no tool-use system prompt, no messages).\n",
        profile.encoding,
        if profile.calibration_permille == 1000 {
            "uncalibrated".to_owned()
        } else {
            format!(
                "x{:.2} calibration",
                profile.calibration_permille as f64 / 1000.0
            )
        }
    );
    println!(
        "| pipeline | static prefix = previous | cache reads | cache writes | modelled input cost (tokens at 1x) | vs no cache |"
    );
    println!("|---|---|---|---|---|---|");
    println!("| no caching | - | 0 | 0 | {none:.0} | 100.0% |");
    for (label, t) in [("(a) pass-through", &a), ("(b) gateway", &b)] {
        println!(
            "| {label} | {}/{} ({:.1}%) | {} | {} | {:.0} | {:.1}% |",
            t.same_prefix,
            REQUESTS - 1,
            share(t),
            t.read,
            t.written,
            t.cost,
            100.0 * t.cost / none
        );
    }
    println!(
        "\n(b) added its breakpoint on {added}/{REQUESTS} requests; (b) costs {:.1}% of (a).",
        100.0 * b.cost / a.cost
    );
}
