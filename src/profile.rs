//! Model profiles: what a host model pays for tools and how many it handles well.
//!
//! Built-in profiles cover the common hosts; every field can be overridden in `[budget]`, and a
//! model that is not built in needs explicit values (an error names the missing ones).
//!
//! ```
//! use mcp_budget::profile::{resolve, ProfileOverrides};
//! use mcp_budget::tokens::Rendering;
//!
//! let haiku = resolve("claude-haiku-4-5-20251001", &ProfileOverrides::default())?;
//! assert_eq!((haiku.context_window, haiku.max_tools), (200_000, 12));
//! assert_eq!(haiku.rendering, Rendering::Anthropic);
//! assert!(resolve("my-local-model", &ProfileOverrides::default()).is_err());
//! # Ok::<(), mcp_budget::profile::ProfileError>(())
//! ```

use crate::tokens::{Counting, Encoding, Rendering};

/// Everything the planner needs to know about a host model.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Profile {
    /// The profile's name (a built-in family, or the model name given).
    pub name: String,
    /// Context window, in tokens.
    pub context_window: usize,
    /// The BPE used to count.
    pub encoding: Encoding,
    /// How the host renders tools to the model.
    pub rendering: Rendering,
    /// Most tools listed directly before selection accuracy falls.
    pub max_tools: usize,
    /// Fixed tokens the host adds whenever tools are present (tool-use system prompt).
    pub overhead_tokens: usize,
    /// Multiplier on BPE counts, in thousandths (1000 = the BPE count as is).
    pub calibration_permille: usize,
    /// Counts are estimates (the model's tokenizer is not public, or not the one counted).
    pub estimate: bool,
    /// Tools an LLM API gateway lists per request when its `[llm_api] preselect` is not set
    /// (the request's best `preselect`, [`crate::llm_api::preselect`]); 0: every tool.
    pub preselect: usize,
}

impl From<&Profile> for Counting {
    /// What a [`Counter`](crate::tokens::Counter) needs of the profile.
    fn from(profile: &Profile) -> Self {
        Self {
            encoding: profile.encoding,
            rendering: profile.rendering,
            calibration_permille: profile.calibration_permille,
            overhead_tokens: profile.overhead_tokens,
        }
    }
}

/// `[budget]` overrides of a profile; `None` keeps the built-in value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProfileOverrides {
    /// Context window, in tokens.
    pub context_window: Option<usize>,
    /// BPE used to count.
    pub encoding: Option<Encoding>,
    /// Host rendering.
    pub rendering: Option<Rendering>,
    /// Tool-count cap.
    pub max_tools: Option<usize>,
    /// Fixed overhead tokens.
    pub overhead_tokens: Option<usize>,
    /// Calibration, in thousandths.
    pub calibration_permille: Option<usize>,
}

/// Why a profile could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The model is not built in and some values are missing.
    #[error("model {model:?} has no built-in profile; set {} in [budget] (built-in: {})", missing.join(", "), builtin_names().join(", "))]
    Unknown {
        /// The model name.
        model: String,
        /// The `[budget]` keys that must be set.
        missing: Vec<&'static str>,
    },
}

/// The model used when the policy names none.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";

/// Anthropic's tool-use system prompt on Claude 4.x with `tool_choice` `auto` or `none`.
pub const ANTHROPIC_OVERHEAD_AUTO: usize = 346;
/// Anthropic's tool-use system prompt on Claude 4.x with `tool_choice` `any` or `tool`.
pub const ANTHROPIC_OVERHEAD_ANY: usize = 313;

/// Claude's tokenizer is not public, so Claude models count cl100k × a calibration, per
/// tokenizer generation (sources and reasoning: `docs/budget.md`, "Counting Claude"):
/// Anthropic says `OpenAI`'s BPEs undercount Claude by about 15–20 % on typical text and more on
/// code; tool definitions are JSON around English, so × 1.25 for Claude 4.x up to 4.6.
const CLAUDE_CALIBRATION: usize = 1250;
/// Opus 4.7 brought a new tokenizer: "roughly 1× to 1.35× as many tokens" (Anthropic);
/// independent `count_tokens` measurements give 1.31× on text-heavy JSON and 1.45× on English
/// prose. 1.25 × 1.35 ≈ 1.7.
const CLAUDE_NEW_TOKENIZER_CALIBRATION: usize = 1700;

