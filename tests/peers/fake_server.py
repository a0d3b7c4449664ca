"""A deliberately misbehaving stdio MCP server for the gateway's fault tests (plain Python, no SDK).

usage: fake_server.py hang | garbage | flood

Tools:
  hang       never answered (the gateway must time out, or pass on a client's cancel)
  cancelled  returns the request ids this server received `notifications/cancelled` for
  echo       returns its "message" argument (the `traceparent` of the request's `_meta`, or
             "-", when the message is "traceparent?"; half of a surrogate pair, the
             `\\ud800` escape alone, when it is "surrogate?")
  received   returns the arguments of every tools/call this server received (JSON list)
  grow       adds a tool `extra_<n>` and sends notifications/tools/list_changed before answering
  flood      (`flood` mode only) sends `count` progress notifications carrying `size` bytes
             each, then answers
In `garbage` mode every answer is preceded by lines that are not JSON-RPC (a banner, broken JSON,
a JSON array, an object without "jsonrpc", a response to an id nobody sent).
"""
import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "hang"
cancelled = []
received = []


def send(obj):
    if MODE == "garbage":
        sys.stdout.write("this is not JSON at all\n")
        sys.stdout.write('{"jsonrpc": "2.0", "id": 1, "result": \n')
        sys.stdout.write("[1, 2, 3]\n")
        sys.stdout.write('{"hello": "world"}\n')
        sys.stdout.write('{"jsonrpc": "2.0", "id": 987654, "result": {}}\n')
        sys.stdout.write("\n")
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": n, "description": d, "inputSchema": {"type": "object", "properties": p}}
    for n, d, p in [
        ("hang", "Never answers.", {}),
        ("cancelled", "Request ids whose cancellation this server received.", {}),
        ("echo", "Echoes the message.", {"message": {"type": "string"}}),
        ("grow", "Adds a tool and says so.", {}),
        ("received", "The arguments of every call this server received.", {}),
    ]
]
if MODE == "flood":
    TOOLS.append({"name": "flood", "description": "Sends many progress notifications, then answers.",
                  "inputSchema": {"type": "object", "properties": {
                      "count": {"type": "integer"}, "size": {"type": "integer"}}}})

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "notifications/cancelled":
        cancelled.append(msg["params"]["requestId"])
        print(f"cancelled {msg['params']}", file=sys.stderr, flush=True)
        continue
    if mid is None or method is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": f"fake-{MODE}", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        args = msg["params"].get("arguments") or {}
        if name != "received":
            received.append(args)
        if name == "hang":
            continue
        if name == "grow":
            n = len(TOOLS)
            TOOLS.append({"name": f"extra_{n}", "inputSchema": {"type": "object"}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        if name == "flood":
            token = (msg["params"].get("_meta") or {}).get("progressToken")
            pad = "x" * int(args.get("size", 100))
            for i in range(int(args.get("count", 1000))):
                sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                    "progressToken": token, "progress": i, "message": pad}}) + "\n")
            args = {"message": "flooded"}
        text = json.dumps(cancelled) if name == "cancelled" else str(args.get("message"))
        if name == "received":
            text = json.dumps(received)
        if name == "echo" and args.get("message") == "traceparent?":
            text = (msg["params"].get("_meta") or {}).get("traceparent", "-")
        if name == "echo" and args.get("message") == "surrogate?":
            text = "half \ud800 of a pair"  # json.dumps writes it as the escape `\ud800`
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
