"""Properties that hold for any input (hypothesis): the rules never crash, never lose a value and
never claim a repair the client would reject; the transformer never drops, duplicates or reorders a
message and never emits invalid JSON, however the body is chunked; request inspection never raises."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.engine.audit import AuditLog
from mcp_normalizer.engine.exchange import Exchange
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.scopes import ScopeStore
from mcp_normalizer.engine.transform import ResponseTransformer
from mcp_normalizer.errors import DecodeError
from mcp_normalizer.wire.jsoncodec import dumps, loads
from mcp_normalizer.wire.jsonrpc import IdKey, PendingRequest, inspect_request
from mcp_normalizer.wire.sse import SSESplitter, parse_event

from .support import NAMES, PROPERTY, SCALARS, STRINGS, VALUES, conforms, contains_value, leaves, object_schemas, pump

pytestmark = pytest.mark.pure

ERAS = st.sampled_from([None, "2025-03-26", "2025-11-25", "2026-07-28"])

# -- values and schemas ------------------------------------------------------------------------

LEAF_SCHEMAS = st.one_of(
    st.sampled_from(
        [
            {"type": "string"},
            {"type": "integer"},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "null"},
            {"type": "array"},
            {"type": "object"},
            {"type": "string", "nullable": True},
            {"type": ["string", "null"]},
            {"enum": ["a", "b", 1]},
            {"const": "a"},
            {},
        ]
    ),
)


def _object_schema(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return object_schemas(inner, NAMES)


SCHEMAS = st.recursive(
    LEAF_SCHEMAS,
    lambda inner: st.one_of(
        _object_schema(inner),
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(lambda branches: {"anyOf": branches}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=8,
)
OUTPUT_SCHEMAS = st.one_of(st.none(), _object_schema(SCHEMAS), SCHEMAS)


def near(draw: st.DrawFn, schema: Any) -> Any:
    """A value for ``schema`` as a faulty server writes it: mostly right, with the field's faults
    (``null`` for a value, numbers as strings and back, extra members, a scalar for a list)."""
    fault = draw(st.integers(0, 7))
    if fault == 0:
        return None
    if fault == 1:
        return draw(VALUES)
    if not isinstance(schema, dict):
        return draw(VALUES)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if "anyOf" in schema:
        return near(draw, draw(st.sampled_from(schema["anyOf"])))
    if "enum" in schema or "const" in schema:
        choice = draw(st.sampled_from(schema.get("enum", [schema.get("const")])))
        return str(choice) if fault == 2 else choice
    if kind == "object":
        props = schema.get("properties", {})
        out = {name: near(draw, sub) for name, sub in props.items() if draw(st.integers(0, 4))}
        if fault == 2:
            out[draw(NAMES)] = draw(SCALARS)
        return out
    if kind == "array":
        items = [near(draw, schema.get("items", {})) for _ in range(draw(st.integers(0, 3)))]
        return items[0] if fault == 2 and items else items
    if kind == "integer":
        value = draw(st.integers(-(2**63), 2**63 - 1))
        return str(value) if fault == 2 else value
    if kind == "number":
        number = draw(st.floats(allow_nan=False, allow_infinity=False))
        return str(number) if fault == 2 else number
    if kind == "boolean":
        value = draw(st.booleans())
        return str(value).lower() if fault == 2 else value
    if kind == "string":
        return draw(st.integers(0, 99)) if fault == 2 else draw(STRINGS)
    return draw(VALUES)


@st.composite
def results(draw: st.DrawFn, schema: Any = None) -> dict[str, Any]:
    """A ``CallToolResult`` as servers in the field send them: mostly right, often not."""
    result: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        texts = st.builds(lambda t: {"type": "text", "text": t}, STRINGS)
        result["content"] = draw(st.lists(texts, max_size=2))
    if draw(st.integers(0, 3)):
        result["structuredContent"] = near(draw, schema) if schema is not None else draw(VALUES)
    if draw(st.integers(0, 3)) == 0:
        result["isError"] = draw(st.sampled_from([True, False, None]))
    if draw(st.integers(0, 3)) == 0:
        result["_meta"] = draw(st.one_of(st.none(), st.dictionaries(NAMES, SCALARS, max_size=2), SCALARS))
    return result


def kept(value: Any, out: Any) -> list[Any]:
    """The non-null scalars of ``value`` that ``out`` no longer holds anywhere (as the same type)."""
    return [leaf for _, leaf in leaves(value) if leaf not in (None, {}, []) and not contains_value(out, leaf)]


@settings(PROPERTY, max_examples=600)
@given(schema=OUTPUT_SCHEMAS, data=st.data(), era=ERAS, report=st.booleans())
def test_the_rules_never_crash_lose_a_value_or_claim_a_repair_the_client_rejects(
    schema: Any, data: st.DataObject, era: str | None, report: bool
) -> None:
    result = data.draw(results(schema))
    normalizer = Normalizer(NormalizerConfig(report_only=report))
    tool = {"name": "t", "inputSchema": {"type": "object"}, **({"outputSchema": schema} if schema else {})}
    listed = normalizer.tools_list({"tools": [tool]}, era)
    advertised = listed.result["tools"][0]
    original = orjson.loads(orjson.dumps(result))
    outcome = normalizer.tools_call(result, "t", listed.entries[0], era, len(dumps(result)))

    assert result == original  # the input is never mutated
    out = orjson.loads(dumps(outcome.result))  # valid JSON, every number intact
    assert not kept(result.get("structuredContent"), out)
    assert not kept(result.get("_meta"), out)
    if report:
        assert outcome.result is result
        return
    final = advertised.get("outputSchema")
    events = {record.event for record in outcome.records}
    if final is not None and out.get("isError") is not True and "structuredContent" in out and not events - {"rewrite"}:
        changed = outcome.changed and "structuredContent" in result
        if changed or conforms(result.get("structuredContent"), final):
            # what the proxy emits (or let through as conforming) the client accepts
            assert conforms(out["structuredContent"], final), outcome.records


# -- the transformer ---------------------------------------------------------------------------

TOOL = {
    "name": "t",
    "inputSchema": {"type": "object"},
    "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}},
}
WATCHED = 4  # ids 0..3 are tools/call requests of this exchange


@st.composite
def messages(draw: st.DrawFn) -> list[Any]:
    """What a server puts on one response stream: responses (watched or not), notifications,
    server requests, errors, and data that is not JSON-RPC at all."""
    out: list[Any] = []
    for rid in draw(st.permutations(list(range(WATCHED))))[: draw(st.integers(0, WATCHED))]:
        result = draw(
            st.sampled_from(
                [
                    {"content": [], "structuredContent": {"n": "5", "s": None}},
                    {"content": [{"type": "text", "text": "x"}], "structuredContent": {"n": 1}},
                    {"content": [], "isError": True, "structuredContent": {"title": "Denied", "detail": "no"}},
                    {"toolResult": {"content": []}},
                    {"content": None, "_meta": None, "structuredContent": {"n": 1.50}},
                ]
            )
        )
        out.append({"jsonrpc": "2.0", "id": rid, "result": result})
    fillers = st.sampled_from(
        [
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 0.5}},
            {"jsonrpc": "2.0", "id": 99, "result": {"content": []}},
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "boom"}},
            {"jsonrpc": "2.0", "id": "srv-1", "method": "sampling/createMessage", "params": {}},
            [{"jsonrpc": "2.0", "id": 2, "result": {"content": [], "structuredContent": {"n": "7"}}}],
            "not json-rpc",
        ]
    )
    for filler in draw(st.lists(fillers, max_size=4)):
        out.insert(draw(st.integers(0, len(out))), filler)
    return out


def exchange() -> tuple[Exchange, Normalizer]:
    normalizer = Normalizer(NormalizerConfig())
    pending: dict[IdKey, PendingRequest] = {
        ("n", rid): PendingRequest("tools/call", tool="t") for rid in range(WATCHED)
    }
    state = ScopeStore().state("s")
    state.catalog.learn(normalizer.tools_list({"tools": [TOOL]}, None).entries, first_page=True)
    return Exchange(pending, "2025-11-25", "s", state), normalizer


def run(body: bytes, cuts: list[int], content_type: bytes) -> bytes:
    ex, normalizer = exchange()
    t = ResponseTransformer(ex, normalizer, AuditLog("test"), slice_seconds=0)  # every step a slice
    t.start(200, [(b"content-type", content_type)])
    out, start = bytearray(), 0
    for cut in [*sorted(set(cuts)), len(body)]:
        out += pump(t, t.feed(body[start : max(cut, start)]))
        start = max(cut, start)
    out += pump(t, t.finish())
    assert not t.stalled
    return bytes(out)


def identity(message: Any) -> Any:
    """What must survive any rewrite: the kind of message and its id."""
    if isinstance(message, list):
        return [identity(m) for m in message]
    if isinstance(message, dict):
        return (message.get("id"), message.get("method"), "result" in message, "error" in message)
    return message


@contextmanager
def no_rule_faults() -> Iterator[list[logging.LogRecord]]:
    """Fail on any rule fault the transformer would swallow (it forwards the original and logs)."""
    seen: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = seen.append  # type: ignore[assignment]
    log = logging.getLogger("mcp_normalizer.engine.transform")
    log.addHandler(handler)
    try:
        yield seen
    finally:
        log.removeHandler(handler)
    assert not seen, [r.getMessage() for r in seen]


@PROPERTY
@given(
    stream=messages(),
    cuts=st.lists(st.integers(0, 2000), max_size=12),
    eol=st.sampled_from([b"\n", b"\r\n"]),
    ids=st.booleans(),
)
def test_sse_in_any_chunks_keeps_every_event_in_order_as_valid_json(
    stream: list[Any], cuts: list[int], eol: bytes, ids: bool
) -> None:
    body = b"".join(
        (b"id: %d" % n + eol if ids else b"")
        + b"data: "
        + orjson.dumps(m)
        + eol
        + eol
        + (b": keep-alive" + eol + eol if n % 2 else b"")
        for n, m in enumerate(stream)
    )
    with no_rule_faults():
        out = run(body, cuts, b"text/event-stream")
    splitter = SSESplitter()
    blocks = [*splitter.feed(out), splitter.flush()]
    events = [parse_event(block) for block in blocks if block]
    data = [orjson.loads(e.data) for e in events if e.data is not None]
    assert [identity(m) for m in data] == [identity(m) for m in stream]
    assert [e.id for e in events if e.data is not None] == (
        [b"%d" % n for n in range(len(stream))] if ids else [None] * len(stream)
    )
    assert out.count(b": keep-alive") == body.count(b": keep-alive")


@PROPERTY
@given(stream=messages(), cuts=st.lists(st.integers(0, 2000), max_size=12))
def test_a_json_body_in_any_chunks_keeps_every_message_in_order_as_valid_json(
    stream: list[Any], cuts: list[int]
) -> None:
    members = [m for m in stream if isinstance(m, dict)]
    for value in (members, *members[:1]):  # a batch, and a single message
        body = orjson.dumps(value)
        with no_rule_faults():
            out = orjson.loads(run(body, cuts, b"application/json"))
        assert identity(out) == identity(value)


@PROPERTY
@given(
    body=st.one_of(
        st.binary(max_size=200),
        st.builds(orjson.dumps, VALUES),
        st.builds(
            lambda rid, method, params: orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}),
            st.one_of(SCALARS, st.lists(SCALARS, max_size=2)),
            st.sampled_from(["tools/call", "tools/list", "tasks/result", "tasks/get", "subscriptions/listen", "x"]),
            VALUES,
        ),
    ),
    method=st.one_of(st.none(), st.sampled_from([b"tools/call", b"ping", b"\xff"])),
)
def test_request_inspection_never_raises(body: bytes, method: bytes | None) -> None:
    headers = [(b"mcp-method", method)] if method is not None else []
    info = inspect_request(body, headers)
    assert info is None or info.pending


# -- decoding (field data and spellings: tests/test_numbers.py) ----------------------------------


@pytest.mark.parametrize(
    "text",
    [
        b"1\x00",  # json.loads(bytes) would read this as UTF-16 and give 1
        '{"a":1.5}'.encode("utf-16-le"),
        b'\xef\xbb\xbf{"a":1.5}',  # a byte order mark (RFC 8259 section 8.1: never sent; JSON.parse rejects it)
        b'"\xff"',
        '"\ud800"',  # a str that cannot be UTF-8
        b"[NaN]",
        b"[1.5,]",
    ],
)
def test_loads_rejects_what_is_not_utf8_json_with_decode_error(text: bytes | str) -> None:
    with pytest.raises(DecodeError):
        loads(text)


# -- reading only what a rule may need -------------------------------------------------------------


@settings(PROPERTY, max_examples=400)
@given(schema=OUTPUT_SCHEMAS, data=st.data(), era=ERAS, small_validation=st.booleans())
def test_an_undecoded_structured_content_changes_nothing_a_rule_would_do(
    schema: Any, data: st.DataObject, era: str | None, small_validation: bool
) -> None:
    """Where ``reads_structured`` says no rule may read ``structuredContent``, handing the rules its
    undecoded text gives the same output and the same records as decoding it."""
    from mcp_normalizer.engine.rules import RuleSettings
    from mcp_normalizer.wire.jsoncodec import Codec, Raw

    result = data.draw(results(schema))
    if "structuredContent" not in result:
        return
    value, pad = result["structuredContent"], "x" * 5000  # large enough to be left undecoded
    padded = {**value, "pad": pad} if isinstance(value, dict) else [*value, pad] if isinstance(value, list) else pad
    result = {**result, "structuredContent": padded if data.draw(st.booleans()) else value}
    config = NormalizerConfig(
        settings=RuleSettings(mirror_max_bytes=0), max_validate_bytes=0 if small_validation else 1 << 20
    )
    normalizer = Normalizer(config)
    tool = {"name": "t", "inputSchema": {"type": "object"}, **({"outputSchema": schema} if schema else {})}
    entry = normalizer.tools_list({"tools": [tool]}, era).entries[0]
    text = Raw(dumps(result["structuredContent"]))
    others = {k: v for k, v in result.items() if k != "structuredContent"}
    size = len(dumps(result))
    assume(not normalizer.reads_structured(others, text, "t", entry, era, size))
    decoded, undecoded = Codec(), Codec()
    with_value = {k: decoded.loads(dumps(v)) for k, v in result.items()}
    with_text = {**{k: undecoded.loads(dumps(v)) for k, v in others.items()}, "structuredContent": text}
    with_text = {k: with_text[k] for k in result}
    one = normalizer.tools_call(with_value, "t", entry, era, size, decoded)
    two = normalizer.tools_call(with_text, "t", entry, era, size, undecoded)
    assert orjson.loads(decoded.dumps(one.result)) == orjson.loads(undecoded.dumps(two.result))
    assert [r.rewrite for r in one.records] == [r.rewrite for r in two.records]
