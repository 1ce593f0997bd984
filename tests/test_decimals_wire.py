"""Decimals on the wire: every value-inspecting rule repairs a result with decimals exactly as it
repairs the same result with integers, with the three real clients, and keeps every number as the
server wrote it; a conforming decimal result passes byte-identical with no log line.

Each case is one fault served twice by a legacy upstream: once with integers, once with the field's
decimals (``12.5``, ``1.10``, ``2.50``, ``1E-7``, written by the upstream exactly so). Through the proxy
the TS SDK 1.32.2, ``@modelcontextprotocol/client`` 2.4.0 and the Python ``mcp`` client must accept
both, the same rules must fire for both, and the proxy's bytes must still spell every decimal as the
upstream did (checked on raw HTTP: JavaScript and Python clients parse ``1.10`` as ``1.1``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning

from .support import capture_rewrites, conforms, initialize, proxy_for, serve

pytestmark = pytest.mark.wire

F = orjson.Fragment
NUMBER = {"type": "number"}
INPUT = {"type": "object"}


@dataclass(frozen=True)
class Case:
    """One fault: the tool's ``outputSchema`` (``None``: none), its result with integers and with
    decimals, the rule that repairs it, and spellings the proxy's bytes must keep."""

    name: str
    schema: Any
    integer: dict[str, Any]
    decimal: dict[str, Any]
    rule: str
    spelled: tuple[bytes, ...] = ()
    declared: dict[str, Any] = field(default_factory=dict)


def _sc(value: Any, *, text: str | None = "ok", error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}] if text is not None else []}
    result["structuredContent"] = value
    if error:
        result["isError"] = True
    return result


WRAPPED = {
    "type": "object",
    "properties": {"result": {"type": "object", "properties": {"total": NUMBER}, "required": ["total"]}},
    "required": ["result"],
    "x-fastmcp-wrap-result": True,
}
CASES = [
    Case(
        "nullable",
        {
            "type": "object",
            "properties": {
                "runtimes": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "scope": {"type": "string"}, "cpu": NUMBER},
                    },
                }
            },
        },
        _sc({"runtimes": [{"name": "a", "scope": 12, "cpu": 2}]}),
        _sc({"runtimes": [{"name": "a", "scope": F(b"12.50"), "cpu": F(b"2.50")}]}),
        "nullable",
        (b"12.50", b"2.50"),
        {"nullable": ["/runtimes/*/scope"]},
    ),
    Case(
        "null_optional_member",
        {"type": "object", "properties": {"total": NUMBER, "note": {"type": "string"}}, "required": ["total"]},
        _sc({"total": 12, "note": None}),
        _sc({"total": F(b"12.50"), "note": None}),
        "null_optional_member",
        (b"12.50",),
    ),
    Case(
        "null_array_to_empty",
        {"type": "object", "properties": {"total": NUMBER, "items": {"type": "array"}}, "required": ["items"]},
        _sc({"total": 12, "items": None}),
        _sc({"total": F(b"1E-7"), "items": None}),
        "null_array_to_empty",
        (b"1E-7",),
    ),
    Case(
        "prune_additional",
        {"type": "object", "properties": {"total": NUMBER}, "additionalProperties": False},
        _sc({"total": 12, "extra": 3}),
        _sc({"total": F(b"1.10"), "extra": F(b"2.50")}),
        "prune_additional",
        (b"1.10", b"2.50"),
    ),
    Case(
        "coerce_to_number",
        {"type": "object", "properties": {"total": NUMBER}, "required": ["total"]},
        _sc({"total": "12"}),
        _sc({"total": "12.50"}),
        "coerce_types",
        (b'"total":12.50',),
    ),
    Case(
        "coerce_to_string",
        {"type": "object", "properties": {"code": {"type": "string"}, "total": NUMBER}},
        _sc({"code": 12, "total": 1}),
        _sc({"code": F(b"1.10"), "total": F(b"0.30000000000000004")}),
        "coerce_types",
        (b'"code":"1.10"', b"0.30000000000000004"),
    ),
    Case(
        "rewrap_result",
        WRAPPED,
        _sc({"ok": True, "data": {"total": 12}}),
        _sc({"ok": True, "data": {"total": 12.5}}),
        "rewrap_result",
        (b'"total":12.5',),
    ),
    Case(
        "rewrap_result_spelled",
        WRAPPED,
        _sc({"ok": True, "status": 200, "data": {"total": 12}}),
        _sc({"ok": True, "status": 200, "data": {"total": F(b"1.10")}}),
        "rewrap_result",
        (b'"total":1.10',),
    ),
    Case(
        "promote_text_json",
        {"type": "object", "properties": {"total": NUMBER}, "required": ["total"]},
        {"content": [{"type": "text", "text": '{"total": 12}'}]},
        {"content": [{"type": "text", "text": '{"total": 12.50}'}]},
        "promote_text_json",
        (b'"structuredContent":{"total": 12.50}',),
    ),
    Case(
        "error_problem",
        {"type": "object", "properties": {"total": NUMBER, "items": {"type": "array"}}, "required": ["items"]},
        _sc({"code": "OVER_BUDGET", "detail": "over budget", "total": 12}, text=None, error=True),
        _sc({"code": "OVER_BUDGET", "detail": "over budget", "total": F(b"12.50")}, text=None, error=True),
        "error_problem",
        (b"12.50",),
    ),
    Case(
        "text_mirror",
        None,
        _sc({"total": 12, "rows": [{"price": 3}]}, text=None),
        _sc({"total": F(b"12.50"), "rows": [{"price": F(b"1E-7")}]}, text=None),
        "text_mirror",
        (b'"text":"{\\"total\\":12.50,\\"rows\\":[{\\"price\\":1E-7}]}"',),
    ),
    Case(
        "object_result",
        None,
        _sc('{"total": 12}'),
        _sc('{"total": 1.10}'),
        "object_result",
        (b'"structuredContent":{"total": 1.10}',),
    ),
    Case(
        "wrap_result",
        {"type": "number"},
        _sc(12),
        _sc(F(b"12.50")),
        "wrap_result",
        (b'"structuredContent":{"result":12.50}',),
    ),
]


