"""Degrade mode (issue 40, item 5): "degrade, don't fail", opted into per client, per tool or globally.

A tool whose results no lossless rule can make conform (here: a total sent as ``"12.5 EUR"`` where
the schema says number) costs every strict client the call: the TS SDK 1.32.2 client and the Python
``mcp`` client refuse the result. With degrade mode on for that tool and client, the tool is
advertised without its ``outputSchema`` and the result comes without ``structuredContent`` (both
kept in ``_meta``, the value's JSON added to ``content``): the client gets a success and the model
every datum. Off (the default) nothing changes; the log marks each degrade change ``lossy``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules.clients import profile_for
from mcp_normalizer.errors import ConfigError

from .support import capture_rewrites, proxy_for, serve

KEPT_SCHEMA = "dev.mcp-normalizer/original-output-schema"
KEPT_VALUE = "dev.mcp-normalizer/original-structured-content"
ERA = "2025-11-25"

SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "number"}, "numéro": {"type": "string"}, "lines": {"type": "array"}},
    "required": ["total"],
}
#: Does not conform (total is a string), and no lossless rule makes it: every datum must still reach the model.
VALUE: dict[str, Any] = {
    "total": "12.5 EUR",
    "numéro": "INV-ü-7",
    "big": 123456789012345678901234567890,
    "lines": [{"qty": 1e-7, "note": None, "deep": {"x": [None, 12.5]}}],
}
RESULT = {"content": [{"type": "text", "text": "Invoice created."}], "structuredContent": VALUE, "isError": False}
INVOICE = {"name": "invoice", "inputSchema": {"type": "object"}, "outputSchema": SCHEMA}
#: A companion that conforms: per-tool degrade leaves it alone.
OK_VALUE = {"total": 12.5}
RECEIPT = {"name": "receipt", "inputSchema": {"type": "object"}, "outputSchema": SCHEMA}
OK_RESULT = {"content": [{"type": "text", "text": json.dumps(OK_VALUE)}], "structuredContent": OK_VALUE}
STEPS: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "callTool", "name": "invoice", "arguments": {}},
    {"op": "callTool", "name": "receipt", "arguments": {}},
]


def server() -> ScriptedServer:
    return ScriptedServer([ToolSpec(INVOICE, returning(RESULT)), ToolSpec(RECEIPT, returning(OK_RESULT))])


def config(**normalizer: Any) -> NormalizerConfig:
    tools = normalizer.pop("tools", {})
    return NormalizerConfig.from_mapping({"normalizer": normalizer, "tools": tools})


def tools_of(step: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert step["ok"], step
    return {tool["name"]: tool for tool in step["value"]["tools"]}


def assert_degraded(listing: dict[str, Any], call: dict[str, Any]) -> None:
    """The tool listed without its outputSchema (kept), the call a success without structuredContent,
    the value kept whole in _meta and its JSON in content after the server's text."""
    tool = tools_of(listing)["invoice"]
    assert "outputSchema" not in tool and tool["_meta"][KEPT_SCHEMA] == SCHEMA
    assert call["ok"], call
    result = call["value"]
    assert result.get("isError") in (None, False) and "structuredContent" not in result
    kept = result["_meta"][KEPT_VALUE]
    # (JavaScript reads the big integer as a double: the TS client's own limit, the bytes sent are exact)
    assert {k: v for k, v in kept.items() if k != "big"} == {k: v for k, v in VALUE.items() if k != "big"}
    assert kept["big"] == VALUE["big"] or kept["big"] == float(VALUE["big"])
    texts = [block["text"] for block in result["content"]]
    assert texts[0] == "Invoice created." and json.loads(texts[1]) == VALUE
    assert "123456789012345678901234567890" in texts[1] and "1e-07" in texts[1].lower().replace("1e-7", "1e-07")


def assert_unchanged(listing: dict[str, Any], call: dict[str, Any]) -> None:
    """As without the proxy: the schema advertised, and the strict client refuses the result."""
    assert tools_of(listing)["invoice"]["outputSchema"] == SCHEMA
    assert not call["ok"], call


