#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs the real MCP peers the tests use, then runs
# two lanes, each step timed (`test.sh: <lane> <step>: N s`, and each lane's total):
# - fast: formatting, lints, long functions, unit tests and doctests. It compiles the crate for
#   checking and for its unit tests only, so a broken unit test fails in minutes, before the
#   slow lane builds anything.
# - slow: the integration binary and the other test targets (conformance, scale-out), the bench
#   smoke runs, callgrind's release build, the Windows and no-default-features builds, the
#   docs and semver.
# Only what is tested is built (no example is linked: clippy type-checks them, and the two that
# run are compiled into tests/it); `--no-run` is a step of its own, so the log splits compile
# time from run time. `TEST_LANE=fast` (or `slow`) runs one lane.
set -euo pipefail
cd "$(dirname "$0")/.."

lane_start=$SECONDS
lane=""
begin() {
  lane=$1
  lane_start=$SECONDS
  echo "test.sh: ${lane} lane" >&2
}
step() {
  local name=$1 start=$SECONDS
  shift
  echo "test.sh: ${lane} ${name}: $*" >&2
  "$@"
  echo "test.sh: ${lane} ${name}: $((SECONDS - start)) s" >&2
}
end() {
  echo "test.sh: ${lane} lane: $((SECONDS - lane_start)) s" >&2
}
wants() { [ -z "${TEST_LANE:-}" ] || [ "${TEST_LANE}" = "$1" ]; }

scripts/install-test-deps.sh

if wants fast; then
  begin fast
  step fmt cargo fmt --check
  step clippy cargo clippy --all-targets -- -D warnings
  # No function over 80 lines outside tests (issue 30): a long one is split, not waved through.
  step long-functions python3 scripts/long-functions.py
  step build-unit cargo test --lib --bins --no-run
  step unit cargo test --lib --bins
  step doctests cargo test --doc
  end
fi

if wants slow; then
  begin slow
  step build-tests cargo test --tests --no-run
  # The integration binary: its tests wait on the real peers' processes more than they
  # compute, so it runs 4 at once on 2 cores (IT_THREADS; 559 s at 2, 468 s at 4 here).
  step integration cargo test --test it -- --test-threads "${IT_THREADS:-4}"
  # Every other test target, as cargo lists them (a new one is not left out): conformance (both
  # eras) and scale-out (HAProxy, Redis, three gateways per test), at the default thread count.
  others=$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
targets = (t for p in json.load(sys.stdin)["packages"] for t in p["targets"])
print(" ".join("--test " + t["name"] for t in targets if "test" in t["kind"] and t["name"] != "it"))')
  # shellcheck disable=SC2086 # one word per flag and name
  step other-tests cargo test $others
  # Each bench run once, as a smoke test (criterion's test mode).
  step benches cargo test --benches
  # Instructions per tools/call in a release build of the gateway (callgrind) against the
  # ceilings in benches/callgrind-ceiling.toml: more than 10 % over fails (skipped, saying so,
  # without valgrind). A script rather than a Rust test: it builds the release binary and
  # examples itself, which a debug `cargo test` would otherwise nest.
  step callgrind scripts/callgrind-ceiling.sh
  # The minimal library (no cli, semantic, redis, tls, otlp) builds clean too.
  step no-default-features cargo clippy --lib --no-default-features -- -D warnings
  # Non-Unix builds: the library compiles for Windows (a Unix-only dependency once broke it).
  if rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu; then
    step windows cargo check --target x86_64-pc-windows-gnu --lib
  else
    echo "test.sh: WARNING: no x86_64-pc-windows-gnu target; the Windows build check is skipped" >&2
  fi
  # The public API's docs build without a warning (broken or private intra-doc links).
  step docs env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps
  # Breaking changes of the public API against the last release tag (skipped, saying why,
  # without a tag or without cargo-semver-checks).
  step semver scripts/semver-check.sh
  end
fi
