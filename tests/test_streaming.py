"""Streaming on the wire: nothing is held back, untouched SSE events are byte-identical, JSON bodies
get a correct ``content-length``, and an upstream that dies mid-stream loses nothing already sent."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer.demo.clients import run_node
from mcp_normalizer.demo.upstream import ScriptedServer, ToolCall, ToolSpec
from mcp_normalizer.types import Receive, Scope, Send
from mcp_normalizer.wire.jsoncodec import loads
from mcp_normalizer.wire.sse import SSESplitter, parse_event

from .support import capture_rewrites, proxy_for, read_body, serve

pytestmark = pytest.mark.wire

PROBLEM = {"type": "https://example.test/problems/slow", "title": "Too slow", "status": 504, "detail": "it took long"}
SLOW_TOOL = {
    "name": "slow_job",
    "inputSchema": {"type": "object", "properties": {}},
    "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def held_upstream() -> tuple[ScriptedServer, threading.Event, Callable[[Scope, Receive, Send], Awaitable[None]]]:
    """An upstream whose ``slow_job`` sends one progress notification, then holds its result until
    someone POSTs ``/release`` (the client, once it has received the progress notification)."""
    released = threading.Event()

    async def slow(call: ToolCall) -> dict[str, Any]:
        await call.progress(1, 2, "started")
        got = await anyio.to_thread.run_sync(released.wait, 20)
        released.clear()
        text = "released after progress" if got else "progress was held back until the result"
        return {"content": [{"type": "text", "text": text}], "structuredContent": PROBLEM, "isError": True}

    server = ScriptedServer([ToolSpec(SLOW_TOOL, slow)])

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/release":
            released.set()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await server(scope, receive, send)

    return server, released, app


@pytest.mark.anyio
async def test_progress_reaches_the_client_before_the_result_exists() -> None:
    # The upstream holds the result until the client has seen the progress notification: a proxy
    # that buffered the stream would make both wait (the tool then reports it was held back).
    _, _, app = held_upstream()
    with serve(app) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        url = px + "/mcp"
        python = await _python_with_release(url, up)
        call = {"op": "callTool", "name": "slow_job", "progress": True, "releaseUrl": up + "/release"}
        node = await run_node("v1", [{"url": url, "steps": [{"op": "listTools"}, call]}])
    for record in (python, node[0]):
        result = record["steps"][1]
        assert result["ok"], record
        assert [block["text"] for block in result["value"]["content"]] == ["released after progress"]
        assert record["progress"] and record["progress"][0]["progress"] == 1
        assert result["value"]["_meta"]["org.htcom.protean/problem"] == PROBLEM  # the stream was rewritten
    assert len(log.rewrites(rule="error_problem")) == 2


async def _python_with_release(url: str, upstream: str) -> dict[str, Any]:
    """Run the Python client; its progress callback POSTs the upstream's ``/release``."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        async with httpx.AsyncClient() as http:
            await http.post(upstream + "/release")

    with anyio.fail_after(30):
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            result = await session.call_tool("slow_job", {}, progress_callback=on_progress)
    value = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {"steps": [{"ok": True}, {"ok": True, "value": value}], "progress": [{"progress": p} for p in seen]}


