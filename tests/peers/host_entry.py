"""Python `mcp` 2.x client that starts one server entry as a host does from its config
(Claude Desktop's {"command": ..., "args": [...], "env": {...}}): the process gets the SDK's
default environment (PATH, HOME, ...) plus the entry's `env`, nothing else of the caller's.
Driven by tests/it/packaging.rs.

usage: host_entry.py
env:   ENTRY = JSON {"command": str, "args": [str], "env": {str: str}, "cwd": str (optional)}
       TOOL  = the name of the server's tool to call with no arguments, without the gateway's
               namespace: called directly when listed (as `NS__TOOL` or `TOOL`), otherwise through
               the listed `search_tools` / `invoke_tool` meta-tools (progressive exposure)
Prints one JSON object: tools (names) and text (the call's text content).
"""
import asyncio
import json
import os
import re

from mcp import Client, StdioServerParameters


def listed(names, suffix):
    """The listed name that is `suffix` or ends with `__suffix` / `_suffix`, if any."""
    for name in names:
        if name == suffix or name.endswith("__" + suffix) or name.endswith("_" + suffix):
            return name
    return None


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "text", None) is not None)


async def call(client, names, tool):
    direct = listed(names, tool)
    if direct:
        return text_of(await client.call_tool(direct, {}))
    search, invoke = listed(names, "search_tools"), listed(names, "invoke_tool")
    assert search and invoke, f"neither {tool} nor the meta-tools are listed: {names}"
    found = text_of(await client.call_tool(search, {"query": tool}))
    match = re.search(r"[\w.-]*" + re.escape(tool), found)
    assert match, f"search_tools did not find {tool}: {found}"
    return text_of(await client.call_tool(invoke, {"name": match.group(0), "arguments": {}}))


async def main() -> None:
    entry = json.loads(os.environ["ENTRY"])
    target = StdioServerParameters(
        command=entry["command"],
        args=entry.get("args", []),
        env=entry.get("env"),
        cwd=entry.get("cwd"),
    )
    async with Client(target, mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        text = await call(client, names, os.environ["TOOL"])
    print(json.dumps({"tools": names, "text": text}))


asyncio.run(main())
