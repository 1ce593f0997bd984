"""Gemini CLI 0.61.0 in the loop (issue 38): what its model receives, directly and through the proxy.

Each test runs the real host (``tests/hosts``) headless against a scripted MCP server over
Streamable HTTP, directly and through the proxy (:func:`tests.support.proxy_for`, the same path),
with the Gemini API mocked on loopback (:mod:`tests.host_gemini`), and asserts on what the model got:
the function declarations offered and the ``functionResponse`` of the one call.

Gemini CLI's own faults, reproduced on its own code:

- one tool whose input schema its zod check refuses (a boolean sub-schema, ``inputSchema: null``)
  loses the whole server: no tool of it is offered, "MCP issues detected";
- an error result whose ``structuredContent`` does not match the tool's ``outputSchema``: its
  embedded TS SDK 1.23 validates it even on ``isError``, so the model reads the SDK's -32602 and
  not the server's error text;
- only ``content`` reaches the model: a result whose text says less than its ``structuredContent``
  hides the data directly; through the proxy ``text_mirror`` adds its JSON (issue 40);
- a result without ``structuredContent`` whose first text block is JSON but not an object (``[]``):
  its ``McpComplianceTransport`` makes the parsed text the ``structuredContent``, which its SDK
  refuses, so the model reads the SDK's error (the host matrix's ``null_optional_fields`` cell
  through the proxy, whose bytes carry the text alone).
"""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_normalizer import Settings, create_app
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning

from .host_gemini import ADDED_PROPERTIES, CORE, HOST, GeminiMock, run_gemini_cli, run_gemini_core
from .host_loop import HostFailure, McpServer, ModelView
from .support import EXE, HEADERS, ROOT, free_port, load_cases, proxy_for, running, serve, text

pytestmark = pytest.mark.wire

ROUTES = ("direct", "proxy")
#: The line Gemini CLI prints when a configured server failed to connect or list its tools.
MCP_ISSUES = "MCP issues detected"

QUERY = {
    "type": "object",
    "properties": {"q": {"type": "string", "description": "what to look up"}, "n": {"type": "integer", "minimum": 1}},
    "required": ["q"],
}
#: Field data that must reach the model unchanged: a decimal, unicode (beyond the BMP too), an
#: integer past 2**64.
DATA_TEXT = '{"amount": 12.5, "city": "Zo\u00eb \u2713 \u6771\u4eac \U0001f600", "id": 123456789012345678901234567890}'
DETAIL = "Account 42 may not read invoice INV-7"
PROBLEM: dict[str, Any] = {
    "type": "https://example.com/problems/forbidden",
    "title": "Forbidden",
    "status": 403,
    "detail": DETAIL,
    "code": "E_FORBIDDEN",
}
INVOICE = {
    "type": "object",
    "properties": {"number": {"type": "string"}, "total": {"type": "number"}, "currency": {"type": "string"}},
    "required": ["number", "total", "currency"],
}
#: A boolean sub-schema: JSON Schema's "anything", refused by the TS SDK 1.x tool schema (zod).
ODD_SCHEMA = {"type": "object", "properties": {"x": True}}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()
ERROR_TEXT = "Forbidden: account 42 may not read invoice INV-7 (E_FORBIDDEN)"


def ok(value: str) -> ToolSpec:
    """A plain tool named ``value`` answering ``value`` as text."""
    return ToolSpec({"name": value, "inputSchema": QUERY}, returning({"content": text(f"{value} answered")}))


@contextmanager
def routes(tools: Sequence[ToolSpec]) -> Iterator[dict[str, McpServer]]:
    """A scripted server of ``tools``, and the proxy in front of it: the two ways to reach it."""
    with serve(ScriptedServer(tools, response_mode="json")) as upstream, proxy_for(f"{upstream}/mcp") as proxy:
        yield {
            "direct": McpServer("srv", url=f"{upstream}/mcp"),
            "proxy": McpServer("srv", url=f"{proxy}/mcp"),
        }


