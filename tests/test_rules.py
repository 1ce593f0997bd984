"""The rules and the engine as pure functions (the wire tests prove them with real clients; these pin
the edge cases that are awkward to put on the wire)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcp_normalizer import ConfigError, NormalizerConfig
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules.error_problem import is_problem
from mcp_normalizer.engine.rules.schemas import convert_openapi_nullable, make_nullable, widen_at

from .support import PROBLEM_KEY, conforms, contains_value

pytestmark = pytest.mark.pure

ORIGINALS = "dev.mcp-normalizer/original-values"
SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array"}, "note": {"type": "string"}, "kind": {"enum": ["a", "b"]}},
    "required": ["items"],
}


def normalizer(text: str = "") -> Normalizer:
    import tomllib

    return Normalizer(NormalizerConfig.from_mapping(tomllib.loads(text)))


def call(n: Normalizer, tool: dict[str, Any], result: dict[str, Any], era: str | None = "2025-11-25") -> Any:
    entry = n.tools_list({"tools": [tool]}, era).entries[0]
    return n.tools_call(result, tool["name"], entry, era, 100)


def tool(schema: Any = SCHEMA, **extra: Any) -> dict[str, Any]:
    return {"name": "t", "inputSchema": {"type": "object"}, **({"outputSchema": schema} if schema else {}), **extra}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"type": "about:blank", "title": "Forbidden", "status": 403}, True),
        ({"title": "x", "detail": "y", "code": "E1"}, True),
        ({"detail": "only one member"}, False),
        ({"type": "t", "status": 500}, False),  # neither title nor detail
        ({"title": "x", "status": "403"}, False),  # status must be a number
        ({"title": "x", "detail": "y", "status": True}, False),
        (["title", "detail"], False),
    ],
)
def test_problem_objects_are_recognised_by_rfc_9457_members(value: Any, expected: bool) -> None:
    assert is_problem(value) is expected


def test_error_problem_merges_meta_never_overwrites_and_never_mutates() -> None:
    problem = {"title": "Conflict", "detail": "taken", "status": 409, "code": 17}
    result = {"content": [], "structuredContent": problem, "isError": True, "_meta": {PROBLEM_KEY: "server's", "k": 1}}
    before = copy.deepcopy(result)
    out = call(normalizer(), tool(), result)
    assert result == before  # the server's objects are untouched
    meta = out.result["_meta"]
    assert meta[PROBLEM_KEY] == "server's" and meta["k"] == 1
    assert meta["dev.mcp-normalizer/original-structured-content"] == problem
    assert out.result["content"] == [{"type": "text", "text": "[17] taken"}]


def test_a_non_conforming_error_that_is_not_a_problem_is_wrapped_with_its_text() -> None:
    result = {"content": [{"type": "text", "text": "nope"}], "structuredContent": {"err": 1}, "isError": True}
    out = call(normalizer(), tool(), result)
    carried = out.result["_meta"][PROBLEM_KEY]
    assert carried["detail"] == "nope" and carried["structuredContent"] == {"err": 1}
    assert out.result["content"] == result["content"]
    assert out.records[0].rewrite.reason == "structuredContent fails outputSchema at /: required"


def test_a_conforming_error_structured_content_is_left_alone() -> None:
    result = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"items": []}, "isError": True}
    assert not call(normalizer(), tool(), result).changed


def test_null_repairs_record_the_original_and_apply_only_if_the_result_then_conforms() -> None:
    fixable = {"content": [], "structuredContent": {"items": None, "note": None}}
    out = call(normalizer(), tool(), fixable)
    assert out.result["structuredContent"] == {"items": []}
    assert out.result["_meta"][ORIGINALS] == {"/items": None, "/note": None}
    assert {r.rewrite.rule for r in out.records} == {"null_array_to_empty", "null_optional_member", "text_mirror"}

    unfixable = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"items": None, "kind": "c"}}
    out = call(normalizer(), tool(), unfixable)
    assert not out.changed
    assert [(r.event, r.rewrite.rule) for r in out.records] == [("unrepaired", "conformance")]


def test_declared_nullable_places_accept_null_and_invalid_values_become_null() -> None:
    n = normalizer('[tools.t]\nnullable = ["/rows/*/scope"]\n')
    schema = {
        "type": "object",
        "properties": {
            "rows": {"type": "array", "items": {"$ref": "#/$defs/row"}},
            "other": {"$ref": "#/$defs/row"},
        },
        "$defs": {"row": {"type": "object", "properties": {"scope": {"type": "string", "enum": ["a"]}}}},
    }
    listed = n.tools_list({"tools": [tool(schema)]}, None)
    advertised = listed.result["tools"][0]["outputSchema"]
    assert conforms({"rows": [{"scope": None}, {"scope": "a"}]}, advertised)
    assert not conforms({"other": {"scope": None}}, advertised)  # the shared definition is not widened
    out = n.tools_call({"content": [], "structuredContent": {"rows": [{"scope": 5}]}}, "t", listed.entries[0], None, 1)
    assert out.result["structuredContent"] == {"rows": [{"scope": None}]}
    assert out.result["_meta"][ORIGINALS] == {"/rows/0/scope": 5}


def test_openapi_nullable_becomes_json_schema_and_data_keywords_are_untouched() -> None:
    schema = {
        "type": "object",
        "properties": {"price": {"type": "number", "nullable": True, "default": {"nullable": True}}},
    }
    converted, places, count = convert_openapi_nullable(schema)
    assert count == 1 and places == [("price",)]
    assert converted["properties"]["price"] == {"type": ["number", "null"], "default": {"nullable": True}}
    places.append(("mine",))  # the caller's list: the answer kept for the same schema is not touched
    again = convert_openapi_nullable(schema)
    assert again == (converted, [("price",)], 1)
    equal = {**schema, "properties": {"price": {"type": "number", "nullable": True}}}  # another object
    assert convert_openapi_nullable(equal)[0]["properties"]["price"] == {"type": ["number", "null"]}


def test_a_schema_changed_in_place_is_listed_as_it_is_now_and_member_order_is_its_own() -> None:
    """The conversion's answer is kept for the same text only: a caller's schema changed in place
    between two listings is converted again, and an equal schema in another member order keeps
    its own order."""
    n = Normalizer(NormalizerConfig())
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string", "nullable": True}}}
    listed = {"name": "t", "inputSchema": {"type": "object"}, "outputSchema": schema}
    n.tools_list({"tools": [listed]}, "2025-06-18")
    schema["properties"]["b"] = {"type": "integer", "nullable": True}
    again = n.tools_list({"tools": [listed]}, "2025-06-18").result["tools"][0]["outputSchema"]
    assert again["properties"] == {"a": {"type": ["string", "null"]}, "b": {"type": ["integer", "null"]}}
    reordered = {"properties": {"a": {"nullable": True, "type": "string"}}, "type": "object"}
    out = n.tools_list({"tools": [{**listed, "outputSchema": reordered}]}, "2025-06-18").result["tools"][0]
    assert list(out["outputSchema"]) == ["properties", "type"]


@pytest.mark.parametrize(
    ("node", "widened"),
    [
        ({"type": "string"}, {"type": ["string", "null"]}),
        ({"type": ["string", "integer"]}, {"type": ["string", "integer", "null"]}),
        ({"type": "string", "enum": ["a"]}, {"type": ["string", "null"], "enum": ["a", None]}),
        ({"const": "a"}, {"anyOf": [{"const": "a"}, {"type": "null"}]}),
        ({"type": ["string", "null"]}, {"type": ["string", "null"]}),
        ({}, {}),
    ],
)
def test_make_nullable(node: Any, widened: Any) -> None:
    assert make_nullable(node) == widened


def test_widen_follows_items_prefix_items_and_compositions() -> None:
    schema = {
        "type": "object",
        "properties": {"t": {"prefixItems": [{"type": "string"}], "items": {"type": "string"}}},
        "allOf": [{"properties": {"t": {"items": {"minLength": 1, "type": "string"}}}}],
    }
    new, count = widen_at(schema, ("t", "*"))
    assert count == 3
    assert conforms({"t": [None, None]}, new) and not conforms({"t": [None, None]}, schema)


def test_text_mirror_skips_apps_tools_and_results_that_already_have_text() -> None:
    result = {"content": [], "structuredContent": {"items": [1]}}
    apps = tool(_meta={"ui": {"resourceUri": "ui://chart"}})
    assert not call(normalizer(), apps, result).changed
    mirrored = call(normalizer(), tool(), result).result
    assert mirrored["content"] == [{"type": "text", "text": '{"items":[1]}'}]
    small = normalizer("[normalizer]\nmirror_max_bytes = 5\n")
    assert not call(small, tool(), result).changed


def test_null_members_depend_on_the_era() -> None:
    result = {"content": [{"type": "text", "text": "x", "annotations": None}], "structuredContent": None, "_meta": None}
    legacy = call(normalizer(), tool(None), result).result
    assert legacy == {"content": [{"type": "text", "text": "x"}]}
    modern = call(normalizer(), tool(None), result, era="2026-07-28").result
    assert modern == {"content": [{"type": "text", "text": "x"}], "structuredContent": None}


def test_null_members_drops_each_null_optional_and_names_each_pointer() -> None:
    """``content: null`` becomes ``[]`` (an error result with it reached clients as no list), a
    block's null members go; the record names every place."""
    result = {
        "content": None,
        "isError": None,
        "_meta": None,
        "structuredContent": None,
    }
    done = call(normalizer(), tool(None), result)
    assert done.result == {"content": []}
    (record,) = (r.rewrite for r in done.records if r.rewrite.rule == "null_members")
    assert record.pointers == ("/_meta", "/isError", "/structuredContent", "/content")
    assert (record.action, record.reason) == ("dropped null optional members", "optional member is null")
    blocks = {
        "content": [{"type": "text", "text": "y"}, {"type": "text", "text": "x", "annotations": None, "_meta": None}]
    }
    done = call(normalizer(), tool(None), blocks)
    assert done.result["content"] == [{"type": "text", "text": "y"}, {"type": "text", "text": "x"}]
    (record,) = (r.rewrite for r in done.records if r.rewrite.rule == "null_members")
    assert record.pointers == ("/content/1/annotations", "/content/1/_meta")


