"""Issue 40, items 1 and 2: every result's information reaches the model of the host the proxy
serves, as that host reads it (``reads`` and ``validates_structured`` in ``mcp_normalizer/hosts.toml``).

- Gemini CLI (its model reads only ``content``): a success whose text says less than its
  ``structuredContent`` gets the JSON as a text block after the text (``text_mirror``); a text that
  names every value, an MCP Apps tool, a value over ``mirror_max_bytes`` keep their bytes.
- Codex (reads ``structuredContent`` first, validates none of it): an error's problem stays in
  ``structuredContent``, a success's ``null``, extra member and error's non-conforming value too.
- Claude Code (reads ``structuredContent`` first, validates): an error's problem leaves
  ``structuredContent`` (its validator would refuse it) and its whole JSON goes into the text.
- The Python SDK client (no host profile) gets what it always got (and, for every public case,
  ``tests/test_public_bytes.py``).

Gemini CLI and Claude Code embed the TS SDK 1.x client: that client, sending their ``clientInfo``,
is the client here. Codex's rmcp client validates nothing, so a raw HTTP client stands in for it.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.rules.clients import UNKNOWN, profile_for
from mcp_normalizer.engine.rules.host_profiles import HOSTS, PROFILES
from mcp_normalizer.engine.rules.text_mirror import says_less
from mcp_normalizer.wire.jsoncodec import Codec

from .support import HEADERS, proxy_for, serve, tool

GEMINI = "gemini-cli-mcp-client"
CODEX = "codex-mcp-client"
CLAUDE = "claude-code"
PROBLEM_KEY = "org.htcom.protean/problem"

INVOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "invoice": {"type": "string"},
        "total": {"type": "number"},
        "currency": {"type": "string"},
        "lines": {"type": "array", "items": {"type": "object"}},
        "ledger_ref": {"type": "integer"},
    },
    "required": ["invoice", "total", "currency"],
}
INVOICE = {
    "invoice": "INV-2026-0042",
    "total": 12.5,
    "currency": "\u20ac",
    "lines": [{"sku": "caf\u00e9-\u6771\u4eac", "qty": 3, "rate": 1e-7, "discount": None}],
    "ledger_ref": 12345678901234567890,
}
CREATED = {"content": [{"type": "text", "text": "Invoice created."}], "structuredContent": INVOICE}
NAMED_TEXT = "INV-2026-0042 caf\u00e9-\u6771\u4eac 3 1e-7 null 12.5 \u20ac 12345678901234567890"
NAMED = {"content": [{"type": "text", "text": NAMED_TEXT}], "structuredContent": INVOICE}
PROBLEM = {
    "type": "https://errors.example.com/forbidden",
    "title": "Forbidden",
    "status": 403,
    "detail": "Account 12345 may not read ledger L-7 (\u00e9tape 2).",
    "code": "E_LEDGER_FORBIDDEN",
    "gate": "ledger-acl",
}
STRICT = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
    "required": ["id"],
    "additionalProperties": False,
}
TOOLS = [
    ToolSpec(tool("create_invoice", INVOICE_SCHEMA), returning(CREATED)),
    ToolSpec(tool("named_invoice", INVOICE_SCHEMA), returning(NAMED)),
    ToolSpec(
        tool("invoice_view", INVOICE_SCHEMA, _meta={"ui": {"resourceUri": "ui://invoices/view"}}), returning(CREATED)
    ),
    ToolSpec(tool("ledger"), returning({"content": [], "structuredContent": PROBLEM, "isError": True})),
    ToolSpec(
        tool("get_user", STRICT),
        returning(
            {
                "content": [{"type": "text", "text": "user u1"}],
                "structuredContent": {"id": "u1", "name": None, "x": 12.5},
            }
        ),
    ),
    ToolSpec(
        tool("get_things", STRICT),
        returning(
            {
                "content": [{"type": "text", "text": "NOT_FOUND"}],
                "structuredContent": {"message": "nope", "at": 1e-7},
                "isError": True,
            }
        ),
    ),
    ToolSpec(  # ts-sdk-iserror-sc-validated: the error's text is JSON, its structuredContent says more
        tool("get_json_error", {"type": "object", "properties": {"things": {"type": "array"}}, "required": ["things"]}),
        returning(
            {
                "content": [{"type": "text", "text": '{"err":"NOT_FOUND"}'}],
                "structuredContent": {"err": {"code": "NOT_FOUND", "message": "nope \u00e9", "retry": 12.5}},
                "isError": True,
            }
        ),
    ),
]


def server() -> ScriptedServer:
    return ScriptedServer(TOOLS, response_mode="json")


def steps(*names: str) -> list[dict[str, Any]]:
    return [{"op": "listTools"}, *({"op": "callTool", "name": name, "arguments": {}} for name in names)]


def values(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The results of a session's calls (the steps after the listing)."""
    called = record["steps"][1:]
    assert all(step["ok"] for step in called), called
    return [step["value"] for step in called]


def texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block.get("type") == "text"]


async def raw_session(url: str, name: str, calls: list[str]) -> list[dict[str, Any]]:
    """A client that validates nothing (as Codex's rmcp): initialize as ``name``, list, call; the results."""
    async with httpx.AsyncClient(timeout=30) as http:
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": name, "version": "0.171.0"},
        }
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        opened = await http.post(url, content=orjson.dumps(body), headers=HEADERS)
        session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        await http.post(url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=session)
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        await http.post(url, content=orjson.dumps(listing), headers=session)
        found = []
        for i, call in enumerate(calls, 2):
            request = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": call, "arguments": {}}}
            answer = await http.post(url, content=orjson.dumps(request), headers=session)
            found.append(answer.json()["result"])
        return found


@pytest.mark.pure
def test_the_hosts_facts_say_what_each_model_reads_and_whether_it_validates() -> None:
    assert PROFILES["gemini-cli"].content_only and not PROFILES["gemini-cli"].keeps_structured
    assert PROFILES["codex"].keeps_structured and PROFILES["codex"].validates_structured is False
    assert PROFILES["claude-code"].validates_structured is True and not PROFILES["claude-code"].keeps_structured
    for host in HOSTS:  # a fact has its source; a host no source speaks of is treated as validating
        assert (host.validates_structured is None) == (host.validates_structured_source == "")
    for client in (UNKNOWN, profile_for({"name": "mcp"}), profile_for({"name": "gemini-cli"})):
        assert not (client.content_only or client.keeps_structured or client.reads_known)
    assert profile_for({"name": GEMINI}).content_only and profile_for({"name": CODEX}).keeps_structured


@pytest.mark.pure
def test_says_less_when_a_value_is_in_no_text_and_the_json_is_not_there() -> None:
    codec = Codec()
    compact = codec.dumps(INVOICE).decode()
    assert says_less(["Invoice created."], INVOICE, compact, codec)
    assert not says_less([NAMED_TEXT], INVOICE, compact, codec)  # every value, in its own words
    assert not says_less(["Created:", compact], INVOICE, compact, codec)
    assert not says_less([json.dumps(INVOICE, indent=2, ensure_ascii=False)], INVOICE, compact, codec)
    assert says_less([NAMED_TEXT.replace("1e-7", "0.0000001")], INVOICE, compact, codec)  # 1e-7 as sent
    assert not says_less(["nothing"], {}, "{}", codec)


@pytest.mark.wire
@pytest.mark.anyio
async def test_gemini_cli_gets_the_data_its_text_does_not_say_and_the_sdk_client_gets_the_servers_bytes() -> None:
    calls = steps("create_invoice", "named_invoice", "invoice_view")
    with serve(server()) as up, proxy_for(up + "/mcp") as px:
        (gemini,) = await run_node("v1", [{"url": px + "/mcp", "clientName": GEMINI, "steps": calls}])
        sdk = await run_python(px + "/mcp", calls)
    created, named, view = values(gemini)
    assert texts(created)[0] == "Invoice created."  # the server's text stays, first
    assert json.loads(texts(created)[1]) == INVOICE  # (the JS client reads the big integer as a double)
    assert "\u20ac" in texts(created)[1] and "12345678901234567890" in texts(created)[1]  # as sent
    assert named["content"] == NAMED["content"]  # its text says every value
    assert view["content"] == CREATED["content"]  # an MCP Apps tool's data feeds its UI, not the model
    for result, sent in zip(values(sdk), (CREATED, NAMED, CREATED), strict=True):
        assert result["content"] == sent["content"]


