//! `[discover]`: progressive discovery (the meta-tools and search).
//!
//! ```toml
//! [discover]
//! search_tool = "search_tools"       # meta-tool names (rename when chaining gateways)
//! schema_tool = "get_tool_schema"
//! invoke_tool = "invoke_tool"
//! never_defer = ["github/create_*", "time__get_current_time"]
//! promote_on_use = false
//! usage_prior = 0.3                  # called tools rank higher in search when scores are close
//! vocabulary_file = "words.json"     # {"word users say": ["word tools use"]} (default none)
//! default_limit = 5
//! max_limit = 20
//! native_disclosure = false          # experimental: tools/catalog + tools/describe
//! code_mode = false                  # the run_code meta-tool (a JavaScript sandbox)
//! code_tool = "run_code"
//! code_mode_timeout_ms = 5000        # its limits, per run
//! code_mode_max_steps = 20000
//! code_mode_memory_mb = 64
//! code_mode_stack_kb = 512
//! code_mode_max_calls = 50
//! code_mode_max_result_bytes = 4000000
//! code_mode_max_result_tokens = 4000
//! code_mode_max_runs = 4
//! embedding_model = "models/all-MiniLM-L6-v2"   # semantic reranker (feature `semantic`)
//! embedding_cache_dir = "/var/cache/mcp-budget"  # its catalog vectors
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;

use super::problems::{At, Section};
pub use crate::codemode::Limits;
pub use crate::discover::{MetaTool, MetaToolNames, SearchLimits};
use crate::naming;
pub use crate::search::Vocabulary;

/// The usage prior's default weight (`[discover] usage_prior`, and `mcp-budget search --usage`
/// without `--usage-prior`), chosen with `scripts/eval-usage-prior.py` on the dev queries.
pub const DEFAULT_USAGE_PRIOR: f32 = 0.3;

