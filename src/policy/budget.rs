//! `[budget]`: the model the host runs and the share of its context window tools may use.
//!
//! ```toml
//! [budget]
//! model = "claude-haiku-4-5"     # default: claude-sonnet-4-5
//! threshold_percent = 2          # 1 to 5; default 2
//! level = "auto"                 # or off | low | medium | high | extreme
//! mode = "auto"                  # or full | progressive | host_search
//! list_catalog = true            # deferred tools' lines in search_tools' description when they fit
//! host_search_threshold_percent = 10  # mode = "host_search": 1 to 50; default 10
//! host_deferral = "off"          # or cooperate | host: the host defers tools itself
//! usage_file = "usage.json"      # call counts per tool, read at start (opt-in; default none)
//! relearn_secs = 86400           # counts re-plan the list at most this often; default 86400
//! # Profile overrides (required for a model without a built-in profile):
//! # context_window = 200000, tokenizer = "cl100k_base", rendering = "anthropic",
//! # max_tools = 12, overhead_tokens = 346, calibration = 1.25
//!
//! [budget.tools."github/create_issue"]  # or "github/*"
//! pin = true                     # always listed directly, description never compressed
//! description = "Open an issue"  # replaces the upstream's description
//! min_level = "medium"           # compressed at least this much
//! max_result_tokens = 2000       # longer results: a head, a summary, the rest by read_result
//! result_format = "toon"         # or json | off: lossless compaction of text results
//! ```
//!
//! Kept results (`read_result`) are bounded by `[budget] result_ttl_secs` (default 1800),
//! `result_session_bytes` (default 8 MiB) and `result_store_bytes` (default 64 MiB).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::DiscoverPolicy;
use super::problems::{At, Section};
use crate::catalog::CatalogTool;
use crate::compress::Level;
use crate::plan::Rules;
pub use crate::plan::{Budget, HostDeferral, LevelChoice, ModeChoice};
use crate::profile::{self, Profile, ProfileError, ProfileOverrides};
use crate::results::{ResultFormat, StoreLimits};
use crate::tokens::Wording;

/// Default share of the context window, in hundredths of a percent (2%).
pub const DEFAULT_THRESHOLD_BP: u32 = 200;
/// Default share of the context window with `mode = "host_search"` (10%): the host loads tool
/// names first and a definition only when its search picks the tool, so the whole list may be
/// larger than what a host pays for on every turn.
pub const DEFAULT_HOST_SEARCH_BP: u32 = 1_000;
/// Default time between relearns of the usage file's counts (a day).
pub const DEFAULT_RELEARN_SECS: u64 = 86_400;
/// Largest `context_window` and `overhead_tokens` accepted (2^32 tokens, thousands of times any
/// model's): budget and plan arithmetic on larger values would overflow.
pub const MAX_TOKENS_SETTING: usize = 1 << 32;

