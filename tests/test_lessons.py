"""Learning that lasts (issue 23, section 2; issue 37): what results taught applies to every session
of the same upstream whose tool has the same definition, across restarts (a state directory) and
replicas (Redis); never across upstreams (all of the upstream: its URL's query, a command's every
argument, its environment and directory) or definitions; and only once results seen from two
witnesses (authorizations, or sessions without credentials) taught it: one tenant's results teach
nobody else.

The fault is the corpus's ``decocms-const-mismatch`` (``ASK_PERPLEXITY``: a ``const`` the upstream
API outgrew): no rule repairs the result, rule ``learn_schema`` learns ``relax`` at the place. On the
wire with real clients: sessions A and A' (the Python SDK, then the TS SDK 1.x) meet the fault;
session B (the TS SDK 1.x, opened after) lists the tool relaxed and its first call is accepted.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer.app import create_app
from mcp_normalizer.config import NormalizerConfig, Settings
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.engine.lessons import (
    MAX_LESSONS,
    MAX_PENDING,
    MAX_PENDING_BYTES,
    MAX_WITNESS,
    MAX_WITNESS_PARTS,
    Evidence,
    Lesson,
    LessonBook,
    definition_digest,
    same_witness,
    taught_now,
)
from mcp_normalizer.engine.rules.learned import LIST_CHANGED, Learned
from mcp_normalizer.hop.announcer import LIST_CHANGED_EVENT
from mcp_normalizer.ops.lesson_store import LessonStore, upstream_digest
from mcp_normalizer.types import ASGIApp, Receive, Scope, Send
from mcp_normalizer.wire.pointer import PointerPattern

from .support import MODERN, case_server, initialize, load_cases, proxy_for, read_body, rpc, serve, steps
from .test_shared_state import redis_server

CASE_ID = "decocms-const-mismatch"
RELAXED = {"raw": {"object": "chat.completion.done"}}


def the_case() -> dict[str, Any]:
    return next(case for case in load_cases() if case["id"] == CASE_ID)


def other_definition(case: dict[str, Any]) -> dict[str, Any]:
    """The same tool name, listed with another description: another definition."""
    tool = {**case["tool"], "description": "Ask Perplexity (v2, caf\u00e9)"}
    return {**case, "id": "other-definition", "tool": tool}


def config(**proxy: Any) -> NormalizerConfig:
    return NormalizerConfig.shipped().with_proxy(proxy) if proxy else NormalizerConfig.shipped()


async def python_session(url: str, case: dict[str, Any], authorization: str | None = None) -> dict[str, Any]:
    """A Python SDK session of ``case`` (list, call), with ``Authorization: Bearer <authorization>`` if given."""
    auth = {"authorization": f"Bearer {authorization}"} if authorization is not None else {}
    record: dict[str, Any] = await run_python(url, steps(case), {"x-case": case["id"], **auth})
    return record


async def ts_session(url: str, case: dict[str, Any], authorization: str | None = None) -> dict[str, Any]:
    """A TS SDK 1.x session of ``case`` (list, call), with ``Authorization: Bearer <authorization>`` if given."""
    auth = {"authorization": f"Bearer {authorization}"} if authorization is not None else {}
    records = await run_node("v1", [{"url": url, "headers": {"x-case": case["id"], **auth}, "steps": steps(case)}])
    return records[0]


async def met_twice(url: str, case: dict[str, Any]) -> None:
    """Two sessions without credentials (two witnesses) meet the case's fault."""
    assert not (await python_session(url, case))["steps"][1]["ok"]
    assert not (await ts_session(url, case))["steps"][1]["ok"]


def listed_object(record: dict[str, Any]) -> Any:
    """The schema the session's first ``tools/list`` gave the place that fails."""
    tool = record["steps"][0]["value"]["tools"][0]
    return tool["outputSchema"]["properties"]["raw"]["properties"]["object"]


@contextmanager
def upstream(*cases: dict[str, Any]) -> Iterator[str]:
    with serve(case_server(list(cases), "sse")) as up:
        yield up + "/mcp"


