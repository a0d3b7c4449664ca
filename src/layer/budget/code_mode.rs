//! `run_code` (`[discover] code_mode`): runs the script on a thread of its own and sends each
//! of its `tools.call`s down the stack as the caller's `tools/call`.
//!
//! The script thread blocks on each call: it sends the call over a channel to the request's
//! async task and waits for the answer (bounded by the run's wall time). Blocking keeps the
//! engine simple — no promise machinery between the engine and Tokio, and `tools.call` is a
//! plain function models use without `await` (with `await` it works the same). The thread is
//! a dedicated one per run with a stack sized for the engine's stack limit; at most
//! `code_mode_max_runs` run at once gateway-wide, and one more is answered at once with an
//! error naming that limit (no queue: a waiting run would hold the client's request longer
//! than the wall time it was promised).
//!
//! Inner calls go to the layer's inner service with the caller's [`Caller`] (principal and
//! session unchanged, plus the run's audit id): authorization, argument rules, limits, the
//! guard and audit apply as to a direct call, and a refused call is thrown into the script
//! with the same `data.type` (`e.type`). Names resolve as `invoke_tool` resolves them (exposed
//! name, `server/tool`, or a name only one server has); an unknown one goes down as it is, to
//! be refused as a direct call of it is.
//!
//! Metrics: every answered call counts in `mcp_budget_code_runs_total{outcome, limit}`; a run
//! that started (a thread, an engine) also records its wall time and its tool calls.

use std::sync::Arc;
use std::sync::mpsc as sync_mpsc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tower::{Service, ServiceExt};

use super::result_budget::ResultRule;
use super::state::{Planned, State};
use crate::codemode::{self, Bridge, CallError, Failure, Limit, Ran};
use crate::context::McpRequest;
use crate::discover::Discovery;
use crate::jsonrpc::{Message, to_raw};
use crate::policy::CodeMode;
use crate::results::ResultFormat;
use crate::telemetry::{names, record};

/// Extra native stack of a run's thread beyond the engine's limit (the engine checks its own
/// limit; the rest is for Rust frames around it).
const THREAD_STACK_MARGIN: usize = 2 << 20;

/// A `tools.call` of the script, waiting for its answer.
struct Ask {
    name: String,
    arguments: Value,
    reply: sync_mpsc::SyncSender<Result<Value, CallError>>,
}

/// The script side of the bridge: `tools.call` asks the request's task; search, schema and
/// describe answer from the caller's plan, on the script thread.
struct ThreadBridge {
    asks: mpsc::Sender<Ask>,
    deadline: Instant,
    planned: Arc<Planned>,
}

impl ThreadBridge {
    fn tools(&self) -> Option<&Discovery> {
        self.planned.code.as_ref()
    }
}

impl Bridge for ThreadBridge {
    fn call(&mut self, name: &str, arguments: Value) -> Result<Value, CallError> {
        let exposed = self
            .tools()
            .and_then(|d| d.find(name).and_then(|(i, _)| d.exposed_name(i)))
            .unwrap_or(name)
            .to_owned();
        let (reply, answer) = sync_mpsc::sync_channel(1);
        let gone = || CallError {
            message: "the run was cancelled".to_owned(),
            kind: None,
        };
        self.asks
            .blocking_send(Ask {
                name: exposed,
                arguments,
                reply,
            })
            .map_err(|_| gone())?;
        let wait = self.deadline.saturating_duration_since(Instant::now());
        match answer.recv_timeout(wait) {
            Ok(answer) => answer,
            Err(sync_mpsc::RecvTimeoutError::Timeout) => Err(CallError {
                message: "the tool did not answer within the run's wall time".to_owned(),
                kind: None,
            }),
            Err(sync_mpsc::RecvTimeoutError::Disconnected) => Err(gone()),
        }
    }

    fn search(&mut self, query: &str) -> Value {
        self.tools().map_or_else(
            || json!([]),
            |d| d.search_tools(query, None)["structuredContent"]["tools"].take(),
        )
    }

    fn schema(&mut self, name: &str) -> Value {
        let Some(d) = self.tools() else {
            return Value::Null;
        };
        let mut result = d.get_tool_schema(name);
        if result.get("isError").is_some() {
            return Value::Null;
        }
        result["structuredContent"].take()
    }

