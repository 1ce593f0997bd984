"""Rule ``tool_names`` can never run the wrong tool (issue 22, major 1).

The name map is derived from the whole current listing (every page) and rebuilt with it; it is
injective, an invented name is never a name the listing holds, and a call for a name the current
map does not hold goes upstream as sent. A property test drives the transformer and the request
rewriting over random listings, pages and list changes; the wire tests replay each reported way
it used to go wrong with the three strict clients, and a replica that never saw the list.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolCall, ToolSpec
from mcp_normalizer.engine.audit import REWRITE_LOGGER, AuditLog
from mcp_normalizer.engine.catalog import CatalogPool
from mcp_normalizer.engine.exchange import Exchange
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.request_rewrite import rename_calls
from mcp_normalizer.engine.rules.tool_names import INVENTED, ORIGINAL_NAME_KEY, SPEC, VALID, Renamer, renames, rewrite
from mcp_normalizer.engine.scopes import Limits, ScopeState, ScopeStore
from mcp_normalizer.engine.transform import ResponseTransformer
from mcp_normalizer.wire.jsonrpc import id_key, inspect_request

from .support import JSON_HEADERS, PROPERTY, feed_all, proxy_for, serve, three_clients

ERA = "2025-11-25"
NORMALIZER = Normalizer(NormalizerConfig.shipped())
LONG = "t\u00f6ol-" + "x" * 140
#: Names field servers list (spaces, slashes, unicode, too long) and the valid names they collide with.
ODD = ["a b", "a/b", "get data", "\u00e9t\u00e9 m\u00e9t\u00e9o", LONG, "a:b", ""]
PLAIN = ["a_b", "get_data", "ok", "dotted.ok", "x-y"]
#: ... and names equal to what the rule invents for the odd ones: a hostile or unlucky listing.
CLASHING = [renames([name])[name] for name in ODD[:3]]
POOL = ODD + PLAIN + CLASHING


def page_body(names: list[str], next_cursor: str | None) -> bytes:
    result: dict[str, Any] = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": result})


def exchange(state: ScopeState, store: ScopeStore, request: dict[str, Any]) -> Exchange:
    info = inspect_request(orjson.dumps(request), [])
    assert info is not None
    return Exchange(info.pending, ERA, "s", state, store.public, sole=info.sole, own_stream=True)


def list_all(state: ScopeState, store: ScopeStore, pages: list[list[str]]) -> list[dict[str, Any]]:
    """The tools a client sees listing every page through the transformer."""
    seen: list[dict[str, Any]] = []
    for index, names in enumerate(pages):
        params = {"cursor": str(index)} if index else {}
        ex = exchange(state, store, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params})
        t = ResponseTransformer(ex, NORMALIZER, AuditLog("test"), slice_seconds=0)
        t.start(200, JSON_HEADERS)
        nxt = str(index + 1) if index + 1 < len(pages) else None
        seen += orjson.loads(feed_all(t, page_body(names, nxt)))["result"]["tools"]
    return seen


def called_upstream(state: ScopeState, store: ScopeStore, name: str) -> str:
    """The name a ``tools/call`` for ``name`` goes upstream under."""
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": {"n": 12.5}}}
    ex = exchange(state, store, request)
    body = orjson.dumps(request)
    done = rename_calls(body, ex.pending, ex.names() or {})
    sent: dict[str, Any] = orjson.loads(done[0]) if done is not None else request
    assert sent["params"]["arguments"] == {"n": 12.5}
    return str(sent["params"]["name"])


def original(tool: Mapping[str, Any]) -> str:
    return str(tool.get("_meta", {}).get(ORIGINAL_NAME_KEY, tool["name"]))


LISTINGS = st.lists(st.sampled_from(POOL), min_size=1, max_size=8, unique=True)


@pytest.mark.pure
@PROPERTY
@given(
    versions=st.lists(st.tuples(LISTINGS, st.integers(min_value=1, max_value=4), st.booleans()), min_size=1, max_size=4)
)
def test_the_upstream_always_runs_the_tool_the_client_named(versions: list[tuple[list[str], int, bool]]) -> None:
    store = ScopeStore()
    state = store.state("s")
    ever: set[str] = set(POOL)
    for listing, size, announced in versions:
        if announced:
            state.forget_tools()  # notifications/tools/list_changed came first (else: just a new first page)
        pages = [listing[i : i + size] for i in range(0, len(listing), size)]
        seen = list_all(state, store, pages)
        advertised = [tool["name"] for tool in seen]
        assert [original(tool) for tool in seen] == listing  # every tool, in order, its name kept in _meta
        assert len(set(advertised)) == len(advertised)  # injective: one name, one tool
        for index, tool in enumerate(seen):
            name = tool["name"]
            if name != original(tool):
                assert VALID.fullmatch(name) and INVENTED.fullmatch(name)
                # never a name the listing holds so far (a later page may list it: that tool is renamed)
                assert name not in listing[: (index // size + 1) * size]
            else:
                assert SPEC.fullmatch(name) or name == ""  # (the rule is on for every tool here)
            assert called_upstream(state, store, name) == original(tool)
        ever |= set(advertised)
        for name in ever - set(advertised):  # a name of another listing, or none: as sent
            assert called_upstream(state, store, name) == name


@pytest.mark.pure
def test_invented_names_collide_only_as_checked_and_are_the_same_everywhere() -> None:
    first = Renamer(["a b"])
    taken = first.name_for("a b", True)
    assert taken is not None and INVENTED.fullmatch(taken)
    # A later page lists that very name: it is renamed in turn, never advertised twice.
    later = Renamer([taken], listed=["a b"], names={taken: "a b"})
    again = later.name_for(taken, True)
    assert again is not None and again != taken and INVENTED.fullmatch(again)
    # The same listing gets the same names in another scope or process; a salt is tried past a clash.
    assert Renamer(["a b"]).name_for("a b", True) == taken
    clash = Renamer(["a b", taken])
    assert clash.name_for("a b", True) not in (taken, None)  # the page itself lists the first choice


@pytest.mark.pure
def test_advertised_names_are_stable_across_releases_and_every_salt_is_tried() -> None:
    """Hosts save tool names (permissions, allow lists): an invented name is a contract, fixed here.
    A name with a lone surrogate (JSON ``"\\ud800"``) is hashed too, never an error."""
    assert renames(["get data", "ok_name", "\ud800x", "ok_name"]) == {
        "get data": "get_data_abd45b55fd59d4b1",
        "\ud800x": "_x_4e3e9af3f16484a8",
    }  # a valid name listed twice keeps its own both times
    first, second = "a_b_bb37dea5c027f928", "a_b_3b07d0454637d9aa"  # salts 0 and 1
    assert renames(["a b"]) == {"a b": first}
    assert renames(["a b", first]) == {"a b": second}
    third = renames(["a b", first, second])["a b"]
    assert third not in (first, second) and INVENTED.fullmatch(third)


@pytest.mark.pure
def test_in_a_batch_only_the_renamed_call_changes_byte_for_byte() -> None:
    """2025-03-26 batching: a notification with params (no id), a call of a valid name, a ping and
    a call with no params sit beside the renamed call and go as they came, in order."""
    advertised = "get_data_abd45b55fd59d4b1"
    others = [
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"name":"get_data_abd45b55fd59d4b1"}}',
        b'{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"ok","arguments":{"n":1E+2}}}',
        b'{"jsonrpc":"2.0","id":3,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call"}',
    ]
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"%s","arguments":{"v":12.50}}}'
    body = b"[" + b",".join([others[0], call % advertised.encode(), *others[1:]]) + b"]"
    info = inspect_request(body, [])
    assert info is not None
    done = rename_calls(body, info.pending, {advertised: "get data"})
    assert done is not None
    text, pending, renamed = done
    expected = b",".join([others[0], call % b"get data", *others[1:]])
    assert text == b"[" + expected + b"]"
    one, b = ("n", 1), ("s", "b")
    assert renamed == [one] == [id_key(1)] and id_key("b") == b
    assert pending[one].tool == "get data" and pending[b].tool == "ok"
    assert rename_calls(body, info.pending, {"other_1": "other"}) is None  # no call of a renamed tool


@pytest.mark.pure
def test_a_tool_listed_again_on_a_later_page_keeps_the_name_it_was_given() -> None:
    """A server that repeats a tool across pages: the renamed one keeps its invented name, the
    valid one its own, never the other way round."""
    invented = renames(["a b"])["a b"]
    later = Renamer(["a b", "ok"], listed=["a b", "ok"], names={invented: "a b"})
    assert later.name_for("a b", True) == invented
    assert later.name_for("ok", True) is None
    assert later.renamed == {"a b": invented}


@pytest.mark.pure
def test_the_rename_record_says_why_without_the_name() -> None:
    invalid = rewrite("get data \u00e9", 3)
    assert (invalid.rule, invalid.action, invalid.pointers) == (
        "tool_names",
        "advertised the tool under a valid name",
        ("/tools/3/name",),
    )
    assert invalid.reason == "a name of 10 characters outside the spec's [A-Za-z0-9_.-]{1,128}"
    taken = rewrite("a_b", 0, taken=True)
    assert "an earlier page's" in taken.reason and "a_b" not in taken.reason


@pytest.mark.pure
def test_name_maps_are_shared_by_content_and_counted_in_the_catalog_bound() -> None:
    """Major 4 (60 scopes listing the same 20,000 renamed tools grew 3.1 MiB each): scopes listing
    the same renamed tools hold one map, and its bytes count in the catalog bound."""
    store = ScopeStore(Limits(max_catalog_bytes=256 * 1024 * 1024))
    names = [f"tool {i} \u00e9" for i in range(2_000)]
    states = [store.state(f"s{i}") for i in range(20)]
    for state in states:
        list_all(state, store, [names])
    maps = {id(state.catalog.tools.names) for state in states}
    assert len(maps) == 1 and len(store.pool) == 1
    assert len(states[0].catalog.tools.names) == 2_000
    assert store.pool.bytes > 2_000 * (2 * len("tool 0 \u00e9") + 240)  # the names are in the count
    tight = ScopeStore(Limits(max_catalog_bytes=store.pool.bytes // 2))
    for index in range(3):  # over the bound: least recently used scopes go
        list_all(tight.state(f"s{index}"), tight, [[*names[:1_000], f"other {index}"]])
    assert len(tight) < 3 and isinstance(tight.pool, CatalogPool)


# -- on the wire -------------------------------------------------------------------------------


def _named(name: str) -> ToolSpec:
    async def handler(call: ToolCall) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"ran {call.name}"}]}

    return ToolSpec({"name": name, "inputSchema": {"type": "object"}}, handler)


def _ran(record: dict[str, Any]) -> list[str]:
    """What each step got: a call's text, ``listed`` for a listing, ``failed``."""
    return [
        ("listed" if "tools" in step["value"] else step["value"]["content"][0]["text"]) if step["ok"] else "failed"
        for step in record["steps"]
    ]