def run(
    tools: Sequence[ToolSpec],
    call: str | None,
    tmp: Path,
    arguments: Mapping[str, Any] | None = None,
    only: Sequence[str] = ROUTES,
) -> dict[str, ModelView]:
    """Gemini CLI run directly and through the proxy (or ``only`` those routes); the model's view of
    each, by route."""
    args = {"q": "INV-7"} if arguments is None else arguments
    with routes(tools) as servers:
        return {route: run_gemini_cli(servers[route], call, args, tmp / route) for route in only}


def declared(view: ModelView, tool: str) -> dict[str, Any]:
    """The parameters schema the model got for ``tool``, without what Gemini CLI adds itself."""
    schema = dict(view.tools[tool]["parametersJsonSchema"])
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in ADDED_PROPERTIES}
    return schema


def test_plain_tool_and_data_reach_the_model(tmp_path: Path) -> None:
    """Sanity: a plain tool is offered with its schema as the server declared it, and a success's
    data (a decimal, unicode, a big integer) reaches the model as the server wrote it, both ways."""
    tool = ToolSpec({"name": "lookup", "inputSchema": QUERY}, returning({"content": text(DATA_TEXT)}))
    views = run([tool], "lookup", tmp_path)
    for route, view in views.items():
        assert set(view.tools) == {"lookup"}, route
        assert declared(view, "lookup") == QUERY, route
        assert view.result is not None, route
        assert "<untrusted_context>" in view.result, route
        for piece in ("12.5", "Zo\u00eb \u2713 \u6771\u4eac \U0001f600", "123456789012345678901234567890"):
            assert piece in view.result, (route, piece)


def test_without_a_model_named_the_router_is_answered_and_the_run_goes_on(tmp_path: Path) -> None:
    """The mock knows the CLI's router: without ``-m`` a ``:generateContent`` request in JSON mode
    comes first (answered with a minimal value of its schema), then the turns as with ``-m``."""
    with serve(ScriptedServer([ok("plain")], response_mode="json")) as upstream:
        view = run_gemini_cli(McpServer("srv", url=f"{upstream}/mcp"), "plain", {"q": "x"}, tmp_path, model=None)
    paths = [path for path, _ in view.requests]
    assert ":generateContent" in paths[0]
    assert any(":streamGenerateContent" in path for path in paths[1:])
    assert view.result is not None and "plain answered" in view.result


@pytest.mark.parametrize("route", ROUTES)
def test_an_image_and_a_link_reach_the_model(route: str, tmp_path: Path) -> None:
    """A PNG image and a resource link beside a text: Gemini CLI sends the image as ``inlineData``
    beside the ``functionResponse`` (its bytes as the server sent them), a line naming it in the
    text, and the link's name and URI."""
    result = {
        "content": [
            {"type": "text", "text": "a chart: 12.50"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "resource_link", "uri": "ui://demo/view/v1", "name": "view", "mimeType": "text/html"},
        ]
    }
    tool = ToolSpec({"name": "render", "inputSchema": QUERY}, returning(result))
    view = run([tool], "render", tmp_path, only=[route])[route]
    assert view.result is not None
    assert "a chart: 12.50" in view.result
    assert f"[inlineData image/png: {PNG}]" in view.result
    assert "image data with mime-type: image/png" in view.result
    assert "view at ui://demo/view/v1" in view.result


