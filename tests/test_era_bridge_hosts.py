"""Real hosts on their legacy handshake through the era bridge (issue 41 item 2): a server that speaks
only 2026-07-28 reaches Gemini CLI, Codex and Claude Code (``MCP_SDK_GENERATION=v1``) through the
proxy, and none of them directly.

The server is :class:`ScriptedServer` with ``legacy=False``: it refuses every request without the
2026-07-28 ``_meta`` (``initialize`` among them) with 400 and ``-32022``, and ``GET``/``DELETE`` with
405 (``S2026-07-28/basic/transports/streamable-http.mdx``). Its three tools carry field data: a
decimal (12.5), a small one written with an exponent (1e-7), text beyond ASCII, a ``null`` at depth,
and an error whose RFC 9457 problem is in ``structuredContent`` with empty ``content``.

Each host runs once per route with one prompt; its mock model (:mod:`tests.host_claude`,
:mod:`tests.host_codex`, :mod:`tests.host_gemini`) calls the server's tools one per turn, in order,
and the test reads back every tool result the model received. Through the proxy (``upstream_era =
"auto"``, the default) the bridge forwards the host's first ``initialize`` as it came; the server's
refusal makes it probe ``server/discover`` and answer the host itself, and from then on every request
reaches the server at 2026-07-28, carrying the host's own ``clientInfo`` in ``_meta``. Directly, each
host fails at ``initialize`` and offers its model no tool of the server.

Claude Code without ``MCP_SDK_GENERATION=v1`` speaks 2026-07-28 itself (it probes
``server/discover`` first): directly and through the proxy it reaches the same server natively, and
the proxy does not bridge it (no ``initialize`` ever reaches the server).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import Response

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning

from . import host_claude, host_codex, host_gemini
from .host_claude import AnthropicMock, run_claude_code, tool_results
from .host_codex import ResponsesMock, run_codex
from .host_gemini import GeminiMock, function_responses, run_gemini_cli
from .host_loop import McpServer, ModelView, sse
from .support import proxy_for, serve

pytestmark = pytest.mark.wire

SERVER = "era"
MODERN = "2026-07-28"
VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"
QUERY = {"type": "object", "properties": {"q": {"type": "string", "description": "what to look up"}}}

#: A text result: a decimal, one written with an exponent, text beyond ASCII, a null.
QUOTE_TEXT = '{"price": 12.5, "tolerance": 1e-7, "name": "caf\u00e9 \u2713 \u6771\u4eac", "note": null}'
#: A result with ``structuredContent`` (rows with a null at depth) and a short text beside it.
ROWS = {"rows": [{"id": 1, "price": 12.5, "tolerance": 1e-7, "note": None}, {"id": 2, "city": "Zo\u00eb \u6771\u4eac"}]}
ROWS_TEXT = "2 rows: 12.5 and Zo\u00eb"
#: An error whose RFC 9457 problem is in ``structuredContent``, ``content`` empty.
PROBLEM: dict[str, Any] = {
    "type": "https://example.com/problems/forbidden",
    "title": "Forbidden",
    "status": 403,
    "detail": "runtime r-17 belongs to another tenant (\u00e9tape 2)",
    "code": "TENANT_MISMATCH",
}
#: What the proxy's ``error_problem`` rule puts in the error's text: ``[CODE] detail``.
PROBLEM_LINE = f"[{PROBLEM['code']}] {PROBLEM['detail']}"


def tools() -> list[ToolSpec]:
    """The server's three tools (fresh results per server: a handler's result is sent as is)."""

    def spec(name: str, result: dict[str, Any]) -> ToolSpec:
        return ToolSpec({"name": name, "description": f"The {name} tool.", "inputSchema": QUERY}, returning(result))

    return [
        spec("quote", {"content": [{"type": "text", "text": QUOTE_TEXT}]}),
        spec("rows", {"content": [{"type": "text", "text": ROWS_TEXT}], "structuredContent": ROWS}),
        spec("deploy", {"content": [], "structuredContent": PROBLEM, "isError": True}),
    ]


#: The calls the model makes, one per turn, in this order.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("quote", {"q": "caf\u00e9"}),
    ("rows", {"q": "all"}),
    ("deploy", {"q": "r-17"}),
]
NAMES = [name for name, _ in CALLS]


@contextmanager
def routes(era: str = "auto") -> Iterator[tuple[ScriptedServer, McpServer, McpServer]]:
    """A 2026-07-28-only server and the proxy in front of it (``[proxy] upstream_era = era``; ``auto``
    is the default); yield the server, the way to it directly and through the proxy."""
    server = ScriptedServer(tools(), legacy=False)
    config = NormalizerConfig.from_mapping({"proxy": {"upstream_era": era}})
    with serve(server) as up, proxy_for(up + "/mcp", config) as px:
        yield server, McpServer(SERVER, up + "/mcp"), McpServer(SERVER, px + "/mcp")


# -- mocks that call every tool, one per turn ---------------------------------------------------


class ClaudeCallsAll(AnthropicMock):
    """The Messages API calling each of :data:`CALLS` in turn (the next once the last one's
    ``tool_result`` is in), then ending the turn with text."""

    def __init__(self) -> None:
        super().__init__(None, {})

    def answer(self, path: str, body: Any) -> Response | None:
        if path.split("?")[0] != host_claude.MESSAGES or not isinstance(body, dict):
            return None
        offered = {tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)}
        done = len(tool_results(body))
        if done < len(CALLS):
            name, arguments = CALLS[done]
            model = host_claude.model_name(SERVER, name)
            if model in offered:
                call = {"type": "tool_use", "id": f"toolu_mock_{done}", "name": model, "input": arguments}
                return host_claude._message([call], "tool_use")
        return host_claude._message([{"type": "text", "text": "Done."}], "end_turn")


def claude_results(view: ModelView) -> dict[str, str]:
    """Each tool's result as Claude Code's model read it, by MCP tool name."""
    by_id: dict[str, str] = {}
    for _path, body in view.requests:
        for block in tool_results(body):
            by_id.setdefault(block["tool_use_id"], host_claude.result_text(block))
    return {name: by_id[f"toolu_mock_{n}"] for n, name in enumerate(NAMES) if f"toolu_mock_{n}" in by_id}


class CodexCallsAll(ResponsesMock):
    """The Responses API calling each of :data:`CALLS` in turn, then answering with text."""

    def answer(self, path: str, body: Any) -> Response | None:
        if path.split("?")[0] != "/v1/responses" or not isinstance(body, dict):
            return None
        outputs = [item for item in body.get("input") or () if item.get("type") == "function_call_output"]
        done = len(outputs)
        offered = host_codex.offered(body, self.namespace)
        if done < len(CALLS) and host_codex.model_name(CALLS[done][0]) in offered:
            name, arguments = CALLS[done]
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{done}",
                "call_id": f"call_{done}",
                "namespace": self.namespace,
                "name": host_codex.model_name(name),
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{len(self.requests)}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
            }
        return host_codex._stream(f"resp_{len(self.requests)}", item)


def codex_results(view: ModelView) -> dict[str, str]:
    """Each tool's output as Codex's model read it (after ``Wall time: ... Output:``), by MCP name."""
    by_call: dict[str, str] = {}
    for _path, body in view.requests:
        for item in body.get("input") or () if isinstance(body, dict) else ():
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                text = host_codex.result_text({"input": [item]}) or ""
                by_call.setdefault(item["call_id"], text.partition("Output:\n")[2] or text)
    return {name: by_call[f"call_{n}"] for n, name in enumerate(NAMES) if f"call_{n}" in by_call}


class GeminiCallsAll(GeminiMock):
    """The Gemini API calling each of :data:`CALLS` in turn, then answering with text."""

    def answer(self, path: str, body: Any) -> Response | None:
        if ":streamGenerateContent" not in path or not isinstance(body, dict):
            return super().answer(path, body)
        done = sum(
            1
            for content in body.get("contents") or ()
            for part in content.get("parts") or ()
            if isinstance(part, dict) and "functionResponse" in part
        )
        offered = host_gemini.offered([(path, body)], SERVER)
        if done < len(CALLS) and host_gemini.model_name(SERVER, CALLS[done][0]) in offered:
            name, arguments = CALLS[done]
            part = {"functionCall": {"name": host_gemini.model_name(SERVER, name), "args": arguments}}
            return sse([(None, self._candidate([part]))])
        return sse([(None, self._candidate([{"text": host_gemini.FINAL_TEXT}]))])


def gemini_results(view: ModelView) -> dict[str, str]:
    """Each tool's result as Gemini CLI's model read it, by MCP tool name."""
    prefix = f"mcp_{SERVER}_"
    return {
        str(response["name"]).removeprefix(prefix): host_gemini.result_text(response, beside)
        for response, beside in function_responses(view.requests)
    }


# -- running each host ------------------------------------------------------------------------


def run_gemini(server: McpServer, tmp: Path) -> tuple[ModelView, dict[str, str]]:
    view = run_gemini_cli(server, NAMES[0], CALLS[0][1], tmp, mock=GeminiCallsAll)
    return view, gemini_results(view)


def run_codex_all(server: McpServer, tmp: Path) -> tuple[ModelView, dict[str, str]]:
    view = run_codex(server, None, {}, tmp, names=NAMES, mock=CodexCallsAll)
    return view, codex_results(view)


def run_claude(server: McpServer, tmp: Path, env: Mapping[str, str]) -> tuple[ModelView, dict[str, str]]:
    view = run_claude_code(server, None, {}, tmp, mock=ClaudeCallsAll(), env=env)
    return view, claude_results(view)


LEGACY_CLAUDE = {"MCP_SDK_GENERATION": "v1"}

#: Each legacy host: its ``clientInfo.name``, how it runs, and what it says when the server refuses
#: its ``initialize`` (its output, or for Claude Code its debug log).
HOSTS: dict[str, tuple[str, Callable[[McpServer, Path], tuple[ModelView, dict[str, str]]], str]] = {
    "gemini-cli": ("gemini-cli-mcp-client", run_gemini, "MCP issues detected"),
    "codex": (
        "codex-mcp-client",
        run_codex_all,
        "MCP startup failed: handshaking with MCP server failed: JSON-RPC error: -32022: Unsupported protocol version",
    ),
    "claude-code-v1": (
        "claude-code",
        lambda server, tmp: run_claude(server, tmp, LEGACY_CLAUDE),
        'MCP server "era" Connection failed (400): Error POSTing to endpoint: {"jsonrpc":"2.0","id":0,"error":'
        '{"code":-32022,"message":"Unsupported protocol version"',
    ),
}


def received(server: ScriptedServer) -> list[tuple[dict[str, Any], Mapping[str, str]]]:
    """The JSON-RPC messages the server received (a batch's members each), with their headers."""
    return [(message, headers) for message, headers in server.requests if isinstance(message, dict)]


def era_of(message: Mapping[str, Any]) -> str | None:
    """The 2026-07-28 protocol version a message names in ``params._meta``, or ``None``."""
    meta = (message.get("params") or {}).get("_meta") or {}
    version = meta.get(VERSION_META)
    return version if isinstance(version, str) else None


def client_name(message: Mapping[str, Any]) -> str | None:
    meta = (message.get("params") or {}).get("_meta") or {}
    info = meta.get(CLIENT_INFO_META)
    return info.get("name") if isinstance(info, dict) else None


def assert_results(host: str, results: Mapping[str, str], log: str) -> None:
    """Every tool's result reached the model with its data: the decimals, the exponent, the
    unicode and the null of ``quote`` and ``rows``, and the problem of ``deploy`` (the proxy's
    ``error_problem`` rule runs on bridged traffic as on native: ``[CODE] detail`` in the text for the
    hosts whose model reads ``content``, the problem kept in ``structuredContent`` for Codex)."""
    assert set(results) == set(NAMES), (host, results, log[-6000:])
    quote = results["quote"]
    assert json.loads(quote[quote.index("{") : quote.rindex("}") + 1]) == json.loads(QUOTE_TEXT), (host, quote)
    assert "1e-7" in quote and "caf\u00e9 \u2713 \u6771\u4eac" in quote, (host, quote)
    rows = results["rows"]
    if host == "gemini-cli":  # only ``content`` reaches its model
        assert ROWS_TEXT in rows, (host, rows)
    else:  # Claude Code and Codex show the model ``structuredContent`` as JSON
        assert json.loads(rows[rows.index("{") : rows.rindex("}") + 1]) == ROWS, (host, rows)
    deploy = results["deploy"]
    if host == "codex":  # it shows the model ``structuredContent``, which the proxy keeps on the error
        assert json.loads(deploy) == PROBLEM, (host, deploy)
    else:
        assert PROBLEM_LINE in deploy, (host, deploy)


@pytest.mark.parametrize("host", list(HOSTS))
def test_a_legacy_host_calls_every_tool_of_a_2026_07_28_only_server_through_the_bridge_and_none_directly(
    host: str, tmp_path: Path
) -> None:
    """Directly the host sends only its legacy ``initialize`` (Claude Code with
    ``MCP_SDK_GENERATION=v1`` no ``server/discover``), the server refuses it (-32022) and the model
    is offered no tool of the server; through the proxy (``auto``) the model reads every tool's
    result, and after the one ``initialize`` the bridge forwarded to learn the upstream's era, every
    request reaches the server at 2026-07-28 with the host's own ``clientInfo``."""
    name, run, refused = HOSTS[host]
    with routes() as (server, direct, proxied):
        direct_view, direct_results = run(direct, tmp_path / "direct")
        direct_requests = received(server)
        server.requests.clear()
        proxy_view, proxy_results = run(proxied, tmp_path / "proxy")
        proxy_requests = received(server)

    # Directly: the legacy handshake only, refused; no tool of the server reaches the model.
    methods = [message.get("method") for message, _ in direct_requests]
    assert methods and set(methods) <= {"initialize", "notifications/initialized"}, methods
    assert all(era_of(message) is None for message, _ in direct_requests)
    assert direct_view.tools == {} and direct_results == {}, (direct_view.tools, direct_results)
    assert refused in direct_view.log, direct_view.log[-6000:]

    # Through the proxy: every tool's result reached the model.
    assert set(proxy_view.tools) == set(NAMES), proxy_view.log[-6000:]
    assert_results(host, proxy_results, proxy_view.log)
    # The server saw the host's first initialize (forwarded as it came and refused: auto mode learns
    # from it), then only 2026-07-28 requests, each with the host's own clientInfo.
    (first, _), *rest = proxy_requests
    assert first.get("method") == "initialize" and era_of(first) is None, first
    assert_modern(rest, name)
    assert [message.get("method") for message, _ in rest][0] == "server/discover"


def assert_modern(requests: list[tuple[dict[str, Any], Mapping[str, str]]], name: str) -> None:
    """Every request is at 2026-07-28 (in ``_meta`` and the header), carries ``clientInfo.name``
    ``name`` and no session; the tool calls are :data:`CALLS`, in order, with their arguments."""
    assert requests
    for message, headers in requests:
        assert era_of(message) == MODERN, message
        assert client_name(message) == name, message
        assert headers.get("mcp-protocol-version") == MODERN, headers
        assert "mcp-session-id" not in headers
    calls = [message["params"] for message, _ in requests if message.get("method") == "tools/call"]
    assert [(call["name"], call["arguments"]) for call in calls] == CALLS


def test_with_upstream_era_2026_07_28_every_request_reaches_the_server_at_2026_07_28(tmp_path: Path) -> None:
    """With the operator's ``upstream_era = "2026-07-28"`` nothing is probed: not even the host's
    first ``initialize`` reaches the server, which gets only 2026-07-28 requests (Gemini CLI)."""
    with routes("2026-07-28") as (server, _direct, proxied):
        view, results = run_gemini(proxied, tmp_path)
        requests = received(server)
    assert_results("gemini-cli", results, view.log)
    assert_modern(requests, "gemini-cli-mcp-client")
    assert [message.get("method") for message, _ in requests][0] == "server/discover"


@pytest.mark.parametrize("route", ["direct", "proxy"])
def test_claude_code_speaking_2026_07_28_reaches_the_server_natively_directly_and_through_the_proxy(
    route: str, tmp_path: Path
) -> None:
    """Claude Code on its own handshake probes ``server/discover`` and speaks 2026-07-28: the
    proxy passes it through at that era (nothing bridged: no ``initialize`` reaches the server, and
    no request carries a session)."""
    with routes() as (server, direct, proxied):
        view, results = run_claude(direct if route == "direct" else proxied, tmp_path, {})
        requests = received(server)
    assert set(results) == set(NAMES), view.log[-6000:]
    quote = results["quote"]
    assert json.loads(quote) == json.loads(QUOTE_TEXT)
    assert json.loads(results["rows"]) == ROWS
    methods = [message.get("method") for message, _ in requests]
    assert methods[0] == "server/discover" and "initialize" not in methods, methods
    assert_modern(requests, "claude-code")
    if route == "proxy":
        assert PROBLEM_LINE in results["deploy"], results["deploy"]
    else:
        assert results["deploy"] == "Unknown error"  # the host's fault: the problem in structuredContent lost