/// Reads a vocabulary file (`[discover] vocabulary_file`, `search --vocabulary`).
///
/// # Errors
/// A message naming the file and what is wrong with it.
pub fn read_vocabulary(path: &std::path::Path) -> Result<Vocabulary, String> {
    let text = crate::files::read_text(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Vocabulary::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Largest accepted `max_limit`: more results than this cost more tokens than listing tools.
pub const MAX_SEARCH_LIMIT: usize = 50;

/// `[discover]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawDiscover {
    /// Name of the search meta-tool. Default: `"search_tools"`.
    pub search_tool: Option<String>,
    /// Name of the schema meta-tool. Default: `"get_tool_schema"`.
    pub schema_tool: Option<String>,
    /// Name of the invoke meta-tool. Default: `"invoke_tool"`.
    pub invoke_tool: Option<String>,
    /// Tools never deferred behind search, as patterns over `server/tool` ids or exposed
    /// names; `*` matches any run of characters, `?` one. Default: none.
    #[serde(default)]
    pub never_defer: Vec<String>,
    /// Once a deferred tool is invoked, list it directly for that caller from then on (appended
    /// after the static tools, so cached prefixes survive). Default: false.
    #[serde(default)]
    pub promote_on_use: bool,
    /// How much the tools this deployment calls (`[budget] usage_file`'s counts, relearned every
    /// `relearn_secs`) rank higher in search among close candidates (0..=1; 0 turns it off; the
    /// most called tool's score × `1 + usage_prior`). Acts only with a usage file. Default: 0.3.
    pub usage_prior: Option<f64>,
    /// A JSON file of the words this deployment's users say for the words its tools use,
    /// `{"changeset": ["merge request"], "ticket": ["issue"]}`: search also looks for them, at
    /// half a word's own weight (as the built-in equivalents). Read at start and at each
    /// reload; at most 10000 words. Default: none.
    pub vocabulary_file: Option<std::path::PathBuf>,
    /// Results returned by search when the model gives no `limit`. Default: 5.
    pub default_limit: Option<usize>,
    /// Most results search returns, whatever `limit` the model asks for. Default: 20.
    pub max_limit: Option<usize>,
    /// Experimental: serve the draft SEP "Progressive Tool Disclosure" (`tools/catalog`,
    /// `tools/describe`) to clients that declare `tools.progressiveDisclosure`, instead of
    /// the meta-tools. Needs the budget layer. Default: false.
    #[serde(default)]
    pub native_disclosure: bool,
    /// Offer the code-mode meta-tool with the meta-tools: a JavaScript program whose tool
    /// calls run in a sandbox, only its result entering the context. Needs the budget layer.
    /// Default: false.
    #[serde(default)]
    pub code_mode: bool,
    /// Name of the code-mode meta-tool. Default: `"run_code"`.
    pub code_tool: Option<String>,
    /// Wall time of one run, tool calls included, ms (1..=60000). Default: 5000.
    pub code_mode_timeout_ms: Option<u64>,
    /// Interpreter steps of one run, in interrupt checks of about 10,000 function calls and
    /// loop iterations each (1..=10000000). Default: 20000.
    pub code_mode_max_steps: Option<u64>,
    /// Engine heap of one run, MiB (1..=1024). Default: 64.
    pub code_mode_memory_mb: Option<u64>,
    /// Engine stack of one run, KiB: bounds call depth (64..=8192). Default: 512.
    pub code_mode_stack_kb: Option<u64>,
    /// Tool calls of one run (1..=10000). Default: 50.
    pub code_mode_max_calls: Option<u64>,
    /// Bytes of tool results handed to one run's script, as JSON (1..=1000000000). Default:
    /// 4000000.
    pub code_mode_max_result_bytes: Option<u64>,
    /// Tokens of a run's result (1..=1000000). Default: 4000.
    pub code_mode_max_result_tokens: Option<u64>,
    /// Runs at once, gateway-wide; one more is answered with an error (1..=256). Default: 4.
    pub code_mode_max_runs: Option<u64>,
    /// Lossless compaction of a run's result, as `[budget.tools] result_format`: `off`,
    /// `json` or `toon`. Default: `"off"`.
    pub code_mode_result_format: Option<String>,
    /// A sentence-transformers model directory (`config.json`, `tokenizer.json`,
    /// `model.safetensors`; e.g. all-MiniLM-L6-v2), relative to the policy file's folder:
    /// `search_tools` fuses the cosine of the query with each tool's text into its lexical
    /// ranking. The model loads and the catalog is embedded on a thread of their own; until the
    /// vectors are ready, search is lexical. Needs a build with the `semantic` feature (the
    /// default). Default: none (lexical search, nothing loaded).
    pub embedding_model: Option<PathBuf>,
    /// Where the catalog's vectors are cached between starts (keyed by the model's and each
    /// tool text's hash), relative to the policy file's folder. Default:
    /// `$XDG_CACHE_HOME/mcp-budget/embeddings`, else `~/.cache/mcp-budget/embeddings`, else
    /// none (embedded at each start).
    pub embedding_cache_dir: Option<PathBuf>,
}

/// `[discover] code_mode`, validated: the run limits and the gateway's own.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CodeMode {
    /// Per run, enforced in the sandbox.
    pub limits: Limits,
    /// Tokens of a run's result.
    pub max_result_tokens: usize,
    /// Runs at once.
    pub max_runs: usize,
    /// How a run's result is compacted.
    pub result_format: crate::results::ResultFormat,
}

impl Default for CodeMode {
    /// The sandbox's default [`Limits`], 4000 result tokens, 4 runs at once.
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            max_result_tokens: 4000,
            max_runs: 4,
            result_format: crate::results::ResultFormat::Off,
        }
    }
}

/// `[discover]` validated (defaults: the default meta-tool names and search limits, nothing
/// pinned or promoted, the usage prior at [`DEFAULT_USAGE_PRIOR`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DiscoverPolicy {
    /// Names of the meta-tools.
    pub names: MetaToolNames,
    /// Tools never deferred.
    pub never_defer: Vec<ToolPattern>,
    /// List a deferred tool directly once it has been invoked.
    pub promote_on_use: bool,
    /// Weight of the usage prior in search (0..=1, 0 off; see [`SearchIndex::set_usage`]).
    ///
    /// [`SearchIndex::set_usage`]: crate::search::SearchIndex::set_usage
    pub usage_prior: f32,
    /// The deployment's own equivalents (`vocabulary_file`), when given and readable.
    pub vocabulary: Option<Arc<Vocabulary>>,
    /// Search results: `default` from `default_limit` (1..=`max`), `max` from `max_limit`
    /// (1..=[`MAX_SEARCH_LIMIT`]).
    pub limits: SearchLimits,
    /// Serve `tools/catalog` and `tools/describe` to clients that declare progressive
    /// disclosure.
    pub native_disclosure: bool,
    /// Code mode, when on (its meta-tool's name is `names.code`).
    pub code_mode: Option<CodeMode>,
    /// The semantic reranker's model directory (checked to hold the model files), if any.
    pub embedding_model: Option<PathBuf>,
    /// Where its catalog vectors are cached, when not the default directory.
    pub embedding_cache_dir: Option<PathBuf>,
}

