//! Integration tests against real third-party MCP peers: the gateway binary between the Python
//! `mcp` 2.x SDK / the MCP Inspector CLI and server-everything, mcp-server-time, server-github,
//! server-gitlab, plus fault injection (a misbehaving stdio server in `tests/peers`).
//!
//! The peers are installed by `scripts/install-test-deps.sh`; every process a test starts is
//! tagged and checked for leftovers (see [`harness`]).
// Test helpers live in private modules: `pub` there is for sibling modules only; logs of the
// gateway go to stderr when IT_LOG is set.
#![allow(unreachable_pub, clippy::unwrap_used, clippy::print_stderr)]
#![allow(
    clippy::disallowed_methods,
    reason = "crate::lock is the library's: a test's std lock unwraps, and a poisoned one fails the test"
)]

mod harness;

mod cache;
mod client_limits;
mod clients;
mod codemode;
mod collisions;
mod env;
mod eras;
mod fairness;
mod faults;
mod guard;
mod http_downstream;
mod http_upstream;
mod identity;
mod isolation;
mod legacy_servers;
mod limits;
mod modern_http;
mod native_disclosure;
mod offline_live;
mod per_client;
mod reload;
mod routing;
mod startup;
mod telemetry;
mod templates;
mod transports;
mod wire;
