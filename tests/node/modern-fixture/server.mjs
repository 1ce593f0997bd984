// The conformance suite's fixture server (tests/node/conformance-fixture/everything-server.ts) as a 2026-07-28-only
// server: the same tools, resources and prompts with the same results, written for the server half of the TS SDK 2.x
// (@modelcontextprotocol/server, pinned in tests/node/package.json) and served by its createMcpHandler with
// `legacy: 'reject'`: a request of a legacy era (initialize among them) is refused with the SDK's
// UnsupportedProtocolVersionError (-32022), GET and DELETE too; only the stateless era is served.
//
// What the 2026-07-28 era changes in the fixture (S2026-07-28/basic/patterns/mrtr.mdx):
// - sampling and elicitation are not requests the server sends mid-call but an `input_required` result; the tool
//   returns one with the same request params as the legacy fixture sends, and reads the client's answer from
//   `inputResponses` when the request comes again, answering with the same text as the legacy fixture;
// - resources/subscribe, resources/unsubscribe and logging/setLevel do not exist in the era (subscriptions/listen and
//   the log level in each request's _meta replace them): nothing is registered for them;
// - test_reconnection has no stream to close (no sessions, no resumability): it sleeps and answers as the fixture does.
// Every answer is an SSE stream (responseMode 'sse'), as the legacy fixture's SDK 1.x transport answers. Each request
// received is logged to stderr as one `REQUEST {...}` line (its method, protocol version and clientInfo.name).
// The port comes from $PORT; it listens on 127.0.0.1 only. Run by tests/test_conformance.py.

import http from 'node:http';

import { McpServer, ResourceTemplate, createMcpHandler, fromJsonSchema, inputRequired } from '@modelcontextprotocol/server';
import * as z from 'zod/v4';

const TEST_IMAGE_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const TEST_AUDIO_BASE64 = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';
const JSON_SCHEMA_2020_12_INPUT_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
  additionalProperties: false
};
const text = (value) => ({ content: [{ type: 'text', text: value }] });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The elicitation requests of the legacy fixture, by tool.
const ELICITATIONS = {
  test_elicitation: (args) => ({
    mode: 'form',
    message: args.message,
    requestedSchema: {
      type: 'object',
      properties: { response: { type: 'string', description: "User's response" } },
      required: ['response']
    }
  }),
  test_elicitation_sep1034_defaults: () => ({
    mode: 'form',
    message: 'Please review and update the form fields with defaults',
    requestedSchema: {
      type: 'object',
      properties: {
        name: { type: 'string', description: 'User name', default: 'John Doe' },
        age: { type: 'integer', description: 'User age', default: 30 },
        score: { type: 'number', description: 'User score', default: 95.5 },
        status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', description: 'Verification status', default: true }
      },
      required: []
    }
  }),
  test_elicitation_sep1330_enums: () => ({
    message: 'Please select options from the enum fields',
    requestedSchema: {
      type: 'object',
      properties: {
        untitledSingle: { type: 'string', description: 'Select one option', enum: ['option1', 'option2', 'option3'] },
        titledSingle: {
          type: 'string',
          description: 'Select one option with titles',
          oneOf: [
            { const: 'value1', title: 'First Option' },
            { const: 'value2', title: 'Second Option' },
            { const: 'value3', title: 'Third Option' }
          ]
        },
        legacyEnum: {
          type: 'string',
          description: 'Select one option (legacy)',
          enum: ['opt1', 'opt2', 'opt3'],
          enumNames: ['Option One', 'Option Two', 'Option Three']
        },
        untitledMulti: {
          type: 'array',
          description: 'Select multiple options',
          minItems: 1,
          maxItems: 3,
          items: { type: 'string', enum: ['option1', 'option2', 'option3'] }
        },
        titledMulti: {
          type: 'array',
          description: 'Select multiple options with titles',
          minItems: 1,
          maxItems: 3,
          items: {
            anyOf: [
              { const: 'value1', title: 'First Choice' },
              { const: 'value2', title: 'Second Choice' },
              { const: 'value3', title: 'Third Choice' }
            ]
          }
        }
      },
      required: []
    }
  })
};
const ELICITED_PREFIX = {
  test_elicitation: 'User response',
  test_elicitation_sep1034_defaults: 'Elicitation completed',
  test_elicitation_sep1330_enums: 'Elicitation completed'
};

