// TypeScript SDK client (2025 era: initialize + Mcp-Session-Id) that keeps one session across
// gateway restarts and replicas (tests/scaleout.rs).
// usage: node ts_session_client.mjs <url>
// env:   PLAN = JSON {"steps": [STEP...], "sampling"?, "elicit"?}, as in session_client.py
//        ({"op": "list_tools"} | {"op": "call", name, args, progress} | {"op": "pause"})
// Prints {"paused": n} at each pause and waits for a line on stdin; prints one JSON object last:
// steps, requests (method, JSON-RPC method, Mcp-Session-Id of every HTTP request) and
// initializes.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url] = process.argv.slice(2);
const plan = JSON.parse(process.env.PLAN ?? "{}");
const stepTimeout = Number(process.env.STEP_TIMEOUT ?? "20") * 1000;
const requests = [];
const recordingFetch = async (input, init = {}) => {
  let method = null;
  if ((init.method ?? "GET") === "POST" && typeof init.body === "string") {
    try {
      method = JSON.parse(init.body).method ?? null;
    } catch {}
  }
  const headers = new Headers(init.headers);
  requests.push({ http: init.method ?? "GET", method, session: headers.get("mcp-session-id") });
  return fetch(input, init);
};
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
const capabilities = {};
if (plan.sampling != null) capabilities.sampling = {};
if (plan.elicit != null) capabilities.elicitation = { form: {} };
const client = new Client({ name: "ts-session-client", version: "0" }, { capabilities });
if (plan.sampling != null) {
  client.setRequestHandler(CreateMessageRequestSchema, async () => ({
    role: "assistant",
    content: { type: "text", text: plan.sampling },
    model: "ts-session-client-model",
    stopReason: "endTurn",
  }));
}
if (plan.elicit != null) {
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "accept", content: plan.elicit }));
}
await client.connect(transport);
const steps = [];
let paused = 0;
for (const step of plan.steps ?? []) {
  const entry = { op: step.op, name: step.name ?? null };
  if (step.op === "pause") {
    paused += 1;
    console.log(JSON.stringify({ paused }));
    await lines.next();
    continue;
  }
  try {
    if (step.op === "list_tools") {
      entry.tools = (await client.listTools(undefined, { timeout: stepTimeout })).tools.map((t) => t.name);
    } else if (step.op === "call") {
      const progress = [];
      const options = { timeout: stepTimeout };
      if (step.progress) options.onprogress = (p) => progress.push(p.progress);
      entry.result = await client.callTool({ name: step.name, arguments: step.args ?? {} }, undefined, options);
      entry.progress = progress;
    } else {
      throw new Error(`unknown op ${step.op}`);
    }
  } catch (err) {
    entry.error = { code: err.code ?? null, message: String(err.message ?? err), data: err.data ?? null };
  }
  steps.push(entry);
}
const initializes = requests.filter((r) => r.method === "initialize").length;
await client.close();
console.log(JSON.stringify({ protocol: transport.protocolVersion ?? null, steps, requests, initializes }));
process.exit(0);
