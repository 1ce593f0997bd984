"""A fast, sound "this text conforms": a subset of JSON Schema compiled to msgspec types.

Validating a 1 MiB ``structuredContent`` the usual way means building its Python objects (about
11 ms for 12,000 rows), validating them (2 ms) and freeing them (3 ms). msgspec checks types,
bounds, lengths, enums, required and unknown members while it decodes, into objects that the
garbage collector does not track (``gc=False``), in about a third of that. :func:`compile_typed`
translates the schemas it can into such a decoder, and :meth:`TypedCheck.accepts` answers
``True`` only for texts the schema accepts. ``False`` means "not known": the caller decodes and
validates as usual (an integer written ``1.0``, a lone surrogate, a member given twice, a value the
subset cannot express all land there). The verdicts are held to python-jsonschema's by a property
test on generated schemas and field data (``tests/test_numbers.py``).

The subset, per subschema (anything else, ``$ref`` and ``pattern`` included, makes the whole
schema untranslatable): ``type`` (one type, or one type and ``"null"``), ``enum``/``const`` of
strings and ``null``, ``properties``/``required``/``additionalProperties`` (``true``, ``false`` or
absent), ``items``, ``minItems``/``maxItems``, ``minLength``/``maxLength``, ``minimum``,
``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum`` (numbers whose size is below 2**53), and
the annotations (``title``, ``description``, ``format``...: ``format`` asserts nothing here, as in
the clients). Dialects: 2020-12, 2019-09, draft-07 and draft-06 (draft-04's boolean exclusive
bounds are not translated).
"""

from __future__ import annotations

import codecs
import itertools
import math
from typing import Annotated, Any, Literal, Optional, Union

import msgspec

from ..types import JSON

