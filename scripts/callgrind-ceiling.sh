#!/usr/bin/env bash
# Instructions per tools/call in the gateway process (callgrind, stdio, release build), default
# and API-key policies, against the ceilings in benches/callgrind-ceiling.toml: exits 1 when a
# figure is more than 10 % over its ceiling (cheap enough for CI: ~40 s after the build).
# Without valgrind: says so and exits 0. Run by scripts/test.sh.
# Env: CALLGRIND_CALLS ("50 550"), CALLGRIND_TOLERANCE (10, in percent).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null; then
  echo "skipped: valgrind not installed"
  exit 0
fi
ceilings=benches/callgrind-ceiling.toml
tolerance=${CALLGRIND_TOLERANCE:-10}
out=$(scripts/bench-gateway.sh callgrind-ceiling)
echo "$out"
status=0
for name in default key; do
  figure=$(sed -n "s/^callgrind $name stdio: \([0-9]*\) .*/\1/p" <<<"$out")
  ceiling=$(sed -n "s/^stdio_$name *= *\([0-9]*\).*/\1/p" "$ceilings")
  if [ -z "$figure" ] || [ -z "$ceiling" ]; then
    echo "callgrind-ceiling: no figure or no ceiling for stdio_$name" >&2
    status=1
    continue
  fi
  limit=$(( ceiling * (100 + tolerance) / 100 ))
  if (( figure > limit )); then
    echo "FAIL stdio_$name: $figure instructions per call > $limit (ceiling $ceiling + $tolerance %; $ceilings)"
    status=1
  else
    echo "ok stdio_$name: $figure instructions per call <= $limit (ceiling $ceiling + $tolerance %)"
  fi
done
exit "$status"