function createServer() {
  const server = new McpServer(
    { name: 'mcp-conformance-test-server', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {}
      }
    }
  );

  server.registerTool('test_simple_text', { description: 'Tests simple text content response' }, async () =>
    text('This is a simple text response for testing.')
  );
  server.registerTool('test_image_content', { description: 'Tests image content response' }, async () => ({
    content: [{ type: 'image', data: TEST_IMAGE_BASE64, mimeType: 'image/png' }]
  }));
  server.registerTool('test_audio_content', { description: 'Tests audio content response' }, async () => ({
    content: [{ type: 'audio', data: TEST_AUDIO_BASE64, mimeType: 'audio/wav' }]
  }));
  server.registerTool('test_embedded_resource', { description: 'Tests embedded resource content response' }, async () => ({
    content: [
      {
        type: 'resource',
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' }
      }
    ]
  }));
  server.registerTool(
    'test_multiple_content_types',
    { description: 'Tests response with multiple content types (text, image, resource)' },
    async () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: TEST_IMAGE_BASE64, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 })
          }
        }
      ]
    })
  );
  server.registerTool(
    'test_tool_with_logging',
    { description: 'Tests tool that emits log messages during execution', inputSchema: z.object({}) },
    async (_args, ctx) => {
      for (const [index, data] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
        if (index) await sleep(50);
        await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data } });
      }
      return text('Tool with logging executed successfully');
    }
  );
  server.registerTool(
    'test_tool_with_progress',
    { description: 'Tests tool that reports progress notifications', inputSchema: z.object({}) },
    async (_args, ctx) => {
      const progressToken = ctx.mcpReq._meta?.progressToken ?? 0;
      for (const progress of [0, 50, 100]) {
        if (progress) await sleep(50);
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` }
        });
      }
      return text(String(progressToken));
    }
  );
  server.registerTool('test_error_handling', { description: 'Tests error response handling' }, async () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  server.registerTool(
    'test_reconnection',
    {
      description:
        'Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the stream mid-call and send the result after client reconnects.',
      inputSchema: z.object({})
    },
    async () => {
      await sleep(100);
      return text(
        'Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.'
      );
    }
  );
  server.registerTool(
    'test_sampling',
    {
      description: 'Tests server-initiated sampling (LLM completion request)',
      inputSchema: z.object({ prompt: z.string().describe('The prompt to send to the LLM') })
    },
    async (args, ctx) => {
      const answer = ctx.mcpReq.inputResponses?.sampling;
      if (answer === undefined) {
        return inputRequired({
          inputRequests: {
            sampling: {
              method: 'sampling/createMessage',
              params: { messages: [{ role: 'user', content: { type: 'text', text: args.prompt } }], maxTokens: 100 }
            }
          }
        });
      }
      const response = answer.content?.text || answer.message?.content?.text || 'No response';
      return text(`LLM response: ${response}`);
    }
  );
  for (const [name, params] of Object.entries(ELICITATIONS)) {
    const inputSchema =
      name === 'test_elicitation'
        ? z.object({ message: z.string().describe('The message to show the user') })
        : z.object({});
    const descriptions = {
      test_elicitation: 'Tests server-initiated elicitation (user input request)',
      test_elicitation_sep1034_defaults: 'Tests elicitation with default values per SEP-1034',
      test_elicitation_sep1330_enums: 'Tests elicitation with enum schema improvements per SEP-1330'
    };
    server.registerTool(name, { description: descriptions[name], inputSchema }, async (args, ctx) => {
      const answer = ctx.mcpReq.inputResponses?.elicitation;
      if (answer === undefined) {
        return inputRequired({ inputRequests: { elicitation: { method: 'elicitation/create', params: params(args) } } });
      }
      return text(`${ELICITED_PREFIX[name]}: action=${answer.action}, content=${JSON.stringify(answer.content || {})}`);
    });
  }
  server.registerTool(
    'json_schema_2020_12_tool',
    {
      description: 'Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)',
      inputSchema: fromJsonSchema(JSON_SCHEMA_2020_12_INPUT_SCHEMA)
    },
    async (args) => text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`)
  );

  server.registerResource(
    'static-text',
    'test://static-text',
    { title: 'Static Text Resource', description: 'A static text resource for testing', mimeType: 'text/plain' },
    async () => ({
      contents: [
        { uri: 'test://static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' }
      ]
    })
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { title: 'Static Binary Resource', description: 'A static binary resource (image) for testing', mimeType: 'image/png' },
    async () => ({ contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: TEST_IMAGE_BASE64 }] })
  );
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { title: 'Resource Template', description: 'A resource template with parameter substitution', mimeType: 'application/json' },
    async (uri, variables) => ({
      contents: [
        {
          uri: uri.toString(),
          mimeType: 'application/json',
          text: JSON.stringify({ id: variables.id, templateTest: true, data: `Data for ID: ${variables.id}` })
        }
      ]
    })
  );
  server.registerResource(
    'watched-resource',
    'test://watched-resource',
    { title: 'Watched Resource', description: 'A resource that auto-updates every 3 seconds', mimeType: 'text/plain' },
    async () => ({ contents: [{ uri: 'test://watched-resource', mimeType: 'text/plain', text: 'Watched resource content' }] })
  );

  server.registerPrompt(
    'test_simple_prompt',
    { title: 'Simple Test Prompt', description: 'A simple prompt without arguments' },
    async () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] })
  );
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      title: 'Prompt With Arguments',
      description: 'A prompt with required arguments',
      argsSchema: z.object({
        arg1: z.string().describe('First test argument'),
        arg2: z.string().describe('Second test argument')
      })
    },
    async ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }]
    })
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      title: 'Prompt With Embedded Resource',
      description: 'A prompt that includes an embedded resource',
      argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') })
    },
    async ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' }
          }
        },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } }
      ]
    })
  );
  server.registerPrompt(
    'test_prompt_with_image',
    { title: 'Prompt With Image', description: 'A prompt that includes image content' },
    async () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: TEST_IMAGE_BASE64, mimeType: 'image/png' } },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } }
      ]
    })
  );

  server.server.setRequestHandler('completion/complete', async () => ({
    completion: { values: [], total: 0, hasMore: false }
  }));
  return server;
}

