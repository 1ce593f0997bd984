"""The six kinds of ``cases/faults.md`` "Kinds from the late-2026 reports" (no case file: fixtures
built from the descriptions): boolean subschemas, 2020-12 tuples closed with ``items: false``, a
``resource_link`` without ``name``, unknown ``annotations.audience`` roles, cursors that never
advance, and text outside ``content``.

Pure rules first (property tests: a boolean subschema's object spelling accepts exactly the same
values; dropping a tuple's closing ``items: false`` rejects no value that was valid), then on the
wire with the three strict clients, in JSON and SSE: each fault breaks a client directly, and
through the proxy every client accepts the result and no value is lost.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from jsonschema import Draft7Validator, Draft202012Validator

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules.block_members import name_of
from mcp_normalizer.engine.rules.clients import profile_for

from .support import (
    PROPERTY,
    Mangled,
    capture_rewrites,
    contains_value,
    feed_all,
    proxy_for,
    serve,
    three_clients,
    transformer,
)

ERA = "2025-11-25"
KEPT = "dev.mcp-normalizer/original-keywords"


def normalizer() -> Normalizer:
    return Normalizer(NormalizerConfig.shipped())


def listed(tool: dict[str, Any], client: str | None = None) -> dict[str, Any]:
    profile = profile_for({"name": client}) if client else profile_for(None)
    tools: list[dict[str, Any]] = normalizer().tools_list({"tools": [tool]}, ERA, profile).result["tools"]
    return tools[0]


def called(result: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = normalizer().tools_call(result, None, None, ERA, 100).result
    return out


# -- boolean_subschema ---------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "caf\u00e9", "x y"])
LEAVES = st.one_of(
    st.booleans(),
    st.just({}),
    st.sampled_from([{"type": "string"}, {"type": "number", "minimum": 0.5}, {"type": "null"}, {"const": 12.5}]),
)
SCHEMAS = st.recursive(
    LEAVES,
    lambda inner: st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["object", "array"]),
            "properties": st.dictionaries(NAMES, inner, max_size=3),
            "required": st.lists(NAMES, max_size=2, unique=True),
            "additionalProperties": inner,
            "items": inner,
            "prefixItems": st.lists(inner, min_size=1, max_size=2),
            "not": inner,
            "anyOf": st.lists(inner, min_size=1, max_size=3),
            "allOf": st.lists(inner, min_size=1, max_size=2),
        },
    ),
    max_leaves=12,
)
VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=5),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=10,
)
_IDIOMATIC = {"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}


def _booleans_left(node: Any, parent_key: str = "", siblings: Any = None) -> list[str]:
    """Boolean subschemas still where an object schema usually stands."""
    if isinstance(node, bool):
        closing = parent_key == "items" and isinstance(siblings, dict) and "prefixItems" in siblings
        return [] if parent_key in _IDIOMATIC or closing else [parent_key]
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for sub in value.values():
                    found += _booleans_left(sub, "member", None)
            elif key in ("anyOf", "allOf", "oneOf", "prefixItems"):
                for sub in value:
                    found += _booleans_left(sub, "entry", None)
            elif key not in ("required", "type", "const", "minimum"):
                found += _booleans_left(value, key, node)
    return found


#: A draw that once failed: a tuple closed with ``items: false`` (``schema_tuple`` opens it for the
#: default client, so the repaired schema accepts ``[null, null]``, which the original refuses).
_CLOSED_TUPLE = {"type": "array", "items": False, "prefixItems": [{}], "anyOf": [True], "allOf": [{}], "properties": {}}


def _verdicts(schema: Any, client: str | None, values: list[Any]) -> list[tuple[bool, bool]]:
    """Each value's verdict (Draft 2020-12) under ``schema`` as sent and as listed to ``client``."""
    before = {"type": "object", "properties": {"v": schema, "w": {"type": "string"}}}
    tool = listed({"name": "t", "inputSchema": before, "outputSchema": before}, client)
    verdicts = []
    for key in ("inputSchema", "outputSchema"):
        after = tool[key]
        assert _booleans_left(after) == [], after
        for value in values:
            instance = {"v": value, "w": "caf\u00e9"}
            verdicts.append(
                (Draft202012Validator(before).is_valid(instance), Draft202012Validator(after).is_valid(instance))
            )
    return verdicts


