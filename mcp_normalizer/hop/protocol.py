"""``HttpProtocol``: the listener's HTTP/1.1 protocol on httptools, with the guards built in.

uvicorn runs it (``uvicorn.Config(http=...)``): its server still owns the sockets, the lifespan, the
signals, the workers and the graceful shutdown (the protocol keeps uvicorn's contract: the
constructor's arguments, ``server_state.connections`` and ``.tasks``, :meth:`HttpProtocol.shutdown`).
What it replaces is uvicorn's own httptools protocol and the guard mixin around it, for what a
proxy pays on every request: one small request object and no ``asyncio.Event`` (a future only
when ``receive`` must wait), one timer per connection for every wait (the next head, the body,
keep-alive), no per-callback wrapper, and the hang-up hook (:data:`mcp_normalizer.types.HANG_UP`).

The guards (:class:`~mcp_normalizer.hop.guards.Guards`), as nginx enforces them and uvicorn does not:
a whole head within ``head_timeout`` (408), at most ``body_timeout`` between two reads of a body
(408), a head no larger than ``max_header_bytes`` (431, also while it is still arriving), trailer
fields dropped and bounded the same way, at most ``max_connections`` open connections (503 at
once), and a closed connection whose client stops reading aborted after ``send_timeout``
(:class:`~mcp_normalizer.hop.guards.Coalescing`). Each refusal is counted and logged once per
cause and peer per interval (:class:`~mcp_normalizer.ops.refusals.RefusalLog`). A refusal never
cuts the answers before it: with a response in progress, it waits until the requests before the
refused one are answered whole; a pipelined body's clock starts when its request's turn comes.

The ASGI side is uvicorn's (HTTP scope 2.3, ``http.request``/``http.disconnect``, ``Expect:
100-continue`` answered on the first ``receive``, chunked responses when no length is given (for an
HTTP/1.0 client, a body the close ends), HEAD,
pipelined requests answered in order, an app that raises gets a 500 or a closed connection).
"""

from __future__ import annotations

import asyncio
import collections
import http
import logging
import re
import urllib.parse
from collections.abc import Callable
from typing import Any, ClassVar

import httptools

from ..ops.refusals import BODY_TIMEOUT, CONNECTIONS, HEAD_SIZE, HEAD_TIMEOUT, Cause
from ..types import CONNECTION, HANG_UP, ASGIApp, Message
from .guards import (
    BODY_TIMEOUT_ANSWER,
    HEAD_TIMEOUT_ANSWER,
    OVER_LIMIT,
    TOO_LARGE,
    Coalescing,
    Guards,
    answer_and_close,
)

logger = logging.getLogger("uvicorn.error")  # (where uvicorn's protocol wrote the same lines)

#: Request body bytes buffered before the connection stops reading (uvicorn's mark).
HIGH_WATER = 65536
_HEADER_NAME = re.compile(b'[\x00-\x1f\x7f()<>@,;:\\[\\]={} \t\\\\"]')
_HEADER_VALUE = re.compile(b"[\x00-\x08\x0a-\x1f\x7f]")


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (status, phrase)


_STATUS_LINES = {status: _status_line(status) for status in range(100, 600)}
_DISCONNECT: Message = {"type": "http.disconnect"}
_BAD_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 29\r\n"
    b"connection: close\r\n\r\nInvalid HTTP request received."
)


