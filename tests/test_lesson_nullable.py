"""Learning ``nullable`` (issue 39, item 4): a ``null`` where a tool's ``outputSchema`` requires a
string, number, integer or boolean teaches the declaration an operator would write
(``[tools."X"] nullable = ["/place"]``), like the other lessons: for the scope that met it at once,
for every other session of the upstream once results seen from a second authorization showed it
too, kept with ``--state-dir``, listed on ``/.mcp-normalizer/lessons`` (places only), off with
``learn_schema = "off"``; ``check`` prints the declaration.

Fixtures: Protean's ``list_runtimes`` on its old shape (the seed's founding repair: ``runtimes[].scope``
a required string, ``null`` for a runtime without scope; the demo upstream's tool and data, with
the shipped interventions table off, which otherwise declares that place nullable itself), and a
tool whose required number, in an array of objects in an array of objects, is ``null`` (a
non-finite float the Python SDK serializes so, python-sdk#3341). The public case
``fastmcp-openapi-null-string`` (an optional member's ``null``) is dropped by ``null_optional_member``
and teaches nothing. Real clients: the TS SDK 1.32.2 client and the Python ``mcp`` client, both of
which reject a ``structuredContent`` that fails the ``outputSchema`` they listed.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import RUNTIMES, ScriptedServer, ToolSpec, protean_tools, returning
from mcp_normalizer.engine.lessons import NULLABLE, Evidence, Lesson, LessonBook, definition_digest, taught_now
from mcp_normalizer.engine.rules.learned import MAX_PLACES, Learned, LearnedTools
from mcp_normalizer.engine.scopes import ScopeStore
from mcp_normalizer.ops.lesson_store import upstream_digest
from mcp_normalizer.ops.shared_state import _learned, _learned_json
from mcp_normalizer.wire.pointer import PointerPattern

from .support import EXE, HEADERS, case_server, free_port, initialize, load_cases, proxy_for, rpc, running, serve, steps
from .test_learned import LISTED_KEY, answer, data_lines, listing, through
from .test_shared_state import redis_server

LESSONS = "/.mcp-normalizer/lessons"
SCOPE = "/runtimes/*/scope"


def protean_case() -> dict[str, Any]:
    """The demo upstream's ``protean.list_runtimes`` (the old shape) and its result, as a case."""
    tool = next(spec.tool for spec in protean_tools() if spec.tool["name"] == "protean.list_runtimes")
    result = {"content": [{"type": "text", "text": orjson.dumps(RUNTIMES).decode()}], "structuredContent": RUNTIMES}
    return {"id": "protean-list-runtimes-old-shape", "kind": "null_for_non_nullable", "tool": tool, "result": result}


#: A required number at depth: ``series[].points[].value``, ``null`` for a NaN (python-sdk#3341).
SERIES_SCHEMA = {
    "type": "object",
    "properties": {
        "s\u00e9ries": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "points": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"t": {"type": "integer"}, "value": {"type": "number"}},
                            "required": ["t", "value"],
                        },
                    },
                },
                "required": ["label", "points"],
            },
        },
        "count": {"type": "integer"},
    },
    "required": ["s\u00e9ries", "count"],
}
SERIES = {
    "s\u00e9ries": [
        {"label": "caf\u00e9 \u2615", "points": [{"t": 1, "value": 12.5}, {"t": 2, "value": 1e-7}]},
        {"label": "\u6e29\u5ea6", "points": [{"t": 3, "value": None}, {"t": 4, "value": -0.25}]},
    ],
    "count": 12345678901234567890,
}
SERIES_PLACE = "/s\u00e9ries/*/points/*/value"


def series_case() -> dict[str, Any]:
    tool = {
        "name": "metrics.series",
        "description": "Time series of a metric (NaN where a sample is missing).",
        "inputSchema": {"type": "object", "properties": {"metric": {"type": "string"}}},
        "outputSchema": SERIES_SCHEMA,
    }
    result = {"content": [{"type": "text", "text": json.dumps(SERIES)}], "structuredContent": SERIES}
    return {"id": "nan-as-null-at-depth", "kind": "null_for_non_nullable", "tool": tool, "result": result}