struct Builtin {
    prefix: &'static str,
    context_window: usize,
    encoding: Encoding,
    rendering: Rendering,
    max_tools: usize,
    overhead_tokens: usize,
    calibration_permille: usize,
    estimate: bool,
    /// A local model family: the cap and the preselection follow the size in the name.
    local: bool,
}

const fn claude(prefix: &'static str, max_tools: usize) -> Builtin {
    Builtin {
        prefix,
        context_window: 200_000,
        encoding: Encoding::Cl100kBase,
        rendering: Rendering::Anthropic,
        max_tools,
        overhead_tokens: ANTHROPIC_OVERHEAD_AUTO,
        calibration_permille: CLAUDE_CALIBRATION,
        estimate: true,
        local: false,
    }
}

/// A Claude family with the tokenizer of Opus 4.7 and later.
const fn claude_new_tokenizer(prefix: &'static str, max_tools: usize) -> Builtin {
    Builtin {
        calibration_permille: CLAUDE_NEW_TOKENIZER_CALIBRATION,
        ..claude(prefix, max_tools)
    }
}

const fn openai(prefix: &'static str, context_window: usize, max_tools: usize) -> Builtin {
    Builtin {
        prefix,
        context_window,
        encoding: Encoding::O200kBase,
        rendering: Rendering::OpenAi,
        max_tools,
        overhead_tokens: 0,
        calibration_permille: 1000,
        estimate: false,
        local: false,
    }
}

const fn openai_cl100k(prefix: &'static str, context_window: usize, max_tools: usize) -> Builtin {
    Builtin {
        encoding: Encoding::Cl100kBase,
        ..openai(prefix, context_window, max_tools)
    }
}

const fn gemini(prefix: &'static str, max_tools: usize) -> Builtin {
    Builtin {
        prefix,
        context_window: 1_048_576,
        encoding: Encoding::O200kBase,
        rendering: Rendering::Raw,
        max_tools,
        overhead_tokens: 0,
        calibration_permille: 1000,
        estimate: true,
        local: false,
    }
}

/// A local model family as llama.cpp, Ollama, LM Studio or vLLM serve it behind an
/// `OpenAI`-compatible API: the chat template writes the tools as JSON into the system prompt
/// (the `raw` rendering: JSON, not `OpenAI`'s `TypeScript`), counted with `encoding` × `calibration_permille` plus the
/// template's fixed tool instructions (`overhead_tokens`); `context_window` is what local
/// runtimes are commonly run with (at most 32k; set `[budget] context_window` to your
/// runtime's `-c` / `num_ctx`). The tool cap and the per-request preselection follow the size
/// in the model's name ([`local_size_defaults`]).
const fn local(
    prefix: &'static str,
    context_window: usize,
    encoding: Encoding,
    overhead_tokens: usize,
    calibration_permille: usize,
) -> Builtin {
    Builtin {
        prefix,
        context_window,
        encoding,
        rendering: Rendering::Raw,
        max_tools: LOCAL_UNKNOWN_SIZE.0,
        overhead_tokens,
        calibration_permille,
        estimate: true,
        local: true,
    }
}

