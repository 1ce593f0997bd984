"""Rule ``apps_result_meta`` (DESIGN rule 6, opt-in): a result of an MCP Apps tool gets the tool's
``_meta.ui.resourceUri`` when it names no UI of its own; nothing the server set is overwritten."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any, Literal

import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.normalize import Normalizer

from .support import EXE, HEADERS, Mangled, capture_rewrites, each_client, initialize, proxy_for, rpc, serve

ON = '[rules]\napps_result_meta = "on"\n'
URI = "ui://charts/r\u00e9sum\u00e9.html"
#: An Apps tool, as the MCP Apps extension lists one (its UI, who may call it).
CHART = {
    "name": "chart",
    "inputSchema": {"type": "object"},
    "_meta": {"ui": {"resourceUri": URI, "visibility": ["model", "app"]}},
}
#: A tool of an MCP Apps draft: the deprecated flat key.
FLAT = {"name": "flat", "inputSchema": {"type": "object"}, "_meta": {"ui/resourceUri": "ui://flat"}}
PLAIN = {"name": "plain", "inputSchema": {"type": "object"}}
#: Numbers and text the result's own _meta holds, which must reach the client as spelled.
OWN_META = {"trace": {"score": 12.5, "tiny": -2.5e-7, "big": 2**70, "note": 'a\u2713"\\\n', "none": None}}


def normalizer(text: str = ON) -> Normalizer:
    return Normalizer(NormalizerConfig.from_mapping(tomllib.loads(text)))


def call(n: Normalizer, tool: dict[str, Any], result: dict[str, Any]) -> Any:
    entry = n.tools_list({"tools": [tool]}, "2025-11-25").entries[0]
    return n.tools_call(result, tool["name"], entry, "2025-11-25", 100)


@pytest.mark.pure
@pytest.mark.parametrize(
    ("tool", "meta", "expected"),
    [
        (CHART, None, {"ui": {"resourceUri": URI}}),
        (CHART, OWN_META, {**OWN_META, "ui": {"resourceUri": URI}}),
        (CHART, {"ui": {"visibility": ["app"]}}, {"ui": {"visibility": ["app"], "resourceUri": URI}}),
        (FLAT, {}, {"ui": {"resourceUri": "ui://flat"}}),
        (
            {**FLAT, "_meta": {"ui": {"resourceUri": 5}, "ui/resourceUri": "ui://flat"}},
            {},
            {"ui": {"resourceUri": "ui://flat"}},
        ),
    ],
    ids=["no-meta", "own-meta", "own-ui", "flat-tool", "flat-string-beside-a-number"],
)
def test_a_result_that_names_no_ui_gets_the_tools(tool: dict[str, Any], meta: Any, expected: Any) -> None:
    result: dict[str, Any] = {"content": [{"type": "text", "text": "ok"}]}
    if meta is not None:
        result["_meta"] = meta
    outcome = call(normalizer(), tool, result)
    assert outcome.changed and outcome.result["_meta"] == expected
    assert outcome.result["content"] == result["content"] and result.get("_meta") == meta  # the input kept
    assert [(r.rewrite.rule, r.rewrite.pointers, r.applied) for r in outcome.records] == [
        ("apps_result_meta", ("/_meta/ui/resourceUri",), True)
    ]


@pytest.mark.pure
@pytest.mark.parametrize(
    ("tool", "meta"),
    [
        (CHART, {"ui": {"resourceUri": "ui://other"}}),  # the server chose another UI for this result
        (CHART, {"ui": {"resourceUri": None}}),  # even a null one is the server's
        (CHART, {"ui/resourceUri": "ui://other"}),  # named in the flat spelling
        (CHART, {"ui": "not an object"}),
        (CHART, {"ui": ["ui://x"]}),
        (PLAIN, None),  # no UI to copy
        ({**PLAIN, "_meta": {"ui": {"visibility": ["app"]}}}, None),
    ],
)
def test_a_result_that_names_a_ui_or_a_tool_without_one_is_left_alone(tool: dict[str, Any], meta: Any) -> None:
    result: dict[str, Any] = {"content": []} if meta is None else {"content": [], "_meta": meta}
    outcome = call(normalizer(), tool, result)
    assert not outcome.changed and not [r for r in outcome.records if r.rewrite.rule == "apps_result_meta"]


@pytest.mark.pure
def test_off_by_default_and_report_mode_changes_nothing() -> None:
    result = {"content": [], "structuredContent": {"n": 1}}
    assert not [r for r in call(normalizer(""), CHART, result).records if r.rewrite.rule == "apps_result_meta"]
    reported = call(normalizer('[rules]\napps_result_meta = "report"\n'), CHART, result)
    assert "_meta" not in reported.result
    assert [(r.rewrite.rule, r.applied) for r in reported.records] == [("apps_result_meta", False)]


@pytest.mark.pure
def test_an_unknown_tool_passes_as_it_came() -> None:
    outcome = normalizer().tools_call({"content": []}, "chart", None, "2025-11-25", 100)
    assert not outcome.changed


def _rule_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(ON, encoding="utf-8")
    return path


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_every_client_gets_the_pointer_listed_first_or_not(mode: Literal["json", "sse"]) -> None:
    """Through the proxy (rule on), each strict client receives the tool's pointer on the Apps
    tool's results, whether it listed the tools first or not (the proxy then fetches the list);
    the plain tool's result and the result's own ``_meta`` reach it as the server sent them."""
    own = {"content": [{"type": "text", "text": "chart"}], "_meta": OWN_META}
    tools = [
        ToolSpec(CHART, returning(own)),
        ToolSpec(PLAIN, returning({"content": [{"type": "text", "text": "plain"}]})),
    ]
    listed: list[dict[str, Any]] = [
        {"op": "listTools"},
        {"op": "callTool", "name": "chart", "arguments": {}},
        {"op": "callTool", "name": "plain", "arguments": {}},
    ]
    unlisted = [{"op": "callTool", "name": "chart", "arguments": {}}]
    config = NormalizerConfig.from_mapping(tomllib.loads(ON))
    with serve(ScriptedServer(tools, response_mode=mode)) as up, proxy_for(up + "/mcp", config) as px:
        with capture_rewrites() as log:
            first = await each_client(px + "/mcp", listed)
            second = await each_client(px + "/mcp", unlisted)
    for client in first:
        steps = first[client]["steps"] + second[client]["steps"]
        assert all(step["ok"] for step in steps), (client, steps)
        chart, plain, unlisted_chart = steps[1]["value"], steps[2]["value"], steps[3]["value"]
        for value in (chart, unlisted_chart):
            assert value["_meta"]["ui"] == {"resourceUri": URI}, (client, value)
            assert {k: v for k, v in value["_meta"].items() if k != "ui"} == OWN_META, (client, value)
        assert "_meta" not in plain, (client, plain)
    applied = [line for line in log.lines if line["event"] == "rewrite" and line["rule"] == "apps_result_meta"]
    assert len(applied) == 6 and {line["tool"] for line in applied} == {"chart"}


@pytest.mark.wire
@pytest.mark.anyio
async def test_the_results_own_meta_keeps_its_spelling_on_the_wire() -> None:
    """Bytes, not decoded values: the result's ``_meta`` numbers and escapes as the server spelled them."""
    spelled = b'{"n":12.50,"e":1E-7,"big":123456789012345678901234567890,"s":"\\u00e9\\n"}'

    def spell(message: dict[str, Any]) -> bytes:
        if "result" in message and "content" in message["result"]:
            message["result"]["_meta"] = "SPELLED"
        return orjson.dumps(message).replace(b'"SPELLED"', spelled)

    upstream = Mangled(
        ScriptedServer([ToolSpec(CHART, returning({"content": []}))], response_mode="json"), {"s": spell}
    )
    config = NormalizerConfig.from_mapping(tomllib.loads(ON))
    with serve(upstream) as up, proxy_for(up + "/mcp", config) as px:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, px + "/mcp")
            await rpc(http, px + "/mcp", "tools/list", {}, 1, **session)
            body = orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "chart"}})
            headers = {**HEADERS, **session, "x-fault": "s"}
            response = await http.post(px + "/mcp", content=body, headers=headers)
    raw = response.content
    assert spelled[:-1] + b',"ui":{"resourceUri":' in raw, raw
    assert orjson.loads(raw)["result"]["_meta"]["ui"] == {"resourceUri": URI}


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_stdio_servers_apps_tool_through_the_wrapper(tmp_path: Path) -> None:
    fixture = str(Path(__file__).with_name("stdio_server.py"))
    plan = {"tools": [CHART, PLAIN], "results": {"chart": {"content": []}, "plain": {"content": []}}}
    command = [EXE, "stdio", "--config", str(_rule_file(tmp_path)), "--", sys.executable, fixture, json.dumps(plan)]
    steps: list[dict[str, Any]] = [
        {"op": "listTools"},
        {"op": "callTool", "name": "chart", "arguments": {}},
        {"op": "callTool", "name": "plain", "arguments": {}},
    ]
    session = [{"command": command, "steps": steps}]
    records = {
        "ts-sdk-1": (await run_node("v1", session))[0],
        "python": await run_python("", steps, command=command),
    }
    for client, record in records.items():
        chart, plain = record["steps"][1], record["steps"][2]
        assert chart["ok"] and chart["value"]["_meta"] == {"ui": {"resourceUri": URI}}, (client, chart)
        assert plain["ok"] and "_meta" not in plain["value"], (client, plain)


@pytest.mark.pure
@pytest.mark.parametrize(
    ("rules", "meta"),
    [('meta_keys = "report"', [1]), ('null_members = "report"', None), ('meta_keys = "report"', "x")],
)
def test_a_pointer_only_the_preview_gets_is_recorded_as_previewed(rules: str, meta: Any) -> None:
    """With the rule that makes ``_meta`` an object in report mode, the result sent keeps the
    server's ``_meta`` and no pointer: the log must not say the pointer was added."""
    n = normalizer(ON + rules + "\n")
    outcome = call(n, CHART, {"content": [], "_meta": meta})
    assert outcome.result["_meta"] == meta  # what the client gets
    (record,) = (r for r in outcome.records if r.rewrite.rule == "apps_result_meta")
    assert record.applied is False
