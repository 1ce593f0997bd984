"""Claude Code in the loop: a mock of the Anthropic Messages API and a runner that reads back what
its model received.

Claude Code (``tests/hosts``, 2.1.332) calls only ``POST /v1/messages?beta=true`` with
``stream: true``. :class:`AnthropicMock` answers the first request that offers the MCP tool with a
``tool_use`` of it, and every other request with text and ``end_turn``; the request after the call
carries the ``tool_result``, which is the model's view of the result. With
``ENABLE_TOOL_SEARCH=false`` the MCP tools come in ``tools`` directly (named ``mcp__SERVER__TOOL``,
the tool's name with characters outside ``[a-zA-Z0-9_-]`` made ``_``), each with its
``input_schema``. Recipe: ``../shared/reference/hosts-in-the-loop.md``. Like the real API, the mock
answers 400 for a request with a tool whose ``input_schema`` is not valid draft 2020-12
(:func:`api_refusal`): such a request reaches no model.

Beyond the recipe: ``MCP_CONNECTION_NONBLOCKING=false`` makes the first model request wait for the
MCP server (by default Claude Code connects in the background and a slow server, a stdio one
say, may miss the first turn), ``MCP_CONNECT_TIMEOUT_MS`` bounds that wait, and ``--debug`` writes
``HOME/.claude/debug/*.txt`` (where a skipped tool's reason is), appended to ``ModelView.log``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from starlette.responses import JSONResponse, Response

from .host_loop import HOST_TIMEOUT, McpServer, MockModel, ModelView, fresh_home, host_command, host_env, run_host, sse

HOST = "claude-code"
#: The one path Claude Code calls.
MESSAGES = "/v1/messages"
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def model_name(server: str, tool: str) -> str:
    """The name Claude Code gives an MCP tool on the model's side: ``mcp__SERVER__TOOL``, every
    character outside ``[a-zA-Z0-9_-]`` made ``_``."""
    return f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"


def _message(content: list[dict[str, Any]], stop: str) -> Response:
    """A Messages stream of ``content`` blocks (``text`` or ``tool_use``) ending with ``stop``."""
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_mock",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-mock",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                },
            },
        )
    ]
    for index, block in enumerate(content):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return sse(events)


#: The Anthropic API's answer to a tool whose ``input_schema`` is not valid draft 2020-12 (quoted in
#: anthropics/claude-code#586, #7365, #8900 and mapbox/mcp-server#22: every request of the session).
INVALID_SCHEMA = (
    "tools.{index}.custom.input_schema: JSON schema is invalid. It must match JSON Schema draft 2020-12"
    " (https://json-schema.org/draft/2020-12). Learn more about tool use at https://docs.claude.com/en/docs/tool-use."
)


def api_refusal(body: Any) -> str | None:
    """What the real Anthropic API refuses of a Messages request that the mock models: a tool whose
    ``input_schema`` fails the draft 2020-12 metaschema (python-jsonschema's ``check_schema``,
    formats not asserted; whatever ``$schema`` it declares: the Mapbox tool of anthropics/claude-code#586
    declared draft-07). The message, or ``None``."""
    for index, tool in enumerate(body.get("tools") or [] if isinstance(body, dict) else []):
        if isinstance(tool, dict) and "input_schema" in tool:
            try:
                Draft202012Validator.check_schema(tool["input_schema"], format_checker=None)
            except SchemaError:
                return INVALID_SCHEMA.format(index=index)
    return None


def tool_results(body: Any) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of a Messages request's user turns."""
    found: list[dict[str, Any]] = []
    messages = body.get("messages", []) if isinstance(body, dict) else []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            found += [block for block in content if isinstance(block, dict) and block.get("type") == "tool_result"]
    return found