@pytest.mark.pure
@PROPERTY
@given(SCHEMAS, st.lists(VALUES, min_size=1, max_size=8))
@example(_CLOSED_TUPLE, [[None, None], [12.5], []])
def test_boolean_subschemas_spelled_as_objects_accept_exactly_the_same_values(schema: Any, values: list[Any]) -> None:
    # the Python SDK reads 2020-12 tuples, so boolean_subschema is the only schema rule that acts
    for before, after in _verdicts(schema, "mcp", values):
        assert before == after


@pytest.mark.pure
@PROPERTY
@given(SCHEMAS, st.lists(VALUES, min_size=1, max_size=8))
@example(_CLOSED_TUPLE, [[None, None], [12.5], []])
def test_for_the_default_client_the_schema_rules_reject_no_value_that_was_valid(schema: Any, values: list[Any]) -> None:
    # schema_tuple also opens closed tuples for clients not known to read them: wider, never narrower
    for before, after in _verdicts(schema, None, values):
        assert after or not before


@pytest.mark.pure
def test_each_boolean_is_kept_by_its_pointer_and_idiomatic_ones_stay() -> None:
    schema = {
        "type": "object",
        "properties": {"anything": True, "never": False, "tags": {"type": "array", "items": True}},
        "additionalProperties": False,
        "$defs": {"Open": True},
        "anyOf": [True, {"required": ["anything"]}],
    }
    tool = listed({"name": "t", "inputSchema": schema})
    out = tool["inputSchema"]
    assert out["properties"] == {"anything": {}, "never": {"not": {}}, "tags": {"type": "array", "items": {}}}
    assert out["additionalProperties"] is False
    assert out["anyOf"][0] == {}
    assert out.get("$defs", {"Open": {}})["Open"] == {}
    kept = tool["_meta"][KEPT]
    assert kept["/inputSchema/properties/anything"] is True
    assert kept["/inputSchema/properties/never"] is False
    assert kept["/inputSchema/properties/tags/items"] is True
    assert kept["/inputSchema/anyOf/0"] is True


@pytest.mark.pure
def test_a_schema_without_boolean_subschemas_is_the_same_object() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    tool = {"name": "t", "inputSchema": schema}
    assert listed(tool) == tool


# -- output_schema_tuple -------------------------------------------------------------------------

POINT = {"type": "array", "prefixItems": [{"type": "number"}, {"type": "string"}], "items": False}


