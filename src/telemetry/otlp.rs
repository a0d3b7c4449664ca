//! OTLP/HTTP (protobuf) trace export (feature `otlp`): `[telemetry]` keys first, then the
//! standard `OTEL_*` variables; no endpoint in either means no exporter and no cost.
//!
//! Spans are batched on the SDK's own thread; each batch is sent by a hyper client *on the
//! gateway's runtime* (the thread waits, the runtime never does) — for an `https://` endpoint,
//! the upstreams' HTTPS client (rustls), trusting the CAs of
//! `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` / `OTEL_EXPORTER_OTLP_CERTIFICATE` when set, else the
//! built-in roots. [`Exporter::shutdown`]
//! flushes what is left: call it once serving stopped, while the runtime still runs.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};

use crate::policy::TelemetryPolicy;

/// The default `service.name`.
pub const SERVICE_NAME: &str = "mcp-budget";

/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// A running trace exporter.
#[derive(Debug)]
pub struct Exporter {
    provider: SdkTracerProvider,
}

/// Why the exporter could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up OTLP trace export to {endpoint}: {reason}")]
pub struct OtlpError {
    endpoint: String,
    reason: String,
}

/// The traces URL of an OTLP/HTTP endpoint: `/v1/traces` appended to a base URL, a URL that
/// ends with it kept.
///
/// ```
/// use mcp_budget::telemetry::otlp::traces_url;
/// assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
/// assert_eq!(traces_url("http://c:4318/v1/traces"), "http://c:4318/v1/traces");
/// ```
#[must_use]
pub fn traces_url(endpoint: &str) -> String {
    if endpoint.ends_with("/v1/traces") {
        endpoint.to_owned()
    } else {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    }
}

/// The endpoint traces go to: the policy's, else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as
/// is), else `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL); `None` when none is set, or
/// `OTEL_SDK_DISABLED=true` / `OTEL_TRACES_EXPORTER=none`.
#[must_use]
pub fn endpoint(policy: &TelemetryPolicy, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
    {
        return None;
    }
    policy
        .otlp_endpoint
        .as_deref()
        .map(traces_url)
        .or_else(|| set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT").map(|e| traces_url(&e)))
}

impl Exporter {
    /// Sets up export per `policy` and the environment; `Ok(None)` when no endpoint is
    /// configured. Must run inside the Tokio runtime that will send the batches.
    ///
    /// # Errors
    /// [`OtlpError`] when the exporter cannot be built.
    pub fn start(policy: &TelemetryPolicy) -> Result<Option<Self>, OtlpError> {
        let env = |name: &str| std::env::var(name).ok();
        let Some(endpoint) = endpoint(policy, &env) else {
            return Ok(None);
        };
        let client = OnRuntime {
            client: sender(&endpoint, &env)?,
            runtime: tokio::runtime::Handle::current(),
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| OtlpError {
                endpoint: crate::redact::url(&endpoint),
                reason: e.to_string(),
            })?;
        let service = (policy.service_name.clone())
            .or_else(|| env("OTEL_SERVICE_NAME").filter(|s| !s.is_empty()))
            .unwrap_or_else(|| SERVICE_NAME.to_owned());
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(service)
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        let mut builder = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource);
        if let Some(ratio) = policy.sample_ratio {
            // Children follow their parent's decision; the ratio picks root spans.
            let root = Sampler::TraceIdRatioBased(ratio);
            builder = builder.with_sampler(Sampler::ParentBased(Box::new(root)));
        }
        Ok(Some(Self {
            provider: builder.build(),
        }))
    }

    /// The `tracing` layer that exports spans through this exporter.
    #[must_use]
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer("mcp-budget"))
    }

    /// Exports what is left and stops (blocks until done or timed out: call it off the
    /// runtime's workers, e.g. after `block_on` returned, the runtime still up).
    pub fn shutdown(self) {
        if let Err(err) = self.provider.shutdown() {
            tracing::warn!(%err, "OTLP exporter did not flush");
        }
    }
}

/// Most bytes read of a collector's answer (an `ExportTraceServiceResponse`: a few bytes).
const ANSWER_LIMIT: usize = 1 << 20;

/// What sends a batch: hyper's client for `http://`; for `https://`, the gateway's own HTTP
/// client (`crate::net`: rustls; the webpki roots, or the CAs of
/// `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` / `OTEL_EXPORTER_OTLP_CERTIFICATE` instead).
#[derive(Debug, Clone)]
enum Sender {
    Plain(Box<opentelemetry_http::hyper::HyperClient>),
    Tls(crate::net::Poster),
}

/// The sender of `endpoint`.
fn sender(endpoint: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Sender, OtlpError> {
    if !endpoint.starts_with("https://") {
        return Ok(Sender::Plain(Box::new(
            opentelemetry_http::hyper::HyperClient::with_default_connector(EXPORT_TIMEOUT, None),
        )));
    }
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let ca_file = set("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
        .or_else(|| set("OTEL_EXPORTER_OTLP_CERTIFICATE"))
        .map(std::path::PathBuf::from);
    crate::net::Poster::new(endpoint, ca_file)
        .map(Sender::Tls)
        .map_err(|reason| OtlpError {
            endpoint: crate::redact::url(endpoint),
            reason,
        })
}

/// The sender, driven on the gateway's runtime from the SDK's export thread.
#[derive(Debug, Clone)]
struct OnRuntime {
    client: Sender,
    runtime: tokio::runtime::Handle,
}

impl HttpClient for OnRuntime {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let client = self.client.clone();
        let task = self.runtime.spawn(async move {
            match client {
                Sender::Plain(hyper) => hyper.send_bytes(request).await,
                Sender::Tls(poster) => {
                    let (parts, body) = request.into_parts();
                    let send = poster.post(parts.headers, body, ANSWER_LIMIT);
                    let (status, headers, body) = tokio::time::timeout(EXPORT_TIMEOUT, send)
                        .await
                        .map_err(|_| HttpError::from("the OTLP export timed out"))??;
                    let mut answer = Response::builder().status(status).body(body)?;
                    *answer.headers_mut() = headers;
                    Ok(answer)
                }
            }
        });
        Box::pin(async move { task.await.map_err(|e| Box::new(e) as HttpError)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_then_the_standard_variables_name_the_endpoint() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let none = TelemetryPolicy::default();
        assert_eq!(endpoint(&none, &vars(&[])), None);
        let base = vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")]);
        assert_eq!(
            endpoint(&none, &base).as_deref(),
            Some("http://c:4318/v1/traces")
        );
        let exact = vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/x"),
        ]);
        assert_eq!(endpoint(&none, &exact).as_deref(), Some("http://t:1/x"));
        let policy = TelemetryPolicy {
            otlp_endpoint: Some("http://p:4318".into()),
            ..TelemetryPolicy::default()
        };
        assert_eq!(
            endpoint(&policy, &exact).as_deref(),
            Some("http://p:4318/v1/traces")
        );
        let off = vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
            ("OTEL_SDK_DISABLED", "true"),
        ]);
        assert_eq!(endpoint(&none, &off), None);
    }
}
