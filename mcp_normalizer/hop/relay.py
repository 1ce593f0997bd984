"""The ``send`` that drives one HTTP response through a transformer, for the middleware and for its
own ``tools/list`` fetch (ASGI ``http.response.start``/``http.response.body`` messages in, the same
out, rewritten where the transformer says)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import sniffio

from ..engine.steps import SLICE_SECONDS
from ..engine.transform import ResponseTransformer
from ..errors import ResponseRefused
from ..types import Message, Send
from ..wire.responses import error_body, respond

#: The largest body piece sent at once.
_PIECE = 256 * 1024
#: The most turns of the loop added after one long slice (:meth:`TransformingSend._between_slices`).
_MAX_TURNS = 16
#: The longest pause after one long slice, in seconds (:meth:`TransformingSend._between_slices`).
_MAX_PAUSE = 0.003


class TransformingSend:
    """The ASGI ``send`` handed to the inner app: runs its response through a
    :class:`~mcp_normalizer.engine.transform.ResponseTransformer` and sends what comes out to ``send``.

    Args:
        send: the client's ``send``.
        transformer: the response's transformer.
        fetched: set when the ``tools/list`` fetch the response may wait for has ended (``None``:
            no fetch runs, nothing waits).
        on_status: called with the response status as the start passes.
        oversize: called once when the response passed through unrewritten for its size.

    The start is held while the transformer says so (a JSON body: its ``content-length`` may
    change); a long message is worked on in slices with the event loop running between them.

    When the transformer refuses the response (:attr:`ResponseTransformer.foreign`: a reply to
    another request), the client gets a JSON-RPC error for each request still unanswered (a 502
    when nothing was sent yet; else error events, and the stream ends), and this ``send`` raises
    :class:`~mcp_normalizer.errors.ResponseRefused`, now and on every later call.
    """

    __slots__ = (
        "_asyncio",
        "_counted",
        "_fetched",
        "_on_status",
        "_oversize",
        "_send",
        "_start",
        "_t",
        "refused",
        "started",
    )

    def __init__(
        self,
        send: Send,
        transformer: ResponseTransformer,
        fetched: anyio.Event | None,
        on_status: Callable[[int], None] | None = None,
        oversize: Callable[[], None] | None = None,
    ) -> None:
        self._send = send
        self._t = transformer
        self._asyncio: bool | None = None  # (looked up once a long message needs a pause)
        self._fetched = fetched
        self._on_status = on_status
        self._oversize = oversize
        self._counted = False
        self._start: Message | None = None
        self.started = False  # has the response start gone to the client?
        self.refused: str | None = None  # why the rest of the response was refused, once it was

    async def _between_slices(self) -> None:
        """Let every other task run before the next slice of a long message: two turns of the
        loop, one more for every slice's worth of time the last slice took, and after a slice that
        ran long (one pass over a huge text, an uninterruptible step) a pause of a quarter of its
        time (at most :data:`_MAX_PAUSE`). A call of another session needs several turns, some of
        them waiting for bytes in flight (its request, the upstream's answer): it gets them
        between two long steps, not one turn after each. Measured, a small call of another session
        during a 50,000-tool list: typical 11 -> 4 ms, second-worst of about 120 from 35 to 12 ms;
        the list takes about 10 ms longer. Under asyncio, its own ``sleep(0)`` (anyio's
        checkpoint looks up the running library at every call)."""
        if self._asyncio is None:
            self._asyncio = sniffio.current_async_library() == "asyncio"
        spent = self._t.spent
        turns = 2 + min(int(spent / SLICE_SECONDS), _MAX_TURNS)
        for _ in range(turns):
            if self._asyncio:
                await asyncio.sleep(0)
            else:
                await anyio.lowlevel.checkpoint()
        if spent > 2 * SLICE_SECONDS:
            pause = min(spent / 4, _MAX_PAUSE)
            await (asyncio.sleep(pause) if self._asyncio else anyio.sleep(pause))

    async def __call__(self, message: Message) -> None:
        if self.refused is not None:
            raise ResponseRefused(self.refused)
        kind = message["type"]
        t = self._t
        if kind == "http.response.start":
            if self._on_status is not None:
                self._on_status(message["status"])
            t.start(message["status"], list(message.get("headers", [])))
            self._start = message
            if not t.hold_start:
                await self._send_start()
            return
        if kind != "http.response.body":
            await self._send(message)
            return
        more = bool(message.get("more_body", False))
        out = t.feed(message.get("body", b""))
        if not more:
            out += t.finish()
        while t.stalled or t.busy:
            if t.stalled:
                if self._fetched is not None:  # else no fetch runs: nothing to wait for
                    await self._fetched.wait()
            else:
                await self._between_slices()
            out += t.resume()
        if t.foreign is not None:
            await self._refuse(out, t.foreign)
        if self._start is not None and not t.hold_start:
            await self._send_start()
        if not more:
            self.count_oversize()  # before the client has it all, so a scrape after it sees the count
        if self._start is None and (out or not more):
            # A huge rewritten body goes out in pieces: the server copies each piece into its
            # buffers, and other sessions run between them (one 16 MiB copy holds them all).
            if len(out) > _PIECE:
                view = memoryview(out)
                for start in range(0, len(out) - _PIECE, _PIECE):
                    piece = bytes(view[start : start + _PIECE])
                    await self._send({"type": "http.response.body", "body": piece, "more_body": True})
                out = bytes(view[start + _PIECE :])
            await self._send({"type": "http.response.body", "body": out, "more_body": more})

    async def _refuse(self, out: bytes, why: str) -> None:
        """Answer the requests still unanswered with a JSON-RPC error each, end the response, and
        raise :class:`ResponseRefused` (see the class docstring)."""
        message = f"the upstream answered with {why}: refused, and its connection closed"
        self.refused = message
        ids = self._t.unanswered()
        if not self.started:
            self._start = None
            one = self._t.exchange.sole is not None and len(ids) == 1
            await respond(self._send, 502, error_body(ids[0] if one else ids, message))
        else:
            events = b"".join(b"event: message\ndata: " + error_body(i, message) + b"\n\n" for i in ids)
            await self._send({"type": "http.response.body", "body": out + events, "more_body": False})
        raise ResponseRefused(message)

    def count_oversize(self) -> None:
        """Count, once, a response passed through unrewritten for its size."""
        if self._t.oversize and not self._counted and self._oversize is not None:
            self._counted = True
            self._oversize()

    async def _send_start(self) -> None:
        assert self._start is not None
        start = {**self._start, "headers": self._t.headers}
        self._start = None
        self.started = True
        await self._send(start)
