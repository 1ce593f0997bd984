"""Server-sent events: a byte-exact incremental splitter, an event parser and a rewriter.

The proxy never decodes an event it does not rewrite. :class:`SSESplitter` cuts the raw byte stream
into event blocks (each block ends with the blank line that dispatches it, WHATWG HTML section 9.2.5
"Parsing an event stream"); every block is forwarded exactly as received, so ids, ``event:``,
``retry:``, comments and the stream's own line endings (CRLF, LF or CR) survive. Only blocks that
carry a response the proxy rewrites are parsed (:func:`parse_event`) and re-rendered
(:func:`replace_data`), keeping their non-data lines verbatim and in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

_LINE_END = re.compile(rb"[\r\n]")
_BOM = b"\xef\xbb\xbf"  # ignored once at the start of a stream (WHATWG HTML 9.2.5)
#: The largest unfinished event checked for a whole message (each check reads all of it).
EARLY_MAX_BYTES = 1024 * 1024
_RAW = msgspec.json.Decoder(msgspec.Raw)


class SSESplitter:
    """Incremental splitter of an SSE byte stream into raw event blocks.

    ``feed(chunk)`` returns the blocks completed by ``chunk``; ``flush()`` returns what is left at
    the end of the stream (an unterminated tail, or ``b""``). Concatenating every returned piece
    gives back the input bytes exactly, whatever the chunking (unless :meth:`take_whole` frames
    an event the stream left unfinished).

    A block is emitted as soon as its dispatching blank line has arrived. When that blank line ends
    with a CR at the end of a chunk, the block is emitted at once rather than waiting for a possible
    LF; an LF that then starts the next chunk completes the CRLF and is handed out as a block of
    its own (``b"\n"``), so the bytes stay identical and in order.

    Args:
        max_pending: bytes of an unfinished event to hold before giving up on splitting; above it,
            ``overflowed`` becomes true and the caller should pass the rest of the stream through.
    """

    __slots__ = (
        "_after_cr",
        "_checked",
        "_line_empty",
        "_lines_ended",
        "_owed",
        "_pending",
        "_pending_bytes",
        "max_pending",
        "overflowed",
    )

    def __init__(self, max_pending: int = 16 * 1024 * 1024) -> None:
        self._pending: list[bytes] = []  # the unfinished block's bytes from earlier chunks
        self._pending_bytes = 0
        self._line_empty = True  # no byte of the current line seen yet
        self._after_cr = False  # the last byte seen was a CR that ended a line
        self._owed = False  # an event went out before its blank line: drop that line if it comes
        self._checked = False  # the unfinished event's first data line is not a whole message
        self._lines_ended = False  # the last chunk fed completed a line
        self.max_pending = max_pending
        self.overflowed = False

    def take_whole(self, *, dispatch: bool = True) -> list[bytes]:
        """Events the unfinished block already holds whole (fault kind ``sse_framing``: servers
        that never write the blank line, or only when the stream closes, or none between events).

        From the start of the unfinished block, each completed ``data:`` line that is the first of
        its event and holds one whole JSON object or array naming ``jsonrpc`` ends an event: with
        ``dispatch``, it is handed out framed (``event: message`` first when the lines name no type,
        the lines as they came, the blank line it lacked in their line-end style) and removed; a
        blank line that then starts the next chunk is the one it lacked, and is dropped (with any
        data lines of whitespace before it: they add nothing to the JSON). Without ``dispatch`` the
        events are only returned (a report). A first data line that is not a whole message
        (pretty-printed JSON, text), or none in an event's first 4 KiB, leaves the event to its
        blank line, as before, and is read once: the cost stays linear. At most
        :data:`EARLY_MAX_BYTES` are read.

        Known limit: field lines that follow the data line (``id:``, ``event:``) and arrive after
        it was dispatched go out as a block of their own; the message is delivered, its event id
        is then the stream's next.
        """
        out: list[bytes] = []
        if not self._lines_ended:
            return out  # the last chunk completed no line: nothing new to look at
        self._lines_ended = False
        while self._pending and not self._checked and self._pending_bytes <= EARLY_MAX_BYTES:
            block = b"".join(self._pending)
            self._pending[:] = [block]
            found = _first_data_line(block)
            if found is True:
                return out  # no data line complete yet
            if found is False:
                self._checked = True
                return out
            end, value = found
            if not _whole_message(value):
                self._checked = True
                return out
            if not dispatch:
                self._checked = True
                return [block[:end]]
            event, rest = block[:end], block[end:]
            match = _LINE_END.search(event)
            assert match is not None  # the data line ended
            at = match.start()
            eol = b"\r\n" if event[at : at + 2] == b"\r\n" else event[at : at + 1]
            named = any(_field(line)[0] == b"event" for line in _lines(event.removeprefix(_BOM)) if line)
            bom = _BOM if event.startswith(_BOM) else b""  # a stream's BOM stays its first bytes
            out.append(bom + (b"" if named else b"event: message" + eol) + event[len(bom) :] + eol)
            if rest:
                match = _WHITESPACE_DATA.match(rest)
                spaces = match.end() if match else 0
                rest = _absorb(rest) if spaces else rest
                if spaces and not rest:
                    self._owed = True  # whitespace data lines only, so far: the blank line may follow
            else:
                self._owed = True
            self._pending[:] = [rest] if rest else []
            self._pending_bytes = len(rest)
        return out

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add ``chunk`` and return the event blocks it completes, in order, byte-identical.

        Linear: each byte is searched once (``bytes.find``, no regular expression), and the bytes
        of an unfinished event are kept as the chunks they came in, joined once when it completes.
        """
        if not chunk:
            return []
        if self._owed:
            self._owed = False
            chunk = _absorb(chunk)
            if not chunk:
                return []
        blocks: list[bytes] = []
        pending = self._pending
        line_empty, after_cr = self._line_empty, self._after_cr
        size = len(chunk)
        cut = pos = 0  # cut: where the block being assembled starts in this chunk
        next_lf, next_cr = chunk.find(b"\n"), chunk.find(b"\r")
        self._lines_ended = next_lf >= 0 or next_cr >= 0
        while pos < size:
            if 0 <= next_lf < pos:
                next_lf = chunk.find(b"\n", pos)
            if 0 <= next_cr < pos:
                next_cr = chunk.find(b"\r", pos)
            i = next_lf if next_cr < 0 or 0 <= next_lf < next_cr else next_cr
            if i < 0:
                line_empty = after_cr = False  # the rest of the chunk is inside a line
                break
            if i > pos:
                line_empty = after_cr = False
            if after_cr and i == pos and chunk[i] == 0x0A:
                # LF right after a CR line end: the second half of a CRLF terminator.
                if i == cut and not pending:  # it completes the blank line of a block already handed out
                    blocks.append(b"\n")
                    cut = i + 1
                after_cr = False
                pos = i + 1
                continue
            end = i + 1
            after_cr = chunk[i] == 0x0D
            if line_empty:
                # A blank line dispatches the block, terminator included (a lone blank line is a block too).
                if after_cr and end < size and chunk[end] == 0x0A:
                    end += 1
                    after_cr = False
                blocks.append(b"".join([*pending, chunk[cut:end]]) if pending else chunk[cut:end])
                pending.clear()
                self._pending_bytes = 0
                self._checked = False
                cut = end
            line_empty = True
            pos = end
        if cut < size:
            pending.append(chunk[cut:] if cut else chunk)
            self._pending_bytes += size - cut
        self._line_empty, self._after_cr = line_empty, after_cr
        if self._pending_bytes > self.max_pending:
            self.overflowed = True
        return blocks

    def flush(self) -> bytes:
        """Return the unterminated tail at the end of the stream and reset the splitter."""
        tail = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        self._line_empty, self._after_cr = True, False
        return tail


