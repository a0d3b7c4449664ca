//! Result budgets in the budget layer: a `tools/call` of a tool with `max_result_tokens` has its
//! result cut on the way back ([`crate::plan::cut_result`]), logged and counted.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::state::State;
use crate::context::McpFuture as BoxFuture;
use crate::jsonrpc::{Message, to_raw};

impl State {
    /// The result budget of the tool exposed as `exposed`, if it has one.
    pub(super) fn result_limit(&self, exposed: &str) -> Option<usize> {
        let catalog = self.catalog.borrow();
        let (i, tool) = catalog.tool(exposed)?;
        self.base
            .budget
            .max_result_tokens(catalog.names().get(i)?, tool)
    }

    /// Cuts the result in `message` to `max` tokens when it is over (a note says so).
    fn cut(&self, message: &mut Message, exposed: &str, max: usize) {
        let Ok(mut result) = message.result_as::<Value>() else {
            return;
        };
        let count = |t: &str| self.base.counter.count_text(t);
        if let Some(cut) = crate::plan::cut_result(&mut result, max, &count) {
            self.results_cut.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                tool = exposed,
                shown = cut.shown,
                total = cut.total,
                structured_dropped = cut.structured_dropped,
                "Tool result cut to its token budget"
            );
            message.result = Some(to_raw(&result));
        }
    }
}

/// `future` (a `tools/call` of `exposed` on its way down), with its result cut to `max` tokens.
pub(super) fn cut_on_return(
    state: Arc<State>,
    exposed: String,
    max: usize,
    future: BoxFuture,
) -> BoxFuture {
    Box::pin(async move {
        let mut reply = future.await?;
        if let Some(message) = reply.as_mut() {
            state.cut(message, &exposed, max);
        }
        Ok(reply)
    })
}