def test_one_boolean_subschema_loses_the_server_directly_not_through_the_proxy(tmp_path: Path) -> None:
    """Gemini CLI's fault: one tool with ``"properties": {"x": true}`` fails the TS SDK's zod check
    of the whole ``tools/list``, and the server is lost ("MCP issues detected"; the model gets no
    tool of it, and a call reads "not found"). Through the proxy (rule ``boolean_subschema``, for
    every client) ``true`` is spelled ``{}``: both tools offered, the call answered."""
    odd = ToolSpec({"name": "odd", "inputSchema": ODD_SCHEMA}, returning({"content": text("odd answered")}))
    views = run([ok("plain"), odd], "odd", tmp_path, {"x": 1})
    direct, proxied = views["direct"], views["proxy"]
    assert direct.tools == {}
    assert MCP_ISSUES in direct.log
    assert direct.result is not None and "not found" in direct.result
    assert set(proxied.tools) == {"plain", "odd"}
    assert declared(proxied, "odd") == {"type": "object", "properties": {"x": {}}}
    assert declared(proxied, "plain") == QUERY
    assert proxied.result is not None and "odd answered" in proxied.result
    assert MCP_ISSUES not in proxied.log


def test_a_null_input_schema_loses_the_server_directly_not_through_the_proxy(tmp_path: Path) -> None:
    """``inputSchema: null`` on one of two tools: directly the SDK refuses the list and the host
    loses both tools; through the proxy (rule ``schema_shape``) both are offered, the bad one with
    an empty object schema, and the good one's call is answered."""
    null = ToolSpec({"name": "bare", "inputSchema": None}, returning({"content": text("bare answered")}))
    views = run([ok("plain"), null], "plain", tmp_path)
    direct, proxied = views["direct"], views["proxy"]
    assert direct.tools == {}
    assert MCP_ISSUES in direct.log
    assert direct.result is not None and "not found" in direct.result and "plain answered" not in direct.result
    assert set(proxied.tools) == {"plain", "bare"}
    assert declared(proxied, "bare") == {"type": "object", "properties": {}}
    assert proxied.result is not None and "plain answered" in proxied.result


@pytest.mark.parametrize("route", ROUTES)
def test_a_problem_error_with_empty_content_reaches_the_model(route: str, tmp_path: Path) -> None:
    """An error whose ``structuredContent`` is an RFC 9457 problem and whose ``content`` is empty.
    Gemini CLI passes an error result to the model as the whole result's JSON, so directly the model
    reads the problem's members; through the proxy (rule ``error_problem``) the problem moves to
    ``_meta`` and a text block names the code and detail: the model reads all of them either way."""
    tool = ToolSpec(
        {"name": "read", "inputSchema": QUERY},
        returning({"content": [], "structuredContent": PROBLEM, "isError": True}),
    )
    view = run([tool], "read", tmp_path, only=[route])[route]
    assert set(view.tools) == {"read"}
    assert view.result is not None
    assert "reported tool error" in view.result
    for member in ("E_FORBIDDEN", DETAIL, "403", "Forbidden", str(PROBLEM["type"])):
        assert member in view.result, member


def test_an_error_not_matching_the_output_schema_loses_its_text_directly_not_through_the_proxy(tmp_path: Path) -> None:
    """Gemini CLI's fault: the tool declares an ``outputSchema`` (an invoice) and an error result
    carries a problem as ``structuredContent``. The TS SDK 1.23 inside Gemini CLI validates it even
    on ``isError`` and throws -32602, so directly the model reads the SDK's message and neither the
    server's error text nor the problem. Through the proxy (rule ``error_problem``: the problem goes
    to ``_meta``) the model reads the text and the problem's code and detail."""
    result = {"content": text(ERROR_TEXT), "structuredContent": PROBLEM, "isError": True}
    tool = ToolSpec({"name": "read", "inputSchema": QUERY, "outputSchema": INVOICE}, returning(result))
    views = run([tool], "read", tmp_path)
    direct, proxied = views["direct"], views["proxy"]
    assert direct.result is not None
    assert "-32602" in direct.result and "output schema" in direct.result
    assert ERROR_TEXT not in direct.result
    assert DETAIL not in direct.result
    assert proxied.result is not None
    assert "-32602" not in proxied.result
    assert ERROR_TEXT in proxied.result
    assert "E_FORBIDDEN" in proxied.result and DETAIL in proxied.result


