"""``UpstreamPool``: the forwarder's HTTP/1.1 client for its one upstream origin.

A reverse proxy needs little of an HTTP client: one origin, a request head it has already
written, a body it has already read, and a response it relays as it comes. So the client is an
asyncio :class:`~asyncio.Protocol` per connection with httptools (llhttp, C) parsing the responses,
and a pool of kept-alive connections per tenant; no request or response object graph, no header
multidict, no URL object, no per-request task or timeout context (:class:`Response` is one small
object, the timers are plain ``call_later`` handles armed only while something waits).

What it guarantees (the forwarder's docstring says why each matters):

- **Tenants never share a connection.** A connection belongs to the tenant it was opened for (an
  ``int`` the caller computes: client connection and credentials hashed) and is lent only to it.
- **Nothing beyond a response is ever read as the next one** (response desynchronisation): a
  connection that receives a byte while idle, or bytes after the end of its response (beyond its
  ``Content-Length``, after its last chunk, a second response), is closed, never lent again.
  What no HTTP/1.1 client can tell apart is an upstream that writes an unasked response *after*
  the connection's next request went out (20 ms late, say): that is read as the next answer, as
  any keep-alive client directly in front of that upstream would read it. It stays within the
  tenant, and the transformer refuses a reply whose id is not the request's where it watches one.
- **A request is sent again only when that is safe** (RFC 9110 section 9.2.2): once, on a fresh
  connection, when it went out on a kept-alive one that closed before a single response byte came,
  and only for an idempotent method; never a POST.
- **Flow control**: a response whose reader falls behind (a slow client) stops the connection's
  reads past :data:`HIGH_WATER` buffered bytes, so the proxy never holds a large body in memory.
- **Limits at every point**: ``connect_timeout`` to connect, ``first_byte_timeout`` to the response
  head, ``idle_timeout`` while a reader waits for body bytes; at most ``max_connections`` open (a
  request past it waits for one), idle connections closed after ``keepalive_timeout`` seconds;
  response heads bounded (:data:`MAX_FIELD_BYTES` per line, :data:`MAX_HEAD_BYTES` in all).

Exceptions (every message names no URL, header value or payload byte, so a log line may quote it)::

    UpstreamHTTPError          the upstream could not answer
    ├── ConnectFailed          no connection could be opened ("cannot connect to host:port: reason")
    ├── Disconnected           the connection closed before the response head ("Server disconnected")
    ├── BadResponse            a head the proxy cannot parse, or too large
    ├── BodyBroken             the body was cut short or malformed
    └── TimedOut               a time limit passed (``connect_timeout``, ``first_byte_timeout``,
                               ``idle_timeout``)
"""

from __future__ import annotations

import asyncio
import collections
import socket
import ssl
from collections.abc import Callable

import httptools

from ..types import RawHeaders

#: Body bytes a response buffers before its connection stops reading (flow control).
HIGH_WATER = 64 * 1024
#: The longest response head line (status line or one field) accepted, as aiohttp's parser.
MAX_FIELD_BYTES = 8190
#: The largest response head accepted.
MAX_HEAD_BYTES = 64 * 1024
#: Methods sent again when a kept-alive connection closed under them before answering.
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"PUT", b"DELETE", b"TRACE"})
#: Statuses whose responses never have a body.
_NO_BODY = frozenset({204, 304})


class UpstreamHTTPError(Exception):
    """The upstream could not answer; the message is safe to log and to show a client."""


class ConnectFailed(UpstreamHTTPError):
    """No connection to the upstream could be opened."""


class Disconnected(UpstreamHTTPError):
    """The connection closed (or was reset) before the response head had come."""


class BadResponse(UpstreamHTTPError):
    """The response head cannot be parsed, or is larger than the proxy reads."""


class BodyBroken(UpstreamHTTPError):
    """The response body was cut short (the connection ended inside it) or is malformed."""


class TimedOut(UpstreamHTTPError):
    """The upstream did not connect, answer or go on within a time limit."""


