"""What the proxy learns of tools: from tools/list responses (all pages), by fetching when a call
names an unknown tool, and never across sessions or authorizations."""

from __future__ import annotations

import gc
from typing import Any

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer.demo.clients import run_node
from mcp_normalizer.demo.upstream import FORBIDDEN, ScriptedServer, ToolSpec, protean_tools, returning

from .support import PROBLEM_KEY, ResponseMode, initialize, listed_session, proxy_for, read_body, rpc, serve

pytestmark = pytest.mark.wire


def tools_list_requests(upstream: ScriptedServer) -> list[tuple[dict[str, Any], Any]]:
    return [(message, headers) for message, headers in upstream.requests if message.get("method") == "tools/list"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_a_call_to_an_unseen_tool_fetches_all_pages_with_the_callers_headers(
    mode: ResponseMode,
) -> None:
    upstream = ScriptedServer(protean_tools(), response_mode=mode, page_size=1)
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url, authorization="Bearer alice")
            # No tools/list from the client: the proxy must learn the tools itself.
            error = await rpc(http, url, "tools/call", {"name": "protean.scope_list", "arguments": {}}, 1, **session)
            whoami = await rpc(http, url, "tools/call", {"name": "protean.whoami", "arguments": {}}, 2, **session)
    assert error["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN
    assert "structuredContent" not in whoami["result"]  # learned from the 4th page: no outputSchema
    fetched = tools_list_requests(upstream)
    assert [(m.get("params") or {}).get("cursor") for m, _ in fetched] == [None, "1", "2", "3"]
    for message, headers in fetched:
        assert headers["authorization"] == "Bearer alice"
        assert headers["mcp-session-id"] == session["mcp-session-id"]
        assert str(message["id"]).startswith("mcp-normalizer-")


@pytest.mark.anyio
async def test_client_listed_pages_are_all_learned() -> None:
    upstream = ScriptedServer(protean_tools(), page_size=2)
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            first = await rpc(http, url, "tools/list", {}, 1, **session)
            second = await rpc(http, url, "tools/list", {"cursor": first["result"]["nextCursor"]}, 2, **session)
            whoami = await rpc(http, url, "tools/call", {"name": "protean.whoami", "arguments": {}}, 3, **session)
    assert [t["name"] for t in second["result"]["tools"]] == ["protean.deploy", "protean.whoami"]
    assert "structuredContent" not in whoami["result"]
    assert len(tools_list_requests(upstream)) == 2  # both pages came from the client: no fetch


def per_token_tools(headers: Any) -> list[ToolSpec]:
    """Tool ``report`` declares an outputSchema for Alice's token and none for Bob's."""
    tool: dict[str, Any] = {"name": "report", "inputSchema": {"type": "object"}}
    if headers.get("authorization") == "Bearer alice":
        tool["outputSchema"] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    return [ToolSpec(tool, returning({"content": [{"type": "text", "text": "r"}], "structuredContent": {}}))]


@pytest.mark.anyio
async def test_two_authorizations_never_share_what_the_proxy_learned() -> None:
    # Stateless traffic (no session id): only the authorization tells the two clients apart.
    upstream = ScriptedServer(per_token_tools, response_mode="json")
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            alice, bob = {"authorization": "Bearer alice"}, {"authorization": "Bearer bob"}
            await rpc(http, url, "tools/list", {}, 1, **alice)
            await rpc(http, url, "tools/list", {}, 1, **bob)
            for_alice = await rpc(http, url, "tools/call", {"name": "report"}, 2, **alice)
            for_bob = await rpc(http, url, "tools/call", {"name": "report"}, 2, **bob)
            carol = await rpc(http, url, "tools/call", {"name": "report"}, 2, authorization="Bearer alice2")
    assert for_alice["result"]["structuredContent"] == {}  # Alice's tool declares an outputSchema: kept
    assert "structuredContent" not in for_bob["result"]  # Bob's declares none: dropped
    assert "structuredContent" not in carol["result"]  # an unseen authorization is fetched for, not guessed


@pytest.mark.anyio
async def test_concurrent_sessions_with_different_tool_lists_each_get_their_own_normalization() -> None:
    upstream = ScriptedServer(per_token_tools)
    steps = [{"op": "listTools"}, {"op": "callTool", "name": "report"}]
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        results: dict[str, Any] = {}

        async def client(token: str) -> None:
            session = {"url": px + "/mcp", "headers": {"authorization": f"Bearer {token}"}, "steps": steps}
            results[token] = await run_node("v2", [session] * 3)

        async with anyio.create_task_group() as tg:
            for token in ("alice", "bob"):
                tg.start_soon(client, token)
    for token, sessions in results.items():
        for record in sessions:
            assert all(step["ok"] for step in record["steps"]), record
            call = record["steps"][1]["value"]
            assert ("structuredContent" in call) == (token == "alice"), (token, call)


@pytest.mark.anyio
async def test_ending_a_session_forgets_what_was_learned_for_it() -> None:
    upstream = ScriptedServer(protean_tools())
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await listed_session(http, url)
            assert len(tools_list_requests(upstream)) == 1
            await http.delete(url, headers=session)
            await rpc(http, url, "tools/call", {"name": "protean.whoami"}, 3, **session)
    assert len(tools_list_requests(upstream)) == 2  # the proxy fetched again after DELETE


def deep_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.anyio
async def test_the_fetch_uses_the_first_response_of_a_stream_that_never_ends() -> None:
    release = anyio.Event()
    tools = [spec.tool for spec in protean_tools()]

    async def upstream(scope: Any, receive: Any, send: Any) -> None:
        request = orjson.loads(await read_body(receive))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        if request["method"] == "tools/list":
            event = {"jsonrpc": "2.0", "id": request["id"], "result": {"tools": tools}}
            await send(
                {"type": "http.response.body", "body": b"data: " + orjson.dumps(event) + b"\n\n", "more_body": True}
            )
            await release.wait()  # ...and the stream stays open
            return
        result = {"content": [], "structuredContent": FORBIDDEN, "isError": True}
        event = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        await send({"type": "http.response.body", "body": b"data: " + orjson.dumps(event) + b"\n\n"})

    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=30) as http:
            with anyio.fail_after(5):  # far below the 10 s fetch timeout
                answer = await rpc(http, px + "/mcp", "tools/call", {"name": "protean.scope_list"}, 1)
    assert answer["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN


@pytest.mark.anyio
async def test_a_tool_missing_from_the_list_is_not_fetched_for_again_and_again() -> None:
    upstream = ScriptedServer(protean_tools(), response_mode="json", page_size=1)
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            for rid in range(5):
                await rpc(http, url, "tools/call", {"name": "no.such.tool"}, rid, **session)
    assert len(tools_list_requests(upstream)) == 4  # one full fetch (4 pages), not one per call


@pytest.mark.anyio
async def test_one_unreadable_schema_does_not_spoil_the_rest_of_the_list() -> None:
    hostile = ToolSpec(
        {"name": "deep", "inputSchema": {"type": "object"}, "outputSchema": deep_schema(400)},
        returning({"content": []}),
    )
    upstream = ScriptedServer([hostile, *protean_tools()], response_mode="json")
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            listed = await rpc(http, url, "tools/list", {}, 1, **session)
            whoami = await rpc(http, url, "tools/call", {"name": "protean.whoami"}, 2, **session)
            deep = await rpc(http, url, "tools/call", {"name": "deep"}, 3, **session)
    assert listed["result"]["tools"][0]["outputSchema"] == deep_schema(400)  # passed untouched
    assert "structuredContent" not in whoami["result"]  # the others are still normalized
    assert deep["result"] == {"content": []}
    assert len(tools_list_requests(upstream)) == 1  # and nothing had to be fetched again


def test_scopes_share_entries_and_nothing_is_compiled_before_a_call() -> None:
    from mcp_normalizer import NormalizerConfig
    from mcp_normalizer.engine.normalize import Normalizer

    normalizer = Normalizer(NormalizerConfig())
    many = {
        "tools": [
            {"name": f"t{i}", "inputSchema": {}, "outputSchema": {"type": "object", "title": str(i)}}
            for i in range(500)
        ]
    }
    first = normalizer.tools_list(many, None).entries
    second = normalizer.tools_list(orjson.loads(orjson.dumps(many)), None).entries  # another client, same list
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert len(normalizer.compiler._cache) == 0  # listing compiles nothing
    assert first[7].compiled is not None and len(normalizer.compiler._cache) == 1


def _tools(prefix: str, count: int) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"n": {"type": "number"}, "label": {"type": "string"}}}
    return [
        {"name": f"{prefix}.{i}", "description": "ø" * 40, "inputSchema": {"type": "object"}, "outputSchema": schema}
        for i in range(count)
    ]


