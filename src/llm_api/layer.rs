//! `llm_cache`: the rewrites of [`crate::llm_api`] as a tower layer over HTTP requests, for an
//! LLM API gateway.
//!
//! Effect: the JSON body of a `POST` to a path ending in `/v1/messages` (Anthropic),
//! `/v1/chat/completions` or `/v1/responses` (`OpenAI`) is read (at most
//! [`LlmCacheLayer::body_limit`] bytes), its `tools` rewritten by [`anthropic::rewrite`] or
//! [`openai::rewrite`], and the new `tools` spliced into the original bytes: every other field
//! reaches the inner service byte for byte, and `Content-Length` is updated.
//!
//! Pass-through, untouched: other methods and paths; a `Content-Type` that is not JSON; a
//! `Content-Encoding` other than `identity`; a body over the limit (what was read is replayed
//! before the rest of the stream); a body that fails to read (the inner service sees the same
//! error after the bytes read); a body that is not a JSON object (the provider will answer
//! it); a body whose `tools` the rewrite leaves as they were.
//!
//! The inner service receives an [`axum::body::Body`] (a rewritten body is one buffer, a
//! passed-through one wraps the original). A request may carry its own [`ToolClasses`] in its
//! extensions (for example set by an authentication layer per session); it overrides the
//! layer's.
//!
//! ```
//! use axum::body::Body;
//! use mcp_budget::llm_api::{LlmCacheLayer, RewriteOptions, ToolClasses};
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! // The inner service stands for the client that forwards to the provider.
//! let provider = service_fn(|req: http::Request<Body>| async move {
//!     let bytes = axum::body::to_bytes(req.into_body(), 1 << 20).await?;
//!     Ok::<_, axum::Error>(http::Response::new(Body::from(bytes)))
//! });
//! let options = RewriteOptions::default().with_classes(ToolClasses::dynamic_names(["note"]));
//! let gateway = LlmCacheLayer::new(options).body_limit(8 << 20).layer(provider);
//!
//! let body = r#"{"model":"claude-sonnet-4-5","max_tokens":1e3,"tools":[
//!     {"name":"note","input_schema":{}},{"input_schema":{},"name":"b"},{"name":"a","input_schema":{}}]}"#;
//! let req = http::Request::post("/v1/messages")
//!     .header("content-type", "application/json")
//!     .body(Body::from(body))?;
//! let resp = futures::executor::block_on(gateway.oneshot(req))?;
//! let seen = futures::executor::block_on(axum::body::to_bytes(resp.into_body(), 1 << 20))?;
//! assert_eq!(
//!     std::str::from_utf8(&seen)?,
//!     r#"{"model":"claude-sonnet-4-5","max_tokens":1e3,"tools":[{"name":"a","input_schema":{}},{"name":"b","input_schema":{}},{"name":"note","input_schema":{}}]}"#
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, HttpBody};
use bytes::{Bytes, BytesMut};
use futures::{StreamExt as _, TryStreamExt};
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Request};
use http_body_util::{BodyExt as _, BodyStream, StreamBody};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tower::{Layer, Service};

use crate::layer::{Around, Layered};

use super::{Rewrite, RewriteOptions, ToolClasses, anthropic, openai};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Default most bytes of a request body read for a rewrite: 32 MiB, the Messages API's own
/// request size limit.
pub const DEFAULT_BODY_LIMIT: usize = 32 << 20;

#[derive(Debug)]
struct Config {
    options: RewriteOptions,
    limit: usize,
}

/// Layer of [`LlmCache`] (see the module docs).
#[derive(Debug, Clone)]
pub struct LlmCacheLayer {
    config: Arc<Config>,
}

impl LlmCacheLayer {
    /// A layer rewriting with `options`, reading bodies up to [`DEFAULT_BODY_LIMIT`].
    #[must_use]
    pub fn new(options: RewriteOptions) -> Self {
        Self {
            config: Arc::new(Config {
                options,
                limit: DEFAULT_BODY_LIMIT,
            }),
        }
    }

    /// Reads at most `bytes` of a body; larger bodies pass through untouched.
    #[must_use]
    pub fn body_limit(self, bytes: usize) -> Self {
        Self {
            config: Arc::new(Config {
                options: self.config.options.clone(),
                limit: bytes,
            }),
        }
    }
}

impl<S> Layer<S> for LlmCacheLayer {
    type Service = LlmCache<S>;
    fn layer(&self, inner: S) -> LlmCache<S> {
        Layered::wrap(self.clone(), inner)
    }
}

/// Rewrites the `tools` of LLM API requests for cache-stable prefixes (see the module docs):
/// the layer around an inner service that takes [`axum::body::Body`] requests.
pub type LlmCache<S> = Layered<LlmCacheLayer, S, Request<Body>>;

