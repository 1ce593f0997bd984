"""The official MCP conformance suite (0.1.16, ``--suite all``: 32 scenarios) against the suite's own fixture server,
directly and through the proxy CLI.

The fixture is ``examples/servers/typescript/everything-server.ts`` of modelcontextprotocol/conformance at v0.1.16,
vendored in ``tests/node/conformance-fixture/`` and run with tsx (Node 20 runs no TypeScript). It has every tool,
prompt and resource the scenarios call, so directly every scenario passes as the suite counts it (no FAILURE check,
the suite's "32 passed"). One pass is hollow: the pending ``server-sse-polling`` has no SUCCESS check, only two
WARNINGs (no priming event, no retry field), because the scenario posts with ``mcp-protocol-version: 2025-03-26``
and the SDK 1.32.2 transport primes only streams of 2025-11-25 clients; upstream keeps it pending for that.

Through the proxy, every scenario must come out at least as well as directly: no FAILURE, no WARNING that was not
one directly, every SUCCESS directly a SUCCESS through the proxy. ``dns-rebinding-protection`` passes both ways (the
fixture checks ``Host``/``Origin`` on loopback, and so does the proxy). ``json-schema-2020-12`` passes through
only because ``mcp_normalizer/engine/rules/clients.py`` lists the suite's client name
(``conformance-test-client``) among the clients that accept a 2020-12 ``$schema`` and local ``$ref``s; for a
client it does not know, the proxy removes them.

Through the era bridge (issue 41): the same fixture as a 2026-07-28-only server (``tests/node/modern-fixture``, the
TS SDK 2.x server half with ``legacy: 'reject'``) behind the proxy scores what the native legacy fixture scores
directly, scenario by scenario; ``server-sse-polling`` has no 2026-07-28 equivalent (see that test).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import NotRequired, TypedDict, cast

import pytest

from .support import EXE, ROOT, SHARED, free_port, need_shared, running

pytestmark = pytest.mark.wire

TOOLS = SHARED / "tools"
NODE = ROOT / "tests" / "node"
FIXTURE = NODE / "conformance-fixture" / "everything-server.ts"
TSX = NODE / "node_modules" / "tsx" / "dist" / "loader.mjs"  # tsx's ``--import`` hook: one node process
CONFORMANCE = NODE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
# The suite saves each scenario's checks to <out>/server-<scenario>-<ISO timestamp>/checks.json.
RESULT_DIR = re.compile(r"server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z")

#: ``conformance list --server``: the active suite and the two pending scenarios, json-schema-2020-12 and
#: server-sse-polling.
SCENARIOS = frozenset(
    """
    server-initialize logging-set-level ping completion-complete tools-list tools-call-simple-text tools-call-image
    tools-call-audio tools-call-embedded-resource tools-call-mixed-content tools-call-with-logging tools-call-error
    tools-call-with-progress tools-call-sampling tools-call-elicitation json-schema-2020-12
    elicitation-sep1034-defaults server-sse-polling server-sse-multiple-streams elicitation-sep1330-enums
    resources-list resources-read-text resources-read-binary resources-templates-read resources-subscribe
    resources-unsubscribe prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource
    prompts-get-with-image dns-rebinding-protection
    """.split()
)
#: The fixture's only WARNINGs (see the module docstring); they are its results, not the proxy's.
FIXTURE_WARNINGS = {"server-sse-polling": Counter({"server-sse-priming-event": 1, "server-sse-retry-field": 1})}


class Check(TypedDict):
    """One entry of a scenario's ``checks.json`` (the fields read here)."""

    id: str
    status: str  # SUCCESS, FAILURE, WARNING, SKIPPED or INFO
    description: str
    errorMessage: NotRequired[str]


def conformance(url: str, out: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, list[Check]]]:
    """Run every server scenario against ``url``; return the run and the saved checks by scenario.

    The loader hook serves ``fs.globSync`` to the suite, which needs Node 22 without it.
    """
    argv = ["node", "--import", str(TOOLS / "node20-globsync.mjs"), str(CONFORMANCE)]
    argv += ["server", "--url", url, "--suite", "all", "-o", str(out)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=out.parent, check=False)
    results: dict[str, list[Check]] = {}
    for path in sorted(out.glob("*/checks.json")):
        match = RESULT_DIR.fullmatch(path.parent.name)
        assert match, path
        scenario = match["scenario"]
        assert scenario not in results, f"{scenario} saved twice"
        results[scenario] = cast(list[Check], json.loads(path.read_text(encoding="utf-8")))
    return run, results