/// `[budget]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawBudget {
    /// Apply the budget to `tools/list` in the gateway. `false` passes lists through
    /// unchanged (only names are namespaced). Default: true.
    pub enabled: Option<bool>,
    /// Host model, e.g. `"claude-haiku-4-5"`. Default: `"claude-sonnet-4-5"`.
    pub model: Option<String>,
    /// Share of the context window tools may use, 1 to 5 (percent). Default: 2.
    pub threshold_percent: Option<f64>,
    /// Compression level: `auto` or a fixed level. Default: `"auto"`.
    pub level: Option<String>,
    /// Exposure: `auto`, `full` (every tool listed) or `progressive` (search meta-tools).
    /// Default: `"auto"`.
    pub mode: Option<String>,
    /// List deferred tools' one-line entries in the search meta-tool's description when they
    /// fit. Default: true.
    pub list_catalog: Option<bool>,
    /// With `mode = "host_search"`: share of the context window the listed tools may use, 1 to
    /// 50 (percent). Default: 10.
    pub host_search_threshold_percent: Option<f64>,
    /// Whether the host defers tools itself: `off` (the gateway defers: the plan's tools
    /// listed, the rest behind the meta-tools), `cooperate` (every tool listed, the plan's
    /// marked `_meta["anthropic/alwaysLoad"] = true`, the rest left to the host's search, the
    /// meta-tools kept) or `host` (as `cooperate`, without the meta-tools). The plan's tools and
    /// the meta-tools carry the marker in every case. Not with `mode = "host_search"`.
    /// Default: `"off"`.
    pub host_deferral: Option<String>,
    /// File of call counts per `"server/tool"` (a JSON object), read at start, counted into
    /// and rewritten by the gateway; the hybrid rung lists a server's most-called tools
    /// first.
    /// Default: none (no counting).
    pub usage_file: Option<PathBuf>,
    /// Counts change the plan at most once per this many seconds, so the listed bytes stay
    /// stable between relearns. Default: 86400.
    pub relearn_secs: Option<u64>,
    /// Context window override, in tokens. Default: the model's.
    pub context_window: Option<usize>,
    /// Tokenizer override: `o200k_base` or `cl100k_base`. Default: the model's.
    pub tokenizer: Option<String>,
    /// Rendering override: `openai`, `anthropic` or `raw`. Default: the model's.
    pub rendering: Option<String>,
    /// Tool-count cap override. Default: the model's.
    pub max_tools: Option<usize>,
    /// Fixed overhead override, in tokens (Anthropic: 346 for tool choice auto, 313 for any).
    /// Default: the model's.
    pub overhead_tokens: Option<usize>,
    /// Multiplier on BPE counts, 0.5 to 3. Default: the model's (1.25 for Claude 4.x up to 4.6, 1.7 for Opus 4.7 and later, else 1;
    /// `mcp-budget calibrate` measures it).
    pub calibration: Option<f64>,
    /// Seconds a result over its `max_result_tokens` is kept for `read_result`. Default: 1800.
    pub result_ttl_secs: Option<u64>,
    /// Most bytes of kept results per session (the oldest go first). Default: 8388608 (8 MiB).
    pub result_session_bytes: Option<usize>,
    /// Most bytes of kept results in all sessions (the oldest go first). Default: 67108864
    /// (64 MiB).
    pub result_store_bytes: Option<usize>,
    /// Per-tool rules keyed by `"server/tool"` or `"server/*"`. Default: none.
    #[serde(default)]
    pub tools: BTreeMap<String, RawToolRule>,
}

/// One `[budget.tools."server/tool"]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawToolRule {
    /// Always list directly with the description uncompressed. Default: false.
    #[serde(default)]
    pub pin: bool,
    /// Replaces the upstream's description. Default: none.
    pub description: Option<String>,
    /// Compress this tool at least this much. Default: none.
    pub min_level: Option<String>,
    /// A text result over this many tokens keeps its head and a structural summary; the whole
    /// result is kept for the session and read with `read_result` (`"server/*"`: every tool of
    /// the server). Default: none (results pass whole).
    pub max_result_tokens: Option<usize>,
    /// Lossless compaction of text results: `off`, `json` (minified) or `toon` (JSON as TOON,
    /// CSV as a TOON table and YAML data as TOON when smaller, else minified JSON); used only
    /// when the counted tokens drop. Default: `"off"`.
    pub result_format: Option<String>,
}

/// A validated per-tool rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolRule {
    /// Always listed directly, description never compressed.
    pub pin: bool,
    /// Description override.
    pub description: Option<String>,
    /// Least compression applied.
    pub min_level: Option<Level>,
    /// Most tokens of a text result (longer ones keep a head; the rest is read back).
    pub max_result_tokens: Option<usize>,
    /// How text results are compacted.
    pub result_format: ResultFormat,
}

