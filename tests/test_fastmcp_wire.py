"""A real FastMCP server (PyPI ``fastmcp``) behind the proxy, driven by the three strict clients.

Its tools are what FastMCP users write: a Pydantic model with ``name: str = None`` (the common fault:
the schema says ``string``, the value is ``null``), an ``Optional`` field, a ``datetime`` (schema
``format: date-time``), a float that is NaN (Pydantic writes ``null`` for a required ``number``: no
lossless repair), and an ``int`` return (FastMCP's ``x-fastmcp-wrap-result``). Through the proxy
every result a repair exists for is accepted by every client; each change to the tool list is in
the log, justified by a fault kind and the client it was made for."""

from __future__ import annotations

import json
import math
import subprocess
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fastmcp
import pydantic
import pytest

from mcp_normalizer import NormalizerConfig

from .support import EXE, capture_rewrites, each_client, proxy_for, serve

pytestmark = pytest.mark.wire

KEPT = "dev.mcp-normalizer/original-keywords"


class Person(pydantic.BaseModel):
    id: int
    name: str = None  # type: ignore[assignment]  # the fault, as users write it
    nick: str | None = None


class Score(pydantic.BaseModel):
    value: float
    label: str


class Event(pydantic.BaseModel):
    when: datetime
    title: str


def app() -> Any:
    return fixture_server().http_app(path="/mcp")


def fixture_server() -> Any:
    """The FastMCP server of these tests (``tests/fastmcp_stdio_server.py`` runs it over stdio)."""
    server = fastmcp.FastMCP("fastmcp-fixture")

    @server.tool
    def lookup(id: int) -> Person:
        """Find a person (no name known)."""
        return Person(id=id)

    @server.tool
    def score(x: float) -> Score:
        return Score(value=math.nan, label="ṅaṅ ✓")

    @server.tool
    def event() -> Event:
        return Event(when=datetime(2026, 1, 2, 3, 4, 5, 120_000, tzinfo=UTC), title='12.5 € "q"')

    @server.tool
    def add(a: int, b: int) -> int:
        return a + b

    return server


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with serve(app(), lifespan="on") as url:
        yield url + "/mcp"


CALLS: list[dict[str, Any]] = [
    {"op": "callTool", "name": "lookup", "arguments": {"id": 9007199254740991}},
    {"op": "callTool", "name": "event"},
    {"op": "callTool", "name": "add", "arguments": {"a": -2, "b": 9007199254740991}},
    {"op": "callTool", "name": "score", "arguments": {"x": 1.5e-7}},
]
STEPS: list[dict[str, Any]] = [{"op": "listTools"}, *CALLS]


def by_name(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in record["steps"][0]["value"]["tools"]}


@pytest.mark.anyio
async def test_every_client_accepts_what_a_repair_exists_for_and_nothing_else_changes(upstream: str) -> None:
    with proxy_for(upstream) as px, capture_rewrites() as log:
        direct = await each_client(upstream, STEPS)
        proxied = await each_client(px + "/mcp", STEPS)
    for client, record in proxied.items():
        listing, lookup, event, add, score = record["steps"]
        assert listing["ok"] and lookup["ok"] and event["ok"] and add["ok"], (client, record)
        assert lookup["value"]["structuredContent"] == {"id": 9007199254740991, "nick": None}
        assert lookup["value"]["_meta"]["dev.mcp-normalizer/original-values"] == {"/name": None}
        assert event["value"]["structuredContent"] == {"when": "2026-01-02T03:04:05.120000Z", "title": '12.5 € "q"'}
        assert add["value"]["structuredContent"] == {"result": 9007199254740989}
        # NaN became null for a required number: the TS sessions (two witnesses, sessions without
        # credentials) meet it; rule learn_schema then lists /value nullable for the Python session
        # (issue 39: a null in a required number teaches nullable), whose result passes as sent
        if client == "python":
            assert score["ok"] and score["value"]["structuredContent"]["value"] is None, score
        else:
            assert not score["ok"], (client, score)
        assert not direct[client]["steps"][4]["ok"]
        # the optional null is rejected directly by every strict client
        assert not direct[client]["steps"][1]["ok"], client
    # The Python SDK client (clientInfo "mcp") is known to accept every valid schema: its list is the
    # server's, but for the place learned nullable.
    python, server = by_name(proxied["python"]), by_name(direct["python"])
    assert {k: v for k, v in python.items() if k != "score"} == {k: v for k, v in server.items() if k != "score"}
    assert python["score"]["outputSchema"]["properties"]["value"]["type"] == ["number", "null"]
    # The TS clients name themselves otherwise (unknown): the format every Ajv-with-formats client checks
    # is moved to the description for them, and kept in _meta.
    for client in ("ts-sdk-1", "ts-client-2"):
        tools, server = by_name(proxied[client]), by_name(direct[client])
        assert set(tools) == set(server)
        for name in ("lookup", "score", "add"):
            assert tools[name] == server[name], (client, name)
        when = tools["event"]["outputSchema"]["properties"]["when"]
        assert "format" not in when and "date-time" in when["description"]
        assert tools["event"]["_meta"][KEPT] == {"/outputSchema/properties/when/format": "date-time"}
    listed = [line for line in log.lines if line["method"] == "tools/list"]
    assert {(line["rule"], line["tool"], line["client"], line.get("client_fault")) for line in listed} == {
        ("date_time_format", "event", "mcp-normalizer-test", "format_date_time"),
        ("nullable", "score", "mcp", None),  # learned (rule learn_schema), for every client
    }
    unrepaired = [line for line in log.lines if line["event"] == "unrepaired"]
    assert unrepaired and all(line["tool"] == "score" for line in unrepaired)
    assert all(line["fix"] == '[tools."score"]\nnullable = ["/value"]' for line in unrepaired)