INVOICE_RESULT = {
    "content": text("Invoice created."),
    "structuredContent": {"number": "INV-2026-0042", "total": 1234.50, "currency": "EUR"},
}


def invoice_view(route: str, tmp: Path) -> ModelView:
    tool = ToolSpec({"name": "create", "inputSchema": QUERY, "outputSchema": INVOICE}, returning(INVOICE_RESULT))
    return run([tool], "create", tmp, only=[route])[route]


def test_a_terse_text_hides_the_structured_data_directly(tmp_path: Path) -> None:
    """Gemini CLI's fault: only ``content`` reaches the model, so a success whose text says less than
    its ``structuredContent`` ("Invoice created." beside the invoice's number, total and currency)
    hides the data from the model."""
    view = invoice_view("direct", tmp_path)
    assert view.result is not None and "Invoice created." in view.result
    for value in ("INV-2026-0042", "1234.5", "EUR"):
        assert value not in view.result


def test_a_terse_text_shows_the_structured_data_through_the_proxy(tmp_path: Path) -> None:
    """What the model should read through the proxy: the text and the structured data."""
    view = invoice_view("proxy", tmp_path)
    assert view.result is not None and "Invoice created." in view.result
    for value in ("INV-2026-0042", "1234.5", "EUR"):
        assert value in view.result


#: :mod:`tests.stdio_server`'s plan: a plain tool and one with a boolean sub-schema.
ODD_PLAN = {
    "tools": [{"name": "plain", "inputSchema": QUERY}, {"name": "odd", "inputSchema": ODD_SCHEMA}],
    "results": {"plain": {"content": text("plain answered")}, "odd": {"content": text("odd answered")}},
}


def test_the_boolean_subschema_fault_over_stdio_each_way(tmp_path: Path) -> None:
    """The same fault from a stdio server, each way Gemini CLI can reach it: the server as its own
    command loses the whole server; behind ``mcp-normalizer stdio -- CMD`` and behind
    ``mcp-normalizer -- CMD`` (the stdio server served over HTTP) both tools are offered and the
    odd one's call is answered."""
    command = [sys.executable, str(ROOT / "tests" / "stdio_server.py"), json.dumps(ODD_PLAN)]
    port = free_port()
    views: dict[str, ModelView] = {}
    views["stdio"] = run_gemini_cli(McpServer("srv", command=command), "odd", {"x": 1}, tmp_path / "stdio")
    wrapper = McpServer("srv", command=[EXE, "stdio", "--", *command], env={"PYTHONPATH": str(ROOT)})
    views["wrapper"] = run_gemini_cli(wrapper, "odd", {"x": 1}, tmp_path / "wrapper")
    with running([EXE, "--port", str(port), "--", *command], port):
        served = McpServer("srv", url=f"http://127.0.0.1:{port}/mcp")
        views["served"] = run_gemini_cli(served, "odd", {"x": 1}, tmp_path / "served")
    assert views["stdio"].tools == {} and MCP_ISSUES in views["stdio"].log
    for way in ("wrapper", "served"):
        view = views[way]
        assert set(view.tools) == {"plain", "odd"}, way
        assert declared(view, "odd") == {"type": "object", "properties": {"x": {}}}, way
        assert view.result is not None and "odd answered" in view.result, way


