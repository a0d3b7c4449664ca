#!/usr/bin/env bash
# Fuzzes the gateway's doors with AFL++ on stable Rust (cargo-afl): installs what it needs, builds
# the targets of fuzz/, runs each for a bounded time from its seed corpus (fuzz/corpus/<target>/)
# and prints executions, exec/s, crashes and hangs per target. Not part of scripts/test.sh.
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS]      default: all targets, 60 s each
#
# One target runs at a time, on one core. Findings stay in fuzz/out/<target>/default/{crashes,hangs}/;
# docs/fuzzing.md says how to turn one into a regression test. Exit status 1 when anything was found.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(message stdio_lines id_scanner modern param_headers policy mcp_json)
target=${1:-all}
seconds=${2:-60}
if [[ $target == all ]]; then
  selected=("${TARGETS[@]}")
elif [[ " ${TARGETS[*]} " == *" $target "* ]]; then
  selected=("$target")
else
  echo "unknown target $target; one of: all ${TARGETS[*]}" >&2
  exit 64
fi

# cargo-afl builds its own AFL++ (the runtime must match its version) with make and a C compiler;
# Debian's afl++ package brings that toolchain (build-essential, clang).
if ! command -v make >/dev/null || ! command -v cc >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq afl++ >/dev/null
  else
    echo "need make and a C compiler (Debian: apt-get install afl++)" >&2
    exit 69
  fi
fi
if ! cargo afl --version >/dev/null 2>&1; then
  cargo install cargo-afl --locked
fi
if ! cargo afl --version 2>/dev/null | grep -q 'AFL++ version'; then
  cargo afl config --build
fi

(cd fuzz && cargo afl build --release --bins)

# A shared machine: no CPU pinning, no core-dump or CPU-governor checks, plain status lines.
export AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1

found=0
rows=()
for t in "${selected[@]}"; do
  out=fuzz/out/$t
  rm -rf "$out"
  mkdir -p "$out"
  echo "fuzzing $t for ${seconds}s (log: $out/afl.log)" >&2
  dict=fuzz/dict/json.dict
  if [[ $t == policy ]]; then
    dict=fuzz/dict/toml.dict
  fi
  # -t: an input taking over 1 s is a hang; -V: stop after the time given; -x: tokens to splice.
  cargo afl fuzz -i "fuzz/corpus/$t" -o "$out" -x "$dict" -t 1000 -V "$seconds" \
    -- "fuzz/target/release/$t" >"$out/afl.log" 2>&1 || {
    echo "afl-fuzz failed for $t; tail of $out/afl.log:" >&2
    tail -20 "$out/afl.log" >&2
    exit 70
  }
  stats=$out/default/fuzzer_stats
  stat() { awk -F' *: *' -v k="$1" '$1 == k { print $2 }' "$stats"; }
  execs=$(stat execs_done)
  run_time=$(stat run_time)
  crashes=$(stat saved_crashes)
  hangs=$(stat saved_hangs)
  rate=$((execs / (run_time > 0 ? run_time : 1)))
  rows+=("$(printf '%-14s %12s %8s %7s %6s %8s %6s' "$t" "$execs" "$rate" "$crashes" "$hangs" \
    "$(stat corpus_count)" "$(stat stability)")")
  if ((crashes + hangs > 0)); then
    found=1
  fi
done

printf '%-14s %12s %8s %7s %6s %8s %6s\n' target execs exec/s crashes hangs corpus stable
printf '%s\n' "${rows[@]}"
if ((found)); then
  echo "findings in fuzz/out/<target>/default/{crashes,hangs}/ (see docs/fuzzing.md)" >&2
  exit 1
fi