def count(checks: list[Check], status: str) -> Counter[str]:
    """How many checks of each id have ``status``."""
    return Counter(check["id"] for check in checks if check["status"] == status)


def worse(direct: list[Check], proxied: list[Check]) -> list[str]:
    """How one scenario came out worse through the proxy: a FAILURE or WARNING it did not have directly, or a
    SUCCESS it lost. Each line names the check and what the suite said about it."""
    said = {(check["id"], check["status"]): check.get("errorMessage", check["description"]) for check in proxied}
    lines = [
        f"{status} {check_id}: {said[check_id, status]}"
        for status in ("FAILURE", "WARNING")
        for check_id in count(proxied, status) - count(direct, status)
    ]
    lines += [f"SUCCESS {check_id} lost" for check_id in count(direct, "SUCCESS") - count(proxied, "SUCCESS")]
    return lines


def test_the_proxy_passes_every_conformance_scenario_that_the_suites_own_fixture_passes(tmp_path: Path) -> None:
    need_shared("tools", "loopback.cjs")
    need_shared("tools", "node20-globsync.mjs")
    upstream_port = free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    # The fixture listens on $PORT with no host; the preload pins that to 127.0.0.1.
    fixture = ["node", "--require", str(TOOLS / "loopback.cjs"), "--import", str(TSX), str(FIXTURE)]
    with running(fixture, upstream_port, {"PORT": str(upstream_port)}) as fixture_log:
        direct_run, direct = conformance(upstream, tmp_path / "direct")
        proxy_port = free_port()
        with running([EXE, "--upstream", upstream, "--port", str(proxy_port)], proxy_port) as proxy_log:
            proxied_run, proxied = conformance(f"http://127.0.0.1:{proxy_port}/mcp", tmp_path / "proxied")

    # Directly: the suite ran all 32 scenarios and none failed (its exit code says the same).
    assert direct_run.returncode == 0, (
        direct_run.stdout[-4000:] + direct_run.stderr[-4000:] + "\nfixture stderr:\n" + "\n".join(fixture_log[-50:])
    )
    assert set(direct) == SCENARIOS, set(direct) ^ SCENARIOS
    assert {name: count(checks, "FAILURE") for name, checks in direct.items() if count(checks, "FAILURE")} == {}
    assert {name: count(checks, "WARNING") for name, checks in direct.items() if count(checks, "WARNING")} == (
        FIXTURE_WARNINGS
    )
    # Not vacuous: every scenario but server-sse-polling has a SUCCESS (44 in all, the suite's "Total: 44 passed").
    assert {name for name, checks in direct.items() if not count(checks, "SUCCESS")} == {"server-sse-polling"}
    assert sum(count(checks, "SUCCESS").total() for checks in direct.values()) == 44

    # Through the proxy: every scenario ran, and none came out worse than directly.
    assert set(proxied) == SCENARIOS, (
        proxied_run.stdout[-4000:] + proxied_run.stderr[-4000:] + "\nproxy log:\n" + "\n".join(proxy_log[-50:])
    )
    regressions = {name: lines for name in sorted(SCENARIOS) if (lines := worse(direct[name], proxied[name]))}
    assert regressions == {}, json.dumps(regressions, indent=2) + "\nproxy log:\n" + "\n".join(proxy_log[-50:])
    assert proxied_run.returncode == 0, proxied_run.stdout[-4000:] + proxied_run.stderr[-4000:]


#: The fixture as a 2026-07-28-only server: the same tools, resources and prompts on the TS SDK 2.x server half
#: (``@modelcontextprotocol/server``), served with ``legacy: 'reject'`` (see the file's header).
MODERN_FIXTURE = NODE / "modern-fixture" / "server.mjs"
#: The suite's client names (its ``clientInfo.name``; the DNS rebinding scenario has its own).
SUITE_CLIENTS = frozenset({"conformance-test-client", "conformance-dns-rebinding-test"})


def served(log: list[str]) -> list[dict[str, str | None]]:
    """The requests the 2026-07-28 fixture logged (``REQUEST {...}`` lines of its stderr): the HTTP
    method, the JSON-RPC method, the protocol version and the ``clientInfo.name`` its ``_meta`` named."""
    return [json.loads(line.removeprefix("REQUEST ")) for line in log if line.startswith("REQUEST ")]


