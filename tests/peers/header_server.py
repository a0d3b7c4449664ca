"""A streamable HTTP MCP server (Python `mcp` SDK, `MCPServer`) that prints, for every POST it
receives, the `X-Upstream-Token` header and the `Mcp-Session-Id` it came with, for the
per-client upstream tests (tests/it/per_client.rs).

usage: header_server.py PORT

Tools: `echo(text)` answers `text`. Prints `listening on http://127.0.0.1:PORT/mcp` on stderr
once it accepts connections, then one line `token=VALUE session=ID method=METHOD text=TEXT` per POST
(`-` for a missing header or text; spaces of the text as `_`).
"""

import json
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from serve_http import serve

PORT = int(sys.argv[1])
server = MCPServer("headers", version="1.0.0")


@server.tool(description="Answers its text.")
def echo(text: str) -> str:
    return text


def recorded(app):
    async def asgi(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        chunks = []

        async def replay():
            message = await receive()
            chunks.append(message.get("body", b""))
            return message

        await app(scope, replay, send)
        try:
            body = json.loads(b"".join(chunks) or b"{}")
        except ValueError:
            body = {}
        method = body.get("method")
        text = ((body.get("params") or {}).get("arguments") or {}).get("text", "-")
        token = headers.get("x-upstream-token", "-")
        session = headers.get("mcp-session-id", "-")
        print(
            f"token={token} session={session} method={method} text={text.replace(' ', '_')}",
            file=sys.stderr,
            flush=True,
        )

    return asgi


async def main() -> None:
    await serve(recorded(server.streamable_http_app(host="127.0.0.1")), PORT)


if __name__ == "__main__":
    anyio.run(main)
