"""Time limits at every point of a response (issue 22, major 2), on the wire: a hostile upstream
that answers its head and then nothing, one that stops after a first event, and a client that
never reads what it asked for. Each limit is set small; what is asserted is what the client and
the upstream see (an error, a broken stream, a closed connection), never how long it took.
"""

from __future__ import annotations

import dataclasses
import re
import socket
import socketserver
import threading
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.types import Receive, Scope, Send

from .support import (
    HEADERS,
    RawUpstream,
    capture_rewrites,
    initialize,
    proxy_for,
    read_body,
    read_request,
    replay_body,
    serve,
    serving,
)

pytestmark = pytest.mark.wire

CALL = b'{"jsonrpc":"2.0","id":"caf\\u00e9-12.50","method":"tools/call","params":{"name":"protean.deploy"}}'


def _limits(**limits: Any) -> NormalizerConfig:
    return dataclasses.replace(NormalizerConfig.shipped(), proxy=dataclasses.replace(ProxyConfig(), **limits))


class StallingUpstream(RawUpstream):
    """A raw upstream that answers each request with a head (``content_type``, chunked), then
    ``events`` (written at once), then nothing, and notes when the proxy closes the connection."""

    def __init__(self, content_type: bytes, events: bytes = b"") -> None:
        self.content_type = content_type
        self.events = events
        self.closed = threading.Event()
        super().__init__(_StallingHandler)


class _StallingHandler(socketserver.StreamRequestHandler):
    server: StallingUpstream

    def handle(self) -> None:
        if read_request(self.rfile) is None:
            return
        head = b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n\r\n" % self.server.content_type
        events = self.server.events
        self.wfile.write(head + (b"%x\r\n%s\r\n" % (len(events), events) if events else b""))
        self.wfile.flush()
        self.connection.settimeout(60)
        try:
            while self.connection.recv(4096):  # nothing more is written; the proxy must hang up
                pass
        except OSError:
            pass
        self.server.closed.set()


