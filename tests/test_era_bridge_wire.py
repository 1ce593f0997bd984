"""The era bridge on the wire (issue 41 item 2): legacy clients of a server that speaks only 2026-07-28.

The upstream is a real one: the Python ``mcp`` 2.3.0 SDK's own ``MCPServer`` behind a filter that
refuses every legacy request (:mod:`tests.modern_sdk_server`), and for the session's GET stream and
the Protean rules the scripted ``ScriptedServer(legacy=False)``. The clients are the real ones: the
TS SDK 1.32.2, the TS client 2.4.0 on its legacy handshake and the Python ``mcp`` ``ClientSession``,
each offering 2025-06-18 and 2025-11-25. Directly each fails; through the proxy each lists and calls
every tool, with progress, elicitation and cancellation, and the server sees every request at
2026-07-28 with the client's own name.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig, Settings, create_app
from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, protean_tools, returning

from .modern_sdk_server import MEASURE, MODERN, Seen, modern_app
from .support import HEADERS, capture_rewrites, free_port, initialize, rpc, serve

pytestmark = [
    pytest.mark.wire,
    # The server's count tool logs (ctx.info), which the SDK warns is deprecated at 2026-07-28
    # (SEP-2577): a warning of the server's, raised in its thread, not of the code under test.
    pytest.mark.filterwarnings(
        "ignore:The logging capability is deprecated:mcp.shared.exceptions.MCPDeprecationWarning"
    ),
]

VERSIONS = ("2025-06-18", "2025-11-25")
CLIENTS = ("ts-sdk-1", "ts-client-2", "python")
TOOLS = {"measure", "count", "book", "forecast", "retool", "slow"}
VERSION_META = "io.modelcontextprotocol/protocolVersion"
INFO_META = "io.modelcontextprotocol/clientInfo"
ACCEPT = {"action": "accept", "content": {"seats": 3, "note": "fen\u00eatre \u2713"}}
DECLINE = {"action": "decline"}


def proxy_config(**limits: Any) -> NormalizerConfig:
    """The shipped rules with these ``[proxy]`` settings."""
    return dataclasses.replace(NormalizerConfig.shipped(), proxy=dataclasses.replace(ProxyConfig(), **limits))


@contextmanager
def proxy(upstream_url: str, config: NormalizerConfig | None = None, port: int = 0) -> Iterator[str]:
    """The proxy in front of ``upstream_url``; yields its MCP endpoint URL."""
    config = config if config is not None else proxy_config()
    with serve(create_app(Settings(upstream=upstream_url), config=config), proxy=config.proxy, port=port) as url:
        yield url + "/mcp"


async def run(
    client: str,
    url: str,
    steps: Sequence[Mapping[str, Any]],
    *,
    version: str,
    name: str,
    elicitation: Mapping[str, Any] | None = None,
    list_changed: bool = False,
) -> dict[str, Any]:
    """One session of ``client`` offering ``version``, named ``name``: its record."""
    if client == "python":
        return await run_python(url, steps, client_name=name, offer_version=version, elicitation=elicitation)
    session: dict[str, Any] = {"url": url, "steps": list(steps), "offerVersion": version, "clientName": name}
    if elicitation is not None:
        session["elicitation"] = elicitation
    if list_changed:
        session["listChanged"] = True
    return (await run_node("v1" if client == "ts-sdk-1" else "v2", [session]))[0]


def value(step: Mapping[str, Any]) -> Any:
    assert step["ok"], step
    return step["value"]


def text_of(result: Mapping[str, Any]) -> Any:
    """The JSON a tool result's first text block carries (big integers exact)."""
    return json.loads(result["content"][0]["text"])


def seen_by(seen: Seen, name: str) -> list[tuple[str, str | None, dict[str, Any]]]:
    """The requests that reached the server from the client named ``name``."""
    return [r for r in seen.requests if (r[2].get(INFO_META) or {}).get("name") == name]


# -- 1 and 2: every tool of a real 2026-07-28-only server, with progress, elicitation, cancellation ----