def test_the_cli_core_as_a_library_names_the_refused_tools_and_declares_them_through_the_proxy(tmp_path: Path) -> None:
    """The same discovery code without a model (``@google/gemini-cli-core``: ``connectToMcpServer``,
    ``discoverTools``): directly the TS SDK's zod check refuses the whole list and names both bad
    tools' paths (a boolean sub-schema, ``inputSchema: null``); through the proxy every tool is
    declared, with the schema the CLI sends its model, and a call's text and error text arrive."""
    bare = ToolSpec({"name": "bare", "inputSchema": None}, returning({"content": text("bare answered")}))
    odd = ToolSpec({"name": "odd", "inputSchema": ODD_SCHEMA}, returning({"content": text("odd answered")}))
    failing = ToolSpec(
        {"name": "read", "inputSchema": QUERY, "outputSchema": INVOICE},
        returning({"content": text(ERROR_TEXT), "structuredContent": PROBLEM, "isError": True}),
    )
    with routes([ok("plain"), odd, bare, failing]) as servers:
        direct = run_gemini_core(servers["direct"], "plain", {"q": "x"}, tmp_path / "direct")
        proxied = run_gemini_core(servers["proxy"], "plain", {"q": "x"}, tmp_path / "proxy")
        fixed = run_gemini_core(servers["proxy"], "read", {"q": "x"}, tmp_path / "read")
    assert direct.host == CORE and direct.tools == {} and direct.result is None
    refused = re.sub(r"\s+", "", direct.log)  # the zod issues, pretty-printed JSON
    assert '"path":["tools",1,"inputSchema","properties","x"]' in refused
    assert '"path":["tools",2,"inputSchema"]' in refused
    assert set(proxied.tools) == {"plain", "odd", "bare", "read"}
    assert declared(proxied, "odd") == {"type": "object", "properties": {"x": {}}}
    assert declared(proxied, "bare") == {"type": "object", "properties": {}}
    assert declared(proxied, "plain") == QUERY
    assert proxied.result is not None and "plain answered" in proxied.result
    assert fixed.result is not None and ERROR_TEXT in fixed.result and "-32602" not in fixed.result


class Deaf(GeminiMock):
    """A model API that knows no request: everything is answered 404."""

    def answer(self, path: str, body: Any) -> Response | None:
        return None


def test_a_mock_that_knows_no_request_ends_the_run_with_a_failure_naming_the_host(tmp_path: Path) -> None:
    """Bad input to the harness: a model API answering 404 to everything ends the run at once with
    :class:`HostFailure` naming the host, the request and the log, not a hang or a pass."""
    with serve(ScriptedServer([ok("plain")], response_mode="json")) as upstream:
        server = McpServer("srv", url=f"{upstream}/mcp")
        with pytest.raises(HostFailure) as failure:
            run_gemini_cli(server, "plain", {"q": "x"}, tmp_path, mock=Deaf)
    message = str(failure.value)
    assert message.startswith(f"{HOST}: sent the mock requests it does not know")
    assert ":streamGenerateContent" in message
    assert "--- host log (tail) ---" in message


class Mute(GeminiMock):
    """A model API that takes each request and never answers it."""

    async def _endpoint(self, request: Request) -> Response:
        self.requests.append((request.url.path, None))
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover


def test_a_host_left_waiting_is_ended_with_a_failure_naming_the_host(tmp_path: Path) -> None:
    """A host that would hang (its model never answers) is ended after the run's time (its
    process group killed) with :class:`HostFailure` naming the host and its last request."""
    with serve(ScriptedServer([ok("plain")], response_mode="json")) as upstream:
        server = McpServer("srv", url=f"{upstream}/mcp")
        with pytest.raises(HostFailure) as failure:
            run_gemini_cli(server, "plain", {"q": "x"}, tmp_path, timeout=8, mock=Mute)
    message = str(failure.value)
    assert message.startswith(f"{HOST}: did not end within 8 s")
    assert "(last model request: " in message  # the turn it waits on, or none on a slow start
    assert "--- host log (tail) ---" in message


# -- a JSON text that is not an object: Gemini CLI makes it structuredContent itself ----------------

#: The first public case of kind ``null_optional_fields``: ``list_groups`` answering the text ``[]``
#: beside ``"_meta": null`` (Apicurio/apicurio-registry#6899).
META_NULL_CASE = "apicurio-result-meta-null"


