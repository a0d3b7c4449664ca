"""Python `mcp` 2.x client driven by the era matrix tests (tests/it/eras.rs).

usage: era_client.py stdio <command> [args...]
       era_client.py http <url>
env:   MODE = auto (2026-07-28 when the server answers `server/discover`, the SDK default)
              | legacy (initialize handshake, 2025-11-25)
       PLAN = JSON {"steps": [STEP...], "sampling": str, "elicit": {content}, "roots": [uri...]}
       DISCOVER_TIMEOUT = seconds the `server/discover` probe waits (default 30; the SDK's is 10)
STEP:  {"op": "list_tools"}
       {"op": "call", "name": str, "args": {...}, "progress": bool}
       {"op": "cancel", "name": str, "args": {...}, "after_progress": n}
           calls with a progress callback and cancels the call (the SDK's own cancellation:
           `notifications/cancelled` on stdio and 2025 HTTP, aborting the POST on 2026 HTTP) once
           n progress notifications arrived
       {"op": "list_changed", "name": str, "args": {...}}
           waits for a tools list change caused by calling `name`: `subscriptions/listen` on
           2026-07-28, `notifications/tools/list_changed` on 2025; then re-lists the tools
       {"op": "notified", "name": str, "args": {...}, "method": str}
           calls `name` and waits for a server notification `method` (e.g.
           `notifications/resources/list_changed`) after it; `notified` says whether it came
       {"op": "list_prompts"} {"op": "get_prompt", "name", "args"} {"op": "list_resources"}
       {"op": "list_templates"} {"op": "read_resource", "uri"}
Each step has STEP_TIMEOUT seconds (env, default 8). Prints one JSON object on stdout: protocol,
server, steps (each with result or error, progress seen, cancelled, ms), sampling / elicitation /
roots (requests the callbacks got), notifications (methods of server notifications seen).
The callbacks are installed only when the plan has `sampling` / `elicit` / `roots`.
"""
import asyncio
import json
import os
import sys
import time

import anyio
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


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    kind, rest = sys.argv[1], sys.argv[2:]
    if kind == "stdio":
        # The environment is not inherited by default: pass it (PATH, the test's tags).
        target = StdioServerParameters(command=rest[0], args=rest[1:], env=dict(os.environ))
    else:
        target = rest[0]
    plan = json.loads(os.environ.get("PLAN", "{}"))
    step_timeout = float(os.environ.get("STEP_TIMEOUT", "8"))
    sampled, elicited, rooted, notifications = [], [], [], []
    tools_changed = anyio.Event()
    awaited = {}  # notification method -> anyio.Event, for `notified` steps

    async def sampling(_ctx, params):
        sampled.append(dump(params))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=plan["sampling"]),
            model="era-client-model",
            stop_reason="endTurn",
        )

    async def elicitation(_ctx, params):
        elicited.append(dump(params))
        return types.ElicitResult(action="accept", content=plan["elicit"])

    async def list_roots(_ctx):
        rooted.append({})
        return types.ListRootsResult(roots=[types.Root(uri=u) for u in plan["roots"]])

    async def on_message(message):
        if isinstance(message, Exception):
            notifications.append(f"exception: {message!r}")
            return
        root = getattr(message, "root", message)
        method = getattr(root, "method", type(root).__name__)
        notifications.append(method)
        if method == "notifications/tools/list_changed":
            tools_changed.set()
        if method in awaited:
            awaited[method].set()

    kwargs = {"mode": os.environ.get("MODE", "auto"), "message_handler": on_message}
    if plan.get("sampling") is not None:
        kwargs["sampling_callback"] = sampling
    if plan.get("elicit") is not None:
        kwargs["elicitation_callback"] = elicitation
    if plan.get("roots") is not None:
        kwargs["list_roots_callback"] = list_roots
    out = {}

    async def list_tools(client):
        tools, cursor = [], None
        while True:
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            tools += [t.name for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def run_step(client, step, entry):
        op = step["op"]
        if op == "list_tools":
            entry["tools"] = await list_tools(client)
        elif op in ("call", "cancel"):
            progress = []
            enough = anyio.Event()

            async def on_progress(p, total, message):
                progress.append({"progress": p, "total": total, "message": message})
                if len(progress) >= step.get("after_progress", 1):
                    enough.set()

            entry["progress"] = progress
            wants_progress = step.get("progress") or op == "cancel"
            call = client.call_tool(
                step["name"],
                step.get("args", {}),
                progress_callback=on_progress if wants_progress else None,
            )
            if op == "call":
                entry["result"] = dump(await call)
                return
            entry["cancelled"] = False
            async with anyio.create_task_group() as tg:

                async def do_call():
                    entry["result"] = dump(await call)
                    tg.cancel_scope.cancel()

                tg.start_soon(do_call)
                await enough.wait()
                tg.cancel_scope.cancel()
                entry["cancelled"] = "result" not in entry
        elif op == "list_changed":
            before = await list_tools(client)
            if client.protocol_version == "2026-07-28":
                async with client.listen(tools_list_changed=True) as sub:
                    entry["result"] = dump(await client.call_tool(step["name"], step.get("args", {})))
                    async for _event in sub:
                        break
            else:
                entry["result"] = dump(await client.call_tool(step["name"], step.get("args", {})))
                await tools_changed.wait()
            after = await list_tools(client)
            entry["added"] = [t for t in after if t not in before]
        elif op == "notified":
            came = awaited[step["method"]] = anyio.Event()
            entry["result"] = dump(await client.call_tool(step["name"], step.get("args", {})))
            with anyio.move_on_after(step_timeout / 2):
                await came.wait()
            entry["notified"] = came.is_set()
        elif op == "list_prompts":
            entry["prompts"] = [p.name for p in (await client.list_prompts()).prompts]
        elif op == "get_prompt":
            entry["result"] = dump(await client.get_prompt(step["name"], step.get("args")))
        elif op == "list_resources":
            entry["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
        elif op == "list_templates":
            res = await client.list_resource_templates()
            entry["templates"] = [t.uri_template for t in res.resource_templates]
        elif op == "read_resource":
            entry["result"] = dump(await client.read_resource(step["uri"]))
        else:
            raise ValueError(f"unknown op {op}")

    async with Client(target, **kwargs) as client:
        out["protocol"] = client.protocol_version
        out["server"] = client.server_info.model_dump(mode="json") if client.server_info else None
        steps = []
        for step in plan.get("steps", []):
            entry = {"op": step["op"], "name": step.get("name")}
            started = time.monotonic()
            try:
                with anyio.fail_after(step_timeout):
                    await run_step(client, step, entry)
            except MCPError as err:
                entry["error"] = {"code": err.code, "message": err.message, "data": err.data}
            except TimeoutError:
                entry["error"] = {"timeout": step_timeout}
            except Exception as err:  # noqa: BLE001 - reported, the test decides
                entry["error"] = {"exception": repr(err)}
            entry["ms"] = round(1000 * (time.monotonic() - started))
            steps.append(entry)
        out["steps"] = steps
    out["sampling"] = sampled
    out["elicitation"] = elicited
    out["roots"] = rooted
    out["notifications"] = notifications
    print(json.dumps(out), flush=True)


asyncio.run(main())
