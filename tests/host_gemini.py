"""Gemini CLI in the loop: a mock of the Gemini API's wire and a runner (issue 38).

The host is ``@google/gemini-cli@0.61.0`` (``tests/hosts``), run headless (``gemini -p ... --yolo``)
with a fresh ``HOME`` whose ``.gemini/settings.json`` names one MCP server, and
``GOOGLE_GEMINI_BASE_URL`` pointing at :class:`GeminiMock` on loopback. The wire
(``../shared/reference/hosts-in-the-loop.md``, "Gemini CLI"):

- ``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse``: a turn. Its body's ``tools`` carry
  ``functionDeclarations`` (MCP tools named ``mcp_SERVER_TOOL``, declared with
  ``parametersJsonSchema``); the mock answers the first turn with one SSE ``data:`` event holding a
  ``functionCall``, and every later turn with text. The next turn's ``contents`` carry the
  ``functionResponse`` (what the model read of the result).
- ``POST /v1beta/models/MODEL:countTokens``: answered with a token count.
- ``POST /v1beta/models/MODEL:generateContent``: a JSON-mode side request (the model router when no
  ``-m`` is given, and other checks): answered with a minimal value of its ``responseJsonSchema``.

:func:`run_gemini_cli` is a plain function (a later host matrix reuses it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.responses import JSONResponse, Response

from .host_loop import (
    HOST_BIN,
    HOST_TIMEOUT,
    HostFailure,
    McpServer,
    MockModel,
    ModelView,
    fresh_home,
    host_command,
    host_env,
    run_host,
    sse,
)

HOST = "gemini-cli"
#: The model named with ``-m`` (no router request then).
MODEL = "gemini-2.5-pro"
#: The text the mock answers with once the tool result is in.
FINAL_TEXT = "Done."
_PATH = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)(?:\?.*)?$")
#: Members Gemini CLI adds to every MCP tool's declared parameters (not the server's).
ADDED_PROPERTIES = ("wait_for_previous",)


def model_name(server: str, tool: str) -> str:
    """The function name Gemini CLI gives an MCP tool (``generateValidName`` in
    ``@google/gemini-cli-core`` ``tools/mcp-tool``): ``mcp_SERVER_TOOL``, characters outside
    ``[a-zA-Z0-9_.:-]`` replaced by ``_`` (names over 63 characters are shortened there; not here)."""
    return re.sub(r"[^a-zA-Z0-9_.:\-]", "_", f"mcp_{server}_{tool}")


def _minimal(schema: Any) -> Any:
    """A small value of a JSON-mode response schema (the router wants a score of at least 1)."""
    if not isinstance(schema, dict):
        return {}
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    kind = kind.lower() if isinstance(kind, str) else kind
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: _minimal(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return False
    return "x"


class GeminiMock(MockModel):
    """The Gemini API's ``v1beta`` wire as Gemini CLI calls it, scripted: the first turn that offers
    tools gets a call of ``tool`` (when given), every other turn the text :data:`FINAL_TEXT`."""

    def __init__(
        self,
        tool: str | None,
        arguments: Mapping[str, Any],
        fill: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(HOST, tool, arguments)
        #: Instead of ``arguments``, the call's args made from the function declaration as offered
        #: (``name``, ``parametersJsonSchema`` or ``parameters``), as a model fills a call from the
        #: schema it was given (one whose parameter names a proxy chose).
        self.fill = fill
        self.called = False

    def answer(self, path: str, body: Any) -> Response | None:
        match = _PATH.match(path)
        if match is None or not isinstance(body, dict):
            return None
        method = match["method"]
        if method == "countTokens":
            return JSONResponse({"totalTokens": 10})
        if method == "generateContent":
            config = body.get("generationConfig") or {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            value = _minimal(schema) if schema is not None else {}
            return JSONResponse(self._candidate([{"text": json.dumps(value)}]))
        if method != "streamGenerateContent":
            return None
        if self.tool is not None and not self.called and body.get("tools"):
            self.called = True
            self.turn += 1
            arguments = self.arguments
            if self.fill is not None:
                declared = [
                    declaration
                    for group in body["tools"]
                    for declaration in group.get("functionDeclarations") or ()
                    if declaration.get("name") == self.tool
                ]
                arguments = self.fill(declared[0]) if declared else arguments
            part = {"functionCall": {"name": self.tool, "args": arguments}}
            return sse([(None, self._candidate([part]))])
        self.turn += 1
        return sse([(None, self._candidate([{"text": FINAL_TEXT}]))])

    @staticmethod
    def _candidate(parts: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": MODEL,
        }


def _settings(server: McpServer) -> dict[str, Any]:
    """``~/.gemini/settings.json``: the one server, API-key auth, nothing that calls out."""
    entry: dict[str, Any] = {"trust": True, "timeout": 30_000}
    if server.url is not None:
        entry["httpUrl"] = server.url
    else:
        # Gemini CLI drops some variables of a server's ``env`` ("Blocked dangerous environment
        # variable override": PYTHONPATH among them), so the variables go through ``env(1)``.
        argv = ["env", *(f"{k}={v}" for k, v in server.env.items()), *server.command] if server.env else server.command
        entry["command"] = argv[0]
        entry["args"] = list(argv[1:])
    return {
        "mcpServers": {server.name: entry},
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False},
        "ui": {"hideTips": True, "hideBanner": True},
    }


def offered(requests: list[tuple[str, Any]], server: str) -> dict[str, Any]:
    """The MCP tools of ``server`` declared to the model in the first turn that offered tools, by
    function name as the model got it (``mcp_SERVER_TOOL``) -> the function declaration."""
    prefix = f"mcp_{server}_"
    for path, body in requests:
        if ":streamGenerateContent" not in path or not isinstance(body, dict) or not body.get("tools"):
            continue
        found: dict[str, Any] = {}
        for group in body["tools"]:
            for declaration in group.get("functionDeclarations") or ():
                name = declaration.get("name", "")
                if name.startswith(prefix):
                    found[name] = declaration
        return found
    return {}


def function_responses(requests: list[tuple[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every ``functionResponse`` part the host sent the model, in order (each once), with the
    other parts of its message (Gemini CLI puts a result's images there, as ``inlineData``)."""
    seen: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for path, body in requests:
        if ":streamGenerateContent" not in path or not isinstance(body, dict):
            continue
        for content in body.get("contents") or ():
            parts = [part for part in content.get("parts") or () if isinstance(part, dict)]
            for part in parts:
                response = part.get("functionResponse")
                if isinstance(response, dict) and response not in (known for known, _ in seen):
                    seen.append((response, [p for p in parts if "functionResponse" not in p]))
    return seen


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _part_text(part: Mapping[str, Any]) -> str | None:
    if "text" in part:
        return str(part["text"])
    media = part.get("inlineData")
    if isinstance(media, dict):
        return f"[inlineData {media.get('mimeType')}: {media.get('data')}]"
    return None


