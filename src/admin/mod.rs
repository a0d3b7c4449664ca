//! The admin listener (`[admin] http`, off by default): `/metrics` (Prometheus text),
//! `/healthz` (alive), `/readyz` (every `required` upstream ready; the `[state]` store's mode
//! while it does not answer) and `/status` (JSON: upstreams, plan and tokens per profile, the
//! `[state]` store). Like the MCP listener it binds where the policy
//! says (127.0.0.1 in the examples); `/status` and `/metrics` answer only requests whose
//! `Host` names this machine or an `[admin] allowed_hosts` name (DNS rebinding), the probes
//! (states only) any.
//!
//! Metrics are recorded only once [`install_recorder`] ran: without an admin listener every
//! recording site is a relaxed atomic load.
//!
//! ```no_run
//! # async fn example(server: &mcp_budget::server::Server) -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9464").await?;
//! let metrics = mcp_budget::admin::install_recorder();
//! let app = mcp_budget::admin::router(server.admin_source(), metrics, Vec::new());
//! mcp_budget::admin::serve(listener, app, tokio_util::sync::CancellationToken::new()).await;
//! # Ok(())
//! # }
//! ```

pub mod status;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;
use crate::layer::budget::PlanSummary;
use crate::telemetry::names;

/// Bucket bounds of the tool-call duration histogram, in seconds.
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Bucket bounds of the search-rank histogram.
const RANK_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 5.0, 10.0, 20.0];

/// Bucket bounds of the tool calls per `run_code` run (`code_mode_max_calls` is 50 by default).
const CODE_CALLS_BUCKETS: &[f64] = &[0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0];

/// Each histogram with its buckets.
const HISTOGRAMS: &[(&str, &[f64])] = &[
    (names::TOOL_CALL_DURATION, DURATION_BUCKETS),
    (names::UPSTREAM_FIRST_USE, DURATION_BUCKETS),
    (names::SEARCH_RANK_INVOKED, RANK_BUCKETS),
    (names::CODE_RUN_DURATION, DURATION_BUCKETS),
    (names::CODE_RUN_TOOL_CALLS, CODE_CALLS_BUCKETS),
];

/// The current plan's summary (`None` with `[budget]` off), read at each request.
type PlanFn = Arc<dyn Fn() -> Option<PlanSummary> + Send + Sync>;

/// The current plans' summaries by profile (`None` with `[budget]` off).
type ProfilesFn = Arc<dyn Fn() -> Option<Vec<(String, PlanSummary)>> + Send + Sync>;

/// What the admin endpoints read: the gateway's state and the current plan.
#[derive(Clone)]
pub struct Source {
    gateway: Gateway,
    plan: PlanFn,
    profiles: Option<ProfilesFn>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("gateway", &self.gateway)
            .finish_non_exhaustive()
    }
}

impl Source {
    /// The state of `gateway`, with the plan `plan` returns (the current stack's budget layer
    /// may change with a reload, so it is asked each time).
    #[must_use]
    pub fn new(
        gateway: Gateway,
        plan: impl Fn() -> Option<PlanSummary> + Send + Sync + 'static,
    ) -> Self {
        Self {
            gateway,
            plan: Arc::new(plan),
            profiles: None,
        }
    }

    /// Reads every profile's plan from `profiles` (the default profile and each `[[client]]`'s,
    /// [`crate::layer::budget::BudgetLayer::profile_summaries`]) instead of the one plan.
    #[must_use]
    pub fn with_profiles(
        mut self,
        profiles: impl Fn() -> Option<Vec<(String, PlanSummary)>> + Send + Sync + 'static,
    ) -> Self {
        self.profiles = Some(Arc::new(profiles));
        self
    }

    /// Each profile's plan, `None` with `[budget]` off.
    fn profiles(&self) -> Option<Vec<(String, PlanSummary)>> {
        match &self.profiles {
            Some(profiles) => profiles(),
            None => (self.plan)().map(|p| vec![(names::DEFAULT_PROFILE.to_owned(), p)]),
        }
    }
}

/// Installs the process's Prometheus recorder and turns recording on; `None` when a recorder
/// was installed already (an embedder's own: recording goes there, `/metrics` answers 404).
#[must_use]
pub fn install_recorder() -> Option<PrometheusHandle> {
    let mut builder = PrometheusBuilder::new();
    for &(name, buckets) in HISTOGRAMS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.into()), buckets)
            .ok()?;
    }
    let handle = builder.install_recorder().ok()?;
    for &(name, kind, help) in names::METRICS {
        match kind {
            names::MetricType::Counter => metrics::describe_counter!(name, help),
            names::MetricType::Gauge => metrics::describe_gauge!(name, help),
            names::MetricType::Histogram => metrics::describe_histogram!(name, help),
        }
    }
    crate::telemetry::record::enable();
    Some(handle)
}

