"""The listening side: sockets, uvicorn's server on uvloop, and the guards on every connection.

:func:`bind` opens a listening socket; :func:`serve` runs an ASGI app on sockets under uvicorn's
server with the proxy's own protocol (:mod:`mcp_normalizer.hop.protocol`, httptools; under
``--http h11``, uvicorn's h11 protocol with the guard mixin below); :func:`serve_workers` runs
several such processes on one port. The guards (:class:`~mcp_normalizer.hop.guards.Guards`) are
what a production HTTP server enforces and uvicorn does not:

- **a head-read timeout**: a connection must deliver a whole request head within ``head_timeout``
  seconds of opening (or of the end of the previous response); otherwise 408 and close. uvicorn
  has none: a half-sent head (or a connection that sends nothing) is held forever.
- **a body-read timeout**: at most ``body_timeout`` seconds between two reads of a request body;
  otherwise 408 and close (the app sees the client leave; a truncated request is never forwarded).
- **a head-size bound** in every mode: a head still arriving past ``max_header_bytes`` gets 431 and
  close (h11 has its own bound; httptools has none). A head that arrives whole in one read is
  measured by :class:`~mcp_normalizer.hop.front.FrontDoor`. Trailer fields of a chunked request body are
  dropped (uvicorn would add them to the headers already checked) and bounded the same way.
- **a connection limit**: past ``max_connections`` open connections a new one is answered 503 and
  closed at once, so the process never runs out of descriptors and its accept loop never fails.
- **a drain bound on close**: a connection closed while its write buffer still holds bytes (a
  client that stopped reading, whose response the forwarder abandoned after ``send_timeout``) is
  aborted once the buffer has not shrunk for ``send_timeout`` seconds; asyncio alone would keep
  the socket and the buffer until the client reads, which may be never.

These are nginx's ``client_header_timeout``, ``client_body_timeout``,
``large_client_header_buffers`` and ``worker_connections``. Each refusal is counted and logged
once per cause and peer per interval (:class:`~mcp_normalizer.ops.refusals.RefusalLog`), never a flood.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import multiprocessing
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, Literal, cast

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..config import ProxyConfig
from ..ops.refusals import BODY_TIMEOUT, CONNECTIONS, HEAD_TIMEOUT, Cause, RefusalLog
from ..types import CONNECTION, ASGIApp, Receive, Scope, Send
from .guards import (
    BODY_TIMEOUT_ANSWER,
    HEAD_TIMEOUT_ANSWER,
    OVER_LIMIT,
    Coalescing,
    Guards,
    answer_and_close,
    default_max_connections,
    upstream_connection_limit,
)
from .protocol import HttpProtocol

__all__ = [
    "Guards",
    "HttpParser",
    "bind",
    "default_max_connections",
    "serve",
    "serve_workers",
    "upstream_connection_limit",
]

logger = logging.getLogger(__name__)


#: The HTTP/1.1 parsers uvicorn can run: httptools (llhttp, C; the default) or h11 (pure Python).
HttpParser = Literal["httptools", "h11"]


class _Guarded:
    """Mixin for uvicorn's h11 protocol (``--http h11``) enforcing :class:`Guards` (h11 bounds
    heads and trailers itself; the httptools protocol, :mod:`mcp_normalizer.hop.protocol`, has
    the guards built in).

    It reads only uvicorn's ``cycle`` (the current request, with ``more_body``,
    ``response_started`` and ``response_complete``), ``connections``, ``transport``, ``loop``,
    ``app`` (wrapped per connection to put :data:`~mcp_normalizer.types.CONNECTION` in each scope), and
    the ``connection_made`` / ``data_received`` / ``on_response_complete`` / ``connection_lost``
    hooks.
    """

    guards: Guards
    limit: int
    # the protocol's own attributes (uvicorn's H11Protocol has them)
    app: ASGIApp
    cycle: Any
    connections: set[Any]
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    _timer: asyncio.TimerHandle | None = None
    _head_bytes = 0
    _refused = False  # answered by a guard: what the client still sends is read and dropped

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        app = self.app
        held: dict[str, object] = {}

        async def on_this_connection(scope: Scope, receive: Receive, send: Send) -> None:
            scope[CONNECTION] = held  # (what the app keeps for this connection: mcp_normalizer.types.CONNECTION)
            await app(scope, receive, send)

        self.app = on_this_connection
        # What uvicorn writes goes through it (its flow control keeps the real transport).
        self.transport = cast(asyncio.Transport, Coalescing(transport, self.loop, self.guards.send_timeout))
        if len(self.connections) > self.limit:
            self._refused = True  # not lingering: under a flood of connections, descriptors are what is short
            self._refused_for(CONNECTIONS, f"{self.limit} open connections", transport)
            transport.write(OVER_LIMIT)
            transport.close()
            return
        self._arm(self.guards.head_timeout, self._head_late)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)  # type: ignore[misc]
        if self.transport.is_closing():
            self._disarm()
        else:
            self._body_progress(self.cycle)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        cycle = self.cycle
        if not self.transport.is_closing() and (cycle is None or cycle.response_complete):
            self._head_bytes = 0
            self._arm(self.guards.head_timeout, self._head_late)  # the next head (keep-alive closes sooner)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _body_progress(self, cycle: Any) -> None:
        if cycle is not None and cycle.more_body and not cycle.response_complete:
            self._arm(self.guards.body_timeout, self._body_late)
        else:
            self._disarm()

    def _arm(self, seconds: float, then: Callable[[], None]) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, then)

    def _refused_for(self, cause: Cause, detail: str, transport: asyncio.BaseTransport | None = None) -> None:
        """Count and log a refusal by the guards (the peer read from the connection)."""
        try:
            peer = (transport or self.transport).get_extra_info("peername")
        except Exception:  # (a transport gone meanwhile)
            peer = None
        self.guards.refusals.refused(cause, peer[0] if isinstance(peer, tuple) and peer else None, detail)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_late(self) -> None:
        self._timer = None
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            return  # a request is being served
        if self._head_bytes:
            self._refused_for(HEAD_TIMEOUT, f"not complete after {self.guards.head_timeout:g} s")
            self._answer_and_close(HEAD_TIMEOUT_ANSWER)
        else:
            self.transport.close()  # nothing was asked: nothing to answer

    def _body_late(self) -> None:
        self._timer = None
        cycle = self.cycle
        if cycle is None or not cycle.more_body or cycle.response_complete:
            return
        self._refused_for(BODY_TIMEOUT, f"stalled for {self.guards.body_timeout:g} s")
        cycle.disconnected = True
        cycle.message_event.set()  # the app's receive() returns http.disconnect: nothing is forwarded
        self._answer_and_close(b"" if cycle.response_started else BODY_TIMEOUT_ANSWER)

    def _answer_and_close(self, response: bytes) -> None:
        """:func:`~mcp_normalizer.hop.guards.answer_and_close`; what the client still sends is dropped."""
        self._disarm()
        if not self.transport.is_closing():
            self._refused = True
            self._timer = answer_and_close(self.transport, self.loop, response)


def guarded_protocol(parser: HttpParser, guards: Guards) -> type[asyncio.Protocol]:
    """The protocol class for ``parser`` with :class:`Guards` enforced (for ``uvicorn.Config(http=...)``):
    :class:`~mcp_normalizer.hop.protocol.HttpProtocol` on httptools, uvicorn's h11 protocol with
    the guard mixin on h11."""
    limit = guards.max_connections or default_max_connections()
    if parser == "httptools":
        return type("GuardedHttpProtocol", (HttpProtocol,), {"guards": guards, "limit": limit})
    return type(f"Guarded{H11Protocol.__name__}", (_Guarded, H11Protocol), {"guards": guards, "limit": limit})


def bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """Open the listening socket now, so a taken port fails before anything else starts.

    The socket is made with ``proto=IPPROTO_TCP`` and ``TCP_NODELAY``: asyncio only turns Nagle's
    algorithm off on accepted connections whose socket says ``IPPROTO_TCP``, and with it on, a
    response written in pieces (head then body, or SSE events) waits for the client's delayed ACK
    (about 40 ms on Linux) on every request. With ``reuse_port``, several processes bind the same
    port (``SO_REUSEPORT``) and the kernel spreads connections over them.

    Raises:
        OSError: the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def uvicorn_config(
    app: object,
    proxy: ProxyConfig | None = None,
    *,
    log_level: str = "info",
    parser: HttpParser = "httptools",
    refusals: RefusalLog | None = None,
) -> uvicorn.Config:
    """The uvicorn configuration the proxy runs with: ``parser`` with :class:`Guards`, uvloop,
    uvicorn's own access log off (the proxy writes its own), the upstream's ``server``/``date``
    headers kept, idle connections kept ``keep_alive_timeout`` seconds, open streams given
    ``graceful_shutdown`` seconds on SIGTERM."""
    proxy = proxy or ProxyConfig()
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        log_config=None,
        log_level=log_level,
        access_log=False,
        server_header=False,
        date_header=False,
        # seconds as a float (0: cut at once); uvicorn annotates an int, asyncio.wait_for takes any number
        timeout_graceful_shutdown=cast(int, proxy.graceful_shutdown),
        timeout_keep_alive=cast(int, proxy.keep_alive_timeout),  # a float works as well
        http=guarded_protocol(parser, Guards.of(proxy, refusals)),
        h11_max_incomplete_event_size=proxy.max_header_bytes,
        loop="uvloop",
        lifespan="on",
        proxy_headers=False,  # X-Forwarded-* from a client is not trusted by default (see forwarded_*)
    )