class Response:
    """One upstream response: its head once :meth:`UpstreamPool.send` returns, its body through
    :meth:`read`. The caller ends it with :meth:`release` (read to its end: the connection may
    serve another request of the same tenant) or :meth:`close` (anything else).

    Attributes:
        status: the HTTP status (never 1xx but 101, which the caller refuses).
        headers: the head's fields as sent, names lowercased, in order.
    """

    __slots__ = (
        "_buffer",
        "_buffered",
        "_conn",
        "_error",
        "_head",
        "_idle",
        "_loan",
        "_timer",
        "_waiter",
        "complete",
        "delimited_by_close",
        "got_bytes",
        "headers",
        "status",
    )

    def __init__(self, conn: _Connection, idle: float | None) -> None:
        self._conn = conn
        self._loan = conn.loans
        self._idle = idle
        self._head: asyncio.Future[None] | None = None
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._error: UpstreamHTTPError | None = None
        self.status = 0
        self.headers: RawHeaders = []
        self.complete = False
        self.delimited_by_close = False
        self.got_bytes = False

    async def read(self) -> bytes:
        """The body bytes that came since the last read (waiting for some if none did); ``b""``
        at the end of the body.

        Raises:
            BodyBroken: the upstream broke off the body.
            TimedOut: no byte came for ``idle_timeout`` seconds while this waited.
        """
        while True:
            if self._buffer:
                buffer, self._buffer = self._buffer, []
                self._buffered = 0
                conn = self._conn
                if conn.paused:
                    conn.resume()
                return buffer[0] if len(buffer) == 1 else b"".join(buffer)
            if self._error is not None:
                raise self._error
            if self.complete:
                return b""
            loop = self._conn.loop
            self._waiter = waiter = loop.create_future()
            if self._idle is not None:
                self._timer = loop.call_later(self._idle, self._silent, f"silent for more than {self._idle:g} s")
            try:
                await waiter
            finally:
                self._waiter = None
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None

    @property
    def ended(self) -> bool:
        """True once the body has come whole and :meth:`read` has handed all of it out (the last
        read's bytes were the body's last)."""
        return self.complete and not self._buffer and self._error is None

    def release(self) -> None:
        """The caller is done with a response it read to its end: the connection goes back to the
        pool when it is clean and kept alive, else it is closed."""
        conn = self._conn
        if conn.response is self:
            conn.finished(self.complete and self._error is None)

    def close(self) -> None:
        """The caller is done with the response, read or not: its connection is closed (unless it
        went back to the pool already, whole and clean)."""
        conn = self._conn
        if conn.response is self:
            conn.abort()

    def close_unless_lent(self) -> None:
        """Close the connection this response came on, even from the pool, unless it has been lent
        for another request since (a response the client side refused may hide more such bytes)."""
        conn = self._conn
        if conn.loans == self._loan:
            conn.abort()

    # -- called by the connection

    def _head_done(self) -> None:
        head = self._head
        if head is not None and not head.done():
            head.set_result(None)

    def _data(self, chunk: bytes) -> None:
        self._buffer.append(chunk)
        self._buffered += len(chunk)
        self._wake()
        if self._buffered > HIGH_WATER:
            self._conn.pause()

    def _ended(self) -> None:
        self.complete = True
        self._wake()

    def _fail(self, error: UpstreamHTTPError) -> None:
        if self._error is not None or self.complete:
            return
        self._error = error
        head = self._head
        if head is not None and not head.done():
            head.set_exception(error)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _silent(self, why: str) -> None:
        self._timer = None
        self._fail(TimedOut(why))
        self._conn.abort()


_TOO_LARGE = "head too large"


def _parse_error(exc: httptools.HttpParserError, head_read: bool) -> UpstreamHTTPError:
    """What a parse failure tells the client: llhttp's reasons are fixed texts (they quote no byte
    of the response), a callback's failure is a head over the bounds."""
    reason = str(exc.__context__ or exc) if isinstance(exc, httptools.HttpParserCallbackError) else str(exc)
    if head_read:
        return BodyBroken(f"the response body was cut short or malformed ({reason})")
    if reason == "Invalid header value char":
        return BadResponse("a response header with a control character")
    return BadResponse(f"a response the proxy cannot parse ({reason})")


