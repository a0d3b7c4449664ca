//! [`Counter`]: renders, counts and caches per-tool token costs at every compression level.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use super::{Bpe, Encoding, Rendering, Tokenizer, render_tool};
use crate::catalog::CatalogTool;
use crate::compress::{self, Level};

/// Most per-tool entries kept in a counter's cache (a few dozen bytes each).
const TOOL_CACHE_CAPACITY: usize = 100_000;
/// Most text segments whose counts are kept (a dozen bytes each).
const SEGMENT_CACHE_CAPACITY: usize = 1_000_000;

/// A map that forgets everything when it outgrows its capacity: bounded memory, no eviction
/// bookkeeping on the hot path, and a full catalog re-counts at most once per overflow.
#[derive(Debug)]
struct Bounded<V> {
    map: HashMap<u64, V>,
    capacity: usize,
}

impl<V: Copy> Bounded<V> {
    fn new(capacity: usize) -> Self {
        Self {
            map: HashMap::new(),
            capacity,
        }
    }

    fn get(&self, key: u64) -> Option<V> {
        self.map.get(&key).copied()
    }

    fn insert(&mut self, key: u64, value: V) {
        if self.map.len() >= self.capacity {
            self.map.clear();
        }
        self.map.insert(key, value);
    }
}

#[derive(Debug)]
struct Caches {
    /// Per tool (definition, exposed name, override): its counts, and whether every direct
    /// level was counted.
    tools: Bounded<(ToolCounts, bool)>,
    /// Per text segment: its uncalibrated token count. Levels and tools share most segments
    /// (schema lines, parameter names), so a catalog tokenizes little more than its distinct
    /// text.
    segments: Bounded<usize>,
}

/// What one tool costs, in tokens, at each level (indexed by [`Level::index`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ToolCounts {
    /// Listed directly (its rendering at that level).
    pub direct: [usize; 5],
    /// As a catalog line at that level inside the search meta-tool's description.
    pub line: [usize; 5],
}

/// Token costs of a whole catalog, the input of the planner (`plan::plan`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
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
    /// Direct costs are counted at every level (false: only at `off`, and the other levels
    /// hold that upper bound; see [`Counter::measure_upper_bound`]).
    pub exact: bool,
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

/// How a host's tools are counted: the BPE, the host's rendering, the calibration and the fixed
/// overhead. A model profile (`profile::Profile`) converts into one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counting {
    /// The BPE used to count.
    pub encoding: Encoding,
    /// How the host renders tools to the model.
    pub rendering: Rendering,
    /// Multiplier on BPE counts, in thousandths (1000 = the BPE count as is).
    pub calibration_permille: usize,
    /// Fixed tokens the host adds whenever tools are present (tool-use system prompt).
    pub overhead_tokens: usize,
}

/// The words a host sees of a catalog besides the upstream definitions: the exposed names
/// (server id and tool name joined by `separator`), the meta-tools' definitions, and the
/// descriptions that replace the upstream's.
///
/// The meta-tools are passed in as definitions (`discover::meta_tool_definitions` builds them)
/// rather than named, so that counting stays below the modules that define them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wording {
    /// Joins server id and tool name into an exposed name (`[aggregate] separator`).
    pub separator: String,
    /// The meta-tools' definitions, in the order they are listed (the search meta-tool first,
    /// then the schema and invoke ones, then the code-mode one when on); empty when none is
    /// ever listed.
    pub meta: Vec<Value>,
    /// Per catalog tool, in catalog order: the description that replaces the upstream's. Empty
    /// when none is replaced; a tool past the end keeps its own.
    pub descriptions: Vec<Option<String>>,
}

impl Wording {
    /// Wording with `separator` and the meta-tools `meta`, no replaced descriptions.
    #[must_use]
    pub fn new(separator: impl Into<String>, meta: Vec<Value>) -> Self {
        Self {
            separator: separator.into(),
            meta,
            descriptions: Vec::new(),
        }
    }

