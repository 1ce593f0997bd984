"""What results taught about their tools' schemas, for every session of one upstream (pure: no I/O).

Rule ``learn_schema`` (:mod:`mcp_normalizer.engine.rules.learned`) learns a declaration from a result no
rule can repair (``drop_output_schema`` for a tool that never sends its ``structuredContent``,
``relax`` at a ``const``/``enum`` the upstream outgrew). A :class:`LessonBook` keeps those lessons
for the whole upstream, keyed by the tool's name and a digest of its definition as the server
listed it (:func:`definition_digest`): a session opened later, another client, or (with a state
directory or Redis, :mod:`mcp_normalizer.ops.lesson_store`) a restarted proxy or another replica lists
the tool relaxed from its first ``tools/list``. A tool listed with another definition (another
schema, another description) is another key: nothing learned carries over, nor across upstreams
(one book per upstream).

Only relaxations are learned, each keeping every value a result holds; what would turn a success
into an error stays opt-in (``last_resort``). Each lesson keeps the first result that taught it
(its JSON-RPC id, the time, the places): ``GET {admin_prefix}/lessons`` lists them. The book is
bounded (:data:`MAX_LESSONS` lessons, :data:`MAX_BYTES` of names and places); past that nothing
more is learned (logged). One owner: the middleware makes the book, the normalizer reads it when it
lists tools, the transformer adds to it, the store persists what is :attr:`LessonBook.dirty`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import DecodeError
from ..types import JSON, JSONObject
from ..wire.jsoncodec import dumps
from ..wire.pointer import PointerPattern
from .catalog import definition_digest
from .rules.learned import MAX_PLACES, MAX_POINTER, Learned

__all__ = ["Lesson", "LessonBook", "definition_digest"]

#: Lessons one book holds at most (tools of one upstream that taught something).
MAX_LESSONS = 1000
#: Bytes of tool names, digests and places one book holds at most.
MAX_BYTES = 256 * 1024
#: Longest tool name a lesson is kept for.
MAX_NAME = 1024


@dataclass(frozen=True, slots=True)
class Lesson:
    """One tool's learned declaration and the result that first taught it.

    Attributes:
        tool: the tool's name (upstream's).
        definition: :func:`definition_digest` of the tool as listed when it was learned.
        learned: the declaration (``drop_output_schema``, ``relax`` places).
        jsonrpc_id: the id of the first response that taught it, as JSON text.
        at: when, in Unix seconds.
        pointers: where that result failed (the places relaxed, or ``/structuredContent``).
    """

    tool: str
    definition: str
    learned: Learned
    jsonrpc_id: str
    at: float
    pointers: tuple[str, ...]

    @property
    def size(self) -> int:
        """Bytes it holds in the book's bound."""
        return len(self.tool) + len(self.definition) + sum(len(p) for p in self.pointers)

    def as_json(self) -> JSONObject:
        """The lesson as stored and listed: ``{"tool", "definition", "drop_output_schema", "relax",
        "first": {"id", "at", "pointers"}}`` (``at`` as Unix seconds)."""
        return {
            "tool": self.tool,
            "definition": self.definition,
            "drop_output_schema": self.learned.drop_output_schema,
            "relax": [place.text for place in self.learned.relax],
            "first": {"id": self.jsonrpc_id, "at": round(self.at, 3), "pointers": list(self.pointers)},
        }

    @classmethod
    def from_json(cls, value: JSON) -> Lesson | None:
        """A lesson from :meth:`as_json`'s shape; ``None`` for anything else (a store written by
        another version, or tampered with, is never trusted further than its shape)."""
        if not isinstance(value, dict):
            return None
        tool, definition, first = value.get("tool"), value.get("definition"), value.get("first")
        relax, drop = value.get("relax", []), value.get("drop_output_schema", False)
        if not isinstance(tool, str) or not isinstance(definition, str) or not isinstance(first, dict):
            return None
        if len(tool) > MAX_NAME or len(definition) != 32 or not isinstance(drop, bool) or not isinstance(relax, list):
            return None
        if len(relax) > MAX_PLACES or not all(isinstance(p, str) and len(p) <= MAX_POINTER for p in relax):
            return None
        jsonrpc_id, at, pointers = first.get("id"), first.get("at"), first.get("pointers", [])
        if not isinstance(jsonrpc_id, str) or not isinstance(at, int | float) or not isinstance(pointers, list):
            return None
        try:
            places = tuple(PointerPattern.parse(p) for p in relax)
        except ValueError:
            return None
        if not drop and not places:
            return None
        kept = tuple(p for p in pointers if isinstance(p, str))[:MAX_PLACES]
        return cls(tool, definition, Learned(drop, places), jsonrpc_id[:128], float(at), kept)


