"""``Forwarder``: the ASGI app that relays every request to one fixed upstream, streaming.

It is a plain reverse proxy and knows nothing of MCP; the standalone proxy wraps it in
:class:`~mcp_normalizer.middleware.NormalizerMiddleware`. Requests go to the upstream origin at the same path
and query, after the upstream URL's own query (never anywhere else: it is not an open proxy).
Forwarding headers follow :mod:`mcp_normalizer.wire.forwarded`, OAuth metadata URLs :mod:`mcp_normalizer.wire.public`.
Hop-by-hop headers are stripped both ways
(RFC 9110 section 7.6.1), ``Host`` is the upstream's authority, ``accept-encoding`` is forced to
``identity`` so bodies can be rewritten, nothing is added (no ``User-Agent``, ``Accept`` or
``Content-Type`` of the client library's), and cookies are never stored (one client's
``Set-Cookie`` must never reach another client's request). Response bodies are relayed chunk by
chunk as they arrive.

The client is watched from the moment its body is read: when it hangs up, the upstream request is
cancelled and its connection closed at once, whether the upstream has answered yet or not (in
2026-07-28 a hang-up is how a call is cancelled; a JSON-mode server answers only when the result
is ready).

Upstream connections are never shared between tenants. Each kept-alive connection belongs to one
client connection and one scope (the session id, ``Authorization`` and ``Cookie`` it carried,
hashed): a request reuses only a connection that the same client connection opened for the same
scope, so bytes an upstream writes late (a second copy of a response, after the first) can only
ever reach the client whose request caused them, never another tenant, and there the JSON-RPC id
check of the transformer (:mod:`mcp_normalizer.engine.transform`) refuses them. Besides, a connection is
reused only when the response ended exactly where it said it would: an upstream that sends bytes
beyond its ``Content-Length`` or after its last chunk, or anything while idle, has its connection
closed (response desynchronisation; :mod:`mcp_normalizer.hop.upstream_http`); and a response the
client side refused (the ``send`` raised) closes its connection even after it went back to the pool.

Time limits hold at every point of a response: ``connect_timeout`` to connect,
``first_byte_timeout`` to the response head, ``idle_timeout`` from the head to the first body byte
and between any two chunks, and ``send_timeout`` for the client to take each chunk (a client that
stops reading never holds an upstream connection longer than that). A silent upstream breaks off
the response (504 before its head, a broken stream after); a client that stops reading has its
connection closed. Each is logged and counted.

Upstream failures before the response starts become 502 (unreachable) or 504 (timeout); when the
request was a JSON-RPC request, the body is a JSON-RPC error with the request's id (a batch gets one
per request). An upstream that breaks off a body already started raises
:class:`~mcp_normalizer.errors.UpstreamUnavailable`, so the client sees the break instead of a clean end.
Request targets must be origin-form (``/path?query``): they are sent upstream byte for byte.

The upstream client is the proxy's own (:class:`~mcp_normalizer.hop.upstream_http.UpstreamPool`: an
asyncio protocol per connection, httptools parsing, a keep-alive pool per tenant). aiohttp, used
before it, cost about a third of a small call's CPU in request and response objects the proxy
does not need; httpx cost twice aiohttp (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
import time
from urllib.parse import urlsplit

from ..errors import ClientDisconnect, DecodeError, UpstreamError, UpstreamTimeout, UpstreamUnavailable
from ..ops.metrics import Metrics
from ..ops.refusals import BODY_SIZE, SHUTTING_DOWN, RefusalLog, peer_of
from ..types import HANG_UP, JSON, Message, RawHeaders, Receive, Scope, Send
from ..wire.body import buffer_body
from ..wire.forwarded import ForwardingPolicy, is_forwarding
from ..wire.jsoncodec import dumps, loads
from ..wire.public import MAX_DOCUMENT_BYTES, rewrite_document, rewrite_www_authenticate, rewrites_document
from ..wire.responses import error_body, respond
from .upstream_http import Response, TimedOut, UpstreamHTTPError, UpstreamPool

logger = logging.getLogger(__name__)

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
#: Dropped from requests besides hop-by-hop ones: ``Host``, ``Content-Length`` and ``Accept-Encoding``
#: are the proxy's to set; ``Expect: 100-continue`` was answered by the server that read the body.
_DROP_REQUEST = _HOP_BY_HOP | {b"host", b"content-length", b"accept-encoding", b"expect"}
_DROP_RESPONSE = _HOP_BY_HOP


def _strip(headers: RawHeaders, drop: frozenset[bytes]) -> RawHeaders:
    """Remove hop-by-hop headers, and every header the ``Connection`` header names (``headers``:
    names lower-case, as ASGI and :mod:`~mcp_normalizer.hop.upstream_http` give them)."""
    kept = [(key, value) for key, value in headers if key not in drop]
    if len(kept) == len(headers) or not any(key == b"connection" for key, _ in headers):
        return kept
    named = {
        token.strip().lower()
        for key, value in headers
        if key == b"connection"
        for token in value.split(b",")
        if token.strip()
    }
    return [(key, value) for key, value in kept if key not in named]


def tenant_of(scope: Scope) -> int:
    """The pool key of a request: its client connection (address and port) and its scope (the
    ``Mcp-Session-Id``, ``Authorization`` and ``Cookie`` headers), hashed. Two requests share
    upstream connections only when this is equal: the same client, on the same connection, in
    the same session, with the same credentials."""
    found: dict[bytes, bytes] = {}
    for key, value in scope["headers"]:
        if key in _TENANCY and key not in found:  # (the first of each, as the scope key reads them)
            found[key] = value
    if not found:
        return hash(scope.get("client"))
    return hash((scope.get("client"), found.get(b"mcp-session-id"), found.get(b"authorization"), found.get(b"cookie")))


#: The headers that name a request's tenant (:func:`tenant_of`).
_TENANCY = frozenset({b"mcp-session-id", b"authorization", b"cookie"})


class Forwarder:
    """ASGI app relaying requests to ``upstream``'s origin (scheme, host, port), streaming.

    Args:
        upstream: the upstream MCP endpoint URL; its origin is where every request goes, with its own
            path; the URL's query (``?api_key=...``) is sent on every request, before the request's
            own query (logs show it redacted).
        connect_timeout: seconds to connect to the upstream (then 504).
        first_byte_timeout: seconds from sending a request to the response headers (then 504).
        idle_timeout: seconds a response body may stay silent (from the head to the first byte,
            and between chunks) before the stream is broken off (any chunk counts, SSE keep-alive
            comments included); ``None`` or 0: no limit.
        send_timeout: seconds the client may take to accept one chunk (a client that stops
            reading fills the buffers, and its ``send`` waits); then its connection is closed and
            the upstream response dropped. ``None`` or 0: no limit.
        max_body_bytes: largest request body relayed; a larger one gets 413.
        metrics: record upstream latency, errors, bytes and open streams there.
        forwarding: which forwarding headers go upstream (:mod:`mcp_normalizer.wire.forwarded`); by default the
            clients' own are dropped and none are added.
        public_url: the origin clients dial; the upstream's OAuth metadata URLs are moved to it
            (:mod:`mcp_normalizer.wire.public`). Empty: nothing is rewritten.
        max_connections: upstream connections held at most (a request past it waits for one);
            0: no limit.
        refusals: where the requests it refuses (413, 503 shutting down) are counted and logged.
    """

    def __init__(
        self,
        upstream: str,
        *,
        connect_timeout: float = 5.0,
        first_byte_timeout: float = 300.0,
        idle_timeout: float | None = 300.0,
        send_timeout: float | None = 60.0,
        max_body_bytes: int = 16 * 1024 * 1024,
        metrics: Metrics | None = None,
        forwarding: ForwardingPolicy | None = None,
        public_url: str = "",
        max_connections: int = 0,
        refusals: RefusalLog | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.query = parts.query.encode("latin-1")  # sent on every request, before the client's own
        default_port = 443 if parts.scheme == "https" else 80
        self._address = (parts.hostname or "127.0.0.1", parts.port or default_port)
        authority = parts.netloc.rpartition("@")[2]
        if parts.port == default_port:
            authority = authority.rpartition(":")[0]  # (as a client writes Host for a default port)
        self._host_line = b"\r\nhost: " + authority.encode("idna") + b"\r\n"
        self._tls = parts.scheme == "https"
        self.max_body_bytes = max_body_bytes
        self.first_byte_timeout = first_byte_timeout
        self.idle_timeout = idle_timeout if idle_timeout and math.isfinite(idle_timeout) else None
        self.send_timeout = send_timeout if send_timeout and math.isfinite(send_timeout) else None
        self.connect_timeout = connect_timeout
        self._pool: UpstreamPool | None = None
        self._closed = False
        self.metrics = metrics
        self.forwarding = forwarding or ForwardingPolicy()
        self.public_origin = public_url.rstrip("/")
        self.max_connections = max_connections
        self.refusals = refusals if refusals is not None else RefusalLog()

    async def ready(self) -> bool:
        """True when the upstream accepts a TCP connection within 2 s (the readiness probe)."""
        try:
            async with asyncio.timeout(2):
                _, writer = await asyncio.open_connection(*self._address)
        except (OSError, TimeoutError):
            return False
        writer.close()
        return True

    def _upstream(self) -> UpstreamPool:
        """The connection pool requests go out on, made on first use (inside the running loop)."""
        pool = self._pool
        if pool is None:
            host, port = self._address
            self._pool = pool = UpstreamPool(
                host,
                port,
                tls=ssl.create_default_context() if self._tls else None,
                connect_timeout=self.connect_timeout,
                first_byte_timeout=self.first_byte_timeout,
                max_connections=self.max_connections,
            )
        return pool

    async def aclose(self) -> None:
        """Close the upstream connections; later requests get 503."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.aclose()

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
            told = self.refusals.refused(BODY_SIZE, peer_of(scope), f"over {self.max_body_bytes} bytes")
            await _error(send, 413, body if len(body) < 65536 else b"", told)
            return
        target: bytes = scope.get("raw_path") or scope["path"].encode()
        if not target.startswith(b"/"):
            # Only origin-form targets: anything else could name another host (this is not an open proxy).
            await _error(send, 400, body, "Request target must be an absolute path")
            return
        query = b"&".join(q for q in (self.query, scope.get("query_string")) if q)
        if query:
            target += b"?" + query
        if self._closed:
            await _error(send, 503, body, self.refusals.refused(SHUTTING_DOWN, peer_of(scope)))
            return
        sent = _strip(scope["headers"], _DROP_REQUEST)
        forwarding = self.forwarding
        if forwarding.add or any(is_forwarding(key) for key, _ in sent):
            host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
            sent = forwarding.apply(sent, peer_of(scope), scope.get("scheme", "http"), host)
        method: str = scope["method"]
        # The target goes out byte for byte (no dot-segment normalization) to the upstream origin;
        # Host is the upstream's, Content-Length the body's, and nothing else is added.
        lines = [method.encode("latin-1"), b" ", target, b" HTTP/1.1", self._host_line]
        for key, value in sent:
            lines += (key, b": ", value, b"\r\n")
        if body or method not in _BODYLESS:
            lines.append(b"content-length: %d\r\n" % len(body))
        lines.append(b"accept-encoding: identity\r\n\r\n")
        metrics = self.metrics
        if metrics is not None:
            metrics.bytes.labels("request").inc(len(body))
        watch = _HangUpWatch(scope, receive)
        try:
            await self._exchange(scope, b"".join(lines), body, send, watch)
        except asyncio.CancelledError:
            if watch.gone and watch.uncancel():
                return  # the client hung up: the upstream request is cancelled, its connection closed
            raise
        finally:
            watch.stop()

    async def _exchange(self, scope: Scope, head: bytes, body: bytes, send: Send, watch: _HangUpWatch) -> None:
        started = time.monotonic()
        method: str = scope["method"]
        try:
            upstream = self._upstream()
            tenant = tenant_of(scope)
            response = await upstream.send(
                tenant, method.encode("latin-1"), head, body, idle_timeout=self.idle_timeout, on_resend=_resend
            )
        except TimedOut as exc:
            self._count_error("timeout")
            await _upstream_failed(send, body, UpstreamTimeout(f"upstream timed out: {exc}"))
            return
        except UpstreamHTTPError as exc:
            self._count_error("unreachable")
            await _upstream_failed(send, body, UpstreamUnavailable(f"upstream unreachable: {exc}"))
            return
        unusable = _unusable_head(response)
        if unusable is not None:
            response.close()
            self._count_error("unreachable")
            await _upstream_failed(send, body, UpstreamUnavailable(f"upstream sent {unusable}"))
            return
        metrics = self.metrics
        if metrics is not None:
            metrics.upstream_latency.observe(time.monotonic() - started)
            metrics.open_streams.inc()
        relayed = False
        try:
            path: str = scope["path"]
            if self.public_origin and rewrites_document(path) and response.status == 200:
                await self._relay_document(response, send, watch, path)
            else:
                await self._relay(response, send, watch)
            relayed = True
        finally:
            if response.complete:
                response.release()
            else:
                response.close()  # broken off or abandoned: the connection is never reused
            if not relayed:
                # The client side refused the response (a reply to another request, a client
                # that stopped reading): its connection may hold more such bytes. Closed, even
                # if it went back to the pool already (unless it has been lent again since).
                response.close_unless_lent()
            if metrics is not None:
                metrics.open_streams.dec()

    def _count_error(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.upstream_errors.labels(kind).inc()

    async def _relay(self, response: Response, send: Send, watch: _HangUpWatch) -> None:
        """Relay the response as it arrives; hand the upstream connection back when the upstream
        body has ended, before the last body message goes to the client (so that the client's
        next request finds it idle in the pool). The last message carries the body's last bytes
        when they came with its end (a small body comes whole with its head), else it is empty.

        Raises:
            UpstreamUnavailable: the upstream broke off the body; the response is left incomplete
                (the client sees the break, as it would directly), never ended as if whole.
        """
        await send({"type": "http.response.start", "status": response.status, "headers": self._head(response)})
        await self._relay_rest(response, send, watch)

    async def _relay_rest(self, response: Response, send: Send, watch: _HangUpWatch) -> None:
        """Relay the rest of the response body as it arrives, then end it (see :meth:`_relay`)."""
        metrics = self.metrics
        counted = metrics.bytes.labels("response") if metrics is not None else None
        deadline = _SendDeadline(self.send_timeout) if self.send_timeout is not None else None
        try:
            while chunk := await response.read():  # (waits at most idle_timeout for each)
                if counted is not None:
                    counted.inc(len(chunk))
                last = response.ended  # (a small body comes whole with its head: one message ends it)
                if last:
                    response.release()  # to the pool before the client has it, for its next request
                    watch.finish()
                message = {"type": "http.response.body", "body": chunk, "more_body": not last}
                if deadline is None:
                    await send(message)
                elif not await deadline.send(send, message):
                    self._client_too_slow()
                    return  # the client stopped reading: its connection is closed, the upstream's too
                if last:
                    return
        except TimedOut as exc:
            self._count_error("idle")
            raise UpstreamTimeout(f"upstream broke off the response: {exc}") from None
        except UpstreamHTTPError as exc:
            self._count_error("broken")
            raise UpstreamUnavailable(f"upstream broke off the response: {exc}") from None
        finally:
            if deadline is not None:
                deadline.stop()
        response.release()  # to the pool (or closed, if it holds bytes beyond the response)
        watch.finish()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _client_too_slow(self) -> None:
        """The client took no bytes for ``send_timeout``: logged and counted (the response is then
        abandoned, and the ASGI server closes the client's connection, since it never ends)."""
        logger.warning(
            "the client took no response bytes for %g s (send_timeout): its connection is closed", self.send_timeout
        )
        if self.metrics is not None:
            self.metrics.client_errors.labels("send_timeout").inc()

    def _head(self, response: Response, drop: frozenset[bytes] = _DROP_RESPONSE) -> RawHeaders:
        """The response headers for the client: hop-by-hop ones stripped, ``resource_metadata``
        URLs moved to the public origin when there is one."""
        headers = _strip(response.headers, drop)
        if response.status in _NO_BODY:
            # no body follows (RFC 9110 section 6.4.1): its Content-Length describes another response
            headers = [(k, v) for k, v in headers if k != b"content-length"]
        if self.public_origin:
            public = self.public_origin
            headers = [
                (k, rewrite_www_authenticate(v, public, self.origin) if k == b"www-authenticate" else v)
                for k, v in headers
            ]
        return headers

    async def _relay_document(self, response: Response, send: Send, watch: _HangUpWatch, path: str) -> None:
        """Relay an OAuth metadata document with its URLs moved to the public origin (read whole:
        it is small; a larger one, or one that is not JSON, passes as it came).

        Raises:
            UpstreamUnavailable: the upstream broke off the body.
        """
        parts: list[bytes] = []
        size = 0
        try:
            while size <= MAX_DOCUMENT_BYTES:  # the whole document, however it was split in transit
                chunk = await response.read()
                if not chunk:
                    break
                parts.append(chunk)
                size += len(chunk)
            body = b"".join(parts)
            whole = response.complete
        except UpstreamHTTPError as exc:
            self._count_error("broken")
            raise UpstreamUnavailable(f"upstream broke off the response: {exc}") from None
        new = rewrite_document(body, path, self.public_origin, self.origin) if whole else None
        if new is None:
            await send({"type": "http.response.start", "status": response.status, "headers": self._head(response)})
            await send({"type": "http.response.body", "body": body, "more_body": True})
            await self._relay_rest(response, send, watch)
            return
        headers = self._head(response, _DROP_RESPONSE | {b"content-length"})
        headers.append((b"content-length", str(len(new)).encode()))
        response.release()
        watch.finish()
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": new, "more_body": False})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


_BODYLESS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
#: Statuses whose responses never have a body.
_NO_BODY = frozenset({204, 304})


def _unusable_head(response: Response) -> str | None:
    """Why the upstream's response head cannot be relayed (a 502 instead), or ``None``."""
    if response.status < 200:
        return f"a {response.status} response: protocol upgrades are not relayed"
    return None  # (a control character in a header: llhttp refused the head already)


def _resend() -> None:
    logger.info("a kept-alive upstream connection was closed under a request: sent again on another")


class _HangUpWatch:
    """Cancels the relaying task when the client hangs up, from the moment the request body was read
    until :meth:`stop`.

    Under the proxy's own listener the connection says so itself (the scope's
    :data:`~mcp_normalizer.types.HANG_UP` hook: nothing runs per request); under any other ASGI
    server, a future awaits ``receive()`` for its ``http.disconnect`` (``receive()`` must be awaited
    to learn of a hang-up). A disconnect after :meth:`finish` (the ASGI server reports one once the
    response is complete) is ignored.
    """

    __slots__ = ("_hook", "_task", "_watcher", "done", "gone")

    def __init__(self, scope: Scope, receive: Receive) -> None:
        self.done = False
        self.gone = False
        self._task = asyncio.current_task()
        self._hook = scope.get(HANG_UP)
        self._watcher: asyncio.Future[Message] | None = None
        if self._hook is not None:
            self._hook(self._hung_up)
        else:
            self._watcher = asyncio.ensure_future(receive())
            self._watcher.add_done_callback(self._on_message)

    def _on_message(self, watcher: asyncio.Future[Message]) -> None:
        if self.done or watcher.cancelled() or watcher.exception() is not None:
            return
        if watcher.result().get("type") == "http.disconnect":
            self._hung_up()

    def _hung_up(self) -> None:
        if not self.done and self._task is not None:
            self.gone = True
            self._task.cancel()

    def finish(self) -> None:
        """The response is complete: a disconnect from now on is the normal end."""
        self.done = True

    def uncancel(self) -> bool:
        """Take back this watch's cancellation; True when no other cancellation is pending."""
        return self._task is not None and self._task.uncancel() == 0

    def stop(self) -> None:
        """Stop watching (the exchange is over)."""
        self.done = True
        if self._hook is not None:
            self._hook(None)
        elif self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()


class _SendDeadline:
    """``send_timeout`` for each body chunk of one response, with one timer for the response (not a
    timeout context per chunk): the timer, armed at the first send, checks when it fires whether
    a send is still pending since ``limit`` seconds, cancels the relaying task if so, and is armed
    again for the pending send's own deadline otherwise."""

    __slots__ = ("_loop", "_since", "_task", "_timer", "fired", "limit")

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.fired = False
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._since: float | None = None  # when the pending send began; None: none pending
        self._timer: asyncio.TimerHandle | None = None

    async def send(self, send: Send, message: Message) -> bool:
        """``await send(message)``; False when the client did not take it within the limit."""
        self._since = now = self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_at(now + self.limit, self._check)
        try:
            await send(message)
        except asyncio.CancelledError:
            if self.fired and self._task is not None and self._task.uncancel() == 0:
                return False
            raise
        finally:
            self._since = None
        return True

    def _check(self) -> None:
        self._timer = None
        since = self._since
        if since is None:
            return  # no send pending: the next one arms the timer again
        if self._loop.time() - since >= self.limit * 0.999:  # (timers may fire a hair early)
            self.fired = True
            if self._task is not None:
                self._task.cancel()
        else:
            self._timer = self._loop.call_at(since + self.limit, self._check)

    def stop(self) -> None:
        """The response is over."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


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
    await respond(send, status, error_body(_request_ids(body), message))
