"""Benchmark: the same workloads, in one run, direct to the upstream, through a pass-through proxy
(every rule off), through the normalizer (the shipped default config) and through the floor:
``../shared/tools/lean_hop.py``, the leanest proxy Python can be, with this project's rules
(``floor``) and without (``floor-pass``); without ``../shared`` the floor is skipped with a line.

::

    .venv/bin/python bench/bench.py [--duration S] [--concurrency N] [--quick] [--json]

The stdio paths (``bench/stdio.py``: a stdio server directly and through ``mcp-normalizer stdio``)
are measured after them (``--only stdio`` runs only those among the workloads). The fixture
upstream (``python -m bench.upstream``), both proxies (``mcp-normalizer ... --log-level
warning``) and the load generator (``--client-procs`` worker processes) each run in their own
process. Prints the machine, a table per workload and target (requests per second, p50/p99 latency,
CPU per process), the SSE progress delay distribution, the ratios and the targets (PASS/MISS).
Exits 1 when any call failed (or, with ``--strict``, when a target is missed); timing never fails
the run by default (machines are shared and noisy).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import argparse
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from bench import fixture
from bench.load import LoadPool, Run, Workload, combine
from bench.manytools import ManyToolsRun
from bench.manytools import measure as measure_many_tools
from bench.manytools import prime as prime_many_tools
from bench.procs import (
    Proc,
    lean_hop,
    machine,
    memory_kib,
    passthrough_config,
    start_floor,
    start_proxy,
    start_upstream,
    summarize_log,
    wait_listening,
)
from bench.report import (
    DIRECT,
    FLOOR,
    FLOOR_PASS,
    NORMALIZER,
    PASS,
    Summary,
    call_table,
    cost_targets,
    floor_targets,
    many_tools_table,
    many_tools_target,
    progress_table,
    ratios,
    targets,
)
from bench.stdio import StdioRun
from bench.stdio import measure as measure_stdio
from bench.stdio import table as stdio_table

_CLIENT_BOUND_PCT = 85.0
MANY = "many-tools"
STDIO = "stdio"
_DEFAULT_PROCS = min(2, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class Params:
    """How long, how many, how often."""

    duration: float
    warmup: float
    rounds: int
    concurrency: int
    client_procs: int
    sse_streams: int
    sse_events: int
    sse_gap_ms: float
    many_tools: int
    only: tuple[str, ...] = ()


def _parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Params]:
    parser = argparse.ArgumentParser(prog="bench/bench.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, help="measured seconds per run (default 10; --quick 0.5)")
    parser.add_argument("--warmup", type=float, help="unmeasured seconds before each slice (default 1; --quick 0.2)")
    parser.add_argument(
        "--rounds", type=int, help="interleaved slices per workload and target, --duration split (default 5; --quick 1)"
    )
    parser.add_argument("--concurrency", type=int, help="concurrent sessions, one call each at a time (default 16)")
    parser.add_argument(
        "--client-procs", type=int, default=_DEFAULT_PROCS, help=f"load generator processes (default {_DEFAULT_PROCS})"
    )
    parser.add_argument("--only", help="comma-separated workloads to run (default: all)")
    parser.add_argument("--sse-streams", type=int, help="concurrent progress streams (default 4; --quick 2)")
    parser.add_argument("--sse-events", type=int, default=100, help="progress events per call (default 100)")
    parser.add_argument("--sse-gap-ms", type=float, default=5.0, help="ms between progress events (default 5)")
    parser.add_argument(
        "--many-tools", type=int, help=f"tools in the huge tools/list workload '{MANY}' (default 50000; --quick 2000)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny run: a smoke test, not a measurement")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON document")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    quick = args.quick

    def pick(value: float | int | None, normal: float | int, small: float | int) -> float:
        return float(value if value is not None else (small if quick else normal))

    params = Params(
        duration=pick(args.duration, 10, 0.5),
        warmup=pick(args.warmup, 1, 0.2),
        rounds=int(pick(args.rounds, 5, 1)),
        concurrency=int(pick(args.concurrency, 16, 4)),
        client_procs=max(1, args.client_procs),
        sse_streams=int(pick(args.sse_streams, 4, 2)),
        sse_events=args.sse_events,
        sse_gap_ms=args.sse_gap_ms,
        many_tools=int(pick(args.many_tools, 50_000, 2_000)),
        only=tuple(name.strip() for name in args.only.split(",")) if args.only else (),
    )
    if (
        params.duration <= 0
        or params.rounds < 1
        or params.concurrency < 1
        or params.sse_streams < 1
        or params.sse_events < 1
        or params.many_tools < 1
    ):
        parser.error("--duration, --concurrency, --sse-streams, --sse-events and --many-tools must be positive")
    return args, params


def _workloads(params: Params) -> tuple[list[Workload], Workload]:
    calls = [
        Workload("small", fixture.SMALL),
        Workload("small-rewrite", fixture.PROBLEM),
        Workload("1 MiB", fixture.LARGE, {"bytes": 1 << 20}),
        Workload("1 MiB floats", fixture.LARGE_FLOAT, {"bytes": 1 << 20}),
        Workload("10 MiB", fixture.LARGE, {"bytes": 10 << 20}),
        Workload("10 MiB SSE event", fixture.LARGE_SSE, {"bytes": 10 << 20}),
    ]
    progress = Workload(
        "sse-progress", fixture.PROGRESS, {"count": params.sse_events, "gap_ms": params.sse_gap_ms}, progress=True
    )
    return calls, progress


def _measure(params: Params, upstream: Proc, proxies: dict[str, Proc]) -> list[Run]:
    """Every workload against every target, in ``rounds`` interleaved slices (the order rotating), so
    that load from outside (a shared machine) falls on every target alike."""
    calls, progress = _workloads(params)
    ports = {DIRECT: upstream.port, **{name: proc.port for name, proc in proxies.items()}}
    order = list(ports)
    pool = LoadPool(params.client_procs)
    runs: list[Run] = []
    try:
        plan = [*((w, params.concurrency) for w in calls), (progress, params.sse_streams)]
        for workload, connections in plan:
            if params.only and workload.name not in params.only:
                continue
            slices: dict[str, list[Run]] = {target: [] for target in order}
            for round_ in range(params.rounds):
                turn = round_ % len(order)
                for target in order[turn:] + order[:turn]:
                    print(f"bench: {workload.name} -> {target} ({round_ + 1}/{params.rounds})", file=sys.stderr)
                    watch = {"upstream": upstream.pid}
                    if target in proxies:
                        watch["proxy"] = proxies[target].pid
                    run = pool.run(
                        ("127.0.0.1", ports[target], "/mcp"),
                        workload,
                        target,
                        connections=connections,
                        warmup=params.warmup,
                        duration=params.duration / params.rounds,
                        watch=watch,
                    )
                    slices[target].append(run)
            runs += [combine(slices[target]) for target in order]
    finally:
        pool.close()
    return runs


def _measure_many_tools(params: Params, upstream: Proc, proxies: dict[str, Proc]) -> list[ManyToolsRun]:
    """The huge ``tools/list`` against every target, one after the other."""
    if params.only and MANY not in params.only:
        return []
    out = []
    prime_many_tools("127.0.0.1", upstream.port, params.many_tools)
    for target in [DIRECT, *proxies]:
        print(f"bench: {MANY} -> {target}", file=sys.stderr)
        proxy = proxies.get(target)
        out.append(
            measure_many_tools(
                "127.0.0.1",
                proxy.port if proxy is not None else upstream.port,
                target,
                tools=params.many_tools,
                idle=min(2.0, params.duration),
                proxy_pid=proxy.pid if proxy is not None else None,
                rewritten=target in (NORMALIZER, FLOOR),
            )
        )
    return out


def _report(
    params: Params,
    runs: list[Run],
    many: list[ManyToolsRun],
    logs: dict[str, list[str]],
    peaks: dict[str, float],
    as_json: bool,
    stdio_runs: list[StdioRun],
    floor_note: str = "",
) -> tuple[int, int]:
    """Print the results; return (failed calls, missed targets)."""
    floor_ran = any(run.target == FLOOR for run in runs)
    _, progress = _workloads(params)
    summaries = [Summary.of(run) for run in runs]
    calls = [s for s in summaries if s.workload != progress.name]
    streams = [s for s in summaries if s.workload == progress.name]
    ratio_lines, ratio_data = ratios(calls)
    judged = targets(summaries, "small", progress.name, params.sse_gap_ms)
    judged += floor_targets(summaries, "small")
    judged += cost_targets(summaries, peaks.get(NORMALIZER), params.concurrency)
    judged += many_tools_target(many)
    errors = sum(s.errors for s in summaries) + sum(len(run.errors) for run in many)
    samples = [f"{run.target}/{run.workload.name}: {text}" for run in runs for text in run.outcome.samples]
    samples += [f"{run.target}/{MANY}: {text}" for run in many for text in run.errors]
    bound = [s for s in summaries if s.client_cpu_pct / params.client_procs > _CLIENT_BOUND_PCT]
    missed = sum(not t.passed for t in judged)
    if as_json:
        document = {
            "machine": machine(),
            "parameters": _params_dict(params),
            "runs": [s.as_dict() for s in summaries],
            "many_tools": [run.as_dict() for run in many],
            "ratios": ratio_data,
            "targets": [{"name": t.name, "passed": t.passed, "detail": t.detail} for t in judged],
            "errors": samples,
            "proxy_log": logs,
            "proxy_peak_rss_mib": peaks,
            "stdio": [asdict(run) for run in stdio_runs],
            "floor": floor_note or "ran",
        }
        print(json.dumps(document, indent=2, allow_nan=False, default=str))
        return errors, missed
    out = [
        "mcp-normalizer benchmark",
        f"machine: {machine()}",
        f"load: {params.concurrency} concurrent sessions, one call at a time each; {params.duration:g} s measured per "
        f"workload and target, in {params.rounds} slice(s) interleaved across the targets, each after "
        f"{params.warmup:g} s warm-up; {params.client_procs} client process(es), raw HTTP/1.1 "
        "(asyncio streams, keep-alive); upstream, proxies and client in separate processes",
        "targets: direct = fixture upstream; pass-through = mcp-normalizer, every rule off; "
        "normalizer = mcp-normalizer, shipped config; floor = ../shared/tools/lean_hop.py --normalize "
        "(this project's rules on a raw asyncio hop), floor-pass = the same without --normalize"
        + ("" if floor_ran else " (the floor did not run: see the note below)"),
        "",
        *call_table(calls),
        "",
        f"SSE progress: {params.sse_events} notifications/progress {params.sse_gap_ms:g} ms apart before the result, "
        f"{params.sse_streams} concurrent streams; delay = client receipt - upstream emit (time.time_ns)",
        *progress_table(streams),
        "",
        *many_tools_table(many),
        "",
        *(
            ["stdio: one session, one call at a time (bench/stdio.py)", *stdio_table(stdio_runs), ""]
            if stdio_runs
            else []
        ),
        "ratios:",
        *ratio_lines,
        "",
        "targets:",
        *(t.line() for t in judged),
    ]
    out.extend(
        f"note: the client used {s.client_cpu_pct:.0f}% CPU in {s.workload}/{s.target}: it may be the "
        "bottleneck there (try --client-procs)"
        for s in bound
    )
    if floor_note:
        out.append(f"note: {floor_note}")
    out.append("proxy peak RSS: " + ", ".join(f"{name} {mib:.0f} MiB" for name, mib in peaks.items()))
    for name, lines in logs.items():
        if lines:
            out.append(f"{name} stderr: {len(lines)} lines: {summarize_log(lines)}")
    if errors:
        out.append(f"FAILED CALLS: {errors}: " + " | ".join(samples[:5]))
    print("\n".join(out))
    return errors, missed


def _params_dict(params: Params) -> dict[str, float | int]:
    return {name: getattr(params, name) for name in Params.__slots__}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    args, params = _parse(argv)
    upstream = start_upstream()
    procs: dict[str, Proc] = {}
    floor_note = ""
    try:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"http://127.0.0.1:{upstream.port}/mcp"
            procs[PASS] = start_proxy(PASS, url, passthrough_config(Path(tmp)))
            procs[NORMALIZER] = start_proxy(NORMALIZER, url)
            script = lean_hop()
            if script is not None:
                procs[FLOOR_PASS] = start_floor(FLOOR_PASS, url, script, normalize=False)
                procs[FLOOR] = start_floor(FLOOR, url, script, normalize=True)
            else:
                floor_note = "floor skipped: no ../shared/tools/lean_hop.py (set MCP_NORMALIZER_SHARED)"
                print(f"bench: {floor_note}", file=sys.stderr)
            for proc in procs.values():
                wait_listening(proc)
            runs = _measure(params, upstream, procs)
            many = _measure_many_tools(params, upstream, procs)
        logs = {name: proc.log_lines() for name, proc in [("upstream", upstream), *procs.items()]}
        peaks = {name: memory_kib(proc.pid)["VmHWM"] / 1024 for name, proc in procs.items()}
    finally:
        for proc in [*procs.values(), upstream]:
            proc.stop()
    stdio_runs = [] if params.only and STDIO not in params.only else measure_stdio(100 if args.quick else 2000)
    errors, missed = _report(params, runs, many, logs, peaks, args.json, stdio_runs, floor_note)
    return 1 if errors or (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
