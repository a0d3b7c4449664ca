//! Running the gateway: start the upstreams, wait for them, build the stack, serve HTTP and/or
//! stdio until shutdown, stop the upstreams.
//!
//! [`run`] is the one call an embedder needs; [`Server`] is the same in steps, for a caller
//! that reports the upstreams and the plan before serving (as `mcp-budget serve` does) or
//! mounts the MCP endpoint in a router of its own ([`Server::router`]).
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use mcp_budget::policy::Policy;
//! use tokio_util::sync::CancellationToken;
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8931").await?;
//! let shutdown = CancellationToken::new();
//! // Serves http://127.0.0.1:8931/mcp until `shutdown` is cancelled.
//! mcp_budget::server::run(listener, Policy::default(), shutdown).await;
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use axum::Router;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::downstream::{http, stdio};
use crate::gateway::{Gateway, UpstreamSummary};
use crate::layer::budget::{BudgetLayer, PlanSummary};
use crate::policy::Policy;
use crate::stack::{self, McpService};

/// How long [`run`] waits for upstreams to be ready before serving anyway (those not ready
/// join when they are).
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long serving tasks get to finish once the gateway is shutting down.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The path [`Server::serve`] and [`run`] serve MCP at.
pub const MCP_PATH: &str = "/mcp";

/// Serves the gateway of `policy` on `listener` at [`MCP_PATH`] until `shutdown` is
/// cancelled, then stops its upstreams. Upstreams get [`READY_TIMEOUT`] to start before the
/// first request is served.
pub async fn run(listener: TcpListener, policy: Policy, shutdown: CancellationToken) {
    let server = Server::start(policy, READY_TIMEOUT, shutdown).await;
    server.serve(Some(listener), None).await;
}

/// A stdio transport for [`Server::serve`]: what the host writes and where answers go.
pub struct Stdio {
    input: Box<dyn AsyncRead + Unpin + Send>,
    output: Box<dyn AsyncWrite + Unpin + Send>,
}

impl Stdio {
    /// Messages are read from `input`, one per line, and answers written to `output`.
    pub fn new(
        input: impl AsyncRead + Unpin + Send + 'static,
        output: impl AsyncWrite + Unpin + Send + 'static,
    ) -> Self {
        Self {
            input: Box::new(input),
            output: Box::new(output),
        }
    }
}

impl std::fmt::Debug for Stdio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stdio").finish_non_exhaustive()
    }
}

/// A started gateway: its upstreams started (ready, or given up on for now) and its stack
/// built.
#[derive(Debug)]
pub struct Server {
    policy: Policy,
    gateway: Gateway,
    service: McpService,
    budget: Option<BudgetLayer>,
    upstreams: Vec<UpstreamSummary>,
    shutdown: CancellationToken,
}

impl Server {
    /// Starts the upstreams of `policy`, waits up to `ready_timeout` for them, and builds the
    /// stack. Cancelling `shutdown` stops everything.
    pub async fn start(
        policy: Policy,
        ready_timeout: Duration,
        shutdown: CancellationToken,
    ) -> Self {
        let gateway = Gateway::start(policy.clone(), shutdown.clone());
        let upstreams = gateway.wait_ready(ready_timeout).await;
        let (service, budget) = stack::build_with_budget(gateway.clone());
        Self {
            policy,
            gateway,
            service,
            budget,
            upstreams,
            shutdown,
        }
    }

    /// How each upstream started.
    #[must_use]
    pub fn upstreams(&self) -> &[UpstreamSummary] {
        &self.upstreams
    }

    /// The budget plan's summary; `None` when `[budget]` is off (tool lists pass through).
    #[must_use]
    pub fn plan(&self) -> Option<PlanSummary> {
        self.budget.as_ref().map(BudgetLayer::summary)
    }

    /// Namespaced names that collided in the catalog, and the names they got.
    #[must_use]
    pub fn collisions(&self) -> Vec<crate::catalog::Collision> {
        self.gateway.snapshot().collisions().to_vec()
    }

    /// The policy it runs.
    #[must_use]
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The stack every transport serves.
    #[must_use]
    pub fn service(&self) -> McpService {
        self.service.clone()
    }

    /// The MCP endpoint at `path` (say [`MCP_PATH`]), with the policy's `[downstream]`
    /// settings, to merge into a router of one's own.
    pub fn router(&self, path: &str) -> Router {
        http::router_at(
            path,
            self.service(),
            self.gateway.clone(),
            (&self.policy.downstream).into(),
        )
    }

    /// Serves MCP on `listener` (at [`MCP_PATH`], with the policy's connection limits) and/or
    /// on `stdio`, until shutdown is cancelled or the stdio host closes its input (how stdio
    /// hosts say goodbye); then stops the upstreams and gives the transports a moment to
    /// finish.
    pub async fn serve(self, listener: Option<TcpListener>, stdio: Option<Stdio>) {
        let mut tasks = tokio::task::JoinSet::new();
        if let Some(listener) = listener {
            let app = self.router(MCP_PATH);
            let limits = http::ListenConfig::from(&self.policy.downstream);
            tasks.spawn(http::serve_with(
                listener,
                app,
                self.shutdown.clone(),
                limits,
            ));
        }
        if let Some(Stdio { input, output }) = stdio {
            let gateway = self.gateway.clone();
            let service = self.service();
            let config = (&self.policy.downstream).into();
            let stop = self.shutdown.clone();
            tasks.spawn(async move {
                stdio::serve(service, &gateway, input, output, config).await;
                if !stop.is_cancelled() {
                    tracing::info!("Input closed; shutting down");
                }
                stop.cancel();
            });
        }
        self.shutdown.cancelled().await;
        self.stop().await;
        let _ = tokio::time::timeout(STOP_GRACE, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
    }

    /// Cancels shutdown and stops the upstreams: for a caller that served [`Server::router`]
    /// itself.
    pub async fn stop(&self) {
        self.shutdown.cancel();
        self.gateway.shutdown().await;
    }
}
