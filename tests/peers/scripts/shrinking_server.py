"""A small MCP server (Python SDK 2.x) whose tool list can shrink at run time.

`retire_converter` removes `convert_currency` and sends notifications/tools/list_changed,
so a test can check that a gateway stops offering a tool that disappeared upstream."""
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

server = MCPServer("shrinking")


@server.tool()
def forecast_weather(city: str, days: int = 1) -> str:
    """Weather forecast for a city for the next days."""
    return f"forecast for {city}: sunny for {days} day(s)"


@server.tool()
def convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    """Convert an amount of money from one currency to another."""
    return f"{amount} {from_currency} = {amount * 2} {to_currency}"


@server.tool()
async def retire_converter(ctx: Context) -> str:
    """Remove the currency converter from this server."""
    server.remove_tool("convert_currency")
    # 2026-07-28 announces on the subscriptions/listen bus, 2025 on the session.
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return "convert_currency removed"


if __name__ == "__main__":
    server.run()