def no_interventions(**proxy: Any) -> NormalizerConfig:
    """The shipped rules without the interventions table (which declares Protean's place itself)."""
    config = dataclasses.replace(NormalizerConfig.shipped(), interventions=False)
    return config.with_proxy(proxy) if proxy else config


@contextmanager
def upstream(*cases: dict[str, Any]) -> Iterator[str]:
    """The cases' server (the ``x-case`` header picks the case); one case is served whatever the
    headers (the proxy's own ``tools/list``, fetched for a scope that has none, carries no ``x-case``)."""
    server = ScriptedServer([ToolSpec(cases[0]["tool"], returning(cases[0]["result"]))]) if len(cases) == 1 else None
    with serve(server if server is not None else case_server(list(cases), "sse")) as up:
        yield up + "/mcp"


async def python_session(
    url: str, case: dict[str, Any], authorization: str | None = None, client_name: str | None = None
) -> dict[str, Any]:
    """A Python ``mcp`` client session of ``case`` (list, call)."""
    auth = {"authorization": f"Bearer {authorization}"} if authorization is not None else {}
    record: dict[str, Any] = await run_python(url, steps(case), {"x-case": case["id"], **auth}, client_name=client_name)
    return record


async def ts_session(
    url: str, case: dict[str, Any], authorization: str | None = None, client_name: str | None = None
) -> dict[str, Any]:
    """A TS SDK 1.32.2 client session of ``case`` (list, call)."""
    auth = {"authorization": f"Bearer {authorization}"} if authorization is not None else {}
    session: dict[str, Any] = {"url": url, "headers": {"x-case": case["id"], **auth}, "steps": steps(case)}
    if client_name is not None:
        session["clientName"] = client_name
    return (await run_node("v1", [session]))[0]


async def one_session_two_authorizations(url: str, case: dict[str, Any]) -> list[Any]:
    """One session (a raw client) lists the tools and calls the tool twice, each call with another
    ``Authorization``; the two results as it received them."""
    async with httpx.AsyncClient(timeout=30) as http:
        session = await initialize(http, url, **{"x-case": case["id"]})
        await rpc(http, url, "tools/list", {}, 1, **session)
        results = []
        for rid, token in ((2, "tenant-a"), (3, "tenant-b")):
            headers = {**session, "authorization": f"Bearer {token}"}
            results.append(await rpc(http, url, "tools/call", {"name": case["tool"]["name"]}, rid, **headers))
    return results


async def lessons(proxy: str) -> Any:
    async with httpx.AsyncClient() as http:
        return (await http.get(proxy + LESSONS)).json()


def scope_schema(record: dict[str, Any]) -> Any:
    """The schema the session's FIRST ``tools/list`` gave ``runtimes[].scope``."""
    tool = record["steps"][0]["value"]["tools"][0]
    return tool["outputSchema"]["properties"]["runtimes"]["items"]["properties"]["scope"]


def value_schema(record: dict[str, Any]) -> Any:
    tool = record["steps"][0]["value"]["tools"][0]
    series = tool["outputSchema"]["properties"]["s\u00e9ries"]["items"]
    return series["properties"]["points"]["items"]["properties"]["value"]


def rejected(record: dict[str, Any]) -> bool:
    """The call failed in the client (its output-schema validation)."""
    step = record["steps"][1]
    return not step["ok"] and "structured" in json.dumps(step["error"]).lower()


# -- on the wire ------------------------------------------------------------------------------------


