"""Issue 37, major 2: a call from a host goes upstream by the maps of that host's own profile.

Rule ``host_schemas`` advertises the property names a Claude host refuses (``$filter``, ``max
results``) under others for that host alone, and rule ``tool_names`` advertises a dotted name under
another for Claude Desktop alone. The maps back to the tool's own names are those of the calling
client's profile, derived from the upstream's definitions, never those of whichever client listed
last: in the 2026-07-28 era a list is reused for its ``ttlMs`` by every client of a scope with no
credentials (or one token), a ``cacheScope: "public"`` list by every scope, and the stdio upstream's
stateless clients share one child. And a legacy server without sessions (FastMCP
``stateless_http``) gets host repairs: its client is known by what it said before on its connection.

Each test drives the real proxy on the wire; the Claude clients are raw HTTP where the call must
come without a listing of its own, the Python SDK's client (naming itself, or as itself) elsewhere.
The server's own keys and every value arrive byte for byte (unicode keys and values, decimals as
spelled)."""

from __future__ import annotations

import dataclasses
import socket
import struct
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.clients import run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec
from mcp_normalizer.types import ASGIApp, Receive, Scope, Send

from .support import HEADERS, MODERN, capture_rewrites, proxy_for, read_body, replay_body, serve

ORIGINAL_KEYS = "dev.mcp-normalizer/original-keys"
ORIGINAL_NAME = "dev.mcp-normalizer/original-name"

SEARCH: dict[str, Any] = {
    "name": "search",
    "description": "Search the catalogue",
    "inputSchema": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "$filter": {"type": "object"},
            "max results": {"type": "integer"},
        },
        "required": ["query"],
    },
}
DOTTED: dict[str, Any] = {
    "name": "weather.get",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
}

#: The arguments as the Claude host writes them, by own key: each value's text exactly as sent.
VALUES: dict[str, bytes] = {
    "query": '"Z\u00fcrich \u2713 \u65e5\u4ed8"'.encode(),
    "$filter": '{"gr\u00f6\u00dfe":1.50,"min":1e-7,"id":9007199254740993,"\u65e5\u4ed8":"2026-12-06"}'.encode(),
    "max results": b"10",
}


def arguments(keys: dict[str, str]) -> bytes:
    """The arguments object, each own key written as ``keys`` names it (advertised -> own)."""
    advertised = {own: new for new, own in keys.items()}
    return b"{" + b",".join(orjson.dumps(advertised.get(k, k)) + b":" + v for k, v in VALUES.items()) + b"}"


def meta(client: str | None, version: str = "2.1.233") -> dict[str, Any]:
    """A 2026-07-28 request's ``_meta``, naming ``client`` (``None``: naming no one)."""
    found: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    if client is not None:
        found["io.modelcontextprotocol/clientInfo"] = {"name": client, "version": version}
    return found


def decoded(response: httpx.Response) -> Any:
    """The JSON-RPC message of a response: JSON, or the last event of an SSE stream."""
    assert response.status_code == 200, response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return orjson.loads(data[-1])
    return response.json()


async def modern_call(http: httpx.AsyncClient, url: str, client: str, tool: str, args: bytes, rid: int = 7) -> Any:
    """A 2026-07-28 ``tools/call`` by ``client`` with ``args`` as written; the response."""
    tail = b',"_meta":' + orjson.dumps(meta(client)) + b"}"
    params = b'{"name":' + orjson.dumps(tool) + b',"arguments":' + args + tail
    body = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}' % (rid, params)
    found = {**HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool}
    return decoded(await http.post(url, content=body, headers=found))


async def modern_list(http: httpx.AsyncClient, url: str, client: str | None) -> Any:
    """A 2026-07-28 ``tools/list`` by ``client``; its result."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta(client)}}
    found = {**HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/list"}
    return decoded(await http.post(url, content=orjson.dumps(body), headers=found))["result"]


class Recording:
    """An ASGI app in front of ``app`` that keeps every POST body as it arrived."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            body = await read_body(receive)
            self.bodies.append(body)
            receive = replay_body(body, receive)
        await self.app(scope, receive, send)

    def calls(self) -> list[bytes]:
        return [body for body in self.bodies if b'"tools/call"' in body]