def test_scopes_that_list_the_same_tools_share_one_catalog_and_the_bytes_are_bounded() -> None:
    from mcp_normalizer import NormalizerConfig
    from mcp_normalizer.engine.normalize import Normalizer
    from mcp_normalizer.engine.scopes import Limits, ScopeStore

    normalizer = Normalizer(NormalizerConfig())
    same = normalizer.tools_list({"tools": _tools("t", 2000)}, None).entries
    store = ScopeStore(Limits(max_catalog_bytes=8 * 1024 * 1024))
    for n in range(1000):  # a thousand clients (Authorization values) of one upstream
        store.state(f"client-{n}").catalog.learn(list(same), first_page=True)
    assert len(store) == 1000 and len(store.pool) == 1
    one = store.pool.bytes
    assert 2000 * 100 < one < 8 * 1024 * 1024
    # Distinct lists (per-user tools) fill the bound: the least recently used scopes are forgotten.
    for n in range(40):
        entries = normalizer.tools_list({"tools": _tools(f"user{n}", 2000)}, None).entries
        store.state(f"user-{n}").catalog.learn(entries, first_page=True)
        assert store.pool.bytes <= 8 * 1024 * 1024 or len(store) == 1
    assert store.peek("user-39") is not None and store.peek("client-0") is None
    assert store.pool.bytes <= 8 * 1024 * 1024
    # A later page is the scope's own copy; the shared set stays as it was for the others.
    state = store.state("user-39")
    shared = state.catalog.tools
    state.catalog.learn(normalizer.tools_list({"tools": _tools("more", 1)}, None).entries, first_page=False)
    assert "more.0" in state.catalog.tools and "more.0" not in shared


