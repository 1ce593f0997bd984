"""The benchmark's tools: how they are listed, what the upstream returns, what a client should get.

Every call carries a ``nonce`` argument that the upstream echoes in its result, so a client can
tell its own response from anyone else's. Tools named in :data:`SSE_TOOLS` are answered as
``text/event-stream``, every other one as ``application/json`` (one upstream, both modes).

- ``bench.small`` / ``bench.small.sse``: a conforming result (a few hundred bytes of
  ``structuredContent`` with an ``outputSchema``): the normalizer validates it and changes nothing.
- ``bench.problem`` / ``bench.problem.sse``: the Protean error contract (``isError`` with an
  RFC 9457 problem in ``structuredContent``): ``error_problem`` moves it to ``_meta``.
- ``bench.large``: a conforming result of about ``arguments.bytes`` bytes.
- ``bench.large.float``: the same rows with a decimal ``price`` each (``12.50``, ``0.37``, ``1E-7``...,
  written as spelled): the float-heavy result of field servers.
- ``bench.large.sse``: the ``bench.large`` result answered as one SSE event.
- ``bench.progress.sse``: ``arguments.count`` progress notifications ``arguments.gap_ms`` apart,
  each with the upstream's ``time.time_ns()`` at emission as its ``message``, then a small result.

A request with the header ``x-bench-tools: N`` is listed :func:`many_tools` (``N`` field-like
tools, one in ten with an OpenAPI ``nullable`` the normalizer rewrites) instead.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

SMALL = "bench.small"
SMALL_SSE = "bench.small.sse"
PROBLEM = "bench.problem"
PROBLEM_SSE = "bench.problem.sse"
LARGE = "bench.large"
LARGE_FLOAT = "bench.large.float"
LARGE_SSE = "bench.large.sse"
PROGRESS = "bench.progress.sse"
#: Tools the upstream answers with an SSE stream.
SSE_TOOLS = frozenset({SMALL_SSE, PROBLEM_SSE, PROGRESS, LARGE_SSE})
#: The ``_meta`` key of the RFC 9457 problem in the shipped config.
PROBLEM_KEY = "org.htcom.protean/problem"

_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 0},
        "name": {"type": "string", "minLength": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
        "size": {"type": "integer"},
        "weight": {"type": "number", "minimum": 0},
    },
    "required": ["id", "name"],
    "additionalProperties": False,
}
SMALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "nonce": {"type": "string"},
        "status": {"enum": ["ok", "partial"]},
        "count": {"type": "integer", "minimum": 0},
        "items": {"type": "array", "items": _ITEM},
    },
    "required": ["nonce", "status", "items"],
}
_ROW: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "owner": {"type": "string"},
        "state": {"enum": ["active", "retired"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "price": {"type": "number", "minimum": 0},
    },
    "required": ["id", "name", "state"],
}
LARGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"nonce": {"type": "string"}, "rows": {"type": "array", "items": _ROW}},
    "required": ["nonce", "rows"],
}
_INPUT: dict[str, Any] = {"type": "object", "properties": {"nonce": {"type": "string"}}, "required": ["nonce"]}


def tool_listing() -> list[dict[str, Any]]:
    """The tools as ``tools/list`` advertises them."""
    small = {"inputSchema": _INPUT, "outputSchema": SMALL_SCHEMA}
    return [
        {"name": SMALL, "description": "A small conforming result (JSON response).", **small},
        {"name": SMALL_SSE, "description": "A small conforming result (SSE response).", **small},
        {"name": PROBLEM, "description": "An error in the old Protean contract (JSON response).", **small},
        {"name": PROBLEM_SSE, "description": "An error in the old Protean contract (SSE response).", **small},
        {
            "name": LARGE,
            "description": "A large conforming result.",
            "inputSchema": _INPUT,
            "outputSchema": LARGE_SCHEMA,
        },
        {
            "name": LARGE_FLOAT,
            "description": "A large conforming result with a decimal in every row.",
            "inputSchema": _INPUT,
            "outputSchema": LARGE_SCHEMA,
        },
        {
            "name": LARGE_SSE,
            "description": "A large conforming result in one SSE event.",
            "inputSchema": _INPUT,
            "outputSchema": LARGE_SCHEMA,
        },
        {"name": PROGRESS, "description": "Progress notifications, then a small result.", **small},
    ]


def _spell(spelled: bool, text: bytes) -> Any:
    """A decimal as the upstream writes it (``orjson.Fragment``), or as a client decodes it (float)."""
    return orjson.Fragment(text) if spelled else float(text)


def small_structured(nonce: str, spelled: bool = False) -> dict[str, Any]:
    """The ``structuredContent`` of a small result (about 350 bytes, decimals written as field servers
    write them when ``spelled``: ``12.50``, ``1.10``, ``2.5E-3``)."""
    return {
        "nonce": nonce,
        "status": "ok",
        "count": 3,
        "load": _spell(spelled, b"12.50"),
        "items": [
            {"id": 1, "name": "alpha-service", "tags": ["prod", "eu-west"], "size": 10240},
            {
                "id": 2,
                "name": "beta-worker \u00e9",
                "tags": ["staging"],
                "size": 2048,
                "weight": _spell(spelled, b"1.10"),
            },
            {
                "id": 3,
                "name": "gamma-gateway",
                "tags": ["prod", "us-east", "edge"],
                "weight": _spell(spelled, b"2.5E-3"),
            },
        ],
    }


def small_result(nonce: str, spelled: bool = False) -> dict[str, Any]:
    """A conforming small ``CallToolResult`` (text mirror included, so no rule has anything to do):
    the upstream sends it ``spelled``; a client decodes the same values as plain floats."""
    text = orjson.dumps(small_structured(nonce, spelled=True)).decode()
    return {"content": [{"type": "text", "text": text}], "structuredContent": small_structured(nonce, spelled)}


def problem(nonce: str, spelled: bool = False) -> dict[str, Any]:
    """The RFC 9457 problem a ``bench.problem`` call fails with (with a decimal extension member)."""
    return {
        "type": "https://protean.example/problems/forbidden",
        "title": "Forbidden",
        "status": 403,
        "detail": "token lacks scope 'scopes:read'",
        "code": "SCOPE_DENIED",
        "instance": f"/calls/{nonce}",
        "retryAfter": _spell(spelled, b"2.50"),
    }


def problem_result(nonce: str) -> dict[str, Any]:
    """What the upstream sends: the problem only in ``structuredContent`` (strict clients reject it)."""
    return {"content": [], "structuredContent": problem(nonce, spelled=True), "isError": True}


def rewritten_problem_result(nonce: str) -> dict[str, Any]:
    """What a client gets through the normalizer with the shipped config (``error_problem``)."""
    return {
        "content": [{"type": "text", "text": "[SCOPE_DENIED] token lacks scope 'scopes:read'"}],
        "isError": True,
        "_meta": {PROBLEM_KEY: problem(nonce)},
    }


#: The request header that asks for :func:`many_tools`.
MANY_TOOLS_HEADER = "x-bench-tools"


def many_tool(i: int) -> dict[str, Any]:
    """Tool ``i`` of a huge listing: about 320 bytes, with non-ASCII and escapes in its text and a
    nested ``outputSchema``; every tenth one marks a field OpenAPI ``nullable: true`` (rewritten)."""
    scope: dict[str, Any] = {"type": "string"}
    if i % 10 == 0:
        scope["nullable"] = True
    return {
        "name": f"many.tool_{i:06d}",
        "description": f'región {i} \u2014 "q"\n',
        "inputSchema": {"type": "object", "properties": {"limit": {"maximum": 500}}},
        "outputSchema": {
            "type": "object",
            "properties": {
                "scope": scope,
                "items": {"type": "array", "items": {"type": "object", "properties": {"cpu": {"type": "number"}}}},
            },
            "required": ["scope", "items"],
        },
    }


_PRICES = (b"12.50", b"0.37", b"1E-7", b"2.5e3", b"19.99", b"0.30000000000000004", b"100.0", b"7")


@functools.lru_cache(maxsize=16)
def _rows(size: int, decimals: bool = False) -> orjson.Fragment:
    """Pre-encoded rows adding up to about ``size`` bytes (cached: the upstream only copies them);
    with ``decimals`` each row carries a ``price`` spelled as field servers spell decimals."""
    rows: list[bytes] = []
    total = 0
    while total < size:
        i = len(rows)
        row = {"id": i, "name": f"row-{i:07d}", "owner": "team-a", "state": "active", "tags": ["x", "y"]}
        encoded = orjson.dumps(row)
        if decimals:
            encoded = encoded[:-1] + b',"price":' + _PRICES[i % len(_PRICES)] + b"}"
        rows.append(encoded)
        total += len(encoded) + 1
    return orjson.Fragment(b"[" + b",".join(rows) + b"]")


def large_result(nonce: str, size: int, decimals: bool = False) -> dict[str, Any]:
    """A conforming result of about ``size`` bytes (the rows are an ``orjson.Fragment``)."""
    return {
        "content": [{"type": "text", "text": f"about {size} bytes of rows"}],
        "structuredContent": {"nonce": nonce, "rows": _rows(size, decimals)},
    }