def result_text(response: Mapping[str, Any], beside: Sequence[Mapping[str, Any]] = ()) -> str:
    """The tool result as the model reads it: the ``functionResponse``'s ``response`` (``output`` or
    ``error`` text, or its JSON), then each part in it or beside it: text as is, inline media as
    ``[inlineData MIME: BASE64]``."""
    body = response.get("response")
    if isinstance(body, dict) and set(body) <= {"output", "error", "content"}:
        pieces = [_as_text(body[key]) for key in ("output", "error") if key in body]
        if "content" in body:
            pieces.append(json.dumps(body["content"], ensure_ascii=False))
    else:
        pieces = [json.dumps(body, ensure_ascii=False)]
    for part in (*(response.get("parts") or ()), *beside):
        if isinstance(part, Mapping) and (piece := _part_text(part)) is not None:
            pieces.append(piece)
    return "\n".join(pieces)


def run_gemini_cli(
    server: McpServer,
    tool: str | None,
    arguments: Mapping[str, Any],
    tmp: Path,
    *,
    timeout: float = HOST_TIMEOUT,
    mock: type[GeminiMock] = GeminiMock,
    model: str | None = MODEL,
) -> ModelView:
    """Run Gemini CLI once against ``server`` with the mock model; what the model received.

    Args:
        server: the MCP server (its ``name`` is the key in ``mcpServers``).
        tool: the MCP tool the model calls on its first turn (``None``: none).
        arguments: the call's arguments.
        tmp: a folder for the fresh ``HOME`` and the working directory.
        timeout: seconds the run may take (then the process group is killed).
        mock: the model API's mock class (a subclass scripts other answers).
        model: the model named with ``-m``; ``None``: none, so the CLI's router asks first
            (a ``:generateContent`` request in JSON mode).

    Returns:
        The :class:`ModelView`: ``tools`` by MCP tool name (the ``mcp_SERVER_`` prefix removed) ->
        the function declaration the model got; ``result`` the text of the ``functionResponse``.

    Raises:
        HostFailure: the host hung, never reached the mock, or sent it a request it does not know.
    """
    command = host_command("gemini")
    home = fresh_home(tmp, HOST)
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(_settings(server), indent=2))
    work = home / "work"
    work.mkdir()
    called = model_name(server.name, tool) if tool is not None else None
    fake = mock(called, arguments)
    (home / "tmp").mkdir()
    with fake.serving() as base:
        env = host_env(
            home,
            {
                "GOOGLE_GEMINI_BASE_URL": base,
                "GEMINI_API_KEY": "dummy",
                "GEMINI_CLI_NO_RELAUNCH": "true",
                "NO_COLOR": "1",
                "TMPDIR": str(home / "tmp"),
                "CI": "1",
            },
        )
        argv = [str(command), "-p", "Use the tool.", "--yolo", "--skip-trust", *(["-m", model] if model else [])]
        log = run_host(HOST, argv, env, work, fake, timeout)
    prefix = f"mcp_{server.name}_"
    tools = {name.removeprefix(prefix): decl for name, decl in offered(fake.requests, server.name).items()}
    responses = [r for r in function_responses(fake.requests) if called is None or r[0].get("name") == called]
    result = result_text(*responses[0]) if responses else None
    if called is not None and called in {f"{prefix}{t}" for t in tools} and result is None:
        raise HostFailure(HOST, f"offered {called} but sent the model no result of it", fake.last_path, log)
    return ModelView(host=HOST, tools=tools, result=result, requests=fake.requests, log=log)