class AnthropicMock(MockModel):
    """The Anthropic Messages API as Claude Code calls it, scripted.

    The first request whose ``tools`` hold :attr:`tool` (the model-side name) gets a ``tool_use``
    of it with :attr:`arguments`; every other ``POST /v1/messages`` gets a short text; any other
    path is unknown (404, and the run fails naming it).

    Args:
        tool: the model-side name of the tool to call (``None``: call none).
        arguments: the call's input.
        fill: instead of ``arguments``, the input made from the tool's declaration as offered
            (``name``, ``description``, ``input_schema``), as a model fills a call from the schema
            it was given (a schema whose property names the host or a proxy chose).
    """

    def __init__(
        self,
        tool: str | None,
        arguments: Mapping[str, Any],
        fill: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(HOST, tool, arguments)
        self.fill = fill
        self.called = False

    def answer(self, path: str, body: Any) -> Response | None:
        if path.split("?")[0] != MESSAGES or not isinstance(body, dict):
            return None
        refusal = api_refusal(body)
        if refusal is not None:  # the request fails, as with the real API: the model is offered nothing
            self.refused.append(self.requests.pop())
            return JSONResponse({"type": "error", "error": {"type": "invalid_request_error", "message": refusal}}, 400)
        offered = {tool.get("name"): tool for tool in body.get("tools") or [] if isinstance(tool, dict)}
        if self.tool is not None and not self.called and self.tool in offered and not tool_results(body):
            self.called = True
            self.turn += 1
            arguments = self.fill(offered[self.tool]) if self.fill is not None else self.arguments
            call = {"type": "tool_use", "id": "toolu_mock_1", "name": self.tool, "input": arguments}
            return _message([{"type": "text", "text": "Calling the tool."}, call], "tool_use")
        return _message([{"type": "text", "text": "Done."}], "end_turn")


def _block_text(block: Any) -> str:
    """One block of a ``tool_result``'s content as the model reads it (an image by its media type)."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return json.dumps(block)
    if block.get("type") == "text":
        return str(block.get("text", ""))
    if block.get("type") == "image":
        source = block.get("source") or {}
        return f"[image {source.get('media_type')}]"
    return json.dumps(block, ensure_ascii=False)


def result_text(result: Mapping[str, Any]) -> str:
    """The text of one ``tool_result`` block (its content a string or a list of blocks)."""
    content = result.get("content")
    if isinstance(content, list):
        return "\n".join(_block_text(block) for block in content)
    return "" if content is None else str(content)


def offered_tools(requests: list[tuple[str, Any]], server: str) -> dict[str, Any]:
    """The MCP tools of ``server`` offered in any Messages request: the tool's name after the
    ``mcp__SERVER__`` prefix (characters outside ``[a-zA-Z0-9_-]`` are ``_`` there) -> its
    declaration as sent (``name``, ``description``, ``input_schema``)."""
    prefix = f"mcp__{_UNSAFE.sub('_', server)}__"
    tools: dict[str, Any] = {}
    for _path, body in requests:
        if not isinstance(body, dict):
            continue
        for tool in body.get("tools") or []:
            name = tool.get("name", "") if isinstance(tool, dict) else ""
            if name.startswith(prefix):
                tools.setdefault(name[len(prefix) :], tool)
    return tools


def claude_config(server: McpServer) -> dict[str, Any]:
    """The ``--mcp-config`` for one server: Streamable HTTP by URL, or a stdio command."""
    if server.url is not None:
        entry: dict[str, Any] = {"type": "http", "url": server.url}
    else:
        command = list(server.command)
        entry = {"type": "stdio", "command": command[0], "args": command[1:], "env": dict(server.env)}
    return {"mcpServers": {server.name: entry}}


def run_claude_code(
    server: McpServer,
    tool: str | None,
    arguments: dict[str, Any],
    tmp: Path,
    *,
    mock: AnthropicMock | None = None,
    timeout: float = HOST_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> ModelView:
    """Run Claude Code once against ``server`` with a mock model that calls ``tool`` (its MCP name;
    ``None``: call none) with ``arguments``; return what the model received.

    ``mock``: a mock to use instead of a fresh :class:`AnthropicMock` (a test of the harness
    itself). ``env``: more variables for the host (``MCP_SDK_GENERATION=v1``: its legacy MCP
    client, which never sends ``server/discover``). ``ModelView.log`` holds the host's output and
    its ``--debug`` log.

    Raises:
        HostFailure: the host hung, never reached the mock, or sent it a request it does not know.
    """
    command = host_command("claude")
    home = fresh_home(tmp, HOST)
    config = home / "mcp.json"
    config.write_text(json.dumps(claude_config(server)))
    mock = mock if mock is not None else AnthropicMock(model_name(server.name, tool) if tool else None, arguments)
    with mock.serving() as base:
        env = host_env(
            home,
            {
                "ANTHROPIC_BASE_URL": base,
                "ANTHROPIC_API_KEY": "dummy",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "ENABLE_TOOL_SEARCH": "false",
                "CLAUDE_CODE_MAX_RETRIES": "0",
                "MCP_CONNECTION_NONBLOCKING": "false",  # the first model request waits for the server
                "MCP_CONNECT_TIMEOUT_MS": "30000",  # (at most this long; 5 s by default)
                **(env or {}),
            },
        )
        argv = [
            str(command),
            "-p",
            "Use the tool, then say done.",
            "--mcp-config",
            str(config),
            "--strict-mcp-config",
            "--allowedTools",
            f"mcp__{server.name}",
            "--debug",
        ]
        log = run_host(HOST, argv, env, home, mock, timeout)
    debug = "\n".join(path.read_text(errors="replace") for path in sorted((home / ".claude" / "debug").glob("*.txt")))
    results = [block for _path, body in mock.requests for block in tool_results(body)]
    return ModelView(
        host=HOST,
        tools=offered_tools(mock.requests, server.name),
        result=result_text(results[0]) if results else None,
        requests=mock.requests,
        log=log + "\n--- debug log ---\n" + debug,
    )