/// Caps: Haiku-class models lose selection accuracy past 10–15 tools, Sonnet-class past ~20;
/// `OpenAI` advises fewer than 20 functions; Gemini advises 10–20 active tools.
const BUILTINS: &[Builtin] = &[
    claude("claude-haiku-4-5", 12),
    claude("claude-sonnet-4", 20),
    claude("claude-opus-4", 25),
    claude_new_tokenizer("claude-opus-4-7", 25),
    claude_new_tokenizer("claude-opus-4-8", 25),
    openai("gpt-4o", 128_000, 20),
    openai("gpt-4o-mini", 128_000, 12),
    openai("gpt-4-1", 1_047_576, 20),
    openai("gpt-4-1-mini", 1_047_576, 12),
    openai("gpt-4-1-nano", 1_047_576, 8),
    openai("gpt-5", 400_000, 20),
    openai("gpt-5-mini", 400_000, 12),
    openai("gpt-5-nano", 400_000, 8),
    openai_cl100k("gpt-4-turbo", 128_000, 20),
    openai_cl100k("gpt-4", 8_192, 12),
    openai_cl100k("gpt-3-5-turbo", 16_385, 12),
    gemini("gemini-2-5-pro", 20),
    gemini("gemini-2-5-flash", 12),
    local(
        "qwen2-5",
        32_768,
        Encoding::O200kBase,
        QWEN_OVERHEAD,
        QWEN_CALIBRATION,
    ),
    local(
        "qwen3",
        32_768,
        Encoding::O200kBase,
        QWEN_OVERHEAD,
        QWEN_CALIBRATION,
    ),
    local("llama-3", 8_192, Encoding::Cl100kBase, 0, 1000),
    local("llama-3-1", 32_768, Encoding::Cl100kBase, 0, 1000),
    local("llama-3-2", 32_768, Encoding::Cl100kBase, 0, 1000),
    local("llama-3-3", 32_768, Encoding::Cl100kBase, 0, 1000),
    local("gemma-2", 8_192, Encoding::O200kBase, 0, 1000),
    local("gemma-3", 32_768, Encoding::O200kBase, 0, 1000),
    local("mistral", 32_768, Encoding::Cl100kBase, 0, 1000),
    local("ministral", 32_768, Encoding::Cl100kBase, 0, 1000),
];

/// Qwen2.5 and Qwen3's chat template writes each tool as `json.dumps` of the `OpenAI` function
/// (`", "` and `": "` separators) inside `<tools>`, after fixed instructions. Measured with
/// Qwen2.5-Coder's own tokenizer (llama.cpp's `/apply-template` and `/tokenize`) over the 75
/// saved servers of the dev set: 181,582 tokens where the `raw` rendering counts 193,177 in
/// o200k (the MCP objects carry annotations and output schemas the template does not get), so
/// × 0.91 beside the fixed 77; each server's count within 7.7 % (median), 19.9 % (90th
/// percentile). `scripts/eval/calibrate-local.py`; `docs/budget.md`, "Local models".
const QWEN_CALIBRATION: usize = 910;
/// The fixed tool instructions of Qwen's chat template, in its tokens.
const QWEN_OVERHEAD: usize = 77;

/// A local model of unknown size: (tool cap, per-request preselection).
const LOCAL_UNKNOWN_SIZE: (usize, usize) = (12, 5);

/// The tool cap and per-request preselection of a local model of `billions` parameters.
///
/// Small models collapse as the list grows: Qwen2.5-Coder-0.5B picks the right tool 0.37 of the
/// time among 20 full definitions, 0.00–0.03 among 50 or 100, and 0.5B and 1.5B do best with
/// the request's top 5 listed (`docs/eval.md`); the larger classes are priors (the
/// 10–20-tool advice of the hosted models' vendors, scaled down), not measured here.
#[must_use]
pub fn local_size_defaults(billions: Option<f64>) -> (usize, usize) {
    match billions {
        None => LOCAL_UNKNOWN_SIZE,
        Some(b) if b <= 4.0 => (8, 5),
        Some(b) if b <= 9.0 => (12, 5),
        Some(b) if b <= 40.0 => (16, 10),
        Some(_) => (20, 10),
    }
}

/// The parameter count a local model's name gives, in billions: `qwen2.5-coder-0.5b` (0.5),
/// `llama3.2:3b` (3), `Qwen3-30B-A3B` (30: the total, not the active experts), `gemma-3-1b-it`
/// (1); the first word of the name that is a number and `b`.
fn size_in_name(model: &str) -> Option<f64> {
    model
        .to_ascii_lowercase()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .find_map(|word| {
            let number = word.strip_suffix('b')?;
            let plain = !number.is_empty()
                && number.bytes().all(|c| c.is_ascii_digit() || c == b'.')
                && number.bytes().next().is_some_and(|c| c.is_ascii_digit());
            plain.then(|| number.parse().ok()).flatten()
        })
}

/// The built-in profile families (model names match them by prefix; `.` and `-` are the same,
/// dates and suffixes after a `-` are ignored, `claude-` may be left out).
#[must_use]
pub fn builtin_names() -> Vec<&'static str> {
    BUILTINS.iter().map(|b| b.prefix).collect()
}