def test_modes_per_rule_per_tool_and_report_only() -> None:
    n = normalizer('[rules]\ntext_mirror = "off"\n[tools.t.rules]\ntext_mirror = "on"\nerror_problem = "report"\n')
    assert n.config.mode("text_mirror", "t").value == "on"
    assert n.config.mode("text_mirror", "other").value == "off"
    error = {"content": [], "structuredContent": {"title": "x", "detail": "y"}, "isError": True}
    out = call(n, tool(), error)
    assert out.records[0].applied is False and out.result["structuredContent"] == error["structuredContent"]
    reporting = normalizer("[normalizer]\nreport_only = true\n")
    out = call(reporting, tool(), error)
    assert not out.changed and out.records and not any(r.applied for r in out.records)


@pytest.mark.parametrize(
    "text",
    [
        "[normalizer]\nmirror_max_bytes = -1\n",
        "[normalizer]\nreport_only = 1\n",
        "[normalizer]\nfetch_timeout = 0\n",
        "[what]\n",
        "[tools.t]\nnullable = '/x'\n",
        "[tools.t]\nunknown = 1\n",
        "[tools.t.rules]\nnullable = 'sometimes'\n",
    ],
)
def test_invalid_configs_are_rejected_with_a_message(text: str) -> None:
    with pytest.raises(ConfigError):
        normalizer(text)