impl Default for DiscoverPolicy {
    fn default() -> Self {
        Self {
            names: MetaToolNames::default(),
            never_defer: Vec::new(),
            promote_on_use: false,
            usage_prior: DEFAULT_USAGE_PRIOR,
            vocabulary: None,
            limits: SearchLimits::default(),
            native_disclosure: false,
            code_mode: None,
            embedding_model: None,
            embedding_cache_dir: None,
        }
    }
}

impl DiscoverPolicy {
    /// Whether a tool (by `server/tool` id or exposed name) must always be listed directly.
    #[must_use]
    pub fn never_deferred(&self, id: &str, exposed: &str) -> bool {
        self.never_defer
            .iter()
            .any(|p| p.matches(id) || p.matches(exposed))
    }
}

/// A glob over tool ids or names: `*` matches any run of characters, `?` exactly one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPattern(String);

impl ToolPattern {
    /// Wraps a pattern.
    #[must_use]
    pub fn new(pattern: &str) -> Self {
        Self(pattern.to_owned())
    }

    /// The pattern as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `text` matches the whole pattern.
    #[must_use]
    pub fn matches(&self, text: &str) -> bool {
        let p: Vec<char> = self.0.chars().collect();
        let t: Vec<char> = text.chars().collect();
        // Iterative wildcard match with backtracking to the last `*`: linear in practice.
        let (mut pi, mut ti) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
                pi += 1;
                ti += 1;
            } else if pi < p.len() && p[pi] == '*' {
                star = Some((pi, ti));
                pi += 1;
            } else if let Some((sp, st)) = star {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|&c| c == '*')
    }
}

impl Section for RawDiscover {
    type Valid = DiscoverPolicy;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> DiscoverPolicy {
        let names = self.names(&mut at);
        let code_mode = self.code_mode.then(|| self.code_limits(&mut at));
        if names.search == names.schema
            || names.search == names.invoke
            || names.schema == names.invoke
        {
            at.push("search_tool, schema_tool and invoke_tool must be three different names");
        }
        let mut never_defer = Vec::with_capacity(self.never_defer.len());
        for (i, pattern) in self.never_defer.iter().enumerate() {
            if pattern.trim().is_empty() {
                (at.at("never_defer").index(i))
                    .push("empty pattern; write a `server/tool` id, an exposed name, or a glob");
            } else {
                never_defer.push(ToolPattern::new(pattern.trim()));
            }
        }
        let limits = self.search_limits(&mut at);
        let usage_prior = at
            .parse("usage_prior", self.usage_prior, |w| {
                if (0.0..=1.0).contains(&w) {
                    #[allow(clippy::cast_possible_truncation)] // within 0..=1
                    Ok(w as f32)
                } else {
                    Err(format!("must be between 0 and 1, got {w}"))
                }
            })
            .unwrap_or(DEFAULT_USAGE_PRIOR);
        let vocabulary = at
            .file_exists(
                "vocabulary_file",
                self.vocabulary_file.as_deref(),
                read_vocabulary,
            )
            .map(Arc::new);
        let embedding_model = self.embedding_model(&mut at);
        DiscoverPolicy {
            names,
            never_defer,
            promote_on_use: self.promote_on_use,
            usage_prior,
            vocabulary,
            native_disclosure: self.native_disclosure,
            code_mode,
            limits,
            embedding_model,
            embedding_cache_dir: self.embedding_cache_dir,
        }
    }
}

