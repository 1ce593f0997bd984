"""Codex in the loop: a mock of the OpenAI Responses API and a runner for ``codex exec``.

Codex (``@openai/codex``, pinned in ``tests/hosts``) is run as its own process with a fresh
``CODEX_HOME`` and ``HOME`` whose ``config.toml`` names one model provider, the mock on loopback
(``wire_api = "responses"``), and one MCP server (Streamable HTTP ``url`` or stdio ``command``).
Codex sends only ``POST /v1/responses`` with ``stream: true``; the MCP tools arrive grouped in one
``{"type": "namespace", "name": "mcp__NAME", "tools": [...]}`` tool, each a function declaration
named by the tool's short name, and a call of one must carry ``"namespace": "mcp__NAME"``. The
result comes back on the next request as a ``function_call_output`` item. The recipe:
``../shared/reference/hosts-in-the-loop.md`` (Codex section).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from starlette.responses import Response

from .host_loop import (
    HOST_TIMEOUT,
    McpServer,
    MockModel,
    ModelView,
    fresh_home,
    host_command,
    host_env,
    run_host,
    sse,
)

HOST = "codex"
#: The prompt ``codex exec`` gets; the mock answers whatever it says.
PROMPT = "Call the tool."
#: The model name the config gives (the mock accepts any).
MODEL = "gpt-5.1-codex"
#: Codex's log filter: ``codex_core=debug`` says why a tool was skipped.
RUST_LOG = "codex_core=debug,codex_mcp=debug,rmcp=info"

#: Any request Codex makes beyond loopback goes to a closed loopback port and fails there (nothing
#: leaves the machine even where there is a network); loopback itself is reached directly.
LOOPBACK_ONLY = {
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
    "https_proxy": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "all_proxy": "http://127.0.0.1:9",
    "no_proxy": "127.0.0.1,localhost",
}

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def namespace_of(server: str) -> str:
    """The namespace Codex groups a server's tools under: ``mcp__NAME``."""
    return f"mcp__{server}"


def model_name(tool: str) -> str:
    """A tool's short name as Codex offers it (characters outside ``[a-zA-Z0-9_-]`` become ``_``:
    ``codex-rs/codex-mcp/src/mcp_tool_names.rs``). Inside its namespace 0.171.0 keeps a long name
    whole (73 characters seen); the hashed form of longer qualified names is not mapped here."""
    return _UNSAFE.sub("_", tool)


class ResponsesMock(MockModel):
    """The OpenAI Responses API as Codex streams it: ``POST /v1/responses`` only.

    The first request that offers tools is answered with a ``function_call`` of :attr:`tool` in
    :attr:`namespace` (when a tool is named and offered); every other request with a short
    assistant message. Each answer is one SSE stream: ``response.created``,
    ``response.output_item.added``, ``response.output_item.done``, ``response.completed`` (with
    ``usage``).

    Args:
        namespace: the namespace of the MCP server's tools (``mcp__NAME``).
        tool: the tool's short name as offered, or ``None``: never call one.
        arguments: the call's arguments.
    """

    def __init__(self, namespace: str, tool: str | None, arguments: Mapping[str, Any]) -> None:
        super().__init__(HOST, tool, arguments)
        self.namespace = namespace
        self.called = False

    def answer(self, path: str, body: Any) -> Response | None:
        if path.split("?")[0] != "/v1/responses" or not isinstance(body, dict):
            return None
        number = len(self.requests)
        if self.tool is not None and not self.called and self.tool in offered(body, self.namespace):
            self.called = True
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{number}",
                "call_id": f"call_{number}",
                "namespace": self.namespace,
                "name": self.tool,
                "arguments": json.dumps(self.arguments),
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{number}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
            }
        return _stream(f"resp_{number}", item)


