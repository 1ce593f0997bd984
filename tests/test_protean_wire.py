"""The Protean contract on the wire: strict clients fail against the legacy upstream and succeed
through the proxy (``create_app`` under uvicorn), in SSE and JSON response modes."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import FORBIDDEN, GATE_FAILED, RUNTIMES, protean_server

from .support import PROBLEM_KEY, ResponseMode, capture_rewrites, protean_rules, proxy_for, serve

pytestmark = pytest.mark.wire

STEPS: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "callTool", "name": "protean.scope_list"},
    {"op": "callTool", "name": "protean.list_runtimes"},
    {"op": "callTool", "name": "protean.deploy", "arguments": {"service": "billing"}, "progress": True},
    {"op": "callTool", "name": "protean.whoami"},
]
MISMATCH = "Structured content does not match the tool's output schema"


async def all_clients(url: str) -> dict[str, dict[str, Any]]:
    """What each real client received for :data:`STEPS` at ``url``."""
    v1 = await run_node("v1", [{"url": url, "steps": STEPS}])
    v2 = await run_node("v2", [{"url": url, "steps": STEPS}])
    return {"ts-sdk-1": v1[0], "ts-client-2": v2[0], "python": await run_python(url, STEPS)}


def texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block["type"] == "text"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_strict_clients_reject_legacy_upstream_and_accept_it_through_the_proxy(
    mode: ResponseMode,
) -> None:
    with serve(protean_server(mode)) as up, proxy_for(up + "/mcp", protean_rules()) as px, capture_rewrites() as log:
        direct = await all_clients(up + "/mcp")
        proxied = await all_clients(px + "/mcp")

    # Directly: TS SDK 1.x throws on every error result that carries structuredContent, and every
    # client throws on the null scope.
    scope_list, list_runtimes, deploy, whoami = (direct["ts-sdk-1"]["steps"][i] for i in range(1, 5))
    assert not scope_list["ok"] and MISMATCH in scope_list["error"]["message"]
    assert not list_runtimes["ok"] and "scope must be string" in list_runtimes["error"]["message"]
    assert not deploy["ok"] and MISMATCH in deploy["error"]["message"]
    assert whoami["ok"] and whoami["value"]["structuredContent"] == {}
    for client in ("ts-client-2", "python"):
        assert not direct[client]["steps"][2]["ok"], client

    for client, record in proxied.items():
        steps = record["steps"]
        assert all(step["ok"] for step in steps), (client, steps)
        tools = {tool["name"]: tool for tool in steps[0]["value"]["tools"]}
        scope_schema = tools["protean.list_runtimes"]["outputSchema"]["properties"]["runtimes"]["items"]
        assert scope_schema["properties"]["scope"]["type"] == ["string", "null"], client

        scope_list = steps[1]["value"]
        assert scope_list["isError"] is True
        assert scope_list["_meta"][PROBLEM_KEY] == FORBIDDEN
        assert "structuredContent" not in scope_list
        assert texts(scope_list) == ["[SCOPE_DENIED] token lacks scope 'scopes:read'"]

        list_runtimes = steps[2]["value"]
        assert list_runtimes["structuredContent"] == RUNTIMES  # the nulls arrive as nulls
        assert list_runtimes.get("isError", False) is False

        deploy = steps[3]["value"]
        assert deploy["isError"] is True
        assert deploy["_meta"][PROBLEM_KEY] == GATE_FAILED
        assert texts(deploy) == ["[GATE_FAILED] gate 'change-freeze' is closed until Monday"]
        if mode == "sse":
            assert [p["progress"] for p in record["progress"]] == [1, 2, 3], client

        whoami = steps[4]["value"]
        assert "structuredContent" not in whoami
        assert texts(whoami) == ["svc-deployer@team-a"]

    # One rewrite line per rewritten message: 3 clients x (tools/list, scope_list, deploy, whoami).
    assert len(log.rewrites(rule="nullable", method="tools/list")) == 3
    assert len(log.rewrites(rule="error_problem")) == 6
    assert len(log.rewrites(rule="empty_structured_content")) == 3
    assert len(log.rewrites()) == 12
