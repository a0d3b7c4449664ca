"""A stdio MCP server (plain Python, no SDK) whose tools carry the input schemas strict argument
checks must survive, for tests/it/strict_args.rs.

Tools (each takes a string `q`, echoed back):
  draft3       "$schema": draft-03, otherwise a schema every later draft reads the same way
  empty        "$schema": ""
  custom       "$schema": a custom meta-schema URI
  listed       "type": ["object"] (a type array) instead of "type": "object"
  broken       "$schema": draft-03 with draft 3's `"required": true`: compiles as no later draft
  received     the raw lines of every tools/call and prompts/get this server received (JSON list)
Prompt:
  greet        arguments `who` (required) and `tone`; answers "hello <who>"
"""
import json
import sys

DRAFT3 = "http://json-schema.org/draft-03/schema#"
Q = {"q": {"type": "string"}}


def tool(name, schema):
    return {"name": name, "description": f"Echoes q ({name}).", "inputSchema": schema}


TOOLS = [
    tool("draft3", {"$schema": DRAFT3, "type": "object", "properties": Q}),
    tool("empty", {"$schema": "", "type": "object", "properties": Q}),
    tool("custom", {"$schema": "https://example.com/schemas/my-meta", "type": "object", "properties": Q}),
    tool("listed", {"type": ["object"], "properties": Q}),
    tool("broken", {"$schema": DRAFT3, "type": "object",
                    "properties": {"q": {"type": "string", "required": True}}}),
    tool("received", {"type": "object", "properties": {}}),
]
PROMPTS = [{"name": "greet", "description": "Greets someone.",
            "arguments": [{"name": "who", "required": True}, {"name": "tone"}]}]
received = []


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
    params = msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}, "prompts": {}},
            "serverInfo": {"name": "strict-schemas", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "prompts/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"prompts": PROMPTS}})
    elif method == "tools/call":
        if params.get("name") == "received":
            text = json.dumps(received)
        else:
            received.append(line)
            text = str((params.get("arguments") or {}).get("q"))
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
    elif method == "prompts/get":
        received.append(line)
        who = (params.get("arguments") or {}).get("who")
        send({"jsonrpc": "2.0", "id": mid, "result": {"messages": [
            {"role": "user", "content": {"type": "text", "text": f"hello {who}"}}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
