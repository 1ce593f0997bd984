"""A stdio MCP server as a child process: starting it, logging its stderr, stopping it.

Both ways in that speak to a stdio server use this: the wrapper (:mod:`mcp_normalizer.stdio_wrapper`,
one child for the host) and the stdio upstream (:mod:`mcp_normalizer.stdio_upstream`, one child per
HTTP session). MCP ``basic/transports.mdx``, stdio: the server reads JSON-RPC messages from stdin and
writes them to stdout, one per line; it MAY log to stderr. To stop it, the client closes its stdin,
waits, sends SIGTERM, waits again, then SIGKILL (:func:`stop`).

A child is started in a new session (``start_new_session``): a terminal's Ctrl-C reaches it only
through its parent, which decides what to pass on.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
from collections.abc import Mapping, Sequence

import anyio
import anyio.abc

from .lines import LINE, PART, LineDecoder

logger = logging.getLogger("mcp_normalizer")
#: The logger of what a child writes on stderr (and of its stdout noise): ``audit.server`` names it.
child_logger = logging.getLogger("mcp_normalizer.server")

#: Bytes of one child stderr line kept in the log (the rest is cut).
MAX_LOG_LINE = 16 * 1024
#: Bytes read from a child's pipe at once.
CHUNK = 64 * 1024


async def start(
    command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> anyio.abc.Process:
    """Start ``command`` with its three standard streams piped, in a new session.

    Args:
        command: the argv (``command[0]`` is looked up on ``PATH``).
        env: its whole environment (``None``: this process's).
        cwd: its working directory (``None``: this process's).

    Raises:
        OSError: it cannot be started (not found, not executable, a bad ``cwd``).
    """
    return await anyio.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
    )


async def receive(stream: anyio.abc.ByteReceiveStream | None) -> bytes:
    """The next bytes a child wrote on ``stream``; ``b""`` once it has ended (or broke)."""
    if stream is None:
        return b""
    try:
        return await stream.receive(CHUNK)
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        return b""


async def log_stderr(stderr: anyio.abc.ByteReceiveStream | None, label: str) -> None:
    """Log each line the child writes on stderr, tagged ``server: label``, until it ends; a line
    longer than :data:`MAX_LOG_LINE` bytes is cut there."""
    decoder = LineDecoder(MAX_LOG_LINE)
    cut = False
    while True:
        chunk = await receive(stderr)
        for piece, kind in decoder.feed(chunk) if chunk else decoder.flush():
            if kind == LINE or not cut:
                child_logger.info("", extra={"audit": {"server": label, "stderr": text(piece)}})
            cut = kind == PART
        if not chunk:
            return


async def kill_after(child: anyio.abc.Process, grace: float, label: str) -> None:
    """SIGKILL the child if it still runs ``grace`` seconds after it was asked to stop."""
    with anyio.move_on_after(grace):
        await child.wait()
        return
    logger.warning("%s still runs %g s after it was asked to stop: SIGKILL", label, grace)
    with contextlib.suppress(ProcessLookupError):
        child.kill()
    await child.wait()


async def stop(child: anyio.abc.Process, grace: float, label: str) -> None:
    """The stdio shutdown sequence: close the child's stdin, give it ``grace`` seconds to exit,
    then SIGTERM, then as long again before SIGKILL; returns once it has exited (no zombie)."""
    if child.stdin is not None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await child.stdin.aclose()
    with anyio.move_on_after(grace):
        await child.wait()
        return
    logger.warning("%s still runs %g s after its stdin closed: SIGTERM", label, grace)
    with contextlib.suppress(ProcessLookupError):
        child.terminate()
    await kill_after(child, grace, label)


def exit_code(status: int) -> int:
    """A child's exit status as a shell gives it: the status, or ``128 + N`` for signal N."""
    return status if status >= 0 else 128 - status


def describe(status: int) -> str:
    """``"status 3"`` or ``"signal 9"`` for a ``returncode``."""
    return f"status {status}" if status >= 0 else f"signal {-status}"


def text(line: bytes) -> str:
    """A child's line as log text: at most :data:`MAX_LOG_LINE` bytes, undecodable bytes replaced."""
    return line[:MAX_LOG_LINE].decode("utf-8", "replace")
