#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs the real MCP peers the tests use, then runs
# formatting, lints and every test (unit, property, integration, doc).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
cargo fmt --check
cargo clippy --all-targets -- -D warnings
cargo test --all-targets
cargo test --doc
