"""``mcp-normalizer stdio -- CMD ARGS...``: a stdio MCP server, repaired, for a host's config file.

The host starts ``mcp-normalizer stdio -- uvx legacy-server`` as it would start the server. The
wrapper starts the server as its child and relays every message both ways, line by line and in
order (MCP ``basic/transports.mdx``, stdio), through one :class:`~mcp_normalizer.engine.stdio_session.StdioSession`:
what goes to the host is repaired as the proxy repairs an SSE stream; what the host sends goes as it
came (but for the ``tools/call`` renames of rule ``tool_names``).

- The wrapper's stdout carries only JSON-RPC messages. Its log (JSON lines, the rewrites among them)
  goes to stderr, or to ``--log-file``. The child's stderr lines go to the log, tagged with the
  server's command, cut at :data:`MAX_LOG_LINE` bytes.
- Only whole JSON-RPC messages reach the host. A line on the child's stdout that is not one (a
  server that logs to stdout, a line that is not JSON) is logged and counted, never relayed; when it
  shows the id of a request the rules watch (``tools/call``, ``tools/list``), that request gets a
  JSON-RPC error (``-32603``) at once. A line longer than ``max_rewrite_bytes`` is checked whole
  and relayed unrewritten; one longer than ``max_message_bytes`` is dropped as it comes, never held,
  and the request whose id it shows gets a JSON-RPC error naming the setting.
- A line from the host longer than ``max_request_bytes`` never reaches the server (it could not
  be renamed): it is dropped as it comes, and the request whose id it shows gets a JSON-RPC error
  (``-32600``, as the HTTP proxy answers 413).
- When the host closes stdin, the child's stdin is closed; a child still running after
  ``graceful_shutdown`` seconds gets SIGTERM, and SIGKILL as long again after that (the client's
  shutdown sequence of ``basic/transports.mdx``, stdio). SIGTERM, SIGINT and SIGHUP to the wrapper
  are passed to the child.
- When the child exits, every request it left unanswered gets a JSON-RPC error (``-32603``, naming
  the exit status), then the wrapper exits with the child's status (``128 + N`` for signal N).
- A child that speaks only 2026-07-28 (it refuses ``initialize`` and answers ``server/discover``;
  or ``[proxy] upstream_era = "2026-07-28"``) is bridged for a legacy host by
  :class:`~mcp_normalizer.engine.stdio_bridge.StdioBridge`: each line of either side goes through it
  first, and what it gives the host goes through the rules as a native server's line does (the
  bridge's own answers among them: the ``initialize`` result, ``ping``, the server's questions).

Flow control: one line is relayed at a time each way; a host that stops reading stops the wrapper
reading the child's stdout (the child then blocks on its own writes), so nothing piles up. (The
bridge also writes to the child for the child's own lines: the end of its handshake, a retry the
server's answer calls for. Those lines are queued, at most :data:`_REPLIES`, and written by a task
of their own, so the relay of the child's stdout never waits on its stdin; every write to the child
is one whole line under a lock.) A pipe
(what hosts give) is read and written by the event loop; a regular file by worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from typing import BinaryIO

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..config import NormalizerConfig
from ..engine.audit import AuditLog
from ..engine.normalize import Normalizer
from ..engine.stdio_bridge import Relay, StdioBridge
from ..engine.stdio_session import StdioSession, long_line_id, request_id
from ..errors import DecodeError
from ..ops.refusals import BODY_SIZE, refusal_message
from ..wire.jsoncodec import dumps, loads
from ..wire.lines import LAST, LINE, LineDecoder
from .child import (
    Process,
    child_logger,
    describe,
    exit_code,
    exited_or,
    kill_after,
    last_words,
    log_stderr,
    receive,
    server_env,
    start,
    stop,
    text,
)

logger = logging.getLogger("mcp_normalizer")

#: Bytes read from a pipe at once.
_CHUNK = 64 * 1024
_NEWLINE = b"\n"
#: Bytes of each end of a line above the bound searched for its id.
_EDGE = 4096
_BOM = b"\xef\xbb\xbf"
#: Lines for the child the bridge may queue from the child's own lines (a retry, the handshake's end).
_REPLIES = 1024


class HostGone(Exception):
    """Internal: the host closed its end of stdout (nothing more can reach it)."""


class StdioWrapper:
    """The relay between a host (``host_in``/``host_out``, normally the wrapper's stdin and stdout)
    and a server started from ``command``.

    Args:
        command: the server's argv.
        config: the rules and ``[proxy]`` settings (``max_rewrite_bytes``, ``graceful_shutdown``).
        host_in, host_out: the host's side, binary files (read and written in worker threads, as
            the MCP SDKs' stdio transports do).
        env, cwd: the child's whole environment (``None``: the wrapper's, less its own variables:
            :func:`~mcp_normalizer.hop.child.server_env`) and working directory.
    """

    def __init__(
        self,
        command: Sequence[str],
        config: NormalizerConfig,
        host_in: BinaryIO,
        host_out: BinaryIO,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        self.command = list(command)
        self.config = config
        self.host_in = host_in
        self.host_out = host_out
        self.env = env if env is not None else server_env()  # (never the proxy's own variables)
        self.cwd = cwd
        self.label = " ".join(self.command)[:200]
        self.session = StdioSession(
            Normalizer(config), AuditLog(f"stdio:{self.label}"), max_line=config.proxy.max_rewrite_bytes
        )
        #: The era bridge (``[proxy] upstream_era``): a legacy host in front of a 2026-07-28-only server.
        self.bridge = StdioBridge(config.proxy.upstream_era)
        self.noise = 0  # lines of the child's stdout that were not messages
        self._write_lock = anyio.Lock()
        self._child_lock = anyio.Lock()  # (both directions may write to the child: the bridge's retries)
        self._replies: MemoryObjectSendStream[bytes]  # (made by run: see _child_writer)
        self._host_writer: Callable[[bytes], Awaitable[None]] | None = None
        self._host_gone = False  # the host closed its end of stdout
        self._tail: deque[str] = deque(maxlen=5)  # the child's last stderr lines

    async def run(self) -> int:
        """Start the child, relay until it exits; its exit status (``128 + N`` for signal N).

        Raises:
            OSError: the command cannot be started (not found, not executable).
        """
        child = await start(self.command, env=self.env, cwd=self.cwd)
        logger.info("started %s (pid %d)", self.label, child.pid)
        logged = anyio.Event()
        relayed = anyio.Event()  # the child's stdout has ended (or the host left)
        # The bridge's lines for the child that the child's own lines caused (a retry, the end of a
        # handshake) go through a queue: the relay of its stdout never waits on its stdin.
        self._replies, replies = anyio.create_memory_object_stream[bytes](_REPLIES)
        async with child, anyio.create_task_group() as tg:
            tg.start_soon(self._signals, child)
            tg.start_soon(self._host_to_child, child)
            tg.start_soon(self._child_writer, child, replies)
            tg.start_soon(self._child_log, child, logged)
            tg.start_soon(self._relay_out, child, tg, relayed)
            await exited_or(child, relayed)
            status = await child.wait()
            if child.kill_group():  # helpers it left behind would hold its stdout open
                logger.warning("%s left processes running in its process group: killed", self.label)
            await relayed.wait()  # the rest of what it wrote (its stdout ends now: nothing holds it)
            if not self._host_gone:
                with contextlib.suppress(HostGone):  # (the host may be gone by now too)
                    await self._unanswered(status)
            with anyio.move_on_after(1.0):  # what it wrote on stderr as it died, before it is gone
                await logged.wait()
            tg.cancel_scope.cancel()
        code = exit_code(status)
        if self.noise:
            logger.warning(
                "%s wrote lines on stdout that are not JSON-RPC messages: %d, logged, not relayed",
                self.label,
                self.noise,
            )
        if code:  # (a host's log at warning still says why its server is gone)
            logger.warning("%s exited with status %d%s", self.label, code, last_words(self._tail))
        else:
            logger.info("%s exited with status %d", self.label, code)
        return code

    # -- host -> child --------------------------------------------------------------------------

    async def _relay_out(self, child: Process, tg: anyio.abc.TaskGroup, relayed: anyio.Event) -> None:
        """Relay the child's stdout to the host until it ends; if the host goes first, stop the child."""
        try:
            await self._child_to_host(child)
        except HostGone:
            logger.warning("the host closed its end of stdout: stopping %s", self.label)
            if child.returncode is None:
                child.terminate()
                tg.start_soon(kill_after, child, self.config.proxy.graceful_shutdown, self.label)
        finally:
            relayed.set()

    async def _host_to_child(self, child: Process) -> None:
        limit = self.config.proxy.max_request_bytes
        decoder = LineDecoder(limit)
        chunks = await _host_chunks(self.host_in)
        head = tail = b""  # the first and last bytes of a line above the bound (its id is there)
        size = 0
        try:
            async for chunk in chunks:
                pieces = decoder.feed(chunk) if chunk else decoder.flush()
                for piece, kind in pieces:
                    if kind == LINE:
                        line = self.session.from_client(piece)
                        if not self.bridge.active:
                            async with self._child_lock:
                                await child.stdin.send(line + _NEWLINE)
                            continue
                        relay = self.bridge.from_client(line)
                        await self._to_child(child, relay)
                        if relay.to_client:
                            with contextlib.suppress(HostGone):  # (the other side sees it too)
                                for out in relay.to_client:
                                    await self._deliver(out)
                        continue
                    head = head or piece[:_EDGE]  # above max_request_bytes: never sent, never held
                    tail = (tail + piece)[-_EDGE:]
                    size += len(piece)
                    if kind == LAST:
                        with contextlib.suppress(HostGone):
                            await self._refuse_call(head, tail, size, limit)
                        head = tail = b""
                        size = 0
                if not chunk:
                    break
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the child is gone: its exit is handled by the other side
        # the host is done: the child should exit now (SIGTERM, then SIGKILL, if it does not)
        await stop(child, self.config.proxy.graceful_shutdown, self.label)

    async def _refuse_call(self, head: bytes, tail: bytes, size: int, limit: int) -> None:
        """A host line of ``size`` bytes, above ``limit`` (``max_request_bytes``), was dropped:
        the request whose id it shows gets a JSON-RPC error.

        Raises:
            HostGone: the host closed its end of stdout.
        """
        key = request_id(head, tail)
        logger.warning(
            "the host sent a line of %d bytes, above max_request_bytes (%d): not passed to %s%s",
            size,
            limit,
            self.label,
            "" if key is None else "; its request is answered with an error",
        )
        if key is not None:
            message = refusal_message(BODY_SIZE, f"a message of {size} bytes, over {limit} bytes")
            await self._write(_error(key, message, -32600))

    async def _signals(self, child: Process) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as received:
            async with anyio.create_task_group() as tg:
                async for signum in received:
                    logger.info("signal %d: passed to %s", signum, self.label)
                    if child.returncode is None:
                        child.send_signal(signum)
                        tg.start_soon(kill_after, child, self.config.proxy.graceful_shutdown, self.label)

    # -- child -> host --------------------------------------------------------------------------

    async def _child_to_host(self, child: Process) -> None:
        limit = self.config.proxy.max_message_bytes
        decoder = LineDecoder(limit)
        head = tail = b""  # the first and last bytes of a line above the bound (its id is there)
        size = 0
        while True:
            chunk = await receive(child.stdout)
            pieces = decoder.feed(chunk) if chunk else decoder.flush()
            for piece, kind in pieces:
                if not chunk and kind == LINE and not _whole(piece):
                    logger.warning("%s ended in the middle of a line: its %d bytes dropped", self.label, len(piece))
                    continue  # a message cut short by the child's end: never relayed half
                if kind != LINE:  # a line above max_message_bytes: dropped as it comes, never held
                    head = head or piece[:_EDGE]
                    tail = (tail + piece)[-_EDGE:]
                    size += len(piece)
                    if kind == LAST:
                        # (cut short by the child's end, it answers nothing: an error will)
                        await self._too_long(head, tail, size, limit, answer=bool(chunk))
                        head = tail = b""
                        size = 0
                    continue
                if not self.bridge.active:
                    await self._deliver(piece)
                    continue
                relay = self.bridge.from_server(piece)
                self._noted(relay)
                if relay.to_server:
                    data = b"".join(out + _NEWLINE for out in relay.to_server)
                    try:
                        self._replies.send_nowait(data)
                    except anyio.WouldBlock:  # (bounded: past _REPLIES lines, this side waits too)
                        await self._replies.send(data)
                for out in relay.to_client:
                    await self._deliver(out)
            if not chunk:
                return

    async def _child_writer(self, child: Process, replies: MemoryObjectReceiveStream[bytes]) -> None:
        """Write the queued lines for the child, in order (dropped once its stdin is closed)."""
        async with replies:
            async for data in replies:
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    async with self._child_lock:
                        await child.stdin.send(data)

    def _noted(self, relay: Relay) -> None:
        """Log the bridge's notes; once it bridges, the rewrite log names the server's era."""
        for note in relay.notes:
            logger.info("%s: %s", self.label, note)
        if self.bridge.bridging and self.session.upstream_eras is None and self.bridge.version is not None:
            self.session.upstream_eras = [self.bridge.version]

    async def _to_child(self, child: Process, relay: Relay) -> None:
        """Write the bridge's lines for the server (the host's side: it waits, as the relay does).

        Raises:
            anyio.BrokenResourceError, anyio.ClosedResourceError: the child's stdin is closed.
        """
        self._noted(relay)
        if relay.to_server:
            async with self._child_lock:
                await child.stdin.send(b"".join(out + _NEWLINE for out in relay.to_server))

    async def _deliver(self, piece: bytes) -> None:
        """One line for the host: through the rules, then written (a line that is not a message is
        logged and counted instead).

        Raises:
            HostGone: the host closed its end of stdout.
        """
        session = self.session
        line = session.from_server(piece)
        while line.busy:
            await anyio.lowlevel.checkpoint()
            line.resume()
        if line.noise is not None:
            self.noise += 1
            child_logger.warning(
                "not a JSON-RPC message on the server's stdout: not relayed",
                extra={"audit": {"server": self.label, "stdout": text(line.noise)}},
            )
            key = long_line_id(line.noise[:_EDGE], line.noise[-_EDGE:])
            bridged = self.bridge.forget(key)  # (the host's id of a request the bridge carries)
            key = bridged if bridged is not None else key
            if key is not None and (session.pending.pop(key, None) is not None or bridged is not None):
                message = f"the MCP server's response ({self.label}) is not a JSON-RPC message: not relayed"
                await self._write(_error(key, message))
        if line.lines:
            await self._write(b"".join(out + _NEWLINE for out in line.lines))

    async def _too_long(self, head: bytes, tail: bytes, size: int, limit: int, *, answer: bool) -> None:
        """A line of the child's of ``size`` bytes, above ``limit`` (``max_message_bytes``), was
        dropped: with ``answer``, the request whose id it shows gets a JSON-RPC error.

        Raises:
            HostGone: the host closed its end of stdout.
        """
        self.noise += 1
        key = long_line_id(head, tail) if answer else None
        bridged = self.bridge.forget(key)
        key = bridged if bridged is not None else key
        logger.warning(
            "%s wrote a line of %d bytes, above max_message_bytes (%d): dropped%s",
            self.label,
            size,
            limit,
            "" if key is None else "; its request is answered with an error",
        )
        if key is not None:
            self.session.pending.pop(key, None)
            message = (
                f"the MCP server's response was {size} bytes, above the proxy's max_message_bytes ({limit}): "
                "not relayed"
            )
            await self._write(_error(key, message))

    async def _child_log(self, child: Process, done: anyio.Event) -> None:
        try:
            await log_stderr(child.stderr, self.label, self._tail)
        finally:
            done.set()

    async def _unanswered(self, status: int) -> None:
        """Answer each request the child left unanswered with a JSON-RPC error."""
        pending = self.session.pending
        keys = list(pending)
        keys += [key for key in self.bridge.unanswered() if key not in pending]  # (not only watched ones)
        if not keys:
            return
        message = f"the MCP server ({self.label}) exited ({describe(status)}) before answering"
        lines = b""
        for key in keys:
            error = {"jsonrpc": "2.0", "id": key[1], "error": {"code": -32603, "message": message}}
            lines += dumps(error) + _NEWLINE  # (integers past 64 bits too)
        pending.clear()
        logger.warning("%s; %d requests answered with an error", message, lines.count(_NEWLINE))
        await self._write(lines)

    async def _write(self, data: bytes) -> None:
        """Write to the host, one writer at a time, in order; waits while the host does not read.

        Raises:
            HostGone: the host closed its end of stdout.
        """
        if self._host_gone:
            raise HostGone
        async with self._write_lock:
            try:
                if self._host_writer is None:
                    self._host_writer = await _host_writer(self.host_out)
                await self._host_writer(data)
            except (OSError, RuntimeError, ValueError) as exc:  # (a closed pipe; a closed file)
                self._host_gone = True
                raise HostGone from exc


