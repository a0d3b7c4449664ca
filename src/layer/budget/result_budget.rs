//! Result economy in the budget layer: a `tools/call` of a tool with a `result_format` has its
//! text compacted on the way back ([`crate::results::compact_result`]); one with a
//! `max_result_tokens` that is still over keeps a head and a summary, the whole result kept
//! for the session ([`crate::results::ResultStore`]) and read with `read_result`
//! ([`State::read_result`]). A result the store cannot keep (larger than a session may hold)
//! is cut as before ([`crate::plan::cut_result`]). Each step is logged and counted. With a
//! `[state]` store a kept result goes there too before the answer, and `read_result` looks
//! there when the result is not on this replica ([`crate::state::results`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::{Value, json};

use super::state::State;
use crate::authz::Target;
use crate::context::{McpFuture as BoxFuture, McpRequest};
use crate::error::Error;
use crate::jsonrpc::{Message, to_raw};
use crate::results::{Read, ResultFormat, Stored, compact_result, read_page, spill_result};

/// What a `tools/call` of one tool does to its result.
#[derive(Debug, Clone)]
pub(super) struct ResultRule {
    /// The tool's exposed name.
    pub(super) exposed: String,
    /// `max_result_tokens`.
    pub(super) max: Option<usize>,
    /// `result_format`.
    pub(super) format: ResultFormat,
    /// The calling session (whose store keeps a spilled result).
    pub(super) session: String,
}

impl State {
    /// The result rule of the tool exposed as `exposed`, if it has one.
    pub(super) fn result_rule(&self, exposed: &str, session: &str) -> Option<ResultRule> {
        let catalog = self.catalog.borrow();
        let (i, tool) = catalog.tool(exposed)?;
        let (max, format) = self
            .base
            .budget
            .result_rule(catalog.names().get(i)?, tool)?;
        Some(ResultRule {
            exposed: exposed.to_owned(),
            max,
            format,
            session: session.to_owned(),
        })
    }

    /// Compacts the text result `result` under `rule`, then keeps it and shortens it to the
    /// budget when it is still over (or cuts it, when it cannot be kept); kept, it is shared
    /// with the other replicas too (`[state]`) before the answer goes.
    pub(super) async fn shape(&self, result: &mut Value, rule: &ResultRule) {
        if let Some((id, shared)) = self.shape_here(result, rule) {
            self.share(&rule.session, &id, &shared).await;
        }
    }

