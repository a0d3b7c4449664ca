#!/usr/bin/env bash
# The scale-out load/fault run of tests/scaleout.rs, bigger: CLIENTS concurrent 2025-era sessions
# through HAProxy in front of three gateways (sealed session ids, server-everything upstream),
# with an upstream crash and a replica restart injected, each phase PHASE_SECS long. Prints the
# figures (answered / errored / lost / duplicated, latency, calls per second) and fails when a
# call is lost or answered twice.
#
# usage: scripts/load-scaleout.sh [CLIENTS] [PHASE_SECS]     (defaults: 1000 sessions, 10 s)
# Needs scripts/install-test-deps.sh (the peers, haproxy). Loopback only; stops itself.
set -euo pipefail
cd "$(dirname "$0")/.."
clients="${1:-1000}"
phase="${2:-10}"
# More sessions than one process's default file limit allows otherwise (every session is a
# connection on the client, on HAProxy and on a gateway).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
SCALEOUT_CLIENTS="$clients" SCALEOUT_SECS="$phase" \
  cargo test --test scaleout a_load_run -- --nocapture --test-threads 1 >"$log" 2>&1 || status=$?
grep -E -A3 'scaleout load|test result|panicked' "$log" || tail -40 "$log"
exit "$status"
