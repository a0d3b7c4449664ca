// What the TypeScript SDK test clients share: run a plan's calls on a connected client and
// print the report (tools by name, each call's result or error).
export async function runPlan(client, plan) {
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
}