    /// [`State::shape`] on this replica: the id and shared text of a result kept, when the
    /// replicas share results.
    fn shape_here(&self, result: &mut Value, rule: &ResultRule) -> Option<(String, String)> {
        let count = |t: &str| self.base.counter.count_text(t);
        if let Some(c) = compact_result(result, rule.format, &count) {
            self.results_compacted.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                tool = rule.exposed,
                before = c.before,
                after = c.after,
                "Tool result compacted"
            );
        }
        let max = rule.max?;
        if let (Some(store), Some(spill)) = (&self.results, spill_result(result, max, &count)) {
            let total = spill.total;
            let kept = Stored::new(&rule.exposed, spill.clone(), max, rule.format);
            let shared = self.shared_results.as_ref().map(|_| kept.to_shared());
            if let Some(id) = store.put(&rule.session, kept, Instant::now()) {
                let shown = spill.head_into(result, &id, max, &count);
                self.results_cut.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    tool = rule.exposed,
                    id,
                    shown,
                    total,
                    "Tool result over its budget kept for read_result"
                );
                return shared.map(|shared| (id, shared));
            }
        }
        if let Some(cut) = crate::plan::cut_result(result, max, &count) {
            self.results_cut.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                tool = rule.exposed,
                shown = cut.shown,
                total = cut.total,
                structured_dropped = cut.structured_dropped,
                "Tool result cut to its token budget"
            );
        }
        None
    }

    /// Puts result `id` of `session` (`shared`, its text) in the `[state]` store, so that
    /// every replica reads it; when the store does not take it, it stays on this replica only
    /// (logged: another replica answers `mcp_budget.state.unavailable` or that it is not kept).
    async fn share(&self, session: &str, id: &str, shared: &str) {
        let Some(store) = &self.shared_results else {
            return;
        };
        let limits = self
            .results
            .as_ref()
            .map(|r| r.limits())
            .unwrap_or_default();
        match (store.keep_result((session, id), shared, limits.ttl, limits.session_bytes)).await {
            Ok(true) => {}
            Ok(false) => tracing::info!(
                id,
                bytes = shared.len(),
                "Kept result not shared: larger than result_session_bytes in the state store"
            ),
            Err(reason) => tracing::warn!(
                id,
                reason,
                "Kept result not shared: the state store did not take it (read_result reads it on this replica only)"
            ),
        }
    }

    /// Shapes the result in `message` (a `tools/call` reply) under `rule`.
    async fn shape_message(&self, message: &mut Message, rule: &ResultRule) {
        let Ok(mut result) = message.result_as::<Value>() else {
            return;
        };
        let before = result.clone();
        self.shape(&mut result, rule).await;
        if result != before {
            message.result = Some(to_raw(&result));
        }
    }

    /// The answer to a `read_result` call `req`: a page of a result kept for its session (on
    /// this replica, else in the `[state]` store), if the caller may still see the tool that
    /// returned it; an error result otherwise.
    ///
    /// # Errors
    /// [`Error::ResultUnavailable`] when the result is not on this replica and the `[state]`
    /// store does not answer.
    pub(super) async fn read_result(&self, req: &McpRequest) -> Result<Value, Error> {
        let arguments = req.view.arguments_value(&req.message);
        let error =
            |text: String| json!({"isError": true, "content": [{"type": "text", "text": text}]});
        let (id, read) = match Read::of(&arguments) {
            Ok(parsed) => parsed,
            Err(e) => return Ok(error(e.to_string())),
        };
        let Some(kept) = self.kept(&req.caller.session.id, &id).await? else {
            return Ok(error(
                crate::results::ReadError::Unknown(id.clone()).to_string(),
            ));
        };
        if !self.may_read(req, &kept.tool) {
            tracing::info!(
                tool = kept.tool,
                id,
                "read_result denied: the caller may not see the tool"
            );
            return Ok(error(format!(
                "result {id:?} is of tool {}, which this client may not use",
                kept.tool
            )));
        }
        let count = |t: &str| self.base.counter.count_text(t);
        Ok(match read_page(&kept, &id, &read, &count) {
            Ok(page) => page,
            Err(e) => error(e.to_string()),
        })
    }

    /// Result `id` kept for `session`: on this replica, else in the `[state]` store (then kept
    /// here too, for its next pages, until it would expire there).
    async fn kept(&self, session: &str, id: &str) -> Result<Option<Arc<Stored>>, Error> {
        let Some(local) = &self.results else {
            return Ok(None);
        };
        let now = Instant::now();
        if let Some(kept) = local.get(session, id, now) {
            return Ok(Some(kept));
        }
        let Some(store) = &self.shared_results else {
            return Ok(None);
        };
        let unavailable = |reason: &str| Error::ResultUnavailable {
            id: id.to_owned(),
            reason: reason.to_owned(),
        };
        let ttl = local.limits().ttl;
        let Some((text, age)) = store
            .kept_result(session, id, ttl)
            .await
            .map_err(|reason| {
                tracing::warn!(id, reason, "read_result: the state store did not answer");
                unavailable(reason)
            })?
        else {
            return Ok(None);
        };
        let stored = Stored::from_shared(&text).ok_or_else(|| unavailable("unreadable"))?;
        let stored = Arc::new(stored);
        local.adopt(
            session,
            id,
            stored.clone(),
            now.checked_sub(age).unwrap_or(now),
        );
        Ok(Some(stored))
    }

    /// The name `run_code` is served under.
    pub(super) fn code_tool_name(&self) -> &str {
        self.discover.names.code.as_deref().unwrap_or("run_code")
    }

    /// Whether the caller of `req` may see the tool exposed as `exposed` now (a `run_code`
    /// result: its script's calls were each authorized as they ran).
    fn may_read(&self, req: &McpRequest, exposed: &str) -> bool {
        if self.discover.code_mode.is_some() && exposed == self.code_tool_name() {
            return true;
        }
        let catalog = self.catalog.borrow();
        let Some((i, tool)) = catalog.tool(exposed) else {
            return false;
        };
        let Some(server) = catalog.names().get(i) else {
            return false;
        };
        let principal = &req.caller.principal;
        principal.via() == crate::identity::Via::Anonymous
            || principal
                .client()
                .scope()
                .may_see(Target::tool(server, tool))
    }
}

/// `future` (a `tools/call` of a tool with a result rule, on its way down), with its result
/// shaped by `rule` on the way back.
pub(super) fn shape_on_return(state: Arc<State>, rule: ResultRule, future: BoxFuture) -> BoxFuture {
    Box::pin(async move {
        let mut reply = future.await?;
        if let Some(message) = reply.as_mut() {
            state.shape_message(message, &rule).await;
        }
        Ok(reply)
    })
}