def test_the_first_recorded_original_value_is_never_overwritten() -> None:
    from mcp_normalizer.engine.rules.base import ORIGINAL_VALUES_KEY, with_original_values

    once = with_original_values({"content": []}, {"/a": 12345})
    twice = with_original_values(once, {"/a": None, "/b": None})
    assert twice["_meta"][ORIGINAL_VALUES_KEY] == {"/a": 12345, "/b": None}


def test_a_nullable_place_behind_an_anchor_ref_loses_no_value() -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#row"}}},
        "$defs": {"row": {"$anchor": "row", "type": "object", "properties": {"scope": {"type": "string"}}}},
    }
    n = normalizer('[tools.t]\nnullable = ["/items/*/scope"]\n')
    result = {"content": [], "structuredContent": {"items": [{"scope": 12345}]}}
    out = call(n, tool(schema), result)
    assert contains_value(out.result, 12345)


# Edge cases found by attacking the rules (each failed, raised or lost a value before its fix).


def advertise(n: Normalizer, listed: dict[str, Any], era: str | None = "2025-11-25") -> Any:
    return n.tools_list({"tools": [listed]}, era).result["tools"][0]


def test_a_draft_07_ref_root_keeps_its_definitions() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$ref": "#/definitions/Out",
        "definitions": {"Out": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}},
    }
    advertised = advertise(normalizer(), tool(schema))["outputSchema"]
    assert conforms({"n": 1}, advertised) and not conforms({"n": "x"}, advertised)


