"""The era bridge's sans-IO core, message by message (``mcp_normalizer.engine.era_bridge``), and the
2026-07-28 request envelope (``mcp_normalizer.wire.modern``): what a legacy client's message becomes
upstream, and what the upstream's answer becomes for the client. The wire tests are in
``test_era_bridge_wire.py``."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_normalizer.engine.era_bridge import (
    MAX_SESSION_BYTES,
    SESSION_PREFIX,
    Ask,
    BridgedSession,
    Complete,
    LegacyBridge,
    TooLarge,
    credential_of,
    discover_request,
    initialize_result,
    is_refusal,
    legacy_notification,
    legacy_result,
    stateless_version,
)
from mcp_normalizer.wire.modern import header_params, header_value, request_headers

from .support import VALUES

pytestmark = pytest.mark.pure

PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LEVEL = "io.modelcontextprotocol/logLevel"
SUB = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"

CLIENT_CAPS = {"elicitation": {"form": {}}, "sampling": {}, "roots": {"listChanged": True}}
CLIENT_INFO = {"name": "gemini-cli-mcp-client", "version": "0.61.0"}


def initialize(version: str = "2025-06-18", rid: Any = 0, **params: Any) -> dict[str, Any]:
    p = {"protocolVersion": version, "capabilities": CLIENT_CAPS, "clientInfo": CLIENT_INFO, **params}
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": p}


DISCOVERED: dict[str, Any] = {
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {"listChanged": True}, "resources": {"subscribe": True}, "logging": {}},
    "instructions": "Ask for ünïcode.",
    "ttlMs": 0,
    "cacheScope": "public",
    "resultType": "complete",
    "_meta": {SERVER_INFO: {"name": "modern-only", "version": "2.0.0"}},
}


def session(**caps: Any) -> BridgedSession:
    return BridgedSession(
        id=SESSION_PREFIX + "x",
        version="2026-07-28",
        legacy_version="2025-06-18",
        capabilities=CLIENT_CAPS,
        client_info=CLIENT_INFO,
        server_capabilities=caps or DISCOVERED["capabilities"],
        credential=None,
    )


# -- initialize ---------------------------------------------------------------------------------------


def test_initialize_becomes_server_discover_with_the_clients_capabilities_and_info_under_its_id() -> None:
    request = discover_request(initialize(rid="init-7"), "2026-07-28")
    assert request == {
        "jsonrpc": "2.0",
        "id": "init-7",
        "method": "server/discover",
        "params": {"_meta": {PV: "2026-07-28", CAPS: CLIENT_CAPS, INFO: CLIENT_INFO}},
    }
    # A client that sends no capabilities declares none ({}), and no clientInfo means none sent.
    bare = discover_request({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, "2026-07-28")
    assert bare["params"]["_meta"] == {PV: "2026-07-28", CAPS: {}}


@pytest.mark.parametrize(
    ("asked", "agreed"),
    [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2024-11-05", "2024-11-05"),
        ("2026-07-28", "2025-11-25"),  # not a session era: the newest that is
        ("2099-01-01", "2025-11-25"),
        (None, "2025-11-25"),
    ],
)
def test_the_agreed_version_is_the_clients_when_it_is_a_session_era(asked: str | None, agreed: str) -> None:
    result = initialize_result(initialize(asked), DISCOVERED)  # type: ignore[arg-type]
    assert result["protocolVersion"] == agreed


def test_the_initialize_result_carries_the_servers_capabilities_info_and_instructions() -> None:
    result = initialize_result(initialize(), DISCOVERED)
    assert result == {
        "protocolVersion": "2025-06-18",
        "capabilities": DISCOVERED["capabilities"],
        "serverInfo": {"name": "modern-only", "version": "2.0.0"},
        "instructions": "Ask for ünïcode.",
    }
    top = {"supportedVersions": ["2026-07-28"], "capabilities": {}, "serverInfo": {"name": "top", "version": "1"}}
    assert initialize_result(initialize(), top)["serverInfo"] == {"name": "top", "version": "1"}
    unnamed = initialize_result(initialize(), {"supportedVersions": ["2026-07-28"], "capabilities": {}})
    assert set(unnamed) == {"protocolVersion", "capabilities", "serverInfo"}
    assert isinstance(unnamed["serverInfo"]["name"], str) and unnamed["serverInfo"]["version"]


@pytest.mark.parametrize(
    ("versions", "spoken"),
    [
        (["2026-07-28"], "2026-07-28"),
        (["2025-06-18", "2026-07-28", "2025-11-25"], "2026-07-28"),
        (["2025-11-25", "2025-06-18"], None),  # a legacy server: nothing to bridge
        (["draft-2027"], None),  # a version the registry only reads as stateless is not spoken
        (["draft-2027", "2026-07-28"], "2026-07-28"),
        ("2026-07-28", None),
        ([], None),
    ],
)
def test_the_spoken_version_is_the_newest_known_stateless_one(versions: Any, spoken: str | None) -> None:
    assert stateless_version({"supportedVersions": versions}) == spoken
    assert stateless_version(None) is None


# -- requests -----------------------------------------------------------------------------------------


def test_a_request_carries_the_sessions_protocol_fields_and_keeps_the_clients_own_meta() -> None:
    s = session()
    call: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "add", "arguments": {"x": 12.5, "y": 1e-7}, "_meta": {"progressToken": "p-1", "a/b": None}},
    }
    out = s.stateless(call)
    assert out["id"] == 9 and out["method"] == "tools/call"
    assert out["params"]["arguments"] == {"x": 12.5, "y": 1e-7}
    assert out["params"]["_meta"] == {
        "progressToken": "p-1",
        "a/b": None,
        PV: "2026-07-28",
        CAPS: CLIENT_CAPS,
        INFO: CLIENT_INFO,
    }
    assert call["params"]["_meta"] == {"progressToken": "p-1", "a/b": None}  # the client's message is not changed
    assert s.local_answer({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "debug"}}) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {},
    }
    assert s.stateless(call, "retry-1")["params"]["_meta"][LEVEL] == "debug"
    assert s.stateless(call, "retry-1")["id"] == "retry-1"
    listing = s.stateless({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert listing["params"] == {"_meta": {PV: "2026-07-28", CAPS: CLIENT_CAPS, INFO: CLIENT_INFO, LEVEL: "debug"}}


@given(arguments=VALUES, meta=st.dictionaries(st.sampled_from(["progressToken", "x.y/z", "traceparent"]), VALUES))
def test_every_argument_and_meta_value_reaches_the_server_as_it_came(arguments: Any, meta: dict[str, Any]) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": "c",
        "method": "tools/call",
        "params": {"name": "t", "arguments": arguments, "_meta": meta},
    }
    out = session().stateless(call)
    assert orjson.dumps(out["params"]["arguments"]) == orjson.dumps(arguments)
    assert {k: v for k, v in out["params"]["_meta"].items() if k in meta} == meta


@given(result=st.dictionaries(st.sampled_from(["content", "structuredContent", "isError", "_meta", "x"]), VALUES))
def test_a_complete_result_reaches_the_client_whole_less_the_modern_members(result: dict[str, Any]) -> None:
    modern = {**result, "resultType": "complete", "ttlMs": 5, "cacheScope": "public"}
    answered = session().answer({"id": 3, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 3, "result": modern})
    assert isinstance(answered, Complete)
    assert orjson.dumps(answered.message) == orjson.dumps({"jsonrpc": "2.0", "id": 3, "result": result})


def test_an_error_keeps_its_code_message_and_data_under_the_clients_id() -> None:
    error = {"code": -32602, "message": "Unknown tool: ☃", "data": {"big": 2**70, "n": None}}
    answered = session().answer(
        {"id": "k", "method": "tools/call"}, {"jsonrpc": "2.0", "id": "k-retry", "error": error}
    )
    assert answered == Complete({"jsonrpc": "2.0", "id": "k", "error": error})


def test_input_required_becomes_legacy_requests_under_minted_ids_and_the_retry_echoes_the_state() -> None:
    s = session()
    call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "deploy", "arguments": {"n": 1}}}
    ask = {"method": "elicitation/create", "params": {"message": "Region?", "requestedSchema": {"type": "object"}}}
    roots = {"method": "roots/list"}
    result = {"resultType": "input_required", "inputRequests": {"region": ask, "roots": roots}, "requestState": "s-1"}
    answered = s.answer(call, {"jsonrpc": "2.0", "id": 4, "result": result})
    assert isinstance(answered, Ask) and answered.state == "s-1"
    assert [r["method"] for r in answered.requests] == ["elicitation/create", "roots/list"]
    assert answered.requests[0]["params"] == ask["params"] and "params" not in answered.requests[1]
    ids = [r["id"] for r in answered.requests]
    assert len(set(ids)) == 2 and all(isinstance(i, str) and i.startswith(SESSION_PREFIX) for i in ids)
    assert sorted(answered.keys.values()) == ["region", "roots"]
    again = s.answer(call, {"jsonrpc": "2.0", "id": 4, "result": result})
    assert isinstance(again, Ask) and not {r["id"] for r in again.requests} & set(ids)  # never an id twice
    responses = {"region": {"action": "accept", "content": {"region": "eu-west-1"}}, "roots": {"roots": []}}
    retry = s.retry(call, "r-1", responses, "s-1")
    assert retry["id"] == "r-1" and retry["params"]["inputResponses"] == responses
    assert retry["params"]["requestState"] == "s-1" and retry["params"]["arguments"] == {"n": 1}
    assert "requestState" not in s.retry(call, "r-2", responses, None)["params"]


@pytest.mark.parametrize(
    "result",
    [
        {"resultType": "input_required", "inputRequests": {"x": {"method": "tasks/get"}}},
        {"resultType": "input_required", "inputRequests": {"x": "elicitation/create"}},
        {"resultType": "input_required"},
    ],
)
def test_input_the_legacy_era_cannot_ask_for_fails_the_request_clearly(result: dict[str, Any]) -> None:
    answered = session().answer({"id": 5, "method": "tools/call"}, {"jsonrpc": "2.0", "id": 5, "result": result})
    assert isinstance(answered, Complete) and answered.message["error"]["code"] == -32603
    assert answered.message["id"] == 5


def test_a_request_state_without_questions_is_a_retry_with_no_answers() -> None:
    answered = session().answer(
        {"id": 6, "method": "tools/call"},
        {"id": 6, "result": {"resultType": "input_required", "requestState": "again"}},
    )
    assert answered == Ask([], {}, "again")


# -- what the session answers itself --------------------------------------------------------------------


def test_ping_level_and_subscriptions_are_answered_by_the_session() -> None:
    s = session()
    assert s.local_answer({"id": 1, "method": "ping"}) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert s.local_answer({"id": 2, "method": "tools/list"}) is None
    assert s.local_answer({"id": 3, "method": "initialize", "params": {}})["error"]["code"] == -32600  # type: ignore[index]
    assert s.local_answer({"id": 4, "method": "logging/setLevel", "params": {}})["error"]["code"] == -32602  # type: ignore[index]
    before = s.filter_version
    assert s.local_answer({"id": 5, "method": "resources/subscribe", "params": {"uri": "file:///ä.txt"}}) == {
        "jsonrpc": "2.0",
        "id": 5,
        "result": {},
    }
    s.local_answer({"id": 6, "method": "resources/subscribe", "params": {"uri": "file:///ä.txt"}})
    assert s.subscriptions == ["file:///ä.txt"] and s.filter_version == before + 1
    s.local_answer({"id": 7, "method": "resources/unsubscribe", "params": {"uri": "file:///ä.txt"}})
    assert s.subscriptions == [] and s.filter_version == before + 2
    plain = session(tools={})
    refused = plain.local_answer({"id": 8, "method": "resources/subscribe", "params": {"uri": "a:b"}})
    assert refused is not None and refused["error"]["code"] == -32601


def test_the_listen_filter_follows_the_servers_capabilities_and_the_subscriptions() -> None:
    s = session()
    listen = s.listen_request("L1")
    assert listen is not None and listen["id"] == "L1" and listen["method"] == "subscriptions/listen"
    assert listen["params"]["notifications"] == {"toolsListChanged": True}
    assert listen["params"]["_meta"][PV] == "2026-07-28"
    s.local_answer({"id": 1, "method": "resources/subscribe", "params": {"uri": "db://x"}})
    assert s.listen_request("L2")["params"]["notifications"] == {  # type: ignore[index]
        "toolsListChanged": True,
        "resourceSubscriptions": ["db://x"],
    }
    everything = session(tools={"listChanged": True}, prompts={"listChanged": True}, resources={"listChanged": True})
    assert set(everything.listen_request(1)["params"]["notifications"]) == {  # type: ignore[index]
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    }
    assert session(tools={"listChanged": False}).listen_request(1) is None  # nothing to listen to: 405


def test_listen_notifications_lose_the_subscription_id_and_the_acknowledgement() -> None:
    ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {"_meta": {SUB: 1}}}
    assert legacy_notification(ack) is None
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB: "L1"}}}
    assert legacy_notification(changed) == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {},
    }
    updated = {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "db://x", "_meta": {SUB: "L1", "traceparent": "00-ab-cd-01"}},
    }
    assert legacy_notification(updated) == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "db://x", "_meta": {"traceparent": "00-ab-cd-01"}},
    }
    plain = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1.5}}
    assert legacy_notification(plain) is plain


def test_legacy_result_passes_a_result_without_modern_members_as_the_same_object() -> None:
    result = {"content": [], "structuredContent": {"n": 12.5}}
    assert legacy_result(result) is result
    assert legacy_result([1]) == [1]


# -- the sessions ---------------------------------------------------------------------------------------


def test_sessions_are_bound_to_the_credentials_that_opened_them() -> None:
    bridge = LegacyBridge("2026-07-28")
    alice, bob = credential_of("Bearer alice"), credential_of("Bearer bob")
    opened, result = bridge.open(initialize(), DISCOVERED, "2026-07-28", credential=alice, now=0.0)
    assert result["protocolVersion"] == "2025-06-18" and opened.id.startswith(SESSION_PREFIX)
    assert opened.id.isascii() and opened.id.isprintable() and " " not in opened.id
    assert bridge.lookup(opened.id, alice, 1.0) == ("ours", opened)
    assert bridge.lookup(opened.id, bob, 1.0) == ("gone", None)
    assert bridge.lookup(opened.id, None, 1.0) == ("gone", None)
    assert bridge.lookup("upstream-session-1", alice, 1.0) == ("foreign", None)
    assert bridge.lookup(SESSION_PREFIX + "from-before-a-restart", alice, 1.0) == ("gone", None)
    assert credential_of(None) is None and alice != bob and "alice" not in str(alice)
    assert bridge.close(opened.id) is opened and bridge.lookup(opened.id, alice, 2.0) == ("gone", None)


def test_the_longest_idle_session_ends_first_and_a_busy_one_last() -> None:
    bridge = LegacyBridge("2026-07-28", max_sessions=2, idle_timeout=0)
    first, _ = bridge.open(initialize(), DISCOVERED, "2026-07-28", credential=None, now=0.0)
    second, _ = bridge.open(initialize(), DISCOVERED, "2026-07-28", credential=None, now=1.0)
    bridge.lookup(first.id, None, 2.0)  # used: second is now the longest idle
    third, _ = bridge.open(initialize(), DISCOVERED, "2026-07-28", credential=None, now=3.0)
    assert list(bridge.sessions) == [first.id, third.id] and bridge.ended == 1
    first.busy = 1
    fourth, _ = bridge.open(initialize(), DISCOVERED, "2026-07-28", credential=None, now=4.0)
    assert list(bridge.sessions) == [first.id, fourth.id]  # the idle third went, not the busy first
    fourth.busy = 1
    bridge.open(initialize(), DISCOVERED, "2026-07-28", credential=None, now=5.0)
    assert len(bridge.sessions) == 2  # every one busy: the oldest goes; the bound holds


def test_idle_sessions_expire_and_busy_ones_do_not() -> None:
    bridge = LegacyBridge("2026-07-28", idle_timeout=10)
    idle, _ = bridge.open(initialize(), DISCOVERED, "2026-07-28", credential=None, now=0.0)
    busy, _ = bridge.open(initialize(), DISCOVERED, "2026-07-28", credential=None, now=0.0)
    busy.busy = 1
    assert bridge.lookup(idle.id, None, 10.0)[0] == "ours"  # exactly the timeout: still kept
    assert bridge.expire(25.0) == [idle] and list(bridge.sessions) == [busy.id]
    assert bridge.lookup(idle.id, None, 25.0) == ("gone", None)


def test_the_mode_decides_what_is_bridged_and_what_is_learned() -> None:
    auto = LegacyBridge("auto")
    assert not auto.bridging and auto.may_probe
    auto.learned("2026-07-28")
    assert auto.bridging and not auto.may_probe and auto.upstream_version == "2026-07-28"
    auto.forget()  # (the upstream no longer answers server/discover)
    assert not auto.bridging and auto.may_probe
    told = LegacyBridge("2026-07-28")
    told.forget()  # the operator said so: kept
    assert told.bridging and not told.may_probe
    never = LegacyBridge("legacy")
    never.learned("2026-07-28")
    assert not never.bridging and not never.may_probe


@pytest.mark.parametrize(
    ("status", "body", "refused"),
    [
        (400, {"jsonrpc": "2.0", "id": 0, "error": {"code": -32022, "message": "Unsupported protocol version"}}, True),
        (400, None, True),
        (404, None, True),
        (405, None, True),
        (
            200,
            {"jsonrpc": "2.0", "id": 0, "error": {"code": -32602, "message": "params._meta must be an object"}},
            True,
        ),
        (200, {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18"}}, False),
        (401, None, False),  # needs credentials: the client's business, never a probe
        (500, None, False),
    ],
)
def test_what_counts_as_a_refused_initialize(status: int, body: Any, refused: bool) -> None:
    assert is_refusal(status, body) is refused


# -- x-mcp-header and the Mcp-* headers -----------------------------------------------------------------


def test_x_mcp_header_declarations_are_read_through_properties_only() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {"z": {"x-mcp-header": "Z"}}}},
            "either": {"anyOf": [{"type": "string", "x-mcp-header": "E"}]},
        },
    }
    assert header_params(schema) == {"Region": ("region",), "Dry-Run": ("opts", "dry")}
    assert header_params(None) == {} and header_params({"properties": []}) == {}


def test_the_mcp_headers_mirror_the_body_and_encode_unsafe_values() -> None:
    declared = {"Region": ("region",), "Count": ("n",), "Dry": ("dry",), "Ratio": ("ratio",), "Gone": ("gone",)}
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "deploy ☃",
            "arguments": {"region": "eu-west-1", "n": 2**53 - 1, "dry": False, "ratio": 12.5, "gone": None},
        },
    }
    headers = dict(request_headers(call, "2026-07-28", declared))
    assert headers[b"mcp-protocol-version"] == b"2026-07-28" and headers[b"mcp-method"] == b"tools/call"
    assert headers[b"mcp-name"] == b"=?base64?" + base64.b64encode("deploy ☃".encode()) + b"?="
    assert headers[b"mcp-param-region"] == b"eu-west-1"
    assert headers[b"mcp-param-count"] == str(2**53 - 1).encode()
    assert headers[b"mcp-param-dry"] == b"false"
    assert b"mcp-param-ratio" not in headers and b"mcp-param-gone" not in headers  # a number, a null: omitted
    too_big = {**call, "params": {"name": "t", "arguments": {"n": 2**53}}}
    assert b"mcp-param-count" not in dict(request_headers(too_big, "2026-07-28", declared))
    read = {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "file:///a b"}}
    assert dict(request_headers(read, "2026-07-28"))[b"mcp-name"] == b"file:///a b"
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert dict(request_headers(note, "2026-07-28")) == {
        b"mcp-protocol-version": b"2026-07-28",
        b"mcp-method": b"notifications/initialized",
    }


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("plain-name_1.2", False),
        (" leading", True),
        ("trailing ", True),
        ("tab\there", True),
        ("ünïcode", True),
        ("=?base64?looks-encoded?=", True),
        ("", False),
    ],
)
def test_header_values_are_sent_as_is_only_when_safe(text: str, encoded: bool) -> None:
    value = header_value(text)
    assert (value != text) is encoded
    if encoded:
        assert base64.b64decode(value.removeprefix("=?base64?").removesuffix("?=")).decode() == text


def test_the_tool_listing_teaches_which_calls_need_param_headers_and_forgets_bounded() -> None:
    bridge = LegacyBridge("2026-07-28")
    tool = {
        "name": "deploy",
        "inputSchema": {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "R"}}},
    }
    bridge.saw_tools({"tools": [tool, {"name": "plain", "inputSchema": {"type": "object"}}, "junk"]})
    assert bridge.declared_for({"method": "tools/call", "params": {"name": "deploy"}}) == {"R": ("r",)}
    assert bridge.declared_for({"method": "tools/call", "params": {"name": "plain"}}) is None
    assert bridge.declared_for({"method": "prompts/get", "params": {"name": "deploy"}}) is None
    bridge.saw_tools({"tools": [{"name": "deploy", "inputSchema": {"type": "object"}}]})  # the declaration is gone
    assert bridge.declared_for({"method": "tools/call", "params": {"name": "deploy"}}) is None
    for i in range(5000):
        bridge.saw_tools({"tools": [{**tool, "name": f"t{i}"}]})
    assert len(bridge.declared) <= 4096


def test_what_a_session_keeps_of_its_client_is_bounded_in_bytes() -> None:
    bridge = LegacyBridge("2026-07-28")
    huge = initialize(capabilities={"experimental": {"x": "ü" * 40_000}})
    with pytest.raises(TooLarge):
        bridge.open(huge, DISCOVERED, "2026-07-28", credential=None, now=0.0)
    assert not bridge.sessions
    s, _ = bridge.open(initialize(), DISCOVERED, "2026-07-28", credential=None, now=0.0)
    long_uri = "file:///" + "a" * 30_000
    assert "result" in s.local_answer({"id": 1, "method": "resources/subscribe", "params": {"uri": long_uri}})  # type: ignore[operator]
    refused = s.local_answer({"id": 2, "method": "resources/subscribe", "params": {"uri": long_uri + "b" * 40_000}})
    assert refused is not None and refused["error"]["code"] == -32603 and s.subscriptions == [long_uri]
    assert s.kept_bytes <= MAX_SESSION_BYTES