async def echo(call: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": orjson.dumps(call.arguments).decode()}]}


def upstream(*tools: dict[str, Any], cache_scope: Any = "private") -> tuple[ScriptedServer, Recording]:
    server = ScriptedServer([ToolSpec(t, echo) for t in tools], response_mode="json", cache_scope=cache_scope)
    return server, Recording(server)


def own_arguments() -> bytes:
    return arguments({})


async def sdk_lists(url: str, client_name: str | None = None) -> dict[str, Any]:
    """The Python SDK's 2026-07-28 client lists the tools (as itself, ``mcp``, or naming ``client_name``)."""
    record = await run_python(url, [{"op": "listTools"}], mode=MODERN, client_name=client_name)
    assert record["steps"][0]["ok"], record
    value: dict[str, Any] = record["steps"][0]["value"]
    return value


def advertised_keys(listed: dict[str, Any], tool: str = "search") -> dict[str, str]:
    (found,) = [t for t in listed["tools"] if t["name"] == tool]
    keys: dict[str, str] = found["_meta"][ORIGINAL_KEYS]
    return keys


# -- (a) 2026-07-28, HTTP upstream, no credentials: the list reused for its ttlMs ------------------


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("last", ["sdk", "claude"])
async def test_claudes_renamed_keys_reach_the_server_as_its_own_whoever_listed_last(last: str) -> None:
    server, recording = upstream(SEARCH)
    with serve(recording) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        url = px + "/mcp"
        if last == "claude":
            plain = await sdk_lists(url)
            claude = await sdk_lists(url, "claude-code")  # the real SDK client, naming itself claude-code
        else:
            claude = await sdk_lists(url, "claude-code")
            plain = await sdk_lists(url)  # the scope's list is now the SDK client's (no renames)
        keys = advertised_keys(claude)
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await modern_call(http, url, "claude-code", "search", arguments(keys))
    assert set(keys.values()) == {"$filter", "max results"}
    assert plain["tools"][0]["inputSchema"] == SEARCH["inputSchema"]  # the SDK client: the server's own
    assert "isError" not in answer["result"], answer
    (sent,) = recording.calls()
    assert own_arguments() in sent, sent  # the server's own keys, every value byte for byte
    assert orjson.loads(answer["result"]["content"][0]["text"]) == orjson.loads(own_arguments())
    assert log.rewrites(rule="tool_names", method="tools/call", client="claude-code"), log.lines  # who it was for


@pytest.mark.wire
@pytest.mark.anyio
async def test_one_token_shared_by_two_hosts_maps_each_hosts_calls_by_its_own_profile(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One bearer token, two hosts (one scope): Claude Code lists, then an SDK client lists and calls
    with the server's own keys, then Claude Code calls with its advertised ones: both reach the
    server under the server's keys; an advertised key from the SDK client goes as it came."""
    server, recording = upstream(SEARCH)
    token = {"authorization": "Bearer shared-team-token"}
    with serve(recording) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30, headers=token) as http:
            keys = advertised_keys(await modern_list(http, url, "claude-code"))
            await modern_list(http, url, "mcp")
            plain = await modern_call(http, url, "mcp", "search", own_arguments(), rid=1)
            claude = await modern_call(http, url, "claude-code", "search", arguments(keys), rid=2)
            stray = await modern_call(http, url, "mcp", "search", arguments(keys), rid=3)
    first, second, third = recording.calls()
    assert own_arguments() in first and own_arguments() in second
    assert arguments(keys) in third  # advertised to Claude Code only: the SDK client's call as it came
    assert "isError" not in plain["result"] and "isError" not in claude["result"]
    assert orjson.loads(stray["result"]["content"][0]["text"]) == orjson.loads(arguments(keys))
    mismatches = [r.getMessage() for r in caplog.records if "sent as it came" in r.getMessage()]
    assert len(mismatches) == 1 and "not for mcp" in mismatches[0], mismatches  # the stray call alone
    assert "$filter" not in mismatches[0] and "max results" not in mismatches[0]  # no names: the server's text


PLAIN_KEYS: dict[str, Any] = {
    "name": "measure",
    "inputSchema": {
        "type": "object",
        "properties": {"max results": {"type": "integer"}, "gr\u00f6\u00dfe": {"type": "number"}},
    },
}


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_tool_listed_to_the_sdk_client_as_it_came_still_maps_claudes_keys() -> None:
    """A tool nothing is repaired in for the SDK client is listed to it without the rules (its
    property names unread): Claude Code's call with its advertised keys, after that list, reaches the
    server under the tool's own keys (the proxy lists the tools for Claude Code first)."""
    server, recording = upstream(PLAIN_KEYS)
    with serve(recording) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        claude = await sdk_lists(url, "claude-code")
        plain = await sdk_lists(url)
        keys = advertised_keys(claude, "measure")
        size = next(new for new, own in keys.items() if own == "gr\u00f6\u00dfe")
        limit = next(new for new, own in keys.items() if own == "max results")
        args = b'{"%s":1.50,"%s":10}' % (size.encode(), limit.encode())
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await modern_call(http, url, "claude-code", "measure", args)
    assert plain["tools"] == [PLAIN_KEYS]
    assert "isError" not in answer["result"], answer
    (sent,) = recording.calls()
    assert '"arguments":{"gr\u00f6\u00dfe":1.50,"max results":10}'.encode() in sent, sent


# -- (b) the stdio upstream: stateless clients of one shared child -------------------------------


ECHO = str(Path(__file__).with_name("echo_stdio_server.py"))


@contextmanager
def stdio_proxy(record: Path, *tools: dict[str, Any]) -> Iterator[str]:
    from .test_stdio_upstream import stdio_proxy as proxy

    with proxy([sys.executable, ECHO, orjson.dumps(list(tools)).decode(), str(record)]) as url:
        yield url


@pytest.mark.wire
@pytest.mark.anyio
async def test_through_the_stdio_upstream_claudes_keys_reach_the_shared_child_as_its_own(tmp_path: Path) -> None:
    record = tmp_path / "calls.jsonl"
    with stdio_proxy(record, SEARCH, DOTTED, PLAIN_KEYS) as px:
        url = px + "/mcp"
        await sdk_lists(url)
        claude = await sdk_lists(url, "claude-code")
        desktop = await sdk_lists(url, "claude-ai")
        plain = await sdk_lists(url)  # the last list of the shared scope: the SDK client's
        keys = advertised_keys(claude)
        dotted = next(t["name"] for t in desktop["tools"] if t.get("_meta", {}).get(ORIGINAL_NAME) == "weather.get")
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await modern_call(http, url, "claude-code", "search", arguments(keys))
            weather = await modern_call(http, url, "claude-ai", dotted, b'{"city":"K\xc3\xb6ln 1.50"}', rid=8)
            measured = advertised_keys(claude, "measure")
            args = b"{" + b",".join(b'"%s":1.50' % new.encode() for new in sorted(measured)) + b"}"
            measure = await modern_call(http, url, "claude-code", "measure", args, rid=9)
    assert [t["name"] for t in plain["tools"]] == ["search", "weather.get", "measure"]
    assert plain["tools"][2] == PLAIN_KEYS  # listed to the SDK client as it came
    assert advertised_keys(desktop) == keys  # the same names for every Claude host
    assert "isError" not in answer["result"] and "isError" not in weather["result"], (answer, weather)
    assert "isError" not in measure["result"], measure
    first, second, third = record.read_bytes().splitlines()
    own = b"{" + b",".join(orjson.dumps(measured[new]) + b":1.50" for new in sorted(measured)) + b"}"
    assert b'"arguments":' + own in third, third
    assert own_arguments() in first, first
    assert b'"name": "weather.get"' in second or b'"name":"weather.get"' in second, second
    assert b'"arguments":{"city":"K\xc3\xb6ln 1.50"}' in second


# -- (c) a cacheScope: "public" list, any scope ---------------------------------------------------


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_public_list_made_for_another_client_maps_claudes_call_by_claudes_profile() -> None:
    """The upstream marks its list ``public``: a list the SDK client fetched (and that Claude's own
    list, made private for it, does not replace) serves a Claude call from another credential."""
    server, recording = upstream(SEARCH, DOTTED, cache_scope="public")
    with serve(recording) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30, headers={"authorization": "Bearer alice"}) as http:
            listed = await modern_list(http, url, "claude-ai")
        keys = advertised_keys(listed)
        dotted = next(t["name"] for t in listed["tools"] if t.get("_meta", {}).get(ORIGINAL_NAME) == "weather.get")
        async with httpx.AsyncClient(timeout=30) as http:
            public = await modern_list(http, url, None)  # a client naming no one: the list stays public
            async with httpx.AsyncClient(timeout=30, headers={"authorization": "Bearer bob"}) as bob:
                answer = await modern_call(bob, url, "claude-ai", "search", arguments(keys))
                weather = await modern_call(bob, url, "claude-ai", dotted, b'{"city":"\xe6\x97\xa5\xe4\xbb\x98"}', 8)
    assert listed["cacheScope"] == "private" and public["cacheScope"] == "public"
    assert "isError" not in answer["result"] and "isError" not in weather["result"], (answer, weather)
    first, second = recording.calls()
    assert own_arguments() in first, first
    assert orjson.loads(second)["params"]["name"] == "weather.get"
    assert b'"arguments":{"city":"\xe6\x97\xa5\xe4\xbb\x98"}' in second