PLAN: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "callTool", "name": "measure", "arguments": {"label": "apr\u00e8s"}},
    {"op": "callTool", "name": "count", "arguments": {"steps": 3}, "progress": True},
    {"op": "callTool", "name": "book", "arguments": {"city": "Z\u00fcrich"}},
    {"op": "callTool", "name": "slow", "arguments": {}, "cancelAfterProgress": True},
    {"op": "callTool", "name": "measure", "arguments": {"label": "after the cancel"}},
    {"op": "callTool", "name": "forecast", "arguments": {"region": "Z\u00fcrich"}},
    {"op": "callTool", "name": "retool", "arguments": {}},
]


@pytest.mark.anyio
@pytest.mark.parametrize("version", VERSIONS)
async def test_legacy_clients_call_every_tool_of_a_2026_07_28_only_sdk_server(version: str) -> None:
    seen = Seen()
    with serve(modern_app(seen)) as up, proxy(up + "/mcp") as url:
        direct = {c: await run(c, up + "/mcp", PLAN[:2], version=version, name=f"{c}-direct") for c in CLIENTS}
        bridged = {
            c: await run(c, url, PLAN, version=version, name=f"{c}-{version}", elicitation=ACCEPT) for c in CLIENTS
        }
        declined = {
            c: await run(
                c,
                url,
                [{"op": "callTool", "name": "book", "arguments": {"city": "Basel"}}],
                version=version,
                name=f"{c}-declines",
                elicitation=DECLINE,
            )
            for c in CLIENTS
        }
    for client in CLIENTS:
        # Directly: the server refuses the handshake, the client gets nothing.
        assert all(not step["ok"] for step in direct[client]["steps"]), (client, direct[client])
        assert not seen_by(seen, f"{client}-direct")
        record = bridged[client]
        name = f"{client}-{version}"
        steps = record["steps"]
        # The client's own era is kept (the bridge answered initialize with the version offered).
        assert record["protocolVersion"] == version
        assert {tool["name"] for tool in value(steps[0])["tools"]} == TOOLS
        # Field data, exact (the text block: JSON numbers as the server wrote them).
        measured = value(steps[1])
        assert text_of(measured) == {**MEASURE, "label": "apr\u00e8s"}
        assert text_of(measured)["serial"] == 123456789012345678901234567890
        if client == "python":
            assert measured["structuredContent"] == {**MEASURE, "label": "apr\u00e8s"}
        # Progress: each notification reached the client, in order, before the result.
        assert value(steps[2])["content"][0]["text"] == "counted 3"
        counted = [p for p in record["progress"] if p.get("total") == 3]
        assert [p["progress"] for p in counted] == [1, 2, 3] and counted[0]["message"] == "step 1 of 3"
        # Elicitation: the client's handler was asked, the tool got the answer.
        assert [e["message"] for e in record["elicitations"]] == ["How many seats in Z\u00fcrich?"]
        booked = value(steps[3])["structuredContent"]
        assert booked == {"city": "Z\u00fcrich", "seats": 3, "note": "fen\u00eatre \u2713", "status": "booked"}
        # Cancellation: the client has no result for it; the session goes on.
        assert not steps[4]["ok"]
        assert text_of(value(steps[5]))["label"] == "after the cancel"
        assert value(steps[6])["content"][0]["text"] == "12.5 \u00b0C in Z\u00fcrich"
        assert value(steps[7])["content"][0]["text"] == "the tool list changed"
        # The server saw every request at 2026-07-28 (header and _meta) with the client's own name.
        mine = seen_by(seen, name)
        methods = [method for method, _, _ in mine]
        assert methods[0] == "server/discover" and methods.count("tools/call") == 8  # book twice (MRTR)
        assert all(header == MODERN and meta[VERSION_META] == MODERN for _, header, meta in mine)
        # The declining client: its handler was asked, the tool saw the decline.
        assert value(declined[client]["steps"][0])["structuredContent"]["status"] == "decline"
        assert declined[client]["elicitations"][0]["message"] == "How many seats in Basel?"
    # Each client's slow call was cancelled upstream (its stream closed), and none finished.
    assert seen.events.count(("slow", "started")) == seen.events.count(("slow", "cancelled")) == 3
    assert ("slow", "finished") not in seen.events
    assert seen.events.count(("book", "accept", "Z\u00fcrich", 3)) == 3
    assert seen.events.count(("book", "decline", "Basel")) == 3
    # What the server refused: the clients' own initialize (directly, and the proxy's first try).
    assert {method for _, method, _ in seen.refused if method is not None} == {"initialize"}