@pytest.mark.wire
@pytest.mark.anyio
async def test_two_authorizations_in_one_session_teach_a_new_clients_first_list_and_a_restart_keeps_it(
    tmp_path: Path,
) -> None:
    """Before: the Python client (tenant A) lists ``scope`` a plain string and rejects the result.
    Then one session meets the ``null`` from two authorizations (A's and B's): the results pass as the server sent them
    (nothing lossier than before). A new session of another client (the TS SDK 1.32.2, another
    ``clientInfo``) gets ``["string", "null"]`` on its FIRST ``tools/list`` and its result passes
    with the ``null`` kept; so does the Python client. The endpoint lists the place, no id nor
    time. A restarted proxy with the same state directory lists it so at once."""
    case = protean_case()
    config = no_interventions(state_dir=str(tmp_path / "state"))
    with upstream(case) as up:
        with proxy_for(up, config) as px:
            url = px + "/mcp"
            before = await python_session(url, case, "tenant-a", client_name="before-lesson")
            untaught = await lessons(px)
            met = await one_session_two_authorizations(url, case)
            ts_after = await ts_session(url, case, "tenant-c", client_name="another-client")
            py_after = await python_session(url, case, "tenant-d", client_name="python-after")
            listed = await lessons(px)
        written = orjson.loads((tmp_path / "state" / f"lessons-{upstream_digest(up)}.json").read_bytes())
        with proxy_for(up, config) as px:  # a new process: only the directory remembers
            restarted = await python_session(px + "/mcp", case, client_name="after-restart")
    assert scope_schema(before) == {"type": "string"} and rejected(before), before
    assert untaught == {"lessons": []}  # (one authorization so far)
    assert [answer["result"]["structuredContent"] for answer in met] == [RUNTIMES, RUNTIMES]  # as sent
    assert scope_schema(ts_after) == {"type": ["string", "null"]}, ts_after
    assert ts_after["steps"][1]["ok"] and ts_after["steps"][1]["value"]["structuredContent"] == RUNTIMES, ts_after
    assert scope_schema(py_after) == {"type": ["string", "null"]} and py_after["steps"][1]["ok"], py_after
    assert py_after["steps"][1]["value"]["structuredContent"] == RUNTIMES
    assert listed == {
        "lessons": [
            {
                "tool": "protean.list_runtimes",
                "definition": definition_digest(case["tool"]),
                "drop_output_schema": False,
                "relax": [],
                "nullable": [SCOPE],
                "first": {"pointers": [SCOPE]},
            }
        ]
    }
    (kept,) = written["lessons"]
    assert kept["nullable"] == [SCOPE] and set(kept["first"]) == {"id", "at", "pointers"}
    assert scope_schema(restarted) == {"type": ["string", "null"]} and restarted["steps"][1]["ok"], restarted
    # the rest of the tool is the server's: only the place widened
    tool = restarted["steps"][0]["value"]["tools"][0]
    items = tool["outputSchema"]["properties"]["runtimes"]["items"]
    assert items["required"] == ["name", "scope"] and items["properties"]["name"] == {"type": "string"}


@pytest.mark.wire
@pytest.mark.anyio
async def test_one_authorization_teaches_nobody_else() -> None:
    """Tenant A meets the ``null`` in two sessions (one authorization: one witness): another
    tenant's new session still lists ``scope`` a plain string and its client rejects the result;
    the endpoint lists nothing."""
    case = protean_case()
    with upstream(case) as up, proxy_for(up, no_interventions()) as px:
        url = px + "/mcp"
        first = await python_session(url, case, "tenant-a")
        again = await ts_session(url, case, "tenant-a")
        listed = await lessons(px)
        other = await ts_session(url, case, "tenant-c", client_name="another-client")
    assert rejected(first) and rejected(again), (first, again)
    assert listed == {"lessons": []}
    assert scope_schema(other) == {"type": "string"} and rejected(other), other


