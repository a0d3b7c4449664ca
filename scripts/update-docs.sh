#!/usr/bin/env bash
# Rewrites every generated page from what the code says now, then shows what changed:
# docs/policy.md (the policy reference, from the raw policy's doc comments), docs/errors.md and
# docs/metrics.md (from src/error/kind.rs and src/telemetry/names.rs), and the README's
# quick-start summary (the gateway's real output on policies/default.toml, which needs the two
# quick-start servers: `QUICKSTART_STOP=installed ./scripts/quickstart.sh` installs them).
# The same tests, without UPDATE_DOCS, fail in `./scripts/test.sh` when a page is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
UPDATE_DOCS=1 cargo test --quiet --lib policy::reference >&2
UPDATE_DOCS=1 cargo test --quiet --test it -- docs_ >&2
git status --short -- README.md docs/
