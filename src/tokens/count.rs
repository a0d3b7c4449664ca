//! [`Counter`]: renders, counts and caches per-tool token costs at every compression level.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{render_tool, Bpe, Rendering, Tokenizer};
use crate::catalog::CatalogTool;
use crate::compress::{self, Level};
use crate::discover::{meta_tool_definitions, MetaToolNames};
use crate::naming::exposed_name;
use crate::policy::BudgetPolicy;
use crate::profile::Profile;

/// Most per-tool entries kept in a counter's cache (a few KiB each at most).
const CACHE_CAPACITY: u64 = 100_000;

/// What one tool costs, in tokens, at each level (indexed by [`Level::index`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolCounts {
    /// Listed directly (its rendering at that level).
    pub direct: [usize; 5],
    /// As a catalog line at that level inside the search meta-tool's description.
    pub line: [usize; 5],
}

/// Token costs of a whole catalog, the input of [`crate::plan::plan`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Measured {
    /// Per tool, in catalog order.
    pub tools: Vec<ToolCounts>,
    /// Paid once whenever any tool is listed: the profile's overhead and the rendering's
    /// wrapper.
    pub overhead: usize,
    /// The three meta-tools' definitions.
    pub meta: usize,
    /// The heading that introduces catalog lines in the search meta-tool's description.
    pub listing_header: usize,
}

impl Measured {
    /// Whole catalog listed directly at `level`, overhead included.
    #[must_use]
    pub fn total_at(&self, level: Level) -> usize {
        self.overhead
            + self
                .tools
                .iter()
                .map(|t| t.direct[level.index()])
                .sum::<usize>()
    }
}

/// Counts what a host pays for tools, with a content-hash cache shared by its clones.
#[derive(Clone)]
pub struct Counter {
    tokenizer: Arc<dyn Tokenizer>,
    rendering: Rendering,
    calibration_permille: usize,
    overhead_tokens: usize,
    /// Distinguishes counters whose counts differ (encoding, rendering, calibration).
    config_key: u64,
    cache: moka::sync::Cache<u64, ToolCounts>,
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counter")
            .field("tokenizer", &self.tokenizer)
            .field("rendering", &self.rendering)
            .field("calibration_permille", &self.calibration_permille)
            .field("cached", &self.cache.entry_count())
            .finish_non_exhaustive()
    }
}

/// The heading of the catalog listing appended to the search meta-tool's description.
pub(crate) const LISTING_HEADER: &str = "\n\nTools available through search:";

impl Counter {
    /// A counter for `profile` (its encoding, rendering, calibration and overhead).
    #[must_use]
    pub fn new(profile: &Profile) -> Self {
        Self::with_tokenizer(
            Arc::new(Bpe::new(profile.encoding)),
            profile.encoding.as_str(),
            profile,
        )
    }

