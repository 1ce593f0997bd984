"""The 2026 fault kinds of ``cases/faults.md`` ("Kinds from the 2026 reports") and the variants of
older kinds: pure rules with field data, and on the wire with the three strict clients.

On the wire the upstream mangles its results' text the way the reports show (``x-fault``); each
fault breaks a client directly, and through the proxy every client accepts the result and no
value is lost (moved values are found in ``_meta``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.request_rewrite import rename_calls
from mcp_normalizer.engine.rules import lone_surrogates
from mcp_normalizer.engine.rules.media_data import is_base64
from mcp_normalizer.engine.rules.tool_names import VALID, renames
from mcp_normalizer.wire.jsonrpc import inspect_request

from .support import (
    FIELD_RESULT,
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
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def normalizer() -> Normalizer:
    return Normalizer(NormalizerConfig.shipped())


# -- invalid_unicode ------------------------------------------------------------------------------


@pytest.mark.pure
@pytest.mark.parametrize(
    ("text", "fixed", "count"),
    [
        (rb'"a\ud83d"', rb'"a\ufffd"', 1),
        (rb'"\ud83d\ude00 ok"', None, 0),  # a valid pair
        (rb'"\\ud83d"', None, 0),  # an escaped backslash, then text
        (rb'"\\\ud83d x \uDC00\uD800"', rb'"\\\ufffd x \ufffd\ufffd"', 3),  # a low half first, a high half last
        (rb'"\ud83d\u0041"', rb'"\ufffd\u0041"', 1),
    ],
)
def test_unpaired_surrogates_become_the_replacement_character(text: bytes, fixed: bytes | None, count: int) -> None:
    done = lone_surrogates.repair(text)
    assert (done is None) if fixed is None else (done == (fixed, count))
    if done is not None:
        json.loads(done[0]).encode("utf-8")  # now valid Unicode: UTF-8 encodable


@pytest.mark.pure
@PROPERTY
@given(st.lists(st.one_of(st.text(max_size=6), st.integers(0xD800, 0xDFFF).map(chr)), max_size=8))
def test_repaired_text_is_the_string_with_each_lone_surrogate_replaced(parts: list[str]) -> None:
    value = "".join(parts)
    text = json.dumps(value).encode()  # escapes every surrogate, paired or not, as \uXXXX
    done = lone_surrogates.repair(text)
    expected = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert json.loads(done[0] if done is not None else text) == expected


@pytest.mark.pure
def test_a_lone_surrogate_no_longer_hides_the_result_from_the_rules() -> None:
    """The proxy's decoder refused the message before: it went out as it came, unrepaired."""
    body = (
        b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"tab \\ud83d"}],'
        b'"structuredContent":null,"_meta":null}}'
    )
    with capture_rewrites() as log:
        out = feed_all(transformer("tools/call"), body)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"tab \\ufffd"}]}}'
    assert log.rewrites(rule="lone_surrogates") and log.rewrites(rule="null_members")


# -- invalid_media_data ---------------------------------------------------------------------------


@pytest.mark.pure
@pytest.mark.parametrize(
    ("data", "ok"),
    [(PNG, True), ("", True), ("YQ", True), ("YQ=", False), ("Y Q = =", True), ("Y", False), ("a-b_", False)],
)
def test_base64_is_what_atob_accepts(data: str, ok: bool) -> None:
    assert is_base64(data) is ok


@pytest.mark.pure
def test_media_data_uris_lose_their_prefix_and_junk_becomes_text_kept_in_meta() -> None:
    result = {
        "content": [
            {"type": "image", "data": "data:image/png;base64," + PNG, "mimeType": "application/octet-stream"},
            {"type": "image", "data": "data:image/jpeg;base64," + PNG, "mimeType": "image/webp"},
            {"type": "audio", "data": "<binary \u00e9>", "mimeType": "audio/wav"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
        ]
    }
    out = normalizer().tools_call(result, None, None, ERA, 500)
    blocks = out.result["content"]
    assert blocks[0]["data"] == PNG and blocks[0]["mimeType"] == "image/png"
    assert blocks[0]["_meta"]["dev.mcp-normalizer/data-uri-prefix"] == "data:image/png;base64,"
    assert blocks[1]["mimeType"] == "image/webp"  # the block's own specific type wins
    assert (
        blocks[2]["type"] == "text" and blocks[2]["_meta"]["dev.mcp-normalizer/original-block"] == result["content"][2]
    )
    assert blocks[3] == result["content"][3]
    assert [r.rewrite.rule for r in out.records] == ["media_data"]


@pytest.mark.pure
def test_a_json_block_becomes_text_with_its_json_and_its_type_kept() -> None:
    result = {"content": [{"type": "json", "json": {"price": 12.5, "name": "\u00e9"}}]}
    block = normalizer().tools_call(result, None, None, ERA, 100).result["content"][0]
    assert block["type"] == "text" and json.loads(block["text"]) == {"price": 12.5, "name": "\u00e9"}
    assert block["_meta"]["dev.mcp-normalizer/original-type"] == "json"


# -- input_schema_root_combinator and the tools/list variants -------------------------------------


def listed(tool: dict[str, Any]) -> dict[str, Any]:
    out = normalizer().tools_list({"tools": [tool]}, ERA)
    tools: list[dict[str, Any]] = out.result["tools"]
    return tools[0]


@pytest.mark.pure
def test_a_root_anyof_of_objects_becomes_one_object_schema_with_the_arms_kept() -> None:
    arms = [
        {"type": "object", "properties": {"id": {"type": "string"}, "q": {"type": "string"}}, "required": ["id", "q"]},
        {"properties": {"q": {"type": "integer"}, "page": {"type": "number", "minimum": 0.5}}, "required": ["q"]},
    ]
    tool = listed({"name": "search", "inputSchema": {"anyOf": arms, "description": "d"}})
    assert tool["inputSchema"] == {
        "description": "d",
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "q": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "page": {"type": "number", "minimum": 0.5},
        },
        "required": ["q"],
    }
    assert tool["_meta"]["dev.mcp-normalizer/input-schema-combinator"] == {"anyOf": arms}


