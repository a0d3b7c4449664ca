//! Tasks: which upstream created each task, for whom, and the requests about tasks.
//!
//! A result that creates a task names its `taskId`; the gateway remembers the upstream and the
//! caller (its 2025-era session, or none for a sessionless modern caller). `tasks/get`,
//! `tasks/result`, `tasks/cancel` and `tasks/update` go to that upstream, and only for that
//! caller: another caller's task is as unknown as one that never was. `tasks/list` reads every
//! upstream that lists tasks, one upstream page per gateway page, and shows the caller's own.
//!
//! [`Tasks`] is a room of the gateway: forwarding notes the tasks its replies create
//! ([`Tasks::note`]); it decides where a task request goes ([`Tasks::route`]) and walks the
//! upstreams for `tasks/list` ([`Tasks::list`]), sending through the forwarding it is given.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::pages::{open_cursor, seal_cursor};
use super::pool::Pool;
use crate::context::{Caller, McpRequest};
use crate::error::Error;
use crate::jsonrpc::{Id, Kind, Message, to_raw};
use crate::lock::lock;
use crate::mcp::bridge;
use crate::mcp::method::Method;
use crate::upstream::{Status, Upstream};

/// Empty upstream pages `tasks/list` reads through before answering an empty page.
const MAX_EMPTY_TASK_PAGES: usize = 32;

/// Task id → the upstream that created it and the caller it belongs to.
#[derive(Debug, Default)]
pub(super) struct Tasks(Mutex<Owners>);

/// Task id → (upstream, the 2025-era session whose request created it; `None` for a
/// sessionless modern caller).
#[derive(Debug, Default)]
struct Owners(HashMap<String, (usize, Option<String>)>);

impl Tasks {
    /// Remembers which upstream created the task a result names, for which caller.
    pub(super) fn note(&self, i: usize, reply: &Message, caller: &Caller, modern: bool) {
        let Some(result) = reply.result.as_ref().filter(|r| r.get().contains("taskId")) else {
            return;
        };
        let Ok(value) = serde_json::from_str::<Value>(result.get()) else {
            return;
        };
        if let Some(task) = bridge::created_task_id(&value) {
            lock(&self.0)
                .0
                .insert(task, (i, task_owner(caller, modern)));
        }
    }
}

impl Owners {
    /// The upstream of `task`, if it belongs to `owner`.
    fn upstream_of(&self, task: &str, owner: Option<&str>) -> Option<usize> {
        (self.0.get(task))
            .filter(|(_, of)| of.as_deref() == owner)
            .map(|(i, _)| *i)
    }

    /// The tasks of upstream `i`'s `tasks/list` page that belong to `owner` (a shared upstream
    /// lists every client's tasks).
    fn own(&self, tasks: Vec<Value>, i: usize, owner: Option<&str>) -> Vec<Value> {
        let own = |task: &Value| {
            let id = task.get("taskId").and_then(Value::as_str);
            id.is_some_and(|id| self.upstream_of(id, owner) == Some(i))
        };
        tasks.into_iter().filter(own).collect()
    }
}

impl Tasks {
    /// The upstream a `tasks/*` request goes to: the one that created the task, for this
    /// caller only.
    pub(super) fn route(&self, req: &McpRequest) -> Result<usize, Error> {
        let (msg, caller) = (&req.message, &req.caller);
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let task = params
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                Error::invalid_params(req.view.method().as_str(), "missing string \"taskId\"")
            })?;
        // Another caller's task is as unknown as a task that never was.
        let owner = task_owner(caller, req.view.is_modern());
        (lock(&self.0).upstream_of(task, owner.as_deref())).ok_or_else(|| Error::NotFound {
            what: "task",
            name: task.to_owned(),
        })
    }

    /// `tasks/list`: the tasks of every upstream that lists them, one upstream page per page
    /// of the gateway's; the gateway's cursor names the upstream and its cursor. An upstream
    /// that fails is skipped (logged), the others still list. The upstreams are `pool`'s,
    /// each page asked through `forward`.
    pub(super) async fn list<F, Fut>(
        &self,
        req: &McpRequest,
        pool: &Pool,
        forward: F,
    ) -> Result<Message, Error>
    where
        F: Fn(usize, Box<RawValue>) -> Fut,
        Fut: Future<Output = Result<Message, Error>>,
    {
        let (msg, caller) = (&req.message, &req.caller);
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let (mut at, mut cursor) = match params.get("cursor").and_then(Value::as_str) {
            None => (0, None),
            Some(c) => decode_task_cursor(c).ok_or_else(|| {
                let method = Method::TasksList.as_str();
                Error::invalid_params(method, "unknown cursor; list again from the start")
            })?,
        };
        let listing = task_listers(&pool.current());
        let owner = task_owner(caller, req.view.is_modern());
        // Bounded: upstreams that keep answering empty pages with cursors must not spin.
        for _ in 0..MAX_EMPTY_TASK_PAGES {
            let Some(&i) = listing.iter().find(|&&i| i >= at) else {
                break;
            };
            if i != at {
                cursor = None;
            }
            let mut asked = params.as_object().cloned().unwrap_or_default();
            asked.remove("cursor");
            if let Some(c) = cursor.take() {
                asked.insert("cursor".into(), Value::String(c));
            }
            let page = forward(i, to_raw(&Value::Object(asked))).await;
            let (tasks, next) = task_page(page, || pool.upstream(i).name().to_owned());
            let tasks = lock(&self.0).own(tasks, i, owner.as_deref());
            // Where the next page starts: this upstream's next page, or the next upstream.
            let (next_at, next_cursor) = match next {
                Some(c) => (i, Some(c)),
                None => (i + 1, None),
            };
            let more = next_cursor.is_some() || listing.iter().any(|&j| j > i);
            if tasks.is_empty() && more {
                (at, cursor) = (next_at, next_cursor);
                continue;
            }
            let mut result = json!({ "tasks": tasks });
            if more {
                result["nextCursor"] = json!(encode_task_cursor(next_at, next_cursor.as_deref()));
            }
            return Ok(Message::response_value(Id::Null, &result));
        }
        Ok(Message::response_value(Id::Null, &json!({ "tasks": [] })))
    }
}