def _first_data_line(block: bytes) -> tuple[int, bytes] | bool:
    """Where the first complete ``data:`` line of ``block`` ends (its line end included) and its
    value; ``True`` when no data line is complete yet; ``False`` when none starts within the
    first :data:`_HEAD_MAX` bytes (an event is a few field lines before its data: a block of
    thousands of comment lines is not looked at again, so the cost stays linear)."""
    pos = 0
    for match in _LINE_END.finditer(block):
        at = match.start()
        if at < pos:
            continue  # the LF of a CRLF already taken
        end = at + 2 if block[at : at + 2] == b"\r\n" else at + 1
        line = block[pos:at]
        if pos == 0:
            line = line.removeprefix(_BOM)
        if line and not line.startswith(b":"):
            name, value = _field(line)
            if name == b"data":
                return end, value
        pos = end
        if pos > _HEAD_MAX:
            return False
    return pos <= _HEAD_MAX


_HEAD_MAX = 4096
#: Lines that may follow a data line dispatched early and still belong to its event without
#: changing its data: a data line of JSON whitespace only (JSON text may end with whitespace).
_WHITESPACE_DATA = re.compile(rb"(?:data:[ \t]*(?:\r\n|\r|\n))*")


def _absorb(chunk: bytes) -> bytes:
    """The start of the stream after an event dispatched early: its whitespace-only data lines
    and the blank line it lacked are dropped; anything else starts the next event."""
    match = _WHITESPACE_DATA.match(chunk)
    rest = chunk[match.end() :] if match else chunk
    for line_end in (b"\r\n", b"\n", b"\r"):
        if rest.startswith(line_end):
            return rest[len(line_end) :]
    return rest


