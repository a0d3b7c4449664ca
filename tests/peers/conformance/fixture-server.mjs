#!/usr/bin/env node
// mcp-budget's own conformance fixture: an MCP server (TypeScript SDK, low-level `Server`) that
// implements the tools, resources and prompts the official conformance suite's *server*
// scenarios call (`@modelcontextprotocol/conformance` 0.1.16, active suite + json-schema-2020-12).
//
//   node fixture-server.mjs --http [PORT]     streamable HTTP on http://127.0.0.1:PORT/mcp
//                                             (PORT 0 or absent: ephemeral); prints
//                                             "fixture listening on http://127.0.0.1:PORT/mcp"
//                                             on stderr once it accepts connections
//   node fixture-server.mjs --stdio           newline-delimited JSON-RPC on stdin/stdout
//
// Options (for running behind the gateway, whose exposed names are `<upstream><sep><name>`):
//   --strip-prefix P   serve every tool and prompt whose name starts with P under the name
//                      without P (e.g. `test_simple_text` -> `simple_text`), so that an upstream
//                      named "test" with separator "_" exposes exactly the suite's names again.
//                      Names without P are not served.
//   --only NAME[,NAME] serve only these tools/prompts (after stripping) and no resources.
//
// Only 127.0.0.1 is bound; the HTTP side rejects non-localhost Host / Origin headers (403),
// as the dns-rebinding-protection scenario requires.

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  McpError,
  ErrorCode,
} from '@modelcontextprotocol/sdk/types.js';

// ---------------------------------------------------------------------------------------------
// Options

const argv = process.argv.slice(2);
const opt = (flag) => {
  const i = argv.indexOf(flag);
  return i >= 0 ? (argv[i + 1] && !argv[i + 1].startsWith('--') ? argv[i + 1] : '') : undefined;
};
const stripPrefix = opt('--strip-prefix') ?? '';
const only = opt('--only') ? new Set(opt('--only').split(',')) : null;
const exposed = (name) => {
  if (stripPrefix && !name.startsWith(stripPrefix)) return null;
  const n = name.slice(stripPrefix.length);
  return only && !only.has(n) ? null : n;
};

// ---------------------------------------------------------------------------------------------
// Content

// 1x1 red pixel PNG.
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
// 44-byte WAV header + 2 samples of silence (8 kHz, 16-bit mono).
const WAV = Buffer.concat([
  Buffer.from('RIFF', 'ascii'), u32(40), Buffer.from('WAVEfmt ', 'ascii'), u32(16), u16(1), u16(1),
  u32(8000), u32(16000), u16(2), u16(16), Buffer.from('data', 'ascii'), u32(4), Buffer.alloc(4),
]).toString('base64');
function u32(n) { const b = Buffer.alloc(4); b.writeUInt32LE(n); return b; }
function u16(n) { const b = Buffer.alloc(2); b.writeUInt16LE(n); return b; }

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ type: 'text', text: t });
const noArgs = { type: 'object', properties: {} };