def test_a_non_object_input_schema_is_kept_in_meta() -> None:
    advertised = advertise(normalizer(), {"name": "t", "inputSchema": ["x"], "outputSchema": True})
    assert advertised["inputSchema"] == {"type": "object"}
    assert contains_value(advertised["_meta"], ["x"])


def test_only_whole_timestamp_names_become_date_time_strings() -> None:
    schema = {
        "type": "object",
        "properties": {"changes": {"$ref": "#/$defs/UpdatePayload"}, "at": {"$ref": "#/$defs/Timestamp"}},
        "$defs": {"UpdatePayload": {"type": "object"}, "Timestamp": {"type": "object"}},
    }
    advertised = advertise(normalizer(), tool(schema))["outputSchema"]
    assert conforms({"changes": {"name": "x"}, "at": "2026-01-01T00:00:00Z"}, advertised)


def test_a_wrapped_recursive_schema_still_resolves_its_root_refs() -> None:
    schema = {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]}}
    n = normalizer()
    out = call(n, tool(schema), {"content": [{"type": "text", "text": "ok"}], "structuredContent": [1, [2, [3]]]})
    assert out.result["structuredContent"] == {"result": [1, [2, [3]]]}
    assert conforms(out.result["structuredContent"], advertise(n, tool(schema))["outputSchema"])


def test_a_root_that_accepts_no_object_is_wrapped_not_made_unsatisfiable() -> None:
    advertised = advertise(normalizer(), tool({"allOf": [{"type": "array", "items": {"type": "string"}}]}))
    assert conforms({"result": ["a"]}, advertised["outputSchema"])


def test_an_integer_string_beyond_64_bits_is_coerced_exactly_and_a_huge_one_left_alone() -> None:
    from mcp_normalizer.wire.jsoncodec import dumps

    schema = {"type": "object", "properties": {"id": {"type": "integer"}}}
    digits = "123456789012345678901234567890"
    out = call(normalizer(), tool(schema), {"content": [], "structuredContent": {"id": digits}})
    assert f'"id":{digits}'.encode() in dumps(out.result)
    huge = {"content": [], "structuredContent": {"id": "1" * 5000}}
    assert call(normalizer(), tool(schema), huge).result["structuredContent"] == {"id": "1" * 5000}


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        # an edit inside a value another edit replaces
        (
            {
                "type": "object",
                "properties": {"a": {"anyOf": [{"const": "[1]"}, {"type": "array", "items": {"type": "string"}}]}},
            },
            {"a": [1]},
        ),
        # a member removed inside a member another branch removes
        (
            {
                "type": "object",
                "anyOf": [
                    {"type": "object", "properties": {"y": {}}, "additionalProperties": False},
                    {
                        "type": "object",
                        "properties": {"x": {"type": "object", "additionalProperties": False}},
                        "additionalProperties": False,
                        "required": ["q"],
                    },
                ],
            },
            {"x": {"k": 1}},
        ),
    ],
)
def test_overlapping_value_repairs_never_raise_and_lose_nothing(schema: Any, value: Any) -> None:
    out = call(normalizer(), tool(schema), {"content": [], "structuredContent": value})
    assert out.result["_meta"][ORIGINALS]
    assert conforms(out.result["structuredContent"], schema)


