"""JSON Schema validation of ``structuredContent``: compiled once per schema, bounded, never networked.

A schema is compiled by :class:`SchemaCompiler` the first time a call needs it and reused for every
result. The dialect is taken from ``$schema`` and defaults to 2020-12 (MCP 2025-11-25
``basic/index.mdx`` "JSON Schema Usage"); ``format`` is an annotation, as in the SDK clients.

Two engines sit behind :class:`CompiledSchema`:

- **jsonschema-rs** (Rust), the default: validating a 1 MiB result takes about a millisecond on the
  event loop, and its hostile cases are bounded (regular expressions run with a backtracking
  limit; ``uniqueItems`` hashes instead of comparing every pair). It runs ``offline``: a ``$ref``
  that does not resolve inside the schema is never retrieved (MCP 2026-07-28 ``basic/index.mdx``
  "$ref Resolution") and makes the schema unusable.
- **jsonschema** (Python), the fallback for an instance the Rust engine refuses and the engine of a
  schema with a fractional ``multipleOf`` (where the clients' floating-point division and the Rust
  engine's exact check disagree), with an empty referencing registry (no retrieval either) and an
  instance-size bound (``max_python_bytes``): it is two to three orders of magnitude slower and
  backtracks.

Instances are plain JSON values as :func:`mcp_normalizer.wire.jsoncodec.loads` returns them (ints of any size,
finite floats): both engines then give the same verdict, and :meth:`CompiledSchema.is_valid` is
exactly ``not violations(...)`` (the properties in ``tests/test_properties.py`` hold them to it).
An instance may also be given undecoded (a :data:`~mcp_normalizer.wire.jsoncodec.Raw`): it is then first checked
as text by the schema's typed check (:mod:`mcp_normalizer.engine.typed`: a 1 MiB result in a third of the time,
no Python objects built) and decoded only when that cannot say yes.

Either engine's failure (an unusable schema, a schema or instance nested too deep, a pattern over
its backtracking limit) raises :class:`SchemaUnusable`: the rules then leave the result alone and
the proxy passes it through.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
import referencing
from cachetools import LRUCache
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.exceptions import _RefResolutionError as RefResolutionError
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from ..errors import DecodeError
from ..types import JSON
from ..wire.jsoncodec import Raw, dumps, fingerprint, loads
from ..wire.pointer import Path, format_pointer
from .typed import TypedCheck, compile_typed

logger = logging.getLogger(__name__)

_EMPTY_REGISTRY: Any = referencing.Registry()
_NOT_YET = object()  # a typed check not compiled yet
#: Nesting beyond which a schema is not compiled (the Python fallback recurses).
MAX_SCHEMA_DEPTH = 128


@dataclass(frozen=True, slots=True)
class Violation:
    """One reason an instance fails a schema.

    Attributes:
        path: where in the instance (member names and indexes, outermost first).
        keyword: the failing keyword, for example ``type`` or ``required``.
        schema_path: where in the schema the keyword sits (absolute, through ``$ref``).
    """

    path: Path
    keyword: str
    schema_path: Path

    @property
    def pointer(self) -> str:
        """The instance location as an RFC 6901 pointer."""
        return format_pointer(self.path)

    def describe(self) -> str:
        """``<pointer>: <keyword>`` (no instance values: they may be secrets)."""
        return f"{self.pointer or '/'}: {self.keyword}"


class SchemaUnusable(Exception):
    """The schema cannot be used to validate this (invalid, unresolvable ``$ref``, too deep, over a limit)."""


class CompiledSchema:
    """A reusable validator for one schema.

    Args:
        schema: the schema.
        fast: the jsonschema-rs validator; ``None`` to use the Python engine only.
        max_python_bytes: largest instance (encoded) the Python fallback validates.

    Raises:
        SchemaUnusable: from :meth:`is_valid` and :meth:`violations` when the instance cannot be
            validated within the bounds.
    """

    __slots__ = ("_fast", "_max_python", "_slow", "_typed", "schema")

    def __init__(self, schema: JSON, fast: Any, max_python_bytes: int = 256 * 1024) -> None:
        self.schema = schema
        self._fast = fast
        self._slow: Any = None
        self._typed: TypedCheck | None | object = _NOT_YET  # None: the schema is outside the subset
        self._max_python = max_python_bytes

    def accepts_text(self, text: Raw | bytes) -> bool:
        """True when the JSON ``text`` certainly conforms, known without building its values;
        False when that is not known (decode it and ask :meth:`is_valid`)."""
        global _LAST
        last = _LAST
        if last is not None and last[0] is self and last[1] is text:
            return last[2]
        if self._typed is _NOT_YET:
            self._typed = compile_typed(self.schema)  # on first use: most schemas never see a large result
        verdict = isinstance(self._typed, TypedCheck) and self._typed.accepts(text)
        _LAST = (self, text, verdict)
        return verdict

    def is_valid(self, instance: JSON | Raw) -> bool:
        """True when ``instance`` (plain values, as :func:`mcp_normalizer.wire.jsoncodec.loads` gives, or its
        undecoded text) conforms.

        The same verdict as :meth:`violations` returning ``[]``, and as python-jsonschema on the
        same values (both are tested against each other on generated data).
        """
        if isinstance(instance, Raw):
            return self.accepts_text(instance) or self.is_valid(_decoded(instance))
        if self._fast is not None:
            try:
                return bool(self._fast.is_valid(instance))
            except (ValueError, TypeError, OverflowError):
                pass  # a value the Rust engine cannot take: the Python engine judges it
        return not self._python_violations(instance, 1)

    def violations(self, instance: JSON | Raw, limit: int = 50) -> list[Violation]:
        """Up to ``limit`` violations, deepest causes first; ``[]`` when ``instance`` conforms."""
        if isinstance(instance, Raw):
            return [] if self.accepts_text(instance) else self.violations(_decoded(instance), limit)
        if self._fast is not None:
            found: list[Violation] = []
            try:
                for error in self._fast.iter_errors(instance):
                    found.extend(_rs_leaves(error))
                    if len(found) >= limit:
                        break
            except (ValueError, TypeError, OverflowError):
                pass
            else:
                return found[:limit]
        return self._python_violations(instance, limit)

    def _python_violations(self, instance: JSON, limit: int) -> list[Violation]:
        try:
            size = len(dumps(instance))
        except DecodeError:
            raise SchemaUnusable("instance cannot be encoded") from None
        if size > self._max_python:
            raise SchemaUnusable(f"instance of {size} bytes is over the fallback engine's bound")
        if self._slow is None:
            cls = validator_for(self.schema, default=Draft202012Validator)
            self._slow = cls(self.schema, registry=_EMPTY_REGISTRY)
        found: list[Violation] = []
        try:
            for error in self._slow.iter_errors(instance):
                found.extend(_py_leaves(error))
                if len(found) >= limit:
                    break
        except (RefResolutionError, Unresolvable, RecursionError) as exc:
            raise SchemaUnusable(str(exc)) from None
        return found[:limit]


#: The last text checked (schema, text, verdict): each rule that asks about the same undecoded
#: result gets the answer without a second pass; one slot, so at most one text is held.
_LAST: tuple[CompiledSchema, Raw | bytes, bool] | None = None


def _decoded(text: Raw) -> JSON:
    try:
        return loads(text)
    except DecodeError:
        raise SchemaUnusable("the instance is not JSON the proxy reads") from None


def _rs_leaves(error: Any) -> list[Violation]:
    """A jsonschema-rs error as violations: ``anyOf``/``oneOf`` branch causes first, so repairs see them."""
    kind = error.kind
    if type(kind).__name__ == "BacktrackLimitExceeded" or type(kind).__name__ == "RegexEngineFailure":
        raise SchemaUnusable("a pattern ran over its backtracking limit")
    deepest: list[Violation] = []
    for branch in getattr(kind, "context", None) or []:
        for sub in branch:
            deepest.extend(_rs_leaves(sub))
    schema_path = tuple(error.schema_path)
    keyword = str(schema_path[-1]) if schema_path else type(kind).__name__
    return [*deepest, Violation(tuple(error.instance_path), keyword, schema_path)]


def _py_leaves(error: ValidationError) -> list[Violation]:
    """Flatten ``anyOf``/``oneOf`` errors to their deepest causes, so repairs can see them."""
    deepest: list[Violation] = []
    for sub in error.context or []:
        deepest.extend(_py_leaves(sub))
    here = Violation(tuple(error.absolute_path), str(error.validator), tuple(error.absolute_schema_path))
    return [*deepest, here]


def _survey(node: JSON, limit: int) -> tuple[int, bool]:
    """How deep ``node`` nests (counting at most to ``limit``) and whether it has a fractional
    ``multipleOf`` (iterative: no recursion to exhaust)."""
    deepest, fractional, stack = 0, False, [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > limit:
            return depth, fractional
        if isinstance(current, dict):
            factor = current.get("multipleOf")
            fractional = fractional or (isinstance(factor, float) and not factor.is_integer())
        children = current.values() if isinstance(current, dict) else current if isinstance(current, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest, fractional


class SchemaCompiler:
    """Compiles schemas into :class:`CompiledSchema` objects and caches them by content.

    Args:
        max_entries: how many distinct schemas to keep compiled (least recently used go first).
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._cache: LRUCache[bytes, CompiledSchema | SchemaUnusable] = LRUCache(max_entries)

    def compile(self, schema: JSON) -> CompiledSchema:
        """Return the compiled validator for ``schema``.

        Raises:
            SchemaUnusable: the schema is not valid for its dialect, has a ``$ref`` that does not
                resolve inside it, or nests deeper than :data:`MAX_SCHEMA_DEPTH` (cached too).
        """
        try:
            key = fingerprint(schema)
        except DecodeError:
            raise SchemaUnusable("schema cannot be encoded (too deeply nested?)") from None
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._build(schema)
        if isinstance(hit, SchemaUnusable):
            raise hit
        return hit

    @staticmethod
    def _build(schema: JSON) -> CompiledSchema | SchemaUnusable:
        if not isinstance(schema, dict | bool):
            return SchemaUnusable(f"a schema must be an object or a boolean, not {type(schema).__name__}")
        depth, fractional = _survey(schema, MAX_SCHEMA_DEPTH)
        if depth > MAX_SCHEMA_DEPTH:
            return SchemaUnusable(f"schema nests deeper than {MAX_SCHEMA_DEPTH}")
        try:
            fast = jsonschema_rs.validator_for(schema, offline=True)
        except jsonschema_rs.ValidationError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return SchemaUnusable(f"invalid schema: {first[:200]}")
        except (ValueError, TypeError, OverflowError) as exc:
            return SchemaUnusable(f"invalid schema: {type(exc).__name__}")
        # jsonschema-rs checks a fractional multipleOf exactly (19.99 is a multiple of 0.01); the
        # clients' validators (Ajv, python-jsonschema) divide in binary floating point and do not.
        # The proxy must agree with the clients, so such schemas use the Python engine only.
        return CompiledSchema(schema, None if fractional else fast)
