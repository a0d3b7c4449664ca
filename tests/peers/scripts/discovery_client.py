"""Drives progressive discovery through a gateway with the Python SDK (2.x) over stdio.

usage: python discovery_client.py <gateway command> [args...]
Prints one JSON object with what the client saw, for the Rust test to check."""
import asyncio, json, os, sys
from mcp import Client, StdioServerParameters


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "text", None))


async def main():
    target = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))
    out = {}
    async with Client(target, mode="legacy") as c:
        tools = (await c.list_tools()).tools
        out["listed"] = [t.name for t in tools]
        found = await c.call_tool("search_tools", {"query": "what is the weather going to be in Paris"})
        out["search"] = text_of(found)
        out["search_again"] = text_of(await c.call_tool("search_tools", {"query": "what is the weather going to be in Paris"}))
        schema = await c.call_tool("get_tool_schema", {"name": "shrink__forecast_weather"})
        out["schema"] = text_of(schema)
        res = await c.call_tool("invoke_tool", {"name": "shrink__forecast_weather", "arguments": {"city": "Paris", "days": 2}})
        out["invoke"] = {"is_error": bool(res.is_error), "text": text_of(res)}
        bad = await c.call_tool("invoke_tool", {"name": "shrink__forecast_weather", "arguments": {"days": "two"}})
        out["invalid"] = {"is_error": bool(bad.is_error), "text": text_of(bad),
                          "structured": bad.structured_content}
        # Calls that generic invoke wrappers get wrong, then the retry a model would make from
        # the answer alone (the call shape it suggests, the required field filled in).
        recovery = {}
        for case, arguments in [
            ("empty", {"name": "shrink__forecast_weather", "arguments": {}}),
            ("top_level", {"name": "shrink__forecast_weather", "city": "Paris", "days": 2}),
            ("alias", {"tool_name": "shrink__forecast_weather", "tool_input": {"city": "Paris"}}),
        ]:
            res = await c.call_tool("invoke_tool", arguments)
            recovery[case] = {"is_error": bool(res.is_error), "text": text_of(res),
                              "structured": res.structured_content}
        suggested = recovery["empty"]["text"].split("Call invoke_tool again as ", 1)[1]
        retry = json.loads(suggested.split("\n", 1)[0].rstrip("."))
        retry["arguments"]["city"] = "Paris"
        res = await c.call_tool("invoke_tool", retry)
        recovery["retry"] = {"is_error": bool(res.is_error), "text": text_of(res)}
        out["recovery"] = recovery
        before = await c.call_tool("search_tools", {"query": "convert money between currencies"})
        out["converter_before"] = text_of(before)
        await c.call_tool("invoke_tool", {"name": "shrink__retire_converter", "arguments": {}})
        after = ""
        for _ in range(50):  # the gateway refreshes its catalog on list_changed
            after = text_of(await c.call_tool("search_tools", {"query": "convert money between currencies"}))
            if "shrink__convert_currency" not in after:
                break
            await asyncio.sleep(0.1)
        out["converter_after"] = after
    print(json.dumps(out))


asyncio.run(main())