# -- settings --------------------------------------------------------------------------------------


@pytest.mark.pure
def test_degrade_is_off_by_default_and_declared_per_tool_globally_or_per_client() -> None:
    shipped = NormalizerConfig.shipped()
    assert not shipped.degrade and shipped.degrade_clients == ()
    assert shipped.degrade_for("invoice", "claude-ai", "claude-desktop") == ""
    on = config(degrade=True, tools={"receipt": {"degrade": False}})
    assert "every tool" in on.degrade_for("invoice", None) and on.degrade_for("receipt", "x") == ""
    by_client = config(degrade_clients=["claude-desktop", "my-agent"], tools={"invoice": {"degrade": True}})
    assert "tool 'invoice'" in by_client.degrade_for("invoice", "mcp")
    assert "host 'claude-desktop'" in by_client.degrade_for("receipt", "claude-ai", "claude-desktop")
    assert "client 'my-agent'" in by_client.degrade_for("receipt", "my-agent")
    assert by_client.degrade_for("receipt", "mcp") == ""


@pytest.mark.pure
@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tools": {"x": {"degrade": "yes"}}}, "degrade must be true or false"),
        ({"normalizer": {"degrade": 1}}, "degrade"),
        ({"normalizer": {"degrade_clients": "claude-ai"}}, "degrade_clients"),
        ({"normalizer": {"degrade_clients": [" "]}}, "must not be empty"),
    ],
)
def test_bad_degrade_settings_are_refused_at_load(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        NormalizerConfig.from_mapping(data)


@pytest.mark.pure
def test_a_listing_cached_for_one_client_is_not_reused_for_a_degraded_one() -> None:
    """The listings are cached by what they depend on: a client degraded by name gets its own."""
    normalizer = Normalizer(config(degrade_clients=["my-agent"]))
    text = json.dumps(INVOICE).encode()
    plain = normalizer.list_tool_text(text, 0, ERA, profile_for({"name": "mcp"}))
    degraded = normalizer.list_tool_text(text, 0, ERA, profile_for({"name": "my-agent"}))
    assert plain.text is None and degraded.text is not None and b"outputSchema" not in degraded.text
    assert [(r.rewrite.rule, r.rewrite.lossy) for r in degraded.records] == [("degrade", True)]
    again = normalizer.list_tool_text(text, 0, ERA, profile_for({"name": "mcp"}))
    assert again.text is None


@pytest.mark.pure
def test_a_text_that_already_carries_the_value_gets_no_copy_and_an_error_stays_an_error() -> None:
    normalizer = Normalizer(config(degrade=True))
    entry = normalizer.tools_list({"tools": [INVOICE]}, ERA).entries[0]
    spaced = {"content": [{"type": "text", "text": json.dumps(VALUE, indent=2)}], "structuredContent": VALUE}
    out = normalizer.tools_call(spaced, "invoice", entry, ERA, 1000).result
    assert out["content"] == spaced["content"] and out["_meta"][KEPT_VALUE] == VALUE
    failed = {"content": [{"type": "text", "text": "denied"}], "structuredContent": {"code": 403}, "isError": True}
    out = normalizer.tools_call(failed, "invoice", entry, ERA, 1000).result
    assert out["isError"] is True and "structuredContent" not in out
    assert [block["text"] for block in out["content"]] == ["denied", '{"code":403}']


# -- on the wire -----------------------------------------------------------------------------------


@pytest.mark.wire
@pytest.mark.anyio
async def test_off_by_default_the_strict_clients_refuse_the_result_as_without_the_proxy() -> None:
    with serve(server()) as up, proxy_for(up + "/mcp") as px:
        (ts,) = await run_node("v1", [{"url": px + "/mcp", "clientName": "claude-ai", "steps": STEPS}])
        python = await run_python(px + "/mcp", STEPS, client_name="claude-ai")
    for record in (ts, python):
        listing, call, receipt = record["steps"]
        assert_unchanged(listing, call)
        assert receipt["ok"] and receipt["value"]["structuredContent"] == OK_VALUE


@pytest.mark.wire
@pytest.mark.anyio
async def test_degrade_for_every_tool_brings_the_result_to_both_clients_as_a_success() -> None:
    with capture_rewrites() as log, serve(server()) as up, proxy_for(up + "/mcp", config(degrade=True)) as px:
        (ts,) = await run_node("v1", [{"url": px + "/mcp", "steps": STEPS}])
        python = await run_python(px + "/mcp", STEPS)
    for record in (ts, python):
        listing, call, receipt = record["steps"]
        assert_degraded(listing, call)
        assert receipt["ok"] and "structuredContent" not in receipt["value"]
        assert receipt["value"]["content"] == OK_RESULT["content"]  # its text carried the value: no copy
    degrade = [line for line in log.lines if line["rule"] == "degrade"]
    assert degrade and all(line["lossy"] is True for line in degrade)
    assert {line["method"] for line in degrade} == {"tools/list", "tools/call"}
    assert all("lossy" not in line for line in log.lines if line["rule"] != "degrade")


@pytest.mark.wire
@pytest.mark.anyio
async def test_degrade_per_tool_leaves_the_other_tools_as_they_are() -> None:
    rules = config(tools={"invoice": {"degrade": True}})
    with serve(server()) as up, proxy_for(up + "/mcp", rules) as px:
        (ts,) = await run_node("v1", [{"url": px + "/mcp", "steps": STEPS}])
        python = await run_python(px + "/mcp", STEPS)
    for record in (ts, python):
        listing, call, receipt = record["steps"]
        assert_degraded(listing, call)
        assert tools_of(listing)["receipt"]["outputSchema"] == SCHEMA
        assert receipt["ok"] and receipt["value"]["structuredContent"] == OK_VALUE


@pytest.mark.wire
@pytest.mark.anyio
async def test_degrade_per_client_by_name_or_host_profile_and_no_other_client() -> None:
    """``degrade_clients`` names a host profile (every clientInfo name of Claude Desktop) and a client
    name; the Python client's default name (``mcp``) and an unknown TS client are not degraded."""
    rules = config(degrade_clients=["claude-desktop", "my-agent"])
    with serve(server()) as up, proxy_for(up + "/mcp", rules) as px:
        url = px + "/mcp"
        degraded_ts, plain_ts = await run_node(
            "v1",
            [{"url": url, "clientName": "claude-ai", "steps": STEPS}, {"url": url, "steps": STEPS}],
        )
        degraded_py = await run_python(url, STEPS, client_name="my-agent")
        plain_py = await run_python(url, STEPS)
    for record in (degraded_ts, degraded_py):
        listing, call, _ = record["steps"]
        assert_degraded(listing, call)
    for record in (plain_ts, plain_py):
        listing, call, _ = record["steps"]
        assert_unchanged(listing, call)


@pytest.mark.wire
@pytest.mark.anyio
async def test_degrade_for_a_host_through_the_stdio_wrapper(tmp_path: Any) -> None:
    """``mcp-normalizer stdio --config rules.toml -- CMD`` in a host's config, the rule file naming the
    host (``degrade_clients = ["claude-desktop"]``): Claude Desktop's name gets the result as a
    success, the Python client's own name the server's answer (refused by its output validation)."""
    from .support import EXE, ROOT

    plan = json.dumps({"tools": [INVOICE], "results": {INVOICE["name"]: RESULT}})
    server = [sys.executable, str(Path(__file__).with_name("stdio_server.py")), plan]
    rules = tmp_path / "rules.toml"
    rules.write_text('[normalizer]\ndegrade_clients = ["claude-desktop"]\n', encoding="utf-8")
    # (the SDK starts the command with a minimal environment: PYTHONPATH names this checkout's code)
    command = ["env", f"PYTHONPATH={ROOT}", EXE, "stdio", "--config", str(rules), "--", *server]
    steps = STEPS[:2]
    degraded = await run_python("", steps, client_name="claude-ai", command=command)
    plain = await run_python("", steps, client_name="mcp", command=command)
    assert_degraded(*degraded["steps"])
    assert_unchanged(*plain["steps"])
