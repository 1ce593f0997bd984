"""Smoke test of the benchmark and soak commands (``bench/``): they run end to end and report.

Both run as subprocesses with tiny parameters. Nothing here is timed: only exit codes and the
lines the commands must print are checked.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .support import ROOT

pytestmark = pytest.mark.wire


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``bench/<script>`` with this interpreter from the repository root."""
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_quick_benchmark_compares_the_three_targets_and_prints_the_ratios() -> None:
    done = run("bench.py", "--quick")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for workload in ("small", "small-rewrite", "1 MiB", "10 MiB"):
        for target in ("direct", "pass-through", "normalizer"):
            assert re.search(rf"^{re.escape(workload)}\s+{target}\s", out, re.M), (workload, target, out)
        assert re.search(
            rf"^{re.escape(workload)}: normalizer/pass-through throughput (?:[\d.]+|-)x, normalizer/pass-through p99 "
            r"(?:[\d.]+|-)x, pass-through/direct throughput (?:[\d.]+|-)x, pass-through/direct p99 (?:[\d.]+|-)x$",
            out,
            re.M,
        ), out
    assert re.search(r"^(PASS|MISS) normalizer throughput >= 0\.9x pass-through \(small\)", out, re.M), out
    assert re.search(r"^(PASS|MISS) normalizer p99 <= 1\.2x pass-through p99 \(small\)", out, re.M), out
    assert re.search(r"^(PASS|MISS) SSE progress delay p99 through the normalizer", out, re.M), out
    assert re.search(r"^machine: \d+ CPUs .*Python \d", out, re.M), out
    for workload in ("small", "1mib", "progress"):  # the stdio paths: directly, the wrapper, served over HTTP
        for target in ("direct", "wrapper", "upstream-cmd"):
            assert re.search(rf"^\| {workload} \| {target} \| \d+ \|", out, re.M), (workload, target, out)
    assert re.search(r"^stdio small call, wrapper CPU per call <= 300 µs: \d+ µs (PASS|MISS)$", out, re.M), out


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
    for candidate in ("httpx (httpcore, h11)", "httpx over httpx-aiohttp", "aiohttp (the forwarder's)"):
        assert re.search(rf"^  {re.escape(candidate)}\s+\d+ µs$", done.stdout, re.M), done.stdout