@pytest.mark.anyio
async def test_the_bridged_answer_is_the_servers_bytes_less_the_members_only_2026_07_28_has() -> None:
    """The result as the server wrote it (``1e-07``, a 30-digit integer, ``-0.0``, its ``\\u`` escapes),
    byte for byte, less ``"resultType":"complete"``: what the server sends a 2026-07-28 client directly."""
    seen = Seen()
    call = {"name": "measure", "arguments": {"label": "x"}}
    with serve(modern_app(seen)) as up, proxy(up + "/mcp") as url:
        async with httpx.AsyncClient(timeout=30) as http:
            meta = {VERSION_META: MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
            modern = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {**call, "_meta": meta}}
            modern_headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "measure"}
            direct = await http.post(up + "/mcp", content=orjson.dumps(modern), headers={**HEADERS, **modern_headers})
            session = await initialize(http, url)
            legacy = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call}
            bridged = await http.post(url, content=orjson.dumps(legacy), headers={**HEADERS, **session})
            listed = await rpc(http, url, "tools/list", {}, 8, **session)
    assert b'"resultType":"complete",' in direct.content and b"1e-07" in direct.content
    assert bridged.content == direct.content.replace(b'"resultType":"complete",', b"")
    assert json.loads(bridged.content)["result"]["structuredContent"] == {**MEASURE, "label": "x"}
    assert "ttlMs" not in listed["result"] and "cacheScope" not in listed["result"]
    assert "resultType" not in listed["result"]
    assert seen_by(seen, "raw")[-1][2][VERSION_META] == MODERN


@pytest.mark.anyio
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_call_before_any_list_carries_the_mcp_param_headers_the_server_checks(client: str) -> None:
    """A fresh proxy knows no tool's ``x-mcp-header`` declarations; the SDK refuses a call without
    its ``Mcp-Param-Region`` header (``-32020``), so the bridge lists the tools (as the session) and
    sends the call again with the header (``Z\u00fcrich``: base64-encoded, as SEP-2243 says)."""
    seen = Seen()
    plan = [{"op": "callTool", "name": "forecast", "arguments": {"region": "Z\u00fcrich"}}]
    with serve(modern_app(seen)) as up, proxy(up + "/mcp") as url:
        record = await run(client, url, plan, version="2025-11-25", name=f"{client}-forecast")
    assert value(record["steps"][0])["content"][0]["text"] == "12.5 \u00b0C in Z\u00fcrich"
    mine = [m for m, _, _ in seen_by(seen, f"{client}-forecast")]
    calls = [i for i, method in enumerate(mine) if method == "tools/call"]
    assert len(calls) == 2 and "tools/list" in mine[calls[0] : calls[1]], mine  # refused, listed, sent again
    assert seen.param_headers[0] == {}  # the refused one
    assert seen.param_headers[1] == {"mcp-param-region": "=?base64?WsO8cmljaA==?="}