impl RawDiscover {
    /// `embedding_model`, when it is a directory with the model files (and the build can run
    /// it).
    fn embedding_model(&self, at: &mut At<'_>) -> Option<PathBuf> {
        let dir = self.embedding_model.as_ref()?;
        if !cfg!(feature = "semantic") {
            at.push_at(
                "embedding_model",
                "this build has no semantic reranker (the `semantic` feature): remove the key or use a default build",
            );
            return None;
        }
        if !dir.is_dir() {
            at.push_at(
                "embedding_model",
                format!(
                    "{} is not a directory (a sentence-transformers model: {})",
                    dir.display(),
                    crate::semantic::MODEL_FILES.join(", ")
                ),
            );
            return None;
        }
        let missing = crate::semantic::missing_files(dir);
        if !missing.is_empty() {
            let names: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
            at.push_at(
                "embedding_model",
                format!("model file missing: {}", names.join(", ")),
            );
            return None;
        }
        Some(dir.clone())
    }

    /// The meta-tools' names, each a valid tool name, the code tool distinct from the others.
    fn names(&self, at: &mut At<'_>) -> MetaToolNames {
        let defaults = DiscoverPolicy::default();
        let mut name = |field: &str, value: &Option<String>, default: &str| -> String {
            let Some(value) = value else {
                return default.to_owned();
            };
            if !naming::is_valid(value) {
                at.push_at(
                    field,
                    format!(
                        "{value:?} is not a valid tool name (1-{} characters of a-z A-Z 0-9 _ -)",
                        naming::MAX_NAME_LEN
                    ),
                );
            }
            value.clone()
        };
        let names = MetaToolNames {
            search: name("search_tool", &self.search_tool, &defaults.names.search),
            schema: name("schema_tool", &self.schema_tool, &defaults.names.schema),
            invoke: name("invoke_tool", &self.invoke_tool, &defaults.names.invoke),
            code: self
                .code_mode
                .then(|| name("code_tool", &self.code_tool, crate::codemode::DEFAULT_NAME)),
        };
        if names
            .code
            .as_ref()
            .is_some_and(|c| [&names.search, &names.schema, &names.invoke].contains(&c))
        {
            at.push_at(
                "code_tool",
                "must differ from search_tool, schema_tool and invoke_tool",
            );
        }
        names
    }

    /// `default_limit` and `max_limit`, each within its range.
    fn search_limits(&self, at: &mut At<'_>) -> SearchLimits {
        let defaults = DiscoverPolicy::default().limits;
        let max_limit = self.max_limit.unwrap_or(defaults.max);
        if !(1..=MAX_SEARCH_LIMIT).contains(&max_limit) {
            at.push_at(
                "max_limit",
                format!("must be between 1 and {MAX_SEARCH_LIMIT}, got {max_limit}"),
            );
        }
        let default_limit = self
            .default_limit
            .unwrap_or(defaults.default.min(max_limit));
        if default_limit == 0 || default_limit > max_limit {
            at.push_at(
                "default_limit",
                format!("must be between 1 and max_limit ({max_limit}), got {default_limit}"),
            );
        }
        SearchLimits {
            default: default_limit.clamp(1, MAX_SEARCH_LIMIT),
            max: max_limit.clamp(1, MAX_SEARCH_LIMIT),
        }
    }