def _error(key: tuple[str, object], message: str, code: int = -32603) -> bytes:
    """A JSON-RPC error line for the request ``key`` (its id as the host wrote it)."""
    return dumps({"jsonrpc": "2.0", "id": key[1], "error": {"code": code, "message": message}}) + _NEWLINE


def _is_pipe(file: BinaryIO) -> bool:
    """Can asyncio watch ``file`` (a pipe or a socket, as a host gives a server)?"""
    try:
        mode = os.fstat(file.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)  # (not a terminal or /dev/null: epoll refuses
    # /dev/null, and a terminal made non-blocking would stay so for the shell after us)


async def _host_chunks(source: BinaryIO) -> AsyncIterator[bytes]:
    """The host's bytes as they come, then ``b""`` once: read by the event loop from a pipe (no
    thread hop per chunk), else by a daemon thread (a regular file)."""
    if _is_pipe(source):
        reader = asyncio.StreamReader(limit=_CHUNK)
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source)
        return _stream_chunks(reader)
    send, chunks = anyio.create_memory_object_stream[bytes](1)  # one chunk ahead, no more
    _start_reader(source, send)
    return aiter(chunks)


async def _stream_chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        try:
            chunk = await reader.read(_CHUNK)
        except OSError:
            chunk = b""
        yield chunk
        if not chunk:
            return


