"""Results a host cannot take (issue 40, items 3 and 4), on the wire, with the host's ``clientInfo``.

- Claude Code before 2.1.332 refuses a ``structuredContent`` that is no JSON object ("expects
  record"), which 2026-07-28 allows (SEP-2106) and Claude Code negotiates (2.1.332 takes it: a real
  run, tests/test_host_claude.py): for those versions the tool's array ``outputSchema``
  is advertised wrapped as ``{result: <schema>}`` and the array sent as ``{result: [...]}`` (every
  value kept, one level down; the advertised schema accepts what it then receives); every other
  client gets the server's bytes.
- A ``resource_link`` becomes a text naming it for Codex before 0.171.0, ChatGPT and Kiro CLI.
- Claude Desktop, Cowork and claude.ai refuse every call to a tool whose ``outputSchema`` declares
  draft-07 (the TS SDK v1 stamps it): every Claude ``clientInfo`` (and an unknown client) gets it in
  2020-12, over HTTP and through the stdio wrapper (``mcp-normalizer stdio -- CMD``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from jsonschema import Draft202012Validator

from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.rules.host_content import ORIGINAL_BLOCK_KEY
from mcp_normalizer.engine.rules.host_faults import CONSTRAINTS, RESOURCE_LINK, STRUCTURED_NOT_OBJECT
from mcp_normalizer.engine.rules.host_profiles import PROFILES

from .support import EXE, HEADERS, MODERN, ROOT, headers, proxy_for, run_cli, serve

pytestmark = pytest.mark.wire

ROWS = [
    {"id": 1, "prix": 12.5, "note": None, "nested": {"deep": [None, {"x": 1e-7}]}},
    {"id": 123456789012345678901234567890, "prix": 0.1, "clé": "caf\u00e9 \u2713"},
]
ROWS_SCHEMA = {"type": "array", "items": {"type": "object"}}
ROWS_TOOL = {"name": "rows", "inputSchema": {"type": "object", "properties": {}}, "outputSchema": ROWS_SCHEMA}
ROWS_RESULT = {"content": [{"type": "text", "text": "two rows"}], "structuredContent": ROWS}
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_TOOL = {
    "name": "count",
    "inputSchema": {"type": "object", "properties": {}},
    "outputSchema": {
        "$schema": DRAFT_07,
        "type": "object",
        "properties": {"n": {"type": "integer"}, "pair": {"type": "array", "items": [{"type": "string"}]}},
        "definitions": {"unit": {"type": "string"}},
    },
}
DRAFT_RESULT = {
    "content": [{"type": "text", "text": '{"n":3,"pair":["a"]}'}],
    "structuredContent": {"n": 3, "pair": ["a"]},
}
#: Every clientInfo name of the Claude hosts (hosts.toml).
CLAUDE_NAMES = [
    name
    for profile in ("claude-code", "claude-desktop", "claude-connectors")
    for name in PROFILES[profile].client_names
]
STEPS: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": "count", "arguments": {}}]


def params(client: str, version: str = "2.1.290", **values: Any) -> dict[str, Any]:
    """2026-07-28 request params naming the client and its version (its clientInfo on every request)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": version},
    }
    return {**values, "_meta": meta}


async def modern(
    url: str, client: str, method: str, rid: int, tool: str | None = None, version: str = "2.1.290", **values: Any
) -> Any:
    """One 2026-07-28 request from ``client`` (``tool``: the ``mcp-name`` header); its result."""
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params(client, version, **values)}
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(url, content=orjson.dumps(body), headers={**HEADERS, **headers(method, tool)})
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")][-1]
    return json.loads(text)["result"]


# -- an array structuredContent for Claude Code ------------------------------------------------------


