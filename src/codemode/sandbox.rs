//! The engine of one run: a fresh `QuickJS` runtime and context, its limits, the `tools` object,
//! the evaluation of the script and the reading of its result.
//!
//! What the script can reach: the ECMAScript built-ins `QuickJS` gives a bare context (no
//! `std`/`os` modules, no module loader: `import` fails, `require`, `fetch`, `process`,
//! `Deno`, timers and `console` do not exist), minus `performance` (a high-resolution clock)
//! and `WeakRef`/`FinalizationRegistry` (garbage-collector timing), plus `tools`. `Date` is
//! kept with its clock frozen at the run's start (`Date.now()` and `new Date()` never move, so
//! no time can be measured inside a run); `Math.random` is kept (it reveals nothing outside the
//! run). The runtime is dropped at the end: nothing outlives a run.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rquickjs::context::EvalOptions;
use rquickjs::context::intrinsic;
use rquickjs::promise::PromiseState;
use rquickjs::{Context, Ctx, Exception, Function, Promise, Runtime, Value as JsValue};
use serde_json::Value;

use super::convert::script_value;
use super::{Bridge, CallError, Failure, Limit, Limits, Ran};

/// The built-ins of a run's context, besides the base objects (see the module docs for what is
/// left out and why).
type Intrinsics = (
    intrinsic::Date,
    intrinsic::Eval,
    intrinsic::RegExpCompiler,
    intrinsic::RegExp,
    intrinsic::Json,
    intrinsic::Proxy,
    intrinsic::MapSet,
    intrinsic::TypedArrays,
    intrinsic::Promise,
    intrinsic::BigInt,
);

/// Runs before the script: freezes the clock, wraps the native bridge functions into the
/// frozen `tools` object (JSON text crosses the boundary, so no script value reaches Rust), and
/// removes the helpers from the global object.
const PRELUDE: &str = r#"(function (now, call, search, schema, describe) {
  "use strict";
  const parse = JSON.parse, stringify = JSON.stringify;
  const now_ms = now, RealDate = Date;
  Object.defineProperty(RealDate, "now", { value: function now() { return now_ms; } });
  const FrozenDate = new Proxy(RealDate, {
    construct(target, args, newTarget) {
      return Reflect.construct(target, args.length ? args : [now_ms], newTarget);
    },
    apply() { return new RealDate(now_ms).toString(); },
  });
  Object.defineProperty(RealDate.prototype, "constructor", { value: FrozenDate });
  Object.defineProperty(globalThis, "Date", { value: FrozenDate, writable: true, configurable: true });
  const json = (v) => (v === undefined ? "null" : stringify(v));
  const tools = Object.freeze({
    call(name, args) { return parse(call(String(name), args === undefined ? "{}" : json(args))); },
    search(query) { return parse(search(String(query))); },
    schema(name) { return parse(schema(String(name))); },
    describe(query) { return describe(query === undefined || query === null ? "" : String(query)); },
  });
  Object.defineProperty(globalThis, "tools", { value: tools, enumerable: true });
})"#;

/// What the run's native functions and its interrupt handler share.
struct Shared<B> {
    bridge: RefCell<B>,
    limits: Limits,
    deadline: Instant,
    /// Interrupt checks so far.
    steps: Cell<u64>,
    calls: Cell<usize>,
    /// Bytes of tool results handed to the script.
    bytes: Cell<usize>,
    /// The limit that stopped the run: once set, the next interrupt check ends it, whatever the
    /// script catches.
    stop: RefCell<Option<Failure>>,
}

impl<B> Shared<B> {
    fn stop(&self, limit: Limit, what: &str) -> String {
        let failure = Failure::stopped(limit, what);
        let message = failure.message();
        self.stop.borrow_mut().get_or_insert(failure);
        message
    }

    fn stopped(&self) -> bool {
        self.stop.borrow().is_some()
    }

    /// The interrupt handler: `true` ends the run (uncatchably).
    fn interrupt(&self) -> bool {
        if self.stopped() {
            return true;
        }
        let steps = self.steps.get() + 1;
        self.steps.set(steps);
        if steps > self.limits.max_steps {
            self.stop(
                Limit::Steps,
                &format!(
                    "the script ran past its step limit of {} interrupt checks",
                    self.limits.max_steps
                ),
            );
            return true;
        }
        if Instant::now() >= self.deadline {
            self.timed_out();
            return true;
        }
        false
    }

    fn timed_out(&self) -> String {
        self.stop(
            Limit::Timeout,
            &format!(
                "the script ran past its wall-time limit of {} ms",
                self.limits.timeout.as_millis()
            ),
        )
    }
}