# -- on the wire ----------------------------------------------------------------------------------


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_session_opened_after_gets_the_relaxed_schema_on_its_first_list_and_another_definition_does_not() -> (
    None
):
    case = the_case()
    with upstream(case, other_definition(case)) as up, proxy_for(up) as px:
        a = await python_session(px + "/mcp", case, "tenant-a")
        a2 = await ts_session(px + "/mcp", case, "tenant-a2")  # another authorization meets it too
        b = await ts_session(px + "/mcp", case, "tenant-b")
        other = await ts_session(px + "/mcp", other_definition(case), "tenant-a")
        other2 = await python_session(px + "/mcp", other_definition(case), "tenant-b")
        async with httpx.AsyncClient() as http:
            listed = (await http.get(px + "/.mcp-normalizer/lessons")).json()
    assert not a["steps"][1]["ok"] and not a2["steps"][1]["ok"]  # they met the fault: results as sent
    assert listed_object(a2) == {"const": "chat.completion"}  # one authorization taught A' nothing
    assert listed_object(b) == {} and b["steps"][1]["ok"], b  # B: relaxed from its first list
    assert b["steps"][1]["value"]["structuredContent"] == RELAXED
    assert listed_object(other) == {"const": "chat.completion"} and not other["steps"][1]["ok"]
    assert listed_object(other2) == {"const": "chat.completion"} and not other2["steps"][1]["ok"]
    # the other definition's sessions met the fault themselves: a lesson of its own, beside A's
    by_definition = {lesson["definition"]: lesson for lesson in listed["lessons"]}
    assert set(by_definition) == {definition_digest(case["tool"]), definition_digest(other_definition(case)["tool"])}
    lesson = by_definition[definition_digest(case["tool"])]
    assert lesson["tool"] == "ASK_PERPLEXITY" and lesson["relax"] == ["/raw/object"]
    # the places, not which tool others called nor when (the admin endpoint has no authentication)
    assert lesson["first"] == {"pointers": ["/raw/object"]}


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_restarted_proxy_keeps_what_it_learned_in_its_state_directory_and_another_upstream_does_not(
    tmp_path: Path,
) -> None:
    case = the_case()
    state = config(state_dir=str(tmp_path / "state"))
    with upstream(case) as up:
        with proxy_for(up, state) as px:
            await met_twice(px + "/mcp", case)
        written = tmp_path / "state" / f"lessons-{upstream_digest(up)}.json"
        assert {path.name for path in (tmp_path / "state").iterdir()} == {written.name, "witness.key"}
        (kept,) = orjson.loads(written.read_bytes())["lessons"]
        assert kept["tool"] == "ASK_PERPLEXITY" and kept["relax"] == ["/raw/object"]
        assert json.loads(kept["first"]["id"]) is not None and isinstance(kept["first"]["at"], float)  # 0600: kept
        with proxy_for(up, state) as px:  # a new process: only the directory remembers
            again = await ts_session(px + "/mcp", case)
        with upstream(case) as elsewhere, proxy_for(elsewhere, state) as px:
            other = await ts_session(px + "/mcp", case)
    assert listed_object(again) == {} and again["steps"][1]["ok"], again
    assert listed_object(other) == {"const": "chat.completion"} and not other["steps"][1]["ok"]


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_second_replica_sharing_redis_lists_the_tool_relaxed() -> None:
    case = the_case()
    with redis_server() as store, upstream(case) as up:
        shared = config(state_url=store.url, state_secret="s")
        with proxy_for(up, shared) as first, proxy_for(up, shared) as second:
            assert not (await python_session(first + "/mcp", case))["steps"][1]["ok"]
            # the second replica reads the first's evidence: its own witness confirms it
            assert not (await ts_session(second + "/mcp", case))["steps"][1]["ok"]
            with proxy_for(up, shared) as third:
                b = await ts_session(third + "/mcp", case)
        dumped = store.dump()
    assert listed_object(b) == {} and b["steps"][1]["ok"], b
    assert any(key.startswith(b"mcp-normalizer:k:") and not key.endswith(b":e") for key in dumped)


@pytest.mark.wire
@pytest.mark.anyio
async def test_learning_off_learns_nothing_and_writes_no_state(tmp_path: Path) -> None:
    case = the_case()
    off = NormalizerConfig.from_mapping(
        {"rules": {"learn_schema": "off"}, "proxy": {"state_dir": str(tmp_path / "state")}}
    )
    with upstream(case) as up, proxy_for(up, off) as px:
        await python_session(px + "/mcp", case)
        b = await ts_session(px + "/mcp", case)
        async with httpx.AsyncClient() as http:
            listed = (await http.get(px + "/.mcp-normalizer/lessons")).json()
    assert listed_object(b) == {"const": "chat.completion"} and not b["steps"][1]["ok"]
    assert listed == {"lessons": []} and list((tmp_path / "state").iterdir()) == []


UPSTREAM_NOTE = b'\xef\xbb\xbfevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/message",'
UPSTREAM_NOTE += b'"params":{"level":"info","data":"caf\\u00e9 12.50"}}\n\n'


def with_get_streams(cases: list[dict[str, Any]], release: threading.Event) -> ASGIApp:
    """The cases' server, whose GET streams stay silent until ``release``, then send
    :data:`UPSTREAM_NOTE` (starting with a byte order mark, as a stream may) and end."""
    server = case_server(cases, "sse")

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            await send(start)
            await send({"type": "http.response.body", "body": b"", "more_body": True})
            await anyio.to_thread.run_sync(release.wait, 60)
            await send({"type": "http.response.body", "body": UPSTREAM_NOTE, "more_body": False})
            return
        await server(scope, receive, send)

    return app