    /// A counter over any tokenizer; `tokenizer_id` must differ between tokenizers that count
    /// differently (it keys the cache).
    #[must_use]
    pub fn with_tokenizer(
        tokenizer: Arc<dyn Tokenizer>,
        tokenizer_id: &str,
        profile: &Profile,
    ) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            tokenizer_id,
            profile.rendering,
            profile.calibration_permille,
        )
            .hash(&mut h);
        Self {
            tokenizer,
            rendering: profile.rendering,
            calibration_permille: profile.calibration_permille,
            overhead_tokens: profile.overhead_tokens,
            config_key: h.finish(),
            cache: moka::sync::Cache::new(CACHE_CAPACITY),
        }
    }

    /// The rendering counted.
    #[must_use]
    pub fn rendering(&self) -> Rendering {
        self.rendering
    }

    /// Tokens of `text`, calibrated (rounded up).
    #[must_use]
    pub fn count_text(&self, text: &str) -> usize {
        calibrate(self.tokenizer.count(text), self.calibration_permille)
    }

    /// Tokens of one tool exposed as `name`, rendered as the host does (not cached).
    #[must_use]
    pub fn count_tool(&self, name: &str, tool: &Map<String, Value>) -> usize {
        self.count_text(&render_tool(self.rendering, name, tool))
    }

    /// Costs of every tool of `catalog` at every level, with `policy`'s description overrides,
    /// the names a host sees (joined with `separator`), and the meta-tools named `meta`.
    /// Tools seen before (same definition, name and override) cost a cache lookup.
    #[must_use]
    pub fn measure(
        &self,
        catalog: &[CatalogTool],
        policy: &BudgetPolicy,
        separator: &str,
        meta: &MetaToolNames,
    ) -> Measured {
        let tools = catalog
            .iter()
            .map(|tool| {
                let exposed = exposed_name(&tool.server, &tool.name, separator);
                let rule = policy.rule(&tool.server, &tool.name);
                let description = rule.and_then(|r| r.description.as_deref());
                let key = self.key(&exposed, description, &tool.definition);
                if let Some(hit) = self.cache.get(&key) {
                    return hit;
                }
                let counts = self.count_levels(&exposed, description, &tool.definition);
                self.cache.insert(key, counts);
                counts
            })
            .collect();
        let wrapper = self.rendering.wrapper();
        let overhead = self.overhead_tokens
            + self.rendering.extra_tokens()
            + if wrapper.is_empty() {
                0
            } else {
                self.count_text(wrapper)
            };
        let meta = meta_tool_definitions(meta)
            .iter()
            .filter_map(|v| {
                let obj = v.as_object()?;
                let name = obj.get("name")?.as_str()?;
                Some(self.count_tool(name, obj))
            })
            .sum();
        Measured {
            tools,
            overhead,
            meta,
            listing_header: self.count_text(LISTING_HEADER),
        }
    }

    fn count_levels(
        &self,
        exposed: &str,
        description: Option<&str>,
        definition: &Map<String, Value>,
    ) -> ToolCounts {
        let mut named = definition.clone();
        named.insert("name".into(), Value::String(exposed.to_owned()));
        let mut counts = ToolCounts::default();
        let mut last_text = String::new();
        let mut last_line = String::new();
        for level in Level::ALL {
            let i = level.index();
            let text = render_tool(
                self.rendering,
                exposed,
                &compress::compress_with(&named, level, description),
            );
            // Levels that change nothing (short descriptions) cost no second tokenization.
            counts.direct[i] = if i > 0 && text == last_text {
                counts.direct[i - 1]
            } else {
                self.count_text(&text)
            };
            last_text = text;
            let line = format!(
                "\n- {}",
                compress::catalog_line_with(&named, level, description)
            );
            counts.line[i] = if i > 0 && line == last_line {
                counts.line[i - 1]
            } else {
                self.count_text(&line)
            };
            last_line = line;
        }
        counts
    }

    fn key(
        &self,
        exposed: &str,
        description: Option<&str>,
        definition: &Map<String, Value>,
    ) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.config_key.hash(&mut h);
        exposed.hash(&mut h);
        description.hash(&mut h);
        hash_map(definition, &mut h);
        h.finish()
    }
}

fn calibrate(tokens: usize, permille: usize) -> usize {
    if permille == 1000 {
        tokens
    } else {
        (tokens * permille).div_ceil(1000)
    }
}

fn hash_map(map: &Map<String, Value>, h: &mut impl Hasher) {
    h.write_usize(map.len());
    for (k, v) in map {
        k.hash(h);
        hash_value(v, h);
    }
}

fn hash_value(value: &Value, h: &mut impl Hasher) {
    match value {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => {
            h.write_u8(1);
            b.hash(h);
        }
        Value::Number(n) => {
            h.write_u8(2);
            n.to_string().hash(h);
        }
        Value::String(s) => {
            h.write_u8(3);
            s.hash(h);
        }
        Value::Array(a) => {
            h.write_u8(4);
            h.write_usize(a.len());
            for v in a {
                hash_value(v, h);
            }
        }
        Value::Object(o) => {
            h.write_u8(5);
            hash_map(o, h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{resolve, ProfileOverrides};
    use serde_json::json;

    fn tool(desc: &str) -> CatalogTool {
        CatalogTool::new(
            "s",
            json!({"name": "t", "description": desc, "inputSchema": {"type": "object",
                "properties": {"q": {"type": "string", "description": "The query to run"}}}}),
        )
        .unwrap()
    }

    #[test]
    fn levels_never_cost_more_and_cache_hits() {
        let counter = Counter::new(&resolve("gpt-4o", &ProfileOverrides::default()).unwrap());
        let policy = BudgetPolicy::default();
        let catalog = vec![tool(
            "## Search\n\nUse this tool to **search** the index for documents. Results are ranked by relevance and paged.",
        )];
        let m = counter.measure(&catalog, &policy, "__", &MetaToolNames::default());
        let d = m.tools[0].direct;
        assert!(d.windows(2).all(|w| w[0] >= w[1]), "{d:?}");
        assert!(d[0] > d[4]);
        counter.cache.run_pending_tasks();
        assert_eq!(counter.cache.entry_count(), 1);
        assert_eq!(
            counter.measure(&catalog, &policy, "__", &MetaToolNames::default()),
            m
        );
        assert!(m.meta > 100 && m.overhead > 9);
    }

    #[test]
    fn calibration_rounds_up() {
        assert_eq!(calibrate(10, 1200), 12);
        assert_eq!(calibrate(11, 1200), 14);
        assert_eq!(calibrate(11, 1000), 11);
    }
}