def test_check_writes_the_rule_file_that_makes_the_audit_clean(upstream: str, tmp_path: Path) -> None:
    calls = [arg for call in CALLS for arg in ("--call", call["name"], json.dumps(call.get("arguments", {})))]
    rules = tmp_path / "rules.toml"
    code, report = run_check(upstream, *calls, "--write-config", str(rules))
    assert code == 1 and {f["rule"] for f in report["findings"] if not f["advisory"]} >= {"null_optional_member"}
    assert all(f["author"] for f in report["findings"])
    written = rules.read_text(encoding="utf-8")
    assert tomllib.loads(written) == {"tools": {"score": {"nullable": ["/value"]}}}  # NaN: no default repair
    comments = " ".join(line.lstrip("# ") for line in written.splitlines())
    assert "str | None = None" in comments  # the author's fix for lookup's `name: str = None`
    with proxy_for(upstream, NormalizerConfig.from_file(str(rules))) as px:
        code, report = run_check(px + "/mcp", *calls)
    assert code == 0 and report["clean"], report
    # a base rule file is copied first; declaring the same tool twice would be invalid TOML: refused
    base = tmp_path / "base.toml"
    base.write_text('[tools."score"]\nrelax = ["/label"]\n', encoding="utf-8")
    done = subprocess.run(
        [EXE, "check", upstream, *calls, "--config", str(base), "--write-config", str(tmp_path / "again.toml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and '"score"' in done.stderr and not (tmp_path / "again.toml").exists()


class Reading(pydantic.BaseModel):
    taken: datetime
    on: str


def naive_app() -> Any:
    """A FastMCP server with the fault: a ``datetime`` without a time zone (and a date-time string
    its author typed by hand), next to a good one."""
    server = fastmcp.FastMCP("fastmcp-naive")

    @server.tool
    def reading() -> Reading:
        return Reading(taken=datetime(2026, 12, 3, 9, 30, 0, 500_000), on="caf\u00e9")

    @server.tool
    def aware() -> Reading:
        return Reading(taken=datetime(2026, 12, 3, 9, 30, tzinfo=UTC), on="\u2713")

    return server.http_app(path="/mcp")


def test_check_reports_a_date_time_without_offset_only_where_a_result_has_one() -> None:
    with serve(naive_app(), lifespan="on") as url:
        code, report = run_check(url + "/mcp", "--call", "reading", "{}", "--call", "aware", "{}")
    assert code == 1, report  # a fault: the TS SDK 1.x and 2.x clients check formats (ajv-formats)
    found = [(f["tool"], f["where"], f["rule"], f["pointers"], f["advisory"]) for f in report["findings"]]
    assert found == [("reading", "tools/call", "date_time_format", ["/structuredContent/taken"], False)]
    spec = report["findings"][0]["spec"]["rule"]
    assert "offset" in spec and report["findings"][0]["kind"] == "format_date_time"


def run_check(url: str, *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([EXE, "check", url, "--format", "json", *args], capture_output=True, text=True, timeout=120)
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def test_check_finds_nothing_in_the_list_and_the_faults_of_the_results(upstream: str) -> None:
    code, report = run_check(upstream)
    # format: date-time is a precaution the proxy takes for format-checking clients, not a fault
    assert code == 0 and report["clean"] and report["findings"] == [], report
    calls = [arg for call in CALLS[:3] for arg in ("--call", call["name"], json.dumps(call.get("arguments", {})))]
    code, report = run_check(upstream, *calls)
    assert code == 1  # lookup's null is a fault every strict client rejects
    assert {f["rule"] for f in report["findings"]} == {"null_optional_member"}  # event's ...Z is a date-time
    with proxy_for(upstream) as px:
        code, report = run_check(px + "/mcp", *calls)
    assert code == 0 and report["clean"], report  # through the proxy: repaired
