"""Attacks on the hop, on the wire: a hostile upstream, raw clients, hang-ups (issue 12, section 2).

Each test drives the proxy as it runs from its command (uvicorn on httptools with the connection
guards, the forwarder and its upstream client) and asserts what the client or the upstream received.
"""

from __future__ import annotations

import dataclasses
import socket
import socketserver
import threading
from typing import Any, Literal

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.hop.server import uvicorn_config
from mcp_normalizer.types import Receive, Scope, Send
from mcp_normalizer.wire.hosts import HostPolicy

from .support import (
    HEADERS,
    RawUpstream,
    capture_rewrites,
    proxy_for,
    raw_request,
    read_body,
    read_request,
    sdk_app,
    serve,
    serving,
)

pytestmark = pytest.mark.wire

Extra = Literal["content-length", "chunked", "late"]


class LyingUpstream(RawUpstream):
    """A raw HTTP/1.1 upstream that answers each request with :func:`tenant_body` of its
    ``Authorization``; to tenant ``A`` it also sends a second, complete response (the same with
    ``"leak": true``), right after the body in the same write (``content-length``: a short declared
    length; or ``chunked``: after the last chunk), or a moment later on the idle connection (``late``)."""

    def __init__(self, extra: Extra) -> None:
        self.extra = extra
        self.leaked = threading.Event()
        super().__init__(_LyingHandler)


def tenant_body(tenant: str, leak: bool = False) -> bytes:
    """A tenant's answer, as field servers write them: decimals, a big integer, unicode, nulls."""
    text = b'{"jsonrpc":"2.0","id":1,"result":{"tenant":"%s","balance":12.50,"rate":2.5E-3,' % tenant.encode()
    text += b'"ledger":123456789012345678901234,"owner":"Zo\\u00eb \xf0\x9f\x9a\x80","note":null'
    return text + (b',"leak":true}}' if leak else b"}}")


def _response(body: bytes, chunked: bool = False) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    if chunked:
        return head + b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    return head + b"content-length: %d\r\n\r\n%s" % (len(body), body)


class _LyingHandler(socketserver.StreamRequestHandler):
    server: LyingUpstream

    def handle(self) -> None:
        while (request := read_request(self.rfile)) is not None:
            tenant = request.fields.get(b"authorization", b"").decode()
            answer = _response(tenant_body(tenant), chunked=self.server.extra == "chunked")
            leak = _response(tenant_body(tenant, leak=True))
            if tenant != "A":
                self.wfile.write(answer)
            elif self.server.extra == "late":
                self.wfile.write(answer)
                self.wfile.flush()
                threading.Timer(0.05, self._late, (leak,)).start()
            else:
                self.wfile.write(answer + leak)
                self.server.leaked.set()

    def _late(self, leak: bytes) -> None:
        try:
            self.connection.sendall(leak)
        except OSError:
            pass  # the proxy closed the connection already
        self.server.leaked.set()


