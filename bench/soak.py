"""Soak: many concurrent MCP sessions through the normalizer for a bounded time; every response checked.

::

    .venv/bin/python bench/soak.py [--clients 200] [--duration 60]

Starts the fixture upstream and the proxy as operators do (``mcp-normalizer --upstream URL --port P
--log-level warning``, shipped config). Each client is its own session on its own connection and
calls, one at a time, a random mix of JSON and SSE ``tools/call``s (conforming results, results the
normalizer rewrites, SSE calls with progress; :data:`bench.verify.MIX`), each with a unique nonce.
Every response is checked (:mod:`bench.verify`). The proxy's RSS is read after the warm-up and at
the end of the load.

Exits 1 when any call was lost, duplicated, mismatched or failed, when the proxy logged an error,
or when its RSS grew by more than ``--max-growth-pct`` percent of the warm-up RSS plus
``--max-growth-mib`` MiB (default 5% + 4 MiB). Why that bound: after the warm-up every session,
tool catalog, compiled validator and pooled connection exists, and both readings are taken under
the same load, so a proxy without a leak stays flat except for allocator noise (pymalloc arenas,
fragmentation from in-flight buffers of varying size; well under 1 MiB in practice). 5% + 4 MiB
leaves several times that as slack, yet a leak of about a kilobyte per call over the ~10,000 calls
of a 60 s soak on a small machine exceeds it; the output prints the smallest per-call leak the
bound catches at the measured call rate. Growth that stops (a cache filling to its bound) passes.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import argparse
import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.client import ProtocolError, Session, call_message
from bench.procs import (
    Proc,
    cpu_seconds,
    machine,
    memory_kib,
    start_proxy,
    start_upstream,
    summarize_log,
    wait_listening,
)
from bench.report import percentile
from bench.verify import DUPLICATED, ERROR, LOST, MISMATCHED, MIX, OK, Kind, Tally, check


@dataclass(frozen=True, slots=True)
class Params:
    """The soak's size and bounds."""

    clients: int
    duration: float
    warmup: float
    timeout: float
    max_growth_pct: float
    max_growth_mib: float
    seed: int


@dataclass
class Observed:
    """What the soak saw besides the verdicts."""

    tally: Tally = field(default_factory=Tally)
    latencies: list[float] = field(default_factory=list)
    rss_warm_kib: int = 0
    rss_end_kib: int = 0
    peak_kib: int = 0
    calls_after_warmup: int = 0
    elapsed: float = 0.0
    cpu_pct: dict[str, float] = field(default_factory=dict)


