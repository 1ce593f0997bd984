"""``Forwarder``: the ASGI app that relays every request to one fixed upstream over httpx, streaming.

It is a plain reverse proxy and knows nothing of MCP; the standalone proxy wraps it in
:class:`~proxy.middleware.NormalizerMiddleware`. Requests go to the upstream origin at the same path
and query (never anywhere else: it is not an open proxy). Hop-by-hop headers are stripped both ways
(RFC 9110 section 7.6.1), ``Host`` is set by httpx to the upstream's authority, ``accept-encoding``
is forced to ``identity`` so bodies can be rewritten, and cookies are never stored (one client's
``Set-Cookie`` must never reach another client's request). Response bodies are relayed chunk by
chunk as they arrive; a client disconnect closes the upstream stream at once (in 2026-07-28 that is
how a call is cancelled).

Upstream failures before the response starts become 502 (unreachable) or 504 (timeout); when the
request was a JSON-RPC request, the body is a JSON-RPC error with the request's id (a batch gets one
per request). An upstream that breaks off a body already started raises
:class:`~proxy.errors.UpstreamUnavailable`, so the client sees the break instead of a clean end.
Request targets must be origin-form (``/path?query``): they are sent upstream byte for byte.
"""

from __future__ import annotations

import http.cookiejar
import logging
import math
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import anyio
import httpx

from .body import buffer_body
from .errors import ClientDisconnect, DecodeError, UpstreamError, UpstreamTimeout, UpstreamUnavailable
from .jsoncodec import dumps, loads
from .metrics import Metrics
from .types import JSON, RawHeaders, Receive, Scope, Send

logger = logging.getLogger("mcp_normalizer.forward")

_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
        b"proxy-authenticate",
        b"proxy-authorization",
    }
)
_DROP_REQUEST = _HOP_BY_HOP | {b"host", b"content-length", b"accept-encoding"}
_DROP_RESPONSE = _HOP_BY_HOP

#: Upstream connection pools the forwarder spreads its requests over (see ``Forwarder._pool``).
POOL_SHARDS = 8


def _strip(headers: RawHeaders, drop: frozenset[bytes]) -> RawHeaders:
    """Remove hop-by-hop headers, and every header the ``Connection`` header names."""
    named = {
        token.strip().lower()
        for key, value in headers
        if key.lower() == b"connection"
        for token in value.split(b",")
        if token.strip()
    }
    return [(key.lower(), value) for key, value in headers if key.lower() not in drop and key.lower() not in named]


class _NoCookies(http.cookiejar.CookieJar):
    """A cookie jar that never stores anything."""

    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        return None

    def extract_cookies(self, response: object, request: object) -> None:
        return None


