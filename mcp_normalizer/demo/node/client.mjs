// Drives a real MCP client (@modelcontextprotocol/sdk 1.x or @modelcontextprotocol/client 2.x) over
// Streamable HTTP (or stdio) and prints what it received as one JSON line.
//
// Usage: node client.mjs '<plan JSON>'   (or the plan on stdin)
// Plan: {"sdk": "v1" | "v2", "timeoutMs"?: 30000, "sessions": [{"url": "...", "headers": {...}, "steps": [
//          {"op": "listTools"},
//          {"op": "callTool", "name": "...", "arguments": {...}, "progress": true}
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
import { readFileSync } from 'node:fs';

const raw = process.argv[2] ?? readFileSync(0, 'utf8');
const plan = JSON.parse(raw);
const v2 = plan.sdk === 'v2';
const timeout = plan.timeoutMs ?? 30000; // per request; an unparseable response otherwise hangs for 60 s
const { Client, StreamableHTTPClientTransport, StdioClientTransport } = v2
  ? { ...(await import('@modelcontextprotocol/client')), ...(await import('@modelcontextprotocol/client/stdio')) }
  : {
      ...(await import('@modelcontextprotocol/sdk/client/index.js')),
      ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
      ...(await import('@modelcontextprotocol/sdk/client/stdio.js')),
    };

const describe = (e) => ({ name: e?.name, code: e?.code, message: String(e?.message ?? e) });

const out = { sdk: v2 ? '@modelcontextprotocol/client' : '@modelcontextprotocol/sdk', sessions: [] };
for (const session of plan.sessions) {
  const record = { steps: [], progress: [] };
  out.sessions.push(record);
  // A session with "versionNegotiation" (2.x only: {"mode": {"pin": "2026-07-28"}} or {"mode": "auto"}) gives it
  // as the client option of that name; the version the client then speaks is the session's "protocolVersion".
  const clientOptions = session.versionNegotiation ? { versionNegotiation: session.versionNegotiation } : {};
  // A session with "elicit": {"action": "accept", "content": {...}} declares the elicitation capability and
  // answers every elicitation/create with it; the requests' params are recorded as "elicitations".
  if (session.elicit) clientOptions.capabilities = { elicitation: { form: {} } };
  const client = new Client(
    { name: session.clientName ?? 'mcp-normalizer-test', version: session.clientVersion ?? '0.0.1' },
    clientOptions,
  );
  if (session.elicit) {
    record.elicitations = [];
    const answer = async (request) => {
      record.elicitations.push(request.params);
      return session.elicit;
    };
    if (v2) client.setRequestHandler('elicitation/create', answer);
    else client.setRequestHandler((await import('@modelcontextprotocol/sdk/types.js')).ElicitRequestSchema, answer);
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
  try {
    await client.connect(transport, { timeout });
  } catch (e) {
    for (const _ of session.steps) record.steps.push({ ok: false, error: describe(e) });
    continue;
  }
  record.protocolVersion = client.getNegotiatedProtocolVersion?.();
  for (const step of session.steps) {
    try {
      if (step.op === 'listTools') {
        const page = step.cursor ? { cursor: step.cursor } : undefined;
        record.steps.push({ ok: true, value: await client.listTools(page, { timeout }) });
      } else if (step.op === 'callTool') {
        const options = { timeout };
        if (step.progress) {
          let released = false;
          options.onprogress = (p) => {
            record.progress.push({ ...p, at: Date.now() });
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
