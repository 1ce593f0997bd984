"""``check --host`` judged by the real host (issue 38, item 5).

For each host that runs here (Claude Code, Codex, Gemini CLI: the runners of
:mod:`tests.host_matrix`, offline against a mock of the host's model API) and each fixture server
below (one fault each, beside a plain companion tool, and a clean control), the real host is run
directly against the server, and ``mcp-normalizer check URL --host PROFILE --call TOOL`` against
the same server. They must agree: ``check`` reports a fault (exit 1, a finding naming the host) exactly
where the real host loses the tool, the server or the result's information (what
:func:`tests.host_matrix.judge` reads from the model's requests), and no finding naming the host
where the host takes it. A disagreement is a wrong fact in ``mcp_normalizer/hosts.toml`` (or a
wrong oracle in ``check``); the facts this test settled say "reproduced with <host> <version> in
tests/test_check_hosts.py". The hosts that cannot run here (Claude Desktop, claude.ai, ChatGPT,
Cursor, VS Code) stay modelled from their sources (``docs/check.md``).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcp_normalizer.check.host_observed import OBSERVED, VERSIONS
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.rules.host_profiles import PROFILES

from .host_loop import HostFailure, McpServer, host_command
from .host_matrix import (
    COMMANDS,
    COMPANION,
    HOSTS,
    LIST_KINDS,
    OK,
    PLAIN_SCHEMA,
    RESULT_KINDS,
    Kind,
    fill,
    judge,
    versions,
)
from .support import EXE, serve

pytestmark = pytest.mark.wire

SERVER = "demo"
#: Host runs and checks at once (each is a blocking subprocess; the machine has 2 cores).
WORKERS = 3
RUN_TIMEOUT = 30.0
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
#: Rules for a model API's own schema checks, which run server-side: the mocks here do not model
#: them (reference/hosts-in-the-loop.md, "Not runnable here"), so a real run cannot settle them.
SERVER_SIDE = frozenset({"gemini_schemas"})
#: Findings of other rules that are a model API's server-side check too, by what their reason names:
#: the Gemini API's parameter names (rule ``host_schemas``, key ``property_key_gemini``).
SERVER_SIDE_REASONS = ("outside [a-zA-Z_][a-zA-Z0-9_]{0,63}",)

#: The fixture servers: one tool with one fault each (beside the companion), and a clean control.
FIXTURES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "property_keys": (LIST_KINDS["property_keys"], OK),
    "input_schema_null": (LIST_KINDS["input_schema_null"], OK),
    "boolean_subschema": (LIST_KINDS["boolean_subschema"], OK),
    "tuple_items": (LIST_KINDS["tuple_items"], OK),
    "svg_image": RESULT_KINDS["svg_image"],
    "resource_link": (
        {"name": "report", "description": "Writes a report.", "inputSchema": PLAIN_SCHEMA},
        {
            "content": [
                {"type": "text", "text": "the report is ready:"},
                {
                    "type": "resource_link",
                    "uri": "file:///reports/r-17.pdf",
                    "name": "r-17.pdf",
                    "mimeType": "application/pdf",
                },
            ]
        },
    ),
    "problem_empty_content": RESULT_KINDS["problem_empty_content"],
    "draft07_output_schema": (
        {
            "name": "count",
            "description": "Counts runtimes.",
            "inputSchema": PLAIN_SCHEMA,
            "outputSchema": {"$schema": DRAFT_07, "type": "object", "properties": {"n": {"type": "integer"}}},
        },
        {"content": [{"type": "text", "text": '{"n": 12345}'}], "structuredContent": {"n": 12345}},
    ),
    "clean": (
        {"name": "echo", "description": "Echoes.", "inputSchema": PLAIN_SCHEMA},
        {"content": [{"type": "text", "text": "ok: 12.5 caf\u00e9 \u6771\u4eac"}]},
    ),
}


@dataclass(frozen=True)
class Verdict:
    """One fixture for one host: what the real host did, and what ``check --host`` said."""

    lost: str | None  # what the real host lost (None: it took everything)
    code: int  # check's exit code
    naming: list[str]  # check's findings that name the host (rule: reason)

    @property
    def check_fault(self) -> bool:
        return self.code == 1 and bool(self.naming)

    @property
    def agree(self) -> bool:
        return self.check_fault == (self.lost is not None)


def real_host(host: str, fixture: str, url: str, tmp: Path) -> str | None:
    """Run the real host directly against the fixture's server: what it lost, or ``None``."""
    tool, result = FIXTURES[fixture]
    kind = Kind(fixture, "defined", "list", tool, result)
    try:
        view = HOSTS[host](McpServer(SERVER, url), tool["name"], fill(tool.get("inputSchema")), tmp)
    except HostFailure as failure:
        return str(failure).splitlines()[0]
    outcome = judge(kind, view)
    if outcome.status != "offered":
        return outcome.status
    if not outcome.result:
        return "offered, no result"
    if outcome.missing:
        return "lost: " + ", ".join(outcome.missing)
    return None


