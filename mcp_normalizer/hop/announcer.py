"""``notifications/tools/list_changed`` to the open GET streams of the sessions a lesson concerns.

When a result teaches the lesson book something (:mod:`mcp_normalizer.engine.lessons`), every session of
the upstream that lists the tool with the same definition will list it relaxed from its next
``tools/list``; this module tells them now (MCP 2025-03-26 and later, Streamable HTTP, "Listening
for Messages from the Server": a GET stream carries requests and notifications unrelated to any
call; server/tools.mdx, "List Changed Notification"). A call stream carries it only for the call
that taught it (a call stream's messages SHOULD relate to its request), as the transformer does.

One owner: the middleware makes one :class:`Announcer` per upstream, registers each legacy GET
stream while it is open (:meth:`Announcer.listening`) and calls :meth:`Announcer.tools_changed`
after an exchange taught something. A notice goes between two whole SSE events, never inside
one: :class:`AnnouncingSend` sends it only while no body chunk of the stream is being sent (and
only while the transformer emits whole events: not after a stream fell back to pass-through).
Only this process's streams are told; another replica's sessions see the lesson on their next
``tools/list`` (the store refreshes before each).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from ..engine.rules.learned import LIST_CHANGED
from ..engine.scopes import ScopeState
from ..types import Message
from .relay import TransformingSend

logger = logging.getLogger("mcp_normalizer")

#: The SSE event a notice is sent as.
LIST_CHANGED_EVENT = b"event: message\ndata: " + LIST_CHANGED + b"\n\n"
#: The byte order mark a stream may start with.
BOM = b"\xef\xbb\xbf"
#: Seconds one stream may take to accept a notice; a client that stopped reading is skipped.
NOTICE_TIMEOUT = 5.0


class AnnouncingSend(TransformingSend):
    """A :class:`~mcp_normalizer.hop.relay.TransformingSend` for a GET stream that also takes
    notices from other tasks (:meth:`announce`), each sent as a whole SSE event between the
    stream's own events."""

    __slots__ = ("_began", "_client", "_held", "_in_call", "_noticed", "_notifying")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._client, self._send = self._send, self._stream_send
        self._held: list[bytes] = []  # notices waiting for the stream's own send to end
        self._in_call = False  # the inner app's send is under way
        self._notifying: anyio.Event | None = None  # a notice is being sent (set when done)
        self._began = False  # has a byte of the stream's own body gone out?
        self._noticed = False  # did a notice go out before the stream's first byte?

    async def __call__(self, message: Message) -> None:
        while self._notifying is not None:  # a notice is half way out: the stream's bytes wait
            await self._notifying.wait()
        self._in_call = True
        try:
            await super().__call__(message)
        finally:
            self._in_call = False
        if self._held:
            await self._flush()

    @property
    def open(self) -> bool:
        """Can a notice go out now or after the stream's current send: its start went out, it
        is an SSE stream the transformer still splits into whole events, it has not ended."""
        return self.started and self.refused is None and self._t.whole_events

    async def announce(self, event: bytes) -> bool:
        """Send ``event`` (one whole SSE event) on this stream now, or right after the chunk
        being sent; ``False`` when the stream cannot take it (see :attr:`open`)."""
        if not self.open:
            return False
        self._held.append(event)
        if not self._in_call and self._notifying is None:
            await self._flush()
        return True

    async def _stream_send(self, message: Message) -> None:
        """The stream's own messages to the client. A byte order mark the stream starts with is
        dropped when a notice went first: it is read only as a stream's first bytes (WHATWG HTML
        9.2.5), and after them it would spoil the field name of the line it starts."""
        if not self._began and message["type"] == "http.response.body" and message.get("body"):
            self._began = True
            if self._noticed and message["body"].startswith(BOM):
                message = {**message, "body": message["body"][len(BOM) :]}
        await self._client(message)

    async def _flush(self) -> None:
        self._notifying = done = anyio.Event()
        try:
            while self._held and self.open:
                self._noticed |= not self._began
                await self._client({"type": "http.response.body", "body": self._held[0], "more_body": True})
                del self._held[0]  # (only once it went: a cancelled send leaves it for the next chance)
        finally:
            self._notifying = None
            done.set()


class Announcer:
    """The open legacy GET streams of one upstream's sessions, and the notices sent on them."""

    def __init__(self) -> None:
        self._streams: dict[AnnouncingSend, ScopeState] = {}

    def __len__(self) -> int:
        return len(self._streams)

    @contextmanager
    def listening(self, state: ScopeState, send: AnnouncingSend) -> Iterator[None]:
        """Register ``send``, the GET stream of the session ``state``, while the block runs."""
        self._streams[send] = state
        try:
            yield
        finally:
            del self._streams[send]

    async def tools_changed(self, taught: list[tuple[str, str]], told: ScopeState | None) -> int:
        """Send ``list_changed`` once on every open stream whose session lists one of the
        ``taught`` tools (name, :func:`~mcp_normalizer.engine.lessons.definition_digest`) with that
        definition; ``told``, a session the call stream told already, is skipped. Each stream
        gets :data:`NOTICE_TIMEOUT` seconds, all at once. Returns how many streams were told."""
        wanted = [
            send
            for send, state in self._streams.items()
            if state is not told and any(_lists(state, tool, definition) for tool, definition in taught)
        ]
        told_now = 0

        async def tell(send: AnnouncingSend) -> None:
            nonlocal told_now
            with anyio.move_on_after(NOTICE_TIMEOUT):
                if await send.announce(LIST_CHANGED_EVENT):
                    told_now += 1

        if wanted:
            async with anyio.create_task_group() as tg:
                for send in wanted:
                    tg.start_soon(tell, send)
            logger.info("a lesson landed: notifications/tools/list_changed sent on %d open GET streams", told_now)
        return told_now


def _lists(state: ScopeState, tool: str, definition: str) -> bool:
    """Does the session ``state`` list ``tool`` with the definition digest ``definition``?"""
    entry = state.catalog.get(tool)
    return entry is not None and entry.digest() == definition