fn normalize(model: &str) -> String {
    let model = model.trim();
    // `Qwen/Qwen2.5-7B-Instruct`, `hf.co/org/model`: the name after the last `/`.
    let model = model.rsplit('/').next().unwrap_or(model);
    let norm: String = model
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if matches!(c, '.' | '_' | ':' | ' ') {
                '-'
            } else {
                c
            }
        })
        .collect();
    let norm = norm.strip_prefix("meta-").unwrap_or(&norm).to_owned();
    if ["haiku", "sonnet", "opus"]
        .iter()
        .any(|f| norm.starts_with(f))
    {
        return format!("claude-{norm}");
    }
    // Ollama's `llama3.2`, `gemma3` are HF's `llama-3.2`, `gemma-3`.
    for family in ["llama", "gemma"] {
        if let Some(rest) = norm.strip_prefix(family)
            && rest.starts_with(|c: char| c.is_ascii_digit())
        {
            return format!("{family}-{rest}");
        }
    }
    norm
}

/// The built-in profile for `model`, if any (longest matching family wins).
#[must_use]
pub fn builtin(model: &str) -> Option<Profile> {
    let norm = normalize(model);
    BUILTINS
        .iter()
        .filter(|b| {
            norm == b.prefix
                || norm
                    .strip_prefix(b.prefix)
                    .is_some_and(|rest| rest.starts_with('-'))
        })
        .max_by_key(|b| b.prefix.len())
        .map(|b| {
            let (max_tools, preselect) = if b.local {
                local_size_defaults(size_in_name(model))
            } else {
                (b.max_tools, 0)
            };
            Profile {
                name: b.prefix.to_owned(),
                context_window: b.context_window,
                encoding: b.encoding,
                rendering: b.rendering,
                max_tools,
                overhead_tokens: b.overhead_tokens,
                calibration_permille: b.calibration_permille,
                estimate: b.estimate,
                preselect,
            }
        })
}

