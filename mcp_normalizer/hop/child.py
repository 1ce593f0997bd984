"""A stdio MCP server as a child process: starting it, logging its stderr, stopping it.

Both ways in that speak to a stdio server use this: the wrapper (:mod:`mcp_normalizer.hop.stdio_wrapper`,
one child for the host) and the stdio upstream (:mod:`mcp_normalizer.hop.stdio_upstream`, one child per
HTTP session). MCP ``basic/transports.mdx``, stdio: the server reads JSON-RPC messages from stdin and
writes them to stdout, one per line; it MAY log to stderr. To stop it, the client closes its stdin,
waits, sends SIGTERM, waits again, then SIGKILL (:func:`stop`).

A child's environment (:func:`server_env`) is the proxy's less the proxy's own variables
(``MCP_NORMALIZER_*``, ``OTEL_*``: the state store's password, the state secret, a collector's token),
with the interpreter's own ``LC_CTYPE`` (PEP 538 locale coercion, for the proxy alone) undone, plus
what ``--env``/``upstream_env`` set or pass through by name.

As PID 1 (a container's entry point with no init), the proxy is also the parent of every process a
server leaves behind (a helper whose parent exited): :func:`reap_orphans` reaps those, and never the
children :func:`start` started, each waited for by its own thread.

A child is started in a new session (``start_new_session``): a terminal's Ctrl-C reaches it only
through its parent, which decides what to pass on; the signals its parent sends go to its whole
process group. It gets no descriptor but its three pipes (:class:`Process`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from functools import cache, partial
from typing import IO

import anyio

from ..config import OWN_PREFIXES
from ..wire.lines import LINE, PART, LineDecoder

logger = logging.getLogger("mcp_normalizer")
#: The logger of what a child writes on stderr (and of its stdout noise): ``audit.server`` names it.
child_logger = logging.getLogger("mcp_normalizer.hop.server")

#: Bytes of one child stderr line kept in the log (the rest is cut).
MAX_LOG_LINE = 16 * 1024
#: Bytes read from a child's pipe at once.
CHUNK = 64 * 1024


#: The children :func:`start` started and not yet reaped, by pid: each is reaped by its own thread,
#: never by :func:`reap_orphans`. Guarded by :data:`_spawn`, held while a child is forked.
_owned: set[int] = set()
_spawn = threading.Condition()
#: Seconds the orphan reaper waits, with no child at all, before it looks again (a process entered
#: from outside, ``docker exec``, can leave an orphan to PID 1 while the proxy has no child).
ORPHAN_POLL = 5.0
_reaper: threading.Thread | None = None


def reap_orphans() -> bool:
    """When this process is PID 1 (a container started with no init), start a daemon thread that
    reaps every process handed to it that it did not start (a server's helper whose parent exited),
    so none stays a zombie. True if it was started.

    It peeks (``waitid(P_ALL, WEXITED | WNOWAIT)``: nothing reaped) and reaps only a pid that is not
    one of :data:`_owned`: the exit status of a server is its own waiter's.
    """
    global _reaper
    if os.getpid() != 1 or _reaper is not None:
        return False
    _reaper = threading.Thread(target=_reap_orphans, name="mcp-normalizer-init", daemon=True)
    _reaper.start()
    logger.debug("PID 1: orphaned processes are reaped")
    return True


def _reap_orphans() -> None:
    """The orphan reaper's loop (:func:`reap_orphans`)."""
    while True:
        try:
            found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)  # blocks until a child has exited
        except ChildProcessError:  # no child at all: wait for one
            with _spawn:
                _spawn.wait(ORPHAN_POLL)
            continue
        if found is None:
            continue
        pid = found.si_pid
        with _spawn:  # (a child being started now is in _owned once the lock is free)
            if pid in _owned:  # its own thread reaps it, now
                _spawn.wait_for(partial(_reaped, pid), timeout=1.0)
                continue
            try:
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG)
            except ChildProcessError:
                continue  # (reaped by whoever started it: a start that failed)
        logger.debug("reaped an orphaned process (pid %d, status %d)", pid, found.si_status)


def _reaped(pid: int) -> bool:
    """Has the child ``pid`` that :func:`start` started been reaped by its own thread?"""
    return pid not in _owned


class PipeReader:
    """The read end of a child's pipe, read by the event loop (``receive`` as anyio's streams)."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        self._reader = reader
        self._transport = transport

    async def receive(self, max_bytes: int = CHUNK) -> bytes:
        """The next bytes (at most ``max_bytes``).

        Raises:
            anyio.EndOfStream: the child closed its end.
        """
        try:
            data = await self._reader.read(max_bytes)
        except OSError:
            data = b""
        if not data:
            raise anyio.EndOfStream
        return data

    def close(self) -> None:
        self._transport.close()

    async def aclose(self) -> None:
        self.close()


class PipeWriter:
    """The write end of a child's pipe (its stdin), with the event loop's flow control."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, data: bytes) -> None:
        """Write ``data`` and wait while the child does not read it.

        Raises:
            anyio.BrokenResourceError: the child closed its stdin (or exited).
        """
        if self._writer.transport.is_closing():
            raise anyio.BrokenResourceError
        self._writer.write(data)
        try:
            await self._writer.drain()
        except (ConnectionError, OSError, RuntimeError) as exc:
            raise anyio.BrokenResourceError from exc

    def close(self) -> None:
        self._writer.transport.close()

    async def aclose(self) -> None:
        self.close()