async def _host_writer(out: BinaryIO) -> Callable[[bytes], Awaitable[None]]:
    """A writer to the host: an asyncio pipe transport with flow control (``drain``) for a pipe,
    else a worker thread per write (a regular file)."""
    if _is_pipe(out):
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
        writer = asyncio.StreamWriter(transport, protocol, None, loop)

        async def write(data: bytes) -> None:
            writer.write(data)
            await writer.drain()

        return write

    async def write_file(data: bytes) -> None:
        await anyio.to_thread.run_sync(_write_all, out, data)

    return write_file


def _start_reader(source: BinaryIO, send: MemoryObjectSendStream[bytes]) -> None:
    """Read ``source`` in a daemon thread, handing each chunk to ``send`` (``b""`` at its end): a
    host that never closes stdin can then never keep the wrapper from exiting."""
    token = anyio.lowlevel.current_token()
    try:
        fd = source.fileno()  # the file descriptor, not the buffered reader: a daemon thread blocked
        read: Callable[[int], bytes] = partial(os.read, fd)  # in it would abort the interpreter's exit
    except (AttributeError, OSError, ValueError):
        read = getattr(source, "read1", source.read)

    def pump() -> None:
        try:
            while True:
                try:
                    chunk = read(_CHUNK)
                except (OSError, ValueError):
                    chunk = b""  # (a closed stdin reads as its end)
                anyio.from_thread.run(send.send, chunk, token=token)
                if not chunk:
                    return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError):
            return  # the relay is over (or the loop is gone)

    threading.Thread(target=pump, name="mcp-normalizer-stdin", daemon=True).start()


def _write_all(out: BinaryIO, data: bytes) -> None:
    out.write(data)
    out.flush()


def _whole(line: bytes) -> bool:
    """Is ``line`` one whole JSON value (an unterminated last line is a message only then)?"""
    try:
        loads(line.removeprefix(_BOM))
    except DecodeError:
        return False
    return True


def run_stdio(
    command: Sequence[str], config: NormalizerConfig, *, env: dict[str, str] | None = None, cwd: str | None = None
) -> int:
    """Run the wrapper on this process's stdin and stdout (the ``stdio`` subcommand); the exit code
    (the child's; 2 without a command, 126 or 127 when it cannot be started)."""
    if not command:
        print("mcp-normalizer stdio: error: no server command (mcp-normalizer stdio -- CMD ARGS...)", file=sys.stderr)
        return 2
    wrapper = StdioWrapper(command, config, sys.stdin.buffer, sys.stdout.buffer, env=env, cwd=cwd)
    try:
        return anyio.run(wrapper.run, backend_options={"use_uvloop": True})
    except OSError as exc:
        print(f"mcp-normalizer stdio: error: cannot start {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126
