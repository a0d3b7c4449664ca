"""mcp-budget's conformance fixture for MCP 2026-07-28 (Python `mcp` 2.3 SDK, `MCPServer`).

Implements the tools, resources, prompts and completion that the server scenarios of
`@modelcontextprotocol/conformance` 0.2.0-alpha call at `--spec-version 2026-07-28`. The SDK
serves both eras: 2026-07-28 stateless requests (`server/discover`, `_meta` envelope, MRTR
`input_required`, `subscriptions/listen`) and the 2025 `initialize` handshake, which is what a
2025-era client (the gateway's upstream side today) speaks to it.

    python fixture_server.py --http [PORT]   streamable HTTP on http://127.0.0.1:PORT/mcp
                                             (PORT 0 or absent: ephemeral); prints
                                             "fixture listening on http://127.0.0.1:PORT/mcp"
                                             on stderr once the socket listens
    python fixture_server.py --stdio         newline-delimited JSON-RPC on stdin/stdout

Options (for running behind the gateway, whose exposed names are `<upstream><sep><name>`):
    --strip-prefix P   serve every tool and prompt whose name starts with P under the name
                       without P; names without P are not served
    --only A,B         serve only these tools/prompts (after stripping) and no resources

Only 127.0.0.1 is bound; the SDK's transport security rejects non-localhost Host / Origin.
Nothing here answers a check by itself: every result comes from the SDK's handling of what the
scenario asks (sealed `requestState`, `_meta` envelope checks, cache hints, header checks).
"""

from __future__ import annotations

import argparse
import base64
import socket
import struct
import sys
from typing import Annotated, Any

import anyio
import uvicorn
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    Completion,
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    ListRootsRequest,
    PromptReference,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import Field

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.mcpserver.tools.base import Tool
from mcp.shared.exceptions import MCPError

# 1x1 red pixel PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
# 44-byte WAV header + 2 samples of silence (8 kHz, 16-bit mono).
WAV = base64.b64encode(
    b"RIFF"
    + struct.pack("<I", 40)
    + b"WAVEfmt "
    + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 16000, 2, 16)
    + b"data"
    + struct.pack("<I", 4)
    + b"\0" * 4
).decode()

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def text(t: str) -> TextContent:
    return TextContent(type="text", text=t)


def elicit(message: str, properties: dict[str, Any], required: list[str]) -> ElicitRequest:
    return ElicitRequest(
        params=ElicitRequestFormParams(
            message=message,
            requested_schema={"type": "object", "properties": properties, "required": required},
        )
    )


def sample(prompt: str, max_tokens: int) -> CreateMessageRequest:
    return CreateMessageRequest(
        params=CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=text(prompt))], max_tokens=max_tokens
        )
    )


def answer(ctx: Context, key: str) -> Any:
    """The client's answer to input request `key` (a dict, or None when missing or malformed)."""
    responses = ctx.input_responses or {}
    value = responses.get(key)
    if value is None:
        return None
    return value.model_dump(by_alias=True, exclude_none=True) if hasattr(value, "model_dump") else value


def accepted_content(resp: Any) -> dict[str, Any] | None:
    """The `content` of an accepted elicitation answer, or None."""
    if isinstance(resp, dict) and resp.get("action") == "accept" and isinstance(resp.get("content"), dict):
        return resp["content"]
    return None


def sampled_text(resp: Any) -> str | None:
    if isinstance(resp, dict) and isinstance(resp.get("content"), dict):
        return resp["content"].get("text")
    return None


def require_capability(ctx: Context, name: str) -> None:
    caps = ctx.client_capabilities
    if caps is None or getattr(caps, name, None) is None:
        raise MCPError(
            code=-32021,
            message=f"this tool needs the client capability {name!r}",
            data={"requiredCapabilities": {name: {}}},
        )


