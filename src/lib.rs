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
//! # Three ways to embed it
//!
//! `docs/embedding.md` in the repository compares them, with their cost per call.
//!
//! - The whole gateway in your process: [`server::run`], or [`server::Server`] mounted in an
//!   axum router of your own ([`server::Server::router`]); MCP servers of your process join
//!   its upstreams as in-process upstreams ([`policy::Policy::add_in_process`]).
//! - Its layers in front of your own MCP gateway: [`embed::EmbedLayer`], a [`tower::Layer`]
//!   over any service of JSON-RPC messages.
//! - Cache-stable tool lists in an LLM API gateway: [`llm_api::LlmCacheLayer`].
//!
//! # Layout
//!
//! The public API, the surface an embedder can hold on to:
//!
//! - [`server`]: start, serve, stop: the library entry the binary wraps.
//! - [`embed`]: the layers over someone else's MCP service.
//! - [`policy`]: the TOML policy file → a validated [`policy::Policy`]; in-process upstreams.
//! - [`layer`]: the tower layers of mcp-budget's own stack (recover, trace, era, resolve,
//!   budget, authorize, arguments, limit, guard), one module each; [`stack`] orders them over the
//!   [`context::McpRequest`]s they take.
//! - [`llm_api`]: cache-stable tool lists on the LLM-API side (Anthropic, `OpenAI`).
//! - [`tokens`]: what a tool costs a host model, in tokens; [`profile`]: the model profiles
//!   it counts for.
//! - [`error`]: runtime errors, their JSON-RPC form, and the stable `data.type` kinds
//!   ([`error::kind`]).
//! - [`catalog`] and [`jsonrpc`]: the catalog value and the lossless JSON-RPC envelope the
//!   layers' signatures name.
//!
//! These modules' signatures and public fields name only public types: a type of a hidden
//! module they need is re-exported beside them (say [`context::RequestView`],
//! [`layer::Audit`], [`stack::Gateway`]), and `src/boundary_tests.rs` fails on one that is
//! not.
//!
//! Everything else is public only for the binary, the tests, the benches and the fuzz
//! targets, and hidden from these docs (`#[doc(hidden)]`): internals that change without
//! notice. They are, in the order their imports run (`ARCHITECTURE.md` has the map):
//! `cli` (feature `cli`), `admin`, `downstream`, `reload`, `import`, `gateway`, `audit`,
//! `upstream`, `state`, `telemetry`, `net`, `routing`, `identity`, `semantic`, `listing`,
//! `plan`, `discover`, `codemode`, `search`, `compress`, `authz`, `pin`, `sanitize`,
//! `canonical`, `naming`, `seal`, `mcp`, `limits`, and `fuzzing` (the fuzz targets' entry
//! points).
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

#[doc(hidden)]
pub mod admin;
#[doc(hidden)]
pub mod audit;
#[doc(hidden)]
pub mod authz;
#[doc(hidden)]
pub mod canonical;
pub mod catalog;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod codemode;
#[doc(hidden)]
pub mod compress;
pub mod context;
#[doc(hidden)]
pub mod discover;
#[doc(hidden)]
pub mod downstream;
pub mod embed;
pub mod error;
#[doc(hidden)]
pub mod eval;
mod files;
#[doc(hidden)]
pub mod fuzzing;
#[doc(hidden)]
pub mod gateway;
#[doc(hidden)]
pub mod identity;
#[doc(hidden)]
pub mod import;
pub mod jsonrpc;
pub mod layer;
#[doc(hidden)]
pub mod limits;
#[doc(hidden)]
pub mod listing;
pub mod llm_api;
mod lock;
#[doc(hidden)]
pub mod mcp;
#[doc(hidden)]
pub mod naming;
#[doc(hidden)]
pub mod net;
#[doc(hidden)]
pub mod pin;
#[doc(hidden)]
pub mod plan;
pub mod policy;
pub mod profile;
mod redact;
#[doc(hidden)]
pub mod reload;
pub mod results;
#[doc(hidden)]
pub mod routing;
#[doc(hidden)]
pub mod sanitize;
#[doc(hidden)]
pub mod seal;
#[doc(hidden)]
pub mod search;
#[doc(hidden)]
pub mod semantic;
pub mod server;
pub mod stack;
#[doc(hidden)]
pub mod state;
#[doc(hidden)]
pub mod telemetry;
pub mod tokens;
#[doc(hidden)]
pub mod upstream;

#[cfg(test)]
mod boundary_tests;
#[cfg(test)]
mod imports_tests;