@pytest.mark.anyio
async def test_claude_code_gets_an_array_result_wrapped_with_the_schema_that_accepts_it() -> None:
    oracle = CONSTRAINTS[STRUCTURED_NOT_OBJECT].violates
    server = ScriptedServer([ToolSpec(ROWS_TOOL, returning(ROWS_RESULT))], response_mode="json")
    with serve(server) as up, proxy_for(up + "/mcp") as px:
        seen: dict[tuple[str, str], tuple[Any, Any]] = {}
        for where, url in (("direct", up + "/mcp"), ("proxy", px + "/mcp")):
            for client, version in (
                ("claude-code", "2.1.290"),
                ("claude-ai", "0.14.10"),  # Claude Desktop (cases/faults.md: "Tool execution failed")
                ("mcp", "1"),
                ("mcp-normalizer-test", "1"),
            ):
                (tool,) = (await modern(url, client, "tools/list", 1, version=version))["tools"]
                result = await modern(url, client, "tools/call", 2, "rows", version, name="rows", arguments={})
                seen[where, client] = tool, result
            # Claude Code 2.1.332 takes it (a real run: tests/test_host_claude.py): the server's own
            (tool,) = (await modern(url, "claude-code", "tools/list", 1, version="2.1.332"))["tools"]
            result = await modern(url, "claude-code", "tools/call", 2, "rows", "2.1.332", name="rows", arguments={})
            seen[where, "claude-code 2.1.332"] = tool, result
    for key in (("proxy", "claude-code"), ("proxy", "claude-code 2.1.332")):  # (issue 40: its model reads
        # structuredContent with JSON.parse, so the proxy names the integer past 2**53 exactly beside it)
        tool, result = seen[key]
        exact = result["content"].pop()
        assert exact["resource"]["uri"] == "urn:dev.mcp-normalizer:exact-numbers", exact
        assert exact["resource"]["text"].endswith('1/id":123456789012345678901234567890}'), exact
    direct_tool, direct_result = seen["direct", "claude-code"]
    assert oracle(direct_result) and direct_tool["outputSchema"] == ROWS_SCHEMA  # the oracle bites
    assert seen["proxy", "claude-ai"] == seen["proxy", "claude-code"]
    tool, result = seen["proxy", "claude-code"]
    assert not oracle(result)
    assert result["structuredContent"] == {"result": ROWS}  # every value, one level down
    assert result["content"] == ROWS_RESULT["content"]
    schema = tool["outputSchema"]
    assert schema["properties"]["result"] == ROWS_SCHEMA and schema["x-fastmcp-wrap-result"] is True
    assert Draft202012Validator(schema).is_valid(result["structuredContent"])
    for client in ("mcp", "mcp-normalizer-test", "claude-code 2.1.332"):  # the server's own
        assert seen["proxy", client] == seen["direct", client]
        assert seen["proxy", client][1]["structuredContent"] == ROWS


# -- a resource_link for the hosts on rmcp 3.1.3 (by version) and Kiro --------------------------------

LINK = {
    "type": "resource_link",
    "uri": "file:///r\u00e9sum\u00e9s/2026.pdf",
    "name": "r\u00e9sum\u00e9",
    "mimeType": "application/pdf",
}
LINK_TOOL = {"name": "attach", "inputSchema": {"type": "object", "properties": {}}}
LINK_RESULT = {"content": [{"type": "text", "text": "attached:"}, LINK], "isError": False}


@pytest.mark.anyio
async def test_a_resource_link_becomes_text_for_codex_before_0_171_for_chatgpt_and_kiro_alone() -> None:
    """Codex Desktop 0.150 and ChatGPT (rmcp =3.1.3) fail the whole call on a resource_link
    (openai/codex#41280), Kiro discards the result (kirodotdev/Kiro#8960); Codex CLI 0.171.0 passes
    its JSON to the model (a real run: tests/test_host_codex.py), so it gets the block as sent."""
    oracle = CONSTRAINTS[RESOURCE_LINK].violates
    clients = [
        ("codex-mcp-client", "0.150.0-alpha.3", True),
        ("codex-mcp-client", "0.171.0", False),
        ("codex-mcp-client", "0.172.1", False),
        ("openai-mcp", "1.0.0", True),
        ("Q DEV CLI", "1.0.0", True),
        ("mcp-normalizer-test", "0.0.1", False),
    ]
    steps = [{"op": "callTool", "name": "attach", "arguments": {}}]
    server = ScriptedServer([ToolSpec(LINK_TOOL, returning(LINK_RESULT))], response_mode="json")
    with serve(server) as up, proxy_for(up + "/mcp") as px:
        sessions = [
            {"url": px + "/mcp", "clientName": name, "clientVersion": version, "steps": steps}
            for name, version, _ in clients
        ]
        records = await run_node("v1", sessions)
    for (name, version, refused), record in zip(clients, records, strict=True):
        (step,) = record["steps"]
        assert step["ok"], (name, version, step)
        blocks = step["value"]["content"]
        assert oracle(LINK) and any(oracle(block) for block in blocks) != refused, (name, version, blocks)
        if refused:
            assert blocks[1]["text"] == "r\u00e9sum\u00e9: file:///r\u00e9sum\u00e9s/2026.pdf (application/pdf)"
            assert blocks[1]["_meta"][ORIGINAL_BLOCK_KEY] == LINK
        else:
            assert blocks == LINK_RESULT["content"]


