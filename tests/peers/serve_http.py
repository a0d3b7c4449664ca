"""Serving an ASGI MCP app on loopback for the test peers: `serve(app, port)` runs it with
uvicorn and prints `listening on http://127.0.0.1:PORT/mcp` on stderr once it accepts
connections (what the tests wait for)."""

import sys

import anyio
import uvicorn


async def serve(app, port: int) -> None:
    http = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))

    async def announce() -> None:
        while not http.started:
            await anyio.sleep(0.02)
        print(f"listening on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await http.serve()
        tg.cancel_scope.cancel()
