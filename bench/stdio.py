"""The stdio paths measured: a stdio MCP server spoken to directly, and through ``mcp-normalizer stdio``.

::

    .venv/bin/python bench/stdio.py [--calls N] [--quick] [--json]

The server is ``bench/stdio_server.py`` (a raw stdio server, the standard library only). One
driver (this process) runs each workload over one stdio session, one request at a time, the way a
host does: ``small`` (a small ``tools/call`` result), ``1mib`` (a 1 MiB text result), ``progress``
(100 progress notifications 5 ms apart, then the result). Prints, per workload and target, the
latency p50/p99 of a call, the CPU per call of the server and of the wrapper (``/proc/<pid>/stat``),
and for ``progress`` the delay of each notification from the moment the server wrote it. The
target (issue 24): a small call through the wrapper costs at most 300 µs of its CPU. Timing never
fails the run.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import argparse
import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import orjson

from bench.procs import cpu_seconds, proxy_executable
from bench.report import percentile

SERVER = str(Path(__file__).with_name("stdio_server.py"))
WORKLOADS = ("small", "1mib", "progress")
#: The wrapper's CPU per small call the issue allows, in µs.
SMALL_TARGET_US = 300.0


@dataclass(frozen=True, slots=True)
class StdioRun:
    """One workload through one target.

    Attributes:
        workload, target: what ran (``direct`` or ``wrapper``).
        calls: calls made; p50_ms, p99_ms: their latency.
        server_us, wrapper_us: CPU per call of the server and of the wrapper (0 direct), in µs.
        progress_p50_ms, progress_p99_ms: delay of a progress notification (``progress`` only).
    """

    workload: str
    target: str
    calls: int
    p50_ms: float
    p99_ms: float
    server_us: float
    wrapper_us: float
    progress_p50_ms: float = 0.0
    progress_p99_ms: float = 0.0


class Session:
    """One stdio session with ``argv`` (initialized), driven by lines."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin
        self.stdout = self.process.stdout
        self._buffer = b""
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
        )
        self.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.request("tools/list", {})

    def line(self) -> bytes:
        while b"\n" not in self._buffer:
            chunk = os.read(self.stdout.fileno(), 1 << 20)
            if not chunk:
                raise EOFError("the server closed its stdout")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def request(self, method: str, params: dict[str, object], rid: int = 0) -> tuple[dict[str, object], list[float]]:
        """Send a request; its response and the arrival delay (ms) of each progress before it."""
        self.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + b"\n")
        delays: list[float] = []
        while True:
            message = orjson.loads(self.line())
            if message.get("method") == "notifications/progress":
                delays.append((time.time() - float(message["params"]["message"])) * 1000)  # the server's clock
                continue
            if message.get("id") == rid:
                return message, delays

    def close(self) -> None:
        self.stdin.close()
        self.process.wait(timeout=30)


def pids(session: Session, wrapped: bool) -> tuple[int, int | None]:
    """The server's pid and the wrapper's (``None`` direct)."""
    if not wrapped:
        return session.process.pid, None
    children = Path(f"/proc/{session.process.pid}/task/{session.process.pid}/children").read_text().split()
    return int(children[0]), session.process.pid


def run(workload: str, wrapped: bool, calls: int) -> StdioRun:
    argv = [sys.executable, SERVER]
    if wrapped:
        argv = [proxy_executable(), "stdio", "--log-level", "warning", "--", *argv]
    session = Session(argv)
    server, wrapper = pids(session, wrapped)
    name = {"small": "small", "1mib": "big", "progress": "progress"}[workload]
    for i in range(min(50, calls)):  # warm up
        session.request("tools/call", {"name": name, "_meta": {"progressToken": i}}, i + 1)
    cpu_server, cpu_wrapper = cpu_seconds(server), cpu_seconds(wrapper) if wrapper else 0.0
    latencies: list[float] = []
    delays: list[float] = []
    for i in range(calls):
        start = time.perf_counter()
        _, seen = session.request("tools/call", {"name": name, "_meta": {"progressToken": i}}, 1000 + i)
        latencies.append((time.perf_counter() - start) * 1000)
        delays += seen
    used_server = cpu_seconds(server) - cpu_server
    used_wrapper = (cpu_seconds(wrapper) - cpu_wrapper) if wrapper else 0.0
    session.close()
    return StdioRun(
        workload,
        "wrapper" if wrapped else "direct",
        calls,
        percentile(latencies, 0.5),
        percentile(latencies, 0.99),
        used_server / calls * 1e6,
        used_wrapper / calls * 1e6,
        percentile(delays, 0.5) if delays else 0.0,
        percentile(delays, 0.99) if delays else 0.0,
    )


def measure(calls: int, workloads: Sequence[str] = WORKLOADS) -> list[StdioRun]:
    """Every workload, directly and through the wrapper."""
    counts = {"small": calls, "1mib": max(10, calls // 20), "progress": max(4, calls // 200)}
    return [run(workload, wrapped, counts[workload]) for workload in workloads for wrapped in (False, True)]


def table(runs: Sequence[StdioRun]) -> list[str]:
    """The runs as a Markdown table, and the target line."""
    lines = [
        "| stdio workload | target | calls | p50 ms | p99 ms | server CPU µs/call | wrapper CPU µs/call"
        " | progress p50/p99 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        progress = f"{r.progress_p50_ms:.2f} / {r.progress_p99_ms:.2f}" if r.workload == "progress" else ""
        lines.append(
            f"| {r.workload} | {r.target} | {r.calls} | {r.p50_ms:.3f} | {r.p99_ms:.3f} | {r.server_us:.0f} |"
            f" {r.wrapper_us:.0f} | {progress} |"
        )
    small = next((r for r in runs if r.workload == "small" and r.target == "wrapper"), None)
    if small is not None:
        verdict = "PASS" if small.wrapper_us <= SMALL_TARGET_US else "MISS"
        lines.append("")
        lines.append(
            f"stdio small call, wrapper CPU per call <= {SMALL_TARGET_US:.0f} µs: {small.wrapper_us:.0f} µs {verdict}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/stdio.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="small calls per target (default 2000)")
    parser.add_argument("--quick", action="store_true", help="a smoke run (100 calls), not a measurement")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    args = parser.parse_args(argv)
    runs = measure(100 if args.quick else args.calls)
    print(json.dumps([asdict(r) for r in runs], indent=1) if args.json else "\n".join(table(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
