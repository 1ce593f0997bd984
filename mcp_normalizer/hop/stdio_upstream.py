"""``--upstream-cmd``: a stdio MCP server served as a Streamable HTTP endpoint (the ASGI app the
normalizer middleware wraps in place of the :class:`~mcp_normalizer.hop.forward.Forwarder`).

MCP ``basic/transports.mdx``: over stdio a server is one session, messages one per line; over
Streamable HTTP each client message is a POST, answered with JSON or an SSE stream. The mapping:

**Sessions and children.** One child process per HTTP session, so no client ever sees another's
messages:

- *2025-03-26 to 2025-11-25* (sessions): a POST holding ``initialize`` without ``Mcp-Session-Id``
  starts a child; the proxy mints the session id (``secrets.token_urlsafe``) and returns it with the
  ``InitializeResult``. Later requests name it; an unknown one gets 404 (the client then
  initializes again, as the spec says), a missing one 400. ``DELETE`` ends the session and its
  child. A session with nothing in flight and no GET stream for ``child_idle_timeout`` seconds is
  ended the same way. At most ``max_children`` children run, and at most ``max_children_per_client``
  sessions of one client (:func:`client_of`: its ``Authorization`` hash, else its address); a new
  session past either ends the longest-idle session's child (its own, at its own limit), whose
  session then gets 404 and initializes again (TS SDK 1.x never sends DELETE). Only when every
  child is busy does a new session get 503.
- *2026-07-28* (stateless: no ``initialize``, the era in every request's ``_meta``): one shared
  child serves every such request. Each request's id and ``progressToken`` (whatever the token's
  JSON type: a ``1.0`` a lax server reads as ``1`` too) are replaced by the proxy's own on the way
  in (unguessable strings, :func:`~mcp_normalizer.wire.jsonrpc.mint_id`) and restored as the
  client wrote them on the way out, so two clients using the same ids never meet; a client that
  closes its stream cancels its request (``notifications/cancelled`` naming the proxy's id of that
  request, the stdio form of ``basic/patterns/cancellation.mdx``), and no other: a stateless
  client's own notifications reach no one.

**Routing, child to client.** A response goes to the stream of its request; a
``notifications/progress`` to the stream whose request carries its ``progressToken``; any other
message (a log notification, ``sampling/createMessage``, ``elicitation/create``, ``roots/list``,
``list_changed``) to the session's GET stream if one is open, else to its newest open POST stream
of a ``tools/call`` (what a server asks during a call belongs to it; never the proxy's own
``tools/list`` fetch), else it waits (at most :data:`BACKLOG` messages and ``child_buffer_bytes``,
and only while the proxy's ``process_buffer_bytes`` are not taken) for the next GET stream. A
shared child's other messages go to the log: its clients are strangers to each other. A client's
responses to the server's requests (a POST) go to the child's stdin (202); a stateless client's go
nowhere.

**Faults of the child.** Its stderr goes to the log, line by line, tagged with the command. A line on
its stdout that is not a JSON-RPC message (a server that logs to stdout) is logged, counted, never
relayed. A line longer than ``max_message_bytes`` is never held: it is dropped as it comes, and the
request it answers gets a JSON-RPC error. A request unanswered ``idle_timeout`` seconds after the
last message of its stream gets a JSON-RPC error. When a child exits, its exit status is logged,
every request it left unanswered gets a JSON-RPC error (``-32603``), and its session ends (404 next,
so the client starts a new one). A child that exits in a loop (within :data:`STABLE` seconds of its
start, again and again, before it answered anything) backs off the client whose requests it died
in: that client's new starts are refused with 503 and ``Retry-After`` for 0.5 s, then 1, 2 ... up
to 30; no other client's. Lifespan shutdown (SIGTERM to the proxy) stops every child: stdin closed,
``graceful_shutdown`` seconds, SIGTERM, as long again, SIGKILL; each is waited for.

**Flow control.** The child's stdout is read one line at a time, and a line is handed to its
stream (:class:`_Stream`) when there is room for it: what waits for clients is bounded in bytes,
per stream (``stream_buffer_bytes``), per child (``child_buffer_bytes``) and in the whole proxy
(``process_buffer_bytes``), a message counted once from its hand-over until it has been sent (a
single message larger than a bound still goes, alone). Past a bound a session's child is no longer
read (it blocks on its own writes: its own client holds it up, no one else); the shared child's
slowest client has its stream ended with a JSON-RPC error for its requests (a stateless client
never holds up another); and when the whole proxy is out of room, the stream with the most bytes
waiting is ended. Nothing piles up in the proxy. A client that takes no bytes for
``send_timeout`` seconds loses its stream.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import secrets
import shlex
import time
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.abc
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..config import env_items
from ..engine.stdio_session import long_line_id
from ..errors import ClientDisconnect, DecodeError
from ..ops.metrics import Metrics
from ..ops.refusals import BODY_SIZE, CHILDREN, RefusalLog, peer_of
from ..types import OWN_FETCH, RawHeaders, Receive, Scope, Send
from ..wire.body import buffer_body
from ..wire.eras import era_of
from ..wire.jsoncodec import Raw, dumps, join_object, loads, split_array, split_object
from ..wire.jsonrpc import (
    PROTOCOL_VERSION_META,
    Envelope,
    IdKey,
    answering,
    header,
    id_key,
    mint_id,
    read_envelope,
    refusal_body,
)
from ..wire.lines import LAST, LINE, LineDecoder
from . import child as children
from .child import Process

logger = logging.getLogger("mcp_normalizer")

#: Messages of a session held for its next GET stream (the oldest go first past this; in bytes,
#: past ``child_buffer_bytes``, or when the proxy's ``process_buffer_bytes`` are taken).
BACKLOG = 1_000
#: Seconds a child must live for its exit not to count towards a crash loop.
STABLE = 10.0
#: The longest back-off between starts of a child that keeps exiting, in seconds.
MAX_BACKOFF = 30.0
#: Clients whose crash loops are remembered (the least recently seen are forgotten past it).
CLIENTS = 4096
_BOM = b"\xef\xbb\xbf"
_EDGE = 4096
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_JSON = (b"content-type", b"application/json")


@dataclass(frozen=True, slots=True)
class Command:
    """A stdio server to start: its argv, environment additions and working directory.

    Attributes:
        argv: the command and its arguments.
        env: variables set for it on top of the proxy's environment (less the proxy's own
            variables: :func:`~mcp_normalizer.hop.child.server_env`).
        cwd: its working directory (``None``: the proxy's).
        passed: names of the proxy's variables passed through even when they are its own.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    passed: tuple[str, ...] = ()

    @classmethod
    def parse(cls, line: str, env: Sequence[str] = (), cwd: str = "") -> Command:
        """From a shell-quoted command line (:func:`shlex.split`; no shell runs it) and
        ``NAME=VALUE`` (set) or ``NAME`` (passed through) items.

        Raises:
            ValueError: the line is empty or badly quoted, or an item has no name.
        """
        argv = tuple(shlex.split(line))
        if not argv:
            raise ValueError("the upstream command is empty")
        try:
            values, passed = env_items(env)
        except ValueError as exc:
            raise ValueError(f"upstream_env: {exc}") from None
        return cls(argv, values, cwd or None, passed)

    @property
    def label(self) -> str:
        """The command as logs show it (at most 200 characters)."""
        return shlex.join(self.argv)[:200]


class _Budget:
    """The bytes of the children's messages that wait for clients, and their bounds.

    A message counts from the moment it is handed to a stream (:meth:`_Stream.put`) until it has
    been sent to its client (:meth:`_Stream.sent`): queued or being written, once.

    Args:
        stream: bytes that may wait for one stream (``stream_buffer_bytes``).
        child: bytes that may wait for the streams of one child (``child_buffer_bytes``).
        process: bytes that may wait in the whole proxy (``process_buffer_bytes``).
    """

    def __init__(self, stream: int, child: int, process: int) -> None:
        self.stream = stream
        self.child = child
        self.process = process
        self.waiting = 0
        self.held = 0  # bytes held for GET streams not open yet (backlogs: dropped, never waited for)
        self.streams: set[_Stream] = set()  # the streams with bytes waiting
        self.changed = anyio.Event()  # set (and replaced) whenever bytes are released

    def release(self) -> None:
        """Wake whoever waits for room."""
        self.changed.set()
        self.changed = anyio.Event()


class _Stream:
    """One HTTP response the child's messages go to: a POST's answer (JSON or SSE) or a GET stream.

    Args:
        sse: the answer is an SSE stream (else one JSON body: responses only).
        child: the child whose messages it carries.
        budget: the bounds on what waits (:class:`_Budget`).

    Handing a message over (:meth:`put`) waits while the stream, its child or the proxy has no
    room for it (flow control back to a session's child: it blocks on its writes); a message
    larger than a bound goes alone (the stream, or the child, has nothing else waiting). The
    shared child's streams never hold its reader up (one slow client must not stall the others):
    there a stream past its bound is cut (``overflowed``), and a child or a proxy out of room cuts
    the stream with the most bytes waiting. A stream cut while a message is being sent to its
    client has that send cancelled (``scope``): the message goes nowhere and its bytes are freed.
    """

    __slots__ = (
        "budget",
        "calls",
        "child",
        "client",
        "gone",
        "open",
        "overflowed",
        "own",
        "receiver",
        "scope",
        "sender",
        "sending",
        "sse",
        "waiting",
    )

    def __init__(self, sse: bool, child: _Child, budget: _Budget, client: str = "", own: bool = False) -> None:
        self.sse = sse
        self.own = own  # the proxy's own fetch (it reads at once): never waits, never cut
        self.client = client  # whose requests it answers (see client_of)
        self.child = child
        self.budget = budget
        self.sender: MemoryObjectSendStream[bytes]
        self.receiver: MemoryObjectReceiveStream[bytes]
        self.sender, self.receiver = anyio.create_memory_object_stream[bytes](math.inf)
        self.open: set[IdKey] = set()  # the child-side ids of its requests still unanswered
        self.gone = False  # its client left (or the stream ended)
        self.waiting = 0  # bytes handed over and not yet sent to the client (queued or being sent)
        self.sending = 0  # the bytes of the message being sent now (taken, not yet sent)
        self.overflowed = False
        self.calls = False  # it answers a tools/call (what a server says outside a request may go on it)
        self.scope: anyio.CancelScope | None = None  # cancelled to cut a send in progress

    @property
    def cuttable(self) -> bool:
        """Past a bound it is cut rather than waited for (a stream of the shared child)."""
        return self.child.shared

    def _fits(self, size: int, held: int = 0) -> bool:
        """Is there room for ``size`` more bytes (``held`` of them counted already, see :meth:`put`)?"""
        budget, child = self.budget, self.child
        others = child.buffered - held
        everyone = budget.waiting - held
        return (
            (not self.waiting or self.waiting + size <= budget.stream)
            and (not others or others + size <= budget.child)
            and (not everyone or everyone + size <= budget.process)
        )

    async def put(self, line: bytes) -> bool:
        """Hand ``line`` to the client once there is room; False if it is gone (or just cut).

        While it waits, the line (read already) counts for its child and the proxy, so that what
        the blocked readers hold is bounded too."""
        size = len(line)
        budget, child = self.budget, self.child
        held = 0
        try:
            while not self.own and not self._fits(size, held):
                if self.gone:
                    return False
                victim: _Stream | None = None
                live = [s for s in budget.streams if not s.overflowed and not s.own]  # (a cut one frees soon)
                if self.waiting and self.waiting + size > budget.stream:
                    victim = self if self.cuttable else None
                elif child.buffered - held and child.buffered - held + size > budget.child:
                    if self.cuttable:
                        victim = max((s for s in live if s.child is child), key=_waiting_of, default=None)
                else:
                    largest = max(live, key=_waiting_of, default=None)
                    if largest is not None and (self.cuttable or largest.child is not child):
                        victim = largest
                if victim is None:
                    if not held:
                        held = size
                        child.buffered += size
                        budget.waiting += size
                    await budget.changed.wait()  # back-pressure: the child is not read meanwhile
                    continue
                victim.cut()
                if victim is self:
                    return False
        finally:
            if held:
                child.buffered -= held
                budget.waiting -= held
                budget.release()
        if self.gone:
            return False
        try:
            self.sender.send_nowait(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.WouldBlock):
            self.gone = True
            return False
        self._count(size)
        return True

    def _count(self, size: int) -> None:
        self.waiting += size
        self.child.buffered += size
        self.budget.waiting += size
        if self.waiting:
            self.budget.streams.add(self)
        else:
            self.budget.streams.discard(self)
        if size < 0:
            self.budget.release()

    async def take(self) -> bytes:
        """The next message for the client; it counts until :meth:`sent`.

        Raises:
            anyio.EndOfStream: no more will come.
        """
        self.sent()
        line = await self.receiver.receive()
        self.sending = len(line)
        return line

    def sent(self) -> None:
        """The message taken last has reached the client (or is held elsewhere): its bytes are free."""
        if self.sending:
            self._count(-self.sending)
            self.sending = 0

    def cut(self) -> None:
        """The client is too slow: drop what waits for it and cancel a send in progress."""
        if self.gone and self.overflowed:
            return
        logger.warning(
            "a client read too slowly: %d bytes of the MCP server's messages waited for it; its stream is cut",
            self.waiting,
        )
        self.overflowed = self.gone = True
        self.child.count("slow_client")
        self.sender.close()
        dropped = 0
        while True:
            try:
                dropped += len(self.receiver.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
        if dropped:
            self._count(-dropped)
        if self.sending and self.scope is not None:
            self.scope.cancel()
        self.budget.release()  # (a put waiting for this stream's room learns it is gone)

    def end(self) -> None:
        """No more messages: the response ends once the queue is drained."""
        self.sender.close()

    def close(self) -> None:
        """The response is over: whatever still counts for it is freed."""
        self.gone = True
        self.sender.close()
        self.receiver.close()
        if self.waiting:
            self._count(-self.waiting)
        self.sending = 0
        self.budget.release()  # (a put waiting for this stream's room learns it is gone)


def _waiting_of(stream: _Stream) -> int:
    return stream.waiting


@dataclass(slots=True)
class _Waiter:
    """Where the response to one request goes, and the ids the client wrote (the shared child's
    requests go to it under ids of the proxy's)."""

    stream: _Stream
    id: bytes  # the request's id as the client wrote it
    token: bytes | None = None  # its progressToken as the client wrote it (shared child only)
    token_key: IdKey | None = None  # that token's child-side key


class _Child:
    """One stdio server process and the HTTP streams its messages go to (one owner: its session)."""

    def __init__(
        self,
        process: Process,
        label: str,
        session_id: str | None,
        count: Callable[[str], None],
        client: str = "",
        budget: _Budget | None = None,
    ) -> None:
        self.process = process
        self.budget = budget if budget is not None else _Budget(4 << 20, 16 << 20, 64 << 20)
        self.client = client  # who started it (see client_of)
        self.count = count  # counts a fault by kind (upstream_errors_total)
        self.label = label
        self.session_id = session_id  # None: the shared child of stateless requests
        self.waiting: dict[IdKey, _Waiter] = {}
        self.progress: dict[IdKey, _Waiter] = {}
        self.streams: list[_Stream] = []  # open POST streams, newest last
        self.listener: _Stream | None = None  # the session's GET stream
        self.backlog: deque[bytes] = deque()
        self.backlog_bytes = 0
        self.buffered = 0  # bytes of its messages waiting for its streams (see _Budget)
        self.answered = False  # it has written a JSON-RPC message (it started, at least)
        self.left: deque[IdKey] = deque(maxlen=BACKLOG)  # requests whose client left before the answer
        self.started = self.used = time.monotonic()
        self.users = 0  # POSTs being handled for it (a session being started is in use already)
        self.stopping = False
        self.noise = 0
        self.done = False  # it has exited (and what it left unanswered was answered)
        self.finished = anyio.Event()  # its pipes are closed
        self.status = 0
        self._lock = anyio.Lock()

    @property
    def shared(self) -> bool:
        return self.session_id is None

    @property
    def busy(self) -> bool:
        """Something is in flight, a POST is being handled for it, or a GET stream is open."""
        return bool(self.waiting) or self.listener is not None or self.users > 0

    async def write(self, line: bytes) -> bool:
        """Write one message line to the child's stdin; False when the child is gone."""
        self.used = time.monotonic()
        async with self._lock:
            try:
                await self.process.stdin.send(line + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                return False
        return True

    # -- child to client -----------------------------------------------------------------------

    async def read(self, max_line: int) -> None:
        """Route every line of the child's stdout until it ends."""
        decoder = LineDecoder(max_line)
        head = tail = b""
        size = 0
        while True:
            chunk = await children.receive(self.process.stdout)
            for piece, kind in decoder.feed(chunk) if chunk else decoder.flush():
                if kind == LINE:
                    await self.route(piece)
                    continue
                head = head or piece[:_EDGE]
                tail = (tail + piece)[-_EDGE:]
                size += len(piece)
                if kind == LAST:
                    await self._too_long(head, tail, size, max_line)
                    head = tail = b""
                    size = 0
            if not chunk:
                return

    async def _too_long(self, head: bytes, tail: bytes, size: int, max_line: int) -> None:
        key = long_line_id(head, tail)
        waiter = self.waiting.get(key) if key is not None else None
        self.count("oversized_line")
        if waiter is None or key is None:
            self.noise += 1
            logger.warning(
                "%s wrote a line of %d bytes, above max_message_bytes (%d): dropped", self.label, size, max_line
            )
            return
        message = (
            f"the MCP server's response was {size} bytes, above the proxy's max_message_bytes ({max_line}): not relayed"
        )
        logger.warning("%s: %s", self.label, message)
        await self.answer(key, error_line(waiter.id, message))

    async def route(self, line: bytes) -> None:
        """Send one line of the child's stdout where it belongs."""
        self.used = time.monotonic()
        if b"\r" in line:
            line = line.replace(b"\r", b" ")  # (whitespace in JSON; an SSE line break otherwise)
        message = line[3:] if line.startswith(_BOM) else line
        try:
            items = split_array(message) if message.lstrip()[:1] == b"[" else None
        except DecodeError:
            items = None
        for item in items if items is not None else [message]:
            await self._route_one(bytes(item))

    async def _route_one(self, line: bytes) -> None:
        envelope: Envelope | None
        try:
            envelope = read_envelope(line)
        except DecodeError:
            envelope = _loose_envelope(line)
            if envelope is None and await self._unreadable(line):
                return
        if envelope is None or not (envelope.response or isinstance(envelope.method, str)):
            self.noise += 1
            self.count("stdout_noise")
            children.child_logger.warning(
                "not a JSON-RPC message on the server's stdout: not relayed",
                extra={"audit": {"server": self.label, "stdout": children.text(line)}},
            )
            return
        self.answered = True
        if envelope.response:
            key = answering(envelope.id, self.waiting)
            if key is None:
                if id_key(envelope.id) in self.left:
                    logger.info("%s answered a request whose client left (id %s): not relayed", self.label, envelope.id)
                else:
                    logger.warning("%s answered a request not in flight (id %s): not relayed", self.label, envelope.id)
                return
            waiter = self.waiting[key]
            await self.answer(key, replace_member(line, "id", waiter.id) if self.shared else line)
            return
        if envelope.method == "notifications/progress":
            owner = self._progress_waiter(line)
            if owner is not None:
                if self.shared and owner.token is not None:
                    line = replace_param(line, "progressToken", owner.token)
                if owner.stream.sse and await owner.stream.put(line):
                    return
                if self.shared:
                    return  # its owner takes no notifications (a JSON answer) or left: no one else's
        await self.other(line)

    async def _unreadable(self, line: bytes) -> bool:
        """A line that is not JSON (``NaN``, a raw control character, trailing bytes) but names the
        id of a request in flight where every SDK writes it: that request gets an error now rather
        than after ``idle_timeout``. False when it names none."""
        key = long_line_id(line[:_EDGE], line[-_EDGE:])
        waiter = self.waiting.get(key) if key is not None else None
        if waiter is None or key is None:
            return False
        self.count("invalid_json")
        children.child_logger.warning(
            "the server's response is not valid JSON: not relayed",
            extra={"audit": {"server": self.label, "stdout": children.text(line)}},
        )
        await self.answer(key, error_line(waiter.id, f"the MCP server's response ({self.label}) is not valid JSON"))
        return True

    def _progress_waiter(self, line: bytes) -> _Waiter | None:
        """The request whose ``progressToken`` a ``notifications/progress`` carries, compared as
        sent (a progress token is never respelled: the shared child's are the proxy's strings)."""
        try:
            params = split_object(split_object(line)["params"])
            token = id_key(loads(params["progressToken"]))
        except (DecodeError, KeyError):
            return None
        return self.progress.get(token) if token is not None else None

    async def answer(self, key: IdKey, line: bytes) -> None:
        """Deliver the response ``line`` to the request ``key`` (child-side) and forget it."""
        waiter = self.waiting.pop(key)
        if waiter.token_key is not None:
            self.progress.pop(waiter.token_key, None)
        stream = waiter.stream
        stream.open.discard(key)
        if not await stream.put(line):
            logger.info("%s answered a request whose client left: not relayed", self.label)
        if not stream.open:
            stream.end()

    async def other(self, line: bytes) -> None:
        """A message that answers no request: to the GET stream, else the newest POST stream,
        else held for the next GET stream (a shared child: the one stream open, else the log)."""
        if self.shared:  # every stateless client's server: a message no request owns is no one's
            logger.info("%s sent a message no request owns (stateless era): logged, not relayed", self.label)
            return
        if self.listener is not None and await self.listener.put(line):
            return
        for stream in reversed(self.streams):  # (never a tools/list: the proxy's own fetch reads nothing else)
            if stream.sse and stream.calls and await stream.put(line):
                return
        budget = self.budget
        self.backlog.append(line)
        self.backlog_bytes += len(line)
        budget.held += len(line)
        while len(self.backlog) > BACKLOG or (
            len(self.backlog) > 1
            and (self.backlog_bytes > budget.child or budget.waiting + budget.held > budget.process)
        ):
            dropped = len(self.backlog.popleft())
            self.backlog_bytes -= dropped
            budget.held -= dropped
            logger.warning(
                "%s: more than %d messages or %d bytes (child_buffer_bytes) wait for a GET stream, or the "
                "proxy's process_buffer_bytes are taken: the oldest is dropped",
                self.label,
                BACKLOG,
                budget.child,
            )

    def take_backlog(self) -> list[bytes]:
        """The messages held for a GET stream, handed over (the backlog is then empty)."""
        held = list(self.backlog)
        self.backlog.clear()
        self.budget.held -= self.backlog_bytes
        self.backlog_bytes = 0
        return held

    async def ended(self, status: int) -> None:
        """The child exited: answer what it left unanswered, end every stream."""
        self.done, self.status = True, status
        message = f"the MCP server ({self.label}) exited ({children.describe(status)}) before answering"
        if self.waiting:
            logger.warning("%s; %d requests answered with an error", message, len(self.waiting))
        for key in list(self.waiting):
            await self.answer(key, error_line(self.waiting[key].id, message))
        for stream in [*self.streams, *([self.listener] if self.listener else [])]:
            stream.end()


def _loose_envelope(line: bytes) -> Envelope | None:
    """The envelope of a line msgspec refuses but the standard library reads (a lone surrogate
    escape, valid JSON syntax): relayed as it is, as the HTTP path relays it."""
    try:
        message = loads(line)
    except DecodeError:
        return None
    if not isinstance(message, dict):
        return None
    response = "result" in message or "error" in message
    return Envelope(
        id=message.get("id", msgspec.UNSET),
        method=message.get("method", msgspec.UNSET),
        error=Raw(b"{}") if response and "method" not in message else msgspec.UNSET,
    )


def error_line(raw_id: bytes, message: str, code: int = -32603) -> bytes:
    """A JSON-RPC error response to the request whose id is written ``raw_id``."""
    return b'{"jsonrpc":"2.0","id":' + raw_id + b',"error":{"code":%d,"message":' % code + dumps(message) + b"}}"


def replace_member(message: bytes, name: str, raw: bytes) -> bytes:
    """``message`` (one JSON object) with member ``name`` written ``raw``; the other members keep
    their bytes (only the whitespace between members goes)."""
    return join_object({**split_object(message), name: Raw(raw)})


def replace_param(message: bytes, name: str, raw: bytes) -> bytes:
    """``message`` with ``params.<name>`` written ``raw`` (see :func:`replace_member`)."""
    params = replace_member(split_object(message)["params"], name, raw)
    return replace_member(message, "params", params)


def _refusal(
    status: int, message: str, code: int = -32600, extra: Sequence[tuple[bytes, bytes]] = ()
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = refusal_body(message, code)
    return status, [_JSON, (b"content-length", str(len(body)).encode()), *extra], body


class StdioUpstream:
    """The ASGI app serving a stdio MCP server (``command``) on ``path`` over Streamable HTTP.

    Args:
        command: the server to start for each session.
        path: the MCP endpoint's path (other paths get 404).
        max_children: children that may run at once (sessions, and the shared stateless one).
        idle_timeout: seconds a request may wait after the last message of its stream before it
            is answered with an error (``0``: never).
        child_idle_timeout: seconds a session may stay idle before it and its child end (``0``: never).
        grace: seconds between the steps of stopping a child (stdin closed, SIGTERM, SIGKILL).
        max_line: the longest line of the child's stdout relayed, in bytes.
        max_body_bytes: the largest request body (413 past it).
        send_timeout: seconds a client may take to accept one message before its stream is cut.
        stream_buffer_bytes: bytes of the child's messages that may wait for one stream.
        child_buffer_bytes: bytes of one child's messages that may wait for its streams together.
        process_buffer_bytes: bytes of every child's messages that may wait, all together.
        max_children_per_client: sessions (children) one client may hold at once.
        metrics: where faults are counted (``upstream_errors_total`` by kind: ``exit``, ``start``,
            ``backoff``, ``stdout_noise``, ``oversized_line``, ``invalid_json``, ``idle_timeout``,
            ``slow_client``, ``evicted``), with the processes running (``stdio_children``).
    """

    def __init__(
        self,
        command: Command,
        *,
        path: str = "/mcp",
        max_children: int = 64,
        idle_timeout: float = 300.0,
        child_idle_timeout: float = 600.0,
        grace: float = 10.0,
        max_line: int = 32 * 1024 * 1024,
        max_body_bytes: int = 16 * 1024 * 1024,
        send_timeout: float = 60.0,
        stream_buffer_bytes: int = 4 * 1024 * 1024,
        child_buffer_bytes: int = 16 * 1024 * 1024,
        process_buffer_bytes: int = 64 * 1024 * 1024,
        max_children_per_client: int = 16,
        metrics: Metrics | None = None,
        refusals: RefusalLog | None = None,
    ) -> None:
        self.command = command
        self.metrics = metrics
        self.refusals = refusals if refusals is not None else RefusalLog()
        if metrics is not None:
            metrics.watch_children(lambda: len(self._children))
        self.label = command.label
        self.path = path
        self.max_children = max_children
        self.idle_timeout = idle_timeout
        self.child_idle_timeout = child_idle_timeout
        self.grace = grace
        self.max_line = max_line
        self.max_body_bytes = max_body_bytes
        self.send_timeout = send_timeout
        self.budget = _Budget(stream_buffer_bytes, child_buffer_bytes, process_buffer_bytes)
        self.max_children_per_client = max_children_per_client
        self.sessions: dict[str, _Child] = {}
        self.shared: _Child | None = None
        self._children: set[_Child] = set()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._shared_lock = anyio.Lock()
        self._starting = 0  # children being started (their slots are taken)
        self._starting_for: dict[str, int] = {}  # the same, by client
        self._failures = 0  # a server that could not start (no session answered): times in a row
        self._not_before = 0.0  # readyz says not ready before this monotonic time
        # By client (client_of): [exits in a row, each soon after its start; no start before]
        self._backoff: OrderedDict[str, list[float]] = OrderedDict()
        self._closed = False

    def count(self, kind: str) -> None:
        """Count a fault of the child, or a refusal because of one (``upstream_errors_total``)."""
        if self.metrics is not None:
            self.metrics.upstream_errors.labels(kind).inc()

    async def ready(self) -> bool:
        """True while children may be started (running, and not backing off)."""
        return self._task_group is not None and not self._closed and time.monotonic() >= self._not_before

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["path"] != self.path:
            await _respond(send, *_refusal(404, f"Not Found: the MCP endpoint is {self.path}"))
            return
        if self._task_group is None or self._closed:
            await _respond(send, *_refusal(503, "the proxy is not serving (its lifespan has not started, or ended)"))
            return
        method = scope["method"]
        if method == "POST":
            held: list[_Child] = []
            try:
                await self._post(scope, receive, send, held)
            finally:
                for child in held:
                    child.users -= 1
        elif method == "GET":
            await self._get(scope, receive, send)
        elif method == "DELETE":
            await self._delete(scope, send)
        else:
            await _respond(send, *_refusal(405, "Method Not Allowed", extra=[(b"allow", b"GET, POST, DELETE")]))

    # -- lifespan ------------------------------------------------------------------------------

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as tg:
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self._task_group = tg
                    if self.child_idle_timeout > 0:
                        tg.start_soon(self._reap)
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.aclose()
                    tg.cancel_scope.cancel()
                    break
        await send({"type": "lifespan.shutdown.complete"})

    async def aclose(self) -> None:
        """Stop every child (the stdio shutdown sequence, all at once); later requests get 503."""
        self._closed = True
        running = list(self._children)
        if running:
            logger.info("stopping %d MCP server processes (%s)", len(running), self.label)
        async with anyio.create_task_group() as tg:
            for child in running:
                tg.start_soon(self._stop, child)
        with anyio.move_on_after(self.grace + 1):  # each child's pipes closed and its requests answered
            for child in running:
                await child.finished.wait()

    async def _stop(self, child: _Child) -> None:
        child.stopping = True
        self._forget(child)
        await children.stop(child.process, self.grace, self.label)

    def _forget(self, child: _Child) -> None:
        """The child serves no session any more (new requests naming it get 404)."""
        if child.session_id is not None:
            self.sessions.pop(child.session_id, None)
        elif self.shared is child:
            self.shared = None

    async def _reap(self) -> None:
        """End the sessions idle for ``child_idle_timeout`` seconds."""
        while True:
            await anyio.sleep(max(0.05, min(self.child_idle_timeout / 4, 30.0)))
            now = time.monotonic()
            for child in list(self._children):
                if not child.busy and not child.stopping and now - child.used >= self.child_idle_timeout:
                    logger.info(
                        "session idle for %g s: its MCP server (pid %d) is stopped",
                        self.child_idle_timeout,
                        child.process.pid,
                    )
                    assert self._task_group is not None
                    self._task_group.start_soon(self._stop, child)

    # -- children ------------------------------------------------------------------------------

    async def _start(
        self, session_id: str | None, peer: str | None = None, client: str = ""
    ) -> _Child | tuple[int, list[tuple[bytes, bytes]], bytes]:
        """A new child for ``session_id`` (``None``: the shared one), or the refusal to send
        (``peer``: the address of the client it is for, ``client`` its :func:`client_of`)."""
        failures, not_before = self._backoff.get(client, (0, 0.0))
        wait = max(not_before, self._not_before) - time.monotonic()
        if wait > 0:
            self.count("backoff")
            message = (
                f"the MCP server ({self.label}) failed to start {int(max(failures, self._failures))} times in a "
                f"row (it could not be started, or exited before answering): the next start is in {wait:.1f} s"
            )
            return _refusal(503, message, extra=[(b"retry-after", str(math.ceil(wait)).encode())])
        refused = await self._room(session_id is not None, peer, client)
        if refused is not None:
            return refused
        self._starting_for[client] = self._starting_for.get(client, 0) + 1
        try:
            return await self._spawn(session_id, client)
        finally:
            self._starting_for[client] -= 1
            if not self._starting_for[client]:
                del self._starting_for[client]

    async def _room(
        self, session: bool, peer: str | None, client: str
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        """Make room for one more child of ``client`` (``session``: a session's, else the shared
        one): at ``max_children_per_client`` its own longest-idle session is ended, at
        ``max_children`` anyone's (that session then gets 404, and its client initializes again).
        ``None`` once there is room; the refusal (503) when every child is busy (something in
        flight, or a GET stream open)."""
        while True:
            running = [c for c in self._children if not c.stopping]
            mine = [c for c in running if session and not c.shared and c.client == client]
            if session and len(mine) + self._starting_for.get(client, 0) >= self.max_children_per_client:
                pool, limit = mine, f"max_children_per_client ({self.max_children_per_client})"
            elif len(self._children) + self._starting >= self.max_children:
                stopping = [c for c in self._children if c.stopping]
                if stopping:  # a slot frees once it is gone
                    with anyio.move_on_after(2 * self.grace + 1):
                        await stopping[0].finished.wait()
                    continue
                pool, limit = running, f"max_children ({self.max_children})"
            else:
                return None
            victim = min((c for c in pool if not c.busy), key=lambda c: c.used, default=None)
            if victim is None:
                detail = f"{limit}: every MCP server process is busy (a request in flight or a GET stream open)"
                return _refusal(503, self.refusals.refused(CHILDREN, peer, detail), extra=[(b"retry-after", b"1")])
            logger.info(
                "%s reached: the longest-idle session's MCP server (pid %d, idle %.1f s) is stopped for a new one",
                limit,
                victim.process.pid,
                time.monotonic() - victim.used,
            )
            self.count("evicted")
            victim.stopping = True
            self._forget(victim)
            assert self._task_group is not None
            self._task_group.start_soon(self._stop, victim)
            with anyio.move_on_after(2 * self.grace + 1):
                await victim.finished.wait()

    async def _spawn(
        self, session_id: str | None, client: str
    ) -> _Child | tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Start the child (its slot is free)."""
        env = children.server_env(self.command.env, self.command.passed)
        self._starting += 1  # (the slot is taken while it starts)
        try:
            process = await children.start(self.command.argv, env=env, cwd=self.command.cwd)
        except OSError as exc:
            self.count("start")
            self._crashed(None, client, 0.0)
            logger.error("cannot start the MCP server (%s): %s", self.label, exc.strerror or exc)
            return _refusal(502, f"cannot start the MCP server ({self.label}): {exc.strerror or exc}", code=-32603)
        finally:
            self._starting -= 1
        child = _Child(process, self.label, session_id, self.count, client, self.budget)
        logger.info("started %s (pid %d)%s", self.label, process.pid, " for a new session" if session_id else "")
        self._children.add(child)
        if session_id is not None:
            self.sessions[session_id] = child
        else:
            self.shared = child
        assert self._task_group is not None
        self._task_group.start_soon(self._run, child)
        return child

    async def _run(self, child: _Child) -> None:
        """Serve one child until it exits, then clean up after it."""
        process = child.process
        logged = anyio.Event()
        tail: deque[str] = deque(maxlen=5)

        async def log() -> None:
            try:
                await children.log_stderr(process.stderr, self.label, tail)
            finally:
                logged.set()

        read = anyio.Event()

        async def route() -> None:
            try:
                await child.read(self.max_line)
            finally:
                read.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(log)
                tg.start_soon(route)
                await children.exited_or(process, read)
                if process.returncode is None:  # stdout closed, the process lives on: stop it
                    with anyio.move_on_after(self.grace) as waited:
                        await process.wait()
                    if waited.cancel_called:
                        await children.stop(process, self.grace, self.label)
                status = await process.wait()
                if process.kill_group():  # helpers it left behind (holding its stdout, maybe)
                    logger.warning("%s left processes running in its process group: killed", self.label)
                with anyio.move_on_after(1.0):  # the rest of what it wrote, on stdout and stderr
                    await read.wait()
                    await logged.wait()
                tg.cancel_scope.cancel()
        finally:
            process.close_pipes()  # (also when the proxy stops)
            child.finished.set()
        self._children.discard(child)
        self._forget(child)
        child.take_backlog()  # (no GET stream will take it now)
        lived = time.monotonic() - child.started
        if child.noise:
            logger.warning(
                "%s wrote %d lines on stdout that are not JSON-RPC messages: logged, not relayed",
                self.label,
                child.noise,
            )
        if child.stopping:
            logger.info("%s (pid %d) stopped, %s", self.label, process.pid, children.describe(status))
        else:
            logger.warning(
                "%s (pid %d) exited with %s after %.1f s%s",
                self.label,
                process.pid,
                children.describe(status),
                lived,
                children.last_words(tail),
            )
            self.count("exit")
            self._crashed(child, child.client, lived)
        await child.ended(status)

    def _crashed(self, child: _Child | None, client: str, lived: float) -> None:
        """Count an exit nobody asked for (``child``; ``None``: it could not be started); back off
        when they come in a row, each soon after its start and before the server said anything.

        The back-off is the client's whose requests were in flight (else the client that started
        it): a crash in one client's call never refuses anyone else. A server that answered and
        then crashed did start: its client is not backed off either. A session's server that could
        not start at all (it never answered, not even ``initialize``) also makes ``readyz`` say
        not ready for as long."""
        answered = child is not None and child.answered
        owners = {waiter.stream.client for waiter in child.waiting.values()} if child is not None else set()
        for who in owners or {client}:
            record = self._backoff.pop(who, [0, 0.0])
            self._backoff[who] = record
            if len(self._backoff) > CLIENTS:
                self._backoff.popitem(last=False)
            if answered:
                record[0] = 0
                continue
            record[0] = record[0] + 1 if lived < STABLE else 1
            if record[0] >= 2:
                delay = min(MAX_BACKOFF, 0.5 * 2 ** (record[0] - 2))
                record[1] = time.monotonic() + delay
                logger.warning(
                    "%s exited %d times in a row in a client's requests: that client's next start waits %g s",
                    self.label,
                    int(record[0]),
                    delay,
                )
        if child is not None and (answered or child.shared):
            self._failures = 0
            return
        self._failures = self._failures + 1 if lived < STABLE else 1
        if self._failures >= 2:
            self._not_before = time.monotonic() + min(MAX_BACKOFF, 0.5 * 2 ** (self._failures - 2))

    async def _shared_child(
        self, peer: str | None, client: str
    ) -> _Child | tuple[int, list[tuple[bytes, bytes]], bytes]:
        async with self._shared_lock:
            if self.shared is not None:
                return self.shared
            return await self._start(None, peer, client)

    # -- POST ----------------------------------------------------------------------------------

    async def _post(self, scope: Scope, receive: Receive, send: Send, held: list[_Child]) -> None:
        """Answer a POST (``held``: the child it is for, once found, its ``users`` counted)."""
        try:
            body, _, over = await buffer_body(receive, self.max_body_bytes)
        except ClientDisconnect:
            return
        if over:
            told = self.refusals.refused(BODY_SIZE, peer_of(scope), f"over {self.max_body_bytes} bytes")
            await _respond(send, *_refusal(413, told))
            return
        headers = scope["headers"]
        parsed = _parse(body)
        if isinstance(parsed, _Unreadable):
            await _respond(send, *_refusal(400, parsed.message, code=parsed.code))
            return
        messages, batch = parsed
        requests = [m.key for m in messages if m.key is not None]
        if len(set(requests)) != len(requests):
            await _respond(send, *_refusal(400, "Invalid Request: two requests of one batch share an id"))
            return
        session_id = header(headers, b"mcp-session-id")
        minted: list[tuple[bytes, bytes]] = []
        found: _Child | tuple[int, list[tuple[bytes, bytes]], bytes]
        if session_id:
            session = self.sessions.get(session_id)
            if session is None:
                await _respond(send, *_refusal(404, "Session not found", code=-32001))
                return
            found = session
        elif any(m.method == "initialize" for m in messages):
            session_id = secrets.token_urlsafe(24)
            minted = [(b"mcp-session-id", session_id.encode())]
            found = await self._start(session_id, peer_of(scope), client_of(scope))
        elif _stateless(headers, messages):
            found = await self._shared_child(peer_of(scope), client_of(scope))
        else:
            await _respond(send, *_refusal(400, "Bad Request: Mcp-Session-Id header is required", code=-32000))
            return
        if isinstance(found, tuple):
            await _respond(send, *found)
            return
        child = found
        child.users += 1  # (never ended for room while this POST runs; no await since it was found)
        held.append(child)
        line = body.replace(b"\n", b" ").replace(b"\r", b" ") if b"\n" in body or b"\r" in body else body
        if not requests and child.shared:
            # 2026-07-28 defines no client notification over HTTP (a closed stream cancels), and the
            # shared server is every stateless client's: one client's must not reach the others'.
            logger.info("a notification or response in the stateless era: not passed to the shared server")
            await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if not requests:
            written = await child.write(line)
            status = 202 if written else 502
            if written:
                await send(
                    {"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0"), *minted]}
                )
                await send({"type": "http.response.body", "body": b""})
            else:
                await _respond(send, *_refusal(status, f"the MCP server ({self.label}) has exited", code=-32603))
            return
        if not child.shared and any(key in child.waiting for key in requests):
            await _respond(send, *_refusal(400, "Invalid Request: a request with this id is in flight in this session"))
            return
        sse = b"text/event-stream" in (header(headers, b"accept") or "").encode()
        stream = _Stream(sse, child, self.budget, client_of(scope), bool(scope.get(OWN_FETCH)))
        try:
            line = self._register(child, stream, messages, line)
        except DecodeError:
            await _respond(send, *_refusal(400, "Invalid Request: not a JSON-RPC message"))
            return
        child.streams.append(stream)
        try:
            await self._answer(child, stream, line, batch, receive, send, minted)
        finally:
            child.streams.remove(stream)
            stream.close()
            left = [key for key in stream.open if key in child.waiting]
            for key in left:  # its client left: what the child answers for them goes nowhere
                waiter = child.waiting.pop(key)
                if waiter.token_key is not None:
                    child.progress.pop(waiter.token_key, None)
                child.left.append(key)
            if left and child.shared and self._task_group is not None:
                for key in left:  # 2026-07-28: a closed stream cancels its request
                    self._task_group.start_soon(child.write, _cancelled(key))

    def _register(self, child: _Child, stream: _Stream, messages: list[_Incoming], line: bytes) -> bytes:
        """Note where each request's response goes; the line to write (the shared child's with the
        proxy's own ids and progress tokens)."""
        if child.shared:
            if len(messages) != 1:
                raise DecodeError("a batch in the stateless era")
            (message,) = messages
            members = dict(message.members)
            key: IdKey = ("s", mint_id("request"))
            waiter = _Waiter(stream, bytes(members["id"]))
            members["id"] = Raw(dumps(key[1]))
            found = _token_of(members)
            if found is not None:  # whatever its JSON type: a float 1.0 a lax server reads as 1 too
                params_raw, meta_raw, token_raw = found
                token_key: IdKey = ("s", mint_id("progress"))
                waiter.token, waiter.token_key = bytes(token_raw), token_key
                own_meta = replace_member(meta_raw, "progressToken", dumps(token_key[1]))
                members["params"] = Raw(replace_member(params_raw, "_meta", own_meta))
                child.progress[token_key] = waiter
            child.waiting[key] = waiter
            stream.open.add(key)
            return join_object(members)
        for message in messages:
            if message.key is None:
                continue
            stream.calls = stream.calls or message.method == "tools/call"
            waiter = _Waiter(stream, bytes(message.members["id"]))
            child.waiting[message.key] = waiter
            stream.open.add(message.key)
            if message.token is not None:
                waiter.token_key = message.token
                child.progress[message.token] = waiter
        return line

    async def _answer(
        self,
        child: _Child,
        stream: _Stream,
        line: bytes,
        batch: bool,
        receive: Receive,
        send: Send,
        minted: list[tuple[bytes, bytes]],
    ) -> None:
        """Write the request to the child and send the client what comes back for it. A client
        that stops reading is left with an unfinished response (the ASGI server then closes its
        connection), as the forwarder does."""
        async with anyio.create_task_group() as tg:
            stream.scope = tg.cancel_scope
            if child.done:  # it exited after this request found it
                await child.ended(child.status)
            else:  # (a child gone meanwhile answers it as it ends)
                tg.start_soon(child.write, line)
            tg.start_soon(_watch_disconnect, receive, tg.cancel_scope)
            if stream.sse:
                await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *minted]})
                # (closed here, in this task, also when the stream is cut mid-send: its timer's cancel
                # scope must be left in the task that entered it)
                async with contextlib.aclosing(self._drain(child, stream)) as drained:
                    async for item in drained:
                        if not await self._send_event(send, item):
                            tg.cancel_scope.cancel()
                            return
                        stream.sent()
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            else:
                lines = []  # (a JSON body goes whole: its messages count no more once taken)
                async with contextlib.aclosing(self._drain(child, stream)) as drained:
                    async for item in drained:
                        stream.sent()
                        lines.append(item)
                body = b"[" + b",".join(lines) + b"]" if batch else lines[0]
                headers = [_JSON, (b"content-length", str(len(body)).encode()), *minted]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body, "more_body": False})
            tg.cancel_scope.cancel()

    async def _send_event(self, send: Send, line: bytes) -> bool:
        """Send one message as an SSE event; False when the client took nothing for ``send_timeout``."""
        event = {"type": "http.response.body", "body": b"event: message\ndata: " + line + b"\n\n", "more_body": True}
        with anyio.move_on_after(self.send_timeout or math.inf) as sent:
            await send(event)
        if not sent.cancel_called:
            return True
        logger.warning("a client took no bytes for %g s (send_timeout): its stream is cut", self.send_timeout)
        if self.metrics is not None:
            self.metrics.client_errors.labels("send_timeout").inc()
        return False

    async def _drain(self, child: _Child, stream: _Stream) -> AsyncGenerator[bytes, None]:
        """The stream's messages as they come; a request left unanswered ``idle_timeout`` seconds
        after the last one is answered here with an error."""
        while True:
            with anyio.move_on_after(self.idle_timeout or math.inf):
                try:
                    yield await stream.take()
                except anyio.EndOfStream:
                    if not stream.overflowed:
                        return
                    break
                continue
            if stream.overflowed:
                message = (
                    "the client read too slowly: more of the MCP server's messages waited for it than the "
                    f"proxy holds (stream_buffer_bytes {self.budget.stream}, child_buffer_bytes "
                    f"{self.budget.child}, process_buffer_bytes {self.budget.process})"
                )
            else:
                message = f"the MCP server ({self.label}) sent nothing for {self.idle_timeout:g} s (idle_timeout)"
                self.count("idle_timeout")
            logger.warning("%s: %d requests answered with an error", message, len(stream.open))
            for key in list(stream.open):
                waiter = child.waiting.pop(key, None)
                stream.open.discard(key)
                if waiter is not None:
                    if waiter.token_key is not None:
                        child.progress.pop(waiter.token_key, None)
                    if child.shared:
                        await child.write(_cancelled(key))
                    yield error_line(waiter.id, message)
            return

    # -- GET and DELETE ------------------------------------------------------------------------

    async def _session(self, scope: Scope, send: Send, what: str) -> _Child | None:
        """The child of the session a GET or DELETE names; ``None`` once refused (405 without a
        session id, ``what`` saying why one is needed; 404 for an unknown one)."""
        session_id = header(scope["headers"], b"mcp-session-id")
        if not session_id:
            await _respond(send, *_refusal(405, f"Method Not Allowed: {what}", extra=[(b"allow", b"POST")]))
            return None
        child = self.sessions.get(session_id)
        if child is None:
            await _respond(send, *_refusal(404, "Session not found", code=-32001))
        return child

    async def _get(self, scope: Scope, receive: Receive, send: Send) -> None:
        child = await self._session(scope, send, "a GET stream needs a session")
        if child is None:
            return
        if b"text/event-stream" not in (header(scope["headers"], b"accept") or "").encode():
            await _respond(send, *_refusal(406, "Not Acceptable: a GET stream is text/event-stream"))
            return
        if child.listener is not None:
            await _respond(send, *_refusal(409, "Conflict: only one GET stream is allowed per session"))
            return
        stream = child.listener = _Stream(True, child, self.budget)
        held = child.take_backlog()
        try:
            async with anyio.create_task_group() as tg:
                stream.scope = tg.cancel_scope
                tg.start_soon(_watch_disconnect, receive, tg.cancel_scope)
                await send({"type": "http.response.start", "status": 200, "headers": list(_SSE_HEADERS)})
                for line in held:
                    if not await self._send_event(send, line):
                        tg.cancel_scope.cancel()
                        return
                while True:
                    try:
                        item = await stream.take()
                    except anyio.EndOfStream:
                        break
                    if not await self._send_event(send, item):
                        tg.cancel_scope.cancel()
                        return
                    stream.sent()
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            if child.listener is stream:
                child.listener = None
            stream.close()

    async def _delete(self, scope: Scope, send: Send) -> None:
        child = await self._session(scope, send, "DELETE ends a session")
        if child is None:
            return
        logger.info("session ended by its client: its MCP server (pid %d) is stopped", child.process.pid)
        assert self._task_group is not None
        self._forget(child)
        self._task_group.start_soon(self._stop, child)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


