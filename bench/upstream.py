"""The fixture upstream, in its own process: ``python -m bench.upstream [--port 0]``.

Two :class:`~mcp_normalizer.demo.upstream.ScriptedServer` instances behind a router: a ``tools/call`` of a
tool in :data:`bench.fixture.SSE_TOOLS` is answered by the SSE one, everything else by the JSON
one (``ScriptedServer`` keeps no session state, so either may answer any session). The process
binds its socket, prints the port on one line of stdout (the parent's signal that it accepts
connections) and serves under uvicorn without access log.
"""

from __future__ import annotations

import argparse
import functools
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import orjson
import uvicorn

from mcp_normalizer.demo.upstream import ScriptedServer, ToolCall, ToolSpec
from mcp_normalizer.types import JSONObject, Message, Receive, Scope, Send

from . import fixture


class _Discard(list[tuple[JSONObject, Mapping[str, str]]]):
    """A request log that keeps nothing (``ScriptedServer.requests`` would grow for ever)."""

    def append(self, item: tuple[JSONObject, Mapping[str, str]]) -> None:
        return None


def _nonce(call: ToolCall) -> str:
    return str(call.arguments.get("nonce", ""))


async def _small(call: ToolCall) -> JSONObject:
    return fixture.small_result(_nonce(call), spelled=True)


async def _problem(call: ToolCall) -> JSONObject:
    return fixture.problem_result(_nonce(call))


async def _large(call: ToolCall) -> JSONObject:
    return fixture.large_result(_nonce(call), int(call.arguments.get("bytes", 1 << 20)))


async def _large_float(call: ToolCall) -> JSONObject:
    return fixture.large_result(_nonce(call), int(call.arguments.get("bytes", 1 << 20)), decimals=True)


async def _progress(call: ToolCall) -> JSONObject:
    count = int(call.arguments.get("count", 100))
    gap = float(call.arguments.get("gap_ms", 5.0)) / 1000
    for step in range(1, count + 1):
        await call.progress(step, count, str(time.time_ns()))
        if gap:
            await anyio.sleep(gap)
    return fixture.small_result(_nonce(call), spelled=True)


_HANDLERS = {
    fixture.SMALL: _small,
    fixture.SMALL_SSE: _small,
    fixture.PROBLEM: _problem,
    fixture.PROBLEM_SSE: _problem,
    fixture.LARGE: _large,
    fixture.LARGE_FLOAT: _large_float,
    fixture.LARGE_SSE: _large,
    fixture.PROGRESS: _progress,
}


def tools() -> list[ToolSpec]:
    """The fixture's tools with their handlers."""
    return [ToolSpec(tool, _HANDLERS[tool["name"]]) for tool in fixture.tool_listing()]


def _tool_name(body: bytes) -> str | None:
    """The tool a single ``tools/call`` request names, else ``None``."""
    try:
        message: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return name if isinstance(name, str) else None


@functools.lru_cache(maxsize=4)
def _many(count: int) -> bytes:
    """The encoded ``tools`` of :func:`~bench.fixture.many_tool` ``0..count-1`` (made once: the
    upstream then answers a huge list in the time it takes to copy it, and holds no one up)."""
    return orjson.dumps([fixture.many_tool(i) for i in range(count)])


def _many_tools_request(body: bytes, headers: Sequence[tuple[bytes, bytes]]) -> tuple[Any, int] | None:
    """``(id, count)`` of a ``tools/list`` request that asks for the huge listing, else ``None``."""
    count = next((v for k, v in headers if k.lower() == fixture.MANY_TOOLS_HEADER.encode()), b"")
    if not count.isdigit():
        return None
    try:
        message: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/list" or "id" not in message:
        return None
    return message["id"], min(int(count), 1_000_000)


class Router:
    """ASGI app: SSE tools to one scripted server, everything else to the other; a request with
    :data:`~bench.fixture.MANY_TOOLS_HEADER` is listed that many tools."""

    def __init__(self) -> None:
        specs = tools()
        self.json = ScriptedServer(specs, response_mode="json", name="bench-upstream", requests=_Discard())
        self.sse = ScriptedServer(specs, response_mode="sse", name="bench-upstream", requests=_Discard())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.json(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        many = _many_tools_request(body, scope["headers"])
        if many is not None:
            request_id, count = many
            answer = b'{"jsonrpc":"2.0","id":%s,"result":{"tools":%s}}' % (orjson.dumps(request_id), _many(count))
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
            return
        app = self.sse if _tool_name(body) in fixture.SSE_TOOLS else self.json
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket with ``TCP_NODELAY`` for every accepted connection.

    Created with ``IPPROTO_TCP`` (asyncio sets ``TCP_NODELAY`` only on sockets whose ``proto`` says
    TCP; a ``proto`` 0 listener, as ``mcp_normalizer.cli.bind`` makes, leaves Nagle's algorithm on) and the
    option set on the listener too (Linux copies it to accepted sockets).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the fixture upstream; prints the bound port on stdout first."""
    parser = argparse.ArgumentParser(prog="python -m bench.upstream", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    args = parser.parse_args(argv)
    for size in (1 << 20, 10 << 20):
        fixture.large_result("", size)  # encode the benchmark's rows once, now
    sock = bind(args.host, args.port)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(
        Router(),
        log_config=None,
        log_level="warning",
        access_log=False,
        server_header=False,
        date_header=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
