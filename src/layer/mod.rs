//! The tower layers of the gateway, one module each; [`crate::stack`] orders them.
//!
//! A layer's service is a [`Layered`]: the layer's settings around the inner service. The
//! layer says what it does with one call ([`Around`]); [`Layered`] does what every service
//! of the stack does alike: `poll_ready` forwards to the inner service, and each call takes
//! the readied inner service with it (a fresh clone is left for the next `poll_ready`), so a
//! call never reaches a clone that was not readied.
//!
//! ```
//! use std::convert::Infallible;
//! use mcp_budget::context::{McpFuture, McpRequest};
//! use mcp_budget::layer::{Around, Inner, Layered};
//! use tower::{Service, ServiceExt};
//!
//! /// Answers notifications itself, passes everything else on.
//! #[derive(Debug, Clone)]
//! struct Quiet;
//!
//! impl<S: Inner> Around<S> for Quiet {
//!     type Future = McpFuture;
//!     fn around(&self, mut inner: S, req: McpRequest) -> McpFuture {
//!         if req.message.id.is_none() {
//!             return Box::pin(async { Ok(None) });
//!         }
//!         Box::pin(inner.call(req))
//!     }
//! }
//!
//! # async fn run(req: McpRequest) {
//! let inner = tower::service_fn(|_: McpRequest| async {
//!     Ok::<Option<mcp_budget::jsonrpc::Message>, Infallible>(None)
//! });
//! let reply = Layered::new(Quiet, inner).oneshot(req).await;
//! # let _ = reply;
//! # }
//! ```

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::task::{Context, Poll};

use tower::Service;

/// Where the authorize, arguments and guard layers record their decisions.
pub use crate::audit::Audit;
use crate::context::McpRequest;
use crate::jsonrpc::Message;

pub mod arguments;
pub mod authorize;
pub mod budget;
pub mod era;
pub mod guard;
pub mod limit;
pub mod recover;
pub mod resolve;
pub mod trace;

/// What a layer does around one call of its inner service `S`: a request `Req` in (an MCP
/// request unless said), the inner service taking `In` (the same type unless the layer changes
/// it, as [`crate::llm_api::LlmCache`] gives its inner service one body type).
pub trait Around<S: Service<In>, Req = McpRequest, In = Req> {
    /// The future of one call.
    type Future: Future<Output = Result<S::Response, S::Error>>;

    /// Handles `req` with `inner`, which is ready for one call and owned by this one.
    fn around(&self, inner: S, req: Req) -> Self::Future;
}

/// The inner service of a layer whose future is an [`McpFuture`](crate::context::McpFuture)
/// (it moves the inner service's future into its own).
pub trait Inner:
    Service<McpRequest, Response = Option<Message>, Error = Infallible, Future: Send + 'static>
    + Clone
    + Send
    + 'static
{
}

impl<S> Inner for S where
    S: Service<McpRequest, Response = Option<Message>, Error = Infallible, Future: Send + 'static>
        + Clone
        + Send
        + 'static
{
}

/// A layer's service: the layer `L` ([`Around`]) around the inner service `S`, which takes
/// requests of type `In` (MCP requests unless said).
pub struct Layered<L, S, In = McpRequest> {
    layer: L,
    inner: S,
    /// `fn(In)`: what the inner service takes, without holding one (so `Send`, `Sync`,
    /// `Clone` whatever `In` is).
    request: PhantomData<fn(In)>,
}

impl<L, S> Layered<L, S> {
    /// `layer` around `inner`.
    #[must_use]
    pub fn new(layer: L, inner: S) -> Self {
        Self::wrap(layer, inner)
    }
}

impl<L, S, In> Layered<L, S, In> {
    /// `layer` around `inner`, which takes requests of type `In` ([`Layered::new`] for MCP
    /// requests).
    #[must_use]
    pub fn wrap(layer: L, inner: S) -> Self {
        Self {
            layer,
            inner,
            request: PhantomData,
        }
    }

    /// The layer (its settings and state).
    pub fn get_layer(&self) -> &L {
        &self.layer
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<L: Clone, S: Clone, In> Clone for Layered<L, S, In> {
    fn clone(&self) -> Self {
        Self::wrap(self.layer.clone(), self.inner.clone())
    }
}

impl<L: fmt::Debug, S: fmt::Debug, In> fmt::Debug for Layered<L, S, In> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layered")
            .field("layer", &self.layer)
            .field("inner", &self.inner)
            .finish()
    }
}

impl<L, S, Req, In> Service<Req> for Layered<L, S, In>
where
    S: Service<In> + Clone,
    L: Around<S, Req, In>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = L::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> L::Future {
        // The readied service goes with the call; its clone waits for the next `poll_ready`.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        self.layer.around(inner, req)
    }
}