#: Keywords that assert nothing (annotations and identifiers; no ``$ref`` is ever translated).
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
        "contentMediaType",
        "contentEncoding",
        "$id",
        "$anchor",
    }
)
_DIALECTS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema",
    }
)
_KEYWORDS = {
    "string": {"minLength", "maxLength"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
    "boolean": set(),
    "null": set(),
    "array": {"items", "minItems", "maxItems"},
    "object": {"properties", "required", "additionalProperties"},
}
_MAX_DEPTH = 32
#: Subschemas translated at most per schema: each object one class (a huge schema is validated
#: the usual way rather than turned into thousands of classes).
_MAX_NODES = 1000
_EXACT = 2**53  # bounds below this size compare the same as doubles and as integers
_NAMES = itertools.count()


def _meta(**constraints: Any) -> Any:
    return msgspec.Meta(**constraints)


class _Untranslatable(Exception):
    """Internal: the schema uses something outside the subset."""


class TypedCheck:
    """A compiled fast check for one schema (see the module docstring).

    Args:
        decoder: the msgspec decoder of the translated type.
    """

    __slots__ = ("_decoder",)

    def __init__(self, decoder: msgspec.json.Decoder[Any]) -> None:
        self._decoder = decoder

    def accepts(self, text: bytes | msgspec.Raw) -> bool:
        """True when ``text`` (one JSON text) certainly conforms; False when that is not known.

        The text must be UTF-8 (RFC 8259 8.1): msgspec checks the strings it decodes, not those
        it skips (members no keyword constrains), so the whole text is checked first.
        """
        try:
            codecs.utf_8_decode(memoryview(text), "strict", True)
            self._decoder.decode(text)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            return False
        return True


def compile_typed(schema: JSON) -> TypedCheck | None:
    """The fast check of ``schema``, or ``None`` when it uses something outside the subset."""
    if isinstance(schema, dict) and "$schema" in schema:
        dialect = schema["$schema"]
        if not isinstance(dialect, str) or dialect.rstrip("#") not in _DIALECTS:
            return None
        schema = {k: v for k, v in schema.items() if k != "$schema"}
    try:
        return TypedCheck(msgspec.json.Decoder(_type(schema, 0, [_MAX_NODES])))
    except (_Untranslatable, TypeError, ValueError):
        return None


def _type(node: JSON, depth: int, budget: list[int]) -> Any:
    budget[0] -= 1
    if depth > _MAX_DEPTH or budget[0] < 0:
        raise _Untranslatable
    if node is True:
        return msgspec.Raw
    if not isinstance(node, dict):
        raise _Untranslatable  # false, or not a schema
    keys = set(node) - _ANNOTATIONS
    if not keys:
        return msgspec.Raw
    if "enum" in keys or "const" in keys:
        return _literal(node, keys)
    if "type" not in keys:
        raise _Untranslatable  # keywords that hold only for some kinds of value
    kind, nullable = _kind(node["type"])
    if keys - {"type"} - _KEYWORDS[kind]:
        raise _Untranslatable
    base = _of_kind(kind, node, depth, budget)
    return Optional[base] if nullable and kind != "null" else base  # noqa: UP045 (a runtime type)


def _kind(value: JSON) -> tuple[str, bool]:
    """The one non-null type of a ``type`` keyword, and whether ``null`` is allowed too."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n in _KEYWORDS for n in names):
        raise _Untranslatable
    kinds = set(names)
    nullable = "null" in kinds
    kinds.discard("null")
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    if len(kinds) > 1:
        raise _Untranslatable
    return (kinds.pop() if kinds else "null"), nullable


def _of_kind(kind: str, node: dict[str, JSON], depth: int, budget: list[int]) -> Any:
    if kind == "null":
        return None
    if kind == "boolean":
        return bool
    if kind == "string":
        return Annotated[str, _meta(**_lengths(node, "minLength", "maxLength"))]
    if kind == "integer":
        return Annotated[int, _meta(**_bounds(node, integer=True))]
    if kind == "number":
        ints = Annotated[int, _meta(**_bounds(node, integer=True))]
        return Union[ints, Annotated[float, _meta(**_bounds(node, integer=False))]]  # noqa: UP007
    if kind == "array":
        items = _type(node["items"], depth + 1, budget) if "items" in node else msgspec.Raw
        return Annotated[list[items], _meta(**_lengths(node, "minItems", "maxItems"))]  # type: ignore[valid-type]
    return _struct(node, depth, budget)


def _literal(node: dict[str, JSON], keys: set[str]) -> Any:
    if keys - {"enum", "const", "type"}:
        raise _Untranslatable
    values = node["enum"] if "enum" in keys else [node["const"]]
    if "enum" in keys and "const" in keys:
        raise _Untranslatable
    if not isinstance(values, list) or not values or not all(v is None or isinstance(v, str) for v in values):
        raise _Untranslatable
    if "type" in keys:
        kind, nullable = _kind(node["type"])
        allowed = {"string"} if kind == "string" else set()
        values = [v for v in values if (v is None and (nullable or kind == "null")) or (v is not None and allowed)]
        if not values:
            raise _Untranslatable
    strings = tuple(dict.fromkeys(v for v in values if v is not None))
    if not strings:
        return None
    literal = Literal[strings]  # type: ignore[valid-type]
    return Optional[literal] if None in values else literal  # noqa: UP045


def _lengths(node: dict[str, JSON], low: str, high: str) -> dict[str, int]:
    out = {}
    for keyword, name in ((low, "min_length"), (high, "max_length")):
        if keyword in node:
            value = node[keyword]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise _Untranslatable
            out[name] = value
    return out


def _bounds(node: dict[str, JSON], *, integer: bool) -> dict[str, float | int]:
    """msgspec ``Meta`` bounds of the numeric keywords, exact for the value type at hand."""
    out: dict[str, float | int] = {}
    for keyword, name in (
        ("minimum", "ge"),
        ("maximum", "le"),
        ("exclusiveMinimum", "gt"),
        ("exclusiveMaximum", "lt"),
    ):
        if keyword not in node:
            continue
        bound = node[keyword]
        if not isinstance(bound, int | float) or isinstance(bound, bool) or not math.isfinite(bound):
            raise _Untranslatable
        if abs(bound) >= _EXACT:
            raise _Untranslatable
        if integer:
            # an integer v: v >= b iff v >= ceil(b); v > b iff v >= floor(b) + 1 (and mirrored)
            if name == "ge":
                out["ge"] = _tighter(out.get("ge"), math.ceil(bound), max)
            elif name == "gt":
                out["ge"] = _tighter(out.get("ge"), math.floor(bound) + 1, max)
            elif name == "le":
                out["le"] = _tighter(out.get("le"), math.floor(bound), min)
            else:
                out["le"] = _tighter(out.get("le"), math.ceil(bound) - 1, min)
        else:
            out[name] = float(bound)
    return out


def _tighter(old: float | int | None, new: int, pick: Any) -> int:
    return int(new if old is None else pick(old, new))


def _struct(node: dict[str, JSON], depth: int, budget: list[int]) -> Any:
    properties = node.get("properties", {})
    required = node.get("required", [])
    extra = node.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise _Untranslatable
    if not all(isinstance(name, str) for name in required):
        raise _Untranslatable
    if not (extra is True or extra is False or (isinstance(extra, dict) and not extra)):
        raise _Untranslatable  # by identity: 0 == False, and jsonschema reads 0 as false
    names = list(dict.fromkeys([*properties, *required]))
    fields: list[Any] = []
    rename: dict[str, str] = {}
    for index, name in enumerate(names):
        field = f"f{index}"
        rename[field] = name
        kind = _type(properties[name], depth + 1, budget) if name in properties else msgspec.Raw
        if name in required:
            fields.append((field, kind))
        elif kind is msgspec.Raw:
            fields.append((field, kind, msgspec.UNSET))  # msgspec.Raw may not be in a Union
        else:
            fields.append((field, Union[kind, msgspec.UnsetType], msgspec.UNSET))  # noqa: UP007
    return msgspec.defstruct(
        f"Checked{next(_NAMES)}",
        fields,
        rename=rename,
        kw_only=True,
        forbid_unknown_fields=extra is False,
        gc=False,
    )