/// One `tasks/list` page of an upstream (`name` names it for the log), as it `answered`: its
/// tasks and its next cursor; none when it failed (logged).
fn task_page(
    answered: Result<Message, Error>,
    name: impl FnOnce() -> String,
) -> (Vec<Value>, Option<String>) {
    let page = answered
        .map_err(|e| e.to_string())
        .and_then(|reply| match reply.kind() {
            Kind::Response => reply.result_as::<Value>().map_err(|e| e.to_string()),
            _ => Err(String::from_utf8_lossy(&reply.to_bytes()).into_owned()),
        });
    match page {
        Ok(result) => {
            let tasks = result.get("tasks").and_then(Value::as_array).cloned();
            let next = (result.get("nextCursor").and_then(Value::as_str)).map(str::to_owned);
            (tasks.unwrap_or_default(), next)
        }
        Err(err) => {
            let name = name();
            tracing::warn!(upstream = name, error = %err, "tasks/list failed; its tasks are left out");
            (Vec::new(), None)
        }
    }
}

/// The ready upstreams that list tasks, by id, ascending (the order cursors walk them in).
fn task_listers(upstreams: &[Upstream]) -> Vec<usize> {
    let mut ids: Vec<usize> = (upstreams.iter())
        .filter(|u| {
            u.status() == Status::Ready
                && (u.info().capabilities.get("tasks"))
                    .and_then(|t| t.get("list"))
                    .is_some()
        })
        .map(Upstream::index)
        .collect();
    ids.sort_unstable();
    ids
}

/// Whose tasks `caller` may see: its 2025-era session's, or (a sessionless modern caller,
/// `modern` as its request says) those of no session.
fn task_owner(caller: &Caller, modern: bool) -> Option<String> {
    (!modern).then(|| caller.session.id.clone())
}

/// The gateway's `tasks/list` cursor: upstream `at`, and that upstream's own cursor if any.
fn encode_task_cursor(at: usize, cursor: Option<&str>) -> String {
    seal_cursor(&format!("mcpb-tasks:{at}:{}", cursor.unwrap_or_default()))
}

fn decode_task_cursor(cursor: &str) -> Option<(usize, Option<String>)> {
    let text = open_cursor(cursor)?;
    let (at, theirs) = text.strip_prefix("mcpb-tasks:")?.split_once(':')?;
    let theirs = (!theirs.is_empty()).then(|| theirs.to_owned());
    Some((at.parse().ok()?, theirs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_cursors_round_trip_and_reject_garbage() {
        let c = encode_task_cursor(3, Some("their:cursor"));
        assert_eq!(
            decode_task_cursor(&c),
            Some((3, Some("their:cursor".into())))
        );
        assert_eq!(
            decode_task_cursor(&encode_task_cursor(1, None)),
            Some((1, None))
        );
        assert_eq!(decode_task_cursor("not-ours"), None);
        // The other lists' cursors are not task cursors.
        assert_eq!(
            decode_task_cursor(&super::super::pages::encode_cursor(40)),
            None
        );
    }

    #[test]
    fn a_task_is_found_only_by_its_own_caller() {
        let mut owners = Owners::default();
        owners.0.insert("t1".into(), (2, Some("s1".into())));
        owners.0.insert("t2".into(), (0, None));
        assert_eq!(owners.upstream_of("t1", Some("s1")), Some(2));
        assert_eq!(owners.upstream_of("t1", Some("s2")), None);
        assert_eq!(owners.upstream_of("t1", None), None);
        assert_eq!(owners.upstream_of("t2", None), Some(0));
        assert_eq!(owners.upstream_of("t2", Some("s1")), None);
        assert_eq!(owners.upstream_of("t3", None), None);
    }

    #[test]
    fn a_listed_page_keeps_the_callers_own_tasks_of_that_upstream() {
        let mut owners = Owners::default();
        owners.0.insert("mine".into(), (1, Some("s1".into())));
        owners.0.insert("theirs".into(), (1, Some("s2".into())));
        owners.0.insert("elsewhere".into(), (0, Some("s1".into())));
        let page = vec![
            json!({"taskId": "mine", "status": "working"}),
            json!({"taskId": "theirs"}),
            json!({"taskId": "elsewhere"}),
            json!({"taskId": "unknown"}),
            json!({"status": "no id"}),
        ];
        assert_eq!(
            owners.own(page, 1, Some("s1")),
            [json!({"taskId": "mine", "status": "working"})]
        );
    }
}