def client_of(scope: Scope) -> str:
    """Who a request comes from, as the bounds per client count it: a hash of its
    ``Authorization`` header (never the token itself), else its address (``peer_of``: behind a
    trusted proxy, the address it forwarded)."""
    authorization = header(scope["headers"], b"authorization")
    if authorization:
        return "auth:" + hashlib.sha256(authorization.encode()).hexdigest()[:32]
    return "peer:" + (peer_of(scope) or "unknown")


def _stateless(headers: RawHeaders, messages: list[_Incoming]) -> bool:
    """Is this a request of a stateless era (the version in its header, else in its ``_meta``, read
    by :func:`~mcp_normalizer.wire.eras.era_of` as on the HTTP path: an unknown ``draft-2027`` or
    ``2027-01-01`` is 2026-07-28, no version at all is legacy)?"""
    version = header(headers, b"mcp-protocol-version")
    if not version or not version.strip():  # (an empty header names nothing: the body may)
        version = messages[0].version
    return era_of(version).stateless


@dataclass(slots=True)
class _Incoming:
    """One message of a client's POST body, read only as far as routing needs.

    Attributes:
        members: its members, undecoded (numbers any JSON allows, ``1e400`` too, pass untouched).
        method: its ``method``, when a string.
        key: its id key when it is a request (a ``method`` and an ``id``).
        token: the key of its ``params._meta.progressToken``, if any.
        version: the protocol version its ``params._meta`` names, if any.
    """

    members: dict[str, Raw]
    method: str | None = None
    key: IdKey | None = None
    token: IdKey | None = None
    version: str | None = None


