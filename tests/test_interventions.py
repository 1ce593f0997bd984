"""Known servers, fixed by default (issue 23, section 1): the interventions table.

The pure tests read the packaged table and match entries against tool definitions; the wire tests
put the proxy, with no rule file, in front of a server on the old Protean shape and drive it with
the three strict clients, in SSE and JSON modes, from the first call on.
"""

from __future__ import annotations

import copy
import dataclasses
import subprocess
from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.demo.upstream import RUNTIMES, ScriptedServer, ToolSpec, protean_server, protean_tools
from mcp_normalizer.engine.interventions import Interventions, definition_digest, shipped
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.errors import ConfigError

from .support import EXE, HEADERS, ROOT, ResponseMode, capture_rewrites, each_client, proxy_for, serve

ENTRY = "protean-legacy-runtime-scope"
CODEX_ENTRY = "codex-mcp-server-structured-content-off"
#: codex-mcp-server 1.4.10 as npm ships it (tests/node): its tools as it lists them come from its own module.
CODEX_SERVER = ROOT / "tests" / "node" / "node_modules" / "codex-mcp-server" / "dist" / "tools" / "definitions.js"


def list_runtimes() -> dict[str, Any]:
    """The old Protean shape's ``list_runtimes`` definition, as the demo upstream lists it."""
    (spec,) = (spec for spec in protean_tools() if spec.tool["name"] == "protean.list_runtimes")
    return copy.deepcopy(spec.tool)


