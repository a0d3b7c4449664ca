//! Running the gateway: start the upstreams, wait for them, build the stack, serve HTTP and/or
//! stdio until shutdown, stop the upstreams.
//!
//! [`run`] is the one call an embedder needs; [`Server`] is the same in steps, for a caller
//! that reports the upstreams and the plan before serving (as `mcp-budget serve` does) or
//! mounts the MCP endpoint in a router of its own ([`Server::router`]).
//! [`Server::start_listening`] binds the policy's `[downstream] http` address before any
//! upstream starts, so that a port in use fails at once, naming the address.
//!
//! In-process servers (a [`tower::Service`] of messages, an rmcp server over a duplex) join
//! the policy's upstreams through [`Policy::add_in_process`] before it is served.
//!
//! While it runs, tool rules (`[budget.tools."server/tool"]`, `[discover] never_defer`) that
//! match none of the tools an upstream lists are logged as warnings, once each time the
//! catalog changes them ([`unknown_rules`]).
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

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::catalog::Catalog;
use crate::downstream::{Endpoint, http, stdio};
use crate::gateway::Gateway;
/// What [`Server::upstreams`] reports of each upstream, and its status.
pub use crate::gateway::UpstreamSummary;
use crate::identity::{Directory, Gate, Protected, jwks};
use crate::layer::budget::{BudgetLayer, PlanSummary};
use crate::net::get_document;
use crate::policy::client::JwksSource;
use crate::policy::{Policy, Problem};
use crate::reload::Reloader;
use crate::seal::Sealer;
use crate::stack::McpService;
pub use crate::upstream::Status;

/// The gateway's HTTP listener (connection caps and header timeouts of `[downstream]`), for a
/// router of one's own that mounts [`Server::router`] (`examples/embed_axum.rs`).
pub use crate::downstream::http::{ListenConfig, serve_with};

/// How long [`run`] waits for upstreams to be ready before serving anyway (those not ready
/// join when they are).
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long fetching a JWKS may take.
const JWKS_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Why a [`Server`] could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The HTTP address could not be bound (nothing was started).
    #[error("cannot listen on {addr} ([downstream] http / --http): {reason}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// What went wrong, and what to do.
        reason: String,
    },
    /// A non-loopback HTTP address and no `[[client]]`: anyone who reaches it could call every
    /// tool (nothing was started).
    #[error(
        "refusing to serve {addr} without client authentication: every host that reaches it \
         could call every tool; add [[client]] entries, bind 127.0.0.1, or set \
         [downstream] allow_anonymous = true"
    )]
    Anonymous {
        /// The address.
        addr: SocketAddr,
    },
    /// The clients' credentials could not be set up (a key variable unset, a JWKS missing),
    /// or stdio has no client (nothing was started).
    #[error("cannot check clients: {0}")]
    Clients(String),
    /// The `[sessions]` seal key is unset, unreadable or not a key (nothing was started).
    #[error("cannot seal session ids: {0}")]
    Sessions(String),
}

impl StartError {
    /// The error of binding `addr`, with the usual fix.
    fn listen(addr: SocketAddr, err: &std::io::Error) -> Self {
        use std::io::ErrorKind;
        let reason = match err.kind() {
            ErrorKind::AddrInUse => format!(
                "the address is in use: another process listens there (`ss -ltnp 'sport = :{}'` \
                 shows which); stop it or pick another address",
                addr.port()
            ),
            ErrorKind::AddrNotAvailable => {
                "no network interface of this machine has that address (127.0.0.1 is this \
                 machine only)"
                    .to_owned()
            }
            ErrorKind::PermissionDenied => {
                "permission denied (ports below 1024 need privileges: pick one above)".to_owned()
            }
            _ => err.to_string(),
        };
        Self::Listen { addr, reason }
    }
}