/// `[budget]` validated.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BudgetPolicy {
    /// Whether the gateway applies the budget to `tools/list`.
    pub enabled: bool,
    /// The model name as written (or the default).
    pub model: String,
    /// The profile overrides written in the policy.
    pub overrides: ProfileOverrides,
    /// The resolved profile.
    pub profile: Profile,
    /// Share of the context window, in hundredths of a percent (200 = 2%).
    pub threshold_bp: u32,
    /// Compression level choice.
    pub level: LevelChoice,
    /// Exposure choice.
    pub mode: ModeChoice,
    /// List deferred tools' lines when they fit.
    pub list_catalog: bool,
    /// With `mode = "host_search"`: share of the context window, in hundredths of a percent.
    pub host_search_bp: u32,
    /// Whether the host defers tools itself.
    pub host_deferral: HostDeferral,
    /// The usage file, if counting is on.
    pub usage_file: Option<PathBuf>,
    /// Seconds between relearns of the usage counts (at least 1).
    pub relearn_secs: u64,
    /// Per-tool rules: `(pattern, rule)`, patterns `server/tool` or `server/*`.
    pub tools: Vec<(String, ToolRule)>,
    /// The bounds of the kept results `read_result` reads.
    pub results: StoreLimits,
}

impl Default for BudgetPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            model: profile::DEFAULT_MODEL.to_owned(),
            overrides: ProfileOverrides::default(),
            profile: profile::builtin(profile::DEFAULT_MODEL)
                .expect("the default model has a built-in profile"),
            threshold_bp: DEFAULT_THRESHOLD_BP,
            level: LevelChoice::Auto,
            mode: ModeChoice::Auto,
            list_catalog: true,
            host_search_bp: DEFAULT_HOST_SEARCH_BP,
            host_deferral: HostDeferral::Off,
            usage_file: None,
            relearn_secs: DEFAULT_RELEARN_SECS,
            tools: Vec::new(),
            results: StoreLimits::default(),
        }
    }
}

impl BudgetPolicy {
    /// The rule for tool `tool` of server `server`: an exact `server/tool` pattern, else the
    /// longest matching `prefix*` pattern.
    #[must_use]
    pub fn rule(&self, server: &str, tool: &str) -> Option<&ToolRule> {
        if self.tools.is_empty() {
            return None;
        }
        let id = format!("{server}/{tool}");
        let mut best: Option<(usize, &ToolRule)> = None;
        for (pattern, rule) in &self.tools {
            let len = if *pattern == id {
                usize::MAX
            } else if let Some(prefix) = pattern.strip_suffix('*') {
                if id.starts_with(prefix) {
                    prefix.len()
                } else {
                    continue;
                }
            } else {
                continue;
            };
            if best.is_none_or(|(l, _)| len > l) {
                best = Some((len, rule));
            }
        }
        best.map(|(_, r)| r)
    }

    /// The result budget of tool `tool` of server `server` (its rule's `max_result_tokens`).
    #[must_use]
    pub fn max_result_tokens(&self, server: &str, tool: &str) -> Option<usize> {
        if !self.has_result_budgets() {
            return None;
        }
        self.rule(server, tool)?.max_result_tokens
    }

    /// Whether any rule sets `max_result_tokens` (then `read_result` is served).
    #[must_use]
    pub fn has_result_budgets(&self) -> bool {
        self.tools
            .iter()
            .any(|(_, r)| r.max_result_tokens.is_some())
    }

    /// Whether any rule budgets or compacts results (most policies: none, and then no rule is
    /// looked up per call).
    #[must_use]
    pub fn has_result_rules(&self) -> bool {
        self.tools
            .iter()
            .any(|(_, r)| r.max_result_tokens.is_some() || r.result_format != ResultFormat::Off)
    }

    /// The result rule of tool `tool` of server `server`: its budget and format, `None` when
    /// it has neither.
    #[must_use]
    pub fn result_rule(&self, server: &str, tool: &str) -> Option<(Option<usize>, ResultFormat)> {
        if !self.has_result_rules() {
            return None;
        }
        let rule = self.rule(server, tool)?;
        let some = rule.max_result_tokens.is_some() || rule.result_format != ResultFormat::Off;
        some.then_some((rule.max_result_tokens, rule.result_format))
    }

    /// The token and tool-count budget (with `mode = "host_search"`, its larger share; the
    /// planner then ignores the tool cap).
    #[must_use]
    pub fn budget(&self) -> Budget {
        let bp = if self.mode == ModeChoice::HostSearch {
            self.host_search_bp
        } else {
            self.threshold_bp
        };
        Budget {
            tokens: self.profile.context_window * bp as usize / 10_000,
            tools: self.profile.max_tools,
        }
    }