/// Runs `code` under `limits`, its `tools` answered by `bridge`; blocks until it ends.
///
/// The result is the top-level `return` value (the script runs as the body of an async
/// function: `await` works) or, without a `return`, the value of its last expression.
///
/// # Errors
/// [`Failure::Stopped`] when a limit stopped the run, [`Failure::Threw`] when the script threw
/// (or did not compile) and did not catch it, [`Failure::Engine`] when the engine could not be
/// set up.
pub fn run<B: Bridge + 'static>(code: &str, limits: &Limits, bridge: B) -> Result<Ran, Failure> {
    let engine = |e: rquickjs::Error| Failure::Engine(e.to_string());
    let shared = Rc::new(Shared {
        bridge: RefCell::new(bridge),
        limits: limits.clone(),
        deadline: Instant::now() + limits.timeout,
        steps: Cell::new(0),
        calls: Cell::new(0),
        bytes: Cell::new(0),
        stop: RefCell::new(None),
    });
    let runtime = Runtime::new().map_err(engine)?;
    runtime.set_memory_limit(limits.memory_bytes);
    runtime.set_max_stack_size(limits.stack_bytes);
    let handler = shared.clone();
    runtime.set_interrupt_handler(Some(Box::new(move || handler.interrupt())));
    let context = Context::custom::<Intrinsics>(&runtime).map_err(engine)?;
    let outcome = context.with(|ctx| {
        install(&ctx, &shared).map_err(|e| Failure::Engine(format!("set-up: {e}")))?;
        Ok(evaluate(&ctx, code))
    });
    // A stop wins over whatever the script made of it (a caught error, a partial result).
    if let Some(failure) = shared.stop.borrow_mut().take() {
        return Err(failure);
    }
    let json = outcome?.map_err(|error| classify(error, limits))?;
    Ok(Ran {
        json,
        calls: shared.calls.get(),
        steps: shared.steps.get(),
    })
}

/// The text of a thrown error, made a limit's message when it is the engine's memory or stack
/// error.
fn classify(error: String, limits: &Limits) -> Failure {
    if error.contains("out of memory") {
        Failure::stopped(
            Limit::Memory,
            &format!(
                "the script ran out of its memory limit of {} MiB",
                limits.memory_bytes >> 20
            ),
        )
    } else if error.contains("stack overflow") || error.contains("Maximum call stack size") {
        Failure::stopped(
            Limit::Stack,
            &format!(
                "the script overflowed its stack limit of {} KiB (too deep a recursion)",
                limits.stack_bytes >> 10
            ),
        )
    } else {
        Failure::Threw(error)
    }
}

/// Defines `tools` (and freezes the clock) in `ctx`.
fn install<'js, B: Bridge + 'static>(
    ctx: &Ctx<'js>,
    shared: &Rc<Shared<B>>,
) -> rquickjs::Result<()> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64().floor() * 1000.0);
    let prelude: Function<'js> = ctx.eval(PRELUDE)?;
    let s = shared.clone();
    let call = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, name: String, args: String| tool_call(&ctx, &s, &name, &args),
    )?;
    let s = shared.clone();
    let search = Function::new(ctx.clone(), move |query: String| {
        s.bridge.borrow_mut().search(&query).to_string()
    })?;
    let s = shared.clone();
    let schema = Function::new(ctx.clone(), move |name: String| {
        s.bridge.borrow_mut().schema(&name).to_string()
    })?;
    let s = shared.clone();
    let describe = Function::new(ctx.clone(), move |query: String| {
        let query = Some(query.as_str()).filter(|q| !q.trim().is_empty());
        s.bridge.borrow_mut().describe(query)
    })?;
    prelude.call::<_, ()>((now, call, search, schema, describe))
}

/// `tools.call`: counts the call, asks the bridge, counts the result's bytes and hands the
/// script its value (JSON text), or throws.
fn tool_call<B: Bridge>(
    ctx: &Ctx<'_>,
    shared: &Shared<B>,
    name: &str,
    args: &str,
) -> rquickjs::Result<String> {
    if shared.stopped() {
        return Err(Exception::throw_internal(ctx, "run_code stopped"));
    }
    let limits = &shared.limits;
    if shared.calls.get() >= limits.max_calls {
        let message = shared.stop(
            Limit::Calls,
            &format!("the script made more than {} tool calls", limits.max_calls),
        );
        return Err(Exception::throw_internal(ctx, &message));
    }
    shared.calls.set(shared.calls.get() + 1);
    let arguments: Value = serde_json::from_str(args).unwrap_or(Value::Null);
    let answer = shared.bridge.borrow_mut().call(name, arguments);
    if Instant::now() >= shared.deadline {
        let message = shared.timed_out();
        return Err(Exception::throw_internal(ctx, &message));
    }
    let value = answer.and_then(|result| script_value(&result));
    match value {
        Ok(value) => {
            let text = value.to_string();
            let bytes = shared.bytes.get() + text.len();
            shared.bytes.set(bytes);
            if bytes > limits.max_result_bytes {
                let message = shared.stop(
                    Limit::ResultBytes,
                    &format!(
                        "tool results handed to the script passed {} bytes",
                        limits.max_result_bytes
                    ),
                );
                return Err(Exception::throw_internal(ctx, &message));
            }
            Ok(text)
        }
        Err(error) => Err(throw_call_error(ctx, name, &error)),
    }
}

