"""The 2026-07-28 era on the wire (stateless requests, ``Mcp-*`` headers, ``resultType``, any JSON
``structuredContent``, ``ttlMs``/``cacheScope``, ``subscriptions/listen``) and tasks in both eras."""

from __future__ import annotations

import threading
import tomllib
from typing import Any

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.demo.clients import run_python
from mcp_normalizer.demo.upstream import FORBIDDEN, ScriptedServer, ToolCall, ToolSpec, protean_tools, returning
from mcp_normalizer.types import Receive, Scope, Send

from .support import (
    HEADERS,
    MODERN,
    PROBLEM_KEY,
    fetches,
    headers,
    initialize,
    params,
    proxy_for,
    read_body,
    replay_body,
    rpc,
    serve,
    task_server,
)

pytestmark = pytest.mark.wire


async def call(http: httpx.AsyncClient, url: str, tool: str, rid: Any = 1, **extra: str) -> Any:
    return await rpc(
        http, url, "tools/call", params(name=tool, arguments={}), rid, **headers("tools/call", tool, **extra)
    )


@pytest.mark.anyio
async def test_the_body_wins_over_mcp_headers_and_mcp_param_headers_pass_through() -> None:
    upstream = ScriptedServer(protean_tools(), response_mode="json")
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            # Mcp-Name names another tool than the body: the proxy goes by the body.
            result = await call(
                http, url, "protean.scope_list", **{"mcp-name": "protean.whoami", "mcp-param-region": "eu"}
            )
            # Mcp-Method disagrees with the body: the upstream rejects it, the proxy forwards that untouched.
            body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params(name="protean.scope_list")}
            direct = await http.post(
                up + "/mcp", content=orjson.dumps(body), headers={**HEADERS, **headers("prompts/get")}
            )
            proxied = await http.post(url, content=orjson.dumps(body), headers={**HEADERS, **headers("prompts/get")})
    assert result["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN and result["result"]["resultType"] == "complete"
    sent = [h for m, h in upstream.requests if m.get("method") == "tools/call"][0]
    assert sent["mcp-param-region"] == "eu" and "mcp-session-id" not in sent
    assert proxied.status_code == direct.status_code == 400
    assert proxied.content == direct.content


def retried_tool() -> ToolSpec:
    """A tool that first asks for input (MRTR), then fails with a problem on the retry."""
    calls = 0

    async def handler(call: ToolCall) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            ask = {"method": "elicitation/create", "params": {"message": "Which region?", "requestedSchema": {}}}
            return {"resultType": "input_required", "inputRequests": {"region": ask}, "requestState": "opaque-1"}
        return {"content": [], "structuredContent": FORBIDDEN, "isError": True}

    tool = {"name": "ask", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "required": ["x"]}}
    return ToolSpec(tool, handler)


