"""The legacy eras on the wire: 2025-03-26 batches, 2025-06-18/2025-11-25 sessions (headers, GET,
DELETE, 404), resumption on a later GET with ``Last-Event-ID``, and ``list_changed``."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Awaitable, Callable

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer.demo.upstream import FORBIDDEN, ScriptedServer, protean_server, protean_tools
from mcp_normalizer.types import Receive, Scope, Send

from .support import (
    HEADERS,
    PROBLEM_KEY,
    ResponseMode,
    fetches,
    initialize,
    listed_session,
    protean_rules,
    proxy_for,
    read_body,
    resuming_upstream,
    rpc,
    serve,
)

pytestmark = pytest.mark.wire

ASGI = Callable[[Scope, Receive, Send], Awaitable[None]]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_batch_members_are_normalized_independently_in_order(mode: ResponseMode) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "protean.scope_list"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "p", "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "protean.whoami"}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "protean.list_runtimes"}},
    ]
    with serve(protean_server(mode)) as up, proxy_for(up + "/mcp", protean_rules()) as px:
        answers = []
        for url in (up + "/mcp", px + "/mcp"):
            async with httpx.AsyncClient(timeout=30, headers=HEADERS) as http:
                response = await http.post(url, content=orjson.dumps(batch))
            text = response.text
            data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            answers.append(orjson.loads(data[-1] if mode == "sse" else text))
    direct, proxied = answers
    assert [m["id"] for m in proxied] == [m["id"] for m in direct] == [1, 2, "p", 3, 4]
    assert proxied[2] == direct[2]  # ping: untouched
    assert proxied[3] == direct[3] or "structuredContent" not in proxied[3]["result"]
    assert "structuredContent" in direct[3]["result"] and "structuredContent" not in proxied[3]["result"]
    assert proxied[1]["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN and "structuredContent" in direct[1]["result"]
    assert proxied[4] == direct[4]  # conforms to the advertised (nullable) schema: untouched
    listed = {t["name"]: t for t in proxied[0]["result"]["tools"]}
    items = listed["protean.list_runtimes"]["outputSchema"]["properties"]["runtimes"]["items"]
    assert items["properties"]["scope"]["type"] == ["string", "null"]


@pytest.mark.anyio
async def test_session_id_passes_exactly_once_each_way() -> None:
    seen: list[list[bytes]] = []

    async def upstream(scope: Scope, receive: Receive, send: Send) -> None:
        await read_body(receive)
        seen.append([v for k, v in scope["headers"] if k == b"mcp-session-id"])
        headers = [(b"content-type", b"application/json"), (b"mcp-session-id", b"abc")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"jsonrpc":"2.0","id":1,"result":{}}'})

    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            for body in (
                b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
            ):
                response = await http.post(px + "/mcp", content=body, headers={"mcp-session-id": "abc"})
                assert response.headers.get_list("mcp-session-id") == ["abc"]
    assert seen == [[b"abc"], [b"abc"]]


def held_get_stream() -> tuple[ASGI, threading.Event]:
    """An upstream whose GET stream sends one notification, waits for ``release``, sends another."""
    release = threading.Event()
    server = ScriptedServer(protean_tools())

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            note = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message",'
            note += b'"params":{"level":"info","data":"%d"}}\n\n'
            await send({"type": "http.response.body", "body": note % 1, "more_body": True})
            await anyio.to_thread.run_sync(release.wait, 20)
            await send({"type": "http.response.body", "body": note % 2, "more_body": False})
            return
        if scope["type"] == "http" and scope["method"] == "DELETE":
            await send({"type": "http.response.start", "status": 204, "headers": [(b"x-deleted", b"yes")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await server(scope, receive, send)

    return app, release


@pytest.mark.anyio
@pytest.mark.parametrize("known_session", [False, True])
async def test_get_stream_and_delete_pass_through_live(known_session: bool) -> None:
    app, release = held_get_stream()
    with serve(app) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            if known_session:  # the proxy then watches the GET stream for resumed responses
                await rpc(http, url, "tools/list", {}, 1, **session)
            events = []
            async with http.stream("GET", url, headers={**session, "accept": "text/event-stream"}) as stream:
                assert stream.status_code == 200
                async for chunk in stream.aiter_raw():
                    events.append(chunk)
                    release.set()  # only now may the upstream send the second notification
            deleted = await http.delete(url, headers=session)
    joined = b"".join(events)
    assert joined.count(b"notifications/message") == 2 and b'"data":"1"' in events[0]
    assert deleted.status_code == 204 and deleted.headers["x-deleted"] == "yes"


@pytest.mark.anyio
async def test_an_expired_session_reaches_the_client_as_404_and_is_forgotten() -> None:
    upstream = ScriptedServer(protean_tools(), response_mode="json")
    expired = threading.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and expired.is_set():
            await read_body(receive)
            await send(
                {"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"application/json")]}
            )
            await send(
                {
                    "type": "http.response.body",
                    "body": b'{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}',
                }
            )
            return
        await upstream(scope, receive, send)

    with serve(app) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await listed_session(http, url)
            assert fetches(upstream) == 0  # known from the client's own tools/list
            expired.set()
            body = orjson.dumps(
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "protean.whoami"}}
            )
            gone = await http.post(url, content=body, headers={**HEADERS, **session})
            assert gone.status_code == 404 and gone.json()["error"]["message"] == "Session not found"
            expired.clear()  # (the same id is valid again only to show what the proxy forgot)
            again = await rpc(http, url, "tools/call", {"name": "protean.whoami"}, 4, **session)
    assert "structuredContent" not in again["result"]
    assert fetches(upstream) == 1  # the proxy had forgotten the session's tools and fetched them


@pytest.mark.anyio
async def test_a_response_resumed_on_a_later_get_is_still_normalized() -> None:
    app, gets = resuming_upstream()
    with serve(app) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "protean.scope_list"}}
            primed = await http.post(url, content=orjson.dumps(call), headers={**HEADERS, **session})
            assert primed.text == "id: r-0\ndata: \nretry: 10\n\n"  # the priming event, untouched
            resumed = await http.get(url, headers={**session, "accept": "text/event-stream", "last-event-id": "r-0"})
    assert gets[0]["last-event-id"] == "r-0"
    data = [line[5:].strip() for line in resumed.text.splitlines() if line.startswith("data:")]
    message = orjson.loads(data[0])
    assert message["id"] == 7 and message["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN
    assert resumed.text.startswith("id: r-1\nevent: message\ndata: ")


@pytest.mark.anyio
async def test_beyond_the_pending_bound_a_resumed_response_passes_unnormalized() -> None:
    app, _ = resuming_upstream()
    config = dataclasses.replace(protean_rules(), max_pending=1)
    with serve(app) as up, proxy_for(up + "/mcp", config) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30, headers=HEADERS) as http:
            session = await initialize(http, url)
            for rid in (1, 2):  # the second call pushes the first out of the bounded map
                call = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "protean.scope_list"}}
                await http.post(url, content=orjson.dumps(call), headers=session)
            resumed = await http.get(url, headers={**session, "accept": "text/event-stream", "last-event-id": "r-0"})
    messages = [orjson.loads(line[5:]) for line in resumed.text.splitlines() if line.startswith("data:")]
    assert [m["id"] for m in messages] == [1, 2]
    assert messages[0]["result"]["structuredContent"] == FORBIDDEN  # dropped at the bound: as sent
    assert messages[1]["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN


@pytest.mark.anyio
async def test_list_changed_on_the_get_stream_makes_the_proxy_relearn_the_tools() -> None:
    upstream = ScriptedServer(protean_tools(), response_mode="json")
    changed = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            await send({"type": "http.response.body", "body": changed})
            return
        await upstream(scope, receive, send)

    with serve(app) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await listed_session(http, url)
            stream = await http.get(url, headers={**session, "accept": "text/event-stream"})
            assert stream.content == changed  # forwarded untouched
            await rpc(http, url, "tools/call", {"name": "protean.whoami"}, 3, **session)
    assert fetches(upstream) == 1  # relearned once, after the notification
