"""Python `mcp` 2.x client with credentials, driven by tests/it/identity.rs.

usage: auth_client.py http <url>
       auth_client.py stdio <command> [args...]
env:   MODE    = legacy | auto (default legacy)
       HEADERS = JSON object of HTTP headers sent with every request (the credentials)
       PLAN    = JSON {"calls": [{"name": str, "args": {...}}]}
Prints one JSON object: tools (names), prompts (names) and calls (each with result or error).
"""
import asyncio
import json
import os
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


async def main() -> None:
    kind, rest = sys.argv[1], sys.argv[2:]
    headers = json.loads(os.environ.get("HEADERS", "{}"))
    plan = json.loads(os.environ.get("PLAN", "{}"))
    if kind == "stdio":
        target = StdioServerParameters(command=rest[0], args=rest[1:], env=dict(os.environ))
    else:
        http = httpx2.AsyncClient(headers=headers, timeout=30)
        target = streamable_http_client(rest[0], http_client=http)
    out = {}
    async with Client(target, mode=os.environ.get("MODE", "legacy")) as client:
        out["protocol"] = client.protocol_version
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        calls = []
        for call in plan.get("calls", []):
            entry = {"name": call["name"]}
            try:
                res = await client.call_tool(call["name"], call.get("args", {}))
                entry["result"] = res.model_dump(mode="json", by_alias=True, exclude_none=True)
            except MCPError as err:
                entry["error"] = {"code": err.code, "message": err.message, "data": err.data}
            calls.append(entry)
        out["calls"] = calls
    print(json.dumps(out), flush=True)


asyncio.run(main())
