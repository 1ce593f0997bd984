"""The third way to run: ``NormalizerMiddleware`` around an in-process MCP app (the MCP Python SDK's
own ``streamable_http_app()``, whose low-level server does no output validation), served by uvicorn.
Its lifespan (the SDK's session manager) must pass through the middleware."""

from __future__ import annotations

import io
import logging
from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer import JSONFormatter, NormalizerMiddleware
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import FORBIDDEN, RUNTIMES

from .support import PROBLEM_KEY, capture_rewrites, protean_rules, sdk_app, serve

pytestmark = pytest.mark.wire

STEPS = [
    {"op": "listTools"},
    {"op": "callTool", "name": "protean.scope_list"},
    {"op": "callTool", "name": "protean.list_runtimes"},
]


@pytest.mark.anyio
@pytest.mark.parametrize("json_response", [False, True])
async def test_middleware_around_an_in_process_sdk_app(json_response: bool) -> None:
    with serve(sdk_app(json_response), lifespan="on") as plain:
        direct = (await run_node("v1", [{"url": plain + "/mcp", "steps": STEPS}]))[0]
    wrapped = NormalizerMiddleware(sdk_app(json_response), protean_rules())
    with serve(wrapped, lifespan="on") as base, capture_rewrites() as log:
        url = base + "/mcp"
        got = {
            "ts-sdk-1": (await run_node("v1", [{"url": url, "steps": STEPS}]))[0],
            "ts-client-2": (await run_node("v2", [{"url": url, "steps": STEPS}]))[0],
            "python": await run_python(url, STEPS),
        }
    assert not direct["steps"][1]["ok"] and not direct["steps"][2]["ok"]
    for client, record in got.items():
        assert all(step["ok"] for step in record["steps"]), (client, record)
        scope_list, list_runtimes = record["steps"][1]["value"], record["steps"][2]["value"]
        assert scope_list["_meta"][PROBLEM_KEY] == FORBIDDEN and scope_list["isError"] is True
        assert list_runtimes["structuredContent"] == RUNTIMES
    assert len(log.rewrites(rule="error_problem")) == 3


@pytest.mark.anyio
async def test_middleware_fetches_tools_through_the_in_process_app() -> None:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "protean.scope_list"}}
    listed: list[str] = []
    with serve(NormalizerMiddleware(sdk_app(True, listed)), lifespan="on") as base:
        async with httpx.AsyncClient(base_url=base, timeout=30, headers=headers) as http:
            response = await http.post("/mcp", content=orjson.dumps(init))
            session = {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            notified = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post("/mcp", content=orjson.dumps(notified), headers=session)
            result = (await http.post("/mcp", content=orjson.dumps(call), headers=session)).json()["result"]
    assert result["_meta"][PROBLEM_KEY] == FORBIDDEN
    assert result["isError"] is True
    # The client never listed tools: the middleware did, through the in-process app, in the session.
    assert len(listed) == 1 and listed[0].startswith("mcp-normalizer-tools-list-")


@pytest.mark.anyio
async def test_a_host_with_a_plain_log_formatter_still_reads_the_rewrites_fields() -> None:
    """In middleware mode the host's logging formats the lines: a plain ``%(message)s`` handler
    gets the rule, action, tool, id and pointers in the text; :class:`proxy.JSONFormatter` gets the
    full line."""
    plain, structured = io.StringIO(), io.StringIO()
    handlers = [logging.StreamHandler(plain), logging.StreamHandler(structured)]
    handlers[0].setFormatter(logging.Formatter("%(message)s"))
    handlers[1].setFormatter(JSONFormatter())
    log = logging.getLogger("mcp_normalizer.rewrite")
    level, log.level = log.level, logging.INFO
    for handler in handlers:
        log.addHandler(handler)
    try:
        with serve(NormalizerMiddleware(sdk_app(True)), lifespan="on") as base:
            await run_python(base + "/mcp", STEPS)
    finally:
        for handler in handlers:
            log.removeHandler(handler)
        log.setLevel(level)
    text = [line for line in plain.getvalue().splitlines() if "error_problem" in line]
    assert text and "tool='protean.scope_list'" in text[0] and "id=" in text[0] and "/structuredContent" in text[0]
    lines = [orjson.loads(line) for line in structured.getvalue().splitlines()]
    problem = next(line for line in lines if line["rule"] == "error_problem")
    assert problem["tool"] == "protean.scope_list" and "/structuredContent" in problem["pointers"]


@pytest.mark.anyio
async def test_a_renamed_call_reaches_the_in_process_app_with_its_new_content_length() -> None:
    """Middleware mode: the tool advertised under a new name is called upstream by its original
    one, and the app gets the body's own ``Content-Length`` (the audit's mutant left the old one:
    146 for a 227-byte body), as the real clients send it."""
    original = "t\u00f6ol-" + "x" * 140
    seen: list[tuple[bytes | None, int, object]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = orjson.loads(body)
        seen.append((dict(scope["headers"]).get(b"content-length"), len(body), request.get("params", {}).get("name")))
        if request["method"] == "tools/list":
            result: dict[str, Any] = {"tools": [{"name": original, "inputSchema": {"type": "object"}}]}
        else:
            result = {"content": [{"type": "text", "text": f"ran {request['params']['name']}"}]}
        out = orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": out})

    wrapped = NormalizerMiddleware(app)
    session = {"mcp-session-id": "s-1", "content-type": "application/json", "accept": "application/json"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=wrapped), base_url="http://127.0.0.1") as http:
        listed = await http.post("/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', headers=session)
        advertised = listed.json()["result"]["tools"][0]["name"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": advertised, "arguments": {}}}
        answer = await http.post("/mcp", content=orjson.dumps(call), headers=session)
    assert advertised != original and answer.json()["result"]["content"][0]["text"] == f"ran {original}"
    length, size, name = seen[-1]
    assert name == original and length == str(size).encode()
