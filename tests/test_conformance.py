"""The official MCP conformance suite (0.1.16) against server-everything, directly and through the proxy CLI.

server-everything lacks the suite's fixture tools, prompts and resources, so some scenarios fail against it
directly; ``conformance-baseline-everything.yml`` in the shared folder lists them. The proxy must not change
any result but one: every scenario (and every check in it) must come out the same through the proxy as
directly, except ``dns-rebinding-protection``, which server-everything fails and the proxy's loopback
``Host``/``Origin`` check passes.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from .support import ROOT, SHARED, need_shared
from .test_cli import EXE, free_port, running

TOOLS = SHARED / "tools"
BASELINE = TOOLS / "conformance-baseline-everything.yml"
PACKAGES = ROOT / "tests" / "node" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = PACKAGES / "server-everything" / "dist" / "index.js"
CONFORMANCE = PACKAGES / "conformance" / "dist" / "index.js"
# The suite saves each scenario's checks to <out>/server-<scenario>-<ISO timestamp>/checks.json.
RESULT_DIR = re.compile(r"server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z")

Checks = tuple[tuple[str, str], ...]  # (check id, status) pairs, sorted


def baseline_scenarios() -> set[str]:
    """The scenario names of the baseline file (a YAML list under ``server:``)."""
    return set(re.findall(r"^\s+-\s+(\S+)\s*$", BASELINE.read_text(encoding="utf-8"), re.MULTILINE))


#: The one scenario the proxy changes: server-everything does not check ``Host`` on loopback; the proxy does.
FIXED_BY_PROXY = "dns-rebinding-protection"


def conformance(
    url: str, out: Path, baseline: Path = BASELINE
) -> tuple[subprocess.CompletedProcess[str], dict[str, Checks]]:
    """Run the active server suite against ``url`` with the baseline; return the run and the checks by scenario.

    The loader hook serves ``fs.globSync`` to the suite, which needs Node 22 without it.
    """
    argv = [
        "node",
        "--import",
        str(TOOLS / "node20-globsync.mjs"),
        str(CONFORMANCE),
        "server",
        "--url",
        url,
        "--expected-failures",
        str(baseline),
        "-o",
        str(out),
    ]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=out.parent, check=False)
    results: dict[str, Checks] = {}
    for path in sorted(out.glob("*/checks.json")):
        match = RESULT_DIR.fullmatch(path.parent.name)
        assert match, path
        scenario = match["scenario"]
        assert scenario not in results, f"{scenario} saved twice"
        checks = json.loads(path.read_text(encoding="utf-8"))
        results[scenario] = tuple(sorted((check["id"], check["status"]) for check in checks))
    return run, results


def passed(checks: Checks) -> bool:
    """A scenario passes as the suite's baseline check counts it: at least one check, no FAILURE or WARNING."""
    return bool(checks) and all(status not in ("FAILURE", "WARNING") for _, status in checks)


def test_the_proxy_passes_every_conformance_scenario_that_server_everything_passes(tmp_path: Path) -> None:
    need_shared("tools", "conformance-baseline-everything.yml")
    upstream_port = free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    everything = ["node", "--require", str(TOOLS / "loopback.cjs"), str(EVERYTHING), "streamableHttp"]
    with running(everything, upstream_port, {"PORT": str(upstream_port)}):
        direct_run, direct = conformance(upstream, tmp_path / "direct")
        proxy_port = free_port()
        fixed = tmp_path / "baseline-through-the-proxy.yml"
        fixed.write_text(
            "".join(line for line in BASELINE.read_text().splitlines(True) if line.strip() != f"- {FIXED_BY_PROXY}")
        )
        with running([EXE, "--upstream", upstream, "--port", str(proxy_port)], proxy_port) as proxy_log:
            proxied_run, proxied = conformance(f"http://127.0.0.1:{proxy_port}/mcp", tmp_path / "proxied", fixed)

    assert direct_run.returncode == 0, direct_run.stdout[-4000:] + direct_run.stderr[-4000:]
    assert proxied_run.returncode == 0, (
        proxied_run.stdout[-4000:] + proxied_run.stderr[-4000:] + "\nproxy log:\n" + "\n".join(proxy_log[-50:])
    )
    # The saved results agree with the baseline, so they were read right and the suite ran every scenario.
    assert {name for name, checks in direct.items() if not passed(checks)} == baseline_scenarios()
    assert not passed(direct[FIXED_BY_PROXY]) and passed(proxied[FIXED_BY_PROXY])
    same_direct = {name: checks for name, checks in direct.items() if name != FIXED_BY_PROXY}
    same_proxied = {name: checks for name, checks in proxied.items() if name != FIXED_BY_PROXY}
    changed = {name: (direct.get(name), proxied.get(name)) for name in direct.keys() | proxied.keys()}
    assert same_direct == same_proxied, {name: pair for name, pair in changed.items() if pair[0] != pair[1]}
    # Not vacuous: 11 scenarios (13 checks, the suite's "Total: 13 passed") pass against server-everything 2026.8.31.
    assert sum(passed(checks) for checks in direct.values()) >= 11
    assert sum(status == "SUCCESS" for checks in direct.values() for _, status in checks) >= 13
