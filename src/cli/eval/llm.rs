//! The model: any OpenAI-compatible `/v1/chat/completions` endpoint (llama.cpp's server, vLLM,
//! Ollama, LM Studio, hosted APIs), through the gateway's own HTTP client.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};
use serde_json::{Value, json};

use crate::net::{Poster, get_document};

/// Largest answer read from the endpoint.
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// What one completion gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// `choices[0].message`.
    pub message: Value,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: u64,
    /// `usage.completion_tokens`.
    pub completion_tokens: u64,
    /// Prompt tokens served from the endpoint's cache (`usage.prompt_tokens_details.
    /// cached_tokens`, or llama.cpp's `timings.cache_n`), where it says.
    pub cached_tokens: Option<u64>,
}

/// A chat-completions endpoint.
#[derive(Debug)]
pub struct Llm {
    poster: Poster,
    url: String,
    headers: HeaderMap,
    model: String,
    max_tokens: u32,
    seed: u64,
    timeout: Duration,
}

impl Llm {
    /// An endpoint at `url`: a base (`http://127.0.0.1:8080`, `…/v1`) or the full
    /// `…/chat/completions` path. `api_key` goes in `Authorization: Bearer`.
    ///
    /// # Errors
    /// Not an `http(s)://` URL; a key that is no header value.
    pub fn new(
        url: &str,
        api_key: Option<&str>,
        model: &str,
        max_tokens: u32,
        seed: u64,
        timeout: Duration,
    ) -> Result<Self, String> {
        let url = completions_url(url);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(key) = api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| "the API key is not a valid header value".to_owned())?;
            headers.insert(header::AUTHORIZATION, value);
        }
        Ok(Self {
            poster: Poster::new(&url, None)?,
            url,
            headers,
            model: model.to_owned(),
            max_tokens,
            seed,
            timeout,
        })
    }

    /// The full completions URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The model's context window where the endpoint tells it (llama.cpp's `/props`).
    pub async fn context_window(&self) -> Option<usize> {
        let base = self.url.strip_suffix("/v1/chat/completions")?;
        let props = tokio::time::timeout(
            Duration::from_secs(10),
            get_document(&format!("{base}/props"), 1 << 20),
        )
        .await
        .ok()?
        .ok()?;
        let props: Value = serde_json::from_slice(&props).ok()?;
        let n = props
            .pointer("/default_generation_settings/n_ctx")
            .or_else(|| props.get("n_ctx"))?;
        usize::try_from(n.as_u64()?).ok()
    }

    /// One completion of `messages` with `tools` (chat-completions function definitions), at
    /// temperature 0.
    ///
    /// # Errors
    /// No answer in time, a status other than 200, or a body that is no chat completion: said
    /// with the URL and what came back.
    pub async fn chat(&self, messages: &[Value], tools: &[Value]) -> Result<Completion, String> {
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
        });
        if !tools.is_empty() {
            body["tools"] = Value::from(tools.to_vec());
        }
        let body = Bytes::from(body.to_string());
        let sent = self
            .poster
            .post(self.headers.clone(), body, MAX_ANSWER_BYTES);
        let (status, _, answer) =
            tokio::time::timeout(self.timeout, sent)
                .await
                .map_err(|_| {
                    format!(
                        "{}: no answer within {} s (--request-timeout-secs)",
                        self.url,
                        self.timeout.as_secs()
                    )
                })??;
        if !status.is_success() {
            return Err(format!(
                "{}: HTTP {status}: {}",
                self.url,
                excerpt(&String::from_utf8_lossy(&answer))
            ));
        }
        parse_completion(&answer).map_err(|e| format!("{}: {e}", self.url))
    }
}

/// `url` ending in `/chat/completions`: a base gets `/v1/chat/completions`, a `…/v1` base
/// `/chat/completions`.
#[must_use]
pub fn completions_url(url: &str) -> String {
    let url = url.trim_end_matches('/');
    if url.ends_with("/chat/completions") {
        url.to_owned()
    } else if url.ends_with("/v1") {
        format!("{url}/chat/completions")
    } else {
        format!("{url}/v1/chat/completions")
    }
}

/// Reads a chat completion's first choice and usage.
///
/// # Errors
/// Not JSON, or no `choices[0].message`: said with an excerpt of what came.
pub fn parse_completion(body: &[u8]) -> Result<Completion, String> {
    let text = String::from_utf8_lossy(body);
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| format!("the answer is not JSON: {}", excerpt(&text)))?;
    let message = value
        .pointer("/choices/0/message")
        .filter(|m| m.is_object())
        .cloned()
        .ok_or_else(|| format!("the answer is no chat completion: {}", excerpt(&text)))?;
    let number = |pointer: &str| value.pointer(pointer).and_then(Value::as_u64);
    Ok(Completion {
        message,
        prompt_tokens: number("/usage/prompt_tokens").unwrap_or(0),
        completion_tokens: number("/usage/completion_tokens").unwrap_or(0),
        cached_tokens: number("/usage/prompt_tokens_details/cached_tokens")
            .or_else(|| number("/timings/cache_n")),
    })
}

fn excerpt(text: &str) -> String {
    let cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_get_the_completions_path() {
        for base in [
            "http://h:1",
            "http://h:1/",
            "http://h:1/v1",
            "http://h:1/v1/chat/completions",
        ] {
            assert_eq!(completions_url(base), "http://h:1/v1/chat/completions");
        }
    }

    #[test]
    fn a_completion_gives_its_message_and_usage() {
        let body = br#"{"choices": [{"message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3,
                      "prompt_tokens_details": {"cached_tokens": 10}}}"#;
        let c = parse_completion(body).unwrap();
        assert_eq!(c.message["content"], "hi");
        assert_eq!(
            (c.prompt_tokens, c.completion_tokens, c.cached_tokens),
            (12, 3, Some(10))
        );
        let llama = br#"{"choices": [{"message": {"content": ""}}], "timings": {"cache_n": 7}}"#;
        assert_eq!(parse_completion(llama).unwrap().cached_tokens, Some(7));
    }

    #[test]
    fn garbage_is_said_with_what_came() {
        let err = parse_completion(b"<html>Bad Gateway</html>").unwrap_err();
        assert!(
            err.contains("not JSON") && err.contains("Bad Gateway"),
            "{err}"
        );
        let err = parse_completion(br#"{"error": "model not loaded"}"#).unwrap_err();
        assert!(
            err.contains("no chat completion") && err.contains("model not loaded"),
            "{err}"
        );
    }
}
