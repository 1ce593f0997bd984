"""The listener's own HTTP/1.1 protocol (``mcp_normalizer.hop.protocol``), on the wire with raw
sockets and tiny inline ASGI apps: what uvicorn's protocol did for the proxy and this one must do
as well (pipelining in order, ``Expect: 100-continue``, HTTP/1.0, bad requests, an app that
fails, request bodies that stream, the hang-up hook, a slow head after keep-alive). The guards'
refusals are in ``test_hardening.py`` and ``test_refusals.py``.
"""

from __future__ import annotations

import dataclasses
import re
import socket
from typing import Any

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.types import HANG_UP, Receive, Scope, Send

from .support import raw_request, read_body, serve

pytestmark = pytest.mark.wire

#: A body as field servers write them: decimals, a huge integer, unicode, escapes, null.
BODY = b'{"price":12.50,"rate":2.5E-3,"ledger":123456789012345678901234,"owner":"Zo\xc3\xab \\u00e9","n":null}'


def _proxy(**limits: Any) -> ProxyConfig:
    return dataclasses.replace(ProxyConfig(), **limits)


class Echo:
    """Answers every request with its method, path, query and body (as JSON), with a length."""

    def __init__(self) -> None:
        self.scopes: list[Scope] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.scopes.append(scope)
        body = await read_body(receive)
        answer = orjson.dumps(
            {
                "method": scope["method"],
                "path": scope["path"],
                "query": scope["query_string"].decode(),
                "body": body.decode(),
            }
        )
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


