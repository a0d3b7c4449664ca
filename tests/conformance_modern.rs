//! Differential run of the MCP conformance suite's 2026-07-28 scenarios
//! (`@modelcontextprotocol/conformance` 0.2.0-alpha.12 on Node 22,
//! `--spec-version 2026-07-28 --suite all`: 40 scenarios, among them `server-stateless`,
//! `caching`, `http-header-validation`, `http-custom-header-server-validation` and the
//! `input-required-result-*` (MRTR) ones), direct against our 2026-07-28 fixture server
//! (`tests/peers/conformance-next/fixture_server.py`, Python `mcp` SDK) and through the gateway,
//! with the fixture as an HTTP (`url`) upstream and as a stdio (`command`) upstream.
//!
//! Every check that passes directly must pass through the gateway, except the entries of
//! [`KNOWN_GAPS`], each with the gateway function at fault. A listed gap that stops failing
//! fails the test too, so the list cannot go stale. The harness is shared with
//! `tests/conformance.rs` (`tests/common/conformance.rs`), naming included: separator `_`,
//! upstream `test` serving the fixture with `--strip-prefix test_`, upstream `json` serving
//! `json_schema_2020_12_tool`.
//!
//! Needs `scripts/install-test-deps.sh` (the suite and Node 22 in
//! `tests/peers/conformance-next/node_modules`, the Python SDK in `tests/peers/.venv`).

// A test harness: helpers outside `#[test]` fns panic and print like the tests themselves.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::unwrap_used)]
#![allow(
    clippy::disallowed_methods,
    reason = "crate::lock is the library's: a test's std lock unwraps, and a poisoned one fails the test"
)]

#[path = "common/conformance.rs"]
mod conformance_harness;

use conformance_harness::{Bench, KnownGap, Suite, count};

/// The gaps, identical over both upstream transports (the gateway's side of the HTTP
/// downstream and its upstream era handling do not depend on the upstream transport).
/// Empty since the gateway speaks 2026-07-28 upstream and translates between eras; a new gap
/// goes here with the gateway function at fault.
const KNOWN_GAPS: &[KnownGap] = &[];

/// The 0.2.0-alpha suite's 2026-07-28 scenarios against the Python fixture.
static SUITE: Suite = Suite {
    peers: "tests/peers/conformance-next",
    fixture: "fixture_server.py",
    fixture_program: "tests/peers/.venv/bin/python",
    spec_version: Some("2026-07-28"),
    // Budget on, but nothing rewritten: 23 fixture tools would otherwise be planned into
    // progressive discovery, and the suite calls the tools by name.
    policy_head: "[budget]\nmode = \"full\"\nlevel = \"off\"\n\n",
    count_gaps: true,
    known_gaps: KNOWN_GAPS,
};

#[test]
fn modern_conformance_suite_passes_through_the_gateway_as_it_does_directly() {
    let bench = Bench::start(&SUITE);
    let direct =
        bench.direct(|direct| count(direct, "SUCCESS") >= 140 && count(direct, "FAILURE") == 0);
    let (vias, failures) = bench.through_gateways(&direct);
    println!("{}", bench.summary(&direct, &vias));
    drop(bench);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