@pytest.mark.anyio
async def test_the_metrics_show_one_catalog_for_many_clients_of_one_upstream() -> None:
    upstream = ScriptedServer([ToolSpec(tool, returning({"content": []})) for tool in _tools("t", 300)])
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            for n in range(20):
                session = await initialize(http, url, authorization=f"Bearer user-{n}")
                listed = await rpc(http, url, "tools/list", {}, 1, **session)
                assert len(listed["result"]["tools"]) == 300
            exposition = (await http.get(px + "/.mcp-normalizer/metrics")).text
    figures = dict(line.split(" ", 1) for line in exposition.splitlines() if line.startswith("mcp_normalizer_catalog"))
    assert float(figures["mcp_normalizer_catalogs"]) == 1
    assert 300 * 100 < float(figures["mcp_normalizer_catalog_bytes"]) < 10 * 1024 * 1024
    assert "mcp_normalizer_scopes 20.0" in exposition


def test_listing_tools_leaves_no_garbage_for_the_cycle_collector() -> None:
    """Every schema walk frees what it made as it returns: with 50,000 tools, reference cycles left
    behind (recursive closures) made full collections that held every session for 100s of ms."""
    tools = [
        {
            "name": f"t{i}",
            "inputSchema": {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}},
            "outputSchema": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {"s": {"type": "string", "nullable": True}, "a": {"type": "array", "items": [{}]}},
                "definitions": {"d": {"type": "object", "properties": {"x": {"$ref": "#/definitions/d"}}}},
            },
        }
        for i in range(200)
    ]
    from mcp_normalizer import NormalizerConfig
    from mcp_normalizer.engine.normalize import Normalizer

    config = NormalizerConfig.from_mapping({"tools": {"t1": {"nullable": ["/s"]}}})
    normalizer = Normalizer(config)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage to look at
    try:
        outcome = normalizer.tools_list({"tools": tools}, "2025-11-25")
        gc.collect()
        # Only what the proxy made (other tests' server threads may leave garbage of their own).
        ours = [
            o for o in gc.garbage if f"{getattr(o, '__module__', '')}.{type(o).__module__}".startswith("mcp_normalizer")
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert outcome.changed and len(outcome.entries) == 200
    assert ours == []
