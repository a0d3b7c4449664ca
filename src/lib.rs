//! mcp-budget: a token-budget gateway for the Model Context Protocol.
//!
//! It sits between an LLM host and any number of MCP servers, aggregates their tools behind
//! one endpoint, counts the tokens the host really pays for them, and plans an exposure that
//! fits a budget (compressed descriptions, or progressive discovery through meta-tools) while
//! keeping tool lists byte-stable for provider prompt caches.
//!
//! # Layout
//!
//! - [`jsonrpc`]: the lossless envelope (raw `params` / `result`).
//! - [`policy`]: TOML policy → validated [`policy::Policy`].
//! - [`catalog`]: the tools of every upstream; saved `tools/list` files.
//! - [`tokens`], [`compress`], [`plan`], [`search`], [`discover`]: the pure core.
//! - [`error`]: runtime errors and their JSON-RPC form.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

pub mod canonical;
pub mod catalog;
#[cfg(feature = "cli")]
pub mod cli;
pub mod compress;
pub mod context;
pub mod discover;
pub mod downstream;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod jsonrpc;
pub mod layer;
pub mod llm_api;
pub mod mcp;
pub mod naming;
pub mod plan;
pub mod policy;
pub mod profile;
pub mod search;
pub mod server;
pub mod stack;
pub mod tokens;
pub mod upstream;