@pytest.mark.pure
def test_a_root_allof_requires_what_any_arm_requires_and_a_non_object_arm_stays() -> None:
    arms = [{"type": "object", "properties": {"a": {}}, "required": ["a"]}, {"type": "object", "required": ["b"]}]
    schema = listed({"name": "t", "inputSchema": {"type": "object", "allOf": arms}})["inputSchema"]
    assert "allOf" not in schema and schema["required"] == ["a", "b"]
    mixed = {"type": "object", "oneOf": [{"type": "object"}, {"type": "string"}]}
    assert listed({"name": "t", "inputSchema": mixed})["inputSchema"] == mixed


@pytest.mark.pure
@pytest.mark.parametrize(
    ("output_schema", "root"),
    [
        ({"$id": "urn:x", "description": "d", "title": "t"}, {"type": "object"}),  # opentokenz/mcpx#28
        ({"type": ["null", "array"], "items": {"type": "string"}}, {"type": "object"}),  # kenn-io/msgvault#626
    ],
)
def test_output_schemas_that_are_not_object_schemas_get_an_object_root(
    output_schema: dict[str, Any], root: dict[str, Any]
) -> None:
    schema = listed({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": output_schema})["outputSchema"]
    assert schema["type"] == root["type"]


@pytest.mark.pure
@pytest.mark.parametrize("input_schema", [{}, {"$schema": "http://json-schema.org/draft-07/schema#"}])
def test_an_empty_input_schema_becomes_an_object_schema(input_schema: dict[str, Any]) -> None:
    """zereight/gitlab-mcp#286."""
    assert listed({"name": "t", "inputSchema": input_schema})["inputSchema"]["type"] == "object"


@pytest.mark.pure
def test_the_field_result_survives_the_new_rules_byte_for_byte() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"result":' + FIELD_RESULT + b"}"
    assert feed_all(transformer("tools/call"), body) == body


# -- on the wire ----------------------------------------------------------------------------------

COMBINED = {
    "name": "search",
    "description": "find",
    "inputSchema": {
        "anyOf": [
            {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        ]
    },
}
MEDIA = {"name": "media", "inputSchema": {"type": "object"}}
MEDIA_RESULT = {
    "content": [
        {"type": "text", "text": "LONE tab caf\u00e9 12.50"},
        {"type": "image", "data": "data:image/png;base64," + PNG, "mimeType": "image/png"},
        {"type": "audio", "data": "not base64 at all!", "mimeType": "audio/wav"},
        {"type": "json", "json": {"price": 12.5, "name": "na\u00efve"}},
    ]
}


def _lone(message: dict[str, Any]) -> bytes:
    """The text the placeholder ``LONE`` stands for: half a surrogate pair, as an escape."""
    return orjson.dumps(message).replace(b"LONE", b"\\ud83d")


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_the_2026_kinds_break_clients_directly_and_none_through_the_proxy(mode: Literal["sse", "json"]) -> None:
    tools = [ToolSpec(COMBINED, returning({"content": []})), ToolSpec(MEDIA, returning(MEDIA_RESULT))]
    upstream = Mangled(ScriptedServer(tools, response_mode=mode), {"lone": _lone})
    steps: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": "media", "arguments": {}}]
    with serve(upstream) as up:
        direct = await three_clients(up + "/mcp", ["lone"], steps, request_timeout=8)
        with proxy_for(up + "/mcp") as px, capture_rewrites() as log:
            through = await three_clients(px + "/mcp", ["lone"], steps, request_timeout=30)
    assert [name for name, records in direct.items() if not _accepted(records[0])]
    for name, records in through.items():
        assert _accepted(records[0]), (name, records[0])
        listed_tools = records[0]["steps"][0]["value"]["tools"]
        search = next(t for t in listed_tools if t["name"] == "search")
        assert search["inputSchema"]["type"] == "object" and "anyOf" not in search["inputSchema"]
        called = records[0]["steps"][1]["value"]
        texts = [b.get("text", "") for b in called["content"]]
        assert texts[0] == "\ufffd tab caf\u00e9 12.50"
        assert called["content"][1]["data"] == PNG
        assert contains_value(called["content"][2], "not base64 at all!")
        assert json.loads(texts[3]) == {"price": 12.5, "name": "na\u00efve"}
    rules = {line["rule"] for line in log.lines if line["event"] == "rewrite"}
    assert {"lone_surrogates", "media_data", "content_blocks", "input_combinator"} <= rules


def _accepted(record: dict[str, Any]) -> bool:
    return all(step["ok"] for step in record["steps"]) and not record["steps"][1]["value"].get("isError")


@pytest.mark.pure
def test_orjson_cannot_write_a_lone_surrogate_so_the_fixture_mangles_text() -> None:
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps("\ud83d")


# -- tool_name_invalid: the one repair that rewrites a request ------------------------------------

LONG = "tool-" + "x" * 140
ODD_NAMES = ["get weather", "files/read", LONG, "plain_ok", "dotted.ok"]


@pytest.mark.pure
def test_names_outside_the_spec_get_valid_unique_names_and_others_stay() -> None:
    out = renames([*ODD_NAMES, "get_weather"])
    assert set(out) == {"get weather", "files/read", LONG}
    assert all(VALID.fullmatch(new) for new in out.values())
    assert out["get weather"] != "get_weather"  # taken by another tool: cut and hashed instead
    assert len(set(out.values())) == 3 and renames([*ODD_NAMES, "get_weather"]) == out  # deterministic


@pytest.mark.pure
def test_a_call_is_sent_under_the_original_name_and_nothing_else_changes() -> None:
    names = {"get_weather": "get weather"}
    body = (
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_weather","arguments":'
        b'{"t":12.50,"s":"\\u00e9"},"_meta":{"progressToken":7}}},'
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"other","arguments":{}}}]'
    )
    info = inspect_request(body, [])
    assert info is not None
    done = rename_calls(body, info.pending, names)
    assert done is not None
    text, pending, renamed = done
    assert text == body.replace(b'"name":"get_weather"', b'"name":"get weather"')
    assert renamed == [("n", 1)] and pending[("n", 1)].tool == "get weather" and pending[("n", 2)].tool == "other"
    assert rename_calls(body, info.pending, {}) is None


