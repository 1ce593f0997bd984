"""The SSE splitter and rewriter: any chunking gives the same bytes and events as the whole stream."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_normalizer.wire.sse import SSESplitter, parse_event, replace_data

pytestmark = pytest.mark.pure

EOLS = [b"\n", b"\r\n", b"\r"]
LINES = st.sampled_from(
    [
        b"event: message",
        b'data: {"jsonrpc":"2.0","id":1,"result":{}}',
        b"data: ",
        b"data",
        b"data:no-space",
        b"id: 42",
        b"retry: 1500",
        b": ping - 2026-11-29",
        b":",
        "data: caf\u00e9 \u2028 end".encode(),
    ]
)
EVENTS = st.lists(LINES, min_size=0, max_size=4)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    eol = draw(st.sampled_from(EOLS))
    mixed = draw(st.booleans())
    out = b"\xef\xbb\xbf" if draw(st.booleans()) else b""
    for event in draw(st.lists(EVENTS, max_size=6)):
        for line in event:
            out += line + (draw(st.sampled_from(EOLS)) if mixed else eol)
        out += eol
    if draw(st.booleans()):
        out += draw(LINES)  # an unterminated tail
    return out


def split(stream: bytes, cuts: list[int]) -> tuple[list[bytes], bytes]:
    splitter = SSESplitter()
    blocks: list[bytes] = []
    start = 0
    for cut in sorted(set(cuts)):
        blocks += splitter.feed(stream[start:cut])
        start = cut
    blocks += splitter.feed(stream[start:])
    return blocks, splitter.flush()


def dispatched(blocks: list[bytes]) -> list[tuple[str, bytes | None, bytes | None]]:
    return [(e.event, e.data, e.id) for e in map(parse_event, blocks) if e.data is not None]


@given(stream=streams(), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=30))
def test_any_chunking_gives_back_the_same_bytes_and_events(stream: bytes, cuts: list[int]) -> None:
    whole, whole_tail = split(stream, [])
    chunked, chunked_tail = split(stream, [c for c in cuts if c <= len(stream)])
    assert b"".join(chunked) + chunked_tail == stream
    assert b"".join(whole) + whole_tail == stream
    assert dispatched(chunked) == dispatched(whole)


def test_an_event_is_released_when_its_blank_line_arrives_not_later() -> None:
    splitter = SSESplitter()
    assert splitter.feed(b"event: message\r\ndata: 1\r\n") == []
    assert splitter.feed(b"\r\n") == [b"event: message\r\ndata: 1\r\n\r\n"]
    # A CR-terminated blank line at the end of a chunk releases the event at once; the LF that
    # completes the CRLF comes out on its own.
    assert splitter.feed(b"data: 2\r\r") == [b"data: 2\r\r"]
    assert splitter.feed(b"\ndata: 3\n\n") == [b"\n", b"data: 3\n\n"]


def test_parse_event_reads_fields_like_a_browser() -> None:
    event = parse_event(b"\xef\xbb\xbfid: 7\r\nevent: note\r\ndata: a\r\ndata:b\r\n: comment\r\n\r\n")
    assert (event.event, event.data, event.id) == ("note", b"a\nb", b"7")
    assert parse_event(b": only a comment\n\n").data is None
    assert parse_event(b"id: 1\ndata: \n\n").data == b""  # a priming event: empty data, dispatched


def test_replace_data_keeps_every_other_line_and_the_line_ends() -> None:
    block = b"id: 9\r\nevent: message\r\ndata: {\r\ndata: }\r\nretry: 10\r\n\r\n"
    assert replace_data(block, b'{"x":1}') == b'id: 9\r\nevent: message\r\ndata: {"x":1}\r\nretry: 10\r\n\r\n'
    assert replace_data(b"data: old\n\n", b"new") == b"data: new\n\n"


def test_an_oversized_event_is_flagged_for_pass_through() -> None:
    splitter = SSESplitter(max_pending=16)
    assert splitter.feed(b"data: " + b"x" * 32) == []
    assert splitter.overflowed


def test_a_stream_opening_with_a_bom_keeps_it_and_rewrites_multi_line_data_into_one_line() -> None:
    block = b'\xef\xbb\xbfid: 1\ndata: {"a":\ndata: 1}\n\n'
    assert parse_event(block).data == b'{"a":\n1}'
    assert replace_data(block, b'{"a":2}') == b'\xef\xbb\xbfid: 1\ndata: {"a":2}\n\n'


def test_a_long_unfinished_event_is_scanned_once() -> None:
    """Each byte of an event that arrives in many chunks is searched for a line end once per line
    end kind (a 10 MiB event once took 9.5 s: every chunk rescanned the whole unfinished line)."""
    scanned: list[int] = []

    class Counted(bytes):
        def find(self, sub: bytes, start: int = 0, *args: int) -> int:  # type: ignore[override]
            found = super().find(sub, start, *args)
            scanned.append((found if found >= 0 else len(self)) - start)
            return found

    splitter = SSESplitter(max_pending=1 << 30)
    chunk = b"x" * 4096
    blocks = splitter.feed(Counted(b"data: "))
    for _ in range(256):
        blocks += splitter.feed(Counted(chunk))
    blocks += splitter.feed(Counted(b"\n\n"))
    assert blocks == [b"data: " + chunk * 256 + b"\n\n"]
    assert sum(scanned) <= 2 * (6 + 256 * 4096 + 2)  # linear: LF and CR searched once each


def test_data_with_line_breaks_becomes_several_data_lines() -> None:
    block = replace_data(b"id: 1\r\ndata: x\r\n\r\n", b'{\n  "a": 1.10\r\n}')
    assert block == b'id: 1\r\ndata: {\r\ndata:   "a": 1.10\r\ndata: }\r\n\r\n'
    assert parse_event(block).data == b'{\n  "a": 1.10\n}'


def reference(stream: bytes) -> tuple[list[bytes], bytes]:
    """Blocks as the WHATWG parser sees them (CRLF, CR and LF end lines; a blank line dispatches)."""
    blocks: list[bytes] = []
    start = line_start = 0
    for match in re.finditer(rb"\r\n|\r|\n", stream):
        if match.start() == line_start:
            blocks.append(stream[start : match.end()])
            start = match.end()
        line_start = match.end()
    return blocks, stream[start:]


@settings(max_examples=1000)
@given(stream=streams())
def test_the_splitter_cuts_where_a_browser_dispatches(stream: bytes) -> None:
    assert split(stream, []) == reference(stream)


def browser_fields(block: bytes) -> tuple[str, bytes | None, bytes | None]:
    """Event type, data and last id of one block as WHATWG HTML 9.2.6 reads them, line by line."""
    event, data, event_id = b"", [], None
    block = block.removeprefix(b"\xef\xbb\xbf")
    for line in re.split(rb"\r\n|\r|\n", block):
        if not line or line[:1] == b":":
            continue
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value
        elif name == b"id" and b"\0" not in value:
            event_id = value
    return event.decode("utf-8", "replace") or "message", b"\n".join(data) if data else None, event_id


FIELD_LINES = st.sampled_from(
    [
        b"event: note",
        b"event:",
        b"event: caf\xc3\xa9 \xff",  # invalid UTF-8 in a type: replaced, never an error
        b"eventx: y",
        b"data:  two spaces kept but one",
        b"data",
        b"data: 1.10E+3",
        b"id: 7",
        b"id: a\0b",  # an id with NUL is ignored (the last good one stays)
        b"id",
        b": comment",
        b"retry: 10",
        "data: \u00e9\u2028".encode(),
    ]
)


@settings(max_examples=500)
@given(lines=st.lists(FIELD_LINES, max_size=8), eol=st.sampled_from(EOLS), bom=st.booleans())
def test_parse_event_reads_each_field_as_a_browser_does(lines: list[bytes], eol: bytes, bom: bool) -> None:
    block = (b"\xef\xbb\xbf" if bom else b"") + b"".join(line + eol for line in lines) + eol
    event = parse_event(block)
    assert (event.event, event.data, event.id) == browser_fields(block)


def test_an_event_of_exactly_max_pending_bytes_is_held_one_more_overflows() -> None:
    splitter = SSESplitter(max_pending=16)
    assert splitter.feed(b"data: " + b"x" * 10) == [] and not splitter.overflowed
    assert splitter.feed(b"y") == [] and splitter.overflowed


def test_an_early_event_with_its_own_type_and_cr_line_ends_keeps_them() -> None:
    """A named event goes out early with no ``event: message`` added, in the stream's CR style."""
    message = b'{"jsonrpc":"2.0","id":1,"result":{"n":12.50}}'
    splitter = SSESplitter()
    splitter.feed(b"id: 3\revent: note\rdata: " + message + b"\r")
    assert splitter.take_whole() == [b"id: 3\revent: note\rdata: " + message + b"\r\r"]
    assert splitter.feed(b"\r") == []  # the blank line it lacked, late: dropped
    splitter.feed(b"data: " + message + b"\r\n")
    assert splitter.take_whole() == [b"event: message\r\ndata: " + message + b"\r\n\r\n"]


