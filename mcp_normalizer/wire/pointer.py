"""JSON pointers (RFC 6901) and pointer patterns with a ``*`` wildcard segment.

A pattern such as ``/runtimes/*/scope`` names every ``scope`` member of every item of the
``runtimes`` array. ``*`` matches any one array index or object member name; there is no way to
name a member literally called ``*`` (none has been needed).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

#: A location inside a JSON value: member names and array indexes, outermost first.
Path = tuple[str | int, ...]

WILDCARD = "*"


def _escape(segment: str | int) -> str:
    return str(segment).replace("~", "~0").replace("/", "~1")


def _unescape(segment: str) -> str:
    return segment.replace("~1", "/").replace("~0", "~")


def format_pointer(path: Sequence[str | int]) -> str:
    """Return the RFC 6901 pointer of ``path`` (``""`` for the whole document)."""
    return "".join("/" + _escape(segment) for segment in path)


class PointerPattern(msgspec.Struct, frozen=True, gc=False):
    """A JSON pointer whose segments may be ``*``.

    Attributes:
        text: the pattern as written, for example ``/runtimes/*/scope``.
        segments: the unescaped segments, outermost first.
    """

    text: str
    segments: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> PointerPattern:
        """Parse a pattern.

        Raises:
            ValueError: ``text`` is not ``""`` and does not start with ``/``, or has a ``~`` not
                followed by ``0`` or ``1`` (RFC 6901 section 3).
        """
        if text == "":
            return cls(text, ())
        if not text.startswith("/"):
            raise ValueError(f"JSON pointer {text!r} must start with '/'")
        raw = text[1:].split("/")
        for segment in raw:
            stripped = segment.replace("~0", "").replace("~1", "")
            if "~" in stripped:
                raise ValueError(f"JSON pointer {text!r} has an invalid '~' escape")
        return cls(text, tuple(_unescape(segment) for segment in raw))

    def _prefix_matches(self, path: Sequence[str | int]) -> bool:
        return all(seg == WILDCARD or seg == str(step) for seg, step in zip(self.segments, path, strict=False))

    def nearest_match(self, path: Sequence[str | int]) -> Path | None:
        """The prefix of ``path`` that this pattern names, if ``path`` is at or below such a place."""
        if len(path) < len(self.segments) or not self._prefix_matches(path):
            return None
        return tuple(path[: len(self.segments)])


def resolve(document: object, path: Sequence[str | int]) -> tuple[bool, object]:
    """Follow ``path`` into ``document``; return ``(found, value)``."""
    node = document
    for step in path:
        if isinstance(node, dict) and isinstance(step, str) and step in node:
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        else:
            return False, None
    return True, node