def test_a_block_whose_type_is_not_a_string_becomes_text_with_its_meta_kept() -> None:
    result = {"content": [{"type": {"x": 1}, "text": "hi"}, {"type": "note", "text": "n", "_meta": "keep-me"}]}
    blocks = call(normalizer(), tool(None), result).result["content"]
    assert [b["type"] for b in blocks] == ["text", "text"]
    assert contains_value(blocks[0]["_meta"], {"x": 1}) and contains_value(blocks[1]["_meta"], "keep-me")


def test_a_legacy_tool_result_merges_with_the_members_beside_it() -> None:
    result = {
        "toolResult": {"content": [{"type": "text", "text": "hi"}], "_meta": {"inner": 1}, "isError": True},
        "_meta": {"outer": 2},
        "isError": False,
    }
    out = call(normalizer(), tool(None), result).result
    assert out["isError"] is False and out["_meta"]["inner"] == 1 and out["_meta"]["outer"] == 2
    assert out["_meta"]["dev.mcp-normalizer/tool-result-conflicts"] == {"isError": True}


@pytest.mark.parametrize(
    "meta",
    [
        {"dev.mcp-normalizer/invalid-meta": "server value", "_bad": 1},
        {"dev.mcp-normalizer/original-values": "server value"},
        "server value",
    ],
)
def test_a_server_value_at_the_proxys_own_meta_keys_is_set_aside_not_lost(meta: Any) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    result = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": "x", "b": 2}, "_meta": meta}
    out = call(normalizer(), tool(schema), result).result
    assert out["structuredContent"] == {"a": "x"} and out["_meta"][ORIGINALS]["/b"] == 2
    assert contains_value(out["_meta"], "server value")


def test_an_error_result_with_a_string_meta_keeps_it_when_meta_keys_only_reports() -> None:
    n = normalizer('[rules]\nmeta_keys = "report"\n')
    result = {"isError": True, "content": [], "structuredContent": {"err": 1}, "_meta": "trace-abc"}
    out = call(n, tool({"type": "object", "required": ["files"]}), result).result
    assert contains_value(out["_meta"], "trace-abc") and contains_value(out["_meta"], {"err": 1})


def test_a_group_half_in_report_mode_changes_nothing_unless_the_rest_conforms_alone() -> None:
    n = normalizer('[rules]\nnull_optional_member = "report"\n')
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    result = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": None, "b": "5"}}
    out = call(n, tool(schema), result)
    assert out.result is result
    assert [r.applied for r in out.records if r.event == "rewrite"] == [False, False]
    assert [r.event for r in out.records][-1] == "unrepaired"


def test_a_malformed_content_is_not_replaced_by_the_text_mirror() -> None:
    n = normalizer('[rules]\ncontent_blocks = "off"\n')
    result = {"content": "hello", "structuredContent": {"a": 1}}
    assert call(n, tool({"type": "object"}), result).result is result


def test_a_wrapped_problem_without_text_says_what_the_server_sent() -> None:
    result = {"isError": True, "content": [], "structuredContent": {"error": "disk full", "code": "ENOSPC"}}
    out = call(normalizer(), tool({"type": "object", "required": ["files"]}), result).result
    assert "disk full" in out["content"][0]["text"]


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("Failed: 0, passed: 12", False),
        ("Error: 0", False),
        ("500 items processed - done", False),
        ("error: 404 not found", True),
        ("not_found: no such memo", True),
        ("404 Not Found - /memos/1", True),
    ],
)
def test_error_flag_tells_error_messages_from_tallies(text: str, flagged: bool) -> None:
    schema = {"type": "object", "properties": {"passed": {"type": "integer"}}, "required": ["passed"]}
    out = call(normalizer(), tool(schema), {"content": [{"type": "text", "text": text}]}).result
    assert (out.get("isError") is True) is flagged


def test_a_fractional_multiple_of_is_judged_as_the_clients_judge_it() -> None:
    from mcp_normalizer.engine.schema import SchemaCompiler

    compiled = SchemaCompiler().compile({"type": "number", "multipleOf": 0.01})
    assert not compiled.is_valid(19.99)  # Ajv and python-jsonschema: 19.99 / 0.01 is not an integer
    assert compiled.is_valid(0.3)
