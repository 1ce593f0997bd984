"""The rules and the engine as pure functions (the wire tests prove them with real clients; these pin
the edge cases that are awkward to put on the wire)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy import ConfigError, NormalizerConfig
from proxy.normalize import Normalizer
from proxy.rules.error_problem import is_problem
from proxy.rules.schemas import convert_openapi_nullable, make_nullable, widen_at

from .support import conforms

PROBLEM_KEY = "org.htcom.protean/problem"
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
    from proxy.rules.base import ORIGINAL_VALUES_KEY, with_original_values

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
    assert contains(out.result, 12345)


def contains(value: Any, needle: Any) -> bool:
    if value == needle:
        return True
    if isinstance(value, dict):
        return any(contains(v, needle) for v in value.values())
    if isinstance(value, list):
        return any(contains(v, needle) for v in value)
    return False
