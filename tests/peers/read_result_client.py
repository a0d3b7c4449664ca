"""Python `mcp` 2.x client that calls one tool and then reads the whole result back through the
gateway's `read_result`, following the ids and offsets its notes give (tests/it/budget_e2e.rs).

usage: read_result_client.py stdio <command> [args...]
env:   CALLS = JSON [{"name": str, "args": {...}}] called first (setup; their results reported)
       TOOL, ARGS = the call whose result is read back (its arguments as JSON)
Prints one JSON object: tools (names), setup (each call's texts), first (the call's text blocks),
pages (each read_result's text blocks), whole (the head and the pages joined).
"""
import asyncio
import json
import os
import re
import sys

from mcp import Client, StdioServerParameters

NEXT = re.compile(r'(\{"id":"[^"]+","offset":\d+[^}]*\})\]?$')


def texts(result):
    return [c.text for c in result.content if getattr(c, "type", "") == "text"]


async def main() -> None:
    rest = sys.argv[2:]
    target = StdioServerParameters(command=rest[0], args=rest[1:], env=dict(os.environ))
    out = {"pages": []}
    async with Client(target, mode="legacy") as client:
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        out["setup"] = []
        for call in json.loads(os.environ.get("CALLS", "[]")):
            out["setup"].append(texts(await client.call_tool(call["name"], call["args"])))
        first = texts(await client.call_tool(os.environ["TOOL"], json.loads(os.environ.get("ARGS", "{}"))))
        out["first"] = first
        whole = first[0] if len(first) > 1 else ""
        match = NEXT.search(first[-1].split("Structure:")[0].rstrip(". ")) or re.search(r'(\{"id":"[^"]+","offset":\d+\})', first[-1])
        while match:
            page = texts(await client.call_tool("read_result", json.loads(match.group(1))))
            out["pages"].append(page)
            whole += page[0]
            if len(out["pages"]) > 500:
                break
            match = NEXT.search(page[-1])
        out["whole"] = whole
    print(json.dumps(out))


asyncio.run(main())