@pytest.mark.anyio
@pytest.mark.parametrize("extra", ["content-length", "chunked", "late"])
async def test_bytes_beyond_a_response_never_reach_another_client(extra: Extra) -> None:
    """nginx: "upstream sent more data than specified in Content-Length" closes the connection; so
    does the proxy, and tenant B never receives what the upstream wrote for tenant A."""
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    with serving(LyingUpstream(extra)) as up, proxy_for(up.url) as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            for _ in range(5):
                up.leaked.clear()
                alice = await http.post(px + "/mcp", content=ping, headers={"authorization": "A"})
                await anyio.to_thread.run_sync(up.leaked.wait, 5)
                bob = await http.post(px + "/mcp", content=ping, headers={"authorization": "B"})
                assert alice.content == tenant_body("A")  # byte for byte, as the upstream wrote it
                assert bob.content == tenant_body("B")


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.mark.anyio
async def test_a_rebound_host_or_origin_is_refused_on_a_loopback_listener() -> None:
    """A DNS-rebinding page reaches a loopback server with its own name in ``Host`` (and its origin
    in ``Origin``). The SDK's app refuses it; through the proxy on its defaults it must be refused
    too, although the proxy sends the upstream its own ``Host``."""
    with serve(sdk_app(json_response=True), lifespan="on") as up, proxy_for(up + "/mcp") as px:
        port = httpx.URL(px).port
        async with httpx.AsyncClient(timeout=10) as http:
            body = orjson.dumps(INIT)
            evil = {**HEADERS, "host": "rebind.evil.example"}
            direct = await http.post(up + "/mcp", content=body, headers=evil)
            rebound = await http.post(px + "/mcp", content=body, headers=evil)
            foreign_origin = await http.post(
                px + "/mcp", content=body, headers={**HEADERS, "origin": "http://rebind.evil.example"}
            )
            metrics = await http.get(px + "/.mcp-normalizer/metrics", headers={"host": "rebind.evil.example"})
            local = await http.post(
                px + "/mcp",
                content=body,
                headers={**HEADERS, "host": f"localhost:{port}", "origin": "http://localhost:3000"},
            )
        twice = b"GET /.mcp-normalizer/livez HTTP/1.1\r\nHost: localhost\r\nHost: rebind.evil.example\r\n"
        doubled = await raw_request(px, twice + b"Connection: close\r\n\r\n")
        two_origins = (
            b"GET /.mcp-normalizer/livez HTTP/1.1\r\nHost: localhost\r\nOrigin: http://rebind.evil.example\r\n"
        )
        origins = await raw_request(px, two_origins + b"Origin: http://localhost:3000\r\nConnection: close\r\n\r\n")
    assert doubled.startswith(b"HTTP/1.1 400 ") and b"more than one Host header" in doubled
    assert origins.startswith(b"HTTP/1.1 400 ") and b"more than one Origin header" in origins
    assert direct.status_code >= 400  # the SDK's own check
    assert rebound.status_code == 421 and rebound.json()["error"]["message"].startswith(
        "Host not allowed; the proxy's setting allowed_hosts"
    )
    assert foreign_origin.status_code == 403 and foreign_origin.json()["error"]["message"].startswith(
        "Origin not allowed; the proxy's setting allowed_origins"
    )
    assert metrics.status_code == 421  # the admin endpoints obey the same check
    assert local.status_code == 200 and local.json()["result"]["serverInfo"]["name"] == "protean-sdk"


@pytest.mark.anyio
async def test_allowed_hosts_and_origins_replace_the_loopback_defaults() -> None:
    proxy = dataclasses.replace(
        ProxyConfig(), allowed_hosts=("mcp.example.com",), allowed_origins=("https://app.example.com",)
    )
    config = dataclasses.replace(NormalizerConfig.shipped(), proxy=proxy)
    with serve(Recorder()) as up, proxy_for(up + "/mcp", config) as px:
        async with httpx.AsyncClient(timeout=10) as http:
            body = orjson.dumps(INIT)
            named = {**HEADERS, "host": "mcp.example.com", "origin": "https://app.example.com"}
            ok = await http.post(px + "/mcp", content=body, headers=named)
            loopback = await http.post(px + "/mcp", content=body, headers=HEADERS)  # Host: 127.0.0.1:port
            other_origin = await http.post(
                px + "/mcp", content=body, headers={**named, "origin": "https://evil.example.com"}
            )
    assert ok.status_code == 200
    assert loopback.status_code == 421  # the list replaces the defaults
    assert other_origin.status_code == 403


def test_the_host_policy_checks_nothing_by_default_off_loopback() -> None:
    policy = HostPolicy()
    assert policy.check("anything.example", "https://anything.example", "10.1.2.3") is None
    assert policy.check("anything.example", None, "127.0.0.1") is not None
    assert policy.check("[::1]:8765", "http://[::1]:3000", "::1") is None
    assert policy.check("localhost", None, "::ffff:127.0.0.1") is None
    assert policy.check("localhost.evil.example", None, "127.0.0.1") is not None
    assert policy.check(None, None, "127.0.0.1") is not None  # HTTP/1.0 without Host: not a loopback name
    star = HostPolicy(("*",), ("*",))
    assert star.check("rebind.evil.example", "http://rebind.evil.example", "127.0.0.1") is None


def _guarded(**limits: Any) -> NormalizerConfig:
    return dataclasses.replace(NormalizerConfig.shipped(), proxy=dataclasses.replace(ProxyConfig(), **limits))


