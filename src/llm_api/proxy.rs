//! The LLM API listener of `serve` (`[llm_api]`): every request is forwarded to the provider
//! (the policy's `upstream` base URL, the request's path and query appended), through
//! [`super::LlmCacheLayer`]: the tools of Anthropic Messages and `OpenAI` Chat Completions /
//! Responses bodies rewritten (canonical order, breakpoint) and, with `preselect`, only each
//! request's best tools listed in full ([`super::preselect`]).
//!
//! Headers are forwarded as sent, hop-by-hop ones and `Host` excepted (`Host` names the
//! provider). The provider's answer is relayed once complete (a streamed answer arrives whole,
//! at most [`RESPONSE_LIMIT`] bytes). A provider that cannot be reached is answered with HTTP
//! 502 and `{"type": "error", "error": {"type": "llm_upstream_unreachable", "message": …}}`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use http::header::{CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, Request, Response, StatusCode, Uri};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::Layer as _;

use super::{LlmCacheLayer, RewriteOptions};
use crate::net::client::Client;
use crate::policy::HttpOptions;

/// Most bytes of a provider's answer relayed (64 MiB).
pub const RESPONSE_LIMIT: usize = 64 << 20;

/// The provider requests are forwarded to.
#[derive(Debug, Clone)]
pub struct Forward {
    client: Arc<Client>,
    /// The base URL's path, without a trailing `/` (prepended to each request's path).
    prefix: String,
    /// The base URL, credentials hidden, for messages.
    shown: String,
}

impl Forward {
    /// Forwarding to `upstream`, a base URL.
    ///
    /// # Errors
    /// The URL is not `http://` or `https://` (or `https://` without the `tls` feature).
    pub fn new(upstream: &str) -> Result<Self, String> {
        let client = Client::new(upstream, &HttpOptions::default())?;
        let uri: Uri = upstream.parse().map_err(|e| format!("{e}"))?;
        Ok(Self {
            client: Arc::new(client),
            prefix: uri.path().trim_end_matches('/').to_owned(),
            shown: crate::redact::Url(upstream).to_string(),
        })
    }

    /// The base URL, credentials hidden.
    #[must_use]
    pub fn shown(&self) -> &str {
        &self.shown
    }

    async fn send(&self, req: Request<Body>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let target: Result<Uri, _> = format!("{}{path}", self.prefix).parse();
        let body = axum::body::to_bytes(body, usize::MAX).await;
        let (Ok(target), Ok(body)) = (target, body) else {
            return failure(StatusCode::BAD_REQUEST, "the request could not be read");
        };
        let mut headers = parts.headers;
        strip_hop_by_hop(&mut headers);
        headers.remove(HOST);
        let sent = self
            .client
            .send_to(&target, parts.method, headers, body)
            .await;
        let mut answer = match sent {
            Ok(answer) => answer,
            Err(err) => return unreachable(&self.shown, &err.to_string()),
        };
        let mut bytes = Vec::new();
        while let Some(chunk) = answer.body.chunk().await {
            match chunk {
                Ok(chunk) if bytes.len() + chunk.len() <= RESPONSE_LIMIT => {
                    bytes.extend_from_slice(&chunk);
                }
                Ok(_) => return unreachable(&self.shown, "the answer is over 64 MiB"),
                Err(err) => return unreachable(&self.shown, &err),
            }
        }
        let mut response = Response::new(Body::from(bytes));
        *response.status_mut() = answer.status;
        let mut headers = answer.headers;
        strip_hop_by_hop(&mut headers);
        headers.remove(CONTENT_LENGTH);
        *response.headers_mut() = headers;
        response
    }
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in [CONNECTION, TRANSFER_ENCODING, CONTENT_LENGTH] {
        headers.remove(name);
    }
    for name in ["keep-alive", "proxy-connection", "te", "trailer", "upgrade"] {
        headers.remove(HeaderName::from_static(name));
    }
}

fn unreachable(shown: &str, why: &str) -> Response<Body> {
    failure(
        StatusCode::BAD_GATEWAY,
        &format!("the LLM API upstream {shown} failed: {why}"),
    )
}

fn failure(status: StatusCode, message: &str) -> Response<Body> {
    let kind = if status == StatusCode::BAD_GATEWAY {
        "llm_upstream_unreachable"
    } else {
        "invalid_request_error"
    };
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The listener's app: every request through [`LlmCacheLayer`] with `options`, then to
/// `forward`.
pub fn router(options: RewriteOptions, forward: Forward) -> Router {
    let forward = Arc::new(forward);
    let service = tower::service_fn(move |req: Request<Body>| {
        let forward = forward.clone();
        async move { Ok::<_, std::convert::Infallible>(forward.send(req).await) }
    });
    Router::new().fallback_service(LlmCacheLayer::new(options).layer(service))
}

/// Serves `app` on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) {
    let config = crate::downstream::http::ListenConfig::default();
    crate::downstream::http::serve_with(listener, app, shutdown, config).await;
}

/// The rewrite options of `policy`'s `[llm_api]`: `preselect` as set, or (unset) as each
/// request's model's profile says; the gateway's meta-tools (`[discover]` names) are kept in
/// the static block.
#[must_use]
pub fn options(policy: &crate::policy::Policy) -> RewriteOptions {
    let options = RewriteOptions::default();
    let preselect = match policy.llm_api.preselect {
        Some(0) => return options,
        Some(k) => super::preselect::Preselect::new(k),
        None => super::preselect::Preselect::by_model(),
    };
    let names = &policy.discover.names;
    let mut keep = vec![
        names.search.clone(),
        names.schema.clone(),
        names.invoke.clone(),
    ];
    keep.extend(names.code.clone());
    options.with_preselect(preselect.keeping(super::ToolClasses::dynamic_names(keep)))
}
