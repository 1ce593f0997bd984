"""The repair ladder against the whole corpus: every public case that has a tool, and new cases of
each fault kind written here (other names, shapes and nesting), replayed through the proxy with the
three strict clients in JSON and SSE modes.

Through the proxy every client accepts every result; a success result conforms to the schema the
proxy advertised; an error keeps its text; and no value of the original result is lost (each is kept,
repaired in place, or carried in ``_meta``)."""

from __future__ import annotations

import tomllib
from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.errors import DecodeError
from mcp_normalizer.jsoncodec import loads

from .support import (
    HEADERS,
    capture_rewrites,
    conforms,
    contains_value,
    initialize,
    leaves,
    load_cases,
    proxy_for,
    rpc,
    serve,
)
from .test_cases_wire import case_server, replay, steps

#: The two public cases no rule can repair on its own: a tool that never returns the
#: structuredContent it declares, and a const the upstream API outgrew.
UNREPAIRABLE = {"claude-code-serve-null-sc", "decocms-const-mismatch"}
DECLARED = """
[tools.Bash]
drop_output_schema = true
[tools.ASK_PERPLEXITY]
relax = ["/raw/object"]
"""


def config(text: str) -> NormalizerConfig:
    return NormalizerConfig.from_mapping(tomllib.loads(text))


def texts_of(result: dict[str, Any]) -> list[str]:
    content = result.get("content")
    if not isinstance(content, list) and isinstance(result.get("toolResult"), dict):
        content = result["toolResult"].get("content")
    blocks = content if isinstance(content, list) else []
    return [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]


def assert_values_kept(original: dict[str, Any], received: dict[str, Any], where: str) -> None:
    """Every value of the original's structuredContent and every text it carried is still somewhere
    in what the client received (in place, in the text, or in ``_meta``)."""
    for path, value in leaves(original.get("structuredContent")):
        if value is None or value in ([], {}):
            continue
        found = (
            contains_value(received, value)
            or any(isinstance(value, str) and value in text for text in texts_of(received))
            or (isinstance(value, str) and contains_value(received, decoded(value)))  # double encoding undone
        )
        assert found, f"{where}: value {value!r} at /structuredContent{path} lost: {received!r}"
    for text in texts_of(original):
        assert any(text in got for got in texts_of(received)), f"{where}: text {text!r} lost: {received!r}"


def decoded(value: str) -> Any:
    try:
        return loads(value)
    except DecodeError:
        return object()  # matches nothing


def check(cases: list[dict[str, Any]], proxied: dict[str, list[dict[str, Any]]], expect_ok: set[str]) -> None:
    for client, records in proxied.items():
        for case, record in zip(cases, records, strict=True):
            where = f"{case['id']} via {client}"
            if case["id"] not in expect_ok:
                continue
            assert all(step["ok"] for step in record["steps"]), (where, record["steps"])
            advertised = record["steps"][0]["value"]["tools"][0].get("outputSchema")
            result = record["steps"][1]["value"]
            if result.get("isError"):
                assert texts_of(result), f"{where}: an error without text"
            elif advertised is not None:
                assert conforms(result.get("structuredContent"), advertised), where
            assert_values_kept(case["result"], result, where)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_every_public_case_is_accepted_with_the_last_resort_on(mode: str) -> None:
    cases = [case for case in load_cases() if case.get("tool")]
    assert len(cases) >= 50
    with serve(case_server(cases, mode)) as up, proxy_for(up + "/mcp", config('[rules]\nlast_resort = "on"\n')) as px:
        proxied = await replay(px + "/mcp", cases)
    check(cases, proxied, {case["id"] for case in cases})


