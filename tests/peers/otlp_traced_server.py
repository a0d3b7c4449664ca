"""A streamable HTTP MCP server (Python `mcp` SDK, `MCPServer`) that prints the W3C trace
context of every POST it receives, for the telemetry tests (tests/it/telemetry.rs).

usage: otlp_traced_server.py PORT

Tools: `echo(text)` answers `text`; `fail()` answers a result with `isError: true`. Prints
`listening on http://127.0.0.1:PORT/mcp` on stderr once it accepts connections, then one line
`traceparent=VALUE method=METHOD` per POST.
"""

import json
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from serve_http import serve

PORT = int(sys.argv[1])
server = MCPServer("traced", version="1.0.0")


@server.tool(description="Answers its text.")
def echo(text: str) -> str:
    return text


@server.tool(description="Always fails.")
def fail() -> str:
    raise ValueError("failing on purpose")


def traced(app):
    async def asgi(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        chunks = []

        async def replay():
            message = await receive()
            chunks.append(message.get("body", b""))
            return message

        async def peek_and_run():
            await app(scope, replay, send)

        await peek_and_run()
        try:
            method = json.loads(b"".join(chunks) or b"{}").get("method")
        except ValueError:
            method = None
        print(f"traceparent={headers.get('traceparent', '-')} method={method}", file=sys.stderr, flush=True)

    return asgi


async def main() -> None:
    await serve(traced(server.streamable_http_app(host="127.0.0.1")), PORT)


if __name__ == "__main__":
    anyio.run(main)