class _Request:
    """One request on a connection: its scope, its body as it comes, its response as it goes."""

    __slots__ = (
        "body",
        "body_size",
        "chunked",
        "complete",
        "continue_",
        "delivered",
        "disconnected",
        "hang_up",
        "keep_alive",
        "more_body",
        "protocol",
        "remaining",
        "scope",
        "started",
        "waiter",
    )

    def __init__(self, protocol: HttpProtocol, scope: dict[str, Any], keep_alive: bool, continue_: bool) -> None:
        self.protocol = protocol
        self.scope = scope
        self.keep_alive = keep_alive
        self.continue_ = continue_  # Expect: 100-continue, answered on the first receive()
        self.body: list[bytes] = []
        self.body_size = 0
        self.more_body = True
        self.delivered = False  # the last body message went to the app
        self.disconnected = False
        self.started = False
        self.complete = False
        self.chunked = False
        self.remaining = 0
        self.waiter: asyncio.Future[None] | None = None
        self.hang_up: Callable[[], None] | None = None

    def hook(self, callback: Callable[[], None] | None) -> None:
        """:data:`~mcp_normalizer.types.HANG_UP`: the callback to call if the connection is lost
        before this request's response is complete (``None``: none)."""
        self.hang_up = callback

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def receive(self) -> Message:
        """ASGI ``receive``: the body as it came (``more_body`` while more is to come), then
        ``http.disconnect`` once the client left or the response is complete."""
        protocol = self.protocol
        if self.continue_:
            self.continue_ = False
            if not protocol.transport.is_closing():
                protocol.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        while not (self.disconnected or self.complete) and (self.delivered or (not self.body and self.more_body)):
            protocol.resume_reading()
            self.waiter = protocol.loop.create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        if self.disconnected or self.complete:
            return _DISCONNECT
        body = self.body[0] if len(self.body) == 1 else b"".join(self.body)
        self.body = []
        self.body_size = 0
        self.delivered = not self.more_body
        protocol.resume_reading()
        return {"type": "http.request", "body": body, "more_body": self.more_body}

    async def send(self, message: Message) -> None:
        """ASGI ``send``: the head, then the body (chunked when the head gave no length).

        Raises:
            RuntimeError: a message out of order, a header that cannot be written, a body longer
                or shorter than its ``Content-Length`` (the app's fault: uvicorn raises the same).
        """
        protocol = self.protocol
        if protocol.write_paused and not self.disconnected:
            await protocol.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.started:
            if kind != "http.response.start":
                raise RuntimeError(f"Expected ASGI message 'http.response.start', but got '{kind}'.")
            self.started = True
            self.continue_ = False
            protocol.transport.write(self._head(message["status"], message.get("headers", ())))
            return
        if self.complete:
            raise RuntimeError(f"Unexpected ASGI message '{kind}' sent, after response already completed.")
        if kind != "http.response.body":
            raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{kind}'.")
        body = message.get("body", b"")
        more_body = message.get("more_body", False)
        if self.scope["method"] == "HEAD":
            self.remaining = 0
        elif self.chunked:
            if body and more_body:
                protocol.transport.write(b"%x\r\n%s\r\n" % (len(body), body))
            elif body:
                protocol.transport.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            elif not more_body:
                protocol.transport.write(b"0\r\n\r\n")
        elif self.remaining < 0:  # delimited by the close (an HTTP/1.0 client, no length given)
            if body:
                protocol.transport.write(body)
        else:
            if len(body) > self.remaining:
                raise RuntimeError("Response content longer than Content-Length")
            self.remaining -= len(body)
            if body:
                protocol.transport.write(body)
        if not more_body:
            if self.remaining > 0:
                raise RuntimeError("Response content shorter than Content-Length")
            self.complete = True
            self.wake()  # a receive() waiting for the end returns http.disconnect
            if not self.keep_alive:
                protocol.transport.close()
            protocol.response_complete()

    def _head(self, status: int, headers: Any) -> bytes:
        lines = [_STATUS_LINES.get(status) or _status_line(status)]
        chunked: bool | None = None
        close = False
        for name, value in (*self.protocol.default_headers, *headers):
            if _HEADER_NAME.search(name):
                raise RuntimeError("Invalid HTTP header name.")
            if _HEADER_VALUE.search(value):
                raise RuntimeError("Invalid HTTP header value.")
            name = name.lower()
            if name == b"content-length" and chunked is None:
                self.remaining = int(value.decode())
                chunked = False
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                self.remaining = 0
                chunked = True
            elif name == b"connection" and b"close" in [token.lower().strip() for token in value.split(b",")]:
                self.keep_alive = False
                close = True
            lines += (name, b": ", value, b"\r\n")
        if not self.keep_alive and not close:
            lines.append(b"connection: close\r\n")
        if chunked is None and self.scope["method"] != "HEAD" and status not in (204, 304):
            if self.scope["http_version"] == "1.0":
                # an HTTP/1.0 client knows no chunked coding: the close ends the body (RFC 9112 section 6.3)
                self.remaining = -1
            else:
                chunked = True
                lines.append(b"transfer-encoding: chunked\r\n")
        self.chunked = bool(chunked)
        lines.append(b"\r\n")
        return b"".join(lines)