def test_check_host_codex_names_the_resource_link_for_the_versions_that_refuse_it() -> None:
    server = ScriptedServer([ToolSpec(LINK_TOOL, returning(LINK_RESULT))], response_mode="json")
    with serve(server) as up:
        runs = {
            version: run_cli("check", up + "/mcp", "--host", "codex", *version, "--call", "attach", "--format", "json")
            for version in ((), ("--host-version", "0.150.0"), ("--host-version", "0.171.0"))
        }
    for version, done in runs.items():
        rules = [f["rule"] for f in json.loads(done.stdout)["findings"] if not f["advisory"]]
        refused = version != ("--host-version", "0.171.0")
        assert (done.returncode, rules) == ((1, ["host_content"]) if refused else (0, [])), (version, done.stdout)


# -- draft-07 output schemas for every Claude clientInfo --------------------------------------------


def assert_2020(tool: dict[str, Any]) -> None:
    schema = tool["outputSchema"]
    assert "$schema" not in schema and "definitions" not in schema and schema["$defs"] == {"unit": {"type": "string"}}
    assert schema["properties"]["pair"]["prefixItems"] == [{"type": "string"}]
    assert tool["_meta"]["dev.mcp-normalizer/original-keywords"]["/outputSchema/$schema"] == DRAFT_07


@pytest.mark.anyio
async def test_every_claude_client_gets_a_draft_07_output_schema_in_2020_12_and_calls_the_tool() -> None:
    steps = STEPS
    server = ScriptedServer([ToolSpec(DRAFT_TOOL, returning(DRAFT_RESULT))])
    with serve(server) as up, proxy_for(up + "/mcp") as px:
        sessions = [{"url": px + "/mcp", "clientName": name, "steps": steps} for name in CLAUDE_NAMES]
        through = await run_node("v1", sessions)
        pythons = [await run_python(px + "/mcp", steps, client_name=name) for name in CLAUDE_NAMES]
    assert {"claude-code", "claude-ai", "Anthropic/ClaudeAI", "Anthropic"} <= set(CLAUDE_NAMES)
    for name, ts, python in zip(CLAUDE_NAMES, through, pythons, strict=True):
        for record in (ts, python):
            listing, call = record["steps"]
            assert listing["ok"] and call["ok"], (name, record)
            assert_2020(listing["value"]["tools"][0])
            assert call["value"]["structuredContent"] == {"n": 3, "pair": ["a"]}


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["claude-ai", "Anthropic/ClaudeAI", "claude-code"])
async def test_through_the_stdio_wrapper_a_claude_client_gets_it_in_2020_12(name: str, tmp_path: Path) -> None:
    """``mcp-normalizer stdio -- CMD``, the one-line fix people now write shims for: the host starts
    the wrapper, the wrapper the server (a stdio server listing a draft-07 output schema)."""
    data = {"n": 3, "pair": ["a"]}
    result = {"content": [{"type": "text", "text": json.dumps(data)}], "structuredContent": data}
    plan = json.dumps({"tools": [DRAFT_TOOL], "results": {DRAFT_TOOL["name"]: result}})
    server = [sys.executable, str(Path(__file__).with_name("stdio_server.py")), plan]
    steps = STEPS
    # (the SDK starts the command with a minimal environment: PYTHONPATH names this checkout's code)
    command = ["env", f"PYTHONPATH={ROOT}", EXE, "stdio", "--", *server]
    direct = await run_python("", steps, client_name=name, command=server)
    wrapped = await run_python("", steps, client_name=name, command=command)
    assert direct["steps"][0]["value"]["tools"][0]["outputSchema"]["$schema"] == DRAFT_07
    listing, call = wrapped["steps"]
    assert listing["ok"] and call["ok"], wrapped
    assert_2020(listing["value"]["tools"][0])
    assert call["value"]["structuredContent"] == {"n": 3, "pair": ["a"]}
