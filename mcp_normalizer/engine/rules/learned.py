"""Rule ``learn_schema``: what a tool's results show its ``outputSchema`` gets wrong, learned and announced.

Two faults of the corpus leave a success result no rule can make conform without changing it into
an error (``cases/faults.md``): a tool that never returns the ``structuredContent`` its schema
declares (``missing_structured_content``: Claude Code's ``Bash`` under ``claude mcp serve``) and a
value outside a ``const``/``enum`` the upstream outgrew (``enum_mismatch``: ``ASK_PERPLEXITY``).
Their lossless default is to fix the *schema*, not the value: after such a result the scope (one
session and authorization) learns the declaration an operator would write (``drop_output_schema``,
``relax`` at the failing places), the proxy sends ``notifications/tools/list_changed`` (on the
result's SSE stream, just before it), and every later ``tools/list`` of that scope advertises the
tool so that its results conform, the listed schema kept in the tool's ``_meta``. The result that
taught it passes unchanged: a strict client still rejects that one (``last_resort`` turns it into an
error, opt-in). A ``null`` where the schema wants a value is not learned (``nullable`` stays an
operator's choice for a required member), nor is a wrong type (a contract change, not an outgrown
constant). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...types import JSON
from ...wire.jsoncodec import Raw, dumps, loads
from ...wire.pointer import WILDCARD, PointerPattern, format_pointer, resolve
from ..schema import Violation
from .base import Mode, Rule

#: Places relaxed per tool at most (a result failing at more is left to the operator).
MAX_PLACES = 20
#: Longest place learned, in characters (a scope's learned state stays small whatever the server names).
MAX_POINTER = 256
#: Schema keywords whose members are names (``properties: {"const": ...}`` is a member, not a keyword).
_NAMING = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
#: Keywords under which relaxing a place would change what other branches accept.
_BRANCHES = frozenset({"oneOf", "not", "if", "then", "else", "contains", "patternProperties"})  # anyOf only widens
#: The notification announcing a changed tool list (``server/tools.mdx``, List Changed Notification).
LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'


@dataclass(frozen=True, slots=True)
class Learned:
    """Declarations learned for one tool of one scope (the shape of ``[tools."X"]`` in the config).

    Attributes:
        drop_output_schema: advertise the tool without its ``outputSchema``.
        relax: places advertised unconstrained (instance pointers, ``*`` for any array item and
            for a member the schema does not name).
    """

    drop_output_schema: bool = False
    relax: tuple[PointerPattern, ...] = ()

    def merged(self, other: Learned) -> Learned:
        """Both declarations together (places in first-learned order, no repeats)."""
        places = {place.text: place for place in (*self.relax, *other.relax)}
        return Learned(self.drop_output_schema or other.drop_output_schema, tuple(places.values())[:MAX_PLACES])


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
            taught = sorted((name, d.drop_output_schema, [p.text for p in d.relax]) for name, d in self.items())
            self._key = dumps(taught) if taught else b""
        return self._key

    def size_of(self, name: str) -> int:
        """The bytes learned for tool ``name``: its name and places (0 when nothing)."""
        found = self.get(name)
        return len(name) + sum(len(place.text) for place in found.relax) if found is not None else 0

    @property
    def size(self) -> int:
        """The bytes learned for every tool."""
        return sum(self.size_of(name) for name in self)


NOTHING_LEARNED = LearnedTools()


def from_missing() -> Learned:
    """What a success result without ``structuredContent`` (none could be supplied) teaches."""
    return Learned(drop_output_schema=True)


def from_violations(structured: JSON | Raw, violations: Sequence[Violation]) -> Learned | None:
    """What ``violations`` of ``structured`` teach: ``relax`` at each failing ``const``/``enum``
    (array indexes as ``*``), or ``None`` when any violation is of another kind or at a ``null``."""
    if not violations or len(violations) > MAX_PLACES:
        return None
    if isinstance(structured, Raw):
        structured = loads(structured)
    places: dict[str, PointerPattern] = {}
    for violation in violations:
        found, value = resolve(structured, violation.path)
        if violation.keyword not in ("const", "enum") or not found or value is None or not violation.path:
            return None
        if len(violation.schema_path) > 1 and violation.schema_path[-2] in _NAMING:
            return None  # a member named const or enum: not the keyword
        if any(step in _BRANCHES for step in violation.schema_path):
            return None  # relaxing the place would widen every branch: valid results could then fail
        if any(step == WILDCARD for step in violation.path):
            return None  # a member named *: the pattern would be every member
        text = format_pointer(tuple(WILDCARD if isinstance(step, int) else step for step in violation.path))
        if len(text) > MAX_POINTER:
            return None
        places[text] = PointerPattern.parse(text)
    return Learned(relax=tuple(places.values()))


RULE = Rule(
    "learn_schema",
    "unrepaired",  # the fault kind of check's finding: what no rule repairs (missing_structured_content, enum_mismatch)
    "After a result no rule could repair: drop_output_schema or relax learned for the scope, list_changed sent.",
    default=Mode.ON,
)
