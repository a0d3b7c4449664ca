"""A stdio MCP server whose resource templates change on a tool call while its resources stay,
for the gateway's `notifications/resources/list_changed` tests (tests/it/templates.rs). Plain
Python JSON-RPC, no SDK, so that what it lists is exactly what the tests compare.

usage: templates_server.py [--templates-only]

Speaks the 2025-11-25 / 2025-06-18 `initialize` handshake, declares `tools` and `resources`
(`listChanged`). Lists one resource, `tpl://static`, and the templates `tpl://item/{id}` plus one
per `add_template` call; with `--templates-only`, no resource (templates alone). Tools:
  add_template {name}   adds the template `tpl://<name>/{id}`, sends
                        `notifications/resources/list_changed`, then answers `added <name>`
"""
import json
import sys

VERSIONS = ("2025-11-25", "2025-06-18")
templates = [{"uriTemplate": "tpl://item/{id}", "name": "item"}]
RESOURCES = [] if "--templates-only" in sys.argv else [{"uri": "tpl://static", "name": "static"}]
TOOLS = [
    {
        "name": "add_template",
        "description": "Adds a resource template tpl://<name>/{id}.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    }
]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def answer(rid, result):
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def handle(msg):
    method, rid = msg.get("method"), msg.get("id")
    params = msg.get("params") or {}
    if rid is None:
        return
    if method == "initialize":
        asked = params.get("protocolVersion")
        answer(rid, {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
            "capabilities": {"tools": {}, "resources": {"listChanged": True}},
            "serverInfo": {"name": "templates-server", "version": "1.0.0"},
        })
    elif method == "tools/list":
        answer(rid, {"tools": TOOLS})
    elif method == "resources/list":
        answer(rid, {"resources": RESOURCES})
    elif method == "resources/templates/list":
        answer(rid, {"resourceTemplates": templates})
    elif method == "tools/call" and params.get("name") == "add_template":
        name = str((params.get("arguments") or {}).get("name", "more"))
        templates.append({"uriTemplate": f"tpl://{name}/{{id}}", "name": name})
        send({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})
        answer(rid, {"content": [{"type": "text", "text": f"added {name}"}]})
    elif method == "ping":
        answer(rid, {})
    else:
        send({"jsonrpc": "2.0", "id": rid,
              "error": {"code": -32601, "message": f"Method not found: {method}"}})


for line in sys.stdin:
    line = line.strip()
    if line:
        handle(json.loads(line))