/// The profile of `model` with `overrides` applied.
///
/// # Errors
/// [`ProfileError::Unknown`] when `model` is not built in and `context_window`, `tokenizer`,
/// `rendering` or `max_tools` is not given.
pub fn resolve(model: &str, overrides: &ProfileOverrides) -> Result<Profile, ProfileError> {
    let base = match builtin(model) {
        Some(p) => p,
        None => {
            let mut missing = Vec::new();
            if overrides.context_window.is_none() {
                missing.push("context_window");
            }
            if overrides.encoding.is_none() {
                missing.push("tokenizer");
            }
            if overrides.rendering.is_none() {
                missing.push("rendering");
            }
            if overrides.max_tools.is_none() {
                missing.push("max_tools");
            }
            if !missing.is_empty() {
                return Err(ProfileError::Unknown {
                    model: model.to_owned(),
                    missing,
                });
            }
            Profile {
                name: model.to_owned(),
                context_window: 0,
                encoding: Encoding::O200kBase,
                rendering: Rendering::Raw,
                max_tools: 0,
                overhead_tokens: 0,
                calibration_permille: 1000,
                estimate: true,
                preselect: 0,
            }
        }
    };
    Ok(Profile {
        name: base.name,
        context_window: overrides.context_window.unwrap_or(base.context_window),
        encoding: overrides.encoding.unwrap_or(base.encoding),
        rendering: overrides.rendering.unwrap_or(base.rendering),
        max_tools: overrides.max_tools.unwrap_or(base.max_tools),
        overhead_tokens: overrides.overhead_tokens.unwrap_or(base.overhead_tokens),
        calibration_permille: overrides
            .calibration_permille
            .unwrap_or(base.calibration_permille),
        estimate: base.estimate || overrides.calibration_permille.is_some(),
        preselect: base.preselect,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_families() {
        let name = |m: &str| builtin(m).map(|p| p.name);
        assert_eq!(
            name("claude-sonnet-4-5-20250929").as_deref(),
            Some("claude-sonnet-4")
        );
        assert_eq!(
            name("Sonnet 4.5".replace(' ', "-").as_str()).as_deref(),
            Some("claude-sonnet-4")
        );
        assert_eq!(name("claude-opus-4.1").as_deref(), Some("claude-opus-4"));
        assert_eq!(name("claude-opus-4-7").as_deref(), Some("claude-opus-4-7"));
        assert_eq!(
            name("claude-opus-4.8-20260601").as_deref(),
            Some("claude-opus-4-8")
        );
        assert_eq!(name("gpt-4o-2024-08-06").as_deref(), Some("gpt-4o"));
        assert_eq!(name("gpt-4o-mini").as_deref(), Some("gpt-4o-mini"));
        assert_eq!(name("gpt-4.1").as_deref(), Some("gpt-4-1"));
        assert_eq!(name("gpt-4-0613").as_deref(), Some("gpt-4"));
        assert_eq!(name("gpt-5.1").as_deref(), Some("gpt-5"));
        assert_eq!(name("gemini-2.5-pro").as_deref(), Some("gemini-2-5-pro"));
        assert_eq!(name("gpt-40"), None);
    }

    #[test]
    fn local_families_match_names_as_runtimes_write_them() {
        let profile =
            |m: &str| builtin(m).map(|p| (p.name, p.context_window, p.max_tools, p.preselect));
        let qwen = |cap, k| Some(("qwen2-5".to_owned(), 32_768, cap, k));
        // llama.cpp (file or alias), Ollama, Hugging Face, LM Studio spellings.
        assert_eq!(profile("qwen2.5-coder-0.5b-instruct-q4_k_m"), qwen(8, 5));
        assert_eq!(profile("qwen2.5-coder:1.5b"), qwen(8, 5));
        assert_eq!(profile("Qwen/Qwen2.5-7B-Instruct"), qwen(12, 5));
        assert_eq!(profile("qwen2.5:72b"), qwen(20, 10));
        assert_eq!(profile("qwen2.5-coder"), qwen(12, 5));
        assert_eq!(
            profile("qwen3:30b-a3b").map(|p| (p.0, p.2)),
            Some(("qwen3".into(), 16))
        );
        let name = |m: &str| builtin(m).map(|p| p.name);
        assert_eq!(name("llama3.2:3b").as_deref(), Some("llama-3-2"));
        assert_eq!(
            name("meta-llama/Llama-3.1-8B-Instruct").as_deref(),
            Some("llama-3-1")
        );
        assert_eq!(name("Meta-Llama-3-8B-Instruct").as_deref(), Some("llama-3"));
        assert_eq!(name("gemma3:4b").as_deref(), Some("gemma-3"));
        assert_eq!(name("google/gemma-2-9b-it").as_deref(), Some("gemma-2"));
        assert_eq!(name("mistral:7b").as_deref(), Some("mistral"));
        assert_eq!(name("Mistral-7B-Instruct-v0.3").as_deref(), Some("mistral"));
        assert_eq!(name("qwen25"), None);
        assert_eq!(builtin("llama3:8b").map(|p| p.context_window), Some(8_192));
        // Hosted models keep every tool per request unless the policy asks.
        assert_eq!(builtin("gpt-4o").map(|p| p.preselect), Some(0));
    }

    #[test]
    fn sizes_are_read_from_the_name() {
        assert_eq!(size_in_name("qwen2.5-coder-0.5b-instruct"), Some(0.5));
        assert_eq!(size_in_name("Qwen2.5-7B"), Some(7.0));
        assert_eq!(size_in_name("qwen3:30b-a3b"), Some(30.0));
        assert_eq!(size_in_name("llama3.2:3b"), Some(3.0));
        assert_eq!(size_in_name("mixtral-8x7b"), None);
        assert_eq!(size_in_name("qwen2.5-coder"), None);
        assert_eq!(size_in_name("gemma-3n-e4b"), None);
    }

    #[test]
    fn claude_calibration_follows_the_tokenizer_generation() {
        let calibration = |m: &str| builtin(m).map(|p| p.calibration_permille);
        assert_eq!(calibration("claude-sonnet-4-5"), Some(1250));
        assert_eq!(calibration("claude-opus-4-6"), Some(1250));
        assert_eq!(calibration("claude-opus-4-7"), Some(1700));
        assert_eq!(calibration("gpt-5"), Some(1000));
    }

    #[test]
    fn unknown_model_needs_values() {
        let err = resolve("llama-9", &ProfileOverrides::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("context_window, tokenizer, rendering, max_tools")
        );
        let full = ProfileOverrides {
            context_window: Some(32_000),
            encoding: Some(Encoding::Cl100kBase),
            rendering: Some(Rendering::Raw),
            max_tools: Some(8),
            ..ProfileOverrides::default()
        };
        assert_eq!(resolve("llama-9", &full).unwrap().context_window, 32_000);
    }
}
