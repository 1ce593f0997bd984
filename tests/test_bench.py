"""Smoke test of the benchmark and soak commands (``bench/``): they run end to end and report.

Both run as subprocesses with tiny parameters. Nothing here is timed: only exit codes and the
lines the commands must print are checked.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .support import ROOT, need_shared

pytestmark = pytest.mark.wire


def run(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``bench/<script>`` with this interpreter from the repository root."""
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        env={**os.environ, **env} if env else None,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_quick_benchmark_compares_every_target_with_the_floor_and_prints_the_ratios() -> None:
    need_shared("tools", "lean_hop.py")  # the floor
    done = run("bench.py", "--quick")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for workload in ("small", "small-rewrite", "1 MiB", "10 MiB"):
        for target in ("direct", "pass-through", "normalizer", "floor-pass", "floor"):
            assert re.search(rf"^{re.escape(workload)}\s+{target}\s", out, re.M), (workload, target, out)
        assert re.search(
            rf"^{re.escape(workload)}: normalizer/pass-through throughput (?:[\d.]+|-)x, normalizer/pass-through p99 "
            r"(?:[\d.]+|-)x, pass-through/direct throughput (?:[\d.]+|-)x, pass-through/direct p99 (?:[\d.]+|-)x, "
            r"normalizer/floor CPU per call (?:[\d.]+|-)x, pass-through/floor-pass CPU per call (?:[\d.]+|-)x$",
            out,
            re.M,
        ), out
    assert re.search(r"^(PASS|MISS) normalizer proxy CPU per call <= 1\.5x floor \(small\): [\d.]+x", out, re.M), out
    assert re.search(r"^(PASS|MISS) pass-through proxy CPU per call <= 1\.2x floor-pass \(small\)", out, re.M), out
    assert re.search(r"^(PASS|MISS) normalizer proxy CPU per call <= 1\.2x floor \(1 MiB\)", out, re.M), out
    listing = out.split("-tool tools/list, twice", 1)[1].split("\n\n", 1)[0]
    for target in ("direct", "pass-through", "normalizer", "floor-pass", "floor"):
        assert re.search(rf"^{target}\s+[\d.]+\s", listing, re.M), (target, listing)
    floor_log = re.search(r"^floor stderr: \d+ lines: (.*)$", out, re.M)  # its rewrite log, if any
    assert floor_log is None or set(re.findall(r"x (\S+ \S+)", floor_log[1])) == {"WARNING mcp_normalizer.rewrite"}
    assert re.search(r"^(PASS|MISS) normalizer throughput >= 0\.9x pass-through \(small\)", out, re.M), out
    assert re.search(r"^(PASS|MISS) normalizer p99 <= 1\.2x pass-through p99 \(small\)", out, re.M), out
    assert re.search(r"^(PASS|MISS) SSE progress delay p99 through the normalizer", out, re.M), out
    assert re.search(r"^(PASS|MISS) normalizer: a small call's p99 added delay <= 20 ms while a [\d,]+-tool", out, re.M)
    assert re.search(r"^(PASS|MISS) normalizer proxy CPU <= [\d.]+ s for a cold [\d,]+-tool list: [\d.]+ s", out, re.M)
    assert re.search(r"^machine: \d+ CPUs .*Python \d", out, re.M), out
    for workload in ("small", "1mib", "progress"):  # the stdio paths: directly, the wrapper, served over HTTP
        for target in ("direct", "wrapper", "upstream-cmd"):
            assert re.search(rf"^\| {workload} \| {target} \| \d+ \|", out, re.M), (workload, target, out)
    assert re.search(r"^stdio small call, wrapper CPU per call <= 300 µs: \d+ µs (PASS|MISS)$", out, re.M), out


def test_without_the_shared_folder_the_benchmark_skips_the_floor_with_a_line(tmp_path: Path) -> None:
    done = run("bench.py", "--quick", "--only", "small", env={"MCP_NORMALIZER_SHARED": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^note: floor skipped: no \.\./shared/tools/lean_hop\.py", done.stdout, re.M), done.stdout
    assert re.search(r"^small\s+normalizer\s", done.stdout, re.M) and not re.search(
        r"^small\s+floor", done.stdout, re.M
    )


def test_soak_reports_no_lost_duplicated_or_mismatched_calls() -> None:
    done = run("soak.py", "--clients", "20", "--duration", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for count in ("lost", "duplicated", "mismatched", "errors"):
        assert re.search(rf"^{count} 0$", out, re.M), (count, out)
    ok = re.search(r"^ok (\d+)$", out, re.M)
    assert ok is not None and int(ok.group(1)) > 0, out
    assert re.search(r"^proxy RSS: after warm-up [\d.]+ MiB, at end [\d.]+ MiB", out, re.M), out
    assert "result: PASS" in out, out


def test_the_upstream_client_comparison_runs_every_candidate() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.upstream_clients", "--calls", "200", "--concurrency", "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for candidate in ("httpx (httpcore, h11)", "httpx over httpx-aiohttp", "aiohttp", "UpstreamPool (the forwarder's)"):
        assert re.search(rf"^  {re.escape(candidate)}\s+\d+ µs$", done.stdout, re.M), done.stdout


def test_the_in_process_comparison_measures_the_middleware_and_the_floors_driver() -> None:
    need_shared("tools", "lean_hop.py")
    done = subprocess.run(
        [sys.executable, "-m", "bench.inprocess", "--calls", "300"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^  middleware \(NormalizerMiddleware around a canned app\)\s+\d+ µs$", done.stdout, re.M)
    assert re.search(r"^  floor \(lean_hop's NormEngine, the same engine\)\s+\d+ µs$", done.stdout, re.M)
    assert re.search(r"^  middleware/floor \d+\.\d\dx$", done.stdout, re.M), done.stdout