@pytest.mark.wire
@pytest.mark.anyio
async def test_tools_with_names_clients_refuse_are_listed_and_called_under_valid_names() -> None:
    tools = [
        ToolSpec(
            {"name": name, "inputSchema": {"type": "object"}}, returning({"content": [{"type": "text", "text": name}]})
        )
        for name in ODD_NAMES
    ]
    server = ScriptedServer(tools, response_mode="json")
    with serve(server) as up, proxy_for(up + "/mcp") as px:
        listing = await three_clients(px + "/mcp", ["none"], [{"op": "listTools"}], request_timeout=30)
        advertised = [t["name"] for t in listing["python"][0]["steps"][0]["value"]["tools"]]
        assert all(VALID.fullmatch(name) or name == "dotted.ok" for name in advertised)
        steps = [{"op": "listTools"}, *({"op": "callTool", "name": n, "arguments": {}} for n in advertised)]
        through = await three_clients(px + "/mcp", ["none"], steps, request_timeout=30)
    for name, records in through.items():
        record = records[0]
        assert all(step["ok"] for step in record["steps"]), (name, record)
        tools_listed = record["steps"][0]["value"]["tools"]
        originals = [t.get("_meta", {}).get("dev.mcp-normalizer/original-name", t["name"]) for t in tools_listed]
        assert originals == ODD_NAMES
        assert [step["value"]["content"][0]["text"] for step in record["steps"][1:]] == ODD_NAMES
    called = [m["params"]["name"] for m, _ in server.requests if m.get("method") == "tools/call"]
    assert called and set(called) == set(ODD_NAMES)  # the upstream only ever saw its own names


@pytest.mark.pure
@pytest.mark.parametrize(
    "arms",
    [
        [{"type": "object", "properties": [1]}],  # not an object: the arm is not read, the tool left as it is
        [{"type": "object", "properties": {"path": {}}, "required": "path"}],  # a string, not a list
    ],
)
def test_a_hostile_combinator_never_costs_the_other_tools_their_repairs(arms: list[Any]) -> None:
    good = {"name": "good", "inputSchema": {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]}}
    bad = {"name": "bad", "inputSchema": {"anyOf": arms}}
    out = normalizer().tools_list({"tools": [good, bad]}, ERA)
    assert out.result["tools"][0]["inputSchema"] == {"type": "object", "properties": {"a": {"type": "string"}}}
    schema = out.result["tools"][1]["inputSchema"]
    assert schema.get("required", []) in ([], ["path"]) and "p" not in schema.get("required", [])


@pytest.mark.pure
def test_a_data_uri_fills_a_null_mime_type() -> None:
    block = {"type": "image", "data": "data:image/png;base64," + PNG, "mimeType": None}
    fixed = normalizer().tools_call({"content": [block]}, None, None, ERA, 100).result["content"][0]
    assert fixed["mimeType"] == "image/png"