class Recording:
    """An ASGI app in front of ``app`` that keeps each HTTP exchange: the request's headers (names
    lower-case) and body, and the response body's bytes as sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.exchanges: list[tuple[dict[str, str], bytes, bytearray]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        request, response = bytearray(), bytearray()
        self.exchanges.append((headers, b"", response))
        index = len(self.exchanges) - 1

        async def receiving() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request.extend(message.get("body", b""))
                self.exchanges[index] = (headers, bytes(request), response)
            return message

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.body":
                response.extend(message.get("body", b""))
            await send(message)

        await self.app(scope, receiving, sending)

    def answer_to(self, method: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The request of ``method`` and the JSON-RPC message answering it (a JSON body or SSE data)."""
        for _headers, body, response in self.exchanges:
            if body and json.loads(body).get("method") == method:
                raw = bytes(response).decode()
                datas = [line[5:].strip() for line in raw.splitlines() if line.startswith("data:")]
                return json.loads(body), json.loads(datas[-1] if datas else raw)
        raise AssertionError(f"no {method} request")


def refused_as_structured(result: str | None, received: str = "array") -> bool:
    """Whether ``result`` is the SDK's refusal of a ``structuredContent`` that is not an object (the
    zod issue, pretty-printed and escaped inside the host's error text)."""
    bare = re.sub(r"\\n|\s|\\", "", result or "")
    return f"expected record, received {received}" in (result or "") and '"path":["structuredContent"]' in bare


def meta_null_case() -> dict[str, Any]:
    (case,) = [case for case in load_cases("null_optional_fields") if case["id"] == META_NULL_CASE]
    return case


def test_a_json_text_that_is_not_an_object_reaches_gemini_only_through_the_proxy(tmp_path: Path) -> None:
    """Gemini CLI's fault, on its own code (``@google/gemini-cli-core`` as a library): a spec-valid
    result with no ``structuredContent`` whose first text block is JSON but not an object (``[]``,
    ``42``) gets one from the host's ``McpComplianceTransport`` (the parsed text), which its TS SDK
    1.23 refuses ("expected record"): directly the model gets that error instead of the text.
    Through the proxy (host fault ``text_parsed_as_structured``) the result carries
    ``structuredContent: {"result": <the value>}``, so the host parses nothing, and the model reads
    the text. A JSON object or plain text is read as sent either way."""
    answers = {"arr": "[]", "num": "42", "obj": '{"groups": []}', "plain": "no groups"}
    tools = [
        ToolSpec({"name": name, "inputSchema": {"type": "object"}}, returning({"content": text(value)}))
        for name, value in answers.items()
    ]
    views: dict[tuple[str, str], ModelView] = {}
    with routes(tools) as servers:
        for name in answers:
            views[("direct", name)] = run_gemini_core(servers["direct"], name, {}, tmp_path / name)
        for name in ("arr", "num"):
            views[("proxy", name)] = run_gemini_core(servers["proxy"], name, {}, tmp_path / f"proxy-{name}")
    for key, view in views.items():
        assert view.result is not None, key
    assert refused_as_structured(views[("direct", "arr")].result)
    assert refused_as_structured(views[("direct", "num")].result, "number")
    for name in ("arr", "num"):
        result = views[("proxy", name)].result or ""
        assert answers[name] in result and "expected record" not in result, name
    for name in ("obj", "plain"):
        result = views[("direct", name)].result or ""
        assert answers[name] in result and "expected record" not in result, name