@dataclass(frozen=True, slots=True)
class _Unreadable:
    """Why a POST body is refused: a JSON-RPC error code and message."""

    code: int
    message: str


def _parse(body: bytes) -> tuple[list[_Incoming], bool] | _Unreadable:
    """The messages of a POST body and whether it is a batch, or why it is refused."""
    try:
        texts = split_array(body) if body.lstrip()[:1] == b"[" else [Raw(body)]
        members = [split_object(text) for text in texts]
    except DecodeError:
        return _Unreadable(-32700, "Parse error: the body is not a JSON-RPC message or batch")
    if not members:
        return _Unreadable(-32600, "Invalid Request: an empty batch")
    messages: list[_Incoming] = []
    for message in members:
        incoming = _Incoming(message)
        try:
            method = loads(message["method"]) if "method" in message else None
            rid = loads(message["id"]) if "id" in message else None
        except DecodeError:
            return _Unreadable(-32600, "Invalid Request: an id or method that cannot be read")
        if "method" in message and not isinstance(method, str):
            return _Unreadable(-32600, "Invalid Request: a method must be a string")
        incoming.method = method
        if method is not None and "id" in message:
            incoming.key = id_key(rid)
            if incoming.key is None:
                return _Unreadable(-32600, "Invalid Request: an id must be a string or an integer")
        meta = _meta_of(message)
        if meta is not None:
            incoming.token = id_key(meta.get("progressToken"))
            found = meta.get(PROTOCOL_VERSION_META)
            incoming.version = found if isinstance(found, str) else None
        messages.append(incoming)
    return messages, len(texts) != 1 or body.lstrip()[:1] == b"["