    fn describe(&mut self, query: Option<&str>) -> String {
        let Some(d) = self.tools() else {
            return codemode::api_description([]);
        };
        let chosen: Vec<usize> = match query {
            Some(query) => {
                let found = d.search_tools(query, None);
                found["structuredContent"]["tools"]
                    .as_array()
                    .map(|tools| {
                        tools
                            .iter()
                            .filter_map(|t| t["name"].as_str())
                            .filter_map(|n| d.find(n).map(|(i, _)| i))
                            .collect()
                    })
                    .unwrap_or_default()
            }
            None => (0..d.tools().len()).collect(),
        };
        codemode::api_description(
            chosen
                .into_iter()
                .filter_map(|i| Some((d.exposed_name(i)?, &*d.tools().get(i)?.definition))),
        )
    }
}

/// The gate on runs at once.
pub(super) fn runs_gate(code: Option<&CodeMode>) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(code.map_or(0, |c| c.max_runs)))
}

/// Answers the `run_code` call `req` (arguments `arguments`) with the result of its script, its
/// tool calls sent to `inner`.
pub(super) async fn run_code<S>(
    state: Arc<State>,
    inner: S,
    req: McpRequest,
    arguments: Value,
    planned: Arc<Planned>,
) -> Value
where
    S: Service<McpRequest, Response = Option<Message>, Error = std::convert::Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let Some(config) = state.discover.code_mode.clone() else {
        return codemode::error_result("run_code is off ([discover] code_mode = false)");
    };
    let Some(code) = arguments.get("code").and_then(Value::as_str) else {
        // No script is the model's error, as a script that does not compile is.
        record::code_run(names::ERROR, names::NO_LIMIT, None);
        return codemode::error_result(
            "run_code needs a \"code\" string: a JavaScript program that calls tools.call(name, args) and returns a result.",
        );
    };
    let Ok(permit) = state.code_runs.clone().try_acquire_owned() else {
        return busy(&config);
    };
    let started = Instant::now();
    let run_id: Arc<str> = crate::audit::new_id().into();
    let limits = config.limits.clone();
    let (asks, mut asked) = mpsc::channel::<Ask>(1);
    let (done, mut finished) = oneshot::channel::<Result<Ran, Failure>>();
    let bridge = ThreadBridge {
        asks,
        deadline: Instant::now() + limits.timeout,
        planned,
    };
    let code = code.to_owned();
    let spawned = std::thread::Builder::new()
        .name("run_code".into())
        .stack_size(limits.stack_bytes + THREAD_STACK_MARGIN)
        .spawn(move || {
            let outcome = codemode::run(&code, &limits, bridge);
            let _ = done.send(outcome);
            // Held until the engine is gone, whatever became of the request.
            drop(permit);
        });
    if let Err(e) = spawned {
        record::code_run(names::ENGINE, names::NO_LIMIT, None);
        return codemode::error_result(&format!("run_code failed: no thread for the script ({e})"));
    }
    // The script's calls that went down the stack (the sandbox counts them too, but a run
    // that fails reports no count).
    let mut calls = 0;
    let outcome = loop {
        tokio::select! {
            outcome = &mut finished => break outcome,
            Some(ask) = asked.recv() => {
                calls += 1;
                let answer = tokio::select! {
                    answer = inner_call(&state, inner.clone(), &req, &run_id, ask.name, ask.arguments) => answer,
                    outcome = &mut finished => break outcome,
                };
                let _ = ask.reply.send(answer);
            }
        }
    };
    let outcome =
        outcome.unwrap_or_else(|_| Err(Failure::Engine("the script thread ended".into())));
    let seconds = started.elapsed().as_secs_f64();
    finish(&state, &config, &req, &run_id, outcome, (seconds, calls)).await
}

/// A finished run's result under the rules of tool results: over `code_mode_max_result_tokens`
/// it is kept for `read_result` when the gateway keeps results (a rule sets
/// `max_result_tokens`), else stopped; compacted by `code_mode_result_format`. The script's own
/// tool calls got their results whole (it is a program: a compacted or partial result would
/// break its parsing).
async fn finish(
    state: &State,
    config: &CodeMode,
    req: &McpRequest,
    run_id: &str,
    outcome: Result<Ran, Failure>,
    (seconds, calls): (f64, usize),
) -> Value {
    let keeps = state.results.is_some();
    let outcome = if keeps {
        outcome
    } else {
        outcome.and_then(|ran| within_tokens(state, config, ran))
    };
    let ok = outcome.is_ok();
    let mut result = ended(run_id, outcome, seconds, calls);
    if ok && (keeps || config.result_format != ResultFormat::Off) {
        let rule = ResultRule {
            exposed: state.code_tool_name().to_owned(),
            max: keeps.then_some(config.max_result_tokens),
            format: config.result_format,
            session: req.caller.session.id.clone(),
        };
        state.shape(&mut result, &rule).await;
    }
    result
}

