"""Newline-delimited framing, incrementally (the stdio transport's framing; sans-IO: bytes in, pieces out).

MCP ``basic/transports.mdx``, stdio: messages are delimited by newlines and MUST NOT contain embedded
newlines. :class:`LineDecoder` splits a byte stream into lines with ``feed``/``flush`` (as httpx's
incremental decoders do), bounded: a line longer than ``max_line`` is never held whole; it comes out
in pieces as they arrive (:data:`PART` pieces, then a :data:`LAST` one), so a caller can pass it on
untouched without buffering it without end (a long line that arrived whole in one chunk is one
:data:`LAST` piece).
"""

from __future__ import annotations

from typing import Literal

#: A whole line, without its newline (and without a ``\r`` before it).
LINE: Literal["line"] = "line"
#: A piece of a line longer than the bound (more follows).
PART: Literal["part"] = "part"
#: The last piece of a line longer than the bound (its newline is not included).
LAST: Literal["last"] = "last"

Kind = Literal["line", "part", "last"]
Piece = tuple[bytes, Kind]


class LineDecoder:
    """Split a byte stream into lines of at most ``max_line`` bytes; longer ones in pieces.

    Args:
        max_line: the longest line held whole, in bytes (at least 1).
    """

    __slots__ = ("_buffer", "_long", "max_line")

    def __init__(self, max_line: int) -> None:
        self.max_line = max(1, max_line)
        self._buffer = bytearray()
        self._long = False  # inside a line longer than max_line (its head went out as PART pieces)

    def feed(self, data: bytes) -> list[Piece]:
        """Take the next bytes; return the pieces they complete, in order."""
        out: list[Piece] = []
        buffer = self._buffer
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            buffer += data[start:end]
            out.append(self._end_line())
            start = end + 1
        buffer += data[start:]
        if len(buffer) > self.max_line:
            out.append((bytes(buffer), PART))
            buffer.clear()
            self._long = True
        return out

    def flush(self) -> list[Piece]:
        """The end of the stream: what is left of an unterminated last line, if anything."""
        if not self._buffer and not self._long:
            return []
        return [self._end_line()]

    def _end_line(self) -> Piece:
        buffer = self._buffer
        if buffer.endswith(b"\r"):
            del buffer[-1:]
        piece = bytes(buffer)
        buffer.clear()
        if self._long or len(piece) > self.max_line:  # (a whole one may come in one chunk)
            self._long = False
            return piece, LAST
        return piece, LINE