def build(strip_prefix: str, only: set[str] | None) -> MCPServer:
    mcp = MCPServer("mcp-budget-conformance-fixture", version="0.2.0")

    def exposed(name: str) -> str | None:
        if strip_prefix and not name.startswith(strip_prefix):
            return None
        n = name[len(strip_prefix) :]
        return None if only is not None and n not in only else n

    def tool(name: str, description: str, schema: dict[str, Any] | None = None):
        def register(fn):
            n = exposed(name)
            if n is not None:
                t = Tool.from_function(fn, name=n, description=description)
                if schema is not None:
                    t = t.model_copy(update={"parameters": schema})
                mcp._tool_manager._tools[n] = t  # noqa: SLF001 - exact schemas need a Tool of our own
            return fn

        return register

    def prompt(name: str, description: str):
        def register(fn):
            n = exposed(name)
            if n is not None:
                mcp.prompt(name=n, description=description)(fn)
            return fn

        return register

    # --- plain content --------------------------------------------------------------------
    @tool("test_simple_text", "Returns a simple text response")
    async def simple_text() -> CallToolResult:
        return CallToolResult(content=[text("This is a simple text response for testing.")])

    @tool("test_image_content", "Returns a 1x1 PNG image")
    async def image_content() -> CallToolResult:
        return CallToolResult(content=[ImageContent(type="image", data=PNG, mime_type="image/png")])

    @tool("test_audio_content", "Returns a tiny WAV clip")
    async def audio_content() -> CallToolResult:
        return CallToolResult(content=[AudioContent(type="audio", data=WAV, mime_type="audio/wav")])

    @tool("test_embedded_resource", "Returns an embedded text resource")
    async def embedded_resource() -> CallToolResult:
        res = TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
        )
        return CallToolResult(content=[EmbeddedResource(type="resource", resource=res)])

    @tool("test_multiple_content_types", "Returns text, image and resource content")
    async def multiple_content_types() -> CallToolResult:
        res = TextResourceContents(
            uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
        )
        return CallToolResult(
            content=[
                text("Multiple content types test:"),
                ImageContent(type="image", data=PNG, mime_type="image/png"),
                EmbeddedResource(type="resource", resource=res),
            ]
        )

    @tool("test_error_handling", "Always fails with isError: true")
    async def error_handling() -> CallToolResult:
        return CallToolResult(content=[text("This tool intentionally returns an error for testing")], is_error=True)

    @tool("test_tool_with_progress", "Reports progress 0, 50, 100 of 100")
    async def tool_with_progress(ctx: Context) -> CallToolResult:
        for progress in (0, 50, 100):
            await ctx.report_progress(progress, 100, f"Progress {progress}/100")
            if progress < 100:
                await anyio.sleep(0.05)
        return CallToolResult(content=[text("Tool with progress executed successfully")])

    async def three_logs(ctx: Context) -> None:
        for i, line in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
            if i:
                await anyio.sleep(0.05)
            await ctx.info(line, logger_name="fixture")

    @tool("test_tool_with_logging", "Sends three info log notifications while it runs")
    async def tool_with_logging(ctx: Context) -> CallToolResult:
        await three_logs(ctx)
        return CallToolResult(content=[text("Tool with logging executed successfully")])

    @tool("test_logging_tool", "Logs three info messages (only when the request opts in with a log level)")
    async def logging_tool(ctx: Context) -> CallToolResult:
        await three_logs(ctx)
        return CallToolResult(content=[text("Logging tool executed")])

    @tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", JSON_SCHEMA_2020_12)
    async def json_schema_tool(**arguments: Any) -> CallToolResult:
        return CallToolResult(content=[text(f"received {sorted(arguments)}")])

    # --- HTTP custom headers (x-mcp-header) --------------------------------------------------
    @tool("test_custom_headers", "Echoes a region that clients mirror into the Mcp-Param-Region header")
    async def custom_headers(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    ) -> CallToolResult:
        return CallToolResult(content=[text(f"region={region}")])

    # --- client capabilities and MRTR (input_required) ---------------------------------------
    @tool("test_missing_capability", "Asks the client's LLM a question: needs the sampling capability")
    async def missing_capability(ctx: Context) -> CallToolResult | InputRequiredResult:
        require_capability(ctx, "sampling")
        resp = answer(ctx, "question")
        if sampled_text(resp) is None:
            return InputRequiredResult(input_requests={"question": sample("Say hello", 20)})
        return CallToolResult(content=[text(f"LLM said: {sampled_text(resp)}")])

    @tool("test_streaming_elicitation", "Asks the user for a name (input_required, never a request on the stream)")
    async def streaming_elicitation(ctx: Context) -> CallToolResult | InputRequiredResult:
        require_capability(ctx, "elicitation")
        content = accepted_content(answer(ctx, "user_name"))
        if content is None:
            return InputRequiredResult(
                input_requests={"user_name": elicit("What is your name?", {"name": {"type": "string"}}, ["name"])}
            )
        return CallToolResult(content=[text(f"Hello, {content.get('name')}!")])

    @tool("test_input_required_result_elicitation", "MRTR: one elicitation")
    async def ir_elicitation(ctx: Context) -> CallToolResult | InputRequiredResult:
        content = accepted_content(answer(ctx, "user_name"))
        if content is None or not isinstance(content.get("name"), str):
            return InputRequiredResult(
                input_requests={"user_name": elicit("What is your name?", {"name": {"type": "string"}}, ["name"])}
            )
        return CallToolResult(content=[text(f"Hello, {content['name']}!")])

    @tool("test_input_required_result_sampling", "MRTR: one sampling request")
    async def ir_sampling(ctx: Context) -> CallToolResult | InputRequiredResult:
        said = sampled_text(answer(ctx, "capital_question"))
        if said is None:
            return InputRequiredResult(
                input_requests={"capital_question": sample("What is the capital of France?", 100)}
            )
        return CallToolResult(content=[text(f"The model answered: {said}")])

    @tool("test_input_required_result_list_roots", "MRTR: one roots/list request")
    async def ir_list_roots(ctx: Context) -> CallToolResult | InputRequiredResult:
        resp = answer(ctx, "client_roots")
        if not isinstance(resp, dict) or not isinstance(resp.get("roots"), list):
            return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})
        uris = [r.get("uri") for r in resp["roots"] if isinstance(r, dict)]
        return CallToolResult(content=[text(f"Client roots: {', '.join(map(str, uris)) or '(none)'}")])

    @tool("test_input_required_result_request_state", "MRTR: elicitation with requestState")
    async def ir_request_state(ctx: Context) -> CallToolResult | InputRequiredResult:
        content = accepted_content(answer(ctx, "confirm"))
        if content is None or ctx.request_state != "awaiting-confirm":
            return InputRequiredResult(
                input_requests={"confirm": elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])},
                request_state="awaiting-confirm",
            )
        return CallToolResult(content=[text(f"state-ok: confirmed={content.get('ok')}")])

    @tool("test_input_required_result_multiple_inputs", "MRTR: elicitation, sampling and roots at once")
    async def ir_multiple(ctx: Context) -> CallToolResult | InputRequiredResult:
        name = accepted_content(answer(ctx, "user_name"))
        greeting = sampled_text(answer(ctx, "greeting"))
        roots = answer(ctx, "client_roots")
        if name is None or greeting is None or not isinstance(roots, dict) or ctx.request_state != "multi":
            return InputRequiredResult(
                input_requests={
                    "user_name": elicit("What is your name?", {"name": {"type": "string"}}, ["name"]),
                    "greeting": sample("Generate a greeting", 50),
                    "client_roots": ListRootsRequest(),
                },
                request_state="multi",
            )
        return CallToolResult(
            content=[text(f"{greeting} {name.get('name')} ({len(roots.get('roots') or [])} roots)")]
        )

    @tool("test_input_required_result_multi_round", "MRTR: two rounds with evolving requestState")
    async def ir_multi_round(ctx: Context) -> CallToolResult | InputRequiredResult:
        state = ctx.request_state or ""
        if state.startswith("round-2:"):
            color = accepted_content(answer(ctx, "step2"))
            if color is not None:
                return CallToolResult(content=[text(f"{state[8:]} likes {color.get('color')}")])
        if state == "round-1":
            name = accepted_content(answer(ctx, "step1"))
            if name is not None:
                return InputRequiredResult(
                    input_requests={
                        "step2": elicit(
                            "Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"]
                        )
                    },
                    request_state=f"round-2:{name.get('name')}",
                )
        return InputRequiredResult(
            input_requests={"step1": elicit("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])},
            request_state="round-1",
        )

    @tool("test_input_required_result_tampered_state", "MRTR: requestState is sealed by the SDK")
    async def ir_tampered(ctx: Context) -> CallToolResult | InputRequiredResult:
        content = accepted_content(answer(ctx, "confirm"))
        if content is None or ctx.request_state != "sealed-state":
            return InputRequiredResult(
                input_requests={"confirm": elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])},
                request_state="sealed-state",
            )
        return CallToolResult(content=[text("state verified")])

    @tool("test_input_required_result_capabilities", "MRTR: asks only for what the client declared")
    async def ir_capabilities(ctx: Context) -> CallToolResult | InputRequiredResult:
        caps = ctx.client_capabilities
        wanted: dict[str, Any] = {}
        if caps is not None and caps.elicitation is not None:
            wanted["user_name"] = elicit("What is your name?", {"name": {"type": "string"}}, ["name"])
        if caps is not None and caps.sampling is not None:
            wanted["greeting"] = sample("Generate a greeting", 50)
        if caps is not None and caps.roots is not None:
            wanted["client_roots"] = ListRootsRequest()
        if not wanted or all(answer(ctx, k) is not None for k in wanted):
            return CallToolResult(content=[text(f"answered: {sorted(wanted)}")])
        return InputRequiredResult(input_requests=wanted)

    # --- list changes on subscriptions/listen ------------------------------------------------
    @tool("test_trigger_tool_change", "Adds or removes the tool `dynamic_tool`, then announces the change")
    async def trigger_tool_change(ctx: Context) -> CallToolResult:
        if mcp._tool_manager.get_tool("dynamic_tool") is None:  # noqa: SLF001
            mcp.add_tool(lambda: "dynamic", name="dynamic_tool", description="Appears and disappears")
        else:
            mcp.remove_tool("dynamic_tool")
        await ctx.notify_tools_changed()
        return CallToolResult(content=[text("tool list changed")])

    @tool("test_trigger_prompt_change", "Adds or removes the prompt `dynamic_prompt`, then announces the change")
    async def trigger_prompt_change(ctx: Context) -> CallToolResult:
        if "dynamic_prompt" in {p.name for p in await mcp.list_prompts()}:
            mcp.remove_prompt("dynamic_prompt")
        else:
            mcp.prompt(name="dynamic_prompt", description="Appears and disappears")(lambda: "dynamic")
        await ctx.notify_prompts_changed()
        return CallToolResult(content=[text("prompt list changed")])

    # --- prompts ---------------------------------------------------------------------------
    @prompt("test_simple_prompt", "A simple prompt without arguments")
    def simple_prompt() -> list[UserMessage]:
        return [UserMessage("This is a simple prompt for testing.")]

    @prompt("test_prompt_with_arguments", "A prompt with two required arguments")
    def prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
        return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]

    @prompt("test_prompt_with_embedded_resource", "A prompt that embeds a resource")
    def prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:  # noqa: N803 - the suite's name
        res = TextResourceContents(uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing.")
        return [
            UserMessage(EmbeddedResource(type="resource", resource=res)),
            UserMessage("Please process the embedded resource above."),
        ]

    @prompt("test_prompt_with_image", "A prompt with an image")
    def prompt_with_image() -> list[UserMessage]:
        return [
            UserMessage(ImageContent(type="image", data=PNG, mime_type="image/png")),
            UserMessage("Please analyze the image above."),
        ]

    @prompt("test_input_required_result_prompt", "MRTR on prompts/get: asks for context first")
    def ir_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
        content = accepted_content(answer(ctx, "user_context"))
        if content is None:
            return InputRequiredResult(
                input_requests={
                    "user_context": elicit(
                        "What context should the prompt use?", {"context": {"type": "string"}}, ["context"]
                    )
                }
            )
        return [UserMessage(f"Use this context: {content.get('context')}")]

    @mcp.completion()
    async def complete(ref: Any, argument: Any, _context: Any) -> Completion | None:
        target = exposed("test_prompt_with_arguments")
        if isinstance(ref, PromptReference) and ref.name == target and argument.name == "arg1":
            options = ["paris", "park", "party"]
            values = [v for v in options if v.startswith(argument.value)]
            return Completion(values=values, total=len(values), has_more=False)
        return Completion(values=[], total=0, has_more=False)

    # --- resources -------------------------------------------------------------------------
    if only is None:

        @mcp.resource("test://static-text", name="static-text", mime_type="text/plain")
        def static_text() -> str:
            return "This is the content of the static text resource."

        @mcp.resource("test://static-binary", name="static-binary", mime_type="image/png")
        def static_binary() -> bytes:
            return base64.b64decode(PNG)

        @mcp.resource("test://template/{id}/data", name="template", mime_type="application/json")
        def template(id: str) -> str:  # noqa: A002 - the template's variable
            return f'{{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}}'

        @mcp.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
        def watched() -> str:
            return "Watched resource content"

    return mcp


async def serve_http(mcp: MCPServer, port: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    app = mcp.streamable_http_app(host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(f"fixture listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    await server.serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--http", nargs="?", const=0, type=int, metavar="PORT")
    mode.add_argument("--stdio", action="store_true")
    parser.add_argument("--strip-prefix", default="")
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    mcp = build(args.strip_prefix, only)
    if args.stdio:
        anyio.run(mcp.run_stdio_async)
    else:
        anyio.run(serve_http, mcp, args.http)


if __name__ == "__main__":
    main()
