"""A stdio MCP server (plain Python, no SDK) that lists the tools of a saved `tools/list` result,
for the offline = live tests (tests/it/offline_live_binary.rs).

usage: saved_server.py FILE

The tools are listed exactly as the file has them (the test writes them in shuffled order with
shuffled keys). A call of any listed tool answers its name.
"""
import json
import sys

FILE = sys.argv[1]

with open(FILE, encoding="utf-8") as f:
    saved = json.load(f)
TOOLS = saved["tools"] if isinstance(saved, dict) else saved


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if mid is None or method is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "saved", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "content": [{"type": "text", "text": name}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid,
              "error": {"code": -32601, "message": f"no {method}"}})