def _events(body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body (or the one JSON body)."""
    if not body.startswith(b"event") and not body.startswith(b"data"):
        return [json.loads(body)]
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith(b"data:") and line[5:].strip()]


@pytest.mark.anyio
async def test_set_level_and_ping_stay_in_the_session_and_modern_clients_pass_by() -> None:
    """``logging/setLevel`` is kept by the session and sent as each later request's ``logLevel``
    (the server logs only then); ``ping`` is answered by the session; a 2026-07-28 client (the Python
    ``Client``, the TS client 2.4.0 pinned) goes by the bridge to the server as it came."""
    seen = Seen()
    count = {"name": "count", "arguments": {"steps": 1}}
    with serve(modern_app(seen)) as up, proxy(up + "/mcp") as url:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            post = {**HEADERS, **session}
            quiet = await http.post(url, content=_request(1, "tools/call", count), headers=post)
            level = await rpc(http, url, "logging/setLevel", {"level": "info"}, 2, **session)
            told = await http.post(url, content=_request(3, "tools/call", count), headers=post)
            pong = await rpc(http, url, "ping", {}, 4, **session)
            unknown = await http.post(url, content=_request(5, "foo/bar", {}), headers=post)
            modern_headers = {"mcp-protocol-version": MODERN, "mcp-method": "foo/bar"}
            meta = {"_meta": {VERSION_META: MODERN, "io.modelcontextprotocol/clientCapabilities": {}}}
            direct = await http.post(
                up + "/mcp", content=_request(5, "foo/bar", meta), headers={**HEADERS, **modern_headers}
            )
        steps = [{"op": "callTool", "name": "measure", "arguments": {"label": "modern"}}]
        modern = await run_python(url, steps, mode="2026-07-28", client_name="python-modern")
        pinned = {
            "url": url,
            "steps": steps,
            "clientName": "ts-modern",
            "versionNegotiation": {"mode": {"pin": MODERN}},
        }
        ts_modern = (await run_node("v2", [pinned]))[0]
    assert "notifications/message" not in [m.get("method") for m in _events(quiet.content)]  # no level asked
    assert level == {"jsonrpc": "2.0", "id": 2, "result": {}} and pong == {"jsonrpc": "2.0", "id": 4, "result": {}}
    logged = [m for m in _events(told.content) if m.get("method") == "notifications/message"]
    assert logged and logged[0]["params"]["data"] == "counting to 1", told.content
    assert _events(quiet.content)[-1]["result"]["content"][0]["text"] == "counted 1"
    metas = [meta for m, _, meta in seen_by(seen, "raw") if m == "tools/call"]
    assert "io.modelcontextprotocol/logLevel" not in metas[0] and metas[1]["io.modelcontextprotocol/logLevel"] == "info"
    assert "ping" not in seen.methods() and "logging/setLevel" not in seen.methods()
    # The server's 404 for a method it lacks (2026-07-28) reaches a legacy client as the JSON-RPC
    # error with 200: a legacy 404 would tell it that its session is gone.
    assert direct.status_code == 404 and direct.json()["error"]["code"] == -32601
    assert unknown.status_code == 200 and unknown.json()["error"]["code"] == -32601
    for record in (modern, ts_modern):
        assert record["protocolVersion"] == MODERN and text_of(value(record["steps"][0]))["label"] == "modern"
    assert seen_by(seen, "python-modern") and seen_by(seen, "ts-modern")


def _request(rid: int, method: str, params: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


# -- 3: the session's GET stream ---------------------------------------------------------------------


async def notify_each_listener(upstream: ScriptedServer, notification: dict[str, Any], done: anyio.Event) -> None:
    """``upstream.notify(notification)`` once each time a new ``subscriptions/listen`` stream opens."""
    known: set[int] = set()
    while not done.is_set():
        fresh = [q for q in upstream.listeners if id(q) not in known]
        if fresh:
            known.update(id(q) for q in fresh)
            await anyio.sleep(0.2)  # the acknowledgement first
            await upstream.notify(notification)
        await anyio.sleep(0.05)


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["ts-sdk-1", "python"])
async def test_a_list_changed_notification_reaches_the_legacy_clients_handler(client: str) -> None:
    upstream = ScriptedServer(protean_tools(), response_mode="json", legacy=False, list_changed=True)
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    plan: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "waitListChanged", "count": 1, "timeoutMs": 20_000}]
    with serve(upstream) as up, proxy(up + "/mcp", proxy_config(upstream_era="2026-07-28")) as url:
        done = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(notify_each_listener, upstream, changed, done)
            record = await run(client, url, plan, version="2025-11-25", name=f"{client}-listens", list_changed=True)
            done.set()
    assert record["steps"][1]["ok"], record
    if client == "python":
        assert "notifications/tools/list_changed" in record["notifications"]
        assert len(value(record["steps"][1])["tools"]) == 4
    else:  # the SDK's handler fetched the list again
        assert record["listChanged"][0] == [spec.tool["name"] for spec in protean_tools()]
    listens = [m for m, h in upstream.requests if m.get("method") == "subscriptions/listen"]
    assert listens and listens[0]["params"]["notifications"] == {"toolsListChanged": True}
    assert listens[0]["params"]["_meta"][INFO_META]["name"] == f"{client}-listens"


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["ts-sdk-1", "python"])
async def test_the_sdk_servers_own_list_changed_reaches_the_legacy_clients_handler(client: str) -> None:
    """The real server's ``ctx.notify_tools_changed()`` goes out on its ``subscriptions/listen``
    stream, which the bridge opened for the session's GET stream."""
    seen = Seen()
    plan: list[dict[str, Any]] = [
        {"op": "listTools"},
        {"op": "callTool", "name": "retool", "arguments": {}},
        {"op": "waitListChanged", "count": 1, "timeoutMs": 20_000},
    ]
    with serve(modern_app(seen)) as up, proxy(up + "/mcp") as url:
        record = await run(client, url, plan, version="2025-06-18", name=f"{client}-retool", list_changed=True)
    assert all(step["ok"] for step in record["steps"]), record
    if client == "python":
        assert "notifications/tools/list_changed" in record["notifications"]
    else:
        assert set(record["listChanged"][0]) == TOOLS
    listens = [meta for m, _, meta in seen_by(seen, f"{client}-retool") if m == "subscriptions/listen"]
    assert listens and listens[0][VERSION_META] == MODERN


@pytest.mark.anyio
async def test_resources_subscribe_goes_into_the_listen_filter() -> None:
    upstream = ScriptedServer([], legacy=False, list_changed=True, resource_subscriptions=True)
    uri = "file:///r\u00e9sum\u00e9.txt"
    with serve(upstream) as up, proxy(up + "/mcp", proxy_config(upstream_era="2026-07-28")) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            async with http.stream("GET", url, headers={"accept": "text/event-stream", **session}) as stream:
                assert stream.status_code == 200
                events = stream.aiter_lines()
                subscribed = await rpc(http, url, "resources/subscribe", {"uri": uri}, 1, **session)
                assert subscribed == {"jsonrpc": "2.0", "id": 1, "result": {}}
                with anyio.fail_after(20):
                    while not any(
                        (m.get("params") or {}).get("notifications", {}).get("resourceSubscriptions") == [uri]
                        for m, _ in upstream.requests
                    ):
                        await anyio.sleep(0.05)
                    while len(upstream.listeners) != 1:  # the first listen was closed, the new one is open
                        await anyio.sleep(0.05)
                    await anyio.sleep(0.2)  # the restarted listen's acknowledgement first
                    await upstream.notify(
                        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
                    )
                    line = ""
                    while not line.startswith("data:"):
                        line = await events.__anext__()
    assert json.loads(line[5:]) == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": uri},
    }