    /// The description that replaces the upstream's for catalog tool `index`, if any.
    #[must_use]
    pub fn description(&self, index: usize) -> Option<&str> {
        self.descriptions.get(index).and_then(Option::as_deref)
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
    caches: Arc<Mutex<Caches>>,
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counter")
            .field("tokenizer", &self.tokenizer)
            .field("rendering", &self.rendering)
            .field("calibration_permille", &self.calibration_permille)
            .field("cached_tools", &self.lock().tools.map.len())
            .finish_non_exhaustive()
    }
}

/// The heading of the catalog listing appended to the search meta-tool's description.
pub(crate) const LISTING_HEADER: &str = "\n\nTools available through search:";

impl Counter {
    /// A counter for `counting`: a [`Counting`], or a model profile (its encoding, rendering,
    /// calibration and overhead).
    #[must_use]
    pub fn new(counting: impl Into<Counting>) -> Self {
        let counting = counting.into();
        Self::with_tokenizer(
            Arc::new(Bpe::new(counting.encoding)),
            counting.encoding.as_str(),
            counting,
        )
    }

    /// A counter over any tokenizer; `tokenizer_id` must differ between tokenizers that count
    /// differently (it keys the cache). `counting`'s encoding is not used.
    #[must_use]
    pub fn with_tokenizer(
        tokenizer: Arc<dyn Tokenizer>,
        tokenizer_id: &str,
        counting: impl Into<Counting>,
    ) -> Self {
        let counting = counting.into();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            tokenizer_id,
            counting.rendering,
            counting.calibration_permille,
        )
            .hash(&mut h);
        Self {
            tokenizer,
            rendering: counting.rendering,
            calibration_permille: counting.calibration_permille,
            overhead_tokens: counting.overhead_tokens,
            config_key: h.finish(),
            caches: Arc::new(Mutex::new(Caches {
                tools: Bounded::new(TOOL_CACHE_CAPACITY),
                segments: Bounded::new(SEGMENT_CACHE_CAPACITY),
            })),
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

    /// Costs of every tool of `catalog` at every level, as the host sees them under `wording`
    /// (exposed names, replaced descriptions, meta-tool names). Tools seen before (same
    /// definition, name and replaced description) cost a cache lookup.
    #[must_use]
    pub fn measure(&self, catalog: &[CatalogTool], wording: &Wording) -> Measured {
        self.measure_levels(catalog, wording, true)
    }

    /// [`Counter::measure`] with direct costs counted at `off` only and reported at every level
    /// as that upper bound ([`Measured::exact`] is then false); catalog lines are still counted
    /// at every level. Enough to plan a catalog over the tool cap, where no direct listing of
    /// every tool can be chosen (the planner's `plan::measure` picks the call).
    #[must_use]
    pub fn measure_upper_bound(&self, catalog: &[CatalogTool], wording: &Wording) -> Measured {
        self.measure_levels(catalog, wording, false)
    }

    fn measure_levels(&self, catalog: &[CatalogTool], wording: &Wording, exact: bool) -> Measured {
        // One lock per call: counting is pure CPU work, and a caller measures a whole catalog.
        let mut caches = self.lock();
        let caches = &mut *caches;
        let separator = wording.separator.as_str();
        let tools = catalog
            .iter()
            .enumerate()
            .map(|(i, tool)| {
                let description = wording.description(i);
                // The exposed name is the catalog's, or a function of (server, name,
                // separator): hashing those spares building it on every warm call.
                let key = self.key(
                    [
                        &tool.server,
                        &tool.name,
                        tool.catalog_name().unwrap_or(separator),
                    ],
                    description,
                    &tool.definition,
                );
                if let Some((hit, complete)) = caches.tools.get(key) {
                    if complete || !exact {
                        return hit;
                    }
                }
                let exposed = tool.exposed_name(separator);
                let counts = self.count_levels(
                    &mut caches.segments,
                    &tool.server,
                    &exposed,
                    description,
                    &tool.definition,
                    exact,
                );
                caches.tools.insert(key, (counts, exact));
                counts
            })
            .collect();
        let wrapper = self.rendering.wrapper();
        let segments = &mut caches.segments;
        let overhead = self.overhead_tokens
            + self.rendering.extra_tokens()
            + if wrapper.is_empty() {
                0
            } else {
                self.count_cached(segments, wrapper)
            };
        let meta = wording
            .meta
            .iter()
            .filter_map(|v| {
                let obj = v.as_object()?;
                let name = obj.get("name")?.as_str()?;
                Some(self.count_cached(segments, &render_tool(self.rendering, name, obj)))
            })
            .sum();
        let listing_header = self.count_cached(segments, LISTING_HEADER);
        Measured {
            tools,
            overhead,
            meta,
            listing_header,
            exact,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Caches> {
        // A panic while holding the lock leaves at worst a partly filled cache of correct counts.
        crate::lock::lock(&self.caches)
    }

    /// Calibrated tokens of `text`, counted segment by segment through the cache.
    fn count_cached(&self, segments: &mut Bounded<usize>, text: &str) -> usize {
        calibrate(self.count_raw(segments, text), self.calibration_permille)
    }

    /// Uncalibrated tokens of `text`, segment by segment through the cache.
    fn count_raw(&self, segments: &mut Bounded<usize>, text: &str) -> usize {
        let mut total = 0;
        for segment in split_segments(text) {
            let key = hash_str(segment);
            total += match segments.get(key) {
                Some(n) => n,
                None => {
                    let n = self.tokenizer.count(segment);
                    segments.insert(key, n);
                    n
                }
            };
        }
        total
    }

    fn count_levels(
        &self,
        segments: &mut Bounded<usize>,
        server: &str,
        exposed: &str,
        description: Option<&str>,
        definition: &Map<String, Value>,
        exact: bool,
    ) -> ToolCounts {
        let mut memo = compress::Memo::default();
        let mut counts = ToolCounts::default();
        let mut last_text = String::new();
        let mut last_line = String::new();
        for level in Level::ALL {
            let i = level.index();
            if i > 0 && !exact {
                counts.direct[i] = counts.direct[0];
            } else {
                let text = if level == Level::Off && description.is_none() {
                    render_tool(self.rendering, exposed, definition)
                } else {
                    render_tool(
                        self.rendering,
                        exposed,
                        &compress::compress_memo(definition, level, description, &mut memo),
                    )
                };
                // Levels that change nothing (short descriptions) cost no second count.
                counts.direct[i] = if i > 0 && text == last_text {
                    counts.direct[i - 1]
                } else {
                    self.count_cached(segments, &text)
                };
                last_text = text;
            }
            let mut line = String::from("\n- ");
            line.push_str(&compress::catalog_line_memo(
                server,
                exposed,
                definition,
                level,
                description,
                &mut memo,
            ));
            counts.line[i] = if i > 0 && line == last_line {
                counts.line[i - 1]
            } else {
                // `\n- name(params):` | ` summary`: the pre-tokenizer always cuts before the
                // space after `:` (names hold no `:`), and the summary is shared between levels
                // and with same-described tools of other servers.
                let (head, summary) = line.split_at(line.find(": ").map_or(line.len(), |c| c + 1));
                calibrate(
                    self.count_raw(segments, head) + self.count_raw(segments, summary),
                    self.calibration_permille,
                )
            };
            last_line = line;
        }
        counts
    }

    fn key(
        &self,
        naming: [&str; 3],
        description: Option<&str>,
        definition: &Map<String, Value>,
    ) -> u64 {
        let mut h = Fold::default();
        self.config_key.hash(&mut h);
        naming.hash(&mut h);
        description.hash(&mut h);
        match self.rendering {
            Rendering::Raw => hash_map(definition, &mut h),
            // These renderings (and catalog lines) read only the description and the input
            // schema; `outputSchema`, `annotations` and `_meta` cannot change a count.
            Rendering::OpenAi | Rendering::Anthropic => {
                for key in ["description", "inputSchema"] {
                    match definition.get(key) {
                        Some(v) => hash_value(v, &mut h),
                        None => h.write_u8(9),
                    }
                }
            }
        }
        h.finish()
    }
}

/// Splits `text` where the o200k and cl100k pre-tokenizers always cut, so that the sum of the
/// parts' counts is the whole's count: after a run of newlines followed by a non-space, or by
/// `// ` (TypeScript rendering); and before a letter that follows `,"` `:"` `{"` or `["` (a
/// JSON key or string value starts; the punctuation run before it is always one pre-token).
/// (Cutting sentences too was tried: more lookups cost more than the shared counts saved.)
pub(crate) fn split_segments(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'\n' {
                let mut j = i;
                while bytes.get(j) == Some(&b'\n') {
                    j += 1;
                }
                let cut = match bytes.get(j) {
                    // `,\n// text`: o200k's punctuation pre-token ends after the slashes.
                    Some(b'/') => {
                        let mut k = j;
                        while bytes.get(k) == Some(&b'/') {
                            k += 1;
                        }
                        (bytes.get(k) == Some(&b' ')).then_some(k)
                    }
                    // Whitespace after the run may join it (`\n   \n`): no cut.
                    Some(n) if !n.is_ascii_whitespace() => Some(j),
                    _ => None,
                };
                i = j;
                if let Some(cut) = cut {
                    let seg = &text[start..cut];
                    start = cut;
                    i = cut;
                    return Some(seg);
                }
                continue;
            }
            let json_cut = i >= 2
                && i > start
                && b.is_ascii_alphabetic()
                && bytes[i - 1] == b'"'
                && matches!(bytes[i - 2], b',' | b':' | b'{' | b'[');
            i += 1;
            if json_cut {
                let seg = &text[start..i - 1];
                start = i - 1;
                return Some(seg);
            }
        }
        if start < bytes.len() {
            let seg = &text[start..];
            start = bytes.len();
            return Some(seg);
        }
        None
    })
}

