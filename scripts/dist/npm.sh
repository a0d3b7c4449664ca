#!/usr/bin/env bash
# The npm package `mcp-budget` around a built gateway binary: packaging/npm (the launcher
# bin/mcp-budget.js, package.json, README) with BINARY as
# vendor/x86_64-unknown-linux-musl/mcp-budget, packed by `npm pack` into OUT_DIR
# (mcp-budget-VERSION.tgz, the path printed on stdout). scripts/dist.sh --packages runs it on
# the static binary; tests/it/packaging.rs on the test build.
# usage: scripts/dist/npm.sh BINARY OUT_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BINARY OUT_DIR" >&2; exit 64; }
binary=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
cd "$(dirname "$0")/../.."
command -v npm >/dev/null || { echo "npm.sh: npm is required" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -R packaging/npm/. "$stage/"
sed "s/@VERSION@/$version/" packaging/npm/package.json >"$stage/package.json"
mkdir -p "$stage/vendor/x86_64-unknown-linux-musl"
install -m 755 "$binary" "$stage/vendor/x86_64-unknown-linux-musl/mcp-budget"
(cd "$stage" && npm pack --silent --pack-destination "$out" >/dev/null)
echo "$out/mcp-budget-$version.tgz"