class Recorder:
    """An upstream that records each request it gets and answers 200."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.headers: list[dict[str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.requests.append(body)
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"jsonrpc":"2.0","id":1,"result":{}}'})


@pytest.mark.anyio
async def test_a_head_or_body_that_stalls_gets_408_and_is_never_forwarded() -> None:
    recorder = Recorder()
    with serve(recorder) as up, proxy_for(up + "/mcp", _guarded(head_timeout=0.5, body_timeout=0.5)) as px:
        half_head = await raw_request(px, b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-")
        half_body = await raw_request(
            px, b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n" + b"{" * 10
        )
        silent = await raw_request(px, b"")
        async with httpx.AsyncClient(timeout=10) as http:
            fine = await http.post(px + "/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', headers=HEADERS)
    assert half_head.startswith(b"HTTP/1.1 408 ") and b"request head not received in time" in half_head
    assert half_body.startswith(b"HTTP/1.1 408 ") and b"request body not received in time" in half_body
    assert silent == b""  # a connection that never asked is closed without an answer
    assert fine.status_code == 200
    assert recorder.requests == [b'{"jsonrpc":"2.0","id":1,"method":"ping"}']  # the truncated one never went


@pytest.mark.anyio
async def test_a_head_that_keeps_growing_gets_431_before_it_ends() -> None:
    with serve(Recorder()) as up, proxy_for(up + "/mcp", _guarded(max_header_bytes=2048)) as px:
        host, port = "127.0.0.1", httpx.URL(px).port
        stream = await anyio.connect_tcp(host, port or 80)
        async with stream:
            await stream.send(b"GET /mcp HTTP/1.1\r\nHost: localhost\r\n")
            answer = b""
            with anyio.move_on_after(10):
                try:
                    for _ in range(100):  # 100 x 100 bytes, one header line at a time, never the blank line
                        await stream.send(b"x-pad: " + b"a" * 91 + b"\r\n")
                        await anyio.sleep(0)
                except (anyio.BrokenResourceError, OSError):
                    pass
                try:
                    while chunk := await stream.receive():
                        answer += chunk
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    pass
    assert answer.startswith(b"HTTP/1.1 431 ")


@pytest.mark.anyio
async def test_past_the_connection_limit_a_new_connection_gets_503_and_the_rest_are_served() -> None:
    with serve(Recorder()) as up, proxy_for(up + "/mcp", _guarded(max_connections=4)) as px:
        port = httpx.URL(px).port or 80
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        try:
            for sock in held:
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")  # half a head each
            refused = await raw_request(px, b"GET /.mcp-normalizer/livez HTTP/1.1\r\nHost: localhost\r\n\r\n")
        finally:
            for sock in held:
                sock.close()
        async with httpx.AsyncClient(timeout=10) as http:
            for _ in range(50):  # the held connections are gone once the proxy sees them close
                later = await http.get(px + "/.mcp-normalizer/livez")
                if later.status_code == 200:
                    break
                await anyio.sleep(0.05)
    assert refused.startswith(b"HTTP/1.1 503 ") and b"too many connections" in refused
    assert later.status_code == 200


class Slow:
    """An upstream whose calls take long and answer only when done (a JSON-mode server): it notes
    when it sees the client (the proxy) hang up."""

    def __init__(self) -> None:
        self.hung_up = threading.Event()
        self.started = threading.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if b"tools/list" in body:  # the proxy's own fetch for the unknown tool: answered at once
            listed = orjson.dumps({"jsonrpc": "2.0", "id": orjson.loads(body)["id"], "result": {"tools": []}})
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": listed})
            return
        self.started.set()
        with anyio.move_on_after(60):
            if (await receive())["type"] == "http.disconnect":
                self.hung_up.set()
                return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"jsonrpc":"2.0","id":1,"result":{}}'})


@pytest.mark.anyio
async def test_a_client_that_hangs_up_before_the_response_head_cancels_the_upstream_request() -> None:
    """JSON-mode servers send their head only when the result is ready; a client that leaves before
    must still cancel the call (2026-07-28: a hang-up is the cancellation). The request is counted
    as ``aborted``."""
    slow = Slow()
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"protean.deploy"}}'
    with serve(slow) as up, proxy_for(up + "/mcp") as px:
        head = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        head += b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(call)
        sock = socket.create_connection(("127.0.0.1", httpx.URL(px).port or 80))
        sock.sendall(head + call)
        assert await anyio.to_thread.run_sync(slow.started.wait, 10)
        sock.close()
        assert await anyio.to_thread.run_sync(slow.hung_up.wait, 10)  # long before first_byte_timeout (300 s)
        async with httpx.AsyncClient(timeout=10) as http:
            metrics = (await http.get(px + "/.mcp-normalizer/metrics")).text
    assert 'mcp_normalizer_requests_total{http_method="POST",rpc_method="tools/call",status="aborted"} 1.0' in metrics


class CannedUpstream(RawUpstream):
    """A raw HTTP/1.1 upstream: records each request's bytes and answers every one with ``answer``."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        super().__init__(_CannedHandler)


