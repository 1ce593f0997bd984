"""One bad tool never costs the others (issue 39, item 3): a tool that no repair makes acceptable to
the calling host's model API is withheld from that host alone (rule ``withhold_tools``), logged once
per listing with the fault and the rule, counted in ``mcp_normalizer_tools_withheld_total``, listed
on ``GET {admin_prefix}/withheld`` and named by ``check --host``; every other tool, and every other
client, gets the listing as before.

The fixture: a server with three tools, one whose ``inputSchema`` is not valid draft 2020-12
(``minLength: "x"``: no rule repairs it), which the Anthropic API refuses for every request of the
session (anthropics/claude-code#586). Pure tests judge the oracles and the generic mechanism; the
wire tests drive the proxy with the Python ``mcp`` client naming Claude Code or itself.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.clients import run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules import Mode, withhold
from mcp_normalizer.engine.rules.clients import ClientProfile, profile_for
from mcp_normalizer.engine.rules.host_faults import CONSTRAINTS, TOOL_NAME, Constraint
from mcp_normalizer.engine.rules.host_profiles import PROFILES

from .host_claude import INVALID_SCHEMA, AnthropicMock, api_refusal, model_name, run_claude_code
from .host_loop import McpServer
from .support import HEADERS, ROOT, capture_rewrites, proxy_for, run_cli, serve
from .test_host_maps import modern_list
from .test_host_repairs import initialize_as

CLAUDE_CODE = "claude-code"
RESULT: dict[str, Any] = {"content": [{"type": "text", "text": "caf\u00e9 \u2713: 12.50, 1e-7"}], "isError": False}
SEARCH = {
    "name": "search",
    "description": "Find rows",
    "inputSchema": {
        "type": "object",
        "properties": {"q": {"type": "string", "description": "Z\u00fcrich \u2713"}, "limit": {"type": "integer"}},
        "required": ["q"],
    },
}
#: Not valid draft 2020-12 (``minLength`` is a non-negative integer); its property name is one the
#: Anthropic API refuses too, which rule ``host_schemas`` repairs for Claude Code first.
BAD = {
    "name": "bad",
    "inputSchema": {
        "type": "object",
        "properties": {"\u043a\u043b\u044e\u0447": {"type": "string", "minLength": "x"}, "n": {"type": "number"}},
    },
}
PRICE = {
    "name": "price",
    "inputSchema": {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "minimum": 1e-7, "maximum": 12.5},
            "id": {"type": "integer", "maximum": 12345678901234567890},
            "note": {"type": ["string", "null"]},
        },
    },
    "outputSchema": {"type": "object", "properties": {"total": {"type": "number"}}},
}
TOOLS = (SEARCH, BAD, PRICE)
LIST = [{"op": "listTools"}]
STDIO_SERVER = str(Path(__file__).with_name("stdio_server.py"))


def server(*tools: dict[str, Any]) -> ScriptedServer:
    return ScriptedServer([ToolSpec(tool, returning(RESULT)) for tool in tools or TOOLS], response_mode="json")


def with_rules(**modes: Mode) -> NormalizerConfig:
    shipped = NormalizerConfig.shipped()
    return dataclasses.replace(shipped, rules={**shipped.rules, **modes})


def check_schema_refuses(schema: Any) -> bool:
    """python-jsonschema's own check for the dialect the schema declares (2020-12 by default),
    formats not asserted: what the oracle is held to."""
    cls = validator_for(schema, default=Draft202012Validator) if isinstance(schema, dict) else Draft202012Validator
    try:
        cls.check_schema(schema, format_checker=None)
    except SchemaError:
        return True
    return False


def listed(record: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The tools of each ``listTools`` step of a client's record."""
    assert all(step["ok"] for step in record["steps"]), record
    return [step["value"]["tools"] for step in record["steps"]]


# -- the oracles ------------------------------------------------------------------------------------


