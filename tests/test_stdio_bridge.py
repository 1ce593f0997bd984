"""The era bridge over stdio (issue 41 item 2, the stdio form): a legacy host in front of a stdio
server that speaks only 2026-07-28, through ``mcp-normalizer stdio -- CMD``.

First the sans-IO piece (:mod:`mcp_normalizer.engine.stdio_bridge`) line by line: what each line of
the host and of the server becomes. Then the wire: :mod:`tests.stdio_server` in its ``modern`` mode
(it refuses ``initialize``, serves ``server/discover`` and stateless requests, asks for input with
``input_required``, reports progress) behind the wrapper, driven by the Python ``mcp``
``ClientSession`` (2025-06-18, 2025-11-25) and the TS SDK 1.32.2 client over stdio.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_normalizer.demo.clients import run_node
from mcp_normalizer.demo.upstream import RUNTIMES
from mcp_normalizer.engine.era_bridge import MAX_ROUNDS, SESSION_PREFIX
from mcp_normalizer.engine.stdio_bridge import Relay, StdioBridge
from mcp_normalizer.wire.jsoncodec import dumps

from .support import EXE, ROOT, VALUES
from .test_stdio_wrapper import fixture, log_lines, protean_plan

PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LEVEL = "io.modelcontextprotocol/logLevel"
SUB = "io.modelcontextprotocol/subscriptionId"

HOST_CAPS = {"elicitation": {"form": {}}, "roots": {"listChanged": True}}
HOST_INFO = {"name": "gemini-cli-mcp-client", "version": "0.61.0"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": HOST_CAPS, "clientInfo": HOST_INFO},
}
DISCOVERED = {
    "supportedVersions": ["2025-11-25", "2026-07-28"],
    "capabilities": {"tools": {"listChanged": True}, "resources": {"subscribe": True}},
    "instructions": "Ask for ünïcode.",
    "ttlMs": 0,
    "cacheScope": "public",
    "resultType": "complete",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-only", "version": "2.0.0"}},
}
REFUSED = (
    b'{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported protocol version",'
    b'"data":{"supported":["2026-07-28"],"requested":"2025-06-18"}}}'
)


def line(message: Any) -> bytes:
    return orjson.dumps(message)


def parsed(lines: Sequence[bytes]) -> list[dict[str, Any]]:
    return [orjson.loads(one) for one in lines]


def bridged(mode: str = "auto", **bounds: int) -> StdioBridge:
    """A bridge through the handshake: the host initialized, the server refused and was discovered."""
    bridge = StdioBridge(mode, **bounds)
    out = bridge.from_client(line(INITIALIZE))
    if mode == "auto":
        bridge.from_server(REFUSED)
    probe = orjson.loads(out.to_server[0]) if mode != "auto" else None
    probe_id = probe["id"] if probe else f"{SESSION_PREFIX}discover.1"
    done = bridge.from_server(line({"jsonrpc": "2.0", "id": probe_id, "result": DISCOVERED}))
    assert bridge.bridging, done
    return bridge


# -- the handshake ------------------------------------------------------------------------------------


@pytest.mark.pure
def test_a_refused_initialize_is_followed_by_server_discover_and_answered_from_it() -> None:
    bridge = StdioBridge("auto")
    sent = bridge.from_client(line(INITIALIZE))
    assert sent == Relay([line(INITIALIZE)])  # the host's initialize goes as it came
    probe = bridge.from_server(REFUSED)
    assert probe.to_client == []  # the refusal is held
    (discover,) = parsed(probe.to_server)
    assert discover["method"] == "server/discover"
    assert discover["id"].startswith(SESSION_PREFIX)  # minted: never one of the host's
    assert discover["params"]["_meta"] == {PV: "2026-07-28", CAPS: HOST_CAPS, INFO: HOST_INFO}
    answered = bridge.from_server(line({"jsonrpc": "2.0", "id": discover["id"], "result": DISCOVERED}))
    assert answered.to_server == []
    assert parsed(answered.to_client) == [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": DISCOVERED["capabilities"],
                "serverInfo": {"name": "modern-only", "version": "2.0.0"},
                "instructions": "Ask for ünïcode.",
            },
        }
    ]
    assert bridge.bridging and bridge.version == "2026-07-28"
    assert "bridged (2025-06-18 to 2026-07-28)" in answered.notes[0]


@pytest.mark.pure
def test_a_server_that_answers_initialize_is_never_bridged_and_every_line_passes_as_it_came() -> None:
    bridge = StdioBridge("auto")
    bridge.from_client(line(INITIALIZE))
    result = (
        b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{},'
        b'"serverInfo":{"name":"old","version":"1"}}}'
    )
    assert bridge.from_server(result) == Relay(to_client=[result])
    assert not bridge.active
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"v":12.50}}}'
    assert bridge.from_client(call).to_server[0] is call  # the very bytes, never parsed
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}'
    assert bridge.from_server(answer).to_client[0] is answer


@pytest.mark.pure
@pytest.mark.parametrize(
    "discovered",
    [
        {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}},
        {"jsonrpc": "2.0", "result": {"supportedVersions": ["2025-06-18"], "capabilities": {}}},
        {"jsonrpc": "2.0", "result": {"supportedVersions": ["draft-2027"], "capabilities": {}}},
    ],
)
def test_a_refusal_the_discovery_does_not_explain_reaches_the_host_as_it_came(discovered: dict[str, Any]) -> None:
    bridge = StdioBridge("auto")
    bridge.from_client(line(INITIALIZE))
    (discover,) = parsed(bridge.from_server(REFUSED).to_server)
    given = bridge.from_server(line({**discovered, "id": discover["id"]}))
    assert given == Relay(to_client=[REFUSED])  # byte for byte
    assert not bridge.bridging
    assert bridge.from_client(line(INITIALIZE)).to_server == [line(INITIALIZE)]  # a retry is probed again


@pytest.mark.pure
def test_a_version_the_registry_does_not_know_is_not_spoken_the_newest_known_stateless_one_is() -> None:
    bridge = StdioBridge("auto")
    bridge.from_client(line(INITIALIZE))
    (first,) = parsed(bridge.from_server(REFUSED).to_server)
    newer = {**DISCOVERED, "supportedVersions": ["2026-07-28", "2026-12-01"]}
    answered = bridge.from_server(line({"jsonrpc": "2.0", "id": first["id"], "result": newer}))
    assert answered.to_server == [] and parsed(answered.to_client)[0]["id"] == 0
    assert bridge.bridging and bridge.version == "2026-07-28"


@pytest.mark.pure
def test_the_operator_forces_the_era_and_initialize_never_reaches_the_server() -> None:
    bridge = StdioBridge("2026-07-28")
    sent = bridge.from_client(line(INITIALIZE))
    (discover,) = parsed(sent.to_server)
    assert discover["method"] == "server/discover" and discover["params"]["_meta"][INFO] == HOST_INFO
    failed = bridge.from_server(
        line({"jsonrpc": "2.0", "id": discover["id"], "error": {"code": -32603, "message": "boom ✗"}})
    )
    (error,) = parsed(failed.to_client)
    assert error["id"] == 0 and "server/discover: boom ✗" in error["error"]["message"]
    assert bridged("2026-07-28").bridging


@pytest.mark.pure
def test_legacy_mode_bridges_nothing() -> None:
    bridge = StdioBridge("legacy")
    assert not bridge.active
    assert bridge.from_client(line(INITIALIZE)).to_server == [line(INITIALIZE)]
    assert bridge.from_server(REFUSED) == Relay(to_client=[REFUSED])


# -- requests ---------------------------------------------------------------------------------------------


@pytest.mark.pure
def test_initialized_is_swallowed_and_opens_the_listen_request_ping_and_level_are_answered_locally() -> None:
    bridge = bridged()
    opened = bridge.from_client(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert opened.to_client == []
    (listen,) = parsed(opened.to_server)
    assert listen["method"] == "subscriptions/listen"
    assert listen["params"]["notifications"] == {"toolsListChanged": True}
    assert listen["params"]["_meta"][PV] == "2026-07-28"
    assert parsed(bridge.from_client(b'{"jsonrpc":"2.0","id":"p","method":"ping"}').to_client) == [
        {"jsonrpc": "2.0", "id": "p", "result": {}}
    ]
    level = bridge.from_client(b'{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}')
    assert level.to_server == [] and parsed(level.to_client)[0]["result"] == {}
    (call,) = parsed(bridge.from_client(b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}').to_server)
    assert call["params"]["_meta"][LEVEL] == "debug"
    for dropped in (b"notifications/roots/list_changed", b"notifications/progress"):
        assert bridge.from_client(b'{"jsonrpc":"2.0","method":"' + dropped + b'"}') == Relay()


@pytest.mark.pure
def test_a_request_goes_stateless_under_the_hosts_id_and_its_result_comes_back_byte_for_byte() -> None:
    bridge = bridged()
    request = (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"measure",'
        b'"arguments":{"price":12.50,"tiny":1e-7,"city":"Z\\u00fcrich \xe2\x9c\x93","none":null},'
        b'"_meta":{"progressToken":"t\xc3\xa9"}}}'
    )
    (upstream,) = bridge.from_client(request).to_server
    assert b'{"price":12.50,"tiny":1e-7,"city":"Z\\u00fcrich \xe2\x9c\x93","none":null}' in upstream  # as written
    sent = orjson.loads(upstream)
    assert sent["id"] == 7
    assert sent["params"]["_meta"] == {"progressToken": "té", PV: "2026-07-28", CAPS: HOST_CAPS, INFO: HOST_INFO}
    progress = (
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t\xc3\xa9","progress":0.5}}'
    )
    assert bridge.from_server(progress).to_client[0] is progress
    result = (
        b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"12.50 \xe2\x9c\x93"}],'
        b'"structuredContent":{"v":12.50,"t":1e-7,"n":null,"big":123456789012345678901234},"resultType":"complete"}}'
    )
    (answer,) = bridge.from_server(result).to_client
    assert b'"structuredContent":{"v":12.50,"t":1e-7,"n":null,"big":123456789012345678901234}' in answer
    assert orjson.loads(answer)["id"] == 7 and b"resultType" not in answer
    listing = b'{"jsonrpc":"2.0","id":8,"result":{"tools":[],"ttlMs":0,"cacheScope":"public","resultType":"complete"}}'
    bridge.from_client(b'{"jsonrpc":"2.0","id":8,"method":"tools/list"}')
    assert parsed(bridge.from_server(listing).to_client) == [{"jsonrpc": "2.0", "id": 8, "result": {"tools": []}}]
    error = b'{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"Unknown tool: caf\xc3\xa9","data":{"n":1e-7}}}'
    bridge.from_client(b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"caf\xc3\xa9"}}')
    (failed,) = bridge.from_server(error).to_client
    assert b'"data":{"n":1e-7}' in failed and orjson.loads(failed)["error"]["code"] == -32602


@pytest.mark.pure
def test_input_required_asks_the_host_and_retries_with_its_answers_and_the_state() -> None:
    bridge = bridged()
    bridge.from_client(b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ask","arguments":{"n":1}}}')
    elicit = {
        "method": "elicitation/create",
        "params": {"message": "Region? (東京)", "requestedSchema": {"type": "object"}},
    }
    asked = {
        "resultType": "input_required",
        "inputRequests": {"region": elicit, "where": {"method": "roots/list"}},
        "requestState": "s=12.50;ü",
    }
    questions = parsed(bridge.from_server(line({"jsonrpc": "2.0", "id": 4, "result": asked})).to_client)
    assert [q["method"] for q in questions] == ["elicitation/create", "roots/list"]
    assert questions[0]["params"] == elicit["params"]
    assert all(q["id"].startswith(SESSION_PREFIX) for q in questions)
    first = (
        b'{"jsonrpc":"2.0","id":"'
        + questions[0]["id"].encode()
        + b'","result":{"action":"accept","content":{"region":"Z\xc3\xbcrich","n":12.50}}}'
    )
    assert bridge.from_client(first) == Relay()  # one answer of two: nothing yet
    second = line({"jsonrpc": "2.0", "id": questions[1]["id"], "result": {"roots": [{"uri": "file:///tmp"}]}})
    (retry,) = bridge.from_client(second).to_server
    assert (
        b'"region":{"action":"accept","content":{"region":"Z\xc3\xbcrich","n":12.50}}' in retry
    )  # as the host wrote it
    sent = orjson.loads(retry)
    assert sent["id"] != 4 and sent["id"].startswith(SESSION_PREFIX)
    assert sent["params"]["requestState"] == "s=12.50;ü"
    assert sent["params"]["arguments"] == {"n": 1} and sent["params"]["_meta"][INFO] == HOST_INFO
    assert sent["params"]["inputResponses"]["where"] == {"roots": [{"uri": "file:///tmp"}]}
    done = line({"jsonrpc": "2.0", "id": sent["id"], "result": {"content": [], "resultType": "complete"}})
    assert parsed(bridge.from_server(done).to_client) == [{"jsonrpc": "2.0", "id": 4, "result": {"content": []}}]
    assert bridge.unanswered() == []


@pytest.mark.pure
def test_a_question_the_host_refuses_fails_the_request_with_the_hosts_reason() -> None:
    bridge = bridged()
    bridge.from_client(b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ask"}}')
    asked = {
        "resultType": "input_required",
        "inputRequests": {"region": {"method": "elicitation/create", "params": {}}},
    }
    (question,) = parsed(bridge.from_server(line({"jsonrpc": "2.0", "id": 4, "result": asked})).to_client)
    refused = line(
        {"jsonrpc": "2.0", "id": question["id"], "error": {"code": -32600, "message": "Elicitation not supported"}}
    )
    (error,) = parsed(bridge.from_client(refused).to_client)
    assert error["id"] == 4 and "'region' request: Elicitation not supported" in error["error"]["message"]


@pytest.mark.pure
def test_cancellation_goes_to_the_upstream_id_in_flight_or_cancels_the_hosts_questions() -> None:
    bridge = bridged()
    bridge.from_client(b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow"}}')
    cancel = (
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"user \xe2\x9c\x97"}}'
    )
    (sent,) = parsed(bridge.from_client(cancel).to_server)
    assert sent["method"] == "notifications/cancelled"
    assert sent["params"]["requestId"] == 5 and sent["params"]["reason"] == "user ✗"
    assert bridge.unanswered() == []
    # a retried request is cancelled under its retry id
    bridge.from_client(b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ask"}}')
    state_only = line({"jsonrpc": "2.0", "id": 6, "result": {"resultType": "input_required", "requestState": "x"}})
    (retry,) = parsed(bridge.from_server(state_only).to_server)
    (sent,) = parsed(bridge.from_client(cancel.replace(b'"requestId":5', b'"requestId":6')).to_server)
    assert sent["params"]["requestId"] == retry["id"]
    late = line({"jsonrpc": "2.0", "id": retry["id"], "result": {"content": []}})
    assert bridge.from_server(late) == Relay()  # a minted id's late answer is nobody's
    # while the host is being asked, its questions are cancelled instead
    bridge.from_client(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask"}}')
    asked = {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list"}}}
    (question,) = parsed(bridge.from_server(line({"jsonrpc": "2.0", "id": 7, "result": asked})).to_client)
    gone = bridge.from_client(cancel.replace(b'"requestId":5', b'"requestId":7'))
    assert gone.to_server == []
    assert parsed(gone.to_client)[0]["params"]["requestId"] == question["id"]
    assert bridge.from_client(line({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": []}})) == Relay()
    assert bridge.from_client(cancel.replace(b'"requestId":5', b'"requestId":99')) == Relay()  # not in flight


@pytest.mark.pure
def test_the_listen_request_is_followed_ended_and_reopened_when_subscriptions_change() -> None:
    bridge = bridged()
    (listen,) = parsed(bridge.from_client(b'{"jsonrpc":"2.0","method":"notifications/initialized"}').to_server)
    ack = {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {SUB: listen["id"]}},
    }
    assert bridge.from_server(line(ack)) == Relay()
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB: listen["id"]}}}
    assert parsed(bridge.from_server(line(changed)).to_client) == [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}
    ]
    subscribe = b'{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"file:///caf\xc3\xa9"}}'
    again = bridge.from_client(subscribe)
    assert parsed(again.to_client) == [{"jsonrpc": "2.0", "id": 3, "result": {}}]
    ended, reopened = parsed(again.to_server)
    assert ended == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": listen["id"], "_meta": ended["params"]["_meta"]},
    }
    assert reopened["params"]["notifications"] == {"toolsListChanged": True, "resourceSubscriptions": ["file:///café"]}
    over = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": reopened["id"]}}
    assert bridge.from_server(line(over)).notes == ["the server ended the subscriptions/listen request"]
    assert bridge.from_server(line({"jsonrpc": "2.0", "id": listen["id"], "result": {}})) == Relay()


@pytest.mark.pure
def test_in_flight_requests_and_questions_are_bounded() -> None:
    bridge = bridged(max_in_flight=2, max_asks=1)
    for rid in (1, 2):
        assert bridge.from_client(line({"jsonrpc": "2.0", "id": rid, "method": "tools/list"})).to_server
    third = bridge.from_client(line({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
    assert third.to_server == [] and "at most 2 requests" in parsed(third.to_client)[0]["error"]["message"]
    duplicate = bridge.from_client(line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert parsed(duplicate.to_client)[0]["error"]["code"] in (-32600, -32603)
    asks = {"a": {"method": "roots/list"}, "b": {"method": "roots/list"}}
    many = line({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "inputRequests": asks}})
    (error,) = parsed(bridge.from_server(many).to_client)
    assert error["id"] == 1 and "at most 1 open" in error["error"]["message"]
    rid = 2
    for _ in range(MAX_ROUNDS):  # a server that keeps asking, state only
        (retry,) = parsed(
            bridge.from_server(
                line({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "input_required", "requestState": "s"}})
            ).to_server
        )
        rid = retry["id"]
    last = bridge.from_server(
        line({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "input_required", "requestState": "s"}})
    )
    assert f"more than {MAX_ROUNDS} times" in parsed(last.to_client)[0]["error"]["message"]
    assert bridge.unanswered() == []


@pytest.mark.pure
def test_what_the_server_leaves_unanswered_is_named_by_the_hosts_ids() -> None:
    bridge = bridged()
    bridge.from_client(b'{"jsonrpc":"2.0","id":"a\xc3\xa9","method":"tools/list"}')
    bridge.from_client(b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"ask"}}')
    state_only = line({"jsonrpc": "2.0", "id": 12, "result": {"resultType": "input_required", "requestState": "x"}})
    (retry,) = parsed(bridge.from_server(state_only).to_server)
    assert bridge.forget(("s", retry["id"])) == ("n", 12)  # a line the wrapper could not relay
    assert bridge.forget(("s", retry["id"])) is None
    assert bridge.unanswered() == [("s", "aé")]


@pytest.mark.pure
def test_a_batch_from_the_host_is_taken_apart() -> None:
    bridge = bridged()
    batch = b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]'
    relay = bridge.from_client(batch)
    assert parsed(relay.to_client) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert parsed(relay.to_server)[0]["method"] == "tools/list"
    assert bridge.from_client(b"not json") == Relay([b"not json"])  # the server's business, as without the bridge
    assert bridge.from_server(b"a log line") == Relay(to_client=[b"a log line"])  # the rules call it noise


# -- the wire: a 2026-07-28-only stdio server, legacy clients -------------------------------------------------

#: What the ``measure`` tool answers: decimals, unicode, nulls at depth.
MEASURE = {
    "value": 12.5,
    "tiny": 1e-7,
    "city": "Zürich ✓ 東京",
    "missing": None,
    "nested": {"deep": [None, {"x": None, "y": -0.5}]},
}
MEASURE_SCHEMA = {
    "type": "object",
    "properties": {
        "value": {"type": "number"},
        "tiny": {"type": "number"},
        "city": {"type": "string"},
        "missing": {"type": "null"},
        "nested": {"type": "object"},
    },
    "required": ["value", "tiny", "city"],
}
ANSWER: dict[str, str | int | float | bool | list[str] | None] = {"region": "Zürich"}
STATE = "asked=région;n=12.50"


def modern_plan(**faults: Any) -> dict[str, Any]:
    """The fixture as a server that speaks only 2026-07-28, with a tool of each kind."""
    plan = protean_plan()  # the old Protean shape: a null where its schema says string (rule nullable)
    plan["modern"] = True
    plan["tools"] += [
        {"name": "measure", "inputSchema": {"type": "object"}, "outputSchema": MEASURE_SCHEMA},
        {"name": "progress", "inputSchema": {"type": "object"}},
        {"name": "ask", "inputSchema": {"type": "object"}},
        {"name": "whoami", "inputSchema": {"type": "object"}},
    ]
    text = {"type": "text", "text": "12.50 ✓ 1e-7 9007199254740993 caf\u00e9"}
    plan["results"]["measure"] = {"content": [text], "structuredContent": MEASURE}
    plan["results"]["progress"] = {"content": [{"type": "text", "text": "progress done: 12.50"}]}
    plan["faults"] = {"progress_on": "progress", "elicit_on": "ask", **faults}
    return plan


def through(plan: dict[str, Any], log: Path, **env: str) -> list[str]:
    """The fixture behind ``mcp-normalizer stdio`` as a host starts it: ``env`` sets the worktree's
    code (the SDK stdio client drops the environment) and ``MCP_NORMALIZER_*`` settings."""
    settings = [f"{name}={value}" for name, value in env.items()]
    return ["env", f"PYTHONPATH={ROOT}", *settings, EXE, "stdio", "--log-file", str(log), "--", *fixture(plan)]


async def python_host(
    command: Sequence[str], version: str, tools: Sequence[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The Python ``mcp`` ``ClientSession`` (legacy handshake at ``version``) over stdio: initialize,
    list the tools, call each of ``tools`` (with a progress callback and an elicitation callback)."""
    import mcp.client.session as client_session
    from mcp import types
    from mcp.client.stdio import StdioServerParameters, stdio_client

    monkeypatch.setattr(client_session, "LATEST_HANDSHAKE_VERSION", version)
    record: dict[str, Any] = {"steps": [], "progress": [], "elicitations": []}

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        record["elicitations"].append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.ElicitResult(action="accept", content=ANSWER)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        record["progress"].append({"progress": progress, "total": total, "message": message})

    def dump(value: Any) -> dict[str, Any]:
        dumped: dict[str, Any] = value.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped

    server = StdioServerParameters(command=command[0], args=list(command[1:]))
    info = types.Implementation(name=f"py-legacy-{version}", version="1.0.0")
    try:
        async with (
            stdio_client(server) as (read, write),
            client_session.ClientSession(read, write, elicitation_callback=elicit, client_info=info) as session,
        ):
            record["initialize"] = dump(await session.initialize())
            record["steps"].append({"ok": True, "value": dump(await session.list_tools())})
            for name in tools:
                try:
                    result = await session.call_tool(name, {"n": 12.5}, progress_callback=on_progress)
                    record["steps"].append({"ok": True, "value": dump(result)})
                except Exception as exc:
                    record["steps"].append({"ok": False, "error": repr(exc)})
    except Exception as exc:
        record["failed"] = repr(exc)
    return record