# -- (d) a dotted name renamed for claude-ai, called after another client listed ----------------------


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_name_renamed_for_claude_desktop_reaches_the_server_as_its_own_after_another_client_listed() -> None:
    server, recording = upstream(SEARCH, DOTTED)
    with serve(recording) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        desktop = await sdk_lists(url, "claude-ai")
        code = await sdk_lists(url, "claude-code")  # Claude Code keeps dotted names: no rename for it
        dotted = next(t["name"] for t in desktop["tools"] if t.get("_meta", {}).get(ORIGINAL_NAME) == "weather.get")
        async with httpx.AsyncClient(timeout=30) as http:
            weather = await modern_call(http, url, "claude-ai", dotted, b'{"city":"Z\xc3\xbcrich"}')
            stray = await modern_call(http, url, "claude-code", dotted, b'{"city":"Z\xc3\xbcrich"}', rid=8)
    assert "weather.get" in [t["name"] for t in code["tools"]] and dotted != "weather.get"
    assert "isError" not in weather["result"], weather
    first, second = recording.calls()
    assert orjson.loads(first)["params"]["name"] == "weather.get"
    # a name advertised to Claude Desktop only: Claude Code's call goes as it came (the server says so)
    assert orjson.loads(second)["params"]["name"] == dotted
    assert "error" in stray or stray["result"].get("isError") is True, stray