async def listening_session(
    http: httpx.AsyncClient, url: str, case: dict[str, Any], received: list[bytes], opened: anyio.Event
) -> None:
    """A raw legacy session of ``case`` that lists the tools, then holds its GET stream open and
    keeps what it carries in ``received``."""
    session = await initialize(http, url, **{"x-case": case["id"]})
    listed = await rpc(http, url, "tools/list", {}, 1, **session)
    assert listed["result"]["tools"][0]["name"] == case["tool"]["name"]
    async with http.stream("GET", url, headers={**session, "accept": "text/event-stream"}) as stream:
        assert stream.status_code == 200
        opened.set()
        async for chunk in stream.aiter_raw():
            received.append(chunk)  # noqa: PERF401 (read while it arrives)


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_lesson_is_announced_on_the_open_get_streams_of_the_sessions_listing_that_definition() -> None:
    """Session B (a raw client) listed the tool and holds its GET stream open; sessions A and A' (the
    Python SDK) then meet the fault: once the second did, B's stream carries ``list_changed`` as a whole SSE event
    before the upstream's own (whose byte order mark, now not first, is dropped), and B's next
    list is relaxed. Session C, listing another definition of the tool, is told nothing."""
    case = the_case()
    release = threading.Event()
    b_got: list[bytes] = []
    c_got: list[bytes] = []
    app = with_get_streams([case, other_definition(case)], release)
    with serve(app) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=60) as http:
            async with anyio.create_task_group() as tg:
                b_open, c_open = anyio.Event(), anyio.Event()
                tg.start_soon(listening_session, http, url, case, b_got, b_open)
                tg.start_soon(listening_session, http, url, other_definition(case), c_got, c_open)
                await b_open.wait()
                await c_open.wait()
                a = await python_session(url, case)
                assert LIST_CHANGED not in b"".join(b_got)  # one witness: nothing for other sessions yet
                a2 = await python_session(url, case)  # another session (no credentials): a second witness
                with anyio.fail_after(30):
                    while LIST_CHANGED not in b"".join(b_got):
                        await anyio.sleep(0.05)
                release.set()  # now the upstream's own event goes out on both streams
            session = await initialize(http, url, **{"x-case": case["id"]})
            relisted = await rpc(http, url, "tools/list", {}, 1, **session)
    assert not a["steps"][1]["ok"] and not a2["steps"][1]["ok"]  # A and A' met the fault
    assert b"".join(b_got) == LIST_CHANGED_EVENT + UPSTREAM_NOTE.removeprefix(b"\xef\xbb\xbf")
    assert b"".join(c_got) == UPSTREAM_NOTE  # nothing for another definition; its stream as it came
    relaxed = relisted["result"]["tools"][0]["outputSchema"]["properties"]["raw"]["properties"]["object"]
    assert relaxed == {}


@pytest.mark.wire
@pytest.mark.anyio
async def test_one_tenants_results_teach_nobody_else_until_another_authorization_meets_the_same_fault() -> None:
    """Tenant A's results (two sessions of one authorization) would relax the tool: tenant B still
    gets the schema as the server listed it, and the admin endpoint lists nothing. Once B's own
    result shows the same fault (a second authorization), a new session of another client (tenant
    C, the Python SDK) lists the tool relaxed from its first list; the endpoint lists the place,
    not the JSON-RPC id nor the time."""
    case = the_case()
    with upstream(case) as up, proxy_for(up) as px:
        url = px + "/mcp"
        a = await python_session(url, case, "tenant-a")
        a_again = await python_session(url, case, "tenant-a")  # the same authorization: one witness
        async with httpx.AsyncClient() as http:
            before = (await http.get(px + "/.mcp-normalizer/lessons")).json()
        b = await ts_session(url, case, "tenant-b")
        c = await python_session(url, case, "tenant-c")
        async with httpx.AsyncClient() as http:
            after = (await http.get(px + "/.mcp-normalizer/lessons")).json()
    assert not a["steps"][1]["ok"] and not a_again["steps"][1]["ok"]
    assert listed_object(a_again) == {"const": "chat.completion"}  # another session: another scope
    assert before == {"lessons": []}
    assert listed_object(b) == {"const": "chat.completion"} and not b["steps"][1]["ok"], b  # A taught B nothing
    assert listed_object(c) == {} and c["steps"][1]["ok"], c
    (lesson,) = after["lessons"]
    assert lesson["tool"] == "ASK_PERPLEXITY" and lesson["relax"] == ["/raw/object"]
    assert lesson["first"] == {"pointers": ["/raw/object"]}  # neither "id" nor "at"


