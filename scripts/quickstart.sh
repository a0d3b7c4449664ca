#!/usr/bin/env bash
# Quick start: installs only what the demo needs, the two reference servers of
# policies/default.toml (@modelcontextprotocol/server-everything from npm, mcp-server-time from
# PyPI, at the versions the tests pin, where the policy looks for them), then builds the gateway
# and runs it on that policy, serving streamable HTTP on http://127.0.0.1:8931/mcp.
# Extra arguments go to `mcp-budget serve` (e.g. --stdio). The test suite's peers
# (scripts/install-test-deps.sh) are not needed for this; `./scripts/test.sh` installs them.
# QUICKSTART_STOP=installed stops after installing the servers; QUICKSTART_STOP=started stops
# once the gateway has started them and printed its summary (to time the quick start).
set -euo pipefail
cd "$(dirname "$0")/.."
peers=tests/peers
stop=${QUICKSTART_STOP:-}

# The version package.json / requirements.txt pin for a package.
npm_version() { sed -n "s|.*\"$1\": \"\([^\"]*\)\".*|\1|p" "$peers/package.json"; }
pip_version() { sed -n "s|^$1==||p" "$peers/requirements.txt"; }

if [ ! -e "$peers/node_modules/.bin/mcp-server-everything" ]; then
  command -v npm >/dev/null || { echo "quickstart: npm is required (Node 20+)" >&2; exit 1; }
  server="@modelcontextprotocol/server-everything@$(npm_version @modelcontextprotocol/server-everything)"
  echo "quickstart: npm install $server" >&2
  # In a project of its own (npm would install all of tests/peers/package.json there), then
  # moved into place: install-test-deps.sh later completes that tree rather than replacing it.
  tmp=$(mktemp -d)
  npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error "$server" >&2
  mkdir -p "$peers/node_modules"
  cp -a "$tmp/node_modules/." "$peers/node_modules/"
  rm -rf "$tmp"
fi

if [ ! -x "$peers/.venv/bin/mcp-server-time" ]; then
  server="mcp-server-time==$(pip_version mcp-server-time)"
  echo "quickstart: pip install $server" >&2
  python3 -m venv "$peers/.venv"
  "$peers/.venv/bin/pip" install --quiet --disable-pip-version-check "$server" >&2
fi

if [ "$stop" = installed ]; then
  exit 0
fi
if [ "$stop" = started ]; then
  # Serving stdio too, with stdin at its end: the gateway stops right after its summary.
  exec cargo run --release --quiet -- serve --policy policies/default.toml --stdio "$@" </dev/null
fi
exec cargo run --release --quiet -- serve --policy policies/default.toml "$@"