# -- (e) a legacy server without sessions (FastMCP stateless_http) --------------------------------


def stateless_fastmcp() -> Any:
    """A FastMCP server run as ``stateless_http`` (no ``Mcp-Session-Id``, JSON responses) with the
    search tool, whose call answers its arguments as text."""
    import fastmcp
    from fastmcp.tools import Tool, ToolResult
    from mcp.types import TextContent

    class Search(Tool):
        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            return ToolResult(content=[TextContent(type="text", text=orjson.dumps(arguments).decode())])

    server = fastmcp.FastMCP("stateless-fixture")
    server.add_tool(Search(name="search", description=SEARCH["description"], parameters=SEARCH["inputSchema"]))
    return server.http_app(path="/mcp", stateless_http=True, json_response=True)


LEGACY = "2025-11-25"


async def legacy(http: httpx.AsyncClient, url: str, body: bytes) -> Any:
    """One legacy request (no session: the server gives none); its response."""
    response = await http.post(url, content=body, headers={**HEADERS, "mcp-protocol-version": LEGACY})
    assert "mcp-session-id" not in response.headers
    return decoded(response)


def initialize(client: str) -> bytes:
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": client, "version": "2.1.233"}}
    return orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})


LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_server_without_sessions_gets_claudes_repairs_and_its_call_mapped_back() -> None:
    """A legacy server without sessions: Claude Code's ``initialize`` names it on its connection, so
    its list has the names it takes and its call reaches the server under the tool's own, after the
    Python SDK's client (another connection) listed; a request naming no client is known by a
    ``User-Agent`` of Claude Code's, and by nothing else."""
    recording = Recording(stateless_fastmcp())
    with serve(recording) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as claude:  # one connection, kept alive
            await legacy(claude, url, initialize("claude-code"))
            initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
            await claude.post(url, content=initialized, headers={**HEADERS, "mcp-protocol-version": LEGACY})
            listed = (await legacy(claude, url, LIST))["result"]
            sdk = await run_python(url, [{"op": "listTools"}])  # the Python SDK's client, as itself
            keys = advertised_keys(listed)
            call = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":%s}}'
            answer = await legacy(claude, url, call % arguments(keys))
        async with httpx.AsyncClient(timeout=30, headers={"user-agent": "claude-code/2.1.204 (cli)"}) as agent:
            by_agent = (await legacy(agent, url, LIST))["result"]
        async with httpx.AsyncClient(timeout=30) as nobody:
            unnamed = (await legacy(nobody, url, LIST))["result"]
    assert set(keys.values()) == {"$filter", "max results"}
    assert sdk["steps"][0]["ok"] and ORIGINAL_KEYS not in str(sdk["steps"][0]["value"]), sdk
    assert answer["result"].get("isError") is not True, answer
    (sent,) = recording.calls()
    assert own_arguments() in sent, sent  # the tool's own keys, every value byte for byte
    assert orjson.loads(answer["result"]["content"][0]["text"]) == orjson.loads(own_arguments())
    assert advertised_keys(by_agent) == keys
    assert unnamed["tools"][0]["inputSchema"]["properties"].keys() == SEARCH["inputSchema"]["properties"].keys()