class _CannedHandler(socketserver.StreamRequestHandler):
    server: CannedUpstream

    def handle(self) -> None:
        while (request := read_request(self.rfile)) is not None:
            self.server.requests.append(request.raw)
            self.wfile.write(self.server.answer)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (b"HTTP/1.1 200 OK\r\nx-bad: a\x01b\r\ncontent-length: 2\r\n\r\n{}", "control character"),
        (b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n", "upgrades"),
        (b"HTTP/1.1 200 OK\r\nx-long: " + b"a" * 9000 + b"\r\ncontent-length: 2\r\n\r\n{}", "cannot parse"),
    ],
    ids=["control-character", "upgrade", "unparseable"],
)
async def test_an_upstream_head_the_proxy_cannot_relay_is_a_502_that_names_no_secret(answer: bytes, says: str) -> None:
    """Whatever the upstream's head, the client gets a JSON-RPC error (never an empty reply), and
    neither it nor the log shows the upstream URL's query or the upstream's header bytes."""
    ping = b'{"jsonrpc":"2.0","id":5,"method":"ping"}'
    with (
        serving(CannedUpstream(answer)) as up,
        proxy_for(up.url + "?api_key=S3cr3tKey") as px,
        capture_rewrites("mcp_normalizer") as log,
    ):
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            got = await http.post(px + "/mcp", content=ping)
    assert got.status_code == 502 and got.json()["id"] == 5 and says in got.json()["error"]["message"]
    shown = got.text + "".join(record.getMessage() for record in log.records)
    assert "S3cr3t" not in shown and "aaaa" not in shown and "a\x01b" not in shown


@pytest.mark.anyio
async def test_a_304_with_a_content_length_is_relayed_and_expect_is_not_forwarded() -> None:
    not_modified = b"HTTP/1.1 304 Not Modified\r\netag: x\r\ncontent-length: 120\r\n\r\n"
    with serving(CannedUpstream(not_modified)) as up:
        with proxy_for(up.url) as px:
            async with httpx.AsyncClient(timeout=10) as http:
                first = await http.get(px + "/doc", headers={"if-none-match": "x"})
                second = await http.post(px + "/x", content=b"{}", headers={"expect": "100-continue"})
    assert first.status_code == second.status_code == 304
    assert b"expect" not in up.requests[1].lower()  # the proxy read the body already


@pytest.mark.anyio
async def test_chunked_trailers_are_dropped_and_bounded() -> None:
    recorder = Recorder()
    with serve(recorder) as up, proxy_for(up + "/mcp", _guarded(max_header_bytes=2048)) as px:
        head = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        head += b"Transfer-Encoding: chunked\r\n\r\n"
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        chunk = b"%x\r\n%s\r\n0\r\n" % (len(body), body)
        small = await raw_request(px, head + chunk + b"Origin: http://evil.example\r\nX-Injected: 1\r\n\r\n")
        huge = await raw_request(px, head + chunk + b"".join(b"x-pad-%d: %s\r\n" % (i, b"a" * 90) for i in range(100)))
    assert small.startswith(b"HTTP/1.1 200 ")
    assert huge.startswith(b"HTTP/1.1 431 ")
    assert recorder.requests == [body]  # the one with the huge trailer never went
    assert "origin" not in recorder.headers[0] and "x-injected" not in recorder.headers[0]


@pytest.mark.anyio
async def test_a_refused_request_gets_one_answer_whatever_its_body_does() -> None:
    """A request refused before its body is read (421 here) must not be followed by a second,
    unasked response when the rest of its body arrives (it was counted as a new head: 431)."""
    with serve(Recorder()) as up, proxy_for(up + "/mcp") as px:
        stream = await anyio.connect_tcp("127.0.0.1", httpx.URL(px).port or 80)
        async with stream:
            await stream.send(
                b"POST /mcp HTTP/1.1\r\nHost: rebind.evil.example\r\nContent-Length: 40000\r\n\r\n" + b"a" * 100
            )
            answer = b""
            with anyio.move_on_after(20):
                try:
                    while b"\r\n\r\n" not in answer:  # the refusal first (ordered by the answer, not a sleep)
                        answer += await stream.receive()
                    await stream.send(b"a" * 39900)  # then the rest of the body
                    while chunk := await stream.receive():
                        answer += chunk
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    pass
    assert answer.startswith(b"HTTP/1.1 421 ")
    assert answer.count(b"HTTP/1.1 ") == 1, answer


