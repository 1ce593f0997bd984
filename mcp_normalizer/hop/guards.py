"""What every client connection of the listener is held to, shared by its protocols
(:mod:`mcp_normalizer.hop.protocol` on httptools, :mod:`mcp_normalizer.hop.server`'s guarded h11):
the limits (:class:`Guards`), the canned refusals, and the transport that joins a loop turn's
small writes and bounds a closed connection's drain (:class:`Coalescing`).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from dataclasses import dataclass, field
from typing import Any

from ..config import ProxyConfig
from ..ops.refusals import BODY_TIMEOUT, CONNECTIONS, HEAD_SIZE, HEAD_TIMEOUT, RefusalLog, refusal_message
from ..wire.jsonrpc import refusal_body

logger = logging.getLogger("mcp_normalizer.hop.server")


def default_max_connections() -> int:
    """The connection limit when none is set: a third of the descriptors this process may open,
    less 64 for logs, listeners and the like; at least 16. A client connection may hold two
    upstream ones (its call and the proxy's own ``tools/list`` fetch beside it), and the forwarder
    opens at most twice this many (:func:`upstream_connection_limit`)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 65536
    return max(16, (int(soft) - 64) // 3)


def upstream_connection_limit(max_connections: int) -> int:
    """Upstream connections the forwarder may hold for a client connection limit (0: the default):
    twice it, so client and upstream connections together stay within the descriptor limit."""
    return 2 * (max_connections or default_max_connections())


@dataclass(frozen=True, slots=True)
class Guards:
    """The per-connection limits of the listener (from ``[proxy]``).

    Attributes:
        max_header_bytes: largest request head, in bytes (431 past it).
        head_timeout: seconds for a whole request head to arrive (408 past it).
        body_timeout: seconds allowed between two reads of a request body (408 past it).
        max_connections: open connections allowed; ``0`` means :func:`default_max_connections`.
        send_timeout: seconds a closed connection's write buffer may go without shrinking before
            the connection is aborted (``0``: never).
        refusals: where the connections and requests the guards refuse are counted and logged.
    """

    max_header_bytes: int = 16 * 1024
    head_timeout: float = 30.0
    body_timeout: float = 30.0
    max_connections: int = 0
    send_timeout: float = 60.0
    refusals: RefusalLog = field(default_factory=RefusalLog)

    @classmethod
    def of(cls, proxy: ProxyConfig, refusals: RefusalLog | None = None) -> Guards:
        """The guards ``proxy`` configures (refusals counted and logged by ``refusals``)."""
        return cls(
            proxy.max_header_bytes,
            proxy.head_timeout,
            proxy.body_timeout,
            proxy.max_connections,
            proxy.send_timeout,
            refusals if refusals is not None else RefusalLog(interval=proxy.refusal_log_interval),
        )


class Coalescing:
    """A transport that joins the small writes of one loop turn into one (one ``send()``, one packet).

    uvicorn writes a response head and its body separately; for a small response that is two
    system calls and two TCP segments where one does. A small write is held until the end of the
    loop turn (``call_soon``) and later small writes of the same turn are appended to it; a large
    write first flushes what is held, then goes out as it is. Order is kept; nothing waits longer
    than the current turn. Everything but ``write`` and ``close`` is the wrapped transport's.

    A close with bytes still buffered (the client is not reading) is watched: once the buffer has
    not shrunk for ``drain_timeout`` seconds, the connection is aborted (``0``: never).
    """

    __slots__ = ("_drain_timeout", "_held", "_loop", "_shut", "_size", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop, drain_timeout: float = 0) -> None:
        self.transport = transport
        self._loop = loop
        self._held: list[bytes] | None = None
        self._size = 0
        self._drain_timeout = drain_timeout
        self._shut = False  # write_eof() was called: nothing more may be written

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._shut:
            logger.debug("a write after the connection was shut for writing: dropped")
            return
        held = self._held
        if len(data) > COALESCE_BYTES or (held is not None and self._size + len(data) > COALESCE_BYTES):
            self.flush()
            self.transport.write(data)
            return
        if held is None:
            self._held = [bytes(data)]
            self._size = len(data)
            self._loop.call_soon(self.flush)
        else:
            held.append(bytes(data))
            self._size += len(data)

    def flush(self) -> None:
        """Write what is held now."""
        held, self._held = self._held, None
        if held and not self.transport.is_closing():
            self.transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self.transport.close()
        buffered = self.transport.get_write_buffer_size()
        if buffered and self._drain_timeout > 0:
            self._loop.call_later(self._drain_timeout, self._drained, buffered)

    def _drained(self, before: int) -> None:
        """Abort the closed connection if its buffer has not shrunk since it held ``before`` bytes."""
        try:
            now = self.transport.get_write_buffer_size()
        except Exception:  # (gone meanwhile)
            return
        if not now:
            return
        if now >= before:
            logger.warning("a closed connection's client took no bytes for %g s: aborted", self._drain_timeout)
            self.transport.abort()
        else:
            self._loop.call_later(self._drain_timeout, self._drained, now)

    def write_eof(self) -> None:
        self.flush()
        self._shut = True
        self.transport.write_eof()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


#: Writes up to this size are joined with the others of their loop turn (:class:`_Coalescing`).
COALESCE_BYTES = 16 * 1024


def canned(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 response with a JSON-RPC error body and ``connection: close``."""
    body = refusal_body(message)
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


#: Seconds a connection answered by a guard keeps reading (and dropping) what the client sends.
LINGER = 2.0


def answer_and_close(transport: Any, loop: asyncio.AbstractEventLoop, response: bytes) -> asyncio.TimerHandle | None:
    """Send ``response``, then close the way nginx's lingering close does: our side is shut for
    writing at once (the client reads the answer, then the end), what the client still sends is
    read and dropped for up to :data:`LINGER` seconds, then the connection is closed. Closing at
    once would make the kernel reset the connection on the client's next bytes, and a reset can
    discard the answer before the client reads it.

    Returns:
        The timer that closes the connection (``None``: closed at once, the transport cannot
        shut its writing side alone).
    """
    transport.write(response)
    if transport.can_write_eof():
        transport.write_eof()
        return loop.call_later(LINGER, transport.close)
    transport.close()
    return None


OVER_LIMIT = canned(503, "Service Unavailable", refusal_message(CONNECTIONS))
TOO_LARGE = canned(431, "Request Header Fields Too Large", refusal_message(HEAD_SIZE))
HEAD_TIMEOUT_ANSWER = canned(408, "Request Timeout", refusal_message(HEAD_TIMEOUT))
BODY_TIMEOUT_ANSWER = canned(408, "Request Timeout", refusal_message(BODY_TIMEOUT))
