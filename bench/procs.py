"""The processes under test: the fixture upstream and the proxy as operators start it; ``/proc`` readings.

The proxy is started exactly as an operator would: ``mcp-normalizer --upstream URL --port P
--log-level warning`` (plus ``--config FILE`` for the pass-through configuration, every rule
``off``). The floor is ``../shared/tools/lean_hop.py`` (or under ``MCP_NORMALIZER_SHARED``), run
by :mod:`bench.floor`. Each child's stderr goes to a file, read back with :meth:`Proc.log_lines`.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from mcp_normalizer.engine.rules import RULES

ROOT = Path(__file__).resolve().parents[1]
#: The team's shared folder: the floor (``tools/lean_hop.py``) is there.
SHARED = Path(os.environ.get("MCP_NORMALIZER_SHARED", ROOT.parent / "shared"))
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Proc:
    """A child process with its stderr in a temporary file.

    Attributes:
        name: a label for messages.
        process: the child.
        port: the port it listens on.
    """

    name: str
    process: subprocess.Popen[bytes]
    port: int
    stderr: IO[bytes] = field(repr=False)

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.process.pid

    def log_lines(self) -> list[str]:
        """What the child wrote to stderr so far."""
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace").splitlines()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; closes the stderr file."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.stderr.close()


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_upstream() -> Proc:
    """Start ``python -m bench.upstream`` and wait for the port it prints (it listens from then on)."""
    stderr = tempfile.TemporaryFile()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.upstream", "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.strip().isdigit():
        process.kill()
        process.wait()
        stderr.seek(0)
        raise RuntimeError(f"upstream did not start: {stderr.read().decode(errors='replace')[-2000:]}")
    return Proc("upstream", process, int(line), stderr)


def proxy_executable() -> str:
    """The ``mcp-normalizer`` console script next to this interpreter (else on ``PATH``)."""
    sibling = Path(sys.executable).parent / "mcp-normalizer"
    if sibling.exists():
        return str(sibling)
    found = shutil.which("mcp-normalizer")
    if found is None:
        raise RuntimeError("mcp-normalizer is not installed (run scripts/bootstrap)")
    return found


def passthrough_config(directory: Path) -> Path:
    """Write a rule file that turns every rule off; return its path."""
    lines = ["[rules]", *(f'{rule.name} = "off"' for rule in RULES)]
    path = directory / "passthrough.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def start_proxy(name: str, upstream_url: str, config: Path | None = None) -> Proc:
    """Start the proxy as operators do (no wait: see :func:`wait_listening`)."""
    port = free_port()
    argv = [proxy_executable(), "--upstream", upstream_url, "--port", str(port), "--log-level", "warning"]
    if config is not None:
        argv += ["--config", str(config)]
    stderr = tempfile.TemporaryFile()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_NORMALIZER_")}
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    return Proc(name, process, port, stderr)


def lean_hop() -> Path | None:
    """The floor's script, ``SHARED/tools/lean_hop.py``, or ``None`` when it is not there."""
    path = SHARED / "tools" / "lean_hop.py"
    return path if path.is_file() else None


def start_floor(name: str, upstream_url: str, script: Path, *, normalize: bool) -> Proc:
    """Start the lean hop ``script`` in front of ``upstream_url``, running this checkout's rule
    engine when ``normalize`` (no wait: see :func:`wait_listening`)."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.floor", str(script), "--upstream", upstream_url, "--port", str(port)]
    if normalize:
        argv += ["--normalize", "--project", str(ROOT)]
    stderr = tempfile.TemporaryFile()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_NORMALIZER_")}
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    return Proc(name, process, port, stderr)


def wait_listening(proc: Proc, timeout: float = 30.0) -> None:
    """Wait until ``proc`` accepts TCP connections (polling connect, 20 ms apart).

    Raises:
        RuntimeError: the process exited or did not listen in time.
    """
    deadline = time.monotonic() + timeout
    while True:
        if proc.process.poll() is not None:
            raise RuntimeError(
                f"{proc.name} exited with {proc.process.returncode}: {' | '.join(proc.log_lines()[-5:])}"
            )
        try:
            with socket.create_connection(("127.0.0.1", proc.port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{proc.name} did not listen on port {proc.port} within {timeout} s") from None
            time.sleep(0.02)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far (``/proc/<pid>/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak RSS) of process ``pid`` in KiB (``/proc/<pid>/status``)."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def summarize_log(lines: list[str]) -> str:
    """Count log lines by level and event (the proxy's JSON lines) or first words (anything else)."""
    counts: Counter[str] = Counter()
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            what = record.get("event") or str(record.get("message", record.get("msg", "")))[:80]
            counts[f"{record.get('level', '?')} {record.get('logger', '')} {what}".strip()] += 1
        else:
            counts[line[:80]] += 1
    return "; ".join(f"{count} x {key}" for key, count in counts.most_common(6))


def machine() -> str:
    """One line describing the machine: CPUs, load, Python."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0))
    return (
        f"{cpus} CPUs ({usable} usable), {platform.system()} {platform.machine()}, "
        f"{platform.python_implementation()} {platform.python_version()}, load average {load}"
    )
