//! The streamable HTTP downstream: 2025-era sessions (2025-03-26 … 2025-11-25, and
//! 2024-11-05 clients that POST), and sessionless 2026-07-28 requests.
//!
//! `POST` carries one message: `initialize` opens a session (`Mcp-Session-Id`); a request is
//! answered with JSON, or with an SSE stream when server→client messages (progress, logging,
//! sampling) come before the answer; notifications and responses get 202. `GET` opens the
//! session's stream for messages not tied to a request (`list_changed`); `DELETE` ends the
//! session. A 2026-07-28 request names its version in `_meta` and its headers and is served
//! without a session (GET and DELETE get 405 for it). `Host` and `Origin` are checked against
//! DNS rebinding: only localhost names and what the policy allows get through.
//!
//! Limits (each a `[downstream]` policy key): a POST's body must arrive within
//! `body_timeout_secs` (408) and be `Content-Type: application/json` (415); `Accept` must list
//! both `application/json` and `text/event-stream` (406; 2024-11-05 clients need only JSON);
//! `initialize` over `max_sessions` or `max_sessions_per_client` gets 503; a session unused
//! for `session_idle_secs` (no request in flight, no open GET stream) expires; a second GET
//! stream for a session gets 409; a stream the client does not read is closed once
//! `max_outbound_messages` wait for it (the session survives). Connections are capped by
//! [`serve_with`].
//!
//! The files: `checks` (the header checks and the era and reply-shape decisions, pure),
//! `post`, `get` (GET streams and DELETE), `sessions` (the table, its caps, idle expiry),
//! `sealed` (with `[sessions]` a seal key: what a sealed id carries, rebuilding a session from
//! it, what ends one), `reply` (statuses, JSON and SSE framing) and `listen` (connections). Beside the stack, a
//! router reads only its [`Endpoint`]'s session handle and catalog.
//!
//! ```no_run
//! # async fn run(server: mcp_budget::server::Server) {
//! // `Server::router` builds this router on the server's stack (see `server::run` for the
//! // one-call way to serve it).
//! let app: axum::Router = axum::Router::new()
//!     .route("/healthz", axum::routing::get(|| async { "ok" }))
//!     .merge(server.router("/mcp"));
//! # let _ = app;
//! # }
//! ```

mod auth;
mod checks;
mod get;
mod hygiene;
mod listen;
mod owner;
mod post;
mod reply;
mod sealed;
mod sessions;

pub use listen::{HEADER_READ_TIMEOUT, ListenConfig, REFUSALS_IN_FLIGHT, serve, serve_with};

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use axum::Router;
use axum::routing::post;

use tokio::sync::watch;

use super::Endpoint;
use crate::catalog::Catalog;
use crate::identity::Gate;
use crate::identity::challenge::METADATA_PATH;
use crate::policy::Downstream;
use crate::seal::Sealer;
use crate::stack::McpService;
use sessions::Sessions;

const SESSION_HEADER: &str = "mcp-session-id";

/// The one protocol version before streamable HTTP: its clients need not accept SSE.
const HTTP_SSE_ERA: &str = "2024-11-05";

/// Settings of the HTTP downstream: the validated `[downstream]` section (read through
/// [`Deref`](std::ops::Deref): `config.max_sessions` is `config.downstream.max_sessions`), plus
/// what the transport adds to it, the session sealer and its lifetime. Non-exhaustive, so that
/// a new setting is not a breaking change: start from [`HttpConfig::default`] (or
/// `From<&Downstream>`) and set fields.
///
/// ```
/// use mcp_budget::downstream::http::HttpConfig;
///
/// let mut config = HttpConfig::default();
/// config.strict_accept = true;
/// assert!(config.allowed_origins.is_empty());
/// assert!(config.downstream.strict_accept);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    /// `[downstream]`: origins and hosts accepted, body size and time, session limits and
    /// idle time, the outbound queue, JSON depth, `strict_accept`. (`http`, `stdio`,
    /// `stdio_client`, `allow_anonymous` and the connection caps are read by the listener and
    /// the gate, not here.)
    pub downstream: Downstream,
    /// Seals session ids (`[sessions]`), so that another replica, or this one restarted,
    /// serves the session; `None`: random ids, known only here.
    pub sealer: Option<Arc<Sealer>>,
    /// How long a sealed id is accepted after `initialize` (`[sessions] max_lifetime_secs`).
    pub session_lifetime: Duration,
}