struct AppState {
    source: Source,
    metrics: Option<PrometheusHandle>,
    allowed_hosts: Vec<String>,
}

/// The admin endpoints. `metrics`: the handle [`install_recorder`] returned (`None`:
/// `/metrics` answers 404). `allowed_hosts`: names accepted in `Host` besides localhost.
pub fn router(
    source: Source,
    metrics: Option<PrometheusHandle>,
    allowed_hosts: Vec<String>,
) -> Router {
    let state = Arc::new(AppState {
        source,
        metrics,
        allowed_hosts,
    });
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/status", get(status_json))
        .route("/metrics", get(metrics_text))
        .with_state(state)
}

/// Serves `app` on `listener` until `shutdown` is cancelled.
pub async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) {
    let config = crate::downstream::http::ListenConfig::default();
    crate::downstream::http::serve_with(listener, app, shutdown, config).await;
}

/// Whether `Host` names this machine or an allowed host: exactly one header, an authority.
fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let mut hosts = headers.get_all(header::HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return false;
    };
    let Some(authority) = host
        .to_str()
        .ok()
        .and_then(|h| h.parse::<http::uri::Authority>().ok())
    else {
        return false;
    };
    if authority.as_str().contains('@') {
        return false;
    }
    let name = authority.host();
    ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .any(|local| name.eq_ignore_ascii_case(local))
        || allowed.iter().any(|a| name.eq_ignore_ascii_case(a))
}

fn refuse_host() -> Response {
    (
        StatusCode::BAD_REQUEST,
        "Host is not this machine nor an [admin] allowed_hosts name\n",
    )
        .into_response()
}

// The probes answer whatever `Host` says (a kubelet sends the pod's IP): they tell only
// states, never reasons or figures.
async fn healthz() -> Response {
    "ok\n".into_response()
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    match status::readiness(&state.source.gateway.upstream_states()) {
        // A store that does not answer leaves the replica ready: it serves on by
        // `on_store_error`, and pulling every replica at once would take the whole deployment
        // down with the store. The probe says which way it decides limits.
        Ok(()) => match state.source.gateway.state().filter(|s| !s.is_up()) {
            Some(store) => format!("ready\nshared state: {}\n", store.mode()).into_response(),
            None => "ready\n".into_response(),
        },
        Err(waiting) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready:\n{}\n", waiting.join("\n")),
        )
            .into_response(),
    }
}

async fn status_json(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if !host_allowed(&headers, &state.allowed_hosts) {
        return refuse_host();
    }
    let source = &state.source;
    let profiles = source.profiles();
    let mut doc = status::document_of_profiles(
        &source.gateway.upstream_states(),
        profiles.as_deref(),
        source.gateway.sessions_active(),
    );
    doc["pending_restart"] = serde_json::json!(source.gateway.pending_restart());
    doc["state"] = source.gateway.state().map_or_else(
        || serde_json::json!({"backend": "memory"}),
        |store| store.status(),
    );
    (
        [(header::CONTENT_TYPE, "application/json")],
        format!("{doc:#}\n"),
    )
        .into_response()
}

async fn metrics_text(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if !host_allowed(&headers, &state.allowed_hosts) {
        return refuse_host();
    }
    let Some(handle) = &state.metrics else {
        return (StatusCode::NOT_FOUND, "metrics are recorded elsewhere\n").into_response();
    };
    let source = &state.source;
    let profiles = source.profiles().unwrap_or_default();
    status::set_gauges_of_profiles(
        &source.gateway.upstream_states(),
        &profiles,
        source.gateway.sessions_active(),
    );
    status::set_quarantine_gauges(&source.gateway.snapshot());
    handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_or_allowed_hosts_are_served() {
        let with = |host: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, host.parse().unwrap());
            h
        };
        let allowed = vec!["prometheus.svc".to_owned()];
        for ok in [
            "127.0.0.1:9464",
            "localhost",
            "[::1]:9464",
            "Prometheus.svc:9464",
        ] {
            assert!(host_allowed(&with(ok), &allowed), "{ok}");
        }
        for bad in ["evil.example:9464", "user@localhost", "127.0.0.2"] {
            assert!(!host_allowed(&with(bad), &allowed), "{bad}");
        }
        assert!(!host_allowed(&HeaderMap::new(), &allowed));
    }
}
