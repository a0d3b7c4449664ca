#!/usr/bin/env bash
# Measures the budget core: tokens per level and rendering (github.json and every toolset),
# the plans at 2% for Haiku 4.5 / Sonnet 4.5 / GPT-4o / GPT-5, BM25 hit@5 fidelity per level,
# then the criterion benches. Uses the shared data set when present, else the fixtures.
#
#   scripts/measure-budget.sh            # measurements only
#   BENCH=1 scripts/measure-budget.sh    # and the benches
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=${DATA:-/work/shared/data}
TOOLSETS=tests/fixtures/toolsets
QUERIES=()
if [ -d "$DATA/toolsets" ]; then TOOLSETS=$DATA/toolsets; fi
if [ -f "$DATA/retrieval-dev.jsonl" ]; then QUERIES=("$DATA/retrieval-dev.jsonl"); fi

cargo run --quiet --release --example measure_budget -- "$TOOLSETS" "${QUERIES[@]}"
echo
cargo run --quiet --release -- inspect --tools "$TOOLSETS/github.json" --model claude-haiku-4-5 | head -6
if [ "${BENCH:-0}" = 1 ]; then
  cargo bench --bench budget -- --noplot
fi