# -- 4: the upstream's restart; bounded sessions; credentials; sessions the bridge no longer keeps --------


@pytest.mark.anyio
async def test_a_bridged_session_survives_the_upstreams_restart() -> None:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    port = free_port()
    first, second = Seen(), Seen()
    upstream_url = f"http://127.0.0.1:{port}/mcp"
    with proxy(upstream_url, proxy_config(upstream_era="2026-07-28")) as url:
        async with (
            streamable_http_client(url) as (read, write),
            ClientSession(read, write, client_info=Implementation(name="survivor", version="1")) as session,
        ):
            with serve(modern_app(first), port=port):
                await session.initialize()
                before = await session.call_tool("measure", {"label": "before"})
            with serve(modern_app(second), port=port):
                after = await session.call_tool("measure", {"label": "after"})
    assert before.structured_content == {**MEASURE, "label": "before"}
    assert after.structured_content == {**MEASURE, "label": "after"}
    # The new server saw the call as the old one would have: the client's name and capabilities.
    calls = [meta for m, _, meta in seen_by(second, "survivor") if m == "tools/call"]
    assert len(calls) == 1 and calls[0][VERSION_META] == MODERN
    assert not [m for m, _, _ in seen_by(second, "survivor") if m == "server/discover"]  # no new handshake


