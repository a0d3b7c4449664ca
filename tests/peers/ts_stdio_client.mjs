// TypeScript SDK client that starts its server over stdio, as a host does from its config
// entry ({"command": ..., "args": [...]}), driven by tests/it/dropin.rs.
// usage: node ts_stdio_client.mjs <command> [args...]
// env:   PLAN = JSON {"calls": [{"name": str, "args": {...}}]}
// Prints one JSON object: tools (names) and calls (each with result or error).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { runPlan } from "./ts_plan.mjs";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const plan = JSON.parse(process.env.PLAN ?? "{}");
// The SDK passes only a safe default environment: the test's tag and PATH must reach the
// gateway (and through it the server) for the leftover check.
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "ts-stdio-client", version: "0" });
await client.connect(transport);
await runPlan(client, plan);
