"""Replay the public fault cases (``../shared/cases/public.json``) in scope through the proxy.

Each case's tool and faulty result are served by a legacy upstream; the three strict clients list
the tools and call the case's tool directly and through the proxy. Through the proxy every client
must accept the result, success results must conform to the schema the proxy advertised, errors
keep their text, and no value of the original result may be lost: each is kept in place, repaired
in place (and recorded in ``_meta``), or carried in ``_meta``.
"""

from __future__ import annotations

from typing import Any

import pytest

from .support import (
    capture_rewrites,
    case_server,
    conforms,
    contains_value,
    leaves,
    load_cases,
    proxy_for,
    replay,
    serve,
)

pytestmark = pytest.mark.wire

KINDS = ("error_result_validated", "null_for_non_nullable", "missing_text_content", "null_optional_fields")
ORIGINALS = "dev.mcp-normalizer/original-values"


def assert_nothing_lost(original: dict[str, Any], received: dict[str, Any]) -> None:
    """Every value of the original result is kept, repaired in place and recorded, or carried in _meta."""
    meta = received.get("_meta") or {}
    recorded = meta.get(ORIGINALS) or {}
    for path, value in leaves(original):
        if value is None or value == [] or value == {}:
            continue  # carries no value; nulls inside structuredContent are checked below
        node: Any = received
        for step in path:
            node = node[step] if isinstance(node, dict | list) and _has(node, step) else _MISSING
        if node == value and type(node) is type(value):
            continue
        if path and path[0] == "structuredContent":
            pointer = "".join(f"/{p}" for p in path[1:])
            if recorded.get(pointer) == value or contains_value(meta, value):
                continue
        if path and path[0] == "_meta" and contains_value(meta, value):
            continue
        raise AssertionError(f"value at {path} lost: {value!r} not in {received!r}")
    # A null the server put in structuredContent is still there, or recorded where it went.
    for path, value in leaves(original.get("structuredContent")):
        if value is None:
            pointer = "".join(f"/{p}" for p in path)
            node = received.get("structuredContent")
            for step in path:
                node = node[step] if isinstance(node, dict | list) and _has(node, step) else _MISSING
            assert node is None or pointer in recorded, f"null at {pointer} neither kept nor recorded"


_MISSING = object()


def _has(node: dict[str, Any] | list[Any], step: Any) -> bool:
    if isinstance(node, dict):
        return step in node
    return isinstance(step, int) and 0 <= step < len(node)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_public_cases_are_accepted_by_strict_clients_through_the_proxy(mode: str) -> None:
    CASES = load_cases(*KINDS)
    assert len(CASES) >= 10
    with serve(case_server(CASES, mode)) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        # Directly, the strict clients reject these results with an error (none of them hangs: a
        # timeout long enough that a loaded machine never passes for a rejection).
        direct = await replay(up + "/mcp", CASES, request_timeout=15)
        proxied = await replay(px + "/mcp", CASES)

    rejected_directly = set()
    for client, records in direct.items():
        for case, record in zip(CASES, records, strict=True):
            if not all(step["ok"] for step in record["steps"]):
                rejected_directly.add((case["id"], client))
    # The corpus is not vacuous: strict clients do reject several of these cases directly.
    assert len({case_id for case_id, _ in rejected_directly}) >= 5, rejected_directly

    for client, records in proxied.items():
        for case, record in zip(CASES, records, strict=True):
            where = f"{case['id']} via {client}"
            assert all(step["ok"] for step in record["steps"]), (where, record["steps"])
            listed = record["steps"][0]["value"]["tools"]
            assert [tool["name"] for tool in listed] == [case["tool"]["name"]], where
            advertised = listed[0].get("outputSchema")
            result = record["steps"][1]["value"]
            original = case["result"]
            if result.get("isError"):
                sent = [b["text"] for b in original.get("content") or [] if b.get("type") == "text"]
                got = [b["text"] for b in result["content"] if b["type"] == "text"]
                assert got[: len(sent)] == sent and got, f"{where}: error text lost"
            elif advertised is not None and "structuredContent" in result:
                assert conforms(result["structuredContent"], advertised), where
            assert_nothing_lost(original, result)

    # Every case a client rejected directly was rewritten by a rule (and said so in the log).
    rewritten_tools = {line["tool"] for line in log.rewrites()}
    for case_id, _ in rejected_directly:
        case = next(c for c in CASES if c["id"] == case_id)
        assert case["tool"]["name"] in rewritten_tools, case_id