/** Tools by the suite's name: [definition, handler(args, extra, server)]. */
const TOOLS = {
  test_simple_text: [
    { description: 'Returns a simple text response', inputSchema: noArgs },
    async () => ({ content: [text('This is a simple text response for testing.')] }),
  ],
  test_image_content: [
    { description: 'Returns a 1x1 PNG image', inputSchema: noArgs },
    async () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }),
  ],
  test_audio_content: [
    { description: 'Returns a tiny WAV clip', inputSchema: noArgs },
    async () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }),
  ],
  test_embedded_resource: [
    { description: 'Returns an embedded text resource', inputSchema: noArgs },
    async () => ({
      content: [{
        type: 'resource',
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
      }],
    }),
  ],
  test_multiple_content_types: [
    { description: 'Returns text, image and resource content', inputSchema: noArgs },
    async () => ({
      content: [
        text('Multiple content types test:'),
        { type: 'image', data: PNG, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' },
        },
      ],
    }),
  ],
  test_tool_with_logging: [
    { description: 'Sends three info log notifications while it runs', inputSchema: noArgs },
    async (_args, extra) => {
      const log = (data) =>
        extra.sendNotification({ method: 'notifications/message', params: { level: 'info', logger: 'fixture', data } });
      await log('Tool execution started');
      await sleep(50);
      await log('Tool processing data');
      await sleep(50);
      await log('Tool execution completed');
      return { content: [text('Tool with logging executed successfully')] };
    },
  ],
  test_tool_with_progress: [
    { description: 'Reports progress 0, 50, 100 of 100', inputSchema: noArgs },
    async (_args, extra) => {
      const token = extra._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (token !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken: token, progress, total: 100, message: `Progress ${progress}/100` },
          });
        }
        if (progress < 100) await sleep(50);
      }
      return { content: [text(`Tool with progress executed successfully (token ${String(token)})`)] };
    },
  ],
  test_error_handling: [
    { description: 'Always fails with isError: true', inputSchema: noArgs },
    async () => ({ isError: true, content: [text('This tool intentionally returns an error for testing')] }),
  ],
  test_sampling: [
    {
      description: 'Asks the client to sample an LLM completion',
      inputSchema: { type: 'object', properties: { prompt: { type: 'string', description: 'The prompt to send to the LLM' } }, required: ['prompt'] },
    },
    async (args, extra, server) => {
      if (!server.getClientCapabilities()?.sampling) throw new McpError(ErrorCode.InvalidRequest, 'client does not support sampling');
      const result = await extra.sendRequest(
        {
          method: 'sampling/createMessage',
          params: { messages: [{ role: 'user', content: text(String(args.prompt ?? '')) }], maxTokens: 100 },
        },
        CreateMessageResultSchema,
      );
      const reply = result.content?.type === 'text' ? result.content.text : JSON.stringify(result.content);
      return { content: [text(`LLM response: ${reply}`)] };
    },
  ],
  test_elicitation: [
    {
      description: 'Asks the client for a username and email',
      inputSchema: { type: 'object', properties: { message: { type: 'string', description: 'The message to show the user' } }, required: ['message'] },
    },
    async (args, extra, server) => {
      if (!server.getClientCapabilities()?.elicitation) throw new McpError(ErrorCode.InvalidRequest, 'client does not support elicitation');
      const result = await elicit(extra, String(args.message ?? ''), {
        type: 'object',
        properties: {
          username: { type: 'string', description: "User's response" },
          email: { type: 'string', description: "User's email address" },
        },
        required: ['username', 'email'],
      });
      return { content: [text(`User response: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)] };
    },
  ],
  test_elicitation_sep1034_defaults: [
    { description: 'Elicitation whose schema has defaults for every primitive type', inputSchema: noArgs },
    async (_args, extra) => {
      const result = await elicit(extra, 'Please review and update the form fields with defaults', {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'User name', default: 'John Doe' },
          age: { type: 'integer', description: 'User age', default: 30 },
          score: { type: 'number', description: 'User score', default: 95.5 },
          status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
          verified: { type: 'boolean', description: 'Verification status', default: true },
        },
        required: [],
      });
      return { content: [text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)] };
    },
  ],
  test_elicitation_sep1330_enums: [
    { description: 'Elicitation with the five enum schema variants', inputSchema: noArgs },
    async (_args, extra) => {
      const result = await elicit(extra, 'Please select options from the enum fields', {
        type: 'object',
        properties: {
          untitledSingle: { type: 'string', description: 'Untitled single-select', enum: ['option1', 'option2', 'option3'] },
          titledSingle: {
            type: 'string',
            description: 'Titled single-select',
            oneOf: [
              { const: 'value1', title: 'First Option' },
              { const: 'value2', title: 'Second Option' },
              { const: 'value3', title: 'Third Option' },
            ],
          },
          legacyEnum: {
            type: 'string',
            description: 'Legacy titled enum',
            enum: ['opt1', 'opt2', 'opt3'],
            enumNames: ['Option One', 'Option Two', 'Option Three'],
          },
          untitledMulti: {
            type: 'array',
            description: 'Untitled multi-select',
            items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
          },
          titledMulti: {
            type: 'array',
            description: 'Titled multi-select',
            items: {
              anyOf: [
                { const: 'value1', title: 'First Choice' },
                { const: 'value2', title: 'Second Choice' },
                { const: 'value3', title: 'Third Choice' },
              ],
            },
          },
        },
        required: [],
      });
      return { content: [text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)] };
    },
  ],
  json_schema_2020_12_tool: [
    {
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: {
          address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } },
        },
        properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
        additionalProperties: false,
      },
    },
    async (args) => ({ content: [text(`Received: ${JSON.stringify(args ?? {})}`)] }),
  ],
};

function elicit(extra, message, requestedSchema) {
  return extra.sendRequest({ method: 'elicitation/create', params: { message, requestedSchema } }, ElicitResultSchema);
}

const RESOURCES = {
  'test://static-text': {
    def: { name: 'static-text', description: 'A static text resource', mimeType: 'text/plain' },
    read: (uri) => ({ uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }),
  },
  'test://static-binary': {
    def: { name: 'static-binary', description: 'A static binary resource (1x1 PNG)', mimeType: 'image/png' },
    read: (uri) => ({ uri, mimeType: 'image/png', blob: PNG }),
  },
  'test://watched-resource': {
    def: { name: 'watched-resource', description: 'A resource clients can subscribe to', mimeType: 'text/plain' },
    read: (uri) => ({ uri, mimeType: 'text/plain', text: 'Watched resource content.' }),
  },
};
const TEMPLATE = /^test:\/\/template\/([^/]+)\/data$/;

const PROMPTS = {
  test_simple_prompt: [
    { description: 'A simple prompt without arguments' },
    () => ({ messages: [{ role: 'user', content: text('This is a simple prompt for testing.') }] }),
  ],
  test_prompt_with_arguments: [
    {
      description: 'A prompt with two required arguments',
      arguments: [
        { name: 'arg1', description: 'First test argument', required: true },
        { name: 'arg2', description: 'Second test argument', required: true },
      ],
    },
    (a) => ({ messages: [{ role: 'user', content: text(`Prompt with arguments: arg1='${a.arg1}', arg2='${a.arg2}'`) }] }),
  ],
  test_prompt_with_embedded_resource: [
    {
      description: 'A prompt that embeds a resource',
      arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
    },
    (a) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'resource', resource: { uri: a.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } },
        },
        { role: 'user', content: text('Please process the embedded resource above.') },
      ],
    }),
  ],
  test_prompt_with_image: [
    { description: 'A prompt with an image' },
    () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
        { role: 'user', content: text('Please analyze the image above.') },
      ],
    }),
  ],
};

// Served names -> suite names.
const served = (table) =>
  Object.fromEntries(Object.keys(table).flatMap((k) => (exposed(k) === null ? [] : [[exposed(k), k]])));
const TOOL_NAMES = served(TOOLS);
const PROMPT_NAMES = served(PROMPTS);
const WITH_RESOURCES = only === null;

// ---------------------------------------------------------------------------------------------
// Server

function makeServer() {
  const capabilities = {
    tools: { listChanged: false },
    prompts: { listChanged: false },
    logging: {},
    completions: {},
  };
  if (WITH_RESOURCES) capabilities.resources = { subscribe: true, listChanged: false };
  const server = new Server({ name: 'mcp-budget-conformance-fixture', version: '1.0.0' }, { capabilities });
  const subscriptions = new Set();

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.entries(TOOL_NAMES).map(([name, key]) => ({ name, ...TOOLS[key][0] })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const key = TOOL_NAMES[req.params.name];
    if (!key) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${req.params.name}`);
    return TOOLS[key][1](req.params.arguments ?? {}, extra, server);
  });

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: Object.entries(PROMPT_NAMES).map(([name, key]) => ({ name, ...PROMPTS[key][0] })),
  }));
  server.setRequestHandler(GetPromptRequestSchema, async (req) => {
    const key = PROMPT_NAMES[req.params.name];
    if (!key) throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${req.params.name}`);
    return PROMPTS[key][1](req.params.arguments ?? {});
  });

  server.setRequestHandler(CompleteRequestSchema, async (req) => {
    const { ref, argument } = req.params;
    let values = [];
    if (ref.type === 'ref/prompt' && PROMPT_NAMES[ref.name] === 'test_prompt_with_arguments') {
      const options = argument.name === 'arg1' ? ['paris', 'park', 'party', 'parade'] : ['world', 'wide', 'web'];
      values = options.filter((v) => v.startsWith(argument.value ?? ''));
    } else if (ref.type === 'ref/resource' && TEMPLATE.test(ref.uri.replace('{id}', 'x'))) {
      values = ['123', '456'].filter((v) => v.startsWith(argument.value ?? ''));
    }
    return { completion: { values, total: values.length, hasMore: false } };
  });

  if (WITH_RESOURCES) {
    server.setRequestHandler(ListResourcesRequestSchema, async () => ({
      resources: Object.entries(RESOURCES).map(([uri, r]) => ({ uri, ...r.def })),
    }));
    server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
      resourceTemplates: [{
        uriTemplate: 'test://template/{id}/data',
        name: 'template-data',
        description: 'Data for an id',
        mimeType: 'application/json',
      }],
    }));
    server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
      const { uri } = req.params;
      if (RESOURCES[uri]) return { contents: [RESOURCES[uri].read(uri)] };
      const m = TEMPLATE.exec(uri);
      if (m) {
        const id = decodeURIComponent(m[1]);
        return {
          contents: [{
            uri,
            mimeType: 'application/json',
            text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
          }],
        };
      }
      throw new McpError(-32002, `Resource not found: ${uri}`);
    });
    server.setRequestHandler(SubscribeRequestSchema, async (req) => {
      subscriptions.add(req.params.uri);
      return {};
    });
    server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
      subscriptions.delete(req.params.uri);
      return {};
    });
  }
  return server;
}

// ---------------------------------------------------------------------------------------------
// Transports

const LOCAL = new Set(['localhost', '127.0.0.1', '[::1]']);
function hostName(hostPort) {
  if (!hostPort) return '';
  if (hostPort.startsWith('[')) return hostPort.slice(0, hostPort.indexOf(']') + 1);
  return hostPort.split(':')[0];
}
function isLocal(req) {
  if (!LOCAL.has(hostName(req.headers.host))) return false;
  const origin = req.headers.origin;
  if (!origin) return true;
  try {
    return LOCAL.has(hostName(new URL(origin).host));
  } catch {
    return false;
  }
}
function jsonError(res, status, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

async function serveHttp(port) {
  const sessions = new Map();
  const httpServer = http.createServer(async (req, res) => {
    try {
      if (!req.url.startsWith('/mcp')) return jsonError(res, 404, 'not found; the endpoint is /mcp');
      if (!isLocal(req)) return jsonError(res, 403, `forbidden Host/Origin: ${req.headers.host} ${req.headers.origin ?? ''}`);
      const sid = req.headers['mcp-session-id'];
      if (sid) {
        const transport = sessions.get(sid);
        if (!transport) return jsonError(res, 404, 'unknown session');
        return await transport.handleRequest(req, res);
      }
      if (req.method !== 'POST') return jsonError(res, 400, 'missing Mcp-Session-Id');
      const chunks = [];
      for await (const c of req) chunks.push(c);
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return jsonError(res, 400, 'parse error');
      }
      if (body?.method !== 'initialize') return jsonError(res, 400, 'missing Mcp-Session-Id: initialize first');
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
      await makeServer().connect(transport);
      await transport.handleRequest(req, res, body);
    } catch (err) {
      if (!res.headersSent) jsonError(res, 500, String(err?.message ?? err));
    }
  });
  await new Promise((resolve) => httpServer.listen(port, '127.0.0.1', resolve));
  process.stderr.write(`fixture listening on http://127.0.0.1:${httpServer.address().port}/mcp\n`);
  const stop = () => {
    for (const t of sessions.values()) t.close().catch(() => {});
    httpServer.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

async function serveStdio() {
  const server = makeServer();
  await server.connect(new StdioServerTransport());
  process.stdin.on('end', () => process.exit(0));
}

if (argv.includes('--http')) {
  const p = opt('--http');
  await serveHttp(p ? Number(p) : 0);
} else {
  await serveStdio();
}
