"""JSON Schema validation of ``structuredContent``, compiled once per schema and never networked.

A schema is compiled by :class:`SchemaCompiler` the first time a tool list carries it and reused for
every result (the MCP Python SDK measures compiling at ~60x the cost of validating). The dialect is
taken from ``$schema`` and defaults to 2020-12 (MCP 2025-11-25 ``basic/index.mdx`` "JSON Schema
Usage"). ``$ref`` resolves only inside the schema: the registry is empty, so a remote reference is
never fetched (MCP 2026-07-28 ``basic/index.mdx`` "$ref Resolution") and makes the schema unusable.
``format`` is an annotation, as in the SDK clients.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import referencing
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.exceptions import _RefResolutionError as RefResolutionError
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from .errors import DecodeError
from .jsoncodec import fingerprint
from .pointer import Path, format_pointer
from .types import JSON

logger = logging.getLogger("mcp_normalizer.schema")

_EMPTY_REGISTRY: Any = referencing.Registry()


@dataclass(frozen=True, slots=True)
class Violation:
    """One reason an instance fails a schema.

    Attributes:
        path: where in the instance (member names and indexes, outermost first).
        keyword: the failing keyword, for example ``type`` or ``required``.
        schema_path: where in the schema the keyword sits.
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
    """The schema cannot be used to validate (invalid for its dialect, or an unresolvable ``$ref``)."""


class CompiledSchema:
    """A reusable validator for one schema.

    Raises:
        SchemaUnusable: from :meth:`is_valid` and :meth:`violations`, when validation meets a
            ``$ref`` that does not resolve locally or the instance is nested too deeply.
    """

    __slots__ = ("_validator", "schema")

    def __init__(self, schema: JSON, validator: Any) -> None:
        self.schema = schema
        self._validator = validator

    def is_valid(self, instance: JSON) -> bool:
        """True when ``instance`` conforms."""
        try:
            return bool(self._validator.is_valid(instance))
        except (RefResolutionError, Unresolvable, RecursionError) as exc:
            raise SchemaUnusable(str(exc)) from None

    def violations(self, instance: JSON, limit: int = 50) -> list[Violation]:
        """Up to ``limit`` violations, most relevant first; ``[]`` when ``instance`` conforms."""
        found: list[Violation] = []
        try:
            for error in self._validator.iter_errors(instance):
                found.extend(_leaves(error))
                if len(found) >= limit:
                    break
        except (RefResolutionError, Unresolvable, RecursionError) as exc:
            raise SchemaUnusable(str(exc)) from None
        return found[:limit]


def _leaves(error: ValidationError) -> list[Violation]:
    """Flatten ``anyOf``/``oneOf`` errors to their deepest causes, so repairs can see them."""
    if error.context:
        deepest: list[Violation] = []
        for sub in error.context:
            deepest.extend(_leaves(sub))
        if deepest:
            return [*deepest, _violation(error)]
    return [_violation(error)]


def _violation(error: ValidationError) -> Violation:
    return Violation(
        path=tuple(error.absolute_path),
        keyword=str(error.validator),
        schema_path=tuple(error.absolute_schema_path),
    )


class SchemaCompiler:
    """Compiles schemas into :class:`CompiledSchema` objects and caches them by content.

    Args:
        max_entries: how many distinct schemas to keep compiled (least recently used go first).
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._cache: OrderedDict[bytes, CompiledSchema | SchemaUnusable] = OrderedDict()
        self._max = max_entries

    def compile(self, schema: JSON) -> CompiledSchema:
        """Return the compiled validator for ``schema``.

        Raises:
            SchemaUnusable: the schema is not valid for its dialect (cached too).
        """
        try:
            key = fingerprint(schema)
        except DecodeError:
            raise SchemaUnusable("schema cannot be encoded (too deeply nested?)") from None
        hit = self._cache.get(key)
        if hit is None:
            hit = self._build(schema)
            self._cache[key] = hit
            if len(self._cache) > self._max:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        if isinstance(hit, SchemaUnusable):
            raise hit
        return hit

    @staticmethod
    def _build(schema: JSON) -> CompiledSchema | SchemaUnusable:
        if not isinstance(schema, dict | bool):
            return SchemaUnusable(f"a schema must be an object or a boolean, not {type(schema).__name__}")
        try:
            cls = validator_for(schema, default=Draft202012Validator)
            cls.check_schema(schema)
            return CompiledSchema(schema, cls(schema, registry=_EMPTY_REGISTRY))
        except SchemaError as exc:
            return SchemaUnusable(
                f"invalid schema at {format_pointer(tuple(exc.absolute_path)) or '/'}: {exc.validator}"
            )
        except (RecursionError, ValueError, TypeError) as exc:
            return SchemaUnusable(f"invalid schema: {type(exc).__name__}")