class LessonBook:
    """The lessons of one upstream, by (tool name, definition digest).

    Args:
        enabled: ``False`` (rule ``learn_schema`` off): nothing is learned or applied.

    Attributes:
        generation: bumped at every change (part of a listed tool's cache key).
        dirty: lessons added or changed since the store last wrote them (the store clears it).
    """

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.generation = 0
        self.dirty: dict[tuple[str, str], Lesson] = {}
        self._lessons: dict[tuple[str, str], Lesson] = {}
        self._names: set[str] = set()
        self._bytes = 0
        self.refused = 0  # lessons not kept: the book was full

    def __len__(self) -> int:
        return len(self._lessons)

    def knows(self, tool: str) -> bool:
        """True when some definition of ``tool`` taught something (a set lookup: no digest needed)."""
        return tool in self._names

    def get(self, tool: str, definition: str) -> Learned | None:
        """What the tool, listed with this definition, taught; ``None`` when nothing."""
        found = self._lessons.get((tool, definition)) if definition else None
        return found.learned if found is not None else None

    def lessons(self) -> list[Lesson]:
        """Every lesson, first learned first."""
        return list(self._lessons.values())

    def add(self, lesson: Lesson, *, stored: bool = False) -> bool:
        """Keep ``lesson`` (merged with what its key taught before, the first result kept);
        ``stored``: it was read from a store, so it need not be written back (not :attr:`dirty`).

        Returns:
            True when the book changed; False when it knew it already, is off, or is full
            (:attr:`refused` counts those).
        """
        if not self.enabled or not lesson.definition or len(lesson.tool) > MAX_NAME:
            return False
        key = (lesson.tool, lesson.definition)
        before = self._lessons.get(key)
        if before is not None:
            merged = before.learned.merged(lesson.learned)
            if merged == before.learned:
                return False
            lesson = Lesson(before.tool, before.definition, merged, before.jsonrpc_id, before.at, before.pointers)
        grown = lesson.size - (before.size if before is not None else 0)
        if (before is None and len(self._lessons) >= MAX_LESSONS) or self._bytes + grown > MAX_BYTES:
            self.refused += 1
            return False
        self._lessons[key] = lesson
        self._names.add(lesson.tool)
        self._bytes += grown
        if not stored:
            self.dirty[key] = lesson
        self.generation += 1
        return True

    def adopt(self, lessons: list[Lesson]) -> int:
        """Take lessons read from a store (kept as they are: not :attr:`dirty`); how many were new."""
        return sum(self.add(lesson, stored=True) for lesson in lessons)

    def as_json(self) -> bytes:
        """The book as JSON bytes (``{"lessons": [...]}``), for the admin endpoint and the state directory."""
        return dumps({"lessons": [lesson.as_json() for lesson in self._lessons.values()]})


def taught_now(tool: str, definition: str, learned: Learned, jsonrpc_id: JSON, pointers: tuple[str, ...]) -> Lesson:
    """The lesson a result with ``jsonrpc_id`` teaches now."""
    try:
        said = dumps(jsonrpc_id).decode()
    except DecodeError:
        said = "null"
    return Lesson(tool, definition, learned, said[:128], round(time.time(), 3), pointers[:MAX_PLACES])
