#!/usr/bin/env bash
# Builds the prebuilt static Linux binary into dist/ (gitignored): the gateway for
# x86_64-unknown-linux-musl, statically linked (musl libc, jemalloc and the C of ring, QuickJS
# and oniguruma compiled in), stripped, as dist/mcp-budget-VERSION-TARGET.tar.gz, with
# dist/SHA256SUMS over every artifact in dist/.
#
#   scripts/dist.sh                 # the binary, the tarball, SHA256SUMS
#   scripts/dist.sh --packages      # and the npm package and the PyPI wheel from that binary
#
# Needs: rustup's target (`rustup target add x86_64-unknown-linux-musl`) and musl-gcc
# (Debian/Ubuntu: `apt-get install musl-tools`). DIST_PROFILE=dist builds with fat LTO
# (11 % smaller code, about three times the build time; default `release`); DIST_TARGET picks
# another target. Progress is cargo's own (not --quiet), with the elapsed time at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${DIST_TARGET:-x86_64-unknown-linux-musl}
profile=${DIST_PROFILE:-release}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
packages=false
[ "${1:-}" = --packages ] && packages=true

if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  echo "dist: the Rust target $target is missing: rustup target add $target" >&2
  exit 1
fi
case $target in
  *-musl) command -v musl-gcc >/dev/null || {
    echo "dist: musl-gcc is missing (Debian/Ubuntu: apt-get install musl-tools)" >&2
    exit 1
  } ;;
esac

start=$SECONDS
upper=$(echo "$profile" | tr '[:lower:]-' '[:upper:]_')
echo "dist: cargo build --profile $profile --target $target (a cold build takes tens of minutes)" >&2
# Stripped and without debug info: a smaller download, and less for the compiler to emit.
env "CARGO_PROFILE_${upper}_DEBUG=false" "CARGO_PROFILE_${upper}_STRIP=symbols" \
  cargo build --locked --profile "$profile" --target "$target" --bin mcp-budget
echo "dist: built in $((SECONDS - start)) s" >&2

dir=$(case $profile in dev) echo debug ;; *) echo "$profile" ;; esac)
bin="target/$target/$dir/mcp-budget"
name="mcp-budget-$version-$target"
mkdir -p dist
rm -rf "dist/$name"
mkdir "dist/$name"
cp "$bin" README.md "dist/$name/"
tar -C dist -czf "dist/$name.tar.gz" "$name"
rm -rf "dist/$name"
echo "dist: dist/$name.tar.gz ($(stat -c %s "$bin") bytes unpacked)" >&2

if $packages; then
  scripts/dist/npm.sh "$bin" dist
  python3 scripts/dist/wheel.py "$bin" dist
fi
(cd dist && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%P\n' | sort | xargs sha256sum >SHA256SUMS)
echo "dist: dist/SHA256SUMS" >&2