def _token_of(members: dict[str, Raw]) -> tuple[Raw, Raw, Raw] | None:
    """A request's ``params``, its ``_meta`` and its ``_meta.progressToken`` (undecoded, whatever
    its JSON type), or ``None`` when it carries no token (no ``params`` object, no ``_meta`` object).

    Raises:
        DecodeError: ``params`` or its ``_meta`` starts as an object but cannot be read (the shared
            child must not get a token the proxy could not replace).
    """
    params_raw = members.get("params")
    if params_raw is None or memoryview(params_raw)[:1].tobytes() != b"{":
        return None
    meta_raw = split_object(params_raw).get("_meta")
    if meta_raw is None or memoryview(meta_raw)[:1].tobytes() != b"{":
        return None
    token_raw = split_object(meta_raw).get("progressToken")
    return (params_raw, meta_raw, token_raw) if token_raw is not None else None


def _meta_of(message: dict[str, Raw]) -> dict[str, object] | None:
    """A message's ``params._meta``, decoded; ``None`` when it has none (or it cannot be read)."""
    try:
        meta = split_object(message["params"]).get("_meta") if "params" in message else None
        decoded = loads(meta) if meta is not None else None
    except DecodeError:
        return None
    return decoded if isinstance(decoded, dict) else None


def _cancelled(key: IdKey) -> bytes:
    """``notifications/cancelled`` for the shared child's request ``key``."""
    return dumps(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": key[1], "reason": "the client closed its stream"},
        }
    )


async def _watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once the client has gone (``http.disconnect``)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def _respond(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = ["Command", "StdioUpstream"]
