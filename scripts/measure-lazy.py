#!/usr/bin/env python3
"""Eager vs lazy upstreams, measured (issue 53): 10 real stdio servers (4 Node, 6 Python) behind
`mcp-budget serve --stdio`, started with `start = "eager"` and with `start = "lazy"` from the
manifests `mcp-budget pin` saved. For each mode and run:

  list_ms    from spawning the gateway to the answer of its first complete `tools/list`
             (initialize, then tools/list, sent at once: the gateway answers once it serves)
  rss_mb     resident memory of the gateway plus every process under it (VmRSS from /proc),
             read right after that answer, before any call
  children   processes under the gateway at that moment
  call1_ms   the first `tools/call` (time__get_current_time): for lazy, it starts the server
  call2_ms   the same call again (the server runs): call1 - call2 is the first call's added
             latency

Usage: scripts/measure-lazy.py [--runs N] [--binary PATH]   (default: 3 runs,
$MCP_BUDGET or target/release/mcp-budget, else target/debug/mcp-budget). Needs the test peers
(tests/peers/node_modules, tests/peers/.venv). Everything runs on 127.0.0.1 / stdio and is
stopped at the end of each run; nothing is left in ~/.cache (manifests go to a temp folder).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "tests" / "peers"
NODE = PEERS / "node_modules" / ".bin"
PY = PEERS / ".venv" / "bin"


def servers():
    """The 10 servers: name, command, args."""
    py = str(PY / "python")
    return [
        ("everything", str(NODE / "mcp-server-everything"), []),
        ("github", str(NODE / "mcp-server-github"), []),
        ("gitlab", str(NODE / "mcp-server-gitlab"), []),
        ("memory", str(NODE / "mcp-server-memory"), []),
        ("time", str(PY / "mcp-server-time"), ["--local-timezone", "UTC"]),
        ("git", str(PY / "mcp-server-git"), ["--repository", str(ROOT)]),
        ("named", py, [str(PEERS / "named_server.py"), "bench", "ping", "pong"]),
        ("era", py, [str(PEERS / "era_server.py"), "--stdio", "--era", "legacy"]),
        ("templates", py, [str(PEERS / "templates_server.py")]),
        ("strict", py, [str(PEERS / "strict_server.py")]),
    ]


def policy(path: Path, lazy: bool, manifests: Path):
    text = "version = 1\n\n[budget]\nenabled = false\n\n[aggregate]\n"
    text += f'start = "{"lazy" if lazy else "eager"}"\nidle_stop_secs = 0\n'
    text += f"manifest_dir = {json.dumps(str(manifests))}\n\n"
    for name, command, args in servers():
        text += f"[[upstream]]\nname = {json.dumps(name)}\ncommand = {json.dumps(command)}\n"
        text += f"args = {json.dumps(args)}\ntimeout_secs = 60\n"
        if name in ("github", "gitlab"):
            # They start without a real token (it is only sent with a call).
            key = "GITHUB" if name == "github" else "GITLAB"
            text += f'[upstream.env]\n{key}_PERSONAL_ACCESS_TOKEN = "unused"\n'
        text += "\n"
    path.write_text(text)


def tree(root: int):
    """`root` and every process under it."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Gateway:
    def __init__(self, binary: str, policy_file: Path):
        env = dict(os.environ, MCP_BUDGET_LOG="warn", NO_COLOR="1")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [binary, "serve", "--policy", str(policy_file), "--stdio", "--ready-timeout-secs", "60"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.next_id = 0

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def answer(self, wanted):
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the gateway closed its stdout")
            msg = json.loads(line)
            if msg.get("id") == wanted and "method" not in msg:
                return msg

    def call(self, method, params):
        return self.answer(self.request(method, params))

    def stop(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run(binary: str, policy_file: Path):
    gw = Gateway(binary, policy_file)
    init = {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "measure-lazy", "version": "0"}}
    first = gw.request("initialize", init)
    gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    listed = gw.request("tools/list", {})
    gw.answer(first)
    tools = gw.answer(listed)
    list_ms = (time.perf_counter() - gw.started) * 1000
    pids = tree(gw.proc.pid)
    rss = sum(rss_kb(p) for p in pids) / 1024
    children = len(pids) - 1
    n_tools = len(tools["result"]["tools"])
    call = {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}
    t = time.perf_counter()
    one = gw.call("tools/call", call)
    call1 = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    gw.call("tools/call", call)
    call2 = (time.perf_counter() - t) * 1000
    ok = "result" in one and not one["result"].get("isError")
    gw.stop()
    return {"list_ms": list_ms, "rss_mb": rss, "children": children, "tools": n_tools,
            "call1_ms": call1, "call2_ms": call2, "call_ok": ok}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--binary")
    args = parser.parse_args()
    binary = args.binary or os.environ.get("MCP_BUDGET")
    if not binary:
        release = ROOT / "target" / "release" / "mcp-budget"
        binary = str(release if release.exists() else ROOT / "target" / "debug" / "mcp-budget")
    work = Path(tempfile.mkdtemp(prefix="measure-lazy-"))
    try:
        manifests = work / "manifests"
        eager, lazy = work / "eager.toml", work / "lazy.toml"
        policy(eager, False, manifests)
        policy(lazy, True, manifests)
        subprocess.run([binary, "pin", "--policy", str(lazy), "--out", str(work / "lock.toml"),
                        "--ready-timeout-secs", "60"], check=True)
        results = {"eager": [], "lazy": []}
        for _ in range(args.runs):
            for mode, file in (("eager", eager), ("lazy", lazy)):
                results[mode].append(run(binary, file))
        print(f"binary: {binary}; {len(servers())} stdio servers; {args.runs} runs (median)")
        keys = ["list_ms", "rss_mb", "children", "tools", "call1_ms", "call2_ms"]
        print(f"{'mode':<6} " + " ".join(f"{k:>9}" for k in keys) + "  call_ok")
        med = {}
        for mode, runs in results.items():
            med[mode] = {k: statistics.median(r[k] for r in runs) for k in keys}
            ok = all(r["call_ok"] for r in runs)
            print(f"{mode:<6} " + " ".join(f"{med[mode][k]:>9.1f}" for k in keys) + f"  {ok}")
        ratio = med["lazy"]["rss_mb"] / med["eager"]["rss_mb"]
        added = med["lazy"]["call1_ms"] - med["lazy"]["call2_ms"]
        print(f"lazy RSS before any call: {ratio:.1%} of eager; "
              f"first lazy call's added latency: {added:.0f} ms")
        print(json.dumps({"runs": results, "median": med}, indent=None))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