def _responses(data: bytes) -> list[tuple[bytes, bytes]]:
    """The (status line, body) of each content-length response in ``data``, in order."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        fields = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:])
        length = int(fields.get(b"content-length", b"0"))
        out.append((head.split(b"\r\n")[0], rest[:length]))
        data = rest[length:]
    return out


@pytest.mark.anyio
async def test_pipelined_requests_are_answered_in_order() -> None:
    echo = Echo()
    requests = b"".join(
        b"POST /p/%d?i=%d HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s" % (i, i, len(BODY), BODY)
        for i in range(5)
    )
    with serve(echo, proxy=_proxy(keep_alive_timeout=0.3)) as url:
        received = await raw_request(url, requests)
    answers = _responses(received)
    assert [status for status, _ in answers] == [b"HTTP/1.1 200 OK"] * 5
    assert [orjson.loads(body)["path"] for _, body in answers] == [f"/p/{i}" for i in range(5)]
    assert all(orjson.loads(body)["body"] == BODY.decode() for _, body in answers)


@pytest.mark.anyio
async def test_expect_100_continue_is_answered_when_the_app_reads_the_body() -> None:
    """A client that waits for 100 Continue before it sends its body (curl does, for large ones)."""
    with serve(Echo(), proxy=_proxy()) as url:
        port = httpx.URL(url).port or 80
        stream = await anyio.connect_tcp("127.0.0.1", port)
        async with stream:
            head = b"POST /x HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n"
            await stream.send(head % len(BODY))
            with anyio.fail_after(10):
                interim = await stream.receive()
            assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
            await stream.send(BODY)
            received = b""
            with anyio.fail_after(10):
                while b'"body"' not in received or not received.endswith(b"}"):
                    received += await stream.receive()
    assert received.startswith(b"HTTP/1.1 200 OK")
    assert orjson.loads(_responses(received)[0][1])["body"] == BODY.decode()


@pytest.mark.anyio
async def test_an_http_1_0_request_is_answered_and_the_connection_closed() -> None:
    with serve(Echo(), proxy=_proxy()) as url:
        received = await raw_request(url, b"GET /old HTTP/1.0\r\n\r\n")
    assert received.startswith(b"HTTP/1.1 200 OK")
    assert b"\r\nconnection: close" in received.partition(b"\r\n\r\n")[0]


@pytest.mark.anyio
async def test_a_request_that_is_not_http_gets_400_and_a_close() -> None:
    echo = Echo()
    with serve(echo, proxy=_proxy()) as url:
        received = await raw_request(url, b"\x16\x03\x01\x02\x00 not http at all\r\n\r\n")
    assert received.startswith(b"HTTP/1.1 400 Bad Request")
    assert received.endswith(b"Invalid HTTP request received.")
    assert echo.scopes == []


@pytest.mark.anyio
async def test_an_app_that_fails_before_its_head_gives_500_and_after_it_a_cut_response() -> None:
    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/late":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"10")]})
            await send({"type": "http.response.body", "body": b"12345", "more_body": True})
        raise RuntimeError("the app failed")

    with serve(failing, proxy=_proxy()) as url:
        early = await raw_request(url, b"GET /early HTTP/1.1\r\nHost: localhost\r\n\r\n")
        late = await raw_request(url, b"GET /late HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert early.startswith(b"HTTP/1.1 500 Internal Server Error") and early.endswith(b"Internal Server Error")
    assert late.startswith(b"HTTP/1.1 200 OK") and late.endswith(b"\r\n\r\n12345")  # cut, never completed


@pytest.mark.anyio
async def test_a_streamed_request_body_arrives_whole_and_in_order() -> None:
    """A chunked body of 1 MiB in many pieces: more than the protocol buffers before it pauses
    reading, so it is read, paused and resumed; every byte arrives once, in order."""
    pieces = [(b"%07d," % i) * 1000 for i in range(128)]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    head = b"POST /big HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
    with serve(Echo(), proxy=_proxy()) as url:
        received = await raw_request(url, head + chunked)
    status, body = _responses(received)[0]
    assert status == b"HTTP/1.1 200 OK"
    assert orjson.loads(body)["body"].encode() == b"".join(pieces)


@pytest.mark.anyio
async def test_the_hang_up_hook_is_called_once_when_the_client_leaves_mid_response() -> None:
    """``scope[HANG_UP]``: the app learns of the hang-up without awaiting ``receive``."""
    hung_up = anyio.Event()
    calls: list[str] = []

    async def streaming(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return

        def gone() -> None:
            calls.append("gone")
            hung_up.set()

        scope[HANG_UP](gone)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        with anyio.fail_after(30):
            await hung_up.wait()

    with serve(streaming, proxy=_proxy()) as url:
        sock = socket.create_connection(("127.0.0.1", httpx.URL(url).port or 80))
        sock.sendall(b"GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")
        sock.close()
        with anyio.fail_after(30):
            while not calls:
                await anyio.sleep(0.05)
    assert calls == ["gone"]


@pytest.mark.anyio
async def test_a_head_begun_after_keep_alive_gets_the_head_timeout_not_a_silent_close() -> None:
    """Keep-alive (0.3 s here) closes an idle connection; a head that began arriving before then
    is given the whole head timeout and answered 408 past it, never cut without an answer."""
    with serve(Echo(), proxy=_proxy(keep_alive_timeout=0.3, head_timeout=1.0)) as url:
        stream = await anyio.connect_tcp("127.0.0.1", httpx.URL(url).port or 80)
        async with stream:
            await stream.send(b"GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n")
            first = b""
            with anyio.fail_after(10):
                while b'"body":""}' not in first:
                    first += await stream.receive()
            await stream.send(b"GET /b HTTP/1.1\r\nHost: loc")  # and never the rest
            rest = b""
            with anyio.fail_after(30):
                try:
                    while True:
                        rest += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    pass
    assert rest.startswith(b"HTTP/1.1 408 ")


@pytest.mark.anyio
async def test_the_scope_is_what_asgi_says() -> None:
    echo = Echo()
    with serve(echo, proxy=_proxy()) as url:
        head = b"POST /caf%C3%A9/x?q=%C3%A9&n=12.50 HTTP/1.1\r\nHost: localhost\r\nX-Trace: a \t\r\n"
        head += b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(BODY)
        received = await raw_request(url, head + BODY)
    assert received.startswith(b"HTTP/1.1 200 OK")
    scope = echo.scopes[0]
    assert scope["type"] == "http" and scope["asgi"] == {"version": "3.0", "spec_version": "2.3"}
    assert scope["http_version"] == "1.1" and scope["method"] == "POST" and scope["scheme"] == "http"
    assert scope["path"] == "/café/x" and scope["raw_path"] == b"/caf%C3%A9/x"
    assert scope["query_string"] == b"q=%C3%A9&n=12.50"
    assert scope["client"][0] == "127.0.0.1" and scope["server"][0] == "127.0.0.1"
    assert (b"x-trace", b"a") in scope["headers"]  # trailing whitespace is not the value's (RFC 9110 5.5)
    assert callable(scope[HANG_UP])


@pytest.mark.anyio
async def test_a_hang_up_is_told_to_the_request_it_ends_never_to_one_answered_before() -> None:
    """Pipelined ``/a`` (answered whole, its hook left set) then ``/b`` (streaming): the client
    leaving ends ``/b`` only; ``/a``'s callback is never called."""
    hung_up = anyio.Event()
    calls: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        name = scope["path"].strip("/")

        def gone() -> None:
            calls.append(name)
            hung_up.set()

        scope[HANG_UP](gone)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        if name == "a":
            await send({"type": "http.response.body", "body": b"whole"})
            return
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        with anyio.fail_after(30):
            await hung_up.wait()

    with serve(app, proxy=_proxy()) as url:
        sock = socket.create_connection(("127.0.0.1", httpx.URL(url).port or 80))
        sock.sendall(b"GET /a HTTP/1.1\r\nHost: localhost\r\n\r\nGET /b HTTP/1.1\r\nHost: localhost\r\n\r\n")
        sock.settimeout(10)
        received = b""
        while b"5\r\nfirst\r\n" not in received:
            received += sock.recv(65536)
        sock.close()
        with anyio.fail_after(30):
            while not calls:
                await anyio.sleep(0.05)
    assert calls == ["b"]


