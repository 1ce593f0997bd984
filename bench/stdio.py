"""The stdio paths measured: a stdio MCP server spoken to directly, through ``mcp-normalizer stdio``, and
served over HTTP by ``mcp-normalizer -- CMD`` (``upstream-cmd``).

::

    .venv/bin/python bench/stdio.py [--calls N] [--quick] [--json]

The server is ``bench/stdio_server.py`` (a raw stdio server, the standard library only). One
driver (this process) runs each workload over one stdio session, one request at a time, the way a
host does: ``small`` (a small ``tools/call`` result), ``1mib`` (a 1 MiB text result), ``progress``
(100 progress notifications 5 ms apart, then the result). Over HTTP (``upstream-cmd``) the driver is
one keep-alive httpx connection in one session, reading each answer's SSE stream. Prints, per
workload and target, the latency p50/p99 of a call, the CPU per call of the server and of the hop
(the wrapper, or the proxy: ``/proc/<pid>/stat``), and for ``progress`` the delay of each
notification from the moment the server wrote it. The
target (issue 24): a small call through the wrapper costs at most 300 µs of its CPU. Timing never
fails the run.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import argparse
import io
import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import httpx
import orjson

from bench.procs import Proc, cpu_seconds, free_port, proxy_executable, wait_listening
from bench.report import percentile

SERVER = str(Path(__file__).with_name("stdio_server.py"))
WORKLOADS = ("small", "1mib", "progress")
TARGETS = ("direct", "wrapper", "upstream-cmd")
#: The wrapper's CPU per small call the issue allows, in µs.
SMALL_TARGET_US = 300.0


@dataclass(frozen=True, slots=True)
class StdioRun:
    """One workload through one target.

    Attributes:
        workload, target: what ran (``direct``, ``wrapper`` or ``upstream-cmd``).
        calls: calls made; p50_ms, p99_ms: their latency.
        server_us, wrapper_us: CPU per call of the server and of the hop (the wrapper, or the proxy
            serving it over HTTP; 0 direct), in µs.
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


class HttpSession:
    """One Streamable HTTP session with the proxy serving the stdio server (``mcp-normalizer -- CMD``)."""

    def __init__(self) -> None:
        port = free_port()
        argv = [proxy_executable(), "--port", str(port), "--log-level", "warning", "--", sys.executable, SERVER]
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_NORMALIZER_")}
        self.proxy = Proc(
            "upstream-cmd", subprocess.Popen(argv, stderr=subprocess.DEVNULL, env=env), port, io.BytesIO()
        )
        try:
            self._open(port)
        except BaseException:
            self.proxy.stop()  # never left running behind a failed run
            raise

    def _open(self, port: int) -> None:
        wait_listening(self.proxy)
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.http = httpx.Client(timeout=60)
        self.headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        init: dict[str, object] = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        }
        response = self.http.post(self.url, content=_request("initialize", init, 0), headers=self.headers)
        self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = "2025-11-25"
        initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        self.http.post(self.url, content=initialized, headers=self.headers)
        self.request("tools/list", {})

    def request(self, method: str, params: dict[str, object], rid: int = 0) -> tuple[dict[str, object], list[float]]:
        """As :meth:`Session.request`, over HTTP (the answer's SSE events)."""
        delays: list[float] = []
        with self.http.stream("POST", self.url, content=_request(method, params, rid), headers=self.headers) as answer:
            for line in answer.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = orjson.loads(line[5:])
                if message.get("method") == "notifications/progress":
                    delays.append((time.time() - float(message["params"]["message"])) * 1000)
                elif message.get("id") == rid:
                    return message, delays
        raise EOFError("the answer ended without its response")

    def close(self) -> None:
        self.http.close()
        self.proxy.stop()


def _request(method: str, params: dict[str, object], rid: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def pids(session: Session | HttpSession, wrapped: bool) -> tuple[int, int | None]:
    """The server's pid and the wrapper's (``None`` direct)."""
    hop = session.proxy.pid if isinstance(session, HttpSession) else session.process.pid
    if not wrapped:
        return hop, None
    children = [int(c) for task in Path(f"/proc/{hop}/task").iterdir() for c in (task / "children").read_text().split()]
    return children[0], hop


def run(workload: str, target: str, calls: int) -> StdioRun:
    """One workload through ``target`` (``direct``, ``wrapper`` or ``upstream-cmd``)."""
    wrapped = target != "direct"
    session: Session | HttpSession
    if target == "upstream-cmd":
        session = HttpSession()
    else:
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
        target,
        calls,
        percentile(latencies, 0.5),
        percentile(latencies, 0.99),
        used_server / calls * 1e6,
        used_wrapper / calls * 1e6,
        percentile(delays, 0.5) if delays else 0.0,
        percentile(delays, 0.99) if delays else 0.0,
    )


def measure(calls: int, workloads: Sequence[str] = WORKLOADS) -> list[StdioRun]:
    """Every workload, directly, through the wrapper and served over HTTP."""
    counts = {"small": calls, "1mib": max(10, calls // 20), "progress": max(4, calls // 200)}
    return [run(workload, target, counts[workload]) for workload in workloads for target in TARGETS]


def table(runs: Sequence[StdioRun]) -> list[str]:
    """The runs as a Markdown table, and the target line."""
    lines = [
        "| stdio workload | target | calls | p50 ms | p99 ms | server CPU µs/call | hop CPU µs/call"
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