    /// The planner's [`Rules`] for `catalog`, in the order it will be planned: this section's
    /// budget, choices and per-tool rules, with the exposed names joined by `separator`, the
    /// meta-tools named by `discover`, and its `never_defer` tools pinned.
    #[doc(hidden)]
    #[must_use]
    pub fn rules(
        &self,
        catalog: &[CatalogTool],
        separator: &str,
        discover: &DiscoverPolicy,
    ) -> Rules {
        let host_defers = self.host_deferral != HostDeferral::Off;
        let mut rules = Rules {
            budget: self.budget(),
            level: self.level,
            mode: self.mode,
            // The host lists the deferred tools itself: their lines would say it twice.
            list_catalog: self.list_catalog && !host_defers,
            pins: Vec::new(),
            min_levels: Vec::new(),
            wording: Wording {
                separator: separator.to_owned(),
                // Without the gateway's meta-tools, their slots and tokens go to tools.
                meta: if self.host_deferral == HostDeferral::Host {
                    Vec::new()
                } else {
                    crate::discover::meta_tool_definitions(&discover.names)
                },
                descriptions: Vec::new(),
            },
            usage: Vec::new(),
            host_deferral: self.host_deferral,
        };
        // No per-tool rules: the per-tool vectors stay empty (nothing pinned, nothing replaced).
        if self.tools.is_empty() && discover.never_defer.is_empty() {
            return rules;
        }
        for tool in catalog {
            let rule = self.rule(&tool.server, &tool.name);
            let never_deferred = !discover.never_defer.is_empty()
                && discover.never_deferred(&tool.id(), &tool.exposed_name(separator));
            rules
                .pins
                .push(never_deferred || rule.is_some_and(|r| r.pin));
            rules
                .min_levels
                .push(rule.and_then(|r| r.min_level).unwrap_or(Level::Off));
            rules
                .wording
                .descriptions
                .push(rule.and_then(|r| r.description.clone()));
        }
        rules
    }

    /// The same policy for another model (the written overrides still apply).
    ///
    /// # Errors
    /// [`ProfileError`] when the model has no built-in profile and the overrides are missing.
    pub fn with_model(&self, model: &str) -> Result<Self, ProfileError> {
        Ok(Self {
            model: model.to_owned(),
            profile: profile::resolve(model, &self.overrides)?,
            ..self.clone()
        })
    }

    /// The same policy with other profile overrides.
    ///
    /// # Errors
    /// [`ProfileError`] when the model has no built-in profile and the overrides are missing.
    pub fn with_overrides(&self, overrides: ProfileOverrides) -> Result<Self, ProfileError> {
        Ok(Self {
            profile: profile::resolve(&self.model, &overrides)?,
            overrides,
            ..self.clone()
        })
    }
}

impl Section for RawBudget {
    type Valid = BudgetPolicy;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> BudgetPolicy {
        let mut policy = BudgetPolicy::default();
        if let Some(bp) = percent(&mut at, "threshold_percent", self.threshold_percent, 5.0) {
            policy.threshold_bp = bp;
        }
        let host = self.host_search_threshold_percent;
        if let Some(bp) = percent(&mut at, "host_search_threshold_percent", host, 50.0) {
            policy.host_search_bp = bp;
        }
        let overrides = self.overrides(&mut at);
        policy.results = self.result_limits(&mut at);
        if let Some(level) = at.parse("level", self.level.as_deref(), str::parse) {
            policy.level = level;
        }
        if let Some(mode) = at.parse("mode", self.mode.as_deref(), str::parse) {
            policy.mode = mode;
        }
        policy.list_catalog = self.list_catalog.unwrap_or(true);
        let deferral = self.host_deferral.as_deref();
        if let Some(d) = at.parse("host_deferral", deferral, str::parse) {
            policy.host_deferral = d;
            if d != HostDeferral::Off && policy.mode == ModeChoice::HostSearch {
                let why = "the host searches every tool with mode = \"host_search\"; use one";
                at.push_at("host_deferral", why);
            }
        }
        policy.usage_file = self.usage_file;
        match self.relearn_secs {
            Some(0) => at.push_at("relearn_secs", "must be at least 1"),
            secs => {
                let max = super::problems::MAX_SECS;
                if let Some(secs) = at.bounded("relearn_secs", secs, max) {
                    policy.relearn_secs = secs;
                }
            }
        }
        policy.enabled = self.enabled.unwrap_or(true);
        if let Some(model) = self.model {
            policy.model = model;
        }
        match profile::resolve(&policy.model, &overrides) {
            Ok(p) => policy.profile = p,
            Err(e) => at.push_at("model", e.to_string()),
        }
        policy.overrides = overrides;
        let mut tools = at.at("tools");
        for (pattern, raw) in self.tools {
            let rule = raw.validate(&pattern, tools.quoted(&pattern));
            policy.tools.push((pattern, rule));
        }
        policy
    }
}