    /// The `code_mode_*` limits, each within its range.
    fn code_limits(&self, at: &mut At<'_>) -> CodeMode {
        let mut value = |key: &str, given: Option<u64>, default: u64, (min, max): (u64, u64)| {
            at.parse(key, given, |v| {
                if (min..=max).contains(&v) {
                    Ok(v)
                } else {
                    Err(format!("must be between {min} and {max}, got {v}"))
                }
            })
            .unwrap_or(default)
        };
        let defaults = CodeMode::default();
        let d = &defaults.limits;
        let wide = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        let narrow = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        let timeout = u64::try_from(d.timeout.as_millis()).unwrap_or(5000);
        let timeout_ms = value(
            "code_mode_timeout_ms",
            self.code_mode_timeout_ms,
            timeout,
            (1, 60_000),
        );
        let limits = Limits {
            timeout: std::time::Duration::from_millis(timeout_ms),
            max_steps: value(
                "code_mode_max_steps",
                self.code_mode_max_steps,
                d.max_steps,
                (1, 10_000_000),
            ),
            memory_bytes: narrow(value(
                "code_mode_memory_mb",
                self.code_mode_memory_mb,
                wide(d.memory_bytes >> 20),
                (1, 1024),
            )) << 20,
            stack_bytes: narrow(value(
                "code_mode_stack_kb",
                self.code_mode_stack_kb,
                wide(d.stack_bytes >> 10),
                (64, 8192),
            )) << 10,
            max_calls: narrow(value(
                "code_mode_max_calls",
                self.code_mode_max_calls,
                wide(d.max_calls),
                (1, 10_000),
            )),
            max_result_bytes: narrow(value(
                "code_mode_max_result_bytes",
                self.code_mode_max_result_bytes,
                wide(d.max_result_bytes),
                (1, 1_000_000_000),
            )),
        };
        let code = CodeMode {
            limits,
            max_result_tokens: narrow(value(
                "code_mode_max_result_tokens",
                self.code_mode_max_result_tokens,
                wide(defaults.max_result_tokens),
                (1, 1_000_000),
            )),
            max_runs: narrow(value(
                "code_mode_max_runs",
                self.code_mode_max_runs,
                wide(defaults.max_runs),
                (1, 256),
            )),
            result_format: crate::results::ResultFormat::Off,
        };
        let format = self.code_mode_result_format.as_deref();
        let result_format = at
            .parse("code_mode_result_format", format, str::parse)
            .unwrap_or_default();
        CodeMode {
            result_format,
            ..code
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::problems::Problems;

    fn validate(toml_text: &str) -> (DiscoverPolicy, Vec<(String, String)>) {
        let raw: RawDiscover = toml::from_str(toml_text).unwrap();
        let mut problems = Problems::new();
        let mut root = problems.root();
        let policy = Section::validate(raw, (), root.at("discover"));
        (policy, problems.pairs())
    }

    #[test]
    fn defaults() {
        let (policy, problems) = validate("");
        assert!(problems.is_empty());
        assert_eq!(policy.names, MetaToolNames::default());
        assert_eq!((policy.limits.default, policy.limits.max), (5, 20));
        assert!(!policy.promote_on_use);
        assert!(!policy.native_disclosure);
        assert!((policy.usage_prior - DEFAULT_USAGE_PRIOR).abs() < f32::EPSILON);
    }

    #[test]
    fn reads_every_option() {
        let (policy, problems) = validate(
            r#"
            search_tool = "find_tools"
            schema_tool = "tool_schema"
            invoke_tool = "call_tool"
            never_defer = ["github/create_*", "time__get_current_time"]
            promote_on_use = true
            usage_prior = 0
            default_limit = 3
            max_limit = 10
            native_disclosure = true
            "#,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(policy.native_disclosure);
        assert_eq!(policy.names.search, "find_tools");
        assert!(policy.promote_on_use);
        assert!(policy.usage_prior == 0.0);
        assert_eq!((policy.limits.default, policy.limits.max), (3, 10));
        assert!(policy.never_deferred("github/create_issue", "github__create_issue"));
        assert!(policy.never_deferred("time/get_current_time", "time__get_current_time"));
        assert!(!policy.never_deferred("github/list_issues", "github__list_issues"));
    }

    #[test]
    fn embedding_model_must_hold_the_model_files() {
        let (policy, problems) = validate("");
        assert!(problems.is_empty() && policy.embedding_model.is_none());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let (policy, problems) = validate(&format!(
            "embedding_model = {:?}\nembedding_cache_dir = \"c\"",
            dir.path()
        ));
        assert!(policy.embedding_model.is_none());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "discover.embedding_model");
        if cfg!(feature = "semantic") {
            let message = &problems[0].1;
            assert!(message.contains("tokenizer.json"), "{message}");
            assert!(message.contains("model.safetensors"), "{message}");
            assert!(!message.contains("config.json"), "{message}");
            let (_, problems) = validate("embedding_model = \"/nonexistent/model\"");
            assert!(problems[0].1.contains("is not a directory"), "{problems:?}");
            for file in ["tokenizer.json", "model.safetensors"] {
                std::fs::write(dir.path().join(file), "").unwrap();
            }
            let (policy, problems) = validate(&format!("embedding_model = {:?}", dir.path()));
            assert!(problems.is_empty(), "{problems:?}");
            assert_eq!(policy.embedding_model.as_deref(), Some(dir.path()));
        }
    }

    #[test]
    fn reports_every_problem() {
        let (_, problems) = validate(
            r#"
            search_tool = "search tools"
            invoke_tool = "get_tool_schema"
            never_defer = [" "]
            default_limit = 30
            max_limit = 25
            usage_prior = 1.5
            "#,
        );
        let paths: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "discover.search_tool",
                "discover",
                "discover.never_defer[0]",
                "discover.default_limit",
                "discover.usage_prior"
            ]
        );
    }