def post_from(url: str, body: bytes, port: int) -> Any:
    """One legacy request from the local ``port`` on a connection of its own, reset when answered
    (no ``TIME_WAIT``: the next connection from that port may come at once, as a busy host's
    ephemeral ports come round); the response's JSON."""
    parts = httpx.URL(url)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.connect((parts.host, parts.port))
        head = (
            f"POST {parts.raw_path.decode()} HTTP/1.1\r\nhost: {parts.netloc.decode()}\r\n"
            f"content-type: application/json\r\naccept: application/json, text/event-stream\r\n"
            f"mcp-protocol-version: {LEGACY}\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        received = b""
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        head_bytes, _, rest = received.partition(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1] for line in head_bytes.split(b"\r\n") if line.lower().startswith(b"content-length")
            )
        )
        while len(rest) < length:
            rest += sock.recv(65536)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return orjson.loads(rest[:length])


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("parser", ["httptools", "h11"])
async def test_a_connection_from_a_port_another_client_used_before_is_not_that_client(parser: str) -> None:
    """A legacy server without sessions: Claude Code initializes on a connection, which then ends.
    Another client's connection from the same address and port (an ephemeral port comes round;
    the proxy remembers a connection's client for an hour) that names no one lists the tool as the
    server lists it: a connection names its client only while it lasts."""
    config = NormalizerConfig.shipped().with_proxy({"http": parser})
    with serve(stateless_fastmcp()) as up, proxy_for(up + "/mcp", config) as px:
        url = px + "/mcp"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        named = await anyio.to_thread.run_sync(post_from, url, initialize("claude-code"), port)
        listed = await anyio.to_thread.run_sync(post_from, url, LIST, port)
    assert named["result"]["serverInfo"], named
    tool = listed["result"]["tools"][0]
    assert tool["inputSchema"]["properties"].keys() == SEARCH["inputSchema"]["properties"].keys(), tool


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_client_in_use_is_remembered_past_the_time_since_it_named_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A legacy server without sessions: Claude Code names itself once (``initialize``) and then
    uses its connection for longer than a client is remembered (an hour; 1.5 s here): every
    request that recalls it keeps it remembered, so its call, made 2 s after it named itself and
    0.9 s after its last list, still reaches the server under the tool's own keys."""
    from mcp_normalizer.engine.client_id import MAX_REMEMBERED, ClientMemory

    monkeypatch.setattr(ClientMemory.__init__, "__defaults__", (MAX_REMEMBERED, 1.5))
    recording = Recording(stateless_fastmcp())
    with serve(recording) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as claude:  # one connection, kept alive; no User-Agent of a host
            await legacy(claude, url, initialize("claude-code"))
            await anyio.sleep(1.1)
            keys = advertised_keys((await legacy(claude, url, LIST))["result"])
            await anyio.sleep(0.9)
            call = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":%s}}'
            answer = await legacy(claude, url, call % arguments(keys))
    assert set(keys.values()) == {"$filter", "max results"}
    assert answer["result"].get("isError") is not True, answer
    (sent,) = recording.calls()
    assert own_arguments() in sent, sent  # not the keys advertised to Claude Code: none lost


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_flood_of_clients_naming_themselves_never_makes_the_proxy_forget_an_open_connections_client() -> None:
    """A legacy server without sessions: Claude Code names itself on its kept-alive connection;
    then another client sends more ``initialize`` requests than the proxy remembers clients
    (``max_scopes``, 20 here), each with credentials made up. Claude Code's call on its connection
    still reaches the server under the tool's own keys: what a connection said lasts as long as
    the connection, whatever others say."""
    config = dataclasses.replace(NormalizerConfig.shipped(), max_scopes=20)
    recording = Recording(stateless_fastmcp())
    with serve(recording) as up, proxy_for(up + "/mcp", config) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as claude, httpx.AsyncClient(timeout=30) as flood:
            await legacy(claude, url, initialize("claude-code"))
            keys = advertised_keys((await legacy(claude, url, LIST))["result"])
            for n in range(50):
                headers = {**HEADERS, "mcp-protocol-version": LEGACY, "authorization": f"Bearer made-up-{n}"}
                await flood.post(url, content=initialize(f"client-{n}"), headers=headers)
            call = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":%s}}'
            answer = await legacy(claude, url, call % arguments(keys))
    assert set(keys.values()) == {"$filter", "max results"}
    assert answer["result"].get("isError") is not True, answer
    (sent,) = recording.calls()
    assert own_arguments() in sent, sent