@pytest.mark.wire
@pytest.mark.anyio
async def test_learning_off_teaches_nothing_and_writes_no_state(tmp_path: Path) -> None:
    """``learn_schema = "off"``: two authorizations meet the ``null``; a third client's list is
    the server's, its result rejected as before; nothing listed, nothing written."""
    case = protean_case()
    config = dataclasses.replace(
        NormalizerConfig.from_mapping({"rules": {"learn_schema": "off"}, "proxy": {"state_dir": str(tmp_path / "s")}}),
        interventions=False,
    )
    with upstream(case) as up, proxy_for(up, config) as px:
        url = px + "/mcp"
        met = await one_session_two_authorizations(url, case)
        other = await ts_session(url, case, "tenant-c", client_name="another-client")
        listed = await lessons(px)
    assert [answer["result"]["structuredContent"] for answer in met] == [RUNTIMES, RUNTIMES]
    assert scope_schema(other) == {"type": "string"} and rejected(other), other
    assert listed == {"lessons": []} and list((tmp_path / "s").iterdir()) == []


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_nan_serialized_as_null_at_depth_teaches_the_nested_place_and_every_number_is_kept() -> None:
    """A required number two arrays of objects deep is ``null``: the place learned is
    ``/séries/*/points/*/value`` (every array index ``*``); a new client lists that schema
    ``["number", "null"]``, the rest of the schema as the server listed it, and receives the
    result with its decimals, big integer and unicode as sent."""
    case = series_case()
    with upstream(case) as up, proxy_for(up) as px:  # (the shipped rules: no intervention names this tool)
        url = px + "/mcp"
        a = await ts_session(url, case, "tenant-a")
        b = await python_session(url, case, "tenant-b")
        c = await ts_session(url, case, "tenant-c", client_name="another-client")
        listed = await lessons(px)
        async with httpx.AsyncClient(timeout=30) as http:  # the bytes, as a client that keeps big integers reads them
            session = await initialize(http, url, authorization="Bearer tenant-d")
            await rpc(http, url, "tools/list", {}, 1, **session)
            body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "metrics.series"}}
            raw = await http.post(url, content=orjson.dumps(body), headers={**HEADERS, **session})
    assert value_schema(a) == {"type": "number"} and rejected(a) and rejected(b), (a, b)
    assert value_schema(c) == {"type": ["number", "null"]} and c["steps"][1]["ok"], c
    received = c["steps"][1]["value"]["structuredContent"]
    assert received["s\u00e9ries"] == SERIES["s\u00e9ries"]  # (JavaScript reads the count as a double)
    data = [line[5:].strip() for line in raw.content.splitlines() if line.startswith(b"data:")]
    assert orjson.loads(data[-1])["result"]["structuredContent"] == SERIES
    assert b'"count":12345678901234567890' in data[-1] and b'"value":1e-7' in data[-1], data[-1]
    tool = c["steps"][0]["value"]["tools"][0]
    assert tool["outputSchema"]["required"] == ["s\u00e9ries", "count"]
    (lesson,) = listed["lessons"]
    assert lesson["nullable"] == [SERIES_PLACE] and lesson["relax"] == []


@pytest.mark.wire
@pytest.mark.anyio
async def test_an_optional_members_null_is_dropped_as_before_and_teaches_nothing() -> None:
    """The public case ``fastmcp-openapi-null-string`` (``foo``, optional, ``null``): the null is
    dropped (``null_optional_member``), every client accepts the result, nothing is learned."""
    (case,) = [c for c in load_cases("null_for_non_nullable") if c["id"] == "fastmcp-openapi-null-string"]
    with upstream(case) as up, proxy_for(up) as px:
        url = px + "/mcp"
        records = [await python_session(url, case, "tenant-a"), await ts_session(url, case, "tenant-b")]
        third = await ts_session(url, case, "tenant-c")
        listed = await lessons(px)
    for record in (*records, third):
        assert record["steps"][1]["ok"] and record["steps"][1]["value"]["structuredContent"] == {}, record
    assert third["steps"][0]["value"]["tools"][0]["outputSchema"] == case["tool"]["outputSchema"]
    assert listed == {"lessons": []}


