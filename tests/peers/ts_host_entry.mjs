// TypeScript SDK client that starts one server entry as a host does from its config
// (Claude Desktop's {"command": ..., "args": [...], "env": {...}}): the process gets the SDK's
// default environment (PATH, HOME, ...) plus the entry's `env`, nothing else of the caller's.
// Driven by tests/it/packaging.rs; the same contract as host_entry.py.
// env:   ENTRY = JSON {"command": str, "args": [str], "env": {str: str}, "cwd": str (optional)}
//        TOOL  = the server's tool to call with no arguments, without the gateway's namespace:
//                called directly when listed, otherwise through search_tools / invoke_tool
// Prints one JSON object: tools (names) and text (the call's text content).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const entry = JSON.parse(process.env.ENTRY);
const tool = process.env.TOOL;
const listed = (names, suffix) =>
  names.find((n) => n === suffix || n.endsWith(`__${suffix}`) || n.endsWith(`_${suffix}`));
const textOf = (result) => result.content.filter((c) => c.text !== undefined).map((c) => c.text).join("\n");

async function call(client, names) {
  const direct = listed(names, tool);
  if (direct) return textOf(await client.callTool({ name: direct, arguments: {} }));
  const search = listed(names, "search_tools");
  const invoke = listed(names, "invoke_tool");
  if (!search || !invoke) throw new Error(`neither ${tool} nor the meta-tools are listed: ${names}`);
  const found = textOf(await client.callTool({ name: search, arguments: { query: tool } }));
  const escaped = tool.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const match = found.match(new RegExp(`[\\w.-]*${escaped}`));
  if (!match) throw new Error(`search_tools did not find ${tool}: ${found}`);
  return textOf(await client.callTool({ name: invoke, arguments: { name: match[0], arguments: {} } }));
}

const transport = new StdioClientTransport({
  command: entry.command,
  args: entry.args ?? [],
  env: entry.env,
  cwd: entry.cwd,
  stderr: "inherit",
});
const client = new Client({ name: "ts-host-entry", version: "0" });
await client.connect(transport);
const names = (await client.listTools()).tools.map((t) => t.name);
const text = await call(client, names);
console.log(JSON.stringify({ tools: names, text }));
await client.close();