/// Throws `error` as an `Error` whose `message` is the tool's (or the gateway's) text, with
/// `tool` and, for a refused call, `type` (the JSON-RPC `error.data.type`).
fn throw_call_error(ctx: &Ctx<'_>, name: &str, error: &CallError) -> rquickjs::Error {
    let Ok(exception) = Exception::from_message(ctx.clone(), &error.message) else {
        return Exception::throw_message(ctx, &error.message);
    };
    let object = exception.as_object();
    let _ = object.set("tool", name);
    if let Some(kind) = &error.kind {
        let _ = object.set("type", kind.as_str());
    }
    ctx.throw(exception.into_value())
}

/// Evaluates `code` and reads its result as JSON text, or the uncaught error's text.
///
/// The script is first compiled as global code with top-level `await` (its completion value is
/// the last expression's); one that does not compile because of a top-level `return` runs as
/// the body of an async function instead (its `return` value is the result).
fn evaluate(ctx: &Ctx<'_>, code: &str) -> Result<String, String> {
    let options = |promise: bool| {
        let mut options = EvalOptions::default();
        options.global = true;
        options.promise = promise;
        options.backtrace_barrier = true;
        options.filename = Some("run_code.js".to_owned());
        options
    };
    let (promise, wrapped) = match ctx.eval_with_options::<Promise<'_>, _>(code, options(true)) {
        Ok(promise) => (promise, true),
        Err(e) => {
            let error = thrown(ctx, &e);
            if !error.starts_with("SyntaxError: return not in a function") {
                return Err(error);
            }
            // Same first line, so line numbers in errors stay the script's own.
            let body = format!("(async () => {{{code}\n}})()");
            let promise = ctx
                .eval_with_options::<Promise<'_>, _>(body, options(false))
                .map_err(|e| thrown(ctx, &e))?;
            (promise, false)
        }
    };
    // The script's awaits settle through the job queue (tool calls answer synchronously, so
    // every job is ready); the interrupt handler bounds the loop like any other code.
    while promise.state() == PromiseState::Pending {
        if !ctx.execute_pending_job() {
            return Err("Error: the script awaited something that never settles".to_owned());
        }
    }
    let settled: JsValue<'_> = match promise.result::<JsValue<'_>>() {
        Some(Ok(value)) => value,
        Some(Err(e)) => return Err(thrown(ctx, &e)),
        None => return Err("Error: the script did not finish".to_owned()),
    };
    // Global code's completion comes wrapped as `{ value }`; the function's return value not.
    let value = if wrapped {
        settled
            .as_object()
            .and_then(|o| o.get::<_, JsValue<'_>>("value").ok())
            .unwrap_or(settled)
    } else {
        settled
    };
    match ctx.json_stringify(value) {
        Ok(Some(text)) => text.to_string().map_err(|e| e.to_string()),
        Ok(None) => Ok("null".to_owned()),
        Err(e) => Err(format!(
            "its result is not JSON-serialisable: {}",
            thrown(ctx, &e)
        )),
    }
}

/// Most stack frames kept in a thrown error's text.
const STACK_LINES: usize = 5;

/// The text of the exception behind `error`: its name, message and stack.
fn thrown(ctx: &Ctx<'_>, error: &rquickjs::Error) -> String {
    if !error.is_exception() {
        return error.to_string();
    }
    let value = ctx.catch();
    if let Some(exception) = value.as_exception() {
        let stack = exception.stack().unwrap_or_default();
        let name: String = exception
            .as_object()
            .get::<_, Option<String>>("name")
            .ok()
            .flatten()
            .unwrap_or_else(|| "Error".to_owned());
        let message = exception.message().unwrap_or_default();
        let frames: Vec<&str> = stack.lines().take(STACK_LINES).collect();
        return format!("{name}: {message}\n{}", frames.join("\n"))
            .trim_end()
            .to_owned();
    }
    match ctx.json_stringify(value) {
        Ok(Some(text)) => text.to_string().unwrap_or_default(),
        _ => "a value that is not an Error".to_owned(),
    }
}