async def credentialed_session(url: str, case: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """A Python SDK session of ``case`` (list, call) sending ``headers`` (its credentials)."""
    record: dict[str, Any] = await run_python(url, steps(case), {"x-case": case["id"], **headers})
    return record


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("first", "second"),
    [
        # one bearer token, a cookie the upstream never reads made up for each session
        (
            {"authorization": "Bearer tenant-a", "cookie": "junk=1"},
            {"authorization": "Bearer tenant-a", "cookie": "junk=2"},
        ),
        # one session cookie, another cookie beside it made up
        ({"cookie": "sid=tenant-a; junk=1"}, {"cookie": "junk=2; sid=tenant-a"}),
        # one session cookie, an Authorization the upstream never reads made up
        ({"cookie": "sid=tenant-a", "authorization": "Bearer x"}, {"cookie": "sid=tenant-a"}),
        # one token, its scheme spelled another way
        ({"authorization": "Bearer tenant-a"}, {"authorization": "bearer  tenant-a"}),
        # one token, words after it that a lax server never reads
        ({"authorization": "Bearer tenant-a"}, {"authorization": "Bearer tenant-a ,made-up"}),
    ],
    ids=["bearer-made-up-cookies", "cookie-made-up-cookies", "cookie-made-up-authorization", "scheme", "tail"],
)
async def test_one_tenant_is_one_witness_whatever_credentials_it_adds_beside_its_own(
    first: dict[str, str], second: dict[str, str]
) -> None:
    """The upstream reads one credential (here: none, so any would do); the proxy cannot know which.
    A tenant that keeps its own and varies the rest (another cookie, an Authorization the
    upstream ignores, the scheme's case) is still one witness: another tenant's session lists the
    tool as the server listed it."""
    case = the_case()
    with upstream(case) as up, proxy_for(up) as px:
        url = px + "/mcp"
        a = await credentialed_session(url, case, first)
        a_again = await credentialed_session(url, case, second)
        async with httpx.AsyncClient() as http:
            lessons = (await http.get(px + "/.mcp-normalizer/lessons")).json()
        c = await python_session(url, case, "tenant-c")  # (its own result is a second witness's)
    assert not a["steps"][1]["ok"] and not a_again["steps"][1]["ok"]
    assert listed_object(c) == {"const": "chat.completion"}, c  # tenant A taught tenant C nothing
    assert lessons == {"lessons": []}


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_made_up_session_header_is_no_witness_in_the_era_without_sessions() -> None:
    """2026-07-28 has no sessions: a stateless server ignores ``Mcp-Session-Id``. A client without
    credentials that sends one made up per request is still no witness (the era's anonymous
    clients are one crowd): two such results teach nobody else, and the endpoint lists nothing."""
    case = the_case()
    with upstream(case) as up, proxy_for(up) as px:
        url = px + "/mcp"
        made_up = [
            await run_python(url, steps(case), {"x-case": case["id"], "mcp-session-id": f"made-up-{n}"}, mode=MODERN)
            for n in (1, 2)
        ]
        c = await run_python(url, steps(case), {"x-case": case["id"], "authorization": "Bearer tenant-c"}, mode=MODERN)
        async with httpx.AsyncClient() as http:
            lessons = (await http.get(px + "/.mcp-normalizer/lessons")).json()
    assert all(not record["steps"][1]["ok"] for record in made_up), made_up
    assert listed_object(c) == {"const": "chat.completion"}, c
    assert lessons == {"lessons": []}


def sessionless(case: dict[str, Any]) -> ASGIApp:
    """A legacy server that runs without sessions (as FastMCP ``stateless_http``): it assigns none
    and reads no ``Mcp-Session-Id``; JSON responses."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        request = orjson.loads(await read_body(receive))
        if "id" not in request:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        method = request["method"]
        if method == "initialize":
            result: Any = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "sessionless", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [case["tool"]]}
        else:
            result = case["result"]
        answer = orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})

    return app


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_made_up_session_header_is_no_witness_where_the_server_assigns_no_session() -> None:
    """A legacy server without sessions ignores ``Mcp-Session-Id``: a client without credentials
    that makes one up for each of its connections is no witness (only a session the upstream
    assigned, seen in its ``initialize`` response, is one), so it teaches nobody else."""
    case = the_case()
    with serve(sessionless(case)) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        made_up = [
            await run_python(url, steps(case), {"x-case": case["id"], "mcp-session-id": f"made-up-{n}"}) for n in (1, 2)
        ]
        c = await python_session(url, case, "tenant-c")
        async with httpx.AsyncClient() as http:
            lessons = (await http.get(px + "/.mcp-normalizer/lessons")).json()
    assert all(not record["steps"][1]["ok"] for record in made_up), made_up
    assert listed_object(c) == {"const": "chat.completion"}, c
    assert lessons == {"lessons": []}


def keyed_by_data(case_id: str, key: str) -> dict[str, Any]:
    """A tool whose output is keyed by data (``additionalProperties``: an e-mail address per
    member), answered with ``key``'s status outside its ``enum``."""
    tool = {
        "name": "people",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
        "outputSchema": {
            "type": "object",
            "properties": {"total": {"type": "integer"}},
            "additionalProperties": {"type": "object", "properties": {"status": {"enum": ["active", "inactive"]}}},
        },
    }
    structured = {"total": 1, key: {"status": "suspended"}}
    result = {"content": [{"type": "text", "text": json.dumps(structured)}], "structuredContent": structured}
    return {**the_case(), "id": case_id, "tool": tool, "result": result}


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_lesson_never_holds_a_tenants_data_keys_and_tenants_with_other_keys_teach_the_same_place(
    tmp_path: Path,
) -> None:
    """A result keyed by data (a member per e-mail address, ``additionalProperties``) fails its
    ``enum``: the place learned is ``/*/status``, never ``/alice@example.com/status``, neither on
    the unauthenticated lessons endpoint nor in the state file; and a second tenant whose own
    data has another key confirms it (the same place), so a third lists the tool relaxed."""
    alice, bob = keyed_by_data("people-a", "alice@example.com"), keyed_by_data("people-b", "bob@example.com")
    state = tmp_path / "state"
    with upstream(alice, bob) as up, proxy_for(up, config(state_dir=str(state))) as px:
        url = px + "/mcp"
        a = await python_session(url, alice, "tenant-a")
        own = await python_session(url, alice, "tenant-a")  # the scope that met it: its own learned state
        b = await python_session(url, bob, "tenant-b")
        c = await ts_session(url, alice, "tenant-c")
        async with httpx.AsyncClient() as http:
            lessons = (await http.get(px + "/.mcp-normalizer/lessons")).json()
    assert not a["steps"][1]["ok"] and not b["steps"][1]["ok"]
    schema = c["steps"][0]["value"]["tools"][0]["outputSchema"]
    assert schema["additionalProperties"]["properties"]["status"] == {} and c["steps"][1]["ok"], c
    (lesson,) = lessons["lessons"]
    assert lesson["relax"] == ["/*/status"] and lesson["first"] == {"pointers": ["/*/status"]}, lesson
    stored = b"".join(path.read_bytes() for path in state.iterdir())
    assert b"alice" not in stored and b"bob" not in stored
    assert "alice" not in json.dumps(own["steps"][0]["value"]), own  # (its own list: the place as the schema names it)