@pytest.mark.wire
@pytest.mark.anyio
async def test_codex_reads_structured_content_as_the_server_sent_it_and_strict_clients_the_conforming_shape() -> None:
    with serve(server()) as up, proxy_for(up + "/mcp") as px:
        codex = await raw_session(px + "/mcp", CODEX, ["ledger", "get_user", "get_things"])
        plain = await raw_session(px + "/mcp", "mcp", ["ledger", "get_user", "get_things"])
    ledger, user, things = codex
    assert ledger["structuredContent"] == PROBLEM and ledger["isError"] is True  # every member, where Codex reads
    assert ledger["_meta"][PROBLEM_KEY] == PROBLEM  # the Protean contract's place too
    assert texts(ledger) == ["[E_LEDGER_FORBIDDEN] Account 12345 may not read ledger L-7 (\u00e9tape 2)."]
    assert user["structuredContent"] == {"id": "u1", "name": None, "x": 12.5}  # the null, the extra member
    assert things["structuredContent"] == {"message": "nope", "at": 1e-7}
    # the Python SDK client's name: as before, the conforming shape (originals in _meta)
    ledger, user, things = plain
    assert "structuredContent" not in ledger and ledger["_meta"][PROBLEM_KEY] == PROBLEM
    assert user["structuredContent"] == {"id": "u1"}
    assert things["structuredContent"] == {"message": "nope", "at": 1e-7}  # the Python SDK shows it


@pytest.mark.wire
@pytest.mark.anyio
async def test_claude_code_reads_an_errors_whole_problem_in_its_text() -> None:
    with serve(server()) as up, proxy_for(up + "/mcp") as px:
        (claude,) = await run_node("v1", [{"url": px + "/mcp", "clientName": CLAUDE, "steps": steps("ledger")}])
        (sdk,) = await run_node("v1", [{"url": px + "/mcp", "steps": steps("ledger")}])
    (ledger,) = values(claude)
    assert ledger["isError"] is True and "structuredContent" not in ledger  # its validator would refuse it
    first, *rest = texts(ledger)[0].split("\n", 1)
    assert first == "[E_LEDGER_FORBIDDEN] Account 12345 may not read ledger L-7 (\u00e9tape 2)."
    assert json.loads(rest[0]) == PROBLEM  # type, title, status and the extension members reach the model
    (plain,) = values(sdk)
    assert texts(plain) == [first]  # a client without a host profile: as before


@pytest.mark.wire
@pytest.mark.anyio
async def test_gemini_cli_reads_an_errors_whole_structured_content_first_in_a_text_that_is_not_json() -> None:
    """Gemini CLI makes a first text block holding JSON an error's ``structuredContent`` and its SDK
    then refuses it (hosts.toml): the proxy's block, with every member, goes first and is no JSON."""
    calls = steps("get_json_error")
    with serve(server()) as up, proxy_for(up + "/mcp") as px:
        (gemini,) = await run_node("v1", [{"url": px + "/mcp", "clientName": GEMINI, "steps": calls}])
        (sdk,) = await run_node("v1", [{"url": px + "/mcp", "steps": calls}])
    (result,) = values(gemini)
    first, server_text = texts(result)
    assert server_text == '{"err":"NOT_FOUND"}' and "structuredContent" not in result
    summary, whole = first.split("\n", 1)
    assert summary == 'Tool error: {"err":"NOT_FOUND"}'
    problem = json.loads(whole)
    assert problem["structuredContent"] == {"err": {"code": "NOT_FOUND", "message": "nope \u00e9", "retry": 12.5}}
    (plain,) = values(sdk)
    assert texts(plain) == ['{"err":"NOT_FOUND"}']  # as before
