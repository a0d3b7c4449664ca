//! `[llm_api]`: the LLM API listener. `serve` forwards Anthropic Messages and `OpenAI` Chat
//! Completions / Responses requests to the provider, their tools rewritten by
//! [`crate::llm_api`] (cache-stable order and breakpoint) and, with `preselect`, only the
//! request's best tools listed in full ([`crate::llm_api::preselect`]).
//!
//! ```toml
//! [llm_api]
//! listen = "127.0.0.1:8788"             # where hosts send LLM API requests; default: off
//! upstream = "https://api.anthropic.com" # the provider (base URL; the request path is appended)
//! preselect = 5                          # client tools listed per request; 0: all; default: by model
//! ```

use std::net::SocketAddr;

use serde::Deserialize;

use super::problems::{At, Section};

/// Most tools `preselect` may list per request (beyond it, list them all: set 0).
pub const MAX_PRESELECT: usize = 128;

/// `[llm_api]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawLlmApi {
    /// Address of the LLM API listener, e.g. `"127.0.0.1:8788"`: hosts set it as their
    /// provider's base URL (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`). Default: none (off).
    pub listen: Option<String>,
    /// The provider's base URL (`http://` or `https://`) requests are forwarded to, the
    /// request's path and query appended. Required with `listen`.
    pub upstream: Option<String>,
    /// Per request, at most this many of its client-defined tools are listed in full, chosen
    /// from the conversation, after the static block (provider tools and the gateway's
    /// meta-tools, cache breakpoint); the others are left out of that request. 0 to 128; 0
    /// lists every tool. Default: the request's `model` decides — its built-in profile's
    /// preselection (5 or 10 for local model families such as Qwen, Llama, Gemma, Mistral,
    /// by the size in the name; none for hosted models and models with no profile).
    pub preselect: Option<usize>,
}

/// `[llm_api]`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LlmApiPolicy {
    /// Where the LLM API listener binds; `None`: no listener.
    pub listen: Option<SocketAddr>,
    /// The provider's base URL.
    pub upstream: Option<String>,
    /// Client-defined tools listed per request; `Some(0)`: all; `None`: the request model's
    /// profile decides ([`crate::profile::Profile::preselect`]).
    pub preselect: Option<usize>,
}

impl Section for RawLlmApi {
    type Valid = LlmApiPolicy;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> LlmApiPolicy {
        let listen = at.parse("listen", self.listen.as_deref(), |a| {
            a.parse::<SocketAddr>()
                .map_err(|e| format!("not a socket address such as 127.0.0.1:8788: {e}"))
        });
        if let Some(url) = &self.upstream {
            match url.parse::<http::Uri>() {
                Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) => {}
                _ => at.push_at(
                    "upstream",
                    format!(
                        "\"{}\" is not an http(s) URL such as https://api.anthropic.com",
                        crate::redact::Url(url)
                    ),
                ),
            }
        }
        if self.listen.is_some() && self.upstream.is_none() {
            at.push_at(
                "upstream",
                "is required with listen (the provider's base URL)",
            );
        }
        let preselect = self.preselect;
        if let Some(preselect) = preselect.filter(|k| *k > MAX_PRESELECT) {
            at.push_at(
                "preselect",
                format!("{preselect} is over {MAX_PRESELECT} (0 lists every tool)"),
            );
        }
        LlmApiPolicy {
            listen,
            upstream: self.upstream,
            preselect,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::{ConfigError, Policy};

    #[test]
    fn off_by_default_and_every_problem_named() {
        let policy = Policy::from_toml_str("version = 1\n", "t.toml").unwrap();
        assert_eq!(policy.llm_api, super::LlmApiPolicy::default());
        let text = "version = 1\n[llm_api]\nlisten = \"nine\"\npreselect = 500\n";
        let Err(ConfigError::Invalid { problems, .. }) = Policy::from_toml_str(text, "t.toml")
        else {
            panic!("expected problems");
        };
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let all = shown.join("\n");
        assert!(all.contains("llm_api.listen"), "{all}");
        assert!(all.contains("llm_api.upstream"), "{all}");
        assert!(all.contains("llm_api.preselect"), "{all}");
        let ok = "version = 1\n[llm_api]\nlisten = \"127.0.0.1:0\"\nupstream = \"http://127.0.0.1:9\"\npreselect = 5\n";
        let policy = Policy::from_toml_str(ok, "t.toml").unwrap();
        assert_eq!(policy.llm_api.preselect, Some(5));
    }
}
