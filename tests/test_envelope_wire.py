"""Envelope and stream faults on the wire, with the three strict clients (fault kinds
``jsonrpc_batch_response``, ``jsonrpc_id_mismatch``, ``null_optional_fields`` (``nextCursor``),
``sse_framing``; ``cases/faults.md``, "Kinds from the 2026 reports").

The upstream is a scripted legacy server whose every response (``initialize`` too) is mangled as
the reports describe, per session (``x-fault`` header); the clients connect, list the tools and
call one directly and through the proxy. Directly, each fault breaks at least one client; through
the proxy every client gets the whole result, field data and all.
"""

from __future__ import annotations

import socketserver
from typing import Any, Literal

import httpx
import orjson
import pytest

from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning

from .support import (
    Mangle,
    Mangled,
    RawUpstream,
    capture_rewrites,
    proxy_for,
    read_request,
    serve,
    serving,
    three_clients,
)

pytestmark = pytest.mark.wire

TOOL = {
    "name": "field.report",
    "inputSchema": {"type": "object"},
    "outputSchema": {
        "type": "object",
        "properties": {"price": {"type": "number"}, "name": {"type": "string"}, "big": {"type": "integer"}},
        "required": ["price"],
    },
}
#: 2**53 - 1: the largest integer a JS client holds exactly (the sans-IO tests carry larger ones).
STRUCTURED = {"price": 12.5, "name": 'naïve 😀 "q" \\ é', "big": 9007199254740991}
RESULT = {"content": [{"type": "text", "text": orjson.dumps(STRUCTURED).decode()}], "structuredContent": STRUCTURED}


def _text(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message)


def _error_null(message: dict[str, Any]) -> bytes:
    return _text({**message, "error": None}) if "result" in message else _text(message)


def _array(message: dict[str, Any]) -> bytes:
    return b"[" + _text(message) + b"]"


def _wazuh(message: dict[str, Any]) -> bytes:
    return b"[" + _error_null(message) + b"]"


def _id_string(message: dict[str, Any]) -> bytes:
    return _text({**message, "id": str(message["id"])}) if "id" in message else _text(message)


def _id_offset(message: dict[str, Any]) -> bytes:
    """Every id answered as another number (radareorg/radare2-mcp#68 answers every id as 0)."""
    return _text({**message, "id": message["id"] + 1000}) if isinstance(message.get("id"), int) else _text(message)


def _cursor_null(message: dict[str, Any]) -> bytes:
    result = message.get("result")
    if isinstance(result, dict) and "tools" in result:
        return _text({**message, "result": {**result, "nextCursor": None}})
    return _text(message)


MANGLES: dict[str, Mangle] = {
    "error_null": _error_null,
    "array": _array,
    "wazuh": _wazuh,
    "id_string": _id_string,
    "id_offset": _id_offset,
    "cursor_null": _cursor_null,
}


def upstream(mode: Literal["sse", "json"]) -> Mangled:
    return Mangled(ScriptedServer([ToolSpec(TOOL, returning(RESULT))], response_mode=mode), MANGLES)


STEPS: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": TOOL["name"], "arguments": {}}]


def received_whole(record: dict[str, Any]) -> bool:
    """The session listed the tool and got the call's result with every value intact."""
    if not all(step["ok"] for step in record["steps"]):
        return False
    listed, called = record["steps"][0]["value"], record["steps"][1]["value"]
    return (
        [tool["name"] for tool in listed["tools"]] == [TOOL["name"]]
        and "nextCursor" not in listed
        and called.get("structuredContent") == STRUCTURED
        and called["content"] == RESULT["content"]
        and not called.get("isError")
    )


#: Faults these three clients get past (they match ``"1"`` to ``1``: TS by ``Number(id)``, Python by
#: the POST it sent); Copilot Studio and OpenCode do not (faults.md). The proxy repairs them all the same.
TOLERATED = {"id_string"}

