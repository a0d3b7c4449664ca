#!/usr/bin/env python3
"""Fairness between two clients of one gateway: does one client's flood slow another's calls?

Starts the gateway binary (streamable HTTP, 2025-era sessions, on 127.0.0.1) in front of the
real `@modelcontextprotocol/server-everything` over stdio, with two API-key clients `a` and
`b` (`[[client]]`). Client B calls the fast `echo` tool; its latency is measured idle, then
while client A keeps N slow calls in flight (`trigger-long-running-operation`, a few seconds
each, with progress tokens so progress notifications flow too). Run once without `[limits]`
and once with the `[limits]` section a deployment would use (`--limits`). Prints one table:
idle p50/p99, flooded p50/p99, and flooded/idle p50 ratio per run.

Loopback only; every loop is bounded in count and time and the gateway is stopped at the end.

Usage: scripts/fairness.py [--binary PATH] [--flood 100] [--slow-secs 5] [--samples 200]
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = {"a": "k-fair-a-1d9e", "b": "k-fair-b-7c2a"}
# What a deployment would set: each client at most 16 calls at once (the rest queue, then are
# refused), and no client may hold the upstream's whole line.
LIMITS = """
[limits]
in_flight = 16
queue = 128
queue_ms = 30000
"""


def policy(port, everything, limits):
    return f"""version = 1

[downstream]
http = "127.0.0.1:{port}"

[budget]
enabled = false

[[client]]
name = "a"
api_key_env = "FAIR_A_KEY"
allow = ["e/*", "f/*"]

[[client]]
name = "b"
api_key_env = "FAIR_B_KEY"
allow = ["e/*", "f/*"]

[[upstream]]
name = "e"
command = "{everything}"
timeout_secs = 120

# A second instance that A does not flood: B's calls to it show what the gateway alone costs.
[[upstream]]
name = "f"
command = "{everything}"
{limits}"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    """One 2025-era streamable HTTP session (one TCP connection per thread)."""

    def __init__(self, port, key):
        self.port, self.key, self.session, self.ids = port, key, None, 0
        self.lock = threading.Lock()

    def post(self, body, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        headers = {"Content-Type": "application/json", "X-Api-Key": self.key,
                   "Accept": "application/json, text/event-stream"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
            headers["Mcp-Protocol-Version"] = "2025-06-18"
        conn.request("POST", "/mcp", json.dumps(body), headers)
        resp = conn.getresponse()
        data = resp.read().decode()
        sid = resp.getheader("Mcp-Session-Id")
        conn.close()
        if sid:
            self.session = sid
        want = body.get("id")
        sse = resp.getheader("Content-Type", "").startswith("text/event-stream")
        for line in data.splitlines() if sse else [data]:
            if sse and not line.startswith("data:"):
                continue
            line = line.removeprefix("data:").strip()
            if not line:
                continue
            msg = json.loads(line)
            if want is not None and msg.get("id") == want:
                return msg
        return None

    def next_id(self):
        with self.lock:
            self.ids += 1
            return self.ids

    def initialize(self):
        r = self.post({"jsonrpc": "2.0", "id": self.next_id(), "method": "initialize",
                       "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "fairness", "version": "1"}}})
        assert r and "result" in r, r
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool, args, progress=False):
        i = self.next_id()
        params = {"name": tool, "arguments": args}
        if progress:
            params["_meta"] = {"progressToken": f"p{i}"}
        return self.post({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params},
                         timeout=120)


def echo_latencies(client, n, deadline, tool="e__echo"):
    out = []
    for i in range(n):
        if time.monotonic() > deadline:
            break
        start = time.perf_counter()
        r = client.call(tool, {"message": f"b {i}"})
        out.append((time.perf_counter() - start) * 1000)
        assert r and "result" in r, r
    return out


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run(args, limits):
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "policy.toml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(policy(port, args.everything, LIMITS if limits else ""))
        env = dict(os.environ, FAIR_A_KEY=KEYS["a"], FAIR_B_KEY=KEYS["b"],
                   MCP_BUDGET_LOG="warn")
        gw = subprocess.Popen([args.binary, "serve", "--policy", path], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            a, b = Client(port, KEYS["a"]), Client(port, KEYS["b"])
            a.initialize()
            b.initialize()
            echo_latencies(b, 20, time.monotonic() + 30)  # warm up
            idle = echo_latencies(b, args.samples, time.monotonic() + 60)
            results, stop = [], time.monotonic() + args.slow_secs * 4 + 60

            def slow():
                r = a.call("e__trigger-long-running-operation",
                           {"duration": args.slow_secs, "steps": args.slow_secs}, progress=True)
                results.append(r)

            flood = [threading.Thread(target=slow) for _ in range(args.flood)]
            for t in flood:
                t.start()
            time.sleep(1.0)  # the flood is in flight
            half = (args.slow_secs - 1.5) / 2
            flooded = echo_latencies(b, args.samples, time.monotonic() + half)
            other = echo_latencies(b, args.samples, time.monotonic() + half, "f__echo")
            for t in flood:
                t.join(max(0.0, stop - time.monotonic()))
            ok = sum(1 for r in results if r and "result" in r)
            refused = sum(1 for r in results if r and "error" in r)
            return idle, flooded, other, ok, refused
        finally:
            gw.terminate()
            gw.wait(10)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(REPO, "target", "debug", "mcp-budget"))
    parser.add_argument("--everything", default=os.path.join(
        REPO, "tests", "peers", "node_modules", ".bin", "mcp-server-everything"))
    parser.add_argument("--flood", type=int, default=100)
    parser.add_argument("--slow-secs", type=int, default=5)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    print(f"client B's e__echo latency (ms) while client A keeps {args.flood} slow calls "
          f"({args.slow_secs} s each) in flight; gateway {os.path.relpath(args.binary, REPO)}")
    print("\n| run | idle p50 | idle p99 | flooded p50 | flooded p99 | p50 ratio | other upstream "
          "flooded p50 / p99 | B samples (idle/flooded/other) | A's slow calls ok / refused |")
    print("|---|---|---|---|---|---|---|---|---|")
    for limits in (False, True):
        idle, flooded, other, ok, refused = run(args, limits)
        i50, i99, f50, f99 = pct(idle, 50), pct(idle, 99), pct(flooded, 50), pct(flooded, 99)
        name = "with [limits] in_flight = 16" if limits else "no [limits]"
        print(f"| {name} | {i50:.2f} | {i99:.2f} | {f50:.2f} | {f99:.2f} | {f50 / i50:.2f} | "
              f"{pct(other, 50):.2f} / {pct(other, 99):.2f} | {len(idle)}/{len(flooded)}/{len(other)}"
              f" | {ok} / {refused} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
