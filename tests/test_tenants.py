"""A late duplicate never reaches another tenant, and is never delivered as another request's
answer (issue 22, major 3), on the wire.

The upstream writes a second copy of tenant A's response some time after the first, on the same
connection, the way a buggy server that retries its write does. Before the fix the proxy's pool
lent that connection to the next request, any tenant's, and the copy was read as its answer (5 of
5 at every delay), with its id stamped to look right. Now connections belong to one client
connection and one scope (:func:`mcp_normalizer.hop.forward.tenant_of`): tenant B never reads A's
bytes; and A's own next request, should the copy arrive while it waits, gets a 502 with a JSON-RPC
error for its id, never the copy, and the connection is closed.
"""

from __future__ import annotations

import re
import socketserver
import threading
import time

import httpx
import orjson
import pytest

from .support import HEADERS, RawUpstream, proxy_for, read_request, serving

pytestmark = pytest.mark.wire


def reply(rid: object, tenant: str) -> bytes:
    """A tenant's answer as field servers write them: decimals, a big integer, unicode, a null."""
    result = b'{"content":[{"type":"text","text":"Zo\\u00eb \xf0\x9f\x9a\x80"}],"structuredContent":{"tenant":"%s",' % (
        tenant.encode()
    )
    result += b'"balance":12.50,"rate":2.5E-3,"ledger":123456789012345678901234,"note":null}}'
    return b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (orjson.dumps(rid), result)


LISTED = b'{"tools":[{"name":"balance","inputSchema":{"type":"object"}}]}'


def _response(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


class Duplicating(RawUpstream):
    """Answers every ``tools/call`` with :func:`reply` for its ``Authorization`` and id (and the
    ``tools/list`` with the one tool). Every call's response to tenant ``A`` is written
    again ``delay`` seconds later, on the same connection; with ``slow_second``, the second call
    on a connection is answered only after twice that, so the copy arrives while the proxy waits."""

    def __init__(self, delay: float, *, slow_second: bool = False) -> None:
        self.delay = delay
        self.slow_second = slow_second
        self.copies = threading.Semaphore(0)
        super().__init__(_DuplicatingHandler)


class _DuplicatingHandler(socketserver.StreamRequestHandler):
    server: Duplicating

    def handle(self) -> None:
        number = 0
        while (request := read_request(self.rfile)) is not None:
            message = orjson.loads(request.raw.partition(b"\r\n\r\n")[2])
            rid = message["id"]
            if message["method"] == "tools/list":
                self.wfile.write(_response(b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (orjson.dumps(rid), LISTED)))
                continue
            number += 1
            tenant = request.fields.get(b"authorization", b"").decode()
            if number == 2 and self.server.slow_second:
                time.sleep(2 * self.server.delay + 0.05)
            answer = _response(reply(rid, tenant))
            self.wfile.write(answer)
            self.wfile.flush()
            if tenant == "A":
                threading.Timer(self.server.delay, self._copy, (answer,)).start()

    def _copy(self, answer: bytes) -> None:
        try:
            self.connection.sendall(answer)
        except OSError:
            pass  # the proxy closed the connection already
        self.server.copies.release()


def refused(response: httpx.Response, rid: object) -> bool:
    """True when ``response`` is the proxy's 502 for request ``rid`` refusing another's reply."""
    body = response.json()
    message = body.get("error", {}).get("message", "")
    return response.status_code == 502 and body["id"] == rid and "which no request of this POST has" in message


def call(rid: object) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "balance"}})


@pytest.mark.anyio
@pytest.mark.parametrize("delay", [0.01, 0.2, 1.0])
@pytest.mark.parametrize("shared_client", [False, True], ids=["two-clients", "one-gateway-connection"])
async def test_a_late_duplicate_never_reaches_another_tenant(delay: float, shared_client: bool) -> None:
    """Both tenants use the same id (every client starts at 1). With ``shared_client`` they come
    over one client connection (a gateway in front), told apart by their credentials only."""
    with serving(Duplicating(delay)) as up, proxy_for(up.url) as px:
        async with (
            httpx.AsyncClient(timeout=30, headers=HEADERS) as alice_http,
            httpx.AsyncClient(timeout=30, headers=HEADERS) as bob_http,
        ):
            bob_via = alice_http if shared_client else bob_http
            for _ in range(5):
                alice = await alice_http.post(px + "/mcp", content=call(1), headers={"authorization": "A"})
                bob = await bob_via.post(px + "/mcp", content=call(1), headers={"authorization": "B"})
                # A's own copy may come as the answer to her next call: refused then, never delivered
                assert alice.content == reply(1, "A") or refused(alice, 1)
                assert bob.content == reply(1, "B")  # byte for byte, as the upstream wrote it
                assert up.copies.acquire(timeout=30)  # the copy was written before the next round
                later = await bob_via.post(px + "/mcp", content=call(2), headers={"authorization": "B"})
                assert later.content == reply(2, "B")


@pytest.mark.anyio
async def test_a_duplicate_read_as_the_next_answer_is_refused_with_a_502_for_that_request() -> None:
    with serving(Duplicating(0.2, slow_second=True)) as up, proxy_for(up.url) as px:
        async with httpx.AsyncClient(timeout=30, headers=HEADERS) as http:
            listing = b'{"jsonrpc":"2.0","id":0,"method":"tools/list"}'  # (the tool is known: no fetch of the proxy's)
            await http.post(px + "/mcp", content=listing, headers={"authorization": "A"})
            first = await http.post(px + "/mcp", content=call(1), headers={"authorization": "A"})
            second = await http.post(px + "/mcp", content=call("caf\u00e9-2"), headers={"authorization": "A"})
            third = await http.post(px + "/mcp", content=call(3), headers={"authorization": "A"})
            metrics = (await http.get(px + "/.mcp-normalizer/metrics")).text
    assert first.content == reply(1, "A")
    assert refused(second, "caf\u00e9-2")  # the copy of the first answer came while the second waited
    assert "tenant" not in second.text  # nothing of the copy reaches the client
    assert third.content == reply(3, "A")  # on a new connection: the refused one was closed
    assert re.search(r'upstream_errors_total\{kind="foreign_response"\} 1\.0', metrics)