@pytest.mark.pure
def test_a_closed_tuple_loses_its_items_false_for_draft07_clients_and_keeps_it_in_meta() -> None:
    tool = listed({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": _point_schema()})
    point = tool["outputSchema"]["properties"]["point"]
    assert "items" not in point and point["prefixItems"] == POINT["prefixItems"]
    assert tool["_meta"][KEPT] == {"/outputSchema/properties/point/items": False}
    # what the TS SDK 1.x client's Ajv does (draft-07): the original rejects every item, the repair none
    value = {"point": [12.5, "na\u00efve"]}
    assert not Draft7Validator(_point_schema()).is_valid(value)
    assert Draft7Validator(tool["outputSchema"]).is_valid(value)


@pytest.mark.pure
def test_the_python_sdk_reads_2020_tuples_and_keeps_the_schema_as_sent() -> None:
    tool = {"name": "t", "inputSchema": {"type": "object"}, "outputSchema": _point_schema()}
    assert listed(tool, client="mcp")["outputSchema"] == _point_schema()


@pytest.mark.pure
def test_a_draft07_tuple_translated_to_2020_is_opened_for_draft07_clients() -> None:
    draft07 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "integer"}], "additionalItems": False}},
    }
    out = listed({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": draft07})["outputSchema"]
    assert out["properties"]["pair"] == {"type": "array", "prefixItems": [{"type": "integer"}]}


@pytest.mark.pure
@PROPERTY
@given(st.lists(VALUES, max_size=4))
def test_an_opened_tuple_rejects_no_value_the_closed_one_accepted(items: list[Any]) -> None:
    after = listed({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": _point_schema()})["outputSchema"]
    value = {"point": items}
    if Draft202012Validator(_point_schema()).is_valid(value):
        assert Draft202012Validator(after).is_valid(value)


def _point_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"point": POINT}, "required": ["point"]}


# -- resource_link_incomplete ----------------------------------------------------------------------


@pytest.mark.pure
@pytest.mark.parametrize(
    ("uri", "name"),
    [
        ("file:///srv/reports/Q3%20r%C3%A9sum%C3%A9.pdf", "Q3 r\u00e9sum\u00e9.pdf"),
        ("https://example.com/a/b/", "b"),
        ("https://example.com", "https://example.com"),
        ("urn:isbn:0451450523", "urn:isbn:0451450523"),
        ("http://[broken/x", "http://[broken/x"),
    ],
)
def test_a_resource_link_is_named_by_its_uri(uri: str, name: str) -> None:
    assert name_of(uri) == name
    block = {"type": "resource_link", "uri": uri, "mimeType": "application/pdf"}
    out = called({"content": [block]})["content"][0]
    assert out["name"] == name and out["uri"] == uri
    assert out["_meta"]["dev.mcp-normalizer/original-block"] == block


@pytest.mark.pure
def test_a_non_string_name_is_replaced_and_a_link_without_uri_becomes_text() -> None:
    blocks = [
        {"type": "resource_link", "uri": "file:///x/y.txt", "name": 42},
        {"type": "resource_link", "name": "orphan"},
        {"type": "resource_link", "uri": "file:///ok.txt", "name": "ok"},
    ]
    out = called({"content": blocks})["content"]
    assert out[0]["name"] == "y.txt" and out[0]["_meta"]["dev.mcp-normalizer/original-block"]["name"] == 42
    assert out[1]["type"] == "text" and out[1]["_meta"]["dev.mcp-normalizer/original-block"] == blocks[1]
    assert out[2] == blocks[2]


# -- annotations_invalid ---------------------------------------------------------------------------


@pytest.mark.pure
@pytest.mark.parametrize(
    ("annotations", "fixed"),
    [
        ({"audience": ["user", "system"], "priority": 0.25}, {"audience": ["user"], "priority": 0.25}),
        ({"audience": ["system"]}, {}),
        ({"audience": "assistant"}, {"audience": ["assistant"]}),
        (
            {"audience": {"role": "user"}, "lastModified": "2026-12-03T09:30:00Z"},
            {"lastModified": "2026-12-03T09:30:00Z"},
        ),
        ({"priority": 1.5, "audience": ["assistant"]}, {"audience": ["assistant"]}),
        ({"priority": True, "lastModified": 1733218200}, {}),
    ],
)
def test_annotations_keep_what_the_schema_allows(annotations: dict[str, Any], fixed: dict[str, Any]) -> None:
    block = {"type": "text", "text": "caf\u00e9 12.50", "annotations": annotations}
    out = called({"content": [block]})["content"][0]
    assert out["annotations"] == fixed and out["text"] == "caf\u00e9 12.50"
    assert out["_meta"]["dev.mcp-normalizer/original-annotations"] == annotations


@pytest.mark.pure
def test_valid_annotations_are_untouched() -> None:
    block = {"type": "text", "text": "t", "annotations": {"audience": ["user", "assistant"], "priority": 1}}
    assert called({"content": [block]})["content"][0] == block


# -- pagination_cursor_loop ------------------------------------------------------------------------


def _page(cursor: str | None, next_cursor: Any) -> bytes:
    t = transformer("tools/list", params={} if cursor is None else {"cursor": cursor})
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "nextCursor": next_cursor}})
    return feed_all(t, body)


@pytest.mark.pure
@pytest.mark.parametrize(
    ("cursor", "next_cursor", "dropped"),
    [
        (None, "", True),
        ("p\u00e9ge-2", "p\u00e9ge-2", True),
        ("2", "3", False),
        (None, "2", False),
        ("2", 2, False),  # not a string: another rule's business, never this one's
    ],
)
def test_a_cursor_that_does_not_advance_is_dropped(cursor: str | None, next_cursor: Any, dropped: bool) -> None:
    out = orjson.loads(_page(cursor, next_cursor))
    assert ("nextCursor" not in out["result"]) == dropped
    assert out["result"]["tools"] == []


