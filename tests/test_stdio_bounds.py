"""Issue 37 (major 3): what waits in the proxy for a client of a stdio server is bounded in bytes,
per stream, per child and per process, and the children are bounded per client as well as in
total. Driven on the wire: the proxy runs as its own process (``mcp-normalizer -- CMD``), clients
are raw sockets that send a request and then never read, and the proxy's memory is read from
``/proc/PID/status``."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from .support import EXE, HEADERS, free_port, listening_process
from .test_stdio_wrapper import fixture, plan_with

pytestmark = pytest.mark.wire

MiB = 1024 * 1024
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
MODERN = "2026-07-28"


def call(rid: Any, tool: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": {}, **params}}


def modern_call(rid: Any, tool: str) -> dict[str, Any]:
    return call(rid, tool, _meta={"io.modelcontextprotocol/protocolVersion": MODERN})


@contextmanager
def proxy_process(command: Sequence[str], env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """The proxy serving ``command`` as its own process (``MCP_NORMALIZER_*`` ``env``): its MCP
    URL and its pid. Stopped with SIGTERM at the end."""
    port = free_port()
    with listening_process([EXE, "--port", str(port), "--", *command], port, env, stop_timeout=30) as (process, _):
        yield f"http://127.0.0.1:{port}/mcp", process.pid


def rss(pid: int) -> int:
    """The resident memory of process ``pid``, in bytes (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def settled_rss(pid: int) -> int:
    """The proxy's resident memory once it has stopped growing (the same for 3 s, at most 40 s):
    the most it reached."""
    peak = rss(pid)
    still = 0
    deadline = time.monotonic() + 40
    while still < 12 and time.monotonic() < deadline:
        time.sleep(0.25)
        now = rss(pid)
        still = still + 1 if now <= peak else 0
        peak = max(peak, now)
    return peak


def unread(url: str, message: Any, headers: dict[str, str]) -> socket.socket:
    """A client that POSTs ``message`` and then never reads a byte (a small receive buffer, so the
    kernel takes little of what the proxy writes)."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    body = orjson.dumps(message)
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    sock.sendall(
        f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-length: {len(body)}\r\n{head}\r\n".encode() + body
    )
    return sock


def bounded_env(**extra: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_NORMALIZER_")}
    return {
        **env,
        "MCP_NORMALIZER_STREAM_BUFFER_BYTES": str(1 * MiB),
        "MCP_NORMALIZER_CHILD_BUFFER_BYTES": str(4 * MiB),
        "MCP_NORMALIZER_PROCESS_BUFFER_BYTES": str(8 * MiB),
        "MCP_NORMALIZER_SEND_TIMEOUT": "600",
        # glibc raises its mmap threshold to the largest block freed (up to 32 MiB), so freed
        # multi-MiB messages stay in its heap, fragmented, and RSS keeps memory the proxy no
        # longer holds (the stateless case: 26 MiB instead of 17). A
        # fixed threshold returns each freed message to the system: RSS is then what is held.
        "MALLOC_MMAP_THRESHOLD_": str(128 * 1024),
        **extra,
    }


#: A big answer, as in the issue (there 19 MiB): each is larger than the per-stream bound.
BIG = 3 * MiB
#: What the proxy may hold beyond the configured bound: the messages being written to clients
#: (each copied by the rewrite and the server's buffers while it goes out, a message counted once
#: by the bound), what the allocator keeps of freed blocks, the interpreter's own growth. Far below
#: what the unread calls below would hold whole. Measured (the threshold below fixed): 13 MiB (a
#: session), 17 MiB (stateless) with these bounds; 153-162 MiB before the bounds existed.
ALLOWANCE = 24 * MiB
PROCESS_BOUND = 8 * MiB
#: Many sessions at once: up to three messages may be being written (two within the process
#: bound, one alone over it), each held in up to four copies while it goes out (the line, the SSE
#: event, the rewrite's parse and its output), and cut streams churn the heap: 25-50 MiB measured
#: with eight sessions, against 153 MiB before the bounds existed.
MANY_ALLOWANCE = 64 * MiB


def test_a_session_whose_calls_are_never_read_holds_no_more_than_the_bound() -> None:
    """Sixteen calls of one session, each answered with 3 MiB, none read: the proxy holds at most
    the configured bytes (then its child is no longer read); today's proxy held each whole."""
    plan = plan_with(big_tool="echo", big=BIG)
    with proxy_process(fixture(plan), bounded_env()) as (url, pid), httpx.Client(timeout=60) as http:
        first = http.post(url, content=orjson.dumps(INIT), headers=HEADERS)
        session = first.headers["mcp-session-id"]
        headers = {**HEADERS, "mcp-session-id": session}
        warm = http.post(url, content=orjson.dumps(call(1, "echo")), headers=headers)
        assert warm.status_code == 200 and len(warm.content) > BIG  # one that reads gets it whole
        before = settled_rss(pid)
        with ExitStack() as stack:
            for rid in range(2, 18):
                stack.callback(unread(url, call(rid, "echo"), headers).close)
            during = settled_rss(pid)
        grown = during - before
    assert grown < PROCESS_BOUND + ALLOWANCE, f"grew {grown / MiB:.1f} MiB"


def test_many_sessions_whose_calls_are_never_read_hold_no_more_than_the_process_bound() -> None:
    """Eight sessions (eight servers), two unread 3 MiB calls each: each server stays within
    ``child_buffer_bytes``, and all of them within ``process_buffer_bytes`` (past it the stream
    with the most bytes waiting, another session's, is ended)."""
    plan = plan_with(big_tool="echo", big=BIG)
    with proxy_process(fixture(plan), bounded_env()) as (url, pid), httpx.Client(timeout=60) as http:
        sessions = []
        for _ in range(8):
            first = http.post(url, content=orjson.dumps(INIT), headers=HEADERS)
            sessions.append({**HEADERS, "mcp-session-id": first.headers["mcp-session-id"]})
        for headers in sessions:  # (what a session keeps of an answer it read is no waiting)
            warm = http.post(url, content=orjson.dumps(call(1, "echo")), headers=headers)
            assert warm.status_code == 200 and len(warm.content) > BIG
        before = settled_rss(pid)
        with ExitStack() as stack:
            for rid in range(2, 4):
                for headers in sessions:
                    stack.callback(unread(url, call(rid, "echo"), headers).close)
            during = settled_rss(pid)
        after = http.post(url, content=orjson.dumps(call(9, "echo")), headers=sessions[0])
        grown = during - before
    assert grown < PROCESS_BOUND + MANY_ALLOWANCE, f"grew {grown / MiB:.1f} MiB"
    assert after.status_code == 200 and len(after.content) > BIG


def test_stateless_clients_that_never_read_hold_no_more_than_the_bound() -> None:
    """Sixteen stateless clients of the shared child, each answered with 3 MiB and reading
    nothing: the proxy cuts the slowest rather than hold them all."""
    plan = plan_with(big_tool="echo", big=BIG)
    with proxy_process(fixture(plan), bounded_env()) as (url, pid), httpx.Client(timeout=60) as http:
        headers = {**HEADERS, "mcp-protocol-version": MODERN}
        warm = http.post(url, content=orjson.dumps(modern_call(1, "echo")), headers=headers)
        assert warm.status_code == 200 and len(warm.content) > BIG
        before = settled_rss(pid)
        with ExitStack() as stack:
            for rid in range(2, 18):
                stack.callback(unread(url, modern_call(rid, "echo"), headers).close)
            during = settled_rss(pid)
        after = http.post(url, content=orjson.dumps(modern_call(99, "echo")), headers=headers)
        grown = during - before
    assert grown < PROCESS_BOUND + ALLOWANCE, f"grew {grown / MiB:.1f} MiB"
    assert after.status_code == 200 and len(after.content) > BIG  # the shared server still serves


# -- children: per client, and the longest-idle one makes room ----------------------------------


@pytest.mark.anyio
async def test_sessions_that_never_end_do_not_lock_out_the_next_one() -> None:
    """TS SDK 1.x ends no session with DELETE: 65 sessions with ``max_children`` 64 all start, the
    longest-idle one's server making room; that session then gets 404 (and initializes again)."""
    import anyio

    from .test_stdio_upstream import events, open_session, post, stdio_proxy

    plan = plan_with()
    with stdio_proxy(fixture(plan), max_children=64, max_children_per_client=64) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=60) as http:
            sessions = [await open_session(http, url) for _ in range(65)]
            gone = await post(http, url, call(1, "echo"), sessions[0])
            kept = [events(await post(http, url, call(1, "echo"), s))[0] for s in sessions[1:]]
            with anyio.fail_after(30):  # (the ended one's server is reaped)
                metrics = (await http.get(px + "/.mcp-normalizer/metrics")).text
                while "mcp_normalizer_stdio_children 64.0" not in metrics:
                    await anyio.sleep(0.05)
                    metrics = (await http.get(px + "/.mcp-normalizer/metrics")).text
    assert gone.status_code == 404
    assert all(m["result"]["content"][0]["text"] == "caf\u00e9 \u2713 12.50 1e-3" for m in kept)
    assert 'mcp_normalizer_upstream_errors_total{kind="evicted"} 1.0' in metrics