def _whole_message(value: bytes) -> bool:
    """True when ``value`` is one complete JSON object or array that names ``jsonrpc``."""
    if value.lstrip()[:1] not in (b"{", b"[") or b'"jsonrpc"' not in value:
        return False
    try:
        _RAW.decode(value)
    except (msgspec.DecodeError, RecursionError):
        return False
    return True


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """The fields of one event block that the proxy needs.

    Attributes:
        event: the ``event:`` value, or ``"message"`` when absent (the SSE default type).
        data: the ``data:`` lines joined with ``\\n`` as bytes, or ``None`` when the block has no
            data line (a comment, a bare ``id:`` or ``retry:``).
        id: the ``id:`` value, if any.
    """

    event: str
    data: bytes | None
    id: bytes | None


def _lines(block: bytes) -> list[bytes]:
    """Split a block into lines without terminators (CRLF, LF and CR all end a line)."""
    return block.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")


def _field(line: bytes) -> tuple[bytes, bytes]:
    name, colon, value = line.partition(b":")
    if colon and value.startswith(b" "):
        value = value[1:]
    return name, value


def parse_event(block: bytes) -> SSEEvent:
    """Read the event type, data and id of one raw event block (WHATWG HTML section 9.2.6)."""
    event = b""
    data: list[bytes] = []
    event_id: bytes | None = None
    for line in _lines(block.removeprefix(_BOM)):
        if not line or line.startswith(b":"):
            continue
        name, value = _field(line)
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value
        elif name == b"id" and b"\0" not in value:
            event_id = value
    return SSEEvent(
        event=event.decode("utf-8", "replace") or "message",
        data=b"\n".join(data) if data else None,
        id=event_id,
    )


def replace_data(block: bytes, data: bytes) -> bytes:
    """Return ``block`` with its data replaced by ``data``.

    Every non-data line (``id:``, ``event:``, ``retry:``, comments) is kept verbatim and in place;
    the first ``data:`` line becomes the new data and later data lines are dropped. Data holding
    line breaks (JSON whitespace copied from a multi-line original) is written as one ``data:``
    line per line, which a client joins back with ``\n`` (WHATWG HTML 9.2.6). The block's own line
    terminator is reused, so a CRLF stream stays CRLF. A leading BOM stays in front.
    """
    if block.startswith(_BOM):
        return _BOM + replace_data(block[len(_BOM) :], data)
    match = _LINE_END.search(block)
    data_lines = [b"data: " + line for line in _lines(data)]
    if match is None:
        return b"\n".join(data_lines) + b"\n\n"
    i = match.start()
    eol = b"\r\n" if block[i : i + 2] == b"\r\n" else block[i : i + 1]
    out: list[bytes] = []
    placed = False
    for line in _lines(block):
        if line and _field(line)[0] == b"data":
            if not placed:
                out += data_lines
                placed = True
            continue
        out.append(line)
    # _lines() of a terminated block ends with two empty strings (the blank line and what follows it)
    while out and out[-1] == b"":
        out.pop()
    return eol.join(out) + eol + eol
