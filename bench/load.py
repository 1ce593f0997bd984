"""Closed-loop load in worker processes, so the load generator has its own CPUs and event loops.

:class:`LoadPool` keeps ``K`` worker processes (``spawn``). For one run it splits ``N``
connections among them; each connection is its own MCP session (``initialize`` and ``tools/list``
first) that sends one ``tools/call`` at a time until the end of the run. All workers start together
after every session is set up; the first ``warmup`` seconds are not measured. A call counts when it
completes inside the measured window: throughput is those calls over the window, latencies are
theirs. For the progress workload every ``notifications/progress`` event received inside the window
contributes its delay: receipt time minus the upstream's emit time (both ``time.time_ns()``).

A response counts as an error unless it is HTTP 200 and carries the call's nonce (and, for
progress, the final result after the events).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import orjson

from .client import ProtocolError, Session, call_message, sse_messages
from .procs import cpu_seconds

_MAX_SAMPLES = 5


@dataclass(frozen=True, slots=True)
class Workload:
    """What every call of a run asks.

    Attributes:
        name: the label in the report.
        tool: the tool called.
        arguments: arguments besides the nonce.
        progress: SSE with progress notifications: record their delays.
    """

    name: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    progress: bool = False


@dataclass(frozen=True, slots=True)
class Job:
    """One worker process's share of a run."""

    host: str
    port: int
    path: str
    workload: Workload
    connections: int
    worker: int


@dataclass(slots=True)
class Outcome:
    """What one worker measured (merged over workers by :meth:`LoadPool.run`).

    Attributes:
        latencies: seconds per call completed inside the window.
        delays_ms: progress delays of events received inside the window (ms).
        errors: failed calls (any time, warm-up included).
        samples: the first few error descriptions.
        cpu: the client processes' CPU seconds inside the window.
    """

    latencies: list[float] = field(default_factory=list)
    delays_ms: list[float] = field(default_factory=list)
    errors: int = 0
    samples: list[str] = field(default_factory=list)
    cpu: float = 0.0

    def error(self, text: str) -> None:
        """Count one failed call."""
        self.errors += 1
        if len(self.samples) < _MAX_SAMPLES:
            self.samples.append(text)

    def merge(self, other: Outcome) -> None:
        """Add ``other``'s measurements to these."""
        self.latencies += other.latencies
        self.delays_ms += other.delays_ms
        self.errors += other.errors
        self.samples += other.samples[: max(0, _MAX_SAMPLES - len(self.samples))]
        self.cpu += other.cpu


@dataclass(slots=True)
class Run:
    """One workload against one target.

    Attributes:
        workload: what was asked.
        target: ``direct``, ``pass-through`` or ``normalizer``.
        connections: concurrent sessions.
        window: measured seconds.
        outcome: the merged measurements.
        cpu: CPU seconds inside the window per watched process (``proxy``, ``upstream``).
    """

    workload: Workload
    target: str
    connections: int
    window: float
    outcome: Outcome
    cpu: dict[str, float]


def combine(runs: list[Run]) -> Run:
    """One run from slices of the same workload and target (windows and CPU times add up)."""
    outcome = Outcome()
    cpu: dict[str, float] = {}
    for run in runs:
        outcome.merge(run.outcome)
        for label, seconds in run.cpu.items():
            cpu[label] = cpu.get(label, 0.0) + seconds
    first = runs[0]
    return Run(first.workload, first.target, first.connections, sum(run.window for run in runs), outcome, cpu)


async def _call(session: Session, job: Job, nonce: str, window: tuple[float, float], out: Outcome) -> bool:
    """One ``tools/call``; returns whether the response was right."""
    workload = job.workload
    arguments = {**workload.arguments, "nonce": nonce}
    request_id = session.next_id()
    token = nonce if workload.progress else None
    response = await session.start(call_message(request_id, workload.tool, arguments, token))
    if response.status != 200:
        await session.connection.read_body(response)
        out.error(f"HTTP {response.status}: {response.body[:200]!r}")
        return False
    if not workload.progress:
        await session.connection.read_body(response)
        if nonce.encode() not in response.body:
            out.error(f"response without the nonce: {response.body[:200]!r}")
            return False
        return True
    buffer = bytearray()
    answered = False
    events = 0
    async for chunk in session.connection.chunks(response):
        received = time.time_ns()
        buffer += chunk
        for data in sse_messages(buffer):
            message = orjson.loads(data)
            if message.get("method") == "notifications/progress":
                events += 1
                if window[0] * 1e9 <= received <= window[1] * 1e9:
                    out.delays_ms.append((received - int(message["params"]["message"])) / 1e6)
            elif message.get("id") == request_id:
                answered = nonce.encode() in data and events == workload.arguments.get("count", events)
    if not answered:
        out.error(f"progress stream without its result after {events} events")
    return answered