@pytest.mark.wire
@pytest.mark.anyio
async def test_an_invented_name_a_later_page_lists_runs_each_tool_by_the_name_the_client_saw() -> None:
    """Page 1 lists ``a b`` (advertised as its invented name); page 2 lists a tool literally named
    that. Each is advertised under its own name, and each call runs the tool the client named."""
    taken = renames(["a b"])["a b"]
    server = ScriptedServer([_named("a b"), _named(taken)], response_mode="sse", page_size=1)
    second = Renamer([taken], listed=["a b"], names={taken: "a b"}).name_for(taken, True)
    assert second is not None
    steps: list[dict[str, Any]] = [
        {"op": "listTools"},
        {"op": "listTools", "cursor": "1"},
        {"op": "callTool", "name": taken, "arguments": {}},
        {"op": "callTool", "name": second, "arguments": {}},
    ]
    with serve(server) as up, proxy_for(up + "/mcp") as px:
        through = await three_clients(px + "/mcp", ["none"], steps, request_timeout=30)
    for client, records in through.items():
        record = records[0]
        pages = [[t["name"] for t in step["value"]["tools"]] for step in record["steps"][:2]]
        # (client 2.x follows the cursor itself: its first listing holds both pages)
        assert pages in ([[taken], [second]], [[taken, second], [second]]), client
        assert _ran(record)[2:] == ["ran a b", f"ran {taken}"], client


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_changed_list_rebuilds_the_map_and_a_valid_name_is_never_taken_over() -> None:
    """v1 lists ``a b``; v2 lists ``a b`` and a distinct ``a_b``: a call for ``a_b`` runs ``a_b``."""
    version = {"now": 1}

    async def flip(call: ToolCall) -> dict[str, Any]:
        version["now"] = 2
        return {"content": [{"type": "text", "text": "flipped"}]}

    flipper = ToolSpec({"name": "flip", "inputSchema": {"type": "object"}}, flip)
    server = ScriptedServer(
        lambda headers: [_named("a b"), flipper] if version["now"] == 1 else [_named("a b"), _named("a_b"), flipper],
        response_mode="json",
    )
    invented_name = renames(["a b"])["a b"]
    steps: list[dict[str, Any]] = [
        {"op": "listTools"},
        {"op": "callTool", "name": invented_name, "arguments": {}},
        {"op": "callTool", "name": "flip", "arguments": {}},
        {"op": "listTools"},
        {"op": "callTool", "name": "a_b", "arguments": {}},
        {"op": "callTool", "name": invented_name, "arguments": {}},
    ]
    with serve(server) as up, proxy_for(up + "/mcp") as px:
        for client in ("ts-sdk-1", "ts-client-2", "python"):
            version["now"] = 1  # each client alone: the list changes in its session
            if client == "python":
                record = await run_python(px + "/mcp", steps)
            else:
                session = {"url": px + "/mcp", "steps": steps}
                record = (await run_node("v1" if client == "ts-sdk-1" else "v2", [session], request_timeout=30))[0]
            listed = [
                [t["name"] for t in step["value"]["tools"]] for step in record["steps"] if "tools" in step["value"]
            ]
            assert listed == [[invented_name, "flip"], [invented_name, "a_b", "flip"]], client
            assert _ran(record)[1:3] == ["ran a b", "flipped"] and _ran(record)[4:] == ["ran a_b", "ran a b"], client


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_scope_with_no_map_lists_the_tools_before_it_forwards_an_invented_name() -> None:
    """Another replica (or this one after a restart, or an evicted scope) has no map: the call for
    an invented name waits for the proxy's own ``tools/list``, then goes upstream by the original
    name. A name that only looks invented, and is no tool of the list, goes as sent."""
    server = ScriptedServer([_named("get data"), _named("plain")], response_mode="sse")
    invented_name = renames(["get data"])["get data"]
    with serve(server) as up:
        with proxy_for(up + "/mcp") as first:
            listing = await three_clients(first + "/mcp", ["none"], [{"op": "listTools"}], request_timeout=30)
        assert [t["name"] for t in listing["python"][0]["steps"][0]["value"]["tools"]] == [invented_name, "plain"]
        # The same sessions' calls, on a proxy that never saw their tools/list:
        steps: list[dict[str, Any]] = [
            {"op": "callTool", "name": invented_name, "arguments": {}},
            {"op": "callTool", "name": "look_alike_0123456789abcdef", "arguments": {}},
        ]
        with proxy_for(up + "/mcp") as second:
            through = await three_clients(second + "/mcp", ["none"], steps, request_timeout=30)
    for client, records in through.items():
        ran = _ran(records[0])
        assert ran[0] == "ran get data", client
        assert ran[1] == "failed" or "Unknown tool" in ran[1], client  # the upstream's own answer, as sent
    called = [m["params"]["name"] for m, _ in server.requests if m.get("method") == "tools/call"]
    assert called.count("get data") == 3 and called.count("look_alike_0123456789abcdef") == 3
    assert invented_name not in called