@pytest.mark.wire
def test_check_prints_the_declaration_to_write(tmp_path: Path) -> None:
    """``check`` against the server (no proxy) meets the ``null``s and prints, for each tool, the
    ``[tools."X"] nullable = [...]`` to write (array indexes as ``*``, names as written), in its
    table and its JSON, beside what the proxy would learn (rule ``learn_schema``); the rule file
    ``--write-config`` writes holds it."""
    protean, series = protean_case(), series_case()
    off = tmp_path / "off.toml"
    off.write_text("[normalizer]\ninterventions = false\n", encoding="utf-8")
    written = tmp_path / "rules.toml"
    with serve(case_server([protean, series], "sse")) as up:
        found = {}
        for case in (protean, series):
            args = [up + "/mcp", "--call", case["tool"]["name"], "--header", f"x-case: {case['id']}"]
            done = run_check(*args, "--config", str(off), "--format", "json")
            table = run_check(*args, "--config", str(off))
            found[case["id"]] = (done, table)
        done = run_check(
            up + "/mcp",
            "--call",
            series["tool"]["name"],
            "--header",
            f"x-case: {series['id']}",
            "--write-config",
            str(written),
        )
    protean_json, protean_table = found[protean["id"]]
    findings = orjson.loads(protean_json.stdout)["findings"]
    finding, learned = (f for f in findings if f["tool"] == "protean.list_runtimes")
    assert finding["fix"] == '[tools."protean.list_runtimes"]\nnullable = ["/runtimes/*/scope"]', finding
    assert (learned["rule"], learned["repair"]) == ("learn_schema", f"would learn nullable {SCOPE}"), learned
    assert '[tools."protean.list_runtimes"]' in protean_table.stdout and 'nullable = ["/runtimes/*/scope"]' in (
        protean_table.stdout
    ), protean_table.stdout
    series_json, _ = found[series["id"]]
    finding, _ = (f for f in orjson.loads(series_json.stdout)["findings"] if f["tool"] == "metrics.series")
    assert finding["fix"] == f'[tools."metrics.series"]\nnullable = ["{SERIES_PLACE}"]', finding
    assert f'nullable = ["{SERIES_PLACE}"]' in written.read_text(encoding="utf-8"), done.stderr


def run_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, "check", *args], capture_output=True, text=True, timeout=60)


# -- the rule and the book (pure) -------------------------------------------------------------------


@pytest.mark.pure
@pytest.mark.parametrize(
    ("schema", "value", "learned"),
    [
        # a required string, integer, boolean; a type list of scalars; an enum beside the type
        ({"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}, {"s": None}, "/s"),
        ({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, {"n": None}, "/n"),
        ({"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"]}, {"b": None}, "/b"),
        (
            {"type": "object", "properties": {"x": {"type": ["string", "number"]}}, "required": ["x"]},
            {"x": None},
            "/x",
        ),
        (
            {"type": "object", "properties": {"e": {"type": "string", "enum": ["a", "b"]}}, "required": ["e"]},
            {"e": None},
            "/e",
        ),
        # a member the schema does not name (additionalProperties): never the data's key
        ({"type": "object", "additionalProperties": {"type": "number"}}, {"alice@example.com": None}, "/*"),
    ],
)
def test_what_a_null_teaches(schema: dict[str, Any], value: Any, learned: str) -> None:
    store = ScopeStore()
    through(store, listing(schema), "tools/list")
    out, log = through(store, answer(value))
    assert data_lines(out)[-1]["result"]["structuredContent"] == value  # passed as it came
    assert [line["action"] for line in log if line["rule"] == "learn_schema"] == [
        f"learned nullable {learned}; sent notifications/tools/list_changed"
    ]
    relisted, _ = through(store, listing(schema), "tools/list")
    tool = data_lines(relisted)[0]["result"]["tools"][0]
    assert LISTED_KEY not in tool.get("_meta", {})  # (nothing removed: only null added at the place)
    again, log = through(store, answer(value, 3))
    assert not [line for line in log if line["event"] == "unrepaired"]  # conforms now


@pytest.mark.pure
@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "object", "properties": {"o": {"type": "object"}}, "required": ["o"]}, {"o": None}),  # an object
        ({"type": "object", "properties": {"n": {"enum": [1]}}, "required": ["n"]}, {"n": None}),  # no type
        (
            {
                "type": "object",
                "oneOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"required": ["b"]}],
            },
            {"a": None},
        ),  # inside a branch
        (
            {"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "integer"}}, "required": ["s"]},
            {"s": None, "n": "one"},
        ),  # beside a wrong type
    ],
)
def test_what_a_null_does_not_teach(schema: dict[str, Any], value: Any) -> None:
    store = ScopeStore()
    through(store, listing(schema), "tools/list")
    out, log = through(store, answer(value))
    assert not store.state("s").learned and not [line for line in log if line["rule"] == "learn_schema"]
    assert data_lines(out)[-1]["result"]["structuredContent"] == value