/// A percent of the context window in `1..=max`, as hundredths (basis points).
fn percent(at: &mut At<'_>, key: &str, value: Option<f64>, max: f64) -> Option<u32> {
    at.parse(key, value, |pct| {
        if (1.0..=max).contains(&pct) {
            // In range 1..=50, so the product is a small positive integer.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let hundredths = (pct * 100.0).round() as u32;
            Ok(hundredths)
        } else {
            Err(format!(
                "{pct} is outside 1 to {max} (percent of the context window)"
            ))
        }
    })
}

impl RawBudget {
    /// `result_ttl_secs`, `result_session_bytes` and `result_store_bytes`.
    fn result_limits(&self, at: &mut At<'_>) -> StoreLimits {
        let mut limits = StoreLimits::default();
        if self.result_ttl_secs == Some(0) {
            at.push_at("result_ttl_secs", "must be at least 1");
        } else if let Some(secs) = at.bounded(
            "result_ttl_secs",
            self.result_ttl_secs,
            super::problems::MAX_SECS,
        ) {
            limits.ttl = std::time::Duration::from_secs(secs);
        }
        for (key, value, slot) in [
            (
                "result_session_bytes",
                self.result_session_bytes,
                &mut limits.session_bytes,
            ),
            (
                "result_store_bytes",
                self.result_store_bytes,
                &mut limits.store_bytes,
            ),
        ] {
            match value {
                Some(0) => at.push_at(key, "must be at least 1"),
                Some(v) => *slot = v,
                None => {}
            }
        }
        if limits.session_bytes > limits.store_bytes {
            at.push_at(
                "result_session_bytes",
                "must be at most result_store_bytes (a session's share of the store)",
            );
        }
        limits
    }

    /// The keys that override the model's profile.
    fn overrides(&self, at: &mut At<'_>) -> ProfileOverrides {
        let mut overrides = ProfileOverrides {
            context_window: self.context_window,
            max_tools: self.max_tools,
            overhead_tokens: self.overhead_tokens,
            ..ProfileOverrides::default()
        };
        if self.context_window == Some(0) {
            at.push_at("context_window", "must be greater than 0");
        }
        for (key, value) in [
            ("context_window", self.context_window),
            ("overhead_tokens", self.overhead_tokens),
        ] {
            if value.is_some_and(|v| v > MAX_TOKENS_SETTING) {
                at.push_at(key, format!("must be at most {MAX_TOKENS_SETTING} tokens"));
            }
        }
        if self.max_tools == Some(0) {
            at.push_at("max_tools", "must be greater than 0");
        }
        overrides.encoding = at.parse("tokenizer", self.tokenizer.as_deref(), str::parse);
        overrides.rendering = at.parse("rendering", self.rendering.as_deref(), str::parse);
        overrides.calibration_permille = at.parse("calibration", self.calibration, |c| {
            if (0.5..=3.0).contains(&c) {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let permille = (c * 1000.0).round() as usize;
                Ok(permille)
            } else {
                Err(format!("{c} is outside 0.5 to 3"))
            }
        });
        overrides
    }
}

