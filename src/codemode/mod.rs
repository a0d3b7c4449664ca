//! Code mode: the `run_code` meta-tool runs a short JavaScript program that calls tools, and
//! only the program's result enters the model's context.
//!
//! This module is the pure-ish core: the sandbox ([`run`]: a fresh `QuickJS` runtime and context
//! per run, its limits and its `tools` object), the conversion of tool results into script
//! values, the final result's cap, the meta-tool's definition and the typed API description
//! (the tools as TypeScript declarations). It does no I/O of its own: every `tools.*` call of
//! the script goes to a [`Bridge`] the caller provides (the budget layer's sends each
//! `tools.call` down the stack as an ordinary `tools/call` of the caller, see
//! `layer/budget/code_mode.rs`).
//!
//! [`run`] blocks for the whole run: call it on a thread of its own, never on an async
//! runtime's worker.
//!
//! ```
//! use mcp_budget::codemode::{run, Bridge, CallError, Limits};
//! use serde_json::{json, Value};
//!
//! struct Echo;
//! impl Bridge for Echo {
//!     fn call(&mut self, name: &str, arguments: Value) -> Result<Value, CallError> {
//!         Ok(json!({"content": [{"type": "text", "text": format!("{name}:{}", arguments["n"])}]}))
//!     }
//!     fn search(&mut self, _query: &str) -> Value { json!([]) }
//!     fn schema(&mut self, _name: &str) -> Value { Value::Null }
//!     fn describe(&mut self, _query: Option<&str>) -> String { String::new() }
//! }
//!
//! let ran = run("const a = tools.call('echo', {n: 1}); return a + '!'", &Limits::default(), Echo);
//! assert_eq!(ran.unwrap().json, r#""echo:1!""#);
//! ```

mod convert;
mod definition;
mod sandbox;

use std::time::Duration;

use serde_json::Value;

pub use convert::{error_result, script_value, success_result};
pub use definition::{DEFAULT_NAME, api_description, definition};
pub use sandbox::run;

/// The limits of one run; each has its `[discover]` key, named in the message of a run it
/// stops ([`Limit::key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall time of the whole run, tool calls included (`code_mode_timeout_ms`).
    pub timeout: Duration,
    /// Interpreter steps, in units of the engine's interrupt checks (`code_mode_max_steps`).
    /// `QuickJS` checks once per 10,000 function calls, jumps and branches (loop iterations,
    /// `if`s), and the regular-expression engine once per 10,000 of its steps: a count of work, not of time, so one limit means the same in debug and release
    /// builds (`docs/code-mode.md` has the measurements).
    pub max_steps: u64,
    /// Heap of the engine, bytes (`code_mode_memory_mb`).
    pub memory_bytes: usize,
    /// Native stack the engine may use, bytes: bounds call depth (`code_mode_stack_kb`).
    pub stack_bytes: usize,
    /// `tools.call`s per run (`code_mode_max_calls`).
    pub max_calls: usize,
    /// Bytes of tool results handed to the script per run, as JSON (`code_mode_max_result_bytes`).
    pub max_result_bytes: usize,
}

impl Default for Limits {
    /// 5 s, 20,000 interrupt checks (about 2·10⁸ steps), 64 MiB, 512 KiB of stack, 50 calls,
    /// 4 MB of tool results.
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(5000),
            max_steps: 20_000,
            memory_bytes: 64 << 20,
            stack_bytes: 512 << 10,
            max_calls: 50,
            max_result_bytes: 4_000_000,
        }
    }
}

/// A limit that can stop a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// [`Limits::timeout`].
    Timeout,
    /// [`Limits::max_steps`].
    Steps,
    /// [`Limits::memory_bytes`].
    Memory,
    /// [`Limits::stack_bytes`].
    Stack,
    /// [`Limits::max_calls`].
    Calls,
    /// [`Limits::max_result_bytes`].
    ResultBytes,
    /// The final result's token cap (`code_mode_max_result_tokens`, checked by the caller).
    ResultTokens,
    /// Runs at once (`code_mode_max_runs`, checked by the caller).
    Runs,
}

impl Limit {
    /// Its `[discover]` key.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Self::Timeout => "code_mode_timeout_ms",
            Self::Steps => "code_mode_max_steps",
            Self::Memory => "code_mode_memory_mb",
            Self::Stack => "code_mode_stack_kb",
            Self::Calls => "code_mode_max_calls",
            Self::ResultBytes => "code_mode_max_result_bytes",
            Self::ResultTokens => "code_mode_max_result_tokens",
            Self::Runs => "code_mode_max_runs",
        }
    }
}

/// Why a run ended without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// A limit stopped it; the text says which and what it is.
    Stopped {
        /// The limit.
        limit: Limit,
        /// For the model: what happened, the limit's value and key.
        message: String,
    },
    /// The script threw (or did not compile) and did not catch it: the error and its stack.
    Threw(String),
    /// The engine could not be set up or its result not read.
    Engine(String),
}

impl Failure {
    /// A run stopped by `limit`: "`run_code` stopped: {what} (`[discover] key`)".
    #[must_use]
    pub fn stopped(limit: Limit, what: &str) -> Self {
        Self::Stopped {
            limit,
            message: format!("run_code stopped: {what} (`[discover] {}`)", limit.key()),
        }
    }

    /// The text the model reads.
    #[must_use]
    pub fn message(&self) -> String {
        match self {
            Self::Stopped { message, .. } => message.clone(),
            Self::Threw(error) => format!("run_code: the script threw {error}"),
            Self::Engine(error) => format!("run_code failed: {error}"),
        }
    }
}

/// What a finished run returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// The result (top-level `return` value, else the last expression), as JSON text
    /// (`null` for `undefined`).
    pub json: String,
    /// `tools.call`s made.
    pub calls: usize,
    /// Interrupt checks the run took ([`Limits::max_steps`] counts them): what a script costs
    /// against `code_mode_max_steps`, the same in every build of the engine.
    pub steps: u64,
}

/// A `tools.call` that failed: thrown into the script as an `Error` with this message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// The error message.
    pub message: String,
    /// The JSON-RPC `error.data.type` when the gateway refused the call (the script sees it as
    /// the error's `type`), `None` for a tool error (`isError: true`).
    pub kind: Option<String>,
}

/// What a script reaches through `tools`: the caller's own rights, nothing else.
pub trait Bridge {
    /// `tools.call(name, args)`: the tool's `CallToolResult` (`isError` results included:
    /// [`script_value`] turns them into thrown errors).
    ///
    /// # Errors
    /// The call was refused or failed before the tool answered (unknown tool, denied, bad
    /// arguments, upstream error).
    fn call(&mut self, name: &str, arguments: Value) -> Result<Value, CallError>;
    /// `tools.search(query)`: the matching tools (`[{name, description, parameters,
    /// required}]`).
    fn search(&mut self, query: &str) -> Value;
    /// `tools.schema(name)`: the tool's definition, `null` when the caller has no such tool.
    fn schema(&mut self, name: &str) -> Value;
    /// `tools.describe(query?)`: TypeScript declarations of the caller's tools (those matching
    /// `query`, or all).
    fn describe(&mut self, query: Option<&str>) -> String;
}

#[cfg(test)]
mod tests;
