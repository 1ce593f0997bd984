"""The forwarder's own HTTP/1.1 client (``mcp_normalizer.hop.upstream_http``), on the wire: what an
upstream may legally send that a small client gets wrong (interim responses, bodies delimited by
the connection's end, HEAD, TLS), flow control against a client that stops reading, and the
pool's bounds. The hostile upstreams (lies about lengths, late bytes, broken heads, silence) are in
``test_hardening.py``, ``test_tenants.py`` and ``test_timeouts.py``.
"""

from __future__ import annotations

import socket
import socketserver
import ssl
import threading
from pathlib import Path

import anyio
import httpx
import pytest
import trustme

from mcp_normalizer.hop.upstream_http import ConnectFailed, UpstreamPool

from .support import HEADERS, RawUpstream, proxy_for, raw_request, read_request, serving

pytestmark = pytest.mark.wire

#: A body as field servers write them: decimals, exponents, a huge integer, unicode, escapes, null.
BODY = (
    b'{"jsonrpc":"2.0","id":"caf\\u00e9","result":{"price":12.50,"rate":2.5E-3,'
    b'"ledger":123456789012345678901234,"owner":"Zo\xc3\xab \xf0\x9f\x9a\x80","note":null}}'
)
PING = b'{"jsonrpc":"2.0","id":"caf\\u00e9","method":"ping"}'


class Scripted(RawUpstream):
    """A raw upstream that answers every request with ``answer`` (bytes written by hand), then
    closes the connection when ``close`` is set; it counts connections and notes their ends."""

    def __init__(self, answer: bytes, *, close: bool = False) -> None:
        self.answer = answer
        self.close = close
        self.connections = 0
        self.methods: list[bytes] = []
        self.ended = threading.Event()
        self.lock = threading.Lock()
        super().__init__(_ScriptedHandler)


class _ScriptedHandler(socketserver.StreamRequestHandler):
    server: Scripted

    def handle(self) -> None:
        with self.server.lock:
            self.server.connections += 1
        try:
            while (request := read_request(self.rfile)) is not None:
                self.server.methods.append(request.raw.split(b" ", 1)[0])
                self.wfile.write(self.server.answer)
                self.wfile.flush()
                if self.server.close:
                    break
        finally:
            self.server.ended.set()


@pytest.mark.anyio
async def test_interim_responses_are_skipped_and_the_final_one_relayed() -> None:
    """RFC 9110 section 15.2: 1xx responses precede the final one; a proxy that took 103 Early Hints
    for the answer would lose the body."""
    answer = b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"
    answer += b"HTTP/1.1 100 Continue\r\n\r\n"
    answer += b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY)
    with serving(Scripted(answer)) as up, proxy_for(up.url) as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            first = await http.post(px + "/mcp", content=PING)
            second = await http.post(px + "/mcp", content=PING)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content == BODY
    assert "link" not in first.headers
    assert up.connections == 1  # kept alive across the interim responses


@pytest.mark.anyio
async def test_a_body_delimited_by_the_connections_end_is_relayed_whole() -> None:
    """An HTTP/1.0-style response (no length, no chunks) ends where the connection ends: that end is
    the body's, never a break; the connection is not reused."""
    answer = b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n" + BODY
    with serving(Scripted(answer, close=True)) as up, proxy_for(up.url) as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            answers = [await http.post(px + "/mcp", content=PING) for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200]
    assert [a.content for a in answers] == [BODY, BODY]
    assert up.connections == 2


@pytest.mark.anyio
async def test_a_head_response_has_no_body_and_its_connection_is_not_reused() -> None:
    """llhttp does not know a response answers a HEAD: its Content-Length announces a body that never
    comes. The response ends at its head, and the next request gets a new upstream connection."""
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(BODY)
    with serving(Scripted(answer)) as up, proxy_for(up.url) as px:
        request = b"HEAD /doc HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nHEAD /doc HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        received = await raw_request(px, request)
    assert received.count(b"HTTP/1.1 200 ") == 2
    assert received.count(b"content-length: %d" % len(BODY)) == 2
    assert BODY not in received
    assert up.methods == [b"HEAD", b"HEAD"] and up.connections == 2