@pytest.mark.anyio
async def test_with_the_defaults_only_the_unrepairable_cases_are_left_and_logged() -> None:
    cases = [case for case in load_cases() if case.get("tool")]
    with serve(case_server(cases, "sse")) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        proxied = await replay(px + "/mcp", cases)
    check(cases, proxied, {case["id"] for case in cases} - UNREPAIRABLE)
    rejected = {
        case["id"]
        for records in proxied.values()
        for case, record in zip(cases, records, strict=True)
        if not all(step["ok"] for step in record["steps"])
    }
    assert rejected == UNREPAIRABLE
    unrepaired = {line["tool"] for line in log.lines if line["event"] == "unrepaired"}
    assert {"Bash", "ASK_PERPLEXITY"} <= unrepaired


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_by_default_the_unrepairable_cases_are_learned_and_the_next_list_makes_them_conform(mode: str) -> None:
    """Rule ``learn_schema``: the first result is rejected as the server sent it; the scope learns the
    declaration an operator would write (said in the log), announces ``list_changed`` on an SSE stream,
    and the session's next ``tools/list`` advertises the tool so that the same result is accepted."""
    cases = [case for case in load_cases() if case["id"] in UNREPAIRABLE]

    def twice(case: dict[str, Any]) -> list[dict[str, Any]]:
        return [*steps(case), *steps(case)]

    with serve(case_server(cases, mode)) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        url = px + "/mcp"
        sessions = [{"url": url, "headers": {"x-case": c["id"]}, "steps": twice(c)} for c in cases]
        proxied = {
            "ts-sdk-1": await run_node("v1", sessions),
            "ts-client-2": await run_node("v2", sessions),
            "python": [await run_python(url, twice(c), {"x-case": c["id"]}) for c in cases],
        }
    for client, records in proxied.items():
        for case, record in zip(cases, records, strict=True):
            first, relisted, second = record["steps"][1], record["steps"][2], record["steps"][3]
            assert not first["ok"], (client, case["id"], first)  # as the server sent it: still rejected
            assert relisted["ok"] and second["ok"], (client, case["id"], record["steps"])
            tool = relisted["value"]["tools"][0]
            assert tool["_meta"]["dev.mcp-normalizer/original-output-schema"] == case["tool"]["outputSchema"]
            if case["id"] == "claude-code-serve-null-sc":
                assert "outputSchema" not in tool
            else:
                assert conforms(second["value"]["structuredContent"], tool["outputSchema"])
                assert tool["outputSchema"]["properties"]["raw"]["properties"]["object"] == {}
            assert_values_kept(case["result"], second["value"], f"{case['id']} via {client}")
    learned = sorted((line["tool"], line["action"]) for line in log.lines if line["rule"] == "learn_schema")
    sent = "; sent notifications/tools/list_changed" if mode == "sse" else ""  # a JSON body has no room
    # once per session (one per client), and only when something was learned and (SSE) sent
    assert learned == sorted(
        [("Bash", "learned drop_output_schema" + sent), ("ASK_PERPLEXITY", "learned relax /raw/object" + sent)] * 3
    )
    reasons = {line["reason"] for line in log.lines if line["rule"] in ("relax", "drop_output_schema")}
    assert reasons == {"learned from this tool's results in this scope (rule learn_schema)"}


