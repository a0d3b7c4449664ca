//! `era`: serves 2026-07-28 (stateless) requests next to 2025-era sessions, per request.
//!
//! A request whose `params._meta` carries `io.modelcontextprotocol/protocolVersion` is modern:
//! an unsupported version is answered with `-32022` (and the supported list), and the result of
//! anything else gets the modern fields — `resultType`, and for lists `ttlMs` and `cacheScope`
//! (`private` when what a caller sees depends on who it is: promoted tools). `server/discover`
//! is answered by the gateway. 2025-era requests pass through untouched, and never see the
//! modern fields.
//!
//! ```
//! use mcp_budget::layer::era::EraLayer;
//! use tower::Layer;
//! # use mcp_budget::context::McpRequest;
//! # let inner = tower::service_fn(|_: McpRequest| async { Ok::<Option<mcp_budget::jsonrpc::Message>, std::convert::Infallible>(None) });
//! let service = EraLayer::new(false).layer(inner);
//! # let _ = service;
//! ```

use tower::Layer;

use super::{Around, Inner, Layered};
use crate::context::{McpFuture, McpRequest};
use crate::jsonrpc::{Kind, Message};
use crate::mcp::modern;

/// Layer of [`Eras`].
#[derive(Debug, Clone, Copy)]
pub struct EraLayer {
    private_lists: bool,
}

impl EraLayer {
    /// `private_lists`: list results depend on the caller (they get `cacheScope: private`).
    #[must_use]
    pub fn new(private_lists: bool) -> Self {
        Self { private_lists }
    }
}

impl<S> Layer<S> for EraLayer {
    type Service = Eras<S>;
    fn layer(&self, inner: S) -> Eras<S> {
        Layered::new(*self, inner)
    }
}

/// Adds the modern era's rules to modern requests (named in the plural so as not to clash
/// with [`crate::mcp::Era`], the era itself).
pub type Eras<S> = Layered<EraLayer, S>;

impl<S: Inner> Around<S> for EraLayer {
    type Future = McpFuture;

    fn around(&self, mut inner: S, req: McpRequest) -> McpFuture {
        if req.message.kind() != Kind::Request || !req.view.is_modern() {
            return Box::pin(inner.call(req));
        }
        let id = req.message.reply_id();
        // The transport-independent rules (HTTP applies them first, between its header
        // checks, with their statuses): a whole envelope, a served version, no method the era
        // removed.
        if let Some(err) = req.view.refusal() {
            let reply = Message::error(id, err);
            return Box::pin(async move { Ok(Some(reply)) });
        }
        let Some(meta) = req.view.request_meta() else {
            return Box::pin(inner.call(req));
        };
        // A modern request is its own session: what it declares is what it has. The era is
        // not written for anyone to read back (whoever asks reads it from the request's
        // view), but the session still holds what was declared, because some readers have
        // no request to ask: a server→client request of the upstream (bridge, parked call)
        // finds only the caller's session, and the HTTP downstream checks a session's later
        // requests and seals its state from it.
        req.caller.session.update(|s| {
            s.client_capabilities = meta.client_capabilities.clone();
            s.client_info = meta.client_info.clone();
            s.protocol_version = Some(meta.protocol_version.clone());
        });
        // Known methods clone without allocating; the view keeps the parsed one.
        let method = req.view.method().clone();
        let private = self.private_lists;
        Box::pin(async move {
            let mut reply = inner.call(req).await?;
            if let Some(msg) = reply.as_mut() {
                if let Some(result) = msg.result.take() {
                    msg.result = Some(modern::decorate_result(&method, &result, private));
                }
            }
            Ok(reply)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Caller, Session};
    use crate::jsonrpc::{Id, to_raw};
    use serde_json::{Value, json};
    use std::sync::Arc;
    use tower::Service;

    fn call(params: &Value, method: &str) -> McpRequest {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        McpRequest::new(
            Message::request(Id::Number(1), method, Some(to_raw(params))),
            Caller::new(Arc::new(Session::new("s", tx))),
        )
    }

    fn inner() -> impl crate::layer::Inner {
        tower::service_fn(|req: McpRequest| async move {
            Ok(Some(Message::response_value(
                req.message.id.clone().unwrap(),
                &json!({"tools": []}),
            )))
        })
    }

    #[tokio::test]
    async fn modern_lists_get_cache_hints_and_legacy_ones_do_not() {
        let mut svc = EraLayer::new(false).layer(inner());
        let modern = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                      "io.modelcontextprotocol/clientCapabilities": {}}});
        let reply = svc
            .call(call(&modern, "tools/list"))
            .await
            .unwrap()
            .unwrap();
        let result: Value = reply.result_as().unwrap();
        assert_eq!(result["resultType"], "complete");
        assert_eq!(result["cacheScope"], "public");
        let reply = svc
            .call(call(&json!({}), "tools/list"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(reply.result.unwrap().get(), r#"{"tools":[]}"#);
    }

    #[tokio::test]
    async fn unknown_modern_version_is_refused_with_the_supported_list() {
        let mut svc = EraLayer::new(false).layer(inner());
        let params = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01",
                                      "io.modelcontextprotocol/clientCapabilities": {}}});
        let reply = svc
            .call(call(&params, "tools/list"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            reply.error.unwrap().code,
            crate::jsonrpc::code::UNSUPPORTED_VERSION
        );
    }

    #[tokio::test]
    async fn a_request_the_transport_calls_modern_is_refused_without_an_envelope() {
        let mut svc = EraLayer::new(false).layer(inner());
        let plain = call(&json!({}), "tools/list");
        let view = Arc::new(crate::mcp::view::RequestView::of_modern(&plain.message));
        let req = McpRequest::with_view(plain.message, plain.caller, view);
        let reply = svc.call(req).await.unwrap().unwrap();
        // (Read by its `_meta` alone, the same message is a 2025-era one and passes: see
        // `modern_lists_get_cache_hints_and_legacy_ones_do_not`.)
        assert_eq!(reply.error.unwrap().code, crate::jsonrpc::INVALID_PARAMS);
    }

    #[tokio::test]
    async fn incomplete_envelopes_and_removed_methods_are_refused_on_any_transport() {
        let mut svc = EraLayer::new(false).layer(inner());
        let partial = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
        let reply = svc
            .call(call(&partial, "tools/list"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(reply.error.unwrap().code, crate::jsonrpc::INVALID_PARAMS);
        let whole = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                     "io.modelcontextprotocol/clientCapabilities": {}}});
        let reply = svc.call(call(&whole, "ping")).await.unwrap().unwrap();
        assert_eq!(reply.error.unwrap().code, crate::jsonrpc::METHOD_NOT_FOUND);
    }
}