class Forwarder:
    """ASGI app relaying requests to ``upstream``'s origin (scheme, host, port), streaming.

    Args:
        upstream: the upstream MCP endpoint URL; only its origin is used for routing, every request
            keeps its own path and query.
        connect_timeout: seconds to connect to the upstream (then 504).
        first_byte_timeout: seconds from sending a request to the response headers (then 504).
        idle_timeout: seconds a response body may stay silent before the stream is broken off
            (any chunk counts, SSE keep-alive comments included); ``None`` or 0: no limit.
        client: an ``httpx.AsyncClient`` to use instead of the ones the forwarder creates (its
            cookie jar is replaced by one that stores nothing; the caller closes it).
        max_body_bytes: largest request body relayed; a larger one gets 413.
        metrics: record upstream latency, errors, bytes and open streams there.
    """

    def __init__(
        self,
        upstream: str,
        *,
        connect_timeout: float = 5.0,
        first_byte_timeout: float = 300.0,
        idle_timeout: float | None = 300.0,
        client: httpx.AsyncClient | None = None,
        max_body_bytes: int = 16 * 1024 * 1024,
        metrics: Metrics | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self._address = (parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80))
        self.max_body_bytes = max_body_bytes
        self.first_byte_timeout = first_byte_timeout
        self.idle_timeout = idle_timeout or math.inf
        # Reads are timed here (first byte, then idle gaps), not by httpx: a quiet tool call is normal.
        self._timeout = httpx.Timeout(connect=connect_timeout, read=None, write=30.0, pool=10.0)
        if client is not None:
            client.cookies = _NoCookies()  # one client's Set-Cookie never reaches another
        self._client = client
        self._clients: list[httpx.AsyncClient] = []
        self._busy = [0] * POOL_SHARDS
        self._closed = False
        self.metrics = metrics

    async def ready(self) -> bool:
        """True when the upstream accepts a TCP connection within 2 s (the readiness probe)."""
        try:
            with anyio.fail_after(2):
                stream = await anyio.connect_tcp(*self._address)
        except (OSError, TimeoutError):
            return False
        await stream.aclose()
        return True

    def _pool(self) -> int:
        """The index of the pool (in :attr:`_clients`) the next request uses: the least busy one.

        httpcore walks every pooled connection on each request and each release, so one pool of N
        connections costs O(N) per request (36% of the proxy's CPU with 200 concurrent sessions);
        :data:`POOL_SHARDS` pools share the load. Ties go to the first pool, so light traffic keeps
        reusing the same warm connections instead of letting eight pools' connections go stale.
        """
        if not self._clients:
            self._clients = [
                httpx.AsyncClient(
                    timeout=self._timeout,
                    limits=httpx.Limits(max_connections=None, max_keepalive_connections=100, keepalive_expiry=4.0),
                    follow_redirects=False,
                    trust_env=False,
                    cookies=_NoCookies(),
                )
                for _ in range(POOL_SHARDS)
            ]
        busy = self._busy
        return busy.index(min(busy))

    async def aclose(self) -> None:
        """Close the upstream clients the forwarder created (an injected client is the caller's);
        later requests get 503."""
        self._closed = True
        clients, self._clients = self._clients, []
        for client in clients:
            await client.aclose()

    async def _send(self, client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
        """Send ``request``; once more if it went out on a kept-alive connection that the upstream
        closed before answering (its keep-alive timeout raced this request: the upstream never read
        it). A failure on a freshly opened connection is not retried: that request may have run.

        Raises:
            httpx.HTTPError: as ``httpx.AsyncClient.send``.
        """
        opened = False

        async def trace(event: str, info: dict[str, object]) -> None:
            nonlocal opened
            if event == "connection.connect_tcp.started":
                opened = True

        request.extensions["trace"] = trace
        try:
            return await client.send(request, stream=True)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            if opened:
                raise
        logger.info("a kept-alive upstream connection was closed under a request: sent again on another")
        return await client.send(request, stream=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets are not relayed
        try:
            body, _, over = await buffer_body(receive, self.max_body_bytes)
        except ClientDisconnect:
            return  # never forward a truncated request
        if over:
            await _error(
                send, 413, body if len(body) < 65536 else b"", f"Request body exceeds {self.max_body_bytes} bytes"
            )
            return
        target: bytes = scope.get("raw_path") or scope["path"].encode()
        if not target.startswith(b"/"):
            # Only origin-form targets: anything else could name another host (this is not an open proxy).
            await _error(send, 400, body, "Request target must be an absolute path")
            return
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        headers = _strip(list(scope["headers"]), _DROP_REQUEST)
        headers.append((b"accept-encoding", b"identity"))
        if self._closed:
            await _error(send, 503, body, "The proxy is shutting down")
            return
        # The target goes out byte for byte (no dot-segment normalization) to the upstream origin.
        pool = self._pool() if self._client is None else 0
        client = self._client or self._clients[pool]
        request = client.build_request(
            scope["method"], self.origin + "/", headers=headers, content=body, extensions={"target": target}
        )
        sent = {key for key, _ in headers}
        for default in ("accept", "user-agent"):  # httpx adds these; a proxy adds nothing
            if default.encode() not in sent:
                del request.headers[default]
        metrics = self.metrics
        if metrics is not None:
            metrics.bytes.labels("request").inc(len(body))
        started = time.monotonic()
        self._busy[pool] += 1
        response: httpx.Response | None = None
        leased = True

        async def release() -> None:
            """Hand the upstream connection back (once): before the client sees the end, so that a
            client's next request finds it idle in the pool."""
            nonlocal response, leased
            if leased:
                leased = False
                self._busy[pool] -= 1
            if response is not None:
                done, response = response, None
                with anyio.CancelScope(shield=True):
                    await done.aclose()
                if metrics is not None:
                    metrics.open_streams.dec()

        try:
            try:
                with anyio.fail_after(self.first_byte_timeout):
                    response = await self._send(client, request)
            except (httpx.TimeoutException, TimeoutError) as exc:
                self._count_error("timeout")
                await _upstream_failed(send, body, UpstreamTimeout(f"upstream timed out: {type(exc).__name__}"))
                return
            except httpx.HTTPError as exc:
                self._count_error("unreachable")
                error = UpstreamUnavailable(f"upstream unreachable: {str(exc) or type(exc).__name__}")
                await _upstream_failed(send, body, error)
                return
            if metrics is not None:
                metrics.upstream_latency.observe(time.monotonic() - started)
                metrics.open_streams.inc()
            await self._relay(response, receive, send, release)
        finally:
            await release()

    def _count_error(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.upstream_errors.labels(kind).inc()

    async def _relay(
        self, response: httpx.Response, receive: Receive, send: Send, release: Callable[[], Awaitable[None]]
    ) -> None:
        """Relay the response as it arrives; ``release()`` the upstream connection when the upstream
        body has ended, before the last (empty) body message goes to the client.

        Raises:
            UpstreamUnavailable: the upstream broke off the body; the response is left incomplete
                (the client sees the break, as it would directly), never ended as if whole.
        """
        headers = _strip(list(response.headers.raw), _DROP_RESPONSE)
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        failure: str | None = None
        counted = self.metrics.bytes.labels("response") if self.metrics is not None else None
        async with anyio.create_task_group() as tg:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            tg.start_soon(watch_disconnect)
            chunks = response.aiter_raw().__aiter__()
            while True:
                try:
                    with anyio.fail_after(self.idle_timeout):
                        chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    await release()
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    break
                except TimeoutError:
                    failure = f"silent for more than {self.idle_timeout:g} s"
                    self._count_error("idle")
                    break
                except httpx.HTTPError as exc:
                    failure = type(exc).__name__
                    self._count_error("broken")
                    break
                if chunk:
                    if counted is not None:
                        counted.inc(len(chunk))
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            tg.cancel_scope.cancel()
        if failure is not None:
            raise UpstreamUnavailable(f"upstream broke off the response: {failure}")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _request_ids(body: bytes) -> JSON:
    """The id of a single JSON-RPC request (``None`` if none), or the list of ids of a batch."""
    try:
        message = loads(body) if body else None
        dumps(message)  # an id that cannot be written back (a lone surrogate) counts as none
    except DecodeError:
        return None
    if isinstance(message, list):
        return [m.get("id") for m in message if isinstance(m, dict) and "method" in m and "id" in m]
    return message.get("id") if isinstance(message, dict) and "method" in message else None


async def _upstream_failed(send: Send, body: bytes, error: UpstreamError) -> None:
    logger.warning("%s", error)
    await _error(send, error.status_code, body, str(error))


async def _error(send: Send, status: int, body: bytes, message: str) -> None:
    """Answer with a JSON-RPC error body for the request in ``body`` (MCP clients read JSON-RPC
    errors from any status); a batch gets one error per request, in order."""
    ids = _request_ids(body)
    error = {"code": -32000, "message": message}
    if isinstance(ids, list):
        payload = dumps([{"jsonrpc": "2.0", "id": i, "error": error} for i in ids])
    else:
        payload = dumps({"jsonrpc": "2.0", "id": ids, "error": error})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})
