"""Issue 41 item 1: the members the 2026-07-28 era requires, filled where a server left them out
(rule ``era_fields``).

A 2026-07-28 server whose results lack ``resultType``, and whose ``tools/list`` and
``server/discover`` results lack ``ttlMs``/``cacheScope``: the strict 2026-07-28 clients (the TS
client 2.4.0 pinned to 2026-07-28, the Python ``mcp`` ``Client``) list no tool and fail every call
directly, and list and call every tool through the proxy, still at 2026-07-28; Claude Code 2.1.332
fills them itself directly (its ``--debug`` log says so) and finds nothing to fill through the proxy.
Only absent (or ``null``) members are filled, only in the 2026-07-28 era, and the proxy's own list
cache keeps to the filled values (reused for 0 ms, by no other scope).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import httpx
import orjson
import pytest

from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, protean_tools, returning
from mcp_normalizer.engine.rules import era_fields
from mcp_normalizer.engine.rules.base import Response, ResponseContext
from mcp_normalizer.wire.jsoncodec import Raw, split_object

from .host_claude import run_claude_code
from .host_loop import McpServer
from .support import (
    HEADERS,
    MODERN,
    Mangled,
    capture_rewrites,
    fetches,
    headers,
    initialize,
    params,
    proxy_for,
    rpc,
    serve,
)

pytestmark = pytest.mark.wire

#: Field data: a decimal, a tiny float, text beyond ASCII, an integer past 2**64.
DATA_TEXT = '{"price": 12.5, "epsilon": 1e-7, "name": "caf\u00e9 \u2713 \u6771\u4eac", "big": 123456789012345678901}'
QUOTE = {
    "name": "quote",
    "description": "A price quote.",
    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
    "outputSchema": {
        "type": "object",
        "properties": {
            "price": {"type": "number"},
            "epsilon": {"type": "number"},
            "name": {"type": "string"},
            "big": {"type": "integer"},
        },
        "required": ["price", "name"],
    },
}
NOTE = {"name": "note", "description": "A note.", "inputSchema": {"type": "object", "properties": {}}}


def tools() -> list[ToolSpec]:
    """Two tools: one with an ``outputSchema`` and structured data, one text-only."""
    quote = {"content": [{"type": "text", "text": DATA_TEXT}], "structuredContent": orjson.loads(DATA_TEXT)}
    note = {"content": [{"type": "text", "text": "r\u00e9sum\u00e9 \u2713 12.5"}]}
    return [ToolSpec(QUOTE, returning(quote)), ToolSpec(NOTE, returning(note))]


def bare(mode: Literal["json", "sse"] = "json") -> ScriptedServer:
    """A 2026-07-28 server that omits ``resultType``, ``ttlMs`` and ``cacheScope`` everywhere."""
    return ScriptedServer(tools(), response_mode=mode, era_fields=False)


STEPS: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "callTool", "name": "quote", "arguments": {"q": "caf\u00e9"}},
    {"op": "callTool", "name": "note", "arguments": {}},
]
PIN = {"mode": {"pin": MODERN}}


async def strict_clients(url: str) -> dict[str, dict[str, Any]]:
    """One session of :data:`STEPS` with each strict 2026-07-28 client: its record by client."""
    ts = await run_node("v2", [{"url": url, "versionNegotiation": PIN, "steps": STEPS}], request_timeout=10)
    return {"ts-client-2": ts[0], "python-client": await run_python(url, STEPS, mode=MODERN)}


def era_of_each_request(server: ScriptedServer) -> set[str | None]:
    """The protocol version each request reached the server at (header, else body ``_meta``)."""
    found = set()
    for message, sent in server.requests:
        meta = (message.get("params") or {}).get("_meta") or {}
        found.add(sent.get("mcp-protocol-version") or meta.get("io.modelcontextprotocol/protocolVersion"))
    return found


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_strict_2026_clients_list_and_call_every_tool_through_the_proxy_and_none_directly(
    mode: Literal["json", "sse"],
) -> None:
    upstream = bare(mode)
    with serve(upstream) as up:
        direct = await strict_clients(up + "/mcp")
        upstream.requests.clear()
        with proxy_for(up + "/mcp") as px, capture_rewrites() as log:
            through = await strict_clients(px + "/mcp")
    for name, record in direct.items():
        assert record["protocolVersion"] == MODERN, name
        assert not any(step["ok"] for step in record["steps"]), (name, record)  # no tool listed, no call
    assert "missing required resultType" in direct["ts-client-2"]["steps"][0]["error"]["message"]
    assert "resultType" in direct["python-client"]["steps"][0]["error"]["message"]
    for name, record in through.items():
        assert record["protocolVersion"] == MODERN, name
        assert all(step["ok"] for step in record["steps"]), (name, record)
        listed, quote, note = (step["value"] for step in record["steps"])
        assert [tool["name"] for tool in listed["tools"]] == ["quote", "note"], name
        assert (listed["ttlMs"], listed["cacheScope"]) == (0, "private"), name
        assert quote["content"] == [{"type": "text", "text": DATA_TEXT}], name  # as the server spelled it
        assert note["content"] == [{"type": "text", "text": "r\u00e9sum\u00e9 \u2713 12.5"}], name
    # Python keeps the integer past 2**64 exact; JavaScript's numbers cannot, so the TS client's text is judged
    assert through["python-client"]["steps"][1]["value"]["structuredContent"] == orjson.loads(DATA_TEXT)
    assert era_of_each_request(upstream) == {MODERN}  # still 2026-07-28 upstream: nothing bridged
    filled = log.rewrites(rule="era_fields", applied=True)
    by_method = {(line["method"], tuple(line["pointers"])) for line in filled}
    assert by_method >= {
        ("tools/list", ("/result/resultType", "/result/ttlMs", "/result/cacheScope")),
        ("tools/call", ("/result/resultType",)),
    }
    assert ("server/discover", ("/result/resultType", "/result/ttlMs", "/result/cacheScope")) in by_method
    assert all(line["era"] == MODERN and line["kind"] == "missing_era_fields" for line in filled)


def _odd(message: dict[str, Any]) -> bytes:
    """Invalid present values: on a list, ``ttlMs: -1`` and ``cacheScope: "shared"``; on a call,
    ``resultType: null`` (a serializer's absent member)."""
    result = message.get("result")
    if isinstance(result, dict) and "tools" in result:
        result.update(ttlMs=-1, cacheScope="shared")
    elif isinstance(result, dict) and "content" in result:
        result["resultType"] = None
    return orjson.dumps(message)


async def _raw(url: str, method: str, rid: int, name: str | None = None, **extra: str) -> Any:
    async with httpx.AsyncClient(timeout=30) as http:
        values: dict[str, Any] = {"name": name, "arguments": {}} if name is not None else {}
        return await rpc(http, url, method, params(**values), rid, **headers(method, name, **extra))


@pytest.mark.anyio
async def test_only_absent_or_null_members_are_filled_and_a_present_value_passes_as_sent() -> None:
    # resultType "done" is a result type no client knows: the server's statement, passed on as it is
    done = ToolSpec({**NOTE, "name": "done"}, returning({"content": [], "resultType": "done"}))
    upstream = Mangled(ScriptedServer([*tools(), done], response_mode="json", era_fields=False), {"odd": _odd})
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        listed = await _raw(url, "tools/list", 1, **{"x-fault": "odd"})
        called = await _raw(url, "tools/call", 2, "note", **{"x-fault": "odd"})
        unknown = await _raw(url, "tools/call", 3, "done")
        direct = await _raw(up + "/mcp", "tools/call", 3, "done")
    assert (listed["result"]["ttlMs"], listed["result"]["cacheScope"]) == (-1, "shared")  # present: kept
    assert listed["result"]["resultType"] == "complete"  # absent: filled
    assert called["result"]["resultType"] == "complete"  # null: as absent
    assert unknown == direct and unknown["result"]["resultType"] == "done"


@pytest.mark.anyio
async def test_a_legacy_session_of_the_same_server_gets_no_2026_members() -> None:
    upstream = bare()
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=30, headers=HEADERS) as http:
            out = []
            for url in (up + "/mcp", px + "/mcp"):
                session = await initialize(http, url)
                body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
                listed = await http.post(url, content=orjson.dumps(body), headers=session)
                body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "note"}}
                called = await http.post(url, content=orjson.dumps(body), headers=session)
                out.append((listed.content, called.content))
    (direct_list, direct_call), (proxied_list, proxied_call) = out
    assert proxied_call == direct_call  # byte for byte
    for text in (proxied_list, proxied_call):
        assert b"resultType" not in text and b"ttlMs" not in text and b"cacheScope" not in text


