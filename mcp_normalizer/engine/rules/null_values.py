"""Rules for ``null`` where a success result's ``outputSchema`` wants a value (fault kind
``null_for_non_nullable``), repaired only where the repair loses nothing:

- ``null_optional_member``: an optional object member that is ``null`` while its schema rejects
  ``null`` is dropped (``null`` and absence mean the same for an optional member; OpenAPI backends
  and ``Optional`` fields serialize absence as ``null``).
- ``null_array_to_empty``: a required member whose schema is an array and whose value is ``null``
  becomes ``[]`` (a Go nil slice serializes as ``null``; go-sdk#386).

Both record the replaced value in ``_meta`` (``dev.mcp-normalizer/original-values``).
"""

from __future__ import annotations

from collections.abc import Callable

from ...types import JSON, JSONObject
from ...wire.pointer import Path, resolve
from ..schema import SchemaUnusable, Violation
from .base import ResultContext, Rewrite, Rule, delete_at, set_at, with_original_values
from .schemas import schema_at


def _null_members(result: JSONObject, ctx: ResultContext) -> list[tuple[Violation, JSONObject, JSON]]:
    """Type violations on ``null`` object members: (violation, parent object schema, member schema)."""
    tool = ctx.tool
    if tool is None or tool.compiled is None or result.get("isError") is True or "structuredContent" not in result:
        return []
    structured = result["structuredContent"]
    try:
        violations = tool.compiled.violations(structured)
    except SchemaUnusable:
        return []
    found = []
    for violation in violations:
        path, spath = violation.path, violation.schema_path
        if violation.keyword != "type" or not path or not isinstance(path[-1], str) or len(spath) < 3:
            continue
        if spath[-3] != "properties" or spath[-2] != path[-1]:
            continue
        present, value = resolve(structured, path)
        parent = schema_at(tool.output_schema, spath[:-3])
        member = schema_at(tool.output_schema, spath[:-1])
        if present and value is None and isinstance(parent, dict):
            found.append((violation, parent, member))
    return found


def _repair_with(
    rule: str,
    action: str,
    applies: Callable[[str, JSONObject, JSON], bool],
    edit: Callable[[JSON, Path], JSON],
) -> Callable[[JSONObject, ResultContext], tuple[JSONObject, Rewrite] | None]:
    def repair(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
        structured = result.get("structuredContent")
        originals: dict[str, JSON] = {}
        reasons = []
        for violation, parent, member in _null_members(result, ctx):
            name = str(violation.path[-1])
            if not applies(name, parent, member) or violation.pointer in originals:
                continue
            structured = edit(structured, violation.path)
            originals[violation.pointer] = None  # the value that was there (a previous repair's is kept)
            reasons.append(violation.describe())
        if not originals:
            return None
        out = with_original_values({**result, "structuredContent": structured}, originals)
        pointers = tuple("/structuredContent" + p for p in originals)
        return out, Rewrite(rule, action, pointers, "null rejected by outputSchema at " + ", ".join(reasons))

    return repair


def _required(parent: JSONObject) -> list[object]:
    required = parent.get("required")
    return required if isinstance(required, list) else []


def _is_array_schema(member: JSON) -> bool:
    kind = member.get("type") if isinstance(member, dict) else None
    return kind == "array" or kind == ["array"]


NULL_OPTIONAL_MEMBER = Rule(
    name="null_optional_member",
    kind="null_for_non_nullable",
    summary="Drop an optional structuredContent member that is null where its schema rejects null.",
    on_result=_repair_with(
        "null_optional_member",
        "dropped null optional members",
        lambda name, parent, member: name not in _required(parent),
        delete_at,
    ),
    conformance=True,
)

NULL_ARRAY_TO_EMPTY = Rule(
    name="null_array_to_empty",
    kind="null_for_non_nullable",
    summary="Replace null with [] for a required member whose schema is an array (Go nil slices).",
    on_result=_repair_with(
        "null_array_to_empty",
        "replaced null arrays with []",
        lambda name, parent, member: name in _required(parent) and _is_array_schema(member),
        lambda doc, path: set_at(doc, path, []),
    ),
    conformance=True,
)