// responseMode 'sse': every answer is an SSE stream, as the legacy fixture's SDK 1.x transport answers.
const handler = createMcpHandler(() => createServer(), {
  legacy: 'reject',
  responseMode: 'sse',
  onerror: (error) => console.error(`${error}`.split('\n')[0])
});

// One stderr line per request received, for the test: `REQUEST {"http":..., "method":..., "version":..., "client":...}`
// (the JSON-RPC method, the protocol version and clientInfo.name its _meta names; null where absent).
function logRequest(httpMethod, body) {
  let message = null;
  try {
    message = body ? JSON.parse(body.toString('utf8')) : null;
  } catch {}
  const meta = message && typeof message === 'object' && !Array.isArray(message) ? message.params?._meta ?? {} : {};
  const line = {
    http: httpMethod,
    method: message?.method ?? null,
    version: meta['io.modelcontextprotocol/protocolVersion'] ?? null,
    client: meta['io.modelcontextprotocol/clientInfo']?.name ?? null
  };
  console.error(`REQUEST ${JSON.stringify(line)}`);
}

// node:http <-> the handler's web-standard face.
const app = http.createServer(async (req, res) => {
  try {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    logRequest(req.method, body);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (typeof value === 'string') headers.set(name, value);
      else if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    }
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const request = new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url}`, {
      method: req.method,
      headers,
      body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
      signal: abort.signal
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
    if (response.body) {
      for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
  } catch (error) {
    console.error('request failed:', error);
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
    res.end();
  }
});
const PORT = Number(process.env.PORT || 3000);
app.listen(PORT, '127.0.0.1', () => console.log(`2026-07-28-only conformance fixture on http://127.0.0.1:${PORT}/mcp`));
