// Drives a real MCP client (@modelcontextprotocol/sdk 1.x or @modelcontextprotocol/client 2.x) over
// Streamable HTTP (or stdio) and prints what it received as one JSON line.
//
// Usage: node client.mjs '<plan JSON>'   (or the plan on stdin)
// Plan: {"sdk": "v1" | "v2", "timeoutMs"?: 30000, "sessions": [{"url": "...", "headers": {...}, "steps": [
//          {"op": "listTools"},
//          {"op": "callTool", "name": "...", "arguments": {...}, "progress": true, "cancelAfterProgress"?: true},
//          {"op": "waitListChanged", "count"?: 1, "timeoutMs"?: ...}
//        ]}]}
// Output: {"sdk": "...", "sessions": [{"steps": [{"ok": true, "value": ...} |
//          {"ok": false, "error": {"name", "code", "message"}}], "progress": [...]}]}
// A step that throws does not stop the session; a failed connect fails all its steps.
// A session with "clientName" gives it as clientInfo.name (default mcp-normalizer-test), and one with
// "clientVersion" as clientInfo.version (default 0.0.1).
// A session with "oauth": {"clientId": "..."} connects with an OAuth provider that holds a registered
// client and no tokens: on a 401 the client runs its OAuth discovery (RFC 9728 protected-resource
// metadata, resource check, RFC 8414 server metadata) and stops at the redirect to the authorization
// endpoint, which the session records as "authorizationUrl" (the connect then fails as unauthorized).
// A session with "elicitation": {...} (1.x) declares the elicitation capability and accepts every
// elicitation/create with that content; the params of each are recorded in "elicitations".
import { readFileSync } from 'node:fs';

const raw = process.argv[2] ?? readFileSync(0, 'utf8');
const plan = JSON.parse(raw);
const v2 = plan.sdk === 'v2';
const timeout = plan.timeoutMs ?? 30000; // per request; an unparseable response otherwise hangs for 60 s
const { Client, StreamableHTTPClientTransport, StdioClientTransport, ElicitRequestSchema } = v2
  ? { ...(await import('@modelcontextprotocol/client')), ...(await import('@modelcontextprotocol/client/stdio')) }
  : {
      ...(await import('@modelcontextprotocol/sdk/types.js')),
      ...(await import('@modelcontextprotocol/sdk/client/index.js')),
      ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
      ...(await import('@modelcontextprotocol/sdk/client/stdio.js')),
    };

const describe = (e) => ({ name: e?.name, code: e?.code, message: String(e?.message ?? e) });

