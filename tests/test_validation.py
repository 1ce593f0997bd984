"""Validation that cannot be turned against the proxy: the fast engine gives the reference engine's
verdicts on the corpus, and hostile schemas and payloads degrade to a pass-through, never a stall."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import anyio
import httpx
import jsonschema
import orjson
import pytest
import referencing

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.schema import SchemaCompiler, SchemaUnusable
from mcp_normalizer.types import Receive, Scope, Send

from .support import HEADERS, NEW_CASES, capture_rewrites, initialize, load_cases, proxy_for, read_body, rpc, serve


def reference_verdict(schema: Any, instance: Any) -> bool | None:
    """python-jsonschema's verdict (the MCP Python SDK client's engine); ``None`` if it cannot say."""
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        return bool(cls(schema, registry=referencing.Registry()).is_valid(instance))
    except (jsonschema.SchemaError, jsonschema.exceptions._RefResolutionError, RecursionError):
        return None


@pytest.mark.pure
def test_the_fast_engine_agrees_with_the_reference_engine_on_the_corpus() -> None:
    cases = [c for c in load_cases() if c.get("tool")] + [
        {"id": i, "tool": t, "result": r, "expected": {"tool": t, "result": r}} for i, _, t, r in NEW_CASES
    ]
    normalizer = Normalizer(NormalizerConfig())
    compiler = SchemaCompiler()
    compared = 0
    for case in cases:
        tools = [case["tool"], case["expected"]["tool"]]
        tools.append(normalizer.tools_list({"tools": [case["tool"]]}, "2025-11-25").result["tools"][0])
        instances = [case["result"].get("structuredContent"), case["expected"]["result"].get("structuredContent")]
        for tool, instance in itertools.product(tools, instances):
            schema = tool.get("outputSchema")
            if schema is None or instance is None:
                continue
            expected = reference_verdict(schema, instance)
            try:
                got = compiler.compile(schema).is_valid(instance)
            except SchemaUnusable:
                got = None
            if expected is not None and got is not None:  # both engines can say (a dangling $ref: python
                assert got == expected, (case["id"], schema, instance)  # resolves lazily, rust refuses)
                compared += 1
    assert compared >= 60


def deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"a": node}}
    return node


NODE = {"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#/$defs/node"}}}
HOSTILE: list[tuple[dict[str, Any], dict[str, Any]]] = [
    # A pattern that backtracks exponentially in Python's re (minutes for this input).
    (
        {
            "name": "redos",
            "outputSchema": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}},
        },
        {"content": [{"type": "text", "text": "x"}], "structuredContent": {"s": "a" * 48 + "!"}},
    ),
    # uniqueItems over thousands of objects (pairwise comparison takes a minute in Python).
    (
        {
            "name": "unique",
            "outputSchema": {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}},
        },
        {
            "content": [{"type": "text", "text": "xs"}],
            "structuredContent": {"xs": [{"id": i, "tags": ["a", "b"]} for i in range(8000)]},
        },
    ),
    # A schema nested far deeper than any real one.
    (
        {"name": "deep", "outputSchema": deep(300)},
        {"content": [{"type": "text", "text": "d"}], "structuredContent": {}},
    ),
    # A recursive $ref, and an instance that follows it a long way down.
    (
        {"name": "tree", "outputSchema": {"$ref": "#/$defs/node", "$defs": {"node": NODE}}},
        {"content": [{"type": "text", "text": "t"}], "structuredContent": {"name": "r", "child": {"name": "c"}}},
    ),
    # A remote $ref (must never be fetched) on an error result.
    (
        {
            "name": "remote",
            "outputSchema": {"type": "object", "properties": {"a": {"$ref": "http://169.254.169.254/x"}}},
        },
        {"content": [{"type": "text", "text": "boom"}], "structuredContent": {"a": 1}, "isError": True},
    ),
    # A result too large to validate (above max_validate_bytes): passed through as it came.
    (
        {"name": "huge", "outputSchema": {"type": "object", "properties": {"blob": {"type": "string"}}}},
        {"content": [{"type": "text", "text": "big"}], "structuredContent": {"blob": "x" * (5 * 1024 * 1024)}},
    ),
]


@pytest.mark.wire
@pytest.mark.anyio
async def test_hostile_schemas_and_payloads_pass_through_without_stalling_the_proxy() -> None:
    specs = [ToolSpec({**tool, "inputSchema": {"type": "object"}}, returning(result)) for tool, result in HOSTILE]
    with (
        serve(ScriptedServer(specs, response_mode="json")) as up,
        proxy_for(up + "/mcp") as px,
        capture_rewrites() as log,
    ):
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=60) as http:
            with anyio.fail_after(60):  # a hang guard, not a speed assertion: the old engine took minutes
                session = await initialize(http, url)
                listed = await rpc(http, url, "tools/list", {}, 1, **session)
                answers = {}
                for rid, (tool, _) in enumerate(HOSTILE, start=2):
                    answers[tool["name"]] = await rpc(http, url, "tools/call", {"name": tool["name"]}, rid, **session)
                # The proxy still answers promptly-enough everything else on the same session.
                assert (await rpc(http, url, "ping", {}, 99, **session))["result"] == {}
    advertised = {t["name"]: t.get("outputSchema") for t in listed["result"]["tools"]}
    assert advertised["deep"] == deep(300)  # unreadable: passed untouched
    assert advertised["remote"]["properties"]["a"] == {}  # never fetched, left unconstrained
    for tool, result in HOSTILE:
        if tool["name"] in ("redos", "unique", "deep", "tree", "huge"):
            assert answers[tool["name"]]["result"] == result, tool["name"]  # untouched
    assert answers["remote"]["result"]["isError"] is True
    events = {(line["tool"], line["event"]) for line in log.lines}
    assert ("huge", "skipped") in events and ("redos", "unrepaired") in events


class HeldBack:
    """An upstream whose ``tools/call`` answer is a large JSON body (``content-length`` given) sent in
    two parts: the second only once the test has seen the response start through the proxy."""

    TOOL = {"name": "big", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}

    def __init__(self, blob: int) -> None:
        self.release = threading.Event()
        result = {"content": [{"type": "text", "text": "big"}], "_meta": None, "structuredContent": {"b": "x" * blob}}
        self.body = orjson.dumps({"jsonrpc": "2.0", "id": 2, "result": result})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = orjson.loads(await read_body(receive))
        if request["method"] == "tools/list":
            body = orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": [self.TOOL]}})
            parts = [body]
        else:
            parts = [self.body[:1000], self.body[1000:]]
        headers = [(b"content-type", b"application/json"), (b"content-length", str(sum(map(len, parts))).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for n, part in enumerate(parts):
            if n:
                await anyio.to_thread.run_sync(self.release.wait, abandon_on_cancel=True)
            await send({"type": "http.response.body", "body": part, "more_body": n < len(parts) - 1})


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_result_above_the_validation_bound_is_streamed_on_unread() -> None:
    """Above ``max_validate_bytes`` a ``tools/call`` result is not read at all: its start and first
    bytes reach the client before the upstream has sent the rest, and it arrives byte-identical
    (its ``_meta: null`` left as it is), with one ``skipped`` log line."""
    upstream = HeldBack(blob=200_000)
    config = NormalizerConfig.from_mapping({"normalizer": {"max_validate_bytes": 65536}})
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "big"}}
    with serve(upstream) as up, proxy_for(up + "/mcp", config) as px, capture_rewrites() as log:
        async with httpx.AsyncClient(timeout=30) as http:
            with anyio.fail_after(30):  # a hang guard: a proxy holding the start never lets the upstream go on
                async with http.stream("POST", px + "/mcp", content=orjson.dumps(call), headers=HEADERS) as response:
                    chunks = response.aiter_raw()
                    first = await chunks.__anext__()
                    upstream.release.set()
                    body = first + b"".join([chunk async for chunk in chunks])
    assert body == upstream.body
    assert response.headers["content-length"] == str(len(upstream.body))
    assert [(line["tool"], line["event"]) for line in log.lines] == [("big", "skipped")]