@pytest.mark.anyio
async def test_an_upstream_that_speaks_a_legacy_era_again_is_no_longer_bridged() -> None:
    """``auto`` learned the upstream speaks only 2026-07-28; it is replaced by a legacy server on the
    same port: the next client's ``initialize`` reaches that server natively (its session, not the
    bridge's), and the bridge learns again when a 2026-07-28-only server comes back."""
    port = free_port()
    upstream_url = f"http://127.0.0.1:{port}/mcp"
    modern = ScriptedServer(protean_tools(), response_mode="json", legacy=False)
    legacy = ScriptedServer(protean_tools(), response_mode="json", modern=False)
    again = ScriptedServer(protean_tools(), response_mode="json", legacy=False)
    with proxy(upstream_url) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            with serve(modern, port=port):
                bridged = await initialize(http, url)
            with serve(legacy, port=port):
                native = await initialize(http, url)
                listed = await rpc(http, url, "tools/list", {}, 2, **native)
            with serve(again, port=port):
                rebridged = await initialize(http, url)
                relisted = await rpc(http, url, "tools/list", {}, 3, **rebridged)
    assert bridged["mcp-session-id"].startswith("mcpn-bridge.")
    assert not native["mcp-session-id"].startswith("mcpn-bridge.") and listed["result"]["tools"]
    assert [m.get("method") for m, _ in legacy.requests] == ["server/discover", "initialize", "tools/list"]
    assert rebridged["mcp-session-id"].startswith("mcpn-bridge.") and relisted["result"]["tools"]


@pytest.mark.anyio
async def test_bridged_sessions_are_bounded_bound_to_their_credentials_and_404_when_gone() -> None:
    upstream = ScriptedServer(protean_tools(), response_mode="json", legacy=False)
    call = {"name": "protean.whoami", "arguments": {}}
    with serve(upstream) as up:
        with proxy(up + "/mcp", proxy_config(max_bridged_sessions=2)) as url:
            async with httpx.AsyncClient(timeout=30) as http:
                a = await initialize(http, url, authorization="Bearer alpha")
                b = await initialize(http, url, authorization="Bearer beta")
                assert (await rpc(http, url, "tools/call", call, 1, **b))["result"]
                c = await initialize(http, url, authorization="Bearer gamma")  # ends a, the longest idle
                evicted = await http.post(url, content=_call(2), headers={**HEADERS, **a})
                kept = await rpc(http, url, "tools/call", call, 3, **b)
                again = await initialize(http, url, authorization="Bearer alpha")  # a's client starts over: ends c
                assert (await rpc(http, url, "tools/call", call, 4, **again))["result"]
                evicted_too = await http.post(url, content=_call(5), headers={**HEADERS, **c})
                # b's session id with another's credentials, and with none: not b's session
                stolen = await http.post(
                    url, content=_call(6), headers={**HEADERS, **b, "authorization": again["authorization"]}
                )
                bare = {k: v for k, v in b.items() if k != "authorization"}
                anonymous = await http.post(url, content=_call(7), headers={**HEADERS, **bare})
                assert (await rpc(http, url, "tools/call", call, 8, **b))["result"]  # b's own still works
                deleted = await http.delete(url, headers=again)
                after_delete = await http.post(url, content=_call(9), headers={**HEADERS, **again})
        with proxy(up + "/mcp", proxy_config(max_bridged_sessions=2)) as restarted:  # a new proxy: nothing kept
            async with httpx.AsyncClient(timeout=30) as http:
                forgotten = await http.post(restarted, content=_call(10), headers={**HEADERS, **b})
    assert evicted.status_code == 404 and evicted.json()["error"]["code"] == -32001
    assert kept["result"]["content"]
    assert evicted_too.status_code == stolen.status_code == anonymous.status_code == 404
    assert deleted.status_code == 204 and after_delete.status_code == 404
    assert forgotten.status_code == 404
    # None of these reached the server, nor did any session id.
    assert all("mcp-session-id" not in h for _, h in upstream.requests)
    assert [m["id"] for m, _ in upstream.requests if m.get("method") == "tools/call"] == [1, 3, 4, 8]


def _call(rid: int) -> bytes:
    return orjson.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "protean.whoami", "arguments": {}}}
    )


# -- 5: a client that never answers, one that hangs up, a huge answer, a malformed body -------------


@pytest.mark.anyio
@pytest.mark.parametrize("client", CLIENTS)
async def test_an_elicitation_nobody_answers_ends_in_an_error_and_the_session_goes_on(client: str) -> None:
    seen = Seen()
    plan = [
        {"op": "callTool", "name": "book", "arguments": {"city": "Bern"}},
        {"op": "callTool", "name": "measure", "arguments": {"label": "next"}},
    ]
    with serve(modern_app(seen)) as up, proxy(up + "/mcp", proxy_config(first_byte_timeout=2.0)) as url:
        record = await run(
            client, url, plan, version="2025-11-25", name=f"{client}-mute", elicitation={"action": "hang"}
        )
    assert not record["steps"][0]["ok"]
    assert "no answer in time" in record["steps"][0]["error"]["message"]
    assert record["elicitations"][0]["message"] == "How many seats in Bern?"
    assert text_of(value(record["steps"][1]))["label"] == "next"
    # The question was asked once; no answer was made up for it.
    assert [m for m, _, _ in seen_by(seen, f"{client}-mute")].count("tools/call") == 2
    assert not [e for e in seen.events if e[0] == "book"]