def test_the_meta_null_case_reaches_gemini_through_the_proxy(tmp_path: Path) -> None:
    """``apicurio-result-meta-null`` through the proxy with the real Gemini CLI: the host names
    itself ``gemini-cli-mcp-client`` at 2025-06-18 and sends no ``MCP-Protocol-Version`` header
    (its ``McpComplianceTransport`` wraps the SDK's transport without ``setProtocolVersion``); the
    proxy answers the call with the text (``_meta: null`` dropped) and, for this host alone, a
    ``structuredContent`` holding the parsed text (``{"result": []}``), so the host does not make the
    array its ``structuredContent`` and its model reads ``[]``. Directly the host hangs: the SDK's
    transport drops the response (``_meta: null`` fails its message schema) and the call waits for
    its request timeout (30 s here)."""
    case = meta_null_case()
    tool = case["tool"]["name"]
    upstream = Recording(ScriptedServer([ToolSpec(case["tool"], returning(case["result"]))]))
    with serve(upstream) as up:
        settings = Settings(upstream=f"{up}/mcp")
        config = settings.load_config()
        proxy = Recording(create_app(settings, config=config))
        with serve(proxy, proxy=config.proxy) as px:
            view = run_gemini_cli(McpServer("srv", url=f"{px}/mcp"), tool, {}, tmp_path / "proxy")
        with pytest.raises(HostFailure) as hung:
            run_gemini_cli(McpServer("srv", url=f"{up}/mcp"), tool, {}, tmp_path / "direct", timeout=8)
    initialize, _ = proxy.answer_to("initialize")
    assert initialize["params"]["clientInfo"]["name"] == "gemini-cli-mcp-client"
    assert initialize["params"]["protocolVersion"] == "2025-06-18"
    assert all("mcp-protocol-version" not in headers for headers, _body, _response in proxy.exchanges)
    _, answer = proxy.answer_to("tools/call")
    assert case["expected"]["result"] == {"content": [{"type": "text", "text": "[]"}]}
    assert answer["result"] == {**case["expected"]["result"], "structuredContent": {"result": []}}
    assert tool in view.tools
    assert view.result is not None and "[]" in view.result and "expected record" not in view.result
    assert str(hung.value).startswith(f"{HOST}: did not end within 8 s")
    _, sent = upstream.answer_to("tools/call")  # the server did answer the direct call
    assert sent["result"] == case["result"]


@pytest.mark.anyio
async def test_as_gemini_speaks_the_proxy_answers_the_meta_null_case_with_the_parsed_text_as_structured() -> None:
    """The proxy's side of the case without the host: a client naming itself as Gemini CLI 0.61.0
    does (``gemini-cli-mcp-client``, 2025-06-18, no ``MCP-Protocol-Version`` header on any request)
    gets the case's expected result (no ``_meta``) with a ``structuredContent`` holding the parsed
    text as an object's member; an SDK client gets the expected result alone."""
    case = meta_null_case()
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {"roots": {"listChanged": True}},
        "clientInfo": {"name": "gemini-cli-mcp-client", "version": "0.61.0"},
    }
    with serve(ScriptedServer([ToolSpec(case["tool"], returning(case["result"]))])) as up, proxy_for(f"{up}/mcp") as px:
        async with httpx.AsyncClient(timeout=10) as http:
            url = f"{px}/mcp"
            first = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
            opened = await http.post(url, json=first, headers=HEADERS)
            session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            await http.post(url, json=listing, headers=session)
            call = {"name": case["tool"]["name"], "arguments": {}, "_meta": {"progressToken": "t"}}
            called = await http.post(
                url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, headers=session
            )
    datas = [line[5:].strip() for line in called.text.splitlines() if line.startswith("data:")]
    answer = json.loads(datas[-1] if datas else called.text)
    assert answer["result"] == {**case["expected"]["result"], "structuredContent": {"result": []}}