fn hash_str(text: &str) -> u64 {
    let mut h = Fold::default();
    h.write(text.as_bytes());
    h.write_usize(text.len());
    h.finish()
}

/// A fast 64-bit hasher for cache keys (folded 128-bit multiplies, 8 bytes per step): `SipHash`
/// made most of a warm `measure`. Not collision-resistant against crafted input; a collision
/// costs a wrong count for one entry, not memory safety.
#[derive(Default)]
struct Fold {
    h: u64,
}

const FOLD_K1: u64 = 0x9E37_79B9_7F4A_7C15;
const FOLD_K2: u64 = 0xD6E8_FEB8_6659_FD93;

fn fold_mul(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    // The low and high halves folded together: truncation is the point.
    #[allow(clippy::cast_possible_truncation)]
    let (lo, hi) = (r as u64, (r >> 64) as u64);
    lo ^ hi
}

impl Hasher for Fold {
    fn write(&mut self, bytes: &[u8]) {
        // 16 bytes per multiply (wyhash's shape): long descriptions dominate a warm walk.
        let mut pairs = bytes.chunks_exact(16);
        for pair in &mut pairs {
            let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
            a.copy_from_slice(&pair[..8]);
            b.copy_from_slice(&pair[8..]);
            self.h = fold_mul(
                u64::from_le_bytes(a) ^ self.h ^ FOLD_K1,
                u64::from_le_bytes(b) ^ FOLD_K2,
            )
            .wrapping_add(self.h.rotate_left(29));
        }
        let mut chunks = pairs.remainder().chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.step(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.step(u64::from_le_bytes(word) ^ (rest.len() as u64) << 59);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.step(u64::from(i) | 0x100);
    }

    fn write_usize(&mut self, i: usize) {
        self.step(i as u64);
    }

    fn finish(&self) -> u64 {
        fold_mul(self.h ^ FOLD_K2, FOLD_K1)
    }
}

impl Fold {
    /// A tagged string; strings of up to 7 bytes (most schema keys and types) take one step.
    fn str(&mut self, s: &str, tag: u8) {
        let bytes = s.as_bytes();
        if let Ok(len @ 0..8) = u8::try_from(bytes.len()) {
            let mut word = [0u8; 8];
            word[..bytes.len()].copy_from_slice(bytes);
            word[7] = len | tag << 4;
            self.step(u64::from_le_bytes(word));
        } else {
            self.step(bytes.len() as u64 | u64::from(tag) << 60 | 1 << 59);
            self.write(bytes);
        }
    }

