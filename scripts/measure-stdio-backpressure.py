#!/usr/bin/env python3
"""What a stdio host that writes and does not read costs the gateway.

Starts `mcp-budget serve --stdio` (no upstreams: the gateway answers `ping` itself), writes
`--lines` ping requests into its stdin from a thread, reads nothing from its stdout for
`--pause` seconds, then reads every answer. Prints the gateway's resident memory at the end of
the pause (VmRSS) and its peak (VmHWM, from /proc/<pid>/status), how many lines it had taken
from the pipe during the pause, and whether every id got exactly one answer.

usage: scripts/measure-stdio-backpressure.py [--bin PATH] [--lines 1000000] [--pause 10]
Without --bin it builds and uses target/release/mcp-budget. Not part of the test suite.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])  # kB
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--pause", type=float, default=10.0)
    args = ap.parse_args()
    binary = args.bin
    if not binary:
        subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "mcp-budget"],
                       cwd=ROOT, check=True)
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
        binary = os.path.join(target, "release", "mcp-budget")

    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as policy:
        policy.write("version = 1\n[budget]\nenabled = false\n")
    proc = subprocess.Popen([binary, "serve", "--stdio", "--policy", policy.name],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, bufsize=0)
    written = [0]

    def write():
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "backpressure", "version": "0"}}}
        proc.stdin.write((json.dumps(init) + "\n").encode())
        batch = 1000
        for start in range(1, args.lines + 1, batch):
            end = min(start + batch, args.lines + 1)
            chunk = "".join(f'{{"jsonrpc":"2.0","id":{i},"method":"ping"}}\n'
                            for i in range(start, end))
            proc.stdin.write(chunk.encode())
            written[0] = end - 1

    writer = threading.Thread(target=write, daemon=True)
    started = time.monotonic()
    writer.start()
    time.sleep(args.pause)
    rss_paused = status(proc.pid, "VmRSS")
    written_paused = written[0]

    answered = bytearray(args.lines + 1)
    twice = wrong = 0
    got = 0
    for line in proc.stdout:
        msg = json.loads(line)
        i = msg.get("id")
        if i == 0:
            continue
        if msg.get("result") != {}:
            wrong += 1
        if answered[i]:
            twice += 1
        answered[i] = 1
        got += 1
        if got == args.lines:
            break
    hwm = status(proc.pid, "VmHWM")
    elapsed = time.monotonic() - started
    writer.join()
    proc.stdin.close()
    proc.wait(timeout=30)
    os.unlink(policy.name)
    missing = args.lines - sum(answered[1:])
    print(f"lines {args.lines}, stdout not read for {args.pause:.0f} s: "
          f"{written_paused} lines written into its stdin by then (the pipe holds ~64 KiB of them)")
    print(f"VmRSS at the end of the pause {rss_paused / 1024:.1f} MiB, "
          f"peak VmHWM {hwm / 1024:.1f} MiB")
    print(f"answers {got}: missing {missing}, twice {twice}, not {{}} {wrong}; "
          f"{elapsed:.1f} s in all")
    sys.exit(0 if missing == 0 and twice == 0 and wrong == 0 else 1)


if __name__ == "__main__":
    main()