class Process:
    """A child started with :class:`subprocess.Popen`: every descriptor but its three pipes closed
    (the proxy's listening socket and the loop's own descriptors never leak into it: uvloop's
    spawn passes inheritable ones on), in a new session whose process group it leads. Its pipes are
    read and written by the event loop; a daemon thread waits for its exit.

    Signals go to its whole process group, so helpers it started stop with it.
    """

    def __init__(
        self, popen: subprocess.Popen[bytes], stdin: PipeWriter, stdout: PipeReader, stderr: PipeReader
    ) -> None:
        self._popen = popen
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._exited = asyncio.Event()
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._reap, args=(loop,), name=f"mcp-normalizer-reap-{popen.pid}", daemon=True).start()

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """Its exit status once it has been reaped (``-N`` for signal N), else ``None``."""
        return self._popen.returncode

    async def wait(self) -> int:
        """Wait for it to exit; its ``returncode``."""
        await self._exited.wait()
        status = self._popen.returncode
        assert status is not None
        return status

    def _reap(self, loop: asyncio.AbstractEventLoop) -> None:
        """In a daemon thread: wait for the child to exit, reap it, tell the loop. (A pidfd watched
        by the loop would do without the thread, but uvloop keeps polling a closed descriptor's
        number, which the next accepted connection may get.)"""
        self._popen.wait()
        with _spawn:
            _owned.discard(self._popen.pid)
            _spawn.notify_all()
        with contextlib.suppress(RuntimeError):  # (the loop is gone)
            loop.call_soon_threadsafe(self._exited.set)

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to its process group (to it alone if that fails)."""
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            if self._popen.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._popen.send_signal(signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def kill_group(self) -> bool:
        """SIGKILL what is left of its process group after it exited; True if anything was."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def close_pipes(self) -> None:
        """Close the proxy's ends of its three pipes (the child sees its stdin end)."""
        for pipe in (self.stdin, self.stdout, self.stderr):
            with contextlib.suppress(Exception):
                pipe.close()

    async def aclose(self) -> None:
        """Close its pipes; if it still runs, kill it and reap it."""
        self.close_pipes()
        if self._popen.returncode is None:
            with anyio.CancelScope(shield=True):
                self.kill()
                await self.wait()

    async def __aenter__(self) -> Process:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


#: The locales CPython sets ``LC_CTYPE`` to when it coerces a C locale (PEP 538), in its order.
_COERCED = ("C.UTF-8", "C.utf8", "UTF-8")


@cache
def _ctype_at_start() -> tuple[bool, str | None]:
    """``LC_CTYPE`` as this process was started: (known, value). Read from ``/proc/self/environ``
    (Linux), which holds the environment the process was given, not what it set since; not known
    elsewhere."""
    try:
        with open("/proc/self/environ", "rb") as fh:
            entries = fh.read().split(b"\0")
    except OSError:
        return False, None
    for entry in entries:
        name, sep, value = entry.partition(b"=")
        if sep and name == b"LC_CTYPE":
            return True, os.fsdecode(value)
    return True, None


