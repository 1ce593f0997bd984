"""Which HTTP client the forwarder should use: CPU per small call of each candidate, in one run.

::

    .venv/bin/python -m bench.upstream_clients [--calls 20000] [--concurrency 16]

Each candidate sends the same small ``tools/call`` POST to the fixture upstream (its own process),
``--concurrency`` requests at a time over kept-alive connections, on uvloop, the body read whole as
the forwarder does, and this process's CPU time is divided by the calls: the cost the client
library adds to every proxied call. Candidates: httpx (httpcore and h11 beneath), httpx over the
``httpx-aiohttp`` transport, aiohttp itself (the forwarder's client until issue 27), and the
forwarder's own :class:`~mcp_normalizer.hop.upstream_http.UpstreamPool`. The upstream's answers are
checked (status 200 and the call's nonce).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

import aiohttp
import httpx
import orjson
import uvloop

from mcp_normalizer.hop.upstream_http import UpstreamPool

from .client import call_message
from .fixture import SMALL
from .procs import start_upstream

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}

#: A candidate: given the URL, a body and the call's nonce, send it and check the answer.
Send = Callable[[str, bytes, str], Awaitable[None]]


def _check(status: int, body: bytes, nonce: str) -> None:
    if status != 200 or nonce.encode() not in body:
        raise RuntimeError(f"unexpected answer {status}: {body[:200]!r}")


async def _run(send: Send, url: str, calls: int, concurrency: int) -> float:
    """CPU seconds of this process per call, for ``calls`` calls ``concurrency`` at a time."""
    queue = iter(range(calls))

    async def worker() -> None:
        for number in queue:
            nonce = f"n{number}"
            await send(url, orjson.dumps(call_message(number, SMALL, {"nonce": nonce})), nonce)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, 4))))  # warm the pools
    queue = iter(range(calls))
    started = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - started) / calls


async def _candidates(url: str, calls: int, concurrency: int) -> dict[str, float]:
    results: dict[str, float] = {}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=100)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:

        async def via_httpx(url: str, body: bytes, nonce: str) -> None:
            response = await client.post(url, content=body, headers=HEADERS)
            _check(response.status_code, response.content, nonce)

        results["httpx (httpcore, h11)"] = await _run(via_httpx, url, calls, concurrency)

    from httpx_aiohttp import AiohttpTransport

    async with httpx.AsyncClient(transport=AiohttpTransport(limits=limits), trust_env=False) as client:

        async def via_httpx_aiohttp(url: str, body: bytes, nonce: str) -> None:
            response = await client.post(url, content=body, headers=HEADERS)
            _check(response.status_code, response.content, nonce)

        results["httpx over httpx-aiohttp"] = await _run(via_httpx_aiohttp, url, calls, concurrency)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def via_aiohttp(url: str, body: bytes, nonce: str) -> None:
            async with session.post(url, data=body, headers=HEADERS) as response:
                _check(response.status, await response.read(), nonce)

        results["aiohttp"] = await _run(via_aiohttp, url, calls, concurrency)

    pool = UpstreamPool("127.0.0.1", int(url.split(":")[2].split("/")[0]))
    head = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in HEADERS.items())

    async def via_pool(url: str, body: bytes, nonce: str) -> None:
        response = await pool.send(0, b"POST", head + b"content-length: %d\r\n\r\n" % len(body), body)
        parts = []
        while chunk := await response.read():
            parts.append(chunk)
        response.release()
        _check(response.status, b"".join(parts), nonce)

    results["UpstreamPool (the forwarder's)"] = await _run(via_pool, url, calls, concurrency)
    await pool.aclose()
    return results


def main() -> None:
    """Run the comparison and print one line per candidate."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    upstream = start_upstream()
    try:
        url = f"http://127.0.0.1:{upstream.port}/mcp"
        results = uvloop.run(_candidates(url, args.calls, args.concurrency))
    finally:
        upstream.stop()
    print(f"client CPU per small call ({args.calls} calls, {args.concurrency} at a time, uvloop):")
    for name, seconds in results.items():
        print(f"  {name:30s} {seconds * 1e6:7.0f} µs")


if __name__ == "__main__":
    main()
