//! An MCP server in the gateway's own process, beside stdio and HTTP upstreams: a
//! [`tower::Service`] of JSON-RPC messages, or a pair of byte streams speaking
//! newline-delimited JSON-RPC (an rmcp server over [`tokio::io::duplex`]).
//!
//! A policy file cannot name a Rust value, so these upstreams are added through the library
//! ([`Policy::add_in_process`](super::Policy::add_in_process)) before the policy is served;
//! from then on they are upstreams like the others: the same handshake, catalog, plan,
//! limits and supervision (a stream that ends is connected again).

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceExt};

/// The reading and the writing end of an in-process connection.
pub type Pipes = (
    Pin<Box<dyn AsyncRead + Send>>,
    Pin<Box<dyn AsyncWrite + Send>>,
);

/// A message service: a JSON-RPC message in, the answer (none for a notification) out.
pub type MessageService = BoxCloneSyncService<Value, Option<Value>, BoxError>;

/// An MCP server in the gateway's process, added to a policy with
/// [`Policy::add_in_process`](super::Policy::add_in_process).
///
/// ```
/// use mcp_budget::policy::{InProcess, Policy};
/// use serde_json::{Value, json};
///
/// let server = InProcess::service(tower::service_fn(|msg: Value| async move {
///     let Some(id) = msg.get("id").cloned() else { return Ok(None) };
///     let result = match msg["method"].as_str() {
///         Some("initialize") => json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
///                                      "serverInfo": {"name": "clock", "version": "1"}}),
///         Some("tools/list") => json!({"tools": [{"name": "now", "inputSchema": {"type": "object"}}]}),
///         _ => json!({}),
///     };
///     Ok::<_, tower::BoxError>(Some(json!({"jsonrpc": "2.0", "id": id, "result": result})))
/// }));
/// let mut policy = Policy::default();
/// policy.add_in_process("clock", server)?;
/// assert_eq!(policy.upstreams[0].transport_name(), "in-process");
/// # Ok::<(), mcp_budget::policy::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct InProcess {
    /// Unwind-safe as a policy is: a server that panicked answers the calls after it as its
    /// code does (the gateway catches panics per request, `layer::recover`).
    kind: Arc<AssertUnwindSafe<Kind>>,
}

/// The two ways to reach an in-process server.
pub(crate) enum Kind {
    /// Each message is a call of the service; its answers are the server's messages.
    Service(MessageService),
    /// Each connection is a fresh pair of streams from the function.
    Streams(Box<dyn Fn() -> Pipes + Send + Sync>),
}

impl InProcess {
    /// A server that is a service of JSON-RPC messages. Requests are called concurrently,
    /// each on a clone readied for it. It cannot send messages of its own (notifications,
    /// requests to the client): a server that does is served through
    /// [`InProcess::streams`].
    ///
    /// A service of [`crate::embed::Request`]s is one with
    /// `.map_request(mcp_budget::embed::Request::new)`.
    #[must_use]
    pub fn service<S>(service: S) -> Self
    where
        S: Service<Value, Response = Option<Value>> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let service = BoxCloneSyncService::new(service.map_err(Into::into));
        Self {
            kind: Arc::new(AssertUnwindSafe(Kind::Service(service))),
        }
    }

    /// A server reached through a pair of byte streams carrying newline-delimited JSON-RPC, as
    /// a stdio child's are: `connect` is called for each connection (again after one ends) and
    /// gives its reading and writing end. For an rmcp server, `connect` makes a
    /// [`tokio::io::duplex`], serves the server on one end (on a task) and returns the other,
    /// split.
    #[must_use]
    pub fn streams<F, R, W>(connect: F) -> Self
    where
        F: Fn() -> (R, W) + Send + Sync + 'static,
        R: AsyncRead + Send + 'static,
        W: AsyncWrite + Send + 'static,
    {
        let connect = move || -> Pipes {
            let (read, write) = connect();
            (Box::pin(read), Box::pin(write))
        };
        Self {
            kind: Arc::new(AssertUnwindSafe(Kind::Streams(Box::new(connect)))),
        }
    }

    pub(crate) fn kind(&self) -> &Kind {
        &self.kind
    }
}

impl fmt::Debug for InProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match **self.kind {
            Kind::Service(_) => "service",
            Kind::Streams(_) => "streams",
        };
        f.debug_tuple("InProcess").field(&kind).finish()
    }
}

/// The same server: two handles are equal when they are clones of one.
impl PartialEq for InProcess {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.kind, &other.kind)
    }
}

impl Eq for InProcess {}