const out = { sdk: v2 ? '@modelcontextprotocol/client' : '@modelcontextprotocol/sdk', sessions: [] };
for (const session of plan.sessions) {
  const record = { steps: [], progress: [], listChanged: [] };
  out.sessions.push(record);
  // A session with "versionNegotiation" (2.x only: {"mode": {"pin": "2026-07-28"}} or {"mode": "auto"}) gives it
  // as the client option of that name; the version the client then speaks is the session's "protocolVersion".
  const clientOptions = session.versionNegotiation ? { versionNegotiation: session.versionNegotiation } : {};
  // A session with "elicitation" declares the capability and answers each elicitation/create with it:
  // {"action": "accept", "content": {...}} or {"action": "decline"}; {"action": "hang"} never answers.
  // Each request it got is recorded under "elicitations".
  if (session.elicitation) clientOptions.capabilities = { elicitation: {} };
  // A session with "listChanged": true gives a tools list-changed handler (the SDK refetches the list);
  // each list it got is recorded under "listChanged" (the tool names).
  if (session.listChanged) {
    clientOptions.listChanged = {
      tools: {
        onChanged: (error, tools) => {
          record.listChanged.push(error ? { error: String(error) } : (tools ?? []).map((t) => t.name));
        },
      },
    };
  }
  const client = new Client(
    { name: session.clientName ?? 'mcp-normalizer-test', version: session.clientVersion ?? '0.0.1' },
    clientOptions,
  );
  if (session.elicitation) {
    record.elicitations = [];
    const answer = async (request) => {
      record.elicitations.push(request.params);
      if (session.elicitation.action === 'hang') return new Promise(() => {});
      return session.elicitation;
    };
    if (v2) client.setRequestHandler('elicitation/create', answer);
    else client.setRequestHandler(ElicitRequestSchema, answer);
  }
  const options = { requestInit: { headers: session.headers ?? {} } };
  if (session.oauth) options.authProvider = oauthProvider(session.oauth, record);
  // A session with "command": [argv...] (and "env": {...}) starts that stdio server instead (the
  // SDK's StdioClientTransport; the server's stderr is dropped).
  const transport = session.command
    ? new StdioClientTransport({
        command: session.command[0],
        args: session.command.slice(1),
        env: { ...process.env, ...(session.env ?? {}) },
        stderr: 'ignore',
      })
    : new StreamableHTTPClientTransport(new URL(session.url), options);
  // A session with "offerVersion" offers that protocol version in its initialize request, as a release of
  // the same SDK from that version's time does (the client accepts it back: it is among its supported ones).
  if (session.offerVersion) {
    const sendOne = transport.send.bind(transport);
    transport.send = (message, ...rest) => {
      if (message?.method === 'initialize') {
        message = { ...message, params: { ...message.params, protocolVersion: session.offerVersion } };
      }
      return sendOne(message, ...rest);
    };
  }
  try {
    await client.connect(transport, { timeout });
  } catch (e) {
    for (const _ of session.steps) record.steps.push({ ok: false, error: describe(e) });
    continue;
  }
  // (1.x has no getter on the client: its transport keeps the version it sends in MCP-Protocol-Version)
  record.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
  for (const step of session.steps) {
    try {
      if (step.op === 'listTools') {
        const page = step.cursor ? { cursor: step.cursor } : undefined;
        record.steps.push({ ok: true, value: await client.listTools(page, { timeout }) });
      } else if (step.op === 'callTool') {
        const options = { timeout };
        // "cancelAfterProgress": true aborts the call when its first progress notification arrives (the
        // SDK sends notifications/cancelled); the step then records the client's error.
        const abort = step.cancelAfterProgress ? new AbortController() : undefined;
        if (abort) options.signal = abort.signal;
        if (step.progress || abort) {
          let released = false;
          options.onprogress = (p) => {
            record.progress.push({ ...p, at: Date.now() });
            if (abort && !abort.signal.aborted) abort.abort('cancelled after the first progress notification');
            // Tell a test upstream that the progress notification arrived (it holds the result until then).
            if (step.releaseUrl && !released) {
              released = true;
              fetch(step.releaseUrl, { method: 'POST' }).catch(() => {});
            }
          };
        }
        const params = { name: step.name, arguments: step.arguments ?? {} };
        // 1.x: callTool(params, resultSchema, options); 2.x: callTool(params, options)
        const value = v2 ? await client.callTool(params, options) : await client.callTool(params, undefined, options);
        record.steps.push({ ok: true, value, at: Date.now() });
      } else if (step.op === 'waitListChanged') {
        // Wait (at most "timeoutMs", default the request timeout) until the list-changed handler ran
        // "count" times (default 1); the step's value is the lists it got.
        const until = Date.now() + (step.timeoutMs ?? timeout);
        while (record.listChanged.length < (step.count ?? 1) && Date.now() < until) {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        const ok = record.listChanged.length >= (step.count ?? 1);
        record.steps.push(ok ? { ok, value: record.listChanged } : { ok, error: { name: 'Timeout', message: 'no list change' } });
      } else {
        record.steps.push({ ok: false, error: { name: 'PlanError', message: `unknown op ${step.op}` } });
      }
    } catch (e) {
      record.steps.push({ ok: false, error: describe(e) });
    }
  }
  await client.close().catch(() => {});
}
console.log(JSON.stringify(out));

function oauthProvider(settings, record) {
  let verifier = '';
  return {
    get redirectUrl() {
      return 'http://127.0.0.1:9/callback';
    },
    get clientMetadata() {
      return { client_name: 'mcp-normalizer-test', redirect_uris: ['http://127.0.0.1:9/callback'] };
    },
    clientInformation: () => ({ client_id: settings.clientId }),
    saveClientInformation: () => {},
    tokens: () => undefined,
    saveTokens: () => {},
    redirectToAuthorization: (url) => {
      record.authorizationUrl = url.href;
    },
    saveCodeVerifier: (v) => {
      verifier = v;
    },
    codeVerifier: () => verifier,
  };
}