/// A stdio transport for [`Server::serve`]: what the host writes and where answers go.
#[non_exhaustive]
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
    /// The stack, rebuilt on each reload ([`Server::reloader`]).
    reloader: Reloader,
    upstreams: Vec<UpstreamSummary>,
    /// The listener [`Server::start_listening`] bound.
    listener: Option<TcpListener>,
    shutdown: CancellationToken,
    gate: Gate,
    /// Seals 2025-era HTTP session ids (`[sessions]`).
    sealer: Option<Arc<Sealer>>,
}

impl Server {
    /// Binds the policy's `[downstream] http` address (when it has one) before anything
    /// starts, then starts as [`Server::start`] does; [`Server::serve`] serves that listener.
    ///
    /// # Errors
    /// [`StartError::Listen`] when the address cannot be bound (in use, not of this machine):
    /// no upstream was started.
    pub async fn start_listening(
        policy: Policy,
        ready_timeout: Duration,
        shutdown: CancellationToken,
    ) -> Result<Self, StartError> {
        if let Some(refusal) = policy
            .downstream
            .http
            .and_then(|a| anonymous_bind(a, &policy))
        {
            return Err(refusal);
        }
        let gate = gate_of(&policy).await?;
        let sealer = policy
            .sealer()
            .map_err(|e| StartError::Sessions(e.problem().to_string()))?;
        if policy.downstream.stdio {
            gate.stdio(policy.downstream.stdio_client.as_deref())
                .map_err(|r| StartError::Clients(r.to_string()))?;
        }
        let listener = match policy.downstream.http {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|err| StartError::listen(addr, &err))?,
            ),
            None => None,
        };
        let mut server = Self::start_with(policy, ready_timeout, shutdown, gate).await;
        server.listener = listener;
        server.sealer = sealer.map(Arc::new);
        Ok(server)
    }

    /// Starts the upstreams of `policy`, waits up to `ready_timeout` for them, and builds the
    /// stack. Cancelling `shutdown` stops everything. When the policy's clients cannot be set
    /// up (see [`StartError::Clients`]), every request is refused and an error is logged;
    /// when its seal key cannot be read, session ids are not sealed and an error is logged.
    pub async fn start(
        policy: Policy,
        ready_timeout: Duration,
        shutdown: CancellationToken,
    ) -> Self {
        let gate = gate_of(&policy).await.unwrap_or_else(|err| {
            tracing::error!("{err}; refusing every request");
            closed_gate()
        });
        let sealer = policy.sealer().unwrap_or_else(|e| {
            let err = StartError::Sessions(e.problem().to_string());
            tracing::error!("{err}; 2025-era sessions are known to this process only");
            None
        });
        let mut server = Self::start_with(policy, ready_timeout, shutdown, gate).await;
        server.sealer = sealer.map(Arc::new);
        server
    }

    async fn start_with(
        policy: Policy,
        ready_timeout: Duration,
        shutdown: CancellationToken,
        gate: Gate,
    ) -> Self {
        if let Some(JwksSource::Url { url, refresh_secs }) =
            policy.auth.jwt.as_ref().map(|j| &j.jwks)
        {
            let url = url.clone();
            tokio::spawn(crate::identity::jwks::keep_fresh(
                gate.clone(),
                Duration::from_secs(*refresh_secs),
                move || {
                    let url = url.clone();
                    async move { fetch_jwks(&url).await }
                },
                shutdown.clone(),
            ));
        }
        let announce = crate::stack::announce(&policy);
        let gateway = Gateway::start(policy.clone(), announce, shutdown.clone());
        let upstreams = gateway.wait_ready(ready_timeout).await;
        let reloader = Reloader::new(gateway.clone());
        tokio::spawn(warn_unknown_rules(
            gateway.clone(),
            gateway.catalog(),
            shutdown.clone(),
        ));
        Self {
            policy,
            gateway,
            reloader,
            upstreams,
            listener: None,
            shutdown,
            gate,
            sealer: None,
        }
    }

    /// Who may call: the directory every downstream checks. A reload stores its new
    /// directory in [`Gate::directory`].
    #[doc(hidden)]
    #[must_use]
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Whether 2025-era HTTP session ids are sealed (`[sessions]`): then they outlive this
    /// process and any replica with the key serves them. The sealing key's id, if so.
    #[must_use]
    pub fn sealing_key_id(&self) -> Option<String> {
        self.sealer.as_ref().map(|s| s.sealing_key_id())
    }

    /// The address [`Server::start_listening`] bound, if it did.
    #[must_use]
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The current catalog: what the upstreams list, as hosts see it.
    #[must_use]
    pub fn catalog(&self) -> Arc<Catalog> {
        self.gateway.snapshot()
    }

    /// How each upstream started.
    #[must_use]
    pub fn upstreams(&self) -> &[UpstreamSummary] {
        &self.upstreams
    }

    /// The budget plan's summary; `None` when `[budget]` is off (tool lists pass through).
    #[must_use]
    pub fn plan(&self) -> Option<PlanSummary> {
        self.reloader.budget().as_ref().map(BudgetLayer::summary)
    }

    /// The budget plan's summary for `[[client]]` `name` (its scope's tools, its model);
    /// `None` when `[budget]` is off or no client has that name.
    #[must_use]
    pub fn plan_of(&self, name: &str) -> Option<PlanSummary> {
        self.reloader.budget().as_ref()?.client_summary(name)
    }

    /// Namespaced names that collided in the catalog, and the names they got.
    #[must_use]
    pub fn collisions(&self) -> Vec<crate::catalog::Collision> {
        self.gateway.snapshot().collisions().to_vec()
    }

    /// The policy it started with: its `[downstream]` settings are the ones served until a
    /// restart (a reload applies the rest, see [`Server::reloader`]).
    #[must_use]
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// What applies a reloaded policy to this server while it serves
    /// ([`crate::reload::watch`] does so on file changes and `SIGHUP`).
    #[doc(hidden)]
    #[must_use]
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
    }

    /// What the admin listener reads ([`crate::admin::router`]).
    #[doc(hidden)]
    #[must_use]
    pub fn admin_source(&self) -> crate::admin::Source {
        let (reloader, each) = (self.reloader.clone(), self.reloader.clone());
        crate::admin::Source::new(self.gateway.clone(), move || {
            reloader.budget().as_ref().map(BudgetLayer::summary)
        })
        .with_profiles(move || each.budget().as_ref().map(BudgetLayer::profile_summaries))
    }

    /// The stack every transport serves.
    #[must_use]
    pub fn service(&self) -> McpService {
        self.reloader.service()
    }

    /// What the downstreams serve: the stack, the gateway's session registry and its
    /// published catalog (for a transport of one's own, or [`http::router`] mounted by hand).
    #[must_use]
    pub(crate) fn endpoint(&self) -> Endpoint {
        Endpoint::new(
            self.service(),
            Arc::new(self.gateway.clone()),
            self.gateway.catalog(),
        )
        .with_gate(self.gate.clone())
        .with_store(self.gateway.state())
    }

    /// The MCP endpoint at `path` (say [`MCP_PATH`]), with the policy's `[downstream]`
    /// settings, to merge into a router of one's own.
    pub fn router(&self, path: &str) -> Router {
        let mut config = http::HttpConfig::from(&self.policy.downstream);
        if let Some(sealer) = &self.sealer {
            config = config.with_sealer(sealer.clone(), self.policy.sessions.max_lifetime);
        }
        let router = http::router_at(path, self.endpoint(), config);
        // While spans are exported, a request's `traceparent` header parents its messages.
        if crate::telemetry::tracing_on() {
            router.layer(crate::telemetry::http_parent::HttpParentLayer)
        } else {
            router
        }
    }

    /// Serves MCP on `listener` and on the one [`Server::start_listening`] bound (at
    /// [`MCP_PATH`], with the policy's connection limits) and/or on `stdio`, until shutdown is
    /// cancelled or the stdio host closes its input (how stdio hosts say goodbye); then stops
    /// the upstreams and gives the transports a moment to finish.
    pub async fn serve(mut self, listener: Option<TcpListener>, stdio: Option<Stdio>) {
        let mut tasks = tokio::task::JoinSet::new();
        for listener in listener.into_iter().chain(self.listener.take()) {
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
            let endpoint = self.endpoint();
            let config = (&self.policy.downstream).into();
            let stop = self.shutdown.clone();
            tasks.spawn(async move {
                stdio::serve_until(endpoint, input, output, config, stop.clone()).await;
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

    /// Cancels shutdown, writes the usage counts not written yet and stops the upstreams: for
    /// a caller that served [`Server::router`] itself.
    pub async fn stop(&self) {
        self.shutdown.cancel();
        if let Some(budget) = self.reloader.budget() {
            budget.flush_usage().await;
        }
        self.gateway.shutdown().await;
    }
}

/// The refusal of serving `addr` when it is not loopback, no `[[client]]` authenticates
/// callers and `[downstream] allow_anonymous` is not set.
fn anonymous_bind(addr: SocketAddr, policy: &Policy) -> Option<StartError> {
    let open = policy.clients.is_empty() && !policy.downstream.allow_anonymous;
    (open && !addr.ip().is_loopback()).then_some(StartError::Anonymous { addr })
}

/// The gate of `policy`'s clients, with the JWKS of a `jwks_url` fetched.
async fn gate_of(policy: &Policy) -> Result<Gate, StartError> {
    let fetched = match policy.auth.jwt.as_ref().map(|j| &j.jwks) {
        Some(JwksSource::Url { url, .. }) => {
            Some(Arc::new(fetch_jwks(url).await.map_err(|e| {
                StartError::Clients(format!(
                    "cannot fetch the JWKS of [auth.jwt] jwks_url ({e}); without the keys no \
                     token can be checked: make the URL reachable, or use jwks_file"
                ))
            })?))
        }
        _ => None,
    };
    let directory = policy
        .directory(fetched)
        .map_err(|e| StartError::Clients(e.to_string()))?;
    let protected = Protected {
        resource: policy.auth.resource.clone(),
        authorization_servers: policy.auth.authorization_servers.clone(),
        scopes_supported: policy.auth.scopes_supported.clone(),
    };
    Ok(Gate::new(directory, protected))
}

/// The JWKS at `url`, within [`JWKS_TIMEOUT`].
async fn fetch_jwks(url: &str) -> Result<jsonwebtoken::jwk::JwkSet, String> {
    let body = tokio::time::timeout(JWKS_TIMEOUT, get_document(url, jwks::MAX_JWKS_BYTES))
        .await
        .map_err(|_| {
            let shown = crate::redact::Url(url);
            format!("GET {shown}: no answer within {} s", JWKS_TIMEOUT.as_secs())
        })??;
    jwks::parse(&body).map_err(|e| format!("{}: {e}", crate::redact::Url(url)))
}

/// A gate that lets nobody in: clients are configured, none can prove it.
fn closed_gate() -> Gate {
    let nobody = crate::identity::Client::new("", crate::authz::Scope::new(vec![], vec![], vec![]));
    Gate::new(Directory::new(vec![nobody]), Protected::default())
}

/// Logs the tool rules that match none of the listed tools, each once while it stays
/// unmatched: checked again on every catalog version, as upstreams (re)list their tools.
async fn warn_unknown_rules(
    gateway: Gateway,
    mut catalog: watch::Receiver<Arc<Catalog>>,
    shutdown: CancellationToken,
) {
    let mut reported: Vec<String> = Vec::new();
    loop {
        let current = catalog.borrow_and_update().clone();
        // The policy of the moment: a reload publishes a new catalog, so it is judged too.
        let found: Vec<String> = unknown_rules(&gateway.policy(), &current)
            .iter()
            .map(ToString::to_string)
            .collect();
        for warning in found.iter().filter(|w| !reported.contains(w)) {
            tracing::warn!(catalog_version = current.version(), "policy: {warning}");
        }
        reported = found;
        tokio::select! {
            changed = catalog.changed() => if changed.is_err() { return },
            () = shutdown.cancelled() => return,
        }
    }
}

/// The tool rules of `policy` that match none of the tools in `catalog`, among the rules of
/// upstreams that listed tools in it (one still starting has listed nothing yet, so its rules
/// are not judged).
#[must_use]
pub fn unknown_rules(policy: &Policy, catalog: &Catalog) -> Vec<Problem> {
    let listed: Vec<&str> = catalog
        .names()
        .iter()
        .zip(catalog.upstreams())
        .filter(|(_, c)| c.counts().tools > 0)
        .map(|(name, _)| name.as_str())
        .collect();
    if listed.is_empty() {
        return Vec::new();
    }
    let ids: Vec<String> = catalog.tools().iter().map(|t| t.id()).collect();
    policy.unmatched_rules_among(&ids, |server| listed.contains(&server))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Contribution;
    use serde_json::json;

    #[test]
    fn rules_are_judged_once_their_upstream_listed_tools() {
        let policy = Policy::from_toml_str(
            "version = 1\n[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[[upstream]]\nname = \"b\"\ncommand = \"y\"\n\
             [budget.tools.\"a/nope\"]\npin = true\n[budget.tools.\"a/real\"]\npin = true\n\
             [budget.tools.\"b/later\"]\npin = true\n",
            "p.toml",
        )
        .unwrap();
        let names = ["a".to_owned(), "b".to_owned()];
        let tools = Contribution {
            tools: vec![json!({"name": "real", "inputSchema": {"type": "object"}})],
            ..Contribution::default()
        };
        let catalog = Catalog::build(vec![tools, Contribution::default()], &names, "__", 1);
        let found: Vec<String> = unknown_rules(&policy, &catalog)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            ["line 8: budget.tools.\"a/nope\": `a/nope` matches none of the upstream's tools"]
        );
        let empty = Catalog::build(vec![Contribution::default(); 2], &names, "__", 0);
        assert!(unknown_rules(&policy, &empty).is_empty());
    }

    #[test]
    fn only_loopback_binds_serve_without_clients_unless_allowed() {
        let policy = |extra: &str| {
            let text = format!("version = 1\n[downstream]\n{extra}");
            Policy::from_toml_str(&text, "p.toml").unwrap()
        };
        let open: SocketAddr = "0.0.0.0:8931".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8931".parse().unwrap();
        let refused = anonymous_bind(open, &policy("")).map(|e| e.to_string());
        let shown = refused.unwrap_or_default();
        assert!(
            shown.contains("0.0.0.0:8931") && shown.contains("allow_anonymous"),
            "{shown}"
        );
        assert!(anonymous_bind(local, &policy("")).is_none());
        assert!(anonymous_bind(open, &policy("allow_anonymous = true")).is_none());
        let with_client = "[[client]]\nname = \"a\"\napi_key_sha256 = \"".to_owned()
            + &"0".repeat(64)
            + "\"\nallow = [\"*\"]\n";
        let text = format!("version = 1\n{with_client}");
        let p = Policy::from_toml_str(&text, "p.toml").unwrap();
        assert!(anonymous_bind(open, &p).is_none());
    }

    #[test]
    fn a_port_in_use_names_the_address_and_what_to_do() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let err = std::net::TcpListener::bind(addr).unwrap_err();
        let shown = StartError::listen(addr, &err).to_string();
        assert!(
            shown.starts_with(&format!(
                "cannot listen on {addr} ([downstream] http / --http): the address is in use"
            )),
            "{shown}"
        );
        assert!(
            shown.contains(&format!("sport = :{}", addr.port())),
            "{shown}"
        );
    }
}
