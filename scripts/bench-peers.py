"""stdio tools/call latency with the peers most users run: a Python client (this script, plain
pipes, one JSON line out and one in per call, timed with perf_counter) against a Python MCP server
(tests/peers/saved_server.py serving the saved GitHub toolset, 117 tools, from
tests/fixtures/toolsets/github.json: github/github-mcp-server, MIT, see SOURCES.md there) and against the
official `server-everything` (Node, from tests/peers/node_modules), each direct, through socat
(a relay that does nothing), through mcp-budget and through mcp-compressor, interleaved.

usage: bench-peers.py PAIR [PAIR ...]     PAIR: python (Python client -> Python server) or
                                          node (Python client -> server-everything)
env:   CALLS (2000) per target per round, ROUNDS (5), GATEWAY (target/release/mcp-budget),
       BENCH_GATEWAY_BASE (a second gateway binary measured in the same rounds, "base"),
       BENCH_COMPRESSOR (default /tmp/mcp-compressor-venv/bin/mcp-compressor, skipped when
       missing), BENCH_GW_PREFIX (a command every gateway runs under, say `taskset -c 1`)
Prints per pair the table (p50 p90 p99 ms), what each target adds over direct, and the gateway's
added latency as a multiple of socat's (`ratio mcp-budget / relay (stdio, PAIR)`), then one
side-by-side table of every pair. Everything it starts is a child on pipes, stopped at the end.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(ROOT, "tests", "peers")
CALLS = int(os.environ.get("CALLS", "2000"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
GATEWAY = os.environ.get("GATEWAY", os.path.join(TARGET, "release", "mcp-budget"))
COMPRESSOR = os.environ.get("BENCH_COMPRESSOR", "/tmp/mcp-compressor-venv/bin/mcp-compressor")
PREFIX = os.environ.get("BENCH_GW_PREFIX", "").split()
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench-peers", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

# Per pair: the server command, the upstream name, the tool and its arguments.
PAIRS = {
    "python": {
        "label": "Python client -> Python server (GitHub toolset, 117 tools)",
        "server": [sys.executable, os.path.join(PEERS, "saved_server.py"),
                   os.path.join(ROOT, "tests", "fixtures", "toolsets", "github.json")],
        "name": "gh",
        "tool": "issue_read",
        "arguments": {"method": "get", "owner": "octo", "repo": "hello", "issue_number": 7},
    },
    "node": {
        "label": "Python client -> server-everything (Node)",
        "server": ["node", os.path.join(PEERS, "node_modules", "@modelcontextprotocol",
                                        "server-everything", "dist", "index.js"), "stdio"],
        "name": "ev",
        "tool": "echo",
        "arguments": {"message": "hello"},
    },
}


class Peer:
    """A stdio MCP peer on pipes, initialized; `call` sends one tools/call and reads its answer."""

    def __init__(self, label, argv, tool, arguments, env=None):
        self.label, self.tool, self.arguments = label, tool, arguments
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.out = self.proc.stdout
        self.send(INIT)
        self.recv()
        self.send(INITIALIZED)
        self.samples = []

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def recv(self):
        while True:
            line = self.out.readline()
            if not line:
                raise SystemExit(f"{self.label}: the peer closed stdout")
            if b'"id"' in line:
                if b'"error"' in line[:200]:
                    raise SystemExit(f"{self.label}: {line[:300]!r}")
                return

    def call(self, mid):
        self.send({"jsonrpc": "2.0", "id": mid, "method": "tools/call",
                   "params": {"name": self.tool, "arguments": self.arguments}})
        self.recv()

    def stop(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


def gateway(binary, policy):
    return PREFIX + [binary, "serve", "--policy", policy, "--stdio"]


def targets(pair, spec, work):
    """The peers of `pair`: direct, socat, mcp-budget (and base), mcp-compressor."""
    server, name, tool, args = spec["server"], spec["name"], spec["tool"], spec["arguments"]
    out = [Peer("stdio direct", server, tool, args)]
    socat = shutil.which("socat")
    if socat:
        out.append(Peer("stdio relay (socat)", [socat, "-", "EXEC:" + " ".join(server)],
                        tool, args))
    else:
        print("skipped: no socat")
    policy = os.path.join(work, f"{pair}.toml")
    with open(policy, "w", encoding="utf-8") as f:
        f.write(f'version = 1\n[[upstream]]\nname = "{name}"\ncommand = {json.dumps(server[0])}\n'
                f"args = {json.dumps(server[1:])}\n")
    env = dict(os.environ, MCP_BUDGET_LOG="warn")
    out.append(Peer("stdio via gateway", gateway(GATEWAY, policy), f"{name}__{tool}", args, env))
    base = os.environ.get("BENCH_GATEWAY_BASE")
    if base:
        out.append(Peer("stdio via base", gateway(base, policy), f"{name}__{tool}", args, env))
    if os.path.isfile(COMPRESSOR):
        # Its tools wrap the upstream's: `<name>_invoke_tool` calls one with `tool_input`.
        wrapped = {"tool_name": tool, "tool_input": args}
        out.append(Peer("stdio via compressor", [COMPRESSOR, "-n", name, "--"] + server,
                        f"{name}_invoke_tool", wrapped))
    else:
        print(f"skipped: no mcp-compressor at {COMPRESSOR} (set BENCH_COMPRESSOR)")
    return out


def pct(sorted_ms, q):
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def measure(peers):
    """Warm-up, then interleaved rounds (at most 5 s a round per target); (p50, p90, p99)."""
    mid = 1
    for p in peers:
        for _ in range(200):
            p.call(mid)
            mid += 1
    for _ in range(ROUNDS):
        for p in peers:
            start_round = time.perf_counter()
            for _ in range(CALLS):
                at = time.perf_counter()
                p.call(mid)
                p.samples.append((time.perf_counter() - at) * 1e3)
                mid += 1
                if time.perf_counter() - start_round > 5:
                    break
    stats = {}
    for p in peers:
        s = sorted(p.samples)
        stats[p.label] = (pct(s, 0.5), pct(s, 0.9), pct(s, 0.99), len(s))
    return stats


def report(pair, spec, stats):
    print(f"tools/call latency, {spec['label']}: {ROUNDS} rounds x {CALLS} sequential calls "
          "per target, at most 5 s a round (ms)")
    print(f"{'target':<32} {'p50':>8} {'p90':>8} {'p99':>8}")
    for label, (p50, p90, p99, n) in stats.items():
        note = f"  ({n} calls: 5 s a round)" if n < CALLS * ROUNDS else ""
        print(f"{label:<32} {p50:>8.4f} {p90:>8.4f} {p99:>8.4f}{note}")
    direct = stats["stdio direct"]
    print(f"added over direct (stdio, {pair}):")
    for label, s in stats.items():
        if label != "stdio direct":
            print(f"  {label:<32} p50 {s[0] - direct[0]:+.4f} ms, p99 {s[2] - direct[2]:+.4f} ms")
    relay = stats.get("stdio relay (socat)")
    if relay is None:
        return
    for who, labels in [("mcp-budget", [("stdio via gateway", "default"),
                                        ("stdio via base", "base default")]),
                        ("mcp-compressor", [("stdio via compressor", "default")])]:
        parts = []
        for q, qname in [(0, "p50"), (2, "p99")]:
            floor = relay[q] - direct[q]
            ratios = [f"{(stats[l][q] - direct[q]) / floor:.2f} ({what})" if floor > 0 else
                      f"n/a ({what}: the relay added nothing)"
                      for l, what in labels if l in stats]
            if ratios:
                parts.append(f"{qname} {', '.join(ratios)}")
        for part in parts:
            print(f"ratio {who} / relay (stdio, {pair}): {part}")


def side_by_side(results):
    cols = [("direct", "stdio direct"), ("socat", "stdio relay (socat)"),
            ("mcp-budget", "stdio via gateway"), ("base", "stdio via base"),
            ("mcp-compressor", "stdio via compressor")]
    cols = [c for c in cols if any(c[1] in s for _, s in results)]
    print("stdio tools/call p50 / p99 (ms), per peer pair, one interleaved run per pair")
    print(f"{'peer pair':<12}" + "".join(f"{name:>20}" for name, _ in cols))
    for pair, stats in results:
        row = [f"{stats[l][0]:.3f} / {stats[l][2]:.3f}" if l in stats else "-" for _, l in cols]
        print(f"{pair:<12}" + "".join(f"{cell:>20}" for cell in row))


def main():
    pairs = sys.argv[1:] or ["python"]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as work:
        for pair in pairs:
            spec = PAIRS[pair]
            peers = targets(pair, spec, work)
            try:
                stats = measure(peers)
            finally:
                for p in peers:
                    p.stop()
            report(pair, spec, stats)
            print()
            results.append((pair, stats))
    side_by_side(results)


if __name__ == "__main__":
    main()