FAULTS = {
    "json": ["error_null", "array", "wazuh", "id_string", "cursor_null"],
    "sse": ["error_null", "array", "wazuh", "id_string", "cursor_null", "unterminated"],
}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_envelope_and_framing_faults_break_clients_directly_and_none_through_the_proxy(
    mode: Literal["sse", "json"],
) -> None:
    faults = FAULTS[mode]
    with serve(upstream(mode)) as up:
        direct = await three_clients(up + "/mcp", faults, STEPS, request_timeout=8)
        with proxy_for(up + "/mcp") as px, capture_rewrites() as log:
            through = await three_clients(px + "/mcp", faults, STEPS, request_timeout=30)
    for index, fault in enumerate(faults):
        broken = [name for name, records in direct.items() if not received_whole(records[index])]
        if fault not in TOLERATED:
            assert broken, f"{mode}/{fault}: no client fails directly: the fixture shows no fault"
        for name, records in through.items():
            assert received_whole(records[index]), (mode, fault, name, records[index])
    rules = {line["rule"] for line in log.lines if line["event"] == "rewrite"}
    assert {"jsonrpc_envelope", "jsonrpc_id", "null_cursor"} <= rules
    if mode == "sse":
        assert "sse_framing" in rules


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_a_reply_under_another_id_value_is_refused_with_an_error_never_stamped(
    mode: Literal["sse", "json"],
) -> None:
    """Every id answered as another number (radareorg/radare2-mcp#68): the id may be another
    request's (a late duplicate looks the same), so it is never made this request's. Each client
    gets a JSON-RPC error naming the fault at once, where directly the TS clients wait for their
    timeout (the Python client takes any reply on its POST's stream: it is refused there too)."""
    with serve(upstream(mode)) as up:
        direct = await three_clients(up + "/mcp", ["id_offset"], STEPS, request_timeout=8)
        with proxy_for(up + "/mcp") as px, capture_rewrites() as log:
            through = await three_clients(px + "/mcp", ["id_offset"], STEPS, request_timeout=30)
    assert not direct["ts-sdk-1"][0]["steps"][0]["ok"] and not direct["ts-client-2"][0]["steps"][0]["ok"]
    for name, records in through.items():
        step = records[0]["steps"][0]
        assert not step["ok"] and "which no request of this POST has" in str(step["error"]), (name, step)
    assert not [line for line in log.lines if line.get("rule") == "jsonrpc_id"]


@pytest.mark.anyio
async def test_a_clean_upstream_gets_no_envelope_rewrite() -> None:
    with serve(upstream("sse")) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        through = await three_clients(px + "/mcp", ["none"], STEPS, request_timeout=30)
    assert all(received_whole(records[0]) for records in through.values())
    envelope_rules = {"jsonrpc_envelope", "jsonrpc_id", "null_cursor", "sse_framing"}
    assert not [line for line in log.lines if line.get("rule") in envelope_rules]


class _BrokenSSE(RawUpstream):
    """An upstream that answers one SSE event whose id is not the request's, then hangs up
    mid-body (no last chunk)."""

    def __init__(self, event: bytes) -> None:
        self.event = event
        super().__init__(_BrokenHandler)


class _BrokenHandler(socketserver.StreamRequestHandler):
    server: _BrokenSSE

    def handle(self) -> None:
        if read_request(self.rfile) is None:
            return
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        self.wfile.write(head + b"%x\r\n%s\r\n" % (len(self.server.event), self.server.event))
        self.wfile.flush()


@pytest.mark.anyio
async def test_a_response_held_for_its_id_goes_out_as_it_came_when_the_upstream_breaks_off() -> None:
    """The event answers the request only by position, so it waits for the stream's end; the
    upstream breaks off instead: the client still gets the event (unstamped), then the break."""
    event = b'event: message\ndata: {"jsonrpc":"2.0","id":"7","result":{"content":[],"n":12.50}}\n\n'
    call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{}}}'
    with serving(_BrokenSSE(event)) as up, proxy_for(up.url) as px:
        received = b""
        async with httpx.AsyncClient(timeout=10) as http:
            headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
            with pytest.raises(httpx.RemoteProtocolError):
                async with http.stream("POST", px + "/mcp", content=call, headers=headers) as response:
                    async for chunk in response.aiter_bytes():
                        received += chunk
    assert received == event


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_an_error_result_with_content_null_reaches_every_client_as_an_error(mode: Literal["sse", "json"]) -> None:
    """``content: null`` on an ``isError`` result (a serializer writing an empty list as null): the
    TS clients reject the result directly; through the proxy ``content`` is a list and the error
    stays an error, its message readable (a mutant that skipped error results survived: issue 22)."""
    error = {"content": None, "isError": True, "_meta": {"trace": "caf\u00e9-12.50"}}
    tool = {"name": "fails", "inputSchema": {"type": "object"}}
    server = ScriptedServer([ToolSpec(tool, returning(error))], response_mode=mode)
    steps: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": "fails", "arguments": {}}]
    with serve(server) as up:
        direct = await three_clients(up + "/mcp", ["none"], steps, request_timeout=10)
        with proxy_for(up + "/mcp") as px, capture_rewrites() as log:
            through = await three_clients(px + "/mcp", ["none"], steps, request_timeout=30)
    assert not direct["ts-sdk-1"][0]["steps"][1]["ok"]
    for client, records in through.items():
        step = records[0]["steps"][1]
        assert step["ok"], (client, step)
        value = step["value"]
        assert value["isError"] is True and isinstance(value["content"], list), (client, value)
        assert value["_meta"]["trace"] == "caf\u00e9-12.50"
    assert log.rewrites(rule="null_members", pointers=["/content"])
