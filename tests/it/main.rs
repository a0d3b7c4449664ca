//! The integration tests, one binary: the gateway binary between real third-party MCP peers (the
//! Python `mcp` 2.x SDK, rmcp, the MCP Inspector CLI; server-everything, mcp-server-time,
//! server-github, server-gitlab) plus fault injection (a misbehaving stdio server in
//! `tests/peers`), the CLI commands on the fixture toolsets, the library's public entries
//! (`llm_api`, the budget layer), the shipped policies and `deploy/` manifests, and the fuzz
//! targets' invariants as property tests.
//!
//! The peers are installed by `scripts/install-test-deps.sh`; every process a test starts is
//! tagged and checked for leftovers (see [`harness`]).
//!
//! Three suites keep binaries of their own, because they must not share the machine with this
//! one's parallel tests: `tests/conformance.rs` and `tests/conformance_modern.rs` (each runs the
//! official suite three times under one deadline, direct and through two gateways, and a check
//! slowed into a timeout through the gateway would read as a regression) and `tests/scaleout.rs`
//! (its tests take turns because each runs three gateways behind `HAProxy` and a 200-session load
//! run that must lose no call).
// Test helpers live in private modules: `pub` there is for sibling modules only; logs of the
// gateway go to stderr when IT_LOG is set.
#![allow(unreachable_pub, clippy::unwrap_used, clippy::print_stderr)]
#![allow(
    clippy::disallowed_methods,
    reason = "crate::lock is the library's: a test's std lock unwraps, and a poisoned one fails the test"
)]

mod harness;
mod macros;
mod python_stdio;

mod budget_cli;
mod budget_e2e;
mod cache;
mod client_limits;
mod clients;
mod codemode;
mod collisions;
mod deploy;
mod discovery_e2e;
mod docs;
mod dropin;
mod embed;
mod env;
mod eras;
mod eval;
mod fairness;
mod faults;
mod firsthour;
mod fuzz_props;
mod golden;
mod guard;
mod host_cooperation;
mod http_caps;
mod http_downstream;
mod http_upstream;
mod hygiene;
mod identity;
mod isolation;
mod lazy;
mod legacy_servers;
mod limits;
mod llm_api;
mod modern_http;
mod name_resolution;
mod native_disclosure;
mod offline_live_binary;
mod offline_live_library;
mod onboarding;
mod packaging;
mod per_client;
mod policies;
mod protocol_rules;
mod proxy_caps;
mod quickstart;
mod recheck;
mod reload;
mod rmcp_client;
mod rmcp_eras;
mod routing;
mod search_cli;
mod search_tuning;
mod semantic_e2e;
mod server_requests;
mod startup;
mod strict_args;
mod telemetry;
mod templates;
mod transports;
mod wire;
