// TypeScript SDK client that starts its server over stdio, as a host does from its config
// entry ({"command": ..., "args": [...]}), driven by tests/it/dropin.rs.
// usage: node ts_stdio_client.mjs <command> [args...]
// env:   PLAN = JSON {"calls": [{"name": str, "args": {...}}]}
// Prints one JSON object: tools (names) and calls (each with result or error).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const plan = JSON.parse(process.env.PLAN ?? "{}");
// The SDK passes only a safe default environment: the test's tag and PATH must reach the
// gateway (and through it the server) for the leftover check.
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "ts-stdio-client", version: "0" });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const calls = [];
for (const call of plan.calls ?? []) {
  try {
    const result = await client.callTool({ name: call.name, arguments: call.args ?? {} });
    calls.push({ name: call.name, result });
  } catch (err) {
    calls.push({ name: call.name, error: { code: err.code, message: err.message, data: err.data } });
  }
}
console.log(JSON.stringify({ tools, calls }));
await client.close();
