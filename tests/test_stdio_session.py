"""The sans-IO pieces of the stdio paths (issue 24): newline framing, the id of a message too long to
read, and the session core that runs each server message through the proxy's rules."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.upstream import RUNTIMES, protean_tools
from mcp_normalizer.engine.audit import AuditLog
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.stdio_session import ServerLine, StdioSession, long_line_id
from mcp_normalizer.wire.jsonrpc import id_key
from mcp_normalizer.wire.lines import LINE, PART, LineDecoder

from .support import PROPERTY, VALUES

pytestmark = pytest.mark.pure

LINES = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")), max_size=8)


@PROPERTY
@given(lines=LINES, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12), bound=st.integers(1, 64))
def test_any_split_of_a_stream_gives_back_its_lines_and_long_ones_in_pieces(
    lines: list[bytes], cuts: list[int], bound: int
) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    decoder = LineDecoder(bound)
    pieces = []
    at = 0
    for cut in sorted(set(cuts)):
        pieces += decoder.feed(stream[at:cut])
        at = max(at, cut)
    pieces += decoder.feed(stream[at:]) + decoder.flush()
    rebuilt: list[bytes] = []
    partial = b""
    for piece, kind in pieces:
        if kind == PART:
            partial += piece
        else:
            rebuilt.append(partial + piece)
            partial = b""
        if kind == LINE:
            assert len(piece) <= bound  # a line held whole is never above the bound
    assert rebuilt == lines  # (a CR before the newline is dropped: tested below)


def test_an_unterminated_last_line_comes_out_at_the_end() -> None:
    decoder = LineDecoder(1024)
    assert decoder.feed(b'{"a":1}\r\n{"b"') == [(b'{"a":1}', LINE)]
    assert decoder.flush() == [(b'{"b"', LINE)]
    assert decoder.flush() == []


IDS = st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=12))


@PROPERTY
@given(rid=IDS, result=VALUES, first=st.booleans())
def test_the_id_of_a_long_message_is_found_at_either_end_and_never_inside(rid: Any, result: Any, first: bool) -> None:
    members: dict[str, Any] = (
        {"id": rid, "jsonrpc": "2.0", "result": {"v": result}} if first else {"result": {"v": result}}
    )
    if not first:
        members.update({"jsonrpc": "2.0", "id": rid})
    line = orjson.dumps(members)
    assert long_line_id(line[:4096], line[-4096:]) == id_key(rid)
    nested = orjson.dumps({"jsonrpc": "2.0", "result": {"id": rid, "v": result}, "method": "x"})
    assert long_line_id(nested[:4096], nested[-4096:]) is None  # an "id" inside the result is not its id


def relayed(line: ServerLine) -> ServerLine:
    """``line`` worked to its end (a slow machine may cut the work into slices, as the wrapper
    lets its loop run between them)."""
    while line.busy:
        line.resume()
    return line


def session() -> StdioSession:
    return StdioSession(Normalizer(NormalizerConfig.shipped()), AuditLog("test"), max_line=1 << 20)


def test_a_result_is_repaired_by_the_tools_the_session_listed_and_noise_is_set_aside() -> None:
    core = session()
    (spec,) = (s for s in protean_tools() if s.tool["name"] == "protean.list_runtimes")
    init = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    init += b'"capabilities":{},"clientInfo":{"name":"claude-code","version":"2.1"}}}'
    assert core.from_client(init) == init
    assert relayed(core.from_server(b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}')).lines
    assert core.era == "2025-06-18" and core.client.name == "claude-code"
    listing = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    assert core.from_client(listing) == listing
    listed = relayed(core.from_server(orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [spec.tool]}})))
    (tool,) = orjson.loads(listed.lines[0])["result"]["tools"]
    assert tool["outputSchema"]["properties"]["runtimes"]["items"]["properties"]["scope"]["type"] == ["string", "null"]
    call = b'{"jsonrpc":"2.0","id":"c\\u00e9","method":"tools/call","params":{"name":"protean.list_runtimes"}}'
    core.from_client(call)
    assert set(core.pending) == {id_key("c\u00e9")}
    result = {"content": [], "structuredContent": RUNTIMES}
    answered = relayed(core.from_server(orjson.dumps({"jsonrpc": "2.0", "id": "c\u00e9", "result": result})))
    assert [orjson.loads(line)["result"]["structuredContent"] for line in answered.lines] == [RUNTIMES]
    assert core.pending == {}
    noise = relayed(core.from_server(b"INFO server ready on stdio"))
    assert noise.lines == [] and noise.noise == b"INFO server ready on stdio"
    untouched = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":12.50,"total":1e3}}'
    assert relayed(core.from_server(untouched)).lines == [untouched]  # byte for byte


def test_a_promoted_pretty_printed_text_never_breaks_the_line() -> None:
    """Rule ``promote_text_json`` splices the text's JSON as the server wrote it; its line breaks
    are whitespace and must not split the stdio message (a case of the corpus hung the clients)."""
    core = session()
    schema = {"type": "object", "properties": {"connected": {"type": "boolean"}}, "required": ["connected"]}
    core.from_client(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
    tool = {"name": "remnote_status", "inputSchema": {"type": "object"}, "outputSchema": schema}
    relayed(core.from_server(orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}})))
    core.from_client(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remnote_status"}}')
    text = '{\n  "connected": true,\r\n  "note": "caf\u00e9\\nline"\n}'
    result = {"content": [{"type": "text", "text": text}]}
    out = relayed(core.from_server(orjson.dumps({"jsonrpc": "2.0", "id": 2, "result": result})))
    (line,) = out.lines
    assert b"\n" not in line and b"\r" not in line
    message = orjson.loads(line)
    assert message["result"]["structuredContent"] == {"connected": True, "note": "caf\u00e9\nline"}
    assert message["result"]["content"][0]["text"] == text  # the text as it came
