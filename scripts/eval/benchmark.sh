#!/usr/bin/env bash
# The benchmark of docs/eval.md: the dev queries through every exposure with a local model,
# one `mcp-budget eval` per exposure (each into its own folder, so a long run that stops keeps
# every finished exposure; a folder with a summary.json is not run again).
#
#   scripts/eval/benchmark.sh 0.5b QUERIES TOOLS_DIR [LIMIT] [EXPOSURE...]
#   scripts/eval/benchmark.sh 1.5b ../shared/data/retrieval-dev.jsonl ../shared/data/toolsets 100
#
# Needs scripts/eval-model.sh (with `1.5b` for the 1.5B model) and a release build
# (cargo build --release; MCP_BUDGET=path picks another binary). Results in eval-bench/<model>/<exposure>/; the model server runs
# with one thread when the machine is shared (THREADS=1), two otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=$1 queries=$2 tools=$3 limit=${4:-0}
shift $(( $# < 4 ? $# : 4 ))
exposures=("$@")
[ ${#exposures[@]} -gt 0 ] || exposures=(flat-20 flat-50 flat-100 progressive plan code
  flat-20:medium flat-20:extreme full)
gguf=tests/peers/models/qwen2.5-coder-$model-instruct-q4_k_m.gguf
[ -f "$gguf" ] || { echo "benchmark: $gguf missing: scripts/eval-model.sh $model" >&2; exit 1; }
out=eval-bench/$model
mkdir -p "$out"
exec 3< <(tests/peers/.venv-llm/bin/python scripts/eval/llm_server.py "$gguf" \
  --threads "${THREADS:-2}" --stay 2>"$out/llm-server.log")
server=$!
trap 'kill "$server" 2>/dev/null || true; pkill -P "$server" 2>/dev/null || true' EXIT
read -r _ url <&3
echo "benchmark: model server at $url" >&2
limit_args=()
[ "$limit" -gt 0 ] && limit_args=(--limit "$limit")
for e in "${exposures[@]}"; do
  dir=$out/${e//:/_}
  [ -f "$dir/summary.json" ] && continue
  mkdir -p "$dir"
  echo "benchmark: $e ($(date -u +%T))" >&2
  /usr/bin/time -f "%e s wall" "${MCP_BUDGET:-target/release/mcp-budget}" eval --tools "$tools" \
    --queries "$queries" --llm "$url" --model "qwen2.5-coder-$model" "${limit_args[@]}" \
    --seed 1 --exposures "$e" --out "$dir" > "$dir/table.txt" 2> "$dir/progress.log" || true
  cat "$dir/table.txt" >&2
done
