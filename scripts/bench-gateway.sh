#!/usr/bin/env bash
# Loopback benchmarks of the gateway (release build, 127.0.0.1 only, bounded, stops what it starts):
#   latency    tools/call p50/p90/p99, direct vs through the gateway, stdio and HTTP, interleaved;
#              also the relay floors (socat, HAProxy in TCP mode and in HTTP mode with keep-alive
#              both sides), a gateway with an API key and an audit file, and mcp-compressor when
#              installed; added latency over direct and the ratio (gateway - direct) / (relay -
#              direct). PEERS=python|node|all adds the realistic peers (scripts/bench-peers.py):
#              a Python client against a Python server (GitHub toolset) and server-everything,
#              direct / socat / mcp-budget / mcp-compressor side by side
#   memory     gateway RSS with 10 stdio upstreams x 100 tools and the first tools/list's time;
#              bytes per idle HTTP session (2000, then 4000 open)
#   throughput tools/call/s over the HTTP downstream, 32 keep-alive clients; HAProxy in TCP and
#              in HTTP mode as floors
#   startup    time to ready with 4 stdio upstreams that start in 100/200/300/400 ms;
#              UPSTREAMS=10 TOOLS=100: that many upstreams of the largest saved toolsets, wall
#              clock and gateway CPU to ready (GATEWAYS=a,b alternates gateway binaries)
#   callgrind  instructions per tools/call in the gateway process, HTTP and stdio (valgrind):
#              (a run with 1100 calls - a run with 100 calls) / 1000
#   callgrind-policies  the same for the default, key, key + audit, key + limits and
#              key + limits with [state] in a local redis-server
#   callgrind-ceiling  stdio only, default and key policies, 50 and 550 calls (what
#              scripts/callgrind-ceiling.sh compares with benches/callgrind-ceiling.toml)
#   wakeup     no gateway: a Python client and bench_echo on one CPU vs two (what a cross-CPU
#              wake-up costs on this machine)
# The upstream is examples/bench_echo.rs (one `echo` tool, answered in microseconds), the client
# examples/bench_loopback.rs. Then the in-process criterion bench (benches/gateway.rs).
# Usage: scripts/bench-gateway.sh [latency|throughput|startup|memory|criterion ...]   (default:
# latency throughput startup criterion)
# Env: CALLS (2000) ROUNDS (5) CLIENTS (32) SECS (5) RUNS (3); PEERS (rust: see latency and
# throughput; python, node or all add the realistic peers); BENCH_JSON_ONLY=1 makes the HTTP
# clients send `Accept: application/json` only (no SSE answers from the gateway);
# BENCH_INSTALL=1 lets `latency` apt-get install socat and haproxy when missing;
# CALLGRIND_CALLS ("100 1100": the two call counts) and CALLGRIND_TRANSPORTS ("http stdio");
# for `memory`: IDLE (seconds idle before reading RSS again; 0: not) and PAGEOUT=1 (then the
# binary's pages paged out by scripts/pageout.py and RSS read after some traffic: the working set).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
what=("$@")
[ ${#what[@]} -eq 0 ] && what=(latency throughput startup criterion)

cargo build --release --quiet --bin mcp-budget --example bench_echo --example bench_loopback
run() { timeout 600 "$CARGO_TARGET_DIR/release/examples/bench_loopback" "$@"; }

# Instructions per tools/call in the gateway process, HTTP and stdio, with BENCH_POLICY_EXTRA=$1
# ($2 labels the lines): (a run with hi calls - a run with lo calls) / (hi - lo), the counts from
# CALLGRIND_CALLS ("100 1100"), the transports from CALLGRIND_TRANSPORTS ("http stdio").
callgrind() {
  local out t n a b flag lo hi
  read -r lo hi <<<"${CALLGRIND_CALLS:-100 1100}"
  out=$(mktemp -d)
  for t in ${CALLGRIND_TRANSPORTS:-http stdio}; do
    flag=(); [ "$t" = stdio ] && flag=(--stdio)
    for n in "$lo" "$hi"; do
      BENCH_POLICY_EXTRA="$1" BENCH_WRAP="valgrind --tool=callgrind --callgrind-out-file=$out/$t.$n" \
        run profile --calls "$n" "${flag[@]}" >/dev/null
    done
    a=$(grep -m1 '^summary:' "$out/$t.$lo" | cut -d' ' -f2)
    b=$(grep -m1 '^summary:' "$out/$t.$hi" | cut -d' ' -f2)
    echo "callgrind ${2:+$2 }$t: $(( (b - a) / (hi - lo) )) instructions per tools/call (gateway process)"
  done
  rm -rf "$out"
}

# The API-key policy of the callgrind modes (stdio_client for the stdio downstream).
key=$'[downstream]\nstdio_client = "bench"\n[[client]]\nname = "bench"\napi_key_env = "BENCH_KEY"\nallow = ["*"]\n'

echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
for w in "${what[@]}"; do
  case "$w" in
    latency)
      if [ "${BENCH_INSTALL:-0}" = 1 ] && ! { command -v socat && command -v haproxy; } >/dev/null; then
        apt-get install -y socat haproxy >/dev/null
      fi
      # PEERS: rust (default: bench_loopback and bench_echo), python (a Python client and a
      # Python server serving the GitHub toolset), node (a Python client and server-everything),
      # or all; several may be given ("rust python").
      peers=${PEERS:-rust}
      [ "$peers" = all ] && peers="rust python node"
      pairs=()
      for p in $peers; do
        case "$p" in
          rust) run latency --calls "${CALLS:-2000}" --rounds "${ROUNDS:-5}" ;;
          python|node) pairs+=("$p") ;;
          *) echo "unknown PEERS entry: $p (rust, python, node, all)" >&2; exit 2 ;;
        esac
      done
      if [ ${#pairs[@]} -gt 0 ]; then
        [ "$peers" != "${pairs[*]}" ] && echo
        GATEWAY="$CARGO_TARGET_DIR/release/mcp-budget" python3 scripts/bench-peers.py "${pairs[@]}"
      fi ;;
    memory) run memory --idle "${IDLE:-0}" ${PAGEOUT:+--pageout} ;;
    throughput)
      peers=${PEERS:-rust}
      [ "$peers" = all ] && peers="rust python node"
      for p in $peers; do
        case "$p" in
          rust) run throughput --clients "${CLIENTS:-32}" --secs "${SECS:-5}" ;;
          python|node) run throughput --clients "${CLIENTS:-32}" --secs "${SECS:-5}" --peer "$p" ;;
          *) echo "unknown PEERS entry: $p (rust, python, node, all)" >&2; exit 2 ;;
        esac
      done ;;
    startup)
      if [ -n "${UPSTREAMS:-}" ]; then
        # UPSTREAMS=10 [TOOLS=100] [GATEWAYS=a,b]: that many upstreams, gateway CPU to ready.
        run startup --runs "${RUNS:-3}" --upstreams "$UPSTREAMS" --tools "${TOOLS:-100}" \
          ${GATEWAYS:+--gateways "$GATEWAYS"}
      else
        run startup --runs "${RUNS:-3}"
      fi ;;
    callgrind) callgrind "" ;;
    callgrind-ceiling)
      # Cheap enough for CI: stdio, default and API-key policies, 50 and 550 calls.
      export BENCH_KEY=k
      CALLGRIND_CALLS="${CALLGRIND_CALLS:-50 550}" CALLGRIND_TRANSPORTS=stdio callgrind "" default
      CALLGRIND_CALLS="${CALLGRIND_CALLS:-50 550}" CALLGRIND_TRANSPORTS=stdio callgrind "$key" key ;;
    callgrind-policies)
      # The same per policy: anonymous default, an API-key client (stdio_client for stdio),
      # + an audit file, + limits, + limits in a local redis-server ([state], when installed).
      limits=$'[limits]\nin_flight = 16\ncalls_per_sec = 100000\nburst = 100000\n'
      audit_dir=$(mktemp -d)
      export BENCH_KEY=k BENCH_BEARER=k
      callgrind "" default
      callgrind "$key" key
      callgrind "$key"$'[audit]\npath = "'"$audit_dir"$'/audit.log"\n' key+audit
      callgrind "$key$limits" key+limits
      if command -v redis-server >/dev/null; then
        port=16420
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
        redis_pid=$!
        sleep 0.5
        MCP_BUDGET_REDIS_URL="redis://127.0.0.1:$port" callgrind "$key$limits"$'[state]\nbackend = "redis"\nurl_env = "MCP_BUDGET_REDIS_URL"\ntimeout_ms = 250\n' key+limits+redis
        kill "$redis_pid"
      else
        echo "callgrind key+limits+redis: skipped (no redis-server)"
      fi
      rm -rf "$audit_dir" ;;
    wakeup)
      # No gateway: a Python client and bench_echo over loopback HTTP, on one CPU and on two.
      # The difference is what this machine charges per cross-CPU wake-up (on an idle VM, the
      # price of waking a halted vCPU); any added-latency figure on two CPUs includes it.
      for cpus in "0 0" "0 1" "any any"; do
        set -- $cpus
        client=(); server=()
        [ "$1" != any ] && client=(taskset -c "$1")
        [ "$2" != any ] && server=(taskset -c "$2")
        log=$(mktemp)
        "${server[@]}" "$CARGO_TARGET_DIR/release/examples/bench_echo" --http 127.0.0.1:0 2>"$log" >/dev/null &
        echo_pid=$!
        for _ in $(seq 50); do grep -q listening "$log" && break; sleep 0.1; done
        port=$(grep -o '127.0.0.1:[0-9]*' "$log" | cut -d: -f2)
        echo "client on CPU $1, bench_echo on CPU $2: $("${client[@]}" python3 scripts/wakeup-client.py "$port")"
        kill "$echo_pid"; wait "$echo_pid" 2>/dev/null || true; rm -f "$log"
      done ;;
    criterion) cargo bench --quiet --bench gateway -- --warm-up-time 1 --measurement-time 3 ;;
    *) echo "unknown benchmark: $w" >&2; exit 2 ;;
  esac
  echo
done