    fn step(&mut self, word: u64) {
        self.h = fold_mul(self.h ^ word ^ FOLD_K2, FOLD_K1).wrapping_add(self.h.rotate_left(23));
    }
}

fn calibrate(tokens: usize, permille: usize) -> usize {
    if permille == 1000 {
        tokens
    } else {
        (tokens * permille).div_ceil(1000)
    }
}

fn hash_map(map: &Map<String, Value>, h: &mut Fold) {
    h.step(map.len() as u64 | 5 << 60);
    for (k, v) in map {
        h.str(k, 6);
        hash_value(v, h);
    }
}

fn hash_value(value: &Value, h: &mut Fold) {
    match value {
        Value::Null => h.step(1 << 60),
        Value::Bool(b) => h.step(u64::from(*b) | 2 << 60),
        Value::Number(n) => {
            h.step(3 << 60);
            match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => h.step(u),
                (None, Some(i), _) => h.step(u64::from_le_bytes(i.to_le_bytes()) ^ 1 << 63),
                (None, None, f) => h.step(f.unwrap_or_default().to_bits()),
            }
        }
        Value::String(s) => h.str(s, 7),
        Value::Array(a) => {
            h.step(a.len() as u64 | 4 << 60);
            for v in a {
                hash_value(v, h);
            }
        }
        Value::Object(o) => hash_map(o, h),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        // gpt-4o's profile.
        let counter = Counter::new(Counting {
            encoding: Encoding::O200kBase,
            rendering: Rendering::OpenAi,
            calibration_permille: 1000,
            overhead_tokens: 0,
        });
        let wording = Wording::new(
            "__",
            crate::discover::meta_tool_definitions(&crate::discover::MetaToolNames::default()),
        );
        let catalog = vec![tool(
            "## Search\n\nUse this tool to **search** the index for documents. Results are ranked by relevance and paged.",
        )];
        let m = counter.measure(&catalog, &wording);
        let d = m.tools[0].direct;
        assert!(d.windows(2).all(|w| w[0] >= w[1]), "{d:?}");
        assert!(d[0] > d[4]);
        assert_eq!(counter.lock().tools.map.len(), 1);
        assert_eq!(counter.measure(&catalog, &wording), m);
        assert!(m.meta > 100 && m.overhead > 9);
    }

