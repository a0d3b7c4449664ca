"""Python `mcp` SDK client in 2025-era mode (`mode="legacy"`: initialize + Mcp-Session-Id) that
keeps one session across gateway restarts and replicas (tests/scaleout.rs).

usage: session_client.py <url>
env:   PLAN = JSON {"steps": [STEP...], "sampling": text?, "elicit": {...}?} (with "sampling"
       the client answers sampling/createMessage with that text; with "elicit", elicitation
       requests are accepted with that content)
STEP:  {"op": "list_tools"}
       {"op": "call", "name": str, "args": {...}, "progress": bool}
       {"op": "pause"}  prints {"paused": n} and waits for a line on stdin (the test restarts
                        or kills gateways meanwhile)
Each step has STEP_TIMEOUT seconds (env, default 20). Prints one JSON object last: steps (each
with result or error, progress seen), requests (every HTTP request the SDK sent: method, the
JSON-RPC method of a POST, its Mcp-Session-Id) and initializes (how many initialize requests).
"""
import asyncio
import json
import os
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp import types
from mcp.shared.exceptions import MCPError


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    url = sys.argv[1]
    plan = json.loads(os.environ.get("PLAN", "{}"))
    step_timeout = float(os.environ.get("STEP_TIMEOUT", "20"))
    requests = []

    async def record(request):
        method = None
        if request.method == "POST":
            try:
                method = json.loads(request.content).get("method")
            except Exception:  # noqa: BLE001 - a body we cannot read is recorded without method
                pass
        requests.append(
            {"http": request.method, "method": method, "session": request.headers.get("mcp-session-id")}
        )

    timeout = httpx2.Timeout(30.0, read=300.0)
    http = httpx2.AsyncClient(timeout=timeout, event_hooks={"request": [record]})
    steps, paused = [], 0

    async def sampling(_ctx, params):
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=plan["sampling"]),
            model="session-client-model",
            stop_reason="endTurn",
        )

    async def elicitation(_ctx, params):
        return types.ElicitResult(action="accept", content=plan["elicit"])

    kwargs = {"mode": "legacy"}
    if plan.get("sampling") is not None:
        kwargs["sampling_callback"] = sampling
    if plan.get("elicit") is not None:
        kwargs["elicitation_callback"] = elicitation
    async with http, Client(streamable_http_client(url, http_client=http), **kwargs) as client:
        protocol = client.protocol_version
        for step in plan.get("steps", []):
            op = step["op"]
            entry = {"op": op, "name": step.get("name")}
            if op == "pause":
                paused += 1
                print(json.dumps({"paused": paused}), flush=True)
                await anyio.to_thread.run_sync(sys.stdin.readline)
                continue
            try:
                with anyio.fail_after(step_timeout):
                    if op == "list_tools":
                        entry["tools"] = [t.name for t in (await client.list_tools()).tools]
                    elif op == "call":
                        progress = []

                        async def on_progress(p, total, message, progress=progress):
                            progress.append(p)

                        callback = on_progress if step.get("progress") else None
                        result = await client.call_tool(
                            step["name"], step.get("args", {}), progress_callback=callback
                        )
                        entry["result"] = dump(result)
                        entry["progress"] = progress
                    else:
                        raise ValueError(f"unknown op {op}")
            except MCPError as err:
                entry["error"] = {"code": err.code, "message": err.message, "data": err.data}
            except TimeoutError:
                entry["error"] = {"timeout": step_timeout}
            except Exception as err:  # noqa: BLE001 - reported, the test decides
                entry["error"] = {"exception": repr(err)}
            steps.append(entry)
    initializes = sum(1 for r in requests if r["method"] == "initialize")
    print(json.dumps({"protocol": protocol, "steps": steps, "requests": requests, "initializes": initializes}), flush=True)


asyncio.run(main())
