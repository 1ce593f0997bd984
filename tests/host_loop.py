"""Real hosts in the loop: the shared part of running Claude Code, Gemini CLI and Codex offline.

A host is run as its own process (installed from ``tests/hosts/package-lock.json`` by
``scripts/bootstrap``) with a fresh ``HOME``, pointed at a scripted mock of its model API on
loopback (:class:`MockModel`, one subclass per wire in ``tests/host_<name>.py``) and at one MCP
server (:class:`McpServer`: directly, or the proxy in front of it). The mock records every
request the host sends it, answers the first one with a call of the tool the test names, and the
next one with text. What the model received is read back from those requests as a
:class:`ModelView`: the tools the host offered (and with which declaration), and the tool result
as the model read it. Recipes, versions and each wire: ``../shared/reference/hosts-in-the-loop.md``.

Nothing leaves loopback; no account, key or network. A host that hangs, exits without calling the
model, or a mock that gets a request it does not know ends the test with :class:`HostFailure`
naming the host, the request path and the log, never a hang of the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .support import ROOT, serve

#: Where ``npm ci`` puts the hosts' commands.
HOST_BIN = ROOT / "tests" / "hosts" / "node_modules" / ".bin"
#: Seconds a host run may take before it is ended (a run takes 0.5-2.5 s here).
HOST_TIMEOUT = 90.0


def host_command(name: str) -> Path:
    """The path of a host's command (``claude``, ``gemini``, ``codex``); skips the test when the
    hosts are not installed, fails it under ``MCP_NORMALIZER_REQUIRE_SHARED=1`` (CI installs them)."""
    path = HOST_BIN / name
    if not path.exists():
        if os.environ.get("MCP_NORMALIZER_REQUIRE_SHARED") == "1":
            raise FileNotFoundError(f"{path} is required: run scripts/bootstrap")
        pytest.skip(f"needs {path}: run scripts/bootstrap (it installs tests/hosts)")
    return path


@dataclass(frozen=True)
class McpServer:
    """How a host reaches one MCP server: a Streamable HTTP URL, or a stdio command.

    Attributes:
        name: the server's name in the host's config (the model sees ``mcp__NAME__TOOL`` or the like).
        url: the MCP endpoint (``http://127.0.0.1:PORT/mcp``), or ``None`` for a stdio server.
        command: the stdio server's argv (for example ``mcp-normalizer stdio -- CMD``).
        env: variables for the stdio server.
    """

    name: str
    url: str | None = None
    command: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class ModelView:
    """What one host's model received in one run.

    Attributes:
        host: the host's name (``claude-code``, ``gemini-cli``, ``codex``).
        tools: each MCP tool the host offered the model, by the tool's own MCP name, with the
            declaration the model got (its input schema as the host sent it).
        result: the tool result as the model read it (the text of the host's tool-result message),
            or ``None`` when no result reached the model (the tool was not offered, or the call failed
            before it).
        requests: every request the mock received, as ``(path, decoded JSON body)``.
        log: the host's stdout and stderr (and debug log where the host writes one).
    """

    host: str
    tools: dict[str, Any]
    result: str | None
    requests: list[tuple[str, Any]]
    log: str


class HostFailure(AssertionError):
    """A host run that could not be judged: it hung, exited without reaching the model, or sent
    the mock a request it does not know. The message names the host, the path and the log."""

    def __init__(self, host: str, what: str, path: str | None, log: str) -> None:
        tail = log[-6000:]
        super().__init__(f"{host}: {what} (last model request: {path or 'none'})\n--- host log (tail) ---\n{tail}")


class MockModel:
    """A scripted model API on loopback, the base of each wire's mock.

    Subclasses implement :meth:`answer`: given the request's path and decoded JSON body (and the
    number of the turn, 0 for the first request that offers tools), return the response (an SSE
    stream or JSON), or ``None`` for a request the wire does not know (answered 404 and recorded
    in :attr:`unknown`). Every request is recorded in :attr:`requests`.

    Args:
        host: the host's name, for failures.
        tool: the model-side name of the tool to call on the first turn (``None``: never call one).
        arguments: the call's arguments.
    """

    def __init__(self, host: str, tool: str | None, arguments: Mapping[str, Any]) -> None:
        self.host = host
        self.tool = tool
        self.arguments = dict(arguments)
        self.requests: list[tuple[str, Any]] = []
        #: Requests the API refused as the real one does (an error, never a model's turn): not in
        #: :attr:`requests`, which are what the model was offered.
        self.refused: list[tuple[str, Any]] = []
        self.unknown: list[str] = []
        self.turn = 0

    def answer(self, path: str, body: Any) -> Response | None:
        """The response to one request; ``None`` for a request this wire does not know."""
        raise NotImplementedError

    async def _endpoint(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        self.requests.append((path, body))
        response = self.answer(path, body)
        if response is None:
            self.unknown.append(f"{request.method} {path}")
            return JSONResponse({"error": {"message": f"the mock does not know {request.method} {path}"}}, 404)
        return response

    def app(self) -> Starlette:
        """The mock as an ASGI app: every path and method reaches :meth:`answer`."""
        return Starlette(
            routes=[Route("/{path:path}", self._endpoint, methods=["GET", "POST", "PUT", "DELETE", "HEAD"])]
        )

    @property
    def last_path(self) -> str | None:
        return self.requests[-1][0] if self.requests else None

    @contextmanager
    def serving(self) -> Iterator[str]:
        """Serve the mock on a free loopback port; yield its base URL (``http://127.0.0.1:PORT``)."""
        with serve(self.app(), lifespan="off") as url:
            yield url


def sse(events: Sequence[tuple[str | None, Any]]) -> Response:
    """An SSE response of ``(event name or None, JSON data)`` pairs, written at once."""
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n")
    return Response("".join(out), media_type="text/event-stream", headers={"cache-control": "no-cache"})


def host_env(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """A host's environment: a fresh ``HOME`` and nothing of the test run's own settings
    (no proxy variables, no credentials), plus ``extra``."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SYSTEMROOT")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"))
    env.update(extra)
    return env


def run_host(
    host: str, argv: Sequence[str], env: Mapping[str, str], cwd: Path, mock: MockModel, timeout: float = HOST_TIMEOUT
) -> str:
    """Run one host process to its end; return its output (stdout and stderr, in that order).

    Raises:
        HostFailure: it ran past ``timeout`` seconds (its process group is killed), or the mock got
            a request it does not know, or the host never reached the mock.
    """
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        log = out.decode(errors="replace") + err.decode(errors="replace")
        raise HostFailure(host, f"did not end within {timeout:.0f} s", mock.last_path, log) from None
    finally:
        if process.poll() is None:  # pragma: no cover - only on an interrupted test
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    log = out.decode(errors="replace") + err.decode(errors="replace")
    if mock.unknown:
        raise HostFailure(host, f"sent the mock requests it does not know: {mock.unknown}", mock.last_path, log)
    if not mock.requests and not mock.refused:
        raise HostFailure(host, f"exited ({process.returncode}) without calling the model", None, log)
    return log


def fresh_home(tmp: Path, host: str) -> Path:
    """An empty home folder for one host run (removed first if a retry left one)."""
    home = tmp / f"home-{host}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    return home
