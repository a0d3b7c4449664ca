#!/usr/bin/env bash
# Quick start: installs the reference MCP servers (npm + PyPI, into tests/peers/) and runs the
# gateway on policies/default.toml, serving streamable HTTP on http://127.0.0.1:8931/mcp.
# Extra arguments go to `mcp-budget serve` (e.g. --stdio).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
exec cargo run --release --quiet -- serve --policy policies/default.toml "$@"