def _tool(case: Case, variant: str) -> ToolSpec:
    tool: dict[str, Any] = {"name": f"{case.name}.{variant}", "inputSchema": INPUT}
    if case.schema is not None:
        tool["outputSchema"] = case.schema
    return ToolSpec(tool, returning(case.integer if variant == "int" else case.decimal))


TOOLS = [_tool(case, variant) for case in CASES for variant in ("int", "dec")]
CONFIG = NormalizerConfig.from_mapping(
    {"tools": {f"{c.name}.{v}": c.declared for c in CASES if c.declared for v in ("int", "dec")}}
)
STEPS = [{"op": "listTools"}] + [{"op": "callTool", "name": spec.tool["name"], "arguments": {}} for spec in TOOLS]


async def _raw_calls(url: str) -> dict[str, bytes]:
    """Each tool's response bytes (the JSON body, or the SSE event's data), raw."""
    out: dict[str, bytes] = {}
    async with httpx.AsyncClient(timeout=30) as http:
        session = await initialize(http, url)
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **session}
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        await http.post(url, content=orjson.dumps(listing), headers=headers)
        for n, spec in enumerate(TOOLS, start=2):
            name = spec.tool["name"]
            call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": name, "arguments": {}}}
            response = await http.post(url, content=orjson.dumps(call), headers=headers)
            body = response.content
            if response.headers["content-type"].startswith("text/event-stream"):
                lines = [line[6:] for line in body.split(b"\r\n") if line.startswith(b"data: ")]
                body = lines[-1]
            out[name] = body
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_each_value_rule_repairs_decimals_exactly_as_integers(mode: str) -> None:
    upstream = ScriptedServer(TOOLS, response_mode=mode)  # type: ignore[arg-type]
    with serve(upstream) as up, proxy_for(up + "/mcp", CONFIG) as px, capture_rewrites() as log:
        url = px + "/mcp"
        sessions = [{"url": url, "steps": STEPS}]
        received = {
            "ts-sdk-1": (await run_node("v1", sessions))[0],
            "ts-client-2": (await run_node("v2", sessions))[0],
            "python": await run_python(url, STEPS),
        }
        raw = await _raw_calls(url)
    for client, record in received.items():
        assert all(step["ok"] for step in record["steps"]), (client, record["steps"])
        listed = {tool["name"]: tool for tool in record["steps"][0]["value"]["tools"]}
        for spec, step in zip(TOOLS, record["steps"][1:], strict=True):
            advertised = listed[spec.tool["name"]].get("outputSchema")
            result = step["value"]
            if advertised is not None and not result.get("isError") and "structuredContent" in result:
                assert conforms(result["structuredContent"], advertised), (client, spec.tool["name"])
    fired: dict[str, set[str]] = {}
    for line in log.rewrites(method="tools/call"):
        fired.setdefault(line["tool"], set()).add(line["rule"])
    assert not [line for line in log.lines if line["event"] == "unrepaired"]
    for case in CASES:
        as_int, as_dec = fired.get(f"{case.name}.int", set()), fired.get(f"{case.name}.dec", set())
        assert case.rule in as_int and as_int == as_dec, (case.name, as_int, as_dec)
        body = raw[f"{case.name}.dec"]
        for spelling in case.spelled:
            assert spelling in body, (case.name, spelling, body)


CONFORMING = ToolSpec(
    {
        "name": "ledger",
        "inputSchema": INPUT,
        "outputSchema": {
            "type": "object",
            "properties": {
                "total": NUMBER,
                "rate": {"type": "number", "maximum": 1.10},
                "rows": {"type": "array", "items": {"type": "object", "properties": {"price": NUMBER, "n": NUMBER}}},
                "owner": {"type": "string"},
            },
            "required": ["total", "rows"],
        },
    },
    returning(
        {
            "content": [{"type": "text", "text": "ledger ok"}],
            "structuredContent": {
                "total": F(b"12.50"),
                "rate": F(b"1.10"),
                "rows": [{"price": F(b"1E-7"), "n": F(b"-0")}, {"price": F(b"123456789012345678901234.5")}],
                "owner": "Zoë \U0001f680",
            },
        }
    ),
)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_a_conforming_decimal_result_passes_byte_identical_with_no_log_line(mode: str) -> None:
    upstream = ScriptedServer([CONFORMING], response_mode=mode)  # type: ignore[arg-type]
    steps: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": "ledger", "arguments": {}}]
    with serve(upstream) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        direct = await _raw_ledger(up + "/mcp")
        proxied = await _raw_ledger(px + "/mcp")
        clients = [
            (await run_node("v1", [{"url": px + "/mcp", "steps": steps}]))[0],
            (await run_node("v2", [{"url": px + "/mcp", "steps": steps}]))[0],
            await run_python(px + "/mcp", steps),
        ]
    assert proxied == direct and b"12.50" in proxied and b"1E-7" in proxied
    assert log.lines == []
    for record in clients:
        assert all(step["ok"] for step in record["steps"]), record["steps"]
        assert record["steps"][1]["value"]["structuredContent"]["total"] == 12.5


async def _raw_ledger(url: str) -> bytes:
    async with httpx.AsyncClient(timeout=30) as http:
        session = await initialize(http, url)
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **session}
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ledger", "arguments": {}}}
        response = await http.post(url, content=orjson.dumps(call), headers=headers)
        return response.content