# -- result_output_field ---------------------------------------------------------------------------


@pytest.mark.pure
def test_text_outside_content_is_copied_into_a_text_block_with_its_spelling() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"result":{"output":{"total":12.50,"big":123456789012345678901234567890}}}'
    out = json.loads(feed_all(transformer("tools/call"), body))
    text = out["result"]["content"][0]["text"]
    assert "12.50" in text and "123456789012345678901234567890" in text
    assert "output" in out["result"]


@pytest.mark.pure
@pytest.mark.parametrize("member", ["output", "result", "text"])
def test_each_member_holding_text_is_shown(member: str) -> None:
    out = called({member: "R\u00e9sum\u00e9 \u2713"})
    assert (
        out["content"] == [{"type": "text", "text": "R\u00e9sum\u00e9 \u2713"}]
        and out[member] == "R\u00e9sum\u00e9 \u2713"
    )


@pytest.mark.pure
def test_a_result_with_content_or_a_null_member_is_left_to_the_other_rules() -> None:
    assert called({"content": [], "output": "x"}) == {"content": [], "output": "x"}
    assert called({"output": None})["content"] == []


# -- on the wire -----------------------------------------------------------------------------------

SHAPES = {
    "name": "shapes",
    "inputSchema": {
        "type": "object",
        "properties": {"anything": True, "never": False, "tags": {"type": "array", "items": True}},
        "additionalProperties": False,
    },
    "outputSchema": {
        "type": "object",
        "properties": {"point": POINT, "extra": True},
        "required": ["point"],
    },
}
SHAPES_RESULT = {
    "content": [{"type": "text", "text": "12.5 na\u00efve"}],
    "structuredContent": {"point": [12.5, "na\u00efve"], "extra": {"deep": [None, -1.5e-7, "\u2713"]}},
}
LINKS = {"name": "links", "inputSchema": {"type": "object"}}
LINKS_RESULT = {
    "content": [
        {
            "type": "resource_link",
            "uri": "file:///srv/reports/Q3%20r%C3%A9sum%C3%A9.pdf",
            "mimeType": "application/pdf",
        },
        {"type": "resource_link", "uri": "https://example.com/a/b", "name": None},
        {"type": "text", "text": "for you", "annotations": {"audience": ["user", "system"], "priority": 0.5}},
    ]
}
OUTPUT = {"name": "legacy_output", "inputSchema": {"type": "object"}}
OUTPUT_RESULT = {"output": "R\u00e9sum\u00e9 \u2713 12.50 \u20ac"}
RESULT_MEMBER = {"name": "legacy_result", "inputSchema": {"type": "object"}}
RESULT_MEMBER_RESULT = {"result": {"total": 12.5, "note": None, "tags": ["\u00e9"]}}