impl std::ops::Deref for HttpConfig {
    type Target = Downstream;

    fn deref(&self) -> &Downstream {
        &self.downstream
    }
}

impl std::ops::DerefMut for HttpConfig {
    fn deref_mut(&mut self) -> &mut Downstream {
        &mut self.downstream
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self::from(&Downstream::default())
    }
}

impl From<&Downstream> for HttpConfig {
    fn from(downstream: &Downstream) -> Self {
        Self {
            downstream: downstream.clone(),
            sealer: None,
            session_lifetime: crate::policy::sessions::DEFAULT_MAX_LIFETIME,
        }
    }
}

impl HttpConfig {
    /// Seals session ids with `sealer`, each accepted for `lifetime` after `initialize`.
    #[must_use]
    pub fn with_sealer(mut self, sealer: Arc<Sealer>, lifetime: Duration) -> Self {
        self.sealer = Some(sealer);
        self.session_lifetime = lifetime;
        self
    }
}

/// What every handler of one router shares.
struct AppState {
    service: McpService,
    /// Told when a session ends (DELETE, expiry).
    sessions_handle: Arc<dyn super::Sessions>,
    /// The published catalog: the `Mcp-Param-*` marks of the tools.
    catalog: watch::Receiver<Arc<Catalog>>,
    /// Who may call.
    gate: Gate,
    config: HttpConfig,
    sessions: Mutex<Sessions>,
    /// Whether the sweeper for idle sessions runs (it starts with the first session).
    sweeping: AtomicBool,
    /// Whether the last `initialize` was refused for a session limit.
    refusing_sessions: AtomicBool,
    /// The `[state]` store: `DELETE`s reach every replica through it.
    store: Option<crate::state::Store>,
}

/// The MCP endpoint as an axum router serving `/`: mount it with
/// `Router::nest_service("/mcp", ..)`.
pub fn router(endpoint: Endpoint, config: HttpConfig) -> Router {
    router_at("/", endpoint, config)
}

/// The MCP endpoint as an axum router serving `path` (say `/mcp`): for a router of its own (or
/// merged), one step less per request than a nested [`router`], which strips the prefix from
/// every request's URI.
pub fn router_at(path: &str, endpoint: Endpoint, config: HttpConfig) -> Router {
    let Endpoint {
        service,
        sessions,
        catalog,
        gate,
        store,
    } = endpoint;
    let state = Arc::new(AppState {
        service,
        sessions_handle: sessions,
        catalog,
        gate,
        config,
        sessions: Mutex::new(Sessions::default()),
        sweeping: AtomicBool::new(false),
        refusing_sessions: AtomicBool::new(false),
        store,
    });
    if state.config.sealer.is_some() {
        if let Some(store) = &state.store {
            // Sessions ended by DELETE on other replicas end here too.
            tokio::spawn(sessions::follow_revocations(
                Arc::downgrade(&state),
                store.clone(),
            ));
        }
    }
    // RFC 9728 §3.1: the metadata of resource `/mcp` is at the well-known path plus `/mcp`;
    // the bare well-known path serves it too (clients that guess from the origin).
    let metadata = format!("{METADATA_PATH}{}", path.trim_end_matches('/'));
    let mut router = Router::new().route(
        path,
        post(post::handle_post)
            .get(get::handle_get)
            .delete(get::handle_delete),
    );
    router = router.route(METADATA_PATH, axum::routing::get(auth::handle_metadata));
    if metadata != METADATA_PATH {
        router = router.route(&metadata, axum::routing::get(auth::handle_metadata));
    }
    (router.fallback(hygiene::not_found).with_state(state)).layer(hygiene::CloseUnreadLayer)
}
