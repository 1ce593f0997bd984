"""The engine's cost without any hop: the normalizer middleware around a canned ASGI app, against
the floor's driver of the same engine (``lean_hop.py``'s ``NormEngine``), CPU per small call.

::

    .venv/bin/python -m bench.inprocess [--calls 20000]

Both answer the same ``tools/call`` of ``bench.small`` in one session after the same
``tools/list``, on uvloop, in this process: the middleware through ASGI (``receive``/``send``, the
relay, the name map, the scope's bookkeeping), the floor by calling the transformer directly, as
lean_hop does on each POST. The difference is the middleware's plumbing; the transformer and the
rules are the same code. Without the shared folder only the middleware is measured.
"""

from __future__ import annotations

import argparse
import importlib
import runpy
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
import uvloop

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.middleware import NormalizerMiddleware
from mcp_normalizer.types import Message, Receive, Scope, Send
from mcp_normalizer.wire.body import buffer_body

from . import fixture
from .client import call_message
from .procs import ROOT, lean_hop

HEADERS = [
    (b"host", b"127.0.0.1"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-session-id", b"bench-session"),
    (b"mcp-protocol-version", b"2025-11-25"),
]
LISTING = orjson.dumps({"jsonrpc": "2.0", "id": 0, "result": {"tools": fixture.tool_listing()}})
LIST_REQUEST = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "tools/list"})
#: The answers, made before the clock starts (the upstream's work is not the proxy's).
ANSWERS: dict[int, tuple[bytes, bytes]] = {}


def _exchange(number: int) -> tuple[bytes, bytes]:
    """Call ``number``'s request body and the upstream's answer to it."""
    found = ANSWERS.get(number)
    if found is None:
        nonce = f"n{number}"
        request = orjson.dumps(call_message(number, fixture.SMALL, {"nonce": nonce}))
        answer = orjson.dumps({"jsonrpc": "2.0", "id": number, "result": fixture.small_result(nonce)})
        found = ANSWERS[number] = (request, answer)
    return found


def _head(body: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]


def middleware_cost(calls: int) -> float:
    """CPU seconds per call of :class:`NormalizerMiddleware` around a canned app."""
    answer_of: dict[bytes, bytes] = {LIST_REQUEST: LISTING}

    async def upstream(scope: Scope, receive: Receive, send: Send) -> None:
        body, _, _ = await buffer_body(receive, 1 << 20)
        out = answer_of[body]
        await send({"type": "http.response.start", "status": 200, "headers": _head(out)})
        await send({"type": "http.response.body", "body": out})

    app = NormalizerMiddleware(upstream, NormalizerConfig.shipped(), upstream="http://bench/mcp")

    async def one(body: bytes) -> None:
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "headers": [*HEADERS, (b"content-length", b"%d" % len(body))],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8765),
            "scheme": "http",
        }
        sent: list[Message] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Message) -> None:
            sent.append(message)

        await app(scope, receive, send)
        if sent[0]["status"] != 200:
            raise RuntimeError(f"the middleware answered {sent[0]['status']}")

    async def run() -> float:
        await one(LIST_REQUEST)
        for number in range(1, calls + 1):
            request, answer = _exchange(number)
            answer_of[request] = answer
        for number in range(1, min(calls, 500) + 1):  # warm
            await one(_exchange(number)[0])
        started = time.process_time()
        for number in range(1, calls + 1):
            await one(_exchange(number)[0])
        return (time.process_time() - started) / calls

    return uvloop.run(run())


def floor_cost(calls: int) -> float | None:
    """CPU seconds per call of lean_hop's ``NormEngine`` driving the same engine (``None``
    without the shared folder)."""
    script = lean_hop()
    if script is None:
        return None
    sys.modules.setdefault("mcp_normalizer.transform", importlib.import_module("mcp_normalizer.engine.transform"))
    lean = runpy.run_path(str(script), run_name="lean_hop")
    engine = lean["NormEngine"](str(ROOT), None, "http://bench/mcp", "/mcp")
    request_class: Callable[[], Any] = lean["Request"]

    def one(body: bytes, answer: bytes) -> None:
        request = request_class()
        request.method, request.target, request.body = b"POST", b"/mcp", body
        request.headers = [*HEADERS, (b"content-length", b"%d" % len(body))]
        engine.on_request(request)
        transformer = request.norm.transformer
        transformer.start(200, _head(answer))
        out = transformer.feed(answer) + transformer.finish()
        while transformer.busy or transformer.stalled:
            out += transformer.resume()
        if not out:
            raise RuntimeError("the floor's engine wrote nothing")

    one(LIST_REQUEST, LISTING)
    for number in range(1, min(calls, 500) + 1):
        one(*_exchange(number))
    started = time.process_time()
    for number in range(1, calls + 1):
        one(*_exchange(number))
    return (time.process_time() - started) / calls


def main() -> None:
    """Measure both and print a line each, and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    middleware = middleware_cost(args.calls)
    floor = floor_cost(args.calls)
    print(f"engine CPU per small call, in process ({args.calls} calls):")
    print(f"  middleware (NormalizerMiddleware around a canned app) {middleware * 1e6:7.0f} µs")
    if floor is None:
        print("note: no ../shared/tools/lean_hop.py: the floor's driver is not measured")
        return
    print(f"  floor (lean_hop's NormEngine, the same engine)         {floor * 1e6:7.0f} µs")
    print(f"  middleware/floor {middleware / floor:.2f}x")


if __name__ == "__main__":
    main()
