"""Codex in the loop (issue 38): what the model receives from the real ``codex exec`` (0.171.0),
directly from an MCP server and through the proxy.

Each test runs Codex against a scripted server (:class:`ScriptedServer` on loopback) once directly
and once through :func:`proxy_for` in front of it, with the Responses API mocked
(:mod:`tests.host_codex`), and asserts on what reached the model: the tools Codex offered (after its
own filtering and schema rewriting) and the ``function_call_output`` text it sent back.

Codex's own faults reproduced directly: a tool whose input schema has draft-07 tuple ``items`` (an
array of schemas) is skipped ("failed to build tool spec"); one tool with ``inputSchema: null``
loses the whole server ("MCP server startup failed ... Unexpected response type"); an SVG image
reaches the model as "image content omitted". Where the proxy does not repair a fault for Codex
yet, or gives the model less than it read directly, the test of what it should see is marked
``xfail(strict=True)`` for issue 39 (tool listings) or 40 (results).
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.responses import Response, StreamingResponse

from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning

from .host_codex import ResponsesMock, run_codex
from .host_loop import HostFailure, McpServer, ModelView
from .support import EXE, ROOT, free_port, proxy_for, running, serve

pytestmark = pytest.mark.wire

#: Codex starts a stdio server with a clean environment: the worktree's code must be importable.
PYTHONPATH = {"PYTHONPATH": str(ROOT)}

SERVER = "demo"
ROUTES = ("direct", "proxy")

#: Field data: a decimal, a binary fraction, text outside ASCII (an astral character too), a
#: big integer (beyond 64 bits) and one beyond 63.
DATA = {
    "price": 12.5,
    "ratio": 0.1,
    "name": "caf\u00e9 \u2713 \U0001f600",
    "id": 123456789012345678901234567890,
    "count": 12345678901234567890,
}
QUOTE = {
    "name": "quote",
    "description": "A price quote.",
    "inputSchema": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]},
}
PLAIN = {"name": "plain", "description": "Says ok.", "inputSchema": {"type": "object", "properties": {}}}
OK = {"content": [{"type": "text", "text": "ok: 1.50 d\u00e9j\u00e0 vu"}], "isError": False}

#: A draft-07 tuple: ``items`` as an array of schemas (2020-12 spells it ``prefixItems``).
TUPLE = {
    "name": "locate",
    "description": "A point as [latitude, longitude, label].",
    "inputSchema": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "point": {
                "type": "array",
                "items": [{"type": "number"}, {"type": "number"}, {"type": "string"}],
                "additionalItems": False,
            }
        },
        "required": ["point"],
    },
}
#: ``inputSchema: null``: invalid (the spec requires an object schema), and common.
NULL_SCHEMA = {"name": "status", "description": "Server status.", "inputSchema": None}

LINK = {"type": "resource_link", "uri": "ui://demo/view/v1?q=\u00e9", "name": "view", "mimeType": "text/html"}
SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="12.5" height="10"><text>caf\u00e9 \u2713</text></svg>'

#: An RFC 9457 problem with an extension member (``code``) and one more (``gate``).
PROBLEM: dict[str, Any] = {
    "type": "https://errors.example.com/forbidden",
    "title": "Forbidden",
    "status": 403,
    "detail": "Account 12345 may not read ledger L-7 (\u00e9tape 2).",
    "code": "E_LEDGER_FORBIDDEN",
    "gate": "ledger-acl",
}
DENIED = {"name": "ledger", "description": "Reads a ledger.", "inputSchema": {"type": "object", "properties": {}}}


@contextmanager
def reach(route: str, tools: list[ToolSpec]) -> Iterator[McpServer]:
    """The scripted server of ``tools`` as Codex reaches it on ``route``: directly (its URL) or
    through the proxy (the proxy's URL, the same path)."""
    with serve(ScriptedServer(tools, response_mode="json")) as up:
        front = proxy_for(up + "/mcp") if route == "proxy" else nullcontext(up)
        with front as url:
            yield McpServer(SERVER, url=url + "/mcp")


def codex(route: str, tools: list[ToolSpec], tool: str | None, tmp: Path, **arguments: Any) -> ModelView:
    with reach(route, tools) as server:
        return run_codex(server, tool, arguments, tmp / route)


def output(view: ModelView) -> str:
    """The tool's output as the model read it (Codex prefixes ``Wall time: ... Output:``)."""
    assert view.result is not None, f"no tool result reached the model\n{view.log[-4000:]}"
    head, sep, rest = view.result.partition("Output:\n")
    assert sep and head.startswith("Wall time:"), view.result
    return rest


# -- sanity: a plain tool, a success with field data ------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_a_tool_is_offered_with_its_schema_and_the_data_reaches_the_model(route: str, tmp_path: Path) -> None:
    result = {"content": [{"type": "text", "text": "A quote for L-7."}], "structuredContent": DATA}
    view = codex(route, [ToolSpec(QUOTE, returning(result))], "quote", tmp_path, symbol="L-7")
    declared = view.tools["quote"]
    assert declared["description"] == "A price quote."
    assert declared["parameters"] == {
        "type": "object",
        "properties": {"symbol": {"type": "string"}},
        "required": ["symbol"],
    }
    # Codex shows the model structuredContent (as compact JSON) rather than the text: every value
    # as the server wrote it
    assert json.loads(output(view)) == DATA
    for spelled in (
        "12.5",
        "0.1",
        "123456789012345678901234567890",
        "12345678901234567890",
        "caf\u00e9 \u2713 \U0001f600",
    ):
        assert spelled in output(view)


# -- draft-07 tuple items: Codex skips the tool ------------------------------------------------


def test_directly_codex_skips_a_tool_with_draft07_tuple_items(tmp_path: Path) -> None:
    view = codex("direct", [ToolSpec(TUPLE, returning(OK)), ToolSpec(PLAIN, returning(OK))], None, tmp_path)
    assert "plain" in view.tools
    assert "locate" not in view.tools
    assert "Skipping MCP tool `mcp__demolocate`: failed to build tool spec" in view.log


def test_through_the_proxy_codex_offers_the_tool_with_tuple_items(tmp_path: Path) -> None:
    view = codex("proxy", [ToolSpec(TUPLE, returning(OK)), ToolSpec(PLAIN, returning(OK))], "locate", tmp_path)
    assert "locate" in view.tools
    point = view.tools["locate"]["parameters"]["properties"]["point"]
    assert point["type"] == "array"
    assert output(view).startswith("ok: 1.50")


# -- inputSchema: null: Codex loses the server -------------------------------------------------


def test_null_input_schema_loses_codex_the_server_directly_and_not_through_the_proxy(tmp_path: Path) -> None:
    tools = [ToolSpec(NULL_SCHEMA, returning(OK)), ToolSpec(PLAIN, returning(OK))]
    direct = codex("direct", tools, "plain", tmp_path)
    assert direct.tools == {}  # both tools lost, the valid one too
    assert direct.result is None
    assert "MCP server startup failed" in direct.log
    proxied = codex("proxy", tools, "status", tmp_path)
    assert set(proxied.tools) == {"status", "plain"}
    assert proxied.tools["status"]["parameters"]["type"] == "object"
    assert output(proxied) == "ok: 1.50 d\u00e9j\u00e0 vu"


# -- a resource_link block ---------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_a_resource_link_reaches_the_model_with_its_uri_name_and_type(route: str, tmp_path: Path) -> None:
    """rmcp ``=3.1.3`` (Codex Desktop, ChatGPT) fails the whole call on a ``resource_link`` block
    (openai/codex#41280); the CLI 0.171.0 passes its JSON, so the Codex profile names the fault
    below 0.171.0 only (tests/test_check_hosts.py) and the proxy passes the block as it is to this
    version: the model reads the same uri, name and media type either way."""
    result = {"content": [{"type": "text", "text": "the view:"}, LINK], "isError": False}
    seen = output(codex(route, [ToolSpec(DENIED | {"name": "view"}, returning(result))], "view", tmp_path))
    assert seen.startswith("the view:")
    for member in (LINK["uri"], LINK["name"], LINK["mimeType"]):
        assert member in seen


# -- an SVG image: "image content omitted" -----------------------------------------------------


def test_directly_codex_gives_the_model_no_svg_image(tmp_path: Path) -> None:
    result = {"content": [{"type": "text", "text": "chart:"}, svg_block()], "isError": False}
    seen = output(codex("direct", [ToolSpec(DENIED | {"name": "chart"}, returning(result))], "chart", tmp_path))
    assert seen == "chart:\nimage content omitted because it could not be processed"


def test_through_the_proxy_the_svg_image_or_its_source_reaches_the_model(tmp_path: Path) -> None:
    result = {"content": [{"type": "text", "text": "chart:"}, svg_block()], "isError": False}
    seen = output(codex("proxy", [ToolSpec(DENIED | {"name": "chart"}, returning(result))], "chart", tmp_path))
    assert "image content omitted" not in seen
    assert "<svg" in seen or '"image_url": "data:image/' in seen  # the SVG's source, or an image Codex takes


def svg_block() -> dict[str, Any]:
    return {"type": "image", "data": base64.b64encode(SVG.encode()).decode(), "mimeType": "image/svg+xml"}


# -- an error whose structuredContent is an RFC 9457 problem -----------------------------------

FORBIDDEN = {"content": [], "structuredContent": PROBLEM, "isError": True}


def test_directly_codex_shows_the_model_the_whole_problem(tmp_path: Path) -> None:
    seen = output(codex("direct", [ToolSpec(DENIED, returning(FORBIDDEN))], "ledger", tmp_path))
    assert json.loads(seen) == PROBLEM


def test_through_the_proxy_the_error_code_and_detail_reach_the_model(tmp_path: Path) -> None:
    seen = output(codex("proxy", [ToolSpec(DENIED, returning(FORBIDDEN))], "ledger", tmp_path))
    assert PROBLEM["code"] in seen
    assert PROBLEM["detail"] in seen


def test_through_the_proxy_codex_never_shows_less_of_the_problem_than_directly(tmp_path: Path) -> None:
    direct = output(codex("direct", [ToolSpec(DENIED, returning(FORBIDDEN))], "ledger", tmp_path))
    proxied = output(codex("proxy", [ToolSpec(DENIED, returning(FORBIDDEN))], "ledger", tmp_path))
    missing = [name for name, value in json.loads(direct).items() if str(value) not in proxied]
    assert not missing, f"{missing} reached the model directly, not through the proxy: {proxied!r}"


# -- a stdio server: directly, behind the stdio wrapper, served over HTTP -----------------------

WAYS = ("stdio wrapper", "stdio over HTTP")


def stdio_server(tools: list[dict[str, Any]]) -> list[str]:
    """The argv of :mod:`tests.stdio_server` answering every tool of ``tools`` with ``OK``."""
    plan = {"tools": tools, "results": {spec["name"]: OK for spec in tools}}
    return [sys.executable, str(ROOT / "tests" / "stdio_server.py"), json.dumps(plan)]


def test_directly_a_stdio_server_with_a_null_input_schema_is_lost_to_codex(tmp_path: Path) -> None:
    server = McpServer(SERVER, command=stdio_server([NULL_SCHEMA, PLAIN]))
    view = run_codex(server, "plain", {}, tmp_path)
    assert view.tools == {}
    assert "MCP server startup failed" in view.log


@pytest.mark.parametrize("way", WAYS)
def test_through_the_proxy_codex_keeps_a_stdio_server_with_a_null_input_schema(way: str, tmp_path: Path) -> None:
    command = stdio_server([NULL_SCHEMA, PLAIN])
    if way == "stdio wrapper":  # Codex starts ``mcp-normalizer stdio -- CMD``
        view = run_codex(
            McpServer(SERVER, command=[EXE, "stdio", "--", *command], env=PYTHONPATH), "status", {}, tmp_path
        )
    else:  # ``mcp-normalizer -- CMD`` serves the stdio server on /mcp
        port = free_port()
        with running([EXE, "--port", str(port), "--", *command], port):
            view = run_codex(McpServer(SERVER, url=f"http://127.0.0.1:{port}/mcp"), "status", {}, tmp_path)
    assert set(view.tools) == {"status", "plain"}
    assert output(view) == "ok: 1.50 d\u00e9j\u00e0 vu"


# -- the harness itself ------------------------------------------------------------------------


class Refusing(ResponsesMock):
    """A mock that knows no request (answers 404 to everything)."""

    def answer(self, path: str, body: Any) -> None:
        return None


def test_a_mock_that_answers_404_ends_the_run_with_a_failure_naming_codex(tmp_path: Path) -> None:
    with reach("direct", [ToolSpec(PLAIN, returning(OK))]) as server, pytest.raises(HostFailure) as failure:
        run_codex(server, "plain", {}, tmp_path, mock=Refusing)
    message = str(failure.value)
    assert message.startswith("codex: sent the mock requests it does not know: ['POST /v1/responses']")
    assert "last model request: /v1/responses" in message


class Stalling(ResponsesMock):
    """A mock that starts each answer and never ends it (a model API that hangs)."""

    def answer(self, path: str, body: Any) -> Response:
        async def stall() -> AsyncIterator[bytes]:
            yield b": stalled\n\n"
            await anyio.sleep_forever()

        return StreamingResponse(stall(), media_type="text/event-stream")


def test_a_model_that_hangs_ends_the_run_with_a_failure_naming_codex(tmp_path: Path) -> None:
    with reach("direct", [ToolSpec(PLAIN, returning(OK))]) as server, pytest.raises(HostFailure) as failure:
        run_codex(server, "plain", {}, tmp_path, mock=Stalling, timeout=5)
    assert str(failure.value).startswith("codex: did not end within 5 s")