@pytest.mark.anyio
@pytest.mark.parametrize("parser", ["httptools", "h11"])
async def test_http_methods_outside_the_known_set_share_one_metric_label(parser: str) -> None:
    """h11 accepts any token as a method (httptools refuses most with 400; so does this test's
    upstream, and the proxy relays its answer): the ``http_method`` label of ``requests_total`` names
    the methods of HTTP APIs and counts every other as ``other``, so a client cannot add label
    values at will."""
    methods = ["PROPFIND", "X-FILL-1", "X-FILL-2", "X-FILL-3"]
    with serve(Recorder()) as up, proxy_for(up + "/mcp", _guarded(http=parser)) as px:
        async with httpx.AsyncClient(timeout=10, headers={"host": "localhost"}) as http:
            for method in methods:
                await http.request(method, px + "/mcp")
            assert (await http.request("DELETE", px + "/mcp")).status_code == 200
            metrics = (await http.get(px + "/.mcp-normalizer/metrics")).text
    counted = [line for line in metrics.splitlines() if line.startswith("mcp_normalizer_requests_total{")]
    labels = {line.split('http_method="')[1].split('"')[0] for line in counted}
    assert "DELETE" in labels and labels <= {"other", "DELETE", "GET"}
    if parser == "h11":  # every one reached the proxy's app and was counted, as other
        others = [float(line.rsplit(" ", 1)[1]) for line in counted if 'http_method="other"' in line]
        assert sum(others) == len(methods)


DEEP_SCHEMA = b'{"name":"deep","inputSchema":{"type":"object","default":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
DRAFT07_TOOL = b'{"name":"repaired","inputSchema":{"type":"object"},"outputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"price":{"type":"number","default":12.50}}}}'


async def _deep_lister(scope: Scope, receive: Receive, send: Send) -> None:
    """An upstream whose ``tools/list`` holds one tool nested 100,000 deep beside one to repair;
    any other request gets an empty result with the request's id."""
    request = orjson.loads(await read_body(receive))
    if request.get("method") == "tools/list":
        body = b'{"jsonrpc":"2.0","id":%s,"result":{"tools":[%s,%s]}}' % (
            orjson.dumps(request["id"]),
            DEEP_SCHEMA,
            DRAFT07_TOOL,
        )
    else:
        body = orjson.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": {}})
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


@pytest.mark.anyio
async def test_a_tools_list_100000_deep_passes_through_unread_and_other_calls_are_answered() -> None:
    """A hostile ``tools/list`` 100,000 deep (issue 22: it held the loop 2.4 s in the splitter):
    past the depth the proxy reads, the whole message reaches the client byte for byte, unread
    (the tool beside it is not repaired; nothing is logged as a rewrite), and the calls other
    clients make meanwhile are answered, each with its own id."""
    with serve(_deep_lister) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        async with httpx.AsyncClient(timeout=30) as http:
            responses: list[httpx.Response] = []

            async def post(body: bytes) -> None:
                responses.append(await http.post(px + "/mcp", content=body, headers=HEADERS))

            async with anyio.create_task_group() as tg:
                tg.start_soon(post, b'{"jsonrpc":"2.0","id":"l\\u00e9","method":"tools/list"}')
                for n in range(20):
                    tg.start_soon(post, b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % n)
    listed = next(r for r in responses if b"tools" in r.content)
    expected = b'{"jsonrpc":"2.0","id":"l\xc3\xa9","result":{"tools":[%s,%s]}}' % (DEEP_SCHEMA, DRAFT07_TOOL)
    assert listed.status_code == 200 and listed.content == expected
    pings = sorted(orjson.loads(r.content)["id"] for r in responses if r is not listed)
    assert pings == list(range(20))
    assert [line for line in log.lines if line["event"] == "rewrite"] == []


@pytest.mark.anyio
async def test_an_idle_connection_is_kept_keep_alive_timeout_then_closed() -> None:
    """The proxy keeps an idle connection for its next request ``keep_alive_timeout`` seconds (by
    default longer than httpx's, Node's and aiohttp's pools keep theirs, so none of them reuses a
    connection the proxy is closing: the read error of CI's 200 sessions), then closes it."""
    assert uvicorn_config(Recorder()).timeout_keep_alive > 15  # aiohttp's client pool: 15 s
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    head = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    head += b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(ping)
    with serve(Recorder()) as up, proxy_for(up + "/mcp", _guarded(keep_alive_timeout=0.5)) as px:
        stream = await anyio.connect_tcp("127.0.0.1", httpx.URL(px).port or 80)
        async with stream:
            await stream.send(head + ping)
            received, closed = b"", False
            with anyio.move_on_after(30):
                while True:
                    try:
                        received += await stream.receive()
                    except anyio.EndOfStream:
                        closed = True
                        break
    assert received.startswith(b"HTTP/1.1 200 ") and received.endswith(b'"result":{}}\r\n0\r\n\r\n')
    assert closed  # by the proxy, once the connection had been idle keep_alive_timeout