# -- the same code as a library: @google/gemini-cli-core, no model ------------------------------

#: Gemini CLI's discovery and call path run as a library (``@google/gemini-cli-core`` ``tools/mcp-client``:
#: ``connectToMcpServer``, ``discoverTools``; each tool's ``schema`` is the declaration the model gets,
#: ``build(args).execute()`` returns the ``llmContent`` it reads). The last argument is a JSON spec
#: ``{"config": <MCPServerConfig>, "tool": NAME or null, "args": {...}}``; it prints one JSON object.
CORE_SCRIPT = r"""
const { config, tool, args } = JSON.parse(process.argv.at(-1));
const { connectToMcpServer, discoverTools } = await import('@google/gemini-cli-core/dist/src/tools/mcp-client.js');
const diagnostics = [];
const context = {
  sanitizationConfig: {
    allowedEnvironmentVariables: [], blockedEnvironmentVariables: [], enableEnvironmentVariableRedaction: false,
  },
  emitMcpDiagnostic: (severity, message) => diagnostics.push(`${severity}: ${message}`),
  isTrustedFolder: () => true,
};
const workspace = { getDirectories: () => [process.cwd()], onDirectoriesChanged: () => () => {} };
const out = { tools: {}, result: null, error: null, diagnostics };
let client;
try {
  client = await connectToMcpServer('0.61.0', 'srv', config, false, workspace, context);
  const tools = await discoverTools('srv', config, client, context, undefined);
  for (const t of tools) out.tools[t.serverToolName] = t.schema;
  const chosen = tool === null ? undefined : tools.find((t) => t.serverToolName === tool);
  if (chosen) {
    const done = await chosen.build(args).execute({ abortSignal: new AbortController().signal });
    out.result = done.llmContent;
  }
} catch (error) {
  out.error = error instanceof Error ? error.message : String(error);
} finally {
  await client?.close();
}
process.stdout.write(JSON.stringify(out));
"""
CORE = "gemini-cli-core"


def _llm_text(content: Any) -> str:
    """``llmContent`` (a string, or parts) as the text the model reads."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    return "\n".join(str(p["text"]) if isinstance(p, dict) and "text" in p else json.dumps(p) for p in parts)


def run_gemini_core(
    server: McpServer, tool: str | None, arguments: Mapping[str, Any], tmp: Path, *, timeout: float = HOST_TIMEOUT
) -> ModelView:
    """Gemini CLI's MCP discovery and call as a library (``@google/gemini-cli-core``), no model:
    the declarations its model would get and the ``llmContent`` of one call.

    Returns:
        A :class:`ModelView` (host ``gemini-cli-core``): ``tools`` by MCP tool name -> the function
        declaration; ``result`` the call's text (``None`` when the tool was not discovered); ``log``
        the library's diagnostics and error (a refused ``tools/list`` names the tool's path there).

    Raises:
        HostFailure: node is missing, the script ran past ``timeout`` or printed no result.
    """
    node = shutil.which("node")
    if node is None:
        raise HostFailure(CORE, "node is not on PATH", None, "")
    host_command("gemini")  # skips when the hosts are not installed
    config: dict[str, Any] = _settings(server)["mcpServers"][server.name]
    spec = json.dumps({"config": config, "tool": tool, "args": dict(arguments)})
    tmp.mkdir(parents=True, exist_ok=True)
    env = host_env(tmp, {"NO_COLOR": "1"})
    argv = [node, "--input-type=module", "-e", CORE_SCRIPT, spec]
    try:
        done = subprocess.run(
            argv, cwd=HOST_BIN.parent.parent, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as expired:
        raise HostFailure(CORE, f"did not end within {timeout:.0f} s", None, str(expired.stderr or "")) from None
    log = done.stdout + done.stderr
    try:
        out = json.loads(done.stdout)
    except ValueError:
        raise HostFailure(CORE, f"exited ({done.returncode}) without a result", None, log) from None
    notes = [*out["diagnostics"], *([f"error: {out['error']}"] if out["error"] else [])]
    result = None if out["result"] is None else _llm_text(out["result"])
    return ModelView(host=CORE, tools=out["tools"], result=result, requests=[], log="\n".join([*notes, done.stderr]))
