"""A stdio MCP server (Python `mcp` SDK, `MCPServer`) with tools of the names given, for the
gateway's name-collision tests (tests/it/collisions.rs).

usage: named_server.py LABEL TOOL...

Each tool takes no arguments and answers `LABEL:TOOL`, so a test sees which server a call
reached.
"""

import sys

from mcp.server.mcpserver import MCPServer

LABEL, NAMES = sys.argv[1], sys.argv[2:]
server = MCPServer(f"named-{LABEL}", version="1.0.0")


def answer(name: str):
    def tool() -> str:
        return f"{LABEL}:{name}"

    return tool


for name in NAMES:
    server.add_tool(answer(name), name=name, description=f"Tool {name} of {LABEL}.")

if __name__ == "__main__":
    server.run("stdio")