@pytest.mark.anyio
async def test_input_required_passes_untouched_and_the_retry_is_normalized() -> None:
    exchanges = []
    for through_proxy in (False, True):
        with serve(ScriptedServer([retried_tool()], response_mode="json")) as up, proxy_for(up + "/mcp") as px:
            url = (px if through_proxy else up) + "/mcp"
            async with httpx.AsyncClient(timeout=30, headers=HEADERS) as http:
                first_body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params(name="ask")}
                first = await http.post(url, content=orjson.dumps(first_body), headers=headers("tools/call", "ask"))
                retry = await call(http, url, "ask", rid=2)  # a new id, the same tool
            exchanges.append((first.content, retry))
    (direct_first, direct_retry), (proxied_first, proxied_retry) = exchanges
    assert proxied_first == direct_first  # input_required: byte for byte
    assert b'"resultType":"input_required"' in proxied_first
    assert "structuredContent" in direct_retry["result"]
    assert proxied_retry["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN


ROWS = {
    "name": "rows",
    "inputSchema": {"type": "object"},
    "outputSchema": {
        "type": "array",
        "items": {"type": "object", "properties": {"scope": {"type": "string"}}, "required": ["scope"]},
    },
}
COUNT = {"name": "count", "inputSchema": {"type": "object"}, "outputSchema": {"type": "integer"}}
TEMPERATURE = {"name": "temperature", "inputSchema": {"type": "object"}, "outputSchema": {"type": "number"}}
ANY_JSON_TOOLS = [
    ToolSpec(
        ROWS, returning({"content": [{"type": "text", "text": "2 rows"}], "structuredContent": [{"scope": None}]})
    ),
    ToolSpec(COUNT, returning({"content": [], "structuredContent": "boom", "isError": True})),
    ToolSpec(TEMPERATURE, returning({"content": [], "structuredContent": 21.5})),
]


@pytest.mark.anyio
async def test_any_json_structured_content_with_the_modern_python_client() -> None:
    config = NormalizerConfig.from_mapping(tomllib.loads('[tools.rows]\nnullable = ["/*/scope"]\n'))
    steps = [{"op": "listTools"}] + [{"op": "callTool", "name": name} for name in ("rows", "count", "temperature")]
    with serve(ScriptedServer(ANY_JSON_TOOLS)) as up, proxy_for(up + "/mcp", config) as px:
        direct = await run_python(up + "/mcp", steps, mode=MODERN)
        proxied = await run_python(px + "/mcp", steps, mode=MODERN)
    assert not direct["steps"][1]["ok"]  # null where the array items require a string
    assert all(step["ok"] for step in proxied["steps"]), proxied
    rows, count, temperature = (step["value"] for step in proxied["steps"][1:])
    assert rows["structuredContent"] == [{"scope": None}]  # an array, not wrapped
    # the client names itself mcp in every request's _meta: it does not validate errors, it gets them as sent
    assert count["isError"] is True and count["structuredContent"] == "boom" and "_meta" not in count
    assert temperature["structuredContent"] == 21.5
    assert temperature["content"] == [{"type": "text", "text": "21.5"}]


@pytest.mark.anyio
async def test_server_discover_and_subscriptions_listen_pass_through_live() -> None:
    upstream = ScriptedServer(protean_tools(), response_mode="json")
    release = threading.Event()
    ack = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged"}\n\n'
    changed = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        if b"subscriptions/listen" not in body:
            await upstream(scope, replay_body(body, receive), send)
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": ack, "more_body": True})
        await anyio.to_thread.run_sync(release.wait, 20)
        await send({"type": "http.response.body", "body": changed, "more_body": False})

    with serve(app) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30, headers=HEADERS) as http:
            discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": params()}
            direct = await http.post(up + "/mcp", content=orjson.dumps(discover), headers=headers("server/discover"))
            proxied = await http.post(url, content=orjson.dumps(discover), headers=headers("server/discover"))
            assert proxied.content == direct.content
            await call(http, url, "protean.whoami", rid=2)
            assert fetches(upstream) == 1
            listen = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "subscriptions/listen",
                "params": params(filter={"toolsListChanged": True}),
            }
            received = []
            body = orjson.dumps(listen)
            async with http.stream("POST", url, content=body, headers=headers("subscriptions/listen")) as stream:
                async for chunk in stream.aiter_raw():
                    received.append(chunk)
                    release.set()  # the acknowledgement arrived while the stream was open
            await call(http, url, "protean.whoami", rid=4)
    assert received[0] == ack and b"".join(received) == ack + changed
    assert fetches(upstream) == 2  # list_changed on the listen stream made the proxy relearn


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("ttl_ms", "cache_scope", "expected"),
    [(0, "private", 3), (60_000, "private", 2), (60_000, "public", 1)],
)
async def test_ttl_ms_and_cache_scope_govern_how_long_and_for_whom_a_tool_list_is_reused(
    ttl_ms: int, cache_scope: Any, expected: int
) -> None:
    upstream = ScriptedServer(protean_tools(), response_mode="json", list_ttl_ms=ttl_ms, cache_scope=cache_scope)
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=30) as http:
            for rid, token in enumerate(("alice", "bob", "alice")):
                result = await call(http, px + "/mcp", "protean.whoami", rid=rid, authorization=f"Bearer {token}")
                assert "structuredContent" not in result["result"]  # normalized every time
    assert fetches(upstream) == expected