impl<S> LlmCache<S> {
    /// The layer, for [`tower::ServiceBuilder`].
    #[must_use]
    pub fn layer(options: RewriteOptions) -> LlmCacheLayer {
        LlmCacheLayer::new(options)
    }
}

/// The response future of [`LlmCache`] (boxed: the body is read before the inner call).
pub struct ResponseFuture<R, E> {
    inner: Pin<Box<dyn Future<Output = Result<R, E>> + Send>>,
}

impl<R, E> std::fmt::Debug for ResponseFuture<R, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<R, E> Future for ResponseFuture<R, E> {
    type Output = Result<R, E>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<S, B> Around<S, Request<B>, Request<Body>> for LlmCacheLayer
where
    S: Service<Request<Body>> + Send + 'static,
    S::Future: Send + 'static,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Future = ResponseFuture<S::Response, S::Error>;

    fn around(&self, mut inner: S, req: Request<B>) -> Self::Future {
        let limit = self.config.limit;
        let Some(api) = api_of(&req, limit) else {
            return ResponseFuture {
                inner: Box::pin(inner.call(req.map(Body::new))),
            };
        };
        let config = self.config.clone();
        ResponseFuture {
            inner: Box::pin(async move {
                let (mut parts, body) = req.into_parts();
                let body = match read_capped(body, limit).await {
                    Ok(bytes) => {
                        let classes = parts.extensions.get::<ToolClasses>();
                        match rewrite_bytes(api, &bytes, &config.options, classes) {
                            Some((rewritten, outcome)) => {
                                tracing::debug!(
                                    api = api.as_str(),
                                    static_tools = outcome.static_tools,
                                    dynamic_tools = outcome.dynamic_tools,
                                    breakpoint = ?outcome.breakpoint,
                                    preselected = outcome.preselected,
                                    left_out = outcome.left_out,
                                    "Tools rewritten for the prompt cache"
                                );
                                set_length(&mut parts.headers, rewritten.len());
                                Body::from(rewritten)
                            }
                            None => Body::from(bytes),
                        }
                    }
                    Err(passed) => passed,
                };
                inner.call(Request::from_parts(parts, body)).await
            }),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Anthropic,
    OpenAi,
}

impl Api {
    fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
        }
    }
}

/// Which API a request is for, when it is one to rewrite.
fn api_of<B>(req: &Request<B>, limit: usize) -> Option<Api> {
    if req.method() != Method::POST {
        return None;
    }
    let path = req.uri().path();
    let api = if path.ends_with("/v1/messages") {
        Api::Anthropic
    } else if path.ends_with("/v1/chat/completions") || path.ends_with("/v1/responses") {
        Api::OpenAi
    } else {
        return None;
    };
    let headers = req.headers();
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let json = text(CONTENT_TYPE).is_none_or(|ct| {
        let essence = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        essence == "application/json" || essence.ends_with("+json")
    });
    let identity = text(CONTENT_ENCODING).is_none_or(|e| e.trim().eq_ignore_ascii_case("identity"));
    let small = text(CONTENT_LENGTH)
        .and_then(|n| n.trim().parse::<usize>().ok())
        .is_none_or(|n| n <= limit);
    (json && identity && small).then_some(api)
}

fn set_length(headers: &mut HeaderMap, len: usize) {
    if headers.contains_key(CONTENT_LENGTH) {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    }
}

/// The whole body when it ends within `limit` bytes without trailers; otherwise a body that
/// replays what was read, then the rest of the original (or its error).
async fn read_capped<B>(body: B, limit: usize) -> Result<Bytes, Body>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let mut body = Box::pin(body);
    let mut frames = Vec::new();
    let mut size = 0usize;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                size = size.saturating_add(frame.data_ref().map_or(0, Bytes::len));
                let trailers = frame.is_trailers();
                frames.push(frame);
                if size > limit || trailers {
                    return Err(replay(frames, Some(body), None));
                }
            }
            Err(err) => return Err(replay::<B>(frames, None, Some(err.into()))),
        }
    }
    if let [only] = frames.as_slice() {
        if let Some(data) = only.data_ref() {
            return Ok(data.clone());
        }
    }
    let mut buf = BytesMut::with_capacity(size);
    for frame in frames {
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

fn replay<B>(
    frames: Vec<hyper::body::Frame<Bytes>>,
    rest: Option<Pin<Box<B>>>,
    error: Option<BoxError>,
) -> Body
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let head = futures::stream::iter(frames.into_iter().map(Ok::<_, BoxError>));
    let rest =
        futures::stream::iter(rest.map(|b| TryStreamExt::map_err(BodyStream::new(b), Into::into)))
            .flatten();
    let error = futures::stream::iter(error.map(Err));
    Body::new(StreamBody::new(head.chain(rest).chain(error)))
}

