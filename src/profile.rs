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
    /// Counts are estimates (the model's tokenizer is not public).
    pub estimate: bool,
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
];

/// The built-in profile families (model names match them by prefix; `.` and `-` are the same,
/// dates and suffixes after a `-` are ignored, `claude-` may be left out).
#[must_use]
pub fn builtin_names() -> Vec<&'static str> {
    BUILTINS.iter().map(|b| b.prefix).collect()
}

fn normalize(model: &str) -> String {
    let norm: String = model
        .trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c == '.' || c == '_' { '-' } else { c })
        .collect();
    if ["haiku", "sonnet", "opus"]
        .iter()
        .any(|f| norm.starts_with(f))
    {
        format!("claude-{norm}")
    } else {
        norm
    }
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
        .map(|b| Profile {
            name: b.prefix.to_owned(),
            context_window: b.context_window,
            encoding: b.encoding,
            rendering: b.rendering,
            max_tools: b.max_tools,
            overhead_tokens: b.overhead_tokens,
            calibration_permille: b.calibration_permille,
            estimate: b.estimate,
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