@pytest.mark.wire
@pytest.mark.anyio
async def test_the_unauthenticated_lessons_endpoint_lists_names_and_places_but_no_ids_or_times(tmp_path: Path) -> None:
    """No admin authentication exists: ``/.mcp-normalizer/lessons`` never says which response
    taught a lesson nor when (the state file, the owner's alone, keeps both)."""
    case = the_case()
    with upstream(case) as up, proxy_for(up, config(state_dir=str(tmp_path))) as px:
        for authorization in ("tenant-a", "tenant-b"):
            await python_session(px + "/mcp", case, authorization)
        async with httpx.AsyncClient() as http:
            response = await http.get(px + "/.mcp-normalizer/lessons")
    (listed,) = response.json()["lessons"]
    assert listed == {
        "tool": "ASK_PERPLEXITY",
        "definition": definition_digest(case["tool"]),
        "drop_output_schema": False,
        "relax": ["/raw/object"],
        "nullable": [],
        "first": {"pointers": ["/raw/object"]},
    }
    (stored,) = orjson.loads((tmp_path / f"lessons-{upstream_digest(up)}.json").read_bytes())["lessons"]
    assert set(stored["first"]) == {"id", "at", "pointers"}


@pytest.mark.wire
@pytest.mark.anyio
async def test_upstreams_differing_only_in_their_query_string_keep_lessons_apart(tmp_path: Path) -> None:
    """One server behind two upstream URLs that differ only in their query: what one learned
    (written to the shared state directory) is not the other's; the first, restarted, keeps it."""
    case = the_case()
    state = config(state_dir=str(tmp_path / "state"))
    with upstream(case) as up:
        with proxy_for(up + "?tenant=1", state) as px:
            await met_twice(px + "/mcp", case)
        with proxy_for(up + "?tenant=2", state) as px:
            other = await ts_session(px + "/mcp", case)
        with proxy_for(up + "?tenant=1", state) as px:
            again = await ts_session(px + "/mcp", case)
    assert listed_object(other) == {"const": "chat.completion"} and not other["steps"][1]["ok"], other
    assert listed_object(again) == {} and again["steps"][1]["ok"], again
    # one file each: the second's holds only the evidence its session saw, pending
    assert len(list((tmp_path / "state").glob("lessons-*.json"))) == 2


STDIO_SERVER = str(Path(__file__).with_name("stdio_server.py"))


@contextmanager
def stdio_proxy(argv: list[str], state_dir: Path, **proxy: Any) -> Iterator[str]:
    """The proxy serving the stdio server ``argv`` with the state directory (``[proxy]`` keys
    ``proxy`` set); its MCP endpoint URL."""
    settings = Settings()
    config = settings.load_config({"upstream_cmd": shlex.join(argv), "state_dir": str(state_dir), **proxy})
    with serve(create_app(settings, config=config), proxy=config.proxy) as url:
        yield url + "/mcp"