def test_the_suite_through_the_era_bridge_scores_what_it_scores_against_the_native_legacy_fixture(
    tmp_path: Path,
) -> None:
    """Issue 41 item 2: the suite (a legacy client: it opens with ``initialize`` at 2025-11-25 and
    keeps a session) against the native legacy fixture directly, and against the same fixture as a
    2026-07-28-only server through the proxy, whose era bridge answers the suite's ``initialize``
    itself from ``server/discover`` and carries every request upstream in the stateless form (sampling
    and elicitation as ``input_required`` results turned into the legacy requests, resource
    subscriptions and the log level kept in the bridged session, the GET stream from
    ``subscriptions/listen``). Every scenario comes out at least as well through the bridge as
    natively (:func:`worse`): all 44 SUCCESS checks, the same two WARNINGs, no FAILURE.

    Scenario with no 2026-07-28 equivalent: ``server-sse-polling`` (SEP-1699 resumability: the
    server closes a POST's SSE stream mid-call and the client resumes it with ``Last-Event-ID``).
    The stateless era has no event ids to resume from and its fixture has no stream to close, so the
    bridge delivers the result on the first stream; the scenario has no SUCCESS check either way and
    the same two WARNINGs (no priming event, no retry field), so "not worse" holds and shows nothing
    about resumability through the bridge.
    """
    need_shared("tools", "loopback.cjs")
    need_shared("tools", "node20-globsync.mjs")
    if not (NODE / "node_modules" / "@modelcontextprotocol" / "server").exists():
        if os.environ.get("MCP_NORMALIZER_REQUIRE_SHARED") == "1":
            raise FileNotFoundError("tests/node needs @modelcontextprotocol/server: run scripts/bootstrap")
        pytest.skip("needs @modelcontextprotocol/server in tests/node: run scripts/bootstrap (npm ci)")
    legacy_port, modern_port, proxy_port = free_port(), free_port(), free_port()
    fixture = ["node", "--require", str(TOOLS / "loopback.cjs"), "--import", str(TSX), str(FIXTURE)]
    with running(fixture, legacy_port, {"PORT": str(legacy_port)}) as fixture_log:
        native_run, native = conformance(f"http://127.0.0.1:{legacy_port}/mcp", tmp_path / "native")
    upstream = f"http://127.0.0.1:{modern_port}/mcp"
    with running(["node", str(MODERN_FIXTURE)], modern_port, {"PORT": str(modern_port)}) as modern_log:
        with running([EXE, "--upstream", upstream, "--port", str(proxy_port)], proxy_port) as proxy_log:
            bridged_run, bridged = conformance(f"http://127.0.0.1:{proxy_port}/mcp", tmp_path / "bridged")
    logs = "\nproxy log:\n" + "\n".join(proxy_log[-80:]) + "\nserver log:\n" + "\n".join(modern_log[-40:])

    # Natively, as in the test above: every scenario, no FAILURE, 44 SUCCESS checks.
    assert native_run.returncode == 0, native_run.stdout[-4000:] + "\n".join(fixture_log[-50:])
    assert set(native) == SCENARIOS, set(native) ^ SCENARIOS
    assert sum(count(checks, "SUCCESS").total() for checks in native.values()) == 44

    # The upstream really is 2026-07-28-only and was bridged: it refused the suite's first initialize
    # (the proxy learns the era from it), and every request it served after that was at 2026-07-28
    # with the suite's own clientInfo (the names its scenarios give).
    requests = served(modern_log)
    assert requests and requests[0]["method"] == "initialize" and requests[0]["version"] is None, requests[:3]
    assert any("legacy clients are bridged" in line for line in proxy_log), logs
    assert {(r["http"], r["version"]) for r in requests[1:]} == {("POST", "2026-07-28")}, requests
    assert {r["client"] for r in requests[1:]} == SUITE_CLIENTS
    methods = {r["method"] for r in requests[1:]}
    assert {"server/discover", "tools/call", "prompts/get", "resources/read", "subscriptions/listen"} <= methods
    assert not methods & {"initialize", "ping", "logging/setLevel", "resources/subscribe"}  # answered by the bridge

    # Through the bridge: every scenario ran, none came out worse than natively.
    assert set(bridged) == SCENARIOS, set(bridged) ^ SCENARIOS
    regressions = {name: lines for name in sorted(SCENARIOS) if (lines := worse(native[name], bridged[name]))}
    assert regressions == {}, json.dumps(regressions, indent=2) + logs
    assert sum(count(checks, "SUCCESS").total() for checks in bridged.values()) == 44
    assert bridged_run.returncode == 0, bridged_run.stdout[-4000:] + logs
    assert not [line for line in proxy_log if "Exception in ASGI application" in line], logs
