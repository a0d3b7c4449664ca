"""Python `mcp` 2.x client driven by the integration tests (tests/it).

usage: py_client.py stdio <command> [args...]
       py_client.py http <url>
env:   MODE  = legacy | auto (default legacy)
       PLAN  = JSON {"calls": [{"name": str, "args": {...}, "progress": bool, "timeout": s}],
                     "sampling": bool, "elicit": {form content to accept with}}
       DISCOVER_TIMEOUT = seconds the `server/discover` probe waits in mode auto (default 30;
                          the SDK's is 10)
Prints one JSON object on stdout: protocol, server, instructions, tools (name + inputSchema), calls (each with
result or error, and the progress notifications seen), sampling and elicitation (requests the
callbacks got).
"""
import asyncio
import json
import os
import sys

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
import mcp.client.session as sdk_session

# A gateway started over stdio answers nothing before its upstreams are ready (up to its
# --ready-timeout-secs); on a loaded machine that can outlast the SDK's 10 s `server/discover`
# probe in mode "auto", and the client would fall back to the 2025 handshake. The tests are
# about which era is spoken, not how fast upstreams start: the probe waits as long as they may.
assert hasattr(sdk_session, "DISCOVER_TIMEOUT_SECONDS"), "the SDK renamed its probe timeout"
sdk_session.DISCOVER_TIMEOUT_SECONDS = float(os.environ.get("DISCOVER_TIMEOUT", "30"))


async def main() -> None:
    kind, rest = sys.argv[1], sys.argv[2:]
    if kind == "stdio":
        # The environment is not inherited by default: pass it (PATH, the test's tags).
        target = StdioServerParameters(command=rest[0], args=rest[1:], env=dict(os.environ))
    else:
        target = rest[0]
    plan = json.loads(os.environ.get("PLAN", "{}"))
    sampled = []

    async def sampling(_ctx, params):
        sampled.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled by py_client"),
            model="py-client-model",
            stop_reason="endTurn",
        )

    elicited = []

    async def elicitation(_ctx, params):
        elicited.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.ElicitResult(action="accept", content=plan["elicit"])

    kwargs = {"mode": os.environ.get("MODE", "legacy")}
    if plan.get("sampling"):
        kwargs["sampling_callback"] = sampling
    if plan.get("elicit") is not None:
        kwargs["elicitation_callback"] = elicitation
    out = {}
    async with Client(target, **kwargs) as client:
        out["protocol"] = client.protocol_version
        out["server"] = client.server_info.model_dump(mode="json") if client.server_info else None
        out["instructions"] = client.instructions
        tools = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools += [
                {"name": t.name, "inputSchema": t.input_schema, "title": t.title,
                 "description": t.description, "meta": t.meta}
                for t in page.tools
            ]
            cursor = page.next_cursor
            if not cursor:
                break
        out["tools"] = tools
        calls = []
        for call in plan.get("calls", []):
            progress = []

            async def on_progress(p, total, message, progress=progress):
                progress.append({"progress": p, "total": total, "message": message})

            entry = {"name": call["name"]}
            try:
                res = await client.call_tool(
                    call["name"],
                    call.get("args", {}),
                    read_timeout_seconds=call.get("timeout"),
                    progress_callback=on_progress if call.get("progress") else None,
                )
                entry["result"] = res.model_dump(mode="json", by_alias=True, exclude_none=True)
            except MCPError as err:
                entry["error"] = {"code": err.code, "message": err.message, "data": err.data}
            entry["progress"] = progress
            calls.append(entry)
        out["calls"] = calls
        out["sampling"] = sampled
        out["elicitation"] = elicited
    print(json.dumps(out), flush=True)


asyncio.run(main())