def test_an_early_event_is_found_after_crlf_field_lines_and_within_4_kib_only() -> None:
    """The first data line is looked for past CRLF field lines (each CRLF is one line end), in the
    block's first 4096 bytes (it may start at the 4096th); past them the event waits for its blank line."""
    message = b'{"jsonrpc":"2.0","id":1,"result":{"n":1.10}}'
    splitter = SSESplitter()
    splitter.feed(b"id: 1\r\nretry: 5\r\ndata: " + message + b"\r\n")
    assert splitter.take_whole() == [b"event: message\r\nid: 1\r\nretry: 5\r\ndata: " + message + b"\r\n\r\n"]
    for head, early in ((b": " + b"c" * 4093 + b"\n", True), (b": " + b"c" * 4094 + b"\n", False)):
        assert len(head) in (4096, 4097)  # a data line that starts at byte 4096 is the last looked at
        splitter = SSESplitter()
        splitter.feed(head + b"data: " + message + b"\n")
        assert bool(splitter.take_whole()) is early


def test_only_the_one_blank_line_an_early_event_lacked_is_dropped() -> None:
    message = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":0.5}}'
    splitter = SSESplitter()
    splitter.feed(b"data: " + message + b"\n")
    assert splitter.take_whole() == [b"event: message\ndata: " + message + b"\n\n"]
    assert splitter.feed(b"\n") == []  # the one it lacked
    assert splitter.feed(b"data: hello") == [] and splitter.feed(b"\n") == []
    assert splitter.feed(b"\n") == [b"data: hello\n\n"]  # a later blank line in a chunk of its own counts


def test_the_pending_bound_counts_only_the_unfinished_events_bytes() -> None:
    splitter = SSESplitter(max_pending=16)
    assert splitter.feed(b"data: a\n\ndata: " + b"x" * 10) == [b"data: a\n\n"]
    assert not splitter.overflowed  # 16 bytes pending: the dispatched event is not counted