@pytest.mark.anyio
async def test_a_2025_11_25_task_result_is_normalized_with_the_schema_of_its_tool() -> None:
    upstream = task_server()
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            await rpc(http, url, "tools/list", {}, 1, **session)
            handles = {}
            for rid, tool in enumerate(("protean.scope_list", "protean.whoami"), start=2):
                created = await rpc(http, url, "tools/call", {"name": tool, "task": {"ttl": 60000}}, rid, **session)
                assert set(created["result"]) == {"task"}  # the CreateTaskResult passes through untouched
                handles[tool] = created["result"]["task"]["taskId"]
            scope_list = await rpc(http, url, "tasks/result", {"taskId": handles["protean.scope_list"]}, 9, **session)
            whoami = await rpc(http, url, "tasks/result", {"taskId": handles["protean.whoami"]}, 10, **session)
            status = await rpc(http, url, "tasks/get", {"taskId": handles["protean.whoami"]}, 11, **session)
    assert scope_list["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN
    assert scope_list["result"]["_meta"]["io.modelcontextprotocol/related-task"] == {
        "taskId": handles["protean.scope_list"]
    }
    assert "structuredContent" not in whoami["result"]  # needs the schema of the tool that started the task
    assert status["result"]["status"] == "completed"


@pytest.mark.anyio
async def test_a_2026_07_28_completed_task_is_normalized_with_the_schema_of_its_tool() -> None:
    upstream = task_server()
    wants_tasks = params()
    wants_tasks["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    }
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            results = {}
            for rid, tool in enumerate(("protean.scope_list", "protean.whoami"), start=1):
                created = await rpc(
                    http, url, "tools/call", {**wants_tasks, "name": tool}, rid, **headers("tools/call", tool)
                )
                handle = created["result"]
                assert handle["resultType"] == "task" and handle["status"] == "working"
                got = await rpc(
                    http, url, "tasks/get", params(taskId=handle["taskId"]), rid + 10, **headers("tasks/get")
                )
                results[tool] = got["result"]
    assert results["protean.scope_list"]["status"] == "completed"
    assert results["protean.scope_list"]["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN
    assert "structuredContent" not in results["protean.whoami"]["result"]
    assert results["protean.whoami"]["resultType"] == "complete"


@pytest.mark.anyio
async def test_a_public_list_made_for_a_known_client_goes_out_private_even_unchanged() -> None:
    """A 2020-12 ``$schema`` is repaired for unknown clients only (the Python SDK client accepts
    it): the Python client gets the upstream's own tools, but that list is its, not everyone's; a
    shared cache must not hand it to a client that needs the repair (issue 22)."""
    tool = {
        "name": "dialect",
        "inputSchema": {"type": "object"},
        "outputSchema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"},
    }
    upstream = ScriptedServer(
        [ToolSpec(tool, returning({"content": [], "structuredContent": {}}))],
        response_mode="json",
        cache_scope="public",
    )
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        python = await run_python(px + "/mcp", [{"op": "listTools"}], mode="2026-07-28")
        async with httpx.AsyncClient(timeout=30) as http:
            unknown = (await rpc(http, px + "/mcp", "tools/list", params(), 1, **headers("tools/list")))["result"]
    listed = python["steps"][0]["value"]
    assert listed["tools"][0]["outputSchema"]["$schema"].endswith("2020-12/schema")  # the upstream's own
    assert listed["cacheScope"] == "private"
    assert "$schema" not in unknown["tools"][0]["outputSchema"] and unknown["cacheScope"] == "public"
