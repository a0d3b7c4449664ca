// TypeScript SDK client with credentials, driven by tests/it/identity.rs.
// usage: node ts_auth_client.mjs <url>
// env:   HEADERS = JSON object of HTTP headers (the credentials)
//        PLAN    = JSON {"calls": [{"name": str, "args": {...}}]}
// Prints one JSON object: tools (names) and calls (each with result or error).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { runPlan } from "./ts_plan.mjs";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url] = process.argv.slice(2);
const headers = JSON.parse(process.env.HEADERS ?? "{}");
const plan = JSON.parse(process.env.PLAN ?? "{}");
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "ts-auth-client", version: "0" });
await client.connect(transport);
await runPlan(client, plan);