@pytest.mark.wire
@pytest.mark.anyio
async def test_stdio_commands_differing_after_200_characters_or_by_env_or_cwd_keep_lessons_apart(
    tmp_path: Path,
) -> None:
    """A stdio server whose command line is longer than 200 characters learns (two sessions); the
    same command with another last argument, or with an ``--env`` item, or a ``--cwd``, is another
    upstream: its first list is the server's. The first command, restarted, lists it relaxed."""
    case = the_case()
    plan = json.dumps({"tools": [case["tool"]], "results": {case["tool"]["name"]: case["result"]}})
    argv = [sys.executable, STDIO_SERVER, plan, "--variant=1"]
    assert len(shlex.join(argv)) > 200
    state = tmp_path / "state"
    with stdio_proxy(argv, state) as url:
        await met_twice(url, case)
    others = [
        stdio_proxy([*argv[:-1], "--variant=2"], state),
        stdio_proxy(argv, state, upstream_env=("FIXTURE_NOTE=x",)),
        stdio_proxy(argv, state, upstream_cwd=str(tmp_path)),
    ]
    seen = []
    for proxy in others:
        with proxy as url:
            seen.append(await ts_session(url, case))
    with stdio_proxy(argv, state) as url:
        again = await ts_session(url, case)
    for other in seen:
        assert listed_object(other) == {"const": "chat.completion"} and not other["steps"][1]["ok"], other
    assert listed_object(again) == {} and again["steps"][1]["ok"], again


@pytest.mark.wire
@pytest.mark.anyio
async def test_state_files_are_the_owners_alone_also_when_one_is_replaced(tmp_path: Path) -> None:
    """The state directory the proxy makes is ``0700``; the lessons file (which was there,
    world-readable) and the witness key are ``0600`` after the proxy wrote them."""
    case = the_case()
    directory = tmp_path / "state"
    with upstream(case) as up:
        directory.mkdir(mode=0o755)
        old = directory / f"lessons-{upstream_digest(up)}.json"
        old.write_bytes(b'{"upstream": "u", "lessons": []}')
        old.chmod(0o644)
        with proxy_for(up, config(state_dir=str(directory))) as px:
            await met_twice(px + "/mcp", case)
        made = tmp_path / "made" / "state"
        with proxy_for(up, config(state_dir=str(made))) as px:
            await met_twice(px + "/mcp", case)
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
    written = [old, directory / "witness.key", *made.iterdir()]
    assert len(written) == 4 and all(stat.S_IMODE(os.stat(path).st_mode) == 0o600 for path in written), [
        (path.name, oct(os.stat(path).st_mode)) for path in written
    ]
    assert orjson.loads(old.read_bytes())["lessons"]  # replaced: it holds the lesson now


# -- the book and its store (pure) ------------------------------------------------------------------


def lesson(tool: str = "t", definition: str = "0" * 32, places: tuple[str, ...] = ("/a",)) -> Lesson:
    learned = Learned(relax=tuple(PointerPattern.parse(p) for p in places))
    return taught_now(tool, definition, learned, 7, places)


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_state_directory_others_can_write_never_has_the_proxy_write_through_their_links_nor_trust_their_files(
    tmp_path: Path,
) -> None:
    """A state directory that is not the proxy's alone (``1777``, a shared volume): another user
    links the names the proxy writes beside its files (``<file>.<pid>.partial``) to a file of the
    proxy's user, and leaves a lessons file and a witness key of its own. The proxy writes none
    of that user's files (nor changes their mode), never reads a lesson from a file that is not
    its own (owned by another user, or a link), and keeps learning in files of its own."""
    case = the_case()
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o1777)
    victims = [tmp_path / "victim-1", tmp_path / "victim-2"]
    for victim in victims:
        victim.write_bytes(b"precious\n")
        victim.chmod(0o644)
    forged = taught_now(case["tool"]["name"], definition_digest(case["tool"]), Learned(drop_output_schema=True), 1, ())
    with upstream(case) as up:
        digest = upstream_digest(up)
        (state / f"lessons-{digest}.json.{os.getpid()}.partial").symlink_to(victims[0])
        (state / f"witness.key.{os.getpid()}.partial").symlink_to(victims[1])
        planted = state / f"lessons-{digest}.json"
        planted.write_bytes(orjson.dumps({"upstream": up, "lessons": [forged.as_json()], "evidence": []}))
        if os.geteuid() == 0:
            os.chown(planted, 65534, 65534)  # another user's file
        else:
            planted.unlink()
            (tmp_path / "elsewhere.json").write_bytes(orjson.dumps({"lessons": [forged.as_json()]}))
            planted.symlink_to(tmp_path / "elsewhere.json")  # a link to a file the proxy did not write
        with proxy_for(up, config(state_dir=str(state))) as px:
            first = await ts_session(px + "/mcp", case)
            second = await python_session(px + "/mcp", case)
        files = {path.name: path for path in state.iterdir()}
    for victim in victims:
        assert victim.read_bytes() == b"precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    tool = first["steps"][0]["value"]["tools"][0]
    assert "outputSchema" in tool, tool  # the planted lesson (drop the outputSchema) was not applied
    assert not first["steps"][1]["ok"] and not second["steps"][1]["ok"]  # (two witnesses of the fault)
    written = files[f"lessons-{digest}.json"]
    assert not written.is_symlink() and written.stat().st_uid == os.geteuid()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    (kept,) = orjson.loads(written.read_bytes())["lessons"]
    assert kept["relax"] == ["/raw/object"] and not kept["drop_output_schema"]