@pytest.mark.pure
@pytest.mark.parametrize(
    "schema",
    [
        BAD["inputSchema"],
        SEARCH["inputSchema"],
        PRICE["inputSchema"],
        {"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}},
        {"type": "object", "properties": {"a": {"type": "strng"}}},
        {"type": "object", "properties": {"a": {"type": "string", "description": None}}},
        {"type": "object", "properties": {"a": {"type": "number", "minimum": 0, "exclusiveMinimum": True}}},
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"items": [{}]}}},
        {"type": "object", "properties": {"a": {"items": [{}]}}},
        {"$schema": "http://json-schema.org/draft-07/schema", "properties": {"a": {"minLength": "x"}}},
        {"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"a": {"exclusiveMinimum": True}}},
        {"$schema": "https://example.com/own-dialect", "properties": {"a": {"minLength": "x"}}},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "\\p{L}+", "format": "x-custom"}}},
        {"type": "object", "$defs": {"P": {"type": "number", "multipleOf": 0.01}}, "properties": {"p": {"$ref": "#"}}},
        True,
        None,
        "object",
    ],
)
def test_the_2020_oracle_says_what_check_schema_says(schema: Any) -> None:
    tool = {"name": "t", "inputSchema": schema}
    assert withhold.REFUSALS["anthropic"][0].violates(tool) is check_schema_refuses(schema)