class Endless(RawUpstream):
    """A raw upstream answering with a chunked body of ``total`` bytes in 64 KiB chunks (each chunk
    its own numbered pattern); ``written`` counts the body bytes the kernel took."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.written = 0
        super().__init__(_EndlessHandler)


def _chunk(number: int) -> bytes:
    return (b"%08d" % number) * (64 * 1024 // 8)


class _EndlessHandler(socketserver.StreamRequestHandler):
    server: Endless

    def handle(self) -> None:
        if read_request(self.rfile) is None:
            return
        self.connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n")
        try:
            for number in range(self.server.total // (64 * 1024)):
                self.connection.sendall(b"10000\r\n" + _chunk(number) + b"\r\n")
                self.server.written += 64 * 1024
            self.connection.sendall(b"0\r\n\r\n")
        except OSError:
            pass


@pytest.mark.anyio
async def test_a_client_that_stops_reading_stops_the_upstream_and_gets_every_byte_later() -> None:
    """Flow control end to end: while the client reads nothing, the proxy stops reading the upstream
    (what the upstream could write is bounded by the socket buffers, not by the body's 128 MiB);
    when the client reads again, every byte arrives, in order."""
    total = 128 * 1024 * 1024
    with serving(Endless(total)) as up, proxy_for(up.url) as px:
        port = httpx.URL(px).port or 80
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        try:
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            with anyio.fail_after(60):  # the upstream stops when every buffer on the way is full
                before = -1
                while up.written != before:
                    before = up.written
                    await anyio.sleep(0.5)
            stalled_at = up.written
            received = bytearray()
            sock.settimeout(60)
            while not received.endswith(b"\r\n0\r\n\r\n"):
                chunk = sock.recv(1 << 20)
                assert chunk, "the proxy closed the connection before the end"
                received += chunk
        finally:
            sock.close()
    assert stalled_at < 64 * 1024 * 1024  # without flow control the proxy takes all 128 MiB at once
    data = bytes(received)
    at = data.index(b"\r\n\r\n") + 4
    assert data.startswith(b"HTTP/1.1 200 ")
    body = bytearray()
    while True:  # the body, un-chunked (uvicorn re-chunks as it sends)
        size_end = data.index(b"\r\n", at)
        size = int(data[at:size_end], 16)
        if size == 0:
            break
        body += data[size_end + 2 : size_end + 2 + size]
        at = size_end + 4 + size
    assert len(body) == total
    assert all(body[n * 65536 : n * 65536 + 8] == b"%08d" % n for n in range(0, total // 65536, 997))
    assert body[-65536:] == _chunk(total // 65536 - 1)


class Holding(RawUpstream):
    """A raw upstream that answers every request after ``release`` is set, and records how many
    requests it held at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.held = 0
        self.most = 0
        self.lock = threading.Lock()
        super().__init__(_HoldingHandler)


class _HoldingHandler(socketserver.StreamRequestHandler):
    server: Holding

    def handle(self) -> None:
        while read_request(self.rfile) is not None:
            with self.server.lock:
                self.server.held += 1
                self.server.most = max(self.server.most, self.server.held)
            self.server.release.wait(30)
            with self.server.lock:
                self.server.held -= 1
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY))
            self.wfile.flush()


def _head(port: int) -> bytes:
    return b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-length: %d\r\n\r\n" % (port, len(PING))


async def _read_all(pool: UpstreamPool, tenant: int, port: int) -> bytes:
    response = await pool.send(tenant, b"POST", _head(port), PING)
    parts = []
    while chunk := await response.read():
        parts.append(chunk)
    response.release()
    return b"".join(parts)


@pytest.mark.anyio
async def test_past_max_connections_a_request_waits_and_idle_ones_of_other_tenants_make_room() -> None:
    with serving(Holding()) as up:
        port = up.server_address[1]
        pool = UpstreamPool("127.0.0.1", port, max_connections=2)
        try:
            results: list[bytes] = []

            async def call(tenant: int) -> None:
                results.append(await _read_all(pool, tenant, port))

            async with anyio.create_task_group() as tg:
                for tenant in range(5):  # five tenants, two connections: three wait
                    tg.start_soon(call, tenant)
                await anyio.sleep(0.2)
                up.release.set()
                with anyio.fail_after(30):
                    while up.held < 2:
                        await anyio.sleep(0.05)
                up.release.set()
            assert results == [BODY] * 5
            assert up.most == 2  # two connections carried the five requests, two at a time
            assert await _read_all(pool, 7, port) == BODY  # a new tenant: an idle connection closed for it
        finally:
            await pool.aclose()


@pytest.mark.anyio
async def test_an_idle_connection_is_closed_after_keepalive_timeout() -> None:
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY)
    with serving(Scripted(answer)) as up:
        pool = UpstreamPool("127.0.0.1", up.server_address[1], keepalive_timeout=0.3)
        try:
            assert await _read_all(pool, 1, up.server_address[1]) == BODY
            assert await anyio.to_thread.run_sync(up.ended.wait, 30)  # the proxy closed it, not the upstream
        finally:
            await pool.aclose()


@pytest.mark.anyio
async def test_a_closed_pool_refuses_new_requests() -> None:
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"
    with serving(Scripted(answer)) as up:
        pool = UpstreamPool("127.0.0.1", up.server_address[1])
        await pool.aclose()
        with pytest.raises(ConnectFailed, match="shutting down"):
            await pool.send(1, b"GET", b"GET / HTTP/1.1\r\nhost: x\r\n\r\n", b"")


class TLSUpstream(Scripted):
    """:class:`Scripted`, over TLS with a certificate for 127.0.0.1."""

    def __init__(self, answer: bytes, context: ssl.SSLContext) -> None:
        self.context = context
        self.refused = threading.Event()
        super().__init__(answer)

    def get_request(self) -> tuple[socket.socket, object]:
        sock, address = super().get_request()
        try:
            return self.context.wrap_socket(sock, server_side=True), address
        except OSError:
            sock.close()  # (at once: the client that refused the certificate sees the end now)
            self.refused.set()
            raise

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}/mcp"


@pytest.mark.anyio
async def test_an_https_upstream_is_verified_and_relayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The upstream's certificate is checked against the trusted CAs (``SSL_CERT_FILE`` here): a
    certificate nobody trusts is a 502 that names the failure, a trusted one relays byte for byte."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY)
    with serving(TLSUpstream(answer, server)) as up:
        with proxy_for(up.url) as px:  # the system's CAs only: the test CA is unknown
            async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
                untrusted = await http.post(px + "/mcp", content=PING)
            assert await anyio.to_thread.run_sync(up.refused.wait, 10)
        trusted_file = tmp_path / "ca.pem"
        ca.cert_pem.write_to_path(str(trusted_file))
        monkeypatch.setenv("SSL_CERT_FILE", str(trusted_file))
        with proxy_for(up.url) as px:
            async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
                trusted = await http.post(px + "/mcp", content=PING)
    assert untrusted.status_code == 502 and untrusted.json()["id"] == "caf\u00e9"
    assert "cannot connect to 127.0.0.1" in untrusted.json()["error"]["message"]
    assert trusted.status_code == 200 and trusted.content == BODY
