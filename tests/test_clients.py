"""Repairs only some clients need, applied by who is asking (``mcp_normalizer.engine.rules.clients``): a client known
to accept the server's valid bytes keeps them; an unknown one gets what every client accepts, with
every removed keyword kept in the tool's ``_meta``. On the wire: the Python ``mcp`` client names
itself ``mcp`` in ``initialize`` (or, on 2026-07-28, in every request's ``_meta``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules.clients import (
    CLIENT_FAULTS,
    CONFORMANCE,
    PYTHON_SDK,
    UNKNOWN,
    ClientProfile,
    profile_for,
)

from .support import PROBLEM_KEY, capture_rewrites, proxy_for, serve

KEPT = "dev.mcp-normalizer/original-keywords"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"
PYTHON = profile_for({"name": PYTHON_SDK, "version": "2.3.0"})
SUITE = profile_for({"name": CONFORMANCE, "version": "1.0.0"})


def listed(tool: dict[str, Any], client: ClientProfile) -> dict[str, Any]:
    out = Normalizer(NormalizerConfig()).tools_list({"tools": [tool]}, "2025-11-25", client)
    advertised: dict[str, Any] = out.result["tools"][0]
    return advertised


@pytest.mark.pure
@pytest.mark.parametrize(
    "info", [None, "mcp", 7, [], {}, {"name": None}, {"name": 1}, {"version": "1"}, {"name": "claude-code"}]
)
def test_a_client_the_table_does_not_know_needs_every_repair(info: Any) -> None:
    profile = profile_for(info)
    assert all(profile.needs(fault) for fault in CLIENT_FAULTS)
    assert profile.accepts == UNKNOWN.accepts


@pytest.mark.pure
def test_the_python_sdk_and_the_suite_are_known_by_name_and_case() -> None:
    assert not any(PYTHON.needs(fault) for fault in CLIENT_FAULTS)
    assert not SUITE.needs("schema_dialect_2020") and not SUITE.needs("schema_ref_local")
    assert SUITE.needs("error_result_validated")  # nobody showed the suite accepts it: repaired
    assert profile_for({"name": "MCP"}).accepts == frozenset()  # names are exact
    assert profile_for({"name": "x" * 10_000}).label == "x" * 128  # bounded in the log


TOOL_2020: dict[str, Any] = {
    "name": "geo",
    "inputSchema": {
        "$schema": DRAFT_2020,
        "type": "object",
        "properties": {"home": {"$ref": "#/$defs/address"}, "nick": {"$ref": "#/$defs/missing"}},
        "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}},
        "additionalProperties": False,
    },
}


@pytest.mark.pure
def test_a_2020_12_input_schema_is_kept_for_a_client_that_accepts_it() -> None:
    out = listed(TOOL_2020, SUITE)
    schema = out["inputSchema"]
    assert schema["$schema"] == DRAFT_2020 and schema["$defs"] == TOOL_2020["inputSchema"]["$defs"]
    assert schema["properties"]["home"] == {"$ref": "#/$defs/address"}
    # a dangling $ref breaks every client: dropped for all, the $ref kept in _meta
    assert schema["properties"]["nick"] == {}
    assert out["_meta"][KEPT] == {"/inputSchema/properties/nick/$ref": "#/$defs/missing"}


@pytest.mark.pure
def test_for_an_unknown_client_the_2020_12_schema_is_made_plain_and_nothing_is_lost() -> None:
    out = listed(TOOL_2020, UNKNOWN)
    schema = out["inputSchema"]
    assert "$schema" not in schema and "$defs" not in schema
    assert schema["properties"]["home"] == TOOL_2020["inputSchema"]["$defs"]["address"]
    assert out["_meta"][KEPT] == {
        "/inputSchema/$schema": DRAFT_2020,
        "/inputSchema/$defs": TOOL_2020["inputSchema"]["$defs"],
        "/inputSchema/properties/nick/$ref": "#/$defs/missing",
    }
    assert schema["additionalProperties"] is False


TOOL_CYCLE: dict[str, Any] = {
    "name": "walk_list",
    "inputSchema": {
        "type": "object",
        "properties": {"head": {"$ref": "#/$defs/Node", "description": "caf\u00e9 \u2713"}, "n": {"type": "integer"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "number", "minimum": 1e-7, "maximum": 12.5},
                    "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                },
                "required": ["value"],
            }
        },
    },
}


def _put_back(tool: dict[str, Any]) -> Any:
    """The listed ``inputSchema`` with each node kept in ``_meta`` put back at its pointer, outermost first."""
    schema = copy.deepcopy(tool["inputSchema"])
    for pointer, value in sorted(tool["_meta"][KEPT].items(), key=lambda item: item[0].count("/")):
        steps = [int(s) if s.isdigit() else s for s in pointer.split("/")[2:]]
        if not steps:
            schema = copy.deepcopy(value)
            continue
        node = schema
        for step in steps[:-1]:
            node = node[step]
        node[steps[-1]] = copy.deepcopy(value)
    return schema


@pytest.mark.pure
def test_for_an_unknown_client_a_recursive_ref_inlined_one_level_keeps_each_ref_node_in_meta() -> None:
    """The recursive ``$defs`` stays; each outermost node whose ``$ref`` was inlined (at the
    property, and inside the definition itself) is kept in ``_meta`` as the server wrote it, so the
    nodes put back give the server's schema (issue 39: nothing of the schema lost)."""
    out = listed(TOOL_CYCLE, UNKNOWN)
    schema = out["inputSchema"]
    assert "$ref" not in schema["properties"]["head"] and schema["$defs"]  # inlined; the $defs still referenced
    kept = out["_meta"][KEPT]
    assert kept["/inputSchema/properties/head"] == TOOL_CYCLE["inputSchema"]["properties"]["head"]
    assert _put_back(out) == TOOL_CYCLE["inputSchema"]
    assert listed(TOOL_CYCLE, PYTHON) == TOOL_CYCLE  # a client that resolves $defs: the server's bytes


