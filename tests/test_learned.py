"""Rule ``learn_schema`` at its edges (the wire tests with the three clients are in ``test_corpus.py``):
what it refuses to learn, where the ``list_changed`` notice goes, and whose state it changes."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.engine.audit import AuditLog
from mcp_normalizer.engine.exchange import Exchange
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules.clients import UNKNOWN, profile_for
from mcp_normalizer.engine.rules.learned import LIST_CHANGED, MAX_PLACES
from mcp_normalizer.engine.scopes import ScopeStore
from mcp_normalizer.engine.transform import ResponseTransformer
from mcp_normalizer.wire.jsonrpc import PendingRequest

from .support import capture_rewrites, feed_all

pytestmark = pytest.mark.pure

LISTED_KEY = "dev.mcp-normalizer/original-output-schema"


def listing(schema: dict[str, Any]) -> bytes:
    tool = {"name": "t", "inputSchema": {"type": "object"}, "outputSchema": schema}
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool], "ttlMs": 60_000}})


def answer(structured: Any, rid: int = 2) -> bytes:
    result = {"content": [{"type": "text", "text": "x"}], "structuredContent": structured}
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result})


def through(
    store: ScopeStore,
    body: bytes,
    method: str = "tools/call",
    *,
    sse: bool = True,
    era: str = "2025-11-25",
    private: bool = True,
    scope: str = "s",
    bom: bool = False,
) -> tuple[bytes, list[dict[str, Any]]]:
    """What a client of ``scope`` gets for ``body`` (one JSON-RPC message) and the log lines."""
    request = PendingRequest(method, tool="t" if method == "tools/call" else None)
    rid = orjson.loads(body)["id"]
    exchange = Exchange({("n", rid): request}, era, scope, store.state(scope), store.public, private=private)
    t = ResponseTransformer(exchange, Normalizer(NormalizerConfig()), AuditLog("test"))
    kind = b"text/event-stream" if sse else b"application/json"
    t.start(200, [(b"content-type", kind)])
    framed = (b"\xef\xbb\xbf" if bom else b"") + b"event: message\r\ndata: " + body + b"\r\n\r\n" if sse else body
    with capture_rewrites() as log:
        out = feed_all(t, framed)
    return out, log.lines


def data_lines(out: bytes) -> list[Any]:
    return [orjson.loads(line[5:]) for line in out.replace(b"\r", b"").split(b"\n") if line.startswith(b"data:")]


CONST = {"type": "object", "properties": {"kind": {"const": "a"}}}


def test_the_notice_goes_once_before_the_result_and_after_a_byte_order_mark() -> None:
    store = ScopeStore()
    through(store, listing(CONST), "tools/list")
    out, log = through(store, answer({"kind": "b"}), bom=True)
    assert out.startswith(b"\xef\xbb\xbfevent: message\ndata: " + LIST_CHANGED + b"\n\n")  # the BOM stays first
    assert [m.get("method") for m in data_lines(out[3:])] == ["notifications/tools/list_changed", None]
    again, log = through(store, answer({"kind": "b"}, 3))
    assert LIST_CHANGED not in again
    assert [(line["event"], line["action"]) for line in log if line["rule"] == "learn_schema"] == [
        ("unrepaired", "already learned relax /kind")  # not a second rewrite: nothing new, nothing sent
    ]


@pytest.mark.parametrize(("sse", "era"), [(False, "2025-11-25"), (True, "2026-07-28")])
def test_no_notice_on_a_json_body_nor_on_a_2026_call_stream_but_the_next_list_shows_it(sse: bool, era: str) -> None:
    store = ScopeStore()
    through(store, listing(CONST), "tools/list", era=era)
    out, log = through(store, answer({"kind": "b"}), sse=sse, era=era)
    assert LIST_CHANGED not in out
    assert [line["action"] for line in log if line["rule"] == "learn_schema"] == ["learned relax /kind"]
    relisted, _ = through(store, listing(CONST), "tools/list", era=era)
    tool = data_lines(relisted)[0]["result"]["tools"][0]
    assert tool["outputSchema"]["properties"]["kind"] == {} and tool["_meta"][LISTED_KEY] == CONST


def test_a_scope_every_client_shares_learns_nothing_and_one_scope_never_teaches_another() -> None:
    store = ScopeStore()
    for scope in ("anonymous", "a", "b"):
        through(store, listing(CONST), "tools/list", scope=scope, private=scope != "anonymous")
    out, log = through(store, answer({"kind": "b"}), scope="anonymous", private=False)
    assert LIST_CHANGED not in out and not store.state("anonymous").learned
    assert [line["reason"] for line in log if line["rule"] == "learn_schema"] == [
        "not learned: the scope has no session and no credential, so every client shares it"
    ]
    through(store, answer({"kind": "b"}), scope="a")
    assert store.state("a").learned and not store.state("b").learned
    relisted, _ = through(store, listing(CONST), "tools/list", scope="b")
    assert data_lines(relisted)[0]["result"]["tools"][0]["outputSchema"] == CONST


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "object", "properties": {"*": {"const": 1}, "n": {"type": "integer"}}}, {"*": 2, "n": 1}),
        ({"type": "object", "properties": {"const": False}}, {"const": 1}),  # a member named const
        (
            {"type": "object", "oneOf": [{"properties": {"a": {"enum": ["x"]}}}, {"required": ["b"]}]},
            {"a": "z"},
        ),  # relaxing /a in every branch would let {"a": "x", "b": 1} match both
        ({"type": "object", "patternProperties": {"^k": {"const": 1}}}, {"k1": 2}),  # no place to widen
        ({"type": "object", "properties": {"k" * 300: {"const": 1}}}, {"k" * 300: 2}),  # too long a place
        (
            {"type": "object", "properties": {f"p{i}": {"const": 1} for i in range(MAX_PLACES + 1)}},
            {f"p{i}": 2 for i in range(MAX_PLACES + 1)},
        ),  # more places than are learned: the result would still fail
        ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": "one"}),  # a type: a contract
        ({"type": "object", "properties": {"n": {"enum": [1]}}, "required": ["n"]}, {"n": None}),  # a null
    ],
)
def test_what_is_not_learned(schema: dict[str, Any], value: Any) -> None:
    store = ScopeStore()
    through(store, listing(schema), "tools/list")
    out, log = through(store, answer(value))
    assert LIST_CHANGED not in out and not store.state("s").learned
    assert not [line for line in log if line["rule"] == "learn_schema"]
    assert data_lines(out)[0]["result"]["structuredContent"] == value  # passed as it came


def test_what_one_scope_may_learn_is_bounded() -> None:
    store = ScopeStore()
    state = store.state("s")
    schema = {"type": "object", "properties": {"k" * 250: {"const": 1}}}
    learned = 0
    for index in range(100):
        name = f"tool-{index}"
        tool = {"name": name, "inputSchema": {"type": "object"}, "outputSchema": schema}
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}})
        through(store, body, "tools/list")
        call = PendingRequest("tools/call", tool=name)
        exchange = Exchange({("n", 2): call}, "2025-11-25", "s", state, store.public)
        t = ResponseTransformer(exchange, Normalizer(NormalizerConfig()), AuditLog("test"))
        t.start(200, [(b"content-type", b"application/json")])
        with capture_rewrites() as log:
            feed_all(t, answer({"k" * 250: 2}))
        learned = len(state.learned)
    assert 0 < learned < 100 and state.learned.size <= 8192
    # the last was not learned: the log says why (the scope is private: not "no session")
    assert [line["reason"] for line in log.lines if line["rule"] == "learn_schema"] == [
        "not learned: what this scope learned is at its bound"
    ]


def test_a_public_page_made_for_one_client_or_scope_goes_out_private() -> None:
    dangling = {"type": "object", "properties": {"n": {"$ref": "#/$defs/gone"}}}  # repaired for every client
    tool = {"name": "t", "inputSchema": {"type": "object"}, "outputSchema": dangling}
    page = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool], "cacheScope": "public", "ttlMs": 1}})
    seen = {}
    for name, client in (("unknown", UNKNOWN), ("python", profile_for({"name": "mcp"}))):
        store = ScopeStore()
        request = PendingRequest("tools/list")
        exchange = Exchange({("n", 1): request}, "2026-07-28", "s", store.state("s"), store.public, client=client)
        t = ResponseTransformer(exchange, Normalizer(NormalizerConfig()), AuditLog("test"))
        t.start(200, [(b"content-type", b"application/json")])
        seen[name] = orjson.loads(feed_all(t, page))["result"]["cacheScope"]
    assert seen == {"unknown": "public", "python": "private"}  # what every unknown client gets may be shared