@pytest.mark.anyio
async def test_a_client_at_its_own_limit_ends_its_own_idlest_session_never_anothers() -> None:
    from .test_stdio_upstream import events, open_session, post, stdio_proxy

    plan = plan_with()
    with stdio_proxy(fixture(plan), max_children=8, max_children_per_client=2) as px:
        url = px + "/mcp"
        async with (
            httpx.AsyncClient(timeout=60, headers={"authorization": "Bearer a"}) as a,
            httpx.AsyncClient(timeout=60, headers={"authorization": "Bearer b"}) as b,
        ):
            theirs = await open_session(b, url)
            mine = [await open_session(a, url) for _ in range(3)]
            answers = [await post(a, url, call(1, "echo"), s) for s in mine]
            other = events(await post(b, url, call(1, "echo"), theirs))
    assert [r.status_code for r in answers] == [404, 200, 200]
    assert other[0]["result"]["content"][0]["text"] == "caf\u00e9 \u2713 12.50 1e-3"


@pytest.mark.anyio
async def test_one_clients_crashing_calls_never_refuse_another_clients_session() -> None:
    """Stateless calls that crash the shared server, again and again, back off their own client
    alone: another client's ``initialize`` and stateless calls are served."""
    from .test_stdio_upstream import events, stdio_proxy

    plan = plan_with(crash_on="protean.list_runtimes")
    headers = {**HEADERS, "mcp-protocol-version": MODERN}
    with stdio_proxy(fixture(plan)) as px:
        url = px + "/mcp"
        async with (
            httpx.AsyncClient(timeout=60, headers={"authorization": "Bearer a"}) as a,
            httpx.AsyncClient(timeout=60, headers={"authorization": "Bearer b"}) as b,
        ):
            crashes = [
                await a.post(url, content=orjson.dumps(modern_call(i, "protean.list_runtimes")), headers=headers)
                for i in range(3)
            ]
            started = await b.post(url, content=orjson.dumps(INIT), headers=HEADERS)
            served = await b.post(url, content=orjson.dumps(modern_call(7, "echo")), headers=headers)
            ready = await b.get(px + "/.mcp-normalizer/readyz")
    assert ["exited" in events(r)[0]["error"]["message"] for r in crashes[:2]] == [True, True]
    assert crashes[2].status_code == 503 and "retry-after" in crashes[2].headers  # its own back-off
    assert started.status_code == 200 and events(started)[0]["result"]["serverInfo"]["name"] == "stdio-fixture"
    assert served.status_code == 200 and events(served)[0]["result"]["content"][0]["text"].startswith("caf")
    assert ready.status_code == 200


