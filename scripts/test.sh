#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs the real MCP peers the tests use, then runs
# formatting, lints and every test (unit, property, integration, doc).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
cargo fmt --check
cargo clippy --all-targets -- -D warnings
# The minimal library (no cli, semantic, redis, tls, otlp) builds clean too.
cargo clippy --lib --no-default-features -- -D warnings
# No function over 80 lines outside tests (issue 30): a long one is split, not waved through.
python3 scripts/long-functions.py
# Non-Unix builds: the library compiles for Windows (a Unix-only dependency once broke it).
if rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu; then
  cargo check --target x86_64-pc-windows-gnu --lib
else
  echo "test.sh: WARNING: no x86_64-pc-windows-gnu target; the Windows build check is skipped" >&2
fi
cargo test --all-targets
# Instructions per tools/call in a release build of the gateway (callgrind) against the ceilings
# in benches/callgrind-ceiling.toml: more than 10 % over fails (skipped, saying so, without
# valgrind). A script rather than a Rust test: it builds the release binary and examples itself,
# which a debug `cargo test` would otherwise nest.
scripts/callgrind-ceiling.sh
cargo test --doc
# The public API's docs build without a warning (broken or private intra-doc links).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps
# Breaking changes of the public API against the last release tag (skipped, saying why, without
# a tag or without cargo-semver-checks).
scripts/semver-check.sh