class Slow(Echo):
    """:class:`Echo`, answering ``/slow`` only after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/slow":
            await anyio.sleep(self.delay)
        await super().__call__(scope, receive, send)


def _post(path: bytes, body: bytes = BODY) -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s" % (path, len(body), body)


@pytest.mark.anyio
async def test_a_pipelined_body_that_stalls_is_refused_only_after_the_answer_before_it() -> None:
    """``/slow`` takes three body timeouts to answer; ``/b`` behind it has its head and half its
    body. The client gets ``/slow``'s 200 whole, then ``/b``'s 408: a pipelined body's clock
    starts when its turn comes (it is not read before), and no refusal cuts an answer in progress."""
    echo = Slow(delay=1.5)
    request_b = _post(b"/b")
    with serve(echo, proxy=_proxy(body_timeout=0.5)) as url:
        received = await raw_request(url, _post(b"/slow") + request_b[:-10])
    answers = _responses(received)
    assert [status for status, _ in answers] == [b"HTTP/1.1 200 OK", b"HTTP/1.1 408 Request Timeout"]
    assert orjson.loads(answers[0][1])["body"] == BODY.decode()
    assert [scope["path"] for scope in echo.scopes] == ["/slow", "/b"]  # /b's app saw the client leave


@pytest.mark.anyio
async def test_a_pipelined_head_too_large_is_refused_only_after_the_answer_before_it() -> None:
    echo = Slow(delay=0.5)
    oversized = b"POST /b HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 5000  # and never the end
    with serve(echo, proxy=_proxy(max_header_bytes=4096)) as url:
        received = await raw_request(url, _post(b"/slow") + oversized)
    answers = _responses(received)
    assert [status for status, _ in answers] == [b"HTTP/1.1 200 OK", b"HTTP/1.1 431 Request Header Fields Too Large"]
    assert orjson.loads(answers[0][1])["path"] == "/slow"
    assert [scope["path"] for scope in echo.scopes] == ["/slow"]


@pytest.mark.anyio
async def test_bad_bytes_pipelined_after_requests_get_400_after_their_answers() -> None:
    echo = Slow(delay=0.5)
    with serve(echo, proxy=_proxy()) as url:
        received = await raw_request(url, _post(b"/slow") + _post(b"/b") + b"\x16\x03\x01 not http\r\n\r\n")
    statuses = re.findall(rb"HTTP/1\.1 \d{3} [^\r]*", received)
    assert statuses == [b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK", b"HTTP/1.1 400 Bad Request"]
    assert received.endswith(b"Invalid HTTP request received.")
    assert [scope["path"] for scope in echo.scopes] == ["/slow", "/b"]


@pytest.mark.anyio
async def test_an_http_1_0_client_gets_a_body_without_length_delimited_by_the_close() -> None:
    """HTTP/1.0 has no chunked coding (RFC 9112 section 6.1): a streamed response with no
    ``Content-Length`` goes out as it is, and the close ends it."""

    async def streaming(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for part in (b"caf\xc3\xa9 ", b"12.50 ", b"1e-3"):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    with serve(streaming, proxy=_proxy()) as url:
        old = await raw_request(url, b"GET /old HTTP/1.0\r\n\r\n")
        new = await raw_request(url, b"GET /new HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    head, _, body = old.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head.lower() and b"\r\nconnection: close" in head
    assert body == b"caf\xc3\xa9 12.50 1e-3"
    assert b"\r\ntransfer-encoding: chunked" in new.partition(b"\r\n\r\n")[0]  # HTTP/1.1 keeps chunks