def checked(client: str, listed: dict[str, Any], calls: dict[str, dict[str, Any]], progress: list[Any]) -> None:
    """What every legacy client must receive through the bridge."""
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert set(tools) == {"protean.list_runtimes", "measure", "progress", "ask", "whoami"}, client
    scope = tools["protean.list_runtimes"]["outputSchema"]["properties"]["runtimes"]["items"]["properties"]["scope"]
    assert scope["type"] == ["string", "null"], client  # the rules ran on the bridged listing
    assert calls["protean.list_runtimes"]["structuredContent"] == RUNTIMES, client  # every value, nulls too
    assert calls["measure"]["structuredContent"] == MEASURE, client
    assert calls["measure"]["content"][0]["text"] == "12.50 ✓ 1e-7 9007199254740993 café", client
    assert calls["progress"]["content"][0]["text"] == "progress done: 12.50", client
    assert calls["progress"]["content"][1]["text"] == "the progress token came back: True", client
    assert [(p["progress"], p["total"], p["message"]) for p in progress] == [
        (1, 2, "half way: 12.50 ✓"),
        (2, 2, "done"),
    ], client
    assert calls["ask"]["structuredContent"] == {"answer": {"action": "accept", "content": ANSWER}, "state": STATE}
    meta = calls["whoami"]["structuredContent"]
    assert meta[PV] == "2026-07-28", client  # the request reached the server in its era
    assert "elicitation" in meta[CAPS], client  # with the client's own capabilities
    if client != "python":  # (the Python SDK's models fill resultType, ttlMs and cacheScope in themselves)
        assert not any("resultType" in call for call in calls.values()), client
        assert not {"resultType", "ttlMs", "cacheScope"} & set(listed), client


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_the_python_client_uses_a_2026_07_28_only_stdio_server_through_the_bridge(
    version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = modern_plan()
    names = [tool["name"] for tool in plan["tools"]]
    log = tmp_path / "log.jsonl"
    direct = await python_host(fixture(plan), version, names, monkeypatch)
    assert "initialize" not in direct and "Unsupported protocol version" in direct["failed"]  # directly: nothing
    record = await python_host(through(plan, log), version, names, monkeypatch)
    assert "failed" not in record, record
    init = record["initialize"]
    assert init["protocolVersion"] == version
    assert init["serverInfo"] == {"name": "modern-stdio-fixture", "version": "2.0.0"}
    assert init["instructions"] == "Ask for the weather in Zürich."
    listed, *called = record["steps"]
    assert all(step["ok"] for step in record["steps"]), record
    calls = {name: step["value"] for name, step in zip(names, called, strict=True)}
    checked("python", listed["value"], calls, record["progress"])
    assert calls["whoami"]["structuredContent"][INFO] == {"name": f"py-legacy-{version}", "version": "1.0.0"}
    assert [e["message"] for e in record["elicitations"]] == ["Go on? ✓", "Which region? (Zürich or 東京)"]
    lines = log_lines(log)
    stderr = [line["stderr"] for line in lines if "stderr" in line]
    assert stderr.count("refused: initialize") == 1  # asked once, then server/discover
    assert any(text.startswith("request: server/discover 2026-07-28") for text in stderr)
    assert any("the host is bridged" in line.get("message", "") for line in lines)
    repaired = [line for line in lines if line.get("rule") == "nullable"]
    assert repaired and all(line.get("upstream_era") == "2026-07-28" for line in repaired)


@pytest.mark.wire
@pytest.mark.anyio
async def test_the_ts_sdk_1_client_uses_a_2026_07_28_only_stdio_server_through_the_bridge(tmp_path: Path) -> None:
    plan = modern_plan()
    names = [tool["name"] for tool in plan["tools"]]
    steps = [{"op": "listTools"}] + [
        {"op": "callTool", "name": name, "arguments": {"n": 12.5}, "progress": name == "progress"} for name in names
    ]
    log = tmp_path / "log.jsonl"
    session = {"clientName": "ts-legacy-host", "elicitation": {"action": "accept", "content": ANSWER}, "steps": steps}
    direct, bridged_ = await run_node(
        "v1", [{**session, "command": fixture(plan)}, {**session, "command": through(plan, log)}]
    )
    assert not any(step["ok"] for step in direct["steps"])  # directly: the handshake fails
    assert all(step["ok"] for step in bridged_["steps"]), bridged_
    notes = [line["message"] for line in log_lines(log) if "the host is bridged" in line.get("message", "")]
    assert len(notes) == 1 and notes[0].endswith("(2025-11-25 to 2026-07-28)")  # the SDK's own version, kept
    listed, *called = (step["value"] for step in bridged_["steps"])
    calls = dict(zip(names, called, strict=True))
    checked("ts-sdk-1", listed, calls, bridged_["progress"])
    assert calls["whoami"]["structuredContent"][INFO] == {"name": "ts-legacy-host", "version": "0.0.1"}
    assert [e["message"] for e in bridged_["elicitations"]] == ["Go on? ✓", "Which region? (Zürich or 東京)"]


async def wait_for(log: Path, found: Any) -> list[dict[str, Any]]:
    """The log's lines once ``found(lines)`` holds (a hang fails after 30 s)."""
    with anyio.fail_after(30):
        while True:
            lines = log_lines(log) if log.exists() else []
            if found(lines):
                return lines
            await anyio.sleep(0.02)


def stderr_of(lines: list[dict[str, Any]]) -> list[str]:
    return [line["stderr"] for line in lines if "stderr" in line]


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_call_the_python_client_abandons_is_cancelled_at_the_server_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    from mcp import types
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    plan = modern_plan(silent_on="silent")
    log = tmp_path / "log.jsonl"
    command = through(plan, log)
    server = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.call_tool, "silent", {"n": 12.5})
            await wait_for(log, lambda lines: any(t.startswith("request: tools/call") for t in stderr_of(lines)))
            tg.cancel_scope.cancel()  # the caller gives up: the SDK sends notifications/cancelled
        lines = await wait_for(log, lambda lines: any(t.startswith("cancelled: ") for t in stderr_of(lines)))
        result = await session.call_tool("measure", {})
    (cancelled,) = [t for t in stderr_of(lines) if t.startswith("cancelled: ")]
    assert cancelled.removeprefix("cancelled: ").isdigit()  # the client's own id: the first round keeps it
    assert isinstance(result, types.CallToolResult) and result.structured_content == MEASURE


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("era", ["2026-07-28", "legacy"])
async def test_the_operator_forces_the_era_or_turns_the_bridge_off(
    era: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = modern_plan()
    log = tmp_path / "log.jsonl"
    record = await python_host(
        through(plan, log, MCP_NORMALIZER_UPSTREAM_ERA=era), "2025-11-25", ["measure"], monkeypatch
    )
    stderr = stderr_of(log_lines(log))
    if era == "legacy":  # as directly: the server's refusal reaches the client
        assert "initialize" not in record and "Unsupported protocol version" in record["failed"]
        assert stderr == ["refused: initialize"]
        return
    assert "failed" not in record and record["steps"][1]["value"]["structuredContent"] == MEASURE
    assert "refused: initialize" not in stderr  # never sent: the operator said what the server speaks
    assert stderr[0].startswith("request: server/discover 2026-07-28 py-legacy-2025-11-25")


@pytest.mark.wire
@pytest.mark.anyio
async def test_list_changes_reach_the_host_and_requests_in_flight_are_answered_when_the_server_exits(
    tmp_path: Path,
) -> None:
    plan = modern_plan(silent_on="silent")
    log = tmp_path / "log.jsonl"
    params = {"protocolVersion": "2025-11-25", "capabilities": HOST_CAPS, "clientInfo": HOST_INFO}
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    lines = [
        initialize,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "silent"}},
        {"jsonrpc": "2.0", "id": "three", "method": "tools/call", "params": {"name": "touch"}},
        {"jsonrpc": "2.0", "id": 4, "method": "prompts/list"},
    ]
    command = [EXE, "stdio", "--log-file", str(log), "--", *fixture(plan)]
    seen = b""
    async with await anyio.open_process(command) as process:
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send(line(lines[0]) + b"\n")
        with anyio.fail_after(30):
            while b"\n" not in seen:  # a host waits for its initialize to be answered
                seen += await process.stdout.receive()
            await process.stdin.send(b"".join(line(one) + b"\n" for one in lines[1:]))
            await wait_for(log, lambda lines: any(t.startswith("request: tools/call") for t in stderr_of(lines)))
            await process.stdin.aclose()
            seen += b"".join([chunk async for chunk in process.stdout])
            status = await process.wait()
    assert status == 0
    messages = [orjson.loads(one) for one in seen.splitlines()]
    assert messages[0]["result"]["protocolVersion"] == "2025-11-25"
    assert messages[1] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    changed = [m for m in messages if m.get("method") == "notifications/tools/list_changed"]
    assert changed == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}]
    assert {"jsonrpc": "2.0", "id": "three", "result": {"content": []}} in messages
    assert any(m.get("id") == 4 and m["error"]["code"] == -32601 for m in messages)  # the server's own error
    (left,) = [m for m in messages if m.get("id") == 2]
    assert "exited" in left["error"]["message"]  # never answered: the wrapper says so
    stderr = stderr_of(log_lines(log))
    assert any(t.startswith("request: subscriptions/listen 2026-07-28 gemini-cli-mcp-client") for t in stderr)
    assert not any("ping" in t for t in stderr)  # answered by the bridge