impl Section for RawToolRule {
    type Valid = ToolRule;
    /// The tool id pattern it is written under.
    type Context<'c> = &'c str;

    /// One `[budget.tools."<pattern>"]`, at its pattern.
    fn validate(self, pattern: &str, mut at: At<'_>) -> ToolRule {
        let valid = pattern
            .split_once('/')
            .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty());
        if !valid {
            at.push("expected \"server/tool\" or \"server/*\"");
        }
        let min_level = at.parse("min_level", self.min_level.as_deref(), str::parse::<Level>);
        if self.max_result_tokens == Some(0) {
            at.push_at("max_result_tokens", "must be at least 1");
        }
        let result_format = at
            .parse(
                "result_format",
                self.result_format.as_deref(),
                str::parse::<ResultFormat>,
            )
            .unwrap_or_default();
        if self.pin && min_level.is_some_and(|l| l > Level::Off) {
            at.push("a pinned tool is never compressed; drop pin or min_level");
        }
        ToolRule {
            pin: self.pin,
            description: self.description,
            min_level,
            max_result_tokens: self.max_result_tokens,
            result_format,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::compress::Level;
    use crate::policy::{ConfigError, Policy};

    #[test]
    fn parses_a_full_section() {
        let p = Policy::from_toml_str(
            "version = 1\n[budget]\nmodel = \"claude-haiku-4-5\"\nthreshold_percent = 1.5\nlevel = \"medium\"\n\
             [budget.tools.\"github/*\"]\nmin_level = \"high\"\n[budget.tools.\"github/create_issue\"]\npin = true\n",
            "t.toml",
        )
        .unwrap();
        let b = &p.budget;
        assert_eq!(b.budget().tokens, 3000);
        assert_eq!(b.budget().tools, 12);
        assert!(b.rule("github", "create_issue").unwrap().pin);
        assert!(!b.rule("github", "get_me").unwrap().pin);
        assert!(b.rule("git", "log").is_none());
    }

    #[test]
    fn rules_resolve_each_tool_and_pin_never_deferred_ones() {
        use crate::catalog::CatalogTool;
        let p = Policy::from_toml_str(
            "version = 1\n[aggregate]\nseparator = \"-\"\n\
             [budget.tools.\"github/*\"]\nmin_level = \"high\"\n\
             [budget.tools.\"github/create_issue\"]\npin = true\ndescription = \"Open an issue\"\n\
             [discover]\nsearch_tool = \"find\"\nnever_defer = [\"time-*\"]\n",
            "t.toml",
        )
        .unwrap();
        let tool = |server: &str, name: &str| {
            CatalogTool::new(server, serde_json::json!({"name": name})).unwrap()
        };
        let catalog = [
            tool("github", "create_issue"),
            tool("github", "get_me"),
            tool("time", "now"),
            tool("git", "log"),
        ];
        let rules = p.budget.rules(&catalog, &p.separator, &p.discover);
        assert_eq!(rules.budget, p.budget.budget());
        assert_eq!(rules.pins, [true, false, true, false]);
        // The exact pattern wins over `github/*` (rules are not merged).
        assert_eq!(
            rules.min_levels,
            [Level::Off, Level::High, Level::Off, Level::Off]
        );
        let descriptions: Vec<_> = (0..4).map(|i| rules.wording.description(i)).collect();
        assert_eq!(descriptions, [Some("Open an issue"), None, None, None]);
        assert_eq!(
            (
                rules.wording.separator.as_str(),
                rules.wording.meta[0]["name"].as_str().unwrap()
            ),
            ("-", "find")
        );
        // Without per-tool rules, nothing per tool.
        let plain = Policy::default();
        let rules = plain.budget.rules(&catalog, "__", &plain.discover);
        assert!(rules.pins.is_empty() && rules.min_levels.is_empty());
        assert!(rules.wording.descriptions.is_empty());
    }

    #[test]
    fn reports_problems_with_paths() {
        let Err(ConfigError::Invalid { problems, .. }) = Policy::from_toml_str(
            "version = 1\n[budget]\nmodel = \"llama\"\nthreshold_percent = 9\nlevel = \"tiny\"\n",
            "t.toml",
        ) else {
            panic!("expected problems")
        };
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            ["budget.threshold_percent", "budget.level", "budget.model"]
        );
    }