def _stream(response_id: str, item: dict[str, Any]) -> Response:
    created = {"id": response_id, "object": "response", "created_at": int(time.time()), "status": "in_progress"}
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    done = {**created, "status": "completed", "output": [item], "usage": usage}
    return sse(
        [
            ("response.created", {"type": "response.created", "response": created}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": done}),
        ]
    )


def offered(body: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The tools of ``namespace`` in one Responses request: short name -> the declaration."""
    found: dict[str, Any] = {}
    for entry in body.get("tools") or ():
        if isinstance(entry, dict) and entry.get("type") == "namespace" and entry.get("name") == namespace:
            for declared in entry.get("tools") or ():
                if isinstance(declared, dict) and isinstance(declared.get("name"), str):
                    found[declared["name"]] = declared
    return found


def result_text(body: Mapping[str, Any]) -> str | None:
    """The text of the last ``function_call_output`` in one Responses request, if any."""
    text: str | None = None
    for entry in body.get("input") or ():
        if isinstance(entry, dict) and entry.get("type") == "function_call_output":
            output = entry.get("output")
            if isinstance(output, str):
                text = output
            elif isinstance(output, list):  # content items: the texts joined, other items as JSON
                text = "\n".join(
                    part["text"] if isinstance(part, dict) and isinstance(part.get("text"), str) else json.dumps(part)
                    for part in output
                )
            else:
                text = json.dumps(output)
    return text


def _toml(value: Any) -> str:
    """A TOML value (strings, lists of strings, tables of strings): JSON's escapes are TOML's."""
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def write_config(home: Path, server: McpServer, base_url: str) -> Path:
    """Write ``home/.codex/config.toml``: the mock as the only model provider, ``server`` as the only
    MCP server. Returns ``CODEX_HOME``."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    lines = [
        'model_provider = "mock"',
        f"model = {_toml(MODEL)}",
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        "",
        "[model_providers.mock]",
        'name = "mock"',
        f"base_url = {_toml(base_url + '/v1')}",
        'wire_api = "responses"',
        'env_key = "MOCK_API_KEY"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
        # no plugin or app sync at start (it would fetch github.com and chatgpt.com)
        "[features]",
        "plugins = false",
        "remote_plugin = false",
        "apps = false",
        "",
        f"[mcp_servers.{server.name}]",
    ]
    if server.url is not None:
        lines.append(f"url = {_toml(server.url)}")
    else:
        command, *args = server.command
        lines += [f"command = {_toml(command)}", f"args = {_toml(list(args))}"]
        if server.env:
            lines.append(f"env = {_toml(dict(server.env))}")
    lines += ["startup_timeout_sec = 30", "tool_timeout_sec = 30", ""]
    (codex_home / "config.toml").write_text("\n".join(lines), encoding="utf-8")
    return codex_home


def run_codex(
    server: McpServer,
    tool: str | None,
    arguments: Mapping[str, Any],
    tmp: Path,
    *,
    names: Iterable[str] = (),
    mock: type[ResponsesMock] = ResponsesMock,
    timeout: float = HOST_TIMEOUT,
) -> ModelView:
    """Run ``codex exec`` once against ``server`` with the mock as its model; return what the model got.

    ``tool`` is the MCP tool's own name (``None``: the model calls nothing). The view's ``tools``
    are keyed by the name Codex offered, which is the MCP name for names of ``[a-zA-Z0-9_-]``;
    ``tool`` and ``names`` (other MCP names) are mapped back from Codex's spelling
    (:func:`model_name`). ``result`` is the ``function_call_output`` text of the last request (it
    starts ``Wall time: ... Output:``). ``mock`` is the model's class (a test of the harness gives
    one that misbehaves); ``timeout`` bounds the run in seconds.

    Raises:
        HostFailure: Codex hung, never reached the mock, or sent it a request it does not know.
    """
    command = host_command("codex")
    namespace = namespace_of(server.name)
    model = mock(namespace, model_name(tool) if tool is not None else None, arguments)
    home = fresh_home(tmp, HOST)
    work = home / "work"
    work.mkdir()
    with model.serving() as base_url:
        codex_home = write_config(home, server, base_url)
        env = host_env(
            home, {**LOOPBACK_ONLY, "CODEX_HOME": str(codex_home), "MOCK_API_KEY": "dummy", "RUST_LOG": RUST_LOG}
        )
        argv = [
            str(command),
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            PROMPT,
        ]
        log = run_host(HOST, argv, env, work, model, timeout)
    bodies = [body for _, body in model.requests if isinstance(body, dict)]
    back = {model_name(name): name for name in (*names, *([tool] if tool is not None else []))}
    first = next((offered(body, namespace) for body in bodies if body.get("tools")), {})  # the turn's tools
    declared = {back.get(name, name): spec for name, spec in first.items()}
    return ModelView(
        host=HOST,
        tools=declared,
        result=next((text for body in reversed(bodies) if (text := result_text(body)) is not None), None),
        requests=model.requests,
        log=log,
    )