def server_env(
    extra: Mapping[str, str] | None = None,
    passed: Collection[str] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of a stdio server started by this process.

    Args:
        extra: variables set for it (``NAME=VALUE`` items), over everything else.
        passed: names of this process's variables passed through even when they are its own.
        environ: this process's environment (``None``: ``os.environ``).

    Everything of ``environ`` goes, but the proxy's own variables (:data:`OWN_PREFIXES`) and the
    ``LC_CTYPE`` the interpreter set for itself: with a C locale, CPython coerces its own to UTF-8
    and sets ``LC_CTYPE=C.UTF-8`` in its environment (PEP 538), a variable the host never sent.
    """
    source = os.environ if environ is None else environ
    env = {name: value for name, value in source.items() if not name.startswith(OWN_PREFIXES)}
    known, ctype = _ctype_at_start() if environ is None else (False, None)
    if known and env.get("LC_CTYPE") in _COERCED and ctype != env.get("LC_CTYPE"):
        if ctype is None:
            del env["LC_CTYPE"]
        else:
            env["LC_CTYPE"] = ctype
    env.update({name: source[name] for name in passed if name in source})
    env.update(extra or {})
    return env


async def start(command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> Process:
    """Start ``command`` with its three standard streams piped, in a new session.

    Args:
        command: the argv (``command[0]`` is looked up on ``PATH``).
        env: its whole environment (``None``: this process's).
        cwd: its working directory (``None``: this process's).

    Raises:
        OSError: it cannot be started (not found, not executable, a bad ``cwd``).
    """
    loop = asyncio.get_running_loop()
    # The pipes are made here, not by Popen: uvloop closes a pipe's descriptor itself and then
    # closes the file object it was given too, so the descriptor would be closed twice (the second
    # time, perhaps, after another thread got the same number). Each end the loop owns is wrapped
    # in a file object that closes nothing under uvloop, and Popen keeps no file objects of its own.
    closes_itself = type(loop).__module__.startswith("uvloop")
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        with _spawn:  # (the orphan reaper never sees it unowned)
            popen = subprocess.Popen(
                list(command),
                stdin=in_read,
                stdout=out_write,
                stderr=err_write,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
            _owned.add(popen.pid)
            _spawn.notify_all()
    except BaseException:
        for fd in (in_read, in_write, out_read, out_write, err_read, err_write):
            os.close(fd)
        raise
    for fd in (in_read, out_write, err_write):  # the child's ends
        os.close(fd)
    files = [
        open(fd, mode, buffering=0, closefd=not closes_itself)
        for fd, mode in ((out_read, "rb"), (err_read, "rb"), (in_write, "wb"))
    ]
    try:
        readers = [await _reader(loop, file) for file in files[:2]]
        write_transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, files[2])
        stdin = PipeWriter(asyncio.StreamWriter(write_transport, protocol, None, loop))
    except BaseException:
        popen.kill()
        popen.wait()
        with _spawn:
            _owned.discard(popen.pid)
        raise
    return Process(popen, stdin, readers[0], readers[1])


async def _reader(loop: asyncio.AbstractEventLoop, file: IO[bytes]) -> PipeReader:
    reader = asyncio.StreamReader(limit=CHUNK)
    transport, _ = await loop.connect_read_pipe(partial(asyncio.StreamReaderProtocol, reader), file)
    return PipeReader(reader, transport)


async def receive(stream: PipeReader) -> bytes:
    """The next bytes a child wrote on ``stream``; ``b""`` once it has ended (or broke)."""
    try:
        return await stream.receive(CHUNK)
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        return b""


async def log_stderr(stderr: PipeReader, label: str, tail: deque[str] | None = None) -> None:
    """Log each line the child writes on stderr, tagged ``server: label``, until it ends; a line
    longer than :data:`MAX_LOG_LINE` bytes is cut there. The last lines also go to ``tail``
    (bounded by its ``maxlen``), for the warning of a child that dies (:func:`last_words`)."""
    decoder = LineDecoder(MAX_LOG_LINE)
    cut = False
    while True:
        chunk = await receive(stderr)
        for piece, kind in decoder.feed(chunk) if chunk else decoder.flush():
            if kind == LINE or not cut:
                line = text(piece)
                child_logger.info("", extra={"audit": {"server": label, "stderr": line}})
                if tail is not None:
                    tail.append(line)
            cut = kind == PART
        if not chunk:
            return


def last_words(tail: deque[str]) -> str:
    """What a dead child last wrote on stderr, for its exit warning (``--log-level warning`` logs no
    stderr line itself): ``; its last stderr lines: ...``, or ``""``."""
    lines = [line for line in tail if line.strip()]
    return f"; its last stderr lines: {' | '.join(lines)[-2000:]}" if lines else ""


async def kill_after(child: Process, grace: float, label: str) -> None:
    """SIGKILL the child if it still runs ``grace`` seconds after it was asked to stop."""
    with anyio.move_on_after(grace):
        await child.wait()
        return
    logger.warning("%s still runs %g s after it was asked to stop: SIGKILL", label, grace)
    with contextlib.suppress(ProcessLookupError):
        child.kill()
    await child.wait()


async def stop(child: Process, grace: float, label: str) -> None:
    """The stdio shutdown sequence: close the child's stdin, give it ``grace`` seconds to exit,
    then SIGTERM, then as long again before SIGKILL; returns once it has exited (no zombie)."""
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await child.stdin.aclose()
    with anyio.move_on_after(grace):
        await child.wait()
        return
    logger.warning("%s still runs %g s after its stdin closed: SIGTERM", label, grace)
    with contextlib.suppress(ProcessLookupError):
        child.terminate()
    await kill_after(child, grace, label)


async def exited_or(child: Process, done: anyio.Event) -> None:
    """Return once ``child`` has exited or ``done`` is set, whichever comes first (a child's stdout
    may end before it exits, or, held open by a helper it started, never)."""
    async with anyio.create_task_group() as tg:

        async def exited() -> None:
            await child.wait()
            tg.cancel_scope.cancel()

        async def finished() -> None:
            await done.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(exited)
        tg.start_soon(finished)


def exit_code(status: int) -> int:
    """A child's exit status as a shell gives it: the status, or ``128 + N`` for signal N."""
    return status if status >= 0 else 128 - status


def describe(status: int) -> str:
    """``"status 3"`` or ``"signal 9"`` for a ``returncode``."""
    return f"status {status}" if status >= 0 else f"signal {-status}"


def text(line: bytes) -> str:
    """A child's line as log text: at most :data:`MAX_LOG_LINE` bytes, undecodable bytes replaced."""
    return line[:MAX_LOG_LINE].decode("utf-8", "replace")
