"""What results taught about their tools' schemas, for every session of one upstream (pure: no I/O).

Rule ``learn_schema`` (:mod:`mcp_normalizer.engine.rules.learned`) learns a declaration from a result no
rule can repair (``drop_output_schema`` for a tool that never sends its ``structuredContent``,
``relax`` at a ``const``/``enum`` the upstream outgrew, ``nullable`` at a ``null`` where the schema
requires a string, number, integer or boolean). A :class:`LessonBook` keeps those lessons
for the whole upstream, keyed by the tool's name and a digest of its definition as the server
listed it (:func:`definition_digest`): a session opened later, another client, or (with a state
directory or Redis, :mod:`mcp_normalizer.ops.lesson_store`) a restarted proxy or another replica lists
the tool relaxed from its first ``tools/list``. A tool listed with another definition (another
schema, another description) is another key: nothing learned carries over, nor across upstreams
(one book per upstream).

A lesson reaches other tenants only once results seen from two witnesses taught it: a witness is a
request's credentials, each hashed (the ``Authorization`` header, each cookie of its ``Cookie``),
or its session where it carries no credential (in an era that has sessions: before 2026-07-28);
a request with neither is no witness. Two
witnesses that share a credential are one (:func:`same_witness`: a tenant that varies what the
upstream does not read is still one tenant). Until a second witness meets the
same fault at the same place, what the first saw stays *pending* (:meth:`LessonBook.witnessed`):
the scope that met it lists the tool relaxed (its own learned state), nobody else does. So a
result that merely echoes one client's own argument teaches nobody else. Each place (a ``relax``
place, a ``nullable`` one, and ``drop_output_schema``) is counted on its own; the pending evidence is bounded
(:data:`MAX_PENDING` entries, :data:`MAX_PENDING_BYTES`; the oldest goes first).

Only relaxations are learned, each keeping every value a result holds; what would turn a success
into an error stays opt-in (``last_resort``). Each lesson keeps the first result that taught it
(its JSON-RPC id, the time, the places): ``GET {admin_prefix}/lessons`` lists the places, never the
ids nor the times (the endpoint has no authentication: any local client could read them). The book is
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

__all__ = ["NULLABLE", "Evidence", "Lesson", "LessonBook", "definition_digest", "same_witness"]

#: Lessons one book holds at most (tools of one upstream that taught something).
MAX_LESSONS = 1000
#: Bytes of tool names, digests and places one book holds at most.
MAX_BYTES = 256 * 1024
#: Longest tool name a lesson is kept for.
MAX_NAME = 1024
#: Pending evidence entries one book keeps at most (a place of a tool seen from one witness).
MAX_PENDING = 4000
#: Bytes of tool names, digests, places and witnesses the pending evidence holds at most.
MAX_PENDING_BYTES = 256 * 1024
#: The item of a pending entry for ``drop_output_schema`` (a place is a pointer: it begins with ``/``).
DROP = "drop_output_schema"
#: What begins the item of a pending entry for a ``nullable`` place (the pointer follows it).
NULLABLE = "nullable:"
#: Most credentials one witness is made of (:meth:`mcp_normalizer.ops.lesson_store.LessonStore.witness`:
#: the ``Authorization`` header and each cookie); a request with more is no witness.
MAX_WITNESS_PARTS = 8
#: Longest witness kept: :data:`MAX_WITNESS_PARTS` digests of 16 hex digits, joined by ``.``.
MAX_WITNESS = MAX_WITNESS_PARTS * 17


def same_witness(first: str, second: str) -> bool:
    """True when two witnesses may be one tenant: they share a credential (a part of
    :meth:`~mcp_normalizer.ops.lesson_store.LessonStore.witness`). The proxy cannot know which
    credential the upstream reads, so a tenant that keeps its own and varies the rest (another
    cookie, an ``Authorization`` the upstream ignores) is still one witness."""
    return first == second or not set(first.split(".")).isdisjoint(second.split("."))


@dataclass(frozen=True, slots=True)
class Lesson:
    """One tool's learned declaration and the result that first taught it.

    Attributes:
        tool: the tool's name (upstream's).
        definition: :func:`definition_digest` of the tool as listed when it was learned.
        learned: the declaration (``drop_output_schema``, ``relax`` and ``nullable`` places).
        jsonrpc_id: the id of the first response that taught it, as JSON text.
        at: when, in Unix seconds.
        pointers: where that result failed (the places relaxed or made nullable, or ``/structuredContent``).
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

    def as_json(self, *, listed: bool = False) -> JSONObject:
        """The lesson as stored: ``{"tool", "definition", "drop_output_schema", "relax", "nullable",
        "first": {"id", "at", "pointers"}}`` (``at`` as Unix seconds); ``listed``: as the admin
        endpoint lists it, ``first`` holding only the ``pointers`` (which tools others called, and
        when, is not any local client's business)."""
        first: JSONObject = {"pointers": list(self.pointers)}
        if not listed:
            first = {"id": self.jsonrpc_id, "at": round(self.at, 3), **first}
        return {
            "tool": self.tool,
            "definition": self.definition,
            "drop_output_schema": self.learned.drop_output_schema,
            "relax": [place.text for place in self.learned.relax],
            "nullable": [place.text for place in self.learned.nullable],
            "first": first,
        }

    @classmethod
    def from_json(cls, value: JSON) -> Lesson | None:
        """A lesson from :meth:`as_json`'s shape; ``None`` for anything else (a store written by
        another version, or tampered with, is never trusted further than its shape; one written
        before ``nullable`` was learned has none)."""
        if not isinstance(value, dict):
            return None
        tool, definition, first = value.get("tool"), value.get("definition"), value.get("first")
        relax, drop = value.get("relax", []), value.get("drop_output_schema", False)
        nullable = value.get("nullable", [])
        if not isinstance(tool, str) or not isinstance(definition, str) or not isinstance(first, dict):
            return None
        if len(tool) > MAX_NAME or len(definition) != 32 or not isinstance(drop, bool) or not isinstance(relax, list):
            return None
        if not isinstance(nullable, list) or len(relax) + len(nullable) > MAX_PLACES:
            return None
        if not all(isinstance(p, str) and len(p) <= MAX_POINTER for p in (*relax, *nullable)):
            return None
        jsonrpc_id, at, pointers = first.get("id"), first.get("at"), first.get("pointers", [])
        if not isinstance(jsonrpc_id, str) or not isinstance(at, int | float) or not isinstance(pointers, list):
            return None
        try:
            places = tuple(PointerPattern.parse(p) for p in relax)
            nulls = tuple(PointerPattern.parse(p) for p in nullable)
        except ValueError:
            return None
        if not drop and not places and not nulls:
            return None
        kept = tuple(p for p in pointers if isinstance(p, str))[:MAX_PLACES]
        return cls(tool, definition, Learned(drop, places, nulls), jsonrpc_id[:128], float(at), kept)


