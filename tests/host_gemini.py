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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starlette.responses import JSONResponse, Response

from .host_loop import (
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

    def __init__(self, tool: str | None, arguments: Mapping[str, Any]) -> None:
        super().__init__(HOST, tool, arguments)
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
            part = {"functionCall": {"name": self.tool, "args": self.arguments}}
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


def function_responses(requests: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Every ``functionResponse`` part the host sent the model, in order (each once)."""
    seen: list[dict[str, Any]] = []
    for path, body in requests:
        if ":streamGenerateContent" not in path or not isinstance(body, dict):
            continue
        for content in body.get("contents") or ():
            for part in content.get("parts") or ():
                response = part.get("functionResponse")
                if isinstance(response, dict) and response not in seen:
                    seen.append(response)
    return seen


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def result_text(response: Mapping[str, Any]) -> str:
    """The tool result as the model reads it: the ``functionResponse``'s ``response`` (``output`` or
    ``error`` text, or its JSON) and the text of any inline parts beside it."""
    body = response.get("response")
    if isinstance(body, dict) and set(body) <= {"output", "error", "content"}:
        pieces = [_as_text(body[key]) for key in ("output", "error") if key in body]
        if "content" in body:
            pieces.append(json.dumps(body["content"], ensure_ascii=False))
        text = "\n".join(pieces)
    else:
        text = json.dumps(body, ensure_ascii=False)
    for part in response.get("parts") or ():
        if isinstance(part, dict) and "text" in part:
            text += "\n" + str(part["text"])
    return text


def run_gemini_cli(
    server: McpServer,
    tool: str | None,
    arguments: Mapping[str, Any],
    tmp: Path,
    *,
    timeout: float = HOST_TIMEOUT,
    mock: type[GeminiMock] = GeminiMock,
) -> ModelView:
    """Run Gemini CLI once against ``server`` with the mock model; what the model received.

    Args:
        server: the MCP server (its ``name`` is the key in ``mcpServers``).
        tool: the MCP tool the model calls on its first turn (``None``: none).
        arguments: the call's arguments.
        tmp: a folder for the fresh ``HOME`` and the working directory.
        timeout: seconds the run may take (then the process group is killed).
        mock: the model API's mock class (a subclass scripts other answers).

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
    model = mock(called, arguments)
    (home / "tmp").mkdir()
    with model.serving() as base:
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
        argv = [str(command), "-p", "Use the tool.", "--yolo", "--skip-trust", "-m", MODEL]
        log = run_host(HOST, argv, env, work, model, timeout)
    prefix = f"mcp_{server.name}_"
    tools = {name.removeprefix(prefix): decl for name, decl in offered(model.requests, server.name).items()}
    responses = [r for r in function_responses(model.requests) if called is None or r.get("name") == called]
    result = result_text(responses[0]) if responses else None
    if called is not None and called in {f"{prefix}{t}" for t in tools} and result is None:
        raise HostFailure(HOST, f"offered {called} but sent the model no result of it", model.last_path, log)
    return ModelView(host=HOST, tools=tools, result=result, requests=model.requests, log=log)