@pytest.mark.pure
def test_a_schema_valid_for_the_older_draft_it_declares_is_not_withheld() -> None:
    """The API refuses a draft-07 tuple too; Claude Code 2.1.332 then offers the tool with
    ``{"type": "object"}`` (its model can still call it): withholding it would offer its model less."""
    (oracle,) = withhold.REFUSALS["anthropic"]
    draft07 = {"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"p": {"items": [{}, {}]}}}
    assert not oracle.violates({"name": "t", "inputSchema": draft07})
    assert oracle.violates({"name": "t", "inputSchema": {k: v for k, v in draft07.items() if k != "$schema"}})


@pytest.mark.pure
def test_what_the_oracle_cannot_judge_is_not_withheld() -> None:
    deep: Any = {"type": "string", "minLength": "x"}
    for _ in range(200):
        deep = {"type": "object", "properties": {"a": deep}}
    (oracle,) = withhold.REFUSALS["anthropic"]
    assert not oracle.violates({"name": "t", "inputSchema": deep})  # nests past 128: not judged (kept)
    assert not oracle.violates({"name": "t"})  # no inputSchema: rule schema_shape's, not this one's
    assert not oracle.violates({"name": "t", "inputSchema": {"type": "object", "properties": {"\ud800": {}}}})


@pytest.mark.pure
def test_only_hosts_with_a_tool_oracle_are_judged() -> None:
    for info in (None, {"name": "mcp"}, {"name": "conformance-test-client"}, {"name": "claude-code-fork"}):
        assert not withhold.judged(profile_for(info))
    assert withhold.judged(profile_for({"name": "codex-mcp-client"}))  # what every model API refuses (every_family)
    assert withhold.judged(profile_for({"name": "gemini-cli-mcp-client", "version": "0.61.0"}))  # the Gemini API's keys
    assert withhold.judged(profile_for({"name": "gemini-cli-mcp-client", "version": "0.1.12"}))  # type beside anyOf
    assert withhold.judged(profile_for({"name": "Visual Studio Code"}))  # arrays without items
    claude = profile_for({"name": CLAUDE_CODE})
    assert [key for key, *_ in withhold.oracles(claude)] == [
        *(
            "enum_type_conflict",
            "legacy_tuple_items",
            "never_branch_anyof",
            "object_without_properties",
        ),  # every_family
        *("property_key_strict", "input_schema_2020"),
    ]
    as_listed = withhold.withheld(BAD, claude)  # the server's own: its property name first
    assert as_listed is not None and (as_listed.key, as_listed.rule) == ("property_key_strict", "host_schemas")
    advertised = Normalizer(NormalizerConfig.shipped()).list_tool(BAD, 0, "2025-11-25", claude).tool
    assert withhold.withheld(advertised, claude) == withhold.Withheld(  # repaired: what no repair reaches
        "input_schema_2020", "", withhold.REFUSALS["anthropic"][0].what, withhold.REFUSALS["anthropic"][0].source
    )
    assert withhold.withheld(SEARCH, claude) is None and withhold.withheld(PRICE, claude) is None


@pytest.mark.pure
def test_a_key_added_to_the_closed_set_is_judged_with_no_change_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever keys a host's faults hold: a key whose oracle still fires on the tool as advertised
    withholds it, the key as the reason and its rule as the repair that did not reach it."""
    key = "description_over_ten"
    added = Constraint(key, "host_schemas", "tool", "a long description", "none", False, _long_description)
    monkeypatch.setitem(CONSTRAINTS, key, added)
    monkeypatch.setattr(withhold, "_ORACLES", {})
    host = PROFILES["claude-desktop"]
    client = ClientProfile("claude-ai", host=host, host_faults=frozenset({key, TOOL_NAME}), key=b"test")
    found = withhold.withheld({**SEARCH, "description": "longer than ten"}, client)
    assert found == withhold.Withheld(key, "host_schemas", "a long description", "")
    named = withhold.withheld({**SEARCH, "name": "files.read"}, client)  # a name tool_names did not rename
    assert named is not None and (named.key, named.rule) == (TOOL_NAME, "tool_names")
    assert withhold.withheld(SEARCH, client) is None
    rewrite = withhold.rewrite(3, named, host.title)
    assert (rewrite.rule, rewrite.pointers, rewrite.host_fault) == ("withhold_tools", ("/tools/3",), TOOL_NAME)
    assert "files.read" not in rewrite.reason and "rule tool_names" in rewrite.reason


@pytest.mark.pure
def test_a_verdict_is_kept_per_host_and_tool_text() -> None:
    """One normalizer, the same tool text listed to two hosts and an SDK client: each gets its own
    verdict (its host's title and sources), the second listing a cached one."""
    normalizer = Normalizer(NormalizerConfig.shipped())
    text = orjson.dumps({**BAD, "name": "files.read"})
    code, desktop, sdk = (profile_for({"name": name}) for name in (CLAUDE_CODE, "claude-ai", "mcp"))
    first = normalizer.withheld(text, code)
    assert first is not None and first.key == "property_key_strict"
    assert first.source == PROFILES["claude-code"].faults["property_key_strict"]
    named = normalizer.withheld(text, desktop)  # its faults sort the name's key after the property's
    assert named is not None and named.key == "property_key_strict"
    assert normalizer.withheld(text, sdk) is None
    assert normalizer.withheld(text, code) is first  # kept: a hash, not the oracles
    assert normalizer.withheld(orjson.dumps(SEARCH), code) is None


def _long_description(tool: Any) -> bool:
    return isinstance(tool, dict) and len(tool.get("description", "")) > 10


# -- on the wire ------------------------------------------------------------------------------------


@pytest.mark.wire
@pytest.mark.anyio
async def test_claude_code_gets_the_two_good_tools_and_an_sdk_client_all_three_unchanged() -> None:
    with serve(server()) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        direct = listed(await run_python(up + "/mcp", LIST, client_name=CLAUDE_CODE))
        as_claude = listed(await run_python(px + "/mcp", LIST * 2, client_name=CLAUDE_CODE))
        as_sdk = listed(await run_python(px + "/mcp", LIST))  # the Python SDK's own clientInfo, "mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            metrics = (await http.get(px + "/.mcp-normalizer/metrics")).text
            admin = (await http.get(px + "/.mcp-normalizer/withheld")).json()
    claude = profile_for({"name": CLAUDE_CODE})
    # Directly, Claude Code's model API gets the tool it refuses (every request of the session fails).
    (own,) = [tool for tool in direct[0] if tool["name"] == "bad"]
    assert withhold.withheld(own, claude) is not None and len(direct[0]) == 3
    # Through the proxy: the two others, each listing, each acceptable.
    for tools in as_claude:
        assert [tool["name"] for tool in tools] == ["search", "price"]
        assert all(withhold.withheld(tool, claude) is None for tool in tools)
    # An SDK client: all three, the bad one as the server listed it.
    (tools,) = as_sdk
    assert [tool["name"] for tool in tools] == ["search", "bad", "price"]
    assert [tool for tool in tools if tool["name"] == "bad"] == [own]
    assert own["inputSchema"] == BAD["inputSchema"]
    # Logged once per listing, with the fault and the rule; never for the SDK client.
    lines = [line for line in log.lines if line["rule"] == "withhold_tools"]
    assert [(line["client"], line["tool"], line["event"], line["applied"]) for line in lines] == [
        (CLAUDE_CODE, "bad", "withheld", True)
    ] * 2
    assert len({line["jsonrpc_id"] for line in lines}) == 2
    assert {line["host_fault"] for line in lines} == {"input_schema_2020"}
    assert all(line["pointers"] == ["/tools/1"] and line["kind"] == "tool_withheld" for line in lines)
    assert "draft 2020-12" in lines[0]["reason"] and "Claude Code" in lines[0]["reason"]
    # Counted, and listed on the admin endpoint.
    counted = 'mcp_normalizer_tools_withheld_total{fault="input_schema_2020",host="claude-code",rule="none"} 2.0'
    assert counted in metrics
    (entry,) = admin["withheld"]
    assert {k: v for k, v in entry.items() if k != "reason"} == {
        "host": "claude-code",
        "tool": "bad",
        "fault": "input_schema_2020",
        "rule": "none",
        "listings": 2,
    }


@pytest.mark.wire
@pytest.mark.anyio
async def test_on_one_connection_each_request_gets_its_own_clients_listing() -> None:
    """2026-07-28: no session, each request names its client; one connection carries both."""
    with serve(server()) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=30) as http:
            claude = await modern_list(http, px + "/mcp", CLAUDE_CODE)
            sdk = await modern_list(http, px + "/mcp", "mcp")
            again = await modern_list(http, px + "/mcp", CLAUDE_CODE)
            plain = await modern_list(http, up + "/mcp", "mcp")
    assert (
        [tool["name"] for tool in claude["tools"]] == [tool["name"] for tool in again["tools"]] == ["search", "price"]
    )
    assert sdk["tools"] == plain["tools"] and [tool["name"] for tool in sdk["tools"]] == ["search", "bad", "price"]


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_withheld_tool_called_anyway_goes_upstream_as_it_came() -> None:
    """The upstream still serves the tool and a call carries no schema the API could refuse: a host
    that calls a tool it was not offered (a listing from before, a model naming it) gets the result."""
    upstream = server()
    arguments = {"\u043a\u043b\u044e\u0447": "caf\u00e9", "n": 12.5}
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize_as(http, px + "/mcp", CLAUDE_CODE)
            listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            tools = await http.post(px + "/mcp", content=orjson.dumps(listing), headers={**HEADERS, **session})
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "bad", "arguments": arguments},
            }
            answer = await http.post(px + "/mcp", content=orjson.dumps(call), headers={**HEADERS, **session})
    assert [tool["name"] for tool in tools.json()["result"]["tools"]] == ["search", "price"]
    assert answer.json() == {"jsonrpc": "2.0", "id": 2, "result": RESULT}
    (sent,) = [message for message, _ in upstream.requests if message.get("method") == "tools/call"]
    assert sent["params"] == {"name": "bad", "arguments": arguments}


