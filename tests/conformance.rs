//! Differential run of the official MCP conformance suite (`@modelcontextprotocol/conformance`
//! 0.1.16 on Node 22, `--suite all`: the 30 active server scenarios plus the pending
//! `json-schema-2020-12` and `server-sse-polling`), direct against our fixture server and through
//! the gateway, with the fixture as an HTTP (`url`) upstream and as a stdio (`command`) upstream.
//!
//! Every check that passes directly must pass through the gateway, except the entries of
//! [`KNOWN_GAPS`] (which must keep failing, so the list cannot go stale). The harness, and how
//! the fixture's names come out right through the gateway, are in `tests/common/conformance.rs`.
//!
//! Needs `scripts/install-test-deps.sh` (installs the suite, Node 22 and the fixture's SDK into
//! `tests/peers/conformance/node_modules`).

// A test harness: helpers outside `#[test]` fns panic and print like the tests themselves.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::unwrap_used)]
#![allow(
    clippy::disallowed_methods,
    reason = "crate::lock is the library's: a test's std lock unwraps, and a poisoned one fails the test"
)]

#[path = "common/conformance.rs"]
mod conformance_harness;

use conformance_harness::{Bench, KnownGap, Suite, count, scenario_of};

/// Scenarios that fail through the gateway although they pass directly. Empty today: with
/// conformance 0.1.16 every check that passes against the fixture (44/44) also passes through
/// the gateway, over both upstream transports. Add an entry here (with the reason and the
/// gateway function at fault) rather than weakening the differential; the test fails when a
/// listed scenario starts passing, so the list stays true.
const KNOWN_GAPS: &[KnownGap] = &[
    // KnownGap { target: Some("stdio"), scenario: "tools-call-sampling", check: None, reason: "..." },
];

/// The 0.1.16 suite (its default spec version) against the Node fixture.
static SUITE: Suite = Suite {
    peers: "tests/peers/conformance",
    fixture: "fixture-server.mjs",
    fixture_program: "tests/peers/conformance/node_modules/.bin/node",
    spec_version: None,
    policy_head: "",
    count_gaps: false,
    known_gaps: KNOWN_GAPS,
};

#[test]
fn conformance_suite_passes_through_the_gateway_as_it_does_directly() {
    let bench = Bench::start(&SUITE);
    let direct = bench.direct(|direct| count(direct, "SUCCESS") >= 30);
    let (vias, failures) = bench.through_gateways(&direct);
    println!("{}", bench.summary(&direct, &vias));
    drop(bench);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn scenario_names_come_out_of_result_directories() {
    assert_eq!(
        scenario_of("server-tools-call-simple-text-2026-11-29T12-59-03-366Z").as_deref(),
        Some("tools-call-simple-text")
    );
    assert_eq!(
        scenario_of("server-json-schema-2020-12-2026-11-29T12-59-03-366Z").as_deref(),
        Some("json-schema-2020-12")
    );
    assert_eq!(scenario_of("runner.log"), None);
}