@pytest.mark.pure
def test_the_book_merges_a_key_keeps_its_first_result_and_is_bounded() -> None:
    book = LessonBook()
    first = lesson()
    assert book.add(first) and not book.add(lesson())
    assert book.add(lesson(places=("/b/*",)))
    merged = book.lessons()[0]
    assert [p.text for p in merged.learned.relax] == ["/a", "/b/*"] and merged.at == first.at
    assert book.get("t", "1" * 32) is None and book.get("t", "") is None
    for i in range(MAX_LESSONS + 5):
        book.add(lesson(f"tool-{i}"))
    assert len(book) == MAX_LESSONS and book.refused == 6
    assert not LessonBook(enabled=False).add(lesson())


@pytest.mark.pure
@pytest.mark.parametrize(
    "stored",
    [
        None,
        "x",
        {"tool": "t", "definition": "short", "relax": ["/a"], "first": {"id": "1", "at": 1}},
        {"tool": "t", "definition": "0" * 32, "relax": ["no-slash"], "first": {"id": "1", "at": 1}},
        {"tool": "t", "definition": "0" * 32, "relax": [], "first": {"id": "1", "at": 1}},  # teaches nothing
        {"tool": "t", "definition": "0" * 32, "relax": ["/a"] * 50, "first": {"id": "1", "at": 1}},
        {"tool": "t", "definition": "0" * 32, "drop_output_schema": "yes", "first": {"id": "1", "at": 1}},
    ],
)
def test_a_stored_lesson_of_another_shape_is_never_trusted(stored: Any) -> None:
    assert Lesson.from_json(stored) is None


