//! The bottom of the embedded stack: what reaches it goes to the embedder's service, with the
//! embedder's extensions, and its answer comes back up.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use serde_json::{Map, Value};
use tokio::sync::watch;
use tower::{Service, ServiceExt};

use super::Request;
use super::learn::{INNER, InnerService};
use crate::catalog::Catalog;
use crate::context::{McpFuture, McpRequest};
use crate::error::Error;
use crate::jsonrpc::{Kind, Message, to_raw};
use crate::mcp::method::Method;

/// Sends what the layers let through to the inner service.
#[derive(Clone)]
pub(super) struct ToInner {
    inner: InnerService,
    catalog: watch::Receiver<Arc<Catalog>>,
}

impl ToInner {
    pub(super) fn new(inner: InnerService, catalog: watch::Receiver<Arc<Catalog>>) -> Self {
        Self { inner, catalog }
    }
}

impl Service<McpRequest> for ToInner {
    type Response = Option<Message>;
    type Error = Infallible;
    type Future = McpFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Each call readies its own clone of the inner service (`oneshot`).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: McpRequest) -> McpFuture {
        let inner = self.inner.clone();
        let catalog = self.catalog.borrow().clone();
        Box::pin(async move { Ok(forward(inner, &catalog, req).await) })
    }
}

/// `req` to the inner service under the inner service's own names; its answer as a message
/// (an error answer when it failed or gave none to a request).
async fn forward(inner: InnerService, catalog: &Catalog, req: McpRequest) -> Option<Message> {
    let kind = req.message.kind();
    let id = req.message.reply_id();
    let message = own_names(&req, catalog);
    let extensions = req
        .caller
        .extensions
        .as_deref()
        .map(|extensions| extensions.0.clone())
        .unwrap_or_default();
    let request = Request {
        message: message.to_value(),
        extensions,
    };
    let answer = inner.oneshot(request).await;
    if kind != Kind::Request {
        // A notification or an answer to the service's own question: nothing comes back.
        return None;
    }
    let failed = |reason: String| {
        let err = Error::UpstreamUnavailable {
            upstream: INNER.to_owned(),
            reason,
        };
        Some(Message::error(id.clone(), err.to_error_object()))
    };
    match answer {
        Ok(Some(value)) => match Message::from_value(&value) {
            Ok(answer) => Some(answer),
            Err(err) => failed(format!("its answer is no JSON-RPC message: {err}")),
        },
        Ok(None) => failed("it gave no answer to a request".to_owned()),
        Err(err) => failed(err.to_string()),
    }
}

/// The message of `req` with the tool or prompt name the host used replaced by the inner
/// service's own, when the catalog exposes it under another (a name no LLM API accepts, made
/// valid); everything else as it came.
fn own_names(req: &McpRequest, catalog: &Catalog) -> Message {
    let found = match req.view.method() {
        Method::ToolsCall => req.view.typed_name().and_then(|n| catalog.tool(n)),
        Method::PromptsGet => req.view.typed_name().and_then(|n| catalog.prompt(n)),
        _ => None,
    };
    let mut message = req.message.clone();
    let Some((_, own)) = found else {
        return message;
    };
    if req.view.typed_name() == Some(own) {
        return message;
    }
    let Ok(mut params) = req.message.params_as::<Map<String, Value>>() else {
        return message;
    };
    params.insert("name".into(), Value::String(own.to_owned()));
    message.params = Some(to_raw(&Value::Object(params)));
    message
}
