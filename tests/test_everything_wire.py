"""The reference server ``@modelcontextprotocol/server-everything`` (npm) behind the proxy, driven by
the three strict clients: every tool it offers that runs offline answers each client the same
through the proxy as directly; its tool list changes only where a client in ``cases/faults.md``
rejects it, for clients not known to accept it, with what was removed kept in ``_meta``; and
``check`` reports it clean (advisories only)."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from .support import EXE, ROOT, capture_rewrites, each_client, free_port, need_shared, proxy_for, running

pytestmark = pytest.mark.wire

EVERYTHING = ROOT / "tests" / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
KEPT = "dev.mcp-normalizer/original-keywords"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"

#: Its tools that run offline and answer without a client capability (sampling, elicitation), with
#: arguments of every JSON kind. Left out: gzip-file-as-resource (fetches a URL), the two toggles and
#: the long-running and research tools (they change the session or stream for seconds).
CALLS: list[dict[str, Any]] = [
    {"op": "callTool", "name": "echo", "arguments": {"message": 'naïve "q" \\ ✓ 𝄞 \u0000 12.5e-3'}},
    {"op": "callTool", "name": "get-annotated-message", "arguments": {"messageType": "error", "includeImage": True}},
    {"op": "callTool", "name": "get-resource-links", "arguments": {"count": 2}},
    {"op": "callTool", "name": "get-resource-reference", "arguments": {"resourceType": "Blob", "resourceId": 2}},
    {"op": "callTool", "name": "get-structured-content", "arguments": {"location": "Chicago"}},
    {"op": "callTool", "name": "get-sum", "arguments": {"a": 1.5e300, "b": -0.000125}},
    {"op": "callTool", "name": "get-tiny-image", "arguments": {}},
]
STEPS: list[dict[str, Any]] = [{"op": "listTools"}, *CALLS]


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    loopback = need_shared("tools", "loopback.cjs")
    port = free_port()
    command = ["node", "--require", str(loopback), str(EVERYTHING / "index.js"), "streamableHttp"]
    with running(command, port, {"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


def answers(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The call steps of a client's record without the Node client's timestamps (``at``) and the
    one answer that holds the time it was made (a resource created "at 12:06:18 PM")."""
    steps = [{k: v for k, v in step.items() if k != "at"} for step in record["steps"][1:]]
    return [step for step, call in zip(steps, CALLS, strict=True) if call["name"] != "get-resource-reference"]


@pytest.mark.anyio
async def test_every_tool_answers_every_client_as_directly_and_the_list_changes_only_where_justified(
    upstream: str,
) -> None:
    with proxy_for(upstream) as px, capture_rewrites() as log:
        direct = await each_client(upstream, STEPS)
        proxied = await each_client(px + "/mcp", STEPS)
    for client, record in proxied.items():
        assert all(step["ok"] for step in record["steps"]), (client, record)
        assert answers(record) == answers(direct[client]), client  # every result as the server sent it
    assert proxied["python"]["steps"][0] == direct["python"]["steps"][0]  # known to accept draft-07
    for client in ("ts-sdk-1", "ts-client-2"):  # unknown clients: the output every client accepts
        tools = {tool["name"]: tool for tool in proxied[client]["steps"][0]["value"]["tools"]}
        server = {tool["name"]: tool for tool in direct[client]["steps"][0]["value"]["tools"]}
        assert tools.keys() == server.keys()
        changed = {name for name in tools if tools[name] != server[name]}
        assert changed == {name for name in server if "outputSchema" in server[name]} == {"get-structured-content"}
        tool = tools["get-structured-content"]
        restored = copy.deepcopy(tool)
        assert restored["_meta"].pop(KEPT) == {"/outputSchema/$schema": DRAFT_07}
        if not restored["_meta"]:
            del restored["_meta"]
        restored["outputSchema"]["$schema"] = DRAFT_07
        assert restored == server["get-structured-content"]  # nothing else changed, nothing lost
        assert tool["inputSchema"]["$schema"] == DRAFT_07  # every client accepts a draft-07 inputSchema
    lines = [(line["rule"], line["tool"], line["client"], line.get("client_fault")) for line in log.lines]
    assert set(lines) == {("schema_dialect", "get-structured-content", "mcp-normalizer-test", "schema_dialect_draft")}


def test_check_reports_server_everything_clean(upstream: str) -> None:
    calls = [arg for call in CALLS for arg in ("--call", call["name"], json.dumps(call["arguments"]))]
    done = subprocess.run(
        [EXE, "check", upstream, "--format", "json", *calls], capture_output=True, text=True, timeout=120
    )
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["clean"], report
    assert [(f["rule"], f["advisory"]) for f in report["findings"]] == [("schema_dialect", True)]
    # its outputSchema declares draft-07: valid, so the finding names the clients' limit, not a broken rule
    spec = report["findings"][0]["spec"]["rule"]
    assert "declares" in spec and "is valid" in spec and "without $schema" not in spec
    strict = subprocess.run([EXE, "check", upstream, "--strict"], capture_output=True, text=True, timeout=120)
    assert strict.returncode == 1, strict.stdout  # the advisory still counts under --strict