@pytest.mark.anyio
async def test_the_proxys_own_list_cache_keeps_to_the_filled_values() -> None:
    # filled ttlMs: 0 and cacheScope: "private": each call's schema is fetched anew, for each scope
    upstream = ScriptedServer(protean_tools(), response_mode="json", era_fields=False)
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        for rid, token in enumerate(("alice", "bob", "alice")):
            result = await _raw(px + "/mcp", "tools/call", rid, "protean.whoami", authorization=f"Bearer {token}")
            assert result["result"]["resultType"] == "complete"
            assert "structuredContent" not in result["result"]  # normalized with the list fetched
    assert fetches(upstream) == 3


def test_claude_code_fills_them_itself_directly_and_finds_nothing_to_fill_through_the_proxy(tmp_path: Path) -> None:
    upstream = bare()
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        direct = run_claude_code(McpServer("demo", up + "/mcp"), "quote", {"q": "caf\u00e9"}, tmp_path / "direct")
        upstream.requests.clear()
        proxied = run_claude_code(McpServer("demo", px + "/mcp"), "quote", {"q": "caf\u00e9"}, tmp_path / "proxy")
    filling = "omits required fields although the server negotiated 2026-07-28"
    assert filling in direct.log and 'resultType="complete"' in direct.log
    assert 'ttlMs=0, cacheScope="private"' in direct.log
    assert filling not in proxied.log and 'resultType="complete"' not in proxied.log
    for view in (direct, proxied):
        assert set(view.tools) == {"quote", "note"}
        assert view.result is not None and "12.5" in view.result and "caf\u00e9" in view.result
    assert era_of_each_request(upstream) == {MODERN}  # Claude Code stayed at 2026-07-28 through the proxy