def _accepted(record: dict[str, Any]) -> bool:
    return all(step["ok"] and not step["value"].get("isError") for step in record["steps"])


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_the_late_2026_kinds_break_clients_directly_and_none_through_the_proxy(
    mode: Literal["sse", "json"],
) -> None:
    tools = [
        ToolSpec(SHAPES, returning(SHAPES_RESULT)),
        ToolSpec(LINKS, returning(LINKS_RESULT)),
        ToolSpec(OUTPUT, returning(OUTPUT_RESULT)),
        ToolSpec(RESULT_MEMBER, returning(RESULT_MEMBER_RESULT)),
    ]
    steps: list[dict[str, Any]] = [{"op": "listTools"}] + [
        {"op": "callTool", "name": name, "arguments": {}}
        for name in ("shapes", "links", "legacy_output", "legacy_result")
    ]
    with serve(ScriptedServer(tools, response_mode=mode)) as up:
        direct = await three_clients(up + "/mcp", [""], steps, request_timeout=8)
        with proxy_for(up + "/mcp") as px, capture_rewrites() as log:
            through = await three_clients(px + "/mcp", [""], steps, request_timeout=30)
    assert not direct["ts-sdk-1"][0]["steps"][0]["ok"]  # the whole list, for a property that is true
    assert all(not records[0]["steps"][2]["ok"] for records in direct.values())  # the links and annotations
    assert not direct["python"][0]["steps"][3]["ok"]  # no content
    for name, records in through.items():
        record = records[0]
        assert _accepted(record), (name, record)
        shown = [step["value"] for step in record["steps"]]
        assert shown[1]["structuredContent"] == SHAPES_RESULT["structuredContent"]
        links = shown[2]["content"]
        assert links[0]["name"] == "Q3 r\u00e9sum\u00e9.pdf" and links[1]["name"] == "b"
        assert links[2]["annotations"]["audience"] == ["user"]
        assert contains_value(links[2], "system")  # kept in the block's _meta
        assert shown[3]["content"][0]["text"] == OUTPUT_RESULT["output"]
        assert orjson.loads(shown[4]["content"][0]["text"]) == RESULT_MEMBER_RESULT["result"]
    rules = {line["rule"] for line in log.lines if line["event"] == "rewrite"}
    assert {"boolean_subschema", "schema_tuple", "resource_link_name", "annotations", "output_member"} <= rules


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_closed_tuple_breaks_the_ts_sdk_1x_directly_and_no_client_through_the_proxy() -> None:
    pairs = {"name": "pairs", "inputSchema": {"type": "object"}, "outputSchema": _point_schema()}
    value = {"point": [-0.000125, "\u00e9\u2713"]}
    tools = [ToolSpec(pairs, returning({"content": [], "structuredContent": value}))]
    steps: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": "pairs", "arguments": {}}]
    with serve(ScriptedServer(tools, response_mode="json")) as up:
        direct = await three_clients(up + "/mcp", [""], steps, request_timeout=8)
        with proxy_for(up + "/mcp") as px:
            through = await three_clients(px + "/mcp", [""], steps, request_timeout=30)
    assert not direct["ts-sdk-1"][0]["steps"][1]["ok"], direct["ts-sdk-1"]
    for name, records in through.items():
        assert _accepted(records[0]), (name, records[0])
        assert records[0]["steps"][1]["value"]["structuredContent"] == value


def _looping(empty: bool) -> Mangled:
    """Two tools, one per page; the last page's nextCursor is ``""`` or the cursor it was asked with."""
    tools = [
        ToolSpec({"name": f"tool_{i}", "inputSchema": {"type": "object"}}, returning({"content": []})) for i in (0, 1)
    ]

    def loop(message: dict[str, Any]) -> bytes:
        result = message.get("result")
        if isinstance(result, dict) and "tools" in result:
            result.setdefault("nextCursor", "" if empty else "1")
        return orjson.dumps(message)

    return Mangled(ScriptedServer(tools, response_mode="sse", page_size=1), {"loop": loop})


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("empty", [True, False], ids=["empty", "same"])
async def test_a_cursor_that_never_advances_ends_the_list_through_the_proxy(empty: bool) -> None:
    steps: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "listTools", "cursor": "1"}]
    with serve(_looping(empty)) as up:
        direct = await three_clients(up + "/mcp", ["loop"], steps, request_timeout=8)
        with proxy_for(up + "/mcp") as px, capture_rewrites() as log:
            through = await three_clients(px + "/mcp", ["loop"], steps, request_timeout=30)
    loop = "" if empty else "1"
    asked = [records[0]["steps"][1] for records in direct.values()]
    assert any(step["ok"] and step["value"].get("nextCursor") == loop for step in asked), direct
    for name, records in through.items():
        first, last = records[0]["steps"]
        assert first["ok"] and last["ok"], (name, records)
        assert last["value"]["tools"][0]["name"] == "tool_1" and "nextCursor" not in last["value"]
        names = [tool["name"] for tool in first["value"]["tools"]]
        assert names in (["tool_0"], ["tool_0", "tool_1"]), (name, names)  # 2.x walks every page: each once
    assert any(line["rule"] == "cursor_loop" for line in log.lines if line["event"] == "rewrite")
