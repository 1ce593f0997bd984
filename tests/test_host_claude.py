"""Claude Code in the loop (issue 38): what its model receives from an MCP server, directly and
through the proxy.

Each test runs the real host (``tests/hosts``, Claude Code 2.1.332) against a scripted MCP server,
once directly and once through the proxy, with a mock Anthropic API (:mod:`tests.host_claude`),
and asserts on what the mock received: the tools offered and the tool result's text. The faults
reproduced are Claude Code's own, seen in its debug log and in what reaches the model
(``../shared/reference/hosts-in-the-loop.md``).
"""

from __future__ import annotations

import base64
import json
import re
import struct
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.requests import Request
from starlette.responses import Response

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning

from .host_claude import AnthropicMock, model_name, run_claude_code, tool_results
from .host_loop import HostFailure, McpServer, ModelView
from .support import EXE, ROOT, free_port, proxy_for, running, serve

pytestmark = pytest.mark.wire

SERVER = "demo"
QUERY = {"type": "object", "properties": {"q": {"type": "string", "description": "what to look up"}}}
#: Field data: a decimal, text beyond ASCII, an integer past 2**53.
DATA = '{"price": 12.5, "name": "caf\u00e9 \u2713 \u6771\u4eac", "big": 12345678901234567890}'
PROBLEM: dict[str, Any] = {
    "type": "https://example.com/problems/forbidden",
    "title": "Forbidden",
    "status": 403,
    "detail": "runtime r-17 belongs to another tenant",
    "code": "TENANT_MISMATCH",
}


def reads_whole_problem(text: str | None) -> bool:
    """Whether ``text`` is what Claude Code's model reads of an error carrying :data:`PROBLEM`
    through the proxy (``error_problem``): ``[CODE] detail``, then the problem's JSON (spelled as
    the server spelled it)."""
    first, _, rest = (text or "").partition("\n")
    return first == "[TENANT_MISMATCH] runtime r-17 belongs to another tenant" and json.loads(rest or "null") == PROBLEM


SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="12.5" height="10"><text>caf\u00e9 \u2713</text></svg>'
#: The property names the Anthropic API refuses (``^[a-zA-Z0-9_.-]{1,64}$``), as an OData-style
#: search tool has them.
SEARCH = {
    "name": "search",
    "inputSchema": {
        "type": "object",
        "properties": {"$filter": {"type": "string"}, "max results": {"type": "integer"}},
        "required": ["$filter"],
    },
}
#: What the Anthropic API takes as a property name.
API_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool(name: str, result: dict[str, Any], schema: Any = QUERY) -> ToolSpec:
    return ToolSpec({"name": name, "description": f"The {name} tool.", "inputSchema": schema}, returning(result))


@contextmanager
def upstream(tools: list[ToolSpec]) -> Iterator[tuple[ScriptedServer, McpServer, McpServer]]:
    """A scripted server with ``tools``; yield it, the host's way to it directly and through the proxy."""
    server = ScriptedServer(tools)
    with serve(server) as up, proxy_for(up + "/mcp") as px:
        yield server, McpServer(SERVER, up + "/mcp"), McpServer(SERVER, px + "/mcp")


def both(
    tools: list[ToolSpec], name: str | None, arguments: dict[str, Any], tmp: Path
) -> tuple[ModelView, ModelView, ScriptedServer]:
    """What the model received directly and through the proxy, and the server (its requests)."""
    with upstream(tools) as (server, direct, proxied):
        return (
            run_claude_code(direct, name, arguments, tmp / "direct"),
            run_claude_code(proxied, name, arguments, tmp / "proxy"),
            server,
        )


def calls(server: ScriptedServer) -> list[dict[str, Any]]:
    """The ``tools/call`` params the server received."""
    return [message["params"] for message, _headers in server.requests if message.get("method") == "tools/call"]


def test_a_plain_tool_is_offered_and_its_data_reaches_the_model_directly_and_through_the_proxy(tmp_path: Path) -> None:
    tools = [tool("lookup", {"content": [text(DATA)]})]
    direct, proxied, server = both(tools, "lookup", {"q": "caf\u00e9"}, tmp_path)
    for view in (direct, proxied):
        assert view.tools["lookup"]["name"] == "mcp__demo__lookup", view.log
        assert view.tools["lookup"]["description"] == "The lookup tool."
        assert view.tools["lookup"]["input_schema"] == QUERY
        assert view.result == DATA  # 12.5, the unicode and the big integer, exactly
    assert [call["arguments"] for call in calls(server)] == [{"q": "caf\u00e9"}] * 2