/// The `run_code` result of a run that ended after `seconds` and `calls` tool calls, counted
/// and logged.
fn ended(run_id: &str, outcome: Result<Ran, Failure>, seconds: f64, calls: usize) -> Value {
    let (label, limit) = labels(&outcome);
    record::code_run(label, limit, Some((seconds, calls)));
    // Steps are known for a run that finished; one a limit stopped took up to its limit.
    let steps = outcome.as_ref().ok().map(|ran| ran.steps);
    tracing::debug!(run_audit_id = %run_id, outcome = label, limit, calls, steps, seconds, "Code run ended");
    answer(run_id, outcome)
}

/// The answer to a run past `code_mode_max_runs`, counted.
fn busy(config: &CodeMode) -> Value {
    record::code_run(names::STOPPED, Limit::Runs.key(), None);
    codemode::error_result(
        &Failure::stopped(
            Limit::Runs,
            &format!(
                "{} scripts are already running on this gateway; try again shortly",
                config.max_runs
            ),
        )
        .message(),
    )
}

/// A finished run's result when within the token cap, else the cap's stop.
fn within_tokens(state: &State, config: &CodeMode, ran: Ran) -> Result<Ran, Failure> {
    let tokens = state.base.counter.count_text(&ran.json);
    if tokens > config.max_result_tokens {
        return Err(Failure::stopped(
            Limit::ResultTokens,
            &format!(
                "the result is {tokens} tokens, over the limit of {}; return less (filter or summarise in the script)",
                config.max_result_tokens
            ),
        ));
    }
    Ok(ran)
}

/// The `outcome` and `limit` labels of a run's end ([`names::CODE_RUNS`]).
pub(super) fn labels(outcome: &Result<Ran, Failure>) -> (&'static str, &'static str) {
    match outcome {
        Ok(_) => (names::OK, names::NO_LIMIT),
        Err(Failure::Stopped { limit, .. }) => (names::STOPPED, limit.key()),
        Err(Failure::Threw(_)) => (names::ERROR, names::NO_LIMIT),
        Err(Failure::Engine(_)) => (names::ENGINE, names::NO_LIMIT),
    }
}

/// The `run_code` result of a run that ended.
fn answer(run_id: &str, outcome: Result<Ran, Failure>) -> Value {
    let mut result = match outcome {
        Ok(ran) => codemode::success_result(&ran.json),
        Err(failure) => codemode::error_result(&failure.message()),
    };
    result["_meta"] = json!({ "mcp_budget/run_audit_id": run_id });
    result
}

/// One `tools.call` of the script, as the caller's `tools/call` of `name` down the stack.
async fn inner_call<S>(
    state: &State,
    inner: S,
    req: &McpRequest,
    run_id: &Arc<str>,
    name: String,
    arguments: Value,
) -> Result<Value, CallError>
where
    S: Service<McpRequest, Response = Option<Message>, Error = std::convert::Infallible>,
{
    state.count_call(&name, &req.caller.principal);
    let mut params = Map::new();
    params.insert("name".into(), Value::String(name));
    params.insert(
        "arguments".into(),
        match arguments {
            Value::Null => Value::Object(Map::new()),
            other => other,
        },
    );
    if let Some(meta) = req
        .view
        .meta(&req.message)
        .and_then(|text| serde_json::from_str::<Option<Value>>(text).ok().flatten())
    {
        params.insert("_meta".into(), meta);
    }
    let mut call = req.clone().with_params(to_raw(&Value::Object(params)));
    call.caller.run = Some(run_id.clone());
    call.caller.meta = Some(crate::telemetry::names::VIA_RUN_CODE);
    let Ok(reply) = inner.oneshot(call).await;
    let Some(reply) = reply else {
        return Err(CallError {
            message: "the gateway gave no answer".to_owned(),
            kind: None,
        });
    };
    if let Some(error) = &reply.error {
        return Err(CallError {
            message: error.message.clone(),
            kind: error.kind(),
        });
    }
    reply.result_as::<Value>().map_err(|e| CallError {
        message: format!("unreadable tool result: {e}"),
        kind: None,
    })
}
