"""The proxy as a plain reverse proxy: other paths untouched, hop-by-hop headers stripped, no cookie
shared between clients, no remote ``$ref`` fetched, and a clear JSON-RPC error when the upstream is down."""

from __future__ import annotations

import socketserver
from contextlib import AbstractContextManager
from typing import Any

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer.hop.forward import Forwarder
from mcp_normalizer.types import Receive, Scope, Send

from .support import RawUpstream, free_port, proxy_for, raw_request, read_body, read_request, serve, serving

pytestmark = pytest.mark.wire

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


class Echo:
    """Answers every request with what it received; sets a cookie on ``/login``."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.seen.append(
            {
                "path": scope["path"],
                "raw_path": scope["raw_path"].decode(),
                "query": scope["query_string"].decode(),
                "headers": headers,
            }
        )
        reply = orjson.dumps({"path": scope["path"], "query": scope["query_string"].decode(), "body": body.decode()})
        extra = [(b"set-cookie", b"sid=alice-secret; Path=/")] if scope["path"] == "/login" else []
        hop = [(b"connection", b"x-private"), (b"x-private", b"1"), (b"keep-alive", b"timeout=5")]
        await send(
            {
                "type": "http.response.start",
                "status": 207,
                "headers": [(b"content-type", b"application/json"), (b"x-upstream", b"yes"), *extra, *hop],
            }
        )
        await send({"type": "http.response.body", "body": reply})


@pytest.mark.anyio
async def test_other_paths_and_queries_are_forwarded_untouched() -> None:
    echo = Echo()
    with serve(echo) as up, proxy_for(up + "/platform/mcp") as px:
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.post(
                px + "/.well-known/oauth-protected-resource?x=1&y=%20",
                content=b'{"method":"tools/call","id":1}',  # looks like MCP, but not on the MCP path
                headers={"connection": "x-secret", "x-secret": "s", "proxy-authorization": "Basic x"},
            )
    assert response.status_code == 207
    assert response.json() == {
        "path": "/.well-known/oauth-protected-resource",
        "query": "x=1&y=%20",
        "body": '{"method":"tools/call","id":1}',
    }
    assert response.headers["x-upstream"] == "yes"
    assert "x-private" not in response.headers and "keep-alive" not in response.headers  # hop-by-hop
    sent = echo.seen[0]["headers"]
    assert "x-secret" not in sent and "proxy-authorization" not in sent
    assert sent["host"] == up.removeprefix("http://")  # the upstream's own authority
    assert sent["accept-encoding"] == "identity"


@pytest.mark.anyio
async def test_a_cookie_set_for_one_client_never_reaches_another() -> None:
    echo = Echo()
    with serve(echo) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=10) as alice, httpx.AsyncClient(timeout=10) as bob:
            login = await alice.get(px + "/login")
            assert login.headers["set-cookie"].startswith("sid=alice-secret")  # passed to Alice
            await bob.get(px + "/anything")
    assert "cookie" not in echo.seen[1]["headers"]


@pytest.mark.anyio
async def test_a_remote_ref_in_an_output_schema_is_never_fetched() -> None:
    ref_server = Echo()
    with serve(ref_server) as refs:
        tool = {
            "name": "t",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"a": {"$ref": refs + "/schema.json"}}},
        }

        async def upstream(scope: Scope, receive: Receive, send: Send) -> None:
            request = orjson.loads((await receive())["body"])
            result: dict[str, Any] = {"tools": [tool]}
            if request["method"] == "tools/call":
                result = {"content": [], "structuredContent": {"a": 1}, "isError": True}
            body = orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": body})

        with serve(upstream) as up, proxy_for(up + "/mcp") as px:
            async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
                listed = await http.post(px + "/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}}
                called = await http.post(px + "/mcp", content=orjson.dumps(call))
    # Clients cannot resolve it either: the advertised schema leaves the place unconstrained.
    assert listed.json()["result"]["tools"][0]["outputSchema"] == {"type": "object", "properties": {"a": {}}}
    assert called.json()["result"]["structuredContent"] == {"a": 1}  # conforms to what was advertised
    assert ref_server.seen == []  # and the reference was never fetched


@pytest.mark.anyio
async def test_an_unreachable_upstream_gives_502_with_a_json_rpc_error_for_the_request() -> None:
    dead = f"http://127.0.0.1:{free_port()}/mcp"
    with proxy_for(dead) as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            response = await http.post(px + "/mcp", content=b'{"jsonrpc":"2.0","id":"a-1","method":"ping"}')
    assert response.status_code == 502
    body = response.json()
    assert body["id"] == "a-1" and body["error"]["code"] == -32000
    assert "unreachable" in body["error"]["message"]


@pytest.mark.anyio
async def test_a_request_target_cannot_point_the_proxy_at_another_host() -> None:
    target = Echo()
    with serve(Echo()) as up, serve(target) as elsewhere, proxy_for(up + "/mcp") as px:
        port = httpx.URL(elsewhere).port
        for line in (f"GET @127.0.0.1:{port}/admin HTTP/1.1", f"GET http://127.0.0.1:{port}/admin HTTP/1.1"):
            answer = await raw_request(px, f"{line}\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
            # refused, or (absolute-form, RFC 9112 section 3.2.2, under httptools) sent to the one upstream
            assert answer.startswith(b"HTTP/1.1 400") or b"x-upstream: yes" in answer, answer[:200]
    assert target.seen == []  # never anywhere else


@pytest.mark.anyio
async def test_paths_reach_the_upstream_byte_for_byte_and_no_headers_are_added() -> None:
    echo = Echo()
    with serve(echo) as up, proxy_for(up + "/mcp") as px:
        answer = await raw_request(
            px, b"GET /a/../mcp/./x?q=../ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
    assert answer.startswith(b"HTTP/1.1 207")
    seen = echo.seen[0]
    assert (seen["raw_path"], seen["query"]) == ("/a/../mcp/./x", "q=../")  # no dot-segment normalization
    assert "accept" not in seen["headers"] and "user-agent" not in seen["headers"]


@pytest.mark.anyio
async def test_a_truncated_request_body_is_never_forwarded() -> None:
    echo = Echo()
    with serve(echo) as up, proxy_for(up + "/mcp") as px:
        for path in (b"/mcp", b"/other"):
            head = (
                b"POST "
                + path
                + b" HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n"
            )
            await raw_request(
                px, head + b'{"jsonrpc":"2.0","id":1,"method":"tools/call"' + b" " * 400, close_after_send=True
            )
        # A complete request afterwards shows the proxy is still fine, and is the only one that arrived.
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(px + "/after")).status_code == 207
    assert [seen["path"] for seen in echo.seen] == ["/after"]


@pytest.mark.anyio
async def test_a_large_non_tools_post_to_the_mcp_path_passes_through() -> None:
    echo = Echo()
    body = b'{"jsonrpc":"2.0","id":1,"method":"resources/write","params":{"blob":"' + b"x" * (5 * 1024 * 1024) + b'"}}'
    with serve(echo) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(px + "/mcp", content=body, headers=HEADERS)
    assert response.status_code == 207
    assert len(response.json()["body"]) == len(body)


@pytest.mark.anyio
@pytest.mark.parametrize("content_type", [b"application/json", b"text/event-stream"])
async def test_an_upstream_that_breaks_off_a_body_is_never_shown_as_complete(content_type: bytes) -> None:
    async def upstream(scope: Scope, receive: Receive, send: Send) -> None:
        request = orjson.loads(await read_body(receive))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]})
        if request["method"] == "tools/list":
            await send({"type": "http.response.body", "body": b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'})
            return
        await send({"type": "http.response.body", "body": b'{"jsonrpc":"2.0","id":1,"res', "more_body": True})
        raise RuntimeError("the upstream crashed")

    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}'
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=10) as http:
            try:
                response = await http.post(px + "/mcp", content=call, headers=HEADERS)
            except httpx.HTTPError:
                return  # the break reached the client as a break: fine
    # The only other acceptable answer: a clear error, never a 200 with a cut body.
    assert response.status_code == 502, response.content
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32000, "message": response.json()["error"]["message"]},
    }
    assert "broke off" in response.json()["error"]["message"]


@pytest.mark.anyio
async def test_a_batch_to_an_unreachable_upstream_gets_one_error_per_request() -> None:
    with proxy_for(f"http://127.0.0.1:{free_port()}/mcp") as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            batch = orjson.dumps(
                [
                    {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    {"jsonrpc": "2.0", "method": "notifications/x"},
                    {"jsonrpc": "2.0", "id": "b", "method": "ping"},
                ]
            )
            response = await http.post(px + "/other", content=batch)
    assert response.status_code == 502
    assert [error["id"] for error in response.json()] == [1, "b"]


@pytest.mark.anyio
async def test_upstream_connections_are_kept_alive_and_reused() -> None:
    """Many requests, four at a time, ride at most four kept-alive upstream connections: none is
    opened per request."""
    peers: list[tuple[str, int]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        peers.append(scope["client"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    with serve(app) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=10) as http:
            for _ in range(20):
                async with anyio.create_task_group() as tg:
                    for _ in range(4):
                        tg.start_soon(http.get, px + "/health-of-upstream")
    assert len(peers) == 80
    assert len(set(peers)) <= 4


class DroppingUpstream(RawUpstream):
    """A raw HTTP/1.1 upstream on loopback that closes a kept-alive connection without answering
    the request numbered ``drop_at`` on it (1-based), as an upstream whose keep-alive timeout fires
    just as the proxy reuses the connection does. Every other request gets 200 and keep-alive."""

    def __init__(self, drop_at: int) -> None:
        self.drop_at = drop_at
        self.received: list[tuple[int, int]] = []  # (connection number, request number on it)
        self.connections = 0
        super().__init__(_DroppingHandler)


class _DroppingHandler(socketserver.StreamRequestHandler):
    server: DroppingUpstream

    def handle(self) -> None:
        self.server.connections += 1
        connection, number = self.server.connections, 0
        while read_request(self.rfile) is not None:
            number += 1
            self.server.received.append((connection, number))
            if number == self.server.drop_at:
                return  # closed without an answer
            body = orjson.dumps({"connection": connection, "request": number})
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
            self.wfile.write(b"content-length: %d\r\n\r\n%s" % (len(body), body))


def dropping_upstream(drop_at: int) -> AbstractContextManager[DroppingUpstream]:
    return serving(DroppingUpstream(drop_at))


@pytest.mark.anyio
async def test_a_request_on_a_kept_alive_connection_the_upstream_closed_is_sent_again_only_if_idempotent() -> None:
    """A GET whose kept-alive connection the upstream closed without answering is sent again; a
    POST never is (RFC 9110 section 9.2.2): the upstream may have read and run it before closing."""
    with dropping_upstream(drop_at=2) as up, proxy_for(up.url) as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            first = await http.get(px + "/mcp")
            second = await http.get(px + "/mcp")
    assert (first.status_code, second.status_code) == (200, 200)
    assert first.json() == {"connection": 1, "request": 1}
    assert second.json() == {"connection": 2, "request": 1}  # the retry, on a new connection
    assert up.received == [(1, 1), (1, 2), (2, 1)]
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    with dropping_upstream(drop_at=2) as up, proxy_for(up.url) as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            first = await http.post(px + "/mcp", content=ping)
            second = await http.post(px + "/mcp", content=ping)
    assert (first.status_code, second.status_code) == (200, 502)
    assert second.json()["id"] == 1 and "Server disconnected" in second.json()["error"]["message"]
    assert up.received == [(1, 1), (1, 2)]  # the call that may have run is never sent twice


@pytest.mark.anyio
async def test_a_request_a_fresh_connection_drops_is_not_sent_again() -> None:
    with dropping_upstream(drop_at=1) as up, proxy_for(up.url) as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            response = await http.post(px + "/mcp", content=b'{"jsonrpc":"2.0","id":7,"method":"tools/call"}')
    assert response.status_code == 502
    assert response.json()["id"] == 7
    assert "Server disconnected" in response.json()["error"]["message"]  # the cause, not an empty text
    assert up.received == [(1, 1)]  # it may have run: never twice


@pytest.mark.anyio
async def test_cookies_are_never_stored_and_a_closed_forwarder_answers_503() -> None:
    echo = Echo()
    with serve(echo) as up:
        forwarder = Forwarder(up + "/mcp")
        transport = httpx.ASGITransport(app=forwarder)
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://proxy", timeout=10) as alice,
            httpx.AsyncClient(transport=transport, base_url="http://proxy", timeout=10) as bob,
        ):
            login = await alice.get("/login")
            await bob.get("/anything")
            await forwarder.aclose()
            closed = await bob.post("/mcp", content=b'{"jsonrpc":"2.0","id":3,"method":"ping"}')
    assert login.headers["set-cookie"].startswith("sid=alice-secret")  # relayed to its client
    assert "cookie" not in echo.seen[1]["headers"]  # never stored, never sent again
    assert closed.status_code == 503 and closed.json()["id"] == 3


@pytest.mark.anyio
async def test_with_every_rule_off_the_proxy_reads_nothing_and_changes_nothing() -> None:
    """A pass-through config (every rule ``off``) makes the proxy a plain reverse proxy: no request
    is parsed, no ``tools/list`` fetched for an unknown tool, every response byte-identical."""
    from mcp_normalizer import NormalizerConfig
    from mcp_normalizer.demo.upstream import protean_server
    from mcp_normalizer.engine.rules import RULES

    off = NormalizerConfig.from_mapping({"rules": {rule.name: "off" for rule in RULES}})
    upstream = protean_server("json")
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "protean.scope_list"}}
    with serve(upstream) as up, proxy_for(up + "/mcp", off) as px:
        async with httpx.AsyncClient(timeout=10) as http:
            direct = await http.post(up + "/mcp", content=orjson.dumps(call), headers=HEADERS)
            proxied = await http.post(px + "/mcp", content=orjson.dumps(call), headers=HEADERS)
    assert proxied.content == direct.content and b"structuredContent" in proxied.content
    methods = [message.get("method") for message, _ in upstream.requests]
    assert methods == ["tools/call", "tools/call"]  # no tools/list of the proxy's own