@pytest.mark.pure
def test_an_optional_null_beside_a_required_one_is_left_to_its_rule_and_the_fix_names_the_required_one() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]}
    store = ScopeStore()
    through(store, listing(schema), "tools/list")
    _, log = through(store, answer({"a": None, "b": None}))
    assert store.state("s").learned["t"] == Learned(nullable=(PointerPattern.parse("/a"),))  # not /b: dropped
    (unrepaired,) = [line for line in log if line["event"] == "unrepaired" and line["rule"] == "conformance"]
    assert unrepaired["fix"] == '[tools."t"]\nnullable = ["/a"]'


@pytest.mark.pure
def test_a_nullable_lesson_round_trips_waits_for_a_second_witness_and_keeps_its_bounds() -> None:
    place = PointerPattern.parse(SCOPE)
    found = Learned(nullable=(place,))
    seen = taught_now("protean.list_runtimes", "0" * 32, found, 7, found.places)
    book = LessonBook()
    assert not book.witnessed(seen, "w1") and book.get("protean.list_runtimes", "0" * 32) is None
    (pending,) = book.evidence()
    assert pending.item == NULLABLE + SCOPE and Evidence.from_json(pending.as_json()) == pending
    assert book.witnessed(seen, "w2") and book.get("protean.list_runtimes", "0" * 32) == found
    (kept,) = book.lessons()
    assert kept.pointers == (SCOPE,) and Lesson.from_json(orjson.loads(orjson.dumps(kept.as_json()))) == kept
    # a relax place and a nullable one are two items: one does not confirm the other
    relax = taught_now("t", "0" * 32, Learned(relax=(place,)), 1, (SCOPE,))
    assert not book.witnessed(relax, "w1") and not book.witnessed(taught_now("t", "0" * 32, found, 1, ()), "w2")
    # bounded: relax and nullable hold MAX_PLACES places together
    many = tuple(PointerPattern.parse(f"/p{i}") for i in range(MAX_PLACES))
    merged = Learned(relax=many[:15]).merged(Learned(nullable=many))
    assert len(merged.relax) + len(merged.nullable) == MAX_PLACES
    too_many = {**kept.as_json(), "relax": [f"/r{i}" for i in range(15)], "nullable": [f"/n{i}" for i in range(6)]}
    assert Lesson.from_json(too_many) is None
    # a lesson stored before nullable was learned still reads
    old = {k: v for k, v in kept.as_json().items() if k != "nullable"} | {"relax": ["/a"]}
    assert Lesson.from_json(old) is not None