    #[test]
    fn host_deferral_is_read_and_shapes_the_rules() {
        let policy = |extra: &str| {
            Policy::from_toml_str(&format!("version = 1\n[budget]\n{extra}"), "t.toml")
        };
        let p = policy("host_deferral = \"host\"\n").unwrap();
        assert_eq!(p.budget.host_deferral, super::HostDeferral::Host);
        let rules = p.budget.rules(&[], "__", &p.discover);
        // No meta-tools, no catalog lines: the host lists and searches the rest itself.
        assert!(rules.wording.meta.is_empty() && !rules.list_catalog);
        let p = policy("host_deferral = \"cooperate\"\n").unwrap();
        let rules = p.budget.rules(&[], "__", &p.discover);
        assert_eq!(rules.wording.meta.len(), 3);
        assert_eq!(
            Policy::default().budget.host_deferral,
            super::HostDeferral::Off
        );
        let Err(ConfigError::Invalid { problems, .. }) =
            policy("mode = \"host_search\"\nhost_deferral = \"host\"\n")
        else {
            panic!("host_search with host_deferral")
        };
        assert_eq!(problems[0].path, "budget.host_deferral");
        let Err(ConfigError::Invalid { problems, .. }) = policy("host_deferral = \"maybe\"\n")
        else {
            panic!("an unknown value")
        };
        assert!(
            problems[0].message.contains("off, cooperate or host"),
            "{problems:?}"
        );
    }

    #[test]
    fn host_search_and_usage_keys() {
        let p = Policy::from_toml_str(
            "version = 1\n[budget]\nmode = \"host_search\"\nhost_search_threshold_percent = 20\n\
             usage_file = \"u.json\"\nrelearn_secs = 60\n",
            "t.toml",
        )
        .unwrap();
        let b = &p.budget;
        // 20% of Sonnet 4.5's 200k: the host-search share, not threshold_percent's 2%.
        assert_eq!(b.budget().tokens, 40_000);
        assert_eq!(
            b.usage_file.as_deref(),
            Some(std::path::Path::new("u.json"))
        );
        assert_eq!(b.relearn_secs, 60);
        let plain = Policy::default();
        assert_eq!(plain.budget.budget().tokens, 4_000);
        assert_eq!(
            (plain.budget.usage_file.as_ref(), plain.budget.relearn_secs),
            (None, 86_400)
        );
        let Err(ConfigError::Invalid { problems, .. }) = Policy::from_toml_str(
            "version = 1\n[budget]\nrelearn_secs = 0\nhost_search_threshold_percent = 60\nmode = \"hosted\"\n",
            "t.toml",
        ) else {
            panic!("expected problems")
        };
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "budget.host_search_threshold_percent",
                "budget.mode",
                "budget.relearn_secs"
            ]
        );
    }

    #[test]
    fn unknown_keys_are_errors() {
        assert!(Policy::from_toml_str("version = 1\n[budget]\nthreshold = 2\n", "t").is_err());
    }

    /// Found by fuzzing (`tests/fixtures/fuzz/policy/`): values near `i64::MAX` validated, then
    /// overflowed the budget and plan arithmetic.
    #[test]
    fn token_settings_beyond_the_limit_are_refused() {
        for key in ["context_window", "overhead_tokens"] {
            let text = format!("version = 1\n[budget]\n{key} = 9223372036854775807\n");
            let Err(ConfigError::Invalid { problems, .. }) = Policy::from_toml_str(&text, "t")
            else {
                panic!("expected problems for {key}")
            };
            assert_eq!(problems[0].path, format!("budget.{key}"));
        }
        let text =
            "version = 1\n[budget]\ncontext_window = 4294967296\noverhead_tokens = 4294967296\n";
        let p = Policy::from_toml_str(text, "t").unwrap();
        assert_eq!(p.budget.budget().tokens, 85_899_345);
    }
}