def _members(result: dict[str, Any]) -> dict[str, Raw]:
    return split_object(orjson.dumps(result))


@pytest.mark.parametrize(
    ("method", "result", "filled"),
    [
        ("resources/read", {"contents": []}, ("resultType", "ttlMs", "cacheScope")),
        ("resources/read", {"resultType": "input_required", "requestState": "s"}, ()),  # no cache hints
        ("prompts/list", {"prompts": [], "resultType": "complete", "ttlMs": 9, "cacheScope": None}, ("cacheScope",)),
        ("prompts/get", {"messages": []}, ("resultType",)),  # not cacheable
        ("tools/list", {"tools": [], "resultType": "complete", "ttlMs": 5, "cacheScope": "public"}, ()),
    ],
)
def test_which_members_each_method_gets(method: str, result: dict[str, Any], filled: tuple[str, ...]) -> None:
    members = _members(result)
    done = era_fields.RULE.on_response
    assert done is not None
    out = done(Response({"result": Raw(orjson.dumps(result))}, members), ResponseContext(method, None, MODERN))
    if not filled:
        assert out is None
        return
    assert out is not None
    response, rewrite = out
    assert rewrite.pointers == tuple(f"/result/{name}" for name in filled)
    assert response.result is not None
    new = {name: orjson.loads(bytes(text)) for name, text in response.result.items()}
    absent_means = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    assert new == {**result, **{name: absent_means[name] for name in filled}}
    # never in a legacy era, nor for a response the proxy cannot match to a request
    for era in (None, "2025-11-25", "2025-06-18"):
        assert done(Response({}, members), ResponseContext(method, None, era)) is None
    assert done(Response({}, members), ResponseContext(None, None, MODERN)) is None