@pytest.mark.anyio
async def test_a_json_head_then_silence_is_a_504_with_the_requests_id() -> None:
    """The head came, the body never does: before the fix the deadline was the loop's clock plus
    the limit (a delay of minutes), and the client waited past its own timeout."""
    with serving(StallingUpstream(b"application/json")) as up, proxy_for(up.url, _limits(idle_timeout=0.5)) as px:
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(px + "/mcp", content=CALL, headers=HEADERS)
        assert await anyio.to_thread.run_sync(up.closed.wait, 30)  # the upstream connection is let go
    assert answer.status_code == 504
    body = answer.json()
    assert body["id"] == "caf\u00e9-12.50" and "silent for more than 0.5 s" in body["error"]["message"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "events",
    [b"", b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":0.5}}\n\n'],
    ids=["head-only", "after-a-first-event"],
)
async def test_an_sse_stream_that_falls_silent_is_broken_off_never_ended_as_whole(events: bytes) -> None:
    up_server = StallingUpstream(b"text/event-stream", events)
    with serving(up_server) as up, proxy_for(up.url, _limits(idle_timeout=0.5)) as px:
        received = b""
        async with httpx.AsyncClient(timeout=30) as http:
            async with http.stream("POST", px + "/mcp", content=CALL, headers=HEADERS) as response:
                assert response.status_code == 200
                with pytest.raises(httpx.RemoteProtocolError):  # the break, as the client would see it directly
                    async for chunk in response.aiter_raw():
                        received += chunk
            metrics = (await http.get(px + "/.mcp-normalizer/metrics")).text
        assert await anyio.to_thread.run_sync(up.closed.wait, 30)
    assert received == events  # what came went out as it came, and nothing after it
    # (the call's and the proxy's own tools/list for the call's tool: the upstream stalls both)
    assert re.search(r'upstream_errors_total\{kind="idle"\} [12]\.0', metrics)


class Flood:
    """An upstream whose answer is an endless SSE stream of 64 KiB events; it notes when the proxy
    stops taking them (its ``send`` fails or the proxy hangs up)."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.sent = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        if b"tools/list" in body:  # the proxy's own fetch for the call's tool: answered at once
            listed = b'{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}' % orjson.dumps(orjson.loads(body)["id"])
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": listed})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        event = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"data":"'
        event += b"\\u00e9" * 10_000 + b'"}}\n\n'

        async def watch() -> None:  # the proxy hanging up is the end
            while (await receive())["type"] != "http.disconnect":
                pass
            self.stopped.set()
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            with anyio.move_on_after(120):
                while True:
                    await send({"type": "http.response.body", "body": event, "more_body": True})
                    self.sent += 1
                    await anyio.lowlevel.checkpoint()  # (uvicorn's send returns at once once the peer is gone)


class ModernFlood(Flood):
    """:class:`Flood` as a server that speaks only 2026-07-28: it answers ``server/discover``, and
    a ``tools/call`` with the endless stream."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        if b"server/discover" in body:
            result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete"}
            answer = orjson.dumps({"jsonrpc": "2.0", "id": orjson.loads(body)["id"], "result": result})
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": answer})
            return
        await super().__call__(scope, replay_body(body, receive), send)


@pytest.mark.anyio
async def test_a_client_that_never_reads_a_bridged_stream_loses_its_connection_and_frees_the_upstream() -> None:
    """The era bridge writes a bridged session's stream itself: a legacy client that stops reading
    it is given ``send_timeout`` per message; then the stream is broken off (the upstream request
    with it) and the server closes the connection, as for a forwarded stream."""
    flood = ModernFlood()
    limits = _limits(send_timeout=0.5, idle_timeout=0, upstream_era="2026-07-28")
    with serve(flood) as up, proxy_for(up + "/mcp", limits) as px, capture_rewrites("mcp_normalizer") as log:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, px + "/mcp")
        port = httpx.URL(px).port or 80
        sock = socket.create_connection(("127.0.0.1", port))
        head = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        head += b"Mcp-Session-Id: %s\r\n" % session["mcp-session-id"].encode()
        head += b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(CALL)
        sock.sendall(head + CALL)  # and then never a read
        try:
            assert await anyio.to_thread.run_sync(flood.stopped.wait, 60)  # the upstream is let go
            with anyio.fail_after(60):
                while not any("broken off" in r.getMessage() for r in log.records):
                    await anyio.sleep(0.1)
            sock.settimeout(30)
            drained, closed = b"", False
            try:
                while chunk := sock.recv(1 << 20):  # what the kernel had taken, then the end
                    drained += chunk
                closed = True
            except ConnectionResetError:
                closed = True
        finally:
            sock.close()
    assert closed and drained.startswith(b"HTTP/1.1 200 ")
    assert not drained.endswith(b"0\r\n\r\n")  # cut, never ended as if whole
    assert flood.sent > 10  # (a stream that was flowing when the client stopped reading it)


@pytest.mark.anyio
async def test_a_client_that_never_reads_loses_its_connection_and_frees_the_upstream() -> None:
    """The forwarder gives up on the client after ``send_timeout``, lets the upstream go, and the
    server aborts the connection whose buffered bytes the client still does not take."""
    flood = Flood()
    limits = _limits(send_timeout=0.5, idle_timeout=0)
    with serve(flood) as up, proxy_for(up + "/mcp", limits) as px, capture_rewrites("mcp_normalizer") as log:
        port = httpx.URL(px).port or 80
        sock = socket.create_connection(("127.0.0.1", port))
        head = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        head += b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(CALL)
        sock.sendall(head + CALL)  # and then never a read
        try:
            assert await anyio.to_thread.run_sync(flood.stopped.wait, 60)  # the upstream is let go
            with anyio.fail_after(60):
                while not any("took no bytes" in r.getMessage() for r in log.records):
                    await anyio.sleep(0.1)  # (until the server aborts the connection)
            async with httpx.AsyncClient(timeout=30) as http:
                metrics = (await http.get(px + "/.mcp-normalizer/metrics")).text
            sock.settimeout(30)
            drained, reset = b"", False
            try:
                while chunk := sock.recv(1 << 20):  # what the kernel had taken, then the abort
                    drained += chunk
            except ConnectionResetError:
                reset = True
        finally:
            sock.close()
    assert 'mcp_normalizer_client_errors_total{kind="send_timeout"} 1.0' in metrics
    assert reset or not drained.endswith(b"0\r\n\r\n")  # cut, never ended as if whole
    assert drained.startswith(b"HTTP/1.1 200 ")
