"""Many clients at once: 100 concurrent sessions of mixed eras through one proxy, each with its own
schema for the same tool name; every client must get exactly its own response, normalized against
its own schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from mcp_normalizer.demo.clients import run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolCall, ToolSpec

from .support import proxy_for, serve

pytestmark = pytest.mark.wire

CLIENTS = 100


def schema_for(group: int) -> dict[str, Any] | None:
    """Three kinds of clients: ``tags`` is a required array, an optional string, or unconstrained."""
    if group == 0:
        return {"type": "object", "properties": {"tags": {"type": "array"}}, "required": ["owner", "tags"]}
    if group == 1:
        return {"type": "object", "properties": {"tags": {"type": "string"}}, "required": ["owner"]}
    return None


def tools_for(headers: Mapping[str, str]) -> list[ToolSpec]:
    token = headers.get("authorization", "").removeprefix("Bearer ")
    if not token.startswith("client-"):
        return []
    group = int(token.removeprefix("client-")) % 3

    async def report(call: ToolCall) -> dict[str, Any]:
        # The same shape for everyone; only the schema each client was given differs.
        return {"content": [{"type": "text", "text": token}], "structuredContent": {"owner": token, "tags": None}}

    tool: dict[str, Any] = {"name": "report", "inputSchema": {"type": "object"}}
    schema = schema_for(group)
    if schema is not None:
        tool["outputSchema"] = schema
    return [ToolSpec(tool, report)]


@pytest.mark.anyio
async def test_a_hundred_concurrent_sessions_of_mixed_eras_each_get_their_own_normalization() -> None:
    steps = [{"op": "listTools"}, {"op": "callTool", "name": "report"}, {"op": "callTool", "name": "report"}]
    results: dict[int, dict[str, Any]] = {}
    with serve(ScriptedServer(tools_for)) as up, proxy_for(up + "/mcp") as px:

        async def client(i: int) -> None:
            mode = "legacy" if i % 2 else "2026-07-28"  # sessions and stateless requests interleaved
            results[i] = await run_python(px + "/mcp", steps, {"authorization": f"Bearer client-{i}"}, mode=mode)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for i in range(CLIENTS):
                    tg.start_soon(client, i)

    assert len(results) == CLIENTS
    for i, record in results.items():
        token = f"client-{i}"
        assert all(step["ok"] for step in record["steps"]), (i, record)
        assert record["steps"][0]["value"]["tools"][0].get("outputSchema") == schema_for(i % 3)
        for call in record["steps"][1:]:
            result = call["value"]
            assert result["content"] == [{"type": "text", "text": token}]  # its own response
            expected = [{"owner": token, "tags": []}, {"owner": token}, {"owner": token, "tags": None}][i % 3]
            assert result["structuredContent"] == expected, (i, result)