# -- the legacy eras with sessions: every session its own scope, both upstream forms -------------


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("form", ["http", "stdio"])
async def test_legacy_sessions_of_claude_and_the_sdk_each_call_by_their_own_maps(form: str, tmp_path: Path) -> None:
    """The legacy handshake through the HTTP upstream and the stdio upstream (a child per
    session): the Python SDK's client naming itself ``claude-code`` lists and calls by the keys it
    was shown, the SDK client as itself by the tool's own, in turn; both reach the tool under its
    own keys (the guard for what sessions already kept apart)."""
    from mcp_normalizer.engine.rules.host_schemas import key_names

    own = orjson.loads(own_arguments())
    advertised = {key_names(SEARCH["inputSchema"]["properties"]).get(k, k): v for k, v in own.items()}
    steps: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": "search", "arguments": advertised}]
    plain: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": "search", "arguments": own}]
    record = tmp_path / "calls.jsonl"
    server, recording = upstream(SEARCH)
    with ExitStack() as stack:
        if form == "http":
            up = stack.enter_context(serve(recording))
            url = stack.enter_context(proxy_for(up + "/mcp")) + "/mcp"
        else:
            url = stack.enter_context(stdio_proxy(record, SEARCH)) + "/mcp"
        claude = await run_python(url, steps, client_name="claude-code")
        sdk = await run_python(url, plain)
        again = await run_python(url, steps, client_name="claude-code")
    for run in (claude, sdk, again):
        assert all(step["ok"] for step in run["steps"]), run
        assert orjson.loads(run["steps"][1]["value"]["content"][0]["text"]) == own
    assert advertised_keys(claude["steps"][0]["value"]) == {v: k for k, v in key_names(own).items() if k != v}
    lines = record.read_bytes().splitlines() if form == "stdio" else recording.calls()
    assert [orjson.loads(line)["params"]["arguments"] for line in lines] == [own, own, own]


# -- who is asking ---------------------------------------------------------------------------------