/// The top-level fields of a JSON object, in order, as raw text.
struct Fields<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    fields.push(entry);
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// The body with its `tools` rewritten, every other field's bytes kept; `None` when it is not
/// a JSON object or its `tools` stay as they were.
fn rewrite_bytes(
    api: Api,
    bytes: &[u8],
    options: &RewriteOptions,
    classes: Option<&ToolClasses>,
) -> Option<(Vec<u8>, Rewrite)> {
    let fields: Fields<'_> = serde_json::from_slice(bytes).ok()?;
    // What the rewrite reads: `tools`, for Anthropic what decides the breakpoint, and with
    // preselection the conversation and the model (whose profile may decide how many).
    let read: &[&str] = match (api, options.preselect.is_some()) {
        (Api::Anthropic, _) => &["tools", "model", "system", "messages", "cache_control"],
        (Api::OpenAi, false) => &["tools"],
        (Api::OpenAi, true) => &["tools", "model", "messages", "input"],
    };
    let mut partial = Map::new();
    let mut old_tools = None;
    for (key, raw) in &fields.0 {
        if read.contains(&key.as_str()) {
            // A repeated key: the last one wins, as in a parse into a `Value`.
            partial.insert(key.clone(), serde_json::from_str(raw.get()).ok()?);
            if key == "tools" {
                old_tools = Some(raw.get());
            }
        }
    }
    let old_tools = old_tools?;
    let mut body = Value::Object(partial);
    let options = match classes {
        Some(classes) => &RewriteOptions {
            classes: classes.clone(),
            ..options.clone()
        },
        None => options,
    };
    let outcome = match api {
        Api::Anthropic => anthropic::rewrite(&mut body, options),
        Api::OpenAi => openai::rewrite(&mut body, options),
    };
    let tools = serde_json::to_string(body.get("tools")?).ok()?;
    if tools == old_tools {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() + 64);
    out.push(b'{');
    for (i, (key, raw)) in fields.0.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, key).ok()?;
        out.push(b':');
        if key == "tools" {
            out.extend_from_slice(tools.as_bytes());
        } else {
            out.extend_from_slice(raw.get().as_bytes());
        }
    }
    out.push(b'}');
    Some((out, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tower::{ServiceExt, service_fn};

    async fn through(req: Request<Body>) -> (HeaderMap, Bytes) {
        let svc = LlmCacheLayer::new(RewriteOptions::default())
            .body_limit(1024)
            .layer(service_fn(|req: Request<Body>| async move {
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, usize::MAX).await?;
                Ok::<_, axum::Error>((parts.headers, bytes))
            }));
        svc.oneshot(req).await.unwrap()
    }

    const BODY: &str = r#"{"model":"gpt-4o","tools":[{"type":"function","function":{"name":"b"}},{"type":"function","function":{"name":"a"}}],"n":1.0}"#;

    #[tokio::test]
    async fn rewrites_and_updates_length() {
        let req = Request::post("/openai/v1/chat/completions")
            .header(CONTENT_LENGTH, BODY.len())
            .body(Body::from(BODY))
            .unwrap();
        let (headers, bytes) = through(req).await;
        let expected = r#"{"model":"gpt-4o","tools":[{"function":{"name":"a"},"type":"function"},{"function":{"name":"b"},"type":"function"}],"n":1.0}"#;
        assert_eq!(std::str::from_utf8(&bytes).unwrap(), expected);
        assert_eq!(headers[CONTENT_LENGTH], expected.len().to_string());
    }

    #[tokio::test]
    async fn passes_through_the_rest() {
        for req in [
            Request::get("/v1/chat/completions").body(Body::from(BODY)),
            Request::post("/v1/embeddings").body(Body::from(BODY)),
            Request::post("/v1/responses")
                .header(CONTENT_TYPE, "text/plain")
                .body(Body::from(BODY)),
            Request::post("/v1/responses")
                .header(CONTENT_ENCODING, "gzip")
                .body(Body::from(BODY)),
            Request::post("/v1/responses").body(Body::from(BODY.replace("}],", "}]"))),
            Request::post("/v1/responses").body(Body::from(format!("{BODY:2000}"))),
        ] {
            let req = req.unwrap();
            let original = {
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                (parts, bytes)
            };
            let (headers, bytes) = through(Request::from_parts(
                original.0,
                Body::from(original.1.clone()),
            ))
            .await;
            assert_eq!(bytes, original.1);
            assert!(headers.get(CONTENT_LENGTH).is_none());
        }
    }

    #[tokio::test]
    async fn over_the_limit_streams_through() {
        let big =
            json!({"model": "m", "tools": [{"name": "b"}, {"name": "a"}], "pad": "x".repeat(4000)})
                .to_string();
        let chunks: Vec<Result<Bytes, std::io::Error>> = big
            .as_bytes()
            .chunks(100)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let req = Request::post("/v1/messages")
            .body(Body::from_stream(futures::stream::iter(chunks)))
            .unwrap();
        let (_, bytes) = through(req).await;
        assert_eq!(bytes, big.as_bytes());
    }
}