    #[test]
    fn segments_add_up_to_the_whole() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
        let tools = crate::catalog::load_saved(&[dir]).unwrap();
        for encoding in [
            super::super::Encoding::O200kBase,
            super::super::Encoding::Cl100kBase,
        ] {
            let bpe = Bpe::new(encoding);
            for tool in tools.iter().step_by(7) {
                for rendering in [Rendering::OpenAi, Rendering::Anthropic, Rendering::Raw] {
                    for level in [Level::Off, Level::High] {
                        let def = compress::compress(&tool.definition, level);
                        let text = render_tool(rendering, &tool.name, &def);
                        let line = compress::catalog_line(&tool.definition, level);
                        let (head, summary) =
                            line.split_at(line.find(": ").map_or(line.len(), |c| c + 1));
                        assert_eq!(
                            bpe.count(head) + bpe.count(summary),
                            bpe.count(&line),
                            "{}",
                            tool.id()
                        );
                        for text in [text, line.clone()] {
                            let parts: usize = split_segments(&text).map(|s| bpe.count(s)).sum();
                            assert_eq!(split_segments(&text).collect::<String>(), text);
                            assert_eq!(
                                parts,
                                bpe.count(&text),
                                "{} {rendering} {level}",
                                tool.id()
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn calibration_rounds_up() {
        assert_eq!(calibrate(10, 1200), 12);
        assert_eq!(calibrate(11, 1200), 14);
        assert_eq!(calibrate(11, 1000), 11);
    }
}