class _Server(uvicorn.Server):
    """uvicorn's server, remembering which signals stopped it (it re-raises them on the way out,
    which does nothing for one the process was started with ignored)."""

    signals: list[int]

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.signals = [*getattr(self, "signals", []), sig]
        super().handle_exit(sig, frame)


def serve(config: uvicorn.Config, sockets: Sequence[socket.socket]) -> int:
    """Run uvicorn with ``config`` on ``sockets`` until a signal stops it.

    Returns:
        130 when SIGINT (Ctrl-C) stopped it, even in a process started with SIGINT ignored (nohup,
        some CI runners), else 0.
    """
    server = _Server(config)
    config.load()  # the app and everything it loaded at start (rules, schemas, libraries) ...
    gc.collect()
    gc.freeze()  # ... is moved out of the collector's sight: a full collection walks only what serving made
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # uvicorn re-raises it: make that an exit
    try:
        server.run(sockets=list(sockets))
    except KeyboardInterrupt:
        return 130  # uvicorn already shut down gracefully; no traceback
    finally:
        signal.signal(signal.SIGINT, previous)
    return 130 if signal.SIGINT in getattr(server, "signals", []) else 0


def serve_workers(workers: int, run: Callable[[socket.socket], int], host: str, port: int) -> int:
    """Run ``run`` in ``workers`` processes, each on its own ``SO_REUSEPORT`` socket on one port.

    Each worker is a whole proxy (its own catalogs, caches and metrics: a scrape sees the worker
    that answered it). SIGTERM and SIGINT are passed on to every worker; a worker that dies takes
    the others down, so a supervisor (systemd, Kubernetes) restarts the whole.

    Returns:
        130 when stopped by SIGINT, else the first non-zero worker exit code, else 0.

    Raises:
        OSError: the port cannot be bound.
    """
    first = bind(host, port, reuse_port=True)
    port = first.getsockname()[1]
    context = multiprocessing.get_context("fork")
    children: list[multiprocessing.context.ForkProcess] = []
    for index in range(workers):
        sock = first if index == 0 else bind(host, port, reuse_port=True)
        child = context.Process(target=_worker, args=(run, sock), name=f"mcp-normalizer-worker-{index}")
        child.start()
        children.append(child)
        sock.close()
    stopped_by: list[int] = []

    def forward(sig: int, frame: FrameType | None) -> None:
        stopped_by.append(sig)
        for child in children:
            if child.pid is not None and child.is_alive():
                os.kill(child.pid, sig)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        codes: list[int] = []
        while children:
            for child in list(children):
                child.join(0.2)
                if child.exitcode is not None:
                    children.remove(child)
                    codes.append(child.exitcode)
                    if not stopped_by:
                        forward(signal.SIGTERM, None)  # one died: stop the rest
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if signal.SIGINT in stopped_by:
        return 130
    return next((code for code in codes if code), 0)


def _worker(run: Callable[[socket.socket], int], sock: socket.socket) -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(run(sock))
