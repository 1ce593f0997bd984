"""Lossless value repairs of a success result's ``structuredContent`` (conformance group; the
replaced values are kept in ``_meta["dev.mcp-normalizer/original-values"]``).

- ``prune_additional`` (``additional_properties``): members forbidden by
  ``additionalProperties: false`` are removed (the full payload usually also sits in the text).
- ``coerce_types`` (``type_mismatch``, ``enum_mismatch``): a value of the wrong JSON type becomes the
  declared type when the conversion is exact and reversible: a number or boolean where a string is
  declared becomes its JSON text; a string holding a canonical integer, number or ``true``/``false``
  where that type is declared becomes it; a value outside an ``enum``/``const`` becomes the listed
  value it spells (``true`` vs ``"true"``, ``1`` vs ``"1"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ...errors import DecodeError
from ...types import JSON, JSONObject
from ...wire.jsoncodec import Codec, dumps
from ...wire.pointer import format_pointer, resolve
from ..schema import SchemaUnusable, Violation
from .base import ResultContext, Rewrite, Rule, delete_at, set_at, with_original_values
from .schemas import schema_at

_INTEGER = re.compile(r"-?(?:0|[1-9]\d*)")
_MAX_DIGITS = 1000  # longer numeric strings are left as strings (int() refuses past 4300 digits)
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _violations(result: JSONObject, ctx: ResultContext) -> list[Violation]:
    tool = ctx.tool
    if tool is None or tool.compiled is None or result.get("isError") is True or "structuredContent" not in result:
        return []
    try:
        return tool.compiled.violations(result["structuredContent"])
    except SchemaUnusable:
        return []


def _apply(
    result: JSONObject, edits: dict[tuple[str | int, ...], tuple[JSON, Callable[[JSON], JSON]]]
) -> tuple[JSONObject, tuple[str, ...]] | None:
    """Apply ``edits`` (path -> (original value, edit of the document)) and record the originals.

    Returns the result and the ``/structuredContent/...`` pointers of the edits applied.

    An edit inside a place another edit replaces is skipped (the outer one already changed it), as
    is one whose place an earlier edit removed. ``None`` when no edit applied.
    """
    structured = result["structuredContent"]
    originals: dict[str, JSON] = {}
    for path, (original, edit) in edits.items():
        if any(len(other) < len(path) and path[: len(other)] == other for other in edits):
            continue
        try:
            structured = edit(structured)
        except KeyError:
            continue
        originals[format_pointer(path)] = original
    if not originals:
        return None
    out = with_original_values({**result, "structuredContent": structured}, originals)
    return out, tuple("/structuredContent" + pointer for pointer in originals)


def _prune(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    assert_tool = ctx.tool
    edits: dict[tuple[str | int, ...], tuple[JSON, Callable[[JSON], JSON]]] = {}
    for violation in _violations(result, ctx):
        if violation.keyword != "additionalProperties" or assert_tool is None:
            continue
        node = schema_at(assert_tool.output_schema, violation.schema_path[:-1])
        found, instance = resolve(result["structuredContent"], violation.path)
        if not isinstance(node, dict) or not found or not isinstance(instance, dict):
            continue
        declared = node.get("properties")
        declared = declared if isinstance(declared, dict) else {}
        pattern_node = node.get("patternProperties")
        patterns = [p for p in pattern_node if isinstance(p, str)] if isinstance(pattern_node, dict) else []
        for key in instance:
            if key in declared or any(_matches(p, key) for p in patterns):
                continue
            path = (*violation.path, key)
            edits.setdefault(path, (instance[key], _deleter(path)))
    applied = _apply(result, edits) if edits else None
    if applied is None:
        return None
    what = "removed members forbidden by additionalProperties"
    return applied[0], Rewrite("prune_additional", what, applied[1], "additionalProperties: false")


def _deleter(path: tuple[str | int, ...]) -> Callable[[JSON], JSON]:
    return lambda document: delete_at(document, path)


def _setter(path: tuple[str | int, ...], value: JSON) -> Callable[[JSON], JSON]:
    return lambda document: set_at(document, path, value)


def _matches(pattern: str, key: str) -> bool:
    try:
        return re.search(pattern, key) is not None
    except re.error:
        return False


def _coerced(value: JSON, node: JSONObject, codec: Codec) -> tuple[bool, JSON]:
    """The exact conversion of ``value`` to what ``node`` declares, if there is one (numbers as
    written: ``12.50`` becomes ``"12.50"`` and back)."""
    choices = node.get("enum") if isinstance(node.get("enum"), list) else ([node["const"]] if "const" in node else None)
    if choices is not None:
        spelled = value if isinstance(value, str) else codec.dumps(value).decode()
        for choice in choices:
            if choice != value and (choice if isinstance(choice, str) else dumps(choice).decode()) == spelled:
                return True, choice
        return False, None
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "string" in kinds and isinstance(value, bool | int | float) and value is not None:
        return True, codec.dumps(value).decode()
    if isinstance(value, str) and len(value) <= _MAX_DIGITS:
        if "integer" in kinds and _INTEGER.fullmatch(value):
            return True, codec.loads(value)  # an int of any size, exact
        if "number" in kinds and _NUMBER.fullmatch(value):
            try:
                return True, codec.loads(value)  # written back as the string spelled it
            except DecodeError:
                return False, None
        if "boolean" in kinds and value in ("true", "false"):
            return True, value == "true"
    return False, None


def _coerce(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    tool = ctx.tool
    edits: dict[tuple[str | int, ...], tuple[JSON, Callable[[JSON], JSON]]] = {}
    reasons = []
    for violation in _violations(result, ctx):
        if violation.keyword not in ("type", "enum", "const") or tool is None or violation.path in edits:
            continue
        node = schema_at(tool.output_schema, violation.schema_path[:-1])
        found, value = resolve(result["structuredContent"], violation.path)
        if not isinstance(node, dict) or not found or value is None:
            continue
        ok, new = _coerced(value, node, ctx.codec)
        if ok:
            edits[violation.path] = (value, _setter(violation.path, new))
            reasons.append(violation.describe())
    applied = _apply(result, edits) if edits else None
    if applied is None:
        return None
    return applied[0], Rewrite(
        "coerce_types", "converted values to the declared type", applied[1], "exact conversion at " + ", ".join(reasons)
    )


PRUNE_ADDITIONAL = Rule(
    "prune_additional",
    "additional_properties",
    "Remove structuredContent members forbidden by additionalProperties: false (kept in _meta).",
    on_result=_prune,
    conformance=True,
)
COERCE_TYPES = Rule(
    "coerce_types",
    "type_mismatch",
    'Exact type conversions (3 <-> "3", true <-> "true") where the schema declares the other type or enum.',
    on_result=_coerce,
    conformance=True,
)
