#!/usr/bin/env bash
# Quick start: installs only what the demo needs, the two reference servers of
# policies/default.toml (@modelcontextprotocol/server-everything from npm, mcp-server-time from
# PyPI, at the versions the tests pin, where the policy looks for them), then builds the gateway
# (cargo's progress shown; a cold build takes about 17 minutes, then seconds) and runs the built
# binary on that policy, serving streamable HTTP on http://127.0.0.1:8931/mcp.
# Extra arguments go to `mcp-budget serve`.
# --stdio: the entry a host (Claude Desktop, Claude Code) starts: runs the built binary (no
# cargo: a host's PATH rarely has it; build first with ./scripts/quickstart.sh) on the policy
# without its [downstream] http, so it serves stdio only and binds no port.
# The test suite's peers (scripts/install-test-deps.sh) are not needed for this;
# `./scripts/test.sh` installs them.
# QUICKSTART_STOP=installed stops after installing the servers; QUICKSTART_STOP=started stops
# once the gateway has started them and printed its summary (to time the quick start).
# MCP_BUDGET_BIN runs another build of the gateway (the tests' own) instead of target/release's.
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

bin=${MCP_BUDGET_BIN:-target/release/mcp-budget}
policy=policies/default.toml
stdio=false
for arg in "$@"; do
  [ "$arg" = --stdio ] && stdio=true
done

if $stdio; then
  [ -x "$bin" ] || {
    echo "quickstart: $bin is not built yet: run ./scripts/quickstart.sh once (without --stdio)" >&2
    exit 1
  }
  # The demo policy without its HTTP listener: a host's stdio entry serves that host only.
  policy=target/quickstart-stdio.toml
  mkdir -p target
  sed '/^\[downstream\]/,/^\[/{/^http *=/d}' policies/default.toml >"$policy"
elif [ -z "${MCP_BUDGET_BIN:-}" ]; then
  command -v cargo >/dev/null || {
    echo "quickstart: cargo is required to build the gateway (https://rustup.rs), or install a prebuilt one: docs/install.md" >&2
    exit 1
  }
  start=$SECONDS
  if [ -x "$bin" ]; then
    echo "quickstart: cargo build --release (only what changed since the last build)" >&2
  else
    echo "quickstart: cargo build --release: a cold build takes about 17 minutes on 2 cores" \
      "(peak memory 1.8 GB); cargo shows its progress below" >&2
  fi
  cargo build --release --locked --bin mcp-budget
  echo "quickstart: built in $((SECONDS - start)) s" >&2
fi

if [ "$stop" = started ]; then
  # Serving stdio too, with stdin at its end: the gateway stops right after its summary.
  $stdio || set -- --stdio "$@"
  exec "$bin" serve --policy "$policy" "$@" </dev/null
fi
exec "$bin" serve --policy "$policy" "$@"
