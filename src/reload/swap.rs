//! A message service whose stack can be replaced while it serves: the downstreams hold one
//! [`Swap`] (as an ordinary [`McpService`]) and every request goes to the stack current when it
//! arrives; requests already in a stack finish there.

use std::convert::Infallible;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt as _};

use crate::context::{McpFuture, McpRequest};
use crate::jsonrpc::Message;
use crate::lock::{read, write};
use crate::stack::McpService;

/// The current stack, replaceable ([`Swap::replace`]); clones share it.
///
/// ```
/// use mcp_budget::reload::Swap;
/// use mcp_budget::stack::McpService;
/// use tower::{service_fn, ServiceExt as _};
///
/// let answer = |n: i64| {
///     McpService::new(service_fn(move |_req: mcp_budget::context::McpRequest| async move {
///         Ok::<_, std::convert::Infallible>(Some(mcp_budget::jsonrpc::Message::response_value(
///             mcp_budget::jsonrpc::Id::Number(n),
///             &serde_json::json!({}),
///         )))
///     }))
/// };
/// let swap = Swap::new(answer(1));
/// let service = swap.service();
/// swap.replace(answer(2));
/// # let _ = service;
/// ```
#[derive(Clone)]
pub struct Swap {
    current: Arc<RwLock<McpService>>,
}

impl std::fmt::Debug for Swap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Swap").finish_non_exhaustive()
    }
}

impl Swap {
    /// Serves `first` until it is replaced.
    #[must_use]
    pub fn new(first: McpService) -> Self {
        Self {
            current: Arc::new(RwLock::new(first)),
        }
    }

    /// From the next request on, `next` serves.
    pub fn replace(&self, next: McpService) {
        *write(&self.current) = next;
    }

    /// The service the downstreams serve: the current stack of each request.
    #[must_use]
    pub fn service(&self) -> McpService {
        BoxCloneSyncService::new(self.clone())
    }

    fn current(&self) -> McpService {
        read(&self.current).clone()
    }
}

impl Service<McpRequest> for Swap {
    type Response = Option<Message>;
    type Error = Infallible;
    type Future = McpFuture;

    // Every stack is ready whenever asked (the gateway at its bottom is); readiness is checked
    // on the stack a request is sent to.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: McpRequest) -> Self::Future {
        Box::pin(self.current().oneshot(req))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use tower::{ServiceExt as _, service_fn};

    use super::*;
    use crate::context::{Caller, Session};
    use crate::jsonrpc::Id;

    /// A stack that answers `{"stack": n}`, after `gate` opens.
    fn stack(n: u8, gate: Arc<tokio::sync::Notify>) -> McpService {
        BoxCloneSyncService::new(service_fn(move |req: McpRequest| {
            let gate = gate.clone();
            async move {
                gate.notified().await;
                let id = req.message.reply_id();
                Ok::<_, Infallible>(Some(Message::response_value(id, &json!({"stack": n}))))
            }
        }))
    }

    fn ping(id: i64) -> McpRequest {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let message = Message::request(Id::Number(id), "ping", None);
        McpRequest::new(message, Caller::new(Arc::new(Session::new("s", tx))))
    }

    #[tokio::test]
    async fn a_request_finishes_on_its_stack_and_the_next_goes_to_the_new_one() {
        let (old_gate, new_gate) = (Arc::default(), Arc::<tokio::sync::Notify>::default());
        let swap = Swap::new(stack(1, Arc::clone(&old_gate)));
        let in_flight = tokio::spawn(swap.service().oneshot(ping(1)));
        tokio::task::yield_now().await;
        swap.replace(stack(2, Arc::clone(&new_gate)));
        old_gate.notify_one();
        new_gate.notify_one();
        let first = in_flight.await.unwrap().unwrap().unwrap();
        let next = swap.service().oneshot(ping(2)).await.unwrap().unwrap();
        let stack_of = |m: &Message| m.result_as::<serde_json::Value>().unwrap()["stack"].clone();
        assert_eq!(stack_of(&first), 1);
        assert_eq!(stack_of(&next), 2);
    }
}