@pytest.mark.anyio
async def test_delete_mid_call_ends_the_session_and_closes_the_upstream_request() -> None:
    seen = Seen()
    with serve(modern_app(seen)) as up, proxy(up + "/mcp") as url:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {}, "_meta": {"progressToken": 1}},
            }
            async with http.stream("POST", url, content=orjson.dumps(body), headers={**HEADERS, **session}) as stream:
                lines = stream.aiter_lines()
                line = ""
                while not line.startswith("data:"):
                    line = await lines.__anext__()
                deleted = await http.delete(url, headers=session)
                rest = [line async for line in lines]  # the stream ends with nothing more
            after = await http.post(url, content=_call(2), headers={**HEADERS, **session})
    assert deleted.status_code == 204 and after.status_code == 404
    assert not [line for line in rest if line.startswith("data:")]
    assert ("slow", "cancelled") in seen.events and ("slow", "finished") not in seen.events


@pytest.mark.anyio
async def test_an_evicted_sessions_get_stream_ends_and_its_upstream_listen_is_closed() -> None:
    """Every session busy (a GET stream open): a new one past ``max_bridged_sessions`` ends the
    oldest, and with it that session's stream and the ``subscriptions/listen`` behind it."""
    upstream = ScriptedServer(protean_tools(), response_mode="json", legacy=False, list_changed=True)
    with serve(upstream) as up, proxy(up + "/mcp", proxy_config(max_bridged_sessions=1)) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            first = await initialize(http, url)
            async with http.stream("GET", url, headers={"accept": "text/event-stream", **first}) as stream:
                assert stream.status_code == 200
                with anyio.fail_after(20):
                    while len(upstream.listeners) != 1:
                        await anyio.sleep(0.05)
                    second = await initialize(http, url)  # ends the first session, busy as it is
                    rest = [line async for line in stream.aiter_lines()]  # its stream ends
                    while upstream.listeners:  # and the listen upstream is closed
                        await anyio.sleep(0.05)
            gone = await http.post(url, content=_call(1), headers={**HEADERS, **first})
            kept = await http.post(url, content=_call(2), headers={**HEADERS, **second})
    assert not [line for line in rest if line.startswith("data:")]
    assert gone.status_code == 404 and kept.status_code == 200


@pytest.mark.anyio
async def test_an_idle_bridged_session_expires() -> None:
    upstream = ScriptedServer(protean_tools(), response_mode="json", legacy=False)
    with serve(upstream) as up, proxy(up + "/mcp", proxy_config(bridged_session_idle_timeout=0.5)) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            assert (await http.post(url, content=_call(1), headers={**HEADERS, **session})).status_code == 200
            await anyio.sleep(1.5)  # idle past the timeout
            expired = await http.post(url, content=_call(2), headers={**HEADERS, **session})
    assert expired.status_code == 404


