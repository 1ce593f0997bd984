"""Requests the proxy makes of its upstream on a client's behalf, and the answers it writes itself.

The era bridge (:mod:`mcp_normalizer.hop.era_bridge`) and the modern front
(:mod:`mcp_normalizer.hop.modern_front`) both speak to the upstream in another form than the client
did: each sends its own requests through the inner app (the forwarder, with every bound it has) and
answers the client with messages it makes. This module is what they share:

- :class:`UpstreamCall`: one request through the inner app, run in its own task, its response read
  as it comes (bounded: at most :data:`QUEUE` ASGI messages wait unread); :meth:`UpstreamCall.cancel`
  is a hang-up the forwarder sees (it closes the upstream connection: how 2026-07-28 cancels);
- :class:`ClientStream`: the client's response, JSON until something must stream;
- the headers such a request carries (:func:`upstream_headers`), its scope (:func:`subscope`), and
  relaying an upstream answer whole (:func:`relay_whole`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ..errors import DecodeError
from ..types import HANG_UP, JSON, ASGIApp, JSONObject, Message, RawHeaders, Receive, Scope, Send
from ..wire.jsoncodec import dumps, loads
from ..wire.jsonrpc import id_key
from ..wire.responses import error_body, respond
from ..wire.sse import SSESplitter, parse_event

__all__ = [
    "SSE_HEAD",
    "ClientStream",
    "ClientTooSlow",
    "UpstreamCall",
    "deadline_send",
    "hang_up",
    "message_of",
    "relay_whole",
    "response_of",
    "subscope",
    "upstream_headers",
]

#: Request headers never copied from the client's request to the proxy's own (it sets its own).
DROP = frozenset(
    {
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"mcp-method",
        b"mcp-name",
        b"last-event-id",
        b"content-length",
        b"content-type",
        b"accept",
        b"transfer-encoding",
    }
)
_ACCEPT = (b"accept", b"application/json, text/event-stream")
_JSON_TYPE = (b"content-type", b"application/json")
#: The head of an SSE response the proxy writes itself.
SSE_HEAD = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
#: Upstream ASGI messages that may wait unread (each a chunk of at most one socket read).
QUEUE = 16


class UpstreamCall:
    """One request through the inner app, its response read as it comes; it may outlive the client
    request that started it (the modern front's parked questions).

    The inner app runs in its own task with a ``receive`` that hands out the body once and then
    waits: :meth:`cancel` makes it report ``http.disconnect``, which the forwarder takes as the
    client's hang-up (the upstream connection is closed).

    Attributes:
        status: the response's status (0 until its head came, or when none came).
        headers: the response's headers.
        last_event_id: the last SSE event id :meth:`messages` read (SEP-1699 resumption), if any.
        retry_ms: the last ``retry`` field :meth:`messages` read, in milliseconds, if any.
    """

    def __init__(self, inner: ASGIApp, scope: Scope, body: bytes) -> None:
        self._queue: asyncio.Queue[Message] = asyncio.Queue(QUEUE)
        self._gone = asyncio.Event()
        self._sent = False
        self._ended = False
        self.status = 0
        self.headers: RawHeaders = []
        self.splitter: SSESplitter | None = None
        self.last_event_id: bytes | None = None
        self.retry_ms: int | None = None
        self._task = asyncio.create_task(self._run(inner, scope, body))

    async def _run(self, inner: ASGIApp, scope: Scope, body: bytes) -> None:
        async def receive() -> Message:
            if not self._sent:
                self._sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await self._gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            await self._queue.put(message)

        try:
            await inner(scope, receive, send)
        finally:
            await self._queue.put({"type": "end"})  # (aclose makes room if nobody reads)

    async def _next(self) -> Message:
        if self._ended:
            return {"type": "end"}
        message = await self._queue.get()
        if message["type"] == "end":
            self._ended = True
        return message

    async def start(self) -> int:
        """Wait for the response's head; its status (0: the inner app ended without one)."""
        message = await self._next()
        if message["type"] != "http.response.start":
            self._ended = True
            return 0
        self.status = int(message["status"])
        self.headers = list(message.get("headers", []))
        return self.status

    def header(self, name: bytes) -> str | None:
        """A response header's value (``name`` lower case)."""
        return next((v.decode("latin-1") for k, v in self.headers if k.lower() == name), None)

    @property
    def content_type(self) -> bytes:
        """The response's media type, lower case, without parameters."""
        value = next((v for k, v in self.headers if k.lower() == b"content-type"), b"")
        return value.split(b";", 1)[0].strip().lower()

    @property
    def streaming(self) -> bool:
        """The response is an SSE stream."""
        return self.content_type == b"text/event-stream"

    async def chunks(self) -> AsyncIterator[bytes]:
        """The response body's chunks, until it ends."""
        while True:
            message = await self._next()
            if message["type"] != "http.response.body":
                return
            chunk: bytes = message.get("body", b"")
            if chunk:
                yield chunk
            if not message.get("more_body", False):
                self._ended = True
                return

    async def read(self, limit: int) -> tuple[bytes, bool]:
        """The whole body, or its first ``limit``-odd bytes and ``True`` when it is longer."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                return b"".join(parts), True
        return b"".join(parts), False

    async def messages(self, limit: int) -> AsyncIterator[JSONObject]:
        """The JSON-RPC messages of an SSE response, as they come (its splitter kept: a call read
        again goes on where it stopped); an event past ``limit`` bytes ends them."""
        if self.splitter is None:
            self.splitter = SSESplitter(limit)
        async for chunk in self.chunks():
            for block in self.splitter.feed(chunk):
                event = parse_event(block)
                if event.id is not None:
                    self.last_event_id = event.id
                retry = _retry(block)
                if retry is not None:
                    self.retry_ms = retry
                parsed = message_of(event.data) if event.data is not None else None
                if parsed is not None:
                    yield parsed
            if self.splitter.overflowed:
                return

    def cancel(self) -> None:
        """Hang up on the upstream request (the forwarder closes its connection)."""
        self._gone.set()

    def cancel_on(self, event: asyncio.Event) -> asyncio.Future[Any]:
        """Hang up once ``event`` is set; the waiter returned (cancel it when the call is over)."""
        waiter: asyncio.Future[Any] = asyncio.ensure_future(event.wait())
        waiter.add_done_callback(lambda _: self._gone.set())
        return waiter

    async def aclose(self) -> None:
        """Hang up if still running, and wait for the inner app to end."""
        self._gone.set()
        while not self._task.done():
            try:
                self._queue.get_nowait()  # unblock a send waiting on a full queue
            except asyncio.QueueEmpty:
                await asyncio.wait({self._task}, timeout=0.05)
        if not self._task.cancelled():
            self._task.exception()  # retrieved: the forwarder reports its own failures


class ClientStream:
    """The response to the client of one request the proxy answers: JSON until something must stream.

    Args:
        send: the client's ``send``.
        accepts_sse: the client's ``Accept`` takes ``text/event-stream``.
    """

    def __init__(self, send: Send, accepts_sse: bool = True) -> None:
        self.send = send
        self.accepts_sse = accepts_sse
        self.streaming = False
        self.started = False

    async def open(self) -> None:
        """Start the response as an SSE stream (its head), unless it is one already."""
        if not self.streaming:
            await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEAD})
            self.streaming = self.started = True

    async def event(self, message: JSONObject | bytes) -> None:
        """Send one SSE event (``event: message``) carrying ``message`` (a JSON-RPC message, or its bytes)."""
        await self.open()
        data = dumps(message) if isinstance(message, dict) else message
        await self.send(
            {"type": "http.response.body", "body": b"event: message\ndata: " + data + b"\n\n", "more_body": True}
        )

    async def raw(self, data: bytes) -> None:
        """Send ``data`` on the SSE stream as it is (bytes of the server's own stream)."""
        await self.open()
        if data:
            await self.send({"type": "http.response.body", "body": data, "more_body": True})

    async def finish(self, message: JSONObject | bytes | None) -> None:
        """End the response with ``message`` (a JSON-RPC message, or its bytes): the stream's last
        event, or the whole JSON body; ``None``: end the stream with nothing more (202 when none began)."""
        data = dumps(message) if isinstance(message, dict) else message
        if self.streaming:
            if data is not None:
                await self.event(data)
            await self.send({"type": "http.response.body", "body": b""})
        elif data is not None:
            self.started = True
            await respond(self.send, 200, data)
        else:
            self.started = True
            await respond(self.send, 202, b"", None)


class ClientTooSlow(Exception):
    """The client took no bytes of a response the proxy writes itself for ``send_timeout`` seconds."""


def deadline_send(send: Send, limit: float) -> Send:
    """``send`` bounded by ``limit`` seconds a message (``[proxy] send_timeout``; 0: unbounded): a
    client that stops reading a stream the proxy writes itself raises :class:`ClientTooSlow`, so
    the writer ends, its upstream request with it, and the server closes the connection."""
    if limit <= 0:
        return send

    async def bounded(message: Message) -> None:
        try:
            await asyncio.wait_for(send(message), limit)
        except TimeoutError:
            raise ClientTooSlow(f"the client took no bytes for {limit:g} s (send_timeout)") from None

    return bounded


async def hang_up(receive: Receive, *events: asyncio.Event) -> None:
    """Set ``events`` when the client hangs up (its ``http.disconnect``)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    for event in events:
        event.set()


def upstream_headers(scope: Scope, extra: RawHeaders) -> RawHeaders:
    """The client's request headers less the ones the proxy sets (:data:`DROP`, ``Mcp-Param-*``),
    with ``Accept`` for JSON and SSE, a JSON ``Content-Type`` and ``extra``."""
    headers = [(k, v) for k, v in scope["headers"] if k not in DROP and not k.startswith(b"mcp-param-")]
    return [*headers, _ACCEPT, _JSON_TYPE, *extra]


def subscope(scope: Scope, headers: RawHeaders, method: str = "POST") -> Scope:
    """The client's scope for a request of the proxy's own: ``method``, ``headers``, and no hang-up
    hook (the client's connection is not this request's)."""
    out = {k: v for k, v in scope.items() if k != HANG_UP}
    out["method"] = method
    out["headers"] = headers
    return out


def message_of(body: bytes) -> JSONObject | None:
    """The JSON object ``body`` holds, or ``None`` (not JSON, or not an object)."""
    try:
        value = loads(body)
    except DecodeError:
        return None
    return value if isinstance(value, dict) else None


async def response_of(call: UpstreamCall, request_id: JSON, limit: int) -> JSONObject | None:
    """The JSON-RPC response to ``request_id`` in a JSON or SSE answer (at most ``limit`` bytes), or ``None``."""
    if call.streaming:
        wanted = id_key(request_id)
        async for message in call.messages(limit):
            if "method" not in message and id_key(message.get("id")) == wanted:
                return message
        return None
    raw, longer = await call.read(limit)
    return None if longer else message_of(raw)


async def relay_whole(send: Send, call: UpstreamCall, body: bytes, *, rest: bool = False) -> None:
    """Send the upstream's answer as it came: its status and headers, ``body`` (what was read of it),
    and with ``rest`` the rest of its body (the head then as it came, ``Content-Length`` included:
    the bytes are the upstream's); 502 when no answer came."""
    if not call.status:
        await respond(send, 502, error_body(None, "the upstream gave no answer", -32603))
        return
    if not rest:
        head = [(k, v) for k, v in call.headers if k.lower() not in (b"content-length", b"transfer-encoding")]
        await respond(send, call.status, body, None, headers=head)
        return
    await send({"type": "http.response.start", "status": call.status, "headers": call.headers})
    if body:
        await send({"type": "http.response.body", "body": body, "more_body": True})
    async for chunk in call.chunks():
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def _retry(block: bytes) -> int | None:
    """The ``retry:`` field of an SSE event block (milliseconds), if it has a valid one."""
    if b"retry:" not in block:
        return None
    for line in block.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
        if line.startswith(b"retry:"):
            value = line[6:].strip()
            if value.isdigit():
                return int(value)
    return None
