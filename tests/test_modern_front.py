"""Issue 41 item 3: 2026-07-28 clients of a legacy-only server, served by the proxy with the
operator's consent (``[proxy] serve_modern_hosts``).

First the sans-IO core (:mod:`mcp_normalizer.engine.modern_front`) message by message, then the
wire: the strict 2026-07-28 clients (the TS client 2.4.0 pinned to 2026-07-28, the Python ``mcp``
``Client(mode="2026-07-28")``), which never fall back to ``initialize``, list and call every tool of
a :class:`~mcp_normalizer.demo.upstream.ScriptedServer` that speaks only the legacy eras, with
progress and an elicitation, through the proxy with consent; directly, and through the proxy
without consent, they reach nothing (as before), and a client that falls back still does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolCall, ToolSpec, returning
from mcp_normalizer.engine.modern_front import (
    FRONT_PREFIX,
    Ask,
    Envelope,
    Final,
    FrontCore,
    FrontSession,
    Relay,
    ToClient,
    ToListeners,
    ToUpstream,
    acknowledged,
    client_key,
    discover_result,
    envelope_of,
    initialize_request,
    is_refusal,
    legacy_request,
    listen_filter,
    listen_notification,
    modern_result,
)
from mcp_normalizer.types import ASGIApp, Message, Receive, Scope, Send

from .host_claude import run_claude_code
from .host_loop import McpServer
from .support import (
    HEADERS,
    MODERN,
    capture_rewrites,
    headers,
    params,
    proxy_for,
    read_body,
    replay_body,
    serve,
)

VERSION = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LEVEL = "io.modelcontextprotocol/logLevel"
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"

#: Field data: a decimal, a tiny float, text beyond ASCII, an integer past 2**64, nulls at depth.
DATA: dict[str, Any] = {
    "price": 12.5,
    "epsilon": 1e-7,
    "name": "caf\u00e9 \u2713 \u6771\u4eac",
    "big": 123456789012345678901,
    "lines": [{"sku": "\u00e9t\u00e9-1", "discount": None}, {"sku": "b", "discount": 0.25}],
}


def modern_request(method: str, rid: Any = 1, **values: Any) -> dict[str, Any]:
    """A 2026-07-28 request with the envelope of a client named ``host`` that declares elicitation."""
    meta = {VERSION: MODERN, CAPABILITIES: {"elicitation": {}}, INFO: {"name": "host", "version": "1"}}
    meta.update(values.pop("_meta", {}))
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**values, "_meta": meta}}


def envelope(**changes: Any) -> Envelope:
    found = envelope_of(modern_request("tools/list"))
    assert found is not None
    return dataclasses.replace(found, **changes)


# -- the sans-IO core, message by message ----------------------------------------------------------------


@pytest.mark.pure
def test_the_envelope_is_read_from_a_stateless_request_only() -> None:
    found = envelope_of(modern_request("tools/call", _meta={LEVEL: "info"}))
    assert found == Envelope(MODERN, {"elicitation": {}}, {"name": "host", "version": "1"}, "info")
    draft = modern_request("tools/list", _meta={VERSION: "draft-2027"})
    assert envelope_of(draft) is not None  # the registry reads a draft as the newest (stateless) era
    legacy = modern_request("tools/list", _meta={VERSION: "2025-11-25"})
    assert envelope_of(legacy) is None
    assert envelope_of({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}) is None
    assert envelope_of([modern_request("tools/list")]) is None  # a batch is no 2026-07-28 body


@pytest.mark.pure
def test_a_client_key_is_the_credential_the_name_and_the_capabilities() -> None:
    one = client_key("digest-a", envelope(capabilities={"elicitation": {"form": {}}, "roots": {}}))
    assert one == client_key("digest-a", envelope(capabilities={"roots": {}, "elicitation": {"form": {}}}))
    assert one != client_key("digest-b", envelope(capabilities={"elicitation": {"form": {}}, "roots": {}}))
    assert one != client_key(None, envelope(capabilities={"elicitation": {"form": {}}, "roots": {}}))
    assert one != client_key("digest-a", envelope(capabilities={"roots": {}}))
    other_name = envelope(capabilities={"elicitation": {"form": {}}, "roots": {}}, client_info={"name": "other"})
    assert one != client_key("digest-a", other_name)


@pytest.mark.pure
def test_the_session_opens_with_the_clients_capabilities_and_info_at_the_newest_legacy_version() -> None:
    request = initialize_request(envelope(), "mcpn-front.initialize")
    assert request == {
        "jsonrpc": "2.0",
        "id": "mcpn-front.initialize",
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "host", "version": "1"},
        },
    }
    nameless = initialize_request(envelope(client_info=None), "x")
    assert nameless["params"]["clientInfo"]["name"] == "unnamed 2026-07-28 client"  # required there


@pytest.mark.pure
def test_discover_is_answered_from_the_initialize_result() -> None:
    initialized = {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {"listChanged": True}, "logging": {}},
        "serverInfo": {"name": "legacy \u2713", "version": "1.0.0"},
        "instructions": "Prices are in \u20ac; 12.5 means twelve and a half.",
    }
    assert discover_result(initialized) == {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {"listChanged": True}, "logging": {}},
        "instructions": "Prices are in \u20ac; 12.5 means twelve and a half.",
        "ttlMs": 0,
        "cacheScope": "private",
        "resultType": "complete",
        "_meta": {SERVER_INFO: {"name": "legacy \u2713", "version": "1.0.0"}},
    }
    bare = discover_result({"protocolVersion": "2025-11-25", "capabilities": {}})
    assert "instructions" not in bare and "_meta" not in bare


@pytest.mark.pure
def test_a_request_loses_the_envelope_and_keeps_everything_else() -> None:
    message = modern_request(
        "tools/call",
        rid=7,
        name="quote",
        arguments=DATA,
        inputResponses={"elicitation-1": {"action": "accept"}},
        requestState="mcpn-front.x",
        _meta={LEVEL: "debug", "progressToken": "p-1", "traceparent": "00-ab-cd-01"},
    )
    assert legacy_request(message, "mcpn-front.rq.3") == {
        "jsonrpc": "2.0",
        "id": "mcpn-front.rq.3",
        "method": "tools/call",
        "params": {"name": "quote", "arguments": DATA, "_meta": {"progressToken": "p-1", "traceparent": "00-ab-cd-01"}},
    }
    assert legacy_request(modern_request("tools/list"), 1) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {},
    }


@pytest.mark.pure
def test_a_result_gets_the_members_the_era_requires_and_keeps_its_own() -> None:
    listed = {"tools": [{"name": "quote", "inputSchema": {"type": "object"}}]}
    assert modern_result("tools/list", listed) == {
        **listed,
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
    }
    called = {"content": [{"type": "text", "text": "12.5"}], "structuredContent": DATA}
    assert modern_result("tools/call", called) == {**called, "resultType": "complete"}
    cached = {**listed, "ttlMs": 60_000, "cacheScope": "public"}
    assert modern_result("tools/list", cached) == {**cached, "resultType": "complete"}
    assert modern_result("ping", {}) == {"resultType": "complete"}
    assert modern_result("tools/call", None) is None


@pytest.mark.pure
@pytest.mark.parametrize(
    ("status", "body", "refused"),
    [
        (
            400,
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "No valid session ID provided"}},
            True,
        ),
        (404, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}, True),
        (200, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}, True),
        (405, None, True),
        (400, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": "Unsupported protocol version"}}, False),
        (400, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "Header mismatch"}}, False),
        (200, {"jsonrpc": "2.0", "id": 1, "result": {"supportedVersions": ["2026-07-28"]}}, False),
        (401, {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Unauthorized"}}, False),
        (500, None, False),
        (502, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "upstream"}}, False),
        (200, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Internal error"}}, True),
    ],
)
def test_what_counts_as_a_legacy_servers_refusal(status: int, body: Any, refused: bool) -> None:
    assert is_refusal(status, body) is refused  # of server/discover, which every 2026-07-28 server answers


@pytest.mark.pure
@pytest.mark.parametrize(
    ("status", "code", "refused"),
    [(200, -32601, True), (200, -32600, True), (200, -32603, False), (200, -32602, False), (400, -32000, True)],
)
def test_another_requests_error_is_a_refusal_only_when_it_was_not_run(status: int, code: int, refused: bool) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "x"}}
    assert is_refusal(status, body, "tools/call") is refused  # a tool that ran and failed must not run twice


@pytest.mark.pure
def test_a_requests_stream_message_by_message() -> None:
    call = modern_request("tools/call", rid=3, name="confirm", arguments={}, _meta={"progressToken": 3})
    relay = Relay.start(call, "mcpn-front.rq.1", envelope())
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 3, "progress": 0.5}}
    assert relay.on_message(progress) == ToClient(progress)
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    assert relay.on_message(log) is None  # no logLevel asked: 2026-07-28 sends none
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert relay.on_message(changed) == ToListeners(changed)
    assert relay.on_message({"jsonrpc": "2.0", "method": "notifications/elicitation/complete"}) is None
    assert relay.on_message({"jsonrpc": "2.0", "id": "s-1", "method": "ping"}) == ToUpstream(
        {"jsonrpc": "2.0", "id": "s-1", "result": {}}
    )
    ask = {
        "jsonrpc": "2.0",
        "id": "s-2",
        "method": "elicitation/create",
        "params": {"message": "Proceed to caf\u00e9?"},
    }
    assert relay.on_message(ask) == Ask(
        "elicitation-1", {"method": "elicitation/create", "params": {"message": "Proceed to caf\u00e9?"}}
    )
    asked = relay.input_required({"elicitation-1": {"method": "elicitation/create"}}, "mcpn-front.tok")
    assert asked == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {
            "resultType": "input_required",
            "inputRequests": {"elicitation-1": {"method": "elicitation/create"}},
            "requestState": "mcpn-front.tok",
        },
    }
    # The retry: a new id and progress token; the answer goes upstream as the legacy response.
    retry = modern_request(
        "tools/call",
        rid=4,
        name="confirm",
        arguments={},
        inputResponses={"elicitation-1": {"action": "accept", "content": {"budget": 12.5}, "resultType": "complete"}},
        requestState="mcpn-front.tok",
        _meta={"progressToken": 4},
    )
    assert relay.resume(retry) == [
        {"jsonrpc": "2.0", "id": "s-2", "result": {"action": "accept", "content": {"budget": 12.5}}}
    ]
    assert relay.on_message(progress) == ToClient(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 4, "progress": 0.5}}
    )
    assert relay.on_message({"jsonrpc": "2.0", "id": "mcpn-front.rq.9", "result": {}}) is None  # not its response
    final = {"jsonrpc": "2.0", "id": "mcpn-front.rq.1", "result": {"content": [], "structuredContent": DATA}}
    assert relay.on_message(final) == Final(
        {"jsonrpc": "2.0", "id": 4, "result": {"content": [], "structuredContent": DATA, "resultType": "complete"}}
    )
    error = {"jsonrpc": "2.0", "id": "mcpn-front.rq.1", "error": {"code": -32602, "message": "Unknown tool"}}
    assert relay.on_message(error) == Final({**error, "id": 4})


@pytest.mark.pure
def test_questions_outside_a_tool_call_are_refused_and_unanswered_keys_are_errors() -> None:
    listing = Relay.start(modern_request("tools/list", rid=1), "u-1", envelope())
    roots = {"jsonrpc": "2.0", "id": 9, "method": "roots/list"}
    effect = listing.on_message(roots)
    assert isinstance(effect, ToUpstream) and effect.message["error"]["code"] == -32601
    call = Relay.start(modern_request("tools/call", rid=2, name="t"), "u-2", envelope(log_level="info"))
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "\u00e9"}}
    assert call.on_message(log) == ToClient(log)  # asked for a level: passes
    assert call.on_message(roots) == Ask("roots-1", {"method": "roots/list"})
    sampling = {"jsonrpc": "2.0", "id": 10, "method": "sampling/createMessage", "params": {"maxTokens": 5}}
    assert call.on_message(sampling) == Ask(
        "sampling-2", {"method": "sampling/createMessage", "params": {"maxTokens": 5}}
    )
    answers = call.resume(modern_request("tools/call", rid=3, inputResponses={"roots-1": {"roots": []}}))
    assert answers[0] == {"jsonrpc": "2.0", "id": 9, "result": {"roots": []}}
    assert answers[1]["id"] == 10 and answers[1]["error"]["code"] == -32603


@pytest.mark.pure
def test_listen_filters_acknowledgement_and_notifications() -> None:
    capabilities = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}
    asked = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["file:///caf\u00e9.txt"]}
    accepted = listen_filter(asked, capabilities)
    assert accepted == {"toolsListChanged": True, "resourceSubscriptions": ["file:///caf\u00e9.txt"]}
    assert acknowledged(5, accepted) == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": accepted, "_meta": {SUBSCRIPTION: 5}},
    }
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert listen_notification(changed, 5, accepted) == {**changed, "params": {"_meta": {SUBSCRIPTION: 5}}}
    prompts = {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"}
    assert listen_notification(prompts, 5, accepted) is None  # not accepted
    updated = {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "file:///caf\u00e9.txt"},
    }
    assert listen_notification(updated, "L", accepted) == {
        **updated,
        "params": {"uri": "file:///caf\u00e9.txt", "_meta": {SUBSCRIPTION: "L"}},
    }
    other = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///b"}}
    assert listen_notification(other, "L", accepted) is None
    assert listen_filter(asked, {}) == {}


@pytest.mark.pure
def test_the_core_learns_once_and_acts_only_with_consent() -> None:
    assert not FrontCore(consent=False).active
    assert not FrontCore(consent=False, mode="legacy").serving
    assert not FrontCore(consent=True, mode="2026-07-28").active
    assert FrontCore(consent=True, mode="legacy").serving  # the operator said so: nothing to learn
    core = FrontCore(consent=True)
    assert core.active and not core.serving
    core.learned("legacy")
    core.learned("2026-07-28")  # once learned, kept
    assert core.serving and core.upstream_era == "legacy"
    modern = FrontCore(consent=True)
    modern.learned("2026-07-28")
    assert not modern.active


@pytest.mark.pure
def test_sessions_are_bounded_and_expire_when_idle() -> None:
    core = FrontCore(consent=True, max_sessions=2, idle_timeout=60)
    a, b, c = (FrontSession(key, f"sid-{key}", "2025-11-25", {}) for key in "abc")
    assert core.add(a, now=0) == [] and core.add(b, now=1) == []
    b.busy = 1
    assert core.add(c, now=2) == [a]  # the longest-idle idle one
    assert core.session("a", now=3) is None and core.session("c", now=3) is c
    replacement = FrontSession("c", "sid-c2", "2025-11-25", {})
    core.drop(replacement)  # not the key's session: nothing dropped
    assert core.session("c", now=4) is c
    assert core.expire(now=200) == [c]  # idle; b is busy
    b.busy = 0
    assert core.expire(now=200) == [b]
    assert FrontSession("d", None, "2025-11-25", {}).mint_id() == f"{FRONT_PREFIX}rq.1"


@pytest.mark.pure
def test_a_log_level_is_set_on_the_session_when_a_request_asks_for_another() -> None:
    logging = FrontSession("k", "sid", "2025-11-25", {"capabilities": {"logging": {}}})
    first = logging.set_level(envelope(log_level="debug"))
    assert first == {
        "jsonrpc": "2.0",
        "id": f"{FRONT_PREFIX}level.1",
        "method": "logging/setLevel",
        "params": {"level": "debug"},
    }
    assert logging.set_level(envelope(log_level="debug")) is None  # already at that level
    assert logging.set_level(envelope(log_level=None)) is None  # none asked: its messages are dropped instead
    assert logging.set_level(envelope(log_level="error")) is not None
    silent = FrontSession("k", "sid", "2025-11-25", {"capabilities": {"tools": {}}})
    assert silent.set_level(envelope(log_level="debug")) is None  # the server declared no logging


@pytest.mark.pure
def test_a_parked_question_is_claimed_once_by_its_client_before_its_deadline() -> None:
    core = FrontCore(consent=True, input_timeout=30, max_parked=2)
    relay = Relay.start(modern_request("tools/call"), "u", envelope())
    token, dropped = core.park(relay, "handle-1", "key-a", now=0)
    assert token.startswith(FRONT_PREFIX) and dropped == []
    assert core.claim(token, "key-b", now=1) is None  # another client's retry
    assert core.claim(token, "key-a", now=31) is None  # too late
    parked = core.claim(token, "key-a", now=29)
    assert parked is not None and parked.handle == "handle-1"
    assert core.claim(token, "key-a", now=29) is None  # once
    first, _ = core.park(relay, "h1", "k", now=0)
    second, _ = core.park(relay, "h2", "k", now=0)
    third, dropped = core.park(relay, "h3", "k", now=0)
    assert [p.handle for p in dropped] == ["h1"]
    assert core.overdue(second, now=10) is None
    overdue = core.overdue(second, now=30)
    assert overdue is not None and overdue.handle == "h2" and core.overdue(second, now=31) is None
    assert core.claim(third, "k", now=1) is not None and core.claim(first, "k", now=1) is None


# -- on the wire ---------------------------------------------------------------------------------------

QUOTE = {
    "name": "quote",
    "description": "A price quote.",
    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
    "outputSchema": {
        "type": "object",
        "properties": {
            "price": {"type": "number"},
            "epsilon": {"type": "number"},
            "name": {"type": "string"},
            "big": {"type": "integer"},
            "lines": {"type": "array"},
        },
        "required": ["price", "name"],
    },
}
NOTE = {"name": "note", "description": "A note.", "inputSchema": {"type": "object", "properties": {}}}
DEPLOY = {
    "name": "deploy",
    "description": "Deploy; reports progress.",
    "inputSchema": {"type": "object", "properties": {"service": {"type": "string"}}},
}
CONFIRM = {
    "name": "confirm",
    "description": "Asks the user before it goes on.",
    "inputSchema": {"type": "object", "properties": {"budget": {"type": "number"}}},
}
TOUCH = {"name": "touch", "description": "Changes the tool list.", "inputSchema": {"type": "object", "properties": {}}}
ELICIT = {"action": "accept", "content": {"ok": True, "budget": 12.5, "note": "caf\u00e9 \u2713"}}
QUESTION = "Spend 12.5 \u20ac at the caf\u00e9?"


async def deploy(call: ToolCall) -> dict[str, Any]:
    for step, what in enumerate(("build \u2713", "upload"), start=1):
        await call.progress(step, 2, what)
    return {"content": [{"type": "text", "text": f"deployed {call.arguments.get('service')}"}]}


async def confirm(call: ToolCall) -> dict[str, Any]:
    await call.progress(1, 2, "asking")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "budget": {"type": "number"}}}
    answer = await call.ask("elicitation/create", {"message": QUESTION, "requestedSchema": schema})
    await call.progress(2, 2, "answered")
    result = answer.get("result") or {}
    text = json.dumps(result, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"answer": result, "asked": None}}


def legacy_server(mode: Literal["sse", "json"] = "sse") -> ScriptedServer:
    """A server that speaks only the legacy eras: quote (real data), note (text), deploy (progress),
    confirm (an elicitation), touch (changes its tool list: ``notifications/tools/list_changed``)."""
    quote = {"content": [{"type": "text", "text": json.dumps(DATA, ensure_ascii=False)}], "structuredContent": DATA}
    note = {"content": [{"type": "text", "text": "r\u00e9sum\u00e9 \u2713 12.5"}], "_meta": None}
    server = ScriptedServer(
        [
            ToolSpec(QUOTE, returning(quote)),
            ToolSpec(NOTE, returning(note)),
            ToolSpec(DEPLOY, deploy),
            ToolSpec(CONFIRM, confirm),
        ],
        response_mode=mode,
        modern=False,
        list_changed=True,
        name="legacy \u2713",
        instructions="Prices in \u20ac.",
    )

    async def touch(call: ToolCall) -> dict[str, Any]:
        await server.notify({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return {"content": [{"type": "text", "text": "touched"}]}

    assert isinstance(server.tools, list)
    server.tools.append(ToolSpec(TOUCH, touch))
    return server


def consent(**limits: Any) -> NormalizerConfig:
    proxy = dataclasses.replace(ProxyConfig(), serve_modern_hosts=True, **limits)
    return dataclasses.replace(NormalizerConfig.shipped(), proxy=proxy)


@contextmanager
def fronted(server: ScriptedServer, config: NormalizerConfig | None = None) -> Iterator[str]:
    """The proxy (with consent unless ``config`` says otherwise) in front of ``server``: its MCP URL."""
    with serve(server) as up, proxy_for(up + "/mcp", config if config is not None else consent()) as px:
        yield px + "/mcp"


STEPS: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "callTool", "name": "quote", "arguments": {"q": "caf\u00e9"}},
    {"op": "callTool", "name": "note", "arguments": {}},
    {"op": "callTool", "name": "deploy", "arguments": {"service": "\u6771\u4eac"}, "progress": True},
    {"op": "callTool", "name": "confirm", "arguments": {"budget": 12.5}, "progress": True},
]
PIN = {"mode": {"pin": MODERN}}


async def strict_clients(
    url: str, *, elicit: bool = True, steps: list[dict[str, Any]] = STEPS
) -> dict[str, dict[str, Any]]:
    """One session of ``steps`` with each strict 2026-07-28 client: its record by client."""
    session: dict[str, Any] = {"url": url, "versionNegotiation": PIN, "steps": steps, "clientName": "ts-host"}
    if elicit:
        session["elicitation"] = ELICIT
    ts = await run_node("v2", [session], request_timeout=15)
    python = await run_python(url, steps, mode=MODERN, client_name="py-host", elicitation=ELICIT if elicit else None)
    return {"ts-client-2": ts[0], "python-client": python}


@pytest.mark.wire
@pytest.mark.anyio
async def test_strict_2026_clients_list_and_call_every_tool_of_a_legacy_server_through_the_proxy() -> None:
    server = legacy_server()
    with serve(server) as up:
        direct = await strict_clients(up + "/mcp")
    for name, record in direct.items():  # directly: a pinned client reaches nothing of a legacy server
        assert not any(step["ok"] for step in record["steps"]), (name, record)
    server.requests.clear()
    with serve(server) as up, proxy_for(up + "/mcp", consent()) as px, capture_rewrites() as log:
        through = await strict_clients(px + "/mcp")
    for name, record in through.items():
        assert record["protocolVersion"] == MODERN, name
        assert all(step["ok"] for step in record["steps"]), (name, record)
        listed, quote, note, deployed, confirmed = (step["value"] for step in record["steps"])
        assert [tool["name"] for tool in listed["tools"]] == ["quote", "note", "deploy", "confirm", "touch"]
        structured = dict(quote["structuredContent"])
        big = structured.pop("big")  # (JavaScript reads an integer past 2**53 as the nearest double)
        assert big == DATA["big"] if name == "python-client" else big == pytest.approx(DATA["big"], rel=1e-15)
        assert structured == {k: v for k, v in DATA.items() if k != "big"}, name  # 12.5, 1e-7, unicode, nulls
        assert json.loads(quote["content"][0]["text"]) == DATA  # the text, exact
        assert note["content"] == [{"type": "text", "text": "r\u00e9sum\u00e9 \u2713 12.5"}]
        assert deployed["content"][0]["text"] == "deployed \u6771\u4eac"
        assert confirmed["structuredContent"] == {"answer": ELICIT, "asked": None}, name
        assert [e["message"] for e in record["elicitations"]] == [QUESTION], name
        messages = [p.get("message") for p in record["progress"]]
        assert messages[:2] == ["build \u2713", "upload"], (name, messages)
        assert "asking" in messages and "answered" in messages, (name, messages)  # before and after the retry
    # Python's records keep the members the era requires: filled by the front, nothing left for era_fields.
    listed = through["python-client"]["steps"][0]["value"]
    assert (listed["resultType"], listed["ttlMs"], listed["cacheScope"]) == ("complete", 0, "private")
    assert not log.rewrites(rule="era_fields")
    # What the legacy server saw: a session per client, opened with its own name and capabilities,
    # and every request in it at the legacy version without the 2026-07-28 envelope.
    opened = [(m, h) for m, h in server.requests if m.get("method") == "initialize"]
    names = sorted(m["params"]["clientInfo"]["name"] for m, _ in opened)
    assert names == ["py-host", "ts-host"]
    assert all("elicitation" in m["params"]["capabilities"] for m, _ in opened)
    assert all(m["params"]["protocolVersion"] == "2025-11-25" for m, _ in opened)
    for message, sent in server.requests:
        if message.get("method") in ("initialize", "server/discover") or sent.get("mcp-session-id") is None:
            continue
        assert sent["mcp-session-id"] in server.sessions
        assert sent["mcp-protocol-version"] == "2025-11-25"
        meta = (message.get("params") or {}).get("_meta") or {}
        assert not any(k.startswith("io.modelcontextprotocol/") for k in meta), message
        assert "mcp-method" not in sent
    answers = [m for m, _ in server.requests if "method" not in m]
    assert [a["result"] for a in answers] == [ELICIT, ELICIT]  # each elicitation answered upstream once


@pytest.mark.wire
@pytest.mark.anyio
async def test_without_consent_nothing_changes() -> None:
    server = legacy_server()
    with fronted(server, NormalizerConfig.shipped()) as url:
        pinned = await strict_clients(url, elicit=False)
        fallbacks = await auto_clients(url)
    for name, record in pinned.items():  # as directly: a pinned client reaches nothing
        assert not any(step["ok"] for step in record["steps"]), (name, record)
    for name, record in fallbacks.items():
        assert record["protocolVersion"] == "2025-11-25", name  # the client fell back to initialize, as before
        assert all(step["ok"] for step in record["steps"]), (name, record)
        assert record["steps"][1]["value"]["structuredContent"]["name"] == DATA["name"]
    # The proxy made no request of its own: every initialize is a client's.
    opened = [m for m, _ in server.requests if m.get("method") == "initialize"]
    assert sorted(m["params"]["clientInfo"]["name"] for m in opened) == ["py-auto", "ts-auto"]
    assert not any(str(m.get("id", "")).startswith(FRONT_PREFIX) for m, _ in server.requests)


async def auto_clients(url: str) -> dict[str, dict[str, Any]]:
    """The two clients that probe ``server/discover`` and fall back to ``initialize`` (``auto``)."""
    session = {"url": url, "versionNegotiation": {"mode": "auto"}, "steps": STEPS[:3], "clientName": "ts-auto"}
    ts = await run_node("v2", [session], request_timeout=15)
    python = await run_python(url, STEPS[:3], mode="auto", client_name="py-auto")
    return {"ts-client-2": ts[0], "python-client": python}


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_fallback_client_with_consent_speaks_2026_07_28_through_the_proxy() -> None:
    server = legacy_server()
    with fronted(server) as url:
        records = await auto_clients(url)
    for name, record in records.items():
        assert record["protocolVersion"] == MODERN, name  # server/discover answered by the proxy
        assert all(step["ok"] for step in record["steps"]), (name, record)
        assert record["steps"][1]["value"]["structuredContent"]["name"] == DATA["name"]
    discovered = [m for m, h in server.requests if m.get("method") == "server/discover"]
    assert len(discovered) == 1  # the first client's probe, refused, taught the proxy; never again


async def post(http: httpx.AsyncClient, url: str, message: dict[str, Any], **extra: str) -> httpx.Response:
    name = (message.get("params") or {}).get("name")
    sent = {**HEADERS, **headers(message["method"], name), **extra}
    return await http.post(url, content=orjson.dumps(message), headers=sent)


def events(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response: its SSE events' data, or its JSON body."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [orjson.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    return [response.json()]


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_discover_and_requests_on_the_wire(mode: Literal["json", "sse"]) -> None:
    server = legacy_server(mode)
    with fronted(server) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            found = await post(
                http, url, {"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": params()}
            )
            called = await post(
                http,
                url,
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": params(name="quote", arguments={"q": "\u00e9"}),
                },
            )
            unknown = await post(
                http,
                url,
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params(name="nope", arguments={})},
            )
            notified = await post(
                http, url, {"jsonrpc": "2.0", "method": "notifications/initialized", "params": params()}
            )
    assert found.status_code == 200
    assert found.json() == {
        "jsonrpc": "2.0",
        "id": "d",
        "result": {
            "supportedVersions": [MODERN],
            "capabilities": {"tools": {"listChanged": True}},
            "instructions": "Prices in \u20ac.",
            "ttlMs": 0,
            "cacheScope": "private",
            "resultType": "complete",
            "_meta": {SERVER_INFO: {"name": "legacy \u2713", "version": "1.0.0"}},
        },
    }
    (response,) = events(called)[-1:]
    assert response["id"] == 2 and response["result"]["structuredContent"] == DATA
    assert response["result"]["resultType"] == "complete"
    assert events(unknown)[-1] == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32602, "message": "Unknown tool: nope"},
    }
    assert notified.status_code == 202
    assert [m.get("method") for m, _ in server.requests if m.get("method") == "initialize"] == ["initialize"]


@pytest.mark.wire
@pytest.mark.anyio
async def test_sessions_are_per_client_key_and_reopened_after_the_upstream_forgets_them() -> None:
    server = legacy_server("json")
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params()}
    with fronted(server) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            a1 = await post(http, url, listing, authorization="Bearer a")
            a2 = await post(http, url, listing, authorization="Bearer a")
            b1 = await post(http, url, listing, authorization="Bearer b")
            server.sessions.clear()  # the upstream restarts: it knows no session now
            a3 = await post(http, url, listing, authorization="Bearer a")
    assert all(r.status_code == 200 and len(r.json()["result"]["tools"]) == 5 for r in (a1, a2, b1, a3))
    opened = [h.get("authorization") for m, h in server.requests if m.get("method") == "initialize"]
    assert opened == ["Bearer a", "Bearer b", "Bearer a"]  # one each, and one again after the restart
    listed = [
        h["mcp-session-id"] for m, h in server.requests if m.get("method") == "tools/list" and h.get("mcp-session-id")
    ]
    learned = [
        m
        for m, h in server.requests
        if m.get("method") in ("tools/list", "server/discover") and not h.get("mcp-session-id")
    ]
    assert [m["method"] for m in learned] == ["tools/list", "server/discover"]  # as it came, then the probe: once
    # a1 and a2 in a's first session, b1 in b's, a3 first in a's forgotten one (404), then in its new one
    assert len(listed) == 5 and listed[0] == listed[1] == listed[3] != listed[2] != listed[4] != listed[0]
    assert listed[4] in server.sessions and listed[0] not in server.sessions


@pytest.mark.wire
@pytest.mark.anyio
async def test_an_unanswered_question_is_abandoned_after_the_timeout() -> None:
    server = legacy_server()
    call_params: dict[str, Any] = params(name="confirm", arguments={})
    call_params["_meta"][CAPABILITIES] = {"elicitation": {}}
    ask: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call_params}
    with fronted(server, consent(modern_input_timeout=0.2)) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            asked = events(await post(http, url, ask))[-1]
            result = asked["result"]
            assert result["resultType"] == "input_required"
            ((key, request),) = result["inputRequests"].items()
            assert request["method"] == "elicitation/create" and request["params"]["message"] == QUESTION
            with anyio.fail_after(10):
                while not any(m.get("method") == "notifications/cancelled" for m, _ in server.requests):
                    await asyncio.sleep(0.05)
            retry = {**ask, "id": 2}
            retry["params"] = {**call_params, "inputResponses": {key: ELICIT}, "requestState": result["requestState"]}
            late = events(await post(http, url, retry))[-1]
    assert late["id"] == 2 and late["error"]["code"] == -32602
    (cancelled,) = [m for m, _ in server.requests if m.get("method") == "notifications/cancelled"]
    call_id = next(m["id"] for m, h in server.requests if m.get("method") == "tools/call" and h.get("mcp-session-id"))
    assert cancelled["params"]["requestId"] == call_id
    assert not [m for m, _ in server.requests if "method" not in m]  # no answer ever went upstream


@pytest.mark.wire
@pytest.mark.anyio
async def test_subscriptions_listen_is_the_sessions_get_stream() -> None:
    server = legacy_server()
    listen = {
        "jsonrpc": "2.0",
        "id": "listen-\u00e9",
        "method": "subscriptions/listen",
        "params": params(notifications={"toolsListChanged": True, "promptsListChanged": True}),
    }
    touch = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params(name="touch", arguments={})}
    received: list[dict[str, Any]] = []
    with fronted(server) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            sent = {**HEADERS, **headers("subscriptions/listen")}
            async with http.stream("POST", url, content=orjson.dumps(listen), headers=sent) as stream:
                lines = stream.aiter_lines()
                with anyio.fail_after(10):
                    async for line in lines:
                        if line.startswith("data:"):
                            received.append(orjson.loads(line[5:]))
                            break
                    while not server.listeners:  # the session's GET stream is open upstream
                        await asyncio.sleep(0.05)
                    touched = events(await post(http, url, touch))[-1]
                    async for line in lines:
                        if line.startswith("data:"):
                            received.append(orjson.loads(line[5:]))
                            break
    assert touched["result"]["content"] == [{"type": "text", "text": "touched"}]
    assert received == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": {SUBSCRIPTION: "listen-\u00e9"}},
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {SUBSCRIPTION: "listen-\u00e9"}},
        },
    ]
    listens = [h for m, h in server.requests if m.get("method") == "subscriptions/listen"]
    assert [h.get("mcp-session-id") for h in listens] == [None]  # sent as it came once (refused), never in a session


@pytest.mark.wire
@pytest.mark.anyio
async def test_the_clients_hang_up_cancels_the_upstream_request() -> None:
    server = legacy_server()

    def cancelled() -> list[dict[str, Any]]:
        return [m for m, _ in server.requests if m.get("method") == "notifications/cancelled"]

    async def slow(call: ToolCall) -> dict[str, Any]:
        await call.progress(1, None, "started \u2713")
        while not cancelled():  # (a legacy server stops when told; this one when the notification came)
            await anyio.sleep(0.05)
        return {"content": [{"type": "text", "text": "stopped"}]}

    assert isinstance(server.tools, list)
    server.tools.append(ToolSpec({"name": "slow", "inputSchema": {"type": "object"}}, slow))
    call_params = params(name="slow", arguments={})
    call_params["_meta"]["progressToken"] = "p-\u00e9"
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call_params}
    with fronted(server) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            await post(http, url, {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": params()})
            sent = {**HEADERS, **headers("tools/call", "slow")}
            with anyio.fail_after(10):
                async with http.stream("POST", url, content=orjson.dumps(message), headers=sent) as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("data:"):
                            first = orjson.loads(line[5:])
                            break
                while not cancelled():  # the stream is closed: the proxy tells the server
                    await asyncio.sleep(0.05)
    assert first == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "p-\u00e9", "progress": 1, "message": "started \u2713"},
    }
    upstream_call = next(m for m, _ in server.requests if (m.get("params") or {}).get("name") == "slow")
    assert upstream_call["params"]["_meta"] == {"progressToken": "p-\u00e9"}
    (notification,) = cancelled()
    assert notification["params"]["requestId"] == upstream_call["id"]


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("legacy", [True, False], ids=["dual-era", "2026-07-28-only"])
async def test_with_consent_a_2026_07_28_upstream_is_left_to_speak_for_itself(legacy: bool) -> None:
    server = ScriptedServer([ToolSpec(QUOTE, returning({"content": [], "structuredContent": DATA}))], legacy=legacy)
    with fronted(server) as url:
        record = await run_python(url, STEPS[:2] + STEPS[:2], mode=MODERN, client_name="py-host")
    assert record["protocolVersion"] == MODERN
    assert all(step["ok"] for step in record["steps"]), record
    assert record["steps"][1]["value"]["structuredContent"] == DATA
    methods = [m.get("method") for m, _ in server.requests]
    assert "initialize" not in methods  # nothing was carried over a legacy session
    for message, sent in server.requests:  # every request reached the server as the client sent it
        assert message["params"]["_meta"][INFO]["name"] == "py-host"
        assert sent["mcp-protocol-version"] == MODERN


@pytest.mark.wire
@pytest.mark.anyio
async def test_sessions_are_bounded_and_an_evicted_one_ends_upstream() -> None:
    server = legacy_server("json")
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params()}
    with fronted(server, consent(max_bridged_sessions=1)) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            first = await post(http, url, listing, authorization="Bearer a")
            opened_a = set(server.sessions)
            second = await post(http, url, listing, authorization="Bearer b")
            with anyio.fail_after(10):
                while opened_a & server.sessions:  # a's session is ended upstream (DELETE)
                    await asyncio.sleep(0.05)
            third = await post(http, url, listing, authorization="Bearer a")
            with anyio.fail_after(10):
                while len(server.sessions) > 1:  # b's ends too when a comes back: one session at a time
                    await asyncio.sleep(0.05)
    assert all(len(r.json()["result"]["tools"]) == 5 for r in (first, second, third))
    opened = [h.get("authorization") for m, h in server.requests if m.get("method") == "initialize"]
    assert opened == ["Bearer a", "Bearer b", "Bearer a"]


def polling_server() -> tuple[ASGIApp, ScriptedServer, list[dict[str, str]]]:
    """A legacy-only server that ends each ``tools/call`` POST stream after a priming event (an id,
    empty data, ``retry``: 2025-11-25 SSE polling, SEP-1699) and gives the response on a ``GET``
    with ``Last-Event-ID``. Returns the app, the server behind it, and the headers of each GET."""
    inner = legacy_server("json")
    held: list[bytes] = []
    gets: list[dict[str, str]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        sent = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["method"] == "GET" and "last-event-id" in sent:
            gets.append(sent)
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            for n, response in enumerate(held, start=1):
                event = b"id: r-%d\nevent: message\ndata: %s\n\n" % (n, response)
                await send({"type": "http.response.body", "body": event, "more_body": True})
            held.clear()
            await send({"type": "http.response.body", "body": b""})
            return
        body = await read_body(receive)
        message = orjson.loads(body) if body else {}
        if scope["method"] != "POST" or message.get("method") != "tools/call":
            await inner(scope, replay_body(body, receive), send)
            return
        answer: list[bytes] = []

        async def keep(part: Message) -> None:
            if part["type"] == "http.response.body":
                answer.append(part.get("body", b""))

        await inner(scope, replay_body(body, receive), keep)
        held.append(b"".join(answer))
        head = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
        await send(head)
        await send({"type": "http.response.body", "body": b"id: r-0\ndata: \nretry: 10\n\n"})

    return app, inner, gets


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_response_the_server_gives_on_a_later_get_reaches_the_client() -> None:
    app, inner, gets = polling_server()
    with serve(app) as up, proxy_for(up + "/mcp", consent()) as px:
        records = await strict_clients(px + "/mcp", elicit=False, steps=STEPS[:3])
    for name, record in records.items():
        assert all(step["ok"] for step in record["steps"]), (name, record)
        quote = record["steps"][1]["value"]
        assert quote["structuredContent"]["name"] == DATA["name"], name
    assert len(gets) >= 2 and all(h["last-event-id"] == "r-0" for h in gets)
    assert all(h["mcp-session-id"] in inner.sessions for h in gets)


@pytest.mark.wire
@pytest.mark.parametrize("consented", [False, True], ids=["without-consent", "with-consent"])
def test_claude_code_reaches_a_legacy_server_either_way(consented: bool, tmp_path: Path) -> None:
    """Claude Code probes ``server/discover`` and falls back to ``initialize``: without consent it
    does so through the proxy as directly; with consent the proxy answers the probe and Claude Code
    stays at 2026-07-28, its requests carried over the session the proxy opened in its name."""
    server = legacy_server()
    with fronted(server, consent() if consented else NormalizerConfig.shipped()) as url:
        view = run_claude_code(McpServer("legacy", url), "quote", {"q": "caf\u00e9"}, tmp_path)
    assert {"quote", "note", "deploy", "confirm", "touch"} <= set(view.tools)
    assert view.result is not None and "12.5" in view.result and "caf\u00e9" in view.result
    opened = [m for m, _ in server.requests if m.get("method") == "initialize"]
    assert len(opened) == 1 and opened[0]["params"]["clientInfo"]["name"] == "claude-code"
    assert str(opened[0]["id"]).startswith(FRONT_PREFIX) is consented  # the proxy's own initialize, or Claude Code's
    called = next(m for m, _ in server.requests if m.get("method") == "tools/call")
    assert called["params"]["arguments"] == {"q": "caf\u00e9"}


@pytest.mark.wire
@pytest.mark.anyio
async def test_an_idle_session_ends_upstream_and_the_next_request_opens_another() -> None:
    server = legacy_server("json")
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params()}
    with fronted(server, consent(bridged_session_idle_timeout=0.05)) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            first = await post(http, url, listing)
            (idle,) = server.sessions
            await asyncio.sleep(0.2)  # (longer than the idle timeout)
            second = await post(http, url, listing)
            with anyio.fail_after(10):
                while idle in server.sessions:  # ended upstream (DELETE)
                    await asyncio.sleep(0.05)
    assert len(first.json()["result"]["tools"]) == len(second.json()["result"]["tools"]) == 5
    assert [m.get("method") for m, _ in server.requests].count("initialize") == 2


@pytest.mark.wire
@pytest.mark.anyio
async def test_requests_that_find_their_session_gone_at_once_open_one_new_session() -> None:
    server = legacy_server("json")
    with fronted(server) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            listing = {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": params()}
            await post(http, url, listing)
            server.sessions.clear()  # the upstream restarts
            calls = [
                {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params(name="quote", arguments={})}
                for n in range(1, 5)
            ]
            answers = await asyncio.gather(*(post(http, url, call) for call in calls))
    assert [events(a)[-1]["result"]["structuredContent"]["price"] for a in answers] == [12.5] * 4
    assert [m.get("method") for m, _ in server.requests].count("initialize") == 2  # the first, and one after
    assert len(server.sessions) == 1
