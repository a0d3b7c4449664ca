"""Two Python `mcp` 2.x client sessions, A and B, on one gateway over streamable HTTP, driven by
one plan in one asyncio program (tests/it/isolation.rs): what each client's callbacks got shows
whether server->client traffic reached the right one.

usage: two_clients.py <url>
env:   PLAN = JSON {"clients": {NAME: CLIENT, ...}, "steps": [STEP, ...]}
       STEP_TIMEOUT = seconds a call may take (default 15)
CLIENT: {"sampling": text, "elicit": text, "roots": [uri, ...], "log": true, "updates": true}
        which callbacks the client installs (only those named): sampling answers with `text`
        (after "sampling_delay" seconds when given; a cancelled one is recorded in "cancelled"),
        elicitation accepts with {"answer": text} (after "elicit_delay" seconds when given, a
        person filling in the form), roots lists `uri`s, log records log messages,
        updates records notifications/resources/updated
        "headers": {name: value} are sent with every HTTP request (credentials)
        "mode": the SDK's era mode (default "legacy": a 2025-era session; "auto": 2026-07-28)
STEP:  {"op": "call", "client": NAME, "name": tool, "args": {...}, "as": label,
        "progress": bool, "background": bool, "cancel_after": s}
           a tools/call (with a progress callback when `progress`, so that the SDK sends a
           progressToken); a background call runs on while the next steps do; one with
           `cancel_after` is abandoned after `s` seconds (the SDK sends notifications/cancelled)
           and recorded as {"abandoned": true}
       {"op": "join"}                    waits for every background call
       {"op": "sleep", "seconds": s}
       {"op": "mark", "name": str}       names what follows; callbacks record the current mark
       {"op": "set_level", "client": NAME, "level": str}   logging/setLevel
       {"op": "roots_changed", "client": NAME}             notifications/roots/list_changed
       {"op": "subscribe", "client": NAME, "uri": uri}      resources/subscribe
       {"op": "listen", "client": NAME, "uri": uri, "seconds": s}
           a 2026-07-28 subscriptions/listen for resource `uri`, in the background until `join`
           or `s` seconds; its events are recorded as updates
Prints one JSON object on stdout:
  {"calls": {label: {"client", "result" | "error", "ms"}},
   "clients": {NAME: {"sampling": [{"mark", "params"}], "elicitation": [...], "roots": [{"mark"}],
                      "logs": [{"mark", "params"}], "updates": [{"mark", "params"}]}}}
"""
import asyncio
import json
import math
import os
import sys
import time
from contextlib import AsyncExitStack

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    url = sys.argv[1]
    plan = json.loads(os.environ["PLAN"])
    step_timeout = float(os.environ.get("STEP_TIMEOUT", "15"))
    mark = ["start"]
    seen = {}

    def callbacks(name, spec):
        got = {"sampling": [], "elicitation": [], "roots": [], "logs": [], "updates": []}
        seen[name] = got
        kwargs = {"mode": spec.get("mode", "legacy")}

        async def answer_after(key):
            """Waits spec[key] seconds when given; a wait cut short is recorded in "cancelled"."""
            if key not in spec:
                return
            try:
                await anyio.sleep(spec[key])
            except anyio.get_cancelled_exc_class():
                got.setdefault("cancelled", []).append({"mark": mark[0]})
                raise

        async def sampling(_ctx, params):
            got["sampling"].append({"mark": mark[0], "params": dump(params)})
            await answer_after("sampling_delay")
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=spec["sampling"]),
                model=f"model-of-{name}",
                stop_reason="endTurn",
            )

        async def elicitation(_ctx, params):
            got["elicitation"].append({"mark": mark[0], "params": dump(params)})
            await answer_after("elicit_delay")
            return types.ElicitResult(action="accept", content={"answer": spec["elicit"]})

        async def list_roots(_ctx):
            got["roots"].append({"mark": mark[0]})
            return types.ListRootsResult(roots=[types.Root(uri=u) for u in spec["roots"]])

        async def logging(params):
            got["logs"].append({"mark": mark[0], "params": dump(params)})

        if "sampling" in spec:
            kwargs["sampling_callback"] = sampling
        if "elicit" in spec:
            kwargs["elicitation_callback"] = elicitation
        if "roots" in spec:
            kwargs["list_roots_callback"] = list_roots
        async def messages(message):
            if isinstance(message, types.ResourceUpdatedNotification):
                got["updates"].append({"mark": mark[0], "params": dump(message.params)})

        if spec.get("log"):
            kwargs["logging_callback"] = logging
        if spec.get("updates"):
            kwargs["message_handler"] = messages
        return kwargs

    calls = {}

    async def call(client, step):
        label = step["as"]
        entry = {"client": step["client"]}
        calls[label] = entry
        started = time.monotonic()

        async def on_progress(_p, _total, _message):
            pass

        try:
            with anyio.fail_after(step_timeout):
                with anyio.move_on_after(step.get("cancel_after", math.inf)) as scope:
                    res = await client.call_tool(
                        step["name"],
                        step.get("args", {}),
                        progress_callback=on_progress if step.get("progress") else None,
                    )
            if scope.cancelled_caught:
                entry["abandoned"] = True
            else:
                entry["result"] = dump(res)
        except MCPError as err:
            entry["error"] = {"code": err.code, "message": err.message, "data": err.data}
        except TimeoutError:
            entry["error"] = {"timeout": step_timeout}
        entry["ms"] = round(1000 * (time.monotonic() - started))

    async def listen(client, step):
        got = seen[step["client"]]
        with anyio.move_on_after(step["seconds"]):
            async with client.listen(resource_subscriptions=[step["uri"]]) as sub:
                got["listening"] = True
                async for event in sub:
                    if hasattr(event, "uri"):
                        got["updates"].append({"mark": mark[0], "params": {"uri": event.uri}})

    async with AsyncExitStack() as stack:
        clients = {}
        for name, spec in plan["clients"].items():
            target = url
            if "headers" in spec:
                http = httpx2.AsyncClient(headers=spec["headers"], timeout=30)
                target = streamable_http_client(url, http_client=http)
            clients[name] = await stack.enter_async_context(Client(target, **callbacks(name, spec)))
        background = []
        for step in plan["steps"]:
            op = step["op"]
            if op == "call":
                job = call(clients[step["client"]], step)
                if step.get("background"):
                    background.append(asyncio.ensure_future(job))
                else:
                    await job
            elif op == "join":
                await asyncio.gather(*background)
                background.clear()
            elif op == "sleep":
                await asyncio.sleep(step["seconds"])
            elif op == "mark":
                mark[0] = step["name"]
            elif op == "set_level":
                await clients[step["client"]].set_logging_level(step["level"])
            elif op == "roots_changed":
                await clients[step["client"]].send_roots_list_changed()
            elif op == "subscribe":
                await clients[step["client"]].subscribe_resource(step["uri"])
            elif op == "listen":
                background.append(asyncio.ensure_future(listen(clients[step["client"]], step)))
            else:
                raise ValueError(f"unknown op {op}")
        await asyncio.gather(*background)
    print(json.dumps({"calls": calls, "clients": seen}), flush=True)


asyncio.run(main())