def scope_schema(tool: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = tool["outputSchema"]["properties"]["runtimes"]["items"]["properties"]["scope"]
    return schema


@pytest.mark.pure
def test_every_shipped_entry_names_its_source_date_and_the_fix_for_the_servers_author() -> None:
    entries = shipped().entries
    assert [entry.id for entry in entries] == [ENTRY, CODEX_ENTRY]
    for entry in entries:
        assert entry.source and entry.summary and entry.author_fix
        assert entry.string_at or entry.definition is not None  # never a name alone
        assert entry.date <= "2026-12-03"


@pytest.mark.pure
@pytest.mark.parametrize(
    ("change", "applies"),
    [
        (lambda tool: None, True),
        (lambda tool: tool.update(description="Runtimes, as the Rust port words it."), True),
        (lambda tool: scope_schema(tool).update(type=["string", "null"]), False),  # the current contract
        (lambda tool: scope_schema(tool).update(nullable=True), False),  # OpenAPI says so already
        (lambda tool: scope_schema(tool).update(type="integer"), False),  # another shape
        (lambda tool: tool.update(name="list_runtimes"), False),  # a generic name: another server
        (lambda tool: tool.pop("outputSchema"), False),
        (lambda tool: tool["outputSchema"]["properties"]["runtimes"]["items"]["properties"].pop("scope"), False),
    ],
    ids=[
        "old-shape",
        "reworded",
        "nullable-type",
        "openapi-nullable",
        "integer",
        "generic-name",
        "no-schema",
        "no-scope",
    ],
)
def test_the_protean_entry_applies_only_where_the_schema_says_a_plain_string(change: Any, applies: bool) -> None:
    tool = list_runtimes()
    change(tool)
    assert [entry.id for entry in shipped().for_tool(tool)] == ([ENTRY] if applies else [])


@pytest.mark.pure
def test_the_entry_is_logged_by_id_and_source_and_turning_the_table_off_leaves_the_tool_as_listed() -> None:
    tool = list_runtimes()
    on = Normalizer(NormalizerConfig.shipped()).list_tool(tool, 0, "2025-11-25")
    assert scope_schema(on.tool)["type"] == ["string", "null"]
    (record,) = (r for r in on.records if r.rewrite.rule == "nullable")
    source = "the Protean contract: a runtime's scope may be null"
    assert record.rewrite.reason.startswith(f"intervention {ENTRY} ({source}")
    off_config = dataclasses.replace(NormalizerConfig.shipped(), interventions=False)
    off = Normalizer(off_config).list_tool(tool, 0, "2025-11-25")
    assert off.tool == tool and not [r for r in off.records if r.rewrite.rule == "nullable"]


@pytest.mark.pure
def test_a_rule_file_adds_to_an_entry_and_its_modes_decide() -> None:
    tool = list_runtimes()
    tool["outputSchema"]["properties"]["runtimes"]["items"]["properties"]["region"] = {"type": "string"}
    data = {"tools": {"protean.list_runtimes": {"nullable": ["/runtimes/*/region"]}}}
    added = Normalizer(NormalizerConfig.from_mapping(data)).list_tool(tool, 0, None)
    items = added.tool["outputSchema"]["properties"]["runtimes"]["items"]["properties"]
    assert items["scope"]["type"] == items["region"]["type"] == ["string", "null"]
    (record,) = (r for r in added.records if r.rewrite.rule == "nullable")
    assert record.rewrite.reason.startswith(f"declared in config and by intervention {ENTRY}")
    off = {"tools": {"protean.list_runtimes": {"rules": {"nullable": "off"}}}}
    assert Normalizer(NormalizerConfig.from_mapping(off)).list_tool(tool, 0, None).tool == tool
    # A rule file that names the tool only for a mode declares nothing: the entry alone is named.
    modes = {"tools": {"protean.list_runtimes": {"rules": {"text_mirror": "off"}}}}
    (record,) = (
        r
        for r in Normalizer(NormalizerConfig.from_mapping(modes)).list_tool(tool, 0, None).records
        if r.rewrite.rule == "nullable"
    )
    assert record.rewrite.reason.startswith(f"intervention {ENTRY} (")


@pytest.mark.pure
@pytest.mark.parametrize(
    ("entry", "names"),
    [
        ({}, "must be a non-empty string"),
        ({"nullable": ["/x"]}, "condition beyond the tool name"),
        ({"string_at": ["/x"]}, "must declare something"),
        ({"string_at": ["/x"], "nullable": ["x"]}, "must start with '/'"),
        ({"definition": "ABC", "nullable": ["/x"]}, "32 lowercase hex"),
        ({"string_at": ["/x"], "nullable": ["/x"], "date": "3 Dec 2026"}, "YYYY-MM-DD"),
        ({"string_at": ["/x"], "nullable": ["/x"], "tool_name": "t"}, "unknown key 'tool_name'"),
    ],
)
def test_a_malformed_entry_is_refused_with_what_is_wrong(entry: dict[str, Any], names: str) -> None:
    base = {"id": "x", "tool": "t", "summary": "s", "author_fix": "f", "source": "r", "date": "2026-12-03"}
    table = {"intervention": [{**base, **entry} if entry else {}]}
    with pytest.raises(ConfigError, match=names):
        Interventions.from_mapping(table, "table")


@pytest.mark.pure
def test_an_entry_matched_by_definition_ignores_descriptions_and_refuses_another_shape() -> None:
    tool = list_runtimes()
    base = {"id": "d", "tool": tool["name"], "summary": "s", "author_fix": "f", "source": "r", "date": "2026-12-03"}
    table = Interventions.from_mapping(
        {"intervention": [{**base, "definition": definition_digest(tool), "relax": ["/runtimes"]}]}, "t"
    )
    assert table.for_tool({**tool, "description": "reworded", "title": "Runtimes"})
    other = list_runtimes()
    scope_schema(other)["maxLength"] = 12
    assert not table.for_tool(other)
    with pytest.raises(ConfigError, match="used twice"):
        Interventions.from_mapping({"intervention": [{**base, "definition": "0" * 32, "relax": ["/x"]}] * 2}, "t")


FIRST_CALL: list[dict[str, Any]] = [
    {"op": "callTool", "name": "protean.list_runtimes"},  # before any tools/list of the client
    {"op": "listTools"},
    {"op": "callTool", "name": "protean.list_runtimes"},
]


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_with_no_rule_file_list_runtimes_is_accepted_by_every_client_from_the_first_call(
    mode: ResponseMode,
) -> None:
    with serve(protean_server(mode)) as up, proxy_for(up + "/mcp", NormalizerConfig.shipped()) as px:
        direct = await each_client(up + "/mcp", FIRST_CALL)
        with capture_rewrites() as log:
            through = await each_client(px + "/mcp", FIRST_CALL)
    assert not direct["python"]["steps"][0]["ok"]  # it lists the tools itself before the first call
    for client, record in direct.items():
        assert not record["steps"][2]["ok"], client  # after listing, every client rejects the null
    for client, record in through.items():
        first, listed, again = record["steps"]
        assert first["ok"] and again["ok"], (client, record["steps"])
        assert first["value"]["structuredContent"] == again["value"]["structuredContent"] == RUNTIMES
        (tool,) = (t for t in listed["value"]["tools"] if t["name"] == "protean.list_runtimes")
        assert scope_schema(tool)["type"] == ["string", "null"], client
    lines = [line for line in log.lines if line["rule"] == "nullable"]
    assert lines and all(ENTRY in line["reason"] for line in lines)


@pytest.mark.wire
def test_a_protean_server_on_the_current_contract_passes_byte_for_byte() -> None:
    current = list_runtimes()
    scope_schema(current)["type"] = ["string", "null"]
    specs = [dataclasses.replace(s, tool=current) if s.tool["name"] == current["name"] else s for s in protean_tools()]
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    with (
        serve(ScriptedServer(specs, response_mode="json")) as up,
        proxy_for(up + "/mcp") as px,
        capture_rewrites() as log,
    ):
        direct = httpx.post(up + "/mcp", content=body, headers=HEADERS, timeout=10).content
        through = httpx.post(px + "/mcp", content=body, headers=HEADERS, timeout=10).content
    assert current in orjson.loads(direct)["result"]["tools"]
    assert through == direct and log.lines == []


@pytest.mark.wire
def test_check_through_the_proxy_with_no_rule_file_exits_0_on_the_protean_shape() -> None:
    calls = ["--call", "protean.scope_list", "--call", "protean.list_runtimes", "--call", "protean.whoami"]
    calls += ["--call", "protean.deploy", '{"service": "api"}']
    with serve(protean_server()) as up, proxy_for(up + "/mcp", NormalizerConfig.shipped()) as px:
        for era in ("auto", "legacy"):
            done = subprocess.run(
                [EXE, "check", px + "/mcp", *calls, "--era", era, "--format", "json"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            assert orjson.loads(done.stdout)["findings"] == []


# -- codex-mcp-server (tuannvm, npm) -----------------------------------------------------------------


def codex_tools() -> list[dict[str, Any]]:
    """The tools codex-mcp-server 1.4.10 lists, read from its own ``definitions.js`` by node."""
    script = f"import {{ toolDefinitions }} from {orjson.dumps(CODEX_SERVER.as_uri()).decode()};"
    script += "process.stdout.write(JSON.stringify(toolDefinitions));"
    done = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, timeout=60, check=True)
    tools: list[dict[str, Any]] = orjson.loads(done.stdout)
    return tools


def codex_result(prompt: str) -> dict[str, Any]:
    """A ``codex`` result as its ``handlers.js`` builds one by default: Codex's answer as text, the
    thread id in the block's ``_meta``, no ``structuredContent`` (STRUCTURED_CONTENT_ENABLED unset)."""
    answer = f'Done: {prompt}. parse_price now returns Decimal("12.50") for \u201c12,50 \u20ac\u201d; 1e-3 rounds up.'
    meta = {"threadId": "019a-caf\u00e9-7f", "model": "gpt-5.3-codex"}
    return {"content": [{"type": "text", "text": answer, "_meta": meta}]}


@pytest.mark.wire  # (node reads the package)
def test_the_codex_entry_matches_the_codex_tool_of_the_published_server_and_nothing_else() -> None:
    tools = codex_tools()
    table = shipped()
    matched = {tool["name"]: [entry.id for entry in table.for_tool(tool)] for tool in tools}
    assert matched["codex"] == [CODEX_ENTRY]
    assert all(ids == [] for name, ids in matched.items() if name != "codex")
    (codex,) = (tool for tool in tools if tool["name"] == "codex")
    another = {
        **codex,
        "outputSchema": {"type": "object", "properties": {"threadId": {"type": "string"}}, "required": ["threadId"]},
    }
    assert table.for_tool(another) == ()  # another server's (or version's) codex tool
    assert table.for_tool({**codex, "description": "Codex, worded otherwise"}) != ()


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_with_no_rule_file_codex_mcp_servers_codex_tool_is_accepted_by_every_client(mode: ResponseMode) -> None:
    tools = codex_tools()

    async def answer(call: Any) -> dict[str, Any]:
        return codex_result(str(call.arguments.get("prompt")))

    specs = [ToolSpec(tool, answer) for tool in tools]
    steps: list[dict[str, Any]] = [
        {"op": "listTools"},
        {"op": "callTool", "name": "codex", "arguments": {"prompt": "fix parse_price (caf\u00e9 12.50)"}},
    ]
    with serve(ScriptedServer(specs, response_mode=mode)) as up, proxy_for(up + "/mcp") as px:
        direct = await each_client(up + "/mcp", steps)
        with capture_rewrites() as log:
            through = await each_client(px + "/mcp", steps)
    for client, record in direct.items():
        assert not record["steps"][1]["ok"], client  # each enforces the declared outputSchema
    for client, record in through.items():
        listed, called = record["steps"]
        assert called["ok"], (client, called)
        (codex,) = (tool for tool in listed["value"]["tools"] if tool["name"] == "codex")
        assert "outputSchema" not in codex and codex["inputSchema"] == tools[0]["inputSchema"]
        expected = codex_result("fix parse_price (caf\u00e9 12.50)")["content"][0]
        assert called["value"]["content"][0]["text"] == expected["text"], client
        assert called["value"]["content"][0]["_meta"] == expected["_meta"], client  # nothing lost
    lines = [line for line in log.lines if line["rule"] == "drop_output_schema"]
    assert lines and all(CODEX_ENTRY in line["reason"] for line in lines)