@pytest.mark.anyio
async def test_list_changed_goes_once_on_the_stream_just_before_the_result_that_taught_it() -> None:
    cases = [case for case in load_cases() if case["id"] == "decocms-const-mismatch"]
    call = {"jsonrpc": "2.0", "id": "c-1", "method": "tools/call", "params": {"name": "ASK_PERPLEXITY"}}
    with serve(case_server(cases, "sse")) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, px + "/mcp", **{"x-case": cases[0]["id"]})
            await rpc(http, px + "/mcp", "tools/list", {}, 1, **session)
            bodies = []
            for _ in range(2):
                response = await http.post(px + "/mcp", content=orjson.dumps(call), headers={**HEADERS, **session})
                bodies.append(
                    [orjson.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
                )
    first, again = bodies
    assert first[0] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert first[1]["id"] == "c-1" and first[1]["result"] == cases[0]["result"]  # the result itself as it came
    assert [message.get("id") for message in again] == ["c-1"]  # nothing new learned: no second notice


@pytest.mark.anyio
async def test_per_tool_declarations_repair_the_unrepairable_cases_as_successes() -> None:
    cases = [case for case in load_cases() if case["id"] in UNREPAIRABLE]
    with serve(case_server(cases, "json")) as up, proxy_for(up + "/mcp", config(DECLARED)) as px:
        proxied = await replay(px + "/mcp", cases)
    check(cases, proxied, UNREPAIRABLE)
    for records in proxied.values():
        assert all(not record["steps"][1]["value"].get("isError") for record in records)


def tool(name: str, output: Any = None, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "inputSchema": {"type": "object", "properties": {}}}
    if output is not None:
        found["outputSchema"] = output
    return {**found, **extra}


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


OBJ = {"type": "object"}
#: New cases of each kind: (id, kind, tool, faulty result). None copies a public case.
NEW_CASES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    (
        "gen-promote-nested",
        "missing_structured_content",
        tool(
            "inventory.count",
            {**OBJ, "properties": {"total": {"type": "integer"}, "sites": OBJ}, "required": ["total"]},
        ),
        {"content": text('{\n "total": 7,\n "sites": {"ams": {"racks": [1, 2]}}\n}')},
    ),
    (
        "gen-vacuous-audio",
        "spurious_output_schema",
        tool("voice.say", {**OBJ, "description": "audio", "properties": {"uri": {"type": "string"}}}),
        {"content": [{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}]},
    ),
    (
        "gen-impossible-schema",
        "spurious_output_schema",
        {"name": "never.ok", "inputSchema": {"type": "object"}, "outputSchema": False},
        {"content": text("fine")},
    ),
    (
        "gen-error-list",
        "error_result_validated",
        tool("rows.fetch", {**OBJ, "properties": {"rows": {"type": "array"}}, "required": ["rows"]}),
        {"content": [], "structuredContent": {"errors": [{"code": "E_TIMEOUT", "after_ms": 3000}]}, "isError": True},
    ),
    (
        "gen-error-unflagged",
        "error_not_flagged",
        tool("bucket.list", {**OBJ, "properties": {"keys": {"type": "array"}}, "required": ["keys"]}),
        {"content": text("NOT_FOUND: bucket 'logs-2026' does not exist"), "isError": False},
    ),
    (
        "gen-null-nested",
        "null_for_non_nullable",
        tool(
            "pages.read",
            {
                **OBJ,
                "properties": {
                    "pages": {
                        "type": "array",
                        "items": {
                            **OBJ,
                            "properties": {"items": {"type": "array"}, "cursor": {"type": "string"}},
                            "required": ["items"],
                        },
                    }
                },
            },
        ),
        {"content": text("2 pages"), "structuredContent": {"pages": [{"items": None, "cursor": None}, {"items": [3]}]}},
    ),
    (
        "gen-enum-bool",
        "enum_mismatch",
        tool("flag.get", {**OBJ, "properties": {"enabled": {"enum": ["true", "false"]}, "weight": {"const": 1}}}),
        {"content": text("flag"), "structuredContent": {"enabled": True, "weight": "1"}},
    ),
    (
        "gen-scalar-sc",
        "non_object_structured_content",
        tool("clock.epoch"),
        {"content": text("1764417600"), "structuredContent": 1764417600},
    ),
    (
        "gen-string-root",
        "non_object_output_schema",
        tool("name.get", {"type": "string", "minLength": 1}),
        {"content": text("ada"), "structuredContent": "ada"},
    ),
    (
        "gen-oneof-refs",
        "non_object_output_schema",
        tool(
            "shape.get",
            {
                "oneOf": [{"$ref": "#/$defs/circle"}, {"$ref": "#/$defs/square"}],
                "$defs": {
                    "circle": {**OBJ, "properties": {"r": {"type": "number"}}, "required": ["r"]},
                    "square": {**OBJ, "properties": {"side": {"type": "number"}}, "required": ["side"]},
                },
            },
        ),
        {"content": text("circle"), "structuredContent": {"r": 2.5}},
    ),
    (
        "gen-dangling-in-items",
        "schema_ref_unresolvable",
        tool(
            "graph.nodes",
            {**OBJ, "properties": {"nodes": {"type": "array", "items": {"$ref": "#/definitions/Node"}}}},
        ),
        {"content": text("1 node"), "structuredContent": {"nodes": [{"id": "n1"}]}},
    ),
    (
        "gen-draft07-translate",
        "schema_dialect",
        tool(
            "pair.get",
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                **OBJ,
                "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"$ref": "#/definitions/n"}]}},
                "definitions": {"n": {"type": "integer"}},
            },
        ),
        {"content": text("pair"), "structuredContent": {"pair": ["a", 1]}},
    ),
    (
        "gen-extra-nested",
        "additional_properties",
        tool(
            "user.profile",
            {
                **OBJ,
                "properties": {
                    "user": {**OBJ, "properties": {"id": {"type": "string"}}, "additionalProperties": False}
                },
            },
        ),
        {"content": text("u9"), "structuredContent": {"user": {"id": "u9", "debug_trace": "x1"}}},
    ),
    (
        "gen-date-in-prefix",
        "format_date_time",
        tool(
            "window.get",
            {**OBJ, "properties": {"window": {"type": "array", "prefixItems": [{"type": "string", "format": "date"}]}}},
        ),
        {"content": text("window"), "structuredContent": {"window": ["2026-11"]}},
    ),
    (
        "gen-coerce",
        "type_mismatch",
        tool(
            "metrics.get",
            {
                **OBJ,
                "properties": {"count": {"type": "integer"}, "ratio": {"type": "number"}, "label": {"type": "string"}},
            },
        ),
        {"content": text("metrics"), "structuredContent": {"count": "17", "ratio": "2.50", "label": 99}},
    ),
    (
        "gen-rewrap",
        "wrapped_result",
        tool(
            "files.tree",
            {**OBJ, "properties": {"result": {"type": "array"}}, "required": ["result"], "x-fastmcp-wrap-result": True},
        ),
        {"content": text("tree"), "structuredContent": {"success": True, "code": 200, "payload": [{"path": "/a"}]}},
    ),
    (
        "gen-double-encoded",
        "double_encoded_json",
        tool("cfg.dump"),
        {"content": text("config"), "structuredContent": '{"retries": 3, "backoff": {"base_ms": 100}}'},
    ),
    (
        "gen-no-text",
        "missing_text_content",
        tool("geo.locate", {**OBJ, "properties": {"lat": {"type": "number"}}}),
        {"content": [], "structuredContent": {"lat": 52.37, "lon": 4.89}},
    ),
    (
        "gen-no-content",
        "missing_content_field",
        tool("sys.uptime"),
        {"structuredContent": {"seconds": 86400}},
    ),
    (
        "gen-block-kinds",
        "invalid_content_block",
        tool("doc.render"),
        {"content": [{"type": "markdown", "text": "# Title"}, {"type": "text", "text": None}, "plain words"]},
    ),
    (
        "gen-null-envelope",
        "null_optional_fields",
        tool("ping.pong"),
        {"content": [{"type": "text", "text": "pong", "annotations": None}], "isError": None, "_meta": None},
    ),
    (
        "gen-meta-keys",
        "meta_key_invalid",
        tool("meta.echo", _meta={"-internal": {"v": 1}, "com.example/ok": True}),
        {"content": text("echo"), "_meta": {"trace id": "t-1", "com.example/ok": True}},
    ),
    (
        "gen-shape",
        "invalid_schema_shape",
        {
            "name": "shape.broken",
            "inputSchema": {
                "type": "object",
                "properties": {"ids": {"type": "array"}, "opts": {**OBJ, "properties": []}},
            },
            "outputSchema": {**OBJ, "properties": {"meta": {**OBJ, "properties": None}}, "required": None},
        },
        {"content": text("ok"), "structuredContent": {"meta": {"k": "v"}}},
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_new_cases_of_every_kind_are_accepted_with_the_defaults(mode: str) -> None:
    cases: list[dict[str, Any]] = [{"id": i, "kind": k, "tool": t, "result": r} for i, k, t, r in NEW_CASES]
    assert len({case["kind"] for case in cases}) >= 20
    with serve(case_server(cases, mode)) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        direct = await replay(up + "/mcp", cases, request_timeout=5)
        proxied = await replay(px + "/mcp", cases)
    check(cases, proxied, {case["id"] for case in cases})
    rejected = {
        case["id"]
        for records in direct.values()
        for case, record in zip(cases, records, strict=True)
        if not all(step["ok"] for step in record["steps"])
    }
    assert len(rejected) >= 15, rejected  # most of them break a strict client directly
    rewritten = {line["tool"] for line in log.rewrites()}
    assert {case["tool"]["name"] for case in cases} <= rewritten  # every case needed and got a rewrite


def test_the_rules_touch_only_what_needs_it() -> None:
    """A conforming tool and result pass untouched (no rewrite) through the whole ladder."""
    from mcp_normalizer.normalize import Normalizer

    normalizer = Normalizer(NormalizerConfig())
    good = tool("fine", {**OBJ, "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    listed = normalizer.tools_list({"tools": [good]}, "2025-11-25")
    assert not listed.changed and not listed.records
    result = {"content": text('{"n":1}'), "structuredContent": {"n": 1}}
    called = normalizer.tools_call(result, "fine", listed.entries[0], "2025-11-25", 10)
    assert not called.changed and not called.records