@pytest.mark.pure
@pytest.mark.parametrize("where", [0, 4095, 4096, 9000])
def test_a_page_past_one_chunk_renames_its_one_odd_name_wherever_it_stands(where: int) -> None:
    """The page's names are checked a chunk at a time: the one a client refuses is renamed on
    the first chunk, on its edges and on a later one alike."""
    names = [f"tool_{i}" for i in range(9001)]
    names[where] = "get data"
    store = ScopeStore()
    seen = list_all(store.state("s"), store, [names])
    assert [tool["name"] for tool in seen if tool["name"] != original(tool)] == [renames(["get data"])["get data"]]
    assert [original(tool) for tool in seen] == names


@pytest.mark.pure
def test_renaming_a_huge_list_keeps_nothing_for_the_collector_between_slices() -> None:
    """50,000 renamed tools held every session 0.6 s: each renamed tool was decoded whole and its
    tree stayed alive across the pauses, for the collector to walk at each. Now only its name and
    ``_meta`` are read: across a pause the job holds almost no tracked object per tool (a count,
    not a time)."""
    count = 20_000
    tools = [
        {"name": f"tool {i} \u00e9", "inputSchema": {"type": "object", "properties": {"a": {}}}} for i in range(count)
    ]
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}})
    del tools
    store = ScopeStore()
    t = ResponseTransformer(
        exchange(store.state("s"), store, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        NORMALIZER,
        AuditLog("test"),
    )
    t.start(200, JSON_HEADERS)
    # The count is of the job's objects: a log capture that an earlier test left at INFO would keep
    # one record per renamed tool alive and be counted too (CI failed so), so no record is made here.
    rewrites = logging.getLogger(REWRITE_LOGGER)
    previous = rewrites.level
    rewrites.setLevel(logging.WARNING)
    try:
        gc.collect()
        base, peak, pauses = len(gc.get_objects()), 0, 0
        out = t.feed(body) + t.finish()
        while t.busy:
            pauses += 1
            peak = max(peak, len(gc.get_objects()) - base)
            out += t.resume()
    finally:
        rewrites.setLevel(previous)
    assert pauses > 1 and len(orjson.loads(out)["result"]["tools"]) == count
    assert peak < count // 4  # (it was five objects a tool)