# -- what a client meets at the bounds ----------------------------------------------------------


@pytest.mark.anyio
async def test_a_message_larger_than_every_bound_still_reaches_a_client_that_reads() -> None:
    """A message counts once: 3 MiB with every bound at 1 MiB goes whole to a session's client
    and to a stateless one."""
    from .test_stdio_upstream import events, open_session, post, stdio_proxy

    plan = plan_with(big_tool="echo", big=BIG)
    bounds: dict[str, Any] = {"stream_buffer_bytes": MiB, "child_buffer_bytes": MiB, "process_buffer_bytes": MiB}
    with stdio_proxy(fixture(plan), **bounds) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=60) as http:
            session = await open_session(http, url)
            sessionful = events(await post(http, url, call(1, "echo"), session))
            modern = {**HEADERS, "mcp-protocol-version": MODERN}
            stateless = events(await http.post(url, content=orjson.dumps(modern_call(2, "echo")), headers=modern))
    for (message,), rid in ((sessionful, 1), (stateless, 2)):
        assert message["id"] == rid and message["result"]["content"][1]["text"] == "x" * BIG


@pytest.mark.anyio
async def test_a_stateless_client_that_stops_reading_is_cut_and_holds_no_one_up(tmp_path: Path) -> None:
    """The shared server floods one stateless client with 25 MB of progress while it reads
        nothing: past ``stream_buffer_bytes`` its stream is ended (its request cancelled), the server
        runs on to the end of the flood, and another client is answered meanwhile. (Today's proxy held
    up to twice ``max_message_bytes`` for it: 64 MiB.)"""
    from .test_stdio_upstream import events, running_log, stdio_proxy

    log = tmp_path / "log.jsonl"
    plan = plan_with(flood_on="echo", flood=400, flood_bytes=64 * 1024)
    modern = {**HEADERS, "mcp-protocol-version": MODERN}
    flood = call(1, "echo", _meta={"io.modelcontextprotocol/protocolVersion": MODERN, "progressToken": "f"})
    with stdio_proxy(fixture(plan), stream_buffer_bytes=MiB) as px, running_log(log):
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=60) as http:
            async with http.stream("POST", url, content=orjson.dumps(flood), headers=modern) as stalled:
                other = await http.post(
                    url, content=orjson.dumps(modern_call(2, "protean.list_runtimes")), headers=modern
                )
                lines: list[str] = []
                try:
                    lines.extend([line async for line in stalled.aiter_lines()])
                except httpx.HTTPError:
                    pass  # (its connection closed while a message was being written to it)
    seen = [orjson.loads(line[5:]) for line in lines if line.startswith("data:")]
    text = log.read_text(encoding="utf-8")
    assert events(other)[0]["id"] == 2 and "result" in events(other)[0]
    assert "flooded" in text and "read too slowly" in text
    assert len(seen) < 400 and all("result" not in m for m in seen)  # never the whole flood
    if seen and "error" in seen[-1]:
        assert seen[-1]["id"] == 1 and "stream_buffer_bytes" in seen[-1]["error"]["message"]