@dataclass(frozen=True, slots=True)
class Evidence:
    """One place of a tool's definition that a result seen from one witness taught, pending until
    another witness's result teaches it too.

    Attributes:
        tool: the tool's name.
        definition: :func:`definition_digest` of the tool as listed.
        item: the place relaxed (a pointer), :data:`NULLABLE` and the place made nullable, or :data:`DROP`.
        witness: who saw it: keyed digests of each credential (the authorization, each cookie),
            or of the session without any, joined by ``.`` (:func:`same_witness`).
        jsonrpc_id: the id of the response that taught it, as JSON text.
        at: when, in Unix seconds.
    """

    tool: str
    definition: str
    item: str
    witness: str
    jsonrpc_id: str
    at: float

    @property
    def key(self) -> tuple[str, str, str]:
        """What two witnesses must both have seen: the tool, its definition and the item."""
        return (self.tool, self.definition, self.item)

    @property
    def size(self) -> int:
        """Bytes it holds in the pending bound."""
        return len(self.tool) + len(self.definition) + len(self.item) + len(self.witness) + len(self.jsonrpc_id)

    def as_json(self) -> JSONObject:
        """As stored: ``{"tool", "definition", "item", "witness", "id", "at"}``."""
        return {
            "tool": self.tool,
            "definition": self.definition,
            "item": self.item,
            "witness": self.witness,
            "id": self.jsonrpc_id,
            "at": round(self.at, 3),
        }

    @classmethod
    def from_json(cls, value: JSON) -> Evidence | None:
        """Evidence from :meth:`as_json`'s shape; ``None`` for anything else."""
        if not isinstance(value, dict):
            return None
        tool, definition, item = value.get("tool"), value.get("definition"), value.get("item")
        witness, jsonrpc_id, at = value.get("witness"), value.get("id"), value.get("at")
        if not isinstance(tool, str) or not isinstance(definition, str) or not isinstance(item, str):
            return None
        if not isinstance(witness, str) or not isinstance(jsonrpc_id, str) or not isinstance(at, int | float):
            return None
        if len(tool) > MAX_NAME or len(definition) != 32 or not witness or len(witness) > MAX_WITNESS:
            return None
        if item != DROP:
            place = item.removeprefix(NULLABLE)
            try:
                if not place.startswith("/") or len(place) > MAX_POINTER or PointerPattern.parse(place).text != place:
                    return None
            except ValueError:
                return None
        return cls(tool, definition, item, witness, jsonrpc_id[:128], float(at))


def _items(learned: Learned) -> list[str]:
    """What ``learned`` declares, item by item (:attr:`Evidence.item`)."""
    drop = [DROP] if learned.drop_output_schema else []
    return drop + [place.text for place in learned.relax] + [NULLABLE + place.text for place in learned.nullable]


