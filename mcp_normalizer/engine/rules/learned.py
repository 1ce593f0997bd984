"""Rule ``learn_schema``: what a tool's results show its ``outputSchema`` gets wrong, learned and announced.

Three faults of the corpus leave a success result no rule can make conform without changing it into
an error or losing a value (``cases/faults.md``): a tool that never returns the ``structuredContent``
its schema declares (``missing_structured_content``: Claude Code's ``Bash`` under ``claude mcp
serve``), a value outside a ``const``/``enum`` the upstream outgrew (``enum_mismatch``:
``ASK_PERPLEXITY``), and a ``null`` where the schema requires a string, number, integer or boolean
(``null_for_non_nullable`` in a required member: Protean's ``runtimes[].scope`` on its old shape, a
non-finite float the Python SDK serializes as ``null``, python-sdk#3341; a legacy field left unset).
Their lossless default is to fix the *schema*, not the value: after such a result the scope (one
session and authorization) learns the declaration an operator would write (``drop_output_schema``,
``relax`` at the failing places, ``nullable`` at the ``null`` ones), the proxy sends
``notifications/tools/list_changed`` (on the result's SSE stream, just before it), and every later
``tools/list`` of that scope advertises the tool so that its results conform (``relax``: the listed
schema kept in the tool's ``_meta``; ``nullable``: the place's schema kept, ``null`` added to its
``type``/``enum``, as a declared ``nullable`` place is). The result that taught it passes unchanged:
a strict client still rejects that one (``last_resort`` turns it into an error, opt-in). A
``null`` the other rules repair losslessly (an optional member, dropped by ``null_optional_member``;
a required array, ``[]`` by ``null_array_to_empty``) teaches nothing, nor does a ``null`` where the
schema wants an object or array, or names no type (an ``enum`` alone), nor a wrong type (a
contract change, not an outgrown constant). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...types import JSON
from ...wire.jsoncodec import Raw, dumps, loads
from ...wire.pointer import WILDCARD, PointerPattern, format_pointer, resolve
from ..schema import Violation
from .base import Mode, Rule
from .schemas import schema_at

#: Places relaxed per tool at most (a result failing at more is left to the operator).
MAX_PLACES = 20
#: Longest place learned, in characters (a scope's learned state stays small whatever the server names).
MAX_POINTER = 256
#: Schema keywords whose members are names (``properties: {"const": ...}`` is a member, not a keyword).
_NAMING = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
#: Keywords under which relaxing a place would change what other branches accept.
_BRANCHES = frozenset({"oneOf", "not", "if", "then", "else", "contains", "patternProperties"})  # anyOf only widens
#: The types whose ``null`` teaches ``nullable`` (a ``null`` for an object or array is another fault).
SCALAR_TYPES = frozenset({"string", "number", "integer", "boolean"})
#: The notification announcing a changed tool list (``server/tools.mdx``, List Changed Notification).
LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'


@dataclass(frozen=True, slots=True)
class Learned:
    """Declarations learned for one tool of one scope (the shape of ``[tools."X"]`` in the config).

    Attributes:
        drop_output_schema: advertise the tool without its ``outputSchema``.
        relax: places advertised unconstrained (instance pointers, ``*`` for any array item and
            for a member the schema does not name).
        nullable: places advertised accepting ``null`` besides what their schema says (the same
            pointer patterns). ``relax`` and ``nullable`` hold :data:`MAX_PLACES` places together.
    """

    drop_output_schema: bool = False
    relax: tuple[PointerPattern, ...] = ()
    nullable: tuple[PointerPattern, ...] = ()

    def merged(self, other: Learned) -> Learned:
        """Both declarations together (places in first-learned order, no repeats; ``relax`` first
        within :data:`MAX_PLACES`)."""
        relax = tuple({place.text: place for place in (*self.relax, *other.relax)}.values())[:MAX_PLACES]
        nullable = tuple({place.text: place for place in (*self.nullable, *other.nullable)}.values())
        drop = self.drop_output_schema or other.drop_output_schema
        return Learned(drop, relax, nullable[: MAX_PLACES - len(relax)])

    @property
    def places(self) -> tuple[str, ...]:
        """Where the results failed, as pointers: ``/structuredContent`` for ``drop_output_schema``,
        else the ``relax`` places, then the ``nullable`` ones."""
        if self.drop_output_schema:
            return ("/structuredContent",)
        return tuple(place.text for place in (*self.relax, *self.nullable))

    def describe(self) -> str:
        """The declaration in words for the log: ``drop_output_schema``, ``relax /a``,
        ``nullable /b/*/c``, or ``relax /a; nullable /b`` (``drop_output_schema`` alone when set)."""
        if self.drop_output_schema:
            return "drop_output_schema"
        parts = [f"{key} " + ", ".join(p.text for p in places) for key, places in self._lists() if places]
        return "; ".join(parts)

    def _lists(self) -> tuple[tuple[str, tuple[PointerPattern, ...]], ...]:
        return (("relax", self.relax), ("nullable", self.nullable))


class LearnedTools(dict[str, Learned]):
    """What one scope learned, by tool name, with its :attr:`key` (part of a listed tool's cache
    key: made once per change, not once per listed tool) and its :attr:`size` in bytes."""

    def __init__(self) -> None:
        super().__init__()
        self._key: bytes | None = None

    def __setitem__(self, name: str, learned: Learned) -> None:
        super().__setitem__(name, learned)
        self._key = None

    @property
    def key(self) -> bytes:
        """The declarations as JSON bytes, sorted by tool (``b""`` when nothing was learned)."""
        if self._key is None:
            taught = sorted(
                (name, d.drop_output_schema, [p.text for p in d.relax], [p.text for p in d.nullable])
                for name, d in self.items()
            )
            self._key = dumps(taught) if taught else b""
        return self._key

    def size_of(self, name: str) -> int:
        """The bytes learned for tool ``name``: its name and places (0 when nothing)."""
        found = self.get(name)
        return len(name) + learned_size(found) if found is not None else 0

    @property
    def size(self) -> int:
        """The bytes learned for every tool."""
        return sum(self.size_of(name) for name in self)


NOTHING_LEARNED = LearnedTools()


def learned_size(learned: Learned) -> int:
    """The bytes of ``learned``'s places (what a scope's bound counts besides the tool's name)."""
    return sum(len(place.text) for place in (*learned.relax, *learned.nullable))


def from_missing() -> Learned:
    """What a success result without ``structuredContent`` (none could be supplied) teaches."""
    return Learned(drop_output_schema=True)


def from_violations(structured: JSON | Raw, violations: Sequence[Violation], schema: JSON = None) -> Learned | None:
    """What ``violations`` of ``structured`` teach: ``relax`` at each failing ``const``/``enum``,
    ``nullable`` at each ``null`` whose schema's ``type`` names only string, number, integer or
    boolean types (``schema``: the ``outputSchema`` the violations' schema paths are in; without
    it a ``null`` teaches nothing), array indexes as ``*``; ``None`` when any violation is of
    another kind (a ``null`` for an object, an array, or at a place naming no type among them)."""
    if not violations or len(violations) > MAX_PLACES:
        return None
    if isinstance(structured, Raw):
        structured = loads(structured)
    relax: dict[str, PointerPattern] = {}
    nullable: dict[str, PointerPattern] = {}
    typed_nulls = {
        violation.path
        for violation in violations
        if violation.keyword == "type" and schema is not None and _scalar(schema_at(schema, violation.schema_path))
    }
    for violation in violations:
        found, value = resolve(structured, violation.path)
        if not found or not violation.path:
            return None
        if value is None:
            # a null: nullable where a type names only scalars (an enum or const beside it widens too)
            if violation.path not in typed_nulls or violation.keyword not in ("type", "enum", "const"):
                return None
            target = nullable
        elif violation.keyword in ("const", "enum"):
            target = relax
        else:
            return None
        if len(violation.schema_path) > 1 and violation.schema_path[-2] in _NAMING:
            return None  # a member named const, enum or type: not the keyword
        if any(step in _BRANCHES for step in violation.schema_path):
            return None  # widening the place would widen every branch: valid results could then fail
        if any(step == WILDCARD for step in violation.path):
            return None  # a member named *: the pattern would be every member
        text = format_pointer(tuple(WILDCARD if isinstance(step, int) else step for step in violation.path))
        if len(text) > MAX_POINTER:
            return None
        target[text] = PointerPattern.parse(text)
    return Learned(relax=tuple(relax.values()), nullable=tuple(nullable.values()))


def _scalar(kind: JSON) -> bool:
    """Whether a ``type`` keyword's value names only :data:`SCALAR_TYPES` (and so rejects ``null``)."""
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    return bool(kinds) and all(isinstance(k, str) and k in SCALAR_TYPES for k in kinds)


RULE = Rule(
    "learn_schema",
    "unrepaired",  # check's finding: what no rule repairs (missing_structured_content, enum_mismatch, a null)
    "After a result no rule could repair: drop_output_schema, relax or nullable learned for the scope, "
    "list_changed sent.",
    default=Mode.ON,
)