class _Connection(asyncio.Protocol):
    """One upstream connection: lent to one request at a time, of one tenant only."""

    __slots__ = (
        "_headers",
        "_head_bytes",
        "idle_since",
        "loans",
        "loop",
        "parser",
        "paused",
        "pool",
        "response",
        "reusable",
        "sent_method",
        "tenant",
        "transport",
    )

    def __init__(self, pool: UpstreamPool, tenant: int) -> None:
        self.pool = pool
        self.tenant = tenant
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: Response | None = None
        self.loans = 0
        self.idle_since = 0.0
        self.paused = False
        self.reusable = False
        self.sent_method = b""
        self._headers: RawHeaders = []
        self._head_bytes = 0

    # -- asyncio

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None or response.complete or response._error is not None:
            self.abort()  # bytes nobody asked for (idle, or beyond the response): never read as an answer
            return
        response.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # a 101 head was read whole: the caller refuses it (on_headers_complete delivered it)
        except httptools.HttpParserError as exc:
            response._fail(_parse_error(exc, head_read=bool(response.status)))
            self.abort()

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost says what it meant

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.reusable = False
        response, self.response = self.response, None
        self.pool.lost(self)
        if response is None or response.complete:
            return
        if not response.status:
            response._fail(Disconnected("Server disconnected"))
        elif response.delimited_by_close:
            response._ended()  # a body without length or chunks ends where the connection does
        else:
            response._fail(BodyBroken("the response body was cut short or malformed (the connection closed)"))

    def pause_writing(self) -> None:
        pass  # (request bodies are bounded and already read: the transport buffers them)

    def resume_writing(self) -> None:
        pass

    # -- httptools callbacks

    def on_message_begin(self) -> None:
        response = self.response
        if response is not None and response.complete:
            self.reusable = False  # a second response behind the first: this connection is out of step
        self._headers = []
        self._head_bytes = 0

    def on_status(self, status: bytes) -> None:
        self._count(len(status))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value))
        self._headers.append((name.lower(), value))

    def _count(self, size: int) -> None:
        # (httptools hands each field whole, however many reads it took; llhttp bounds nothing)
        self._head_bytes += size
        if size > MAX_FIELD_BYTES or self._head_bytes > MAX_HEAD_BYTES:
            raise httptools.HttpParserError(_TOO_LARGE)

    def on_headers_complete(self) -> None:
        response = self.response
        if response is None or response.status:
            return  # (a second response in the same read: data_received closes the connection)
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._headers = []  # an interim response (100 Continue, 103 Early Hints): the final one follows
            return
        response.status = status
        response.headers = self._headers
        keep_alive = self.parser.should_keep_alive()  # (read now: llhttp resets it after the message)
        head = self.sent_method == b"HEAD"
        self.reusable = keep_alive and not head and status != 101
        if head or status in _NO_BODY or status == 101:
            response._ended()  # no body follows (llhttp does not know the request was HEAD)
        elif not any(k == b"content-length" or k == b"transfer-encoding" for k, _ in self._headers):
            response.delimited_by_close = True
            self.reusable = False
        response._head_done()

    def on_body(self, body: bytes) -> None:
        response = self.response
        if response is not None and not response.complete:
            response._data(body)

    def on_message_complete(self) -> None:
        response = self.response
        if response is not None and response.status and not response.complete:
            response._ended()

    # -- the pool's

    def start(self, method: bytes, head: bytes, body: bytes, idle: float | None) -> Response:
        """Lend the connection to a request: write it, return its response (head still to come)."""
        self.loans += 1
        self.sent_method = method
        response = Response(self, idle)
        response._head = self.loop.create_future()
        self.response = response
        transport = self.transport
        assert transport is not None
        if body:
            transport.writelines((head, body))
        else:
            transport.write(head)
        return response

    def finished(self, whole: bool) -> None:
        """The request is over: back to the pool if it ended whole on a kept-alive connection."""
        self.response = None
        if whole and self.reusable and self.transport is not None and not self.transport.is_closing():
            if self.paused:
                self.resume()
            self.pool.give(self)
        else:
            self.abort()

    def pause(self) -> None:
        if not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def abort(self) -> None:
        """Close the connection at once, whatever it holds (idle, lent or in the pool)."""
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Close an idle connection the polite way (FIN, not a reset)."""
        self.reusable = False
        if self.transport is not None:
            self.transport.close()


class UpstreamPool:
    """Connections to one upstream origin, kept alive per tenant.

    Args:
        host: the upstream's host name or address.
        port: its TCP port.
        tls: the TLS context for ``https`` upstreams (``None``: plain TCP).
        connect_timeout: seconds to open a connection (then :class:`TimedOut`).
        first_byte_timeout: seconds from the request to the response head (then :class:`TimedOut`).
        max_connections: open connections at most, idle ones included (0: no limit); a request
            past it closes an idle connection of another tenant, or waits for one to end.
        keepalive_timeout: seconds an idle connection is kept before it is closed (shorter than
            every server's own keep-alive, so the proxy closes first).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None = None,
        connect_timeout: float = 5.0,
        first_byte_timeout: float | None = 300.0,
        max_connections: int = 0,
        keepalive_timeout: float = 4.0,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.connect_timeout = connect_timeout
        self.first_byte_timeout = first_byte_timeout
        self.max_connections = max_connections
        self.keepalive_timeout = keepalive_timeout
        self.loop = asyncio.get_running_loop()
        self._idle: dict[int, list[_Connection]] = {}
        self._open = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._sweeper: asyncio.TimerHandle | None = None
        self._all: set[_Connection] = set()
        self.closed = False

    async def send(
        self,
        tenant: int,
        method: bytes,
        head: bytes,
        body: bytes,
        *,
        idle_timeout: float | None = None,
        on_resend: Callable[[], None] | None = None,
    ) -> Response:
        """Send a request (``head``: its whole head, ``body``: its whole body) on a connection of
        ``tenant``'s and return its response once the head has come.

        Args:
            idle_timeout: seconds :meth:`Response.read` may wait for body bytes.
            on_resend: called when the request is sent a second time (see the module docstring).

        Raises:
            UpstreamHTTPError: as the module docstring says.
        """
        for attempt in (1, 2):
            conn = await self._acquire(tenant)
            reused = conn.loans > 0
            response = conn.start(method, head, body, idle_timeout)
            try:
                await self._head(response)
            except Disconnected:
                if not reused or response.got_bytes or attempt == 2 or method not in IDEMPOTENT:
                    raise
                if on_resend is not None:
                    on_resend()
                continue
            except BaseException:
                response.close()  # (cancelled: the client hung up; or failed) never reused
                raise
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def _head(self, response: Response) -> None:
        head = response._head
        assert head is not None
        limit = self.first_byte_timeout
        if limit is None:
            await head
            return
        timer = self.loop.call_later(limit, response._silent, f"no response head within {limit:g} s")
        try:
            await head
        finally:
            timer.cancel()

    def _take(self, tenant: int) -> _Connection | None:
        """The most recently used idle connection of ``tenant`` that is still good, or ``None``."""
        idle = self._idle.get(tenant)
        if not idle:
            return None
        stale = self.loop.time() - self.keepalive_timeout
        while idle:
            conn = idle.pop()
            transport = conn.transport
            if transport is None or transport.is_closing():
                continue
            if conn.idle_since < stale:
                conn.close()
                continue
            if not idle:
                del self._idle[tenant]
            return conn
        del self._idle[tenant]
        return None

    async def _acquire(self, tenant: int) -> _Connection:
        """An idle connection of ``tenant``'s, else a new one within ``max_connections`` (closing
        another tenant's idle one for the slot, or waiting for one to end).

        Raises:
            ConnectFailed: the upstream cannot be reached, or the pool is closed.
            TimedOut: not within ``connect_timeout``.
        """
        limit = self.max_connections
        while True:
            conn = self._take(tenant)
            if conn is not None:
                return conn
            if not limit or self._open < limit or self._close_one_idle():
                return await self._open_for(tenant)
            waiter = self.loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _open_for(self, tenant: int) -> _Connection:
        """A new connection for ``tenant`` (the caller made room for it)."""
        if self.closed:
            raise ConnectFailed("the proxy is shutting down")
        self._open += 1
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await self.loop.create_connection(
                    lambda: _Connection(self, tenant),
                    self.host,
                    self.port,
                    ssl=self.tls,
                    server_hostname=self.host if self.tls is not None else None,
                )
        except TimeoutError:
            self._closed_one()
            raise TimedOut(f"cannot connect to {self.host}:{self.port} within {self.connect_timeout:g} s") from None
        except OSError as exc:
            self._closed_one()
            reason = exc.strerror or type(exc).__name__
            raise ConnectFailed(f"cannot connect to {self.host}:{self.port}: {reason}") from None
        except BaseException:
            self._closed_one()
            raise
        self._all.add(conn)
        if self.closed:
            conn.abort()
            raise ConnectFailed("the proxy is shutting down")
        return conn

    def give(self, conn: _Connection) -> None:
        """Take back a connection whose response ended whole and clean."""
        if self.closed:
            conn.abort()
            return
        conn.idle_since = self.loop.time()
        self._idle.setdefault(conn.tenant, []).append(conn)
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(self.keepalive_timeout, self._sweep)
        if self._waiters and self._open >= self.max_connections > 0:
            self._wake_one()  # a waiter of another tenant may close it for a slot

    def lost(self, conn: _Connection) -> None:
        """A connection closed (by either side)."""
        if conn in self._all:
            self._all.discard(conn)
            idle = self._idle.get(conn.tenant)
            if idle is not None and conn in idle:
                idle.remove(conn)
                if not idle:
                    del self._idle[conn.tenant]
            self._closed_one()

    def _closed_one(self) -> None:
        self._open -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _close_one_idle(self) -> bool:
        """Close the longest idle connection of any tenant; False when none is idle."""
        oldest: _Connection | None = None
        for idle in self._idle.values():
            if idle and (oldest is None or idle[0].idle_since < oldest.idle_since):
                oldest = idle[0]
        if oldest is None:
            return False
        oldest.close()
        self.lost(oldest)  # (its slot is free now; connection_lost will find it gone)
        return True

    def _sweep(self) -> None:
        """Close the connections idle for ``keepalive_timeout``; come back while any are idle."""
        self._sweeper = None
        stale = self.loop.time() - self.keepalive_timeout
        for idle in list(self._idle.values()):
            for conn in [c for c in idle if c.idle_since <= stale]:
                conn.close()
                self.lost(conn)
        if self._idle:
            self._sweeper = self.loop.call_later(self.keepalive_timeout, self._sweep)

    async def aclose(self) -> None:
        """Close every connection; later requests fail with :class:`ConnectFailed`."""
        self.closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self._all):
            conn.abort()  # (at once: the loop may close next, and a TLS close would need it)
        self._idle.clear()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