@pytest.mark.anyio
async def test_a_client_hanging_up_mid_stream_closes_the_upstream_request() -> None:
    seen = Seen()
    with serve(modern_app(seen)) as up, proxy(up + "/mcp") as url:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {}, "_meta": {"progressToken": "p-1"}},
            }
            async with http.stream("POST", url, content=orjson.dumps(body), headers={**HEADERS, **session}) as stream:
                lines = stream.aiter_lines()
                line = ""
                while not line.startswith("data:"):
                    line = await lines.__anext__()
                assert json.loads(line[5:])["method"] == "notifications/progress"
            # hung up: the upstream request is closed, so the tool is cancelled
            with anyio.fail_after(20):
                while ("slow", "cancelled") not in seen.events:
                    await anyio.sleep(0.05)
            assert (
                await rpc(http, url, "tools/call", {"name": "measure", "arguments": {"label": "ok"}}, 2, **session)
            )["result"]
    assert ("slow", "finished") not in seen.events


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_an_upstream_answer_past_max_rewrite_bytes_passes_whole(mode: Literal["json", "sse"]) -> None:
    huge = "\u00e9" * 300_000 + " 12.5"
    tool = {"name": "dump", "inputSchema": {"type": "object"}}
    upstream = ScriptedServer(
        [ToolSpec(tool, returning({"content": [{"type": "text", "text": huge}]}))], response_mode=mode, legacy=False
    )
    with serve(upstream) as up, proxy(up + "/mcp", proxy_config(max_rewrite_bytes=64 * 1024)) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            answer = await rpc(http, url, "tools/call", {"name": "dump", "arguments": {}}, 9, **session)
        record = await run_python(url, [{"op": "callTool", "name": "dump", "arguments": {}}])
    assert answer["id"] == 9 and answer["result"]["content"][0]["text"] == huge
    assert value(record["steps"][0])["content"][0]["text"] == huge


@pytest.mark.anyio
async def test_a_malformed_json_post_in_a_bridged_session_gets_400_parse_error() -> None:
    upstream = ScriptedServer(protean_tools(), legacy=False)
    with serve(upstream) as up, proxy(up + "/mcp") as url:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, url)
            before = len(upstream.requests)
            response = await http.post(
                url, content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"', headers={**HEADERS, **session}
            )
            listed = await rpc(http, url, "tools/list", {}, 2, **session)
            unknown = await http.post(url, content=_request(3, "foo/bar", {}), headers={**HEADERS, **session})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32700
    assert listed["result"]["tools"] and [m.get("method") for m, _ in upstream.requests[before:]] == [
        "tools/list",
        "foo/bar",
    ]
    # A method the server lacks is a JSON-RPC error, never a 404 (to a legacy client: its session is
    # gone); the server answered with a stream, so does the bridge: the error is its last event.
    assert unknown.status_code == 200 and _events(unknown.content)[-1]["error"]["code"] == -32601


# -- every repair rule on bridged traffic as on native traffic ---------------------------------------


@pytest.mark.anyio
async def test_the_protean_rules_rewrite_bridged_results_as_native_ones() -> None:
    native = ScriptedServer(protean_tools(), response_mode="json")
    modern = ScriptedServer(protean_tools(), response_mode="json", legacy=False)
    calls = [spec.tool["name"] for spec in protean_tools()]
    bodies: dict[str, list[bytes]] = {}
    logs: dict[str, list[tuple[str, str | None]]] = {}
    records: dict[str, dict[str, Any]] = {}
    plan = [{"op": "listTools"}, *({"op": "callTool", "name": n, "arguments": {}} for n in calls)]
    for label, upstream in (("native", native), ("bridged", modern)):
        with serve(upstream) as up, proxy(up + "/mcp") as url, capture_rewrites() as log:
            async with httpx.AsyncClient(timeout=30) as http:
                session = await initialize(http, url)
                out = [(await http.post(url, content=_list(1), headers={**HEADERS, **session})).content]
                for rid, name in enumerate(calls, start=2):
                    body = {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "method": "tools/call",
                        "params": {"name": name, "arguments": {}},
                    }
                    out.append(
                        (await http.post(url, content=orjson.dumps(body), headers={**HEADERS, **session})).content
                    )
            bodies[label] = out
            records[label] = {c: await run(c, url, plan, version="2025-11-25", name="same") for c in CLIENTS}
            logs[label] = sorted((line.get("rule", ""), line.get("tool")) for line in log.rewrites())
    assert logs["native"] and logs["bridged"] == logs["native"]
    for native_body, bridged_body in zip(bodies["native"], bodies["bridged"], strict=True):
        assert bridged_body == native_body
    for client in CLIENTS:
        assert [s.get("value") for s in records["bridged"][client]["steps"]] == [
            s.get("value") for s in records["native"][client]["steps"]
        ], client
        assert all(s["ok"] for s in records["bridged"][client]["steps"]), client
    bridged = [m for m, _ in modern.requests if m.get("method") != "initialize"]  # (the probe's refused one)
    assert bridged and all(m["params"]["_meta"][VERSION_META] == MODERN for m in bridged)


def _list(rid: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": {}})