TOOL_07: dict[str, Any] = {
    "name": "echo",
    "inputSchema": {"type": "object"},
    "outputSchema": {
        "$schema": DRAFT_07,
        "type": "object",
        "properties": {"when": {"type": "string", "format": "date-time"}, "pair": {"items": [{"type": "number"}]}},
        "required": ["when"],
    },
    "_meta": {"server/own": 1},
}


@pytest.mark.pure
def test_a_draft_07_output_schema_and_its_formats_are_kept_for_the_python_sdk() -> None:
    assert listed(TOOL_07, PYTHON) == TOOL_07


@pytest.mark.pure
def test_for_an_unknown_client_draft_07_is_translated_and_the_listed_schema_kept() -> None:
    out = listed(TOOL_07, UNKNOWN)
    schema = out["outputSchema"]
    assert "$schema" not in schema and schema["properties"]["pair"] == {"prefixItems": [{"type": "number"}]}
    assert "format" not in schema["properties"]["when"]
    kept = out["_meta"][KEPT]
    assert kept["/outputSchema"] == TOOL_07["outputSchema"]  # keywords were translated: all of it
    assert kept["/outputSchema/$schema"] == DRAFT_07
    # (the format dropped after it is inside that value: not kept again)
    assert "/outputSchema/properties/when/format" not in kept
    assert kept["/outputSchema"]["properties"]["when"]["format"] == "date-time"
    assert out["_meta"]["server/own"] == 1


@pytest.mark.pure
def test_an_error_the_python_sdk_shows_as_sent_is_left_for_it() -> None:
    tool = {"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "required": ["n"]}}
    result = {"content": [{"type": "text", "text": "bad input"}], "structuredContent": {"e": 1.5e300}, "isError": True}
    normalizer = Normalizer(NormalizerConfig())
    entry = normalizer.tools_list({"tools": [tool]}, "2025-11-25").entries[0]
    assert normalizer.tools_call(result, "t", entry, "2025-11-25", 100, client=PYTHON).result is result
    moved = normalizer.tools_call(result, "t", entry, "2025-11-25", 100, client=UNKNOWN).result
    assert "structuredContent" not in moved and moved["_meta"][PROBLEM_KEY]["structuredContent"] == {"e": 1.5e300}
    problem = {**result, "structuredContent": {"title": "Conflict", "detail": "taken", "status": 409}}
    for client in (PYTHON, UNKNOWN):  # the Protean contract: a problem object goes to _meta for everyone
        out = normalizer.tools_call(problem, "t", entry, "2025-11-25", 100, client=client).result
        assert out["_meta"][PROBLEM_KEY] == problem["structuredContent"]


def _server(response_mode: str) -> ScriptedServer:
    tools = [
        ToolSpec(TOOL_07, returning({"content": [{"type": "text", "text": "ok"}], "structuredContent": {"when": "x"}})),
        ToolSpec(
            {"name": "fail", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "required": ["n"]}},
            returning(
                {"content": [{"type": "text", "text": "no"}], "structuredContent": {"why": "é"}, "isError": True}
            ),
        ),
    ]
    return ScriptedServer(tools, response_mode="sse" if response_mode == "sse" else "json")


STEPS = [{"op": "listTools"}, {"op": "callTool", "name": "fail"}]


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("response_mode", ["sse", "json"])
async def test_on_the_wire_the_python_sdk_keeps_the_servers_bytes_and_other_clients_get_repairs(
    response_mode: str,
) -> None:
    with serve(_server(response_mode)) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        python = await run_python(px + "/mcp", STEPS)
        renamed = await run_python(px + "/mcp", STEPS, client_name="some-host")
        node = await run_node("v1", [{"url": px + "/mcp", "steps": STEPS, "clientName": "mcp"}])
    for record in (python, renamed):
        assert all(step["ok"] for step in record["steps"]), record
    tools = {tool["name"]: tool for tool in python["steps"][0]["value"]["tools"]}
    assert tools["echo"]["outputSchema"] == TOOL_07["outputSchema"]
    assert python["steps"][1]["value"]["structuredContent"] == {"why": "é"}
    other = {tool["name"]: tool for tool in renamed["steps"][0]["value"]["tools"]}
    assert "$schema" not in other["echo"]["outputSchema"]
    assert other["echo"]["_meta"][KEPT]["/outputSchema/$schema"] == DRAFT_07
    assert "structuredContent" not in renamed["steps"][1]["value"]
    assert renamed["steps"][1]["value"]["_meta"][PROBLEM_KEY]["structuredContent"] == {"why": "é"}
    # The TS SDK 1.x client accepts a kept draft-07 schema; naming itself mcp keeps the error as sent,
    # which it then rejects: the name is self-reported, and only ever keeps the server's own bytes.
    assert node[0]["steps"][0]["value"]["tools"][0]["outputSchema"] == TOOL_07["outputSchema"]
    assert not node[0]["steps"][1]["ok"] and "-32602" in node[0]["steps"][1]["error"]["message"]
    clients = {(line["rule"], line["client"]) for line in log.lines}
    assert ("schema_dialect", "some-host") in clients and ("error_problem", "some-host") in clients
    assert not any(client == "mcp" for _, client in clients)