class HttpProtocol(asyncio.Protocol):
    """One client connection (see the module docstring); uvicorn makes one per connection.

    The class attributes ``guards`` and ``limit`` (the connection limit) are set by
    :func:`mcp_normalizer.hop.server.guarded_protocol`.
    """

    guards: ClassVar[Guards] = Guards()
    limit: ClassVar[int] = 1024

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any], _loop: Any = None) -> None:
        if not config.loaded:
            config.load()
        self.app: ASGIApp = config.loaded_app
        self.loop = _loop or asyncio.get_event_loop()
        self.server_state = server_state
        self.connections: set[Any] = server_state.connections
        self.tasks: set[asyncio.Task[None]] = server_state.tasks
        self.default_headers: list[tuple[bytes, bytes]] = server_state.default_headers
        self.app_state = app_state
        self.root_path: str = config.root_path
        self.keep_alive_timeout: float = config.timeout_keep_alive
        self.parser = httptools.HttpRequestParser(self)
        try:  # answer the first of pipelined requests sent after a close (uvicorn does the same)
            self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
        except AttributeError:  # pragma: no cover - httptools < 0.6.3
            pass
        self.transport: Coalescing = None  # type: ignore[assignment]
        self.server: tuple[str, int] | None = None
        self.client: tuple[str, int] | None = None
        self.scheme = "http"
        self.active: _Request | None = None  # the request the app is answering
        self.parsing: _Request | None = None  # the request whose body is being read
        self.pipeline: collections.deque[_Request] = collections.deque()
        self.read_paused = False
        self.write_paused = False
        self._drained: asyncio.Future[None] | None = None
        # the request being parsed
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._continue = False
        # the guards
        self._timer: asyncio.TimerHandle | None = None
        self._idle_since = 0.0
        self._head_bytes = 0
        self._in_message = False
        self._head_done = False
        self._trailer_bytes = 0
        self._refused = False  # refused: what the client sends is dropped
        self._deferred: bytes | None = None  # a refusal to send once the responses before it are out

    # -- asyncio

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        raw: Any = transport
        self.connections.add(self)
        self.transport = Coalescing(raw, self.loop, self.guards.send_timeout)
        self.server = _address(raw.get_extra_info("sockname"))
        self.client = _address(raw.get_extra_info("peername"))
        self.held: dict[str, object] = {}  # (mcp_normalizer.types.CONNECTION)
        self.scheme = "https" if raw.get_extra_info("sslcontext") else "http"
        if len(self.connections) > self.limit:
            self._refused = True  # not lingering: under a flood of connections, descriptors are what is short
            self._refused_for(CONNECTIONS, f"{self.limit} open connections")
            raw.write(OVER_LIMIT)
            raw.close()
            return
        self._idle_since = self.loop.time()
        self._arm(self.guards.head_timeout, self._head_late)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        in_head = self._in_message and not self._head_done  # (a head began in an earlier read)
        in_body = self._in_message and self._head_done
        before = self.parsing
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # no upgrade is relayed: the request goes on as plain HTTP (its upgrade header is hop-by-hop)
        except httptools.HttpParserError:
            logger.warning("Invalid HTTP request received.")
            # (the request whose body is being read, or none: the bad bytes begin a request)
            self._refuse(self.parsing if self._in_message and self._head_done else None, _BAD_REQUEST)
            return
        if self.transport.is_closing():
            self._disarm()
            return
        limit = self.guards.max_header_bytes
        parsing = self.parsing
        if self._trailer_bytes > limit:
            self._refused_for(HEAD_SIZE, f"trailer fields over {limit} bytes")
            self._refuse(parsing, TOO_LARGE)
            return
        if parsing is not before or in_body:
            self._body_progress()
        if self._in_message and not self._head_done:  # a head is arriving
            # Its size: every byte since it began, or, when it began in this read, the whole read
            # (an upper bound: the read may begin with the end of requests before it).
            self._head_bytes = self._head_bytes + len(data) if in_head else len(data)
            if self._head_bytes > limit:
                self._refused_for(HEAD_SIZE, f"over {limit} bytes")
                self._refuse(None, TOO_LARGE)

    def eof_received(self) -> None:
        pass  # (the transport closes itself, as under uvicorn)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.discard(self)
        self._disarm()
        gone = []
        for request in dict.fromkeys((self.active, self.parsing, *self.pipeline)):
            if request is not None:
                if not request.complete:
                    request.disconnected = True
                    if request.hang_up is not None:
                        gone.append(request.hang_up)
                request.wake()
        self.write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if exc is None:
            self.transport.close()
        for callback in gone:
            callback()

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    async def drain(self) -> None:
        """Wait until the transport takes writes again."""
        if self._drained is None or self._drained.done():
            self._drained = self.loop.create_future()
        await asyncio.shield(self._drained)

    def pause_reading(self) -> None:
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()

    # -- httptools' callbacks

    def on_message_begin(self) -> None:
        self._in_message, self._head_done, self._trailer_bytes = True, False, 0
        self._url = b""
        self._headers = []
        self._continue = False

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._head_done:
            # A trailer field (RFC 9110 section 6.5): it would reach headers the Host and Origin
            # checks read already. Dropped, counted against the head bound.
            self._trailer_bytes += len(name) + len(value) + 4
            return
        name = name.lower()
        value = value.rstrip(b" \t")  # (llhttp keeps trailing whitespace, RFC 9110 section 5.5 does not)
        if name == b"expect" and value.lower() == b"100-continue":
            self._continue = True
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._head_done, self._head_bytes = True, 0
        parser = self.parser
        version = parser.get_http_version()
        url = httptools.parse_url(self._url)
        raw_path = url.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": version,
            "server": self.server,
            "client": self.client,
            "scheme": self.scheme,
            "method": parser.get_method().decode("ascii"),
            "root_path": self.root_path,
            "path": self.root_path + path,
            "raw_path": self.root_path.encode("ascii") + raw_path,
            "query_string": url.query or b"",
            "headers": self._headers,
            "state": self.app_state.copy(),
        }
        keep_alive = version != "1.0" and parser.should_keep_alive()
        request = self.parsing = _Request(self, scope, keep_alive, self._continue)
        scope[HANG_UP] = request.hook  # (the request's own: a hook left set by another request never fires for it)
        scope[CONNECTION] = self.held
        if self.active is None:
            self._start(request)
        else:  # pipelined: answered after the one before it
            self.pipeline.append(request)
            self.pause_reading()

    def on_body(self, body: bytes) -> None:
        request = self.parsing
        if request is None or request.complete:
            return
        request.body.append(body)
        request.body_size += len(body)
        if request.body_size > HIGH_WATER:
            self.pause_reading()
        request.wake()

    def on_message_complete(self) -> None:
        self._in_message = False
        request = self.parsing
        if request is None or request.complete:
            return
        request.more_body = False
        request.wake()

    # -- requests

    def _start(self, request: _Request) -> None:
        self.active = request
        self._disarm()
        task = self.loop.create_task(self._run(request))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    async def _run(self, request: _Request) -> None:
        try:
            await self.app(request.scope, request.receive, request.send)
        except BaseException as exc:
            logger.error("Exception in ASGI application\n", exc_info=exc)
            if not request.started:
                await self._internal_error(request)
            else:
                self.transport.close()
        else:
            if not request.started and not request.disconnected:
                logger.error("ASGI callable returned without starting response.")
                await self._internal_error(request)
            elif not request.complete and not request.disconnected:
                logger.error("ASGI callable returned without completing response.")
                self.transport.close()

    @staticmethod
    async def _internal_error(request: _Request) -> None:
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", b"21"),
            (b"connection", b"close"),
        ]
        await request.send({"type": "http.response.start", "status": 500, "headers": headers})
        await request.send({"type": "http.response.body", "body": b"Internal Server Error", "more_body": False})

    def response_complete(self) -> None:
        """The active request's response went out whole: the next request, or the next head."""
        self.server_state.total_requests += 1
        self.active = None
        if self.transport.is_closing():
            return
        if self.pipeline:
            request = self.pipeline.popleft()
            self._start(request)
            if request is self.parsing and request.more_body and not self._refused:
                self.resume_reading()
                self._arm(self.guards.body_timeout, self._body_late)  # its body's wait begins now
            elif not self._refused:
                self.resume_reading()
            return
        if self._deferred is not None:  # a refusal waited for the responses before it
            answer, self._deferred = self._deferred, None
            self._timer = answer_and_close(self.transport, self.loop, answer)
            return
        self.resume_reading()
        if not self._in_message:
            self._head_bytes = 0  # (a pipelined head begun meanwhile keeps its count)
        self._idle_since = self.loop.time()
        # keep-alive closes an idle connection sooner than the head timeout refuses a slow head
        self._arm(min(self.keep_alive_timeout, self.guards.head_timeout), self._head_late)

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: close an idle connection now, a busy one after its response."""
        active = self.active
        if active is None or active.complete:
            self.transport.close()
        else:
            active.keep_alive = False

    # -- the guards

    def _body_progress(self) -> None:
        request = self.parsing
        if request is not None and request.more_body and not request.complete:
            if request is self.active:  # (a pipelined body is not read until its turn: no clock yet)
                self._arm(self.guards.body_timeout, self._body_late)
        elif self.active is not None:
            self._disarm()

    def _arm(self, seconds: float, then: Callable[[], None]) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, then)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_late(self) -> None:
        self._timer = None
        if self.active is not None:
            return  # a request is being served
        if not self._head_bytes:
            self.transport.close()  # nothing was asked (keep-alive over): nothing to answer
            return
        left = self._idle_since + self.guards.head_timeout - self.loop.time()
        if left > 0.001:  # keep-alive ran out while a head was arriving: it has the head timeout
            self._arm(left, self._head_late)
            return
        self._refused_for(HEAD_TIMEOUT, f"not complete after {self.guards.head_timeout:g} s")
        self._refuse(None, HEAD_TIMEOUT_ANSWER)

    def _body_late(self) -> None:
        self._timer = None
        request = self.parsing
        if request is None or not request.more_body or request.complete:
            return
        self._refused_for(BODY_TIMEOUT, f"stalled for {self.guards.body_timeout:g} s")
        self._refuse(request, BODY_TIMEOUT_ANSWER)

    def _refused_for(self, cause: Cause, detail: str) -> None:
        """Count and log a refusal by the guards."""
        self.guards.refusals.refused(cause, self.client[0] if self.client else None, detail)

    def _refuse(self, request: _Request | None, answer: bytes) -> None:
        """Refuse ``request`` (``None``: one whose head is not complete) with ``answer``, then close
        (:func:`~mcp_normalizer.hop.guards.answer_and_close`); what the client still sends is dropped.

        The request's app, if it runs, sees the client leave (nothing is forwarded). Requests before
        it on the connection are answered whole first: while one is being answered, the refusal
        waits for the pipeline before it to drain (:meth:`response_complete`). A refused request
        whose own response has begun is cut instead (its head is out, no other answer can follow).
        """
        self._disarm()
        if self.transport.is_closing() or self._refused:
            return
        self._refused = True
        if request is not None:
            request.disconnected = True
            request.wake()  # the app's receive() returns http.disconnect
            if request in self.pipeline:  # never started: it and any parsed after it are dropped
                while self.pipeline:
                    dropped = self.pipeline.pop()
                    dropped.disconnected = True
                    if dropped is request:
                        break
        active = self.active
        if active is not None and active is not request:
            self.pause_reading()
            self._deferred = answer
            return
        if request is not None and request.started:
            answer = b""
        self._timer = answer_and_close(self.transport, self.loop, answer)


def _address(value: Any) -> tuple[str, int] | None:
    """An ASGI ``server``/``client`` pair from a socket address (``None`` for a Unix socket)."""
    if isinstance(value, tuple) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return None