@pytest.mark.wire
@pytest.mark.anyio
async def test_in_report_mode_the_tool_is_listed_and_what_would_be_withheld_logged() -> None:
    with (
        serve(server()) as up,
        proxy_for(up + "/mcp", with_rules(withhold_tools=Mode.REPORT)) as px,
        capture_rewrites() as log,
    ):
        (tools,) = listed(await run_python(px + "/mcp", LIST, client_name=CLAUDE_CODE))
        async with httpx.AsyncClient(timeout=30) as http:
            admin = (await http.get(px + "/.mcp-normalizer/withheld")).json()
            metrics = (await http.get(px + "/.mcp-normalizer/metrics")).text
    assert [tool["name"] for tool in tools] == ["search", "bad", "price"]
    (line,) = [line for line in log.lines if line["rule"] == "withhold_tools"]
    assert (line["tool"], line["applied"], line["host_fault"]) == ("bad", False, "input_schema_2020")
    assert admin == {"withheld": []} and "mcp_normalizer_tools_withheld_total{" not in metrics


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_host_key_whose_repair_is_off_withholds_the_tool_not_the_server() -> None:
    """Claude Desktop refuses every tool of a server for one name outside ``^[a-zA-Z0-9_-]{1,64}$``
    (``tool_name_strict``); rule ``tool_names`` renames it for it. With that rule off, the tool is
    withheld (the key as the reason, ``tool_names`` as the rule) and the others still reach it."""
    dotted = {"name": "files.read", "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}
    with (
        serve(server(SEARCH, dotted)) as up,
        proxy_for(up + "/mcp", with_rules(tool_names=Mode.OFF)) as off,
        proxy_for(up + "/mcp") as on,
        capture_rewrites() as log,
    ):
        (without,) = listed(await run_python(off + "/mcp", LIST, client_name="claude-ai"))
        (renamed,) = listed(await run_python(on + "/mcp", LIST, client_name="claude-ai"))
        (sdk,) = listed(await run_python(off + "/mcp", LIST))
    assert [tool["name"] for tool in without] == ["search"]
    assert [tool["name"] for tool in sdk] == ["search", "files.read"]
    assert (
        renamed[1]["name"] != "files.read" and renamed[1]["_meta"]["dev.mcp-normalizer/original-name"] == "files.read"
    )
    (line,) = [line for line in log.lines if line["rule"] == "withhold_tools"]
    assert (line["tool"], line["host_fault"], line["client"]) == ("files.read", TOOL_NAME, "claude-ai")
    assert "rule tool_names" in line["reason"] and "Claude Desktop" in line["reason"]


@pytest.mark.wire
def test_check_as_the_host_names_the_withheld_tool_directly_and_nothing_through_the_proxy() -> None:
    with serve(server()) as up, proxy_for(up + "/mcp") as px:
        direct = run_cli("check", up + "/mcp", "--host", CLAUDE_CODE, "--format", "json")
        through = run_cli("check", px + "/mcp", "--host", CLAUDE_CODE, "--format", "json")
        anyone = run_cli("check", up + "/mcp", "--format", "json")
    assert direct.returncode == 1, direct.stdout + direct.stderr
    (found,) = [f for f in orjson.loads(direct.stdout)["findings"] if f["rule"] == "withhold_tools"]
    assert (found["tool"], found["kind"], found["advisory"]) == ("bad", "tool_withheld", False)
    assert "draft 2020-12" in found["reason"] and "withheld the tool from Claude Code" in found["repair"]
    assert through.returncode == 0, through.stdout
    assert orjson.loads(through.stdout)["tools"] == ["search", "price"]
    assert not [f for f in orjson.loads(anyone.stdout)["findings"] if f["rule"] == "withhold_tools"]


@pytest.mark.wire
@pytest.mark.anyio
async def test_behind_the_stdio_wrapper_the_same_tool_is_withheld_and_logged(tmp_path: Path) -> None:
    """The stdio wrapper (``mcp-normalizer stdio``, where Claude Desktop starts servers) lists
    through the same path: Claude Desktop (``claude-ai``) gets the two others, the log one line."""
    plan = {"tools": list(TOOLS), "results": {tool["name"]: RESULT for tool in TOOLS}}
    log = tmp_path / "wrapper.log"
    # (the SDK's stdio client gives the wrapper a minimal environment: PYTHONPATH names this checkout)
    wrapper = ["env", f"PYTHONPATH={ROOT}", sys.executable, "-m", "mcp_normalizer", "stdio"]
    command = [*wrapper, "--log-file", str(log), "--log-level", "info", "--", sys.executable, STDIO_SERVER]
    command.append(orjson.dumps(plan).decode())
    (desktop,) = listed(await run_python("", LIST, client_name="claude-ai", command=command))
    (sdk,) = listed(await run_python("", LIST, command=command))
    assert [tool["name"] for tool in desktop] == ["search", "price"]
    assert [tool["name"] for tool in sdk] == ["search", "bad", "price"] and sdk[1]["inputSchema"] == BAD["inputSchema"]
    lines = [orjson.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    withheld = [line for line in lines if line.get("rule") == "withhold_tools"]
    assert [(line["tool"], line["client"], line["host_fault"]) for line in withheld] == [
        ("bad", "claude-ai", "input_schema_2020")
    ]


# -- the real host ----------------------------------------------------------------------------------

#: A draft-07 tuple, valid for the draft it declares; the Anthropic API refuses it.
LOCATE = {
    "name": "locate",
    "inputSchema": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"point": {"type": "array", "items": [{"type": "number"}, {"type": "string"}]}},
    },
}


