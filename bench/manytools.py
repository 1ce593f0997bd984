"""The huge ``tools/list`` workload: one client lists 50,000 tools, another calls a small tool every 10 ms.

For one target, :func:`measure` starts a probe process that calls ``bench.small`` every 10 ms in
its own session and records when each call started and how long it took; after ``idle`` seconds
it lists :data:`~bench.fixture.MANY_TOOLS_HEADER` tools ``lists`` times in a row (the first one
cold: the proxy has never seen these tools; the next ones warm), in another session from this
process, and checks each list (every tool there; through the normalizer, the ``nullable`` ones
rewritten). The probe's calls that overlap a list are its delay: how long one message may hold
everyone else.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import orjson

from . import fixture
from .client import Session, call_message
from .procs import cpu_seconds

#: Seconds between the probe's calls: a light load whose own cost does not slow what it measures.
PROBE_GAP = 0.01


@dataclass(slots=True)
class ManyToolsRun:
    """What one target measured.

    Attributes:
        target: ``direct``, ``pass-through`` or ``normalizer``.
        tools: tools per list.
        list_seconds: how long each list took (the first one cold).
        idle_ms: probe call latencies before the first list.
        during_ms: probe call latencies of the calls that overlapped a list.
        proxy_cpu: the proxy's CPU seconds per list (``None`` direct).
        errors: what went wrong (an empty list when nothing did).
    """

    target: str
    tools: int
    list_seconds: list[float] = field(default_factory=list)
    idle_ms: list[float] = field(default_factory=list)
    during_ms: list[float] = field(default_factory=list)
    proxy_cpu: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The run as plain values (``--json``)."""
        return {name: getattr(self, name) for name in self.__slots__}


def _probe_main(host: str, port: int, conn: Connection) -> None:
    asyncio.run(_probe(host, port, conn))


async def _probe(host: str, port: int, conn: Connection) -> None:
    """Call ``bench.small`` every :data:`PROBE_GAP` seconds (or as soon as the last call is back)
    until told to stop; send ``([(started, seconds)], failures)``."""
    session = Session(host, port)
    await session.open()
    conn.send("ready")
    samples: list[tuple[float, float]] = []
    failures = 0
    sequence = 0
    while not conn.poll():
        sequence += 1
        nonce = f"probe{sequence}"
        started, clock = time.time(), time.perf_counter()
        response = await session.post(call_message(session.next_id(), fixture.SMALL, {"nonce": nonce}))
        if response.status != 200 or nonce.encode() not in response.body:
            failures += 1
        elapsed = time.perf_counter() - clock
        samples.append((started, elapsed))
        await asyncio.sleep(max(0.0, PROBE_GAP - elapsed))
    await session.close()
    conn.send((samples, failures))


def _check(body: bytes, count: int, rewritten: bool) -> str | None:
    """Why a listing is wrong, or ``None``."""
    message = orjson.loads(body)
    tools = message.get("result", {}).get("tools", [])
    if len(tools) != count:
        return f"{len(tools)} tools listed, {count} expected"
    scope_type = tools[0]["outputSchema"]["properties"]["scope"]["type"]
    if rewritten and scope_type != ["string", "null"]:
        return f"the nullable field is advertised as {scope_type!r}"
    if not rewritten and tools[0] != fixture.many_tool(0):
        return "the first tool changed on its way"
    return None


async def _lists(
    host: str, port: int, run: ManyToolsRun, lists: int, proxy_pid: int | None, rewritten: bool
) -> list[tuple[float, float]]:
    session = Session(host, port)
    await session.open()
    session.set_header(fixture.MANY_TOOLS_HEADER, str(run.tools))
    windows = []
    for _ in range(lists):
        cpu = cpu_seconds(proxy_pid) if proxy_pid is not None else 0.0
        began, clock = time.time(), time.perf_counter()
        response = await session.post({"jsonrpc": "2.0", "id": session.next_id(), "method": "tools/list"})
        run.list_seconds.append(time.perf_counter() - clock)
        windows.append((began, time.time()))
        if proxy_pid is not None:
            run.proxy_cpu.append(cpu_seconds(proxy_pid) - cpu)
        problem = f"HTTP {response.status}" if response.status != 200 else _check(response.body, run.tools, rewritten)
        if problem is not None:
            run.errors.append(problem)
    await session.close()
    return windows


def prime(host: str, port: int, tools: int) -> None:
    """List ``tools`` tools once, unmeasured, so that the upstream has made them before any target runs."""

    async def once() -> None:
        session = Session(host, port)
        await session.open()
        session.set_header(fixture.MANY_TOOLS_HEADER, str(tools))
        await session.post({"jsonrpc": "2.0", "id": session.next_id(), "method": "tools/list"})
        await session.close()

    asyncio.run(once())


def measure(
    host: str,
    port: int,
    target: str,
    *,
    tools: int = 50_000,
    lists: int = 2,
    idle: float = 2.0,
    proxy_pid: int | None = None,
    rewritten: bool = False,
) -> ManyToolsRun:
    """Run the workload against one target (``rewritten``: its lists must carry the repairs)."""
    run = ManyToolsRun(target, tools)
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    probe = context.Process(target=_probe_main, args=(host, port, theirs), daemon=True)
    probe.start()
    try:
        if not ours.poll(60) or ours.recv() != "ready":
            run.errors.append("the probe did not start")
            return run
        time.sleep(idle)
        windows = asyncio.run(_lists(host, port, run, lists, proxy_pid, rewritten))
        time.sleep(0.2)
        ours.send("stop")
        samples, failures = ours.recv()
    finally:
        probe.join(30)
        if probe.is_alive():
            probe.kill()
    if failures:
        run.errors.append(f"{failures} probe calls failed")
    first = windows[0][0] if windows else float("inf")
    for started, seconds in samples:
        ended = started + seconds
        if ended < first:
            run.idle_ms.append(seconds * 1000)
        elif any(started < end and ended > begin for begin, end in windows):
            run.during_ms.append(seconds * 1000)
    return run