@pytest.mark.pure
def test_only_claude_codes_user_agent_names_a_host_and_a_trusted_proxys_connection_names_no_one() -> None:
    from mcp_normalizer import NormalizerConfig
    from mcp_normalizer.engine.client_id import ClientMemory, from_user_agent
    from mcp_normalizer.engine.rules.clients import UNKNOWN
    from mcp_normalizer.middleware import NormalizerMiddleware

    code = from_user_agent("claude-code/2.1.204 (cli)")
    assert (code.name, code.version, code.host is not None) == ("claude-code", "2.1.204", True)
    for other in ("Dmi/JS 0.94.0", "claude-cli/2.1.205 (external, cli)", "node", "python-httpx/0.28", "", None):
        assert from_user_agent(other) is UNKNOWN, other  # probes, the API's agent, anyone else: no one

    memory = ClientMemory(max_entries=2, ttl=60.0)
    memory.remember(["connection\0a", None], code)
    memory.remember(["connection\0b"], UNKNOWN)  # naming no one is never remembered
    assert memory.recall([None, "connection\0a"]) is code and memory.recall(["connection\0b"]) is UNKNOWN

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("not called")

    config = NormalizerConfig.shipped().with_proxy({"trusted_proxies": ["10.0.0.0/8"]})
    middleware = NormalizerMiddleware(app, config)
    scope: Scope = {"type": "http", "headers": [], "client": ("10.1.2.3", 5555), "server": ("127.0.0.1", 80)}
    assert middleware._client_keys(scope) == (None, None)  # a trusted proxy's connection: many clients
    scope = {**scope, "client": ("192.0.2.7", 5555), "headers": [(b"authorization", b"Bearer \xc3\xa9")]}
    connection, credentials = middleware._client_keys(scope)
    assert connection is not None and "192.0.2.7" in connection and credentials is not None
    assert "Bearer" not in credentials  # a keyed hash of the credentials, never the token


@pytest.mark.pure
def test_a_listings_name_map_for_each_profile_is_the_one_a_listing_for_it_makes() -> None:
    """The map derived for a profile from a listing made for another equals the map a listing for
    that profile makes (rule ``tool_names`` on the same upstream names), is derived once, and not
    at all for calls none of which has an invented name's shape."""
    from mcp_normalizer import NormalizerConfig
    from mcp_normalizer.engine.audit import AuditLog
    from mcp_normalizer.engine.exchange import Exchange
    from mcp_normalizer.engine.name_maps import names_for
    from mcp_normalizer.engine.normalize import Normalizer
    from mcp_normalizer.engine.rules.clients import profile_for
    from mcp_normalizer.engine.scopes import ScopeStore
    from mcp_normalizer.engine.transform import ResponseTransformer
    from mcp_normalizer.wire.jsonrpc import inspect_request

    from .support import JSON_HEADERS, feed_all

    config = NormalizerConfig.shipped()
    names = ["weather.get", "a b", "ok_name", "x" * 70, "caf\u00e9.\u65e5"]
    tools = [{"name": name, "inputSchema": {"type": "object"}} for name in names]
    response = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}})
    info = inspect_request(b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}', [])
    assert info is not None
    listings = {}
    for client in ("claude-ai", "mcp"):
        state = ScopeStore().state("s")
        exchange = Exchange(
            info.pending,
            "2025-11-25",
            "s",
            state,
            sole=info.sole,
            own_stream=True,
            client=profile_for({"name": client}),
        )
        transformer = ResponseTransformer(exchange, Normalizer(config), AuditLog("test"), slice_seconds=0)
        transformer.start(200, JSON_HEADERS)
        feed_all(transformer, response)
        listings[client] = state.catalog.listing()
    desktop, sdk = listings["claude-ai"], listings["mcp"]
    assert desktop is not None and sdk is not None
    as_desktop, as_sdk = profile_for({"name": "claude-ai"}), profile_for({"name": "mcp"})
    assert names_for(desktop, as_desktop, config) == desktop.names and len(desktop.names) == 4
    assert names_for(sdk, as_desktop, config, {"ok_name"}) == {}  # no call can need it: not derived
    assert names_for(sdk, as_desktop, config) == desktop.names  # derived from the SDK's listing
    assert names_for(sdk, as_desktop, config) is names_for(sdk, as_desktop, config)  # once
    assert names_for(desktop, as_sdk, config) == sdk.names and len(sdk.names) == 2  # the spec's names kept