def _parse(argv: Sequence[str] | None) -> Params:
    parser = argparse.ArgumentParser(prog="bench/soak.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200, help="concurrent sessions (default 200)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    parser.add_argument("--warmup", type=float, help="seconds before the first RSS reading (default duration/6, <= 10)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a call may take before it is lost")
    parser.add_argument("--max-growth-pct", type=float, default=5.0, help="allowed RSS growth, percent (default 5)")
    parser.add_argument("--max-growth-mib", type=float, default=4.0, help="allowed RSS growth on top, MiB (default 4)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the call mix")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.duration <= 0:
        parser.error("--clients and --duration must be positive")
    warmup = args.warmup if args.warmup is not None else min(10.0, args.duration / 6)
    return Params(
        args.clients,
        args.duration,
        warmup,
        args.timeout,
        args.max_growth_pct,
        args.max_growth_mib,
        args.seed,
    )


async def _one(session: Session, kind: Kind, nonce: str, tally: Tally) -> tuple[str, str]:
    request_id = session.next_id()
    token = nonce if kind.progress else None
    response = await session.post(call_message(request_id, kind.tool, kind.arguments(nonce), token))
    return check(kind, request_id, nonce, response, tally)


async def _client(index: int, session: Session, params: Params, end: float, seen: Observed) -> None:
    """One session's calls until ``end``: a random kind each time, a nonce never used before."""
    rng = random.Random(params.seed * 100_003 + index)
    weights = [kind.weight for kind in MIX]
    sequence = 0
    while time.monotonic() < end:
        sequence += 1
        kind = rng.choices(MIX, weights)[0]
        nonce = f"s{index}-{sequence}-{rng.getrandbits(32):08x}"
        started = time.monotonic()
        try:
            verdict, reason = await asyncio.wait_for(_one(session, kind, nonce, seen.tally), params.timeout)
        except (OSError, ProtocolError, TimeoutError) as exc:
            verdict, reason = LOST, f"{type(exc).__name__} {str(exc)[:60]}"
            await session.reconnect()
        seen.tally.add(kind, verdict, reason)
        if verdict == OK:
            seen.latencies.append(time.monotonic() - started)


async def _memory_probe(pid: int, warm: float, end: float, seen: Observed) -> None:
    await asyncio.sleep(max(0.0, warm - time.monotonic()))
    seen.rss_warm_kib = memory_kib(pid)["VmRSS"]
    before = seen.tally.calls
    await asyncio.sleep(max(0.0, end - time.monotonic()))
    memory = memory_kib(pid)
    seen.rss_end_kib, seen.peak_kib = memory["VmRSS"], memory["VmHWM"]
    seen.calls_after_warmup = seen.tally.calls - before


async def _soak(params: Params, port: int, pids: dict[str, int]) -> Observed:
    seen = Observed()
    sessions = [Session("127.0.0.1", port) for _ in range(params.clients)]
    await asyncio.gather(*(session.open() for session in sessions))
    start = time.monotonic()
    end = start + params.duration
    before = {"soak client": time.process_time(), **{name: cpu_seconds(pid) for name, pid in pids.items()}}
    probe = asyncio.create_task(_memory_probe(pids["proxy"], start + params.warmup, end, seen))
    await asyncio.gather(*(_client(i, s, params, end, seen) for i, s in enumerate(sessions)))
    seen.elapsed = time.monotonic() - start
    after = {"soak client": time.process_time(), **{name: cpu_seconds(pid) for name, pid in pids.items()}}
    seen.cpu_pct = {name: 100 * (after[name] - before[name]) / seen.elapsed for name in before}
    await probe
    await asyncio.gather(*(session.close() for session in sessions))
    return seen


def _mib(kib: float) -> str:
    return f"{kib / 1024:.1f} MiB"


def _report(params: Params, seen: Observed, proxy_log: list[str]) -> int:
    """Print the soak's summary; return the exit code."""
    tally = seen.tally
    growth = seen.rss_end_kib - seen.rss_warm_kib
    bound = seen.rss_warm_kib * params.max_growth_pct / 100 + params.max_growth_mib * 1024
    memory_ok = growth <= bound
    errors_logged = [line for line in proxy_log if '"level":"error"' in line or '"level":"critical"' in line]
    kinds = ", ".join(f"{kind.name} {tally.by_kind[kind.name]}" for kind in MIX)
    rate = tally.calls / seen.elapsed if seen.elapsed else 0.0
    lines = [
        f"soak: {params.clients} clients (one MCP session and connection each), {params.duration:g} s, "
        f"warm-up {params.warmup:.3g} s; proxy: mcp-normalizer, shipped config",
        f"machine: {machine()}",
        f"calls: {tally.calls} ({rate:.0f}/s; {kinds}); progress events {tally.progress_events}",
        f"latency of ok calls: p50 {1000 * percentile(seen.latencies, 0.5):.1f} ms, "
        f"p99 {1000 * percentile(seen.latencies, 0.99):.1f} ms, max {1000 * max(seen.latencies, default=0):.1f} ms",
        "CPU (% of one CPU): " + ", ".join(f"{name} {pct:.0f}%" for name, pct in seen.cpu_pct.items()),
        f"ok {tally.counts[OK]}",
        f"lost {tally.counts[LOST]}",
        f"duplicated {tally.counts[DUPLICATED]}",
        f"mismatched {tally.counts[MISMATCHED]}",
        f"errors {tally.counts[ERROR]}",
    ]
    for (verdict, reason), count in tally.reasons.most_common(8):
        lines.append(f"  {verdict}: {reason} x{count}")
    per_call = bound * 1024 / seen.calls_after_warmup if seen.calls_after_warmup else float("nan")
    lines += [
        f"proxy RSS: after warm-up {_mib(seen.rss_warm_kib)}, at end {_mib(seen.rss_end_kib)} "
        f"({growth / 1024:+.1f} MiB, {100 * growth / max(seen.rss_warm_kib, 1):+.1f}%), peak {_mib(seen.peak_kib)}",
        f"memory bound: growth <= {params.max_growth_pct:g}% + {params.max_growth_mib:g} MiB = {_mib(bound)} "
        f"(over {seen.calls_after_warmup} calls after warm-up: catches leaks above {per_call:.0f} bytes/call): "
        + ("PASS" if memory_ok else "FAIL"),
        f"proxy stderr: {len(proxy_log)} lines, {len(errors_logged)} at error level"
        + (": " + summarize_log(proxy_log) if proxy_log else ""),
    ]
    failed = tally.failures > 0 or not memory_ok or bool(errors_logged) or tally.calls == 0
    lines.append(f"result: {'FAIL' if failed else 'PASS'}")
    print("\n".join(lines))
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak; returns the exit code."""
    params = _parse(argv)
    upstream = start_upstream()
    proxy: Proc | None = None
    try:
        proxy = start_proxy("normalizer", f"http://127.0.0.1:{upstream.port}/mcp")
        wait_listening(proxy)
        seen = asyncio.run(_soak(params, proxy.port, {"proxy": proxy.pid, "upstream": upstream.pid}))
        proxy_log = proxy.log_lines()
    finally:
        if proxy is not None:
            proxy.stop()
        upstream.stop()
    return _report(params, seen, proxy_log)


if __name__ == "__main__":
    sys.exit(main())