@pytest.mark.pure
def test_a_lesson_round_trips_and_a_definition_digest_ignores_key_order() -> None:
    kept = lesson("na\u00efve \u2713", places=("/x~1y", "/*/z"))
    assert Lesson.from_json(orjson.loads(orjson.dumps(kept.as_json()))) == kept
    a = {"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "x-n": 12.50}}
    b = dict(reversed(list(a.items())))
    assert definition_digest(a) == definition_digest(b) != definition_digest({**a, "description": "d"})


@pytest.mark.pure
def test_a_state_file_that_is_not_lessons_is_ignored_and_two_workers_keep_each_others(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    one, two = LessonBook(), LessonBook()
    path = state / f"lessons-{upstream_digest('u')}.json"
    path.write_bytes(b'{"lessons": 3}')
    assert LessonStore(one, "u", str(state), None).load() == 0
    one.add(lesson("a"))
    two.add(lesson("b"))
    LessonStore(one, "u", str(state), None)._write([x.as_json() for x in one.lessons()], [])
    LessonStore(two, "u", str(state), None)._write([x.as_json() for x in two.lessons()], [])
    fresh = LessonBook()
    assert LessonStore(fresh, "u", str(state), None).load() == 2 and not fresh.dirty
    assert {x.tool for x in fresh.lessons()} == {"a", "b"}


@pytest.mark.pure
def test_a_lesson_waits_for_a_second_witness_place_by_place_and_no_witness_counts_for_nothing() -> None:
    book = LessonBook()
    assert not book.witnessed(lesson(places=("/a", "/b")), "w1") and len(book) == 0
    assert not book.witnessed(lesson(places=("/a", "/b")), "w1")  # the same witness again
    assert not book.witnessed(lesson(places=("/a",)), None) and len(book) == 0  # no witness
    assert book.witnessed(lesson(places=("/a", "/c")), "w2")  # /a confirmed; /c waits
    (kept,) = book.lessons()
    assert [p.text for p in kept.learned.relax] == ["/a"] and kept.pointers == ("/a",)
    assert {(e.item, e.witness) for e in book.evidence()} == {("/b", "w1"), ("/c", "w2")}
    assert book.witnessed(lesson(places=("/c",)), "w3") and book.get("t", "0" * 32) == Learned(
        relax=(PointerPattern.parse("/a"), PointerPattern.parse("/c"))
    )
    assert not book.witnessed(lesson(places=("/a",)), "w4")  # known: no evidence kept for it
    assert {e.item for e in book.evidence()} == {"/b"}
    drop = taught_now("t", "0" * 32, Learned(drop_output_schema=True), 1, ("/structuredContent",))
    assert not book.witnessed(drop, "w1") and book.witnessed(drop, "w2")
    assert book.get("t", "0" * 32).drop_output_schema  # type: ignore[union-attr]


@pytest.mark.pure
def test_the_pending_evidence_is_bounded_the_oldest_going_first() -> None:
    book = LessonBook()
    for i in range(MAX_PENDING + 10):
        book.witnessed(lesson(f"tool-{i}"), "w1")
    assert len(book.evidence()) == MAX_PENDING and book.evidence()[0].tool == "tool-10"
    assert not book.witnessed(lesson("tool-0"), "w2")  # its first witness was forgotten: w2 is first now
    long = "n" * 1000
    for i in range(MAX_PENDING):
        book.witnessed(lesson(f"{long}-{i}"), "w1")
    assert (
        sum(e.size for e in book.evidence()) <= MAX_PENDING_BYTES < sum(len(f"{long}-{i}") for i in range(MAX_PENDING))
    )


@pytest.mark.pure
@pytest.mark.parametrize(
    "stored",
    [
        None,
        {"tool": "t", "definition": "0" * 32, "item": "a", "witness": "w", "id": "1", "at": 1},  # not a place
        {"tool": "t", "definition": "0" * 32, "item": "", "witness": "w", "id": "1", "at": 1},  # the root
        {"tool": "t", "definition": "0" * 32, "item": "/a", "witness": "", "id": "1", "at": 1},
        {"tool": "t", "definition": "short", "item": "/a", "witness": "w", "id": "1", "at": 1},
        {"tool": "t", "definition": "0" * 32, "item": "/a", "witness": "w" * (MAX_WITNESS + 1), "id": "1", "at": 1},
    ],
)
def test_stored_evidence_of_another_shape_is_never_trusted(stored: Any) -> None:
    assert Evidence.from_json(stored) is None


@pytest.mark.pure
def test_two_workers_evidence_meets_in_the_state_file_and_restarts_keep_it(tmp_path: Path) -> None:
    """Worker one saw a fault from w1, worker two from w2 (each its own book, one directory): the
    second's save reads the first's evidence and confirms the lesson; a restart reads it, and
    evidence still pending, from the file."""
    state = tmp_path / "state"
    state.mkdir()
    one, two = LessonBook(), LessonBook()
    one.witnessed(lesson("a"), "w1")
    one.witnessed(lesson("b"), "w1")
    anyio.run(LessonStore(one, "u", str(state), None).save)
    two.witnessed(lesson("a"), "w2")
    anyio.run(LessonStore(two, "u", str(state), None).save)
    assert [x.tool for x in two.lessons()] == ["a"] and not two.dirty
    fresh = LessonBook()
    assert LessonStore(fresh, "u", str(state), None).load() == 1
    assert [x.tool for x in fresh.lessons()] == ["a"] and [(e.tool, e.witness) for e in fresh.evidence()] == [
        ("b", "w1")
    ]
    assert fresh.witnessed(lesson("b"), "w3") and not fresh.witnessed(lesson("c"), "w1")


@pytest.mark.pure
def test_a_witness_is_the_authorization_else_the_session_and_stable_with_the_state_directory(tmp_path: Path) -> None:
    store = LessonStore(LessonBook(), "u", str(tmp_path), None)
    same = store.witness("Bearer a", None, "s1")
    assert same == store.witness("Bearer a", None, "s2") != store.witness("Bearer b", None, "s1")
    assert store.witness(None, None, "s1") != store.witness(None, None, "s2")
    assert store.witness(None, "c=1", None) is not None and store.witness(None, None, None) is None
    restarted = LessonStore(LessonBook(), "u", str(tmp_path), None)
    assert restarted.witness("Bearer a", None, "s9") == same  # the key file: the same witness after a restart
    alone = LessonStore(LessonBook(), "u", None, None)
    assert alone.witness("Bearer a", None, None) != same


@pytest.mark.pure
def test_witnesses_sharing_a_credential_are_one_and_too_many_credentials_are_none(tmp_path: Path) -> None:
    """A witness is each credential's digest (the authorization, each cookie); two sharing one
    are one tenant, whatever else they send; a request with more credentials than a witness
    holds is none (made-up cookies past the bound would hide the one the upstream reads)."""
    store = LessonStore(LessonBook(), "u", str(tmp_path), None)
    a = store.witness("Bearer a", "sid=1; junk=1", None)
    assert a is not None and len(a.split(".")) == 3 and len(a) <= MAX_WITNESS
    for other in (
        store.witness("Bearer a", "junk=2", None),
        store.witness("bearer   a", None, None),
        store.witness(None, "junk=3;  sid=1", None),
        store.witness("Bearer made-up", "sid=1", "s2"),
    ):
        assert other is not None and same_witness(a, other), other
    assert not same_witness(a, store.witness("Bearer b", "sid=2", None) or "")
    assert store.witness("Bearer a", "sid=1; junk=1", None) == store.witness("Bearer a", "junk=1 ; sid=1", None)
    many = "; ".join(f"junk{n}=1" for n in range(MAX_WITNESS_PARTS))
    assert store.witness(None, many, None) is not None and store.witness("Bearer a", many, None) is None
    book = LessonBook()
    lesson = taught_now("t", "0" * 32, Learned(relax=(PointerPattern.parse("/a"),)), 1, ("/a",))
    assert not book.witnessed(lesson, a) and not book.witnessed(lesson, store.witness(None, "sid=1", None))
    assert book.get("t", "0" * 32) is None  # the same tenant twice: still pending
    assert book.witnessed(lesson, store.witness("Bearer b", None, None)) and book.get("t", "0" * 32) is not None