@pytest.mark.wire
def test_claude_code_is_offered_through_the_proxy_what_it_offers_its_model_itself(tmp_path: Path) -> None:
    """Claude Code 2.1.332 against a mock of the Anthropic API that refuses, as the real one does,
    a request holding an ``input_schema`` that is not valid draft 2020-12 (``tests/host_claude.py``).
    Directly the host skips the invalid tool itself ("would be rejected by the Anthropic API"), and
    sends the draft-07 tuple, whose request the API refuses; it then offers that tool again with
    ``{"type": "object"}``. Through the proxy the invalid tool is withheld (logged), the draft-07
    one is not (withholding it would offer the model less) but written in 2020-12 (rule
    ``model_schemas``): no request is refused, and the model is offered the same tools, the tuple
    with its items where directly it lost them."""
    with serve(server(*TOOLS, LOCATE)) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        views, refusals = [], []
        for name, url in (("direct", up), ("proxy", px)):
            mock = AnthropicMock(model_name("demo", "search"), {"q": "caf\u00e9 \u2713"})
            views.append(run_claude_code(McpServer("demo", url + "/mcp"), "search", {}, tmp_path / name, mock=mock))
            refusals.append([body for _path, body in mock.refused])
    direct, proxied = views
    (refused,) = refusals[0]  # directly, the draft-07 tuple's request, once
    names = [tool["name"] for tool in refused["tools"]]
    assert api_refusal(refused) == INVALID_SCHEMA.format(index=names.index("mcp__demo__locate"))
    assert refusals[1] == []  # through the proxy, none
    assert 'Skipping tool "bad"' in direct.log and "rejected by the Anthropic API" in direct.log
    assert set(direct.tools) == set(proxied.tools) == {"search", "price", "locate"}, (direct.log, proxied.log)
    assert direct.tools["locate"]["input_schema"] == {"type": "object"}
    point = proxied.tools["locate"]["input_schema"]["properties"]["point"]
    assert "prefixItems" in point and "items" in point and not isinstance(point["items"], list), point
    assert direct.result == proxied.result == RESULT["content"][0]["text"]
    (line,) = [line for line in log.lines if line["rule"] == "withhold_tools"]
    assert (line["tool"], line["client"], line["host_fault"]) == ("bad", CLAUDE_CODE, "input_schema_2020")