@pytest.mark.pure
def test_a_scopes_learned_nullable_is_shared_and_an_entry_of_the_older_shape_still_reads() -> None:
    tools = LearnedTools()
    tools["t"] = Learned(nullable=(PointerPattern.parse(SCOPE),))
    assert _learned(_learned_json(tools)) == dict(tools)
    assert _learned(b'{"t": [false, ["/a"]]}') == {"t": Learned(relax=(PointerPattern.parse("/a"),))}
    assert tools.key != LearnedTools().key and tools.size_of("t") == len("t") + len(SCOPE)


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_replica_sharing_redis_lists_the_place_nullable_once_two_authorizations_met_it_on_two_others() -> None:
    """Tenant A's ``null`` on one replica, tenant B's on another (Redis shared): a third replica's
    new session of another client lists ``scope`` nullable on its first list and accepts the result."""
    case = protean_case()
    with redis_server() as store, upstream(case) as up:
        shared = no_interventions(state_url=store.url, state_secret="s")
        with proxy_for(up, shared) as first, proxy_for(up, shared) as second:
            a = await python_session(first + "/mcp", case, "tenant-a")
            b = await ts_session(second + "/mcp", case, "tenant-b")
            with proxy_for(up, shared) as third:
                c = await ts_session(third + "/mcp", case, "tenant-c", client_name="another-client")
    assert rejected(a) and rejected(b), (a, b)
    assert scope_schema(c) == {"type": ["string", "null"]} and c["steps"][1]["ok"], c


@pytest.mark.wire
@pytest.mark.anyio
async def test_the_mcp_normalizer_command_with_state_dir_keeps_the_lesson_across_a_restart(tmp_path: Path) -> None:
    """The real command (``mcp-normalizer --upstream URL --state-dir DIR``): two authorizations meet
    the ``null``; the process is stopped (SIGTERM) and started again with the same directory; a
    new session of another client lists ``scope`` nullable on its first ``tools/list``."""
    case = protean_case()
    rules = tmp_path / "rules.toml"
    rules.write_text("[normalizer]\ninterventions = false\n", encoding="utf-8")
    state = tmp_path / "state"
    with upstream(case) as up:
        port = free_port()
        argv = [EXE, "--upstream", up, "--port", str(port), "--config", str(rules), "--state-dir", str(state)]
        with running(argv, port):
            url = f"http://127.0.0.1:{port}/mcp"
            met = await one_session_two_authorizations(url, case)
        with running(argv, port):
            after = await ts_session(url, case, client_name="after-restart")
    assert [answer["result"]["structuredContent"] for answer in met] == [RUNTIMES, RUNTIMES]
    assert scope_schema(after) == {"type": ["string", "null"]} and after["steps"][1]["ok"], after
    assert after["steps"][1]["value"]["structuredContent"] == RUNTIMES


@pytest.mark.pure
def test_a_learned_place_is_only_advertised_a_wrong_value_there_is_never_replaced() -> None:
    """A declared ``nullable`` place also turns an invalid value there into ``null`` (the original
    in ``_meta``); a learned one never does: after learning ``/s``, ``{"s": [12.5]}`` passes as
    sent (``unrepaired``), and ``{"s": null}`` conforms."""
    schema = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}
    store = ScopeStore()
    through(store, listing(schema), "tools/list")
    through(store, answer({"s": None}))
    relisted, _ = through(store, listing(schema), "tools/list")
    assert data_lines(relisted)[0]["result"]["tools"][0]["outputSchema"]["properties"]["s"] == {
        "type": ["string", "null"]
    }
    out, log = through(store, answer({"s": [12.5]}, 3))
    sent = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"s": [12.5]}}
    assert data_lines(out)[-1]["result"] == sent  # nothing added: no _meta, no null
    assert not [line for line in log if line["rule"] == "nullable"]
    assert [line["event"] for line in log if line["rule"] == "conformance"] == ["unrepaired"]
    out, log = through(store, answer({"s": None}, 4))
    assert data_lines(out)[-1]["result"]["structuredContent"] == {"s": None} and not log