def test_parameter_names_the_gemini_api_refuses_reach_the_model_renamed_and_the_server_as_its_own(
    tmp_path: Path,
) -> None:
    """Through the proxy, Gemini CLI offers its model parameter names the Gemini API takes (a dot, a
    leading hyphen or digit, unicode: renamed at the root, in a nested object, in an item object, in
    an anyOf arm); the model calls with those names, Gemini CLI checks the call against the schema
    it offered, and the server receives its own names with the values Gemini CLI sent (12.5, 1e-7,
    unicode, nulls at depth; an integer past 2**53 as the double JavaScript reads it, the host's own
    doing: the proxy copies the bytes, ``test_gemini_schemas`` shows big integers kept exact)."""
    from .model_api_judges import GEMINI as GEMINI_JUDGE
    from .test_gemini_schemas import GEMINI, KEYED, OWN_ARGUMENTS, Recorder, advertised, raw_listing

    recorder = Recorder(
        ScriptedServer([ToolSpec(KEYED, returning({"content": text("booked \u2713")}))], response_mode="json")
    )
    with serve(recorder) as upstream, proxy_for(f"{upstream}/mcp") as proxy:
        listing = json.loads(anyio.run(raw_listing, f"{proxy}/mcp", GEMINI))["result"]["tools"][0]
        names = {own: new for new, own in listing["_meta"]["dev.mcp-normalizer/original-keys"].items()}
        view = run_gemini_cli(
            McpServer("srv", url=f"{proxy}/mcp"), "ledger.find", advertised(OWN_ARGUMENTS, names), tmp_path
        )
    schema = declared(view, "ledger.find")
    assert not GEMINI_JUDGE.refused({"name": "ledger_find", "inputSchema": schema}), schema
    assert set(names) <= {"page.size", "-offset", "libell\u00e9", "2fa", "min.ratio", "max-amount"} | {
        "unit-price",
        "\u540d\u524d",
        "a.b",
    }
    assert names["page.size"] in schema["properties"] and "page.size" not in schema["properties"]
    assert view.result is not None and "booked \u2713" in view.result
    (call,) = [c for c in recorder.calls() if c["message"]["params"]["name"] == "ledger.find"]
    as_javascript = {**OWN_ARGUMENTS, "page.size": float(OWN_ARGUMENTS["page.size"])}
    as_javascript["filter"] = {**OWN_ARGUMENTS["filter"], "max-amount": float(OWN_ARGUMENTS["filter"]["max-amount"])}
    assert call["message"]["params"]["arguments"] == as_javascript


def test_an_enum_in_an_anyof_arm_reaches_the_model_as_strings_and_the_server_as_its_values(tmp_path: Path) -> None:
    """Through the proxy, Gemini CLI offers an ``anyOf``/``oneOf`` arm's numeric or boolean enum as
    strings; the model picks strings, Gemini CLI checks them against the schema it offered, and the
    server receives the values (1e-7 spelled as its listing spells it); a tool whose arm's strings
    another arm could take as well is not offered to it (withheld), and the other tool still is."""
    from .model_api_judges import GEMINI as GEMINI_JUDGE
    from .test_gemini_schemas import AMBIGUOUS, ARMED, Recorder

    arguments = {"level": "2", "ratio": "1e-7", "item": {"kind": "4"}, "flag": "true", "unit": None}
    tools = [ToolSpec(spec, returning({"content": text("picked \u2713")})) for spec in (ARMED, AMBIGUOUS)]
    recorder = Recorder(ScriptedServer(tools, response_mode="json"))
    with serve(recorder) as upstream, proxy_for(f"{upstream}/mcp") as proxy:
        view = run_gemini_cli(McpServer("srv", url=f"{proxy}/mcp"), "grid.pick", arguments, tmp_path)
    assert set(view.tools) == {"grid.pick"}  # grid.step withheld from Gemini CLI alone
    schema = declared(view, "grid.pick")
    assert not GEMINI_JUDGE.refused({"name": "grid_pick", "inputSchema": schema}), schema
    assert schema["properties"]["ratio"]["anyOf"][1]["enum"] == ["1e-7"]
    assert view.result is not None and "picked \u2713" in view.result
    (call,) = [c for c in recorder.calls() if c["message"]["params"]["name"] == "grid.pick"]
    assert call["message"]["params"]["arguments"] == {
        "level": 2,
        "ratio": 1e-7,
        "item": {"kind": 4},
        "flag": True,
        "unit": None,
    }
    assert b'"ratio":1e-7' in call["raw"]
