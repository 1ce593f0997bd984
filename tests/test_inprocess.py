"""The in-process tier: the middleware around real MCP apps, driven in this process with no socket
(httpx's ASGI transport; the Python MCP client's HTTP client over the same transport). Between the
pure tests and the wire suite: the whole request path runs, in a second or two."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import orjson
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mcp_normalizer import NormalizerMiddleware
from mcp_normalizer.demo.upstream import FORBIDDEN, RUNTIMES, protean_server
from mcp_normalizer.types import ASGIApp

from .support import HEADERS, PROBLEM_KEY, protean_rules, sdk_app

pytestmark = [pytest.mark.inprocess, pytest.mark.anyio]


@asynccontextmanager
async def running_sdk_app(json_response: bool) -> AsyncIterator[Any]:
    """The MCP SDK's Streamable HTTP app with its lifespan (the session manager) running."""
    app = sdk_app(json_response)
    async with app.router.lifespan_context(app):
        yield app


async def python_client_calls(app: ASGIApp, *tools: str) -> list[Any]:
    """What the Python MCP client (``ClientSession``) gets for each tool, over ``app`` in memory
    (an exception it raised counts as what it got)."""
    got: list[Any] = []
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        async with (
            streamable_http_client("http://127.0.0.1:8000/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()  # the client validates results against the listed schemas
            for tool in tools:
                try:
                    got.append(await session.call_tool(tool, {}))
                except Exception as exc:
                    got.append(exc)
    return got


@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
async def test_the_python_client_rejects_the_sdk_app_directly_and_accepts_it_through_the_middleware(
    json_response: bool,
) -> None:
    async with running_sdk_app(json_response) as app:
        direct = await python_client_calls(app, "protean.list_runtimes")
        proxied = await python_client_calls(
            NormalizerMiddleware(app, protean_rules()), "protean.list_runtimes", "protean.scope_list"
        )
    assert isinstance(direct[0], Exception)  # scope: null where the schema says string
    runtimes, scope_list = proxied
    assert not isinstance(runtimes, Exception) and runtimes.structured_content == RUNTIMES  # every null kept
    assert scope_list.is_error is True and scope_list.structured_content is None
    assert scope_list.meta[PROBLEM_KEY] == FORBIDDEN


async def test_a_batch_through_the_middleware_is_answered_in_order_with_a_true_content_length() -> None:
    app = NormalizerMiddleware(protean_server("json"), protean_rules())
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": "two", "method": "tools/call", "params": {"name": "protean.scope_list"}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "protean.list_runtimes"}},
    ]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        response = await http.post("/mcp", content=orjson.dumps(batch), headers=HEADERS)
    assert response.status_code == 200
    assert int(response.headers["content-length"]) == len(response.content)
    answers = orjson.loads(response.content)
    assert [answer["id"] for answer in answers] == [1, "two", 3]
    listed = {tool["name"]: tool for tool in answers[0]["result"]["tools"]}
    scope = listed["protean.list_runtimes"]["outputSchema"]["properties"]["runtimes"]["items"]["properties"]["scope"]
    assert scope["type"] == ["string", "null"]  # advertised nullable, as declared
    assert answers[1]["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN and "structuredContent" not in answers[1]["result"]
    assert answers[2]["result"]["structuredContent"] == RUNTIMES