# -- properties -----------------------------------------------------------------------------------------------


@pytest.mark.pure
@given(
    arguments=VALUES, result=st.dictionaries(st.sampled_from(["content", "structuredContent", "isError", "x"]), VALUES)
)
def test_arguments_and_results_cross_the_bridge_byte_for_byte(arguments: Any, result: dict[str, Any]) -> None:
    bridge = bridged()
    written = dumps(arguments)
    request = b'{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"t","arguments":' + written + b"}}"
    (upstream,) = bridge.from_client(request).to_server
    assert b'"arguments":' + written + b"," in upstream or upstream.endswith(b'"arguments":' + written + b"}}")
    body = dumps(result)
    modern = body[:-1] + (b',"resultType":"complete"}' if result else b'"resultType":"complete"}')
    (answer,) = bridge.from_server(b'{"jsonrpc":"2.0","id":41,"result":' + modern + b"}").to_client
    assert answer == b'{"jsonrpc":"2.0","id":41,"result":' + body + b"}"


@pytest.mark.pure
def test_a_host_whose_capabilities_are_too_large_to_keep_is_refused() -> None:
    bridge = StdioBridge("2026-07-28")
    params = {"protocolVersion": "2025-06-18", "capabilities": {"x": "é" * 40_000}, "clientInfo": HOST_INFO}
    huge = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    (discover,) = parsed(bridge.from_client(line(huge)).to_server)
    refused = bridge.from_server(line({"jsonrpc": "2.0", "id": discover["id"], "result": DISCOVERED}))
    (error,) = parsed(refused.to_client)
    assert (
        error["id"] == 0 and error["error"]["code"] == -32602 and "a session keeps at most" in error["error"]["message"]
    )
    assert not bridge.bridging