def test_an_error_problem_with_empty_content_reads_unknown_error_directly_and_code_and_detail_through_the_proxy(
    tmp_path: Path,
) -> None:
    """Claude Code reads only ``content`` of an error result: empty, the model reads "Unknown
    error" and the problem in ``structuredContent`` is lost. Through the proxy the error_problem
    rule moves the problem to ``_meta`` and adds the text ``[CODE] detail`` and, for Claude Code (a
    host whose model reads the text), the problem's whole JSON (issue 40)."""
    tools = [tool("deploy", {"content": [], "structuredContent": PROBLEM, "isError": True})]
    direct, proxied, _server = both(tools, "deploy", {"q": "r-17"}, tmp_path)
    assert direct.result == "Unknown error", direct.log  # the host's fault: the error's information lost
    assert "TENANT_MISMATCH" not in direct.result and PROBLEM["detail"] not in direct.result
    assert reads_whole_problem(proxied.result), (proxied.result, proxied.log)
    for view in (direct, proxied):
        (result,) = [block for _path, body in view.requests for block in tool_results(body)]
        assert result["is_error"] is True


def test_an_error_problems_status_title_and_type_reach_the_model_through_the_proxy(tmp_path: Path) -> None:
    tools = [tool("deploy", {"content": [], "structuredContent": PROBLEM, "isError": True})]
    with upstream(tools) as (_server, _direct, proxied):
        view = run_claude_code(proxied, "deploy", {"q": "r-17"}, tmp_path)
    assert view.result is not None, view.log
    for member in ("403", PROBLEM["title"], PROBLEM["type"]):
        assert str(member) in view.result


def fill_search(declaration: dict[str, Any]) -> dict[str, Any]:
    """The model's call of ``search``, made from the schema it got: a string for each string
    property, 12 for each integer one, under the names it was offered."""
    values = {"string": "name eq 'caf\u00e9'", "integer": 12}
    properties = declaration["input_schema"]["properties"]
    return {key: values[schema["type"]] for key, schema in properties.items()}


def test_a_tool_with_property_names_the_api_refuses_is_skipped_directly_and_offered_renamed_through_the_proxy(
    tmp_path: Path,
) -> None:
    """Claude Code skips a tool whose input schema the Anthropic API would refuse (its debug log
    says why); the server's other tools stay. Through the proxy the tool is offered with property
    names the API takes, and a call made with those names reaches the server under its own."""
    tools = [
        ToolSpec(SEARCH, returning({"content": [text("2 runtimes match")]})),
        tool("lookup", {"content": [text("ok")]}),
    ]
    name = model_name(SERVER, "search")
    with upstream(tools) as (server, direct_way, proxied_way):
        direct = run_claude_code(direct_way, "search", {}, tmp_path / "direct", mock=AnthropicMock(name, {}))
        mock = AnthropicMock(name, {}, fill=fill_search)
        proxied = run_claude_code(proxied_way, "search", {}, tmp_path / "proxy", mock=mock)
    assert set(direct.tools) == {"lookup"}, direct.log  # the host's fault: the tool is gone
    assert direct.result is None
    assert 'Skipping tool "search": its input schema would be rejected by the Anthropic API' in direct.log
    assert set(proxied.tools) == {"lookup", "search"}, proxied.log
    schema = proxied.tools["search"]["input_schema"]
    assert all(API_KEY.fullmatch(key) for key in schema["properties"]), schema
    assert len(schema["properties"]) == 2 and len(schema["required"]) == 1
    assert schema["required"][0] in schema["properties"]
    assert schema["properties"][schema["required"][0]] == {"type": "string"}  # $filter, renamed
    assert proxied.result == "2 runtimes match"
    (call,) = calls(server)  # under the server's own names
    assert (call["name"], call["arguments"]) == ("search", {"$filter": "name eq 'caf\u00e9'", "max results": 12})