def _declared(items: list[str]) -> Learned:
    """The declaration of ``items`` (the inverse of :func:`_items`)."""
    relax = tuple(PointerPattern.parse(item) for item in items if item.startswith("/"))[:MAX_PLACES]
    nulls = tuple(PointerPattern.parse(item.removeprefix(NULLABLE)) for item in items if item.startswith(NULLABLE))
    return Learned(DROP in items, relax, nulls[: MAX_PLACES - len(relax)])


class LessonBook:
    """The lessons of one upstream, by (tool name, definition digest).

    Args:
        enabled: ``False`` (rule ``learn_schema`` off): nothing is learned or applied.

    Attributes:
        generation: bumped at every change (part of a listed tool's cache key).
        dirty: lessons added or changed since the store last wrote them (the store clears it).
        dirty_evidence: pending evidence added since the store last wrote it (the store clears it).
    """

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.generation = 0
        self.dirty: dict[tuple[str, str], Lesson] = {}
        self._lessons: dict[tuple[str, str], Lesson] = {}
        self._names: set[str] = set()
        self._bytes = 0
        self.refused = 0  # lessons not kept: the book was full
        self.dirty_evidence: dict[tuple[str, str, str, str], Evidence] = {}
        self._pending: dict[tuple[str, str, str], Evidence] = {}  # the first witness of each, oldest first
        self._pending_bytes = 0

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

    def witnessed(self, lesson: Lesson, witness: str | None) -> bool:
        """What a result seen from ``witness`` taught (``lesson``): each of its items another
        witness saw before goes into the book (:meth:`add`, as the first witness's result taught
        it); the others wait, pending, for another witness. ``witness`` ``None`` (a request with
        neither credential nor session): it counts for nothing.

        Returns:
            True when the book changed.
        """
        if not self.enabled or witness is None or not lesson.definition or len(lesson.tool) > MAX_NAME:
            return False
        known = self.get(lesson.tool, lesson.definition)
        have = set(_items(known)) if known is not None else set()
        firsts: list[Evidence] = []
        for item in _items(lesson.learned):
            if item in have:
                continue
            seen = Evidence(lesson.tool, lesson.definition, item, witness, lesson.jsonrpc_id, lesson.at)
            first = self._seen(seen)
            if first is not None:
                firsts.append(first)
        return self._confirmed(firsts, stored=False)

    def adopt_evidence(self, entries: list[Evidence]) -> int:
        """Take pending evidence read from a store (not :attr:`dirty_evidence`): an entry whose
        item another witness saw here confirms it (the lesson is then :attr:`dirty`, to be
        written); how many lessons changed."""
        if not self.enabled:
            return 0
        changed = 0
        for entry in entries:
            known = self.get(entry.tool, entry.definition)
            if known is not None and entry.item in _items(known):
                continue
            first = self._seen(entry, stored=True)
            changed += first is not None and self._confirmed([first], stored=False)
        return changed

    def evidence(self) -> list[Evidence]:
        """The pending evidence, oldest first."""
        return list(self._pending.values())

    def _seen(self, seen: Evidence, *, stored: bool = False) -> Evidence | None:
        """Note ``seen``; the first witness's evidence when ``seen`` is another's (it is then
        pending no more), else ``None`` (it is kept, pending, if there is room: the oldest goes)."""
        first = self._pending.get(seen.key)
        if first is not None:
            if same_witness(first.witness, seen.witness):
                return None
            del self._pending[seen.key]
            self._pending_bytes -= first.size
            return first
        if seen.size > MAX_PENDING_BYTES:
            return None
        while self._pending and (
            len(self._pending) >= MAX_PENDING or self._pending_bytes + seen.size > MAX_PENDING_BYTES
        ):
            oldest = self._pending.pop(next(iter(self._pending)))
            self._pending_bytes -= oldest.size
        self._pending[seen.key] = seen
        self._pending_bytes += seen.size
        if not stored:
            self.dirty_evidence[(*seen.key, seen.witness)] = seen
        return None

    def _confirmed(self, firsts: list[Evidence], *, stored: bool) -> bool:
        """Add the lesson of the items ``firsts`` (one tool, one definition) confirmed."""
        if not firsts:
            return False
        head = firsts[0]
        items = [first.item for first in firsts]
        learned = _declared(items)
        lesson = Lesson(head.tool, head.definition, learned, head.jsonrpc_id, head.at, learned.places)
        return self.add(lesson, stored=stored)

    def as_json(self) -> bytes:
        """The book as the admin endpoint lists it (``{"lessons": [...]}``: places and names, no
        ids nor times, :meth:`Lesson.as_json`)."""
        return dumps({"lessons": [lesson.as_json(listed=True) for lesson in self._lessons.values()]})


def taught_now(tool: str, definition: str, learned: Learned, jsonrpc_id: JSON, pointers: tuple[str, ...]) -> Lesson:
    """The lesson a result with ``jsonrpc_id`` teaches now."""
    try:
        said = dumps(jsonrpc_id).decode()
    except DecodeError:
        said = "null"
    return Lesson(tool, definition, learned, said[:128], round(time.time(), 3), pointers[:MAX_PLACES])