    #[test]
    fn code_mode_is_off_by_default_and_reads_its_limits() {
        let (policy, _) = validate("");
        assert_eq!((policy.code_mode, policy.names.code), (None, None));
        let (policy, problems) = validate(
            "code_mode = true\ncode_tool = \"js\"\ncode_mode_timeout_ms = 800\ncode_mode_max_calls = 7\ncode_mode_memory_mb = 16\ncode_mode_max_runs = 2",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(policy.names.code.as_deref(), Some("js"));
        let code = policy.code_mode.unwrap();
        assert_eq!(code.limits.timeout.as_millis(), 800);
        assert_eq!(
            (
                code.limits.max_calls,
                code.limits.memory_bytes,
                code.max_runs
            ),
            (7, 16 << 20, 2)
        );
        assert_eq!(code.max_result_tokens, 4000);
        let (_, problems) = validate(
            "code_mode = true\ncode_tool = \"invoke_tool\"\ncode_mode_timeout_ms = 0\ncode_mode_stack_kb = 1\ncode_mode_max_runs = 1000",
        );
        let paths: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "discover.code_tool",
                "discover.code_mode_timeout_ms",
                "discover.code_mode_stack_kb",
                "discover.code_mode_max_runs"
            ]
        );
    }

    #[test]
    fn unknown_keys_are_errors() {
        assert!(toml::from_str::<RawDiscover>("search = \"x\"").is_err());
    }

    /// `[discover] key = true` with the budget layer off is one problem, at the key's line.
    fn assert_needs_the_budget_layer(key: &str) {
        use crate::policy::{ConfigError, Policy};
        let text = format!("version = 1\n[budget]\nenabled = false\n[discover]\n{key} = true\n");
        let Err(ConfigError::Invalid { problems, .. }) = Policy::from_toml_str(&text, "t.toml")
        else {
            panic!("expected a problem")
        };
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, format!("discover.{key}"));
        assert_eq!(problems[0].line, Some(5), "the line of the key");
    }

    #[test]
    fn native_disclosure_needs_the_budget_layer() {
        use crate::policy::Policy;
        assert_needs_the_budget_layer("native_disclosure");
        let on = "version = 1\n[discover]\nnative_disclosure = true\n";
        assert!(
            Policy::from_toml_str(on, "t.toml")
                .unwrap()
                .discover
                .native_disclosure
        );
    }

    #[test]
    fn code_mode_needs_the_budget_layer() {
        assert_needs_the_budget_layer("code_mode");
    }

    #[test]
    fn glob_matching() {
        let p = ToolPattern::new("git*/*_issue?");
        assert!(p.matches("github/create_issues"));
        assert!(!p.matches("github/create_issue"));
        assert!(ToolPattern::new("*").matches(""));
        assert!(ToolPattern::new("a*b*c").matches("aXbYbZc"));
        assert!(!ToolPattern::new("a*b*c").matches("aXbYbZ"));
    }

    #[test]
    fn a_vocabulary_file_is_read_next_to_the_policy_and_a_bad_one_is_a_problem_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("words.json"), r#"{"forget": ["delete"]}"#).unwrap();
        std::fs::write(dir.path().join("bad.json"), r#"{"forget": 3}"#).unwrap();
        let policy_file = dir.path().join("policy.toml");
        let text = |file: &str| format!("version = 1\n[discover]\nvocabulary_file = {file:?}\n");
        std::fs::write(&policy_file, text("words.json")).unwrap();
        let policy = crate::policy::Policy::load(&policy_file).unwrap_or_else(|e| panic!("{e}"));
        let vocabulary = policy.discover.vocabulary.expect("read");
        assert_eq!(vocabulary.entries()[0].0, "forget");
        for (file, says) in [
            ("missing.json", "cannot read"),
            ("bad.json", "expected a list of words"),
        ] {
            std::fs::write(&policy_file, text(file)).unwrap();
            let err = crate::policy::Policy::load(&policy_file)
                .unwrap_err()
                .to_string();
            assert!(err.contains("line 3: discover.vocabulary_file: "), "{err}");
            assert!(err.contains(says), "{err}");
        }
    }
}