def names_host(finding: dict[str, Any], host: str) -> bool:
    """Whether a finding names the host (its title among the clients it breaks)."""
    title = PROFILES[host].title
    short = title.removeprefix("OpenAI ")
    return any(title in client or short in client for client in finding.get("clients") or [])


def run_check(host: str, fixture: str, url: str) -> tuple[int, list[str]]:
    """``check URL --host PROFILE --call TOOL ARGS``: its exit code and its findings naming the host."""
    tool, _result = FIXTURES[fixture]
    call = ["--call", tool["name"], json.dumps(fill(tool.get("inputSchema")))]
    version = ["--host-version", versions()[host]]  # the version run (a fault of other versions is none here)
    argv = [EXE, "check", url, "--host", host, *version, "--format", "json", "--era", "legacy", *call]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), f"check --host {host} on {fixture}: {done.stderr}"
    findings = json.loads(done.stdout)["findings"]
    naming = [
        f"{f['rule']}: {f['reason']}"
        for f in findings
        if not f.get("advisory")
        and names_host(f, host)
        and f["rule"] not in SERVER_SIDE
        and not any(text in f["reason"] for text in SERVER_SIDE_REASONS)
    ]
    return done.returncode, naming


def verdict(host: str, fixture: str, url: str, tmp: Path) -> Verdict:
    lost = real_host(host, fixture, url, tmp / host / fixture)
    code, naming = run_check(host, fixture, url)
    return Verdict(lost, code, naming)


@pytest.fixture(scope="module")
def verdicts() -> Iterator[dict[tuple[str, str], Verdict]]:
    for host in HOSTS:
        host_command(COMMANDS[host])
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="check-hosts-") as scratch:
        urls = {
            name: stack.enter_context(serve(ScriptedServer([ToolSpec(tool, returning(result)), COMPANION]))) + "/mcp"
            for name, (tool, result) in FIXTURES.items()
        }
        with ThreadPoolExecutor(WORKERS) as pool:
            futures = {
                (fixture, host): pool.submit(verdict, host, fixture, urls[fixture], Path(scratch))
                for fixture in FIXTURES
                for host in HOSTS
            }
            yield {key: future.result() for key, future in futures.items()}


Verdicts = dict[tuple[str, str], Verdict]


def table(verdicts: Verdicts) -> str:
    rows = ["| fixture | host | real host | check --host | agree |", "|---|---|---|---|---|"]
    for (fixture, host), v in verdicts.items():
        check = f"exit {v.code}: " + ("; ".join(v.naming) if v.naming else "nothing for the host")
        rows.append(f"| {fixture} | {host} | {v.lost or 'takes it'} | {check[:160]} | {'yes' if v.agree else 'NO'} |")
    return "\n".join(rows)


@pytest.mark.parametrize("host", list(HOSTS))
@pytest.mark.parametrize("fixture", list(FIXTURES))
def test_check_host_agrees_with_the_real_host(
    verdicts: dict[tuple[str, str], Verdict], fixture: str, host: str
) -> None:
    v = verdicts[(fixture, host)]
    assert v.agree, f"{host} {fixture}: real host {v.lost or 'takes it'}; check exit {v.code}, {v.naming}"


def test_the_clean_control_is_taken_and_clean(verdicts: Verdicts) -> None:
    print(table(verdicts))
    for host in HOSTS:
        v = verdicts[("clean", host)]
        assert (v.lost, v.code, v.naming) == (None, 0, []), host


def test_each_observation_check_names_is_a_loss_a_fixture_reproduces(verdicts: Verdicts) -> None:
    """``check/host_observed.py`` names only what a real host here lost on a fixture of this module."""
    for entry in OBSERVED:
        hits = [
            fixture
            for fixture, (tool, result) in FIXTURES.items()
            if entry.violates(tool if entry.subject == "tool" else result)
        ]
        assert hits, entry.does
        for fixture in hits:
            assert verdicts[(fixture, entry.profile)].lost is not None, (entry.profile, fixture)


def test_the_versions_named_are_the_versions_run() -> None:
    pinned = versions()  # tests/hosts/package.json
    assert set(VERSIONS) == set(HOSTS)
    for host, named in VERSIONS.items():
        assert named.endswith(" " + pinned[host]), (host, named)