def raw_upstream(blocks: list[bytes], *, die: bool = False) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """A byte-level upstream: ``tools/list`` lists :data:`SLOW_TOOL`; ``tools/call`` answers with
    ``blocks`` (``{id}`` replaced by the request id), each in its own body message, then either ends
    the stream or (``die``) breaks the connection mid-event."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = orjson.loads(await read_body(receive))
        if request["method"] == "tools/list":
            reply = orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": [SLOW_TOOL]}})
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": reply})
            return
        rid = orjson.dumps(request["id"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for block in blocks:
            await send({"type": "http.response.body", "body": block.replace(b"{id}", rid), "more_body": True})
        if die:
            raise RuntimeError("upstream crashed mid-stream")
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "slow_job", "arguments": {}}}
RESPONSE = b'{"jsonrpc":"2.0","id":{id},"result":{"content":[{"type":"text","text":"slow"}],"structuredContent":' + (
    orjson.dumps(PROBLEM) + b',"isError":true}}'
)
STREAM = [
    b": upstream says hello\r\n\r\n",
    b"id: prime-1\r\ndata: \r\nretry: 1500\r\n\r\n",
    b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message",'
    b'"params":{"level":"info","data":"a\\u2028b"}}\n\n',
    b"event: message\r\nid: ev-2\r\ndata: " + RESPONSE[:40],  # the response arrives in two pieces
    RESPONSE[40:] + b"\r\n\r\n",
    b": trailing comment\n\n",
]


async def post_stream(url: str) -> tuple[httpx.Response, bytes]:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(url, content=orjson.dumps(CALL), headers=HEADERS)
        return response, response.content


@pytest.mark.anyio
async def test_untouched_sse_events_pass_byte_identical_and_the_response_keeps_its_lines() -> None:
    with serve(raw_upstream(STREAM)) as up, proxy_for(up + "/mcp") as px:
        _, direct = await post_stream(up + "/mcp")
        response, proxied = await post_stream(px + "/mcp")
    assert response.headers["content-type"] == "text/event-stream"
    assert "content-length" not in response.headers
    split_direct, split_proxied = SSESplitter(), SSESplitter()
    before = split_direct.feed(direct) + [split_direct.flush()]
    after = split_proxied.feed(proxied) + [split_proxied.flush()]
    assert len(before) == len(after)
    for original, got in zip(before, after, strict=True):
        if b'"result"' not in original:
            assert got == original  # comments, priming event, retry, LF and CRLF untouched
            continue
        # The rewritten response keeps its event and id lines and its CRLF line ends.
        assert got.startswith(b"event: message\r\nid: ev-2\r\ndata: ") and got.endswith(b"\r\n\r\n")
        message = loads(parse_event(got).data or b"")
        assert message["id"] == 7
        assert message["result"]["_meta"]["org.htcom.protean/problem"] == PROBLEM
        assert "structuredContent" not in message["result"]


@pytest.mark.anyio
async def test_json_responses_get_a_recomputed_content_length() -> None:
    result = {"content": [{"type": "text", "text": "x"}], "structuredContent": PROBLEM, "isError": True}
    upstream = ScriptedServer([ToolSpec(SLOW_TOOL, lambda call: _value(result))], response_mode="json")
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        response, body = await post_stream(px + "/mcp")
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(body)
    message = orjson.loads(body)
    assert message["result"]["_meta"]["org.htcom.protean/problem"] == PROBLEM


async def _value(value: dict[str, Any]) -> dict[str, Any]:
    return value


@pytest.mark.anyio
async def test_an_upstream_that_dies_mid_stream_loses_nothing_already_sent() -> None:
    dying = STREAM[:4]  # the response event is cut in the middle of its data line
    with serve(raw_upstream(dying, die=True)) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=30) as http:
            received = b""
            async with http.stream("POST", px + "/mcp", content=orjson.dumps(CALL), headers=HEADERS) as response:
                try:
                    async for chunk in response.aiter_raw():
                        received += chunk
                except httpx.HTTPError:
                    pass  # the proxy may end the stream early, as the upstream did
    expected = b"".join(STREAM[:3])
    assert received.startswith(expected)  # every complete event, byte-identical, in order
    tail = received[len(expected) :]
    assert tail in (b"", dying[3].replace(b"{id}", b"7"))  # the cut event: as sent, never completed


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_numbers_survive_a_rewrite_exactly(mode: str) -> None:
    big = b'{"id":18446744073709551616,"ratio":0.10000000000000000001,"n":-9223372036854775809,"f":12345678.123456789,'
    big += b'"tiny":1.5e-400,"z":-0,"nz":-0.0,"tenth":1.10,"e":1E2}'
    # The problem carries numbers a plain decode/encode would change; the rewrite must keep every one as written.
    result = b'{"content":[],"isError":true,"structuredContent":{"title":"t","detail":"d","extra":' + big + b"}}"

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        request = orjson.loads((await receive())["body"])
        if request["method"] == "tools/list":
            body = orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": [SLOW_TOOL]}})
        else:
            body = b'{"jsonrpc":"2.0","id":' + orjson.dumps(request["id"]) + b',"result":' + result + b"}"
        if mode == "sse":
            body = b"event: message\ndata: " + body + b"\n\n"
        kind = b"text/event-stream" if mode == "sse" else b"application/json"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
        await send({"type": "http.response.body", "body": body})

    with serve(app) as up, proxy_for(up + "/mcp") as px:
        _, body = await post_stream(px + "/mcp")
    assert b'"org.htcom.protean/problem"' in body
    assert big in body


@pytest.mark.anyio
async def test_a_json_body_in_another_charset_passes_through_untouched() -> None:
    message = {"jsonrpc": "2.0", "id": 7, "result": {"content": [], "structuredContent": PROBLEM, "isError": True}}
    encoded = orjson.dumps(message).decode().encode("utf-16")

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        request = orjson.loads(await read_body(receive))
        if request["method"] == "tools/list":
            body, kind = (
                orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": [SLOW_TOOL]}}),
                b"application/json",
            )
        else:
            body, kind = encoded, b"application/json; charset=utf-16"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
        await send({"type": "http.response.body", "body": body})

    with serve(app) as up, proxy_for(up + "/mcp") as px:
        _, body = await post_stream(px + "/mcp")
    assert body == encoded
