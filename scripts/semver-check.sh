#!/usr/bin/env bash
# The public API against the last release: `cargo semver-checks` compares this tree's public
# items (the curated surface of src/lib.rs; `#[doc(hidden)]` modules are not part of it) with
# those of the newest `v*` tag, and fails on a breaking change the version does not announce.
#
#   scripts/semver-check.sh            # against the newest v* tag
#   BASELINE=<rev> scripts/semver-check.sh
#
# Says why and exits 0 when there is nothing to compare with (no tag yet) or the tool is not
# installed (`cargo install cargo-semver-checks --locked`), so that a fresh clone can run it.
set -euo pipefail
cd "$(dirname "$0")/.."

baseline="${BASELINE:-$(git describe --tags --abbrev=0 --match 'v*' 2>/dev/null || true)}"
if [ -z "$baseline" ]; then
  echo "semver-check: skipped: no release tag (v*) yet, so there is no previous API to compare with"
  exit 0
fi
if ! cargo semver-checks --version >/dev/null 2>&1; then
  echo "semver-check: skipped: cargo-semver-checks is not installed (cargo install cargo-semver-checks --locked)"
  exit 0
fi
echo "semver-check: this tree against $baseline"
# The library as embedders build it: default features off (the CLI is the binary's).
exec cargo semver-checks check-release --baseline-rev "$baseline" --only-explicit-features
