"""Era fixture server for the integration tests (tests/it/eras.rs): one MCP server (Python `mcp`
2.x SDK, `MCPServer`) that speaks the 2026-07-28 (stateless) era, the 2025-11-25 (handshake) era,
or both, chosen by flag.

usage: era_server.py [--stdio | --http PORT] [--era modern|legacy|dual]

  dual    (default) what the SDK does out of the box: `server/discover` and `initialize`; on
          stdio the client's first request decides the era of the connection, on HTTP the
          `MCP-Protocol-Version` header decides per request.
  modern  2026-07-28 only: `initialize` is refused with the SDK's own -32022 "unsupported
          protocol version" error (data: {"supported": ["2026-07-28"], "requested": ...}).
  legacy  2025-11-25 only: `server/discover` gets -32601 "Method not found" (and so does any
          other request carrying the 2026-07-28 envelope on HTTP).

Tools: echo(message), add(a, b), slow(seconds, steps) with progress notifications, ask_user
(question) through elicitation, ask_model(prompt) through sampling, list_roots() through roots,
touch(uri) which announces `notifications/resources/updated` for `uri`,
add_tool_later() which adds the tool `later` and announces it (notifications/tools/list_changed
on 2025, the subscriptions/listen bus on 2026). A prompt `greet(name)`, a static resource
`era://static` and a template `era://item/{id}`.

Elicitation, sampling and roots go through the SDK's resolvers (`Resolve(...)`): on 2025
connections they are standalone server->client requests, on 2026-07-28 an `input_required`
result (MRTR) that the client answers by retrying with `inputResponses` + `requestState`.

Every request is logged on stderr with the era it arrived in, e.g.
  era_server: tools/call echo era=2026-07-28
and a cancelled `slow` logs `era_server: cancelled slow era=...`. HTTP binds 127.0.0.1 only and
prints `listening on http://127.0.0.1:PORT/mcp` on stderr once it accepts connections.
"""

from __future__ import annotations

import argparse
import sys
from typing import Annotated, Any

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp.shared.exceptions import MCPError

ERA = "dual"


def log(msg: str) -> None:
    print(f"era_server: {msg}", file=sys.stderr, flush=True)


def era_of(version: str | None) -> str:
    return version or "none"


async def era_middleware(ctx: Any, call_next: Any) -> Any:
    """Logs every inbound message with its era and enforces `--era`."""
    params = ctx.params or {}
    what = ctx.method
    if ctx.method in ("tools/call", "prompts/get"):
        what += f" {params.get('name')}"
    elif ctx.method == "resources/read":
        what += f" {params.get('uri')}"
    elif ctx.method == "notifications/cancelled":
        what += f" {params.get('requestId')}"
    if ctx.method == "tools/call" and (params.get("inputResponses") or params.get("requestState")):
        what += " (retry with inputResponses)"
    version = ctx.protocol_version
    log(f"{what} era={era_of(version)}")
    modern = version in MODERN_PROTOCOL_VERSIONS
    if ERA == "modern" and ctx.method == "initialize":
        # Same shape as the SDK's own refusal on a connection locked to the modern era.
        requested = params.get("protocolVersion")
        data: dict[str, Any] = {"supported": list(MODERN_PROTOCOL_VERSIONS)}
        if isinstance(requested, str):
            data["requested"] = requested
        raise MCPError(
            code=types.UNSUPPORTED_PROTOCOL_VERSION,
            message="this server speaks 2026-07-28 only; the initialize handshake is not accepted",
            data=data,
        )
    if ERA == "legacy" and ctx.request_id is not None and (modern or ctx.method == "server/discover"):
        raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
    return await call_next(ctx)


server = MCPServer("era-server", version="1.0.0", middleware=[era_middleware])


@server.tool()
def echo(message: str) -> str:
    """Echo the message back."""
    return f"Echo: {message}"


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"{a} + {b} = {a + b}"


@server.tool()
async def slow(seconds: float, steps: int, ctx: Context) -> str:
    """Sleep `seconds`, reporting progress `steps` times; honours cancellation."""
    era = era_of(ctx.protocol_version)
    try:
        for i in range(1, steps + 1):
            await anyio.sleep(seconds / max(steps, 1))
            await ctx.report_progress(i, steps, f"step {i}/{steps}")
    except anyio.get_cancelled_exc_class():
        log(f"cancelled slow era={era}")
        raise
    log(f"finished slow era={era}")
    return f"slept {seconds}s in {steps} steps"


class Answer(BaseModel):
    answer: str


def ask(question: str) -> Elicit[Answer]:
    return Elicit(question, Answer)


@server.tool()
def ask_user(question: str, reply: Annotated[Answer, Resolve(ask)]) -> str:
    """Ask the user a question (elicitation)."""
    return f"user answered: {reply.answer}"


def sample(prompt: str) -> Sample:
    return Sample(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=50,
    )


@server.tool()
def ask_model(prompt: str, sampled: Annotated[types.CreateMessageResult, Resolve(sample)]) -> str:
    """Ask the client's model (sampling)."""
    content = sampled.content
    text = content.text if isinstance(content, types.TextContent) else str(content)
    return f"model said: {text}"


def roots() -> ListRoots:
    return ListRoots()


@server.tool()
def list_roots(found: Annotated[types.ListRootsResult, Resolve(roots)]) -> str:
    """List the client's roots."""
    return "roots: " + ", ".join(str(r.uri) for r in found.roots)


@server.tool()
async def add_tool_later(ctx: Context) -> str:
    """Add the tool `later` and announce the change."""

    def later() -> str:
        """Added at run time."""
        return "later"

    if server._tool_manager.get_tool("later") is None:  # noqa: SLF001 - fixture
        server.add_tool(later)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return "added later"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announce that resource `uri` changed (to its subscribers)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_resource_updated(uri)
    else:
        await ctx.session.send_resource_updated(uri)
    return f"touched {uri}"


@server.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello, {name}!"


@server.resource("era://static", mime_type="text/plain")
def static_resource() -> str:
    return "static content"


@server.resource("era://item/{id}", mime_type="text/plain")
def item(id: str) -> str:  # noqa: A002 - the template variable
    return f"item {id}"


async def run_stdio() -> None:
    from mcp.server.runner import _serve_modern_stream, serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server  # noqa: SLF001 - fixture
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        if ERA == "dual":
            await low.run(read, write, low.create_initialization_options())
        elif ERA == "legacy":
            # Handshake-only loop: the dual-era loop would lock the connection to 2026-07-28
            # on the probe and then refuse the fallback `initialize`.
            await serve_loop(low, read, write, lifespan_state=state)
        else:
            # Modern-only loop: `initialize` gets the SDK's -32022; every request carries
            # its envelope.
            try:
                await _serve_modern_stream(low, read, write, lifespan_state=state, raise_exceptions=False)
            finally:
                await write.aclose()


async def run_http(port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    http = uvicorn.Server(config)

    async def announce() -> None:
        while not http.started:
            await anyio.sleep(0.02)
        log(f"era={ERA}")
        print(f"listening on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await http.serve()
        tg.cancel_scope.cancel()


def main() -> None:
    global ERA
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--era", choices=["modern", "legacy", "dual"], default="dual")
    args = parser.parse_args()
    ERA = args.era
    if args.http is not None:
        anyio.run(run_http, args.http)
    else:
        log(f"era={ERA} on stdio")
        anyio.run(run_stdio)


if __name__ == "__main__":
    main()