def png() -> bytes:
    """A 1x1 PNG (a green pixel)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x00\xff\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def images(view: ModelView) -> list[tuple[str, str]]:
    """The image blocks of the tool result the model got: ``(media type, base64 data)``."""
    (result,) = [block for _path, body in view.requests for block in tool_results(body)]
    return [
        (block["source"]["media_type"], block["source"]["data"])
        for block in result["content"]
        if isinstance(block, dict) and block.get("type") == "image"
    ]


def test_an_svg_image_reaches_the_model_as_a_saved_file_directly_and_as_its_source_through_the_proxy(
    tmp_path: Path,
) -> None:
    """Claude Code does not send an SVG image to the model (the Anthropic API takes JPEG, PNG, GIF
    and WebP only): the model reads that a binary was saved to a file. Through the proxy the SVG
    is its source text for Claude Code. A PNG beside it reaches the model as an image either way."""
    svg = {"type": "image", "data": base64.b64encode(SVG.encode()).decode(), "mimeType": "image/svg+xml"}
    picture = {"type": "image", "data": base64.b64encode(png()).decode(), "mimeType": "image/png"}
    tools = [tool("chart", {"content": [text("the chart:"), svg, picture]})]
    direct, proxied, _server = both(tools, "chart", {"q": "sales"}, tmp_path)
    assert direct.result is not None, direct.log
    assert direct.result.startswith("the chart:\n[Image from demo] Binary content (image/svg+xml")
    assert SVG not in direct.result and "caf\u00e9" not in direct.result  # the host's fault: the image is lost
    assert proxied.result is not None, proxied.log
    assert proxied.result.startswith("the chart:\n" + SVG + "\n[image image/png]")
    for view in (direct, proxied):
        assert images(view) == [("image/png", picture["data"])]


BOTH = {
    "content": [text("3 runtimes; r-17 failed its health check at 09:12")],
    "structuredContent": {"count": 3, "big": 12345678901234567890},
}


def test_structured_content_hides_content_from_the_model_directly(tmp_path: Path) -> None:
    """With both present, Claude Code gives the model ``structuredContent`` as JSON (as its runtime
    parses it: an integer past 2**53 rounded) and ``content`` not at all."""
    with upstream([tool("status", BOTH)]) as (_server, direct, _proxied):
        view = run_claude_code(direct, "status", {"q": "all"}, tmp_path)
    assert view.result == '{"count":3,"big":12345678901234567000}', view.log
    assert "r-17" not in view.result


@pytest.mark.xfail(
    strict=True,
    reason="issue 40: Claude Code shows the model structuredContent instead of content; the proxy does not"
    " yet make content's information readable to it (nor the integer past 2**53 exact)",
)
def test_content_beside_structured_content_reaches_the_model_through_the_proxy(tmp_path: Path) -> None:
    with upstream([tool("status", BOTH)]) as (_server, _direct, proxied):
        view = run_claude_code(proxied, "status", {"q": "all"}, tmp_path)
    assert view.result is not None, view.log
    assert "r-17 failed its health check" in view.result and "12345678901234567890" in view.result


def test_a_null_input_schema_loses_the_whole_server_directly_and_both_tools_reach_the_model_through_the_proxy(
    tmp_path: Path,
) -> None:
    """One tool with ``inputSchema: null`` fails Claude Code's check of the whole ``tools/list``
    (retried, then given up): no tool of the server reaches the model. Through the proxy both do."""
    tools = [tool("broken", {"content": [text("ok")]}, None), tool("lookup", {"content": [text("found: 12.5")]})]
    direct, proxied, _server = both(tools, "lookup", {"q": "x"}, tmp_path)
    assert direct.tools == {} and direct.result is None, direct.log  # the host's fault: the server is lost
    assert "Failed to fetch tools" in direct.log
    assert set(proxied.tools) == {"broken", "lookup"}, proxied.log
    # (properties: {} for every host: an object without properties is every model API family's fault)
    assert proxied.tools["broken"]["input_schema"] == {"type": "object", "properties": {}}
    assert proxied.tools["lookup"]["input_schema"] == QUERY
    assert proxied.result == "found: 12.5"


class Refusing(AnthropicMock):
    """A mock that knows no request (404 to everything)."""

    def answer(self, path: str, body: Any) -> None:
        return None


def test_a_model_api_that_answers_404_ends_the_run_with_a_failure_naming_the_host(tmp_path: Path) -> None:
    with upstream([tool("lookup", {"content": [text("ok")]})]) as (_server, direct, _proxied):
        with pytest.raises(HostFailure) as failure:
            run_claude_code(direct, "lookup", {}, tmp_path, mock=Refusing(None, {}))
    message = str(failure.value)  # the host, what went wrong, the path, and the host's own words
    assert message.startswith("claude-code: sent the mock requests it does not know: ['POST /v1/messages?beta=true'")
    assert "(last model request: /v1/messages?beta=true)\n--- host log (tail) ---\n" in message
    assert "It may not exist or you may not have access to it" in message


class Nowhere(AnthropicMock):
    """A model API on a port nothing listens on (the host is given a wrong port)."""

    @contextmanager
    def serving(self) -> Iterator[str]:
        yield f"http://127.0.0.1:{free_port()}"


class Silent(AnthropicMock):
    """A model API that takes each request and never answers (a host waiting on it hangs)."""

    async def _endpoint(self, request: Request) -> Response:
        self.requests.append((request.url.path, None))
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


def test_a_model_api_on_a_wrong_port_ends_the_run_with_a_failure_naming_the_host(tmp_path: Path) -> None:
    with upstream([tool("lookup", {"content": [text("ok")]})]) as (_server, direct, _proxied):
        with pytest.raises(HostFailure) as failure:
            run_claude_code(direct, "lookup", {}, tmp_path, mock=Nowhere(None, {}))
    message = str(failure.value)
    assert message.startswith("claude-code: exited (1) without calling the model (last model request: none)")
    assert "ECONNREFUSED" in message


def test_a_host_left_waiting_on_the_model_is_ended_with_a_failure_naming_the_host(tmp_path: Path) -> None:
    with upstream([tool("lookup", {"content": [text("ok")]})]) as (_server, direct, _proxied):
        with pytest.raises(HostFailure) as failure:
            run_claude_code(direct, "lookup", {}, tmp_path, mock=Silent(None, {}), timeout=5)
    # its process group killed; the path it waits on is named once it got there (it does in 0.5 s here)
    assert str(failure.value).startswith("claude-code: did not end within 5 s (last model request: ")
    assert "--- host log (tail) ---" in str(failure.value)


def stdio_server(tools: list[dict[str, Any]], results: dict[str, Any]) -> list[str]:
    """The argv of the raw stdio test server serving ``tools`` and ``results``."""
    plan = json.dumps({"tools": tools, "results": results})
    return [sys.executable, str(ROOT / "tests" / "stdio_server.py"), plan]


@contextmanager
def reached(way: str, argv: list[str]) -> Iterator[McpServer]:
    """The host's way to the stdio server ``argv``: directly (``stdio``), through the stdio wrapper
    (``mcp-normalizer stdio -- CMD``), or served over HTTP by the proxy (``mcp-normalizer -- CMD``)."""
    env = {"PYTHONPATH": str(ROOT)}
    if way == "stdio":
        yield McpServer(SERVER, command=argv, env=env)
    elif way == "stdio-wrapper":
        yield McpServer(SERVER, command=[EXE, "stdio", "--", *argv], env=env)
    else:
        port = free_port()
        with running([EXE, "--port", str(port), "--", *argv], port, env):
            yield McpServer(SERVER, f"http://127.0.0.1:{port}/mcp")


@pytest.mark.parametrize("way", ["stdio", "stdio-wrapper", "stdio-over-http"])
def test_a_stdio_server_directly_through_the_stdio_wrapper_and_served_over_http(way: str, tmp_path: Path) -> None:
    """A stdio server with the tool whose property names the API refuses and a tool whose error
    is a problem with empty ``content``: directly, Claude Code skips the first and reads "Unknown
    error" from the second; through the proxy, either way, it gets both tools and ``[CODE] detail``
    with the whole problem."""
    argv = stdio_server(
        [SEARCH, {"name": "deploy", "inputSchema": QUERY}],
        {"deploy": {"content": [], "structuredContent": PROBLEM, "isError": True}},
    )
    with reached(way, argv) as server:
        view = run_claude_code(server, "deploy", {"q": "r-17"}, tmp_path)
    if way == "stdio":  # the host's faults
        assert set(view.tools) == {"deploy"}, view.log
        assert 'Skipping tool "search"' in view.log
        assert view.result == "Unknown error", view.log
    else:
        assert set(view.tools) == {"deploy", "search"}, view.log
        assert all(API_KEY.fullmatch(key) for key in view.tools["search"]["input_schema"]["properties"])
        assert reads_whole_problem(view.result), (view.result, view.log)


ROWS = [{"id": 1, "price": 12.5, "note": None}, {"id": 12345678901234567890, "name": "caf\u00e9 \u2713"}]


def test_an_array_structured_content_reaches_the_model_directly_and_through_the_proxy(tmp_path: Path) -> None:
    """Claude Code refused a ``structuredContent`` that is a JSON array ("expects record";
    reference/hosts.md §5), which 2026-07-28 (negotiated here) allows; 2.1.332 takes it and shows
    the model its JSON, so the proxy repairs it for earlier versions only (host key
    ``structured_content_not_object``, ``tests/test_host_results.py``) and passes it to this one as
    it came: the model reads every row, the same directly and through the proxy, and through the
    proxy the integer past 2**53 as the server wrote it too (``text_mirror``, issue 40)."""
    schema = {"type": "array", "items": {"type": "object"}}
    spec = ToolSpec(
        {"name": "rows", "description": "The rows tool.", "inputSchema": QUERY, "outputSchema": schema},
        returning({"content": [text("2 rows")], "structuredContent": ROWS}),
    )
    direct, proxied, server = both([spec], "rows", {"q": "all"}, tmp_path)
    infos = [message["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] for message, _ in server.requests]
    assert {(info["name"], info["version"]) for info in infos} == {("claude-code", "2.1.332")}
    assert direct.result is not None and proxied.result is not None, (direct.log, proxied.log)
    exact, shown = proxied.result.split("\n")
    assert shown == direct.result  # the structuredContent's JSON as directly, the big integer rounded
    assert exact.startswith("[Resource from demo at urn:dev.mcp-normalizer:exact-numbers] ")
    assert exact.endswith(': {"/1/id":12345678901234567890}'), exact
    assert json.loads(direct.result)[0] == ROWS[0]
    assert "12345678901234567" in direct.result and "caf\u00e9 \u2713" in direct.result


INVOICE_SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
INVOICE = {"total": "12.5 EUR", "num\u00e9ro": "INV-\u00fc-7", "big": 12345678901234567890}


def test_degrade_mode_brings_a_non_conforming_result_to_the_model(tmp_path: Path) -> None:
    """A success whose ``structuredContent`` fails its ``outputSchema`` (a total sent as
    ``"12.5 EUR"``: no lossless rule makes it a number) reaches Claude Code's model as the SDK's
    validation error, directly and through the proxy by default. With degrade mode for Claude Code
    (``degrade_clients = ["claude-code"]``) the tool is listed without its ``outputSchema`` and the
    result comes without ``structuredContent``, its JSON in ``content``: the model reads every datum."""
    spec = ToolSpec(
        {"name": "invoice", "description": "The invoice tool.", "inputSchema": QUERY, "outputSchema": INVOICE_SCHEMA},
        returning({"content": [text("Invoice created.")], "structuredContent": INVOICE}),
    )
    rules = NormalizerConfig.from_mapping({"normalizer": {"degrade_clients": ["claude-code"]}})
    server = ScriptedServer([spec])
    with serve(server) as up, proxy_for(up + "/mcp") as plain, proxy_for(up + "/mcp", rules) as opted:
        views = {
            where: run_claude_code(McpServer(SERVER, url + "/mcp"), "invoice", {"q": "1"}, tmp_path / where)
            for where, url in (("direct", up), ("plain", plain), ("degraded", opted))
        }
    for where in ("direct", "plain"):  # off by default: as without the proxy, the data lost
        result = views[where].result
        assert result == "Structured content does not match the tool's output schema: data/total must be number"
    degraded = views["degraded"]
    assert degraded.result is not None, degraded.log
    text_part, _, data = degraded.result.partition("\n")
    assert text_part == "Invoice created." and json.loads(data) == INVOICE  # 12.5 EUR, the unicode, the big integer
    (block,) = [block for _path, body in degraded.requests for block in tool_results(body)]
    assert block.get("is_error") in (None, False)  # a success