async def _loop(session: Session, job: Job, tag: int, window: tuple[float, float], out: Outcome) -> None:
    """Call until the window ends; record the calls that complete inside it."""
    sequence = 0
    while time.time() < window[1]:
        sequence += 1
        nonce = f"w{job.worker}c{tag}n{sequence}"
        started = time.perf_counter()
        try:
            ok = await _call(session, job, nonce, window, out)
        except (OSError, ProtocolError, ValueError) as exc:
            out.error(f"{type(exc).__name__}: {exc}")
            await session.reconnect()
            continue
        elapsed = time.perf_counter() - started
        if ok and window[0] <= time.time() <= window[1]:
            out.latencies.append(elapsed)


async def _cpu_window(window: tuple[float, float]) -> float:
    await asyncio.sleep(max(0.0, window[0] - time.time()))
    before = time.process_time()
    await asyncio.sleep(max(0.0, window[1] - time.time()))
    return time.process_time() - before


async def _work(job: Job, conn: Connection) -> Outcome | None:
    """Set the sessions up, report ready, run in the window the parent sends; ``None``: setup failed."""
    sessions = [Session(job.host, job.port, job.path) for _ in range(job.connections)]
    try:
        await asyncio.gather(*(session.open() for session in sessions))
    except Exception as exc:
        conn.send(("failed", f"session setup: {type(exc).__name__}: {exc}"))
        await asyncio.gather(*(session.connection.close() for session in sessions))
        return None
    conn.send(("ready", ""))
    window: tuple[float, float] = conn.recv()  # blocks the loop: the sessions are idle until then
    out = Outcome()
    cpu = asyncio.create_task(_cpu_window(window))
    await asyncio.gather(*(_loop(session, job, tag, window, out) for tag, session in enumerate(sessions)))
    out.cpu = await cpu
    await asyncio.gather(*(session.close() for session in sessions))
    return out


def _worker_main(conn: Connection) -> None:
    """A worker process: run each :class:`Job` sent, until ``None``."""
    while True:
        job = conn.recv()
        if job is None:
            return
        try:
            outcome = asyncio.run(_work(job, conn))
        except Exception as exc:
            conn.send(("failed", f"{type(exc).__name__}: {exc}"))
            continue
        if outcome is not None:
            conn.send(outcome)


class LoadPool:
    """``processes`` load-generating worker processes."""

    def __init__(self, processes: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipes: list[Connection] = []
        self._procs: list[multiprocessing.process.BaseProcess] = []
        for _ in range(processes):
            parent, child = context.Pipe()
            process = context.Process(target=_worker_main, args=(child,), daemon=True)
            process.start()
            child.close()
            self._pipes.append(parent)
            self._procs.append(process)

    @property
    def size(self) -> int:
        """The number of worker processes."""
        return len(self._procs)

    def run(
        self,
        url: tuple[str, int, str],
        workload: Workload,
        target: str,
        *,
        connections: int,
        warmup: float,
        duration: float,
        watch: dict[str, int],
    ) -> Run:
        """Run ``workload`` against ``url`` (host, port, path) with ``connections`` sessions.

        Args:
            watch: processes whose CPU time is sampled at the window's edges, by label.

        Raises:
            RuntimeError: a worker failed (session setup, or a bug).
        """
        host, port, path = url
        shares = [connections // self.size + (1 if i < connections % self.size else 0) for i in range(self.size)]
        busy = [(pipe, share) for pipe, share in zip(self._pipes, shares, strict=True) if share]
        for index, (pipe, share) in enumerate(busy):
            pipe.send(Job(host, port, path, workload, share, index))
        statuses = [pipe.recv() for pipe, _ in busy]
        failures = [message for status, message in statuses if status != "ready"]
        if failures:
            ready = [item for item, (status, _) in zip(busy, statuses, strict=True) if status == "ready"]
            for pipe, _ in ready:  # they wait for a window: an empty one ends them
                pipe.send((0.0, 0.0))
            self._collect(ready)
            raise RuntimeError(f"{target}/{workload.name}: {failures[0]}")
        start = time.time() + warmup
        window = (start, start + duration)
        for pipe, _ in busy:
            pipe.send(window)
        time.sleep(max(0.0, window[0] - time.time()))
        before = {label: cpu_seconds(pid) for label, pid in watch.items()}
        time.sleep(max(0.0, window[1] - time.time()))
        after = {label: cpu_seconds(pid) for label, pid in watch.items()}
        outcome = self._collect(busy)
        cpu = {label: after[label] - before[label] for label in watch}
        return Run(workload, target, connections, duration, outcome, cpu)

    @staticmethod
    def _collect(busy: list[tuple[Connection, int]]) -> Outcome:
        merged = Outcome()
        failure = ""
        for pipe, _ in busy:
            result = pipe.recv()
            if isinstance(result, Outcome):
                merged.merge(result)
            else:
                failure = failure or str(result[1])
        if failure:
            raise RuntimeError(failure)
        return merged

    def close(self) -> None:
        """Stop the worker processes."""
        for pipe in self._pipes:
            try:
                pipe.send(None)
            except OSError:
                pass
        for process in self._procs:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
        for pipe in self._pipes:
            pipe.close()
