//! mcp-budget: a token-budget gateway for the Model Context Protocol.
//!
//! It sits between an LLM host and any number of MCP servers, aggregates their tools behind
//! one endpoint, counts the tokens the host really pays for them, and plans an exposure that
//! fits a budget (compressed descriptions, or progressive discovery through meta-tools) while
//! keeping tool lists byte-stable for provider prompt caches.
//!
//! Serving it is one call, [`server::run`]`(listener, policy, shutdown)`.
//!
//! `ARCHITECTURE.md` in the repository walks one request through these modules and says where
//! a new layer, policy key, error kind or metric goes.
//!
//! # Layout
//!
//! The pure core (no I/O):
//!
//! - [`jsonrpc`]: the lossless JSON-RPC envelope (raw `params` / `result`, exact ids).
//! - [`mcp`]: protocol facts: eras, `_meta` keys, HTTP header rules, translation between eras.
//! - [`error`]: runtime errors, their JSON-RPC form, and the stable `data.type` kinds.
//! - [`catalog`]: the catalog value (every upstream's lists, exposed names, collisions) the
//!   gateway publishes; saved `tools/list` files.
//! - [`canonical`]: tool definitions in one byte form, for provider prompt caches.
//! - [`naming`]: namespaced tool names valid for every LLM API.
//! - [`tokens`]: what a tool costs a host model, in tokens.
//! - [`profile`]: model profiles: token costs and how many tools a model handles well.
//! - [`compress`]: shorter descriptions and schemas, level by level.
//! - [`plan`]: the exposure that fits a budget (levels, a hybrid of listed and searchable
//!   tools, or discovery).
//! - [`listing`]: the one function from catalog and rules to the `tools/list` a host receives.
//! - [`search`]: tool search behind `search_tools`.
//! - [`discover`]: the meta-tools of progressive discovery.
//! - [`codemode`]: the `run_code` meta-tool's sandbox (`QuickJS`), its limits and typed API.
//! - [`audit`]: the audit log, one JSON line per authorization decision and call outcome.
//! - [`authz`]: a client's scope, and the list-phase and call-phase answers it gives.
//! - [`limits`]: the limit arithmetic (token buckets) keyed by who calls, for the `limit` layer.
//! - [`routing`]: what a call names and where the catalog routes it, worked out once per
//!   request.
//! - [`identity`]: credentials (API keys, OAuth bearer JWTs) → the principal of a message.
//! - [`sanitize`]: invisible and control text removed from what reaches the model, steering
//!   text flagged.
//! - [`pin`]: tool definitions pinned by `schemaHash` (lockfile, trust on first use); the
//!   one door from the upstreams' lists into the catalog.
//! - [`telemetry`]: metric and span names, recording, W3C trace context, OTLP export.
//! - [`policy`]: the TOML policy file → a validated [`policy::Policy`].
//! - [`semantic`]: the optional sentence-embedding reranker of `search_tools` (the model
//!   with feature `semantic`, the catalog vectors' disk cache).
//! - [`import`]: host configs (Claude Desktop, Claude Code, VS Code `mcp.json`) → upstreams.
//!
//! The aggregate wing (I/O):
//!
//! - [`upstream`]: clients of the MCP servers behind the gateway (stdio children, HTTP).
//! - [`net`]: the HTTP/1.1 client (pooled hyper connections, rustls) HTTP upstreams, the JWKS
//!   fetch and the OTLP exporter share.
//! - [`gateway`]: the aggregator: many upstreams behind one MCP server.
//! - [`context`]: what travels through the stack: a message and who sent it.
//! - [`layer`]: the tower layers (recover, trace, era, budget, authorize, limit, guard), one
//!   module each.
//! - [`stack`]: the one place that orders the layers.
//! - [`state`]: state replicas share (`[state]`): the `[limits]` rates in Redis or Valkey.
//! - [`downstream`]: how hosts reach the gateway: stdio and streamable HTTP.
//! - [`admin`]: the admin listener: `/metrics`, `/healthz`, `/readyz`, `/status`.
//! - [`server`]: start, serve, stop: the library entry the binary wraps.
//! - [`seal`]: sealed 2025-era session ids (AEAD), so any replica serves any session.
//! - [`reload`]: the policy read again on file change or `SIGHUP`, what it changes, and
//!   applying it to a running server (upstreams reconciled, the stack swapped).
//! - [`llm_api`]: cache-stable tool lists on the LLM-API side (Anthropic, `OpenAI`).
//! - `cli` (feature `cli`): the offline commands `check`, `inspect`, `render`, `search`,
//!   `pin`, `init`, `calibrate`.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

pub mod admin;
pub mod audit;
pub mod authz;
pub mod canonical;
pub mod catalog;
#[cfg(feature = "cli")]
pub mod cli;
pub mod codemode;
pub mod compress;
pub mod context;
pub mod discover;
pub mod downstream;
pub mod embed;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod identity;
pub mod import;
pub mod jsonrpc;
pub mod layer;
pub mod limits;
pub mod listing;
pub mod llm_api;
mod lock;
pub mod mcp;
pub mod naming;
pub mod net;
pub mod pin;
pub mod plan;
pub mod policy;
pub mod profile;
pub mod reload;
pub mod routing;
pub mod sanitize;
pub mod seal;
pub mod search;
pub mod semantic;
pub mod server;
pub mod stack;
pub mod state;
pub mod telemetry;
pub mod tokens;
pub mod upstream;

#[cfg(test)]
mod imports_tests;
